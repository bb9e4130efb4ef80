//! `ListenFilterLayer` in real stacks: an axum app behind auth middleware, a
//! tonic server, and an axum server over TCP with a hyper client.

use std::convert::Infallible;
use std::future::ready;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{header, StatusCode};
use http_body_util::{BodyExt, Full};
use mcp_edge::{
    HonouredFilter, ListenFilterLayer, Principal, Rejection, RequestBody, ServerProfile,
};
use serde_json::{json, Value};
use tower::ServiceExt;

mod common;
use common::{
    ack_event, bearer_principal, body_bytes, body_json, http1_connect, post_json, sse_messages,
    LoopbackServer, SUBSCRIPTION_ID,
};

const README: &str = "demo://public/readme";
const LOGO: &str = "demo://public/static/logo";
const ALICE_NOTES: &str = "demo://users/alice/notes";
const BOB_NOTES: &str = "demo://users/bob/notes";
const TASKS_META: &str = r#"{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

fn readable(caller: Option<&Principal>, uri: &str) -> bool {
    let name = caller.map(Principal::as_str);
    match uri {
        README | LOGO => true,
        ALICE_NOTES => name == Some("alice"),
        BOB_NOTES => name == Some("bob"),
        _ => false,
    }
}

fn profile() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
            ready(
                uris.iter()
                    .map(|uri| readable(caller, uri))
                    .collect::<Vec<bool>>(),
            )
        })
        .subscription_hook(|uris: &[&str]| {
            ready(uris.iter().map(|uri| *uri != LOGO).collect::<Vec<bool>>())
        })
        .task_directory(|owner: &Principal, ids: &[&str]| {
            let owner = owner.as_str().to_owned();
            ready(
                ids.iter()
                    .map(|id| *id == format!("task-{owner}-1"))
                    .collect::<Vec<bool>>(),
            )
        })
        .build()
        .unwrap()
}

/// Authentication: a bearer token names the principal.
fn authenticate<B>(mut request: http::Request<B>) -> http::Request<B> {
    if let Some(principal) = bearer_principal(request.headers()) {
        request.extensions_mut().insert(principal);
    }
    request
}

/// The auth middleware of the axum app.
async fn auth(request: Request, next: Next) -> Response {
    next.run(authenticate(request)).await
}

/// The MCP endpoint: a listen gets an SSE stream that acknowledges what the
/// handler received, then leaks an update for every user's notes (which the
/// guard must drop unless honoured), then ends or stays open. Anything else
/// gets its body echoed as JSON.
async fn mcp(request: Request, stay_open: bool) -> Response {
    let filter = request.extensions().get::<HonouredFilter>().cloned();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let Some(filter) = filter else {
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap();
    };
    let message: Value = serde_json::from_slice(&body).unwrap();
    let id = filter.subscription_id().get();
    let mut events = vec![ack_event(id, &message["params"]["notifications"])];
    for uri in [ALICE_NOTES, BOB_NOTES, README] {
        events.push(format!(
            r#"data: {{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{uri}","_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
        ) + "\n\n");
    }
    let events = events
        .into_iter()
        .map(|event| Ok::<_, Infallible>(Bytes::from(event)));
    let stream = futures_util::stream::iter(events);
    let body = if stay_open {
        Body::from_stream(futures_util::StreamExt::chain(
            stream,
            futures_util::stream::pending(),
        ))
    } else {
        Body::from_stream(stream)
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(body)
        .unwrap()
}

fn app(stay_open: bool) -> Router {
    Router::new()
        .route(
            "/mcp",
            post(move |request: Request| mcp(request, stay_open)),
        )
        .layer(ListenFilterLayer::new(profile()))
        .layer(middleware::from_fn(auth))
}

fn listen_body(id: &str, notifications: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"_meta":{TASKS_META},"notifications":{notifications}}}}}"#
    )
}

fn listen(token: Option<&str>, id: &str, notifications: &str) -> http::Request<Body> {
    let mut request = post_json(Some("subscriptions/listen"), listen_body(id, notifications));
    if let Some(token) = token {
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
    }
    request
}

async fn stream_of(response: Response) -> String {
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    String::from_utf8(body_bytes(response).await.to_vec()).unwrap()
}

#[tokio::test]
async fn axum_app_honours_per_caller() {
    let asked = format!(
        r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{BOB_NOTES}","{README}","{LOGO}"],"taskIds":["task-alice-1","task-bob-1","task-ghost"]}}"#
    );
    for (token, uris, tasks) in [
        (
            Some("alice-token"),
            vec![ALICE_NOTES, README],
            vec!["task-alice-1"],
        ),
        (
            Some("bob-token"),
            vec![BOB_NOTES, README],
            vec!["task-bob-1"],
        ),
        (None, vec![README], vec![]),
    ] {
        let stream = stream_of(
            app(false)
                .oneshot(listen(token, "\"l-1\"", &asked))
                .await
                .unwrap(),
        )
        .await;
        let messages = sse_messages(stream.as_bytes());
        let mut ack = json!({"resourceSubscriptions": uris});
        if !tasks.is_empty() {
            ack["taskIds"] = json!(tasks);
        }
        assert_eq!(
            messages[0]["method"], "notifications/subscriptions/acknowledged",
            "{token:?}"
        );
        assert_eq!(messages[0]["params"]["notifications"], ack, "{token:?}");
        assert_eq!(messages[0]["params"]["_meta"][SUBSCRIPTION_ID], "l-1");
        // Only the updates this caller may see get through.
        let updated: Vec<&str> = messages[1..]
            .iter()
            .map(|m| m["params"]["uri"].as_str().unwrap())
            .collect();
        assert_eq!(updated, uris, "{token:?}");
    }
}

#[tokio::test]
async fn axum_app_refuses_bad_listens_itself() {
    let response = app(false)
        .oneshot(listen(
            Some("alice-token"),
            "3",
            r#"{"taskIds":"task-alice-1"}"#,
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    assert!(matches!(
        response.extensions().get::<Rejection>(),
        Some(Rejection::Listen(_))
    ));
    let body = body_json(response).await;
    assert_eq!(body["id"], 3);
    assert_eq!(body["error"]["code"], -32602);
}

#[tokio::test]
async fn axum_app_passes_other_requests() {
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
    let request = http::Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header("mcp-method", "tools/call")
        .body(Body::from(body))
        .unwrap();
    let response = app(false).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_bytes(response).await, body);
}

/// Sends `request` over a fresh HTTP/1 connection to `addr`.
async fn send(
    addr: SocketAddr,
    request: http::Request<Full<Bytes>>,
) -> http::Response<hyper::body::Incoming> {
    let (mut sender, _connection) = http1_connect(addr).await;
    sender.send_request(request).await.unwrap()
}

fn http_listen(addr: SocketAddr, token: &str, body: String) -> http::Request<Full<Bytes>> {
    http::Request::post(format!("http://{addr}/mcp"))
        .header(header::HOST, addr.to_string())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header("mcp-method", "subscriptions/listen")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// Reads `body` until its first complete SSE event.
async fn first_event<B>(body: &mut B) -> String
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    let mut read = Vec::new();
    while !read.windows(2).any(|w| w == b"\n\n") {
        let frame = body
            .frame()
            .await
            .expect("the stream ended before an event")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            read.extend_from_slice(&data);
        }
    }
    let text = String::from_utf8(read).unwrap();
    text[..text.find("\n\n").unwrap() + 2].to_owned()
}

/// Requests whose bodies the layer read whole while peeking, one after another
/// on one connection: the connection stays alive for each.
#[tokio::test]
async fn keep_alive_survives_bodies_read_whole() {
    let server = LoopbackServer::axum(app(false)).await;
    let addr = server.addr;

    let (mut sender, connection) = http1_connect(addr).await;
    for id in 1..=3 {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"plain"}}}}}}"#
        );
        let request = http::Request::post(format!("http://{addr}/mcp"))
            .header(header::HOST, addr.to_string())
            .header(header::CONTENT_TYPE, "application/json")
            .header("mcp-method", "tools/call")
            .body(Full::new(Bytes::from(body.clone())))
            .unwrap();
        sender.ready().await.expect("the connection is still open");
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(body_bytes(response).await, body);
    }
    drop(sender);
    tokio::time::timeout(Duration::from_secs(10), connection)
        .await
        .expect("the client connection ends")
        .unwrap()
        .unwrap();
    server.stop("the server shuts down").await;
}

#[tokio::test]
async fn over_tcp_with_hyper() {
    let server = LoopbackServer::axum(app(true)).await;
    let addr = server.addr;

    let asked = format!(
        r#"{{"toolsListChanged":true,"resourceSubscriptions":["{ALICE_NOTES}","{README}"]}}"#
    );
    let response = send(
        addr,
        http_listen(addr, "bob-token", listen_body("21", &asked)),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body();
    let event = first_event(&mut body).await;
    let ack = &sse_messages(event.as_bytes())[0];
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": [README]})
    );
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 21);
    // Then only the update bob may see, while the stream stays open.
    let next = first_event(&mut body).await;
    assert_eq!(sse_messages(next.as_bytes())[0]["params"]["uri"], README);

    // A bad listen is answered by the layer over the wire too.
    let bad = send(
        addr,
        http_listen(addr, "bob-token", listen_body("22", "[]")),
    )
    .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let bad = body_json(bad).await;
    assert_eq!(bad["error"]["code"], -32602);
    assert_eq!(bad["id"], 22);

    // The client goes away; the server shuts down gracefully.
    drop(body);
    server
        .stop("graceful shutdown finishes once the client is gone")
        .await;
}

/// A gRPC-style inner service: answers a listen with the ack it was handed.
async fn grpc_inner(
    request: http::Request<RequestBody<tonic::body::Body>>,
) -> Result<http::Response<tonic::body::Body>, Infallible> {
    let filter = request
        .extensions()
        .get::<HonouredFilter>()
        .cloned()
        .expect("a listen");
    let event = ack_event(filter.subscription_id().get(), filter.ack().get());
    Ok(http::Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(tonic::body::Body::new(Full::new(Bytes::from(event))))
        .unwrap())
}

/// `Server::builder().layer(ListenFilterLayer)` type-checks and serves: the
/// layer honours a listen and answers a bad one itself. (tonic's `router`
/// feature is off here, so the stack serves a plain tower service.)
#[tokio::test]
async fn tonic_server_builder_layer() {
    let server = LoopbackServer::start(|listener, shutdown| {
        tonic::transport::Server::builder()
            .accept_http1(true)
            .layer(tower::util::MapRequestLayer::new(
                authenticate::<tonic::body::Body>,
            ))
            .layer(ListenFilterLayer::new(profile()))
            .serve_with_incoming_shutdown(
                tower::service_fn(grpc_inner),
                tonic::transport::server::TcpIncoming::from(listener),
                shutdown,
            )
    })
    .await;
    let addr = server.addr;

    let asked = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{BOB_NOTES}"]}}"#);
    let response = send(
        addr,
        http_listen(addr, "alice-token", listen_body("30", &asked)),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let ack = &sse_messages(first_event(&mut body).await.as_bytes())[0];
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": [ALICE_NOTES]})
    );
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 30);
    drop(body);

    let response = send(
        addr,
        http_listen(
            addr,
            "alice-token",
            listen_body("31", r#"{"toolsListChanged":1}"#),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body = body_json(response).await;
    assert_eq!(body["id"], 31);
    assert_eq!(body["error"]["code"], -32602);

    server.stop("the server shuts down").await;
}
