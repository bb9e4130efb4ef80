//! The inner's own errors keep their status; what could carry a result is checked.

use bytes::Bytes;
use http::{Response, StatusCode};
use mcp_edge::Rejection;
use serde_json::json;

use crate::{
    guarded, inner_capabilities, json_of, leaked, listen_profile, post, profile, through, Canned,
    Headers, Stack, DISCOVER, INITIALIZE, JSON, LISTEN, STACKS, TEXT,
};

/// An inner that answers `status`, `headers` and `body`, in chunks of 5.
fn answering(status: StatusCode, headers: Headers<'static>, body: impl Into<Bytes>) -> Canned {
    Canned {
        status,
        headers: headers.to_vec(),
        body: body.into(),
        chunk: 5,
    }
}

/// The answer is the layers' -32603 error for id 7, in place of the inner's.
fn assert_replaced(response: &Response<Bytes>, what: &str) {
    assert_eq!(
        response.status(),
        StatusCode::INTERNAL_SERVER_ERROR,
        "{what}"
    );
    let message = json_of(response);
    assert_eq!(message["error"]["code"], -32603, "{what}: {message}");
    assert_eq!(message["id"], 7, "{what}: {message}");
}

/// A result to id 7 carrying the inner's own capabilities.
fn inner_result() -> String {
    json!({"jsonrpc": "2.0", "id": 7, "result": {"capabilities": inner_capabilities()}}).to_string()
}

#[tokio::test]
async fn an_error_status_without_a_result_passes_as_it_came() {
    let answers = [
        // rmcp's answer to a request without a session.
        answering(
            StatusCode::BAD_REQUEST,
            &[TEXT],
            "Bad Request: Session ID is required",
        ),
        answering(StatusCode::BAD_REQUEST, &[], ""),
        // Not rebuilt, as the guard rebuilds a listen's answer with a 200.
        answering(
            StatusCode::NOT_FOUND,
            &[JSON],
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"},"x":1}"#,
        ),
        answering(
            StatusCode::UNAUTHORIZED,
            &[JSON, ("www-authenticate", "Bearer")],
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"\"token\" is missing"}}"#,
        ),
        answering(
            StatusCode::SERVICE_UNAVAILABLE,
            &[("content-type", "text/html"), ("retry-after", "5")],
            "<html><style>p{color:red}</style><p>busy</p></html>",
        ),
    ];
    for answer in answers {
        for request in [DISCOVER, INITIALIZE, LISTEN] {
            for stack in STACKS {
                let what = format!("{stack:?} {request}: {:?}", answer.body);
                let response =
                    through(stack, listen_profile(), answer.clone(), post(&[], request)).await;
                assert_eq!(response.status(), answer.status, "{what}");
                assert_eq!(response.headers().len(), answer.headers.len(), "{what}");
                for (name, value) in &answer.headers {
                    assert_eq!(response.headers()[*name], *value, "{what}");
                }
                assert_eq!(response.body(), &answer.body, "{what}");
                assert!(response.extensions().get::<Rejection>().is_none(), "{what}");
            }
        }
    }
}

#[tokio::test]
async fn an_error_status_with_a_result_is_checked() {
    let stacks = [Stack::Capabilities, Stack::Stacked, Stack::Edge];
    // The request's own answer, in any spelling of its key: rewritten, and
    // its status kept.
    for body in [
        inner_result(),
        inner_result().replace("result", r"\u0072esult"),
    ] {
        for request in [DISCOVER, INITIALIZE] {
            for stack in stacks {
                let what = format!("{stack:?} {request}: {body}");
                let answer = answering(StatusCode::BAD_REQUEST, &[JSON], body.clone());
                let response = through(stack, profile(), answer, post(&[], request)).await;
                assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{what}");
                let message = json_of(&response);
                assert_eq!(message["id"], 7, "{what}");
                assert!(message["result"]["capabilities"]["tools"].is_object());
                assert!(!leaked(&response), "{what}");
            }
        }
    }
    // A UTF-16 reader finds the result; a byte search does not.
    let utf16: Vec<u8> = inner_result()
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let mut too_long = answering(StatusCode::BAD_REQUEST, &[TEXT], "x".repeat((1 << 20) + 1));
    too_long.chunk = 64 << 10;
    let failing = [
        // A reader of the first JSON value finds the inner's result.
        answering(
            StatusCode::BAD_REQUEST,
            &[TEXT],
            format!("{} and more", inner_result()),
        ),
        answering(
            StatusCode::BAD_REQUEST,
            &[JSON],
            inner_result().replace(r#""id":7"#, r#""id":8"#),
        ),
        // A reader that folds the case of keys finds it too.
        answering(
            StatusCode::BAD_REQUEST,
            &[JSON],
            inner_result().replace("result", "Result"),
        ),
        answering(
            StatusCode::CONFLICT,
            &[JSON],
            inner_result().replace(r#""id":7"#, r#""id":7,"error":{"code":1,"message":"x"}"#),
        ),
        answering(StatusCode::BAD_REQUEST, &[JSON], utf16),
        // Past `max_rewritten_response`, even with no result in sight.
        too_long,
    ];
    for answer in failing {
        for request in [DISCOVER, INITIALIZE] {
            for stack in stacks {
                let what = format!("{stack:?} {request}: {}", answer.body.len());
                let response = through(stack, profile(), answer.clone(), post(&[], request)).await;
                assert_replaced(&response, &what);
            }
        }
    }
}

#[tokio::test]
async fn a_listen_answered_with_an_error_status_and_a_result_is_checked() {
    let leaky = r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","leak":1}}"#;
    for (response, messages) in guarded(answering(StatusCode::BAD_REQUEST, &[JSON], leaky)).await {
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            messages[0],
            json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}})
        );
    }
    for body in [
        r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":7,"Result":{"leak":1}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{}} and more"#,
    ] {
        let answer = answering(StatusCode::BAD_REQUEST, &[JSON], body);
        for (response, _) in guarded(answer).await {
            assert_replaced(&response, body);
        }
    }
}
