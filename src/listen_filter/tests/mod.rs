//! The listen filter end to end: a profile like a real server's, an auth
//! layer in front, and an inner service that echoes what it received.

mod client_gone;
mod disguise;
mod errors;
mod guard;
mod lifecycle;
mod limits;
mod passes;
mod per_caller;
mod plumbing;
mod rules;
mod screen;
mod served;
mod spellings;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use super::body::ResponseBody;
use super::future::ResponseFuture;
use super::layer::ListenFilterLayer;
use super::service::ListenFilter;
use crate::filter::{HonouredFilter, Kind, ListChanged, ListenError, Topic};
use crate::hooks::Principal;
use crate::http::body::RequestBody;
use crate::profile::{ServerProfile, ServerProfileBuilder, UnreadableUris};
use crate::rejection::Rejection;
use crate::testing::authenticate;

// ---------------------------------------------------------------------------
// The server: who may read what, which subscriptions it takes, who owns which task.
// ---------------------------------------------------------------------------

const README: &str = "demo://public/readme";
const NEWS: &str = "demo://public/news";
/// Public, but the subscription hook refuses it.
const LOGO: &str = "demo://public/static/logo";
const ALICE_NOTES: &str = "demo://users/alice/notes";
const BOB_NOTES: &str = "demo://users/bob/notes";
/// No such resource.
const UNKNOWN: &str = "demo://users/carol/notes";

const TASKS_META: &str = r#"{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn readable(caller: Option<&Principal>, uri: &str) -> bool {
    let name = caller.map(Principal::as_str);
    match uri {
        README | NEWS | LOGO => true,
        ALICE_NOTES => name == Some("alice"),
        BOB_NOTES => name == Some("bob"),
        _ => false,
    }
}

fn task_owner(task: &str) -> Option<&'static str> {
    match task {
        "task-alice-1" => Some("alice"),
        "task-bob-1" => Some("bob"),
        _ => None,
    }
}

fn builder() -> ServerProfileBuilder {
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
            ready(
                ids.iter()
                    .map(|id| task_owner(id) == Some(owner.as_str()))
                    .collect::<Vec<bool>>(),
            )
        })
}

fn profile() -> ServerProfile {
    builder().build().unwrap()
}

fn layer() -> ListenFilterLayer {
    ListenFilterLayer::new(profile())
}

// ---------------------------------------------------------------------------
// The inner service: records what it received, answers by a script.
// ---------------------------------------------------------------------------

/// What the inner service received.
#[derive(Clone)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
    filter: Option<HonouredFilter>,
}

impl Received {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    fn filter(&self) -> &HonouredFilter {
        self.filter
            .as_ref()
            .expect("the inner service got a HonouredFilter extension")
    }
}

type Reply = Arc<dyn Fn(&Received) -> Response<Body> + Send + Sync>;
type Handled = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

#[derive(Clone)]
struct Inner {
    seen: Arc<Mutex<Vec<Received>>>,
    reply: Reply,
}

impl Inner {
    fn new(reply: Reply) -> Self {
        Self {
            seen: Arc::default(),
            reply,
        }
    }

    /// The handler for `service_fn`.
    fn handler<B>(&self) -> impl Fn(Request<RequestBody<B>>) -> Handled + Clone
    where
        B: http_body::Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: fmt::Debug + Send,
    {
        let inner = self.clone();
        move |request: Request<RequestBody<B>>| -> Handled {
            let inner = inner.clone();
            Box::pin(async move {
                let (parts, body) = request.into_parts();
                let body = body
                    .collect()
                    .await
                    .expect("the request body reads")
                    .to_bytes();
                let received = Received {
                    filter: parts.extensions.get::<HonouredFilter>().cloned(),
                    headers: parts.headers,
                    body,
                };
                let response = (inner.reply)(&received);
                inner.seen.lock().unwrap().push(received);
                Ok(response)
            })
        }
    }

    fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn last(&self) -> Received {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the inner service was called")
    }
}

/// An inner service that must not be called.
fn never<B>(_: Request<RequestBody<B>>) -> Ready<Result<Response<Body>, Infallible>>
where
    B: http_body::Body,
{
    panic!("the inner service must not be called")
}

/// The raw JSON text at `path` inside `json`.
fn raw_at<'a>(json: &'a str, path: &[&str]) -> &'a str {
    let mut text = json;
    for key in path {
        let members: HashMap<String, &RawValue> = serde_json::from_str(text).unwrap();
        text = members
            .get(*key)
            .unwrap_or_else(|| panic!("no `{key}` in {text}"))
            .get();
    }
    text
}

fn ack_data(id: &str, notifications: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{notifications},"_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
    )
}

fn ack_event(id: &str, notifications: &str) -> String {
    format!("data: {}\n\n", ack_data(id, notifications))
}

/// The whole answer to listen `id` that honours nothing: its empty ack,
/// then its own answer, the stream's end.
fn ended_at_once(id: &str) -> String {
    let complete = format!(
        r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
    );
    ack_event(id, "{}") + &complete + "\n\n"
}

/// A notification event tagged with subscription `id`; `params` holds the other members.
fn note(method: &str, id: &str, params: &str) -> String {
    let comma = if params.is_empty() { "" } else { "," };
    format!(
        r#"data: {{"jsonrpc":"2.0","method":"{method}","params":{{{params}{comma}"_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
    ) + "\n\n"
}

fn sse_response(chunks: Vec<Bytes>) -> Response<Body> {
    let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Acknowledges exactly the `params.notifications` it received, tagged with the
/// request id, then sends `then`.
fn echo_ack(then: Vec<String>) -> Reply {
    Arc::new(move |received: &Received| {
        let id = raw_at(received.text(), &["id"]);
        let notifications = raw_at(received.text(), &["params", "notifications"]);
        let mut events = vec![Bytes::from(ack_event(id, notifications))];
        events.extend(then.iter().cloned().map(Bytes::from));
        sse_response(events)
    })
}

/// Sends `events` whatever it received, as one chunk each.
fn fixed(events: Vec<String>) -> Reply {
    Arc::new(move |_: &Received| sse_response(events.iter().cloned().map(Bytes::from).collect()))
}

/// Sends the concatenation of `events` in chunks of `size` bytes.
fn split(events: &[String], size: usize) -> Reply {
    let all = Bytes::from(events.concat());
    Arc::new(move |_: &Received| {
        sse_response(all.chunks(size).map(Bytes::copy_from_slice).collect())
    })
}

/// A JSON response, as to a `tools/call`.
fn json_reply() -> Reply {
    Arc::new(|_: &Received| {
        Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            ))
            .unwrap()
    })
}

// ---------------------------------------------------------------------------
// Requests and responses.
// ---------------------------------------------------------------------------

fn listen_body(id: &str, notifications: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"_meta":{TASKS_META},"notifications":{notifications}}}}}"#
    )
}

/// A POST of `body` with a JSON content type and its `Content-Length`.
fn post(mcp_method: Option<&str>, token: Option<&str>, body: impl Into<String>) -> Request<Body> {
    let body = body.into();
    let mut request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_LENGTH, body.len());
    if let Some(method) = mcp_method {
        request = request.header("mcp-method", method);
    }
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request.body(Body::from(body)).unwrap()
}

fn listen_request(token: Option<&str>, id: &str, notifications: &str) -> Request<Body> {
    post(
        Some("subscriptions/listen"),
        token,
        listen_body(id, notifications),
    )
}

/// Runs `request` through auth, the layer and `inner`.
async fn run(
    layer: ListenFilterLayer,
    inner: &Inner,
    request: Request<Body>,
) -> Response<ResponseBody<Body>> {
    ServiceBuilder::new()
        .map_request(authenticate)
        .layer(layer)
        .service_fn(inner.handler::<Body>())
        .oneshot(request)
        .await
        .unwrap()
}

/// Runs `request` through auth and the layer in front of an inner service that panics.
async fn run_refused(
    layer: ListenFilterLayer,
    request: Request<Body>,
) -> Response<ResponseBody<Body>> {
    ServiceBuilder::new()
        .map_request(authenticate)
        .layer(layer)
        .service_fn(never::<Body>)
        .oneshot(request)
        .await
        .unwrap()
}

async fn text<B>(response: Response<B>) -> String
where
    B: http_body::Body,
    B::Error: fmt::Debug,
{
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The JSON of each dispatched SSE message (blocks with data), in order.
fn messages(stream: &str) -> Vec<Value> {
    stream
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| data.strip_prefix(' ').unwrap_or(data))
                .collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).unwrap())
        })
        .collect()
}

fn value(json: &str) -> Value {
    serde_json::from_str(json).unwrap()
}

/// Checks a response the layer answered itself; returns its body and the typed rejection.
async fn refusal(
    response: Response<ResponseBody<Body>>,
    status: StatusCode,
    code: i64,
    id: Value,
) -> (Value, Rejection) {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let rejection = response
        .extensions()
        .get::<Rejection>()
        .cloned()
        .expect("the typed rejection is in the response extensions");
    let length = response.headers()[header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse::<usize>()
        .unwrap();
    let body = text(response).await;
    assert_eq!(length, body.len());
    let body = value(&body);
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    (body, rejection)
}

const ANONYMOUS_ASK: &str = r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme","demo://users/bob/notes"]}"#;

const ANONYMOUS_ACK: &str =
    r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme"]}"#;

fn get_stream(token: Option<&str>) -> Request<Body> {
    let mut request = Request::get("/mcp").header(header::ACCEPT, "text/event-stream");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request.body(Body::empty()).unwrap()
}
