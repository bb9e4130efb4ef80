//! [`ServerProfile`]: one immutable description of what the server offers.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use serde_json::{Map, Value};

use crate::access::Decisions;
use crate::advertise::{self, Advertised, Era, Features};
use crate::hooks::{
    CapabilityNarrowing, ExtensionPrincipal, Principal, PrincipalLookup, ResourceAccess,
    SubscriptionHook, TaskDirectory,
};

/// What the server offers, built once and shared by both layers.
///
/// Cloning is an `Arc` clone. Capabilities for both eras are computed when
/// the profile is built, so the layers only splice them in.
///
/// ```
/// use mcp_edge::{Era, ServerProfile};
/// use serde_json::json;
///
/// let profile = ServerProfile::builder().build().unwrap();
/// assert_eq!(
///     serde_json::Value::Object(profile.capabilities(Era::Modern).clone()),
///     json!({"tools": {"listChanged": true}, "resources": {"listChanged": true, "subscribe": true},
///            "prompts": {"listChanged": true}, "logging": {}})
/// );
/// ```
#[derive(Clone)]
pub struct ServerProfile {
    inner: Arc<Inner>,
}

struct Inner {
    legacy: Advertised,
    modern: Advertised,
    resource_access: Option<Box<dyn ResourceAccess>>,
    subscription_hook: Option<Box<dyn SubscriptionHook>>,
    task_directory: Option<Box<dyn TaskDirectory>>,
    principal: Box<dyn PrincipalLookup>,
    narrowing: Option<Box<dyn CapabilityNarrowing>>,
    limits: Limits,
    unreadable_uris: UnreadableUris,
    decisions: Decisions,
}

/// How long a decision of the [`ResourceAccess`] hook is kept by default.
const ACCESS_TTL: Duration = Duration::from_secs(30);

/// Bounds on what the layers read, and on what one listen may ask for.
///
/// Build one with [`Limits::new`] (the defaults) and set the fields, or use
/// the [`ServerProfileBuilder`] methods of the same names. New limits may be
/// added in later releases, so the struct cannot be written as a literal.
///
/// ```
/// use mcp_edge::{Limits, ServerProfile};
///
/// let mut limits = Limits::new();
/// limits.max_uris = 100;
/// let profile = ServerProfile::builder().limits(limits).build().unwrap();
/// assert_eq!(profile.limits().max_uris, 100);
/// assert_eq!(profile.limits().max_peek, 1024 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most URIs in a listen's `resourceSubscriptions` (default 1000).
    pub max_uris: usize,
    /// Most task ids in a listen's `taskIds` (default 1000).
    pub max_task_ids: usize,
    /// Most bytes of a listen request body, which is read whole (default 1 MiB).
    pub max_listen_body: usize,
    /// How far into any other `POST` body the layers read to find its
    /// top-level `method`, and to the end of an `initialize` or
    /// `server/discover` body (default 1 MiB). A body is read in the chunks
    /// it comes in: one not decided once more than this was read is refused
    /// (413) by [`ListenFilterLayer`](crate::ListenFilterLayer) and
    /// [`EdgeLayer`](crate::EdgeLayer); [`CapabilitiesLayer`](crate::CapabilitiesLayer)
    /// alone refuses only an `initialize` or `server/discover` it cannot
    /// read within it, and passes any other body on.
    pub max_peek: usize,
    /// The largest `initialize`, `server/discover` or listen answer (not an
    /// event stream), of any status, that is read to be checked; a longer
    /// one is replaced by a -32603 error for the request's id (default
    /// 1 MiB).
    pub max_rewritten_response: usize,
}

impl Limits {
    /// The default limits.
    pub const fn new() -> Self {
        Self {
            max_uris: 1000,
            max_task_ids: 1000,
            max_listen_body: 1024 * 1024,
            max_peek: 1024 * 1024,
            max_rewritten_response: 1024 * 1024,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// What a listen does with a URI its caller may not read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnreadableUris {
    /// Leave it out of the honoured filter, exactly as if it had not been asked for.
    #[default]
    Drop,
    /// Fail the whole listen with -32602, naming no URI.
    Refuse,
}

impl ServerProfile {
    /// Starts a profile with the defaults of every entry.
    pub fn builder() -> ServerProfileBuilder {
        ServerProfileBuilder::default()
    }

    /// The capabilities advertised in `era`, before any per-caller narrowing.
    pub fn capabilities(&self, era: Era) -> &Map<String, Value> {
        self.advertised(era).map()
    }

    pub(crate) fn advertised(&self, era: Era) -> &Advertised {
        match era {
            Era::Legacy => &self.inner.legacy,
            Era::Modern => &self.inner.modern,
        }
    }

    /// The capabilities advertised to `caller` in `era`: the profile's,
    /// narrowed by the [`CapabilityNarrowing`] hook when one is set.
    pub fn capabilities_for(&self, caller: Option<&Principal>, era: Era) -> Map<String, Value> {
        let original = self.capabilities(era);
        let mut caps = original.clone();
        if let Some(narrowing) = &self.inner.narrowing {
            narrowing.narrow(caller, era, &mut caps);
            advertise::restrict(&mut caps, original);
        }
        caps
    }

    /// True when capabilities depend on the caller.
    pub fn narrows_per_caller(&self) -> bool {
        self.inner.narrowing.is_some()
    }

    /// The caller of a request, by the profile's [`PrincipalLookup`].
    pub fn principal(&self, parts: &Parts) -> Option<Principal> {
        self.inner.principal.principal(parts)
    }

    /// The limits on what the layers read and a listen may ask for.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// What a listen does with an unreadable URI.
    pub fn unreadable_uris(&self) -> UnreadableUris {
        self.inner.unreadable_uris
    }

    /// True when the tasks extension is on.
    pub fn tasks_enabled(&self) -> bool {
        self.inner.task_directory.is_some()
    }

    pub(crate) fn resource_access(&self) -> Option<&dyn ResourceAccess> {
        self.inner.resource_access.as_deref()
    }

    pub(crate) fn subscription_hook(&self) -> Option<&dyn SubscriptionHook> {
        self.inner.subscription_hook.as_deref()
    }

    /// The [`ResourceAccess`] decisions kept for open streams.
    pub(crate) fn decisions(&self) -> &Decisions {
        &self.inner.decisions
    }

    pub(crate) fn task_directory(&self) -> Option<&dyn TaskDirectory> {
        self.inner.task_directory.as_deref()
    }
}

impl fmt::Debug for ServerProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("ServerProfile")
            .field("legacy", inner.legacy.map())
            .field("modern", inner.modern.map())
            .field("resource_access", &inner.resource_access.is_some())
            .field("subscription_hook", &inner.subscription_hook.is_some())
            .field("tasks", &inner.task_directory.is_some())
            .field("narrowing", &inner.narrowing.is_some())
            .field("limits", &inner.limits)
            .field("unreadable_uris", &inner.unreadable_uris)
            .field("access_ttl", &inner.decisions.ttl())
            .finish_non_exhaustive()
    }
}

/// Builder for [`ServerProfile`].
#[derive(Default)]
pub struct ServerProfileBuilder {
    base: Option<Value>,
    resource_access: Option<Box<dyn ResourceAccess>>,
    subscription_hook: Option<Box<dyn SubscriptionHook>>,
    task_directory: Option<Box<dyn TaskDirectory>>,
    tasks: bool,
    principal: Option<Box<dyn PrincipalLookup>>,
    narrowing: Option<Box<dyn CapabilityNarrowing>>,
    completions: bool,
    legacy_logging: bool,
    limits: Limits,
    unreadable_uris: UnreadableUris,
    access_ttl: Option<Duration>,
}

impl ServerProfileBuilder {
    /// The server's own base capability set (a JSON object). Default:
    /// `tools`, `resources` and `prompts`, each `{"listChanged": false}`.
    pub fn base_capabilities(mut self, base: Value) -> Self {
        self.base = Some(base);
        self
    }

    /// The rule of `resources/read`: which URIs a caller may read.
    pub fn resource_access(mut self, hook: impl ResourceAccess) -> Self {
        self.resource_access = Some(Box::new(hook));
        self
    }

    /// Which URIs the server accepts subscriptions to; it also makes the
    /// legacy capabilities say `resources.subscribe: true`.
    pub fn subscription_hook(mut self, hook: impl SubscriptionHook) -> Self {
        self.subscription_hook = Some(Box::new(hook));
        self
    }

    /// Turns the tasks extension on with `directory` answering who owns a task.
    pub fn task_directory(mut self, directory: impl TaskDirectory) -> Self {
        self.task_directory = Some(Box::new(directory));
        self.tasks = true;
        self
    }

    /// Turns the tasks extension on or off; on needs a [`task_directory`](Self::task_directory).
    pub fn tasks(mut self, enabled: bool) -> Self {
        self.tasks = enabled;
        self
    }

    /// How to find the caller of a request. Default: [`ExtensionPrincipal`].
    pub fn principal(mut self, lookup: impl PrincipalLookup) -> Self {
        self.principal = Some(Box::new(lookup));
        self
    }

    /// Narrows capabilities per caller; see [`CapabilityNarrowing`].
    pub fn narrowing(mut self, hook: impl CapabilityNarrowing) -> Self {
        self.narrowing = Some(Box::new(hook));
        self
    }

    /// The server answers `completion/complete`.
    pub fn completions(mut self, enabled: bool) -> Self {
        self.completions = enabled;
        self
    }

    /// The server answers `logging/setLevel` (legacy era).
    pub fn legacy_logging(mut self, enabled: bool) -> Self {
        self.legacy_logging = enabled;
        self
    }

    /// Most URIs one listen may ask for (default 1000).
    pub fn max_uris(mut self, max: usize) -> Self {
        self.limits.max_uris = max;
        self
    }

    /// Most task ids one listen may ask for (default 1000).
    pub fn max_task_ids(mut self, max: usize) -> Self {
        self.limits.max_task_ids = max;
        self
    }

    /// Most bytes of a listen request body, which is read whole (default 1 MiB).
    pub fn max_listen_body(mut self, bytes: usize) -> Self {
        self.limits.max_listen_body = bytes;
        self
    }

    /// Most bytes of any other `POST` body read to find its `method`, and of
    /// an `initialize` or `server/discover` body (default 1 MiB).
    pub fn max_peek(mut self, bytes: usize) -> Self {
        self.limits.max_peek = bytes;
        self
    }

    /// The largest `initialize`, `server/discover` or listen answer (not an
    /// event stream), of any status, that is read to be checked; a longer
    /// one is replaced by a -32603 error for the request's id (default
    /// 1 MiB).
    pub fn max_rewritten_response(mut self, bytes: usize) -> Self {
        self.limits.max_rewritten_response = bytes;
        self
    }

    /// All the limits at once.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// What a listen does with an unreadable URI (default [`UnreadableUris::Drop`]).
    pub fn unreadable_uris(mut self, policy: UnreadableUris) -> Self {
        self.unreadable_uris = policy;
        self
    }

    /// How long a decision of the [`ResourceAccess`] hook holds for the
    /// checks made while a stream is open (default 30 s): an event stream
    /// that is not a listen drops `notifications/resources/updated` for a
    /// URI its caller may not read, and a reader whose access is revoked
    /// stops hearing updates within this time. Zero asks the hook for every
    /// such event. Requests (`subscriptions/listen`, `resources/subscribe`)
    /// always ask the hook afresh. The profile keeps at most 65 536
    /// decisions and 8 MiB of their URIs and callers' names; when full,
    /// the least used go first.
    pub fn access_ttl(mut self, ttl: Duration) -> Self {
        self.access_ttl = Some(ttl);
        self
    }

    /// Validates the entries and computes the capabilities of both eras.
    pub fn build(self) -> Result<ServerProfile, BuildError> {
        let base = match self.base {
            None => advertise::default_base(),
            Some(Value::Object(base)) => base,
            Some(_) => return Err(BuildError::BaseNotObject),
        };
        for key in ["tools", "resources", "prompts"] {
            if base.get(key).is_some_and(|entry| !entry.is_object()) {
                return Err(BuildError::BaseEntryNotObject { key });
            }
        }
        if self.subscription_hook.is_some() && !base.contains_key("resources") {
            return Err(BuildError::SubscriptionWithoutResources);
        }
        if self.tasks && self.task_directory.is_none() {
            return Err(BuildError::TasksWithoutDirectory);
        }
        for (limit, value) in [
            ("max_uris", self.limits.max_uris),
            ("max_task_ids", self.limits.max_task_ids),
            ("max_listen_body", self.limits.max_listen_body),
            ("max_peek", self.limits.max_peek),
            ("max_rewritten_response", self.limits.max_rewritten_response),
        ] {
            if value == 0 {
                return Err(BuildError::ZeroLimit { limit });
            }
        }
        let task_directory = self.task_directory.filter(|_| self.tasks);
        let features = Features {
            subscription_hook: self.subscription_hook.is_some(),
            completions: self.completions,
            legacy_logging: self.legacy_logging,
            tasks: task_directory.is_some(),
        };
        Ok(ServerProfile {
            inner: Arc::new(Inner {
                legacy: Advertised::new(advertise::compute(&base, features, Era::Legacy)),
                modern: Advertised::new(advertise::compute(&base, features, Era::Modern)),
                resource_access: self.resource_access,
                subscription_hook: self.subscription_hook,
                task_directory,
                principal: self
                    .principal
                    .unwrap_or_else(|| Box::new(ExtensionPrincipal)),
                narrowing: self.narrowing,
                limits: self.limits,
                unreadable_uris: self.unreadable_uris,
                decisions: Decisions::new(self.access_ttl.unwrap_or(ACCESS_TTL)),
            }),
        })
    }
}

impl fmt::Debug for ServerProfileBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerProfileBuilder")
            .finish_non_exhaustive()
    }
}

/// Why a profile could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The base capability set is not a JSON object.
    BaseNotObject,
    /// A `tools`, `resources` or `prompts` entry of the base set is not an object.
    BaseEntryNotObject {
        /// The offending key.
        key: &'static str,
    },
    /// A subscription hook was set but the base set has no `resources`.
    SubscriptionWithoutResources,
    /// Tasks are on but no task directory was given.
    TasksWithoutDirectory,
    /// A limit is zero.
    ZeroLimit {
        /// The limit's builder method.
        limit: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BaseNotObject => f.write_str("the base capabilities must be a JSON object"),
            Self::BaseEntryNotObject { key } => {
                write!(f, "the base capability `{key}` must be a JSON object")
            }
            Self::SubscriptionWithoutResources => {
                f.write_str("a subscription hook needs `resources` in the base capabilities")
            }
            Self::TasksWithoutDirectory => f.write_str("tasks need a task directory"),
            Self::ZeroLimit { limit } => write!(f, "the limit `{limit}` must be at least 1"),
        }
    }
}

impl std::error::Error for BuildError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::future::ready;

    fn caps(profile: &ServerProfile, era: Era) -> Value {
        Value::Object(profile.capabilities(era).clone())
    }

    fn directory() -> impl TaskDirectory {
        |_: &Principal, ids: &[&str]| ready(vec![false; ids.len()])
    }

    #[test]
    fn worked_examples_verbatim() {
        let profile = ServerProfile::builder().build().unwrap();
        assert_eq!(
            serde_json::to_string(&caps(&profile, Era::Legacy)).unwrap(),
            serde_json::to_string(&json!({"tools":{"listChanged":false},"resources":{"listChanged":false},"prompts":{"listChanged":false}})).unwrap()
        );
        assert_eq!(
            caps(&profile, Era::Modern),
            json!({"tools":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"prompts":{"listChanged":true},"logging":{}})
        );
        assert_eq!(
            profile.advertised(Era::Modern).json(),
            serde_json::to_string(&caps(&profile, Era::Modern)).unwrap()
        );
    }

    #[test]
    fn no_resources_means_no_subscribe_anywhere() {
        let profile = ServerProfile::builder()
            .base_capabilities(json!({"tools": {}}))
            .build()
            .unwrap();
        for era in [Era::Legacy, Era::Modern] {
            assert!(!serde_json::to_string(&caps(&profile, era))
                .unwrap()
                .contains("subscribe"));
        }
    }

    #[test]
    fn subscription_hook_sets_legacy_subscribe() {
        let profile = ServerProfile::builder()
            .subscription_hook(|uris: &[&str]| ready(vec![true; uris.len()]))
            .build()
            .unwrap();
        assert_eq!(
            caps(&profile, Era::Legacy)["resources"],
            json!({"listChanged": false, "subscribe": true})
        );
    }

    #[test]
    fn tasks_extension_in_modern_only() {
        let profile = ServerProfile::builder()
            .task_directory(directory())
            .build()
            .unwrap();
        assert!(profile.tasks_enabled());
        assert_eq!(
            caps(&profile, Era::Modern)["extensions"],
            json!({"io.modelcontextprotocol/tasks": {}})
        );
        assert!(caps(&profile, Era::Legacy).get("extensions").is_none());
    }

    #[test]
    fn legacy_logging_and_completions() {
        let profile = ServerProfile::builder()
            .legacy_logging(true)
            .completions(true)
            .build()
            .unwrap();
        assert_eq!(caps(&profile, Era::Legacy)["logging"], json!({}));
        assert_eq!(caps(&profile, Era::Legacy)["completions"], json!({}));
        assert_eq!(caps(&profile, Era::Modern)["completions"], json!({}));
        let plain = ServerProfile::builder().build().unwrap();
        assert!(caps(&plain, Era::Legacy).get("logging").is_none());
        assert!(caps(&plain, Era::Modern).get("completions").is_none());
    }

    #[test]
    fn tools_only_base_set() {
        let profile = ServerProfile::builder()
            .base_capabilities(json!({"tools": {"listChanged": false}}))
            .build()
            .unwrap();
        assert_eq!(
            caps(&profile, Era::Modern),
            json!({"tools": {"listChanged": true}, "logging": {}})
        );
        assert_eq!(
            caps(&profile, Era::Legacy),
            json!({"tools": {"listChanged": false}})
        );
    }

    #[test]
    fn experimental_survives_both_eras() {
        let profile = ServerProfile::builder()
            .base_capabilities(json!({"tools": {}, "experimental": {"x": {"y": 1}}}))
            .build()
            .unwrap();
        for era in [Era::Legacy, Era::Modern] {
            assert_eq!(caps(&profile, era)["experimental"], json!({"x": {"y": 1}}));
        }
    }

    #[test]
    fn contradictions_fail_with_typed_errors() {
        let err = |b: ServerProfileBuilder| b.build().unwrap_err();
        assert_eq!(
            err(ServerProfile::builder()
                .base_capabilities(json!({"tools": {}}))
                .subscription_hook(|u: &[&str]| ready(vec![true; u.len()]))),
            BuildError::SubscriptionWithoutResources
        );
        assert_eq!(
            err(ServerProfile::builder().tasks(true)),
            BuildError::TasksWithoutDirectory
        );
        assert_eq!(
            err(ServerProfile::builder().base_capabilities(json!([]))),
            BuildError::BaseNotObject
        );
        assert_eq!(
            err(ServerProfile::builder().base_capabilities(json!({"prompts": true}))),
            BuildError::BaseEntryNotObject { key: "prompts" }
        );
        assert_eq!(
            err(ServerProfile::builder().max_uris(0)),
            BuildError::ZeroLimit { limit: "max_uris" }
        );
        assert_eq!(
            err(ServerProfile::builder().max_task_ids(0)),
            BuildError::ZeroLimit {
                limit: "max_task_ids"
            }
        );
        assert_eq!(
            err(ServerProfile::builder().max_listen_body(0)),
            BuildError::ZeroLimit {
                limit: "max_listen_body"
            }
        );
        assert!(BuildError::TasksWithoutDirectory
            .to_string()
            .contains("task directory"));
    }

    #[test]
    fn tasks_off_drops_the_directory() {
        let profile = ServerProfile::builder()
            .task_directory(directory())
            .tasks(false)
            .build()
            .unwrap();
        assert!(!profile.tasks_enabled());
        assert!(caps(&profile, Era::Modern).get("extensions").is_none());
    }

    #[test]
    fn defaults_and_settable_limits() {
        let profile = ServerProfile::builder().build().unwrap();
        let limits = *profile.limits();
        assert_eq!(
            (
                limits.max_uris,
                limits.max_task_ids,
                limits.max_listen_body,
                limits.max_peek,
                limits.max_rewritten_response
            ),
            (1000, 1000, 1 << 20, 1 << 20, 1 << 20)
        );
        assert_eq!(limits, Limits::default());
        assert_eq!(profile.unreadable_uris(), UnreadableUris::Drop);
        let profile = ServerProfile::builder()
            .max_uris(5)
            .max_task_ids(6)
            .max_listen_body(7)
            .max_peek(8)
            .max_rewritten_response(9)
            .unreadable_uris(UnreadableUris::Refuse)
            .build()
            .unwrap();
        let limits = *profile.limits();
        assert_eq!(
            (
                limits.max_uris,
                limits.max_task_ids,
                limits.max_listen_body,
                limits.max_peek,
                limits.max_rewritten_response
            ),
            (5, 6, 7, 8, 9)
        );
        assert_eq!(profile.unreadable_uris(), UnreadableUris::Refuse);
        let mut all = Limits::new();
        all.max_peek = 10;
        let profile = ServerProfile::builder().limits(all).build().unwrap();
        assert_eq!(*profile.limits(), all);
        for zero in [
            ServerProfile::builder().max_peek(0),
            ServerProfile::builder().max_rewritten_response(0),
        ] {
            assert!(matches!(zero.build(), Err(BuildError::ZeroLimit { .. })));
        }
    }

    #[test]
    fn clone_shares_the_profile() {
        let profile = ServerProfile::builder().build().unwrap();
        let clone = profile.clone();
        assert!(Arc::ptr_eq(&profile.inner, &clone.inner));
    }

    #[test]
    fn narrowing_removes_but_never_adds() {
        let profile = ServerProfile::builder()
            .narrowing(
                |caller: Option<&Principal>, _: Era, caps: &mut Map<String, Value>| {
                    if caller.is_none() {
                        caps.remove("prompts");
                    }
                    caps.insert("completions".into(), json!({}));
                },
            )
            .build()
            .unwrap();
        assert!(profile.narrows_per_caller());
        let anonymous = profile.capabilities_for(None, Era::Modern);
        assert!(!anonymous.contains_key("prompts"));
        assert!(!anonymous.contains_key("completions"));
        let alice = profile.capabilities_for(Some(&Principal::new("alice")), Era::Modern);
        assert_eq!(&alice, profile.capabilities(Era::Modern));
    }

    #[test]
    fn principal_lookup_default_and_custom() {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        let profile = ServerProfile::builder().build().unwrap();
        assert_eq!(profile.principal(&parts), None);
        parts.extensions.insert(Principal::new("bob"));
        assert_eq!(profile.principal(&parts), Some(Principal::new("bob")));
        let custom = ServerProfile::builder()
            .principal(|parts: &Parts| {
                parts
                    .headers
                    .get("x-user")
                    .and_then(|v| v.to_str().ok())
                    .map(Principal::new)
            })
            .build()
            .unwrap();
        assert_eq!(custom.principal(&parts), None);
        parts.headers.insert("x-user", "carol".parse().unwrap());
        assert_eq!(custom.principal(&parts), Some(Principal::new("carol")));
    }
}
