//! Pieces the Redis tests share (`tests/redis.rs` on one node,
//! `tests/redis_cluster.rs` on a cluster): instances of a hub on the Redis
//! bus behind the listen filter, the streams they open, and waits; the
//! Redis servers themselves are in `servers.rs` (which
//! `benches/hub_latency.rs` shares).
#![allow(dead_code)]

pub mod servers;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use mcp_edge::hub::{Channel, ListenHub, RedisBus};
use mcp_edge::ListChanged;
use mcp_edge::{ListenFilterLayer, Principal, RequestBody, ServerProfile};
use serde_json::{json, Value};
use tower::{Service, ServiceBuilder, ServiceExt};

#[allow(unused_imports)]
pub use self::servers::{Cluster, Redis, Spy};

pub fn profile() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
            let name = caller.map(|c| c.as_str().to_owned());
            let answers = uris
                .iter()
                .map(|uri| match name.as_deref() {
                    Some(name) => {
                        uri.starts_with("demo://public") || uri.contains(&format!("/{name}/"))
                    }
                    None => uri.starts_with("demo://public"),
                })
                .collect();
            std::future::ready(answers)
        })
        .task_directory(|owner: &Principal, ids: &[&str]| {
            let prefix = format!("task-{}", owner.as_str());
            std::future::ready(ids.iter().map(|id| id.starts_with(&prefix)).collect())
        })
        .tasks(true)
        .build()
        .unwrap()
}

/// The calls of a slow hook: begun and ended.
#[derive(Default)]
pub struct Calls {
    pub begun: AtomicUsize,
    pub ended: AtomicUsize,
}

impl Calls {
    pub fn begun(&self) -> usize {
        self.begun.load(Ordering::SeqCst)
    }

    pub fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }
}

/// URIs below this one take the `ResourceAccess` hook 2 s to answer.
pub const SLOW: &str = "demo://slow/";

/// Everyone may read everything; a check of a URI below `SLOW` takes 2 s.
pub fn slow_profile(calls: Arc<Calls>) -> ServerProfile {
    ServerProfile::builder()
        .resource_access(move |_: Option<&Principal>, uris: &[&str]| {
            let slow = uris.iter().any(|uri| uri.starts_with(SLOW));
            let (calls, answers) = (calls.clone(), vec![true; uris.len()]);
            async move {
                if slow {
                    calls.begun.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    calls.ended.fetch_add(1, Ordering::SeqCst);
                }
                answers
            }
        })
        .build()
        .unwrap()
}

/// A listen on b of `demo://slow`, whose updates take the hook 2 s each,
/// with both instances connected and b subscribed.
pub async fn slow_listen(redis: &Redis, a: &Instance, b: &Instance, also: Value) -> Stream {
    let mut notifications = json!({"resourceSubscriptions": ["demo://slow"]});
    if let (Some(all), Value::Object(more)) = (notifications.as_object_mut(), also) {
        all.extend(more);
    }
    let stream = b.listen("alice", 1, notifications).await;
    let channel = b.bus.channel_name(Channel::Resource("demo://slow"));
    eventually("b subscribed", || async {
        redis.numsub(&channel).await == 1
    })
    .await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    stream
}

/// Two instances on `redis`; `b` delivers to its stream behind a hook
/// that takes 2 s; 1 100 list changes published while it waits overflow
/// its delivery queue, which holds 1 024 behind the one being delivered:
/// 76 are dropped.
pub struct Overflowed {
    pub a: Instance,
    pub b: Instance,
    pub calls: Arc<Calls>,
    pub stream: Stream,
}

/// Makes [`Overflowed`] happen.
pub async fn overflow(redis: &Redis) -> Overflowed {
    let calls = Arc::new(Calls::default());
    let a = Instance::with(&redis.url(), "app", profile());
    let b = Instance::with(&redis.url(), "app", slow_profile(calls.clone()));
    let stream = slow_listen(redis, &a, &b, json!({"toolsListChanged": true})).await;
    let _ = a
        .hub
        .publisher()
        .resource_updated(&format!("{SLOW}0"))
        .await;
    eventually("the hook runs", || async { calls.begun() == 1 }).await;

    let channel = b.bus.channel_name(Channel::List(ListChanged::Tools));
    let mut flood = redis::pipe();
    for seq in 0..1_100 {
        let message = json!({"v": 1, "from": "worker", "seq": seq,
            "change": {"type": "list_changed", "list": "tools"}});
        flood
            .cmd("PUBLISH")
            .arg(&channel)
            .arg(message.to_string())
            .ignore();
    }
    let () = flood
        .query_async(&mut redis.connection().await)
        .await
        .unwrap();
    eventually("76 dropped", || async { b.bus.overflowed() == 76 }).await;
    Overflowed {
        a,
        b,
        calls,
        stream,
    }
}

/// One instance: a hub on the Redis bus, behind the listen filter.
pub struct Instance {
    pub hub: ListenHub,
    pub bus: RedisBus,
    pub profile: ServerProfile,
}

pub type Boxed = UnsyncBoxBody<Bytes, Infallible>;

impl Instance {
    /// An instance on the one Redis node at `url`.
    pub fn with(url: &str, prefix: &str, profile: ServerProfile) -> Self {
        Self::on(RedisBus::new(url, prefix).unwrap(), profile)
    }

    /// An instance on `bus`.
    pub fn on(bus: RedisBus, profile: ServerProfile) -> Self {
        let hub = ListenHub::builder(profile.clone())
            .bus(bus.clone())
            .max_streams_per_caller(2_000)
            .build();
        Self { hub, bus, profile }
    }

    pub async fn listen(&self, caller: &str, id: u32, notifications: Value) -> Stream {
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
                       "notifications": notifications},
        })
        .to_string();
        let mut request = Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, body.len())
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        request.extensions_mut().insert(Principal::new(caller));
        let inner = tower::service_fn(|_: Request<RequestBody<Full<Bytes>>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        });
        let mut service = ServiceBuilder::new()
            .layer(ListenFilterLayer::new(self.profile.clone()))
            .layer(self.hub.layer())
            .service(inner);
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        let mut stream = Stream(response.into_body().boxed_unsync());
        let ack = stream.message().await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        stream
    }
}

pub struct Stream(pub Boxed);

impl Stream {
    pub async fn next(&mut self, within: Duration) -> Option<String> {
        loop {
            let frame = tokio::time::timeout(within, self.0.frame()).await.ok()??;
            let data = frame.unwrap().into_data().unwrap();
            let text = String::from_utf8(data.to_vec()).unwrap();
            if !text.starts_with(':') {
                return Some(text);
            }
        }
    }

    pub async fn message(&mut self) -> Value {
        let text = self
            .next(Duration::from_secs(5))
            .await
            .expect("a message within 5 s");
        serde_json::from_str(text.strip_prefix("data: ").unwrap().trim_end()).unwrap()
    }

    pub async fn silent(&mut self, within: Duration) {
        if let Some(text) = self.next(within).await {
            panic!("expected nothing, got {text}");
        }
    }
}

/// Waits until `check` holds, for up to 10 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `redis` shows one subscription to `channel`, that of
/// `instance`; the channel's name.
pub async fn subscribed(redis: &Redis, instance: &Instance, channel: Channel<'_>) -> String {
    let name = instance.bus.channel_name(channel);
    eventually("subscribed", || async { redis.numsub(&name).await == 1 }).await;
    name
}

/// Publishes updates of `uri` on `from` until one reaches `to` (10 s at
/// most), after `what`; the other events `to` reads meanwhile (the late
/// copies of earlier updates) are passed over.
pub async fn crosses(from: &Instance, to: &mut Stream, uri: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = from.hub.publisher().resource_updated(uri).await;
        while let Some(text) = to.next(Duration::from_millis(200)).await {
            if text.contains(&format!("\"uri\":\"{uri}\"")) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "no update crossed after {what}");
    }
}

/// A listen on `b` of a URI no stream listened on before (the `i`th), then
/// an update of it published on `a` at once: it must cross (the listen was
/// acknowledged once `b` was subscribed). The URI.
pub async fn fresh_update_crosses(a: &Instance, b: &Instance, i: u32) -> String {
    let uri = format!("demo://public/logs/fresh-{i}");
    let mut stream = b
        .listen("alice", i + 1, json!({"resourceSubscriptions": [uri]}))
        .await;
    let published = a.hub.publisher().resource_updated(&uri).await;
    assert_eq!(published.remote, Ok(()));
    assert_eq!(
        stream.message().await["params"]["uri"],
        uri,
        "fresh channel {i}"
    );
    uri
}

/// Someone with publish rights on the prefix reads one real message of
/// `a`'s (through `spy`, on the channel of `uri`, which `stream` on `b`
/// listens to), then publishes its bytes again with each of the next five
/// `seq` numbers before `a` sends them (`publish` sends a raw payload on
/// that channel). `a`'s next five updates of the same URI all reach the
/// stream, after the five forged copies. The first message's bytes sent
/// again, unchanged, are dropped as a duplicate and counted.
pub async fn forged_ahead<P, Fut>(
    a: &Instance,
    b: &Instance,
    stream: &mut Stream,
    spy: &Spy,
    uri: &str,
    publish: P,
) where
    P: Fn(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let update = || async { a.hub.publisher().resource_updated(uri).await.remote };
    assert_eq!(update().await, Ok(()));
    assert_eq!(stream.message().await["params"]["uri"], uri);
    let seen = spy.next();
    let seq = serde_json::from_str::<Value>(&seen).unwrap()["seq"]
        .as_u64()
        .unwrap();
    for k in 1..=5 {
        let ahead = seen.replacen(
            &format!(r#""seq":{seq},"#),
            &format!(r#""seq":{},"#, seq + k),
            1,
        );
        assert_ne!(ahead, seen);
        publish(ahead).await;
        assert_eq!(stream.message().await["params"]["uri"], uri, "copy {k}");
    }
    for k in 1..=5 {
        assert_eq!(update().await, Ok(()));
        assert_eq!(stream.message().await["params"]["uri"], uri, "update {k}");
    }
    let before = b.bus.duplicates();
    publish(seen).await;
    eventually("the copy counted", || async {
        b.bus.duplicates() == before + 1
    })
    .await;
    stream.silent(Duration::from_millis(300)).await;
}
