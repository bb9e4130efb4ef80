//! 12: compile-time checks

use super::*;

fn assert_clone_send_sync<T: Clone + Send + Sync>() {}

fn assert_send<T: Send>(_: &T) {}

#[derive(Clone)]
struct CloneSendSync;

/// A request body that is neither `Clone` nor `Sync`.
struct NotClone {
    data: Option<Bytes>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl Body for NotClone {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.data.take().map(|data| Ok(Frame::data(data))))
    }
}

#[test]
fn layer_and_service_are_clone_send_sync() {
    assert_clone_send_sync::<CapabilitiesLayer>();
    assert_clone_send_sync::<Capabilities<CloneSendSync>>();
}

#[tokio::test]
async fn layer_fits_axum_router() {
    let app: axum::Router = axum::Router::new()
        .route("/mcp", axum::routing::post(|| async { "ok" }))
        .layer(CapabilitiesLayer::new(profile()));
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(DISCOVER))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    // "ok" is no answer to a discover: the layer replaces it.
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let message: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(message["error"]["code"], -32603);
    assert_eq!(message["id"], 1);
}

#[tokio::test]
async fn non_clone_bodies_and_send_futures() {
    let mut service = ServiceBuilder::new()
        .check_clone()
        .layer(CapabilitiesLayer::new(profile()))
        .check_clone()
        .service_fn(|request: Request<RequestBody<NotClone>>| {
            // The body is neither `Clone` nor `Sync`; the layer asks for neither.
            async move {
                let body = request.into_body().collect().await.unwrap().to_bytes();
                Ok::<_, Infallible>(Response::new(Full::new(body)))
            }
        });
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(NotClone {
            data: Some(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            )),
            _not_sync: std::marker::PhantomData,
        })
        .unwrap();
    assert_clone_service(&service);
    let future = service.ready().await.unwrap().call(request);
    assert_send(&future);
    let body = future
        .await
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
}

fn assert_clone_service<S: Service<Request<NotClone>> + Clone>(_: &S) {}

#[test]
fn response_future_is_send_for_send_parts() {
    fn check<S, B, R>()
    where
        S: Service<Request<RequestBody<B>>, Response = Response<R>> + Send,
        S::Future: Send,
        B: Body + Unpin + Send,
        B::Error: Send,
        R: Body + Unpin + Send,
        R::Error: Send,
    {
        fn send<T: Send>() {}
        send::<crate::capabilities::ResponseFuture<S, B, R>>();
        send::<ResponseBody<R>>();
    }
    check::<
        tower::util::BoxCloneSyncService<
            Request<RequestBody<NotClone>>,
            Response<Full<Bytes>>,
            Infallible,
        >,
        NotClone,
        Full<Bytes>,
    >();
}

/// On an SSE answer, what could be read as the answer but cannot be
/// rewritten becomes the layer's error, at every split of the stream: an
/// event holding two JSON values, an unterminated last block, a result and
/// an error at once. A priming event with empty data passes.
#[tokio::test]
async fn sse_answers_the_layer_cannot_vouch_for_are_replaced() {
    let two = format!("data: {DISCOVER_RESULT}\ndata: {DISCOVER_RESULT}\n\n");
    let unterminated = format!("id: 0\ndata:\n\ndata: {DISCOVER_RESULT}");
    let both = format!(
        "data: {}\n\n",
        DISCOVER_RESULT.replacen(r#""result":"#, r#""error":{"code":1},"result":"#, 1)
    );
    for stream in [two, unterminated, both] {
        for size in 1..stream.len() {
            let reply = Reply::sse(&stream).split(size);
            let (out, _) = run(&profile(), discover_request(Counted::one(DISCOVER)), reply).await;
            let text = out.text();
            let messages: Vec<Value> = text
                .split("\n\n")
                .filter_map(|event| event.strip_prefix("data: "))
                .map(|data| serde_json::from_str(data).unwrap())
                .collect();
            assert_eq!(messages.len(), 1, "split {size}: {text}");
            assert_eq!(messages[0]["error"]["code"], -32603, "split {size}: {text}");
            assert_eq!(messages[0]["id"], 1);
            assert!(
                !text.contains("\"prompts\""),
                "split {size}: the inner's capabilities"
            );
        }
    }
}

/// A result twice: both are rewritten, so a parser that keeps the first and
/// one that keeps the last both read the profile's capabilities.
#[tokio::test]
async fn every_result_of_an_answer_is_rewritten() {
    let twice = DISCOVER_RESULT.replacen(
        r#""result":"#,
        r#""result":{"capabilities":{"prompts":{}}},"result":"#,
        1,
    );
    for reply in [
        Reply::json(&twice),
        Reply::sse(&format!("data: {twice}\n\n")),
    ] {
        let (out, _) = run(&profile(), discover_request(Counted::one(DISCOVER)), reply).await;
        let text = out.text();
        let data = text.strip_prefix("data: ").unwrap_or(text).trim_end();
        let last: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            last["result"]["capabilities"]["tools"],
            json!({"listChanged": true}),
            "{data}"
        );
        assert!(
            !data.contains(r#""prompts":{}"#),
            "the first result is rewritten too: {data}"
        );
    }
}

#[tokio::test]
async fn the_response_body_is_made_from_bytes() {
    crate::http::reply::assert_made_from_bytes::<ResponseBody<http_body_util::Full<Bytes>>>().await;
}
