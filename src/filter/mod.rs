//! The honoured filter of a `subscriptions/listen` request.
//!
//! [`honour`] validates the request's `notifications` filter, authorizes it
//! for the caller, deduplicates and bounds it, and yields the
//! [`HonouredFilter`]: what the acknowledgment says and what the stream may
//! carry. Validation completes before any hook runs, so bad input costs no
//! hook calls.
//!
//! Files: `validate.rs` (the filter's types and bounds, before any hook),
//! `ack.rs` (the acknowledgment's writer), `stream.rs` (what every listen
//! stream says, and the sub-resource rule), `tests.rs`.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use self::ack::Ack;
use self::validate::{declares_tasks, validate, Field, Validated};
use crate::advertise::{Era, TASKS_EXTENSION};
use crate::hooks::{answer, Principal};
use crate::jsonrpc::{
    JsonRpcError, INVALID_PARAMS, INVALID_REQUEST, MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use crate::profile::{ServerProfile, UnreadableUris};

mod ack;
pub(crate) mod stream;
mod validate;

/// One field of a listen filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `toolsListChanged`
    ToolsListChanged,
    /// `promptsListChanged`
    PromptsListChanged,
    /// `resourcesListChanged`
    ResourcesListChanged,
    /// `resourceSubscriptions`
    ResourceSubscriptions,
    /// `taskIds` (tasks extension)
    TaskIds,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::ToolsListChanged,
        Kind::PromptsListChanged,
        Kind::ResourcesListChanged,
        Kind::ResourceSubscriptions,
        Kind::TaskIds,
    ];

    /// The field's name in the `notifications` object.
    pub fn field(self) -> &'static str {
        match self {
            Kind::ToolsListChanged => "toolsListChanged",
            Kind::PromptsListChanged => "promptsListChanged",
            Kind::ResourcesListChanged => "resourcesListChanged",
            Kind::ResourceSubscriptions => "resourceSubscriptions",
            Kind::TaskIds => "taskIds",
        }
    }

    fn from_field(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.field() == name)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`Kind`]s: what a filter honours, for telemetry.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Kinds(u8);

impl Kinds {
    /// True when `kind` is in the set.
    pub fn contains(self, kind: Kind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The kinds in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Kind> {
        Kind::ALL
            .into_iter()
            .filter(move |kind| self.contains(*kind))
    }

    /// True when the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn insert(&mut self, kind: Kind) {
        self.0 |= kind.bit();
    }
}

impl fmt::Debug for Kinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(Kind::field)).finish()
    }
}

/// What a listen stream registers under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topic {
    /// The list-changed notification of this list.
    List(ListChanged),
    /// `notifications/resources/updated` for this URI.
    Resource(String),
    /// `notifications/tasks` for this task, keyed by its owner so the stream
    /// hears it only while the caller owns it.
    Task {
        /// The task's owner: the caller of the listen.
        owner: Principal,
        /// The task id.
        id: String,
    },
}

/// Which list changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListChanged {
    /// `notifications/tools/list_changed`
    Tools,
    /// `notifications/prompts/list_changed`
    Prompts,
    /// `notifications/resources/list_changed`
    Resources,
}

impl ListChanged {
    /// The method of its notification.
    #[cfg(feature = "hub")]
    pub(crate) fn method(self) -> &'static str {
        match self {
            ListChanged::Tools => "notifications/tools/list_changed",
            ListChanged::Prompts => "notifications/prompts/list_changed",
            ListChanged::Resources => "notifications/resources/list_changed",
        }
    }

    #[cfg(feature = "hub")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The result of honouring a listen filter for one caller.
///
/// The layer inserts it into the request extensions of every listen it
/// passes on.
#[derive(Clone)]
pub struct HonouredFilter(Arc<Honoured>);

// Shared: the layer hands one copy to the inner service and one to the
// stream guard, and a thousand topics are not worth copying.
#[derive(Debug)]
struct Honoured {
    ack: Box<RawValue>,
    topics: Vec<Topic>,
    kinds: Kinds,
    subscription_id: Box<RawValue>,
    requested_uris: usize,
    requested_task_ids: usize,
    principal: Option<Principal>,
}

impl HonouredFilter {
    /// The `notifications` object of the acknowledgment: honoured fields
    /// only, each with its honoured value, in request order (JSON text).
    pub fn ack(&self) -> &RawValue {
        &self.0.ack
    }

    /// What the stream registers under.
    pub fn topics(&self) -> &[Topic] {
        &self.0.topics
    }

    /// True when the filter honours nothing: its stream would never carry
    /// a notification, so the listen is acknowledged and ends at once.
    pub fn is_empty(&self) -> bool {
        self.0.topics.is_empty()
    }

    /// The honoured fields.
    pub fn kinds(&self) -> Kinds {
        self.0.kinds
    }

    /// The listen request's JSON-RPC id, unchanged: the subscription id.
    pub fn subscription_id(&self) -> &RawValue {
        &self.0.subscription_id
    }

    /// True when `other` is this very filter (a clone of it), not one
    /// honoured anew that is equal to it.
    #[cfg(feature = "hub")]
    pub(crate) fn is(&self, other: &HonouredFilter) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// True when `topic` is honoured.
    pub fn honours(&self, topic: &Topic) -> bool {
        self.0.topics.contains(topic)
    }

    /// The honoured resource URIs, in request order.
    pub fn resource_uris(&self) -> impl Iterator<Item = &str> {
        self.0.topics.iter().filter_map(|topic| match topic {
            Topic::Resource(uri) => Some(uri.as_str()),
            _ => None,
        })
    }

    /// The honoured task ids, in request order.
    pub fn task_ids(&self) -> impl Iterator<Item = &str> {
        self.0.topics.iter().filter_map(|topic| match topic {
            Topic::Task { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// How many URIs the request listed (before deduplication).
    pub fn requested_uris(&self) -> usize {
        self.0.requested_uris
    }

    /// How many task ids the request listed (before deduplication).
    pub fn requested_task_ids(&self) -> usize {
        self.0.requested_task_ids
    }

    /// The caller the filter was honoured for, `None` when anonymous.
    pub fn principal(&self) -> Option<&Principal> {
        self.0.principal.as_ref()
    }
}

impl fmt::Debug for HonouredFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Honoured {
            ack,
            topics,
            kinds,
            subscription_id,
            requested_uris,
            requested_task_ids,
            principal,
        } = &*self.0;
        f.debug_struct("HonouredFilter")
            .field("ack", ack)
            .field("topics", topics)
            .field("kinds", kinds)
            .field("subscription_id", subscription_id)
            .field("requested_uris", requested_uris)
            .field("requested_task_ids", requested_task_ids)
            .field("principal", principal)
            .finish()
    }
}

/// Why a listen filter was not honoured.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ListenError {
    /// The params are malformed (-32602); the message says which field and why.
    InvalidParams(String),
    /// `taskIds` was sent without declaring the tasks extension (-32021).
    MissingTasksCapability,
    /// A URI the caller may not read was asked for under the
    /// [`Refuse`](UnreadableUris::Refuse) policy (-32602, naming no URI).
    UnreadableResource,
    /// The caller has an open listen under the same subscription id, the
    /// listen request's id that tags every message of its stream (-32600,
    /// HTTP 409): two streams under one tag could not be told apart.
    SubscriptionIdInUse,
}

impl ListenError {
    /// The error as JSON-RPC, with its code, message, data and HTTP status.
    pub fn to_jsonrpc(&self) -> JsonRpcError {
        match self {
            Self::InvalidParams(message) => JsonRpcError::new(INVALID_PARAMS, message.clone()),
            Self::MissingTasksCapability => JsonRpcError::new(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "`notifications.taskIds` needs the client capability extension `io.modelcontextprotocol/tasks`",
            )
            .with_data(serde_json::json!({
                "requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}
            })),
            Self::UnreadableResource => JsonRpcError::new(
                INVALID_PARAMS,
                "`notifications.resourceSubscriptions` names a resource that cannot be subscribed to",
            ),
            Self::SubscriptionIdInUse => JsonRpcError::new(
                INVALID_REQUEST,
                "an open listen of this caller has this request id as its subscription id: \
                 listen under another id, or end that listen first",
            )
            .with_status(http::StatusCode::CONFLICT),
        }
    }

    /// The JSON-RPC code.
    pub fn code(&self) -> i64 {
        self.to_jsonrpc().code()
    }

    /// The HTTP status the error is answered with.
    pub fn status(&self) -> http::StatusCode {
        self.to_jsonrpc().status()
    }

    /// The JSON-RPC error response for request `id`.
    pub fn to_body(&self, id: Option<&RawValue>) -> bytes::Bytes {
        self.to_jsonrpc().to_body(id)
    }
}

impl fmt::Display for ListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_jsonrpc(), f)
    }
}

impl std::error::Error for ListenError {}

/// Honours the `params` of a listen request with JSON-RPC `id` for the
/// caller of `parts`.
///
/// `params` is `None` when the request had none. The capabilities honoured
/// are the profile's modern ones, narrowed for the caller when the profile
/// narrows per caller.
///
/// ```
/// use mcp_edge::{honour, ServerProfile};
/// use serde_json::value::RawValue;
///
/// # futures_lite_block_on(async {
/// let profile = ServerProfile::builder().build().unwrap();
/// let (parts, ()) = http::Request::new(()).into_parts();
/// let id: &RawValue = serde_json::from_str("1").unwrap();
/// let params: &RawValue = serde_json::from_str(
///     r#"{"notifications": {"toolsListChanged": true, "promptsListChanged": false,
///         "resourceSubscriptions": ["file:///a", "file:///a"]}}"#,
/// ).unwrap();
/// let filter = honour(&profile, &parts, id, Some(params)).await.unwrap();
/// assert_eq!(filter.ack().get(), r#"{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]}"#);
/// # });
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub async fn honour(
    profile: &ServerProfile,
    parts: &Parts,
    id: &RawValue,
    params: Option<&RawValue>,
) -> Result<HonouredFilter, ListenError> {
    honour_at(profile, parts, id.to_owned(), params.map(RawValue::get))
        .await
        .map(|(filter, _)| filter)
}

/// [`honour`] of `params` as JSON text known to be valid, also yielding
/// `params.notifications`, so the layer splices the ack in without reading
/// the params again.
pub(crate) async fn honour_at<'a>(
    profile: &ServerProfile,
    parts: &Parts,
    id: Box<RawValue>,
    params: Option<&'a str>,
) -> Result<(HonouredFilter, &'a str), ListenError> {
    let Validated {
        fields,
        meta,
        notifications,
    } = validate(profile, params)?;
    let caller = profile.principal(parts);
    let narrowed;
    let caps = if profile.narrows_per_caller() {
        narrowed = profile.capabilities_for(caller.as_ref(), Era::Modern);
        &narrowed
    } else {
        profile.capabilities(Era::Modern)
    };
    let tasks_on = profile.tasks_enabled() && has_tasks_extension(caps);

    let (requested_uris, requested_task_ids) = requested(&fields);
    if tasks_on && fields.iter().any(|f| matches!(f, Field::TaskIds(_))) && !declares_tasks(meta) {
        return Err(ListenError::MissingTasksCapability);
    }
    // The ack is at most about as long as the filter it honours.
    let mut honoured = Honouring {
        ack: Ack::with_capacity(notifications.len()),
        topics: Vec::new(),
        kinds: Kinds::default(),
    };
    for field in &fields {
        match *field {
            Field::Flag(kind, true) => honoured.flag(kind, caps),
            Field::Flag(_, false) => {}
            Field::Uris(ref uris) if flag(caps, "resources", "subscribe") => {
                let kept = honour_uris(profile, caller.as_ref(), dedup(uris)).await?;
                honoured.uris(&kept);
            }
            Field::Uris(_) => {}
            Field::TaskIds(ref ids) => {
                let (Some(owner), Some(directory), true) =
                    (&caller, profile.task_directory(), tasks_on)
                else {
                    continue;
                };
                let mut ids = dedup(ids);
                let names: Vec<&str> = ids.iter().map(|id| &***id).collect();
                let owned = directory.owned(owner, &names).await;
                keep(&mut ids, &owned);
                honoured.task_ids(owner, &ids);
            }
        }
    }
    let Honouring { ack, topics, kinds } = honoured;

    let filter = HonouredFilter(Arc::new(Honoured {
        ack: ack.finish(),
        topics,
        kinds,
        subscription_id: id,
        requested_uris,
        requested_task_ids,
        principal: caller,
    }));
    Ok((filter, notifications))
}

/// How many URIs and task ids `fields` request.
fn requested(fields: &[Field<'_>]) -> (usize, usize) {
    fields
        .iter()
        .fold((0, 0), |(uris, ids), field| match field {
            Field::Uris(u) => (uris + u.len(), ids),
            Field::TaskIds(t) => (uris, ids + t.len()),
            Field::Flag(..) => (uris, ids),
        })
}

/// The honoured filter as it is built, field by field in request order.
struct Honouring {
    ack: Ack,
    topics: Vec<Topic>,
    kinds: Kinds,
}

impl Honouring {
    /// A list-changed flag asked `true`: honoured when `caps` advertise
    /// its list's changes.
    fn flag(&mut self, kind: Kind, caps: &Map<String, Value>) {
        let (capability, topic) = match kind {
            Kind::ToolsListChanged => ("tools", Topic::List(ListChanged::Tools)),
            Kind::PromptsListChanged => ("prompts", Topic::List(ListChanged::Prompts)),
            _ => ("resources", Topic::List(ListChanged::Resources)),
        };
        if flag(caps, capability, "listChanged") {
            self.ack.push_true(kind);
            self.topics.push(topic);
            self.kinds.insert(kind);
        }
    }

    /// The URIs kept, when any.
    fn uris(&mut self, kept: &[&Cow<'_, str>]) {
        if !kept.is_empty() {
            self.ack.push_strings(Kind::ResourceSubscriptions, kept);
            self.topics.extend(
                kept.iter()
                    .map(|uri| Topic::Resource(String::from(&***uri))),
            );
            self.kinds.insert(Kind::ResourceSubscriptions);
        }
    }

    /// The task ids of `owner` kept, when any.
    fn task_ids(&mut self, owner: &Principal, kept: &[&Cow<'_, str>]) {
        if !kept.is_empty() {
            self.ack.push_strings(Kind::TaskIds, kept);
            self.topics.extend(kept.iter().map(|id| Topic::Task {
                owner: owner.clone(),
                id: String::from(&***id),
            }));
            self.kinds.insert(Kind::TaskIds);
        }
    }
}

/// Keeps the first occurrence of each item, in order.
fn dedup<'b, 'a>(items: &'b [Cow<'a, str>]) -> Vec<&'b Cow<'a, str>> {
    let mut seen: HashSet<&'b str> = HashSet::with_capacity(items.len());
    items.iter().filter(|item| seen.insert(item)).collect()
}

/// Keeps the items a hook answered yes for.
fn keep<T>(items: &mut Vec<T>, answers: &[bool]) {
    let mut index = 0;
    items.retain(|_| {
        index += 1;
        answer(answers, index - 1)
    });
}

/// Step 5: readable by the caller and accepted by the subscription hook.
async fn honour_uris<'b, 'a>(
    profile: &ServerProfile,
    caller: Option<&Principal>,
    mut uris: Vec<&'b Cow<'a, str>>,
) -> Result<Vec<&'b Cow<'a, str>>, ListenError> {
    let mut names: Vec<&'b str> = uris.iter().map(|uri| &***uri).collect();
    if let Some(access) = profile.resource_access() {
        let answers = crate::metrics::access_hook(access.readable(caller, &names)).await;
        keep(&mut uris, &answers);
        if uris.len() < names.len() && profile.unreadable_uris() == UnreadableUris::Refuse {
            return Err(ListenError::UnreadableResource);
        }
        keep(&mut names, &answers);
    }
    if let Some(hook) = profile.subscription_hook() {
        let answers = hook.accepts(&names).await;
        keep(&mut uris, &answers);
    }
    Ok(uris)
}

/// `caps[capability][key] == true`.
fn flag(caps: &Map<String, Value>, capability: &str, key: &str) -> bool {
    caps.get(capability).and_then(|c| c.get(key)) == Some(&Value::Bool(true))
}

fn has_tasks_extension(caps: &Map<String, Value>) -> bool {
    caps.get("extensions")
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some()
}

#[cfg(test)]
mod tests;
