//! What the reference deployment advertises it serves, layered and
//! `--bare` alike: in a legacy session, every capability `initialize`
//! advertises answers its method. (`--bare` once advertised `logging` and
//! refused `logging/setLevel`, so clients that set a level on connecting
//! failed.)

use mcp_edge_reference::app;
use serde_json::{json, Value};

mod common;

use common::Served;

const LEGACY: &str = "2025-11-25";

/// One POST on a connection of its own, as bob; the answer's status, its
/// `Mcp-Session-Id`, and its JSON-RPC message (from JSON or SSE).
async fn post(port: u16, session: Option<&str>, body: Value) -> (u16, Option<String>, Value) {
    let body = body.to_string();
    let session = session
        .map(|id| format!("Mcp-Session-Id: {id}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer bob-token\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {LEGACY}\r\n{session}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = common::exchange(port, &request).await;
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let session = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    });
    // The message: the first JSON object in the body (an SSE `data:` line,
    // or the body itself; chunk sizes are hex lines, never `{`).
    let message = rest
        .lines()
        .map(|line| line.strip_prefix("data: ").unwrap_or(line))
        .find_map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or(Value::Null);
    (status, session, message)
}

/// Serves the reference stack (`bare` or layered) and checks, in a legacy
/// session, that each capability `initialize` advertises is served.
async fn advertises_only_what_it_serves(bare: bool) {
    let mut built = None;
    let served = Served::start(|port| {
        let app = app::build(port, bare).unwrap();
        let router = app.router.clone();
        built = Some(app);
        router
    })
    .await;
    let (app, port) = (built.expect("built"), served.port);

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "truthful", "version": "1"}}});
    let (status, session, answer) = post(port, None, initialize).await;
    assert_eq!(status, 200, "{answer}");
    let session = session.expect("a legacy session");
    let capabilities = answer["result"]["capabilities"].clone();
    let notified = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(port, Some(&session), notified).await;

    let mut asked = Vec::new();
    let mut ask = |method: &'static str, params: Value| {
        asked.push(method);
        json!({"jsonrpc": "2.0", "id": asked.len() + 1, "method": method, "params": params})
    };
    let mut calls = Vec::new();
    if capabilities.get("tools").is_some() {
        calls.push(ask("tools/list", json!({})));
    }
    if capabilities.get("resources").is_some() {
        calls.push(ask("resources/list", json!({})));
    }
    if capabilities["resources"]["subscribe"] == true {
        calls.push(ask(
            "resources/subscribe",
            json!({"uri": "demo://users/bob/notes"}),
        ));
    }
    if capabilities.get("prompts").is_some() {
        calls.push(ask("prompts/list", json!({})));
    }
    if capabilities.get("logging").is_some() {
        calls.push(ask("logging/setLevel", json!({"level": "info"})));
    }
    if capabilities.get("completions").is_some() {
        calls.push(ask(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "demo://public/readme"},
                   "argument": {"name": "x", "value": ""}}),
        ));
    }
    assert!(asked.contains(&"tools/list"), "{capabilities}");
    for (call, method) in calls.into_iter().zip(asked) {
        let (status, _, answer) = post(port, Some(&session), call).await;
        assert_eq!(status, 200, "bare {bare}: {method}: {answer}");
        assert!(
            answer.get("result").is_some(),
            "bare {bare}: {method} is advertised ({capabilities}) but answers {answer}"
        );
    }
    // The legacy era promises no list changes (nothing delivers them
    // there) and no `logging/setLevel` (not served).
    assert_eq!(
        capabilities["tools"]["listChanged"], false,
        "{capabilities}"
    );
    assert!(capabilities.get("logging").is_none(), "{capabilities}");

    app.hub.shutdown();
    (app.stop_rmcp)();
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_advertises_only_what_rmcp_serves() {
    advertises_only_what_it_serves(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layered_advertises_only_what_it_serves() {
    advertises_only_what_it_serves(false).await;
}
