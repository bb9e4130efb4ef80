//! The screen of every event stream that is not a listen (a legacy
//! session's GET stream, the SSE answer of a POST): a
//! `notifications/resources/updated` for a URI the caller may not read is
//! dropped. The [`ResourceAccess`](crate::ResourceAccess) hook is asked
//! through the profile's decision cache; everything else passes as parsed.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use memchr::memmem;

use crate::access::{Decision, Decisions};
use crate::codec::json::{self, Found};
use crate::codec::sse::Event;
use crate::filter::stream::resolves_elsewhere;
use crate::hooks::Principal;
use crate::http::event_stream::Screen;
use crate::metrics::{self, Dropped};
use crate::profile::ServerProfile;

const UPDATED: &str = "notifications/resources/updated";

/// The search for [`UPDATED`], built once.
static FINDER: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(UPDATED));

/// What an event's data carries, as far as the screen cares.
#[derive(Debug, PartialEq)]
enum Carried<'a> {
    /// No resource update.
    Nothing,
    /// Resource updates for these URIs.
    Updates(Vec<Cow<'a, str>>),
    /// Something a client could read as an update, but not for one clear URI.
    Unclear,
}

/// Whether the bytes of an event could hold a resource update: its method
/// spelled as it is, or an escape that could spell a letter or a `/` of it
/// (`\u`, `\/`). Other escapes stand for characters the method does not
/// have, and no line of `data` joined to the next can make it up.
fn may_carry(raw: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', raw).any(|at| matches!(raw.get(at + 1), Some(b'u' | b'/')))
        || FINDER.find(raw).is_some()
}

/// Reads `data` as a client would: one JSON-RPC message, or an array of them.
fn carried(data: &str) -> Carried<'_> {
    let mut walk = json::Walk::new(data);
    let mut uris = Vec::new();
    let read = if walk.at_object() {
        message(&mut walk, &mut uris)
    } else if walk.at_array() {
        let mut clear = true;
        walk.items(|item| {
            if item.at_object() {
                clear &= message(item, &mut uris)?;
                Some(())
            } else {
                item.skip()
            }
        })
        .map(|_| clear)
    } else {
        walk.skip().map(|()| true)
    };
    match read {
        Some(true) if walk.at_end() && uris.is_empty() => Carried::Nothing,
        Some(true) if walk.at_end() => Carried::Updates(uris),
        // Not JSON, or an update without one clear URI.
        _ => Carried::Unclear,
    }
}

/// Reads the object next in `walk` as a message: `Some(true)` when it is not
/// an update or is one for one clear URI (pushed to `uris`).
fn message<'a>(walk: &mut json::Walk<'a>, uris: &mut Vec<Cow<'a, str>>) -> Option<bool> {
    // `params` once: the `uri` found in it (ambiguous when its keys do not
    // decode).
    let (mut method, mut params) = (Found::Absent, Found::Absent);
    let (_, readable) = walk.members(|walk, key| {
        match &*key {
            "method" => method.record(walk.value()?),
            "params" => {
                let mut uri = Found::Absent;
                if walk.at_object() {
                    let (_, keys_decode) = walk.members(|walk, key| {
                        match &*key {
                            "uri" => uri.record(walk.value()?),
                            _ => walk.skip()?,
                        }
                        Some(())
                    })?;
                    if !keys_decode {
                        uri = Found::Ambiguous;
                    }
                } else {
                    walk.skip()?;
                }
                params.record(uri);
            }
            _ => walk.skip()?,
        }
        Some(())
    })?;
    let Some(method) = method.unambiguous() else {
        // Two methods: either could be read.
        return Some(false);
    };
    match method.and_then(json::string) {
        Some(method) if method == UPDATED => {}
        _ => return Some(readable),
    }
    match params {
        Found::One(Found::One(uri)) if readable => match json::string(uri) {
            Some(uri) => {
                uris.push(uri);
                Some(true)
            }
            None => Some(false),
        },
        _ => Some(false),
    }
}

/// How many decisions a stream keeps at hand, besides the profile's cache.
const RECENT: usize = 8;

/// The screen of one stream, for its caller. Small: one is made for every
/// request, and most answers are no event stream, or carry no update.
pub(crate) struct Updates {
    profile: ServerProfile,
    caller: Option<Principal>,
    /// What the stream learned, once it carried a resource update.
    seen: Option<Box<Seen>>,
}

/// What a stream's screen keeps between events.
#[derive(Default)]
struct Seen {
    /// The hook's answer being awaited for the event held, and its URIs.
    lookup: Option<(Vec<String>, metrics::Timed)>,
    /// The last decisions this stream used (as the cache had them, so they
    /// expire when those do), the oldest replaced first.
    recent: Vec<(Box<str>, Decision)>,
    next: usize,
    dropped: u64,
}

impl Seen {
    /// The decision on `uri` that holds at `now`: this stream's, or the
    /// cache's. A URI a client could read as another path may not be read:
    /// the hook judges it as spelled, and no honoured URI matches it
    /// exactly here. (It never enters this stream's decisions, so the
    /// check runs once per URI and decision lifetime.)
    fn decision(
        &mut self,
        decisions: &Decisions,
        caller: Option<&Principal>,
        uri: &str,
        now: Instant,
    ) -> Option<bool> {
        if let Some((_, decision)) = self.recent.iter().find(|(known, _)| **known == *uri) {
            if decisions.fresh(decision, now) {
                return Some(decision.readable);
            }
        }
        if resolves_elsewhere(uri.as_bytes()) {
            return Some(false);
        }
        let decision = decisions.get(caller, uri, now);
        metrics::access_decisions(decision.is_some().into(), decision.is_none().into());
        let decision = decision?;
        self.keep(uri, decision);
        Some(decision.readable)
    }

    /// Keeps `decision` at hand.
    fn keep(&mut self, uri: &str, decision: Decision) {
        if let Some(slot) = self.recent.iter_mut().find(|(known, _)| **known == *uri) {
            slot.1 = decision;
        } else if self.recent.len() < RECENT {
            self.recent.push((uri.into(), decision));
        } else {
            self.recent[self.next] = (uri.into(), decision);
            self.next = (self.next + 1) % RECENT;
        }
    }

    fn drop_one(&mut self, reason: &'static str) -> Poll<bool> {
        self.dropped += 1;
        metrics::events_dropped(Dropped::Screen, 1);
        tracing::debug!(reason, "event stream: dropped a resource update");
        Poll::Ready(false)
    }

    /// Awaits the lookup and keeps its answers: whether every URI is
    /// readable (the event is dropped, counted, when one is not).
    fn poll_lookup(
        &mut self,
        cx: &mut Context<'_>,
        decisions: &Decisions,
        caller: Option<&Principal>,
    ) -> Poll<bool> {
        let Some((_, future)) = self.lookup.as_mut() else {
            return Poll::Ready(false);
        };
        let answers = ready!(Future::poll(Pin::new(future), cx));
        let Some((uris, _)) = self.lookup.take() else {
            return Poll::Ready(false);
        };
        let at = Instant::now();
        for (uri, readable) in uris.iter().zip(&answers) {
            let readable = *readable;
            decisions.put(caller, uri, readable, at);
            self.keep(uri, Decision { readable, at });
        }
        // A short answer denies what it does not cover.
        match answers.len() >= uris.len() && answers.iter().take(uris.len()).all(|r| *r) {
            true => Poll::Ready(true),
            false => self.drop_one("a URI the caller may not read"),
        }
    }
}

impl Updates {
    pub(crate) fn new(profile: ServerProfile, caller: Option<Principal>) -> Self {
        Self {
            profile,
            caller,
            seen: None,
        }
    }
}

impl Screen for Updates {
    fn poll_admits(&mut self, cx: &mut Context<'_>, event: &Event) -> Poll<bool> {
        let caller = self.caller.as_ref();
        let decisions = self.profile.decisions();
        if let Some(seen) = self.seen.as_mut().filter(|seen| seen.lookup.is_some()) {
            // Asked again about the event whose URIs are being looked up.
            return seen.poll_lookup(cx, decisions, caller);
        }
        if !may_carry(&event.raw) {
            return Poll::Ready(true);
        }
        let Some(data) = event.data() else {
            return Poll::Ready(true);
        };
        let seen = self.seen.get_or_insert_with(Box::default);
        let uris = match carried(&data) {
            Carried::Nothing => return Poll::Ready(true),
            Carried::Unclear => return seen.drop_one("an update without one clear URI"),
            Carried::Updates(uris) => uris,
        };
        let Some(access) = self.profile.resource_access() else {
            return Poll::Ready(true);
        };
        let now = Instant::now();
        let mut unknown: Vec<&str> = Vec::new();
        for uri in &uris {
            match seen.decision(decisions, caller, uri, now) {
                Some(true) => {}
                Some(false) => return seen.drop_one("a URI the caller may not read"),
                None if unknown.contains(&&**uri) => {}
                None => unknown.push(uri),
            }
        }
        if unknown.is_empty() {
            return Poll::Ready(true);
        }
        let future = metrics::access_hook(access.readable(caller, &unknown));
        let unknown = unknown.into_iter().map(str::to_owned).collect();
        seen.lookup = Some((unknown, future));
        seen.poll_lookup(cx, decisions, caller)
    }
}

impl Drop for Updates {
    fn drop(&mut self) {
        if let Some(dropped) = self
            .seen
            .as_ref()
            .map(|seen| seen.dropped)
            .filter(|n| *n > 0)
        {
            tracing::info!(
                dropped,
                "event stream: resource updates the caller may not read were dropped"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `data` carries, when its event's bytes pass the first look.
    fn updates(data: &str) -> Carried<'_> {
        match may_carry(data.as_bytes()) {
            true => carried(data),
            false => Carried::Nothing,
        }
    }

    fn uris(list: &[&'static str]) -> Carried<'static> {
        Carried::Updates(list.iter().map(|uri| Cow::Borrowed(*uri)).collect())
    }

    #[test]
    fn reads_updates_as_a_client_would() {
        let update = r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://a"}}"#;
        assert_eq!(updates(update), uris(&["demo://a"]));
        // Spelled with escapes, in the key or the value.
        let escaped =
            r#"{"m\u0065thod":"notifications\/resources\/updated","params":{"uri":"demo:\/\/a"}}"#;
        assert_eq!(
            updates(escaped),
            Carried::Updates(vec![Cow::Owned("demo://a".into())])
        );
        // In a batch, next to other messages.
        let batch = r#"[{"method":"notifications/resources/updated","params":{"uri":"demo://a"}}, 1,
            {"method":"notifications/message","params":{}},{"method":"notifications/resources/updated","params":{"uri":"demo://b"}}]"#;
        assert_eq!(updates(batch), uris(&["demo://a", "demo://b"]));
    }

    #[test]
    fn other_messages_carry_nothing() {
        for data in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\nb\"\\\t"}]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#,
            r#"{"method":"notifications/resources/updated2","params":{"uri":"x"}}"#,
            r#"{"method":"Notifications/Resources/Updated","params":{"uri":"x"}}"#,
            r#"{"method":"notifications/message","params":{"data":"notifications/resources/updated"}}"#,
            "[]",
            "\"notifications/resources/updated\"",
            "plain text",
            // Escapes that cannot spell the method, even in text that is not JSON.
            r#"{"text":"\q\n"}"#,
        ] {
            assert_eq!(updates(data), Carried::Nothing, "{data}");
        }
    }

    #[test]
    fn unclear_updates_and_unreadable_text() {
        for data in [
            // No URI, or not one string.
            r#"{"method":"notifications/resources/updated"}"#,
            r#"{"method":"notifications/resources/updated","params":{}}"#,
            r#"{"method":"notifications/resources/updated","params":{"uri":1}}"#,
            r#"{"method":"notifications/resources/updated","params":[]}"#,
            r#"{"method":"notifications/resources/updated","params":{"uri":"a","uri":"b"}}"#,
            r#"{"method":"notifications/resources/updated","params":{"uri":"a"},"params":{"uri":"b"}}"#,
            // Two methods.
            r#"{"method":"notifications/message","method":"notifications/resources/updated","params":{"uri":"a"}}"#,
            // Not JSON, or more than one value.
            r#"{"method":"notifications/resources/updated","params":{"uri":"a"}} x"#,
            r#"{"method":"notifications/resources/updated","params":{"uri":"a"}"#,
            r#"{"text":"\u12"}"#,
            r#"{"text":"\/"} x"#,
            // A key that does not decode.
            r#"{"\ud800":1,"method":"notifications/resources/updated","params":{"uri":"a"}}"#,
            // One unclear item makes the batch unclear.
            r#"[{"method":"notifications/resources/updated","params":{"uri":"a"}},{"method":"notifications/resources/updated"}]"#,
        ] {
            assert_eq!(updates(data), Carried::Unclear, "{data}");
        }
    }

    /// JSON read as a parser that keeps the first of duplicate keys.
    struct FirstWins(serde_json::Value);

    impl<'de> serde::Deserialize<'de> for FirstWins {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = FirstWins;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("JSON")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<FirstWins, A::Error> {
                    let mut out = serde_json::Map::new();
                    while let Some((key, FirstWins(value))) =
                        map.next_entry::<String, FirstWins>()?
                    {
                        out.entry(key).or_insert(value);
                    }
                    Ok(FirstWins(serde_json::Value::Object(out)))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<FirstWins, A::Error> {
                    let mut out = Vec::new();
                    while let Some(FirstWins(value)) = seq.next_element()? {
                        out.push(value);
                    }
                    Ok(FirstWins(serde_json::Value::Array(out)))
                }
                fn visit_str<E>(self, v: &str) -> Result<FirstWins, E> {
                    Ok(FirstWins(v.into()))
                }
                fn visit_string<E>(self, v: String) -> Result<FirstWins, E> {
                    Ok(FirstWins(v.into()))
                }
                fn visit_bool<E>(self, v: bool) -> Result<FirstWins, E> {
                    Ok(FirstWins(v.into()))
                }
                fn visit_i64<E>(self, v: i64) -> Result<FirstWins, E> {
                    Ok(FirstWins(v.into()))
                }
                fn visit_u64<E>(self, v: u64) -> Result<FirstWins, E> {
                    Ok(FirstWins(v.into()))
                }
                fn visit_f64<E>(self, v: f64) -> Result<FirstWins, E> {
                    Ok(FirstWins(v.into()))
                }
                fn visit_unit<E>(self) -> Result<FirstWins, E> {
                    Ok(FirstWins(serde_json::Value::Null))
                }
            }
            deserializer.deserialize_any(Visitor)
        }
    }

    /// The URIs of the resource updates in `value`, as a client reads them.
    fn updates_in(value: &serde_json::Value) -> Vec<String> {
        let messages = match value {
            serde_json::Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        messages
            .into_iter()
            .filter(|m| m["method"] == UPDATED)
            .filter_map(|m| m["params"]["uri"].as_str().map(str::to_owned))
            .collect()
    }

    const CASES: &[&str] = &[
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://a"}}"#,
        r#"{"m\u0065thod":"notifications\/resources\/updated","params":{"uri":"demo:\/\/a"}}"#,
        r#"[{"method":"notifications/resources/updated","params":{"uri":"a"}},{"method":"x"}]"#,
        r#"{"method":"notifications/message","method":"notifications/resources/updated","params":{"uri":"a"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"a","uri":"b"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"a"},"params":{"uri":"b"}}"#,
        r#"{"params":{"uri":"b"},"method":"notifications/resources/updat\u0065d"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\nb"}]}}"#,
        r#"{"method":"notifications/progress","params":{"uri":"c","progress":1}}"#,
    ];

    proptest::proptest! {
        /// Whatever a first-wins or a last-wins parser reads as resource
        /// updates, the screen either drops it (unclear) or checks every
        /// one of those URIs: nothing passes unchecked.
        #[test]
        fn no_update_passes_unchecked(
            case in 0..CASES.len(),
            other in 0..CASES.len(),
            at in 0usize..120,
            to in 0usize..120,
            byte in proptest::sample::select(b" \"\\{}[],:/uabdeimnoprst0".to_vec()),
        ) {
            let (a, b) = (CASES[case].as_bytes(), CASES[other].as_bytes());
            let (at, to) = (at.min(a.len()), to.min(b.len()));
            let mut inputs = vec![a.to_vec(), [&a[..at], &b[to..]].concat()];
            let mut flipped = a.to_vec();
            if at < a.len() {
                flipped[at] = byte;
            }
            inputs.push(flipped);
            let mut inserted = a.to_vec();
            inserted.insert(at, byte);
            inputs.push(inserted);
            for input in inputs {
                let Ok(data) = std::str::from_utf8(&input) else { continue };
                let mut read = Vec::new();
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(data) {
                    read.extend(updates_in(&value));
                }
                if let Ok(FirstWins(value)) = serde_json::from_str::<FirstWins>(data) {
                    read.extend(updates_in(&value));
                }
                match updates(data) {
                    Carried::Unclear => {}
                    Carried::Nothing => proptest::prop_assert!(read.is_empty(), "{} reads {:?}", data, read),
                    Carried::Updates(uris) => {
                        for uri in &read {
                            proptest::prop_assert!(uris.iter().any(|u| u == uri), "{} reads {}, checked {:?}", data, uri, uris);
                        }
                    }
                }
            }
        }
    }
}
