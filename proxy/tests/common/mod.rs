//! What the proxy's test files share: routers served on loopback ports,
//! the proxy built from a configuration, a leaky upstream (the reference
//! deployment with `--bare`: rmcp acknowledging whatever is asked), and a
//! small HTTP/1.1 client that reads SSE streams event by event.
#![allow(dead_code)]

use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_edge_proxy::app::{self, Proxy};
use mcp_edge_proxy::config::Config;
use mcp_edge_serve::serve;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The bound on any one wait.
pub const WAIT: Duration = Duration::from_secs(10);

pub const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A router served on a loopback port until stopped (or dropped).
pub struct Served {
    pub port: u16,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Served {
    pub async fn start(router: Router) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::on(listener, router)
    }

    /// Serves `router` on `listener`.
    pub fn on(listener: TcpListener, router: Router) -> Self {
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, router, async move {
            let _ = stopped.await;
        }));
        Self {
            port,
            stop: Some(stop),
            task,
        }
    }

    /// Stops at once: the task and its connections end.
    pub fn kill(&mut self) {
        self.task.abort();
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(WAIT, &mut self.task).await;
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The reference deployment with `--bare` on a loopback port: an rmcp
/// server that acknowledges any listen, whoever asks (tokens `alice-token`
/// and `bob-token`).
pub struct Leaky {
    pub served: Served,
    stop_rmcp: Option<Box<dyn FnOnce() + Send>>,
}

impl Leaky {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = mcp_edge_reference::app::build(port, true).unwrap();
        Self {
            served: Served::on(listener, app.router),
            stop_rmcp: Some(app.stop_rmcp),
        }
    }

    pub fn port(&self) -> u16 {
        self.served.port
    }
}

impl Drop for Leaky {
    fn drop(&mut self) {
        if let Some(stop) = self.stop_rmcp.take() {
            stop();
        }
    }
}

/// A configuration in front of the upstream on `upstream_port`, with the
/// callers alice and bob, each reading their own notes, everyone the
/// public ones; `extra` added at the end.
pub fn config(upstream_port: u16, extra: &str) -> Config {
    Config::parse(&format!(
        r#"
listen = "127.0.0.1:0"
upstream = "http://127.0.0.1:{upstream_port}/mcp"
response_timeout_secs = 2

[capabilities]
tools = {{}}
resources = {{}}

[[caller]]
token = "alice-token"
principal = "alice"

[[caller]]
token = "bob-token"
principal = "bob"

[[allow]]
principals = ["alice"]
uri_prefixes = ["demo://users/alice/"]

[[allow]]
principals = ["bob"]
uri_prefixes = ["demo://users/bob/"]

[[allow]]
principals = ["*"]
uri_prefixes = ["demo://public/"]
{extra}
"#
    ))
    .unwrap()
}

/// The proxy of `config`, its `/mcp` and (with `[hub]`) `/publish` served.
pub struct Running {
    pub proxy: Proxy,
    pub mcp: Served,
    pub publish: Option<Served>,
}

impl Running {
    pub async fn start(config: &Config) -> Self {
        let mut proxy = app::build(config, None).unwrap();
        let mcp = Served::start(proxy.mcp.clone()).await;
        let publish = match proxy.publish.take() {
            Some(router) => Some(Served::start(router).await),
            None => None,
        };
        Self {
            proxy,
            mcp,
            publish,
        }
    }

    pub fn port(&self) -> u16 {
        self.mcp.port
    }

    pub fn publish_port(&self) -> u16 {
        self.publish.as_ref().expect("a hub").port
    }
}

/// An answer, its body read as it comes.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    buffered: String,
}

impl Answer {
    /// The whole body, as text.
    pub async fn text(self) -> String {
        let mut text = self.buffered;
        let rest = tokio::time::timeout(WAIT, self.body.collect())
            .await
            .expect("the body within the bound")
            .unwrap()
            .to_bytes();
        text.push_str(std::str::from_utf8(&rest).unwrap());
        text
    }

    /// The JSON-RPC message of the answer: the body, or its first SSE event.
    pub async fn message(mut self) -> Value {
        let json = self
            .headers
            .get("content-type")
            .is_some_and(|c| c.as_bytes().starts_with(b"application/json"));
        if json {
            return serde_json::from_str(&self.text().await).unwrap();
        }
        self.event(WAIT).await.expect("an event")
    }

    /// The next SSE event's `data` as JSON, within `within`; `None` when
    /// none comes or the stream ends.
    pub async fn event(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffered.find("\n\n") {
                let block: String = self.buffered.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return Some(serde_json::from_str(&data.join("\n")).unwrap());
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()??;
            if let Ok(data) = frame.ok()?.into_data() {
                self.buffered.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }

    /// Whether the stream ends within `within`.
    pub async fn ends_within(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }
}

/// One request to `/mcp` on a connection of its own.
pub async fn request(
    port: u16,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Answer {
    request_at(port, "/mcp", method, headers, body).await
}

/// One request to `path` on a connection of its own.
pub async fn request_at(
    port: u16,
    path: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Answer {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://127.0.0.1:{port}{path}"));
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request = request.header("host", format!("127.0.0.1:{port}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let response = tokio::time::timeout(WAIT, sender.send_request(request))
        .await
        .expect("an answer within the bound")
        .unwrap();
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
        buffered: String::new(),
    }
}

/// A 2026-07-28 POST of `method` with `params` (JSON members, after
/// `_meta`), as the caller of `token`.
pub async fn modern(
    port: u16,
    token: Option<&str>,
    id: u32,
    method: &str,
    name: Option<&str>,
    params: &str,
) -> Answer {
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{META}{params}}}}}"#);
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    request(port, "POST", &headers, Some(body)).await
}

/// A listen for `uris` as the caller of `token`: the open stream, and its
/// acknowledgment's honoured URIs.
pub async fn listen(port: u16, token: Option<&str>, uris: &[&str]) -> (Answer, Value) {
    let uris = serde_json::to_string(uris).unwrap();
    let params = format!(r#","notifications":{{"resourceSubscriptions":{uris}}}"#);
    let mut stream = modern(port, token, 7, "subscriptions/listen", None, &params).await;
    assert_eq!(stream.status, 200);
    let ack = stream.event(WAIT).await.expect("an acknowledgment");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let honoured = ack["params"]["notifications"]["resourceSubscriptions"].clone();
    (stream, honoured)
}

/// `touch_resource` of `uri` through `port`, as the caller of `token`:
/// answered.
pub async fn touch(port: u16, token: &str, uri: &str) {
    let params = format!(r#","name":"touch_resource","arguments":{{"uri":"{uri}"}}"#);
    let answer = modern(
        port,
        Some(token),
        3,
        "tools/call",
        Some("touch_resource"),
        &params,
    )
    .await;
    assert_eq!(answer.status, 200);
    let message = answer.message().await;
    assert_eq!(message["result"]["isError"], false, "{message}");
}
