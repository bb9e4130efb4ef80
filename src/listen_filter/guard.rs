//! The stream guard: keeps a listen response's SSE stream within the
//! honoured filter, event by event.

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::value::RawValue;

use super::live::Claim;
use crate::codec::json::{self, Found};
use crate::codec::sse::{self, Event};
use crate::filter::stream::{acknowledgment, covers_bytes, Served, ACKNOWLEDGED, SUBSCRIPTION_ID};
use crate::filter::{HonouredFilter, ListChanged, Topic};
use crate::http::event_stream::EventRule;
use crate::http::intercept::{AnswerRule, Rewritten};
use crate::metrics::{self, Dropped, Replaced};

/// Narrows acknowledgments to the honoured ack, sends the ack first if the
/// inner service did not, and drops notifications outside the filter.
pub(crate) struct Guard {
    filter: HonouredFilter,
    acknowledged: bool,
    /// Messages and blocks dropped, reported when the stream ends.
    dropped: u64,
    // The filter's topics, indexed once per stream: every event is checked.
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Uris,
    task_ids: Vec<String>,
    /// The listen's hold on its subscription id: given back with the guard.
    _claim: Option<Claim>,
}

/// What the guard does with one message.
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Verdict {
    /// A notification within the filter, for this subscription: the ack
    /// must precede it.
    Keep,
    Drop(&'static str),
    /// An acknowledgment for this subscription, rebuilt: the honoured ack
    /// narrowed to the inner service's, and the subscription tag.
    Ack(String),
    /// The listen's own answer, rebuilt: its error, or its result reduced
    /// to `_meta` and `resultType`.
    Answer(String),
}

impl Guard {
    pub(crate) fn new(filter: HonouredFilter, claim: Option<Claim>) -> Self {
        let mut task_ids: Vec<String> = filter.task_ids().map(str::to_owned).collect();
        task_ids.sort_unstable();
        Self {
            tools: filter.honours(&Topic::List(ListChanged::Tools)),
            prompts: filter.honours(&Topic::List(ListChanged::Prompts)),
            resources: filter.honours(&Topic::List(ListChanged::Resources)),
            uris: Uris::new(filter.resource_uris()),
            task_ids,
            filter,
            acknowledged: false,
            dropped: 0,
            _claim: claim,
        }
    }

    /// The acknowledgment of `notifications`, tagged with the subscription.
    fn ack_message(&self, notifications: &str) -> String {
        acknowledgment(&self.filter, notifications)
    }

    /// The acknowledgment the inner service should have sent first.
    fn ack_event(&self) -> Bytes {
        let data = self.ack_message(self.filter.ack().get());
        sse::EventFields {
            data: &data,
            ..Default::default()
        }
        .to_bytes()
    }

    fn judge(&self, data: &str) -> Verdict {
        let Some(message) = Message::read(data) else {
            return Verdict::Drop("not one JSON-RPC message");
        };
        let (Some(method), Some(params), Some(id), Some(result), Some(error)) = (
            message.method.unambiguous(),
            message.params.unambiguous(),
            message.id.unambiguous(),
            message.result.unambiguous(),
            message.error.unambiguous(),
        ) else {
            return Verdict::Drop("ambiguous JSON-RPC message");
        };
        let subscription_id = self.filter.subscription_id().get();
        let Some(method) = method else {
            // A response: only the listen's own (its end) belongs here.
            return answer(subscription_id, id, result, error);
        };
        if id.is_some() || result.is_some() || error.is_some() {
            return Verdict::Drop("not a notification");
        }
        let Some(method) = json::string(method) else {
            return Verdict::Drop("a method that is not a string");
        };
        match message.tag {
            Found::Absent => {}
            Found::One(tag) if json::same_id(tag, subscription_id) => {}
            Found::One(_) => return Verdict::Drop("another subscription"),
            Found::Ambiguous => return Verdict::Drop("an ambiguous subscription tag"),
        }
        let honoured = match method.as_ref() {
            ACKNOWLEDGED => return self.acknowledgment(params),
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            "notifications/resources/updated" => {
                string_member(message.uri).is_some_and(|uri| self.uris.cover(&uri))
            }
            "notifications/tasks" => string_member(message.task_id).is_some_and(|id| {
                self.task_ids
                    .binary_search_by(|t| t.as_str().cmp(&id))
                    .is_ok()
            }),
            _ => false,
        };
        if honoured {
            Verdict::Keep
        } else {
            Verdict::Drop("outside the honoured filter")
        }
    }

    /// The verdict on the inner service's acknowledgment.
    fn acknowledgment(&self, params: Option<&str>) -> Verdict {
        let Some(params) = params.and_then(json::members) else {
            return Verdict::Drop("acknowledgment without params");
        };
        match json::unique(&params, "notifications") {
            Found::One(theirs) => match narrowed(self.filter.ack(), theirs) {
                Some(ack) => Verdict::Ack(self.ack_message(&ack)),
                None => Verdict::Drop("acknowledgment with a malformed notifications object"),
            },
            _ => Verdict::Drop("acknowledgment without one notifications object"),
        }
    }
}

/// The verdict on a response read of a listen's answer: only the listen's
/// own passes, rebuilt from what was read of it.
fn answer(
    subscription_id: &str,
    id: Option<&str>,
    result: Option<Reduction>,
    error: Option<&str>,
) -> Verdict {
    if !id.is_some_and(|id| json::same_id(id, subscription_id)) {
        return Verdict::Drop("response to another request");
    }
    match (result, error) {
        (None, Some(error)) => Verdict::Answer(format!(
            r#"{{"jsonrpc":"2.0","id":{subscription_id},"error":{error}}}"#
        )),
        (Some(Reduction::Members(members)), None) => Verdict::Answer(format!(
            r#"{{"jsonrpc":"2.0","id":{subscription_id},"result":{{{members}}}}}"#
        )),
        (Some(Reduction::Unreadable), None) => {
            Verdict::Drop("an answer whose result cannot be read")
        }
        _ => Verdict::Drop("an answer with both or neither of result and error"),
    }
}

/// The acknowledgment to send: what both the honoured `ours` and the inner
/// service's `theirs` acknowledge, in our order. It never widens what the
/// inner service agreed to, and never says more than the honoured filter.
fn narrowed(ours: &RawValue, theirs: &str) -> Option<String> {
    let theirs = json::members(theirs)?;
    let mut out = String::from("{");
    for (key, value) in json::members(ours.get())? {
        let Found::One(their_value) = json::unique(&theirs, &key) else {
            continue;
        };
        let kept = if value == "true" {
            (their_value == "true").then(|| "true".to_owned())
        } else {
            let ours: Vec<String> = serde_json::from_str(value).ok()?;
            let mut theirs: Vec<String> = serde_json::from_str(their_value).unwrap_or_default();
            // Sorted, so a thousand URIs are not compared a million times.
            theirs.sort_unstable();
            let both: Vec<&String> = ours
                .iter()
                .filter(|item| theirs.binary_search(item).is_ok())
                .collect();
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

/// A member present once with a string value, decoded.
fn string_member(member: Found<&str>) -> Option<Cow<'_, str>> {
    member.one().and_then(json::string)
}

/// What the guard reads of a message: the members `json::members` and
/// `json::unique` would give, found in one checking pass.
struct Message<'a> {
    method: Found<&'a str>,
    params: Found<&'a str>,
    id: Found<&'a str>,
    result: Found<Reduction>,
    error: Found<&'a str>,
    /// `params.uri` and `params.taskId`.
    uri: Found<&'a str>,
    task_id: Found<&'a str>,
    /// The subscription tag, `params._meta["io.modelcontextprotocol/subscriptionId"]`:
    /// absent without `_meta` or without the tag in it; ambiguous when the
    /// tag or `_meta` comes twice, `_meta` is not an object, or its keys do
    /// not decode (parsers could read different tags).
    tag: Found<&'a str>,
}

/// A `result`, reduced to the members an answer to a listen may carry.
enum Reduction {
    /// `_meta` and `resultType`, as many as are present, as member text.
    Members(String),
    /// Not an object, or with keys that do not decode or come twice.
    Unreadable,
}

impl<'a> Message<'a> {
    /// `None` when `data` is not one JSON object with readable keys.
    #[inline]
    fn read(data: &'a str) -> Option<Self> {
        let mut message = Message {
            method: Found::Absent,
            params: Found::Absent,
            id: Found::Absent,
            result: Found::Absent,
            error: Found::Absent,
            uri: Found::Absent,
            task_id: Found::Absent,
            tag: Found::Absent,
        };
        json::Walk::document(data, |walk, key| {
            match &*key {
                "method" => message.method.record(walk.value()?),
                "id" => message.id.record(walk.value()?),
                "error" => message.error.record(walk.value()?),
                "result" => {
                    message.result.record(reduce(walk)?);
                }
                "params" if walk.at_object() => {
                    let params = Params::read(walk)?;
                    message.params.record(params.text);
                    // Only one `params` is ever used: a second one is ambiguous.
                    (message.uri, message.task_id, message.tag) =
                        (params.uri, params.task_id, params.tag);
                }
                "params" => {
                    message.params.record(walk.value()?);
                    (message.uri, message.task_id, message.tag) =
                        (Found::Absent, Found::Absent, Found::Absent);
                }
                _ => walk.skip()?,
            }
            Some(())
        })?;
        Some(message)
    }

    /// The id, `result` and `error` of a message without a method, none of
    /// them ambiguous.
    fn response(self) -> Option<(Option<&'a str>, Option<Reduction>, Option<&'a str>)> {
        let Found::Absent = self.method else {
            return None;
        };
        Some((
            self.id.unambiguous()?,
            self.result.unambiguous()?,
            self.error.unambiguous()?,
        ))
    }
}

/// The `result` next in `walk`, reduced.
fn reduce(walk: &mut json::Walk<'_>) -> Option<Reduction> {
    if !walk.at_object() {
        walk.skip()?;
        return Some(Reduction::Unreadable);
    }
    let (mut meta, mut kind) = (Found::Absent, Found::Absent);
    let (_, readable) = walk.members(|walk, key| match &*key {
        "_meta" => {
            meta.record(walk.value()?);
            Some(())
        }
        "resultType" => {
            kind.record(walk.value()?);
            Some(())
        }
        _ => walk.skip(),
    })?;
    let (true, Some(meta), Some(kind)) = (readable, meta.unambiguous(), kind.unambiguous()) else {
        return Some(Reduction::Unreadable);
    };
    let members: Vec<String> = [("_meta", meta), ("resultType", kind)]
        .into_iter()
        .filter_map(|(key, value)| value.map(|value| format!(r#""{key}":{value}"#)))
        .collect();
    Some(Reduction::Members(members.join(",")))
}

/// The members of a `params` object the guard reads.
struct Params<'a> {
    text: &'a str,
    uri: Found<&'a str>,
    task_id: Found<&'a str>,
    tag: Found<&'a str>,
}

impl<'a> Params<'a> {
    /// Reads the object next in `walk`; a params object whose keys do not
    /// decode has no members the guard relies on, and an ambiguous tag.
    fn read(walk: &mut json::Walk<'a>) -> Option<Self> {
        let (mut uri, mut task_id) = (Found::Absent, Found::Absent);
        let (mut metas, mut tag) = (0, Found::Absent);
        let (text, readable) = walk.members(|walk, key| {
            match &*key {
                "_meta" if walk.at_object() => {
                    metas += 1;
                    let mut found = Found::Absent;
                    let (_, readable) = walk.members(|walk, key| match &*key {
                        SUBSCRIPTION_ID => {
                            found.record(walk.value()?);
                            Some(())
                        }
                        _ => walk.skip(),
                    })?;
                    tag = match readable {
                        true => found,
                        false => Found::Ambiguous,
                    };
                }
                "_meta" => {
                    metas += 1;
                    walk.skip()?;
                    tag = Found::Ambiguous;
                }
                "uri" => uri.record(walk.value()?),
                "taskId" => task_id.record(walk.value()?),
                _ => walk.skip()?,
            }
            Some(())
        })?;
        if metas > 1 {
            tag = Found::Ambiguous;
        }
        Some(match readable {
            true => Params {
                text,
                uri,
                task_id,
                tag,
            },
            false => Params {
                text,
                uri: Found::Absent,
                task_id: Found::Absent,
                tag: Found::Ambiguous,
            },
        })
    }
}

#[cfg(test)]
use crate::filter::stream::covers;

/// The honoured resource URIs, sorted, to find one that covers a URI (the
/// sub-resource rule) with a few binary searches instead of a scan.
struct Uris(Vec<Box<[u8]>>);

impl Uris {
    fn new<'a>(uris: impl Iterator<Item = &'a str>) -> Self {
        let mut uris: Vec<Box<[u8]>> = uris.map(|uri| uri.as_bytes().into()).collect();
        uris.sort_unstable();
        uris.dedup();
        Self(uris)
    }

    /// True when an honoured URI covers `uri`.
    ///
    /// Only a prefix of `uri` can cover it, and every honoured prefix of
    /// `target` sorts between `target` and the greatest honoured URI `h` at
    /// or below it, so it is a prefix of `h` too: `h` is checked, and the
    /// search goes on below their common prefix, shorter each round.
    fn cover(&self, uri: &str) -> bool {
        let uri = uri.as_bytes();
        let mut target = uri;
        loop {
            let below = self.0.partition_point(|h| **h <= *target);
            let Some(h) = below.checked_sub(1).map(|i| &*self.0[i]) else {
                return false;
            };
            let common = h.iter().zip(target).take_while(|(a, b)| a == b).count();
            if common == h.len() {
                if covers_bytes(h, uri) {
                    return true;
                }
                let Some(shorter) = common.checked_sub(1) else {
                    return false;
                };
                target = &uri[..shorter];
            } else {
                target = &uri[..common];
            }
        }
    }
}

impl Guard {
    /// Leaves out a message or block, counted.
    fn drop_one(&mut self, reason: &'static str, data: Option<&str>) {
        self.dropped += 1;
        metrics::events_dropped(Dropped::Guard, 1);
        // Drops are rare (a leaky inner service): re-reading the method is fine.
        let kind = data.and_then(|data| {
            let mut method = Found::Absent;
            json::Walk::document(data, |walk, key| match &*key {
                "method" => {
                    method.record(walk.value()?);
                    Some(())
                }
                _ => walk.skip(),
            })?;
            method.one().and_then(json::string).map(Cow::into_owned)
        });
        tracing::debug!(
            reason,
            kind = kind.as_deref().unwrap_or("-"),
            "listen stream: dropped a message"
        );
    }
}

/// What leaves the guard is what it read: an event whose bytes say exactly
/// what was parsed of it, `data` as read (`as_read`: decoded without loss
/// and not rebuilt), passes as it came; any other is written anew from its
/// parsed fields.
fn emit(event: &Event, data: &str, as_read: bool, out: &mut VecDeque<Bytes>) {
    if as_read && event.is_plain() {
        out.push_back(event.raw.clone());
    } else {
        out.push_back(event.with_data(data));
    }
}

impl EventRule for Guard {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        let Some(data) = event.data() else {
            if event.is_comment_only()
                && event.is_plain()
                && std::str::from_utf8(&event.raw).is_ok()
            {
                // Comments are keep-alives.
                out.push_back(event.raw);
            } else {
                self.drop_one("a block without data", None);
            }
            return;
        };
        let lossless = matches!(data, Cow::Borrowed(_));
        match self.judge(&data) {
            Verdict::Keep => {
                if !self.acknowledged {
                    self.acknowledged = true;
                    out.push_back(self.ack_event());
                }
                emit(&event, &data, lossless, out);
            }
            Verdict::Ack(_) if self.acknowledged => {
                self.drop_one("a second acknowledgment", Some(&data));
            }
            Verdict::Ack(ack) => {
                self.acknowledged = true;
                emit(&event, &ack, lossless && ack == *data, out);
            }
            Verdict::Answer(answer) => emit(&event, &answer, lossless && answer == *data, out),
            Verdict::Drop(reason) => self.drop_one(reason, Some(&data)),
        }
    }

    fn on_unterminated(&mut self, _: Bytes, _: &mut VecDeque<Bytes>) {
        // The SSE rules discard it; a client that does not could act on it.
        self.drop_one("an unterminated last block", None);
    }
}

/// The answer to a listen that is not an event stream: read whole as one
/// JSON-RPC message, it passes only as the listen's own answer, rebuilt.
/// An error status whose body holds no `result` is not asked about: it
/// passes as it came.
pub(crate) struct ListenAnswer {
    filter: HonouredFilter,
    limit: usize,
    /// The listen's hold on its subscription id, for as long as its answer.
    claim: Option<Claim>,
}

impl ListenAnswer {
    pub(crate) fn new(filter: HonouredFilter, limit: usize, claim: Option<Claim>) -> Self {
        Self {
            filter,
            limit,
            claim,
        }
    }
}

impl AnswerRule for ListenAnswer {
    type Events = Guard;

    fn limit(&self) -> usize {
        self.limit
    }

    fn id(&self) -> &str {
        self.filter.subscription_id().get()
    }

    fn rewrite(&self, text: &str) -> Rewritten {
        let verdict = match Message::read(text).map(Message::response) {
            Some(Some((id, result, error))) => answer(self.id(), id, result, error),
            _ => Verdict::Drop("not a response"),
        };
        match verdict {
            // Already as it would be rebuilt: passes as it came.
            Verdict::Answer(answer) if answer == text => Rewritten::Kept,
            Verdict::Answer(answer) => Rewritten::Body(answer),
            _ => Rewritten::Replaced(Replaced::Foreign, "the answer is not the listen's own"),
        }
    }

    fn into_events(self) -> Guard {
        Guard::new(self.filter, self.claim)
    }

    /// The listen hub's own stream for this very filter is within it.
    fn vouched(&self, answer: &http::response::Parts, body: &dyn std::any::Any) -> bool {
        answer
            .extensions
            .get::<Served>()
            .is_some_and(|served| served.vouches(body, &self.filter))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.dropped > 0 {
            tracing::debug!(
                dropped = self.dropped,
                "listen stream: messages dropped by the guard"
            );
        }
    }
}

#[cfg(test)]
mod tests;
