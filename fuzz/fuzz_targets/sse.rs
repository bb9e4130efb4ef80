//! The SSE codec: any split of any input gives the same events and tail, the
//! raw bytes plus the tail are the input, and what the writer writes parses
//! back to the fields written.
//!
//! Input: byte 0 = number of cut points (low 3 bits), then that many bytes
//! placing the cuts, then the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_edge::fuzzing::{sse_parse, sse_write, SseEvent};

fuzz_target!(|data: &[u8]| {
    let Some((&header, rest)) = data.split_first() else {
        return;
    };
    let cuts = usize::from(header & 7).min(rest.len());
    let (cut_bytes, input) = rest.split_at(cuts);
    let mut points: Vec<usize> = cut_bytes
        .iter()
        .map(|&b| usize::from(b) * (input.len() + 1) / 256)
        .collect();
    points.sort_unstable();
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    for p in points {
        chunks.push(&input[at..p]);
        at = p;
    }
    chunks.push(&input[at..]);

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
    assert_eq!(sse_parse(&chunks, false), one, "split changed the events");
    assert_eq!(sse_parse(&chunks, true), one, "lazy draining changed the events");
    if input.len() <= 2048 {
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(sse_parse(&bytes, false), one, "byte-by-byte changed the events");
    }

    // Every parsed event written out parses back to one event with the same fields
    // (data line ends were already normalized by parsing; event/id hold no line break).
    for event in &one.0 {
        let data = event.data.as_deref().unwrap_or("");
        let written = sse_write(event.event.as_deref(), event.id.as_deref(), event.retry, data);
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
});
