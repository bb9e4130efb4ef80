//! Incremental `text/event-stream` (server-sent events) codec that keeps raw bytes.
//!
//! [`Parser`] splits an SSE byte stream into event blocks and yields each one as an
//! [`Event`] carrying both its parsed fields and the exact bytes it was made of, so a
//! middleware can pass an event on untouched, drop it, or rewrite it with
//! [`write_event`]. Parsing follows the WHATWG HTML "Server-sent events"
//! interpretation rules. The parser only holds bytes that are not yet yielded: normally
//! the event currently being read.
//!
//! Why not an SSE crate: the SSE parsers on crates.io decode each event into owned
//! fields and drop the bytes it came in, so a pass-through can neither forward an event
//! byte for byte (comments, unknown fields and line ends included) nor know where one
//! ended in the stream; this codec keeps both, and decodes a field only when asked.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};
use memchr::{memchr, memchr2};

/// The UTF-8 byte order mark, skipped (once) at the very start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One event block of an SSE stream: everything from the end of the previous block up to and including the blank line that ends this one.
///
/// A block need not be a dispatchable event: a keep-alive (`: ping\n\n`) or a stray
/// blank line is a block too. Following the spec, a consumer dispatches a message only
/// when [`Event::data`] is `Some` (an empty `data:` line gives `Some("")`, which the
/// spec dispatches with empty data).
///
/// A field given on one line stays a span of `raw` and is decoded only when asked
/// for: the usual event (one `data` line) costs no copy and no allocation.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// The exact bytes of the block as received (including a leading BOM for the first block, comment lines, unknown fields, line ends, the terminating blank line).
    pub(crate) raw: Bytes,
    /// The `data` lines.
    data: Option<Text>,
    /// The `event` field (last one wins).
    event: Option<Text>,
    /// The `id` field (last one wins; an id containing NUL is ignored per spec).
    id: Option<Text>,
    /// The `retry` field if it is all ASCII digits (last valid one wins; a value too large for `u64` is ignored).
    pub(crate) retry: Option<u64>,
    /// True when every line of the block is a comment or blank.
    comment_only: bool,
    /// True when `raw` holds something its fields do not say.
    odd: bool,
}

/// A field's value: one line's value as a span of the block, or the `data`
/// of several lines joined.
#[derive(Debug, Clone)]
enum Text {
    /// `raw[start..end]`, not yet decoded.
    Span(usize, usize),
    /// Decoded lines joined with "\n".
    Joined(String),
}

impl Text {
    fn decode<'a>(&'a self, block: &'a [u8]) -> Cow<'a, str> {
        match self {
            Text::Span(start, end) => text(&block[*start..*end]),
            Text::Joined(joined) => Cow::Borrowed(joined),
        }
    }
}

impl Event {
    /// `data` lines joined with "\n" as the SSE spec says (one optional space after
    /// the colon removed, invalid UTF-8 replaced); `None` if the block had no data line.
    pub(crate) fn data(&self) -> Option<Cow<'_, str>> {
        self.data.as_ref().map(|data| data.decode(&self.raw))
    }

    /// The `event` field (last one wins), if any.
    pub(crate) fn event(&self) -> Option<Cow<'_, str>> {
        self.event.as_ref().map(|event| event.decode(&self.raw))
    }

    /// The `id` field (last one wins; an id containing NUL is ignored per spec), if any.
    pub(crate) fn id(&self) -> Option<Cow<'_, str>> {
        self.id.as_ref().map(|id| id.decode(&self.raw))
    }

    /// True when the block has only comments (lines starting with ':') and/or blank lines: a keep-alive.
    pub(crate) fn is_comment_only(&self) -> bool {
        self.comment_only
    }

    /// True when `raw` says exactly what the parsed fields do, so that
    /// passing it on passes nothing unchecked: only `data`, `event`, `id`
    /// and `retry` fields (at most one `data` line) and comments, each line
    /// ending in LF or CRLF, no byte order mark. A block with an unknown
    /// field, a line without a colon, a CR-only line end, a leading BOM or
    /// several `data` lines is not plain. (Invalid UTF-8 in `data` shows as a
    /// decoded [`Event::data`] that is owned.)
    pub(crate) fn is_plain(&self) -> bool {
        !self.odd
    }

    /// This event with its `data` replaced: same `event`, `id` and `retry`,
    /// serialized anew.
    pub(crate) fn with_data(&self, data: &str) -> Bytes {
        let (event, id) = (self.event(), self.id());
        let fields = EventFields {
            event: event.as_deref(),
            id: id.as_deref(),
            retry: self.retry,
            data,
        };
        let mut out = BytesMut::with_capacity(data.len() + 32);
        write_event(&fields, &mut out);
        out.freeze()
    }
}

/// Blocks are equal when their bytes and decoded fields are, however the
/// fields are held.
impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
            && self.data() == other.data()
            && self.event() == other.event()
            && self.id() == other.id()
            && self.retry == other.retry
            && self.comment_only == other.comment_only
            && self.odd == other.odd
    }
}

impl Eq for Event {}

/// Fields of an event to serialize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct EventFields<'a> {
    /// Value of the `event:` line, if one is to be written (cut at its first line break).
    pub(crate) event: Option<&'a str>,
    /// Value of the `id:` line, if one is to be written (cut at its first line break; omitted if it contains NUL, which receivers ignore).
    pub(crate) id: Option<&'a str>,
    /// Value of the `retry:` line, if one is to be written.
    pub(crate) retry: Option<u64>,
    /// The data; each of its lines becomes one `data:` line.
    pub(crate) data: &'a str,
}

impl EventFields<'_> {
    /// Serializes these fields with [`write_event`] into a fresh buffer.
    pub(crate) fn to_bytes(self) -> Bytes {
        let mut out = BytesMut::new();
        write_event(&self, &mut out);
        out.freeze()
    }
}

/// Serializes an event: `event:`, `id:`, `retry:` lines if present, then one `data: ` line per line of `data` (split on \r\n, \r, \n), then a blank line; line ends are "\n". Output parses back to the same fields.
///
/// "The same" with two caveats that SSE cannot express otherwise: line ends inside
/// `data` come back as "\n", and an `event` or `id` value is cut at its first line
/// break (an `id` containing NUL is not written at all, since receivers ignore it).
pub(crate) fn write_event(fields: &EventFields<'_>, out: &mut BytesMut) {
    out.reserve(fields.data.len() + 16);
    if let Some(event) = fields.event {
        write_line(out, b"event", first_line(event.as_bytes()));
    }
    if let Some(id) = fields.id {
        let id = first_line(id.as_bytes());
        if memchr(0, id).is_none() {
            write_line(out, b"id", id);
        }
    }
    if let Some(retry) = fields.retry {
        // Writing into a `BytesMut` cannot fail.
        let _ = writeln!(out, "retry: {retry}");
    }
    let mut rest = fields.data.as_bytes();
    while let Some(i) = memchr2(b'\r', b'\n', rest) {
        write_line(out, b"data", &rest[..i]);
        let crlf = rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n');
        rest = &rest[i + if crlf { 2 } else { 1 }..];
    }
    write_line(out, b"data", rest);
    out.extend_from_slice(b"\n");
}

/// Writes `name: value\n`.
fn write_line(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 3);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\n");
}

/// `value` up to (excluding) its first CR or LF.
fn first_line(value: &[u8]) -> &[u8] {
    match memchr2(b'\r', b'\n', value) {
        Some(i) => &value[..i],
        None => value,
    }
}

/// Bytes received but not yet yielded.
///
/// A chunk is kept as is (`Shared`) while nothing has to be appended to it, so an event
/// lying in one chunk is yielded as a slice of that chunk without copying. Only when a
/// partial block must be joined with the next chunk are its bytes copied into an
/// `Owned` buffer, which then grows by amortized appends.
#[derive(Debug)]
enum Buf {
    /// A received chunk (or the unyielded rest of one), not copied.
    Shared(Bytes),
    /// Bytes gathered from several chunks.
    Owned(BytesMut),
}

impl Default for Buf {
    fn default() -> Self {
        Buf::Shared(Bytes::new())
    }
}

impl Buf {
    /// The buffered bytes.
    fn as_slice(&self) -> &[u8] {
        match self {
            Buf::Shared(b) => b,
            Buf::Owned(b) => b,
        }
    }

    /// Appends a chunk, copying only when bytes are already buffered.
    fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        if self.as_slice().is_empty() {
            *self = Buf::Shared(chunk);
            return;
        }
        match self {
            Buf::Shared(b) => {
                let mut owned = BytesMut::with_capacity(b.len() + chunk.len());
                owned.extend_from_slice(b);
                owned.extend_from_slice(&chunk);
                *self = Buf::Owned(owned);
            }
            Buf::Owned(b) => b.extend_from_slice(&chunk),
        }
    }

    /// Removes and returns the first `at` bytes.
    fn split_to(&mut self, at: usize) -> Bytes {
        match self {
            Buf::Shared(b) => b.split_to(at),
            Buf::Owned(b) => b.split_to(at).freeze(),
        }
    }
}

/// Fields of the block being read, filled in line by line.
#[derive(Debug, Default)]
struct Pending {
    /// The `data` values so far.
    data: Option<Text>,
    /// Last `event` value.
    event: Option<Text>,
    /// Last valid `id` value.
    id: Option<Text>,
    /// Last valid `retry` value.
    retry: Option<u64>,
    /// Whether a line other than a comment was seen.
    non_comment: bool,
    /// Whether the block holds something its fields do not say (see
    /// [`Event::is_plain`]).
    odd: bool,
}

impl Pending {
    /// Interprets the complete, non-empty line `block[start..end]` (without its
    /// line end); `block` holds the block read so far.
    fn line(&mut self, block: &[u8], start: usize, end: usize) {
        let line = &block[start..end];
        if line.first() == Some(&b':') {
            return;
        }
        self.non_comment = true;
        let (name, value_start) = match memchr(b':', line) {
            Some(colon) => {
                let after = start + colon + 1;
                let space = usize::from(after < end && block[after] == b' ');
                (&line[..colon], after + space)
            }
            None => {
                self.odd = true;
                (line, end)
            }
        };
        let value = Text::Span(value_start, end);
        match name {
            b"data" => {
                self.odd |= self.data.is_some();
                self.data = Some(match self.data.take() {
                    None => value,
                    Some(data) => {
                        let mut joined = match data {
                            Text::Joined(joined) => joined,
                            span => span.decode(block).into_owned(),
                        };
                        joined.push('\n');
                        joined.push_str(&value.decode(block));
                        Text::Joined(joined)
                    }
                });
            }
            b"event" => self.event = Some(value),
            b"id" if memchr(0, &block[value_start..end]).is_none() => self.id = Some(value),
            b"id" => self.odd = true,
            b"retry" => {
                let digits = &block[value_start..end];
                if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                    // All ASCII digits, so valid UTF-8; only overflow can fail.
                    if let Some(retry) = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|v| v.parse().ok())
                    {
                        self.retry = Some(retry);
                        return;
                    }
                }
                self.odd = true;
            }
            _ => self.odd = true,
        }
    }
}

/// `value` as text, invalid UTF-8 replaced. `from_utf8` first: its ASCII
/// fast path is much cheaper than `from_utf8_lossy` on the usual valid line.
fn text(value: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(value) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(value),
    }
}

/// Incremental parser.
///
/// Feed chunks with [`Parser::push`] and take events with [`Parser::next_event`] until
/// it returns `None`; at the end of the stream call [`Parser::finish`]. The result does
/// not depend on how the stream is split into chunks. Each byte is scanned once, so a
/// long event arriving in many small chunks costs O(n) overall.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    /// Bytes not yet yielded; the block being read starts at offset 0.
    buf: Buf,
    /// Offset in `buf` where the current (not yet ended) line starts.
    line_start: usize,
    /// Offset in `buf` up to which the current line was searched for a line end.
    scan: usize,
    /// The previous line ended with CR: an LF right after it belongs to that line end.
    skip_lf: bool,
    /// The block ended with a blank line ending in CR; this is the offset after the CR.
    /// The block's end is known once the next byte shows whether an LF follows.
    cr_end: Option<usize>,
    /// The stream start was checked for a BOM.
    bom_done: bool,
    /// Fields of the block being read.
    block: Pending,
    /// Complete events found by [`Parser::finish`], not yet taken.
    ready: VecDeque<Event>,
}

impl Parser {
    /// A parser at the start of a stream.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends a received chunk (may be empty). Chunks are `bytes::Bytes`; split them with `split_to`/`slice` so raw bytes are not copied when an event lies in one chunk.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        self.buf.push(chunk);
    }

    /// The next complete event, if one is buffered.
    ///
    /// A block whose terminating blank line ends in CR at the end of the buffered bytes
    /// is held back until the next byte (or [`Parser::finish`]) shows whether an LF
    /// completes that line end, so `raw` never depends on chunk boundaries.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        if let Some(event) = self.ready.pop_front() {
            return Some(event);
        }
        self.parse(false)
    }

    /// The stream ended: returns the bytes of a trailing incomplete block (if any) so a pass-through loses nothing; it is not an event (the spec discards an unterminated event).
    ///
    /// Every complete block still buffered, including one held back because it ended in
    /// CR, stays available to [`Parser::next_event`], which should be drained after this
    /// call; those events precede the returned tail in the stream. Afterwards the parser
    /// is back at the start of a stream (apart from those queued events), so it may be
    /// reused for a new one.
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        while let Some(event) = self.parse(true) {
            self.ready.push_back(event);
        }
        let ready = std::mem::take(&mut self.ready);
        let mut rest = std::mem::replace(
            self,
            Self {
                ready,
                ..Self::default()
            },
        );
        let len = rest.buf.as_slice().len();
        let tail = rest.buf.split_to(len);
        (!tail.is_empty()).then_some(tail)
    }

    /// Reads lines from where the last call stopped until a block ends. At `eof` a
    /// trailing CR ends its line without waiting for a possible LF.
    fn parse(&mut self, eof: bool) -> Option<Event> {
        if !self.bom_done {
            let buf = self.buf.as_slice();
            let n = buf.len().min(BOM.len());
            if buf[..n] != BOM[..n] {
                self.bom_done = true;
            } else if n == BOM.len() {
                self.bom_done = true;
                self.line_start = n;
                self.scan = n;
                self.block.odd = true;
            } else {
                // Could still become a BOM; at eof these bytes are the tail.
                return None;
            }
        }
        loop {
            let buf = self.buf.as_slice();
            if let Some(end) = self.cr_end {
                return if end < buf.len() {
                    let crlf = buf[end] == b'\n';
                    self.block.odd |= !crlf;
                    Some(self.take(end + usize::from(crlf)))
                } else if eof {
                    self.block.odd = true;
                    Some(self.take(end))
                } else {
                    None
                };
            }
            if self.skip_lf {
                if self.line_start == buf.len() {
                    return None;
                }
                self.skip_lf = false;
                if buf[self.line_start] == b'\n' {
                    self.line_start += 1;
                    self.scan = self.line_start;
                } else {
                    self.block.odd = true;
                }
            }
            let Some(found) = memchr2(b'\r', b'\n', &buf[self.scan..]) else {
                self.scan = buf.len();
                return None;
            };
            let at = self.scan + found;
            let cr = buf[at] == b'\r';
            if at == self.line_start {
                // A blank line: the block ends with its line end.
                if cr {
                    self.cr_end = Some(at + 1);
                    continue;
                }
                return Some(self.take(at + 1));
            }
            self.block.line(buf, self.line_start, at);
            self.line_start = at + 1;
            self.scan = at + 1;
            self.skip_lf = cr;
        }
    }

    /// Yields the block made of the first `end` buffered bytes.
    fn take(&mut self, end: usize) -> Event {
        let raw = self.buf.split_to(end);
        self.line_start = 0;
        self.scan = 0;
        self.skip_lf = false;
        self.cr_end = None;
        let block = std::mem::take(&mut self.block);
        Event {
            raw,
            data: block.data,
            event: block.event,
            id: block.id,
            retry: block.retry,
            comment_only: !block.non_comment,
            odd: block.odd,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks`, draining events after each push, then finishes.
    fn run(chunks: impl IntoIterator<Item = Bytes>) -> (Vec<Event>, Option<Bytes>) {
        let mut parser = Parser::new();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.push(chunk);
            while let Some(event) = parser.next_event() {
                events.push(event);
            }
        }
        let tail = parser.finish();
        while let Some(event) = parser.next_event() {
            events.push(event);
        }
        assert!(parser.finish().is_none(), "finish leaves nothing behind");
        (events, tail)
    }

    /// Feeds all `chunks` before taking any event.
    fn run_lazily(chunks: impl IntoIterator<Item = Bytes>) -> (Vec<Event>, Option<Bytes>) {
        let mut parser = Parser::new();
        for chunk in chunks {
            parser.push(chunk);
        }
        let mut events = Vec::new();
        while let Some(event) = parser.next_event() {
            events.push(event);
        }
        let tail = parser.finish();
        while let Some(event) = parser.next_event() {
            events.push(event);
        }
        (events, tail)
    }

    /// Asserts that the raw bytes plus the tail are exactly `input`.
    fn assert_lossless(input: &[u8], (events, tail): &(Vec<Event>, Option<Bytes>)) {
        let mut joined = Vec::new();
        for event in events {
            assert!(!event.raw.is_empty());
            joined.extend_from_slice(&event.raw);
        }
        if let Some(tail) = tail {
            assert!(!tail.is_empty());
            joined.extend_from_slice(tail);
        }
        assert_eq!(joined, input, "raw bytes + tail must equal the input");
    }

    /// An event's fields, decoded.
    #[derive(Default)]
    struct Fields {
        data: Option<String>,
        event: Option<String>,
        id: Option<String>,
        retry: Option<u64>,
        non_comment: bool,
        odd: bool,
    }

    impl Fields {
        fn event(self, raw: &[u8]) -> Event {
            Event {
                raw: Bytes::copy_from_slice(raw),
                data: self.data.map(Text::Joined),
                event: self.event.map(Text::Joined),
                id: self.id.map(Text::Joined),
                retry: self.retry,
                comment_only: !self.non_comment,
                odd: self.odd,
            }
        }
    }

    /// The fields of `event` as [`write_event`] takes them, owned.
    fn decoded(event: &Event) -> (Option<String>, Option<String>, Option<u64>, String) {
        let data = event.data().unwrap_or_default().into_owned();
        let text = |field: Option<Cow<'_, str>>| field.map(Cow::into_owned);
        (text(event.event()), text(event.id()), event.retry, data)
    }

    /// `fields` owned, to compare with [`decoded`].
    fn owned(fields: EventFields<'_>) -> (Option<String>, Option<String>, Option<u64>, String) {
        let text = |field: Option<&str>| field.map(str::to_owned);
        (
            text(fields.event),
            text(fields.id),
            fields.retry,
            fields.data.to_owned(),
        )
    }

    /// A straightforward whole-input parser written from the spec, to compare with.
    fn reference(input: &[u8]) -> (Vec<Event>, Option<Bytes>) {
        let mut events = Vec::new();
        let mut block_start = 0;
        let mut pos = if input.starts_with(BOM) { BOM.len() } else { 0 };
        let mut pending = Fields {
            odd: pos > 0,
            ..Fields::default()
        };
        while let Some(offset) = input[pos..].iter().position(|&b| b == b'\r' || b == b'\n') {
            let at = pos + offset;
            let next = if input[at] == b'\r' && input.get(at + 1) == Some(&b'\n') {
                at + 2
            } else {
                pending.odd |= input[at] == b'\r';
                at + 1
            };
            let line = String::from_utf8_lossy(&input[pos..at]);
            if line.is_empty() {
                let p = std::mem::take(&mut pending);
                events.push(p.event(&input[block_start..next]));
                block_start = next;
            } else if !line.starts_with(':') {
                pending.non_comment = true;
                let (name, value) = match line.split_once(':') {
                    Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
                    None => {
                        pending.odd = true;
                        (&*line, "")
                    }
                };
                match name {
                    "data" => {
                        pending.odd |= pending.data.is_some();
                        let mut data = pending.data.take().map_or(String::new(), |d| d + "\n");
                        data.push_str(value);
                        pending.data = Some(data);
                    }
                    "event" => pending.event = Some(value.to_owned()),
                    "id" if !value.contains('\0') => pending.id = Some(value.to_owned()),
                    "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                        match value.parse() {
                            Ok(retry) => pending.retry = Some(retry),
                            Err(_) => pending.odd = true,
                        }
                    }
                    _ => pending.odd = true,
                }
            }
            pos = next;
        }
        let tail =
            (block_start < input.len()).then(|| Bytes::copy_from_slice(&input[block_start..]));
        (events, tail)
    }

    /// Parses `input` whole, split in two at every byte, as 1-byte chunks with empty
    /// chunks between them, and all pushed before draining; asserts every way gives the
    /// same events and tail, matching the reference parser, and loses nothing.
    fn check(input: &[u8]) -> (Vec<Event>, Option<Bytes>) {
        let whole = Bytes::copy_from_slice(input);
        let expected = run([whole.clone()]);
        assert_lossless(input, &expected);
        assert_eq!(expected, reference(input), "reference parser disagrees");
        for at in 0..=input.len() {
            let split = run([whole.slice(..at), whole.slice(at..)]);
            assert_eq!(split, expected, "split at {at} of {:?}", whole);
        }
        let bytewise =
            || (0..input.len()).flat_map(|i| [Bytes::new(), whole.slice(i..i + 1), Bytes::new()]);
        assert_eq!(run(bytewise()), expected, "1-byte chunks");
        assert_eq!(
            run_lazily(bytewise()),
            expected,
            "1-byte chunks, drained at end"
        );
        assert_eq!(
            run_lazily([whole.clone()]),
            expected,
            "whole, drained at end"
        );
        expected
    }

    /// `event`, marked as holding more than its fields say.
    fn odd(mut event: Event) -> Event {
        event.odd = true;
        event
    }

    /// Builds an expected event.
    fn ev(raw: &str, data: Option<&str>) -> Event {
        Fields {
            data: data.map(str::to_owned),
            non_comment: data.is_some(),
            ..Fields::default()
        }
        .event(raw.as_bytes())
    }

    #[test]
    fn single_event() {
        let (events, tail) = check(b"data: hello\n\n");
        assert_eq!(events, vec![ev("data: hello\n\n", Some("hello"))]);
        assert!(!events[0].is_comment_only());
        assert_eq!(tail, None);
    }

    #[test]
    fn several_events() {
        let (events, tail) = check(b"data: a\n\ndata: b\n\ndata: c\n\n");
        assert_eq!(
            events,
            vec![
                ev("data: a\n\n", Some("a")),
                ev("data: b\n\n", Some("b")),
                ev("data: c\n\n", Some("c")),
            ]
        );
        assert_eq!(tail, None);
    }

    #[test]
    fn multi_line_data() {
        let (events, _) = check(b"data: one\ndata: two\ndata:\ndata:  four\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data().as_deref(), Some("one\ntwo\n\n four"));
    }

    #[test]
    fn event_id_retry() {
        let (events, tail) = check(
            b"event: update\nid: 42\nretry: 3000\ndata: x\n\nevent: a\nevent: b\nid: 1\nid: 2\n\n",
        );
        assert_eq!(events.len(), 2);
        let e = &events[0];
        assert_eq!(e.event().as_deref(), Some("update"));
        assert_eq!(e.id().as_deref(), Some("42"));
        assert_eq!(e.retry, Some(3000));
        assert_eq!(e.data().as_deref(), Some("x"));
        let e = &events[1];
        assert_eq!(e.event().as_deref(), Some("b"));
        assert_eq!(e.id().as_deref(), Some("2"));
        assert_eq!(e.data(), None);
        assert!(!e.is_comment_only());
        assert_eq!(tail, None);
    }

    #[test]
    fn invalid_retry_and_nul_id_are_ignored() {
        let (events, _) = check(
            b"retry: 10\nretry: 1x\nretry:\nretry: 99999999999999999999999\nid: ok\nid: a\0b\ndata\n\n",
        );
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].retry, Some(10));
        assert_eq!(events[0].id().as_deref(), Some("ok"));
        assert_eq!(events[0].data().as_deref(), Some(""));
        let (events, _) = check(b"retry: -5\nretry: 1.5\nretry:  7\ndata: x\n\n");
        assert_eq!(events[0].retry, None);
    }

    #[test]
    fn comments_and_keep_alives() {
        let (events, tail) = check(b": ping\n\n: hello\ndata: x\n: bye\n\n:\n:\n\n");
        assert_eq!(
            events,
            vec![
                ev(": ping\n\n", None),
                ev(": hello\ndata: x\n: bye\n\n", Some("x")),
                ev(":\n:\n\n", None),
            ]
        );
        assert!(events[0].is_comment_only());
        assert!(!events[1].is_comment_only());
        assert!(events[2].is_comment_only());
        assert_eq!(tail, None);
    }

    #[test]
    fn stray_blank_lines_are_comment_only_blocks() {
        let (events, _) = check(b"\n\r\n\rdata: x\n\n\n");
        assert_eq!(
            events,
            vec![
                ev("\n", None),
                ev("\r\n", None),
                odd(ev("\r", None)),
                ev("data: x\n\n", Some("x")),
                ev("\n", None),
            ]
        );
        assert!(events
            .iter()
            .filter(|e| e.data().is_none())
            .all(Event::is_comment_only));
    }

    #[test]
    fn crlf_and_cr_line_ends() {
        let (events, tail) = check(b"data: a\r\ndata: b\r\n\r\ndata: c\rdata: d\r\rdata: e\n\r\n");
        assert_eq!(
            events,
            vec![
                odd(ev("data: a\r\ndata: b\r\n\r\n", Some("a\nb"))),
                odd(ev("data: c\rdata: d\r\r", Some("c\nd"))),
                ev("data: e\n\r\n", Some("e")),
            ]
        );
        assert_eq!(tail, None);
    }

    #[test]
    fn cr_then_crlf_keeps_the_lf_in_the_block() {
        let (events, tail) = check(b"data: x\r\r\ndata: y\r\r");
        assert_eq!(
            events,
            vec![
                odd(ev("data: x\r\r\n", Some("x"))),
                odd(ev("data: y\r\r", Some("y")))
            ]
        );
        assert_eq!(tail, None);
    }

    #[test]
    fn block_ending_in_cr_waits_for_the_next_byte() {
        let mut parser = Parser::new();
        parser.push(Bytes::from_static(b"data: x\n\r"));
        assert_eq!(parser.next_event(), None);
        parser.push(Bytes::new());
        assert_eq!(parser.next_event(), None);
        parser.push(Bytes::from_static(b"\n"));
        assert_eq!(parser.next_event(), Some(ev("data: x\n\r\n", Some("x"))));
        parser.push(Bytes::from_static(b"data: y\r\r"));
        assert_eq!(parser.next_event(), None);
        parser.push(Bytes::from_static(b":"));
        assert_eq!(parser.next_event(), Some(odd(ev("data: y\r\r", Some("y")))));
        assert_eq!(parser.next_event(), None);
        parser.push(Bytes::from_static(b"\n\r"));
        assert_eq!(parser.next_event(), None);
        assert_eq!(parser.finish(), None);
        assert_eq!(parser.next_event(), Some(odd(ev(":\n\r", None))));
        assert_eq!(parser.next_event(), None);
    }

    #[test]
    fn plain_blocks_say_what_their_fields_do() {
        let plain = |input: &[u8]| {
            check(input)
                .0
                .iter()
                .map(Event::is_plain)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            plain(b"data: a\n\n: ping\r\n\r\nid: 1\nevent: e\nretry: 5\ndata: b\n\n"),
            [true; 3]
        );
        assert_eq!(
            plain(b"\xEF\xBB\xBFdata: a\n\ndata: b\n\n"),
            [false, true],
            "a BOM"
        );
        assert_eq!(
            plain(b"\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n"),
            [false, false],
            "a BOM inside"
        );
        assert_eq!(plain(b"data: a\nfoo: x\n\n"), [false], "an unknown field");
        assert_eq!(
            plain(b"data: a\ndata\n\n"),
            [false],
            "a line without a colon"
        );
        assert_eq!(plain(b"data: a\ndata: b\n\n"), [false], "two data lines");
        assert_eq!(
            plain(b"data: a\rdata: b\n\n"),
            [false],
            "a CR-only line end"
        );
        assert_eq!(
            plain(b"data: a\n\r: x\n\n"),
            [false, true],
            "a CR-only blank line"
        );
        assert_eq!(
            plain(b"retry: x\ndata: a\n\n"),
            [false],
            "a retry that is not a number"
        );
        assert_eq!(plain(b"id: a\0b\ndata: a\n\n"), [false], "an id with NUL");
    }

    #[test]
    fn bom_is_skipped_but_kept_in_raw() {
        let (events, tail) = check(b"\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].raw, &b"\xEF\xBB\xBFdata: x\n\n"[..]);
        assert_eq!(events[0].data().as_deref(), Some("x"));
        // Only the stream start may carry a BOM; later it is part of a field name.
        assert_eq!(events[1].raw, &b"\xEF\xBB\xBFdata: y\n\n"[..]);
        assert_eq!(events[1].data(), None);
        assert!(!events[1].is_comment_only());
        assert_eq!(tail, None);

        let (events, _) = check(b"\xEF\xBB\xBF: keep-alive\n\n");
        assert!(events[0].is_comment_only());
        let (events, tail) = check(b"\xEF\xBB");
        assert!(events.is_empty());
        assert_eq!(tail.as_deref(), Some(&b"\xEF\xBB"[..]));
        let (events, tail) = check(b"\xEF\xBB\xBF");
        assert!(events.is_empty());
        assert_eq!(tail.as_deref(), Some(&b"\xEF\xBB\xBF"[..]));
        let (events, _) = check(b"\xEF\xBBdata: x\n\n");
        assert_eq!(events[0].data(), None, "a partial BOM is not skipped");
    }

    #[test]
    fn field_spacing_and_colons() {
        let (events, _) = check(b"data:x\nevent:e\nid:7\nretry:5\n\n");
        let e = &events[0];
        assert_eq!(
            (
                e.data().as_deref(),
                e.event().as_deref(),
                e.id().as_deref(),
                e.retry
            ),
            (Some("x"), Some("e"), Some("7"), Some(5))
        );
        let (events, _) = check(b"data:  two spaces\ndata: a:b: c\ndata:::\n\n");
        assert_eq!(events[0].data().as_deref(), Some(" two spaces\na:b: c\n::"));
    }

    #[test]
    fn field_without_colon() {
        let (events, _) = check(b"data\ndata\n\nevent\nid\nretry\n\n");
        assert_eq!(events[0].data().as_deref(), Some("\n"));
        assert_eq!(events[1].event().as_deref(), Some(""));
        assert_eq!(events[1].id().as_deref(), Some(""));
        assert_eq!(events[1].retry, None);
        assert_eq!(events[1].data(), None);
    }

    #[test]
    fn empty_data() {
        let (events, _) = check(b"data:\n\ndata: \n\n");
        assert_eq!(
            events,
            vec![ev("data:\n\n", Some("")), ev("data: \n\n", Some(""))]
        );
    }

    #[test]
    fn unknown_fields_are_ignored_but_kept() {
        let (events, _) = check(b"foo: bar\nData: no\ndata : no\ndata: yes\n\nfoo\n\n");
        assert_eq!(
            events[0].raw,
            &b"foo: bar\nData: no\ndata : no\ndata: yes\n\n"[..]
        );
        assert_eq!(events[0].data().as_deref(), Some("yes"));
        assert_eq!(events[1].data(), None);
        assert!(!events[1].is_comment_only());
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let (events, _) = check(b"data: a\xFFb\xC3\nevent: \xE2\x82\nid: \xF0\x9F\x98\x80\n\n");
        assert_eq!(events[0].data().as_deref(), Some("a\u{FFFD}b\u{FFFD}"));
        assert_eq!(events[0].event().as_deref(), Some("\u{FFFD}"));
        assert_eq!(events[0].id().as_deref(), Some("\u{1F600}"));
    }

    #[test]
    fn trailing_incomplete_event_goes_to_tail() {
        let (events, tail) = check(b"data: a\n\ndata: b\nid: 3\n");
        assert_eq!(events, vec![ev("data: a\n\n", Some("a"))]);
        assert_eq!(tail.as_deref(), Some(&b"data: b\nid: 3\n"[..]));
        let (events, tail) = check(b"data: a\n\ndata: b\r");
        assert_eq!(events.len(), 1);
        assert_eq!(tail.as_deref(), Some(&b"data: b\r"[..]));
        let (events, tail) = check(b"data: partial");
        assert!(events.is_empty());
        assert_eq!(tail.as_deref(), Some(&b"data: partial"[..]));
        let (events, tail) = check(b"");
        assert!(events.is_empty());
        assert_eq!(tail, None);
    }

    #[test]
    fn finish_leaves_complete_events_for_next_event() {
        let mut parser = Parser::new();
        parser.push(Bytes::from_static(b"data: a\n\ndata: b\n\r"));
        parser.push(Bytes::from_static(b"data: c"));
        assert_eq!(parser.finish().as_deref(), Some(&b"data: c"[..]));
        assert_eq!(parser.next_event(), Some(ev("data: a\n\n", Some("a"))));
        assert_eq!(parser.next_event(), Some(odd(ev("data: b\n\r", Some("b")))));
        assert_eq!(parser.next_event(), None);
        // The parser is reusable: a new stream may start with a BOM again.
        parser.push(Bytes::from_static(b"\xEF\xBB\xBFdata: d\n\n"));
        assert_eq!(
            parser
                .next_event()
                .and_then(|e| e.data().map(Cow::into_owned)),
            Some("d".to_owned())
        );
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn jsonrpc_payloads() {
        let input: &[u8] = b"event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n\
            : keep-alive\n\n\
            event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n";
        let (events, tail) = check(input);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].event().as_deref(), Some("message"));
        assert_eq!(events[0].id().as_deref(), Some("5"));
        assert_eq!(
            events[0].data().as_deref(),
            Some(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        );
        let value: serde_json::Value =
            serde_json::from_str(events[2].data().as_deref().unwrap_or_default())
                .unwrap_or_default();
        assert_eq!(value["method"], "notifications/progress");
        assert!(events[1].is_comment_only());
        assert_eq!(tail, None);
    }

    #[test]
    fn raw_is_not_copied_when_an_event_lies_in_one_chunk() {
        let chunk = Bytes::from_static(b"data: a\n\n: ping\n\ndata: partial");
        let base = chunk.as_ptr() as usize;
        let mut parser = Parser::new();
        parser.push(chunk.clone());
        let first = parser.next_event().map(|e| e.raw);
        let second = parser.next_event().map(|e| e.raw);
        assert_eq!(first.as_ref().map(|r| r.as_ptr() as usize), Some(base));
        assert_eq!(second.as_ref().map(|r| r.as_ptr() as usize), Some(base + 9));
        assert_eq!(parser.next_event(), None);
        assert_eq!(
            parser.finish().map(|t| t.as_ptr() as usize),
            Some(base + 17)
        );
    }

    #[test]
    fn event_split_across_many_chunks() {
        let input: &[u8] = b"event: message\r\nid: abc\r\ndata: {\"a\":[1,2,3],\"b\":\"x:y\"}\r\ndata: second line\r\n\r\ndata: next\n\n";
        let whole = Bytes::copy_from_slice(input);
        let expected = check(input);
        for size in 2..input.len() {
            let chunks = (0..input.len())
                .step_by(size)
                .map(|i| whole.slice(i..(i + size).min(input.len())));
            assert_eq!(run(chunks), expected, "chunks of {size}");
        }
        assert_eq!(
            expected.0[0].data().as_deref(),
            Some("{\"a\":[1,2,3],\"b\":\"x:y\"}\nsecond line")
        );
    }

    #[test]
    fn one_mebibyte_data_line() {
        let payload: String = (0..1 << 20)
            .map(|i| if i % 97 == 0 { ':' } else { 'a' })
            .collect();
        let mut input = Vec::new();
        input.extend_from_slice(b"data: ");
        input.extend_from_slice(payload.as_bytes());
        input.extend_from_slice(b"\r\n\r\n: after\n\ndata: tail");
        let whole = Bytes::from(input.clone());
        let expected = run([whole.clone()]);
        assert_lossless(&input, &expected);
        assert_eq!(expected.0.len(), 2);
        assert_eq!(expected.0[0].data().as_deref(), Some(payload.as_str()));
        assert_eq!(expected.1.as_deref(), Some(&b"data: tail"[..]));
        for size in [1, 7, 4096] {
            let chunks = (0..input.len())
                .step_by(size)
                .map(|i| whole.slice(i..(i + size).min(input.len())));
            assert_eq!(run(chunks), expected, "chunks of {size}");
        }
    }

    /// A small deterministic pseudo-random generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn generated_inputs_agree_with_reference() {
        const TOKENS: &[&[u8]] = &[
            b"data",
            b"event",
            b"id",
            b"retry",
            b":",
            b" ",
            b"x",
            b"12",
            b"\r",
            b"\n",
            b"\r\n",
            b"\n\n",
            b"\r\r",
            b"\0",
            b"\xC3\xA9",
            b"\xFF",
            b"\xEF\xBB\xBF",
            b"data: ",
            b": c",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..400 {
            let mut input = Vec::new();
            if rng.below(4) == 0 {
                input.extend_from_slice(BOM);
            }
            for _ in 0..rng.below(24) {
                input.extend_from_slice(TOKENS[rng.below(TOKENS.len())]);
            }
            check(&input);
        }
    }

    /// Parses `bytes` and asserts they are exactly one event with no tail.
    fn parse_one(bytes: &Bytes) -> Event {
        let (mut events, tail) = check(bytes);
        assert_eq!(tail, None);
        assert_eq!(events.len(), 1, "{bytes:?}");
        events.remove(0)
    }

    #[test]
    fn writer_output_parses_back() {
        let fields = EventFields {
            event: Some("message"),
            id: Some("5"),
            retry: Some(1500),
            data: "{\"jsonrpc\":\"2.0\"}\r\nline two\rthree\n",
        };
        let bytes = fields.to_bytes();
        assert_eq!(
            bytes,
            &b"event: message\nid: 5\nretry: 1500\ndata: {\"jsonrpc\":\"2.0\"}\ndata: line two\ndata: three\ndata: \n\n"[..]
        );
        let event = parse_one(&bytes);
        assert_eq!(event.raw, bytes);
        assert_eq!(
            decoded(&event),
            owned(EventFields {
                data: "{\"jsonrpc\":\"2.0\"}\nline two\nthree\n",
                ..fields
            })
        );

        let empty = EventFields::default().to_bytes();
        assert_eq!(empty, &b"data: \n\n"[..]);
        let event = parse_one(&empty);
        assert_eq!(event.data().as_deref(), Some(""));
        assert_eq!((event.event(), event.id(), event.retry), (None, None, None));
    }

    #[test]
    fn writer_cuts_line_breaks_in_event_and_id() {
        let fields = EventFields {
            event: Some("a\nevent: evil"),
            id: Some("1\r\ndata: injected"),
            retry: None,
            data: "ok",
        };
        let event = parse_one(&fields.to_bytes());
        assert_eq!(event.event().as_deref(), Some("a"));
        assert_eq!(event.id().as_deref(), Some("1"));
        assert_eq!(event.data().as_deref(), Some("ok"));
        let event = parse_one(
            &EventFields {
                id: Some("a\0b"),
                ..fields
            }
            .to_bytes(),
        );
        assert_eq!(event.id(), None);
    }

    #[test]
    fn writer_round_trips_generated_events() {
        const PIECES: &[&str] = &[
            "",
            "x",
            " ",
            "  lead",
            ":",
            "a:b",
            "\n",
            "\r",
            "\r\n",
            "\n\r",
            "é",
            "{\"id\":1}",
            "data: ",
        ];
        let mut rng = Rng(12345);
        let mut stream = BytesMut::new();
        let mut expected = Vec::new();
        for _ in 0..300 {
            let text = |rng: &mut Rng, max: usize| -> String {
                (0..rng.below(max))
                    .map(|_| PIECES[rng.below(PIECES.len())])
                    .collect()
            };
            let data = text(&mut rng, 8);
            let event = (rng.below(2) == 0).then(|| text(&mut rng, 3).replace(['\r', '\n'], ""));
            let id = (rng.below(2) == 0).then(|| text(&mut rng, 3).replace(['\r', '\n'], ""));
            let retry = (rng.below(3) == 0).then(|| rng.0 >> rng.below(64));
            let fields = EventFields {
                event: event.as_deref(),
                id: id.as_deref(),
                retry,
                data: &data,
            };
            let before = stream.len();
            write_event(&fields, &mut stream);
            let written = Bytes::copy_from_slice(&stream[before..]);
            let parsed = parse_one(&written);
            let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
            assert_eq!(
                decoded(&parsed),
                owned(EventFields {
                    data: &normalized,
                    ..fields
                })
            );
            assert!(parsed.data().is_some());
            expected.push(parsed);
        }
        let stream = stream.freeze();
        let (events, tail) = run([stream.clone()]);
        assert_eq!(tail, None);
        assert_eq!(events, expected);
        let chunks = (0..stream.len())
            .step_by(5)
            .map(|i| stream.slice(i..(i + 5).min(stream.len())));
        assert_eq!(run(chunks), (expected, None));
    }
}
