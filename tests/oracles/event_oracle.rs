//! The oracle of the listen hub's event writer: every event is one SSE
//! `data` line holding one JSON object with unique keys at every level,
//! whose members the hub owns carry the hub's values and whose other
//! members are the publisher's. Shared by the fuzz target `hub_event` and
//! `tests/properties.rs`.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// A JSON value read by a reader that rejects an object with a key twice.
struct Strict(Value);

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some((key, Strict(value))) = map.next_entry::<String, Strict>()? {
            if object.insert(key.clone(), value).is_some() {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
        }
        Ok(Value::Object(object))
    }
}

/// `text` read as JSON whose objects have unique keys.
pub fn strict(text: &str) -> Result<Value, String> {
    serde_json::from_str::<Strict>(text)
        .map(|Strict(value)| value)
        .map_err(|error| error.to_string())
}

/// Checks the event the hub wrote for task `task_id`'s status `params` on
/// the stream of subscription `subscription_id` (JSON text).
pub fn check_task_event(
    event: &[u8],
    task_id: &str,
    params: &Map<String, Value>,
    subscription_id: &str,
) {
    let text = std::str::from_utf8(event).expect("an event is UTF-8");
    let data = text
        .strip_prefix("data: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not one data line: {text:?}"));
    assert!(!data.contains(['\n', '\r']), "one line: {text:?}");
    let message = strict(data).unwrap_or_else(|error| panic!("{error}: {data}"));
    let id: Value = serde_json::from_str(subscription_id).expect("a subscription id is JSON");
    assert_eq!(message["jsonrpc"], "2.0");
    assert_eq!(message["method"], "notifications/tasks");
    assert_eq!(message.as_object().map(Map::len), Some(3), "{data}");
    let written = message["params"].as_object().expect("params is an object");
    assert_eq!(written["taskId"], task_id);
    let meta = written["_meta"].as_object().expect("_meta is an object");
    assert_eq!(meta[SUBSCRIPTION_ID], id);
    // The publisher's other members, as published: read back as the event
    // is (serde_json's float reading need not give the same last digit).
    let as_read = |value: &Value| strict(&value.to_string()).expect("a value reads back");
    for (key, value) in params {
        match key.as_str() {
            "taskId" => {}
            "_meta" => {
                let published = value.as_object().into_iter().flatten();
                for (key, value) in published.filter(|(key, _)| *key != SUBSCRIPTION_ID) {
                    assert_eq!(meta.get(key), Some(&as_read(value)), "_meta.{key}");
                }
            }
            _ => assert_eq!(written.get(key), Some(&as_read(value)), "params.{key}"),
        }
    }
    let published_meta = params.get("_meta").and_then(Value::as_object);
    let expected_meta = 1 + published_meta.map_or(0, |meta| {
        meta.keys().filter(|k| *k != SUBSCRIPTION_ID).count()
    });
    assert_eq!(
        meta.len(),
        expected_meta,
        "_meta holds only the hub's and the publisher's"
    );
    let expected = 2 + params
        .keys()
        .filter(|key| !matches!(key.as_str(), "taskId" | "_meta"))
        .count();
    assert_eq!(
        written.len(),
        expected,
        "params holds only the hub's and the publisher's"
    );
}
