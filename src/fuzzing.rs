//! Thin wrappers around crate-private codecs, for the fuzz targets in `fuzz/`
//! and the property tests in `tests/properties.rs`; and around the decision
//! cache, for `benches/decisions.rs`.
//!
//! Built only with the private feature `fuzzing`; not part of the public
//! API: no stability promise, may change or disappear in any release.

use std::borrow::Cow;

use bytes::BytesMut;

use crate::codec::scan::Scanner;
pub use crate::codec::scan::{Method, Outcome};
use crate::codec::sse::{write_event, EventFields, Parser};
use crate::http::classify::Shape;
use crate::http::peek::{Peek, PeekLimits, Scan};
use crate::http::ready::Chunks;

/// How the scanner classifies a method name (from the body or a header).
pub fn classify(name: &[u8]) -> Method {
    Method::from_name(name)
}

/// What the scanner said after one `feed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanStep {
    /// `feed`'s answer, if decided.
    pub decided: Option<Outcome>,
    /// `consumed()` after the call.
    pub consumed: usize,
}

/// The result of scanning a whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRun {
    /// One entry per chunk fed.
    pub steps: Vec<ScanStep>,
    /// `finish()`'s outcome.
    pub outcome: Outcome,
    /// `consumed()` after `finish()`.
    pub consumed: usize,
    /// `method()` after `finish()` (only meaningful for `whole`).
    pub method: Option<Method>,
}

/// Feeds `chunks` to a new scanner (`Scanner::whole()` if `whole`), then
/// finishes it, recording every answer.
pub fn scan_run(chunks: &[&[u8]], whole: bool) -> ScanRun {
    let mut scanner = if whole {
        Scanner::whole()
    } else {
        Scanner::new()
    };
    let steps = chunks
        .iter()
        .map(|chunk| ScanStep {
            decided: scanner.feed(chunk),
            consumed: scanner.consumed(),
        })
        .collect();
    let outcome = scanner.finish();
    ScanRun {
        steps,
        outcome,
        consumed: scanner.consumed(),
        method: scanner.method(),
    }
}

/// Feeds `chunks` to a new `Scanner::new()` and finishes it: the outcome
/// and `consumed()`.
pub fn scan(chunks: &[&[u8]]) -> (Outcome, usize) {
    let run = scan_run(chunks, false);
    (run.outcome, run.consumed)
}

/// How a watching peek (the listen filter's) classifies `body` delivered in
/// one chunk by a body that knows it ended. It reads the rest for a second
/// `method` only when the rest could hold one, so it may answer the first
/// method where the whole-body scan says `Invalid`, never where it says
/// `DuplicateMethod`.
pub fn peek_watching(body: &[u8]) -> Outcome {
    let body = Chunks::of(&[body]);
    let limits = PeekLimits {
        method: usize::MAX,
        listen: usize::MAX,
    };
    let mut peek = Peek::new(body, limits, Scan::Watching);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match peek.poll_classify(&mut cx) {
        std::task::Poll::Ready(classified) => match classified.shape {
            Shape::Decided(outcome) => outcome,
            // `Once` never fails, and nothing is too large.
            other => unreachable!("{other:?}"),
        },
        // `Once` is always ready.
        std::task::Poll::Pending => unreachable!("a ready body"),
    }
}

/// One parsed SSE block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The exact bytes of the block.
    pub raw: Vec<u8>,
    /// Joined `data` lines, if any.
    pub data: Option<String>,
    /// The `event` field, if any.
    pub event: Option<String>,
    /// The `id` field, if any.
    pub id: Option<String>,
    /// The `retry` field, if any.
    pub retry: Option<u64>,
}

/// Parses `chunks` as one SSE stream, draining events after every chunk (or
/// only at the end when `lazily`), then finishes: the events and the tail.
///
/// The chunks are slices of one `Bytes` holding their concatenation, as the
/// body reader hands them over, so the parser's no-copy paths run too.
pub fn sse_parse(chunks: &[&[u8]], lazily: bool) -> (Vec<SseEvent>, Option<Vec<u8>>) {
    let mut parser = Parser::new();
    let mut events = Vec::new();
    let drain = |parser: &mut Parser, events: &mut Vec<SseEvent>| {
        while let Some(event) = parser.next_event() {
            events.push(SseEvent {
                raw: event.raw.to_vec(),
                data: event.data().map(Cow::into_owned),
                event: event.event().map(Cow::into_owned),
                id: event.id().map(Cow::into_owned),
                retry: event.retry,
            });
        }
    };
    for chunk in Chunks::of(chunks).0 {
        parser.push(chunk);
        if !lazily {
            drain(&mut parser, &mut events);
        }
    }
    drain(&mut parser, &mut events);
    let tail = parser.finish();
    drain(&mut parser, &mut events);
    assert!(parser.finish().is_none(), "a finished parser holds nothing");
    (events, tail.map(|tail| tail.to_vec()))
}

/// Serializes one event with `write_event`.
pub fn sse_write(event: Option<&str>, id: Option<&str>, retry: Option<u64>, data: &str) -> Vec<u8> {
    let mut out = BytesMut::new();
    write_event(
        &EventFields {
            event,
            id,
            retry,
            data,
        },
        &mut out,
    );
    out.to_vec()
}

/// The profile's decision cache: what the `ResourceAccess` hook answered,
/// per (caller, URI), for `ttl`.
pub struct Decisions(crate::access::Decisions);

impl Decisions {
    /// An empty cache whose decisions hold for `ttl`.
    pub fn new(ttl: std::time::Duration) -> Self {
        Self(crate::access::Decisions::new(ttl))
    }

    /// The decision on `caller` reading `uri` that holds at `now`, if kept.
    pub fn get(
        &self,
        caller: Option<&crate::hooks::Principal>,
        uri: &str,
        now: std::time::Instant,
    ) -> Option<bool> {
        self.0
            .get(caller, uri, now)
            .map(|decision| decision.readable)
    }

    /// Keeps that `caller` may (or may not) read `uri`, decided at `now`.
    pub fn put(
        &self,
        caller: Option<&crate::hooks::Principal>,
        uri: &str,
        readable: bool,
        now: std::time::Instant,
    ) {
        self.0.put(caller, uri, readable, now);
    }
}
