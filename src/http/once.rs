//! [`Once`]: a body a layer wrote whole, handed out in one frame.

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// Bytes a layer wrote, in one frame. The bodies of the layers and of the
/// hub hold one for their own answers.
#[derive(Debug, Default)]
pub(crate) struct Once {
    data: Option<Bytes>,
}

impl Once {
    /// `data`, in one frame (none when empty).
    pub(crate) fn new(data: Bytes) -> Self {
        Self {
            data: (!data.is_empty()).then_some(data),
        }
    }

    /// The frame, once; then `None`.
    #[inline]
    pub(crate) fn next_frame(&mut self) -> Option<Frame<Bytes>> {
        self.data.take().map(Frame::data)
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |data| data.len() as u64))
    }
}
