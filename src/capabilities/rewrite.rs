//! The capabilities rewrite of an `initialize` or `server/discover`
//! response: what it is rewritten with ([`Target`]), the JSON rewrite, and
//! the rule for an SSE response ([`ResultRewrite`]).

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;

use crate::advertise::{Advertised, Era, MANAGED, TASKS_EXTENSION};
use crate::codec::json::{self, Found};
use serde_json::value::RawValue;

use crate::codec::sse::{self, Event};
use crate::hooks::Principal;
use crate::http::event_stream::EventRule;
use crate::http::intercept::{replace_answer, AnswerRule, Rewritten};
use crate::metrics::{self, Dropped, Replaced};
use crate::profile::ServerProfile;

/// What a response to an intercepted request is rewritten with.
pub(crate) struct Target {
    /// The request's id, as JSON text.
    id: Box<str>,
    era: Era,
    profile: ServerProfile,
    // Boxed: rare, and the target rides in every response future.
    narrowed: Option<Box<Advertised>>,
}

impl Target {
    pub(crate) fn new(
        id: Box<str>,
        era: Era,
        profile: ServerProfile,
        caller: Option<&Principal>,
    ) -> Self {
        let narrowed = profile
            .narrows_per_caller()
            .then(|| Box::new(Advertised::new(profile.capabilities_for(caller, era))));
        Self {
            id,
            era,
            profile,
            narrowed,
        }
    }
}

impl Target {
    /// The rewritten message, or why `text` is not rewritten.
    fn rewrite(&self, text: &str) -> Result<String, Skip> {
        let caps = self
            .narrowed
            .as_deref()
            .unwrap_or_else(|| self.profile.advertised(self.era));
        // Capabilities that depend on the caller must not be cached for others.
        let private = self.narrowed.is_some() && self.era == Era::Modern;
        let rewritten = rewrite_response(text, &self.id, caps, private)?;
        tracing::debug!(
            narrowed = self.narrowed.is_some(),
            "capabilities: the answer carries the profile's"
        );
        Ok(rewritten)
    }
}

impl AnswerRule for Target {
    type Events = ResultRewrite;

    fn limit(&self) -> usize {
        self.profile.limits().max_rewritten_response
    }

    fn id(&self) -> &str {
        &self.id
    }

    /// The rewritten response; an error answer passes as it came; anything
    /// else is replaced.
    fn rewrite(&self, text: &str) -> Rewritten {
        match Target::rewrite(self, text) {
            Ok(text) => Rewritten::Body(text),
            Err(Skip::Error) => Rewritten::Kept,
            Err(Skip::Other | Skip::Foreign) => {
                Rewritten::Replaced(Replaced::Foreign, "the answer is not the request's")
            }
            Err(Skip::Broken(reason)) => Rewritten::Replaced(Replaced::Malformed, reason),
        }
    }

    fn into_events(self) -> ResultRewrite {
        ResultRewrite::new(self)
    }
}

/// Rewrites the event of an SSE response that carries the answer, and
/// replaces what could be read as the answer but cannot be rewritten.
/// Every event is judged: a second answer is dropped.
pub(crate) struct ResultRewrite {
    target: Target,
    answered: bool,
}

impl ResultRewrite {
    pub(crate) fn new(target: Target) -> Self {
        Self {
            target,
            answered: false,
        }
    }

    /// Sends `event` as the answer, unless one was sent.
    fn answer(&mut self, event: Bytes, out: &mut VecDeque<Bytes>) {
        if self.answered {
            metrics::events_dropped(Dropped::Capabilities, 1);
            tracing::debug!("capabilities: dropped a second answer");
            return;
        }
        self.answered = true;
        out.push_back(event);
    }

    /// The error event in the answer's place, for `reason`.
    fn replace_answer(&self, kind: Replaced, reason: &'static str) -> Bytes {
        let id = RawValue::from_string(self.target.id().to_owned()).ok();
        let data = replace_answer(kind, reason).to_body(id.as_deref());
        let data = String::from_utf8_lossy(&data);
        sse::EventFields {
            data: &data,
            ..Default::default()
        }
        .to_bytes()
    }
}

impl EventRule for ResultRewrite {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        let data = match event.data() {
            Some(data) if !data.trim_ascii().is_empty() => data,
            // Comments, keep-alives and priming events carry no message.
            _ => {
                out.push_back(event.raw);
                return;
            }
        };
        match self.target.rewrite(&data) {
            Ok(rewritten) => {
                let rewritten = event.with_data(&rewritten);
                self.answer(rewritten, out);
            }
            Err(Skip::Other) => out.push_back(event.raw),
            // A response to another request could be read as this one's by a
            // client that matches ids loosely: it never passes.
            Err(Skip::Foreign) => {
                metrics::events_dropped(Dropped::Capabilities, 1);
                tracing::debug!("capabilities: dropped an answer to another request");
            }
            Err(Skip::Error) => self.answer(event.raw, out),
            Err(Skip::Broken(reason)) => {
                let replaced = self.replace_answer(Replaced::Malformed, reason);
                self.answer(replaced, out);
            }
        }
    }

    fn on_unterminated(&mut self, _: Bytes, out: &mut VecDeque<Bytes>) {
        // The SSE rules discard it; a client that does not could read it as the answer.
        if !self.answered {
            let replaced =
                self.replace_answer(Replaced::Truncated, "the stream ended inside an event");
            self.answer(replaced, out);
        }
    }
}

/// The members of a JSON object as a parser that keeps the last of duplicate
/// keys reads them: each key once, at its first place, with its last value.
fn last_wins(members: json::Members<'_>) -> json::Members<'_> {
    let mut distinct: json::Members<'_> = Vec::with_capacity(members.len());
    for (key, value) in members {
        match distinct.iter_mut().find(|(seen, _)| *seen == key) {
            Some(slot) => slot.1 = value,
            None => distinct.push((key, value)),
        }
    }
    distinct
}

/// The inner service's capabilities `theirs` (valid JSON text) with the
/// managed keys the profile's: keys the profile does not manage
/// (`experimental`, foreign `extensions` entries) keep their place and their
/// bytes, the profile's keys take the place of theirs or follow them.
/// `None` when theirs hold nothing the profile does not replace (or are not
/// an object), so the profile's serialized capabilities stand alone.
fn merge(theirs: &str, ours: &Advertised) -> Option<String> {
    let members = last_wins(json::members(theirs)?);
    let mut out = Vec::with_capacity(theirs.len() + ours.json().len());
    let mut foreign = false;
    let mut placed: Vec<&str> = Vec::new();
    out.push(b'{');
    for (key, value) in &members {
        let key = key.as_ref();
        if MANAGED.contains(&key) {
            continue;
        }
        let entries = (key == "extensions")
            .then(|| json::members(value))
            .flatten();
        if let Some(entries) = entries {
            let mut entries = last_wins(entries);
            entries.retain(|(name, _)| name != TASKS_EXTENSION);
            if entries.is_empty() {
                continue;
            }
            let mut merged = vec![b'{'];
            for (name, entry) in &entries {
                let value = ours.extension(name).unwrap_or_else(|| {
                    foreign = true;
                    entry
                });
                json::push_member(&mut merged, name, value.as_bytes());
            }
            for (name, value) in ours.extensions() {
                if !entries.iter().any(|(theirs, _)| theirs == name) {
                    json::push_member(&mut merged, name, value.as_bytes());
                }
            }
            merged.push(b'}');
            json::push_member(&mut out, key, &merged);
            placed.push(key);
            continue;
        }
        match ours.value(key) {
            Some(ours) => {
                json::push_member(&mut out, key, ours.as_bytes());
                placed.push(key);
            }
            None => {
                foreign = true;
                json::push_member(&mut out, key, value.as_bytes());
            }
        }
    }
    if !foreign {
        return None;
    }
    for (key, value) in ours.values() {
        if !placed.contains(&key) {
            json::push_member(&mut out, key, value.as_bytes());
        }
    }
    out.push(b'}');
    // Text and serde_json's output: UTF-8 throughout.
    String::from_utf8(out).ok()
}

/// Why a message was not rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Not an answer: a notification or a request of the inner service's.
    Other,
    /// A response to another id.
    Foreign,
    /// The answer, as a JSON-RPC error: it carries no capabilities.
    Error,
    /// The answer, or what may be read as it, in a shape the rewrite cannot
    /// keep its promise on: replaced by an error.
    Broken(&'static str),
}

/// What the rewrite puts in place of a value of `result`.
#[derive(Clone, Copy)]
enum Put {
    Capabilities,
    Private,
}

/// Rewrites the JSON-RPC response `text` to request `id`: every
/// `result.capabilities` becomes the inner's capabilities (the last, as a
/// parser that keeps the last of duplicate keys reads them) with the managed
/// keys `caps`' (see [`merge`]), and every `result.cacheScope`
/// becomes `"private"` when `private`; missing ones are added at the end of
/// `result`. Every other byte stays as it was.
fn rewrite_response(
    text: &str,
    id: &str,
    caps: &Advertised,
    private: bool,
) -> Result<String, Skip> {
    let read = Read::of(text, private)?;
    read.check(id)?;
    let merged = read
        .theirs
        .filter(|_| read.foreign)
        .and_then(|theirs| merge(theirs, caps));
    let caps_json = merged.as_deref().unwrap_or(caps.json());
    Ok(read.rewritten(text, caps_json, private))
}

/// What one checking pass over a response read: the members the rewrite
/// needs and, in every `result`, where the values to replace are.
struct Read<'a> {
    their_id: Found<&'a str>,
    error: Found<&'a str>,
    method: Found<&'a str>,
    /// The values to replace, in every `result` in turn.
    places: Vec<(Range<usize>, Put)>,
    results: Vec<ResultPlace>,
    /// The inner's capabilities (the last), and whether they may hold a key
    /// the profile does not manage.
    theirs: Option<&'a str>,
    foreign: bool,
    /// A `result` or its capabilities is not an object.
    shapeless: bool,
}

impl<'a> Read<'a> {
    /// Reads `text` in one checking pass (`cacheScope` too when `private`).
    fn of(text: &'a str, private: bool) -> Result<Self, Skip> {
        let mut read = Read {
            their_id: Found::Absent,
            error: Found::Absent,
            method: Found::Absent,
            places: Vec::new(),
            results: Vec::new(),
            theirs: None,
            foreign: false,
            shapeless: false,
        };
        json::Walk::document(text, |walk, key| {
            let slot = match &*key {
                "id" => &mut read.their_id,
                "error" => &mut read.error,
                "method" => &mut read.method,
                "result" if walk.at_object() => return read.result(text, walk, private),
                "result" => {
                    walk.skip()?;
                    read.shapeless = true;
                    read.results.push(ResultPlace::default());
                    return Some(());
                }
                _ => return walk.skip(),
            };
            slot.record(walk.value()?);
            Some(())
        })
        .ok_or(Skip::Broken("the message is not one JSON object"))?;
        Ok(read)
    }

    /// Reads the `result` object next in `walk`.
    #[inline]
    fn result(&mut self, text: &'a str, walk: &mut json::Walk<'a>, private: bool) -> Option<()> {
        let mut place = ResultPlace {
            first: self.places.len(),
            ..ResultPlace::default()
        };
        let (value, readable) = walk.members(|walk, key| {
            place.members += 1;
            let (value, put) = match key.as_ref() {
                "capabilities" => {
                    self.shapeless |= !walk.at_object();
                    let value = read_capabilities(walk, &mut self.foreign)?;
                    self.theirs = Some(value);
                    place.capabilities = true;
                    (value, Put::Capabilities)
                }
                "cacheScope" if private => {
                    place.scope = true;
                    (walk.value()?, Put::Private)
                }
                _ => return walk.skip(),
            };
            self.places.push((json::span(text, value), put));
            Some(())
        })?;
        self.shapeless |= !readable;
        place.close = json::span(text, value).end - 1;
        self.results.push(place);
        Some(())
    }

    /// Whether this is a success response to request `id` that can be
    /// rewritten, or why not.
    fn check(&self, id: &str) -> Result<(), Skip> {
        let (Some(their_id), Some(error), Some(method)) = (
            self.their_id.unambiguous(),
            self.error.unambiguous(),
            self.method.unambiguous(),
        ) else {
            return Err(Skip::Broken("the message has a member twice"));
        };
        if self.results.is_empty() && error.is_none() {
            if method.is_some() {
                // A request or a notification of the inner service's.
                return Err(Skip::Other);
            }
            return Err(Skip::Broken("the message is neither a result nor an error"));
        }
        let their_id = their_id.ok_or(Skip::Broken("the response has no id"))?;
        if !json::same_id(their_id, id) {
            return Err(Skip::Foreign);
        }
        match (self.results.is_empty(), error) {
            (true, _) => return Err(Skip::Error),
            (false, None) => {}
            (false, Some(_)) => {
                return Err(Skip::Broken("the response has both a result and an error"))
            }
        }
        if self.shapeless {
            return Err(Skip::Broken(
                "a result or its capabilities is not an object",
            ));
        }
        Ok(())
    }

    /// `text` with every `result`'s values replaced (a second `result` is
    /// read by parsers that keep the last of duplicate keys), and what it
    /// lacks added before its closing brace.
    fn rewritten(&self, text: &str, caps_json: &str, private: bool) -> String {
        let replacement = |put| match put {
            Put::Capabilities => caps_json,
            Put::Private => "\"private\"",
        };
        let mut missing = vec![String::new(); self.results.len()];
        for (place, missing) in self.results.iter().zip(&mut missing) {
            let mut add = |key: &str, put| {
                if place.members > 0 || !missing.is_empty() {
                    missing.push(',');
                }
                missing.push('"');
                missing.push_str(key);
                missing.push_str("\":");
                missing.push_str(replacement(put));
            };
            if !place.capabilities {
                add("capabilities", Put::Capabilities);
            }
            if private && !place.scope {
                add("cacheScope", Put::Private);
            }
        }
        let mut edits: Vec<(Range<usize>, &str)> =
            Vec::with_capacity(self.places.len() + self.results.len());
        let ends = self
            .results
            .iter()
            .skip(1)
            .map(|r| r.first)
            .chain([self.places.len()]);
        for ((place, end), missing) in self.results.iter().zip(ends).zip(&missing) {
            edits.extend(
                self.places[place.first..end]
                    .iter()
                    .map(|(range, put)| (range.clone(), replacement(*put))),
            );
            edits.push((place.close..place.close, missing));
        }
        json::splice(text, &edits)
    }
}

/// Where a `result` object is, and what it holds of what is replaced.
#[derive(Default)]
struct ResultPlace {
    /// The index of its first place in the list of values to replace.
    first: usize,
    /// The offset of its closing brace.
    close: usize,
    members: usize,
    capabilities: bool,
    scope: bool,
}

/// Walks the inner's capabilities; sets `foreign` when they may hold a key
/// the profile does not manage (when in doubt, so that [`merge`] decides).
/// Their text.
fn read_capabilities<'a>(walk: &mut json::Walk<'a>, foreign: &mut bool) -> Option<&'a str> {
    if !walk.at_object() {
        return walk.value();
    }
    let (text, readable) = walk.members(|walk, key| {
        if key == "extensions" && walk.at_object() {
            let (_, readable) = walk.members(|walk, name| {
                *foreign |= name != TASKS_EXTENSION;
                walk.skip()
            })?;
            *foreign |= !readable;
            return Some(());
        }
        *foreign |= !MANAGED.contains(&key.as_ref());
        walk.skip()
    })?;
    *foreign |= !readable;
    Some(text)
}

#[cfg(test)]
mod tests;
