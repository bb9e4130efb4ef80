//! 3. Disguises: header and body disagree about a listen.

use super::*;

#[tokio::test]
async fn header_listen_body_tools_call() {
    let body =
        r#"{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{"name":"x","arguments":{}}}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32020, json!("d1")).await;
    assert_eq!(rejection, Rejection::HeaderMismatch);
}

#[tokio::test]
async fn header_tools_call_body_listen() {
    let body = listen_body(r#""d2""#, r#"{"toolsListChanged":true}"#);
    let response = run_refused(layer(), post(Some("tools/call"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32020, json!("d2")).await;
    assert_eq!(rejection, Rejection::HeaderMismatch);
}

#[tokio::test]
async fn header_listen_method_only_nested() {
    let body = r#"{"jsonrpc":"2.0","id":"d3","params":{"method":"subscriptions/listen","notifications":{}}}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32020, json!("d3")).await;
    assert_eq!(rejection, Rejection::HeaderMismatch);
}

#[tokio::test]
async fn escaped_method_key_is_still_a_listen() {
    let inner = Inner::new(echo_ack(vec![]));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"m\u0065thod":"subscriptions\u002flisten","params":{{"notific\u0061tions":{{"resourceSubscriptions":["{ALICE_NOTES}"]}}}}}}"#
    );
    assert_eq!(value(&body)["method"], "subscriptions/listen");
    // Honoured as a listen: bob may not read alice's notes, so nothing is,
    // and the layer answers it at once.
    let response = run(layer(), &inner, post(None, Some("bob-token"), body)).await;
    assert_eq!(text(response).await, ended_at_once("1"));
    assert_eq!(inner.calls(), 0);
}

#[tokio::test]
async fn header_listen_inspects_any_content_type() {
    let inner = Inner::new(echo_ack(vec![]));
    let mut request = listen_request(
        None,
        "4",
        &format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{README}"]}}"#),
    );
    request
        .headers_mut()
        .insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
    let response = run(layer(), &inner, request).await;
    assert_eq!(
        text(response).await,
        ack_event("4", &format!(r#"{{"resourceSubscriptions":["{README}"]}}"#))
    );
}
