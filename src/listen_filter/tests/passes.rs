//! 6. Everything else passes.

use super::*;

#[tokio::test]
async fn tools_call_passes_untouched() {
    let inner = Inner::new(json_reply());
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"listen","arguments":{"notifications":{"toolsListChanged":true}}}}"#;
    let response = run(
        layer(),
        &inner,
        post(Some("tools/call"), Some("alice-token"), body),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.extensions().get::<Rejection>().is_none());
    assert_eq!(
        text(response).await,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#
    );
    let received = inner.last();
    assert_eq!(received.text(), body);
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        body.len().to_string().as_str()
    );
    assert!(received.filter.is_none());
}

#[tokio::test]
async fn a_large_tools_call_streams_through() {
    // Far over the listen body limit; the method comes first, so it is not buffered.
    let layer = ListenFilterLayer::new(builder().max_listen_body(64).build().unwrap());
    let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upload","arguments":{"data":""#;
    let mut chunks = vec![Bytes::from(head)];
    chunks.extend(std::iter::repeat_n(Bytes::from(vec![b'z'; 1000]), 100));
    chunks.push(Bytes::from(r#""}}}"#));
    let expected = chunks.concat();
    let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap();
    let inner = Inner::new(json_reply());
    let response = run(layer, &inner, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(inner.last().body, expected);
    assert!(inner.last().filter.is_none());
}

#[tokio::test]
async fn get_passes_untouched() {
    // A GET stream is not a listen: the guard does not touch it (its
    // foreign subscription tag included); only its screen reads it.
    let events = vec![note(
        "notifications/resources/updated",
        "1",
        &format!(r#""uri":"{README}""#),
    )];
    let inner = Inner::new(fixed(events.clone()));
    let request = Request::get("/mcp")
        .header(header::ACCEPT, "text/event-stream")
        .header("mcp-method", "subscriptions/listen")
        .body(Body::empty())
        .unwrap();
    let response = run(layer(), &inner, request).await;
    assert_eq!(text(response).await, events.concat());
    assert_eq!(inner.calls(), 1);
    assert!(inner.last().filter.is_none());
    assert!(inner.last().body.is_empty());
}
