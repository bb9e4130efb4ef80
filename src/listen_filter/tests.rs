//! The listen filter end to end: a profile like a real server's, an auth
//! layer in front, and an inner service that echoes what it received.

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

// ---------------------------------------------------------------------------
// 1. Every filter rule, end to end.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn every_rule_end_to_end_for_alice() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"toolsListChanged":true,"promptsListChanged":false,"resourcesListChanged":true,"resourceSubscriptions":["{ALICE_NOTES}","{README}","{BOB_NOTES}","{UNKNOWN}","{LOGO}","{README}","{NEWS}"],"taskIds":["task-alice-1","task-bob-1","task-ghost","task-alice-1"],"futureField":{{"x":[1]}}}}"#
    );
    let honoured = format!(
        r#"{{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["{ALICE_NOTES}","{README}","{NEWS}"],"taskIds":["task-alice-1"]}}"#
    );
    let request = listen_request(Some("alice-token"), "7", &requested);
    let response = run(layer(), &inner, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let stream = text(response).await;

    // The client: the first event is the honoured ack, tagged with the request id.
    let first = &messages(&stream)[0];
    assert_eq!(first["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(first["params"]["notifications"], value(&honoured));
    assert_eq!(first["params"]["_meta"][SUBSCRIPTION_ID], json!(7));
    assert_eq!(
        stream,
        ack_event("7", &honoured),
        "the inner's ack passes byte for byte"
    );

    // The inner service: the body with `params.notifications` = the ack, the rest unchanged.
    let received = inner.last();
    assert_eq!(received.text(), listen_body("7", &honoured));
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        received.body.len().to_string().as_str()
    );
    assert_eq!(received.headers["mcp-method"], "subscriptions/listen");

    // The extension.
    let filter = received.filter();
    assert_eq!(filter.ack().get(), honoured);
    assert_eq!(filter.subscription_id().get(), "7");
    let alice = Principal::new("alice");
    assert_eq!(
        filter.topics(),
        [
            Topic::List(ListChanged::Tools),
            Topic::List(ListChanged::Resources),
            Topic::Resource(ALICE_NOTES.into()),
            Topic::Resource(README.into()),
            Topic::Resource(NEWS.into()),
            Topic::Task {
                owner: alice,
                id: "task-alice-1".into()
            },
        ]
    );
    assert_eq!(
        filter.kinds().iter().collect::<Vec<_>>(),
        [
            Kind::ToolsListChanged,
            Kind::ResourcesListChanged,
            Kind::ResourceSubscriptions,
            Kind::TaskIds
        ]
    );
    assert_eq!(filter.requested_uris(), 7);
    assert_eq!(filter.requested_task_ids(), 4);
}

#[tokio::test]
async fn ack_keeps_request_order() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"taskIds":["task-bob-1"],"resourceSubscriptions":["{BOB_NOTES}"],"promptsListChanged":true,"toolsListChanged":true}}"#
    );
    let honoured = format!(
        r#"{{"taskIds":["task-bob-1"],"resourceSubscriptions":["{BOB_NOTES}"],"promptsListChanged":true,"toolsListChanged":true}}"#
    );
    let response = run(
        layer(),
        &inner,
        listen_request(Some("bob-token"), r#""b""#, &requested),
    )
    .await;
    assert_eq!(text(response).await, ack_event(r#""b""#, &honoured));
    assert_eq!(inner.last().filter().ack().get(), honoured);
}

#[tokio::test]
async fn nothing_honoured_is_an_empty_ack() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"toolsListChanged":false,"resourceSubscriptions":["{UNKNOWN}","{LOGO}","{BOB_NOTES}"],"taskIds":["task-bob-1","task-ghost"],"somethingNew":true}}"#
    );
    let response = run(
        layer(),
        &inner,
        listen_request(Some("alice-token"), "1", &requested),
    )
    .await;
    assert_eq!(text(response).await, ack_event("1", "{}"));
    let received = inner.last();
    assert_eq!(received.text(), listen_body("1", "{}"));
    assert_eq!(received.filter().ack().get(), "{}");
    assert!(received.filter().topics().is_empty());
    assert!(received.filter().kinds().is_empty());
}

#[tokio::test]
async fn capabilities_the_server_lacks_are_not_honoured() {
    // Tools only, tasks off: no prompts, no resources, no task ids (and no -32021 for them).
    let profile = ServerProfile::builder()
        .base_capabilities(json!({"tools": {}}))
        .build()
        .unwrap();
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"promptsListChanged":true,"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["{README}"],"taskIds":["task-alice-1"]}}"#
    );
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{requested}}}}}"#
    );
    let request = post(Some("subscriptions/listen"), Some("alice-token"), body);
    let response = run(ListenFilterLayer::new(profile), &inner, request).await;
    assert_eq!(
        text(response).await,
        ack_event("2", r#"{"toolsListChanged":true}"#)
    );
    assert_eq!(
        inner.last().filter().topics(),
        [Topic::List(ListChanged::Tools)]
    );
}

#[tokio::test]
async fn every_byte_outside_the_notifications_is_kept() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested =
        format!(r#"{{ "toolsListChanged" : true, "resourceSubscriptions" : [ "{BOB_NOTES}" ] }}"#);
    let honoured = r#"{"toolsListChanged":true}"#;
    let template = "{ \"jsonrpc\" : \"2.0\",\n\t\"id\" : \"sub-\\u0031\" ,\"method\":\"subscriptions\\/listen\",\n\
        \"params\" : { \"_meta\" : { \"progressToken\" : 1.50, \"x\" : \"\\u00e9\\n\" } ,\"notifications\" : NOTIFICATIONS , \"cursor\" : null },\n\
        \"x-vendor\" : [ 1, {\"a\" : \"}\"} ] }\r\n";
    let original = template.replace("NOTIFICATIONS", &requested);
    let expected = template.replace("NOTIFICATIONS", honoured);
    let mut request = post(None, Some("alice-token"), original.clone());
    request
        .headers_mut()
        .insert(header::CONTENT_LENGTH, original.len().into());
    let response = run(layer(), &inner, request).await;
    let stream = text(response).await;
    assert_eq!(
        messages(&stream)[0]["params"]["notifications"],
        value(honoured)
    );
    assert_eq!(
        messages(&stream)[0]["params"]["_meta"][SUBSCRIPTION_ID],
        "sub-1"
    );

    let received = inner.last();
    assert_eq!(received.text(), expected);
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        expected.len().to_string().as_str()
    );
    assert_ne!(expected.len(), original.len());
    assert_eq!(
        received.filter().subscription_id().get(),
        r#""sub-\u0031""#,
        "the id is kept as written"
    );
}

#[tokio::test]
async fn chunked_listen_gets_a_content_length() {
    let inner = Inner::new(echo_ack(vec![]));
    let body = listen_body(
        "3",
        r#"{"toolsListChanged":true,"promptsListChanged":false}"#,
    );
    let chunks: Vec<Result<Bytes, Infallible>> = body
        .as_bytes()
        .chunks(5)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .unwrap();
    let response = run(layer(), &inner, request).await;
    assert_eq!(
        text(response).await,
        ack_event("3", r#"{"toolsListChanged":true}"#)
    );
    let received = inner.last();
    assert_eq!(
        received.text(),
        listen_body("3", r#"{"toolsListChanged":true}"#)
    );
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        received.body.len().to_string().as_str()
    );
    assert!(received.headers.get(header::TRANSFER_ENCODING).is_none());
}

// ---------------------------------------------------------------------------
// 2. Error paths: answered by the layer, the inner service never called.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn params_not_an_object() {
    let body = r#"{"jsonrpc":"2.0","id":11,"method":"subscriptions/listen","params":[]}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(11)).await;
    assert_eq!(
        body["error"]["message"],
        "`params` must be an object, got an array"
    );
    assert_eq!(
        rejection,
        Rejection::Listen(ListenError::InvalidParams(
            "`params` must be an object, got an array".into()
        ))
    );

    let body = r#"{"jsonrpc":"2.0","id":"n","method":"subscriptions/listen","params":{"notifications":"all"}}"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!("n")).await;
    assert_eq!(
        body["error"]["message"],
        "`params.notifications` must be an object, got a string"
    );

    let body = r#"{"jsonrpc":"2.0","id":"p","method":"subscriptions/listen"}"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!("p")).await;
    assert_eq!(body["error"]["message"], "`params` is required");
}

#[tokio::test]
async fn wrong_typed_fields_are_named() {
    for (notifications, message) in [
        (r#"{"toolsListChanged":"yes"}"#, "`notifications.toolsListChanged` must be a boolean, got a string"),
        (r#"{"resourcesListChanged":null}"#, "`notifications.resourcesListChanged` must be a boolean, got null"),
        (
            r#"{"resourceSubscriptions":"demo://public/readme"}"#,
            "`notifications.resourceSubscriptions` must be an array of strings, got a string",
        ),
        (
            r#"{"resourceSubscriptions":["demo://public/readme",3]}"#,
            "`notifications.resourceSubscriptions` must be an array of strings, got a number at index 1",
        ),
        (r#"{"taskIds":[true]}"#, "`notifications.taskIds` must be an array of strings, got a boolean at index 0"),
    ] {
        let response = run_refused(layer(), listen_request(Some("alice-token"), "5", notifications)).await;
        let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(5)).await;
        assert_eq!(body["error"]["message"], message);
        assert_eq!(rejection, Rejection::Listen(ListenError::InvalidParams(message.into())));
    }
}

#[tokio::test]
async fn too_many_uris_or_task_ids() {
    let layer = ListenFilterLayer::new(builder().max_uris(2).max_task_ids(1).build().unwrap());
    let notifications = format!(r#"{{"resourceSubscriptions":["{README}","{NEWS}","{README}"]}}"#);
    let response = run_refused(layer.clone(), listen_request(None, "6", &notifications)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(6)).await;
    assert_eq!(
        body["error"]["message"],
        "`notifications.resourceSubscriptions` lists 3 URIs; at most 2 are allowed"
    );

    let response = run_refused(layer, listen_request(None, "6", r#"{"taskIds":["a","b"]}"#)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(6)).await;
    assert_eq!(
        body["error"]["message"],
        "`notifications.taskIds` lists 2 task ids; at most 1 are allowed"
    );
}

#[tokio::test]
async fn task_ids_need_the_tasks_extension() {
    for meta in [
        String::new(),
        r#""_meta":{},"#.to_owned(),
        r#""_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"other/ext":{}}}},"#.to_owned(),
        r#""_meta":{"io.modelcontextprotocol/clientCapabilities":{}},"#.to_owned(),
    ] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"t","method":"subscriptions/listen","params":{{{meta}"notifications":{{"taskIds":["task-alice-1"]}}}}}}"#
        );
        let response = run_refused(layer(), post(Some("subscriptions/listen"), Some("alice-token"), body)).await;
        let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32021, json!("t")).await;
        assert_eq!(
            body["error"]["data"],
            json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
        );
        assert_eq!(rejection, Rejection::Listen(ListenError::MissingTasksCapability));
    }
}

#[tokio::test]
async fn unreadable_uris_refused_by_policy_name_no_uri() {
    let layer = ListenFilterLayer::new(
        builder()
            .unreadable_uris(UnreadableUris::Refuse)
            .build()
            .unwrap(),
    );
    let notifications = format!(r#"{{"resourceSubscriptions":["{README}","{ALICE_NOTES}"]}}"#);
    let response = run_refused(
        layer,
        listen_request(Some("bob-token"), "8", &notifications),
    )
    .await;
    let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(8)).await;
    assert!(!body.to_string().contains("demo://"), "{body}");
    assert_eq!(
        rejection,
        Rejection::Listen(ListenError::UnreadableResource)
    );
}

#[tokio::test]
async fn duplicate_params() {
    let body = r#"{"jsonrpc":"2.0","id":12,"method":"subscriptions/listen","params":{"notifications":{}},"params":{"notifications":{"toolsListChanged":true}}}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(12)).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the request has more than one `params`")
    );
}

#[tokio::test]
async fn duplicate_method_listen_first() {
    let body = r#"{"jsonrpc":"2.0","id":13,"method":"subscriptions/listen","params":{"notifications":{}},"method":"tools/call"}"#;
    for named in [Some("subscriptions/listen"), None] {
        let response = run_refused(layer(), post(named, None, body)).await;
        let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(13)).await;
        assert_eq!(
            rejection,
            Rejection::InvalidRequest("the request has more than one `method`")
        );
    }
}

/// A server that reads the body into a `serde_json::Value` (last member wins,
/// as `axum::Json<Value>` does) would take this for an unfiltered listen.
#[tokio::test]
async fn duplicate_method_listen_last() {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":["{ALICE_NOTES}"]}}}}}}"#
    );
    assert_eq!(
        value(&body)["method"],
        "subscriptions/listen",
        "serde_json::Value keeps the last `method`"
    );
    for named in [None, Some("tools/call")] {
        let response = run_refused(layer(), post(named, Some("bob-token"), body.clone())).await;
        let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(14)).await;
        assert_eq!(
            rejection,
            Rejection::InvalidRequest("the request has more than one `method`")
        );
    }
}

/// Switched off, the scan of other bodies no longer catches a later `method`:
/// the inner service must reject duplicate members itself.
#[tokio::test]
async fn a_later_method_passes_when_the_scan_is_off() {
    let body = r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{},"method":"x"}"#;
    let inner = Inner::new(json_reply());
    let response = run(
        layer().scan_pass_through(false),
        &inner,
        post(None, None, body),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(inner.last().text(), body);
    // On by default: a body read whole is refused.
    let response = run_refused(layer(), post(None, None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(15)).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the request has more than one `method`")
    );
}

#[tokio::test]
async fn batch_with_a_listen() {
    let body = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}]"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("a batch must not contain a listen request")
    );

    // Named a listen, a batch disagrees with its header.
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32020, Value::Null).await;
    assert_eq!(rejection, Rejection::HeaderMismatch);

    // A batch without a listen passes untouched.
    let inner = Inner::new(json_reply());
    let body = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    let response = run(layer(), &inner, post(None, None, body)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(inner.last().text(), body);
    assert!(inner.last().filter.is_none());
}

#[tokio::test]
async fn invalid_json_named_listen() {
    for body in [
        "not json at all",
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}},}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}} trailing"#,
        "",
    ] {
        let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
        let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32700, Value::Null).await;
        assert_eq!(rejection, Rejection::Parse, "{body}");
    }
}

#[tokio::test]
async fn listen_without_a_usable_id() {
    let body = r#"{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("a listen request needs an id")
    );

    let body = r#"{"jsonrpc":"2.0","id":null,"method":"subscriptions/listen","params":{"notifications":{}}}"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the id of a listen request must be a string or a number")
    );
}

#[tokio::test]
async fn compressed_listen_is_refused() {
    let mut request = listen_request(None, "1", r#"{"toolsListChanged":true}"#);
    request
        .headers_mut()
        .insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
    let response = run_refused(layer(), request).await;
    let (_, rejection) = refusal(
        response,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        -32600,
        Value::Null,
    )
    .await;
    assert_eq!(rejection, Rejection::Encoded);
}

// ---------------------------------------------------------------------------
// 3. Disguises: header and body disagree about a listen.
// ---------------------------------------------------------------------------

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
    let response = run(layer(), &inner, post(None, Some("bob-token"), body)).await;
    assert_eq!(text(response).await, ack_event("1", "{}"));
    let received = inner.last();
    assert_eq!(
        received.text(),
        r#"{"jsonrpc":"2.0","id":1,"m\u0065thod":"subscriptions\u002flisten","params":{"notific\u0061tions":{}}}"#
    );
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

// ---------------------------------------------------------------------------
// 4. Body limits.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 5. Per caller, behind the auth layer.
// ---------------------------------------------------------------------------

async fn ack_for(token: Option<&str>, notifications: &str) -> String {
    let inner = Inner::new(echo_ack(vec![]));
    let response = run(layer(), &inner, listen_request(token, "1", notifications)).await;
    let stream = text(response).await;
    let ack = inner.last().filter().ack().get().to_owned();
    assert_eq!(
        stream,
        ack_event("1", &ack),
        "the client sees the ack the inner service got"
    );
    assert_eq!(inner.last().text(), listen_body("1", &ack));
    ack
}

#[tokio::test]
async fn resources_per_caller() {
    let asked = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{README}"]}}"#);
    assert_eq!(
        ack_for(Some("alice-token"), &asked).await,
        format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{README}"]}}"#)
    );
    let for_bob = ack_for(Some("bob-token"), &asked).await;
    assert_eq!(
        for_bob,
        format!(r#"{{"resourceSubscriptions":["{README}"]}}"#)
    );
    // Bob cannot tell alice's notes exist: his ack is the one he gets without them.
    let without = ack_for(
        Some("bob-token"),
        &format!(r#"{{"resourceSubscriptions":["{README}"]}}"#),
    )
    .await;
    assert_eq!(for_bob, without);
    let with_unknown = ack_for(
        Some("bob-token"),
        &format!(r#"{{"resourceSubscriptions":["{UNKNOWN}","{README}"]}}"#),
    )
    .await;
    assert_eq!(for_bob, with_unknown);

    let all = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{BOB_NOTES}","{NEWS}"]}}"#);
    assert_eq!(
        ack_for(None, &all).await,
        format!(r#"{{"resourceSubscriptions":["{NEWS}"]}}"#)
    );
    assert_eq!(
        ack_for(Some("mallory-token"), &all).await,
        format!(r#"{{"resourceSubscriptions":["{NEWS}"]}}"#)
    );
    assert_eq!(
        ack_for(
            None,
            &format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}"]}}"#)
        )
        .await,
        "{}"
    );
}

#[tokio::test]
async fn tasks_per_caller() {
    let asked = r#"{"taskIds":["task-alice-1","task-bob-1","task-ghost"]}"#;
    assert_eq!(
        ack_for(Some("alice-token"), asked).await,
        r#"{"taskIds":["task-alice-1"]}"#
    );
    assert_eq!(
        ack_for(Some("bob-token"), asked).await,
        r#"{"taskIds":["task-bob-1"]}"#
    );
    // A foreign task and an unknown one are dropped alike.
    let foreign = ack_for(Some("alice-token"), r#"{"taskIds":["task-bob-1"]}"#).await;
    let unknown = ack_for(Some("alice-token"), r#"{"taskIds":["task-ghost"]}"#).await;
    assert_eq!(foreign, "{}");
    assert_eq!(foreign, unknown);
    // An anonymous caller owns no task.
    assert_eq!(ack_for(None, asked).await, "{}");
}

// ---------------------------------------------------------------------------
// 6. Everything else passes.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 7. The stream guard.
// ---------------------------------------------------------------------------

const ANONYMOUS_ASK: &str = r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme","demo://users/bob/notes"]}"#;
const ANONYMOUS_ACK: &str =
    r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme"]}"#;

#[tokio::test]
async fn guard_narrows_a_wide_ack() {
    let wide = r#"{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["demo://public/readme","demo://users/bob/notes"]}"#;
    let events = [
        format!("event: message\nid: 1\ndata: {}\n\n", ack_data("7", wide)),
        note("notifications/tools/list_changed", "7", ""),
    ];
    let inner = Inner::new(Arc::new(move |_: &Received| {
        let mut response = sse_response(events.iter().cloned().map(Bytes::from).collect());
        let length = events.concat().len();
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, length.into());
        response
    }));
    let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
    assert!(
        response.headers().get(header::CONTENT_LENGTH).is_none(),
        "a guarded stream has no fixed length"
    );
    let stream = text(response).await;
    assert_eq!(
        stream,
        format!(
            "event: message\nid: 1\ndata: {}\n\n",
            ack_data("7", ANONYMOUS_ACK)
        ) + &note("notifications/tools/list_changed", "7", "")
    );
}

/// The guard narrows; it must not widen an ack the inner service narrowed further.
#[tokio::test]
async fn guard_never_widens_the_inner_ack() {
    let narrower = r#"{"toolsListChanged":true}"#;
    let inner = Inner::new(fixed(vec![ack_event("7", narrower)]));
    let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
    let stream = text(response).await;
    assert_eq!(
        messages(&stream)[0]["params"]["notifications"],
        value(narrower),
        "{stream}"
    );
}

#[tokio::test]
async fn guard_sends_a_missing_ack_first() {
    let notification = note("notifications/tools/list_changed", r#""s""#, "");
    let inner = Inner::new(fixed(vec![": hello\n\n".into(), notification.clone()]));
    let response = run(
        layer(),
        &inner,
        listen_request(None, r#""s""#, ANONYMOUS_ASK),
    )
    .await;
    let stream = text(response).await;
    assert!(stream.starts_with(": hello\n\n"), "{stream}");
    let messages = messages(&stream);
    assert_eq!(messages.len(), 2, "{stream}");
    assert_eq!(messages[0]["jsonrpc"], "2.0");
    assert_eq!(
        messages[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(messages[0]["params"]["notifications"], value(ANONYMOUS_ACK));
    assert_eq!(messages[0]["params"]["_meta"][SUBSCRIPTION_ID], "s");
    assert!(
        stream.ends_with(&notification),
        "the notification passes byte for byte: {stream}"
    );
}

/// Alice listens to prompts, the readme and her task; the inner leaks everything else.
fn leaky_stream() -> (String, Vec<String>, String) {
    let ask = format!(
        r#"{{"promptsListChanged":true,"resourceSubscriptions":["{README}","{BOB_NOTES}"],"taskIds":["task-alice-1","task-bob-1"]}}"#
    );
    let ack = format!(
        r#"{{"promptsListChanged":true,"resourceSubscriptions":["{README}"],"taskIds":["task-alice-1"]}}"#
    );
    let readme = format!(r#""uri":"{README}""#);
    let events = vec![
        // 0: the inner's own ack, already the honoured one.
        ack_event("7", &ack),
        // 1: keep-alive.
        ": keep-alive\n\n".to_owned(),
        // 2: leak: a URI alice did not get.
        note(
            "notifications/resources/updated",
            "7",
            &format!(r#""uri":"{BOB_NOTES}""#),
        ),
        // 3: honoured, with an id line and CRLF line ends.
        format!(
            "id: 42\r\n{}\r\n\r\n",
            note("notifications/resources/updated", "7", &readme)
                .trim_end()
                .replace('\n', "\r\n")
        ),
        // 4: leak: bob's task.
        note(
            "notifications/tasks",
            "7",
            r#""taskId":"task-bob-1","status":"completed""#,
        ),
        // 5: honoured task.
        note(
            "notifications/tasks",
            "7",
            r#""taskId":"task-alice-1","status":"working""#,
        ),
        // 6: leak: not requested.
        note("notifications/tools/list_changed", "7", ""),
        // 7: honoured.
        note("notifications/prompts/list_changed", "7", ""),
        // 8: leak: another subscription's.
        note("notifications/resources/updated", "8", &readme),
        // 9: leak: resources list changes were not requested.
        note("notifications/resources/list_changed", "7", ""),
        // 10: leak: a response to another request.
        "data: {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n\n".to_owned(),
        // 11: the listen's own response (graceful close).
        "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n".to_owned(),
    ];
    let kept = [0, 1, 3, 5, 7, 11]
        .iter()
        .map(|i| events[*i].as_str())
        .collect::<String>();
    (ask, events, kept)
}

#[tokio::test]
async fn guard_drops_leaks_and_keeps_the_rest_byte_for_byte() {
    let (ask, events, kept) = leaky_stream();
    let inner = Inner::new(fixed(events));
    let response = run(
        layer(),
        &inner,
        listen_request(Some("alice-token"), "7", &ask),
    )
    .await;
    assert_eq!(text(response).await, kept);
}

#[tokio::test]
async fn guard_at_every_chunk_size() {
    let (ask, events, kept) = leaky_stream();
    let total = events.concat().len();
    for size in (1..=64).chain([100, 333, total]) {
        let inner = Inner::new(split(&events, size));
        let response = run(
            layer(),
            &inner,
            listen_request(Some("alice-token"), "7", &ask),
        )
        .await;
        assert_eq!(text(response).await, kept, "chunks of {size} bytes");
    }
}

#[tokio::test]
async fn guard_sub_resource_rule() {
    let updated = |uri: &str| {
        note(
            "notifications/resources/updated",
            "7",
            &format!(r#""uri":"{uri}""#),
        )
    };
    let ask = format!(r#"{{"resourceSubscriptions":["{README}"]}}"#);
    let events = vec![
        ack_event("7", &ask),
        updated("demo://public/readme/part"),
        updated("demo://public/readme2"),
        updated("demo://public/readme"),
        updated("demo://public"),
    ];
    let inner = Inner::new(fixed(events.clone()));
    let response = run(layer(), &inner, listen_request(None, "7", &ask)).await;
    assert_eq!(
        text(response).await,
        [&*events[0], &*events[1], &*events[3]].concat()
    );
}

#[tokio::test]
async fn guard_switched_off_passes_the_stream_unchanged() {
    let (ask, events, _) = leaky_stream();
    // No ack first and every leak: all of it arrives.
    let events = events[1..].to_vec();
    let inner = Inner::new(fixed(events.clone()));
    let response = run(
        layer().guard_stream(false),
        &inner,
        listen_request(Some("alice-token"), "7", &ask),
    )
    .await;
    assert_eq!(text(response).await, events.concat());
    // The request side still honours.
    assert_eq!(
        inner.last().filter().ack().get(),
        format!(
            r#"{{"promptsListChanged":true,"resourceSubscriptions":["{README}"],"taskIds":["task-alice-1"]}}"#
        )
    );
}

#[tokio::test]
async fn json_answer_to_a_listen_passes() {
    let answer = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#;
    let inner = Inner::new(Arc::new(move |_: &Received| {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(answer))
            .unwrap()
    }));
    let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(text(response).await, answer);
}

// ---------------------------------------------------------------------------
// 8. A client that goes away drops the inner stream.
// ---------------------------------------------------------------------------

struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn client_disconnect_drops_the_inner_stream() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let producer = Arc::new(Mutex::new(None::<tokio::task::JoinHandle<usize>>));
    let (count, slot) = (dropped.clone(), producer.clone());
    let inner = Inner::new(Arc::new(move |received: &Received| {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let ack = ack_event("9", received.filter().ack().get());
        // Sends forever, until the stream is gone; returns how many it sent.
        let task = tokio::spawn(async move {
            let mut sent = 0;
            if tx.send(Bytes::from(ack)).await.is_err() {
                return sent;
            }
            loop {
                let event = note("notifications/tools/list_changed", "9", "");
                if tx.send(Bytes::from(event)).await.is_err() {
                    return sent;
                }
                sent += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        *slot.lock().unwrap() = Some(task);
        let guard = CountDrop(count.clone());
        let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
            let chunk = rx.recv().await?;
            Some((Ok::<_, Infallible>(chunk), (rx, guard)))
        });
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap()
    }));
    let response = run(
        layer(),
        &inner,
        listen_request(None, "9", r#"{"toolsListChanged":true}"#),
    )
    .await;
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, ack_event("9", r#"{"toolsListChanged":true}"#));
    let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(second, note("notifications/tools/list_changed", "9", ""));
    assert_eq!(dropped.load(Ordering::SeqCst), 0);

    drop(body);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the inner stream is dropped with the response body"
    );
    let task = producer.lock().unwrap().take().unwrap();
    let sent = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the producer stops once the stream is gone")
        .unwrap();
    assert!(sent >= 1);
}

// ---------------------------------------------------------------------------
// 9. Plumbing.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 8. Every other event stream: resource updates only for what the caller reads.
// ---------------------------------------------------------------------------

fn updated(uri: &str) -> String {
    format!(
        r#"data: {{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{uri}"}}}}"#
    ) + "\n\n"
}

fn get_stream(token: Option<&str>) -> Request<Body> {
    let mut request = Request::get("/mcp").header(header::ACCEPT, "text/event-stream");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request.body(Body::empty()).unwrap()
}

/// A leaky legacy stream, and what of it reaches anonymous callers, bob and alice.
fn leaky_legacy_stream() -> (Vec<String>, [String; 3]) {
    let answer =
        r#"data: {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a\\nb"}]}}"#
            .to_owned()
            + "\n\n";
    let log = r#"data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"notifications/resources/updated"}}"#.to_owned() + "\n\n";
    let escaped_bob = format!(
        r#"data: {{"method":"notifications\/resources\/updated","params":{{"uri":"{}"}}}}"#,
        BOB_NOTES.replace('/', "\\/")
    ) + "\n\n";
    let batch = format!(
        r#"data: [{{"method":"notifications/resources/updated","params":{{"uri":"{README}"}}}},{{"method":"notifications/resources/updated","params":{{"uri":"{ALICE_NOTES}"}}}}]"#
    ) + "\n\n";
    let unclear =
        r#"data: {"method":"notifications/resources/updated","params":{"uri":"a","uri":"b"}}"#
            .to_owned()
            + "\n\n";
    // CR line ends and an unknown field: written anew from what was parsed.
    let odd_alice = format!(
        "x-odd: 1\rdata: {{\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{ALICE_NOTES}\"}}}}\r\r"
    );
    let odd_alice_out = format!(
        "data: {{\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{ALICE_NOTES}\"}}}}\n\n"
    );
    let events = vec![
        ": keep-alive\n\n".to_owned(),
        "id: 0\nretry: 1000\ndata:\n\n".to_owned(),
        updated(README),
        updated(BOB_NOTES),
        answer.clone(),
        updated(ALICE_NOTES),
        log.clone(),
        escaped_bob.clone(),
        batch.clone(),
        unclear,
        odd_alice,
        updated(UNKNOWN),
        "data: {\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"tail"
            .to_owned(),
    ];
    let common = |mine: &[&str]| -> String {
        let mut out = vec![events[0].clone(), events[1].clone(), updated(README)];
        if mine.contains(&BOB_NOTES) {
            out.push(updated(BOB_NOTES));
        }
        out.push(answer.clone());
        if mine.contains(&ALICE_NOTES) {
            out.push(updated(ALICE_NOTES));
        }
        out.push(log.clone());
        if mine.contains(&BOB_NOTES) {
            out.push(escaped_bob.clone());
        }
        if mine.contains(&ALICE_NOTES) {
            out.push(batch.clone());
            out.push(odd_alice_out.clone());
        }
        out.concat()
    };
    let expected = [common(&[]), common(&[BOB_NOTES]), common(&[ALICE_NOTES])];
    (events, expected)
}

#[tokio::test]
async fn other_streams_drop_updates_the_caller_may_not_read_at_every_split() {
    let (events, expected) = leaky_legacy_stream();
    let total = events.concat().len();
    for (token, expected) in [None, Some("bob-token"), Some("alice-token")]
        .into_iter()
        .zip(&expected)
    {
        for size in 1..=total {
            let inner = Inner::new(split(&events, size));
            let response = run(layer(), &inner, get_stream(token)).await;
            assert_eq!(
                &text(response).await,
                expected,
                "{token:?}, chunks of {size}"
            );
        }
    }
}

#[tokio::test]
async fn other_streams_are_screened_alike_cut_anywhere_in_two() {
    let (events, expected) = leaky_legacy_stream();
    let all = Bytes::from(events.concat());
    for at in 0..=all.len() {
        let (head, tail) = (all.slice(..at), all.slice(at..));
        let inner = Inner::new(Arc::new(move |_: &Received| {
            sse_response(vec![head.clone(), tail.clone()])
        }));
        let response = run(layer(), &inner, get_stream(Some("alice-token"))).await;
        assert_eq!(text(response).await, expected[2], "cut at {at}");
    }
}

#[tokio::test]
async fn the_sse_answer_of_a_post_is_screened_too() {
    let answer = r#"data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.to_owned() + "\n\n";
    let events = vec![updated(BOB_NOTES), updated(README), answer.clone()];
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
    let inner = Inner::new(fixed(events));
    let response = run(layer(), &inner, post(None, Some("alice-token"), call)).await;
    assert_eq!(text(response).await, updated(README) + &answer);

    // The answer to a checked `resources/subscribe` as well.
    let subscribe = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{{"uri":"{ALICE_NOTES}"}}}}"#
    );
    let answer = r#"data: {"jsonrpc":"2.0","id":2,"result":{}}"#.to_owned() + "\n\n";
    let inner = Inner::new(fixed(vec![updated(BOB_NOTES), answer.clone()]));
    let response = run(layer(), &inner, post(None, Some("alice-token"), subscribe)).await;
    assert_eq!(text(response).await, answer);
}

#[tokio::test]
async fn unscreened_streams_pass_untouched() {
    let (events, _) = leaky_legacy_stream();
    // Switched off.
    let inner = Inner::new(fixed(events.clone()));
    let response = run(layer().check_updates(false), &inner, get_stream(None)).await;
    assert_eq!(text(response).await, events.concat());
    // No access hook: every URI is everyone's.
    let open = ListenFilterLayer::new(ServerProfile::builder().build().unwrap());
    let inner = Inner::new(fixed(events.clone()));
    let response = run(open, &inner, get_stream(None)).await;
    assert_eq!(text(response).await, events.concat());
    // An unguarded listen's stream is the inner's.
    let inner = Inner::new(fixed(events.clone()));
    let request = listen_request(None, "7", ANONYMOUS_ASK);
    let response = run(layer().guard_stream(false), &inner, request).await;
    assert_eq!(text(response).await, events.concat());
}

#[tokio::test]
async fn a_compressed_stream_is_replaced() {
    let inner = Inner::new(Arc::new(|_: &Received| {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CONTENT_ENCODING, "gzip")
            .body(Body::from(updated(BOB_NOTES)))
            .unwrap()
    }));
    let response = run(layer(), &inner, get_stream(None)).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let answer = value(&text(response).await);
    assert_eq!(answer["id"], Value::Null);
    assert_eq!(answer["error"]["code"], -32603);
}

/// A profile whose access hook counts its calls, answers a moment later,
/// and reads who may read what from `grants`.
fn counted_profile(
    ttl: Duration,
    grants: Arc<Mutex<Vec<(&'static str, &'static str)>>>,
) -> (ServerProfile, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let profile = ServerProfile::builder()
        .access_ttl(ttl)
        .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
            counted.fetch_add(1, Ordering::SeqCst);
            let name = caller.map(|c| c.as_str().to_owned());
            let grants = grants.lock().unwrap().clone();
            let uris: Vec<String> = uris.iter().map(|uri| uri.to_string()).collect();
            async move {
                tokio::task::yield_now().await;
                uris.iter()
                    .map(|uri| {
                        grants
                            .iter()
                            .any(|(who, what)| Some(*who) == name.as_deref() && what == uri)
                    })
                    .collect()
            }
        })
        .build()
        .unwrap();
    (profile, calls)
}

#[tokio::test]
async fn the_hook_is_asked_once_per_caller_and_uri_within_the_ttl() {
    let grants = Arc::new(Mutex::new(vec![("alice", ALICE_NOTES)]));
    let events = vec![
        updated(ALICE_NOTES),
        updated(BOB_NOTES),
        updated(ALICE_NOTES),
        updated(BOB_NOTES),
    ];
    let expected = updated(ALICE_NOTES).repeat(2);

    let (profile, calls) = counted_profile(Duration::from_secs(30), grants.clone());
    let inner = Inner::new(fixed(events.clone()));
    let layer = ListenFilterLayer::new(profile);
    let response = run(layer.clone(), &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Another stream of the same caller asks nothing; another caller asks.
    let response = run(layer.clone(), &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let response = run(layer.clone(), &inner, get_stream(Some("bob-token"))).await;
    assert_eq!(text(response).await, "");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // Within the TTL a revoked reader still hears what was decided.
    grants.lock().unwrap().clear();
    let response = run(layer, &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);

    // With no TTL every update asks, and a revocation holds at once.
    let (profile, calls) = counted_profile(Duration::ZERO, grants.clone());
    grants.lock().unwrap().push(("alice", ALICE_NOTES));
    let layer = ListenFilterLayer::new(profile);
    let response = run(layer.clone(), &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    grants.lock().unwrap().clear();
    let response = run(layer, &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, "");
}

#[tokio::test]
async fn a_checked_subscription_fills_the_cache() {
    let grants = Arc::new(Mutex::new(vec![("alice", ALICE_NOTES)]));
    let (profile, calls) = counted_profile(Duration::from_secs(30), grants);
    let layer = ListenFilterLayer::new(profile);
    let subscribe = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{{"uri":"{ALICE_NOTES}"}}}}"#
    );
    let inner = Inner::new(json_reply());
    run(
        layer.clone(),
        &inner,
        post(None, Some("alice-token"), subscribe),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let inner = Inner::new(fixed(vec![updated(ALICE_NOTES)]));
    let response = run(layer, &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, updated(ALICE_NOTES));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------
// 9. A stream the listen hub served is not read again.
// ---------------------------------------------------------------------------

/// The body the inner service answered with is this test's, for listen 7.
fn is_ours(body: &dyn std::any::Any, filter: &HonouredFilter) -> bool {
    body.is::<Body>() && filter.subscription_id().get() == "7"
}

fn is_not_ours(_: &dyn std::any::Any, _: &HonouredFilter) -> bool {
    false
}

/// The hub's mark spares the guard exactly when its test of the body says
/// so: the test is given the inner's body itself and the listen's filter.
#[tokio::test]
async fn a_mark_spares_the_guard_only_when_its_test_finds_the_body_its_own() {
    use crate::filter::stream::{BodyTest, Served};

    let leak = note(
        "notifications/resources/updated",
        "7",
        &format!(r#""uri":"{BOB_NOTES}""#),
    );
    let stream = ack_event("7", ANONYMOUS_ACK) + &leak;
    let tests: [(BodyTest, String); 2] = [
        (is_ours, stream.clone()),
        (is_not_ours, ack_event("7", ANONYMOUS_ACK)),
    ];
    for (test, expected) in tests {
        let body = stream.clone();
        let inner = Inner::new(Arc::new(move |_: &Received| {
            let mut response = sse_response(vec![Bytes::from(body.clone())]);
            response.extensions_mut().insert(Served::new(test));
            response
        }));
        let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
        assert_eq!(text(response).await, expected);
    }
}

// ---------------------------------------------------------------------------
// 10. URI spellings a client reads as another path: the guard and the screen.
// ---------------------------------------------------------------------------

/// A profile whose hook reads by prefix: everything below `file:///public/`.
fn prefix_layer() -> ListenFilterLayer {
    use crate::filter::stream::SPELLED_BELOW;
    let profile = ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, uris: &[&str]| {
            ready(
                uris.iter()
                    .map(|uri| uri.starts_with(SPELLED_BELOW))
                    .collect::<Vec<bool>>(),
            )
        })
        .build()
        .unwrap();
    ListenFilterLayer::new(profile)
}

/// `notifications/resources/updated` for `uri`, escaped as JSON needs.
fn updated_escaped(uri: &str) -> String {
    let message = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": uri}});
    format!("data: {message}\n\n")
}

/// Which of [`SPELLINGS`](crate::filter::stream::SPELLINGS) appear in `out`.
fn spellings_in(out: &str) -> Vec<&'static str> {
    use crate::filter::stream::SPELLINGS;
    SPELLINGS
        .iter()
        .map(|(spelling, _)| *spelling)
        .filter(|spelling| out.contains(&serde_json::to_string(spelling).unwrap()))
        .collect()
}

/// The spellings only a prefix vouches for, and what a client reads in
/// each, are below it.
fn plain_spellings() -> Vec<&'static str> {
    use crate::filter::stream::{resolves_elsewhere, SPELLED_BELOW, SPELLINGS};
    SPELLINGS
        .iter()
        .filter(|(spelling, read)| {
            !resolves_elsewhere(spelling.as_bytes()) && read.starts_with(SPELLED_BELOW)
        })
        .map(|(spelling, _)| *spelling)
        .collect()
}

#[tokio::test]
async fn the_guard_passes_below_a_prefix_only_what_a_client_reads_there() {
    use crate::filter::stream::SPELLINGS;

    let updates: Vec<String> = SPELLINGS.iter().map(|(s, _)| updated_escaped(s)).collect();
    let inner = Inner::new(echo_ack(updates));
    let ask = r#"{"resourceSubscriptions":["file:///public/"]}"#;
    let response = run(prefix_layer(), &inner, listen_request(None, "7", ask)).await;
    let out = text(response).await;
    assert_eq!(spellings_in(&out), plain_spellings(), "{out}");
    // Honoured exactly, an odd spelling is heard.
    let (odd, _) = SPELLINGS[0];
    let inner = Inner::new(echo_ack(vec![updated_escaped(odd)]));
    let ask = serde_json::json!({"resourceSubscriptions": [odd]}).to_string();
    let response = run(prefix_layer(), &inner, listen_request(None, "7", &ask)).await;
    assert_eq!(spellings_in(&text(response).await), [odd]);
}

#[tokio::test]
async fn the_screen_drops_what_a_client_could_read_as_another_path() {
    use crate::filter::stream::SPELLINGS;

    let updates: Vec<String> = SPELLINGS.iter().map(|(s, _)| updated_escaped(s)).collect();
    let inner = Inner::new(fixed(updates));
    let response = run(prefix_layer(), &inner, get_stream(None)).await;
    let out = text(response).await;
    assert_eq!(spellings_in(&out), plain_spellings(), "{out}");
}
