//! The questions a [`ServerProfile`](crate::ServerProfile) asks the server.
//!
//! Each hook is a trait with a closure impl, so a plain closure works
//! wherever a hook is expected. Hooks that may do I/O are async and take a
//! whole batch at once: a listen can carry a thousand URIs, and they cost one
//! call, not a thousand.
//!
//! Batch answers are one `bool` per item, in the order asked. An answer that
//! is shorter than the batch denies the items it does not cover, so a hook
//! that gets its bookkeeping wrong fails closed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::request::Parts;
use serde_json::{Map, Value};

use crate::advertise::Era;

/// The future a batch hook returns: one boxed future per batch.
pub type HookFuture = Pin<Box<dyn Future<Output = Vec<bool>> + Send + 'static>>;

/// The authenticated caller of a request.
///
/// Auth middleware in front of the mcp-edge layers inserts it into the
/// request extensions; the default [`PrincipalLookup`] reads it from there.
/// A request without one is anonymous: it may read what the
/// [`ResourceAccess`] hook grants to `None` and owns no task.
///
/// ```
/// use mcp_edge::Principal;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(Principal::new("alice"));
/// assert_eq!(request.extensions().get::<Principal>().unwrap().as_str(), "alice");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

impl Principal {
    /// Creates a principal from its name.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    /// The principal's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Principal").field(&self.as_str()).finish()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Finds the caller of a request in its parts.
///
/// Default ([`ExtensionPrincipal`]): the [`Principal`] in the request
/// extensions. A closure `Fn(&Parts) -> Option<Principal>` implements it.
pub trait PrincipalLookup: Send + Sync + 'static {
    /// The caller of the request, or `None` for an anonymous one.
    fn principal(&self, parts: &Parts) -> Option<Principal>;
}

impl<F> PrincipalLookup for F
where
    F: Fn(&Parts) -> Option<Principal> + Send + Sync + 'static,
{
    fn principal(&self, parts: &Parts) -> Option<Principal> {
        self(parts)
    }
}

/// The default [`PrincipalLookup`]: the [`Principal`] in the request extensions.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtensionPrincipal;

impl PrincipalLookup for ExtensionPrincipal {
    fn principal(&self, parts: &Parts) -> Option<Principal> {
        parts.extensions.get::<Principal>().cloned()
    }
}

/// Which of these URIs may this caller read: the same rule as `resources/read`.
///
/// Default (no hook set): every URI is readable by everyone, for servers
/// without per-caller access control. A closure
/// `Fn(Option<&Principal>, &[&str]) -> impl Future<Output = Vec<bool>>` implements it.
///
/// An unknown URI must answer `false` exactly like an unreadable one, so
/// that the acknowledgment of a listen does not reveal which URIs exist.
pub trait ResourceAccess: Send + Sync + 'static {
    /// One answer per URI, in order: may `caller` read it.
    fn readable(&self, caller: Option<&Principal>, uris: &[&str]) -> HookFuture;
}

impl<F, Fut> ResourceAccess for F
where
    F: Fn(Option<&Principal>, &[&str]) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<bool>> + Send + 'static,
{
    fn readable(&self, caller: Option<&Principal>, uris: &[&str]) -> HookFuture {
        Box::pin(self(caller, uris))
    }
}

/// Which of these URIs does the server accept subscriptions to.
///
/// Setting it is what makes the legacy capabilities say
/// `resources.subscribe: true`. Default (no hook set): every readable URI is
/// accepted. A closure `Fn(&[&str]) -> impl Future<Output = Vec<bool>>`
/// implements it.
pub trait SubscriptionHook: Send + Sync + 'static {
    /// One answer per URI, in order: does the server accept a subscription to it.
    fn accepts(&self, uris: &[&str]) -> HookFuture;
}

impl<F, Fut> SubscriptionHook for F
where
    F: Fn(&[&str]) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<bool>> + Send + 'static,
{
    fn accepts(&self, uris: &[&str]) -> HookFuture {
        Box::pin(self(uris))
    }
}

/// Which of these task ids exist and are owned by this principal.
///
/// Required when tasks are on; there is no default. It is never asked about
/// an anonymous caller, who owns no task. A closure
/// `Fn(&Principal, &[&str]) -> impl Future<Output = Vec<bool>>` implements it.
/// A foreign task and an unknown one must both answer `false`.
pub trait TaskDirectory: Send + Sync + 'static {
    /// One answer per task id, in order: does the task exist with `owner` as its owner.
    fn owned(&self, owner: &Principal, task_ids: &[&str]) -> HookFuture;
}

impl<F, Fut> TaskDirectory for F
where
    F: Fn(&Principal, &[&str]) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<bool>> + Send + 'static,
{
    fn owned(&self, owner: &Principal, task_ids: &[&str]) -> HookFuture {
        Box::pin(self(owner, task_ids))
    }
}

/// Removes capabilities for a given caller, when what a server offers
/// depends on who asks.
///
/// It receives the profile's capabilities for an era and may remove keys or
/// turn `true` flags into `false`; anything it adds is ignored. When one is
/// set, `server/discover` results get `cacheScope: "private"`, and the
/// listen filter honours against the same narrowed modern capabilities, so
/// what discover tells a caller and what listen honours for it agree.
/// Default: none. A closure
/// `Fn(Option<&Principal>, Era, &mut Map<String, Value>)` implements it.
pub trait CapabilityNarrowing: Send + Sync + 'static {
    /// Narrows `capabilities` (a copy of the profile's for `era`) for `caller`.
    fn narrow(&self, caller: Option<&Principal>, era: Era, capabilities: &mut Map<String, Value>);
}

impl<F> CapabilityNarrowing for F
where
    F: Fn(Option<&Principal>, Era, &mut Map<String, Value>) + Send + Sync + 'static,
{
    fn narrow(&self, caller: Option<&Principal>, era: Era, capabilities: &mut Map<String, Value>) {
        self(caller, era, capabilities)
    }
}

/// Reads a batch answer: a missing answer denies.
pub(crate) fn answer(answers: &[bool], index: usize) -> bool {
    answers.get(index).copied().unwrap_or(false)
}
