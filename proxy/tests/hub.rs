//! With `[hub]`: the proxy holds the listen streams and the upstream
//! publishes its changes to `POST /publish`. The endpoint's answers; the
//! streams outliving the upstream; and (with a `redis-server` on the
//! machine, `cargo test -p mcp-edge-proxy --test hub -- --ignored`, as
//! `.ci/run` does) two proxies on one Redis.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

mod common;

use common::{config, listen, request_at, touch, Leaky, Running};

const TOKEN: &str = "0123456789abcdef";
const ALICE_NOTES: &str = "demo://users/alice/notes";

fn hub(extra: &str) -> String {
    format!("[hub]\npublish = \"127.0.0.1:1\"\npublish_token = \"{TOKEN}\"\n{extra}")
}

/// A publication of `body` with `headers`: the status and the answer.
async fn publish(port: u16, headers: &[(&str, &str)], body: String) -> (u16, Value) {
    let answer = request_at(port, "/publish", "POST", headers, Some(body)).await;
    let status = answer.status;
    let text = answer.text().await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn updated(uri: &str) -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publish_endpoint_takes_a_notification_from_the_token_holder_only() {
    let upstream = Leaky::start().await;
    let proxy = Running::start(&config(upstream.port(), &hub(""))).await;
    let (mut alice, _) = listen(proxy.port(), Some("alice-token"), &[ALICE_NOTES]).await;
    let port = proxy.publish_port();
    let bearer = format!("Bearer {TOKEN}");
    let ok = [
        ("content-type", "application/json"),
        ("authorization", bearer.as_str()),
    ];

    let (status, answer) = publish(port, &ok, updated(ALICE_NOTES)).await;
    assert_eq!((status, answer), (202, json!({"streams": 1, "bus": "ok"})));
    let heard = alice
        .event(Duration::from_secs(5))
        .await
        .expect("the update");
    assert_eq!(heard["params"]["uri"], ALICE_NOTES);

    let wrong = [("authorization", "Bearer 0123456789abcdeX")];
    assert_eq!(publish(port, &wrong, updated(ALICE_NOTES)).await.0, 401);
    assert_eq!(publish(port, &[], updated(ALICE_NOTES)).await.0, 401);
    let (status, answer) = publish(
        port,
        &ok,
        r#"{"jsonrpc":"2.0","method":"tools/call"}"#.into(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a notification"),
        "{answer}"
    );
    let large = updated(&format!("demo://users/alice/{}", "x".repeat(70_000)));
    assert_eq!(publish(port, &ok, large).await.0, 413);
    let page = [
        ("authorization", bearer.as_str()),
        ("origin", "http://evil.example"),
    ];
    assert_eq!(publish(port, &page, updated(ALICE_NOTES)).await.0, 403);
    // Nothing of those reached the stream.
    assert_eq!(alice.event(Duration::from_millis(300)).await, None);
}

/// The upstream stopped while streams are open: they stay open, hear what
/// is published, and the upstream started again serves through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_outlive_the_upstream() {
    let upstream = Leaky::start().await;
    let port = upstream.port();
    let proxy = Running::start(&config(port, &hub(""))).await;
    let (mut alice, _) = listen(proxy.port(), Some("alice-token"), &[ALICE_NOTES]).await;
    drop(upstream);
    assert!(
        !alice.ends_within(Duration::from_secs(1)).await,
        "the stream stays open"
    );
    let publisher = proxy.proxy.hub.as_ref().unwrap().publisher();
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 1);
    let heard = alice
        .event(Duration::from_secs(5))
        .await
        .expect("the update");
    assert_eq!(heard["params"]["uri"], ALICE_NOTES);

    // The upstream again, on its port: a tools/call through the proxy.
    let listener = bind_again(port).await;
    let app = mcp_edge_reference::app::build(port, true).unwrap();
    let _again = common::Served::on(listener, app.router);
    touch(proxy.port(), "alice-token", ALICE_NOTES).await;
    (app.stop_rmcp)();
}

/// Binds `port` again, once the old listener let it go.
async fn bind_again(port: u16) -> tokio::net::TcpListener {
    for _ in 0..100 {
        if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            return listener;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("port {port} stayed taken");
}

/// A `redis-server` on a free loopback port, stopped when dropped.
struct Redis {
    port: u16,
    child: Child,
}

impl Redis {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server)");
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Self { port, child };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server did not start");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two proxies on one Redis: a change published to one reaches a stream
/// held by the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: .ci/run runs it with --ignored"]
async fn two_proxies_on_one_redis_deliver_across_instances() {
    let redis = Redis::start();
    let upstream = Leaky::start().await;
    let shared = hub(&format!("redis = \"redis://127.0.0.1:{}/\"\n", redis.port));
    let (a, b) = (
        Running::start(&config(upstream.port(), &shared)).await,
        Running::start(&config(upstream.port(), &shared)).await,
    );
    let (mut on_b, _) = listen(b.port(), Some("alice-token"), &[ALICE_NOTES]).await;
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("content-type", "application/json"),
        ("authorization", bearer.as_str()),
    ];
    // Until b is subscribed (it acknowledged within its bound) and a connected.
    for _ in 0..50 {
        let (status, answer) = publish(a.publish_port(), &headers, updated(ALICE_NOTES)).await;
        assert_eq!(status, 202, "{answer}");
        if let Some(heard) = on_b.event(Duration::from_millis(200)).await {
            assert_eq!(heard["params"]["uri"], ALICE_NOTES);
            return;
        }
    }
    panic!("no update crossed from one proxy to the other");
}
