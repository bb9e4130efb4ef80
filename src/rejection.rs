//! [`Rejection`]: why a layer answered a request itself.

use std::fmt;

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::value::RawValue;

use crate::filter::ListenError;
use crate::jsonrpc::{
    JsonRpcError, HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
    RESOURCE_NOT_FOUND,
};
use crate::metrics::Refusal;

/// Why a layer answered a request itself instead of calling the inner service.
///
/// The layer's JSON-RPC error response carries it in its extensions, so an
/// outer layer can tell the reasons apart.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// The `Mcp-Method` header and the body's `method` disagree (-32020, 400).
    HeaderMismatch,
    /// The body cannot be read as JSON as far as the layer must read it
    /// (-32700, 400).
    Parse,
    /// The request is not one the layer can hand on: a listen without a
    /// usable id, a body with a second `method`, a batch holding a listen
    /// (-32600, 400); the message says why.
    InvalidRequest(&'static str),
    /// The body is longer than the layer reads (413).
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body could not be read to its end (-32600, 400).
    BodyUnreadable,
    /// Content codings cannot be read through (415).
    Encoded,
    /// The listen filter was not honoured.
    Listen(ListenError),
    /// A `resources/subscribe` whose `params` name no URI (-32602, 200); the
    /// message says why.
    InvalidParams(&'static str),
    /// A `resources/subscribe` for a URI the caller may not read, or that
    /// does not exist: the two are answered alike (-32002, 200).
    ResourceNotFound,
    /// A `resources/subscribe` the subscription hook refused (-32602, 200).
    SubscriptionRefused,
    /// A `resources/subscribe` of the 2026-07-28 era, which removed it
    /// (-32601, 404).
    MethodRemoved,
}

impl Rejection {
    /// The label this rejection is counted under.
    pub(crate) fn counted(&self) -> Refusal {
        match self {
            Self::HeaderMismatch => Refusal::HeaderMismatch,
            Self::Parse => Refusal::Parse,
            Self::InvalidRequest(_) => Refusal::InvalidRequest,
            Self::BodyTooLarge { .. } => Refusal::BodyTooLarge,
            Self::BodyUnreadable => Refusal::BodyUnreadable,
            Self::Encoded => Refusal::Encoded,
            Self::Listen(ListenError::InvalidParams(_)) => Refusal::InvalidListen,
            Self::Listen(ListenError::MissingTasksCapability) => Refusal::MissingTasksCapability,
            Self::Listen(ListenError::UnreadableResource) => Refusal::UnreadableResource,
            Self::Listen(ListenError::SubscriptionIdInUse) => Refusal::SubscriptionIdInUse,
            Self::InvalidParams(_) => Refusal::InvalidParams,
            Self::ResourceNotFound => Refusal::ResourceNotFound,
            Self::SubscriptionRefused => Refusal::SubscriptionRefused,
            Self::MethodRemoved => Refusal::MethodRemoved,
        }
    }

    /// The JSON-RPC error this rejection is answered with, and its status.
    pub fn to_jsonrpc(&self) -> JsonRpcError {
        match self {
            Self::HeaderMismatch => JsonRpcError::new(
                HEADER_MISMATCH,
                "the `Mcp-Method` header does not match the body's `method`",
            ),
            Self::Parse => JsonRpcError::new(PARSE_ERROR, "the request body is not valid JSON"),
            Self::InvalidRequest(message) => JsonRpcError::new(INVALID_REQUEST, *message),
            Self::BodyTooLarge { limit } => JsonRpcError::new(
                INVALID_REQUEST,
                format!("the request body is longer than {limit} bytes"),
            )
            .with_status(StatusCode::PAYLOAD_TOO_LARGE),
            Self::BodyUnreadable => {
                JsonRpcError::new(INVALID_REQUEST, "the request body could not be read")
            }
            Self::Encoded => JsonRpcError::new(
                INVALID_REQUEST,
                "a compressed request body cannot be inspected; decompress it before this layer",
            )
            .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            Self::Listen(error) => error.to_jsonrpc(),
            // The legacy era answers a request with its JSON-RPC response
            // (2025-11-25, Streamable HTTP), errors included: a client reads
            // an error status as a transport failure and loses the code.
            Self::InvalidParams(message) => {
                JsonRpcError::new(INVALID_PARAMS, *message).with_status(StatusCode::OK)
            }
            Self::ResourceNotFound => JsonRpcError::new(RESOURCE_NOT_FOUND, "Resource not found")
                .with_status(StatusCode::OK),
            Self::SubscriptionRefused => JsonRpcError::new(
                INVALID_PARAMS,
                "subscriptions are not supported for this resource",
            )
            .with_status(StatusCode::OK),
            Self::MethodRemoved => JsonRpcError::new(
                METHOD_NOT_FOUND,
                "`resources/subscribe` is not a method of protocol 2026-07-28: use `subscriptions/listen`",
            ),
        }
    }

    /// The response: the JSON-RPC error for `id`, with `self` in its extensions.
    pub(crate) fn into_response<B: From<Bytes>>(self, id: Option<&RawValue>) -> Response<B> {
        let mut response = self.to_jsonrpc().to_response(id);
        response.extensions_mut().insert(self);
        response
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_jsonrpc(), f)
    }
}

impl std::error::Error for Rejection {}
