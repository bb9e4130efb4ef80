//! 11: readiness

use super::*;

type MockRequest = Request<RequestBody<Full<Bytes>>>;
type MockResponse = Response<Full<Bytes>>;

#[tokio::test]
async fn the_readied_service_is_the_one_called() {
    let (mock, mut handle) = tower_test::mock::pair::<MockRequest, MockResponse>();
    handle.allow(1);
    let mut service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile()))
        .service(mock);

    let request = discover_request_full(DISCOVER);
    // A clone of the mock that was not readied panics when called.
    let ready = service.ready().await.unwrap();
    let future = ready.call(request);
    let server = tokio::spawn(async move {
        let (request, respond) = handle
            .next_request()
            .await
            .expect("the inner got the request");
        assert_eq!(request.headers()["mcp-method"], "server/discover");
        let body = request.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            &body[..],
            DISCOVER.as_bytes(),
            "the mock sees the replayed body"
        );
        let mut response = Response::new(Full::new(Bytes::from_static(DISCOVER_RESULT.as_bytes())));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        respond.send_response(response);
        handle
    });
    let response = future.await.unwrap();
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(
        body["result"]["capabilities"]["tools"],
        json!({"listChanged": true})
    );
    server.await.unwrap();
}

#[tokio::test]
async fn not_ready_means_not_ready() {
    let (mock, mut handle) = tower_test::mock::pair::<MockRequest, MockResponse>();
    handle.allow(0);
    let mut service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile()))
        .service(mock);
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(
        service.poll_ready(&mut cx).is_pending(),
        "poll_ready delegates to the inner service"
    );
    handle.allow(1);
    assert!(service.poll_ready(&mut cx).is_ready());
    // Not inspected: the readied mock is called directly.
    let request = Request::get("/mcp").body(Full::new(Bytes::new())).unwrap();
    let future = service.call(request);
    let (request, respond) = handle.next_request().await.unwrap();
    assert_eq!(request.method(), http::Method::GET);
    respond.send_response(Response::new(Full::new(Bytes::from_static(b"ok"))));
    let body = future
        .await
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(&body[..], b"ok");
}

fn discover_request_full(body: &'static str) -> Request<Full<Bytes>> {
    Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header("mcp-method", "server/discover")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}
