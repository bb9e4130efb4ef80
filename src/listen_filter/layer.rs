use tower_layer::Layer;

use super::ListenFilter;
use crate::ServerProfile;

/// Layer that applies [`ListenFilter`], which honours the `notifications`
/// filter of every `subscriptions/listen` request for its caller.
#[derive(Debug, Clone)]
pub struct ListenFilterLayer {
    profile: ServerProfile,
    guard_stream: bool,
}

impl ListenFilterLayer {
    /// Creates a layer that honours listen filters by `profile`.
    pub fn new(profile: ServerProfile) -> Self {
        Self {
            profile,
            guard_stream: true,
        }
    }

    /// Whether to guard the listen response stream (default `true`): narrow
    /// the inner service's acknowledgment to the honoured ack, send the ack
    /// first if the inner did not, and drop notifications outside the filter.
    pub fn guard_stream(mut self, guard: bool) -> Self {
        self.guard_stream = guard;
        self
    }
}

impl<S> Layer<S> for ListenFilterLayer {
    type Service = ListenFilter<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ListenFilter::new(inner, self.profile.clone()).guard_stream(self.guard_stream)
    }
}
