//! The accept loop's bounds on connections (`serve_with` and its
//! `Limits`), over real sockets: connections that never finish a request
//! head, in any of the ways a slow or hostile client can leave one, are
//! closed within the bound while the server goes on answering; idle ones
//! are closed; one peer holds at most its share; an open listen stream is
//! never idle.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use mcp_edge_reference::{app, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;

use common::Served;

const HEAD: Duration = Duration::from_secs(1);
const IDLE: Duration = Duration::from_secs(2);
/// What a bound may be overrun by: the sweeper's tick (a quarter of the
/// shorter bound) and a busy machine.
const SLACK: Duration = Duration::from_secs(2);

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// The reference stack on a loopback port, its connections bounded by
/// `HEAD`, `IDLE` and `per_peer`.
struct Stack {
    served: Served,
    port: u16,
    stop_rmcp: Box<dyn FnOnce() + Send>,
    hub: mcp_edge::hub::ListenHub,
}

impl Stack {
    async fn start(per_peer: usize) -> Self {
        let limits = serve::Limits {
            head: HEAD,
            idle: IDLE,
            per_peer,
        };
        let mut built = None;
        let served = Served::start_with(limits, |port| {
            let app = app::build(port, false).unwrap();
            let router = app.router.clone();
            built = Some(app);
            router
        })
        .await;
        let app = built.expect("built");
        Self {
            port: served.port,
            served,
            stop_rmcp: app.stop_rmcp,
            hub: app.hub,
        }
    }

    async fn stop(self) {
        self.hub.shutdown();
        (self.stop_rmcp)();
        self.served.stop().await;
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).await.unwrap()
    }

    /// A POST of `method` as bob, on a connection of its own, closed after.
    fn request(&self, method: &str, params: &str) -> String {
        let port = self.port;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{{META}{params}}}}}"#
        );
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer bob-token\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    /// Whether a discover is answered 200 now, on a connection of its own.
    async fn answers(&self) -> bool {
        let mut tcp = self.connect().await;
        let request = self.request("server/discover", "");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut head = [0; 12];
        tokio::time::timeout(Duration::from_secs(5), tcp.read_exact(&mut head))
            .await
            .is_ok_and(|read| read.is_ok() && head.starts_with(b"HTTP/1.1 200"))
    }
}

/// How long `tcp` stays open, reading (and dropping) what comes, up to
/// `within`; `None` if still open then.
async fn open_for(tcp: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buffer = [0; 4096];
    loop {
        let left = within.checked_sub(start.elapsed())?;
        match tokio::time::timeout(left, tcp.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Nothing, half a request line, an unfinished header, half the HTTP/2
/// preface, and the whole preface with the client's settings but no
/// request: each is closed once `HEAD` has passed, not before half of it,
/// and the server answers before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_a_request_head_are_closed() {
    let served = Stack::start(64).await;
    let port = served.port;
    // The HTTP/2 preface, then an empty SETTINGS frame.
    let mut h2 = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    h2.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let starts: Vec<(&str, Vec<u8>)> = vec![
        ("nothing", Vec::new()),
        ("half a request line", b"POST /mc".to_vec()),
        (
            "an unfinished header",
            format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: app").into_bytes(),
        ),
        ("half the preface", b"PRI * HTTP/2.0\r\n".to_vec()),
        ("the preface and settings", h2),
    ];
    let mut open = Vec::new();
    for (what, bytes) in &starts {
        let mut tcp = served.connect().await;
        tcp.write_all(bytes).await.unwrap();
        open.push((what, tcp));
    }
    assert!(served.answers().await, "answers while they wait");
    let waits = open
        .into_iter()
        .map(|(what, mut tcp)| async move { (what, open_for(&mut tcp, HEAD + SLACK).await) });
    for (what, closed) in futures_util::future::join_all(waits).await {
        let closed = closed.unwrap_or_else(|| panic!("{what}: still open"));
        assert!(closed >= HEAD / 2, "{what}: closed after {closed:?}");
    }
    assert!(served.answers().await, "answers after");
    served.stop().await;
}

/// A keep-alive HTTP/1.1 connection that carried a request waits at most
/// `HEAD` for the next one (hyper counts the wait as reading its head);
/// an HTTP/2 connection that carried one is closed once idle for `IDLE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let served = Stack::start(64).await;
    let mut tcp = served.connect().await;
    tcp.write_all(served.request("server/discover", "").as_bytes())
        .await
        .unwrap();
    let mut head = [0; 12];
    tcp.read_exact(&mut head).await.unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"));
    let closed = open_for(&mut tcp, HEAD + SLACK).await.expect("closed");
    assert!(closed >= HEAD / 2, "HTTP/1.1 closed after {closed:?}");

    // HTTP/2: one discover, then nothing.
    let io = hyper_util::rt::TokioIo::new(served.connect().await);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META}}}}}"#);
    let request = http::Request::post(format!("http://127.0.0.1:{}/mcp", served.port))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap();
    let start = Instant::now();
    tokio::time::timeout(IDLE + SLACK, connection)
        .await
        .expect("the HTTP/2 connection closed")
        .unwrap()
        .ok();
    assert!(
        start.elapsed() >= IDLE / 2,
        "HTTP/2 closed after {:?}",
        start.elapsed()
    );
    served.stop().await;
}

/// A peer holds at most `per_peer` connections: one more is closed at
/// once, and a slot comes back when one of them closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_holds_at_most_its_share_of_connections() {
    let served = Stack::start(3).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(served.connect().await);
    }
    let mut over = served.connect().await;
    let refused = open_for(&mut over, Duration::from_secs(1)).await;
    assert!(refused.is_some(), "a fourth connection is closed at once");
    drop(held.pop());
    let mut answered = false;
    for _ in 0..50 {
        if served.answers().await {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(answered, "a slot came back");
    served.stop().await;
}

/// A listen stream keeps its connection open past `IDLE` (its request is
/// in flight), and keeps hearing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_listen_stream_is_never_idle() {
    let served = Stack::start(64).await;
    let mut tcp = served.connect().await;
    let notifications = r#","notifications":{"resourceSubscriptions":["demo://users/bob/notes"]}"#;
    let listen = served.request("subscriptions/listen", notifications);
    tcp.write_all(listen.as_bytes()).await.unwrap();
    assert_eq!(
        open_for(&mut tcp, IDLE + SLACK).await,
        None,
        "the stream stays open"
    );
    served.stop().await;
}
