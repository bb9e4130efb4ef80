//! The publish endpoint (with `[hub]`): the upstream, or anything holding
//! the publish token, posts one JSON-RPC notification per change to
//! `POST /publish`, and the hub delivers it to every stream entitled to it,
//! on this proxy and, over the bus, on the others:
//!
//! | notification | `params` |
//! |---|---|
//! | `notifications/resources/updated` | `{"uri": "<the URI that changed>"}` |
//! | `notifications/tools/list_changed` | none or `{}` |
//! | `notifications/prompts/list_changed` | none or `{}` |
//! | `notifications/resources/list_changed` | none or `{}` |
//!
//! Answers: 202 once delivered here and handed to the bus (the body says to
//! how many streams here, and whether the bus took it); 401 without the
//! token (compared in constant time); 400 with the reason for a body that
//! is not one such notification (`notifications/tasks` among them: the
//! proxy leaves the tasks extension off); 413 over 64 KiB; 403 for a
//! request with an `Origin` (a browser's page, not a server).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use http::header::{AUTHORIZATION, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Limited};
use mcp_edge::hub::Publisher;
use mcp_edge::ListChanged;
use serde_json::Value;

use crate::answer;
use crate::callers::constant_time_eq;

/// The largest publication.
pub const MAX_BODY: usize = 64 * 1024;

struct Endpoint {
    publisher: Publisher,
    token: Box<[u8]>,
}

/// `POST /publish`, for `publisher`, to holders of `token`.
pub fn router(publisher: Publisher, token: &str) -> Router {
    let endpoint = Arc::new(Endpoint {
        publisher,
        token: token.as_bytes().into(),
    });
    Router::new()
        .route("/publish", post(publish))
        .with_state(endpoint)
}

/// What a publication asks for.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    ResourceUpdated(String),
    ListChanged(ListChanged),
}

async fn publish(
    State(endpoint): State<Arc<Endpoint>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if headers.contains_key(ORIGIN) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: a publication comes from a server, not a page",
        );
    }
    if !endpoint.authorized(&headers) {
        let mut response = refuse(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: the publish token is missing or wrong",
        );
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer error="invalid_token""#),
        );
        return response;
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            let message = format!("Payload too large: a publication is at most {MAX_BODY} bytes");
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, &message);
        }
        Err(_) => return refuse(StatusCode::BAD_REQUEST, "the body could not be read"),
    };
    let change = match read(&body) {
        Ok(change) => change,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    let published = match change {
        Change::ResourceUpdated(uri) => endpoint.publisher.resource_updated(&uri).await,
        Change::ListChanged(list) => endpoint.publisher.list_changed(list).await,
    };
    let bus = match &published.remote {
        Ok(()) => "ok".to_owned(),
        Err(error) => error.to_string(),
    };
    let body = serde_json::json!({"streams": published.streams, "bus": bus}).to_string();
    answer::response(StatusCode::ACCEPTED, body)
}

impl Endpoint {
    fn authorized(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        let token = value
            .as_bytes()
            .strip_prefix(b"Bearer ")
            .unwrap_or_default();
        constant_time_eq(token, &self.token)
    }
}

/// The change a publication's body asks for, or why it is refused.
fn read(body: &[u8]) -> Result<Change, &'static str> {
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(body) else {
        return Err("the body must be one JSON-RPC notification (a JSON object)");
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("`jsonrpc` must be \"2.0\"");
    }
    if message.contains_key("id") {
        return Err("a notification has no `id`");
    }
    let params = message.get("params");
    if params.is_some_and(|params| !params.is_object()) {
        return Err("`params` must be an object");
    }
    let list = |list| Ok(Change::ListChanged(list));
    match message.get("method").and_then(Value::as_str) {
        Some("notifications/resources/updated") => {
            match params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
                Some(uri) if !uri.is_empty() => Ok(Change::ResourceUpdated(uri.to_owned())),
                _ => Err("`params.uri` must be a non-empty string"),
            }
        }
        Some("notifications/tools/list_changed") => list(ListChanged::Tools),
        Some("notifications/prompts/list_changed") => list(ListChanged::Prompts),
        Some("notifications/resources/list_changed") => list(ListChanged::Resources),
        Some("notifications/tasks") => {
            Err("the proxy leaves the tasks extension off: no stream hears task statuses")
        }
        Some(_) => Err("`method` is not a notification the hub delivers"),
        None => Err("`method` must be a string"),
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    let code = match status {
        StatusCode::BAD_REQUEST => -32602,
        _ => -32600,
    };
    answer::error(status, None, code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publications_are_read_or_refused_with_the_reason() {
        let ok = |text: &str| read(text.as_bytes()).unwrap();
        assert_eq!(
            ok(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://a"}}"#
            ),
            Change::ResourceUpdated("demo://a".into())
        );
        assert_eq!(
            ok(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            Change::ListChanged(ListChanged::Tools)
        );
        assert_eq!(
            ok(r#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{}}"#),
            Change::ListChanged(ListChanged::Resources)
        );
        for (text, says) in [
            ("nope", "one JSON-RPC notification"),
            ("[]", "one JSON-RPC notification"),
            (
                r#"{"method":"notifications/tools/list_changed"}"#,
                "`jsonrpc`",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"notifications/tools/list_changed"}"#,
                "no `id`",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated"}"#,
                "`params.uri`",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":""}}"#,
                "`params.uri`",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":[1]}"#,
                "`params`",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t"}}"#,
                "tasks",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call"}"#,
                "not a notification",
            ),
            (r#"{"jsonrpc":"2.0","method":7}"#, "`method`"),
        ] {
            let why = read(text.as_bytes()).unwrap_err();
            assert!(why.contains(says), "{text}: {why}");
        }
    }
}
