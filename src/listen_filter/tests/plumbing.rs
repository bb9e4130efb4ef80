//! 9. Plumbing.

use super::*;

fn assert_clone_send_sync<T: Clone + Send + Sync>() {}
fn assert_send<T: Send>(_: &T) {}

#[derive(Clone)]
struct Echo;

impl<B: http_body::Body> Service<Request<RequestBody<B>>> for Echo {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<RequestBody<B>>) -> Self::Future {
        ready(Ok(Response::new(Body::empty())))
    }
}

#[test]
fn layer_and_service_are_clone_send_sync() {
    assert_clone_send_sync::<ListenFilterLayer>();
    assert_clone_send_sync::<ListenFilter<Echo>>();
    assert_clone_send_sync::<ListenFilter<axum::routing::Route>>();
    fn future_is_send<S, B>()
    where
        S: Service<Request<RequestBody<B>>> + Send,
        S::Future: Send,
        B: http_body::Body + Send,
        B::Error: Send,
    {
        fn send<T: Send>() {}
        send::<ResponseFuture<S, B, Body>>();
    }
    future_is_send::<Echo, Body>();
    future_is_send::<axum::routing::Route, Body>();
}

#[tokio::test]
async fn fits_axum_router_layer() {
    let app: axum::Router = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(
                |axum::Extension(filter): axum::Extension<HonouredFilter>| async move {
                    filter.ack().get().to_owned()
                },
            ),
        )
        // Unguarded: the handler answers with the ack it was handed, which a
        // guarded layer would replace (it is not the listen's own answer).
        .layer(ListenFilterLayer::new(profile()).guard_stream(false));
    let response = app
        .oneshot(listen_request(None, "1", ANONYMOUS_ASK))
        .await
        .unwrap();
    assert_eq!(text(response).await, ANONYMOUS_ACK);
}

#[tokio::test]
async fn builder_checks_and_send_future() {
    // `Body` is not `Clone`; the service is regardless.
    let inner = Inner::new(echo_ack(vec![]));
    let mut service = ServiceBuilder::new()
        .layer(layer())
        .check_clone()
        .check_service_clone::<Echo>()
        .check_service::<Echo, Request<Body>, Response<ResponseBody<Body>>, Infallible>()
        .service_fn(inner.handler::<Body>());
    let clone = service.clone();
    let future = service
        .ready()
        .await
        .unwrap()
        .call(listen_request(None, "1", ANONYMOUS_ASK));
    assert_send(&future);
    assert_send(&clone);
    let response = future.await.unwrap();
    assert_send(response.body());
    assert_eq!(text(response).await, ack_event("1", ANONYMOUS_ACK));
}

#[tokio::test]
async fn the_readied_service_is_the_one_called() {
    type Mocked = tower_test::mock::Mock<Request<RequestBody<Body>>, Response<Body>>;
    let (mock, mut handle) = tower_test::mock::pair::<Request<RequestBody<Body>>, Response<Body>>();
    let mut service: ListenFilter<Mocked> = layer().layer(mock);

    // Readiness is the inner service's.
    handle.allow(0);
    assert!(
        service.ready().now_or_never().is_none(),
        "not ready while the inner is not"
    );
    handle.allow(1);
    service.ready().await.unwrap();
    // The listen is buffered and honoured before the inner service is called; a
    // clone that was never readied would panic ("poll_ready must be called first").
    let future = tokio::spawn(service.call(listen_request(None, "5", ANONYMOUS_ASK)));
    let (request, respond) = handle
        .next_request()
        .await
        .expect("the inner service was called");
    assert_eq!(
        request
            .extensions()
            .get::<HonouredFilter>()
            .unwrap()
            .ack()
            .get(),
        ANONYMOUS_ACK
    );
    let body = request.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, listen_body("5", ANONYMOUS_ACK));
    respond.send_response(sse_response(vec![Bytes::from(ack_event(
        "5",
        ANONYMOUS_ACK,
    ))]));
    let response = future.await.unwrap().unwrap();
    assert_eq!(text(response).await, ack_event("5", ANONYMOUS_ACK));

    // The service left behind must be readied again; its one permit was used.
    assert!(service.ready().now_or_never().is_none());
    handle.allow(1);
    service.ready().await.unwrap();
    let future = tokio::spawn(service.call(post(
        Some("tools/call"),
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
    )));
    let (request, respond) = handle.next_request().await.unwrap();
    assert!(request.extensions().get::<HonouredFilter>().is_none());
    respond.send_response(Response::new(Body::from("ok")));
    assert_eq!(text(future.await.unwrap().unwrap()).await, "ok");
}

#[tokio::test]
async fn service_accessors_and_layer_constructor() {
    let service = ListenFilter::new(Echo, profile()).guard_stream(false);
    let _: &Echo = service.get_ref();
    let mut service = service;
    let _: &mut Echo = service.get_mut();
    let _: Echo = service.into_inner();
    let layered: ListenFilter<Echo> = ListenFilter::<Echo>::layer(profile()).layer(Echo);
    let response = layered
        .oneshot(listen_request(None, "1", ANONYMOUS_ASK))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_response_body_is_made_from_bytes() {
    crate::http::reply::assert_made_from_bytes::<ResponseBody<http_body_util::Full<Bytes>>>().await;
}
