//! 9: header disguise

use super::*;

fn assert_mismatch(out: &Out, id: Value) {
    assert_eq!(out.status, StatusCode::BAD_REQUEST);
    assert_eq!(out.rejection, Some(Rejection::HeaderMismatch));
    assert_eq!(out.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(out.content_length(), Some(out.body.len()));
    let body = out.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], id);
    assert_eq!(body["error"]["code"], -32020);
}

#[tokio::test]
async fn discover_header_on_another_method_is_rejected() {
    let body = r#"{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"t"}}"#;
    let out = rejected(
        &profile(),
        post_request(Some("server/discover"), Counted::split(body.as_bytes(), 5)),
    )
    .await;
    assert_mismatch(&out, json!("abc"));
    let out = rejected(
        &profile(),
        post_request(Some("initialize"), Counted::one(body)),
    )
    .await;
    assert_mismatch(&out, json!("abc"));
}

#[tokio::test]
async fn another_header_on_discover_is_rejected() {
    let out = rejected(
        &profile(),
        post_request(Some("tools/call"), Counted::one(DISCOVER)),
    )
    .await;
    assert_mismatch(&out, json!(1));
    let out = rejected(
        &profile(),
        post_request(Some("server/discover"), Counted::one(INITIALIZE)),
    )
    .await;
    assert_mismatch(&out, json!(1));
    let out = rejected(
        &profile(),
        post_request(Some("initialize"), Counted::split(DISCOVER.as_bytes(), 3)),
    )
    .await;
    assert_mismatch(&out, json!(1));
}

#[tokio::test]
async fn mismatch_between_other_methods_passes_through() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (out, seen) = run(
        &profile(),
        post_request(Some("tools/call"), Counted::one(body)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(seen.body(), body.as_bytes());
    assert_eq!(out.text(), DISCOVER_RESULT);
    assert!(out.rejection.is_none());
}
