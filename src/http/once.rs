//! [`Once`]: a body a layer wrote whole, handed out in one frame.

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Frame, SizeHint};

/// Bytes a layer wrote, in one frame, then the trailers it kept, if any.
/// The bodies of the layers and of the hub hold one for their own answers.
#[derive(Debug, Default)]
pub(crate) struct Once {
    data: Option<Bytes>,
    trailers: Option<Box<HeaderMap>>,
}

impl Once {
    /// `data`, in one frame (none when empty).
    pub(crate) fn new(data: Bytes) -> Self {
        Self::with_trailers(data, None)
    }

    /// `data`, then `trailers` (the ones the body it stands for ended with).
    pub(crate) fn with_trailers(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        Self {
            data: (!data.is_empty()).then_some(data),
            trailers: trailers.map(Box::new),
        }
    }

    /// The next frame, `None` at the end.
    #[inline]
    pub(crate) fn next_frame(&mut self) -> Option<Frame<Bytes>> {
        self.data.take().map(Frame::data).or_else(|| {
            self.trailers
                .take()
                .map(|trailers| Frame::trailers(*trailers))
        })
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |data| data.len() as u64))
    }
}
