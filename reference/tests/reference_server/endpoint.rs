//! The endpoint: discovery, the legacy handshake, listens and updates per caller, bad tokens.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::timeout;

use crate::{
    call_tool, initialize, listen, modern, open_streams, request, Server, ALICE, ANONYMOUS, BOB,
    LEGACY, MODERN, QUIET, WAIT,
};

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
