//! `EdgeLayer`, both layers in one: it answers every request exactly as
//! `CapabilitiesLayer` stacked outside `ListenFilterLayer` does (a
//! differential test over a generated corpus, case by case and by property
//! over random chunkings), takes bodies that are not `Unpin`, fits axum and
//! tonic, and keeps the inner service's readiness.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt::{self, Display};
use std::future::{ready, Future};
use std::io;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use mcp_edge::{Era, HonouredFilter, Principal, ServerProfile};
use pin_project_lite::pin_project;
use serde_json::{json, Map, Value};
use tower::Service;

mod common;
use common::{MODERN, SUBSCRIPTION_ID};

/// The corpus and how a case is run, then the tests, by section (each a
/// file of `tests/edge/`); the bodies, profiles and inner service they all
/// use are below.
mod edge {
    mod corpus;
    mod run;

    mod agree;
    mod readiness;
    mod types;
    mod unpin;
}

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
