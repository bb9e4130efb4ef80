//! Reading JSON text without building a `Value`, and splicing new values
//! into it so that every other byte stays as it was.
//!
//! One walker, in two modes, does all the reading: a [`Walk`] checks the
//! text as it goes and accepts exactly what `serde_json` accepts, for text
//! from the network (a request body, a response, an SSE event's data); a
//! [`Skim`] trusts the text, because it was checked already (a `RawValue`,
//! or a part of a document a walk checked), and only finds where things
//! are. Both hand an object's members to a callback as they pass them, so a
//! nested member is read in the same pass as its parents. Strings are not
//! decoded unless asked for, and nesting is tracked without recursion, so
//! depth is unbounded.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::value::RawValue;

use super::text::{quote_or_backslash, skip_space, string_stop, structural};

/// A cursor over JSON text; `CHECK` says whether it checks the text (see the
/// [module docs](self)).
pub(crate) struct Walker<'a, const CHECK: bool> {
    text: &'a str,
    at: usize,
}

/// A walker that checks the text: `None` as soon as it is not JSON.
pub(crate) type Walk<'a> = Walker<'a, true>;

/// A walker over text known to be valid JSON.
pub(crate) type Skim<'a> = Walker<'a, false>;

/// One member looked up by name: absent, present once (its text), or
/// present more than once (`Err`), which makes it ambiguous.
pub(crate) type Found<'a> = Result<Option<&'a str>, ()>;

/// Records one more member named like `slot`'s: the second makes it ambiguous.
pub(crate) fn record<'a>(slot: &mut Found<'a>, value: &'a str) {
    *slot = match slot {
        Ok(None) => Ok(Some(value)),
        _ => Err(()),
    };
}

impl<'a, const CHECK: bool> Walker<'a, CHECK> {
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
        self.at = skip_space(self.bytes(), self.at);
    }

    /// True when only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.space();
        self.at == self.text.len()
    }

    /// True when the next value is an object.
    pub(crate) fn at_object(&mut self) -> bool {
        self.space();
        self.peek() == Some(b'{')
    }

    /// [`Walker::object`] over the whole of `text`: `None` unless `text` is
    /// one JSON object whose keys all decode, with only whitespace after it.
    pub(crate) fn document<const N: usize>(
        text: &'a str,
        names: [&str; N],
        member: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        let mut walk = Self::new(text);
        let (_, readable) = walk.object(names, member)?;
        (readable && walk.at_end()).then_some(())
    }

    /// Skips the rest of a string after its opening quote; true when it has
    /// escapes.
    fn string(&mut self) -> Option<bool> {
        let bytes = self.bytes();
        let mut escaped = false;
        loop {
            let rest = bytes.get(self.at..)?;
            self.at += if CHECK {
                string_stop(rest)?
            } else {
                quote_or_backslash(rest)?
            };
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        _ if !CHECK => {}
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

    /// A key's opening quote to its colon: the raw key text and whether it
    /// has escapes.
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

    /// Skips one value; its text, as [`RawValue::get`] gives it.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        self.space();
        let start = self.at;
        if CHECK {
            self.checked_value()?;
        } else {
            self.skimmed_value()?;
        }
        self.text.get(start..self.at)
    }

    /// Skips a value of valid text: only strings and brackets matter.
    fn skimmed_value(&mut self) -> Option<()> {
        let bytes = self.bytes();
        match self.next()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 1usize;
                loop {
                    self.at += structural(bytes.get(self.at..)?)?;
                    match self.next()? {
                        b'"' => {
                            self.string()?;
                        }
                        b'{' | b'[' => depth += 1,
                        _ => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                    }
                }
            }
            // A number or a literal: up to the next delimiter.
            _ => {
                let rest = bytes.get(self.at..)?;
                self.at += rest
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                    .unwrap_or(rest.len());
                Some(())
            }
        }
    }

    /// Checks and skips one value.
    fn checked_value(&mut self) -> Option<()> {
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
                    return Some(());
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

    /// Walks the object next in the text. Each member whose key decodes to
    /// one of `names` is handed to `member` with its index, to read the value
    /// (with [`Walker::value`] or a nested [`Walker::object`]); other values
    /// are skipped. See [`Walker::members`] for what it returns.
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

    /// Walks the object next in the text, handing every member whose key
    /// decodes to `member` with the decoded key (borrowed when it has no
    /// escape); `member` must read the value. The object's text, and whether
    /// every key decoded (a key with a lone surrogate escape does not, which
    /// makes the object unreadable to `serde_json`'s maps); `None` when the
    /// next value is not an object, or (checking) not valid JSON.
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

    /// The items of the array next in the text when it holds at most `max`
    /// strings that all decode; otherwise `None`, and the walker has not
    /// moved (so the value can be read another way).
    ///
    /// Items are borrowed unless they hold an escape, so a borrowed item is
    /// exactly the JSON text between its quotes.
    pub(crate) fn strings(&mut self, max: usize) -> Option<Vec<Cow<'a, str>>> {
        let start = self.at;
        let items = self.string_items(max);
        if items.is_none() {
            self.at = start;
        }
        items
    }

    /// The next value's text, and its items when it is an array of at most
    /// `max` strings that all decode (see [`Walker::strings`]).
    pub(crate) fn value_and_strings(
        &mut self,
        max: usize,
    ) -> Option<(&'a str, Option<Vec<Cow<'a, str>>>)> {
        self.space();
        let start = self.at;
        if max > 0 {
            if let Some(items) = self.strings(max) {
                return Some((self.text.get(start..self.at)?, Some(items)));
            }
        }
        Some((self.value()?, None))
    }

    fn string_items(&mut self, max: usize) -> Option<Vec<Cow<'a, str>>> {
        self.space();
        if self.next()? != b'[' {
            return None;
        }
        self.space();
        // Each item takes at least three bytes (`"",`).
        let left = self.text.len() - self.at;
        let mut items = Vec::with_capacity(max.min(left / 3 + 1));
        if self.peek() == Some(b']') {
            self.at += 1;
            return Some(items);
        }
        loop {
            if items.len() == max || self.next()? != b'"' {
                return None;
            }
            let start = self.at;
            let escaped = self.string()?;
            items.push(if escaped {
                Cow::Owned(serde_json::from_str(self.text.get(start - 1..self.at)?).ok()?)
            } else {
                Cow::Borrowed(self.text.get(start..self.at - 1)?)
            });
            self.space();
            match self.next()? {
                b',' => self.space(),
                b']' => return Some(items),
                _ => return None,
            }
        }
    }
}

/// The members of an object in document order, duplicates kept: each
/// decoded key with its value's text.
pub(crate) type Members<'a> = Vec<(Cow<'a, str>, &'a str)>;

/// The members of the object that valid JSON `text` is; `None` when it is
/// not an object or a key does not decode.
pub(crate) fn members(text: &str) -> Option<Members<'_>> {
    let mut members = Vec::with_capacity(4);
    let mut skim = Skim::new(text);
    let (_, readable) = skim.members(|skim, key| {
        members.push((key, skim.value()?));
        Some(())
    })?;
    (readable && skim.at_end()).then_some(members)
}

/// The single member named `key`: `Ok(None)` when absent, `Err(())` when it
/// appears more than once.
pub(crate) fn unique<'a>(members: &Members<'a>, key: &str) -> Found<'a> {
    let mut found = Ok(None);
    for (_, value) in members.iter().filter(|(name, _)| *name == key) {
        record(&mut found, value);
    }
    found
}

/// The decoded text of the JSON string `text`, borrowed when it has no
/// escapes; `None` when `text` is not a string that decodes.
pub(crate) fn string(text: &str) -> Option<Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// What kind of JSON value `text` is, for error messages.
pub(crate) fn kind(text: &str) -> &'static str {
    match text.as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// The `id` of a JSON-RPC request `body`, when it is one object with one id
/// that an error response may echo.
pub(crate) fn request_id(body: &[u8]) -> Option<Box<RawValue>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut id = Ok(None);
    Walk::document(text, ["id"], |walk, _| {
        record(&mut id, walk.value()?);
        Some(())
    })?;
    let id = id.ok().flatten().filter(|id| is_usable_id(id))?;
    RawValue::from_string(id.to_owned()).ok()
}

/// True for the text of an id an error response may echo: a string or a
/// number.
pub(crate) fn is_usable_id(id: &str) -> bool {
    matches!(id.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// True when two JSON-RPC ids, as JSON texts, are the same value (`1` and
/// `1.0` included).
pub(crate) fn same_id(a: &str, b: &str) -> bool {
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

/// The byte range that `part` (a value borrowed from `text`) covers in `text`.
pub(crate) fn span(text: &str, part: &str) -> Range<usize> {
    let start = part.as_ptr() as usize - text.as_ptr() as usize;
    let end = start + part.len();
    debug_assert!(end <= text.len(), "the part must borrow from the text");
    start..end
}

/// `text` with each range replaced by its text; the ranges are in order and
/// do not overlap (an empty range inserts).
pub(crate) fn splice(text: &str, edits: &[(Range<usize>, &str)]) -> String {
    let removed: usize = edits.iter().map(|(range, _)| range.len()).sum();
    let added: usize = edits.iter().map(|(_, with)| with.len()).sum();
    let mut out = String::with_capacity(text.len() - removed + added);
    let mut at = 0;
    for (range, with) in edits {
        out.push_str(&text[at..range.start]);
        out.push_str(with);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Appends the member `"key":value` to the object being written in `out`
/// (after its `{`), with a comma when it is not the first.
pub(crate) fn push_member(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    if out.len() > 1 {
        out.push(b',');
    }
    serde_json::to_writer(&mut *out, key).expect("a key serializes");
    out.push(b':');
    out.extend_from_slice(value);
}

/// `serde_json`'s reading of text as an object, the model the walker must
/// agree with in tests.
#[cfg(test)]
pub(crate) mod model {
    use std::borrow::Cow;

    use serde::de::{Deserializer, MapAccess, Visitor};
    use serde_json::value::RawValue;

    /// The members of the JSON object `text` in order, duplicates kept, as
    /// `serde_json` reads them; `None` when it is not one object.
    pub(crate) fn members(text: &str) -> Option<super::Members<'_>> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = super::Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    out.push((key, value.get()));
                }
                Ok(out)
            }
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let pairs = de.deserialize_map(Pairs).ok()?;
        de.end().ok()?;
        Some(pairs)
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
        assert_eq!(m[1].1, r#"{"x":[1,2]}"#);
        assert!(unique(&m, "b").is_err());
        assert_eq!(unique(&m, "a").unwrap().unwrap(), r#"{"x":[1,2]}"#);
        assert!(unique(&m, "z").unwrap().is_none());
    }

    #[test]
    fn members_of_non_objects_is_none() {
        for text in ["[]", "1", "\"x\"", "null", "{", "{} x", r#"{"\ud800":1}"#] {
            assert!(members(text).is_none(), "{text}");
        }
    }

    #[test]
    fn string_decodes_and_borrows() {
        assert!(matches!(string(r#""plain""#), Some(Cow::Borrowed("plain"))));
        assert_eq!(string(r#""a\/b\u0041""#).unwrap(), "a/bA");
        assert!(string("12").is_none());
        assert!(string(r#""\ud800""#).is_none());
    }

    #[test]
    fn splice_replaces_only_the_parts() {
        let text = r#"{"id":7, "params" : {"n": {"a":true}} , "z":1}"#;
        let params = unique(&members(text).unwrap(), "params").unwrap().unwrap();
        let n = unique(&members(params).unwrap(), "n").unwrap().unwrap();
        let out = splice(text, &[(span(text, n), "{}")]);
        assert_eq!(out, r#"{"id":7, "params" : {"n": {}} , "z":1}"#);
        let end = text.len() - 1;
        let out = splice(text, &[(span(text, n), "1"), (end..end, r#","y":2"#)]);
        assert_eq!(out, r#"{"id":7, "params" : {"n": 1} , "z":1,"y":2}"#);
    }

    /// Whether `text` is one valid value to the walk and to serde_json,
    /// whether both read it as the same object, and whether a skim of the
    /// text (when valid) reads the same members.
    fn agree(text: &str) -> Result<(), String> {
        let mut walk = Walk::new(text);
        let walked = walk.value().is_some() && walk.at_end();
        let serde = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
        let model = model::members(text).map(|m| {
            m.into_iter()
                .map(|(k, v)| (k.into_owned(), v.to_owned()))
                .collect::<Vec<_>>()
        });
        let mut checked = Vec::new();
        let object = Walk::document(text, [], |_, _| Some(())).is_some();
        let _ = Walk::new(text).members(|walk, key| {
            checked.push((key.into_owned(), walk.value()?.to_owned()));
            Some(())
        });
        if (walked, object) != (serde, model.is_some()) {
            return Err(format!("{text:?}: walk {walked} {object}, serde {serde}"));
        }
        if let Some(model) = &model {
            if &checked != model {
                return Err(format!("{text:?}: walked {checked:?}, serde {model:?}"));
            }
        }
        if serde {
            let skimmed = members(text).map(|m| {
                m.into_iter()
                    .map(|(k, v)| (k.into_owned(), v.to_owned()))
                    .collect::<Vec<_>>()
            });
            if skimmed != model {
                return Err(format!("{text:?}: skimmed {skimmed:?}, serde {model:?}"));
            }
        }
        // The request id, found by the walk, as serde's members give it.
        let by_model = model.and_then(|m| {
            let mut ids = m.into_iter().filter(|(k, _)| k == "id");
            let (_, id) = ids.next()?;
            (ids.next().is_none() && is_usable_id(&id)).then_some(id)
        });
        let by_walk = request_id(text.as_bytes()).map(|id| id.get().to_owned());
        if by_walk != by_model {
            return Err(format!("{text:?}: id {by_walk:?}, serde {by_model:?}"));
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
            r#"{"b":1,"a":{"x":[1,2]},"b":"two","\u0063":null}"#,
            r#"{ "\u0061" : "x\"y" , "b\\" :{"n":{"m":[[],{}]}} ,"c":"\ud800"}"#,
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
            assert_eq!(kind(text), name);
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
            let general: Option<Vec<String>> = serde_json::from_str::<Vec<&RawValue>>(text)
                .ok()
                .filter(|items| items.len() <= 2)
                .and_then(|items| {
                    items
                        .into_iter()
                        .map(|i| string(i.get()).map(Cow::into_owned))
                        .collect()
                });
            for checked in [false, true] {
                let read = |max| {
                    if checked {
                        let mut walk = Walk::new(text);
                        let items = walk.strings(max);
                        if items.is_none() {
                            assert_eq!(walk.value(), Some(text), "{text}: the walk did not move");
                        }
                        items
                    } else {
                        let mut skim = Skim::new(text);
                        let items = skim.strings(max);
                        if items.is_none() {
                            assert_eq!(skim.value(), Some(text), "{text}: the skim did not move");
                        }
                        items
                    }
                };
                let scanned =
                    read(2).map(|items| items.into_iter().map(Cow::into_owned).collect::<Vec<_>>());
                if text.contains("\\u00e9") {
                    // More than two items: only the general path reads them.
                    assert_eq!(scanned, None, "{text}");
                    let all = read(10).unwrap();
                    assert_eq!(all[1], "b\"c");
                    assert_eq!(all[3], "é😀");
                    assert_eq!(all[4], "x/y");
                    assert!(matches!(all[0], Cow::Borrowed("a")));
                    continue;
                }
                assert_eq!(scanned, general, "{text}");
            }
        }
    }
}
