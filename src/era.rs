//! Capabilities by era: computed once from the profile, spliced into every
//! `initialize` and `server/discover` result.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::json;

/// The protocol era a capabilities object is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// Revisions up to 2025-11-25: capabilities come from the `initialize` handshake.
    Legacy,
    /// Revision 2026-07-28: capabilities come from `server/discover`.
    Modern,
}

/// The key of the tasks extension.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Top-level capability keys that are always the profile's, whatever the
/// inner service says.
const MANAGED: [&str; 5] = ["tools", "resources", "prompts", "completions", "logging"];

/// The features of a profile that shape its capabilities.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Features {
    pub(crate) subscription_hook: bool,
    pub(crate) completions: bool,
    pub(crate) legacy_logging: bool,
    pub(crate) tasks: bool,
}

/// The default base set: tools, resources and prompts without list changes.
pub(crate) fn default_base() -> Map<String, Value> {
    ["tools", "resources", "prompts"]
        .into_iter()
        .map(|key| (key.to_owned(), serde_json::json!({"listChanged": false})))
        .collect()
}

/// The capabilities for `era`, by the rules in the design.
pub(crate) fn compute(
    base: &Map<String, Value>,
    features: Features,
    era: Era,
) -> Map<String, Value> {
    let mut caps = base.clone();
    if features.completions {
        caps.insert("completions".into(), Value::Object(Map::new()));
    }
    match era {
        Era::Legacy => {
            if features.subscription_hook {
                if let Some(Value::Object(resources)) = caps.get_mut("resources") {
                    resources.insert("subscribe".into(), Value::Bool(true));
                }
            }
            if features.legacy_logging {
                caps.insert("logging".into(), Value::Object(Map::new()));
            }
        }
        Era::Modern => {
            for key in ["tools", "prompts", "resources"] {
                if let Some(Value::Object(entry)) = caps.get_mut(key) {
                    entry.insert("listChanged".into(), Value::Bool(true));
                    if key == "resources" {
                        entry.insert("subscribe".into(), Value::Bool(true));
                    }
                }
            }
            caps.insert("logging".into(), Value::Object(Map::new()));
            if features.tasks {
                let extensions = caps
                    .entry("extensions")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(extensions) = extensions {
                    extensions.insert(TASKS_EXTENSION.into(), Value::Object(Map::new()));
                }
            }
        }
    }
    caps
}

/// True when the inner service's capabilities hold nothing the profile does
/// not replace, so the profile's serialized capabilities can stand alone.
pub(crate) fn all_managed(inner: &Map<String, Value>, profile: &Map<String, Value>) -> bool {
    inner.iter().all(|(key, value)| match key.as_str() {
        "extensions" => value
            .as_object()
            .is_some_and(|ext| ext.keys().all(|k| is_managed_extension(k, profile))),
        key => MANAGED.contains(&key) || profile.contains_key(key),
    })
}

fn is_managed_extension(key: &str, profile: &Map<String, Value>) -> bool {
    key == TASKS_EXTENSION
        || profile
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|ext| ext.contains_key(key))
}

/// Replaces the managed keys of `inner` with the profile's, keeping keys the
/// profile does not manage (`experimental`, foreign `extensions` entries).
pub(crate) fn splice(inner: &mut Map<String, Value>, profile: &Map<String, Value>) {
    for key in MANAGED {
        inner.remove(key);
    }
    if let Some(Value::Object(ext)) = inner.get_mut("extensions") {
        ext.remove(TASKS_EXTENSION);
        if ext.is_empty() {
            inner.remove("extensions");
        }
    }
    for (key, value) in profile {
        match (key.as_str(), value, inner.get_mut(key)) {
            ("extensions", Value::Object(theirs), Some(Value::Object(ours))) => {
                for (name, entry) in theirs {
                    ours.insert(name.clone(), entry.clone());
                }
            }
            _ => {
                inner.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Keeps only what `original` has: `narrowed` may remove keys and turn
/// `true` into `false`, never add.
pub(crate) fn restrict(narrowed: &mut Map<String, Value>, original: &Map<String, Value>) {
    narrowed.retain(|key, value| match original.get(key) {
        None => false,
        Some(Value::Object(orig)) => match value {
            Value::Object(inner) => {
                restrict(inner, orig);
                true
            }
            _ => false,
        },
        Some(orig) => {
            if value != orig && *value != Value::Bool(false) {
                *value = orig.clone();
            }
            true
        }
    });
}

/// Why a response was passed through without a rewrite.
pub(crate) type Skip = &'static str;

/// Rewrites a JSON-RPC response to request `id`: the managed keys of
/// `result.capabilities` become `caps` (serialized as `caps_json`), and
/// `result.cacheScope` becomes `"private"` when `private`. Every other
/// member keeps its bytes.
pub(crate) fn rewrite_response(
    body: &[u8],
    id: &RawValue,
    caps: &Map<String, Value>,
    caps_json: &[u8],
    private: bool,
) -> Result<Vec<u8>, Skip> {
    let text = std::str::from_utf8(body).map_err(|_| "the body is not UTF-8")?;
    let members = json::members(text.trim_end()).ok_or("the body is not a JSON object")?;
    let their_id = json::unique(&members, "id")
        .ok()
        .flatten()
        .ok_or("the response has no single id")?;
    if !json::same_id(their_id, id) {
        return Err("the response is for another request id");
    }
    if json::unique(&members, "error").map_or(true, |e| e.is_some()) {
        return Err("the response is an error");
    }
    let result = json::unique(&members, "result")
        .ok()
        .flatten()
        .ok_or("the response has no single result")?;
    // `result` is valid JSON already: its members are read without a second check.
    let result_members = json::read_members(result.get()).ok_or("the result is not an object")?;

    let mut out = Vec::with_capacity(result.get().len() + caps_json.len());
    let mut wrote_caps = false;
    let mut wrote_scope = false;
    out.push(b'{');
    for (key, value, _) in &result_members {
        let replacement: Vec<u8>;
        let value: &[u8] = match key.as_ref() {
            "capabilities" if !wrote_caps => {
                wrote_caps = true;
                match serde_json::from_str::<Map<String, Value>>(value) {
                    Ok(theirs) if !all_managed(&theirs, caps) => {
                        let mut merged = theirs;
                        splice(&mut merged, caps);
                        replacement = serde_json::to_vec(&merged).expect("a JSON map serializes");
                        &replacement
                    }
                    _ => caps_json,
                }
            }
            "capabilities" => continue,
            "cacheScope" if private => {
                wrote_scope = true;
                b"\"private\""
            }
            _ => value.as_bytes(),
        };
        push_member(&mut out, key, value);
    }
    if !wrote_caps {
        push_member(&mut out, "capabilities", caps_json);
    }
    if private && !wrote_scope {
        push_member(&mut out, "cacheScope", b"\"private\"");
    }
    out.push(b'}');
    Ok(json::splice(text, result, &out))
}

fn push_member(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    if out.len() > 1 {
        out.push(b',');
    }
    serde_json::to_writer(&mut *out, key).expect("a key serializes");
    out.push(b':');
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test input is an object"),
        }
    }

    #[test]
    fn splice_keeps_unmanaged_and_replaces_managed() {
        let profile = obj(json!({"tools": {"listChanged": true}, "logging": {}}));
        let mut inner = obj(json!({
            "tools": {"listChanged": false}, "prompts": {}, "experimental": {"x": 1},
            "extensions": {"io.modelcontextprotocol/tasks": {}, "com.example/y": {}}
        }));
        splice(&mut inner, &profile);
        assert_eq!(
            Value::Object(inner),
            json!({"tools": {"listChanged": true}, "logging": {}, "experimental": {"x": 1},
                   "extensions": {"com.example/y": {}}})
        );
    }

    #[test]
    fn splice_merges_profile_extensions() {
        let profile = obj(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
        let mut inner = obj(json!({"extensions": {"com.example/y": {"v": 2}}}));
        splice(&mut inner, &profile);
        assert_eq!(
            Value::Object(inner),
            json!({"extensions": {"com.example/y": {"v": 2}, "io.modelcontextprotocol/tasks": {}}})
        );
    }

    #[test]
    fn all_managed_sees_foreign_keys() {
        let profile = obj(json!({"tools": {}}));
        assert!(all_managed(
            &obj(json!({"tools": {}, "prompts": {}})),
            &profile
        ));
        assert!(!all_managed(&obj(json!({"experimental": {}})), &profile));
        assert!(all_managed(
            &obj(json!({"extensions": {TASKS_EXTENSION: {}}})),
            &profile
        ));
        assert!(!all_managed(
            &obj(json!({"extensions": {"x/y": {}}})),
            &profile
        ));
    }

    fn rewrite(body: &str, private: bool) -> Result<Value, Skip> {
        let caps = obj(json!({"tools": {"listChanged": true}}));
        let caps_json = serde_json::to_vec(&caps).unwrap();
        let id: Box<RawValue> = serde_json::from_str("1").unwrap();
        rewrite_response(body.as_bytes(), &id, &caps, &caps_json, private)
            .map(|out| serde_json::from_slice(&out).unwrap())
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
    fn rewrite_skips_what_it_must_not_touch() {
        assert_eq!(
            rewrite(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#, false),
            Err("the response is for another request id")
        );
        assert_eq!(
            rewrite(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#, false),
            Err("the response is an error")
        );
        assert!(rewrite("not json", false).is_err());
        assert!(rewrite(r#"{"id":1,"result":[]}"#, false).is_err());
        assert!(rewrite(r#"{"id":1,"id":1,"result":{}}"#, false).is_err());
    }

    #[test]
    fn restrict_never_adds() {
        let original = obj(json!({"tools": {"listChanged": true}, "logging": {}}));
        let mut narrowed = obj(json!({
            "tools": {"listChanged": false, "extra": true}, "logging": {}, "prompts": {}
        }));
        restrict(&mut narrowed, &original);
        assert_eq!(
            Value::Object(narrowed),
            json!({"tools": {"listChanged": false}, "logging": {}})
        );

        let original = obj(json!({"tools": {"listChanged": false}}));
        let mut widened = obj(json!({"tools": {"listChanged": true}}));
        restrict(&mut widened, &original);
        assert_eq!(
            Value::Object(widened),
            json!({"tools": {"listChanged": false}})
        );
    }
}
