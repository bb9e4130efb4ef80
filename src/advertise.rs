//! What a server advertises, by era: the capabilities computed once from
//! the profile, and serialized once, for every `initialize` and
//! `server/discover` answer.

use serde_json::{Map, Value};

use crate::codec::json;

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
pub(crate) const MANAGED: [&str; 5] = ["tools", "resources", "prompts", "completions", "logging"];

/// One era's capabilities, as a map and serialized once: whole, and by
/// top-level key and `extensions` entry, so that a merge with what an inner
/// service sent copies text instead of serializing values again.
pub(crate) struct Advertised {
    map: Map<String, Value>,
    /// Each top-level key with its value's JSON text, in the map's order.
    values: Vec<(String, String)>,
    /// The same for the entries of an `extensions` object.
    extensions: Vec<(String, String)>,
    json: String,
}

impl Advertised {
    pub(crate) fn new(map: Map<String, Value>) -> Self {
        let texts = |map: &Map<String, Value>| -> Vec<(String, String)> {
            map.iter()
                .map(|(key, value)| (key.clone(), value.to_string()))
                .collect()
        };
        let values = texts(&map);
        let extensions = match map.get("extensions") {
            Some(Value::Object(entries)) => texts(entries),
            _ => Vec::new(),
        };
        let mut json = Vec::with_capacity(values.iter().map(|(k, v)| k.len() + v.len() + 4).sum());
        json.push(b'{');
        for (key, value) in &values {
            json::push_member(&mut json, key, value.as_bytes());
        }
        json.push(b'}');
        let json = String::from_utf8(json).expect("keys and values serialize to UTF-8");
        Self {
            map,
            values,
            extensions,
            json,
        }
    }

    /// The capabilities as a map.
    pub(crate) fn map(&self) -> &Map<String, Value> {
        &self.map
    }

    /// The capabilities as JSON text.
    pub(crate) fn json(&self) -> &str {
        &self.json
    }

    /// Each top-level key with its value's JSON text, in order.
    pub(crate) fn values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The JSON text of the top-level key `key`.
    pub(crate) fn value(&self, key: &str) -> Option<&str> {
        text_of(&self.values, key)
    }

    /// Each `extensions` entry with its value's JSON text, in order.
    pub(crate) fn extensions(&self) -> impl Iterator<Item = (&str, &str)> {
        self.extensions
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The JSON text of the `extensions` entry `name`.
    pub(crate) fn extension(&self, name: &str) -> Option<&str> {
        text_of(&self.extensions, name)
    }
}

/// The JSON text of the entry named `key`.
fn text_of<'a>(texts: &'a [(String, String)], key: &str) -> Option<&'a str> {
    texts
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, text)| text.as_str())
}

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

/// The object `v` is, for tests that write capabilities with `json!`.
#[cfg(test)]
pub(crate) fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("test input is an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn advertised_json_is_the_maps_serialization() {
        let escaped = obj(json!({"a\"b\u{1}": {"x": [1, 2.5]}, "extensions": {"c/d": {}}}));
        for map in [obj(json!({"tools": {"listChanged": true}, "logging": {}})), obj(json!({"tools": {}, "experimental": {"ours": 1}, "extensions": {"io.modelcontextprotocol/tasks": {}, "x/y": {"ours": 2}}})), Map::new()].into_iter().chain([escaped]) {
            let advertised = Advertised::new(map.clone());
            assert_eq!(advertised.json, serde_json::to_string(&map).unwrap());
            let extensions = map.get("extensions").and_then(Value::as_object);
            assert_eq!(advertised.extensions.len(), extensions.map_or(0, Map::len));
        }
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
