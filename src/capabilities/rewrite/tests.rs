use super::*;
use crate::advertise::obj;
use serde_json::{json, Map, Value};

/// `merge` of `theirs`, parsed back: `None` when the profile's stand alone.
fn merged(theirs: &str, profile: &Value) -> Option<Value> {
    merge(theirs, &Advertised::new(obj(profile.clone())))
        .map(|out| serde_json::from_str(&out).unwrap())
}

#[test]
fn merge_keeps_unmanaged_and_replaces_managed() {
    let profile = json!({"tools": {"listChanged": true}, "logging": {}});
    let theirs = r#"{"tools": {"listChanged": false}, "prompts": {}, "experimental": {"x": 1},
            "extensions": {"io.modelcontextprotocol/tasks": {}, "com.example/y": {}}}"#;
    assert_eq!(
        merged(theirs, &profile),
        Some(
            json!({"tools": {"listChanged": true}, "logging": {}, "experimental": {"x": 1},
               "extensions": {"com.example/y": {}}})
        )
    );
}

#[test]
fn merge_keeps_the_bytes_and_places_of_foreign_keys() {
    let profile = obj(json!({"tools": {"listChanged": true}, "logging": {}}));
    let theirs = r#"{ "experimental" : { "x" : 1.50 }, "tools": {}, "logging": 3 }"#;
    assert_eq!(
        merge(theirs, &Advertised::new(profile)).unwrap(),
        r#"{"experimental":{ "x" : 1.50 },"tools":{"listChanged":true},"logging":{}}"#
    );
}

#[test]
fn merge_merges_profile_extensions() {
    let profile = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    assert_eq!(
        merged(r#"{"extensions": {"com.example/y": {"v": 2}}}"#, &profile),
        Some(
            json!({"extensions": {"com.example/y": {"v": 2}, "io.modelcontextprotocol/tasks": {}}})
        )
    );
    // Only the tasks extension of theirs: the profile's stand alone.
    assert_eq!(
        merged(
            r#"{"extensions": {"io.modelcontextprotocol/tasks": {"x": 1}}}"#,
            &profile
        ),
        None
    );
}

#[test]
fn merge_reads_duplicates_as_last_wins() {
    let profile = json!({"tools": {}});
    let theirs = r#"{"experimental":{"a":1},"tools":{"x":1},"experimental":{"b":2}}"#;
    let out = merge(theirs, &Advertised::new(obj(profile))).unwrap();
    assert_eq!(out, r#"{"experimental":{"b":2},"tools":{}}"#);
}

#[test]
fn merge_is_none_when_everything_is_managed() {
    let profile = json!({"tools": {}});
    assert_eq!(merged(r#"{"tools": {}, "prompts": {}}"#, &profile), None);
    assert_eq!(
        merged(
            r#"{"extensions": {"io.modelcontextprotocol/tasks": {}}}"#,
            &profile
        ),
        None
    );
    assert_eq!(merged(r#"{"extensions": {}}"#, &profile), None);
    assert_eq!(merged("[1]", &profile), None);
    assert_eq!(merged("null", &profile), None);
    assert_eq!(
        merged(r#"{"experimental": {}}"#, &profile),
        Some(json!({"experimental": {}, "tools": {}}))
    );
    assert_eq!(
        merged(r#"{"extensions": {"x/y": {}}}"#, &profile),
        Some(json!({"extensions": {"x/y": {}}, "tools": {}}))
    );
    // Extensions that are not an object: the profile's replace them, or they are kept.
    assert_eq!(
        merged(r#"{"extensions": 1}"#, &json!({"extensions": {}})),
        None
    );
    assert_eq!(
        merged(r#"{"extensions": 1}"#, &profile),
        Some(json!({"extensions": 1, "tools": {}}))
    );
}

fn rewrite(body: &str, private: bool) -> Result<Value, Skip> {
    let caps = Advertised::new(obj(json!({"tools": {"listChanged": true}})));
    rewrite_response(body, "1", &caps, private).map(|out| serde_json::from_str(&out).unwrap())
}

#[test]
fn rewrite_replaces_capabilities_and_keeps_the_rest() {
    let out = rewrite(
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"x","capabilities":{"prompts":{},"experimental":{"a":1}},"serverInfo":{"name":"s"}}}"#,
        false,
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"x",
            "capabilities":{"tools":{"listChanged":true},"experimental":{"a":1}},"serverInfo":{"name":"s"}}})
    );
}

#[test]
fn rewrite_adds_missing_capabilities_and_private_scope() {
    let out = rewrite(
        r#"{"jsonrpc":"2.0","id":1.0,"result":{"cacheScope":"shared"}}"#,
        true,
    )
    .unwrap();
    assert_eq!(
        out["result"],
        json!({"cacheScope":"private","capabilities":{"tools":{"listChanged":true}}})
    );
    let out = rewrite(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true).unwrap();
    assert_eq!(
        out["result"],
        json!({"capabilities":{"tools":{"listChanged":true}},"cacheScope":"private"})
    );
}

#[test]
fn rewrite_writes_escaped_keys_back_escaped() {
    let body = r#"{"jsonrpc":"2.0","id":1,"result":{"a\"b\u0001":1,"capabilities":{}}}"#;
    let out = rewrite(body, false).unwrap();
    assert_eq!(
        out["result"],
        json!({"a\"b\u{1}": 1, "capabilities": {"tools": {"listChanged": true}}})
    );
}

#[test]
fn every_result_is_rewritten() {
    // A parser that keeps the first `result` and one that keeps the last
    // both read the profile's capabilities.
    let body = r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"prompts":{}},"a":1},"result":{"b":2}}"#;
    let out =
        rewrite_response(body, "1", &Advertised::new(obj(json!({"tools": {}}))), true).unwrap();
    assert_eq!(
        out,
        r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{}},"a":1,"cacheScope":"private"},"result":{"b":2,"capabilities":{"tools":{}},"cacheScope":"private"}}"#
    );
    let empty = r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#;
    let out = rewrite(empty, false).unwrap();
    assert_eq!(
        out["result"],
        json!({"capabilities": {"tools": {"listChanged": true}}})
    );
}

#[test]
fn rewrite_skips_what_it_must_not_touch() {
    assert_eq!(
        rewrite(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#, false),
        Err(Skip::Foreign)
    );
    assert_eq!(
        rewrite(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
            false
        ),
        Err(Skip::Other)
    );
    assert_eq!(
        rewrite(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#, false),
        Err(Skip::Error)
    );
    for broken in [
        "not json",
        r#"{"id":1,"result":{}} {"id":1,"result":{}}"#,
        r#"{"id":1,"result":[]}"#,
        r#"{"id":1,"id":1,"result":{}}"#,
        r#"{"id":1,"result":{},"result":[]}"#,
        r#"{"id":1,"result":{},"error":{"code":1}}"#,
        r#"{"id":1,"method":"x","result":{},"method":"y"}"#,
        r#"{"id":1,"result":{"capabilities":[]}}"#,
        r#"{"id":1,"result":{"capabilities":{},"capabilities":"x"}}"#,
        r#"{"result":{}}"#,
        r#"{"id":1}"#,
    ] {
        assert!(
            matches!(rewrite(broken, false), Err(Skip::Broken(_))),
            "{broken}"
        );
    }
}

/// The capabilities rewrite as a `Value` model: theirs parsed into a map
/// (the last of duplicate keys wins), managed keys removed, the
/// profile's inserted.
fn model_merge(theirs: &str, profile: &Map<String, Value>) -> Value {
    let Ok(Value::Object(mut merged)) = serde_json::from_str::<Value>(theirs) else {
        return Value::Object(profile.clone());
    };
    for key in MANAGED {
        merged.remove(key);
    }
    if let Some(Value::Object(ext)) = merged.get_mut("extensions") {
        ext.remove(TASKS_EXTENSION);
        if ext.is_empty() {
            merged.remove("extensions");
        }
    }
    for (key, value) in profile {
        match (value, merged.get_mut(key)) {
            (Value::Object(ours), Some(Value::Object(entries))) if key == "extensions" => {
                entries.extend(ours.clone());
            }
            _ => {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(merged)
}

const KEYS: [&str; 6] = [
    "tools",
    "prompts",
    "experimental",
    "extensions",
    "logging",
    "x\\u0079",
];
const VALUES: [&str; 8] = [
    "{}",
    r#"{ "a" : [1, 2.50] }"#,
    "1",
    "null",
    r#"{"io.modelcontextprotocol/tasks":{}}"#,
    r#"{"x/y":{"v":1},"io.modelcontextprotocol/tasks":{}}"#,
    r#"{"z/w":{},"z/w":{"again":true}}"#,
    r#"{"x/y":{}}"#,
];

fn profiles() -> [Map<String, Value>; 3] {
    [
        obj(json!({"tools": {"listChanged": true}, "logging": {}})),
        obj(json!({"tools": {}, "experimental": {"ours": 1},
            "extensions": {"io.modelcontextprotocol/tasks": {}, "x/y": {"ours": 2}}})),
        Map::new(),
    ]
}

proptest::proptest! {
    /// Generated capabilities (duplicates, escaped keys, non-object
    /// values and extensions) merge to what the `Value` model gives.
    #[test]
    fn merge_agrees_with_the_value_model(
        members in proptest::collection::vec((0..KEYS.len(), 0..VALUES.len()), 0..7),
        profile in 0usize..3,
        id in proptest::sample::select(vec!["1", "1.0", "2", "\"1\""]),
        error in proptest::bool::ANY,
        earlier in proptest::option::of(0..VALUES.len()),
        scopes in 0usize..3,
        private in proptest::bool::ANY,
    ) {
        let profile = &profiles()[profile];
        let theirs = members
            .iter()
            .map(|&(k, v)| format!("\"{}\": {}", KEYS[k], VALUES[v]))
            .collect::<Vec<_>>()
            .join(" , ");
        let theirs = format!("{{ {theirs} }}");
        let model = model_merge(&theirs, profile);
        let ours = Advertised::new(profile.clone());
        let out = merge(&theirs, &ours)
            .map_or_else(|| Value::Object(profile.clone()), |out| serde_json::from_str(&out).unwrap());
        proptest::prop_assert_eq!(&out, &model, "{}", theirs);

        // The same inside a response, which is read in one pass: an
        // earlier `capabilities` and any `cacheScope` are replaced too.
        let error = if error { r#","error":{"code":1}"# } else { "" };
        let shapeless = earlier.is_some_and(|v| !VALUES[v].trim_start().starts_with('{'));
        let earlier = earlier.map_or(String::new(), |v| format!(r#""capabilities":{},"#, VALUES[v]));
        let scope = r#","cacheScope":"shared" "#.repeat(scopes);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id}{error},"result":{{{earlier}"capabilities":{theirs},"n":1{scope}}}}}"#
        );
        let rewritten = rewrite_response(&body, "1", &ours, private);
        let expected = if id != "1" && id != "1.0" {
            Err(Skip::Foreign)
        } else if !error.is_empty() {
            Err(Skip::Broken("the response has both a result and an error"))
        } else if shapeless {
            Err(Skip::Broken("a result or its capabilities is not an object"))
        } else {
            let mut result = json!({"capabilities": model, "n": 1});
            if scopes > 0 || private {
                result["cacheScope"] = json!(if private { "private" } else { "shared" });
            }
            Ok(json!({"jsonrpc": "2.0", "id": serde_json::from_str::<Value>(id).unwrap(),
                "result": result}))
        };
        proptest::prop_assert_eq!(
            rewritten.clone().map(|out| serde_json::from_str::<Value>(&out).unwrap()),
            expected,
            "{}",
            body
        );
        // A parser that keeps the first of duplicate keys reads the same.
        if let Ok(out) = rewritten {
            let first = |key: &str| {
                let result = json::unique(&json::members(&out).unwrap(), "result").one().unwrap();
                json::members(result).unwrap().into_iter().find(|(k, _)| k == key).map(|(_, v)| v.to_owned())
            };
            let caps: Value = serde_json::from_str(&first("capabilities").unwrap()).unwrap();
            proptest::prop_assert_eq!(&caps, &model);
            if private {
                let scope = first("cacheScope");
                proptest::prop_assert_eq!(scope.as_deref(), Some("\"private\""));
            }
        }
    }
}
