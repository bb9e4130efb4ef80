use tower_layer::Layer;

use super::Capabilities;
use crate::http::peek::PeekLimits;
use crate::ServerProfile;

/// Layer that applies [`Capabilities`], which fills in the `capabilities` of
/// `initialize` and `server/discover` results from a [`ServerProfile`].
#[derive(Debug, Clone)]
pub struct CapabilitiesLayer {
    pub(super) profile: ServerProfile,
    // Read on every request: kept at hand.
    pub(super) limits: PeekLimits,
}

impl CapabilitiesLayer {
    /// Creates a layer that advertises what `profile` offers.
    pub fn new(profile: ServerProfile) -> Self {
        Self {
            limits: PeekLimits::of(&profile),
            profile,
        }
    }
}

impl<S> Layer<S> for CapabilitiesLayer {
    type Service = Capabilities<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Capabilities::from_layer(inner, self.clone())
    }
}
