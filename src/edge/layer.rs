use tower_layer::Layer;

use super::service::Edge;
use crate::capabilities::layer::CapabilitiesLayer;
use crate::listen_filter::layer::ListenFilterLayer;
use crate::profile::ServerProfile;

/// Layer that applies [`Edge`], which keeps the promises of
/// [`CapabilitiesLayer`] and [`ListenFilterLayer`] with one read of each
/// body.
#[derive(Debug, Clone)]
pub struct EdgeLayer {
    /// The two layers' rules, the capabilities layer the outer one.
    pub(super) rules: (CapabilitiesLayer, ListenFilterLayer),
}

impl EdgeLayer {
    /// Creates a layer that advertises what `profile` offers and honours
    /// listen filters by it.
    pub fn new(profile: ServerProfile) -> Self {
        Self {
            rules: (
                CapabilitiesLayer::new(profile.clone()),
                ListenFilterLayer::new(profile),
            ),
        }
    }

    /// Whether to guard listen response streams (default `true`); see
    /// [`ListenFilterLayer::guard_stream`].
    pub fn guard_stream(mut self, guard: bool) -> Self {
        self.rules.1 = self.rules.1.guard_stream(guard);
        self
    }

    /// Whether to keep scanning other JSON request bodies for a second
    /// `method` (default `true`); see [`ListenFilterLayer::scan_pass_through`].
    /// One scan serves both promises.
    pub fn scan_pass_through(mut self, scan: bool) -> Self {
        self.rules.0 = self.rules.0.scan_pass_through(scan);
        self.rules.1 = self.rules.1.scan_pass_through(scan);
        self
    }

    /// Whether to drop resource updates the caller may not read from the
    /// event streams that are not listens (default `true`); see
    /// [`ListenFilterLayer::check_updates`].
    pub fn check_updates(mut self, check: bool) -> Self {
        self.rules.1 = self.rules.1.check_updates(check);
        self
    }
}

impl<S> Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Edge::from_layer(inner, self.clone())
    }
}
