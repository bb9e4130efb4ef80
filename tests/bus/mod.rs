//! Pieces the Redis tests share (`tests/redis.rs` on one node,
//! `tests/redis_cluster.rs` on a cluster): instances of a hub on the Redis
//! bus behind the listen filter, the streams they open, and waits.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use mcp_edge::hub::{ListenHub, RedisBus};
use mcp_edge::{ListenFilterLayer, Principal, RequestBody, ServerProfile};
use serde_json::{json, Value};
use tower::{Service, ServiceBuilder, ServiceExt};

/// A `redis-server` of this test, on a loopback port; stopped when dropped.
pub struct Redis {
    pub port: u16,
    /// What the server is started with beside its port (a cluster node's
    /// options).
    options: Vec<String>,
    child: Option<Child>,
}

impl Redis {
    /// A server on a free port. The port is free when it is picked, but
    /// another test's server may take it first: this one then exits, and
    /// another port is tried.
    pub fn start() -> Self {
        Self::start_with(|_| Vec::new())
    }

    /// A server on a free port, started with `options(port)` too.
    pub fn start_with(options: impl Fn(u16) -> Vec<String>) -> Self {
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut redis = Self {
                port,
                options: options(port),
                child: None,
            };
            redis.run();
            if redis.owns_port() {
                return redis;
            }
            redis.stop();
        }
        panic!("no free port for redis-server");
    }

    /// Whether the server still runs once its port answers (one that could
    /// not bind it has exited).
    fn owns_port(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(50));
        let child = self.child.as_mut().expect("running");
        matches!(child.try_wait(), Ok(None))
    }

    /// Starts the server (again), on its port.
    pub fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.options)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server: a stopped one keeps
    /// its connections and answers nothing.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let sent = Command::new("kill")
            .args([format!("-{signal}"), pid])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain connection, for `PUBSUB NUMSUB` and raw messages.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    pub async fn numsub(&self, channel: &str) -> i64 {
        let (_, count): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut self.connection().await)
            .await
            .unwrap();
        count
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

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
