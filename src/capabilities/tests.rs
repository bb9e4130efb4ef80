use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Ready;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Map, Value};
use tower::{Service, ServiceBuilder, ServiceExt};

use super::body::ResponseBody;
use super::layer::CapabilitiesLayer;
use super::service::Capabilities;
use crate::advertise::Era;
use crate::hooks::Principal;
use crate::http::body::RequestBody;
use crate::profile::ServerProfile;
use crate::rejection::Rejection;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A body of fixed frames that counts how many frames were pulled from it.
struct Counted {
    frames: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    pulled: Arc<AtomicUsize>,
}

impl Counted {
    fn new(frames: Vec<Bytes>) -> Self {
        Self {
            frames: frames.into(),
            trailers: None,
            pulled: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn one(data: &str) -> Self {
        Self::new(vec![Bytes::copy_from_slice(data.as_bytes())])
    }

    /// `data` in frames of `size` bytes.
    fn split(data: &[u8], size: usize) -> Self {
        Self::new(data.chunks(size).map(Bytes::copy_from_slice).collect())
    }
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(data) = self.frames.pop_front() else {
            return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))));
        };
        self.pulled.fetch_add(1, Ordering::SeqCst);
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

/// What the inner service answers with.
#[derive(Clone)]
struct Reply {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    chunks: Vec<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Reply {
    fn new(content_type: &'static str, body: &str) -> Self {
        Self {
            status: StatusCode::OK,
            headers: vec![
                (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
                (header::CONTENT_LENGTH, body.len().into()),
            ],
            chunks: vec![Bytes::copy_from_slice(body.as_bytes())],
            trailers: None,
        }
    }

    fn json(body: &str) -> Self {
        Self::new("application/json", body)
    }

    fn sse(body: &str) -> Self {
        Self::new("text/event-stream", body)
    }

    /// The same reply with its body in frames of `size` bytes.
    fn split(mut self, size: usize) -> Self {
        let all: Vec<u8> = self.chunks.concat();
        self.chunks = all.chunks(size).map(Bytes::copy_from_slice).collect();
        self
    }

    fn trailer(mut self, name: &'static str, value: &'static str) -> Self {
        self.trailers
            .get_or_insert_with(HeaderMap::new)
            .insert(name, HeaderValue::from_static(value));
        self
    }

    fn header(mut self, name: HeaderName, value: &'static str) -> Self {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }

    fn into_response(self) -> Response<Counted> {
        let mut body = Counted::new(self.chunks);
        body.trailers = self.trailers;
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        for (name, value) in self.headers {
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// What the inner service saw.
#[derive(Debug)]
struct Seen {
    method: http::Method,
    headers: HeaderMap,
    frames: Vec<Bytes>,
    /// Frames pulled from the original body before the inner service was called.
    pulled_at_call: usize,
}

impl Seen {
    fn body(&self) -> Vec<u8> {
        self.frames.concat()
    }
}

/// What the client got.
#[derive(Debug)]
struct Out {
    status: StatusCode,
    headers: HeaderMap,
    rejection: Option<Rejection>,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl Out {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn content_length(&self) -> Option<usize> {
        self.headers
            .get(header::CONTENT_LENGTH)
            .map(|v| v.to_str().unwrap().parse().unwrap())
    }
}

async fn collect_out(response: Response<ResponseBody<Counted>>) -> Out {
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    Out {
        status: parts.status,
        rejection: parts.extensions.get::<Rejection>().cloned(),
        headers: parts.headers,
        body: collected.to_bytes(),
        trailers,
    }
}

/// Sends `request` through the layer to an inner service that records what
/// it saw and answers `reply`.
async fn run(profile: &ServerProfile, request: Request<Counted>, reply: Reply) -> (Out, Seen) {
    let (out, seen) = try_run(profile, request, reply).await;
    (out, seen.expect("the inner service was called"))
}

/// [`run`], when the inner service may not be called.
async fn try_run(
    profile: &ServerProfile,
    request: Request<Counted>,
    reply: Reply,
) -> (Out, Option<Seen>) {
    let pulled = request.body().pulled.clone();
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .service_fn(move |request: Request<RequestBody<Counted>>| {
            let pulled_at_call = pulled.load(Ordering::SeqCst);
            let record = record.clone();
            let reply = reply.clone();
            async move {
                let (parts, mut body) = request.into_parts();
                let mut frames = Vec::new();
                while let Some(frame) = body.frame().await {
                    frames.push(frame.unwrap().into_data().unwrap());
                }
                *record.lock().unwrap() = Some(Seen {
                    method: parts.method,
                    headers: parts.headers,
                    frames,
                    pulled_at_call,
                });
                Ok::<_, Infallible>(reply.into_response())
            }
        });
    let out = collect_out(service.oneshot(request).await.unwrap()).await;
    let seen = seen.lock().unwrap().take();
    (out, seen)
}

/// Sends `request` through the layer to an inner service that must not be called.
async fn rejected(profile: &ServerProfile, request: Request<Counted>) -> Out {
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .service_fn(
            |_: Request<RequestBody<Counted>>| -> Ready<Result<Response<Counted>, Infallible>> {
                panic!("the inner service was called")
            },
        );
    collect_out(service.oneshot(request).await.unwrap()).await
}

fn discover_request(body: Counted) -> Request<Counted> {
    post_request(Some("server/discover"), body)
}

fn post_request(mcp_method: Option<&str>, body: Counted) -> Request<Counted> {
    let mut builder = Request::post("/mcp").header(header::CONTENT_TYPE, "application/json");
    if let Some(method) = mcp_method {
        builder = builder.header("mcp-method", method);
    }
    builder.body(body).unwrap()
}

fn profile() -> ServerProfile {
    ServerProfile::builder().build().unwrap()
}

fn caps(profile: &ServerProfile, era: Era) -> Value {
    Value::Object(profile.capabilities(era).clone())
}

fn caps_json(profile: &ServerProfile, era: Era) -> String {
    serde_json::to_string(profile.capabilities(era)).unwrap()
}

/// The raw bytes of member `key` of the JSON object `text`.
fn member<'a>(text: &'a str, key: &str) -> &'a str {
    let members = crate::codec::json::members(text).expect("an object");
    crate::codec::json::unique(&members, key)
        .one()
        .expect("the member is there")
}

fn with_caps(mut base: Value, extra: Value) -> Value {
    let (Value::Object(map), Value::Object(extra)) = (&mut base, extra) else {
        unreachable!("objects")
    };
    map.extend(extra);
    base
}

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INNER_CAPS: &str = r#"{"tools":{},"prompts":{},"experimental":{"x":1}}"#;
const DISCOVER_RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{},"experimental":{"x":1}},"_meta":{"serverInfo":{"name":"s","version":"1"}},"ttlMs":1000,"cacheScope":"shared"}}"#;
/// All of its capabilities are managed, so the profile's replace them whole.
const DISCOVER_MANAGED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{}},"_meta":{"serverInfo":{"name":"sérvér ✓","version":"1"}},"ttlMs":1000,"cacheScope":"shared"}}"#;
const MANAGED_CAPS: &str = r#"{"tools":{},"prompts":{}}"#;
const INITIALIZE_RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"s","version":"1"}}}"#;

/// Asserts that `out` is `input` with only the capabilities value replaced,
/// and returns the new capabilities.
fn assert_only_caps_changed(out: &str, input: &str, inner_caps: &str) -> Value {
    let new_caps = member(member(out, "result"), "capabilities");
    assert_eq!(
        out,
        input.replacen(inner_caps, new_caps, 1),
        "every other byte is kept"
    );
    serde_json::from_str(new_caps).unwrap()
}

// ---------------------------------------------------------------------------
// 1, 2, 4: JSON rewrites
// ---------------------------------------------------------------------------

#[tokio::test]
async fn modern_discover_json_replaces_managed_keys_only() {
    let profile = profile();
    let (out, seen) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(
        seen.body(),
        DISCOVER.as_bytes(),
        "the inner sees the request as sent"
    );
    assert_eq!(out.status, StatusCode::OK);
    let new_caps = assert_only_caps_changed(out.text(), DISCOVER_RESULT, INNER_CAPS);
    assert_eq!(
        new_caps,
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"x": 1}})
        )
    );
    assert_eq!(
        new_caps,
        json!({"tools": {"listChanged": true}, "resources": {"listChanged": true, "subscribe": true},
               "prompts": {"listChanged": true}, "logging": {}, "experimental": {"x": 1}})
    );
    assert_eq!(out.content_length(), Some(out.body.len()));
    assert_eq!(out.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(
        out.json()["result"]["cacheScope"],
        "shared",
        "no narrowing, no private scope"
    );
    assert!(out.rejection.is_none());
}

#[tokio::test]
async fn legacy_initialize_gets_legacy_caps() {
    let profile = profile();
    let request = post_request(None, Counted::one(INITIALIZE));
    let (out, seen) = run(&profile, request, Reply::json(INITIALIZE_RESULT)).await;
    assert_eq!(seen.body(), INITIALIZE.as_bytes());
    let new_caps = assert_only_caps_changed(
        out.text(),
        INITIALIZE_RESULT,
        r#"{"tools":{"listChanged":true},"logging":{}}"#,
    );
    assert_eq!(
        new_caps,
        json!({"tools": {"listChanged": false}, "resources": {"listChanged": false}, "prompts": {"listChanged": false}})
    );
    assert_eq!(
        out.text(),
        INITIALIZE_RESULT.replacen(
            r#"{"tools":{"listChanged":true},"logging":{}}"#,
            &caps_json(&profile, Era::Legacy),
            1
        )
    );
    assert_eq!(out.content_length(), Some(out.body.len()));
    assert!(
        out.json()["result"].get("cacheScope").is_none(),
        "legacy results get no cacheScope"
    );
}

#[tokio::test]
async fn legacy_initialize_with_a_matching_header_and_charset() {
    let profile = profile();
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .header("mcp-method", "initialize")
        .body(Counted::one(INITIALIZE))
        .unwrap();
    let (out, _) = run(
        &profile,
        request,
        Reply::new("application/json; charset=utf-8", INITIALIZE_RESULT),
    )
    .await;
    assert_eq!(
        out.json()["result"]["capabilities"],
        caps(&profile, Era::Legacy)
    );
}

#[tokio::test]
async fn experimental_and_foreign_extensions_are_kept() {
    let profile = profile();
    let inner_caps = r#"{"experimental":{"a":{"b":[1,2]}},"extensions":{"com.example/x":{"v":1},"io.modelcontextprotocol/tasks":{}},"tools":{"listChanged":false}}"#;
    let input = DISCOVER_RESULT.replacen(INNER_CAPS, inner_caps, 1);
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(&input),
    )
    .await;
    let new_caps = assert_only_caps_changed(out.text(), &input, inner_caps);
    // The tasks extension is managed: this profile has tasks off, so it goes.
    assert_eq!(
        new_caps,
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"a": {"b": [1, 2]}}, "extensions": {"com.example/x": {"v": 1}}})
        )
    );
}

#[tokio::test]
async fn missing_capabilities_are_added() {
    let profile = profile();
    let input = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"s","version":"1"}}}"#;
    let (out, _) = run(
        &profile,
        post_request(None, Counted::one(INITIALIZE)),
        Reply::json(input),
    )
    .await;
    let expected = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"protocolVersion":"2025-06-18","serverInfo":{{"name":"s","version":"1"}},"capabilities":{}}}}}"#,
        caps_json(&profile, Era::Legacy)
    );
    assert_eq!(out.text(), expected);
    assert_eq!(out.content_length(), Some(expected.len()));

    let input = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}"#;
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(input),
    )
    .await;
    assert_eq!(
        out.json()["result"]["capabilities"],
        caps(&profile, Era::Modern)
    );
    assert!(out.json()["result"].get("cacheScope").is_none());
}

#[tokio::test]
async fn string_ids_and_trailing_newline() {
    let profile = profile();
    let request = DISCOVER.replacen(r#""id":1"#, r#""id":"req-7""#, 1);
    let input = format!(
        "{}\n",
        DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":"req-7""#, 1)
    );
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(&request)),
        Reply::json(&input),
    )
    .await;
    assert!(
        out.text().ends_with("}\n"),
        "bytes after the object are kept"
    );
    let new_caps = assert_only_caps_changed(out.text(), &input, INNER_CAPS);
    assert_eq!(new_caps["tools"], json!({"listChanged": true}));
    assert_eq!(out.content_length(), Some(out.body.len()));
}

// ---------------------------------------------------------------------------
// 3: SSE
// ---------------------------------------------------------------------------

const SSE_BEFORE: &str = ": keep-alive\n\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"héllo ✓\"}}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"capabilities\":{}}}\n\n";
const SSE_AFTER: &str = ": ping\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"after\"}}\n\n";
/// A second answer after the first: dropped.
const SSE_SECOND: &str =
    "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{}}}\n\n";

fn sse_input() -> String {
    format!(
        "{SSE_BEFORE}event: message\nid: ev-2\ndata: {DISCOVER_MANAGED}\n\n{SSE_AFTER}{SSE_SECOND}"
    )
}

fn sse_expected(profile: &ServerProfile) -> String {
    let rewritten = DISCOVER_MANAGED.replacen(MANAGED_CAPS, &caps_json(profile, Era::Modern), 1);
    // The answer to another request (id 2) is dropped.
    let before = SSE_BEFORE.replace(
        "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"capabilities\":{}}}\n\n",
        "",
    );
    assert_ne!(before, SSE_BEFORE);
    format!("{before}event: message\nid: ev-2\ndata: {rewritten}\n\n{SSE_AFTER}")
}

#[tokio::test]
async fn sse_rewrites_only_the_result_event() {
    let profile = profile();
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::sse(&sse_input()),
    )
    .await;
    assert_eq!(out.text(), sse_expected(&profile));
    assert_eq!(
        out.headers.get(header::CONTENT_LENGTH),
        None,
        "Content-Length is removed"
    );
    assert_eq!(out.headers[header::CONTENT_TYPE], "text/event-stream");
}

#[tokio::test]
async fn sse_rewrite_is_the_same_for_one_byte_frames() {
    let profile = profile();
    let expected = sse_expected(&profile);
    for size in [1, 2, 3, 7, 64] {
        let reply = Reply::sse(&sse_input()).split(size);
        let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), reply).await;
        assert_eq!(out.text(), expected, "frames of {size} bytes");
        assert_eq!(out.headers.get(header::CONTENT_LENGTH), None);
    }
}

#[tokio::test]
async fn sse_with_experimental_keeps_it() {
    let profile = profile();
    let input = format!("data: {DISCOVER_RESULT}\n\n");
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::sse(&input).split(5),
    )
    .await;
    let data = out
        .text()
        .strip_prefix("data: ")
        .unwrap()
        .strip_suffix("\n\n")
        .unwrap();
    let new_caps = assert_only_caps_changed(data, DISCOVER_RESULT, INNER_CAPS);
    assert_eq!(
        new_caps,
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"x": 1}})
        )
    );
}

#[tokio::test]
async fn sse_result_over_several_data_lines_is_rewritten() {
    let profile = profile();
    let input = "retry: 500\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{\"capabilities\":{\"tools\":{}}}}\n\n";
    let expected = format!(
        "retry: 500\ndata: {{\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{{\"capabilities\":{}}}}}\n\n",
        caps_json(&profile, Era::Modern)
    );
    for size in [1, input.len()] {
        let reply = Reply::sse(input).split(size);
        let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), reply).await;
        assert_eq!(out.text(), expected, "frames of {size} bytes");
    }
}

#[tokio::test]
async fn trailers_survive_a_rewrite() {
    let profile = profile();
    let sse = Reply::sse(&sse_input()).split(9).trailer("x-end", "1");
    let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), sse).await;
    assert_eq!(out.text(), sse_expected(&profile));
    assert_eq!(
        out.trailers.as_ref().map(|t| &t["x-end"]),
        Some(&HeaderValue::from_static("1")),
        "SSE"
    );

    let json = Reply::json(DISCOVER_RESULT).split(9).trailer("x-end", "1");
    let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), json).await;
    assert_eq!(
        out.json()["result"]["capabilities"]["tools"],
        json!({"listChanged": true})
    );
    assert_eq!(
        out.trailers.as_ref().map(|t| &t["x-end"]),
        Some(&HeaderValue::from_static("1")),
        "JSON"
    );
}

#[tokio::test]
async fn trailers_survive_when_nothing_is_rewritten() {
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#;
    let json = Reply::json(error).split(9).trailer("x-end", "1");
    let (out, _) = run(&profile(), discover_request(Counted::one(DISCOVER)), json).await;
    assert_eq!(out.text(), error);
    assert_eq!(
        out.trailers.as_ref().map(|t| &t["x-end"]),
        Some(&HeaderValue::from_static("1"))
    );
}

// ---------------------------------------------------------------------------
// 5: responses left alone
// ---------------------------------------------------------------------------

async fn assert_untouched(request: Request<Counted>, reply: Reply) {
    let mut expected_headers: HeaderMap = reply.clone().into_response().headers().clone();
    let sse = expected_headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream")
        && !expected_headers.contains_key(header::CONTENT_ENCODING);
    if sse {
        // A stream is let through before its events are seen, so its length
        // is dropped whether or not an event turns out to need a rewrite.
        expected_headers.remove(header::CONTENT_LENGTH);
    }
    let expected_body = reply.chunks.concat();
    let (out, _) = run(&profile(), request, reply).await;
    assert_eq!(&out.body[..], &expected_body[..], "body untouched");
    assert_eq!(out.headers, expected_headers, "headers untouched");
    assert!(out.rejection.is_none());
}

/// The answer to `request` (id `id`) is the layer's -32603 error in place of
/// `reply`: the inner service's capabilities never reach the client.
async fn assert_replaced(request: Request<Counted>, reply: Reply, id: Value) {
    let (out, _) = run(&profile(), request, reply).await;
    let sse = out
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream");
    let message = match sse {
        true => {
            let text = out.text();
            let data = text.strip_prefix("data: ").expect("one event");
            serde_json::from_str(data.trim_end()).unwrap()
        }
        false => {
            assert_eq!(out.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(out.headers[header::CONTENT_TYPE], "application/json");
            assert!(out.headers.get(header::CONTENT_ENCODING).is_none());
            out.json()
        }
    };
    assert_eq!(message["error"]["code"], -32603, "{message}");
    assert_eq!(message["id"], id, "{message}");
    assert!(message.get("result").is_none(), "{message}");
}

#[tokio::test]
async fn error_responses_are_untouched() {
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no","data":{"capabilities":{}}}}"#;
    assert_untouched(discover_request(Counted::one(DISCOVER)), Reply::json(error)).await;
    assert_untouched(
        post_request(None, Counted::one(INITIALIZE)),
        Reply::json(error),
    )
    .await;
    let sse = format!("data: {error}\n\n");
    assert_untouched(discover_request(Counted::one(DISCOVER)), Reply::sse(&sse)).await;
}

#[tokio::test]
async fn answers_for_another_id() {
    // As the whole answer, it is not the answer: replaced.
    let other = DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":2"#, 1);
    assert_replaced(
        discover_request(Counted::one(DISCOVER)),
        Reply::json(&other),
        json!(1),
    )
    .await;
    // On a stream it is dropped: a client matching ids loosely could take
    // it for this request's answer.
    let sse = format!("data: {other}\n\n");
    let (out, _) = run(
        &profile(),
        discover_request(Counted::one(DISCOVER)),
        Reply::sse(&sse),
    )
    .await;
    assert_eq!(out.text(), "");
}

#[tokio::test]
async fn the_request_id_is_read_wherever_it_stands() {
    // Before the method the scan reads it in its one pass; after the method,
    // or escaped, the request is walked for it.
    let after = r#"{"jsonrpc":"2.0","method":"server/discover","params":{},"id":"a"}"#;
    let escaped = r#"{"jsonrpc":"2.0","id":"\u0061","method":"server/discover","params":{}}"#;
    let before = r#"{"jsonrpc":"2.0","id":"a","method":"server/discover","params":{}}"#;
    let result = DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":"a""#, 1);
    let other = DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":"b""#, 1);
    for request in [before, after, escaped] {
        let (out, _) = run(
            &profile(),
            discover_request(Counted::one(request)),
            Reply::json(&result),
        )
        .await;
        let caps = assert_only_caps_changed(out.text(), &result, INNER_CAPS);
        assert_eq!(caps["tools"], json!({"listChanged": true}), "{request}");
        assert_replaced(
            discover_request(Counted::one(request)),
            Reply::json(&other),
            json!("a"),
        )
        .await;
    }
}

#[tokio::test]
async fn compressed_answers_are_replaced() {
    let gzip = Reply {
        status: StatusCode::OK,
        headers: vec![
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
            (header::CONTENT_LENGTH, HeaderValue::from_static("6")),
        ],
        chunks: vec![Bytes::from_static(b"\x1f\x8b\x08\x00\xff\xfe")],
        trailers: None,
    };
    assert_replaced(discover_request(Counted::one(DISCOVER)), gzip, json!(1)).await;
    let sse_gzip = Reply::sse(&format!("data: {DISCOVER_RESULT}\n\n"))
        .header(header::CONTENT_ENCODING, "gzip");
    assert_replaced(discover_request(Counted::one(DISCOVER)), sse_gzip, json!(1)).await;
}

#[tokio::test]
async fn answers_of_any_type_are_rewritten() {
    // A lenient client reads any body as JSON.
    let no_type = Reply {
        status: StatusCode::OK,
        headers: vec![],
        chunks: vec![Bytes::from_static(DISCOVER_RESULT.as_bytes())],
        trailers: None,
    };
    for reply in [
        Reply::new("text/plain", DISCOVER_RESULT),
        Reply::new("application/octet-stream", DISCOVER_RESULT),
        no_type,
    ] {
        let (out, _) = run(&profile(), discover_request(Counted::one(DISCOVER)), reply).await;
        let caps = assert_only_caps_changed(out.text(), DISCOVER_RESULT, INNER_CAPS);
        assert_eq!(caps["tools"], json!({"listChanged": true}));
    }
}

#[tokio::test]
async fn unreadable_answers_are_replaced_and_empty_ones_kept() {
    let both = DISCOVER_RESULT.replacen(r#""result":"#, r#""error":{"code":1},"result":"#, 1);
    let shapeless = r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":[{"tools":{}}]}}"#;
    for body in [
        "{not json",
        r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        &format!("{DISCOVER_RESULT}{DISCOVER_RESULT}"),
        &both,
        shapeless,
        "\u{feff}{}",
    ] {
        assert_replaced(
            discover_request(Counted::one(DISCOVER)),
            Reply::json(body).split(3),
            json!(1),
        )
        .await;
    }
    // Too long to read whole.
    let long = DISCOVER_RESULT.replacen(
        r#""ttlMs""#,
        &format!(r#""pad":"{}","ttlMs""#, "x".repeat(2 << 20)),
        1,
    );
    assert_replaced(
        discover_request(Counted::one(DISCOVER)),
        Reply::json(&long),
        json!(1),
    )
    .await;
    // Nothing to read: nothing to replace.
    assert_untouched(discover_request(Counted::one(DISCOVER)), Reply::json("")).await;
}

#[tokio::test]
async fn intercepted_methods_without_an_id_are_refused() {
    // A discover without an id is a notification: no answer to it could be
    // told from another, so none may come back unrewritten.
    for request in [
        r#"{"jsonrpc":"2.0","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"server/discover"}"#,
    ] {
        let (out, seen) = try_run(
            &profile(),
            post_request(None, Counted::one(request)),
            Reply::json(DISCOVER_RESULT),
        )
        .await;
        assert!(
            seen.is_none(),
            "{request}: the inner service was not called"
        );
        assert_eq!(out.status, StatusCode::BAD_REQUEST, "{request}");
        assert_eq!(out.json()["error"]["code"], -32600, "{request}");
        assert!(
            matches!(out.rejection, Some(Rejection::InvalidRequest(_))),
            "{request}"
        );
    }
}

/// A discover whose body is longer than the buffer limit (1 MiB) must not get
/// the inner service's own capabilities through: it is either rewritten or
/// refused. Refused as what it is: its header and body agree, so -32020 is
/// the wrong answer.
#[tokio::test]
async fn oversized_discover_does_not_fail_open() {
    let profile = narrowing_profile();
    let padding = "x".repeat(2 * 1024 * 1024);
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"pad":"{padding}"}}}}"#
    );
    for mcp_method in [None, Some("server/discover")] {
        let (out, seen) = try_run(
            &profile,
            post_request(mcp_method, Counted::split(request.as_bytes(), 64 * 1024)),
            Reply::json(DISCOVER_RESULT),
        )
        .await;
        if seen.is_some() {
            let body = out.json();
            assert!(
                body["result"]["capabilities"].get("prompts").is_none(),
                "{mcp_method:?}: an anonymous caller got the inner's un-narrowed capabilities: {}",
                body["result"]
            );
            assert_eq!(body["result"]["cacheScope"], "private", "{mcp_method:?}");
        } else {
            assert!(
                out.rejection.is_some(),
                "{mcp_method:?}: refused by the layer"
            );
            assert_ne!(
                out.rejection,
                Some(Rejection::HeaderMismatch),
                "{mcp_method:?}: header and body agree"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 6: large pass-through, no whole-body copy
// ---------------------------------------------------------------------------

const MIB: usize = 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// A 4 MiB `tools/call` body in one allocation; `method_first` puts the
/// method before the 4 MiB of params, else after them.
fn big_tools_call(method_first: bool) -> Bytes {
    let head = if method_first {
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"blob":""#
    } else {
        r#"{"jsonrpc":"2.0","id":1,"params":{"name":"echo","arguments":{"blob":""#
    };
    let tail = if method_first {
        r#""}}}"#
    } else {
        r#""}},"method":"tools/call"}"#
    };
    let mut body = Vec::with_capacity(4 * MIB);
    body.extend_from_slice(head.as_bytes());
    body.extend((0..4 * MIB - head.len() - tail.len()).map(|i| b'a' + (i % 26) as u8));
    body.extend_from_slice(tail.as_bytes());
    assert_eq!(body.len(), 4 * MIB);
    Bytes::from(body)
}

/// `all` as a body of 64 KiB slices of its one allocation.
fn in_slices(all: &Bytes) -> Counted {
    Counted::new(
        (0..all.len())
            .step_by(CHUNK)
            .map(|at| all.slice(at..at + CHUNK))
            .collect(),
    )
}

/// Sends `all` in 64 KiB slices of one allocation; the inner service checks
/// that every frame it gets is one of those slices (same address, same length).
async fn big_pass_through(method_first: bool) -> usize {
    let all = big_tools_call(method_first);
    let body = in_slices(&all);
    let pulled = body.pulled.clone();
    let pulled_at_call = Arc::new(AtomicUsize::new(usize::MAX));
    let record = pulled_at_call.clone();
    let original = all.clone();
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile()))
        .service_fn(move |request: Request<RequestBody<Counted>>| {
            record.store(pulled.load(Ordering::SeqCst), Ordering::SeqCst);
            let original = original.clone();
            async move {
                let mut body = request.into_body();
                let mut frames = Vec::new();
                let mut offset = 0;
                while let Some(frame) = body.frame().await {
                    let data = frame.unwrap().into_data().unwrap();
                    assert_eq!(data.len(), CHUNK, "frame {} keeps its size", frames.len());
                    assert_eq!(
                        data.as_ptr(),
                        original[offset..].as_ptr(),
                        "frame {} is the original chunk",
                        frames.len()
                    );
                    offset += data.len();
                    frames.push(data);
                }
                assert_eq!(frames.len(), 4 * MIB / CHUNK);
                // Echo the frames back as they came.
                let mut response = Response::new(Counted::new(frames));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Ok::<_, Infallible>(response)
            }
        });
    let request = post_request(Some("tools/call"), body);
    let response = service.oneshot(request).await.unwrap();
    let echoed = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(echoed.len(), all.len());
    assert!(echoed == all, "the 4 MiB body comes back byte for byte");
    pulled_at_call.load(Ordering::SeqCst)
}

#[tokio::test]
async fn big_tools_call_passes_through_in_its_original_chunks() {
    let pulled = big_pass_through(true).await;
    assert_eq!(
        pulled, 1,
        "only the chunk holding the method was read before the inner was called"
    );
}

#[tokio::test]
async fn big_tools_call_with_a_late_method_is_refused_unbuffered() {
    // Past the peek limit (1 MiB by default) an `initialize` could hide: the
    // layer answers 413 after reading no more than the limit.
    let body = in_slices(&big_tools_call(false));
    let pulled = body.pulled.clone();
    let (out, seen) = try_run(
        &profile(),
        post_request(Some("tools/call"), body),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert!(seen.is_none(), "the inner service was not called");
    assert_eq!(out.status, StatusCode::PAYLOAD_TOO_LARGE);
    let read = pulled.load(Ordering::SeqCst);
    assert!(read <= MIB / CHUNK + 1, "{read} frames read");
}

// ---------------------------------------------------------------------------
// 7: request chunk boundaries
// ---------------------------------------------------------------------------

#[tokio::test]
async fn method_split_inside_its_value_is_recognized() {
    let profile = profile();
    let body = Counted::new(vec![
        Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"server/dis"#),
        Bytes::from_static(br#"cover"}"#),
    ]);
    let (out, seen) = run(
        &profile,
        discover_request(body),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(
        seen.body(),
        br#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#
    );
    assert_eq!(
        seen.frames.len(),
        2,
        "the inner gets the chunks as they came"
    );
    assert_eq!(
        out.json()["result"]["capabilities"]["tools"],
        json!({"listChanged": true})
    );
}

#[tokio::test]
async fn discover_is_recognized_at_every_split_point() {
    let profile = profile();
    let expected = with_caps(
        caps(&profile, Era::Modern),
        json!({"experimental": {"x": 1}}),
    );
    let bytes = DISCOVER.as_bytes();
    for at in 0..=bytes.len() {
        let body = Counted::new(vec![
            Bytes::copy_from_slice(&bytes[..at]),
            Bytes::copy_from_slice(&bytes[at..]),
        ]);
        let (out, seen) = run(
            &profile,
            discover_request(body),
            Reply::json(DISCOVER_RESULT),
        )
        .await;
        assert_eq!(seen.body(), bytes, "split at {at}");
        assert_eq!(
            out.json()["result"]["capabilities"],
            expected,
            "split at {at}"
        );
        assert_eq!(out.content_length(), Some(out.body.len()));
    }
    // And without the header, as an `initialize` in one-byte frames.
    let (out, seen) = run(
        &profile,
        post_request(None, Counted::split(INITIALIZE.as_bytes(), 1)),
        Reply::json(INITIALIZE_RESULT),
    )
    .await;
    assert_eq!(seen.body(), INITIALIZE.as_bytes());
    assert_eq!(seen.frames.len(), INITIALIZE.len());
    assert_eq!(
        out.json()["result"]["capabilities"],
        caps(&profile, Era::Legacy)
    );
}

// ---------------------------------------------------------------------------
// 8: no inspection
// ---------------------------------------------------------------------------

#[tokio::test]
async fn get_and_delete_are_not_inspected() {
    let profile = profile();
    let requests = [
        Request::get("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header("mcp-method", "server/discover"),
        Request::delete("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header("mcp-method", "server/discover"),
    ];
    for builder in requests {
        let request = builder
            .body(Counted::split(DISCOVER.as_bytes(), 10))
            .unwrap();
        let method = request.method().clone();
        let request_headers = request.headers().clone();
        let (out, seen) = run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
        assert_eq!(seen.method, method);
        assert_eq!(
            seen.pulled_at_call, 0,
            "{method}: the body was not read before the call"
        );
        assert_eq!(seen.body(), DISCOVER.as_bytes(), "{method}");
        assert_eq!(
            seen.frames.len(),
            DISCOVER.len().div_ceil(10),
            "{method}: chunks as they came"
        );
        assert_eq!(seen.headers, request_headers, "{method}: headers as sent");
        assert_eq!(out.text(), DISCOVER_RESULT, "{method}: response untouched");
        assert_eq!(out.content_length(), Some(DISCOVER_RESULT.len()));
    }
}

#[tokio::test]
async fn every_post_is_inspected_whatever_its_type() {
    // Lenient inner services read any body as JSON: the content type decides
    // nothing.
    let profile = profile();
    let requests = [
        Request::post("/mcp"),
        Request::post("/mcp").header(header::CONTENT_TYPE, "text/plain"),
        Request::post("/mcp").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded"),
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, "text/plain")
            .header("mcp-method", "server/discover"),
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, "text/plain")
            .header("mcp-method", "=?base64?c2VydmVyL2Rpc2NvdmVy?="),
    ];
    for builder in requests {
        let request = builder.body(Counted::one(DISCOVER)).unwrap();
        let (out, seen) = run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
        assert_eq!(seen.body(), DISCOVER.as_bytes());
        assert_eq!(
            out.json()["result"]["capabilities"],
            with_caps(
                caps(&profile, Era::Modern),
                json!({"experimental": {"x": 1}})
            )
        );
    }
}

#[tokio::test]
async fn bodies_that_are_not_json_up_to_their_method_are_refused() {
    // A lenient parser behind the layer could still find a method in them.
    let profile = profile();
    for body in [
        "hello world",
        "",
        "[1,2",
        "{\"method\":",
        "\"server/discover\"",
        "method=server/discover",
    ] {
        for content_type in ["application/json", "text/plain"] {
            let request = Request::post("/mcp")
                .header(header::CONTENT_TYPE, content_type)
                .body(Counted::split(body.as_bytes(), 4))
                .unwrap();
            let (out, seen) = try_run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
            assert!(seen.is_none(), "{body:?}: the inner service was not called");
            assert_eq!(out.status, StatusCode::BAD_REQUEST, "{body:?}");
            assert_eq!(out.rejection, Some(Rejection::Parse), "{body:?}");
            assert_eq!(out.json()["error"]["code"], -32700, "{body:?}");
        }
    }
}

#[tokio::test]
async fn other_methods_pass_through() {
    let profile = profile();
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    // The inner answers with something that looks like a discover result: not ours to touch.
    let (out, seen) = run(
        &profile,
        post_request(Some("tools/call"), Counted::split(call.as_bytes(), 7)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(seen.body(), call.as_bytes());
    assert_eq!(out.text(), DISCOVER_RESULT);
    // A listen is not this layer's business either.
    let listen = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#;
    let (out, seen) = run(
        &profile,
        post_request(Some("subscriptions/listen"), Counted::one(listen)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(seen.body(), listen.as_bytes());
    assert_eq!(out.text(), DISCOVER_RESULT);
}

/// A compressed request body cannot be read, so it is not inspected (see
/// `gate` in `http/intercept.rs`): it either reaches the inner service unread, or is
/// refused as `Encoded` (415) the way the listen layer refuses it. It is never
/// a header mismatch: nothing was compared.
#[tokio::test]
async fn compressed_requests_are_not_peeked() {
    let gzip: &[u8] =
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\x56\xca\x4d\x2d\xc9\xc8\x4f\x51";
    for mcp_method in [Some("server/discover"), None, Some("tools/call")] {
        let mut request = post_request(mcp_method, Counted::split(gzip, 4));
        request
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let (out, seen) = try_run(&profile(), request, Reply::json(DISCOVER_RESULT)).await;
        assert_ne!(
            out.rejection,
            Some(Rejection::HeaderMismatch),
            "{mcp_method:?}: a compressed body has no method to compare"
        );
        match seen {
            Some(seen) => {
                assert_eq!(seen.body(), gzip, "{mcp_method:?}");
                assert_eq!(
                    seen.pulled_at_call, 0,
                    "{mcp_method:?}: the compressed body was read before the call"
                );
                assert_eq!(out.text(), DISCOVER_RESULT);
            }
            None => {
                assert_eq!(out.rejection, Some(Rejection::Encoded), "{mcp_method:?}");
                assert_eq!(out.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 9: header disguise
// ---------------------------------------------------------------------------

fn assert_mismatch(out: &Out, id: Value) {
    assert_eq!(out.status, StatusCode::BAD_REQUEST);
    assert_eq!(out.rejection, Some(Rejection::HeaderMismatch));
    assert_eq!(out.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(out.content_length(), Some(out.body.len()));
    let body = out.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], id);
    assert_eq!(body["error"]["code"], -32020);
}

#[tokio::test]
async fn discover_header_on_another_method_is_rejected() {
    let body = r#"{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"t"}}"#;
    let out = rejected(
        &profile(),
        post_request(Some("server/discover"), Counted::split(body.as_bytes(), 5)),
    )
    .await;
    assert_mismatch(&out, json!("abc"));
    let out = rejected(
        &profile(),
        post_request(Some("initialize"), Counted::one(body)),
    )
    .await;
    assert_mismatch(&out, json!("abc"));
}

#[tokio::test]
async fn another_header_on_discover_is_rejected() {
    let out = rejected(
        &profile(),
        post_request(Some("tools/call"), Counted::one(DISCOVER)),
    )
    .await;
    assert_mismatch(&out, json!(1));
    let out = rejected(
        &profile(),
        post_request(Some("server/discover"), Counted::one(INITIALIZE)),
    )
    .await;
    assert_mismatch(&out, json!(1));
    let out = rejected(
        &profile(),
        post_request(Some("initialize"), Counted::split(DISCOVER.as_bytes(), 3)),
    )
    .await;
    assert_mismatch(&out, json!(1));
}

#[tokio::test]
async fn mismatch_between_other_methods_passes_through() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (out, seen) = run(
        &profile(),
        post_request(Some("tools/call"), Counted::one(body)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(seen.body(), body.as_bytes());
    assert_eq!(out.text(), DISCOVER_RESULT);
    assert!(out.rejection.is_none());
}

// ---------------------------------------------------------------------------
// 10: per-caller narrowing
// ---------------------------------------------------------------------------

fn narrowing_profile() -> ServerProfile {
    ServerProfile::builder()
        .narrowing(
            |caller: Option<&Principal>, _: Era, caps: &mut Map<String, Value>| {
                if caller.is_none() {
                    caps.remove("prompts");
                }
            },
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn anonymous_discover_is_narrowed_and_private() {
    let profile = narrowing_profile();
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    let body = out.json();
    let mut expected = with_caps(
        caps(&profile, Era::Modern),
        json!({"experimental": {"x": 1}}),
    );
    expected.as_object_mut().unwrap().remove("prompts");
    assert_eq!(body["result"]["capabilities"], expected);
    assert!(body["result"]["capabilities"].get("prompts").is_none());
    assert_eq!(body["result"]["cacheScope"], "private");
    assert_eq!(out.content_length(), Some(out.body.len()));
    // Everything but the capabilities and the scope keeps its bytes.
    let result = member(out.text(), "result");
    for key in ["resultType", "supportedVersions", "_meta", "ttlMs"] {
        assert_eq!(
            member(result, key),
            member(member(DISCOVER_RESULT, "result"), key),
            "{key}"
        );
    }
}

#[tokio::test]
async fn known_caller_gets_everything_but_still_private() {
    let profile = narrowing_profile();
    let mut request = discover_request(Counted::one(DISCOVER));
    request.extensions_mut().insert(Principal::new("alice"));
    let (out, _) = run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
    let body = out.json();
    assert_eq!(
        body["result"]["capabilities"],
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"x": 1}})
        )
    );
    assert_eq!(body["result"]["cacheScope"], "private");
}

#[tokio::test]
async fn narrowed_discover_without_scope_gets_one() {
    let profile = narrowing_profile();
    let input = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","capabilities":{"tools":{}}}}"#;
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(input),
    )
    .await;
    assert_eq!(out.json()["result"]["cacheScope"], "private");
}

#[tokio::test]
async fn narrowed_initialize_has_no_cache_scope() {
    let profile = narrowing_profile();
    let (out, _) = run(
        &profile,
        post_request(None, Counted::one(INITIALIZE)),
        Reply::json(INITIALIZE_RESULT),
    )
    .await;
    let body = out.json();
    assert_eq!(
        body["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "resources": {"listChanged": false}})
    );
    assert!(body["result"].get("cacheScope").is_none());
}

// ---------------------------------------------------------------------------
// 11: readiness
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 12: compile-time checks
// ---------------------------------------------------------------------------

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
        send::<super::ResponseFuture<S, B, R>>();
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
