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

/// One member looked up by name (its text, or what was made of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found<T> {
    Absent,
    /// Present once.
    One(T),
    /// Present more than once: parsers could read different values.
    Ambiguous,
}

impl<T> Found<T> {
    /// Records one more member of the name: the second makes it ambiguous.
    pub(crate) fn record(&mut self, value: T) {
        *self = match self {
            Found::Absent => Found::One(value),
            _ => Found::Ambiguous,
        };
    }

    /// The member, present or not, unless it is ambiguous.
    pub(crate) fn unambiguous(self) -> Option<Option<T>> {
        match self {
            Found::Absent => Some(None),
            Found::One(value) => Some(Some(value)),
            Found::Ambiguous => None,
        }
    }

    /// The member present once, if it is.
    pub(crate) fn one(self) -> Option<T> {
        match self {
            Found::One(value) => Some(value),
            Found::Absent | Found::Ambiguous => None,
        }
    }
}

impl<'a, const CHECK: bool> Walker<'a, CHECK> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    #[inline(always)]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// True when only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.at = skip_space(self.bytes(), self.at);
        self.at == self.text.len()
    }

    /// True when the next value is an object.
    pub(crate) fn at_object(&mut self) -> bool {
        self.at = skip_space(self.bytes(), self.at);
        self.bytes().get(self.at) == Some(&b'{')
    }

    /// True when the next value is an array.
    pub(crate) fn at_array(&mut self) -> bool {
        self.at = skip_space(self.bytes(), self.at);
        self.bytes().get(self.at) == Some(&b'[')
    }

    /// Walks the array next in the text, handing each item to `item`, which
    /// must read it (as [`Walker::members`] hands on values). The array's
    /// text; `None` when the next value is not an array, or (checking) not
    /// valid JSON.
    pub(crate) fn items(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<&'a str> {
        let (text, bytes) = (self.text, self.bytes());
        let start = skip_space(bytes, self.at);
        if bytes.get(start) != Some(&b'[') {
            return None;
        }
        let mut at = skip_space(bytes, start + 1);
        if bytes.get(at) != Some(&b']') {
            loop {
                self.at = at;
                item(self)?;
                at = skip_space(bytes, self.at);
                match bytes.get(at) {
                    Some(b',') => at = skip_space(bytes, at + 1),
                    Some(b']') => break,
                    _ => return None,
                }
            }
        }
        self.at = at + 1;
        text.get(start..self.at)
    }

    /// [`Walker::members`] over the whole of `text`: `None` unless `text` is
    /// one JSON object whose keys all decode, with only whitespace after it.
    pub(crate) fn document(
        text: &'a str,
        member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<()> {
        let mut walk = Self::new(text);
        let (_, readable) = walk.members(member)?;
        (readable && walk.at_end()).then_some(())
    }

    /// Skips one value; its text, as [`RawValue::get`] gives it.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        let start = skip_space(self.bytes(), self.at);
        let end = value_end::<CHECK>(self.bytes(), start)?;
        self.at = end;
        self.text.get(start..end)
    }

    /// Skips one value.
    pub(crate) fn skip(&mut self) -> Option<()> {
        let start = skip_space(self.bytes(), self.at);
        self.at = value_end::<CHECK>(self.bytes(), start)?;
        Some(())
    }

    /// Walks the object next in the text, handing every member whose key
    /// decodes to `member` with the decoded key (borrowed when it has no
    /// escape); `member` must read the value (with [`Walker::value`],
    /// [`Walker::skip`] or a nested [`Walker::members`]). The object's text, and whether
    /// every key decoded (a key with a lone surrogate escape does not, which
    /// makes the object unreadable to `serde_json`'s maps); `None` when the
    /// next value is not an object, or (checking) not valid JSON.
    pub(crate) fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<(&'a str, bool)> {
        let (text, bytes) = (self.text, self.bytes());
        let start = skip_space(bytes, self.at);
        if bytes.get(start) != Some(&b'{') {
            return None;
        }
        let mut at = skip_space(bytes, start + 1);
        let mut keys_decode = true;
        if bytes.get(at) != Some(&b'}') {
            loop {
                if bytes.get(at) != Some(&b'"') {
                    return None;
                }
                let (end, escaped) = string_end::<CHECK>(bytes, at + 1)?;
                let key = match escaped {
                    false => text.get(at + 1..end - 1).map(Cow::Borrowed),
                    true => serde_json::from_str::<String>(text.get(at..end)?)
                        .ok()
                        .map(Cow::Owned),
                };
                at = skip_space(bytes, end);
                if bytes.get(at) != Some(&b':') {
                    return None;
                }
                self.at = at + 1;
                match key {
                    Some(key) => member(self, key)?,
                    None => {
                        keys_decode = false;
                        self.value()?;
                    }
                }
                at = skip_space(bytes, self.at);
                match bytes.get(at) {
                    Some(b',') => at = skip_space(bytes, at + 1),
                    Some(b'}') => break,
                    _ => return None,
                }
            }
        }
        self.at = at + 1;
        Some((text.get(start..self.at)?, keys_decode))
    }

    /// The items of the array next in the text when it holds at most `max`
    /// strings that all decode; otherwise `None`, and the walker has not
    /// moved (so the value can be read another way).
    ///
    /// Items are borrowed unless they hold an escape, so a borrowed item is
    /// exactly the JSON text between its quotes.
    pub(crate) fn strings(&mut self, max: usize) -> Option<Vec<Cow<'a, str>>> {
        let (items, end) = string_items::<CHECK>(self.text, self.at, max)?;
        self.at = end;
        Some(items)
    }

    /// The next value's text, and its items when it is an array of at most
    /// `max` strings that all decode (see [`Walker::strings`]).
    pub(crate) fn value_and_strings(
        &mut self,
        max: usize,
    ) -> Option<(&'a str, Option<Vec<Cow<'a, str>>>)> {
        let start = skip_space(self.bytes(), self.at);
        if max > 0 {
            if let Some(items) = self.strings(max) {
                return Some((self.text.get(start..self.at)?, Some(items)));
            }
        }
        Some((self.value()?, None))
    }
}

/// The end of the string whose body starts at `bytes[at]` (just past its
/// closing quote), and whether it has escapes; checking, that its bytes and
/// escapes are what JSON allows.
#[inline(always)]
fn string_end<const CHECK: bool>(bytes: &[u8], mut at: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        let rest = bytes.get(at..)?;
        at += match CHECK {
            true => string_stop(rest)?,
            false => quote_or_backslash(rest)?,
        };
        match bytes[at] {
            b'"' => return Some((at + 1, escaped)),
            b'\\' => {
                escaped = true;
                match *bytes.get(at + 1)? {
                    _ if !CHECK => at += 2,
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                    b'u' => {
                        let hex = bytes.get(at + 2..at + 6)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        at += 6;
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
}

/// The end of the value that starts at `bytes[at]`; a string or a number,
/// the most common values, without the machinery of containers.
#[inline(always)]
fn value_end<const CHECK: bool>(bytes: &[u8], at: usize) -> Option<usize> {
    match (CHECK, bytes.get(at)) {
        (_, Some(b'"')) => Some(string_end::<CHECK>(bytes, at + 1)?.0),
        (true, Some(b'-' | b'0'..=b'9')) => number_end(bytes, at),
        (true, _) => checked_value(bytes, at),
        (false, _) => skimmed_value(bytes, at),
    }
}

/// The index just past the digits at `at`, and how many there were.
#[inline(always)]
fn digits(bytes: &[u8], at: usize) -> (usize, usize) {
    let n = bytes.get(at..).map_or(0, |rest| {
        rest.iter().take_while(|b| b.is_ascii_digit()).count()
    });
    (at + n, n)
}

/// The end of the number that starts at `bytes[at]`, checked.
fn number_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    match *bytes.get(at)? {
        b'0' => {
            at += 1;
            if bytes.get(at).is_some_and(u8::is_ascii_digit) {
                return None;
            }
        }
        b'1'..=b'9' => at = digits(bytes, at + 1).0,
        _ => return None,
    }
    if bytes.get(at) == Some(&b'.') {
        let (end, n) = digits(bytes, at + 1);
        if n == 0 {
            return None;
        }
        at = end;
    }
    if let Some(b'e' | b'E') = bytes.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = bytes.get(at) {
            at += 1;
        }
        let (end, n) = digits(bytes, at);
        if n == 0 {
            return None;
        }
        at = end;
    }
    Some(at)
}

/// The end of the key, colon included, whose opening quote is `bytes[at]`.
#[inline(always)]
fn checked_key(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let (end, _) = string_end::<true>(bytes, at + 1)?;
    let at = skip_space(bytes, end);
    (bytes.get(at) == Some(&b':')).then_some(at + 1)
}

/// The end of the value that starts at `bytes[at]`, checked: it accepts
/// exactly what `serde_json` accepts for a value it skips. Open containers
/// are bits of a stack, innermost lowest, 1 for an object; past 64 levels
/// the outer ones spill into `deep`, so depth is unbounded.
fn checked_value(bytes: &[u8], mut at: usize) -> Option<usize> {
    let (mut open, mut depth, mut deep) = (0u64, 0usize, Vec::new());
    loop {
        at = skip_space(bytes, at);
        match *bytes.get(at)? {
            b'"' => at = string_end::<true>(bytes, at + 1)?.0,
            container @ (b'{' | b'[') => {
                at = skip_space(bytes, at + 1);
                let close = if container == b'{' { b'}' } else { b']' };
                if bytes.get(at) == Some(&close) {
                    at += 1;
                } else {
                    if depth >= 64 {
                        deep.push(open >> 63 == 1);
                    }
                    open = (open << 1) | u64::from(container == b'{');
                    depth += 1;
                    if container == b'{' {
                        at = checked_key(bytes, at)?;
                    }
                    continue;
                }
            }
            b't' => at = literal(bytes, at, b"true")?,
            b'f' => at = literal(bytes, at, b"false")?,
            b'n' => at = literal(bytes, at, b"null")?,
            b'-' | b'0'..=b'9' => at = number_end(bytes, at)?,
            _ => return None,
        }
        // After a value: close what ends here, or move to the next one.
        loop {
            if depth == 0 {
                return Some(at);
            }
            at = skip_space(bytes, at);
            let object = open & 1 == 1;
            match *bytes.get(at)? {
                b',' => {
                    at = skip_space(bytes, at + 1);
                    if object {
                        at = checked_key(bytes, at)?;
                    }
                    break;
                }
                b'}' if object => at += 1,
                b']' if !object => at += 1,
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

#[inline(always)]
fn literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    let end = at + word.len();
    (bytes.get(at..end)? == word).then_some(end)
}

/// The end of the value of valid text that starts at `bytes[at]`: only
/// strings and brackets matter.
fn skimmed_value(bytes: &[u8], mut at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => Some(string_end::<false>(bytes, at + 1)?.0),
        b'{' | b'[' => {
            let mut depth = 1usize;
            at += 1;
            loop {
                at += structural(bytes.get(at..)?)?;
                match bytes[at] {
                    b'"' => at = string_end::<false>(bytes, at + 1)?.0,
                    b'{' | b'[' => {
                        depth += 1;
                        at += 1;
                    }
                    _ => {
                        depth -= 1;
                        at += 1;
                        if depth == 0 {
                            return Some(at);
                        }
                    }
                }
            }
        }
        // A number or a literal: up to the next delimiter.
        _ => {
            let rest = bytes.get(at..)?;
            Some(
                at + rest
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                    .unwrap_or(rest.len()),
            )
        }
    }
}

/// The items of the array at `text[at..]` (after whitespace) when it holds
/// at most `max` strings that all decode, and the index just past it.
fn string_items<const CHECK: bool>(
    text: &str,
    at: usize,
    max: usize,
) -> Option<(Vec<Cow<'_, str>>, usize)> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, at);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    // Each item takes at least three bytes (`"",`).
    let mut items = Vec::with_capacity(max.min((bytes.len() - at) / 3 + 1));
    if bytes.get(at) == Some(&b']') {
        return Some((items, at + 1));
    }
    loop {
        if items.len() == max || bytes.get(at) != Some(&b'"') {
            return None;
        }
        let (end, escaped) = string_end::<CHECK>(bytes, at + 1)?;
        items.push(match escaped {
            true => Cow::Owned(serde_json::from_str(text.get(at..end)?).ok()?),
            false => Cow::Borrowed(text.get(at + 1..end - 1)?),
        });
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b']') => return Some((items, at + 1)),
            _ => return None,
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

/// The member named `key`, if it is there once.
pub(crate) fn unique<'a>(members: &Members<'a>, key: &str) -> Found<&'a str> {
    let mut found = Found::Absent;
    for (_, value) in members.iter().filter(|(name, _)| *name == key) {
        found.record(*value);
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

/// True when a lenient reader could find the key `word` (lowercase ASCII)
/// anywhere in `text`, JSON or not: read left to right with every escape
/// decoded (an unknown one as the character after the backslash) and every
/// character case-folded, `text` holds `word`. Quotes are not required (a
/// reader may accept unquoted keys, or read a JSON value inside other
/// text), and folding reads `Result`, `reſult` (U+017F) and `\u0052esult`
/// as a reader that matches keys without regard to case does (Go's
/// `encoding/json`).
pub(crate) fn may_hold_key(text: &str, word: &str) -> bool {
    debug_assert!(word.bytes().all(|b| b.is_ascii_lowercase()));
    let mut read = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        let c = match c {
            '\\' => unescaped(&mut chars),
            c => c,
        };
        read.extend(c.to_uppercase().flat_map(char::to_lowercase));
    }
    read.contains(word)
}

/// The character an escape stands for, its backslash read; lenient: an
/// escape JSON does not allow stands for the character after the backslash.
fn unescaped(chars: &mut std::str::Chars<'_>) -> char {
    let rest = chars.as_str();
    let Some(c) = chars.next() else {
        return '\\';
    };
    match c {
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'u' => match rest
            .get(1..5)
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        {
            Some(unit) => {
                chars.nth(3);
                // A surrogate, paired or not, is no letter.
                char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER)
            }
            None => 'u',
        },
        c => c,
    }
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
    let mut id = Found::Absent;
    Walk::document(text, |walk, key| match &*key {
        "id" => {
            id.record(walk.value()?);
            Some(())
        }
        _ => walk.skip(),
    })?;
    let id = id.one().filter(|id| is_usable_id(id))?;
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
        assert_eq!(unique(&m, "b"), Found::Ambiguous);
        assert_eq!(unique(&m, "a"), Found::One(r#"{"x":[1,2]}"#));
        assert_eq!(unique(&m, "z"), Found::Absent);
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
    fn a_key_is_found_in_any_spelling_a_lenient_reader_folds() {
        let holding = [
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"Result":{}}"#,
            r#"{"RESULT":{}}"#,
            r#"{"\u0072esult":{}}"#,
            r#"{"\u0052E\u0053ULT":{}}"#,
            "{\"re\u{17f}ult\":{}}",
            r#"{result:{}}"#,
            r#"Bad Request: {"id":1,"result":{}} trailing"#,
            r#"{"re\sult":1}"#,
        ];
        for text in holding {
            assert!(may_hold_key(text, "result"), "{text}");
        }
        let clear = [
            "",
            "Bad Request: Session ID is required",
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#,
            r#"{"res":"ult"}"#,
            r#"{"\\u0072esult":1}"#,
            r#"{"\resul":1}"#,
            r#"{"resul\t":1}"#,
            r#"{"\u00XXesult":1}"#,
            r#"{"\ud800esult":1}"#,
            "trailing backslash \\",
            "\\u007",
        ];
        for text in clear {
            assert!(!may_hold_key(text, "result"), "{text}");
        }
    }

    #[test]
    fn splice_replaces_only_the_parts() {
        let text = r#"{"id":7, "params" : {"n": {"a":true}} , "z":1}"#;
        let params = unique(&members(text).unwrap(), "params").one().unwrap();
        let n = unique(&members(params).unwrap(), "n").one().unwrap();
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
        let object = Walk::document(text, |walk, _| walk.skip()).is_some();
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
