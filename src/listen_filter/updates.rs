//! The screen of every event stream that is not a listen (a legacy
//! session's GET stream, the SSE answer of a POST): a
//! `notifications/resources/updated` for a URI the caller may not read is
//! dropped. The [`ResourceAccess`](crate::ResourceAccess) hook is asked
//! through the profile's decision cache; everything else passes as parsed.

use std::borrow::Cow;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use memchr::memmem;

use crate::codec::json;
use crate::codec::sse::Event;
use crate::hooks::HookFuture;
use crate::http::event_stream::Screen;
use crate::{Principal, ServerProfile};

const UPDATED: &str = "notifications/resources/updated";

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

/// Reads `data` as a client would: one JSON-RPC message, or an array of them.
fn carried(data: &str) -> Carried<'_> {
    // Without an escape, a method can only be spelled as it is sent.
    if memchr::memchr(b'\\', data.as_bytes()).is_none()
        && memmem::find(data.as_bytes(), UPDATED.as_bytes()).is_none()
    {
        return Carried::Nothing;
    }
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
    let (mut method, mut params) = (Ok(None), Ok(None));
    let (_, readable) = walk.members(|walk, key| {
        match &*key {
            "method" => json::record(&mut method, walk.value()?),
            "params" => json::record(&mut params, walk.value()?),
            _ => walk.skip()?,
        }
        Some(())
    })?;
    let Ok(method) = method else {
        // Two methods: either could be read.
        return Some(false);
    };
    match method.and_then(json::string) {
        Some(method) if method == UPDATED => {}
        _ => return Some(readable),
    }
    let uri = match params {
        Ok(Some(params)) => json::members(params).and_then(|members| {
            json::unique(&members, "uri")
                .ok()
                .flatten()
                .and_then(json::string)
        }),
        _ => None,
    };
    match uri {
        Some(uri) if readable => {
            uris.push(uri);
            Some(true)
        }
        _ => Some(false),
    }
}

/// The screen of one stream, for its caller.
pub(crate) struct Updates {
    profile: ServerProfile,
    caller: Option<Principal>,
    /// The hook's answer being awaited for the event held, and its URIs.
    lookup: Option<(Vec<String>, HookFuture)>,
    dropped: u64,
}

impl Updates {
    pub(crate) fn new(profile: ServerProfile, caller: Option<Principal>) -> Self {
        Self {
            profile,
            caller,
            lookup: None,
            dropped: 0,
        }
    }

    fn drop_one(&mut self, reason: &'static str) -> Poll<bool> {
        self.dropped += 1;
        tracing::debug!(reason, "event stream: dropped a resource update");
        Poll::Ready(false)
    }

    /// Awaits the lookup and keeps its answers: whether every URI is readable.
    fn poll_lookup(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        let Some((_, future)) = self.lookup.as_mut() else {
            return Poll::Ready(false);
        };
        let answers = ready!(future.as_mut().poll(cx));
        let Some((uris, _)) = self.lookup.take() else {
            return Poll::Ready(false);
        };
        let now = Instant::now();
        let decisions = self.profile.decisions();
        for (uri, readable) in uris.iter().zip(&answers) {
            decisions.put(self.caller.as_ref(), uri, *readable, now);
        }
        // A short answer denies what it does not cover.
        Poll::Ready(answers.len() >= uris.len() && answers.iter().take(uris.len()).all(|r| *r))
    }
}

impl Screen for Updates {
    fn poll_admits(&mut self, cx: &mut Context<'_>, event: &Event) -> Poll<bool> {
        if self.lookup.is_some() {
            // Asked again about the event whose URIs are being looked up.
            return match ready!(self.poll_lookup(cx)) {
                true => Poll::Ready(true),
                false => self.drop_one("a URI the caller may not read"),
            };
        }
        let Some(data) = event.data() else {
            return Poll::Ready(true);
        };
        let uris = match carried(&data) {
            Carried::Nothing => return Poll::Ready(true),
            Carried::Unclear => return self.drop_one("an update without one clear URI"),
            Carried::Updates(uris) => uris,
        };
        let Some(access) = self.profile.resource_access() else {
            return Poll::Ready(true);
        };
        let now = Instant::now();
        let decisions = self.profile.decisions();
        let mut unknown: Vec<&str> = Vec::new();
        for uri in &uris {
            match decisions.get(self.caller.as_ref(), uri, now) {
                Some(true) => {}
                Some(false) => return self.drop_one("a URI the caller may not read"),
                None if unknown.contains(&&**uri) => {}
                None => unknown.push(uri),
            }
        }
        if unknown.is_empty() {
            return Poll::Ready(true);
        }
        let future = access.readable(self.caller.as_ref(), &unknown);
        let unknown = unknown.into_iter().map(str::to_owned).collect();
        self.lookup = Some((unknown, future));
        self.poll_admits(cx, event)
    }
}

impl Drop for Updates {
    fn drop(&mut self) {
        if self.dropped > 0 {
            tracing::info!(
                dropped = self.dropped,
                "event stream: resource updates the caller may not read were dropped"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn updates(data: &str) -> Carried<'_> {
        carried(data)
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
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\nb"}]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#,
            r#"{"method":"notifications/resources/updated2","params":{"uri":"x"}}"#,
            r#"{"method":"Notifications/Resources/Updated","params":{"uri":"x"}}"#,
            r#"{"method":"notifications/message","params":{"data":"notifications/resources/updated"}}"#,
            "[]",
            "\"notifications/resources/updated\"",
            "plain text",
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
            r#"{"text":"\q"}"#,
            // A key that does not decode.
            r#"{"\ud800":1,"method":"notifications/resources/updated","params":{"uri":"a"}}"#,
            // One unclear item makes the batch unclear.
            r#"[{"method":"notifications/resources/updated","params":{"uri":"a"}},{"method":"notifications/resources/updated"}]"#,
        ] {
            assert_eq!(updates(data), Carried::Unclear, "{data}");
        }
    }
}
