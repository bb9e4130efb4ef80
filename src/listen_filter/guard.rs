//! The stream guard: keeps a listen response's SSE stream within the
//! honoured filter, event by event.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use serde_json::value::RawValue;

use crate::event_stream::EventRule;
use crate::filter::{HonouredFilter, Topic};
use crate::json;
use crate::sse::{self, Event};

/// The `_meta` key that tags every message of a listen stream.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// Narrows acknowledgments to the honoured ack, sends the ack first if the
/// inner service did not, and drops notifications outside the filter.
pub(crate) struct Guard {
    filter: HonouredFilter,
    acknowledged: bool,
}

/// What the guard does with one message.
enum Verdict {
    /// A notification for this subscription: the ack must precede it.
    Keep,
    /// The listen's own response or a server-to-client request: passes as is.
    Pass,
    Drop(&'static str),
    /// An acknowledgment for this subscription, rewritten to the honoured ack.
    Ack(Vec<u8>),
}

impl Guard {
    pub(crate) fn new(filter: HonouredFilter) -> Self {
        Self {
            filter,
            acknowledged: false,
        }
    }

    /// The acknowledgment the inner service should have sent first.
    fn ack_event(&self) -> Bytes {
        let data = format!(
            r#"{{"jsonrpc":"2.0","method":"{ACKNOWLEDGED}","params":{{"notifications":{},"_meta":{{"{SUBSCRIPTION_ID}":{}}}}}}}"#,
            self.filter.ack().get(),
            self.filter.subscription_id().get()
        );
        let mut out = BytesMut::with_capacity(data.len() + 8);
        sse::write_event(
            &sse::EventFields {
                data: &data,
                ..Default::default()
            },
            &mut out,
        );
        out.freeze()
    }

    fn judge(&self, data: &str) -> Verdict {
        let Some(message) = json::members(data) else {
            return Verdict::Drop("not a JSON-RPC message");
        };
        let (Ok(method), Ok(params), Ok(id)) = (
            json::unique(&message, "method"),
            json::unique(&message, "params"),
            json::unique(&message, "id"),
        ) else {
            return Verdict::Drop("ambiguous JSON-RPC message");
        };
        let Some(method) = method.and_then(json::string) else {
            // A response: only the listen's own (its graceful close) belongs here.
            return match id {
                Some(id) if json::same_id(id, self.filter.subscription_id()) => Verdict::Pass,
                _ => Verdict::Drop("response to another request"),
            };
        };
        if !method.starts_with("notifications/") {
            // A server-to-client request (ping and the like) is not a notification.
            return Verdict::Pass;
        }
        let params = params.and_then(|p| json::members(p.get()));
        if let Some(tag) = params.as_ref().and_then(|p| subscription_tag(p)) {
            if !json::same_id(tag, self.filter.subscription_id()) {
                return Verdict::Drop("another subscription");
            }
        }
        let field = |name: &str| {
            params
                .as_ref()
                .and_then(|p| json::unique(p, name).ok().flatten())
                .and_then(json::string)
        };
        let honoured = match method.as_ref() {
            ACKNOWLEDGED => {
                let Some(params) = params.as_ref() else {
                    return Verdict::Drop("acknowledgment without params");
                };
                return match json::unique(params, "notifications") {
                    Ok(Some(theirs)) => match narrowed(self.filter.ack(), theirs) {
                        Some(ack) => Verdict::Ack(json::splice(data, theirs, ack.as_bytes())),
                        None => {
                            Verdict::Drop("acknowledgment with a malformed notifications object")
                        }
                    },
                    _ => Verdict::Drop("acknowledgment without one notifications object"),
                };
            }
            "notifications/tools/list_changed" => self.filter.honours(&Topic::ToolsListChanged),
            "notifications/prompts/list_changed" => self.filter.honours(&Topic::PromptsListChanged),
            "notifications/resources/list_changed" => {
                self.filter.honours(&Topic::ResourcesListChanged)
            }
            "notifications/resources/updated" => field("uri").is_some_and(|uri| {
                self.filter
                    .resource_uris()
                    .any(|honoured| covers(honoured, &uri))
            }),
            "notifications/tasks" => {
                field("taskId").is_some_and(|id| self.filter.task_ids().any(|t| t == id))
            }
            _ => false,
        };
        if honoured {
            Verdict::Keep
        } else {
            Verdict::Drop("outside the honoured filter")
        }
    }
}

/// The acknowledgment to send: what both the honoured `ours` and the inner
/// service's `theirs` acknowledge, in our order. It never widens what the
/// inner service agreed to, and never says more than the honoured filter.
fn narrowed(ours: &RawValue, theirs: &RawValue) -> Option<String> {
    let theirs = json::members(theirs.get())?;
    let mut out = String::from("{");
    for (key, value) in json::members(ours.get())? {
        let Ok(Some(their_value)) = json::unique(&theirs, &key) else {
            continue;
        };
        let kept = if value.get() == "true" {
            (their_value.get() == "true").then(|| "true".to_owned())
        } else {
            let ours: Vec<String> = serde_json::from_str(value.get()).ok()?;
            let theirs: Vec<String> = serde_json::from_str(their_value.get()).unwrap_or_default();
            let both: Vec<&String> = ours.iter().filter(|item| theirs.contains(item)).collect();
            (!both.is_empty()).then(|| serde_json::to_string(&both).expect("strings serialize"))
        };
        if let Some(kept) = kept {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key.as_ref()).expect("a key serializes"));
            out.push(':');
            out.push_str(&kept);
        }
    }
    out.push('}');
    Some(out)
}

/// `params._meta["io.modelcontextprotocol/subscriptionId"]`, if present.
fn subscription_tag<'a>(params: &json::Members<'a>) -> Option<&'a RawValue> {
    let meta = json::unique(params, "_meta").ok().flatten()?;
    let meta = json::members(meta.get())?;
    json::unique(&meta, SUBSCRIPTION_ID).ok().flatten()
}

/// The sub-resource rule: an honoured URI covers itself and every URI below
/// it by path (`file:///logs` covers `file:///logs/today`, not `file:///logs2`).
pub(crate) fn covers(honoured: &str, uri: &str) -> bool {
    match uri.strip_prefix(honoured) {
        Some("") => true,
        Some(rest) => honoured.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

impl EventRule for Guard {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        let Some(data) = event.data.as_deref() else {
            // Comments and keep-alives carry nothing to filter.
            out.push_back(event.raw);
            return;
        };
        match self.judge(data) {
            Verdict::Pass => out.push_back(event.raw),
            Verdict::Keep => {
                if !self.acknowledged {
                    self.acknowledged = true;
                    out.push_back(self.ack_event());
                }
                out.push_back(event.raw);
            }
            Verdict::Ack(_) if self.acknowledged => {
                tracing::debug!("listen stream: dropped a second acknowledgment");
            }
            Verdict::Ack(rewritten) => {
                if rewritten == data.as_bytes() {
                    out.push_back(event.raw);
                } else {
                    out.push_back(event.with_data(&rewritten));
                }
                self.acknowledged = true;
            }
            Verdict::Drop(reason) => {
                // Drops are rare (a leaky inner service): re-reading the method is fine.
                let kind = json::members(data)
                    .and_then(|m| {
                        json::unique(&m, "method")
                            .ok()
                            .flatten()
                            .and_then(json::string)
                    })
                    .map(|method| method.into_owned());
                tracing::debug!(
                    reason,
                    kind = kind.as_deref().unwrap_or("-"),
                    "listen stream: dropped a message"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn acknowledgments_narrow_to_both() {
        let ours =
            raw(r#"{"toolsListChanged":true,"resourceSubscriptions":["a","b"],"taskIds":["t"]}"#);
        let wide = raw(
            r#"{"promptsListChanged":true,"resourceSubscriptions":["c","b","a"],"toolsListChanged":true,"taskIds":["t","u"]}"#,
        );
        assert_eq!(
            narrowed(&ours, &wide).unwrap(),
            r#"{"toolsListChanged":true,"resourceSubscriptions":["a","b"],"taskIds":["t"]}"#
        );
        let narrow = raw(r#"{"resourceSubscriptions":["b"],"toolsListChanged":false}"#);
        assert_eq!(
            narrowed(&ours, &narrow).unwrap(),
            r#"{"resourceSubscriptions":["b"]}"#
        );
        assert_eq!(narrowed(&ours, &raw("{}")).unwrap(), "{}");
        assert!(narrowed(&ours, &raw("[]")).is_none());
    }

    #[test]
    fn the_listens_own_response_passes_without_an_ack() {
        let profile = crate::ServerProfile::builder().build().unwrap();
        let (parts, ()) = http::Request::new(()).into_parts();
        let id = raw("7");
        let params = raw(r#"{"notifications":{"toolsListChanged":true}}"#);
        let filter = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(crate::honour(&profile, &parts, &id, Some(&params)))
            .unwrap();
        let mut guard = Guard::new(filter);
        let mut parser = sse::Parser::new();
        parser.push(Bytes::from_static(
            b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32022,\"message\":\"x\"}}\n\n",
        ));
        let event = parser.next_event().unwrap();
        let expected = event.raw.clone();
        let mut out = VecDeque::new();
        guard.on_event(event, &mut out);
        assert_eq!(
            out,
            [expected],
            "no acknowledgment before the listen's own error"
        );
    }

    #[test]
    fn sub_resource_rule() {
        assert!(covers("file:///logs", "file:///logs"));
        assert!(covers("file:///logs", "file:///logs/today"));
        assert!(covers("file:///logs/", "file:///logs/today"));
        assert!(!covers("file:///logs", "file:///logs2"));
        assert!(!covers("file:///logs/today", "file:///logs"));
        assert!(!covers(
            "demo://users/alice",
            "demo://users/alice-evil/notes"
        ));
    }
}
