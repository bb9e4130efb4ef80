//! The method-peek check shared by the `method_peek` fuzz target and
//! `tests/properties.rs` (included there with `#[path]`).
//!
//! [`check`] scans a body whole, in the given chunks and byte by byte, with
//! both scanner modes, and panics unless every way gives the same answer, a
//! decision sticks, nothing is read after the deciding byte, and the answer
//! agrees with serde_json (first `method` wins; a second `method` after an
//! intercepted first one is `DuplicateMethod`; in whole mode after any first
//! one, and a non-string first method is read past as `Other`). The listen
//! filter's watching peek of a body read whole answers as the whole-mode
//! scan, or `Other` where that scan finds bad syntax after the method.

#![allow(dead_code)]

use std::fmt;

use mcp_edge::fuzzing::{self, scan_run, Method, Outcome, ScanRun};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Runs every check for `body` split into `chunks` (their concatenation must be `body`).
pub fn check(body: &[u8], chunks: &[&[u8]]) {
    assert_eq!(chunks.concat(), body);
    for whole in [false, true] {
        let one = scan_run(&[body], whole);
        check_steps(&one, &[body]);
        let split = scan_run(chunks, whole);
        check_steps(&split, chunks);
        assert_eq!(
            (one.outcome, one.consumed, one.method),
            (split.outcome, split.consumed, split.method),
            "split changed the answer"
        );
        if body.len() <= 4096 {
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            let bytewise = scan_run(&bytes, whole);
            check_steps(&bytewise, &bytes);
            assert_eq!(
                (one.outcome, one.consumed, one.method),
                (bytewise.outcome, bytewise.consumed, bytewise.method),
                "byte-by-byte changed the answer"
            );
        }
        // The deciding byte: the prefix up to `consumed` decides, one byte less does not.
        let decided_early = one.steps[0].decided.is_some();
        if decided_early {
            assert!(one.consumed >= 1 && one.consumed <= body.len());
            let prefix = scan_run(&[&body[..one.consumed]], whole);
            assert_eq!(prefix.steps[0].decided, Some(one.outcome));
            assert_eq!(prefix.consumed, one.consumed);
            let short = scan_run(&[&body[..one.consumed - 1]], whole);
            assert_eq!(
                short.steps[0].decided, None,
                "decided before the deciding byte"
            );
        } else {
            assert_eq!(
                one.outcome,
                Outcome::Invalid,
                "an undecided body finishes invalid"
            );
            assert_eq!(one.consumed, body.len());
        }

        if let Some(expected) = oracle(body, whole) {
            assert_eq!(one.outcome, expected, "disagrees with serde_json");
        }
    }

    // The listen filter's peek of a body read whole skips the rest of the
    // scan only where it could find bad syntax at most, never a second method:
    // it then answers the first method where the whole-body scan says invalid.
    let whole = scan_run(&[body], true).outcome;
    let watched = fuzzing::peek_watching(body);
    if watched != whole {
        assert_eq!(whole, Outcome::Invalid, "watching peek: {watched:?}");
        assert!(
            [
                Outcome::Method(Method::Other),
                Outcome::Method(Method::Initialize),
                Outcome::Method(Method::Discover),
                Outcome::Method(Method::Listen)
            ]
            .contains(&watched),
            "watching peek: {watched:?}"
        );
    }
}

/// Per feed: a decision sticks and nothing is read after it; before it every byte fed
/// is consumed.
fn check_steps(run: &ScanRun, chunks: &[&[u8]]) {
    let mut fed = 0;
    let mut decided: Option<(Outcome, usize)> = None;
    for (step, chunk) in run.steps.iter().zip(chunks) {
        fed += chunk.len();
        match decided {
            Some((outcome, consumed)) => {
                assert_eq!(step.decided, Some(outcome), "decision changed");
                assert_eq!(step.consumed, consumed, "read after deciding");
            }
            None => match step.decided {
                Some(outcome) => {
                    assert!(step.consumed <= fed);
                    decided = Some((outcome, step.consumed));
                }
                None => assert_eq!(step.consumed, fed, "undecided but skipped bytes"),
            },
        }
    }
    if let Some((outcome, consumed)) = decided {
        assert_eq!(run.outcome, outcome);
        assert_eq!(run.consumed, consumed);
    }
}

/// A top-level document as serde_json reads it, keeping duplicate keys.
enum Doc {
    Object(Vec<(String, serde_json::Value)>),
    Array,
    Scalar,
}

struct DocVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = Doc;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            members.push((key, map.next_value()?));
        }
        Ok(Doc::Object(members))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Doc::Array)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_str<E>(self, _: &str) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_unit<E>(self) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
}

/// What the scanner must answer for a body serde_json accepts (None if it does not).
pub fn oracle(body: &[u8], whole: bool) -> Option<Outcome> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let doc = de.deserialize_any(DocVisitor).ok()?;
    de.end().ok()?;
    Some(match doc {
        Doc::Array => Outcome::Batch,
        Doc::Scalar => Outcome::Invalid,
        Doc::Object(members) => {
            let mut methods = members.iter().filter(|(k, _)| k == "method");
            match methods.next() {
                None => Outcome::NoMethod,
                Some((_, serde_json::Value::String(name))) => {
                    let first = fuzzing::classify(name.as_bytes());
                    let intercepted = first != Method::Other;
                    if methods.next().is_some() && (intercepted || whole) {
                        Outcome::DuplicateMethod
                    } else {
                        Outcome::Method(first)
                    }
                }
                // A watching scan reads on past a non-string first method:
                // a later `method` could still be a listen.
                Some(_) if whole && methods.next().is_some() => Outcome::DuplicateMethod,
                Some(_) if whole => Outcome::Method(Method::Other),
                Some(_) => Outcome::NoMethod,
            }
        }
    })
}
