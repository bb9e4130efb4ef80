//! 4. Body limits.

use super::*;

/// A body that must never be polled.
struct Untouchable;

impl http_body::Body for Untouchable {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        panic!("the body must not be polled")
    }
}

#[tokio::test]
async fn too_large_by_content_length_is_not_read() {
    let layer = ListenFilterLayer::new(builder().max_listen_body(64).build().unwrap());
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header("mcp-method", "subscriptions/listen")
        .header(header::CONTENT_LENGTH, "65")
        .body(Untouchable)
        .unwrap();
    let response = ServiceBuilder::new()
        .layer(layer)
        .service_fn(never::<Untouchable>)
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    assert_eq!(
        response.extensions().get::<Rejection>(),
        Some(&Rejection::BodyTooLarge { limit: 64 })
    );
    let body = value(&text(response).await);
    assert_eq!(body["id"], Value::Null);
}

/// `chunks` chunks of `size` bytes: a listen that never ends, counting polls.
fn endless_listen(chunks: usize, size: usize, polls: Arc<AtomicUsize>) -> Body {
    let head = Bytes::from(
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"x":""#,
    );
    let filler = Bytes::from(vec![b'a'; size]);
    let stream = futures_util::stream::iter(
        std::iter::once(head).chain(std::iter::repeat_n(filler, chunks)),
    )
    .inspect(move |_| {
        polls.fetch_add(1, Ordering::SeqCst);
    })
    .map(Ok::<_, Infallible>);
    Body::from_stream(stream)
}

#[tokio::test]
async fn too_large_while_streaming() {
    for named in [None, Some("subscriptions/listen")] {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut request = Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .body(endless_listen(10_000, 100, polls.clone()))
            .unwrap();
        if let Some(named) = named {
            request
                .headers_mut()
                .insert("mcp-method", named.parse().unwrap());
        }
        let layer = ListenFilterLayer::new(builder().max_listen_body(4096).build().unwrap());
        let response = run_refused(layer, request).await;
        let (_, rejection) =
            refusal(response, StatusCode::PAYLOAD_TOO_LARGE, -32600, Value::Null).await;
        assert_eq!(rejection, Rejection::BodyTooLarge { limit: 4096 });
        let polled = polls.load(Ordering::SeqCst);
        assert!(
            polled <= 4096 / 100 + 3,
            "read {polled} chunks: the body was read past the limit"
        );
    }
}

#[tokio::test]
async fn method_past_the_limit_is_too_large() {
    let layer = ListenFilterLayer::new(builder().max_listen_body(256).build().unwrap());
    let body = format!(
        r#"{{"params":{{"notifications":{{"resourceSubscriptions":["{}"]}}}},"id":1,"method":"subscriptions/listen"}}"#,
        "x".repeat(300)
    );
    let mut request = post(None, None, body);
    request.headers_mut().remove(header::CONTENT_LENGTH);
    let response = run_refused(layer, request).await;
    let (_, rejection) =
        refusal(response, StatusCode::PAYLOAD_TOO_LARGE, -32600, Value::Null).await;
    assert_eq!(rejection, Rejection::BodyTooLarge { limit: 256 });
}

#[tokio::test]
async fn a_listen_at_the_limit_passes() {
    let notifications = r#"{"toolsListChanged":true}"#;
    let body = listen_body("1", notifications);
    let layer = ListenFilterLayer::new(builder().max_listen_body(body.len()).build().unwrap());
    let inner = Inner::new(echo_ack(vec![]));
    let response = run(layer, &inner, listen_request(None, "1", notifications)).await;
    assert_eq!(text(response).await, ack_event("1", notifications));
}
