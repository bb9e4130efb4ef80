//! `EdgeLayer`, both layers in one: it answers every request exactly as
//! `CapabilitiesLayer` stacked outside `ListenFilterLayer` does (a
//! differential test over a generated corpus, case by case and by property
//! over random chunkings), takes bodies that are not `Unpin`, fits axum and
//! tonic, and keeps the inner service's readiness.

use std::collections::{BTreeSet, VecDeque};
use std::convert::Infallible;
use std::fmt::{self, Display};
use std::future::{ready, Future};
use std::io;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use bytes::{Bytes, BytesMut};
use http::{header, response, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use mcp_edge::{
    edge, CapabilitiesLayer, Edge, EdgeLayer, Era, HonouredFilter, ListenError, ListenFilterLayer,
    Principal, Rejection, RequestBody, ServerProfile,
};
use pin_project_lite::pin_project;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Map, Value};
use tower::layer::util::{Identity, Stack};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

mod common;
use common::{modern_body, sse_messages, LoopbackServer, MODERN, SUBSCRIPTION_ID};

// ---------------------------------------------------------------------------
// Bodies.
// ---------------------------------------------------------------------------

pin_project! {
    /// A body of set chunks, then trailers or an error; never `Unpin`, so it
    /// is only ever polled through `Pin`.
    struct Chunked {
        chunks: VecDeque<Bytes>,
        trailers: Option<HeaderMap>,
        error: Option<&'static str>,
        // The end is known as soon as the last chunk is out, as with a
        // `Content-Length`; otherwise only when the stream says so.
        exact: bool,
        // Each frame comes after one pending poll (the waker woken at once).
        stall: bool,
        stalled: bool,
        #[pin]
        _pinned: PhantomPinned,
    }
}

impl Chunked {
    /// `chunks`, in order; the end known with the last one when `exact`.
    fn new(chunks: Vec<Bytes>, exact: bool) -> Self {
        Self {
            chunks: chunks.into(),
            trailers: None,
            error: None,
            exact,
            stall: false,
            stalled: false,
            _pinned: PhantomPinned,
        }
    }

    /// `bytes` in chunks of `size` bytes (one chunk for `usize::MAX`).
    fn split(bytes: &Bytes, size: usize, exact: bool) -> Self {
        let chunks = (0..bytes.len())
            .step_by(size.max(1))
            .map(|at| bytes.slice(at..bytes.len().min(at.saturating_add(size))))
            .collect();
        Self::new(chunks, exact)
    }

    /// `bytes` cut at the offsets `at` (sorted, each at most the length).
    fn cut(bytes: &Bytes, at: &[usize], exact: bool) -> Self {
        let ends = at.iter().copied().chain([bytes.len()]);
        let mut start = 0;
        let chunks = ends
            .map(|end| {
                let chunk = bytes.slice(start..end);
                start = end;
                chunk
            })
            .collect();
        Self::new(chunks, exact)
    }
}

impl Body for Chunked {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.project();
        if *this.stall && !*this.stalled {
            *this.stalled = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        *this.stalled = false;
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if let Some(error) = this.error.take() {
            return Poll::Ready(Some(Err(io::Error::other(error))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.exact && self.chunks.is_empty() && self.trailers.is_none() && self.error.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact {
            true => SizeHint::with_exact(self.chunks.iter().map(|c| c.len() as u64).sum()),
            false => SizeHint::default(),
        }
    }
}

/// A body read to its end: its data, its trailers, the error it ended with.
#[derive(Debug, Clone, Default, PartialEq)]
struct Drained {
    data: Bytes,
    trailers: Option<HeaderMap>,
    error: Option<String>,
}

impl Drained {
    /// Reads `body` through a pin, frame by frame, to its end or first error.
    async fn of<B>(body: B) -> Self
    where
        B: Body<Data = Bytes>,
        B::Error: Display,
    {
        let mut body = Box::pin(body);
        let (mut data, mut drained) = (BytesMut::new(), Self::default());
        while let Some(frame) = body.as_mut().frame().await {
            match frame.map(Frame::into_data) {
                Ok(Ok(chunk)) => data.extend_from_slice(&chunk),
                Ok(Err(frame)) => drained.trailers = frame.into_trailers().ok(),
                Err(error) => {
                    drained.error = Some(error.to_string());
                    break;
                }
            }
        }
        drained.data = data.freeze();
        drained
    }
}

// ---------------------------------------------------------------------------
// Profiles.
// ---------------------------------------------------------------------------

/// What the profile's hooks were asked, in order.
type Journal = Arc<Mutex<Vec<String>>>;

/// Takes everything logged so far.
fn take<T>(log: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut log.lock().unwrap())
}

/// A family of profiles: its limits, and whether capabilities depend on the caller.
#[derive(Debug, Clone, Copy)]
struct Setup {
    name: &'static str,
    max_peek: usize,
    max_listen_body: usize,
    max_rewritten_response: usize,
    narrowing: bool,
}

const MIB: usize = 1024 * 1024;

/// Default body limits with per-caller capabilities; a small peek; a small listen limit.
const SETUPS: [Setup; 3] = [
    Setup {
        name: "defaults, narrowed",
        max_peek: MIB,
        max_listen_body: MIB,
        max_rewritten_response: MIB,
        narrowing: true,
    },
    Setup {
        name: "small peek",
        max_peek: 200,
        max_listen_body: 400,
        max_rewritten_response: 200,
        narrowing: false,
    },
    Setup {
        name: "small listen",
        max_peek: 400,
        max_listen_body: 160,
        max_rewritten_response: MIB,
        narrowing: false,
    },
];

const ALICE: &str = "alice";

impl Setup {
    /// A fresh profile of the family, and the journal its hooks write to.
    fn profile(&self) -> (ServerProfile, Journal) {
        let journal = Journal::default();
        let (read, subscribe, tasks) = (journal.clone(), journal.clone(), journal.clone());
        let mut builder = ServerProfile::builder()
            .base_capabilities(json!({"tools": {}, "resources": {}, "prompts": {}}))
            .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
                let caller = caller.map(Principal::as_str);
                read.lock()
                    .unwrap()
                    .push(format!("readable by {caller:?}: {uris:?}"));
                common::public_only(None, uris)
            })
            .subscription_hook(move |uris: &[&str]| {
                subscribe
                    .lock()
                    .unwrap()
                    .push(format!("subscribable: {uris:?}"));
                ready(uris.iter().map(|uri| !uri.ends_with("/fixed")).collect())
            })
            .task_directory(move |owner: &Principal, ids: &[&str]| {
                let own = format!("task-{}-", owner.as_str());
                tasks
                    .lock()
                    .unwrap()
                    .push(format!("owned by {own}: {ids:?}"));
                ready(ids.iter().map(|id| id.starts_with(&own)).collect())
            })
            .max_uris(3)
            .max_task_ids(2)
            .max_peek(self.max_peek)
            .max_listen_body(self.max_listen_body)
            .max_rewritten_response(self.max_rewritten_response);
        if self.narrowing {
            // Anonymous callers are told of no prompts.
            builder = builder.narrowing(
                |caller: Option<&Principal>, _: Era, caps: &mut Map<String, Value>| {
                    if caller.is_none() {
                        caps.remove("prompts");
                    }
                },
            );
        }
        (builder.build().expect("valid profile"), journal)
    }
}

// ---------------------------------------------------------------------------
// The inner service.
// ---------------------------------------------------------------------------

/// How the inner service answers: intercepted methods as SSE or JSON, in
/// chunks of `chunk` bytes; when `fail`, the body breaks off with an error.
#[derive(Debug, Clone, Copy)]
struct Answer {
    sse: bool,
    chunk: usize,
    fail: bool,
}

impl Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.sse { "SSE" } else { "JSON" })?;
        if self.chunk != usize::MAX {
            write!(f, " in {}-byte chunks", self.chunk)?;
        }
        if self.fail {
            f.write_str(", breaking off")?;
        }
        Ok(())
    }
}

/// Answers in one whole chunk, intercepted methods as SSE when `sse`.
const fn whole(sse: bool) -> Answer {
    Answer {
        sse,
        chunk: usize::MAX,
        fail: false,
    }
}

/// Capabilities the inner claims beyond any profile's, with an unmanaged entry.
const INNER_CAPS: &str =
    r#"{"tools":{},"prompts":{"listChanged":true},"completions":{},"experimental":{"inner":{}}}"#;

impl Answer {
    /// The answer to a request whose body is `body`: its text and content type.
    fn text(&self, body: &[u8]) -> (String, &'static str) {
        let message: Value = serde_json::from_slice(body).unwrap_or_default();
        let id = message.get("id").cloned().unwrap_or_default();
        let result = |result: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        let text = match message.get("method").and_then(Value::as_str) {
            Some("initialize") => result(&format!(
                r#"{{"protocolVersion":"2025-06-18","capabilities":{INNER_CAPS},"serverInfo":{{"name":"inner","version":"0.1.0"}}}}"#
            )),
            Some("server/discover") => result(&format!(
                r#"{{"resultType":"complete","supportedVersions":["{MODERN}"],"capabilities":{INNER_CAPS},"cacheScope":"public","ttlMs":60000}}"#
            )),
            Some("subscriptions/listen") if self.sse => {
                return (leaky_stream(&id, &message["params"]["notifications"]), SSE)
            }
            _ => return (result("{}"), JSON),
        };
        match self.sse {
            true => (format!(
                ": opened\n\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"hello\"}}}}\n\nevent: message\ndata: {text}\n\n"
            ), SSE),
            false => (text, JSON),
        }
    }

    /// The answer as a response, with the `Content-Length` of its whole text.
    fn respond(&self, body: &[u8]) -> (Response<Chunked>, Bytes) {
        let (text, content_type) = self.text(body);
        let text = Bytes::from(text);
        let body = match self.fail {
            true => Chunked {
                error: Some("inner stream broke"),
                ..Chunked::split(&text.slice(..text.len() * 2 / 3), self.chunk, false)
            },
            false => Chunked::split(&text, self.chunk, true),
        };
        let response = Response::builder()
            .header(header::CONTENT_TYPE, content_type)
            .header(header::CONTENT_LENGTH, text.len())
            .body(body)
            .unwrap();
        (response, text)
    }
}

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream";

/// A listen stream that leaks: an ack wider than asked (first for a string
/// id, after a notification otherwise), notifications in and outside the
/// filter, one for another subscription, a ping, the listen's own response.
fn leaky_stream(id: &Value, notifications: &Value) -> String {
    let meta = json!({ SUBSCRIPTION_ID: id });
    let mut wide = match notifications {
        Value::Object(asked) => asked.clone(),
        _ => Map::new(),
    };
    wide.insert("promptsListChanged".into(), json!(true));
    wide.insert(
        "resourceSubscriptions".into(),
        json!(["demo://public/readme", "demo://private/leak"]),
    );
    let note = |method: &str, extra: Value| {
        let mut params = json!({"_meta": meta});
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        json!({"jsonrpc": "2.0", "method": method, "params": params})
    };
    let ack = note(
        "notifications/subscriptions/acknowledged",
        json!({"notifications": wide}),
    );
    let mut events = vec![
        note("notifications/tools/list_changed", json!({})),
        note("notifications/prompts/list_changed", json!({})),
        note(
            "notifications/resources/updated",
            json!({"uri": "demo://public/readme"}),
        ),
        note(
            "notifications/resources/updated",
            json!({"uri": "demo://private/leak"}),
        ),
        note("notifications/tasks", json!({"taskId": "task-alice-1"})),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
               "params": {"_meta": {SUBSCRIPTION_ID: "another"}}}),
        json!({"jsonrpc": "2.0", "id": "server-1", "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": id, "result": {}}),
    ];
    // A string id gets its ack first; any other gets it late.
    events.insert(usize::from(!id.is_string()), ack);
    events
        .iter()
        .map(|event| format!("event: message\ndata: {event}\n\n"))
        .collect()
}

/// One call of the inner service, as it saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    method: Method,
    uri: http::Uri,
    headers: HeaderMap,
    hint: (u64, Option<u64>),
    body: Drained,
    /// The `HonouredFilter`'s ack and subscription id.
    filter: Option<(String, String)>,
    principal: Option<String>,
    answered: Bytes,
}

/// Everything the inner service was handed.
type Log = Arc<Mutex<Vec<Seen>>>;

/// The inner service of every stack: records each call, reads the body
/// whole and answers as its [`Answer`] says.
#[derive(Clone)]
struct Recorder {
    answer: Answer,
    log: Log,
}

impl Recorder {
    /// A recorder answering as `answer`, and its log.
    fn new(answer: Answer) -> (Self, Log) {
        let log = Log::default();
        (
            Self {
                answer,
                log: log.clone(),
            },
            log,
        )
    }
}

impl<B> Service<Request<B>> for Recorder
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Display,
{
    type Response = Response<Chunked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Chunked>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (answer, log) = (self.answer, self.log.clone());
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let hint = body.size_hint();
            let body = Drained::of(body).await;
            let (response, answered) = answer.respond(&body.data);
            let extensions = &parts.extensions;
            log.lock().unwrap().push(Seen {
                method: parts.method,
                uri: parts.uri,
                headers: parts.headers,
                hint: (hint.lower(), hint.upper()),
                body,
                filter: extensions.get::<HonouredFilter>().map(|filter| {
                    let id = filter.subscription_id().get().to_owned();
                    (filter.ack().get().to_owned(), id)
                }),
                principal: extensions.get::<Principal>().map(|p| p.as_str().to_owned()),
                answered,
            });
            Ok(response)
        })
    }
}

// ---------------------------------------------------------------------------
// The corpus.
// ---------------------------------------------------------------------------

/// A request body: what it is, the method it names first, its bytes.
#[derive(Debug)]
struct Sample {
    name: &'static str,
    method: Option<&'static str>,
    bytes: Bytes,
}

const TASKS_META: &str = r#"{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A listen with `id` and `params`.
fn listen(id: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{params}}}"#)
}

/// `text` with two bytes that are not UTF-8 before `before`.
fn with_bad_utf8(text: &str, before: &str) -> Vec<u8> {
    let (head, tail) = text.split_at(text.find(before).expect("the mark is in the text"));
    [head.as_bytes(), b"\xff\xfe", tail.as_bytes()].concat()
}

/// Every request body of the corpus.
fn samples() -> Vec<Sample> {
    let pad = "x".repeat(300);
    let short_pad = "y".repeat(150);
    let discover = r#"{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{}}"#;
    let tools_call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
    let valid_listen = listen(
        "1",
        r#"{"notifications":{"toolsListChanged":true,"promptsListChanged":false,"resourceSubscriptions":["demo://public/readme","demo://private/notes","demo://public/readme"]}}"#,
    );
    let text = |name, method, text: String| Sample {
        name,
        method,
        bytes: Bytes::from(text),
    };
    let raw = |name, method, bytes: Vec<u8>| Sample {
        name,
        method,
        bytes: Bytes::from(bytes),
    };
    let (call, disc, init, lis) = (
        Some("tools/call"),
        Some("server/discover"),
        Some("initialize"),
        Some("subscriptions/listen"),
    );
    vec![
        // Other methods.
        text("tools/call, method first", call, tools_call.into()),
        text(
            "tools/call, method last",
            call,
            r#"{"jsonrpc":"2.0","id":1,"params":{"name":"echo","arguments":{"text":"hi"}},"method":"tools/call"}"#.into(),
        ),
        text(
            "tools/call with escapes",
            call,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\"b\\n\u00e9"}}}"#.into(),
        ),
        text(
            "tools/call, padded after the method",
            call,
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"blob":"{pad}"}}}}"#),
        ),
        text(
            "tools/call, padded before the method",
            call,
            format!(r#"{{"jsonrpc":"2.0","id":1,"params":{{"blob":"{pad}"}},"method":"tools/call"}}"#),
        ),
        text("ping", Some("ping"), r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#.into()),
        text(
            "notification",
            Some("notifications/initialized"),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
        ),
        text("no method", None, r#"{"jsonrpc":"2.0","id":1,"params":{}}"#.into()),
        text("method a number", None, r#"{"jsonrpc":"2.0","id":1,"method":5}"#.into()),
        // initialize and server/discover.
        text(
            "initialize",
            init,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#.into(),
        ),
        text(
            "initialize, string id, method last",
            init,
            r#"{"jsonrpc":"2.0","id":"i-1","params":{"protocolVersion":"2025-06-18","capabilities":{}},"method":"initialize"}"#.into(),
        ),
        text("discover", disc, discover.into()),
        text(
            "discover, string id, _meta",
            disc,
            modern_body("server/discover", json!("d-1"), json!({})),
        ),
        text(
            "discover without id",
            disc,
            r#"{"jsonrpc":"2.0","method":"server/discover"}"#.into(),
        ),
        text(
            "discover, id after the method",
            disc,
            r#"{"jsonrpc":"2.0","method":"server/discover","params":{},"id":"after"}"#.into(),
        ),
        text(
            "discover, id null",
            disc,
            r#"{"jsonrpc":"2.0","id":null,"method":"server/discover"}"#.into(),
        ),
        text(
            "discover, two ids",
            disc,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"server/discover"}"#.into(),
        ),
        text(
            "discover, padded",
            disc,
            format!(r#"{{"jsonrpc":"2.0","id":8,"method":"server/discover","params":{{"pad":"{pad}"}}}}"#),
        ),
        // Listens.
        text("listen", lis, valid_listen.clone()),
        text(
            "listen, string id, method last",
            lis,
            r#"{"jsonrpc":"2.0","id":"l-1","params":{"notifications":{"resourcesListChanged":true,"resourceSubscriptions":["demo://public/a","demo://public/fixed"]}},"method":"subscriptions/listen"}"#.into(),
        ),
        text(
            "listen, tasks declared",
            lis,
            listen("2", &format!(r#"{{"_meta":{TASKS_META},"notifications":{{"taskIds":["task-alice-1","task-bob-1"],"toolsListChanged":true}}}}"#)),
        ),
        text(
            "listen, tasks undeclared",
            lis,
            listen("3", r#"{"notifications":{"taskIds":["task-alice-1"]}}"#),
        ),
        text(
            "listen, flag not a boolean",
            lis,
            listen("4", r#"{"notifications":{"toolsListChanged":"yes"}}"#),
        ),
        text(
            "listen, URIs not an array",
            lis,
            listen("5", r#"{"notifications":{"resourceSubscriptions":"demo://public/a"}}"#),
        ),
        text(
            "listen, notifications an array",
            lis,
            listen("6", r#"{"notifications":[]}"#),
        ),
        text(
            "listen, too many URIs",
            lis,
            listen("7", r#"{"notifications":{"resourceSubscriptions":["demo://public/1","demo://public/2","demo://public/3","demo://public/4"]}}"#),
        ),
        text(
            "listen, too many task ids",
            lis,
            listen("8", &format!(r#"{{"_meta":{TASKS_META},"notifications":{{"taskIds":["task-alice-1","task-alice-2","task-alice-3"]}}}}"#)),
        ),
        text(
            "listen without params",
            lis,
            r#"{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen"}"#.into(),
        ),
        text(
            "listen, id an object",
            lis,
            listen(r#"{"a":1}"#, r#"{"notifications":{}}"#),
        ),
        text(
            "listen without id",
            lis,
            r#"{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{}}}"#.into(),
        ),
        text(
            "listen, two params",
            lis,
            r#"{"jsonrpc":"2.0","id":"dup","method":"subscriptions/listen","params":{"notifications":{}},"params":{"notifications":{"toolsListChanged":true}}}"#.into(),
        ),
        text(
            "listen, padded",
            lis,
            listen("10", &format!(r#"{{"notifications":{{"toolsListChanged":true}},"pad":"{short_pad}"}}"#)),
        ),
        text(
            "listen, padded before the method",
            lis,
            format!(r#"{{"jsonrpc":"2.0","id":11,"params":{{"notifications":{{"toolsListChanged":true}},"pad":"{short_pad}"}},"method":"subscriptions/listen"}}"#),
        ),
        // Duplicate and hidden methods.
        text(
            "discover, then tools/call",
            disc,
            r#"{"jsonrpc":"2.0","id":3,"method":"server/discover","method":"tools/call"}"#.into(),
        ),
        text(
            "listen, then tools/call",
            lis,
            r#"{"jsonrpc":"2.0","id":13,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}},"method":"tools/call"}"#.into(),
        ),
        text(
            "tools/call, then listen",
            call,
            r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{},"method":"subscriptions/listen"}"#.into(),
        ),
        text(
            "tools/call, then discover",
            call,
            r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","method":"server/discover"}"#.into(),
        ),
        text(
            "initialize, then discover",
            init,
            r#"{"jsonrpc":"2.0","id":16,"method":"initialize","method":"server/discover"}"#.into(),
        ),
        text(
            "null method, then listen",
            None,
            r#"{"jsonrpc":"2.0","id":3,"method":null,"method":"subscriptions/listen","params":{"notifications":{}}}"#.into(),
        ),
        text(
            "nested method",
            call,
            r#"{"jsonrpc":"2.0","id":7,"params":{"method":"subscriptions/listen"},"method":"tools/call"}"#.into(),
        ),
        text(
            "escaped key, listen",
            lis,
            r#"{"jsonrpc":"2.0","id":5,"m\u0065thod":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#.into(),
        ),
        text(
            "escaped key, discover",
            disc,
            r#"{"jsonrpc":"2.0","id":5,"m\u0065thod":"server/discover"}"#.into(),
        ),
        text(
            "escaped value, listen",
            lis,
            r#"{"jsonrpc":"2.0","id":6,"method":"subscriptions\/listen","params":{"notifications":{}}}"#.into(),
        ),
        text(
            "tools/call, then an escaped key",
            call,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","m\u0065thod":"subscriptions/listen"}"#.into(),
        ),
        // Batches.
        text(
            "batch with a listen",
            None,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{}}}]"#.into(),
        ),
        text(
            "batch without a listen",
            None,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"server/discover"}]"#.into(),
        ),
        text("empty batch", None, "[]".into()),
        text(
            "batch, not JSON",
            None,
            r#"[{"method":"subscriptions/listen"}, NaN]"#.into(),
        ),
        // Not JSON, or not all of it.
        text("plain text", None, "hello".into()),
        text("empty", None, String::new()),
        text("null", None, "null".into()),
        text("a number", None, "42".into()),
        raw("BOM, then a discover", disc, [&b"\xEF\xBB\xBF"[..], discover.as_bytes()].concat()),
        raw(
            "invalid UTF-8 in a tools/call",
            call,
            with_bad_utf8(tools_call, "hi"),
        ),
        raw(
            "invalid UTF-8 in a listen",
            lis,
            with_bad_utf8(&valid_listen, "readme"),
        ),
        text("truncated discover", disc, discover[..discover.len() - 3].into()),
        text("truncated listen", lis, valid_listen[..valid_listen.len() - 20].into()),
        text(
            "truncated before the method",
            None,
            r#"{"jsonrpc":"2.0","id":1,"par"#.into(),
        ),
        text(
            "tools/call, cut after the method",
            call,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":"#.into(),
        ),
        text("discover, trailing bytes", disc, format!("{discover} x")),
        text("discover, trailing brace", disc, format!("{discover}}}")),
        text(
            "tools/call, then a listen object",
            call,
            format!(r#"{tools_call}{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{{}}}}}}"#),
        ),
        text("listen, trailing whitespace", lis, format!("{valid_listen}  \n")),
        text("listen, trailing bytes", lis, format!("{valid_listen} x")),
    ]
}

/// Every sample, made once.
static SAMPLES: LazyLock<Vec<Sample>> = LazyLock::new(samples);

/// The sample called `name`.
fn sample(name: &str) -> &'static Sample {
    SAMPLES
        .iter()
        .find(|s| s.name == name)
        .expect("a sample of that name")
}

/// The `Content-Length` a request declares.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Length {
    /// The body's real length.
    Actual,
    Absent,
    Declared(&'static str),
}

/// How a request body arrives.
#[derive(Debug, Clone)]
enum Delivery {
    /// One chunk, the end known with it.
    Whole,
    /// One chunk; the end known only when the stream ends.
    Stream,
    /// Chunks of this many bytes, each after a pending poll, the end known.
    Small(usize),
    /// 3-byte chunks with empty frames between them, then trailers.
    Trailers,
    /// The first half of the body in two chunks, then an error.
    Failing,
    /// Chunks ending at these offsets.
    Cuts {
        at: Vec<usize>,
        exact: bool,
        stall: bool,
    },
}

impl Delivery {
    /// `bytes` delivered this way.
    fn body(&self, bytes: &Bytes) -> Chunked {
        match self {
            Self::Whole => Chunked::split(bytes, usize::MAX, true),
            Self::Stream => Chunked::split(bytes, usize::MAX, false),
            Self::Small(size) => Chunked {
                stall: true,
                ..Chunked::split(bytes, *size, true)
            },
            Self::Trailers => {
                let chunks = Chunked::split(bytes, 3, false).chunks;
                let with_empty = chunks.into_iter().flat_map(|c| [c, Bytes::new()]);
                let mut trailers = HeaderMap::new();
                trailers.insert("x-checksum", HeaderValue::from_static("none"));
                Chunked {
                    trailers: Some(trailers),
                    ..Chunked::new(with_empty.collect(), false)
                }
            }
            Self::Failing => {
                let half = bytes.slice(..bytes.len() / 2);
                Chunked {
                    error: Some("connection reset"),
                    ..Chunked::cut(&half, &[half.len() / 2], false)
                }
            }
            Self::Cuts { at, exact, stall } => Chunked {
                stall: *stall,
                ..Chunked::cut(bytes, at, *exact)
            },
        }
    }
}

/// One request, and everything around it that can change its answer.
#[derive(Debug, Clone)]
struct Case {
    method: Method,
    content_type: Option<&'static str>,
    mcp_method: Option<&'static str>,
    encoding: Option<&'static str>,
    length: Length,
    /// A header sent after the others (a second `Mcp-Method`, say).
    extra: Option<(&'static str, &'static str)>,
    sample: &'static Sample,
    delivery: Delivery,
    setup: Setup,
    guard: bool,
    scan: bool,
    /// Whether the request carries alice's `Principal`.
    caller: bool,
    answer: Answer,
}

impl Case {
    /// A JSON POST of `sample` in one chunk, everything else at its default.
    fn post(sample: &'static Sample) -> Self {
        Self {
            method: Method::POST,
            content_type: Some(JSON),
            mcp_method: None,
            encoding: None,
            length: Length::Actual,
            extra: None,
            sample,
            delivery: Delivery::Whole,
            setup: SETUPS[0],
            guard: true,
            scan: true,
            caller: false,
            answer: whole(false),
        }
    }

    /// The request.
    fn request(&self) -> Request<Chunked> {
        let bytes = &self.sample.bytes;
        let mut request = Request::builder().method(self.method.clone()).uri("/mcp");
        let length = match self.length {
            Length::Actual => Some(bytes.len().to_string()),
            Length::Absent => None,
            Length::Declared(length) => Some(length.to_owned()),
        };
        let headers = [
            (header::CONTENT_TYPE.as_str(), self.content_type),
            ("mcp-method", self.mcp_method),
            (header::CONTENT_ENCODING.as_str(), self.encoding),
            (header::CONTENT_LENGTH.as_str(), length.as_deref()),
        ];
        let extra = self.extra.map(|(name, value)| (name, Some(value)));
        for (name, value) in headers.into_iter().chain(extra) {
            if let Some(value) = value {
                request = request.header(name, value);
            }
        }
        let mut request = request.body(self.delivery.body(bytes)).unwrap();
        if self.caller {
            request.extensions_mut().insert(Principal::new(ALICE));
        }
        request
    }
}

impl Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} `{}` [content-type {:?}, mcp-method {:?}, encoding {:?}, length {:?}, extra {:?}, {:?}, {}, guard {}, scan {}, caller {}, answers {}]",
            self.method,
            self.sample.name,
            self.content_type,
            self.mcp_method,
            self.encoding,
            self.length,
            self.extra,
            self.delivery,
            self.setup.name,
            self.guard,
            self.scan,
            if self.caller { ALICE } else { "anonymous" },
            self.answer,
        )
    }
}

/// The `Mcp-Method` headers worth sending with `sample`: none, each
/// intercepted method, another, and the sample's own.
fn headers_for(sample: &Sample) -> Vec<Option<&'static str>> {
    let mut headers = vec![
        None,
        Some("initialize"),
        Some("server/discover"),
        Some("subscriptions/listen"),
        Some("tools/call"),
    ];
    if !headers.contains(&sample.method) {
        headers.push(sample.method);
    }
    headers
}

const CONTENT_TYPES: [Option<&str>; 4] = [
    Some(JSON),
    Some("application/x+json"),
    Some("text/plain"),
    None,
];

/// `case` with the layer options, the caller and the inner's answer set by
/// the low bits of `bits`, the answer in chunks of `chunk` bytes.
fn varied(case: Case, bits: u64, chunk: usize) -> Case {
    Case {
        guard: bits & 1 == 0,
        scan: bits & 2 == 0,
        caller: bits & 4 == 0,
        answer: Answer {
            sse: bits & 8 == 0,
            fail: bits & 16 == 0,
            chunk,
        },
        ..case
    }
}

/// Every case of the differential test.
static CORPUS: LazyLock<Vec<Case>> = LazyLock::new(corpus);

/// The corpus: each sample under every head, delivery and profile, the
/// options spread over them; then every option, content coding, declared
/// length, other HTTP method and doubled header, each over every sample.
fn corpus() -> Vec<Case> {
    let deliveries = [
        Delivery::Whole,
        Delivery::Stream,
        Delivery::Small(7),
        Delivery::Trailers,
        Delivery::Failing,
    ];
    let mut cases = Vec::new();
    for sample in SAMPLES.iter() {
        let post = Case::post(sample);
        for content_type in CONTENT_TYPES {
            for mcp_method in headers_for(sample) {
                for delivery in &deliveries {
                    for setup in SETUPS {
                        // Options, caller and answer follow the case's index
                        // (scrambled): every mix of them meets many heads and
                        // deliveries without multiplying the corpus.
                        let mix = (cases.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                        let length = match delivery {
                            Delivery::Whole | Delivery::Small(_) => Length::Actual,
                            _ => Length::Absent,
                        };
                        let case = Case {
                            content_type,
                            mcp_method,
                            length,
                            delivery: delivery.clone(),
                            setup,
                            ..post.clone()
                        };
                        let chunk = [usize::MAX, 5, 33][(mix >> 5) as usize % 3];
                        cases.push(varied(case, mix, chunk));
                    }
                }
            }
        }
        for mcp_method in [None, sample.method] {
            for options in 0..32 {
                let case = Case {
                    mcp_method,
                    ..post.clone()
                };
                cases.push(varied(case, options, 11));
            }
            for encoding in ["gzip", "identity", "", "IDENTITY"] {
                for content_type in CONTENT_TYPES {
                    cases.push(Case {
                        content_type,
                        mcp_method,
                        encoding: Some(encoding),
                        ..post.clone()
                    });
                }
            }
            for extra in [
                ("mcp-method", "subscriptions/listen"),
                ("mcp-method", "server/discover"),
                ("content-type", "text/plain"),
                ("content-encoding", "gzip"),
            ] {
                cases.push(Case {
                    mcp_method,
                    extra: Some(extra),
                    ..post.clone()
                });
            }
        }
        for mcp_method in headers_for(sample) {
            for declared in ["300", "100000", "2000000"] {
                for content_type in [Some(JSON), Some("text/plain")] {
                    for setup in SETUPS {
                        cases.push(Case {
                            content_type,
                            mcp_method,
                            length: Length::Declared(declared),
                            delivery: Delivery::Stream,
                            setup,
                            ..post.clone()
                        });
                    }
                }
            }
            for method in [Method::GET, Method::DELETE, Method::PUT] {
                for content_type in [Some(JSON), None] {
                    cases.push(Case {
                        method: method.clone(),
                        content_type,
                        mcp_method,
                        ..post.clone()
                    });
                }
            }
        }
    }
    cases
}

// ---------------------------------------------------------------------------
// Running a case.
// ---------------------------------------------------------------------------

/// All a client and the inner service can tell of one exchange.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    status: StatusCode,
    headers: HeaderMap,
    hint: (u64, Option<u64>),
    body: Drained,
    rejection: Option<Rejection>,
    calls: Vec<Seen>,
    hooks: Vec<String>,
}

/// Sends `request` through `service`: the response head, its size hint, its body drained.
async fn exchange<S, B>(
    service: S,
    request: Request<Chunked>,
) -> (response::Parts, (u64, Option<u64>), Drained)
where
    S: Service<Request<Chunked>, Response = Response<B>, Error = Infallible>,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let Ok(response) = service.oneshot(request).await;
    let (parts, body) = response.into_parts();
    let hint = body.size_hint();
    (parts, (hint.lower(), hint.upper()), Drained::of(body).await)
}

/// `case` through what `stack` layers around a recorder, with a fresh profile.
async fn observe<L, B>(case: &Case, stack: impl FnOnce(ServerProfile) -> L) -> Observed
where
    L: Layer<Recorder>,
    L::Service: Service<Request<Chunked>, Response = Response<B>, Error = Infallible>,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let (profile, journal) = case.setup.profile();
    let (inner, log) = Recorder::new(case.answer);
    let exchanged = exchange(stack(profile).layer(inner), case.request());
    let (parts, hint, body) = tokio::time::timeout(Duration::from_secs(20), exchanged)
        .await
        .unwrap_or_else(|_| panic!("{case}: no answer"));
    Observed {
        status: parts.status,
        headers: parts.headers,
        hint,
        body,
        rejection: parts.extensions.get::<Rejection>().cloned(),
        calls: take(&log),
        hooks: take(&journal),
    }
}

/// The two layers `EdgeLayer` stands for, capabilities outside.
type Stacked = ServiceBuilder<Stack<ListenFilterLayer, Stack<CapabilitiesLayer, Identity>>>;

/// The stacked layers over `profile`, with the options of `case`.
fn stacked(case: &Case, profile: ServerProfile) -> Stacked {
    ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()).scan_pass_through(case.scan))
        .layer(
            ListenFilterLayer::new(profile)
                .guard_stream(case.guard)
                .scan_pass_through(case.scan),
        )
}

/// `case` through the stacked layers and through `EdgeLayer`. A request
/// that breaks a rule of each layer is refused by whichever looks first,
/// which the stacking order decides: where both refuse it without calling
/// the inner service for different reasons, `EdgeLayer`'s answer must be
/// exactly that of one of the two layers alone, and it stands for the
/// stacked one.
async fn both(case: &Case) -> (Observed, Observed) {
    let stacked = observe(case, |profile| stacked(case, profile)).await;
    let combined = observe(case, |profile| {
        EdgeLayer::new(profile)
            .guard_stream(case.guard)
            .scan_pass_through(case.scan)
    })
    .await;
    let refused = |o: &Observed| o.rejection.is_some() && o.calls.is_empty();
    if differences(&stacked, &combined).is_empty() || !refused(&stacked) || !refused(&combined) {
        return (stacked, combined);
    }
    let caps = observe(case, |profile| {
        CapabilitiesLayer::new(profile).scan_pass_through(case.scan)
    })
    .await;
    let listen = observe(case, |profile| {
        ListenFilterLayer::new(profile)
            .guard_stream(case.guard)
            .scan_pass_through(case.scan)
    })
    .await;
    let alone = [caps, listen]
        .into_iter()
        .any(|alone| differences(&alone, &combined).is_empty());
    (if alone { combined.clone() } else { stacked }, combined)
}

/// The fields in which two observations differ, by name.
fn differences(a: &Observed, b: &Observed) -> Vec<&'static str> {
    let fields = [
        ("status", a.status == b.status),
        ("headers", a.headers == b.headers),
        ("size hint", a.hint == b.hint),
        ("body", a.body == b.body),
        ("rejection", a.rejection == b.rejection),
        ("inner calls", a.calls == b.calls),
        ("hook calls", a.hooks == b.hooks),
    ];
    fields
        .into_iter()
        .filter(|(_, same)| !same)
        .map(|(name, _)| name)
        .collect()
}

/// What happened in an exchange, for the corpus' coverage.
fn kinds(case: &Case, observed: &Observed) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if observed.body.error.is_some() {
        kinds.push("the client read the inner's error");
    }
    if let Some(rejection) = &observed.rejection {
        kinds.push(match rejection {
            Rejection::HeaderMismatch => "-32020",
            Rejection::Parse => "-32700",
            Rejection::InvalidRequest(_) => "-32600",
            Rejection::BodyTooLarge { .. } => "413",
            Rejection::BodyUnreadable => "unreadable",
            Rejection::Encoded => "415",
            Rejection::Listen(ListenError::MissingTasksCapability) => "-32021",
            Rejection::Listen(_) => "-32602",
            _ => "another rejection",
        });
    }
    for seen in &observed.calls {
        let changed = observed.body.data != seen.answered;
        kinds.push(match (&seen.filter, changed) {
            (Some(_), true) => "listen stream guarded",
            (Some(_), false) => "listen honoured, answer untouched",
            (None, true) => "capabilities rewritten",
            (None, false) => "answer untouched",
        });
        if seen.body.error.is_some() {
            kinds.push("the inner read the body's error");
        } else if seen.body.data.len() < case.sample.bytes.len() && seen.filter.is_none() {
            kinds.push("body cut short");
        }
        if seen.body.trailers.is_some() {
            kinds.push("the inner read the trailers");
        }
    }
    kinds
}

// ---------------------------------------------------------------------------
// 1. Stacked and combined agree.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn edge_answers_every_corpus_case_as_the_stacked_layers() {
    let mut differing = Vec::new();
    let mut covered = BTreeSet::new();
    for case in CORPUS.iter() {
        let (stacked, combined) = both(case).await;
        let fields = differences(&stacked, &combined);
        if !fields.is_empty() {
            differing.push(format!(
                "{case}: {fields:?} differ\n  stacked: {stacked:?}\n  edge:    {combined:?}"
            ));
        }
        covered.extend(kinds(case, &stacked));
    }
    let missing: Vec<&str> = [
        "-32020",
        "-32700",
        "-32600",
        "413",
        "unreadable",
        "415",
        "-32021",
        "-32602",
        "listen stream guarded",
        "listen honoured, answer untouched",
        "capabilities rewritten",
        "answer untouched",
        "the inner read the body's error",
        "body cut short",
        "the inner read the trailers",
        "the client read the inner's error",
    ]
    .into_iter()
    .filter(|kind| !covered.contains(kind))
    .collect();
    assert!(missing.is_empty(), "no case led to {missing:?}");
    assert!(
        differing.is_empty(),
        "{} of {} cases differ; the first:\n{}",
        differing.len(),
        CORPUS.len(),
        differing[..differing.len().min(3)].join("\n")
    );
}

/// The comparison sees what a layer does: without `CapabilitiesLayer`, a
/// discover's answer is not the stacked one.
#[tokio::test]
async fn the_comparison_tells_a_missing_layer() {
    let discover = sample("discover");
    let case = Case::post(discover);
    let stacked = observe(&case, |profile| stacked(&case, profile)).await;
    let listen_only = observe(&case, ListenFilterLayer::new).await;
    assert_eq!(
        differences(&stacked, &listen_only),
        ["headers", "size hint", "body"],
        "{case}"
    );
}

/// A body in one chunk whose end is told only by the next poll (a chunked
/// upload, a stream without `Content-Length`). Stacked, the outer layer's
/// peek has met the end before the inner layer reads the chunk again, so
/// the inner one scans it as the body's last chunk; `EdgeLayer`'s one peek
/// must come to the same answer.
#[tokio::test]
async fn a_truncated_body_streamed_in_one_chunk_is_answered_as_stacked() {
    for (name, mcp_method) in [
        ("truncated discover", None),
        ("truncated discover", Some("subscriptions/listen")),
        ("truncated listen", Some("tools/call")),
    ] {
        let case = Case {
            mcp_method,
            length: Length::Absent,
            delivery: Delivery::Stream,
            ..Case::post(sample(name))
        };
        let (stacked, combined) = both(&case).await;
        assert_eq!(
            (combined.status, &combined.rejection, combined.calls.len()),
            (stacked.status, &stacked.rejection, stacked.calls.len()),
            "{case}: EdgeLayer (left) and the stacked layers (right) disagree on `{}`",
            String::from_utf8_lossy(&case.sample.bytes)
        );
    }
}

/// A tokio runtime for one property case.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

proptest! {
    /// Any case of the corpus, its body cut anywhere and the inner's answer
    /// in chunks of any size: the same observations both ways.
    #[test]
    fn edge_agrees_with_the_stack_on_any_chunking(
        pick in any::<Index>(),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
        exact in any::<bool>(),
        stall in any::<bool>(),
        chunk in 1usize..80,
    ) {
        let mut case = pick.get(CORPUS.as_slice()).clone();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(case.sample.bytes.len() + 1)).collect();
        at.sort_unstable();
        case.delivery = Delivery::Cuts { at, exact, stall };
        case.answer.chunk = chunk;
        let (stacked, combined) = runtime().block_on(both(&case));
        prop_assert!(
            differences(&stacked, &combined).is_empty(),
            "{}: {:?} differ\n  stacked: {:?}\n  edge:    {:?}",
            case, differences(&stacked, &combined), stacked, combined
        );
    }
}

// ---------------------------------------------------------------------------
// 2. Bodies that are not `Unpin`.
// ---------------------------------------------------------------------------

/// Implemented twice for an `Unpin` type, once for any other: naming
/// `check` compiles only for a type that is not `Unpin`.
trait NotUnpin<Which> {
    fn check() {}
}
impl<T: ?Sized> NotUnpin<()> for T {}
impl<T: ?Sized + Unpin> NotUnpin<u8> for T {}

/// Sends a discover, a listen and a tools/call, each body in `!Unpin`
/// chunks, through `service` (answered in `!Unpin` chunks too), and checks
/// each answer by what the stack is said to do.
async fn check_unpin_free<S, B>(
    name: &str,
    service: S,
    (profile, log): (&ServerProfile, &Log),
    rewrites: bool,
    honours: bool,
) where
    S: Service<Request<Chunked>, Response = Response<B>, Error = Infallible> + Clone,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let post = |body: String| {
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, JSON)
            .body(Chunked::split(&Bytes::from(body), 5, false))
            .unwrap()
    };
    let discover = modern_body("server/discover", json!(1), json!({}));
    let (_, _, body) = exchange(service.clone(), post(discover)).await;
    let capabilities = &sse_messages(&body.data)[1]["result"]["capabilities"];
    let expected: Value = match rewrites {
        true => {
            let mut ours = profile.capabilities_for(None, Era::Modern);
            ours.insert("experimental".into(), json!({"inner": {}}));
            Value::Object(ours)
        }
        false => serde_json::from_str(INNER_CAPS).unwrap(),
    };
    assert_eq!(capabilities, &expected, "{name}: discover");

    let asked = r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme","demo://private/notes"]}"#;
    let honoured = r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme"]}"#;
    let listen = listen("\"u-1\"", &format!(r#"{{"notifications":{asked}}}"#));
    let (_, _, body) = exchange(service.clone(), post(listen)).await;
    let seen = take(log).pop().expect("the inner was called");
    let ack = &sse_messages(&body.data)[0]["params"]["notifications"];
    match honours {
        true => {
            let filter = seen.filter.expect("a HonouredFilter");
            assert_eq!(
                filter,
                (honoured.to_owned(), "\"u-1\"".to_owned()),
                "{name}"
            );
            assert_eq!(
                ack,
                &serde_json::from_str::<Value>(honoured).unwrap(),
                "{name}"
            );
        }
        false => assert_eq!(
            seen.filter, None,
            "{name}: no filter without the listen layer"
        ),
    }

    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
    let (_, _, body) = exchange(service, post(call.to_owned())).await;
    let seen = take(log).pop().expect("the inner was called");
    assert_eq!(
        seen.body.data, call,
        "{name}: the inner read the body byte for byte"
    );
    assert_eq!(
        body.data, seen.answered,
        "{name}: the answer passed byte for byte"
    );
}

#[tokio::test]
async fn bodies_that_are_not_unpin_pass_every_layer() {
    <Chunked as NotUnpin<_>>::check();
    let (profile, _) = SETUPS[0].profile();
    let (inner, log) = Recorder::new(Answer {
        chunk: 9,
        ..whole(true)
    });
    let caps = CapabilitiesLayer::new(profile.clone());
    let listen = ListenFilterLayer::new(profile.clone());
    let both = ServiceBuilder::new()
        .layer(caps.clone())
        .layer(listen.clone());
    let edge = EdgeLayer::new(profile.clone());
    let with = (&profile, &log);
    check_unpin_free(
        "CapabilitiesLayer",
        caps.layer(inner.clone()),
        with,
        true,
        false,
    )
    .await;
    check_unpin_free(
        "ListenFilterLayer",
        listen.layer(inner.clone()),
        with,
        false,
        true,
    )
    .await;
    check_unpin_free(
        "both stacked",
        both.service(inner.clone()),
        with,
        true,
        true,
    )
    .await;
    check_unpin_free("EdgeLayer", edge.layer(inner), with, true, true).await;
}

// ---------------------------------------------------------------------------
// 3. What the types promise.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 4. Readiness.
// ---------------------------------------------------------------------------

type MockRequest = Request<RequestBody<Chunked>>;
type MockResponse = Response<Chunked>;

#[tokio::test]
async fn edge_is_ready_when_the_inner_is_and_calls_the_one_readied() {
    let (profile, _) = SETUPS[0].profile();
    let (mut service, mut handle) =
        tower_test::mock::spawn_layer::<MockRequest, MockResponse, _>(EdgeLayer::new(profile));
    let answer = Answer {
        chunk: 4,
        ..whole(false)
    };

    handle.allow(0);
    assert!(
        service.poll_ready().is_pending(),
        "pending while the inner is"
    );
    handle.allow(1);
    assert!(service.is_woken(), "the inner's wake-up reaches the caller");
    assert!(matches!(service.poll_ready(), Poll::Ready(Ok(()))));

    // A discover is handed on only once its body is read, from the future:
    // a clone that was never readied would panic when called.
    let discover = Case {
        delivery: Delivery::Small(3),
        ..Case::post(sample("discover"))
    };
    let future = tokio::spawn(service.call(discover.request()));
    let (request, respond) = handle.next_request().await.expect("the inner was called");
    let body = Drained::of(request.into_body()).await;
    assert_eq!(body.data, discover.sample.bytes);
    respond.send_response(answer.respond(&body.data).0);
    let response = future.await.unwrap().unwrap();
    let message: Value =
        serde_json::from_slice(&Drained::of(response.into_body()).await.data).unwrap();
    assert_eq!(message["result"]["capabilities"]["logging"], json!({}));

    // The permit was spent on that call: the service left is not ready.
    assert!(
        service.poll_ready().is_pending(),
        "a spent permit is not reused"
    );
    handle.allow(1);
    assert!(matches!(service.poll_ready(), Poll::Ready(Ok(()))));
    let listen = Case::post(sample("listen"));
    let future = tokio::spawn(service.call(listen.request()));
    let (request, respond) = handle.next_request().await.expect("the inner was called");
    assert!(request.extensions().get::<HonouredFilter>().is_some());
    respond.send_response(Response::new(Chunked::new(Vec::new(), true)));
    assert_eq!(future.await.unwrap().unwrap().status(), StatusCode::OK);

    // The inner's readiness error is the outer's.
    handle.send_error("overloaded");
    match service.poll_ready() {
        Poll::Ready(Err(error)) => assert_eq!(error.to_string(), "overloaded"),
        other => panic!("expected the inner's error, got {other:?}"),
    }
}
