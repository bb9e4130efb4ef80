//! Borrowed JSON helpers: read an object's members without building a
//! `Value`, and splice a new value in place of one member's bytes so that
//! everything else in a document stays byte for byte as it was.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::swar::{bytes_below, first_byte, splat, zero_bytes};

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
    single(members.iter().map(|(name, value)| (name, *value)), key)
}

/// The single value named `key` among `(name, value)` pairs, as [`unique`]
/// gives it.
fn single<'n, T>(
    pairs: impl Iterator<Item = (&'n Cow<'n, str>, T)>,
    key: &str,
) -> Result<Option<T>, ()> {
    let mut found = None;
    for (_, value) in pairs.filter(|(name, _)| *name == key) {
        if found.replace(value).is_some() {
            return Err(());
        }
    }
    Ok(found)
}

/// One member looked up by name, as [`unique`] gives it.
pub(crate) type Member<'a> = Result<Option<&'a str>, ()>;

/// Records one more member named like `slot`'s: the second makes it ambiguous.
pub(crate) fn record<'a>(slot: &mut Member<'a>, value: &'a str) {
    *slot = match slot {
        Ok(None) => Ok(Some(value)),
        _ => Err(()),
    };
}

/// A single checking pass over JSON text that hands chosen members to the
/// caller as it goes, so nested objects are read without a second walk.
///
/// It accepts exactly what `serde_json` accepts for a value it skips (the
/// way [`members`] reads member values): strings are not decoded, so a lone
/// surrogate escape passes. Nesting is tracked in a bit stack, not by
/// recursion, so depth is unbounded there too.
pub(crate) struct Walk<'a> {
    text: &'a str,
    at: usize,
}

/// Index of the first byte that ends a run of plain string bytes: the quote,
/// a backslash, or a control character JSON does not allow in a string.
/// Eight bytes at a time (SWAR); a short tail byte by byte.
fn string_stop(bytes: &[u8]) -> Option<usize> {
    let is_stop = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let mut offset = 0;
    let mut rest = bytes;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let word = u64::from_le_bytes(*word);
        let hits = zero_bytes(word ^ splat(b'"'))
            | zero_bytes(word ^ splat(b'\\'))
            | bytes_below(word, 0x20);
        if hits != 0 {
            return Some(offset + first_byte(hits));
        }
        offset += 8;
        rest = tail;
    }
    rest.iter().position(|&b| is_stop(b)).map(|at| offset + at)
}

impl<'a> Walk<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// True when only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.space();
        self.at == self.text.len()
    }

    /// [`Walk::object`] over the whole of `text`: `None` unless `text` is one
    /// JSON object whose keys all decode, with only whitespace after it.
    pub(crate) fn document<const N: usize>(
        text: &'a str,
        names: [&str; N],
        member: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        let mut walk = Walk::new(text);
        let (_, readable) = walk.object(names, member)?;
        (readable && walk.at_end()).then_some(())
    }

    /// True when the next value is an object.
    pub(crate) fn at_object(&mut self) -> bool {
        self.space();
        self.peek() == Some(b'{')
    }

    /// Skips the rest of a string after its opening quote; true when it has
    /// escapes.
    fn string(&mut self) -> Option<bool> {
        let bytes = self.bytes();
        let mut escaped = false;
        loop {
            self.at += string_stop(bytes.get(self.at..)?)?;
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = bytes.get(self.at..self.at + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.at += 4;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// Skips the rest of a number whose first byte was `first`.
    fn number(&mut self, first: u8) -> Option<()> {
        let first = if first == b'-' { self.next()? } else { first };
        match first {
            b'0' if matches!(self.peek(), Some(b'0'..=b'9')) => return None,
            b'0' => {}
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        let end = self.at + rest.len();
        (self.bytes().get(self.at..end)? == rest).then(|| self.at = end)
    }

    /// A key's opening quote to its colon; `None` for the raw key text and
    /// whether it has escapes.
    fn key(&mut self) -> Option<(&'a str, bool)> {
        if self.next()? != b'"' {
            return None;
        }
        let start = self.at;
        let escaped = self.string()?;
        let key = self.text.get(start - 1..self.at)?;
        self.space();
        (self.next()? == b':').then_some((key, escaped))
    }

    /// Checks and skips one value; its text, as [`RawValue::get`] gives it.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        self.space();
        let start = self.at;
        // Open containers, innermost in the lowest bit: 1 for an object.
        // Past 64 levels the outer ones spill into `deep`.
        let (mut open, mut depth, mut deep) = (0u64, 0usize, Vec::new());
        loop {
            match self.next()? {
                b'"' => {
                    self.string()?;
                }
                container @ (b'{' | b'[') => {
                    self.space();
                    let close = if container == b'{' { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.at += 1;
                    } else {
                        if depth >= 64 {
                            deep.push(open >> 63 == 1);
                        }
                        open = (open << 1) | u64::from(container == b'{');
                        depth += 1;
                        if container == b'{' {
                            self.key()?;
                        }
                        self.space();
                        continue;
                    }
                }
                b't' => self.literal(b"rue")?,
                b'f' => self.literal(b"alse")?,
                b'n' => self.literal(b"ull")?,
                first @ (b'-' | b'0'..=b'9') => self.number(first)?,
                _ => return None,
            }
            // After a value: close what ends here, or move to the next one.
            loop {
                if depth == 0 {
                    return self.text.get(start..self.at);
                }
                self.space();
                let object = open & 1 == 1;
                match self.next()? {
                    b',' => {
                        if object {
                            self.space();
                            self.key()?;
                        }
                        self.space();
                        break;
                    }
                    b'}' if object => {}
                    b']' if !object => {}
                    _ => return None,
                }
                open >>= 1;
                depth -= 1;
                if depth >= 64 {
                    open |= u64::from(deep.pop()?) << 63;
                }
            }
        }
    }

    /// Checks and walks the object next in the text. Each member whose key
    /// decodes to one of `names` is handed to `member` with its index, to read
    /// the value (with [`Walk::value`] or a nested [`Walk::object`]); other
    /// values are skipped. `Some(false)` when a key does not decode, which
    /// makes the object unreadable to [`members`]; `None` when the text is not
    /// valid JSON or the object is not one. With the object's text.
    pub(crate) fn object<const N: usize>(
        &mut self,
        names: [&str; N],
        mut member: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<(&'a str, bool)> {
        self.members(
            |walk, key| match names.iter().position(|name| *name == key) {
                Some(slot) => member(walk, slot),
                None => walk.value().map(drop),
            },
        )
    }

    /// [`Walk::object`] handing every member whose key decodes to `member`
    /// with the decoded key (borrowed when it has no escape).
    pub(crate) fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<(&'a str, bool)> {
        self.space();
        let start = self.at;
        if self.next()? != b'{' {
            return None;
        }
        self.space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some((self.text.get(start..self.at)?, true));
        }
        let mut keys_decode = true;
        loop {
            let (key, escaped) = self.key()?;
            let key = if escaped {
                serde_json::from_str::<String>(key).ok().map(Cow::Owned)
            } else {
                key.get(1..key.len() - 1).map(Cow::Borrowed)
            };
            match key {
                Some(key) => member(self, key)?,
                None => {
                    keys_decode = false;
                    self.value()?;
                }
            }
            self.space();
            match self.next()? {
                b',' => self.space(),
                b'}' => return Some((self.text.get(start..self.at)?, keys_decode)),
                _ => return None,
            }
        }
    }
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
    string_text(raw.get())
}

/// [`string`] of the JSON text `text`.
pub(crate) fn string_text(text: &str) -> Option<Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// The `id` of a JSON-RPC request `body`, when it is one object with one id.
pub(crate) fn request_id(body: &[u8]) -> Option<Box<RawValue>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut id = Ok(None);
    Walk::document(text, ["id"], |walk, _| {
        record(&mut id, walk.value()?);
        Some(())
    })?;
    let id = RawValue::from_string(id.ok().flatten()?.to_owned()).ok()?;
    is_usable_id(&id).then_some(id)
}

/// True for an id an error response may echo: a string or a number.
pub(crate) fn is_usable_id(id: &RawValue) -> bool {
    is_usable_id_text(id.get())
}

/// [`is_usable_id`] of JSON text.
pub(crate) fn is_usable_id_text(id: &str) -> bool {
    matches!(id.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// True when two JSON-RPC ids, as JSON texts, are the same value (`1` and
/// `1.0` included).
pub(crate) fn same_id_text(a: &str, b: &str) -> bool {
    a == b
        || match (
            serde_json::from_str::<serde_json::Value>(a),
            serde_json::from_str::<serde_json::Value>(b),
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
    kind_text(raw.get())
}

/// [`kind`] of the JSON text `text`.
pub(crate) fn kind_text(text: &str) -> &'static str {
    match text.as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// The byte range that `part` (a value borrowed from `text`) covers in `text`.
pub(crate) fn span(text: &str, part: &str) -> std::ops::Range<usize> {
    let start = part.as_ptr() as usize - text.as_ptr() as usize;
    let end = start + part.len();
    debug_assert!(end <= text.len(), "the part must borrow from the text");
    start..end
}

/// `text` with the bytes of `part` replaced by `replacement`.
pub(crate) fn splice(text: &str, part: &str, replacement: &str) -> String {
    let range = span(text, part);
    let mut out = String::with_capacity(text.len() - range.len() + replacement.len());
    out.push_str(&text[..range.start]);
    out.push_str(replacement);
    out.push_str(&text[range.end..]);
    out
}

/// The items of the value at `at` in `text`, valid JSON, when it is an
/// array of at most `max` strings that decode, and the index just past it;
/// `None` otherwise.
///
/// Items are borrowed unless they hold an escape, so a borrowed item is
/// exactly the JSON text between its quotes.
pub(crate) fn scan_strings(
    text: &str,
    at: usize,
    max: usize,
) -> Option<(Vec<Cow<'_, str>>, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    let mut at = skip_space(bytes, at + 1);
    // Each item takes at least three bytes (`"",`).
    let mut items = Vec::with_capacity(max.min((text.len() - at) / 3 + 1));
    if bytes.get(at) == Some(&b']') {
        return Some((items, at + 1));
    }
    loop {
        if bytes.get(at) != Some(&b'"') || items.len() == max {
            return None;
        }
        let (end, escaped) = closing_quote(bytes, at)?;
        items.push(if escaped {
            Cow::Owned(serde_json::from_str(text.get(at..=end)?).ok()?)
        } else {
            Cow::Borrowed(text.get(at + 1..end)?)
        });
        at = skip_space(bytes, end + 1);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b']') => return Some((items, at + 1)),
            _ => return None,
        }
    }
}

/// The index of the first byte at or after `at` that is not JSON whitespace.
pub(crate) fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

// Reading JSON text that is known to be valid: it is, or lies inside, a
// `RawValue`, so walking it again needs only its structure. Anything
// unexpected falls back to serde_json.

/// The members of a JSON object in document order, duplicates kept, each
/// value as its JSON text, and as its strings when they were read.
pub(crate) type TextMembers<'a> = Vec<(Cow<'a, str>, &'a str, Option<Vec<Cow<'a, str>>>)>;

/// Reads the members of the valid JSON `text`; `None` if it is not an object.
pub(crate) fn read_members(text: &str) -> Option<TextMembers<'_>> {
    scan_members(text, |_| 0).or_else(|| {
        let members = members(text)?;
        Some(
            members
                .into_iter()
                .map(|(k, v)| (k, v.get(), None))
                .collect(),
        )
    })
}

/// [`read_members`] without the fallback; the values of the keys for which
/// `strings` is not zero are also read as arrays of at most that many
/// strings.
pub(crate) fn scan_members(text: &str, strings: impl Fn(&str) -> usize) -> Option<TextMembers<'_>> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut members = Vec::with_capacity(4);
    at = skip_space(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(members);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let (end, escaped) = closing_quote(bytes, at)?;
        let key = if escaped {
            Cow::Owned(serde_json::from_str(text.get(at..=end)?).ok()?)
        } else {
            Cow::Borrowed(text.get(at + 1..end)?)
        };
        at = skip_space(bytes, end + 1);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(bytes, at + 1);
        let (scanned, end) = match strings(&key) {
            0 => (None, value_end(bytes, at)?),
            max => match scan_strings(text, at, max) {
                Some((items, end)) => (Some(items), end),
                None => (None, value_end(bytes, at)?),
            },
        };
        members.push((key, text.get(at..end)?, scanned));
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') => return Some(members),
            _ => return None,
        }
    }
}

/// The single member named `key`: `Ok(None)` when absent, `Err(())` when it
/// appears more than once.
pub(crate) fn unique_text<'a>(members: &TextMembers<'a>, key: &str) -> Result<Option<&'a str>, ()> {
    single(members.iter().map(|(name, value, _)| (name, *value)), key)
}

/// The index of the closing quote of the string opening at `at`, and
/// whether the string holds an escape.
pub(crate) fn closing_quote(bytes: &[u8], at: usize) -> Option<(usize, bool)> {
    let mut end = at + 1;
    let mut escaped = false;
    loop {
        end += memchr::memchr2(b'"', b'\\', bytes.get(end..)?)?;
        if bytes.get(end) == Some(&b'"') {
            return Some((end, escaped));
        }
        // The escaped byte can neither close the string nor start an escape.
        escaped = true;
        end += 2;
    }
}

/// The index just past the value that starts at `at`.
pub(crate) fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => closing_quote(bytes, at).map(|(end, _)| end + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => i = closing_quote(bytes, i)?.0,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        // A number, `true`, `false` or `null`: up to the next delimiter.
        _ => Some(
            bytes
                .get(at..)?
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(bytes.len(), |len| at + len),
        ),
    }
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
        let out = splice(text, n.get(), "{}");
        assert_eq!(out, r#"{"id":7, "params" : {"n": {}} , "z":1}"#);
    }

    /// Whether `text` is one valid value to the walk and to serde_json, and
    /// whether it is an object with readable keys to the walk and to `members`.
    fn agree(text: &str) -> Result<(), String> {
        let mut walk = Walk::new(text);
        let walked = walk.value().is_some() && walk.at_end();
        let serde = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
        let object = Walk::document(text, [], |_, _| Some(())).is_some();
        if (walked, object) != (serde, members(text).is_some()) {
            return Err(format!("{text:?}: walk {walked} {object}, serde {serde}"));
        }
        // The request id, found by the walk, as the members would give it.
        let by_members = members(text).and_then(|m| {
            let id = unique(&m, "id").ok().flatten()?;
            is_usable_id(id).then(|| id.get().to_owned())
        });
        let by_walk = request_id(text.as_bytes()).map(|id| id.get().to_owned());
        if by_walk != by_members {
            return Err(format!("{text:?}: id {by_walk:?}, members {by_members:?}"));
        }
        Ok(())
    }

    fn value() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let leaf = proptest::sample::select(vec![
            "null",
            "true",
            "false",
            "0",
            "-0",
            "7",
            "-12.5e+3",
            "1E9",
            "0.25",
            "1e400",
            r#""""#,
            r#""a""#,
            r#""\u00e9\n\"""#,
            r#""\ud800""#,
            r#""é""#,
            r#""a string longer than one eight-byte word, \t with an escape""#,
        ])
        .prop_map(str::to_owned);
        leaf.prop_recursive(6, 48, 6, |inner| {
            let space = proptest::sample::select(vec!["", " ", "\t\r\n"]);
            let key = proptest::sample::select(vec![
                r#""k""#,
                r#""method""#,
                r#""id""#,
                r#""\u006b""#,
                r#""\udc00""#,
                r#""""#,
            ]);
            prop_oneof![
                proptest::collection::vec((inner.clone(), space.clone()), 0..5).prop_map(|v| {
                    let items: Vec<String> =
                        v.into_iter().map(|(i, s)| format!("{s}{i}{s}")).collect();
                    format!("[{}]", items.join(","))
                }),
                proptest::collection::vec((key, inner, space), 0..5).prop_map(|v| {
                    let items: Vec<String> = v
                        .into_iter()
                        .map(|(k, i, s)| format!("{s}{k}{s}:{s}{i}"))
                        .collect();
                    format!("{{{}}}", items.join(","))
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn the_walk_accepts_what_serde_json_accepts(
            text in value(),
            at in 0usize..400,
            junk in proptest::sample::select(vec![
                "", "\"", "\\", "{", "}", "[", "]", ",", ":", " ", "0", "-", ".", "e", "x",
                "\u{1}", "\u{1f}", "\u{7f}", "\\u", "\\ud83d\\ude00", "tru", "nul", "é", "00",
            ]),
        ) {
            agree(&text).map_err(proptest::test_runner::TestCaseError::fail)?;
            let mut at = at.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            for text in [
                text[..at].to_owned(),
                format!("{}{junk}{}", &text[..at], &text[at..]),
                format!("{}{junk}", &text[..at]),
            ] {
                agree(&text).map_err(proptest::test_runner::TestCaseError::fail)?;
            }
        }
    }

    #[test]
    fn the_walk_agrees_on_edge_cases() {
        for text in [
            "",
            " ",
            "{}",
            "[]",
            "{ }",
            "[ ]",
            "{} ",
            "{}x",
            "[1,]",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            "[1 2]",
            "{]",
            "[}",
            "01",
            "-01",
            "-",
            "1.",
            "1.e1",
            "1e",
            "1e+",
            "-0.0e-0",
            "1E+2",
            "tru",
            "truex",
            "nulll",
            r#""\u12""#,
            r#""\u12G4""#,
            r#""\a""#,
            "\"\u{7f}\"",
            "\"\u{1f}\"",
            r#"{"\ud800":1}"#,
            r#"{"\ud800\udc00":1}"#,
            r#"["\ud800"]"#,
            r#"{"a":{"\ud800":1}}"#,
            "\u{feff}{}",
            "{}\u{a0}",
        ] {
            agree(text).unwrap();
        }
    }

    #[test]
    fn the_walk_has_no_depth_limit() {
        for depth in [63, 64, 65, 129, 100_000] {
            let open: String = (0..depth)
                .map(|i| if i % 3 == 0 { "[" } else { r#"{"a":"# })
                .collect();
            let close: String = (0..depth)
                .rev()
                .map(|i| if i % 3 == 0 { "]" } else { "}" })
                .collect();
            agree(&format!("{open}1{close}")).unwrap();
            let mut wrong = close.clone().into_bytes();
            let flip = wrong.len() - 1 - 60.min(wrong.len() - 1);
            wrong[flip] = if wrong[flip] == b']' { b'}' } else { b']' };
            agree(&format!("{open}1{}", String::from_utf8(wrong).unwrap())).unwrap();
            agree(&format!("{open}1{}", &close[1..])).unwrap();
        }
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

    #[test]
    fn string_arrays_read_in_one_pass_match_the_general_path() {
        let cases = [
            r#"[]"#,
            r#"[ ]"#,
            r#"["a"]"#,
            r#"[ "a" ,	"b\"c" ,"\\" , "\u00e9\ud83d\ude00", "x\/y" ]"#,
            r#"["a", 1]"#,
            r#"["a", ["b"]]"#,
            r#"["a", "\ud800"]"#,
            r#"{"a": "b"}"#,
            r#""a""#,
            r#"["a", "b", "c"]"#,
        ];
        for text in cases {
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            let general: Option<Vec<String>> = serde_json::from_str::<Vec<&RawValue>>(text)
                .ok()
                .filter(|items| items.len() <= 2)
                .and_then(|items| {
                    items
                        .into_iter()
                        .map(|i| string(i).map(Cow::into_owned))
                        .collect()
                });
            let scanned = scan_strings(raw.get(), 0, 2)
                .map(|(items, _)| items.into_iter().map(Cow::into_owned).collect::<Vec<_>>());
            if text.contains("\\u00e9") {
                // More than two items: only the general path reads them.
                assert_eq!(scanned, None, "{text}");
                let (all, end) = scan_strings(raw.get(), 0, 10).unwrap();
                assert_eq!(end, text.len());
                assert_eq!(all[1], "b\"c");
                assert_eq!(all[3], "é😀");
                assert_eq!(all[4], "x/y");
                assert!(matches!(all[0], Cow::Borrowed("a")));
                continue;
            }
            assert_eq!(scanned, general, "{text}");
        }
    }

    #[test]
    fn members_read_without_serde_match_serde() {
        let cases = [
            r#"{}"#,
            r#" { } "#,
            r#"{"a":1,"b":[1,{"c":"]}"}],"a":-2.5e3,"d":null,"e":true,"f":false}"#,
            r#"{ "\u0061" : "x\"y" , "b\\" :{"n":{"m":[[],{}]}} ,"c":"\ud800"}"#,
            r#"{"k":"v"}"#,
            r#"[1]"#,
            r#""s""#,
            r#"12"#,
            r#"null"#,
        ];
        for text in cases {
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            let ours = read_members(raw.get());
            let theirs = members(raw.get()).map(|m| {
                m.into_iter()
                    .map(|(k, v)| (k, v.get(), None))
                    .collect::<TextMembers<'_>>()
            });
            assert_eq!(ours, theirs, "{text}");
        }
    }
}
