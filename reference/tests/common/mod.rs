//! What the reference deployment's test files share: a router served on
//! a loopback port by the deployment's own accept loop, until stopped.
#![allow(dead_code)]

use std::time::Duration;

use mcp_edge_reference::serve;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A router served on a loopback port until [`stop`](Served::stop).
pub struct Served {
    pub port: u16,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Served {
    /// Serves the router `build` makes for the port it is served on (the
    /// stack checks `Host` against it), with the default connection bounds.
    pub async fn start(build: impl FnOnce(u16) -> axum::Router) -> Self {
        Self::start_with(serve::Limits::default(), build).await
    }

    /// [`start`](Served::start), its connections bounded by `limits`.
    pub async fn start_with(
        limits: serve::Limits,
        build: impl FnOnce(u16) -> axum::Router,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = build(port);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve::serve_with(listener, router, limits, async move {
            let _ = stopped.await;
        }));
        Self { port, stop, task }
    }

    /// Stops accepting and waits (10 s at most) until every connection is
    /// closed.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("stopped within 10 s")
            .unwrap()
            .unwrap();
    }
}

/// Sends `request` (a whole HTTP/1.1 request that asks to close) to the
/// loopback `port` and reads the answer to its end, within 10 s.
pub async fn exchange(port: u16, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut answer))
        .await
        .expect("answered within 10 s")
        .unwrap();
    answer
}
