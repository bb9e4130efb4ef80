//! The stream-guard check shared by the `guard` fuzz target and
//! `tests/properties.rs` (included there with `#[path]`).
//!
//! [`check`] runs an inner service's listen stream, in any chunks, through
//! the guard of a filter honoured for one of a family of setups, and panics
//! when what leaves the guard breaks the honoured filter, as an independent
//! model written here reads it: its own line-by-line SSE reading,
//! `serde_json` for the messages, and the sub-resource rule written out
//! again. The honoured filter itself (its ack) is taken as given: the
//! `filter` oracle checks it.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::future::{ready, Future};
use std::task::{Context, Poll, Waker};

use mcp_edge::{honour, HonouredFilter, Principal, ServerProfile};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

/// The tag of every listen message.
pub const TAG: &str = "io.modelcontextprotocol/subscriptionId";

/// The URIs a setup asks for.
pub const URIS: &[&str] = &["pub/a", "pub/b/", "pub/c%2e", "x/d", "secret/e"];
/// The task ids a setup asks for.
pub const TASKS: &[&str] = &["t1", "t\"2", "t3"];

/// A filter honoured for setup `config`: bit 0 the caller (alice or
/// anonymous), bit 1 prompts list changes asked for, bit 2 the subscription
/// id a string or a number.
pub fn setup(config: u8) -> HonouredFilter {
    let profile = ServerProfile::builder()
        .base_capabilities(serde_json::json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
        }))
        .resource_access(|_: Option<&Principal>, uris: &[&str]| {
            ready(uris.iter().map(|uri| !uri.starts_with("secret")).collect())
        })
        .subscription_hook(|uris: &[&str]| ready(vec![true; uris.len()]))
        .tasks(true)
        .task_directory(|caller: &Principal, ids: &[&str]| {
            let alice = caller.as_str() == "alice";
            ready(ids.iter().map(|id| alice && *id != "t3").collect())
        })
        .build()
        .expect("a valid profile");
    let (mut parts, ()) = http::Request::new(()).into_parts();
    if config & 1 == 0 {
        parts.extensions.insert(Principal::new("alice"));
    }
    let uris = serde_json::to_string(URIS).unwrap();
    let tasks = serde_json::to_string(TASKS).unwrap();
    let prompts = if config & 2 != 0 {
        r#""promptsListChanged":true,"#
    } else {
        ""
    };
    let params = format!(
        r#"{{"notifications":{{"toolsListChanged":true,{prompts}"resourcesListChanged":true,"resourceSubscriptions":{uris},"taskIds":{tasks}}},"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{"extensions":{{"io.modelcontextprotocol/tasks":{{}}}}}}}}}}"#
    );
    let id = if config & 4 != 0 { r#""s-1""# } else { "7" };
    let id: Box<RawValue> = serde_json::from_str(id).unwrap();
    let params: Box<RawValue> = serde_json::from_str(&params).unwrap();
    let mut future = std::pin::pin!(honour(&profile, &parts, &id, Some(&params)));
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(honoured) => honoured.expect("the setup's listen is honoured"),
        Poll::Pending => unreachable!("the hooks are ready"),
    }
}

/// What the honoured filter says, read from its ack and subscription id.
struct Model {
    id: Value,
    ack: serde_json::Map<String, Value>,
}

impl Model {
    fn new(filter: &HonouredFilter) -> Self {
        let ack: Value = serde_json::from_str(filter.ack().get()).unwrap();
        Self {
            id: serde_json::from_str(filter.subscription_id().get()).unwrap(),
            ack: ack.as_object().cloned().unwrap(),
        }
    }

    fn flag(&self, key: &str) -> bool {
        self.ack.get(key) == Some(&Value::Bool(true))
    }

    fn list(&self, key: &str) -> Vec<String> {
        self.ack
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The same id, as JSON-RPC compares ids: strings by text, numbers by value.
    fn is_ours(&self, id: &Value) -> bool {
        match (id, &self.id) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            (a, b) => a == b,
        }
    }
}

/// A `.` or `..` path segment, each dot raw or `%2e`, ended by `/`, `?`,
/// `#` or the end.
fn has_dot_segment(uri: &str) -> bool {
    uri.split('/').any(|segment| {
        let segment = segment.split(['?', '#']).next().unwrap_or_default();
        let decoded = segment.replace("%2e", ".").replace("%2E", ".");
        decoded == "." || decoded == ".."
    })
}

/// The sub-resource rule, written out again.
fn covered(honoured: &[String], uri: &str) -> bool {
    honoured.iter().any(|h| {
        uri == h
            || (uri.starts_with(h.as_str())
                && (h.ends_with('/') || uri.as_bytes()[h.len()] == b'/')
                && !has_dot_segment(uri))
    })
}

/// An object's members in order, duplicates kept; `None` when `text` is
/// not an object.
fn members(text: &str) -> Option<Vec<(String, Box<RawValue>)>> {
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = Vec<(String, Box<RawValue>)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(pair) = map.next_entry()? {
                out.push(pair);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let pairs = (&mut de).deserialize_map(Pairs).ok()?;
    de.end().ok()?;
    Some(pairs)
}

/// An object's members by key, as their JSON text.
type Object = std::collections::BTreeMap<String, Box<RawValue>>;

/// The members of the object `text`, each key once (panics otherwise).
fn unique_members(text: &str, what: &str) -> Object {
    let pairs = members(text).unwrap_or_else(|| panic!("{what} is not an object: {text}"));
    let mut map = Object::new();
    for (key, value) in pairs {
        assert!(!map.contains_key(&key), "{what} has `{key}` twice: {text}");
        map.insert(key, value);
    }
    map
}

/// The member `key` of `object`, parsed.
fn value(object: &Object, key: &str) -> Option<Value> {
    object
        .get(key)
        .map(|raw| serde_json::from_str(raw.get()).unwrap())
}

/// The blocks of an SSE stream, read line by line: each block's `data`
/// (joined lines), or `None` for a comment-only block.
fn blocks(stream: &str) -> Vec<Option<String>> {
    assert!(
        !stream.starts_with('\u{feff}'),
        "a byte order mark left the guard"
    );
    let normalized = stream.replace("\r\n", "\n");
    assert!(
        !normalized.contains('\r'),
        "a CR-only line end left the guard: {stream:?}"
    );
    let mut out = Vec::new();
    let mut data: Option<String> = None;
    let mut lines = 0;
    let mut rest = normalized.as_str();
    while let Some(end) = rest.find('\n') {
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if line.is_empty() {
            if lines > 0 {
                out.push(data.take());
            }
            lines = 0;
            continue;
        }
        lines += 1;
        if line.starts_with(':') {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("a field line without a colon left the guard: {line:?}"));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match name {
            "data" => {
                let joined = data.take().map_or(String::new(), |d| d + "\n");
                data = Some(joined + value);
            }
            "id" | "event" | "retry" => {}
            other => panic!("an unknown field `{other}` left the guard"),
        }
    }
    assert!(
        rest.is_empty(),
        "an unterminated block left the guard: {rest:?}"
    );
    out
}

/// Checks every message that leaves the guard of `filter` for `stream`, in
/// the chunks `cuts` make; and that the chunks change nothing.
pub fn check(filter: &HonouredFilter, stream: &[u8], cuts: &[usize]) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut at = 0;
    for cut in cuts {
        chunks.push(&stream[at..cut]);
        at = cut;
    }
    chunks.push(&stream[at..]);
    let out = mcp_edge::listen_filter::fuzz_guard(filter, &chunks);
    assert_eq!(
        out,
        mcp_edge::listen_filter::fuzz_guard(filter, &[stream]),
        "the chunks changed what left the guard"
    );
    let out = String::from_utf8(out).expect("what leaves the guard is UTF-8");
    let model = Model::new(filter);
    let (mut acked, mut acks) = (false, 0);
    for data in blocks(&out).into_iter().flatten() {
        let message = unique_members(&data, "a message");
        let keys: BTreeSet<&str> = message.keys().map(String::as_str).collect();
        let Some(method) = value(&message, "method") else {
            // The listen's own answer, rebuilt.
            let id = value(&message, "id").expect("an answer has an id");
            assert!(model.is_ours(&id), "an answer to another request: {data}");
            assert!(
                keys == BTreeSet::from(["jsonrpc", "id", "result"])
                    || keys == BTreeSet::from(["jsonrpc", "id", "error"]),
                "an answer with other members: {data}"
            );
            if let Some(result) = message.get("result") {
                let result = unique_members(result.get(), "a result");
                assert!(
                    result.keys().all(|k| k == "_meta" || k == "resultType"),
                    "a result with other members: {data}"
                );
            }
            continue;
        };
        assert!(
            !keys.contains("id") && !keys.contains("result") && !keys.contains("error"),
            "a request or a response left the guard as a notification: {data}"
        );
        let method = method.as_str().expect("a string method").to_owned();
        let params = message
            .get("params")
            .map(|p| unique_members(p.get(), "params"));
        if let Some(meta) = params.as_ref().and_then(|p| p.get("_meta")) {
            let meta = unique_members(meta.get(), "_meta");
            if let Some(tag) = value(&meta, TAG) {
                assert!(
                    model.is_ours(&tag),
                    "another subscription's message: {data}"
                );
            }
        }
        let param = |name: &str| {
            params
                .as_ref()
                .and_then(|p| value(p, name))
                .and_then(|v| v.as_str().map(str::to_owned))
        };
        match method.as_str() {
            "notifications/subscriptions/acknowledged" => {
                acks += 1;
                assert_eq!(acks, 1, "a second acknowledgment: {out}");
                let params = params.as_ref().expect("an ack has params");
                let keys: BTreeSet<&str> = params.keys().map(String::as_str).collect();
                assert_eq!(keys, BTreeSet::from(["notifications", "_meta"]), "{data}");
                let notifications = unique_members(params["notifications"].get(), "an ack");
                for (key, raw) in &notifications {
                    match serde_json::from_str::<Value>(raw.get()).unwrap() {
                        Value::Bool(true) => assert!(model.flag(key), "{key} acknowledged: {data}"),
                        Value::Array(items) => {
                            let honoured = model.list(key);
                            for item in items {
                                let item = item.as_str().expect("a string");
                                assert!(honoured.iter().any(|h| h == item), "{item} acknowledged");
                            }
                        }
                        other => panic!("an ack value {other}"),
                    }
                }
                acked = true;
            }
            other => {
                assert!(acked, "a notification before the acknowledgment: {out}");
                let honoured = match other {
                    "notifications/tools/list_changed" => model.flag("toolsListChanged"),
                    "notifications/prompts/list_changed" => model.flag("promptsListChanged"),
                    "notifications/resources/list_changed" => model.flag("resourcesListChanged"),
                    "notifications/resources/updated" => param("uri")
                        .is_some_and(|uri| covered(&model.list("resourceSubscriptions"), &uri)),
                    "notifications/tasks" => {
                        param("taskId").is_some_and(|id| model.list("taskIds").contains(&id))
                    }
                    _ => false,
                };
                assert!(honoured, "a message outside the honoured filter: {data}");
            }
        }
    }
}
