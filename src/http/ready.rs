//! Bodies that are always ready, and an event stream driven to its end
//! without a runtime, for the fuzz targets and property tests (`fuzzing`
//! feature only).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame};

use super::event_stream::{EventRule, EventStream};

/// Chunks, then the end, known as soon as the last chunk was taken.
pub(crate) struct Chunks(pub(crate) VecDeque<Bytes>);

impl Chunks {
    /// `chunks` as slices of one `Bytes` holding their concatenation, as a
    /// body reader hands them over.
    pub(crate) fn of(chunks: &[&[u8]]) -> Self {
        let whole = Bytes::from(chunks.concat());
        let mut at = 0;
        Self(
            chunks
                .iter()
                .map(|chunk| {
                    at += chunk.len();
                    whole.slice(at - chunk.len()..at)
                })
                .collect(),
        )
    }
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

/// What leaves `rule` for the stream `chunks`: its bytes.
pub(crate) fn ruled<R: EventRule>(chunks: &[&[u8]], rule: R) -> Vec<u8> {
    let mut body = std::pin::pin!(EventStream::new(Chunks::of(chunks), rule));
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match body.as_mut().poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            Poll::Ready(None) => return out,
            Poll::Ready(Some(Err(never))) => match never {},
            Poll::Pending => unreachable!("`Chunks` is always ready"),
        }
    }
}
