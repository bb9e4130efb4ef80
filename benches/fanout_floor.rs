//! The floor of `benches/fanout.sh`: bare hyper 1 and tokio on loopback,
//! no mcp-edge code, writing the bytes the reference server writes.
//!
//! ```text
//! fanout_floor --addr 127.0.0.1:PORT
//! ```
//!
//! - A `subscriptions/listen` POST to `/mcp` is answered with the reference
//!   server's SSE stream: its headers, its acknowledgment (the request's
//!   `notifications`, tagged with the listen's id), then one
//!   `notifications/resources/updated` event per update, tagged with the
//!   stream's own subscription id. Every stream is fed from one
//!   `tokio::sync::broadcast` channel, which carries the event up to the
//!   subscription id; each stream writes its own id and the event's end.
//! - A `tools/call` of `touch_resource` publishes one update of its `uri`
//!   and is answered as the reference server (rmcp) answers it.
//!
//! Nothing is checked: there is no auth, no filter, no cap. Run without
//! `--addr` (as `cargo bench` does), it says so and exits.

use std::convert::Infallible;
use std::future::ready;
use std::net::SocketAddr;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, Stream, StreamExt};
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::broadcast;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The message after the subscription id, and the event's end.
const TAIL: &[u8] = b"}}}\n\n";
/// Updates a stream may fall behind by (the hub's default backlog).
const BACKLOG: usize = 256;

type Frames = Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>;
type FloorBody = Either<Full<Bytes>, StreamBody<Frames>>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let mut addr = None;
    while let Some(arg) = argv.next() {
        if arg == "--addr" {
            addr = argv.next();
        }
    }
    let Some(addr) = addr else {
        println!("fanout_floor: the floor server of benches/fanout.sh, which runs it (nothing to do here)");
        return Ok(());
    };
    let listener = TcpListener::bind(addr.parse::<SocketAddr>()?).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let (updates, _) = broadcast::channel::<Bytes>(BACKLOG);
    loop {
        // SIGINT ends the process normally (a heap profiler writes its data).
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        // As the reference server: events are small and latency-sensitive.
        tcp.set_nodelay(true)?;
        let updates = updates.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, updates.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    updates: broadcast::Sender<Bytes>,
) -> Result<Response<FloorBody>, Infallible> {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let id = message["id"].to_string();
    let params = &message["params"];
    match message["method"].as_str() {
        Some("subscriptions/listen") => {
            let notifications = params["notifications"].to_string();
            Ok(listen(&id, &notifications, updates.subscribe()))
        }
        Some("tools/call") if params["name"] == "touch_resource" => {
            let uri = params["arguments"]["uri"].as_str().unwrap_or_default();
            let _ = updates.send(head(uri));
            Ok(touched(&id, uri))
        }
        _ => Ok(status(StatusCode::NOT_FOUND)),
    }
}

/// The update of `uri` up to the subscription id.
fn head(uri: &str) -> Bytes {
    let uri = serde_json::to_string(uri).expect("a string serializes");
    format!(
        r#"data: {{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":{uri},"_meta":{{"{SUBSCRIPTION_ID}":"#
    )
    .into()
}

/// The listen stream of subscription `id`: its acknowledgment, then every update.
fn listen(
    id: &str,
    notifications: &str,
    updates: broadcast::Receiver<Bytes>,
) -> Response<FloorBody> {
    let ack = format!(
        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{{\"notifications\":{notifications},\"_meta\":{{\"{SUBSCRIPTION_ID}\":{id}}}}}}}\n\n"
    );
    let tag: Box<[u8]> = [id.as_bytes(), TAIL].concat().into();
    let events = stream::unfold((updates, tag), |(mut updates, tag)| async move {
        loop {
            match updates.recv().await {
                Ok(head) => {
                    let mut event = BytesMut::with_capacity(head.len() + tag.len());
                    event.extend_from_slice(&head);
                    event.extend_from_slice(&tag);
                    return Some((Ok(Frame::data(event.freeze())), (updates, tag)));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let frames = stream::once(ready(Ok(Frame::data(Bytes::from(ack))))).chain(events);
    sse(Box::pin(frames))
}

/// rmcp's answer to `touch_resource` of `uri`, request `id`: one SSE event,
/// chunked.
fn touched(id: &str, uri: &str) -> Response<FloorBody> {
    let text = serde_json::to_string(&format!("{uri} touched")).expect("a string serializes");
    let event = format!(
        r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","content":[{{"type":"text","text":{text}}}],"isError":false}}}}"#
    ) + "\n\n";
    let frames = stream::once(ready(Ok(Frame::data(Bytes::from(event)))));
    let mut response = sse(Box::pin(frames));
    let headers = response.headers_mut();
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// An SSE answer of `frames`, with the headers both of the reference
/// server's SSE answers carry.
fn sse(frames: Frames) -> Response<FloorBody> {
    let mut response = Response::new(Either::Right(StreamBody::new(frames)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn status(status: StatusCode) -> Response<FloorBody> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::new())));
    *response.status_mut() = status;
    response
}
