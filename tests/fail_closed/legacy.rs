//! The legacy era: `resources/subscribe` at the edge.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream;
use http::{Request, Response, StatusCode};
use http_body_util::StreamBody;
use mcp_edge::ServerProfile;
use tower::BoxError;

use crate::{
    assert_refused, common, json_of, leaked, post, post_split, send, through, Headers, Inner,
    Lenient, Stack, INITIALIZE,
};

/// `resources/subscribe` of `params`, id 7.
fn subscribe(params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{params}}}"#)
}

/// A profile whose subscription hook refuses `demo://public/static`.
fn subscribe_profile() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(common::public_only)
        .subscription_hook(|uris: &[&str]| {
            std::future::ready(uris.iter().map(|uri| !uri.ends_with("/static")).collect())
        })
        .build()
        .unwrap()
}

/// `request` through the listen filter of `subscribe_profile`, alone,
/// stacked and as `EdgeLayer`, in front of a fresh lenient inner each.
async fn through_listen_filters<B>(
    request: impl Fn() -> Request<B>,
) -> Vec<(Response<Bytes>, Arc<Lenient>)>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send + 'static,
{
    let mut out = Vec::new();
    for stack in [Stack::Listen, Stack::Stacked, Stack::Edge] {
        let lenient = Arc::new(Lenient::default());
        let inner = Inner(lenient.clone());
        let response = through(stack, subscribe_profile(), inner, request()).await;
        out.push((response, lenient));
    }
    out
}

#[tokio::test]
async fn a_readable_subscription_reaches_the_inner_byte_for_byte() {
    let body = subscribe(r#"{"uri":"demo://public/a","_meta":{"k":1}}"#);
    for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(lenient.calls(), 1);
        assert_eq!(&lenient.body.lock().unwrap()[..], body.as_bytes());
    }
    // Through the capabilities layer alone it is not intercepted.
    let (_, lenient) = send(
        Stack::Capabilities,
        post(&[], &subscribe(r#"{"uri":"demo://private/b"}"#)),
    )
    .await;
    assert_eq!(lenient.calls(), 1);
    // `resources/unsubscribe` passes through.
    let unsubscribe = r#"{"jsonrpc":"2.0","id":8,"method":"resources/unsubscribe","params":{"uri":"demo://private/b"}}"#;
    for (_, lenient) in through_listen_filters(|| post(&[], unsubscribe)).await {
        assert_eq!(lenient.calls(), 1);
    }
}

#[tokio::test]
async fn an_unreadable_or_unknown_uri_is_answered_alike() {
    let mut answers = Vec::new();
    for uri in ["demo://private/b", "demo://nowhere/c", "file:///etc/passwd"] {
        let body = subscribe(&format!(r#"{{"uri":"{uri}"}}"#));
        for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
            assert_refused(&response, StatusCode::OK, -32002, uri);
            assert_eq!(json_of(&response)["id"], 7);
            let text = std::str::from_utf8(response.body()).unwrap().to_owned();
            assert!(!text.contains(uri), "the answer names no URI: {text}");
            assert_eq!(lenient.calls(), 0, "{uri}");
            answers.push((response.status(), text));
        }
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
}

#[tokio::test]
async fn a_subscription_the_hook_refuses_is_answered_by_the_layer() {
    let body = subscribe(r#"{"uri":"demo://public/static"}"#);
    for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
        assert_refused(&response, StatusCode::OK, -32602, "refused by the hook");
        assert_eq!(lenient.calls(), 0);
    }
}

#[tokio::test]
async fn a_subscription_without_one_string_uri_is_invalid_params() {
    for params in [
        "{}",
        r#"{"uri":7}"#,
        r#"{"uri":null}"#,
        r#"{"uri":"demo://public/a","uri":"demo://private/b"}"#,
        "[]",
        r#""demo://public/a""#,
    ] {
        let body = subscribe(params);
        for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
            assert_refused(&response, StatusCode::OK, -32602, params);
            assert_eq!(json_of(&response)["id"], 7, "{params}");
            assert_eq!(lenient.calls(), 0, "{params}");
        }
    }
    let no_params = r#"{"jsonrpc":"2.0","id":7,"method":"resources/subscribe"}"#;
    for (response, _) in through_listen_filters(|| post(&[], no_params)).await {
        assert_refused(&response, StatusCode::OK, -32602, "no params");
    }
}

#[tokio::test]
async fn a_subscription_in_disguise_is_refused() {
    let cases: [(Headers<'static>, &str, i64); 5] = [
        (
            &[("mcp-method", "tools/call")],
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"demo://private/b"}}"#,
            -32020,
        ),
        (
            &[("mcp-method", "resources/subscribe")],
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            -32020,
        ),
        (
            &[],
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","method":"resources/subscribe","params":{"uri":"demo://private/b"}}"#,
            -32600,
        ),
        (
            &[],
            r#"[{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"demo://private/b"}}]"#,
            -32600,
        ),
        (
            &[],
            r#"{"jsonrpc":"2.0","method":"resources/subscribe","params":{"uri":"demo://private/b"}}"#,
            -32600,
        ),
    ];
    for (headers, body, code) in cases {
        for (response, lenient) in through_listen_filters(|| post(headers, body)).await {
            assert_refused(&response, StatusCode::BAD_REQUEST, code, body);
            assert_eq!(lenient.calls(), 0, "{body}");
        }
    }
    // Cut anywhere, a subscription to an unreadable URI never reaches the inner.
    let body = subscribe(r#"{"uri":"demo://private/b"}"#);
    for at in 0..=body.len() {
        for (response, lenient) in through_listen_filters(|| post_split(&[], &body, at)).await {
            assert_refused(&response, StatusCode::OK, -32002, &format!("split at {at}"));
            assert_eq!(lenient.calls(), 0);
        }
    }
}

#[tokio::test]
async fn a_subscription_of_the_modern_era_is_method_not_found() {
    // 2026-07-28 removed `resources/subscribe`: by its header or its `_meta`.
    let meta = subscribe(
        r#"{"uri":"demo://public/a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
    );
    let plain = subscribe(r#"{"uri":"demo://public/a"}"#);
    let cases: [(Headers<'static>, &str); 2] = [
        (&[], &meta),
        (&[("mcp-protocol-version", "2026-07-28")], &plain),
    ];
    for (headers, body) in cases {
        for (response, lenient) in through_listen_filters(|| post(headers, body)).await {
            assert_refused(&response, StatusCode::NOT_FOUND, -32601, body);
            assert_eq!(lenient.calls(), 0);
        }
    }
    // A legacy session's version is the legacy era.
    let legacy = [("mcp-protocol-version", "2025-11-25")];
    for (_, lenient) in through_listen_filters(|| post(&legacy, &plain)).await {
        assert_eq!(lenient.calls(), 1);
    }
}

#[tokio::test]
async fn ids_the_layer_cannot_vouch_for_never_let_capabilities_through() {
    for body in [
        // Not JSON as an id: refused, never answered with a malformed id.
        r#"{"jsonrpc":"2.0","id":01,"method":"initialize","params":{}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\tb\",\"method\":\"server/discover\"}",
        // A second id after the method: a last-wins inner answers id 2.
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{},"id":2}"#,
    ] {
        for stack in [Stack::Capabilities, Stack::Stacked, Stack::Edge] {
            let (response, lenient) = send(stack, post(&[], body)).await;
            assert!(!leaked(&response), "{stack:?} {body}");
            assert!(
                json_of(&response)["error"]["code"].is_i64(),
                "{stack:?} {body}: {}",
                String::from_utf8_lossy(response.body())
            );
            assert_eq!(
                lenient.capabilities.load(Ordering::SeqCst) > 0,
                lenient.calls() > 0
            );
        }
    }
}

#[tokio::test]
async fn the_capabilities_layer_alone_refuses_what_it_cannot_read() {
    // A coding the inner may ignore, and a method past the peek limit.
    let (response, lenient) = send(
        Stack::Capabilities,
        post(&[("content-encoding", "bogus")], INITIALIZE),
    )
    .await;
    assert_refused(
        &response,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        -32600,
        "encoded",
    );
    assert_eq!(lenient.calls(), 0);
    let padded = format!(
        r#"{{"jsonrpc":"2.0","id":7,"pad":"{}","method":"initialize","params":{{}}}}"#,
        "x".repeat(2 << 20)
    );
    // Whole in memory, the method is read and the answer rewritten.
    let (response, _) = send(Stack::Capabilities, post(&[], &padded)).await;
    assert!(!leaked(&response));
    // Streamed in small chunks, the method comes after the limit: refused
    // without reading further.
    let frames: Vec<Result<http_body::Frame<Bytes>, BoxError>> = padded
        .as_bytes()
        .chunks(64 << 10)
        .map(|chunk| Ok(http_body::Frame::data(Bytes::copy_from_slice(chunk))))
        .collect();
    let request = Request::post("/mcp")
        .body(StreamBody::new(stream::iter(frames)))
        .unwrap();
    let (response, lenient) = send(Stack::Capabilities, request).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(lenient.calls(), 0);
}
