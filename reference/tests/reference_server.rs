//! The reference deployment (`examples/server.rs`) end to end, over HTTP.
//!
//! The example's code comes from the workspace member `reference/` (the
//! library `mcp_edge_reference`, which `examples/server.rs` uses too), and the
//! very router the example serves is served here in-process, on a free
//! 127.0.0.1 port, with a minimal HTTP/1.1 client (no client dependency).
//! Every wait is bounded, and every server is stopped at the end of its test.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mcp_edge::hub::ListenHub;
use mcp_edge_reference::app;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::time::timeout;

/// The bound on any single wait in these tests.
const WAIT: Duration = Duration::from_secs(10);
/// How long "nothing arrives" is watched for.
const QUIET: Duration = Duration::from_millis(300);

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
const ALICE: Option<&str> = Some("alice-token");
const BOB: Option<&str> = Some("bob-token");
const ANONYMOUS: Option<&str> = None;

/// The tests, by section (each a file of `tests/reference_server/`); the
/// server, the client and the requests they all send are below.
mod reference_server {
    mod accept;
    mod buckets;
    mod endpoint;
    mod first_run;
    mod sessions;
}

// --- the server --------------------------------------------------------------

struct Server {
    port: u16,
    hub: ListenHub,
    rmcp_sessions: Arc<LocalSessionManager>,
    stop_rmcp: Option<Box<dyn FnOnce() + Send>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    async fn start() -> Self {
        Self::start_with(app::Bounds::default()).await
    }

    async fn start_with(bounds: app::Bounds) -> Self {
        Self::start_as(false, bounds).await
    }

    /// The server `--bare` serves: rmcp without the mcp-edge layers.
    async fn start_bare() -> Self {
        Self::start_as(true, app::Bounds::default()).await
    }

    async fn start_as(bare: bool, bounds: app::Bounds) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let app = app::build_with(port, bare, bounds).expect("the example's stack builds");
        let (shutdown, signal) = tokio::sync::oneshot::channel::<()>();
        // The accept loop of the example, `axum::serve`'s in its place.
        let server = mcp_edge_reference::serve::serve(listener, app.router, async move {
            let _ = signal.await;
        });
        Self {
            port,
            hub: app.hub,
            rmcp_sessions: app.rmcp_sessions,
            stop_rmcp: Some(app.stop_rmcp),
            shutdown: Some(shutdown),
            task: Some(tokio::spawn(server)),
        }
    }

    /// How many legacy sessions rmcp holds live.
    async fn live_sessions(&self) -> usize {
        self.rmcp_sessions.sessions.read().await.len()
    }

    /// Ends every stream, stops accepting, and waits (bounded) for the end.
    async fn stop(mut self) {
        self.hub.shutdown();
        if let Some(stop_rmcp) = self.stop_rmcp.take() {
            stop_rmcp();
        }
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            match timeout(WAIT, task).await {
                Ok(result) => result.expect("server task").expect("server"),
                Err(_) => {
                    abort.abort();
                    panic!("the server did not stop within {WAIT:?}");
                }
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failed test still leaves nothing running.
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

// --- a minimal HTTP/1.1 client ------------------------------------------------

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    remaining: Option<usize>,
    buffer: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The next piece of body, or None at its end.
    async fn chunk(&mut self) -> Option<Vec<u8>> {
        if self.chunked {
            let mut line = String::new();
            self.reader.read_line(&mut line).await.ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                return None;
            }
            let mut data = vec![0; size + 2];
            self.reader.read_exact(&mut data).await.ok()?;
            data.truncate(size);
            Some(data)
        } else {
            let mut data = vec![0; self.remaining.unwrap_or(8192).min(8192)];
            if data.is_empty() {
                return None;
            }
            let read = self.reader.read(&mut data).await.ok()?;
            if read == 0 {
                return None;
            }
            data.truncate(read);
            if let Some(remaining) = &mut self.remaining {
                *remaining -= read;
            }
            Some(data)
        }
    }

    /// The whole body (the connection is `Connection: close`).
    async fn text(mut self) -> String {
        let mut body = std::mem::take(&mut self.buffer).into_bytes();
        timeout(WAIT, async {
            while let Some(chunk) = self.chunk().await {
                body.extend(chunk);
            }
        })
        .await
        .expect("body within the bound");
        String::from_utf8(body).expect("UTF-8 body")
    }

    /// The JSON of the next SSE event with data, or None when the stream
    /// ends or nothing arrives within `within`.
    async fn event_within(&mut self, within: Duration) -> Option<Value> {
        timeout(within, async {
            loop {
                while let Some(end) = self.buffer.find("\n\n") {
                    let event: String = self.buffer.drain(..end + 2).collect();
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|line| line.strip_prefix("data:"))
                        .map(str::trim_start)
                        .filter(|data| !data.is_empty())
                        .collect();
                    if !data.is_empty() {
                        return Some(serde_json::from_str(&data.join("\n")).expect("JSON event"));
                    }
                }
                let chunk = self.chunk().await?;
                self.buffer
                    .push_str(&String::from_utf8(chunk).expect("UTF-8"));
            }
        })
        .await
        .ok()
        .flatten()
    }

    async fn event(&mut self) -> Value {
        self.event_within(WAIT)
            .await
            .expect("an event within the bound")
    }

    /// The one JSON-RPC message of a response, whether JSON or SSE.
    async fn message(mut self) -> Value {
        if self
            .header("content-type")
            .is_some_and(|value| value.starts_with("text/event-stream"))
        {
            self.event().await
        } else {
            serde_json::from_str(&self.text().await).expect("JSON body")
        }
    }
}

/// Where a request comes from: the client's address (default 127.0.0.1),
/// and the `X-Forwarded-For` a proxy in front would add.
#[derive(Default, Clone, Copy)]
struct Client<'a> {
    address: Option<Ipv4Addr>,
    forwarded_for: Option<&'a str>,
}

impl Client<'_> {
    async fn connect(&self, port: u16) -> TcpStream {
        let socket = TcpSocket::new_v4().expect("a socket");
        if let Some(address) = self.address {
            socket
                .bind(SocketAddr::new(IpAddr::V4(address), 0))
                .expect("bind the client's address");
        }
        socket
            .connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .expect("connect")
    }
}

async fn request(
    port: u16,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    request_via(Client::default(), port, method, headers, body).await
}

async fn request_via(
    client: Client<'_>,
    port: u16,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    timeout(WAIT, async {
        let stream = client.connect(port).await;
        let mut reader = BufReader::new(stream);
        let mut head = format!("{method} /mcp HTTP/1.1\r\nConnection: close\r\n");
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(value) = client.forwarded_for {
            head.push_str(&format!("X-Forwarded-For: {value}\r\n"));
        }
        let body = body.unwrap_or("");
        if method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        head.push_str(body);
        reader
            .get_mut()
            .write_all(head.as_bytes())
            .await
            .expect("send");

        let mut status_line = String::new();
        reader
            .read_line(&mut status_line)
            .await
            .expect("status line");
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status code");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.expect("header line");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("name: value");
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(key, _): &&(String, String)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.clone())
        };
        let chunked = find("transfer-encoding").is_some_and(|value| value.contains("chunked"));
        let remaining = find("content-length").and_then(|value| value.parse().ok());
        Response {
            status,
            headers,
            reader,
            chunked,
            remaining,
            buffer: String::new(),
        }
    })
    .await
    .expect("a response head within the bound")
}

/// A 2026-07-28 request: `_meta` in the body, the standard headers beside it.
async fn modern(
    port: u16,
    token: Option<&str>,
    method: &str,
    name: Option<&str>,
    params: Value,
    capabilities: Value,
) -> Response {
    let client = Client::default();
    modern_via(client, port, token, method, name, params, capabilities).await
}

async fn modern_via(
    client: Client<'_>,
    port: u16,
    token: Option<&str>,
    method: &str,
    name: Option<&str>,
    params: Value,
    capabilities: Value,
) -> Response {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let auth = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    request_via(client, port, "POST", &headers, Some(&body.to_string())).await
}

async fn call_tool(port: u16, token: Option<&str>, tool: &str, arguments: Value) -> Value {
    let params = json!({ "name": tool, "arguments": arguments });
    let response = modern(port, token, "tools/call", Some(tool), params, json!({})).await;
    assert_eq!(response.status, 200, "tools/call {tool}");
    let message = response.message().await;
    assert_eq!(message["result"]["isError"], false, "{tool}: {message}");
    message
}

/// Opens a listen stream and returns it with its acknowledged notifications.
async fn listen(port: u16, token: Option<&str>, notifications: Value) -> (Response, Value) {
    let mut stream = listen_via(Client::default(), port, token, notifications).await;
    assert_eq!(stream.status, 200);
    let ack = stream.event().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    (stream, ack["params"]["notifications"].clone())
}

/// Sends a listen from `client`: the response, a stream or a refusal.
async fn listen_via(
    client: Client<'_>,
    port: u16,
    token: Option<&str>,
    notifications: Value,
) -> Response {
    let capabilities = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let params = json!({ "notifications": notifications });
    let method = "subscriptions/listen";
    modern_via(client, port, token, method, None, params, capabilities).await
}

async fn open_streams(port: u16) -> u64 {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut reader = BufReader::new(stream);
    let head = format!(
        "GET /debug/streams HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    reader
        .get_mut()
        .write_all(head.as_bytes())
        .await
        .expect("send");
    let mut all = String::new();
    timeout(WAIT, reader.read_to_string(&mut all))
        .await
        .expect("bounded")
        .expect("read");
    let body = all.split("\r\n\r\n").nth(1).expect("a body");
    let value: Value = serde_json::from_str(body).expect("JSON");
    value["streams"].as_u64().expect("a count")
}

// --- legacy sessions, opened by the tests of more than one section -----------

/// A legacy `initialize` by `token`: the status and the session id.
async fn initialize(port: u16, token: Option<&str>) -> (u16, Option<String>, Value) {
    let response = post_as(port, token, &[], &initialize_body(LEGACY, None)).await;
    let session = response.header("mcp-session-id").map(str::to_owned);
    let status = response.status;
    (status, session, response.message().await)
}

/// An `initialize` naming `version`, with `meta` as its `params._meta`.
fn initialize_body(version: &str, meta: Option<Value>) -> String {
    let mut body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": { "name": "reference-test", "version": "1" },
        },
    });
    if let Some(meta) = meta {
        body["params"]["_meta"] = meta;
    }
    body.to_string()
}

/// A JSON `POST` of `body` by `token`, with `headers` too.
async fn post_as(port: u16, token: Option<&str>, headers: &[(&str, &str)], body: &str) -> Response {
    let auth = token.map(|token| format!("Bearer {token}"));
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend(auth.as_deref().map(|auth| ("Authorization", auth)));
    all.extend_from_slice(headers);
    request(port, "POST", &all, Some(body)).await
}
