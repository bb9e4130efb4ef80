//! 3. What the types promise: `Clone + Send + Sync`, futures that spawn, axum and tonic.

use std::future::Future;

use axum::Router;
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use mcp_edge::{edge, Edge, EdgeLayer, RequestBody, ServerProfile};
use serde_json::json;
use tower::{Service, ServiceExt};

use super::corpus::{listen, sample, Case};
use crate::common::{self, modern_body, sse_messages, LoopbackServer};
use crate::{take, whole, Answer, Chunked, Recorder, JSON, SETUPS};

/// Compiles only for a `Clone + Send + Sync` type.
fn clone_send_sync<T: Clone + Send + Sync>() {}

/// Compiles only when `Edge`'s response future and body are `Send` for a `Send` inner.
fn future_is_send<S>()
where
    S: Service<Request<RequestBody<Chunked>>, Response = Response<Chunked>> + Send,
    S::Future: Send,
{
    fn send<T: Send>() {}
    send::<edge::ResponseFuture<S, Chunked, Chunked>>();
    send::<edge::ResponseBody<Chunked>>();
}

#[tokio::test]
async fn edge_is_clone_send_sync_and_its_futures_spawn() {
    clone_send_sync::<EdgeLayer>();
    clone_send_sync::<Edge<Recorder>>();
    future_is_send::<Recorder>();
    let (profile, _) = SETUPS[0].profile();
    let (inner, log) = Recorder::new(whole(false));
    let service = Edge::new(inner, profile);
    let request = Case::post(sample("ping")).request();
    // Spawning needs the future to be `Send`.
    let response = tokio::spawn(service.oneshot(request))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(take(&log).len(), 1);
}

#[tokio::test]
async fn edge_layer_fits_an_axum_router() {
    let (profile, _) = SETUPS[0].profile();
    let (inner, log) = Recorder::new(whole(false));
    let app = Router::new()
        .route_service("/mcp", inner)
        .layer(EdgeLayer::new(profile));
    let discover = modern_body("server/discover", json!(3), json!({}));
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, JSON)
        .body(axum::body::Body::from(discover))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let message = common::body_json(response).await;
    assert_eq!(message["result"]["capabilities"]["logging"], json!({}));
    assert!(message["result"]["capabilities"]["completions"].is_null());

    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, JSON)
        .body(axum::body::Body::from(listen(
            "1",
            r#"{"notifications":{"toolsListChanged":1}}"#,
        )))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        take(&log).len(),
        1,
        "the bad listen never reached the inner"
    );
}

mod tonic_server {
    use super::*;

    use tonic::transport::server::TcpIncoming;
    use tonic::transport::Server;

    /// A tonic server with `EdgeLayer` around a recorder, on `listener`
    /// until `shutdown`; that this compiles is the check that tonic's
    /// bounds accept the layer.
    fn serve(
        profile: ServerProfile,
        inner: Recorder,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = Result<(), tonic::transport::Error>> + Send {
        Server::builder()
            .layer(EdgeLayer::new(profile))
            .serve_with_incoming_shutdown(inner, TcpIncoming::from(listener), shutdown)
    }

    #[tokio::test]
    async fn tonic_server_builder_accepts_edge_layer() {
        let (profile, _) = SETUPS[0].profile();
        let (inner, log) = Recorder::new(Answer {
            chunk: 16,
            ..whole(true)
        });
        let server =
            LoopbackServer::start(|listener, shutdown| serve(profile, inner, listener, shutdown))
                .await;
        let listen = listen(
            "\"t-1\"",
            r#"{"notifications":{"toolsListChanged":true,"promptsListChanged":true}}"#,
        );
        let request = Request::post("/mcp")
            .header(header::CONTENT_TYPE, JSON)
            .body(tonic::body::Body::new(Full::new(Bytes::from(listen))))
            .unwrap();
        let (status, body) = common::tonic_exchange(server.addr, request).await;
        assert_eq!(status, StatusCode::OK);
        let events = sse_messages(&body);
        let methods: Vec<&str> = events.iter().filter_map(|e| e["method"].as_str()).collect();
        assert_eq!(
            methods,
            // The inner's `ping` request is not for a listen stream: dropped.
            [
                "notifications/subscriptions/acknowledged",
                "notifications/tools/list_changed",
            ],
            "{events:?}"
        );
        // Prompts are not advertised to an anonymous caller, so not honoured.
        let seen = take(&log).pop().expect("the inner was called");
        let (ack, id) = seen.filter.expect("a HonouredFilter");
        assert_eq!(
            (ack.as_str(), id.as_str()),
            (r#"{"toolsListChanged":true}"#, "\"t-1\"")
        );
        assert_eq!(
            events[0]["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        server.stop("the server stops").await;
    }
}
