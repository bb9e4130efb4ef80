//! The JSON-RPC error model both layers answer with.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// The server failed to produce a valid answer.
pub const INTERNAL_ERROR: i64 = -32603;
/// The resource does not exist (or the caller may not know it does), as the
/// 2025-11-25 resources page defines.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// An `Mcp-*` header disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// A bounded resource is exhausted (too many open streams, a stream that
/// fell behind), as the events working group's draft defines it; `data`
/// names the limit (`limit`) and its value (`max`).
pub const RESOURCE_EXHAUSTED: i64 = -32013;

/// A JSON-RPC error with the HTTP status it is answered with.
///
/// ```
/// use mcp_edge::jsonrpc::{JsonRpcError, INVALID_PARAMS};
///
/// let error = JsonRpcError::new(INVALID_PARAMS, "`params` must be an object");
/// assert_eq!(error.status(), http::StatusCode::BAD_REQUEST);
/// let id: Box<serde_json::value::RawValue> = serde_json::from_str("7").unwrap();
/// let body = error.to_body(Some(&id));
/// assert_eq!(
///     &body[..],
///     br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"`params` must be an object"}}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct JsonRpcError {
    code: i64,
    message: Cow<'static, str>,
    data: Option<Value>,
    status: StatusCode,
}

impl JsonRpcError {
    /// An error with `code` and `message`, answered with the code's status.
    pub fn new(code: i64, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            status: status_for(code),
        }
    }

    /// Sets the error's `data` member.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Overrides the HTTP status (413 for an oversized body, say).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        self.code
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `data` member, if any.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }

    /// The HTTP status the error is answered with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The JSON-RPC error response for request `id` (`null` when unknown).
    pub fn to_body(&self, id: Option<&RawValue>) -> Bytes {
        #[derive(Serialize)]
        struct Body<'a> {
            jsonrpc: &'static str,
            id: Option<&'a RawValue>,
            error: ErrorObject<'a>,
        }
        #[derive(Serialize)]
        struct ErrorObject<'a> {
            code: i64,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            data: Option<&'a Value>,
        }
        let body = Body {
            jsonrpc: "2.0",
            id,
            error: ErrorObject {
                code: self.code,
                message: &self.message,
                data: self.data.as_ref(),
            },
        };
        serde_json::to_vec(&body)
            .expect("an error object always serializes")
            .into()
    }

    /// The error as an HTTP response with a JSON body, for request `id`.
    pub fn to_response<B: From<Bytes>>(&self, id: Option<&RawValue>) -> http::Response<B> {
        let body = self.to_body(id);
        let mut response = http::Response::new(B::from(body.clone()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        headers.insert(http::header::CONTENT_LENGTH, body.len().into());
        response.extensions_mut().insert(Answered {
            code: self.code,
            message: self.message.clone(),
        });
        response
    }
}

/// The mark of an error answer the edge wrote: its code and message, for
/// the request's operation (`crate::telemetry`).
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    pub(crate) code: i64,
    pub(crate) message: Cow<'static, str>,
}

impl fmt::Display for JsonRpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for JsonRpcError {}

/// The HTTP status for an error code: every request error is a 400.
fn status_for(code: i64) -> StatusCode {
    match code {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | MISSING_REQUIRED_CLIENT_CAPABILITY
        | UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_errors_are_400() {
        for code in [
            PARSE_ERROR,
            INVALID_REQUEST,
            INVALID_PARAMS,
            HEADER_MISMATCH,
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            UNSUPPORTED_PROTOCOL_VERSION,
        ] {
            assert_eq!(
                JsonRpcError::new(code, "x").status(),
                StatusCode::BAD_REQUEST
            );
        }
        assert_eq!(
            JsonRpcError::new(METHOD_NOT_FOUND, "x").status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn body_echoes_id_or_null_and_data() {
        let error = JsonRpcError::new(MISSING_REQUIRED_CLIENT_CAPABILITY, "missing")
            .with_data(serde_json::json!({"requiredCapabilities": {}}));
        let id: Box<RawValue> = serde_json::from_str(r#""abc""#).unwrap();
        let body: Value = serde_json::from_slice(&error.to_body(Some(&id))).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"jsonrpc": "2.0", "id": "abc",
                "error": {"code": -32021, "message": "missing", "data": {"requiredCapabilities": {}}}})
        );
        let body: Value = serde_json::from_slice(&error.to_body(None)).unwrap();
        assert_eq!(body["id"], Value::Null);
    }

    #[test]
    fn response_has_status_type_and_length() {
        let error = JsonRpcError::new(INVALID_REQUEST, "too large")
            .with_status(StatusCode::PAYLOAD_TOO_LARGE);
        let response: http::Response<Bytes> = error.to_response(None);
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            response.headers()[http::header::CONTENT_TYPE],
            "application/json"
        );
        assert_eq!(
            response.headers()[http::header::CONTENT_LENGTH],
            response.body().len().to_string().as_str()
        );
    }
}
