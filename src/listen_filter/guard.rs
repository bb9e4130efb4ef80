//! The stream guard: keeps a listen response's SSE stream within the
//! honoured filter, event by event.

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::codec::json::{self, Found};
use crate::codec::sse::{self, Event};
use crate::filter::stream::{
    acknowledgment, covers as covers_bytes, Served, ACKNOWLEDGED, SUBSCRIPTION_ID,
};
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
    pub(crate) fn new(filter: HonouredFilter) -> Self {
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
fn covers(honoured: &str, uri: &str) -> bool {
    covers_bytes(honoured.as_bytes(), uri.as_bytes())
}

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
}

impl ListenAnswer {
    pub(crate) fn new(filter: HonouredFilter, limit: usize) -> Self {
        Self { filter, limit }
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
        Guard::new(self.filter)
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
mod tests {
    use super::*;
    use crate::codec::json::model;

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).unwrap()
    }

    fn filter(notifications: &str) -> HonouredFilter {
        let profile = crate::profile::ServerProfile::builder()
            .resource_access(|_: Option<&crate::hooks::Principal>, uris: &[&str]| {
                std::future::ready(vec![true; uris.len()])
            })
            .subscription_hook(|uris: &[&str]| std::future::ready(vec![true; uris.len()]))
            .task_directory(|_: &crate::hooks::Principal, ids: &[&str]| {
                std::future::ready(vec![true; ids.len()])
            })
            .tasks(true)
            .build()
            .unwrap();
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts
            .extensions
            .insert(crate::hooks::Principal::new("alice"));
        let params = raw(&format!(
            r#"{{"notifications":{notifications},"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{"extensions":{{"io.modelcontextprotocol/tasks":{{}}}}}}}}}}"#
        ));
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(crate::filter::honour(
                &profile,
                &parts,
                &raw("7"),
                Some(&params),
            ))
            .unwrap()
    }

    /// The guard's verdict with every level read by `serde_json`: the one
    /// pass of the guard must agree on every input.
    fn members_verdict(filter: &HonouredFilter, data: &str) -> Verdict {
        let is_object = |text: &str| text.trim_start().starts_with('{');
        let Some(message) = model::members(data) else {
            return Verdict::Drop("not one JSON-RPC message");
        };
        let field = |name: &str| json::unique(&message, name);
        let (Some(method), Some(params), Some(id), Some(result), Some(error)) = (
            field("method").unambiguous(),
            field("params").unambiguous(),
            field("id").unambiguous(),
            field("result").unambiguous(),
            field("error").unambiguous(),
        ) else {
            return Verdict::Drop("ambiguous JSON-RPC message");
        };
        let subscription_id = filter.subscription_id().get();
        let Some(method) = method else {
            let Some(id) = id.filter(|id| json::same_id(id, subscription_id)) else {
                return Verdict::Drop("response to another request");
            };
            return match (result, error) {
                (None, Some(error)) => Verdict::Answer(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#,
                    id = subscription_id
                )),
                (Some(result), None) => {
                    let members = model::members(result);
                    let reduced = members.as_ref().and_then(|members| {
                        let meta = json::unique(members, "_meta").unambiguous()?;
                        let kind = json::unique(members, "resultType").unambiguous()?;
                        let parts: Vec<String> = [("_meta", meta), ("resultType", kind)]
                            .into_iter()
                            .filter_map(|(k, v)| v.map(|v| format!(r#""{k}":{v}"#)))
                            .collect();
                        Some(parts.join(","))
                    });
                    let _ = id;
                    match reduced {
                        Some(members) => Verdict::Answer(format!(
                            r#"{{"jsonrpc":"2.0","id":{subscription_id},"result":{{{members}}}}}"#
                        )),
                        None => Verdict::Drop("an answer whose result cannot be read"),
                    }
                }
                _ => Verdict::Drop("an answer with both or neither of result and error"),
            };
        };
        if id.is_some() || result.is_some() || error.is_some() {
            return Verdict::Drop("not a notification");
        }
        let Some(method) = json::string(method) else {
            return Verdict::Drop("a method that is not a string");
        };
        // The tag: absent, one, or ambiguous.
        let object_params = params.filter(|p| is_object(p));
        let members = object_params.and_then(model::members);
        let tag: Found<&str> = match (object_params, &members) {
            (None, _) => Found::Absent,
            (Some(_), None) => Found::Ambiguous,
            (Some(_), Some(members)) => {
                let metas: Vec<&str> = members
                    .iter()
                    .filter(|(k, _)| k == "_meta")
                    .map(|(_, v)| *v)
                    .collect();
                match metas[..] {
                    [] => Found::Absent,
                    [meta] if is_object(meta) => match model::members(meta) {
                        Some(meta) => json::unique(&meta, SUBSCRIPTION_ID),
                        None => Found::Ambiguous,
                    },
                    _ => Found::Ambiguous,
                }
            }
        };
        match tag {
            Found::Absent => {}
            Found::One(tag) if json::same_id(tag, subscription_id) => {}
            Found::One(_) => return Verdict::Drop("another subscription"),
            Found::Ambiguous => return Verdict::Drop("an ambiguous subscription tag"),
        }
        let param = |name: &str| {
            members
                .as_ref()
                .and_then(|p| json::unique(p, name).one())
                .and_then(json::string)
        };
        let honoured = match method.as_ref() {
            ACKNOWLEDGED => {
                let Some(members) = members.as_ref() else {
                    return Verdict::Drop("acknowledgment without params");
                };
                return match json::unique(members, "notifications") {
                    Found::One(theirs) => match narrowed(filter.ack(), theirs) {
                        Some(ack) => Verdict::Ack(format!(
                            r#"{{"jsonrpc":"2.0","method":"{ACKNOWLEDGED}","params":{{"notifications":{ack},"_meta":{{"{SUBSCRIPTION_ID}":{subscription_id}}}}}}}"#
                        )),
                        None => {
                            Verdict::Drop("acknowledgment with a malformed notifications object")
                        }
                    },
                    _ => Verdict::Drop("acknowledgment without one notifications object"),
                };
            }
            "notifications/tools/list_changed" => filter.honours(&Topic::List(ListChanged::Tools)),
            "notifications/prompts/list_changed" => {
                filter.honours(&Topic::List(ListChanged::Prompts))
            }
            "notifications/resources/list_changed" => {
                filter.honours(&Topic::List(ListChanged::Resources))
            }
            "notifications/resources/updated" => param("uri").is_some_and(|uri| {
                filter
                    .resource_uris()
                    .any(|honoured| covers(honoured, &uri))
            }),
            "notifications/tasks" => {
                param("taskId").is_some_and(|id| filter.task_ids().any(|t| t == id))
            }
            _ => false,
        };
        if honoured {
            Verdict::Keep
        } else {
            Verdict::Drop("outside the honoured filter")
        }
    }

    const NOTIFICATIONS: &str = r#"{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["file:///logs","demo://a/","x","caf\u00e9"],"taskIds":["t1","t\"2"]}"#;

    /// Messages at the edges of JSON and JSON-RPC that the guard must judge
    /// exactly as the `members` walk did.
    const EDGE_CASES: &[&str] = &[
        "",
        " ",
        "x",
        "[]",
        "null",
        r#""notifications/tools/list_changed""#,
        "{}",
        " { } ",
        "{} x",
        "{",
        r#"{"method":"notifications/tools/list_changed"}"#,
        r#"{"method":"notifications/tools/list_changed","params":{}}"#,
        r#"{"method":"notifications/tools/list_changed"} "#,
        "\t{ \"method\" :\r\n\"notifications/tools/list_changed\" , \"params\" : { \"_meta\" : { \"io.modelcontextprotocol/subscriptionId\" : 7 } } }\n",
        r#"{"method":"notifications/tools/list_changed","method":"notifications/tools/list_changed"}"#,
        r#"{"method":"notifications/tools/list_changed","\u006dethod":"x"}"#,
        r#"{"\u006dethod":"notifications/tools/list_changed"}"#,
        r#"{"method":"notifications\/tools\/list_changed"}"#,
        r#"{"method":"notifications/tools/list_changed","params":{},"params":{}}"#,
        r#"{"method":"notifications/tools/list_changed","id":1,"id":2}"#,
        r#"{"method":"notifications/tools/list_changed","\ud800":1}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"\ud800":1,"_meta":{"io.modelcontextprotocol/subscriptionId":8}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"\udc00":1,"io.modelcontextprotocol/subscriptionId":8}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"x":"\ud800"}}"#,
        r#"{"method":"notifications/tools/list_changed","x":1e400}"#,
        r#"{"method":"notifications/tools/list_changed","params":1e400}"#,
        r#"{"method":"notifications/tools/list_changed","params":[{"_meta":{}}]}"#,
        r#"{"method":"notifications/tools/list_changed","params":"_meta"}"#,
        r#"{"method":"notifications/tools/list_changed","params":null}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":[]}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7.0}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"7"}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":70e-1}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8,"io.modelcontextprotocol/subscriptionId":8}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8},"_meta":{}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol\/subscriptionId":8}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"a":"}\"{","_meta":{"b":["]",{"c":"\\"}],"io.modelcontextprotocol/subscriptionId":8}}}"#,
        r#"{"method":"notifications/prompts/list_changed"}"#,
        r#"{"method":"notifications/resources/list_changed"}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"file:///logs"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"file:///logs/a/b"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"file:///logs2"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"file:///log"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"file:\/\/\/logs\/x"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"demo://a/"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"demo://a/b"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"demo://a"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"x/y"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"xy"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"café/menu"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"caf\u00e9"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"cafe"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"\ud800"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":7}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"x","uri":"x"}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"x","_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#,
        r#"{"method":"notifications/resources/updated","params":{"uri":"x","_meta":{"io.modelcontextprotocol/subscriptionId":1}}}"#,
        r#"{"method":"notifications/tasks","params":{"taskId":"t1"}}"#,
        r#"{"method":"notifications/tasks","params":{"taskId":"t\"2"}}"#,
        r#"{"method":"notifications/tasks","params":{"taskId":"t\u0031"}}"#,
        r#"{"method":"notifications/tasks","params":{"taskId":"t3"}}"#,
        r#"{"method":"notifications/tasks","params":{"taskId":["t1"]}}"#,
        r#"{"method":"notifications/other"}"#,
        r#"{"method":"notification/tools/list_changed"}"#,
        r#"{"method":"ping","id":3}"#,
        r#"{"method":1,"id":7}"#,
        r#"{"method":"\ud800","id":7}"#,
        r#"{"id":7,"result":{}}"#,
        r#"{"id":7.0,"result":{}}"#,
        r#"{"id":"7","result":{}}"#,
        r#"{"id":8,"result":{}}"#,
        r#"{"result":{}}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"taskIds":["t1","t9"]}}}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":[]}}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"notifications":{}}}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":{}}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":[]}"#,
        r#"{"method":"notifications/subscriptions/acknowledged"}"#,
        r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":9}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":07}}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"s":"a
b"}}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"s":"\x"}}"#,
        r#"{"method":"notifications/tools/list_changed",}"#,
        r#"{"method":"notifications/tools/list_changed" "id":1}"#,
        r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":tru}}}"#,
    ];

    #[test]
    fn judges_edge_cases_as_the_members_walk_did() {
        let filter = filter(NOTIFICATIONS);
        let guard = Guard::new(filter.clone());
        for data in EDGE_CASES {
            assert_eq!(guard.judge(data), members_verdict(&filter, data), "{data}");
        }
    }

    proptest::proptest! {
        /// Cuts, splices and byte flips of the edge cases: mostly broken JSON,
        /// which must be judged alike too.
        #[test]
        fn judges_mangled_messages_as_the_members_walk_did(
            case in 0..EDGE_CASES.len(),
            other in 0..EDGE_CASES.len(),
            at in 0usize..200,
            to in 0usize..200,
            byte in proptest::sample::select(b" \t\n\"\\{}[]:,/0123456789.eE+-tnu7ad".to_vec()),
        ) {
            let filter = filter(NOTIFICATIONS);
            let guard = Guard::new(filter.clone());
            let (a, b) = (EDGE_CASES[case].as_bytes(), EDGE_CASES[other].as_bytes());
            let (at, to) = (at.min(a.len()), to.min(b.len()));
            let mut inputs = vec![[&a[..at], &b[to..]].concat()];
            let mut flipped = a.to_vec();
            if at < a.len() {
                flipped[at] = byte;
            } else {
                flipped.push(byte);
            }
            inputs.push(flipped);
            let mut inserted = a.to_vec();
            inserted.insert(at, byte);
            inputs.push(inserted);
            for input in inputs {
                let Ok(data) = std::str::from_utf8(&input) else { continue };
                proptest::prop_assert_eq!(guard.judge(data), members_verdict(&filter, data), "{}", data);
            }
        }

        /// The sorted lookup finds a covering URI exactly when a scan does.
        #[test]
        fn uris_cover_as_the_scan_does(
            honoured in proptest::collection::vec("[ab/é]{0,5}", 0..8),
            uri in "[ab/é]{0,7}",
        ) {
            let uris = Uris::new(honoured.iter().map(String::as_str));
            proptest::prop_assert_eq!(
                uris.cover(&uri),
                honoured.iter().any(|h| covers(h, &uri))
            );
        }
    }

    #[test]
    fn acknowledgments_narrow_to_both() {
        let ours =
            raw(r#"{"toolsListChanged":true,"resourceSubscriptions":["a","b"],"taskIds":["t"]}"#);
        let wide = raw(
            r#"{"promptsListChanged":true,"resourceSubscriptions":["c","b","a"],"toolsListChanged":true,"taskIds":["t","u"]}"#,
        );
        assert_eq!(
            narrowed(&ours, wide.get()).unwrap(),
            r#"{"toolsListChanged":true,"resourceSubscriptions":["a","b"],"taskIds":["t"]}"#
        );
        let narrow = raw(r#"{"resourceSubscriptions":["b"],"toolsListChanged":false}"#);
        assert_eq!(
            narrowed(&ours, narrow.get()).unwrap(),
            r#"{"resourceSubscriptions":["b"]}"#
        );
        assert_eq!(narrowed(&ours, "{}").unwrap(), "{}");
        assert!(narrowed(&ours, "[]").is_none());
    }

    #[test]
    fn the_listens_own_response_passes_without_an_ack() {
        let profile = crate::profile::ServerProfile::builder().build().unwrap();
        let (parts, ()) = http::Request::new(()).into_parts();
        let id = raw("7");
        let params = raw(r#"{"notifications":{"toolsListChanged":true}}"#);
        let filter = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(crate::filter::honour(&profile, &parts, &id, Some(&params)))
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

    #[test]
    fn dot_segments_are_never_below_a_prefix() {
        let honoured = "demo://users/alice/notes";
        for uri in [
            "demo://users/alice/notes/../../bob/notes",
            "demo://users/alice/notes/%2e%2E/%2e./bob/notes",
            "demo://users/alice/notes/./x",
            "demo://users/alice/notes/..",
            "demo://users/alice/notes/%2E",
        ] {
            assert!(!covers(honoured, uri), "{uri}");
            let uris = Uris::new([honoured].into_iter());
            assert!(!uris.cover(uri), "{uri}");
            // Only an exact match covers it.
            assert!(covers(uri, uri), "{uri}");
            assert!(Uris::new([uri].into_iter()).cover(uri), "{uri}");
        }
        for uri in [
            "demo://users/alice/notes/...",
            "demo://users/alice/notes/.hidden",
            "demo://users/alice/notes/a..b",
            "demo://users/alice/notes/%2e%2e%2e",
        ] {
            assert!(covers(honoured, uri), "{uri}: not a dot segment");
        }
    }
}
