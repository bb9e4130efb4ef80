//! Listen buckets: streams capped per caller (name, peer or `X-Forwarded-For`) and in total.

use std::net::Ipv4Addr;
use std::time::Duration;

use mcp_edge_reference::app;
use serde_json::{json, Value};
use tokio::time::timeout;

use crate::{listen_via, open_streams, Client, Response, Server, ALICE, ANONYMOUS, BOB, WAIT};

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
        json!({ "limit": "streams_per_caller", "max": 1, "retryAfter": 5 }),
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
    assert_eq!(
        error["data"],
        json!({ "limit": "streams", "max": 2, "retryAfter": 5 })
    );
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
    // (Bob's: alice's own listen, under the same id, is still open.)
    let again = readme_listen(port, Client::default(), BOB, &mut reopened).await;
    assert_eq!(again.0, 200);
    drop((open, reopened));
    server.stop().await;
}
