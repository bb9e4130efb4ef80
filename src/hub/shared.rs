//! What the hub's parts share: its profile and settings, the registry of
//! its streams, and its bus.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use http::request::Parts;

use super::bus::SharedBus;
use super::queue::Wakers;
use super::registry::{Caps, Registry};
use crate::profile::ServerProfile;

/// The admission bucket of a listen request (`None`: the shared one).
pub(super) type AdmissionKey = Box<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// What the hub's parts share.
pub(crate) struct Shared {
    pub(super) profile: ServerProfile,
    pub(super) config: Config,
    pub(super) key: Option<AdmissionKey>,
    pub(super) registry: Mutex<Registry>,
    /// The list of wakers a delivery fills, kept for the next one.
    pub(super) wakers: Mutex<Wakers>,
    pub(super) bus: SharedBus,
}

/// The hub's settings, from its builder.
#[derive(Debug, Clone, Copy)]
pub(super) struct Config {
    /// How long a stream may stay silent before a keep-alive comment.
    pub(super) keep_alive: Duration,
    /// Most undelivered events a stream holds.
    pub(super) backlog: usize,
    /// Most streams open, in all and per caller.
    pub(super) caps: Caps,
}

impl Shared {
    pub(super) fn registry(&self) -> MutexGuard<'_, Registry> {
        crate::sync::lock(&self.registry)
    }

    /// The admission bucket of a request: its key, or its caller's name.
    pub(super) fn key(&self, parts: &Parts) -> Option<String> {
        match &self.key {
            Some(key) => key(parts),
            None => self
                .profile
                .principal(parts)
                .map(|caller| caller.as_str().to_owned()),
        }
    }
}
