use tower_layer::Layer;

use super::service::Capabilities;
use super::service::INTEREST;
use crate::http::intercept::Settings;
use crate::http::peek::Scan;
use crate::profile::ServerProfile;

/// Layer that applies [`Capabilities`], which fills in the `capabilities` of
/// `initialize` and `server/discover` results from a [`ServerProfile`].
#[derive(Debug, Clone)]
pub struct CapabilitiesLayer {
    pub(super) profile: ServerProfile,
    // Read on every request: kept at hand.
    pub(super) settings: Settings,
}

impl CapabilitiesLayer {
    /// Creates a layer that advertises what `profile` offers.
    pub fn new(profile: ServerProfile) -> Self {
        Self {
            settings: Settings::new(
                INTEREST,
                profile.limits().max_peek,
                profile.limits().max_listen_body,
            ),
            profile,
        }
    }

    /// Whether to keep scanning every other request body as the inner
    /// service reads it (default `true`), cutting it short at a second
    /// top-level `method` or at bytes that are not JSON, so that a parser
    /// keeping the last of duplicate keys never reads an `initialize` or
    /// `server/discover` the layer did not see; the same scan as
    /// [`ListenFilterLayer::scan_pass_through`](crate::ListenFilterLayer::scan_pass_through).
    ///
    /// Switch it off only when the inner service itself rejects a request
    /// with duplicate `method` members.
    pub fn scan_pass_through(mut self, scan: bool) -> Self {
        self.settings.scan = Scan::watching(scan);
        self
    }
}

impl<S> Layer<S> for CapabilitiesLayer {
    type Service = Capabilities<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Capabilities::from_layer(inner, self.clone())
    }
}
