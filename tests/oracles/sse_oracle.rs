//! The SSE check shared by the `sse` fuzz target and `tests/properties.rs`
//! (included there with `#[path]`).
//!
//! [`check`] parses an input whole, in the given chunks (draining after each
//! or only at the end) and byte by byte, and panics unless all agree, the raw
//! bytes plus the tail are the input, and every event written with the writer
//! parses back to its fields.

#![allow(dead_code)]

use mcp_edge::fuzzing::{sse_parse, sse_write, SseEvent};

/// Runs every check for `input` split into `chunks`; `seed` varies the
/// written-back event.
pub fn check(input: &[u8], chunks: &[&[u8]], seed: u8) {
    assert_eq!(chunks.concat(), input);
    let header = seed;
    let one = sse_parse(&[input], false);
    let mut joined = Vec::new();
    for event in &one.0 {
        assert!(!event.raw.is_empty(), "an empty block");
        joined.extend_from_slice(&event.raw);
    }
    if let Some(tail) = &one.1 {
        assert!(!tail.is_empty(), "an empty tail");
        joined.extend_from_slice(tail);
    }
    assert_eq!(joined, input, "raw + tail != input");
    assert_eq!(one, reference(input), "disagrees with the reference parser");
    assert_eq!(sse_parse(chunks, false), one, "split changed the events");
    assert_eq!(
        sse_parse(chunks, true),
        one,
        "lazy draining changed the events"
    );
    if input.len() <= 512 {
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(
            sse_parse(&bytes, false),
            one,
            "byte-by-byte changed the events"
        );
    }

    // Every parsed event written out parses back to one event with the same fields
    // (data line ends were already normalized by parsing; event/id hold no line break).
    for event in &one.0 {
        let data = event.data.as_deref().unwrap_or("");
        let written = sse_write(
            event.event.as_deref(),
            event.id.as_deref(),
            event.retry,
            data,
        );
        let (mut back, tail) = sse_parse(&[&written], false);
        assert_eq!(tail, None);
        assert_eq!(back.len(), 1, "{written:?}");
        let back: SseEvent = back.remove(0);
        assert_eq!(back.raw, written);
        assert_eq!(
            (back.data.as_deref(), &back.event, &back.id, back.retry),
            (Some(data), &event.event, &event.id, event.retry),
            "write/parse round trip"
        );
    }
    // The input read as text is also written and parsed back: its first line is an
    // event name, its second an id, the rest data (line ends normalized).
    let text = String::from_utf8_lossy(input);
    let mut lines = text.splitn(3, '\n');
    let event = lines.next();
    let id = lines.next();
    let data = lines.next().unwrap_or("");
    let retry = (header & 8 != 0).then(|| u64::from(header) << 40 | input.len() as u64);
    let written = sse_write(event, id, retry, data);
    let (back, tail) = sse_parse(&[&written], false);
    assert_eq!(tail, None);
    assert_eq!(back.len(), 1);
    let cut = |s: &str| s.split(['\r', '\n']).next().unwrap_or("").to_owned();
    let expected_id = id.map(cut).filter(|id| !id.contains('\0'));
    assert_eq!(back[0].event, event.map(cut));
    assert_eq!(back[0].id, expected_id);
    assert_eq!(back[0].retry, retry);
    assert_eq!(
        back[0].data.as_deref(),
        Some(data.replace("\r\n", "\n").replace('\r', "\n").as_str())
    );
}

/// A plain whole-input SSE parser written from the WHATWG rules: BOM skipped
/// once, lines end at CRLF, CR or LF (a CR at the very end ends its line), a
/// blank line ends a block, `:` lines are comments, one space after the colon
/// is dropped, data lines join with LF, `id` with NUL and non-digit or
/// overflowing `retry` are ignored. Bytes after the last complete block are
/// the tail.
pub fn reference(input: &[u8]) -> (Vec<SseEvent>, Option<Vec<u8>>) {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let mut events = Vec::new();
    let mut block_start = 0;
    let mut i = if input.starts_with(BOM) { BOM.len() } else { 0 };
    let mut line_start = i;
    let mut fields = SseEvent {
        raw: Vec::new(),
        data: None,
        event: None,
        id: None,
        retry: None,
    };
    while i < input.len() {
        let b = input[i];
        if b != b'\r' && b != b'\n' {
            i += 1;
            continue;
        }
        let line = &input[line_start..i];
        let end = if b == b'\r' && input.get(i + 1) == Some(&b'\n') {
            i + 2
        } else {
            i + 1
        };
        if line.is_empty() {
            let mut event = std::mem::replace(
                &mut fields,
                SseEvent {
                    raw: Vec::new(),
                    data: None,
                    event: None,
                    id: None,
                    retry: None,
                },
            );
            event.raw = input[block_start..end].to_vec();
            events.push(event);
            block_start = end;
        } else if line[0] != b':' {
            let (name, value) = match line.iter().position(|&c| c == b':') {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &b""[..]),
            };
            let text = String::from_utf8_lossy(value).into_owned();
            match name {
                b"data" => match &mut fields.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(&text);
                    }
                    None => fields.data = Some(text),
                },
                b"event" => fields.event = Some(text),
                b"id" if !value.contains(&0) => fields.id = Some(text),
                b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                    if let Ok(retry) = text.parse() {
                        fields.retry = Some(retry);
                    }
                }
                _ => {}
            }
        }
        i = end;
        line_start = end;
    }
    let tail = (block_start < input.len()).then(|| input[block_start..].to_vec());
    (events, tail)
}
