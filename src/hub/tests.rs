//! The hub on the in-process bus: a listen filter in front, a caller per
//! bearer token, streams read frame by frame on paused tokio time.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use super::{ListChanged, ListenHub, ListenHubBuilder};
use crate::hooks::Principal;
use crate::http::body::RequestBody;
use crate::listen_filter::layer::ListenFilterLayer;
use crate::profile::ServerProfile;
use crate::testing::authenticate;

const PUBLIC: &str = "demo://public";
const README: &str = "demo://public/readme";
const ALICE_NOTES: &str = "demo://users/alice/notes";
const BOB_NOTES: &str = "demo://users/bob/notes";
const TASKS_META: &str = r#"{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// Who may read what; `grants` can change while streams are open.
type Grants = Arc<Mutex<Vec<(&'static str, &'static str)>>>;

fn readable(grants: &Grants, caller: Option<&Principal>, uri: &str) -> bool {
    if uri.starts_with("demo://public") {
        return true;
    }
    let name = caller.map(Principal::as_str);
    grants
        .lock()
        .unwrap()
        .iter()
        .any(|(who, what)| Some(*who) == name && uri.starts_with(what))
}

/// A profile reading `grants`, counting its access hook's calls.
fn profile(grants: Grants, ttl: Duration, calls: Arc<AtomicUsize>) -> ServerProfile {
    ServerProfile::builder()
        .access_ttl(ttl)
        .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
            calls.fetch_add(1, Ordering::SeqCst);
            let answers: Vec<bool> = uris
                .iter()
                .map(|uri| readable(&grants, caller, uri))
                .collect();
            std::future::ready(answers)
        })
        .task_directory(|owner: &Principal, ids: &[&str]| {
            let owner = owner.as_str().to_owned();
            std::future::ready(
                ids.iter()
                    .map(|id| id.starts_with(&format!("task-{owner}")))
                    .collect(),
            )
        })
        .tasks(true)
        .build()
        .unwrap()
}

fn grants() -> Grants {
    Arc::new(Mutex::new(vec![("alice", ALICE_NOTES), ("bob", BOB_NOTES)]))
}

/// The stack: auth, the listen filter, the hub, an inner that answers 200.
struct Stack {
    hub: ListenHub,
    calls: Arc<AtomicUsize>,
    grants: Grants,
    profile: ServerProfile,
}

impl Stack {
    fn new(build: impl FnOnce(ListenHubBuilder) -> ListenHubBuilder) -> Self {
        Self::with_ttl(Duration::from_secs(30), build)
    }

    fn with_ttl(ttl: Duration, build: impl FnOnce(ListenHubBuilder) -> ListenHubBuilder) -> Self {
        let (grants, calls) = (grants(), Arc::new(AtomicUsize::new(0)));
        let profile = profile(grants.clone(), ttl, calls.clone());
        let hub = build(ListenHub::builder(profile.clone())).build();
        Self {
            hub,
            calls,
            grants,
            profile,
        }
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Response<Boxed> {
        let inner = tower::service_fn(|_: Request<RequestBody<Full<Bytes>>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"inner"))))
        });
        let mut service = ServiceBuilder::new()
            .map_request(authenticate)
            .layer(ListenFilterLayer::new(self.profile.clone()))
            .layer(self.hub.layer())
            .service(inner);
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        response.map(BodyExt::boxed_unsync)
    }

    async fn listen(&self, token: Option<&str>, id: u32, notifications: Value) -> Stream {
        let response = self.send(listen(token, id, notifications)).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        Stream(response.into_body())
    }
}

fn listen(token: Option<&str>, id: u32, notifications: Value) -> Request<Full<Bytes>> {
    listen_as(token, id.into(), notifications)
}

/// A listen of request (and subscription) `id`.
fn listen_as(token: Option<&str>, id: Value, notifications: Value) -> Request<Full<Bytes>> {
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {"_meta": serde_json::from_str::<Value>(TASKS_META).unwrap(), "notifications": notifications},
    })
    .to_string();
    let mut request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_LENGTH, body.len());
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request.body(Full::new(Bytes::from(body))).unwrap()
}

/// A response body through the whole stack.
type Boxed = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// A listen stream, read event by event.
struct Stream(Boxed);

impl Stream {
    /// The next frame's text, or `None` at the end; fails if nothing comes
    /// within a minute of (paused) time.
    async fn next(&mut self) -> Option<String> {
        let frame = tokio::time::timeout(Duration::from_secs(60), self.0.frame())
            .await
            .expect("the stream sent something within a minute")?;
        let data = frame.unwrap().into_data().unwrap();
        Some(String::from_utf8(data.to_vec()).unwrap())
    }

    /// The next frame as a JSON-RPC message.
    async fn message(&mut self) -> Value {
        let text = self.next().await.expect("a message");
        let data = text
            .strip_prefix("data: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("an event: {text:?}"));
        serde_json::from_str(data).unwrap()
    }

    /// Nothing but keep-alives for the next `seconds` of paused time.
    async fn quiet(&mut self, seconds: u64) {
        let read = tokio::time::timeout(Duration::from_secs(seconds), self.0.frame()).await;
        match read {
            Err(_) => {}
            Ok(frame) => {
                let data = frame.map(|f| f.unwrap().into_data().unwrap());
                assert_eq!(
                    data.as_deref(),
                    Some(&b": keep-alive\n\n"[..]),
                    "expected quiet"
                );
            }
        }
    }
}

fn tag(message: &Value) -> &Value {
    &message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

#[tokio::test(start_paused = true)]
async fn delivers_what_each_stream_honours_and_may_read() {
    let stack = Stack::new(|b| b);
    let mut alice = stack
        .listen(Some("alice-token"), 1, json!({"resourceSubscriptions": [ALICE_NOTES, BOB_NOTES, PUBLIC], "toolsListChanged": true}))
        .await;
    let ack = alice.message().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": [ALICE_NOTES, PUBLIC], "toolsListChanged": true})
    );
    assert_eq!(tag(&ack), 1);
    let mut bob = stack
        .listen(
            Some("bob-token"),
            "7".parse().unwrap(),
            json!({"resourceSubscriptions": [BOB_NOTES]}),
        )
        .await;
    bob.message().await;

    let publisher = stack.hub.publisher();
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 1);
    let update = alice.message().await;
    assert_eq!(update["method"], "notifications/resources/updated");
    assert_eq!(update["params"]["uri"], ALICE_NOTES);
    assert_eq!(tag(&update), 1);
    // Below an honoured URI, by path only.
    assert_eq!(publisher.resource_updated(README).await.streams, 1);
    assert_eq!(alice.message().await["params"]["uri"], README);
    assert_eq!(
        publisher.resource_updated("demo://publicity").await.streams,
        0
    );
    assert_eq!(
        publisher
            .resource_updated("demo://public/../users/bob/notes")
            .await
            .streams,
        0
    );
    // Bob's notes reach bob only; alice's ack never held them.
    assert_eq!(publisher.resource_updated(BOB_NOTES).await.streams, 1);
    let update = bob.message().await;
    assert_eq!(
        (update["params"]["uri"].as_str(), tag(&update).as_i64()),
        (Some(BOB_NOTES), Some(7))
    );
    // List changes only where honoured.
    assert_eq!(publisher.list_changed(ListChanged::Tools).await.streams, 1);
    assert_eq!(
        alice.message().await["method"],
        "notifications/tools/list_changed"
    );
    assert_eq!(
        publisher.list_changed(ListChanged::Prompts).await.streams,
        0
    );
    alice.quiet(10).await;
    bob.quiet(10).await;
}

/// Short subscription ids are held in the stream itself, longer ones
/// apart: every event carries its stream's, whatever its length.
#[tokio::test(start_paused = true)]
async fn events_carry_a_subscription_id_of_any_length() {
    let stack = Stack::new(|b| b);
    let publisher = stack.hub.publisher();
    // JSON texts of 8 bytes (the most held in the stream), 9, 20 and 202
    // bytes, and one with an escape.
    let ids = [
        json!(12_345_678),
        json!(123_456_789),
        json!(u64::MAX),
        json!("x".repeat(200)),
        json!("a\"b"),
    ];
    for id in ids {
        let notifications = json!({"resourceSubscriptions": [PUBLIC]});
        let request = listen_as(Some("alice-token"), id.clone(), notifications);
        let response = stack.send(request).await;
        assert_eq!(response.status(), StatusCode::OK, "listen {id}");
        let mut stream = Stream(response.into_body());
        assert_eq!(tag(&stream.message().await), &id);
        assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 1);
        let update = stream.message().await;
        assert_eq!(update["params"]["uri"], PUBLIC);
        assert_eq!(tag(&update), &id);
    }
}

#[tokio::test(start_paused = true)]
async fn task_status_reaches_only_its_owners_streams() {
    let stack = Stack::new(|b| b);
    let mut alice = stack
        .listen(
            Some("alice-token"),
            1,
            json!({"taskIds": ["task-alice-1", "task-bob-1"]}),
        )
        .await;
    assert_eq!(
        alice.message().await["params"]["notifications"],
        json!({"taskIds": ["task-alice-1"]})
    );
    let mut bob = stack
        .listen(Some("bob-token"), 2, json!({"taskIds": ["task-bob-1"]}))
        .await;
    bob.message().await;
    let publisher = stack.hub.publisher();
    let (alice_id, bob_id) = (Principal::new("alice"), Principal::new("bob"));
    let status = json!({"status": "completed"}).as_object().unwrap().clone();
    assert_eq!(
        publisher
            .task_status(&alice_id, "task-alice-1", status.clone())
            .await
            .streams,
        1
    );
    let message = alice.message().await;
    assert_eq!(message["method"], "notifications/tasks");
    assert_eq!(message["params"]["taskId"], "task-alice-1");
    assert_eq!(message["params"]["status"], "completed");
    // A task id named by another owner reaches nobody's stream but its owner's.
    assert_eq!(
        publisher
            .task_status(&alice_id, "task-bob-1", status.clone())
            .await
            .streams,
        0
    );
    assert_eq!(
        publisher
            .task_status(&bob_id, "task-bob-1", status)
            .await
            .streams,
        1
    );
    assert_eq!(bob.message().await["params"]["taskId"], "task-bob-1");
    alice.quiet(5).await;
}

#[tokio::test(start_paused = true)]
async fn list_changes_coalesce_and_a_stream_that_falls_behind_ends_with_an_error() {
    let stack = Stack::new(|b| b.backlog(3));
    let mut alice = stack
        .listen(
            Some("alice-token"),
            1,
            json!({"toolsListChanged": true, "resourceSubscriptions": [PUBLIC]}),
        )
        .await;
    alice.message().await;
    let publisher = stack.hub.publisher();
    for _ in 0..5 {
        assert_eq!(publisher.list_changed(ListChanged::Tools).await.streams, 1);
    }
    assert_eq!(publisher.resource_updated(README).await.streams, 1);
    assert_eq!(
        alice.message().await["method"],
        "notifications/tools/list_changed"
    );
    assert_eq!(alice.message().await["params"]["uri"], README);
    alice.quiet(5).await;
    // Three waiting, a fourth: the stream ends with an error for its listen.
    for _ in 0..3 {
        assert_eq!(publisher.resource_updated(README).await.streams, 1);
    }
    assert_eq!(publisher.resource_updated(README).await.streams, 0);
    assert_eq!(stack.hub.open_streams(), 0, "its slot is free at once");
    let end = alice.message().await;
    assert_eq!(end["id"], 1);
    assert_eq!(end["error"]["code"], -32013);
    assert_eq!(end["error"]["data"], json!({"limit": "backlog", "max": 3}));
    assert_eq!(alice.next().await, None);
}

/// Alice's listen to tool list changes, its acknowledgment read.
async fn acknowledged_tools_listen(stack: &Stack) -> Stream {
    let mut alice = stack
        .listen(Some("alice-token"), 1, json!({"toolsListChanged": true}))
        .await;
    alice.message().await;
    alice
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_sends_keep_alives() {
    let stack = Stack::new(|b| b.keep_alive(Duration::from_secs(15)));
    let mut alice = acknowledged_tools_listen(&stack).await;
    let start = tokio::time::Instant::now();
    assert_eq!(alice.next().await.as_deref(), Some(": keep-alive\n\n"));
    assert_eq!(start.elapsed(), Duration::from_secs(15));
    // An event puts the next keep-alive off.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let published = stack.hub.publisher().list_changed(ListChanged::Tools).await;
    assert_eq!(published.streams, 1);
    alice.message().await;
    let sent = tokio::time::Instant::now();
    assert_eq!(alice.next().await.as_deref(), Some(": keep-alive\n\n"));
    // Not before a whole period of silence (when exactly: the next test).
    let idle = sent.elapsed();
    assert!(
        (Duration::from_secs(15)..=Duration::from_secs(30)).contains(&idle),
        "{idle:?}"
    );
}

/// Silence lasts at most the configured interval: after events at 10 s and
/// 20 s into the period, the next keep-alive comes 15 s after the last one,
/// not at the timer's next whole period.
#[tokio::test(start_paused = true)]
async fn a_keep_alive_comes_one_interval_after_the_last_event() {
    let stack = Stack::new(|b| b.keep_alive(Duration::from_secs(15)));
    let mut alice = acknowledged_tools_listen(&stack).await;
    let start = tokio::time::Instant::now();
    for at in [10, 20] {
        tokio::time::sleep_until(start + Duration::from_secs(at)).await;
        let published = stack.hub.publisher().list_changed(ListChanged::Tools).await;
        assert_eq!(published.streams, 1);
        alice.message().await;
    }
    assert_eq!(alice.next().await.as_deref(), Some(": keep-alive\n\n"));
    assert_eq!(start.elapsed(), Duration::from_secs(35));
    // And then one every interval while it stays idle.
    assert_eq!(alice.next().await.as_deref(), Some(": keep-alive\n\n"));
    assert_eq!(start.elapsed(), Duration::from_secs(50));
}

#[tokio::test(start_paused = true)]
async fn admission_caps_streams_per_caller_and_in_all() {
    let stack = Stack::new(|b| b.max_streams(3).max_streams_per_caller(2));
    let ask = json!({"toolsListChanged": true});
    let first = stack.listen(Some("alice-token"), 1, ask.clone()).await;
    let _second = stack.listen(Some("alice-token"), 2, ask.clone()).await;
    let refused = stack
        .send(listen(Some("alice-token"), 3, ask.clone()))
        .await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["id"], 3);
    assert_eq!(error["error"]["code"], -32013);
    assert_eq!(
        error["error"]["data"],
        json!({"limit": "streams_per_caller", "max": 2, "retryAfter": 5})
    );
    // Anonymous callers share one bucket; the total cap holds across buckets.
    let _anonymous = stack.listen(None, 4, ask.clone()).await;
    let refused = stack.send(listen(Some("bob-token"), 5, ask.clone())).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"]["data"],
        json!({"limit": "streams", "max": 3, "retryAfter": 5})
    );
    // Closing a stream frees its slot at once.
    drop(first);
    assert_eq!(stack.hub.open_streams(), 2);
    let _again = stack.listen(Some("alice-token"), 6, ask).await;
    assert_eq!(stack.hub.open_streams(), 3);
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_every_stream_with_the_listens_own_result() {
    let stack = Stack::new(|b| b);
    let mut alice = stack
        .listen(Some("alice-token"), 1, json!({"toolsListChanged": true}))
        .await;
    alice.message().await;
    let published = stack.hub.publisher().list_changed(ListChanged::Tools).await;
    assert_eq!(published.streams, 1);
    stack.hub.shutdown();
    // What was queued goes first.
    assert_eq!(
        alice.message().await["method"],
        "notifications/tools/list_changed"
    );
    let end = alice.message().await;
    assert_eq!(
        end,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}})
    );
    assert_eq!(alice.next().await, None);
    // A listen after it: acknowledged, then ended the same way.
    let mut late = stack
        .listen(Some("bob-token"), 2, json!({"toolsListChanged": true}))
        .await;
    assert_eq!(
        late.message().await["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(late.message().await["result"]["resultType"], "complete");
    assert_eq!(late.next().await, None);
}

#[tokio::test(start_paused = true)]
async fn updates_are_re_authorized_at_send_time_through_the_cache() {
    // With the default TTL the hook is asked once per caller and URI.
    let stack = Stack::new(|b| b);
    let mut alice = stack
        .listen(
            Some("alice-token"),
            1,
            json!({"resourceSubscriptions": [ALICE_NOTES]}),
        )
        .await;
    alice.message().await;
    let publisher = stack.hub.publisher();
    let asked = stack.calls.load(Ordering::SeqCst);
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 1);
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 1);
    assert_eq!(stack.calls.load(Ordering::SeqCst), asked + 1);
    // Revoked: within the TTL the decision holds.
    stack.grants.lock().unwrap().clear();
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 1);

    // With no TTL every update asks, and a revoked reader hears nothing more.
    let stack = Stack::with_ttl(Duration::ZERO, |b| b);
    let mut alice = stack
        .listen(
            Some("alice-token"),
            1,
            json!({"resourceSubscriptions": [ALICE_NOTES]}),
        )
        .await;
    alice.message().await;
    let publisher = stack.hub.publisher();
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 1);
    alice.message().await;
    stack.grants.lock().unwrap().clear();
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 0);
    alice.quiet(5).await;
}

#[tokio::test(start_paused = true)]
async fn other_requests_reach_the_inner_service() {
    let stack = Stack::new(|b| b);
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(call.as_bytes())))
        .unwrap();
    let response = stack.send(request).await;
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        "inner"
    );
    assert_eq!(stack.hub.open_streams(), 0);
}

/// A bus that records what the hub tells it, fails its sends when told
/// to, and hands out the hub's inbox.
#[derive(Clone, Default)]
struct Recording {
    log: Arc<Mutex<Vec<String>>>,
    inbox: Arc<Mutex<Option<super::Inbox>>>,
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl super::Bus for Recording {
    fn start(&self, inbox: super::Inbox) {
        *self.inbox.lock().unwrap() = Some(inbox);
    }

    fn watch(&self, channel: super::Channel<'_>) {
        self.log.lock().unwrap().push(format!("watch {channel:?}"));
    }

    fn unwatch(&self, channel: super::Channel<'_>) {
        self.log
            .lock()
            .unwrap()
            .push(format!("unwatch {channel:?}"));
    }

    fn publish(&self, change: &super::Change) -> super::BusFuture {
        self.log.lock().unwrap().push(format!("publish {change:?}"));
        let result = match self.down.load(Ordering::SeqCst) {
            true => Err(super::BusError::Unavailable),
            false => Ok(()),
        };
        Box::pin(std::future::ready(result))
    }
}

#[tokio::test(start_paused = true)]
async fn the_bus_hears_each_channel_once_and_every_publication() {
    let bus = Recording::default();
    let stack = Stack::new(|b| b.bus(bus.clone()));
    let ask = json!({"resourceSubscriptions": [README], "toolsListChanged": true});
    let mut first = stack.listen(Some("alice-token"), 1, ask.clone()).await;
    let second = stack.listen(Some("bob-token"), 2, ask).await;
    first.message().await;
    let log = |bus: &Recording| std::mem::take(&mut *bus.log.lock().unwrap());
    assert_eq!(
        log(&bus),
        [
            format!("watch Resource({README:?})"),
            "watch List(Tools)".to_owned()
        ]
    );
    drop(second);
    assert!(log(&bus).is_empty(), "another stream still listens");

    // A publication goes here and to the bus; a failed send is told.
    let publisher = stack.hub.publisher();
    let published = publisher.list_changed(ListChanged::Tools).await;
    assert_eq!(
        published,
        super::Published {
            streams: 1,
            remote: Ok(())
        }
    );
    assert_eq!(log(&bus), ["publish ListChanged(Tools)"]);
    first.message().await;
    bus.down.store(true, Ordering::SeqCst);
    let published = publisher.resource_updated(README).await;
    assert_eq!(published.streams, 1, "local streams keep hearing");
    assert_eq!(published.remote, Err(super::BusError::Unavailable));
    assert_eq!(first.message().await["params"]["uri"], README);
    log(&bus);

    // What another instance published arrives through the inbox, and
    // goes to no bus again.
    let inbox = bus.inbox.lock().unwrap().clone().unwrap();
    let change = super::Change::ResourceUpdated { uri: README.into() };
    assert_eq!(inbox.deliver(change).await, 1);
    assert_eq!(first.message().await["params"]["uri"], README);
    assert!(log(&bus).is_empty());

    drop(first);
    assert_eq!(
        log(&bus),
        [
            format!("unwatch Resource({README:?})"),
            "unwatch List(Tools)".to_owned()
        ]
    );
}

/// A stream honouring a URI and one below it is registered under the
/// broader one only: each update reaches it once, and the bus hears the
/// narrower URI's channel only for a stream that honours it alone.
#[tokio::test(start_paused = true)]
async fn a_stream_that_honours_a_uri_and_one_below_it_hears_each_update_once() {
    let bus = Recording::default();
    let stack = Stack::new(|b| b.bus(bus.clone()));
    let log = |bus: &Recording| std::mem::take(&mut *bus.log.lock().unwrap());
    let mut both = stack
        .listen(
            Some("alice-token"),
            1,
            json!({"resourceSubscriptions": [README, PUBLIC, README]}),
        )
        .await;
    let ack = both.message().await;
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([README, PUBLIC])
    );
    assert_eq!(log(&bus), [format!("watch Resource({PUBLIC:?})")]);
    let mut narrow = stack
        .listen(
            Some("bob-token"),
            2,
            json!({"resourceSubscriptions": [README]}),
        )
        .await;
    narrow.message().await;
    assert_eq!(log(&bus), [format!("watch Resource({README:?})")]);

    let publisher = stack.hub.publisher();
    assert_eq!(publisher.resource_updated(README).await.streams, 2);
    assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 1);
    for uri in [README, PUBLIC] {
        assert_eq!(both.message().await["params"]["uri"], uri);
    }
    assert_eq!(narrow.message().await["params"]["uri"], README);
    both.quiet(10).await;
    narrow.quiet(10).await;
    assert_eq!(log(&bus).len(), 2, "both publications went to the bus");

    drop(narrow);
    assert_eq!(log(&bus), [format!("unwatch Resource({README:?})")]);
    drop(both);
    assert_eq!(log(&bus), [format!("unwatch Resource({PUBLIC:?})")]);
}

#[tokio::test(start_paused = true)]
async fn a_watch_hears_what_a_stream_of_its_caller_would() {
    let stack = Stack::new(|b| b);
    let alice = Some(Principal::new("alice"));
    let mut watch = stack.hub.watch(
        alice.clone(),
        [
            crate::filter::Topic::Resource(PUBLIC.into()),
            crate::filter::Topic::Resource(BOB_NOTES.into()),
            crate::filter::Topic::List(ListChanged::Tools),
        ],
    );
    assert_eq!(stack.hub.open_streams(), 0, "a watch is not a stream");
    let publisher = stack.hub.publisher();
    assert_eq!(publisher.resource_updated(README).await.streams, 1);
    // Bob's notes are not alice's to hear, even on a topic she named.
    assert_eq!(publisher.resource_updated(BOB_NOTES).await.streams, 0);
    assert_eq!(publisher.list_changed(ListChanged::Tools).await.streams, 1);
    assert_eq!(
        watch.next().await,
        Some(super::Change::ResourceUpdated { uri: README.into() })
    );
    assert_eq!(
        watch.next().await,
        Some(super::Change::ListChanged(ListChanged::Tools))
    );
    stack.hub.shutdown();
    assert_eq!(watch.next().await, None);
    drop(watch);
    assert_eq!(publisher.list_changed(ListChanged::Tools).await.streams, 0);
}

/// Updates of and below a URI longer than the registry counts by length
/// are heard.
#[tokio::test(start_paused = true)]
async fn a_very_long_uri_is_heard() {
    let stack = Stack::new(|b| b);
    let long = format!("{PUBLIC}/{}", "x".repeat(5000));
    let topics = [crate::filter::Topic::Resource(long.clone())];
    let _watch = stack.hub.watch(Some(Principal::new("alice")), topics);
    let publisher = stack.hub.publisher();
    assert_eq!(publisher.resource_updated(&long).await.streams, 1);
    let below = format!("{long}/below");
    assert_eq!(publisher.resource_updated(&below).await.streams, 1);
    assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 0);
}

/// A caller the decision cache knew as an update was published hears it,
/// though that decision changes (revoked) while the hook is asked about
/// another caller: a delivery keeps its first pass's decisions.
#[tokio::test]
async fn a_decision_holds_for_the_whole_delivery() {
    let (asked, answer) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let hook = (asked.clone(), answer.clone());
    let profile = ServerProfile::builder()
        .resource_access(move |caller: Option<&Principal>, _: &[&str]| {
            let bob = caller.is_some_and(|caller| caller.as_str() == "bob");
            let (asked, answer) = hook.clone();
            async move {
                if bob {
                    asked.notify_one();
                    answer.notified().await;
                }
                vec![true]
            }
        })
        .build()
        .unwrap();
    let hub = ListenHub::new(profile.clone());
    let topics = || [crate::filter::Topic::Resource(PUBLIC.into())];
    let alice_name = Principal::new("alice");
    let mut alice = hub.watch(Some(alice_name.clone()), topics());
    let publisher = hub.publisher();
    // The cache now holds alice's answer.
    assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 1);
    let mut bob = hub.watch(Some(Principal::new("bob")), topics());
    let publication = tokio::spawn(async move { publisher.resource_updated(PUBLIC).await });
    asked.notified().await;
    // While bob's answer is awaited, alice's decision in the cache changes.
    let now = std::time::Instant::now();
    let decisions = profile.decisions();
    decisions.put(Some(&alice_name), PUBLIC, false, now);
    let alices = decisions.get(Some(&alice_name), PUBLIC, now);
    assert_eq!(alices.map(|d| d.readable), Some(false));
    answer.notify_one();
    assert_eq!(publication.await.unwrap().streams, 2);
    let update = Some(super::Change::ResourceUpdated { uri: PUBLIC.into() });
    for _ in 0..2 {
        assert_eq!(alice.next().await, update);
    }
    assert_eq!(bob.next().await, update);
}

/// A cache filled past its bound by one-off decisions (updates of ever new
/// URIs, say) evicts some, not all: the decisions the open streams use
/// stay, so their callers hear each update without the hook being asked
/// again, and the cache keeps its bound.
#[tokio::test]
async fn a_full_cache_keeps_the_decisions_in_use() {
    let stack = Stack::new(|b| b);
    let topics = || [crate::filter::Topic::Resource(PUBLIC.into())];
    let mut streams: Vec<_> = (0..10)
        .map(|i| Principal::new(format!("hot-{i}")))
        .map(|caller| stack.hub.watch(Some(caller), topics()))
        .collect();
    let publisher = stack.hub.publisher();
    let update = Some(super::Change::ResourceUpdated { uri: PUBLIC.into() });
    let calls = || stack.calls.load(Ordering::SeqCst);
    let before = calls();
    assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 10);
    assert_eq!(calls(), before + 10, "one call per caller");

    let decisions = stack.profile.decisions();
    let (filler, now) = (Principal::new("filler"), std::time::Instant::now());
    let capacity = crate::access::MAX_DECISIONS;
    for i in 0..2 * capacity {
        decisions.put(Some(&filler), &format!("demo://other/{i}"), true, now);
        if i % 8192 == 0 {
            assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 10);
        }
    }
    assert!(decisions.len() <= capacity, "{} kept", decisions.len());
    assert_eq!(publisher.resource_updated(PUBLIC).await.streams, 10);
    assert_eq!(calls(), before + 10, "no decision in use was asked again");
    for stream in &mut streams {
        for _ in 0..2 + 2 * capacity / 8192 {
            assert_eq!(stream.next().await, update);
        }
    }
}

/// A waker that records whether the registry's lock was free when it woke.
struct Probe {
    shared: Arc<super::Shared>,
    woken: Mutex<Vec<bool>>,
}

impl std::task::Wake for Probe {
    fn wake(self: Arc<Self>) {
        let free = self.shared.registry.try_lock().is_ok();
        self.woken.lock().unwrap().push(free);
    }
}

/// Streams are woken once the registry's lock is released, after a
/// delivery and at shutdown: a woken stream never waits on it.
#[tokio::test]
async fn streams_are_woken_after_the_registry_lock_is_released() {
    use std::task::{Context, Poll, Waker};
    let hub = ListenHub::new(ServerProfile::builder().build().unwrap());
    let mut watch = hub.watch(None, [crate::filter::Topic::List(ListChanged::Tools)]);
    let probe = Arc::new(Probe {
        shared: hub.shared.clone(),
        woken: Mutex::new(Vec::new()),
    });
    let waker = Waker::from(probe.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(watch.poll_next(&mut cx).is_pending());
    let published = hub.publisher().list_changed(ListChanged::Tools).await;
    assert_eq!(published.streams, 1);
    assert_eq!(*probe.woken.lock().unwrap(), [true]);
    assert!(matches!(watch.poll_next(&mut cx), Poll::Ready(Some(_))));
    assert!(watch.poll_next(&mut cx).is_pending());
    hub.shutdown();
    assert_eq!(*probe.woken.lock().unwrap(), [true, true]);
}

// ---------------------------------------------------------------------------
// The hub's mark spares the guard only the hub's own body.
// ---------------------------------------------------------------------------

/// A leaky stream in place of a hub stream: an acknowledgment, another
/// caller's update, a server request.
fn leaky_stream() -> Boxed {
    let events = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\n",
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"resourceSubscriptions": [ALICE_NOTES, BOB_NOTES]},
                "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": BOB_NOTES, "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}}),
        json!({"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}),
    );
    Full::new(Bytes::from(events)).boxed_unsync()
}

/// The service behind the hub in these tests.
type Inner = tower::util::ServiceFn<
    fn(
        Request<RequestBody<Full<Bytes>>>,
    ) -> std::future::Ready<Result<Response<Full<Bytes>>, Infallible>>,
>;

fn inner(
    _: Request<RequestBody<Full<Bytes>>>,
) -> std::future::Ready<Result<Response<Full<Bytes>>, Infallible>> {
    std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"inner")))))
}

/// Alice's listen on her notes through the listen filter, a middleware
/// made by `between`, and the hub; what reaches the client, and the
/// `Debug` of the listen filter's body (how it treated the stream).
async fn through<M, B>(stack: &Stack, between: M) -> (Stream, String)
where
    M: tower::Layer<super::ListenHubService<Inner>>,
    M::Service: Service<Request<RequestBody<Full<Bytes>>>, Response = Response<B>, Error = Infallible>
        + Clone,
    B: http_body::Body<Data = Bytes, Error = Infallible> + Send + 'static,
{
    let mut service = ServiceBuilder::new()
        .map_request(authenticate)
        .layer(ListenFilterLayer::new(stack.profile.clone()))
        .layer(between)
        .layer(stack.hub.layer())
        .service(tower::service_fn(inner as fn(_) -> _));
    let request = listen(
        Some("alice-token"),
        1,
        json!({"resourceSubscriptions": [ALICE_NOTES]}),
    );
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    let treated = format!("{:?}", response.body());
    (Stream(response.into_body().boxed_unsync()), treated)
}

/// What alice's stream carries after her notes are updated (heard by
/// `streams` of the hub's), then the hub shuts down: every message, read
/// to the end.
async fn read_out(stack: &Stack, mut stream: Stream, streams: usize) -> Vec<Value> {
    let mut messages = vec![stream.message().await];
    assert_eq!(
        stack
            .hub
            .publisher()
            .resource_updated(ALICE_NOTES)
            .await
            .streams,
        streams
    );
    stack.hub.shutdown();
    while let Some(text) = stream.next().await {
        let data = text
            .strip_prefix("data: ")
            .and_then(|t| t.strip_suffix("\n\n"));
        messages.push(serde_json::from_str(data.expect("an event")).unwrap());
    }
    messages
}

#[tokio::test(start_paused = true)]
async fn a_marked_response_whose_body_was_swapped_is_guarded() {
    let stack = Stack::new(|b| b);
    // Keeps the hub's parts, mark and all, and swaps in a leaky body.
    let swap = tower::layer::layer_fn(|service| {
        tower::util::MapResponse::new(
            service,
            |response: Response<super::ResponseBody<Full<Bytes>>>| {
                let (parts, _hub) = response.into_parts();
                Response::from_parts(parts, leaky_stream())
            },
        )
    });
    let (stream, treated) = through(&stack, swap).await;
    assert!(treated.contains("Events"), "guarded: {treated}");
    let messages = read_out(&stack, stream, 0).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(
        messages[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        messages[0]["params"]["notifications"],
        json!({"resourceSubscriptions": [ALICE_NOTES]})
    );
}

#[tokio::test(start_paused = true)]
async fn a_marked_response_with_another_hub_stream_is_guarded() {
    let stack = Stack::new(|b| b);
    // Bob's stream, of the hub's own body type, under alice's parts.
    let (mut parts, ()) = Request::new(()).into_parts();
    parts.extensions.insert(Principal::new("bob"));
    let raw = |text: String| serde_json::value::RawValue::from_string(text).unwrap();
    let params = raw(json!({"notifications": {"resourceSubscriptions": [BOB_NOTES]}}).to_string());
    let filter = crate::filter::honour(&stack.profile, &parts, &raw("1".into()), Some(&params))
        .await
        .unwrap();
    let mut request = Request::new(());
    request.extensions_mut().insert(filter);
    let mut direct = stack
        .hub
        .layer()
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        }));
    let bobs = direct.ready().await.unwrap().call(request).await.unwrap();
    let bob = Arc::new(Mutex::new(Some(bobs.into_body())));
    let swap = tower::layer::layer_fn(move |service| {
        let bob = bob.clone();
        tower::util::MapResponse::new(
            service,
            move |response: Response<super::ResponseBody<Full<Bytes>>>| {
                let (parts, _alices) = response.into_parts();
                let bobs = bob.lock().unwrap().take().expect("bob's stream, once");
                Response::from_parts(parts, bobs)
            },
        )
    });
    let (mut stream, treated) = through(&stack, swap).await;
    assert!(treated.contains("Events"), "guarded: {treated}");
    // Bob's acknowledgment is narrowed to what alice's listen honoured
    // (nothing of bob's), and bob's update is dropped.
    let ack = stream.message().await;
    assert_eq!(
        (tag(&ack), &ack["params"]["notifications"]),
        (&json!(1), &json!({}))
    );
    assert_eq!(
        stack
            .hub
            .publisher()
            .resource_updated(BOB_NOTES)
            .await
            .streams,
        1
    );
    stack.hub.shutdown();
    let mut rest = Vec::new();
    while let Some(text) = stream.next().await {
        rest.push(text);
    }
    assert!(
        rest.iter().all(|text| !text.contains(BOB_NOTES)),
        "{rest:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_hubs_body_wrapped_on_its_way_is_guarded_and_arrives_whole() {
    use tower_http::map_response_body::MapResponseBodyLayer;
    use tower_http::trace::TraceLayer;

    let expected = |messages: &[Value]| {
        let methods: Vec<&str> = messages
            .iter()
            .map(|m| m["method"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            methods,
            [
                "notifications/subscriptions/acknowledged",
                "notifications/resources/updated",
                ""
            ],
            "{messages:?}"
        );
        assert!(messages[..2].iter().all(|m| tag(m) == 1));
        assert_eq!(messages[1]["params"]["uri"], ALICE_NOTES);
        assert_eq!(messages[2]["id"], 1);
    };
    // Straight from the hub: not read again.
    let stack = Stack::new(|b| b);
    let (stream, treated) = through(&stack, tower::layer::util::Identity::new()).await;
    assert!(treated.contains("PassThrough"), "unread: {treated}");
    expected(&read_out(&stack, stream, 1).await);
    // Wrapped by a map of its body: guarded, and whole.
    let stack = Stack::new(|b| b);
    let map =
        MapResponseBodyLayer::new(|body: super::ResponseBody<Full<Bytes>>| body.boxed_unsync());
    let (stream, treated) = through(&stack, map).await;
    assert!(treated.contains("Events"), "guarded: {treated}");
    expected(&read_out(&stack, stream, 1).await);
    // Wrapped by a trace: the same.
    let stack = Stack::new(|b| b);
    let (stream, treated) = through(&stack, TraceLayer::new_for_http()).await;
    assert!(treated.contains("Events"), "guarded: {treated}");
    expected(&read_out(&stack, stream, 1).await);
}

/// A profile whose hook reads by prefix: everything below `file:///public/`.
fn prefix_profile() -> ServerProfile {
    use crate::filter::stream::SPELLED_BELOW;
    ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, uris: &[&str]| {
            std::future::ready(
                uris.iter()
                    .map(|uri| uri.starts_with(SPELLED_BELOW))
                    .collect(),
            )
        })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_hub_delivers_below_a_prefix_only_what_a_client_reads_there() {
    use crate::filter::stream::{resolves_elsewhere, SPELLED_BELOW, SPELLINGS};

    let profile = prefix_profile();
    let hub = ListenHub::new(profile.clone());
    let open = |uri: &str| {
        let mut service = ServiceBuilder::new()
            .layer(ListenFilterLayer::new(profile.clone()))
            .layer(hub.layer())
            .service(tower::service_fn(inner as fn(_) -> _));
        let request = listen(None, 1, json!({"resourceSubscriptions": [uri]}));
        async move {
            let response = service.ready().await.unwrap().call(request).await.unwrap();
            let mut stream = Stream(response.into_body().boxed_unsync());
            stream.message().await;
            stream
        }
    };
    let mut below = open(SPELLED_BELOW).await;
    let publisher = hub.publisher();
    for (spelling, read) in SPELLINGS {
        let heard = publisher.resource_updated(spelling).await.streams;
        let plain = !resolves_elsewhere(spelling.as_bytes());
        assert_eq!(heard, usize::from(plain), "{spelling:?}");
        if plain {
            assert!(read.starts_with(SPELLED_BELOW));
            assert_eq!(below.message().await["params"]["uri"], *spelling);
        }
    }
    below.quiet(10).await;
    // Honoured exactly, an odd spelling is heard.
    let (odd, _) = SPELLINGS[0];
    let mut exact = open(odd).await;
    assert_eq!(publisher.resource_updated(odd).await.streams, 1);
    assert_eq!(exact.message().await["params"]["uri"], odd);
}

/// A listen whose filter honours nothing, handed to the hub (by a layer
/// of the application's own): acknowledged and ended at once, no slot
/// taken, the inner service not called.
#[tokio::test(start_paused = true)]
async fn the_hub_ends_a_listen_that_honours_nothing_at_once() {
    let stack = Stack::new(|b| b.max_streams(1));
    let (mut parts, ()) = Request::new(()).into_parts();
    parts.extensions.insert(Principal::new("bob"));
    let raw = |text: String| serde_json::value::RawValue::from_string(text).unwrap();
    let params =
        raw(json!({"notifications": {"resourceSubscriptions": [ALICE_NOTES]}}).to_string());
    let filter = crate::filter::honour(&stack.profile, &parts, &raw("3".into()), Some(&params))
        .await
        .unwrap();
    assert!(filter.is_empty());
    let mut request = Request::new(());
    request.extensions_mut().insert(filter);
    let mut hub = stack
        .hub
        .layer()
        .layer(tower::service_fn(|_: Request<()>| async {
            panic!("the inner service is not called");
            #[allow(unreachable_code)]
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        }));
    let response = hub.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(stack.hub.open_streams(), 0);
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let events: Vec<Value> = std::str::from_utf8(&body)
        .unwrap()
        .split_terminator("\n\n")
        .map(|event| serde_json::from_str(event.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    let [ack, end] = &events[..] else {
        panic!("two events: {events:?}")
    };
    assert_eq!(
        (tag(ack), &ack["params"]["notifications"]),
        (&json!(3), &json!({}))
    );
    assert_eq!(
        end,
        &json!({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": 3}}})
    );
}

/// Behind the listen filter, a caller's second listen under the id of its
/// open hub stream is refused by the hub (-32600, 409), and takes no slot;
/// once the stream is gone, the id is free.
#[tokio::test(start_paused = true)]
async fn a_callers_second_listen_under_a_live_subscription_id_is_refused() {
    let stack = Stack::new(|b| b);
    let tools = json!({"toolsListChanged": true});
    let first = stack.listen(Some("alice-token"), 7, tools.clone()).await;
    let again = stack
        .send(listen(Some("alice-token"), 7, tools.clone()))
        .await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let body = again.into_body().collect().await.unwrap().to_bytes();
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (&error["id"], &error["error"]["code"]),
        (&json!(7), &json!(-32600))
    );
    assert_eq!(stack.hub.open_streams(), 1);
    // Bob's id 7 is his own; anonymous callers are not told apart.
    let _bob = stack.listen(Some("bob-token"), 7, tools.clone()).await;
    let _anonymous = stack.listen(None, 7, tools.clone()).await;
    let _anonymous_again = stack.listen(None, 7, tools.clone()).await;
    assert_eq!(stack.hub.open_streams(), 4);
    drop(first);
    let _reopened = stack.listen(Some("alice-token"), 7, tools).await;
    assert_eq!(stack.hub.open_streams(), 4);
}
