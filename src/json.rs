//! Borrowed JSON helpers: read an object's members without building a
//! `Value`, and splice a new value in place of one member's bytes so that
//! everything else in a document stays byte for byte as it was.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The members of a JSON object in document order, duplicates kept.
pub(crate) type Members<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// Reads the members of the JSON object `text`; `None` if it is not an object.
pub(crate) fn members(text: &str) -> Option<Members<'_>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let members = de.deserialize_map(MembersVisitor).ok()?;
    de.end().ok()?;
    Some(members)
}

/// The single member named `key`: `Ok(None)` when absent, `Err(())` when it
/// appears more than once.
pub(crate) fn unique<'a>(members: &Members<'a>, key: &str) -> Result<Option<&'a RawValue>, ()> {
    let mut found = None;
    for (name, value) in members {
        if name == key {
            if found.is_some() {
                return Err(());
            }
            found = Some(*value);
        }
    }
    Ok(found)
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let value: &'de RawValue = map.next_value()?;
            members.push((key, value));
        }
        Ok(members)
    }
}

/// The decoded text of a JSON string, borrowed when it has no escapes.
pub(crate) fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// The `id` of a JSON-RPC request `body`, when it is one object with one id.
pub(crate) fn request_id(body: &[u8]) -> Option<Box<RawValue>> {
    let text = std::str::from_utf8(body).ok()?;
    let members = members(text.trim_end())?;
    unique(&members, "id")
        .ok()
        .flatten()
        .filter(|id| is_usable_id(id))
        .map(RawValue::to_owned)
}

/// True for an id an error response may echo: a string or a number.
pub(crate) fn is_usable_id(id: &RawValue) -> bool {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// True when two JSON-RPC ids are the same value (`1` and `1.0` included).
pub(crate) fn same_id(a: &RawValue, b: &RawValue) -> bool {
    a.get() == b.get()
        || match (
            serde_json::from_str::<serde_json::Value>(a.get()),
            serde_json::from_str::<serde_json::Value>(b.get()),
        ) {
            (Ok(serde_json::Value::Number(x)), Ok(serde_json::Value::Number(y))) => {
                x.as_f64() == y.as_f64()
            }
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
}

/// What kind of JSON value `raw` is, for error messages.
pub(crate) fn kind(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// The byte range that `part` (a value borrowed from `text`) covers in `text`.
pub(crate) fn span(text: &str, part: &RawValue) -> std::ops::Range<usize> {
    let start = part.get().as_ptr() as usize - text.as_ptr() as usize;
    let end = start + part.get().len();
    debug_assert!(end <= text.len(), "the part must borrow from the text");
    start..end
}

/// `text` with the bytes of `part` replaced by `replacement`.
pub(crate) fn splice(text: &str, part: &RawValue, replacement: &[u8]) -> Vec<u8> {
    let range = span(text, part);
    let mut out = Vec::with_capacity(text.len() - range.len() + replacement.len());
    out.extend_from_slice(&text.as_bytes()[..range.start]);
    out.extend_from_slice(replacement);
    out.extend_from_slice(&text.as_bytes()[range.end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_keep_order_and_duplicates() {
        let text = r#"{"b":1,"a":{"x":[1,2]},"b":"two","\u0063":null}"#;
        let m = members(text).unwrap();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["b", "a", "b", "c"]);
        assert_eq!(m[1].1.get(), r#"{"x":[1,2]}"#);
        assert!(unique(&m, "b").is_err());
        assert_eq!(unique(&m, "a").unwrap().unwrap().get(), r#"{"x":[1,2]}"#);
        assert!(unique(&m, "z").unwrap().is_none());
    }

    #[test]
    fn members_of_non_objects_is_none() {
        for text in ["[]", "1", "\"x\"", "null", "{", "{} x"] {
            assert!(members(text).is_none(), "{text}");
        }
    }

    #[test]
    fn string_decodes_and_borrows() {
        let raw: &RawValue = serde_json::from_str(r#""plain""#).unwrap();
        assert!(matches!(string(raw), Some(Cow::Borrowed("plain"))));
        let raw: &RawValue = serde_json::from_str(r#""a\/b\u0041""#).unwrap();
        assert_eq!(string(raw).unwrap(), "a/bA");
        let raw: &RawValue = serde_json::from_str("12").unwrap();
        assert!(string(raw).is_none());
    }

    #[test]
    fn splice_replaces_only_the_part() {
        let text = r#"{"id":7, "params" : {"n": {"a":true}} , "z":1}"#;
        let m = members(text).unwrap();
        let params = members(unique(&m, "params").unwrap().unwrap().get()).unwrap();
        let n = unique(&params, "n").unwrap().unwrap();
        let out = splice(text, n, b"{}");
        assert_eq!(out, br#"{"id":7, "params" : {"n": {}} , "z":1}"#);
    }

    #[test]
    fn kinds_name_the_value() {
        for (text, name) in [
            ("\"s\"", "a string"),
            ("{}", "an object"),
            ("[]", "an array"),
            ("true", "a boolean"),
            ("null", "null"),
            ("-1.5", "a number"),
        ] {
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            assert_eq!(kind(raw), name);
        }
    }
}
