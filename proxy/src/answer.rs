//! The proxy's own answers: JSON-RPC errors with the right status and the
//! request's id, and the body every answer travels in.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use serde_json::value::RawValue;

/// The error `(code, message)` for request `id` (JSON text; `null` when
/// unknown), with `status`.
pub fn error(
    status: StatusCode,
    id: Option<&RawValue>,
    code: i64,
    message: &str,
) -> Response<axum::body::Body> {
    response(status, jsonrpc_error(id, code, message))
}

/// A JSON-RPC error object, as text.
pub fn jsonrpc_error(id: Option<&RawValue>, code: i64, message: &str) -> String {
    let id = id.map_or("null", RawValue::get);
    let message = serde_json::to_string(message).expect("a string serializes");
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#)
}

/// `body` as JSON with `status`.
pub fn response<B: From<String>>(status: StatusCode, body: String) -> Response<B> {
    let mut response = Response::new(B::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pin_project_lite::pin_project! {
    /// The body of an answer through the proxy: the upstream's, streamed
    /// as it comes, or the proxy's own.
    #[project = KindProj]
    pub enum ProxyBody {
        Upstream { #[pin] body: hyper::body::Incoming },
        Pooled { #[pin] body: crate::upstream::Pooled },
        Own { body: Option<Bytes> },
    }
}

impl From<String> for ProxyBody {
    fn from(text: String) -> Self {
        Self::Own {
            body: Some(Bytes::from(text)),
        }
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = hyper::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.project() {
            KindProj::Upstream { body } => body.poll_frame(cx),
            KindProj::Pooled { body } => body.poll_frame(cx),
            KindProj::Own { body } => Poll::Ready(body.take().map(|bytes| Ok(Frame::data(bytes)))),
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match self {
            Self::Upstream { body } => body.is_end_stream(),
            Self::Pooled { body } => body.is_end_stream(),
            Self::Own { body } => body.is_none(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Upstream { body } => body.size_hint(),
            Self::Pooled { body } => body.size_hint(),
            Self::Own { body } => SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every answer's body, a held listen stream's included, is as large
    /// as this enum's largest variant: the upstream's connection stays out.
    #[test]
    fn the_body_of_every_answer_stays_small() {
        assert!(std::mem::size_of::<super::ProxyBody>() <= 128);
    }
}
