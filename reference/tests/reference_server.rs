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
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let app = app::build_with(port, false, bounds).expect("the example's stack builds");
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

// --- the tests ---------------------------------------------------------------

#[tokio::test]
async fn discover_advertises_exactly_what_is_served() {
    let server = Server::start().await;
    let response = modern(
        server.port,
        ALICE,
        "server/discover",
        None,
        json!({}),
        json!({}),
    )
    .await;
    assert_eq!(response.status, 200);
    let result = response.message().await["result"].clone();
    let capabilities = result["capabilities"].as_object().expect("capabilities");
    let mut keys: Vec<&str> = capabilities.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["extensions", "logging", "resources", "tools"],
        "{result}"
    );
    assert_eq!(capabilities["tools"], json!({ "listChanged": true }));
    assert_eq!(
        capabilities["resources"],
        json!({ "listChanged": true, "subscribe": true })
    );
    assert_eq!(capabilities["logging"], json!({}));
    assert_eq!(
        capabilities["extensions"],
        json!({ "io.modelcontextprotocol/tasks": {} })
    );
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].is_u64(), "{result}");
    assert!(result["cacheScope"].is_string(), "{result}");
    assert!(result["supportedVersions"]
        .as_array()
        .expect("supportedVersions")
        .contains(&json!(MODERN)));
    server.stop().await;
}

#[tokio::test]
async fn legacy_initialize_gets_the_legacy_capabilities_and_a_session() {
    let server = Server::start().await;
    let port = server.port;
    let (status, session, message) = initialize(port, ALICE).await;
    assert_eq!(status, 200);
    let session = session.expect("a legacy session");
    let result = message["result"].clone();
    assert_eq!(result["protocolVersion"], LEGACY);
    assert_eq!(
        result["capabilities"],
        json!({
            "tools": { "listChanged": false },
            "resources": { "listChanged": false, "subscribe": true },
        })
    );

    // The session works the legacy way: initialized, a GET stream, then
    // resources/subscribe, and a touch arrives on the GET stream.
    let session_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", "Bearer alice-token"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", LEGACY),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    // The session is alice's: bob and anonymous callers presenting its id
    // are answered as for an unknown session.
    for stranger in [Some("Bearer bob-token"), None] {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", LEGACY),
        ];
        headers.extend(stranger.map(|token| ("Authorization", token)));
        let response = request(port, "POST", &headers, Some(initialized)).await;
        assert_eq!(response.status, 404, "{stranger:?}");
        let error: Value = serde_json::from_str(&response.text().await).expect("JSON");
        assert_eq!(error.get("id"), Some(&Value::Null), "{error}");
        assert_eq!(request(port, "GET", &headers[1..], None).await.status, 404);
    }
    let response = request(port, "POST", &session_headers, Some(initialized)).await;
    assert_eq!(response.status, 202);
    let mut get = request(port, "GET", &session_headers[1..], None).await;
    assert_eq!(get.status, 200);
    let subscribe = |id: u32, uri: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "resources/subscribe", "params": { "uri": uri } })
            .to_string()
    };
    let ok = request(
        port,
        "POST",
        &session_headers,
        Some(&subscribe(2, "demo://users/alice/notes")),
    )
    .await
    .message()
    .await;
    assert_eq!(ok["result"], json!({}), "{ok}");
    // Bob's notes: alice may not read them, so she may not subscribe.
    let refused = request(
        port,
        "POST",
        &session_headers,
        Some(&subscribe(3, "demo://users/bob/notes")),
    )
    .await
    .message()
    .await;
    assert!(refused["error"].is_object(), "{refused}");
    let touch = json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": { "name": "touch_resource", "arguments": { "uri": "demo://users/alice/notes" } },
    })
    .to_string();
    let touched = request(port, "POST", &session_headers, Some(&touch))
        .await
        .message()
        .await;
    assert_eq!(touched["result"]["isError"], false, "{touched}");
    let update = get.event().await;
    assert_eq!(update["method"], "notifications/resources/updated");
    assert_eq!(update["params"]["uri"], "demo://users/alice/notes");
    drop(get);
    server.stop().await;
}

#[tokio::test]
async fn listen_acknowledgments_depend_on_the_caller() {
    let server = Server::start().await;
    let asked = json!({
        "resourceSubscriptions": [
            "demo://users/alice/notes",
            "demo://public/readme",
            "demo://public/static/logo",
        ],
    });
    let (alice, ack) = listen(server.port, ALICE, asked.clone()).await;
    // The logo never changes: the subscription hook refuses it for everyone.
    assert_eq!(
        ack,
        json!({ "resourceSubscriptions": ["demo://users/alice/notes", "demo://public/readme"] })
    );
    let (anonymous, ack) = listen(server.port, ANONYMOUS, asked.clone()).await;
    assert_eq!(
        ack,
        json!({ "resourceSubscriptions": ["demo://public/readme"] })
    );
    let (bob, ack) = listen(server.port, BOB, asked).await;
    assert_eq!(
        ack,
        json!({ "resourceSubscriptions": ["demo://public/readme"] })
    );
    assert_eq!(open_streams(server.port).await, 3);
    drop((alice, anonymous, bob));
    // The streams unregister as soon as the server notices the clients left.
    timeout(WAIT, async {
        while open_streams(server.port).await != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every stream unregistered");
    server.stop().await;
}

#[tokio::test]
async fn resource_updates_reach_only_streams_that_may_read_them() {
    let server = Server::start().await;
    let port = server.port;
    let (mut alice, _) = listen(
        port,
        ALICE,
        json!({ "resourceSubscriptions": ["demo://users/alice/notes", "demo://public/readme"] }),
    )
    .await;
    // Bob asks for alice's notes too; they are not acknowledged.
    let (mut bob, ack) = listen(
        port,
        BOB,
        json!({ "resourceSubscriptions": ["demo://users/alice/notes", "demo://public/readme"] }),
    )
    .await;
    assert_eq!(
        ack,
        json!({ "resourceSubscriptions": ["demo://public/readme"] })
    );

    call_tool(
        port,
        ALICE,
        "touch_resource",
        json!({ "uri": "demo://users/alice/notes" }),
    )
    .await;
    let update = alice.event().await;
    assert_eq!(update["method"], "notifications/resources/updated");
    assert_eq!(update["params"]["uri"], "demo://users/alice/notes");
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    assert_eq!(bob.event_within(QUIET).await, None);

    // Bob's stream is live: the public readme reaches both, and it is the
    // next thing bob hears.
    call_tool(
        port,
        BOB,
        "touch_resource",
        json!({ "uri": "demo://public/readme" }),
    )
    .await;
    for stream in [&mut alice, &mut bob] {
        let update = stream.event().await;
        assert_eq!(update["params"]["uri"], "demo://public/readme");
    }
    // Bob cannot touch what he cannot read.
    let params =
        json!({ "name": "touch_resource", "arguments": { "uri": "demo://users/alice/notes" } });
    let refused = modern(
        port,
        BOB,
        "tools/call",
        Some("touch_resource"),
        params,
        json!({}),
    )
    .await
    .message()
    .await;
    assert!(refused["error"].is_object(), "{refused}");
    drop((alice, bob));
    server.stop().await;
}

#[tokio::test]
async fn task_updates_reach_only_the_owner() {
    let server = Server::start().await;
    let port = server.port;
    let both = json!({ "taskIds": ["task-alice-1", "task-bob-1"] });
    let (mut alice, ack) = listen(port, ALICE, both.clone()).await;
    assert_eq!(ack, json!({ "taskIds": ["task-alice-1"] }));
    let (mut bob, ack) = listen(port, BOB, both).await;
    assert_eq!(ack, json!({ "taskIds": ["task-bob-1"] }));

    call_tool(
        port,
        ALICE,
        "complete_task",
        json!({ "taskId": "task-alice-1" }),
    )
    .await;
    let update = alice.event().await;
    assert_eq!(update["method"], "notifications/tasks");
    assert_eq!(update["params"]["taskId"], "task-alice-1");
    assert_eq!(update["params"]["status"], "completed");
    assert_eq!(bob.event_within(QUIET).await, None);

    call_tool(
        port,
        BOB,
        "complete_task",
        json!({ "taskId": "task-bob-1" }),
    )
    .await;
    let update = bob.event().await;
    assert_eq!(update["params"]["taskId"], "task-bob-1");
    assert_eq!(alice.event_within(QUIET).await, None);
    drop((alice, bob));
    server.stop().await;
}

#[tokio::test]
async fn bad_tokens_and_foreign_hosts_are_refused() {
    let server = Server::start().await;
    let port = server.port;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];

    let unauthorized = request(
        port,
        "POST",
        &[json[0], json[1], ("Authorization", "Bearer mallory-token")],
        Some(body),
    )
    .await;
    assert_eq!(unauthorized.status, 401);
    assert_eq!(unauthorized.header("www-authenticate"), Some("Bearer"));
    let error: Value = serde_json::from_str(&unauthorized.text().await).expect("JSON");
    assert_eq!(error["error"]["code"], -32001);
    // `"id": null`, as JSON-RPC writes an error whose request id is unknown:
    // SDK clients show the message rather than a generic error.
    assert_eq!(error.get("id"), Some(&Value::Null), "{error}");

    let forbidden = request(
        port,
        "POST",
        &[json[0], json[1], ("Host", "evil.example.com")],
        Some(body),
    )
    .await;
    assert_eq!(forbidden.status, 403);
    let error: Value = serde_json::from_str(&forbidden.text().await).expect("JSON");
    assert_eq!(error.get("id"), Some(&Value::Null), "{error}");
    assert_eq!(error["error"]["code"], -32600);
    let origin = format!("127.0.0.1:{port}");
    let forbidden = request(
        port,
        "POST",
        &[
            json[0],
            json[1],
            ("Host", origin.as_str()),
            ("Origin", "http://evil.example.com"),
        ],
        Some(body),
    )
    .await;
    assert_eq!(forbidden.status, 403);
    server.stop().await;
}

// --- sessions and slow bodies --------------------------------------------------

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

/// A `DELETE` of `session` by `token`, with `version` as its protocol version.
async fn delete(port: u16, token: Option<&str>, session: &str, version: &str) -> u16 {
    let auth = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", version),
    ];
    headers.extend(auth.as_deref().map(|auth| ("Authorization", auth)));
    request(port, "DELETE", &headers, None).await.status
}

/// Whether `token` may use `session`: the status of a GET on it.
async fn get_status(port: u16, token: Option<&str>, session: &str) -> u16 {
    let auth = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", LEGACY),
    ];
    headers.extend(auth.as_deref().map(|auth| ("Authorization", auth)));
    request(port, "GET", &headers, None).await.status
}

#[tokio::test]
async fn legacy_sessions_are_bounded_per_caller_and_in_total() {
    let server = Server::start_with(app::Bounds {
        sessions: 3,
        sessions_per_caller: 2,
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    let (status, first, _) = initialize(port, ALICE).await;
    assert_eq!(status, 200);
    assert_eq!(initialize(port, ALICE).await.0, 200);
    let (status, none, refused) = initialize(port, ALICE).await;
    assert_eq!((status, none), (429, None), "a third session for alice");
    assert_eq!(refused.get("id"), Some(&Value::Null), "{refused}");
    assert_eq!(refused["error"]["code"], -32600);
    // Anonymous callers share one count; the total is 3.
    assert_eq!(initialize(port, ANONYMOUS).await.0, 200);
    assert_eq!(initialize(port, BOB).await.0, 429, "three sessions in all");
    // A 2026-07-28 request opens no session: it is never refused for them.
    let discover = modern(port, BOB, "server/discover", None, json!({}), json!({})).await;
    assert_eq!(discover.status, 200);
    // A closed session frees its place.
    let first = first.expect("a session");
    assert!((200..300).contains(&delete(port, ALICE, &first, LEGACY).await));
    assert_eq!(initialize(port, BOB).await.0, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_refused_delete_keeps_the_session_bound() {
    let server = Server::start().await;
    let port = server.port;
    let session = initialize(port, ALICE).await.1.expect("a session");
    // rmcp refuses a DELETE with an unknown protocol version: the session
    // lives on, and stays alice's alone.
    let refused = delete(port, ALICE, &session, "1999-01-01").await;
    assert!(
        !(200..300).contains(&refused),
        "rmcp refused the DELETE: {refused}"
    );
    assert_eq!(
        get_status(port, BOB, &session).await,
        404,
        "bob cannot attach"
    );
    assert_eq!(get_status(port, ANONYMOUS, &session).await, 404);
    assert!((200..300).contains(&delete(port, ALICE, &session, LEGACY).await));
    server.stop().await;
}

#[tokio::test]
async fn expired_sessions_are_forgotten() {
    let server = Server::start_with(app::Bounds {
        sessions_per_caller: 1,
        session_idle: Duration::from_millis(200),
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    assert_eq!(initialize(port, ALICE).await.0, 200);
    // Once rmcp let the idle session expire, its binding no longer counts.
    let admitted = timeout(WAIT, async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let (status, session, _) = initialize(port, ALICE).await;
            if status == 200 {
                return session;
            }
            assert_eq!(status, 429);
        }
    })
    .await
    .expect("the expired session was forgotten within the bound");
    assert!(admitted.is_some());
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_trickles_in_is_cut_off() {
    let server = Server::start_with(app::Bounds {
        body_read: Duration::from_millis(200),
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    let answered = timeout(WAIT, async {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: 100\r\n\r\n{{\"jsonrpc\":"
        );
        stream.write_all(head.as_bytes()).await.expect("send");
        // The rest never comes.
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
    .expect("the server answered or closed within the bound");
    assert!(!answer_is_success(&answered), "{answered}");
    server.stop().await;
}

/// True when a raw HTTP answer has a 2xx status.
fn answer_is_success(answer: &str) -> bool {
    answer
        .split_whitespace()
        .nth(1)
        .is_some_and(|status| status.starts_with('2'))
}

#[tokio::test]
async fn a_404_of_the_edge_does_not_unbind_a_session() {
    let server = Server::start().await;
    let port = server.port;
    let session = initialize(port, ALICE).await.1.expect("a session");
    // The edge answers a 2026-07-28 `resources/subscribe` with 404 itself:
    // that says nothing of the session, which stays alice's.
    let body = r#"{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"demo://users/alice/notes"}}"#;
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", "Bearer alice-token"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", MODERN),
    ];
    let removed = request(port, "POST", &headers, Some(body)).await;
    assert_eq!(removed.status, 404);
    assert_eq!(removed.message().await["error"]["code"], -32601);
    assert_eq!(
        get_status(port, BOB, &session).await,
        404,
        "bob cannot attach"
    );
    assert_eq!(get_status(port, ALICE, &session).await, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_caller_at_its_session_cap_opens_none_in_disguise() {
    let server = Server::start_with(app::Bounds {
        sessions_per_caller: 1,
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    assert_eq!(initialize(port, ALICE).await.0, 200);
    assert_eq!(server.live_sessions().await, 1);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let modern_header = [("MCP-Protocol-Version", MODERN)];
    // rmcp opens a session for each of these, whatever they claim.
    let disguises = [
        ("no version header", &[][..], initialize_body(LEGACY, None)),
        (
            "a 2026-07-28 header",
            &modern_header[..],
            initialize_body(MODERN, None),
        ),
        (
            "modern _meta and header",
            &modern_header[..],
            initialize_body(MODERN, Some(meta.clone())),
        ),
        (
            "modern _meta, no header",
            &[][..],
            initialize_body(LEGACY, Some(meta)),
        ),
        (
            "a session id that is not ASCII",
            &[("Mcp-Session-Id", "sessi\u{f3}n")][..],
            initialize_body(LEGACY, None),
        ),
    ];
    for (disguise, headers, body) in &disguises {
        let response = post_as(port, ALICE, headers, body).await;
        let session = response.header("mcp-session-id").map(str::to_owned);
        assert_eq!((response.status, session), (429, None), "{disguise}");
        let refused = response.message().await;
        assert_eq!(refused["error"]["code"], -32600, "{disguise}: {refused}");
        assert_eq!(
            server.live_sessions().await,
            1,
            "{disguise}: no new session"
        );
    }
    // Under its cap, bob's disguised opening is bound to him like any other.
    let (_, headers, body) = &disguises[1];
    let response = post_as(port, BOB, headers, body).await;
    assert_eq!(response.status, 200);
    let session = response.header("mcp-session-id").expect("a session");
    assert_eq!(get_status(port, ALICE, session).await, 404, "bob's alone");
    assert_eq!(server.live_sessions().await, 2);
    server.stop().await;
}

// --- listen buckets -----------------------------------------------------------

/// A listen for the public readme from `client`, kept open when admitted;
/// the status, and the refusal's JSON-RPC error when there is one.
async fn readme_listen(
    port: u16,
    client: Client<'_>,
    token: Option<&str>,
    open: &mut Vec<Response>,
) -> (u16, Option<Value>) {
    let notifications = json!({ "resourceSubscriptions": ["demo://public/readme"] });
    let response = listen_via(client, port, token, notifications).await;
    let status = response.status;
    if status == 200 {
        open.push(response);
        return (status, None);
    }
    (status, Some(response.message().await["error"].clone()))
}

fn from_address(address: Ipv4Addr) -> Client<'static> {
    Client {
        address: Some(address),
        forwarded_for: None,
    }
}

fn forwarded_for(value: &str) -> Client<'_> {
    Client {
        address: None,
        forwarded_for: Some(value),
    }
}

/// Asserts a refusal for the per-caller cap of 1.
fn assert_over_the_caller_cap(answer: (u16, Option<Value>), what: &str) {
    let (status, error) = answer;
    assert_eq!(status, 429, "{what}");
    let error = error.unwrap_or_default();
    assert_eq!(error["code"], -32013, "{what}: {error}");
    assert_eq!(
        error["data"],
        json!({ "limit": "streams_per_caller", "max": 1 }),
        "{what}"
    );
}

/// Linux routes all of 127.0.0.0/8 to the loopback interface, so a client
/// can come from 127.0.0.2 to a server on 127.0.0.1.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn anonymous_callers_are_counted_by_peer_address() {
    let server = Server::start_with(app::Bounds {
        streams_per_caller: 1,
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    let mut open = Vec::new();
    let first = from_address(Ipv4Addr::new(127, 0, 0, 1));
    let second = from_address(Ipv4Addr::new(127, 0, 0, 2));
    assert_eq!(
        readme_listen(port, first, ANONYMOUS, &mut open).await.0,
        200
    );
    let again = readme_listen(port, first, ANONYMOUS, &mut open).await;
    assert_over_the_caller_cap(again, "a second stream from 127.0.0.1");
    // Another address is another anonymous caller, with a cap of its own.
    assert_eq!(
        readme_listen(port, second, ANONYMOUS, &mut open).await.0,
        200
    );
    let again = readme_listen(port, second, ANONYMOUS, &mut open).await;
    assert_over_the_caller_cap(again, "a second stream from 127.0.0.2");
    // A caller with a name has its own bucket, whatever its address.
    assert_eq!(readme_listen(port, first, ALICE, &mut open).await.0, 200);
    assert_eq!(open_streams(port).await, 3);
    drop(open);
    server.stop().await;
}

#[tokio::test]
async fn a_forged_forwarded_for_makes_no_new_bucket() {
    let server = Server::start_with(app::Bounds {
        streams_per_caller: 1,
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    let mut open = Vec::new();
    let forged = forwarded_for("203.0.113.1");
    assert_eq!(
        readme_listen(port, forged, ANONYMOUS, &mut open).await.0,
        200
    );
    for value in ["203.0.113.2", "198.51.100.1, 203.0.113.3"] {
        let answer = readme_listen(port, forwarded_for(value), ANONYMOUS, &mut open).await;
        assert_over_the_caller_cap(answer, value);
    }
    let plain = readme_listen(port, Client::default(), ANONYMOUS, &mut open).await;
    assert_over_the_caller_cap(plain, "no X-Forwarded-For");
    drop(open);
    server.stop().await;
}

#[tokio::test]
async fn a_trusted_forwarded_for_counts_its_rightmost_address() {
    let server = Server::start_with(app::Bounds {
        streams_per_caller: 1,
        peer_address: app::PeerAddress::ForwardedFor,
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    let mut open = Vec::new();
    for value in ["203.0.113.1", "203.0.113.2"] {
        let client = forwarded_for(value);
        assert_eq!(
            readme_listen(port, client, ANONYMOUS, &mut open).await.0,
            200,
            "{value}"
        );
    }
    // The proxy appended the last entry; the client wrote the ones before.
    for value in [
        "203.0.113.1",
        "198.51.100.1, 203.0.113.2",
        "203.0.113.2:4711",
    ] {
        let answer = readme_listen(port, forwarded_for(value), ANONYMOUS, &mut open).await;
        assert_over_the_caller_cap(answer, value);
    }
    // Without the header, or with no address in it, the connection's peer counts.
    let direct = readme_listen(port, Client::default(), ANONYMOUS, &mut open).await;
    assert_eq!(direct.0, 200);
    let garbage = readme_listen(port, forwarded_for("unknown"), ANONYMOUS, &mut open).await;
    assert_over_the_caller_cap(garbage, "unknown");
    assert_eq!(open_streams(port).await, 3);
    drop(open);
    server.stop().await;
}

#[tokio::test]
async fn a_listen_over_the_global_cap_is_refused() {
    let server = Server::start_with(app::Bounds {
        streams: 2,
        ..app::Bounds::default()
    })
    .await;
    let port = server.port;
    let mut open = Vec::new();
    for token in [ALICE, BOB] {
        let client = Client::default();
        assert_eq!(readme_listen(port, client, token, &mut open).await.0, 200);
    }
    // Alice holds one stream of her 64, but the server holds all it may.
    let response = listen_via(
        Client::default(),
        port,
        ALICE,
        json!({ "resourceSubscriptions": ["demo://public/readme"] }),
    )
    .await;
    assert_eq!(response.status, 429);
    assert!(response.header("retry-after").is_some());
    let error = response.message().await["error"].clone();
    assert_eq!(error["code"], -32013, "{error}");
    assert_eq!(error["data"], json!({ "limit": "streams", "max": 2 }));
    // A stream that ends frees its place.
    drop(open.pop());
    timeout(WAIT, async {
        while open_streams(port).await != 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the dropped stream unregistered");
    let mut reopened = Vec::new();
    let again = readme_listen(port, Client::default(), ALICE, &mut reopened).await;
    assert_eq!(again.0, 200);
    drop((open, reopened));
    server.stop().await;
}

/// The accept loop serves HTTP/2 by prior knowledge beside HTTP/1.1 (which
/// every other test here goes over).
#[tokio::test]
async fn http2_by_prior_knowledge_is_served_by_the_accept_loop() {
    let server = Server::start().await;
    let tcp = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    discover_over_http2(tcp, server.port).await;
    server.stop().await;
}

/// The HTTP/2 preface in two parts, the second a moment after the first:
/// the accept loop, having seen a part of it, reads the rest.
#[tokio::test]
async fn http2_whose_preface_comes_in_two_parts_is_served() {
    let server = Server::start().await;
    let tcp = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    discover_over_http2(SplitFirstWrite::new(tcp), server.port).await;
    server.stop().await;
}

/// An HTTP/1.1 request whose first byte (the preface's first) comes alone:
/// the accept loop waits for the next before it tells the two apart.
#[tokio::test]
async fn http1_whose_first_byte_comes_alone_is_served() {
    let server = Server::start().await;
    let port = server.port;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
         Mcp-Method: server/discover\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut split = SplitFirstWrite::new(&mut tcp);
    split.write_all(request.as_bytes()).await.expect("send");
    let mut answer = String::new();
    timeout(WAIT, tcp.read_to_string(&mut answer))
        .await
        .expect("bounded")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"capabilities\""), "{answer}");
    server.stop().await;
}

/// A `server/discover` over HTTP/2 on `io`: answered 200, over HTTP/2,
/// with the capabilities.
async fn discover_over_http2<I>(io: I, port: u16)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let (mut send, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let request = http::Request::post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "server/discover")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let response = timeout(WAIT, send.send_request(request))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("\"capabilities\""), "{text}");
}

/// A connection whose first write sends its first byte alone, and whose
/// next waits a moment: the server sees a part of what comes first.
struct SplitFirstWrite<W> {
    inner: W,
    written: bool,
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<W> SplitFirstWrite<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            written: false,
            pause: None,
        }
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for SplitFirstWrite<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if !this.written {
            let sent =
                std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_write(cx, &buf[..1]))?;
            this.written = true;
            this.pause = Some(Box::pin(tokio::time::sleep(Duration::from_millis(100))));
            return std::task::Poll::Ready(Ok(sent));
        }
        if let Some(pause) = this.pause.as_mut() {
            std::task::ready!(std::future::Future::poll(pause.as_mut(), cx));
            this.pause = None;
        }
        std::pin::Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<W: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for SplitFirstWrite<W> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

// --- first run ----------------------------------------------------------------

/// The requests of the `curl` commands the server prints beside its
/// address: each command's `-H` headers and its `-d` body.
fn printed_requests(printed: &str) -> Vec<(Vec<(String, String)>, String)> {
    let commands = printed.split("  curl ").skip(1);
    commands
        .map(|command| {
            let quoted: Vec<(&str, &str)> = command
                .split('\'')
                .collect::<Vec<_>>()
                .chunks(2)
                .filter_map(|pair| Some((pair[0].trim_end().rsplit(' ').next()?, *pair.get(1)?)))
                .collect();
            let headers = quoted
                .iter()
                .filter(|(flag, _)| *flag == "-H")
                .map(|(_, header)| {
                    let (name, value) = header.split_once(": ").expect("a header");
                    (name.to_owned(), value.to_owned())
                })
                .collect();
            let body = quoted
                .iter()
                .find(|(flag, _)| *flag == "-d")
                .map(|(_, body)| (*body).to_owned())
                .expect("a body");
            (headers, body)
        })
        .collect()
}

/// What the server prints to try it works: the discovery advertises, and
/// bob's listen is acknowledged with his own notes only.
#[tokio::test]
async fn the_printed_curl_commands_work() {
    let server = Server::start().await;
    let printed = mcp_edge_reference::try_it(&format!("http://127.0.0.1:{}/mcp", server.port));
    assert!(printed.contains(&format!("curl -s http://127.0.0.1:{}/mcp ", server.port)));
    let requests = printed_requests(&printed);
    assert_eq!(requests.len(), 2, "{printed}");
    let mut answers = Vec::new();
    for (headers, body) in &requests {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        answers.push(request(server.port, "POST", &headers, Some(body)).await);
    }
    let mut answers = answers.into_iter();
    let discovered = answers.next().unwrap();
    assert_eq!(discovered.status, 200);
    let discovered = discovered.message().await;
    assert!(discovered["result"]["capabilities"]["resources"]["subscribe"] == json!(true));
    let mut listen = answers.next().unwrap();
    assert_eq!(listen.status, 200);
    let ack = listen.event().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["demo://users/bob/notes"])
    );
    drop(listen);
    server.stop().await;
}
