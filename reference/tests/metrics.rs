//! `--metrics-addr` as an operator scrapes it: the reference stack served
//! in-process on one loopback port, its metrics (`mcp_edge_reference::metrics`)
//! on another, both read over HTTP. Alone in its own test binary: the
//! recorder is the process's.

use std::time::{Duration, Instant};

use mcp_edge_reference::{app, metrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;

use common::Served;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// The answer to `GET /metrics` on `port` under the `Host` header `host`:
/// its head and its body.
async fn get_metrics(port: u16, host: &str) -> (String, String) {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

/// The metrics' text, scraped.
async fn scrape(port: u16) -> String {
    let (head, body) = get_metrics(port, &format!("127.0.0.1:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_owned()
}

/// The value of `series` (name and labels as rendered) in `text`; 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A 2026-07-28 POST of `method` as the caller of `token`, its connection
/// kept open for what follows.
async fn post(port: u16, token: &str, method: &str, name: Option<&str>, params: &str) -> TcpStream {
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{{META},{params}}}}}"#);
    let name = name
        .map(|name| format!("Mcp-Name: {name}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp
}

/// Reads `tcp` until what was read holds `what`, for up to 5 s.
async fn read_until(tcp: &mut TcpStream, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut read = Vec::new();
    while !String::from_utf8_lossy(&read).contains(what) {
        let mut chunk = [0; 4096];
        let n = tokio::time::timeout_at(deadline.into(), tcp.read(&mut chunk))
            .await
            .unwrap_or_else(|_| {
                panic!("no {what} within 5 s in {}", String::from_utf8_lossy(&read))
            })
            .unwrap();
        assert!(
            n > 0,
            "closed before {what}: {}",
            String::from_utf8_lossy(&read)
        );
        read.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(read).unwrap()
}

/// A tool called as the caller of `token`, to its answer.
async fn call(port: u16, token: &str, tool: &str, arguments: &str) {
    let params = format!(r#""name":"{tool}","arguments":{arguments}"#);
    let mut tcp = post(port, token, "tools/call", Some(tool), &params).await;
    let answer = read_until(&mut tcp, r#""isError""#).await;
    assert!(answer.contains(r#""isError":false"#), "{answer}");
}

/// Waits until the scraped `series` reads `value`, for up to 5 s.
async fn settles(port: u16, series: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = sample(&scrape(port).await, series);
        if now == value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{series} reads {now}, not {value}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_scrapes_streams_refusals_and_deliveries() {
    let handle = metrics::install(None).unwrap();
    let metrics = Served::start(|port| metrics::router(handle, port)).await;
    let bounds = app::Bounds {
        streams_per_caller: 1,
        ..app::Bounds::default()
    };
    let mut stop_rmcp = None;
    let server = Served::start(|port| {
        // The stack checks `Host` against the port it is served on.
        let app = app::build_with(port, false, bounds).unwrap();
        stop_rmcp = Some(app.stop_rmcp);
        app.router
    })
    .await;
    let port = server.port;

    let streams = "mcp_edge_listen_streams";
    let refused = r#"mcp_edge_listen_refused_total{limit="streams_per_caller"}"#;
    let deliveries = "mcp_edge_hub_deliveries_total";
    let before = scrape(metrics.port).await;
    let (streams_0, deliveries_0) = (sample(&before, streams), sample(&before, deliveries));
    // Before any listen, every metric is on the page (the bus's comes
    // with a bus): counters at 0 for each label value, the gauge at 0.
    for series in [
        r#"mcp_edge_requests_intercepted_total{method="initialize"} 0"#,
        r#"mcp_edge_requests_refused_total{reason="subscription_id_in_use"} 0"#,
        r#"mcp_edge_answers_replaced_total{reason="truncated"} 0"#,
        r#"mcp_edge_events_dropped_total{reason="bus"} 0"#,
        r#"mcp_edge_listen_streams_ended_total{reason="empty"} 0"#,
        r#"mcp_edge_listen_refused_total{limit="streams"} 0"#,
        "mcp_edge_hub_deliveries_total 0",
        r#"mcp_edge_bus_messages_dropped_total{reason="duplicate"} 0"#,
        "mcp_edge_bus_channels_moved_total 0",
        r#"mcp_edge_access_decisions_total{result="hit"} 0"#,
        "mcp_edge_listen_streams 0",
        "# HELP mcp_edge_access_hook_seconds",
        "# HELP mcp_edge_listen_stream_duration_seconds",
        "# HELP mcp_server_operation_duration_seconds",
    ] {
        assert!(before.contains(series), "{series} not in\n{before}");
    }
    let ended =
        |reason: &str| format!(r#"mcp_edge_listen_streams_ended_total{{reason="{reason}"}}"#);
    // A listen for what the caller may not read honours nothing: it is
    // acknowledged and ends at once, holding no slot.
    let alice_notes = r#""notifications":{"resourceSubscriptions":["demo://users/alice/notes"]}"#;
    let mut nothing = post(port, "bob-token", "subscriptions/listen", None, alice_notes).await;
    let answer = read_until(&mut nothing, r#""resultType":"complete""#).await;
    assert!(
        answer.contains("notifications/subscriptions/acknowledged"),
        "{answer}"
    );
    settles(metrics.port, &ended("empty"), 1.0).await;

    let bob_notes = r#""notifications":{"resourceSubscriptions":["demo://users/bob/notes"]}"#;
    let mut bob = post(port, "bob-token", "subscriptions/listen", None, bob_notes).await;
    read_until(&mut bob, "notifications/subscriptions/acknowledged").await;
    let alice_task = r#""notifications":{"taskIds":["task-alice-1"]}"#;
    let mut alice = post(
        port,
        "alice-token",
        "subscriptions/listen",
        None,
        alice_task,
    )
    .await;
    let ack = read_until(&mut alice, "notifications/subscriptions/acknowledged").await;
    assert!(ack.contains("task-alice-1"), "{ack}");
    settles(metrics.port, streams, streams_0 + 2.0).await;

    // Bob's second listen is over his cap.
    let mut again = post(port, "bob-token", "subscriptions/listen", None, bob_notes).await;
    let answer = read_until(&mut again, "\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert_eq!(
        sample(&scrape(metrics.port).await, refused),
        sample(&before, refused) + 1.0
    );

    call(
        port,
        "bob-token",
        "touch_resource",
        r#"{"uri":"demo://users/bob/notes"}"#,
    )
    .await;
    read_until(&mut bob, "notifications/resources/updated").await;
    call(
        port,
        "alice-token",
        "complete_task",
        r#"{"taskId":"task-alice-1"}"#,
    )
    .await;
    read_until(&mut alice, "notifications/tasks").await;
    settles(metrics.port, deliveries, deliveries_0 + 2.0).await;

    drop((bob, alice, again, nothing));
    settles(metrics.port, streams, streams_0).await;
    let text = scrape(metrics.port).await;
    assert_eq!(sample(&text, &ended("client_gone")), 2.0);
    assert_eq!(sample(&text, &ended("cap")), 1.0);
    assert_eq!(
        sample(&text, "mcp_edge_listen_stream_duration_seconds_count"),
        2.0
    );

    // Every request the edge read the method of is an operation, in
    // OpenTelemetry's Prometheus form, with the conventions' buckets.
    let text = scrape(metrics.port).await;
    let calls = text
        .lines()
        .find(|line| {
            line.starts_with("mcp_server_operation_duration_seconds_count{")
                && line.contains(r#"mcp_method_name="tools/call""#)
                && line.contains(r#"gen_ai_tool_name="touch_resource""#)
        })
        .unwrap_or_else(|| panic!("no touch_resource operation in\n{text}"));
    for label in [
        r#"gen_ai_operation_name="execute_tool""#,
        r#"mcp_protocol_version="2026-07-28""#,
        r#"network_transport="tcp""#,
        r#"network_protocol_name="http""#,
        r#"network_protocol_version="1.1""#,
    ] {
        assert!(calls.contains(label), "{label} not in {calls}");
    }
    assert!(calls.ends_with(" 1"), "{calls}");
    let refusals = text
        .lines()
        .find(|line| {
            line.starts_with("mcp_server_operation_duration_seconds_count{")
                && line.contains(r#"mcp_method_name="subscriptions/listen""#)
                && line.contains(r#"rpc_response_status_code="-32013""#)
        })
        .unwrap_or_else(|| panic!("no refused listen in\n{text}"));
    assert!(refusals.contains(r#"error_type="-32013""#), "{refusals}");
    assert!(text.contains(r#"le="0.01""#) && text.contains(r#"le="300""#));

    // Labels come from fixed sets: no URI, caller or task id anywhere.
    for word in ["demo://", "bob", "alice", "task-"] {
        assert!(!text.contains(word), "{word} in\n{text}");
    }
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let labels = line
            .split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .map_or("", |(labels, _)| labels);
        for label in labels.split(',').filter(|label| !label.is_empty()) {
            let (key, _) = label.split_once('=').unwrap();
            assert!(
                [
                    "method",
                    "reason",
                    "limit",
                    "result",
                    "le",
                    "mcp_method_name",
                    "mcp_protocol_version",
                    "network_transport",
                    "network_protocol_name",
                    "network_protocol_version",
                    "gen_ai_tool_name",
                    "gen_ai_operation_name",
                    "rpc_response_status_code",
                    "error_type",
                ]
                .contains(&key),
                "{line}"
            );
        }
    }
    assert!(
        text.contains(r#"mcp_edge_requests_intercepted_total{method="subscriptions/listen"}"#),
        "{text}"
    );
    assert!(
        text.contains("mcp_edge_access_hook_seconds_bucket"),
        "{text}"
    );

    // A page whose name was rebound to the metrics address reads nothing:
    // the MCP endpoint's Host rule.
    let (m, p) = (metrics.port, port);
    for host in [
        format!("evil.example:{m}"),
        format!("127.0.0.1:{p}"),
        format!("10.0.0.1:{m}"),
    ] {
        let (head, body) = get_metrics(m, &host).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{host}: {head}");
        assert!(!body.contains("mcp_edge_"), "{host}: {body}");
    }
    for host in [format!("localhost:{m}"), format!("[::1]:{m}")] {
        let (head, _) = get_metrics(m, &host).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{host}: {head}");
    }

    stop_rmcp.expect("the stack was built")();
    server.stop().await;
    metrics.stop().await;
}
