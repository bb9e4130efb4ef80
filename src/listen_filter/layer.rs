use std::sync::Arc;

use tower_layer::Layer;

use super::live::Live;
use super::service::ListenFilter;
use super::service::INTEREST;
use crate::http::intercept::Settings;
use crate::http::peek::Scan;
use crate::profile::ServerProfile;

/// Layer that applies [`ListenFilter`], which honours the `notifications`
/// filter of every `subscriptions/listen` request for its caller.
#[derive(Debug, Clone)]
pub struct ListenFilterLayer {
    pub(super) profile: ServerProfile,
    // Read on every request: kept at hand.
    pub(super) settings: Settings,
    pub(super) guard_stream: bool,
    pub(super) check_updates: bool,
    /// The subscription ids of the listens this layer and its clones guard.
    pub(super) live: Arc<Live>,
}

impl ListenFilterLayer {
    /// Creates a layer that honours listen filters by `profile`.
    pub fn new(profile: ServerProfile) -> Self {
        Self {
            settings: Settings::new(
                INTEREST,
                profile.limits().max_peek,
                profile.limits().max_listen_body,
            ),
            profile,
            guard_stream: true,
            check_updates: true,
            live: Arc::default(),
        }
    }

    /// Whether to guard the listen response stream (default `true`): narrow
    /// the inner service's acknowledgment to the honoured ack, send the ack
    /// first if the inner did not, and drop notifications outside the filter.
    pub fn guard_stream(mut self, guard: bool) -> Self {
        self.guard_stream = guard;
        self
    }

    /// Whether to keep scanning every other JSON request body as the inner
    /// service reads it (default `true`), cutting it short at a second
    /// top-level `method` or at bytes that are not JSON, so that a parser
    /// keeping the last of duplicate keys never reads a listen in disguise.
    ///
    /// Switch it off only when the inner service itself rejects a request
    /// with duplicate `method` members: large bodies then pass at no cost
    /// per byte. Listen requests are checked whole either way.
    pub fn scan_pass_through(mut self, scan: bool) -> Self {
        self.settings.scan = Scan::watching(scan);
        self
    }

    /// Whether to drop, from every event stream that is not a listen (a
    /// legacy session's GET stream, the SSE answer of a POST), each
    /// `notifications/resources/updated` for a URI the caller may not read
    /// (default `true`; it applies only when the profile has a
    /// [`ResourceAccess`](crate::ResourceAccess) hook). The hook is asked
    /// through a decision cache per caller and URI
    /// ([`access_ttl`](crate::ServerProfileBuilder::access_ttl)). An update
    /// without one clear URI is dropped too; every other event passes,
    /// written anew when its bytes say more than its parsed fields, and a
    /// compressed stream is replaced by an error (-32603).
    ///
    /// Switch it off when the inner service sends resource updates only to
    /// the subscriptions the layer checked and never leaks: its streams
    /// then pass untouched, at no cost per event.
    pub fn check_updates(mut self, check: bool) -> Self {
        self.check_updates = check;
        self
    }
}

impl<S> Layer<S> for ListenFilterLayer {
    type Service = ListenFilter<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ListenFilter::from_layer(inner, self.clone())
    }
}
