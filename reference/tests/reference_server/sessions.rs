//! Sessions and slow bodies: legacy sessions capped and bound to their caller; trickles cut off.

use std::time::Duration;

use mcp_edge_reference::app;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::{
    initialize, initialize_body, modern, post_as, request, Server, ALICE, ANONYMOUS, BOB, LEGACY,
    MODERN, WAIT,
};

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
