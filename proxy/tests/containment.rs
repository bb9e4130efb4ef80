//! Containment: in front of an upstream whose own listen authorizes
//! nothing (the reference deployment with `--bare`), a caller's listen
//! through the proxy hears only what the `[[allow]]` rules let it read,
//! with the proxy forwarding listens (no `[hub]`) and holding them
//! (`[hub]`); direct, the same upstream leaks.

use std::time::Duration;

use serde_json::json;

mod common;

use common::{config, listen, touch, Leaky, Running};

const ALICE_NOTES: &str = "demo://users/alice/notes";
const BOB_NOTES: &str = "demo://users/bob/notes";

/// Direct, bob's listen is acknowledged with alice's notes: the upstream
/// leaks what exists and promises him her updates. (Its delivery checks
/// again; the SDK upstreams of `tests/proxy/run.sh` deliver them too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_the_upstream_leaks() {
    let upstream = Leaky::start().await;
    let (_bob, honoured) = listen(
        upstream.port(),
        Some("bob-token"),
        &[ALICE_NOTES, BOB_NOTES],
    )
    .await;
    assert_eq!(honoured, json!([ALICE_NOTES, BOB_NOTES]));
}

/// Through the proxy, without `[hub]`: the listen reaches the upstream
/// rewritten to bob's notes, and its stream is guarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_proxy_a_forwarded_listen_hears_only_what_its_caller_reads() {
    let upstream = Leaky::start().await;
    let proxy = Running::start(&config(upstream.port(), "")).await;
    let (mut bob, honoured) =
        listen(proxy.port(), Some("bob-token"), &[ALICE_NOTES, BOB_NOTES]).await;
    assert_eq!(honoured, json!([BOB_NOTES]));
    touch(proxy.port(), "alice-token", ALICE_NOTES).await;
    touch(proxy.port(), "bob-token", BOB_NOTES).await;
    let heard = bob
        .event(Duration::from_secs(5))
        .await
        .expect("bob's update");
    assert_eq!(heard["params"]["uri"], BOB_NOTES);
    assert_eq!(bob.event(Duration::from_millis(500)).await, None);
    // Anonymous: the public readme only.
    let (_, honoured) = listen(proxy.port(), None, &[ALICE_NOTES, "demo://public/readme"]).await;
    assert_eq!(honoured, json!(["demo://public/readme"]));
}

/// Through the proxy, with `[hub]`: the proxy holds the stream, the
/// upstream publishes, and bob hears only his notes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_proxy_a_held_listen_hears_only_what_its_caller_reads() {
    let upstream = Leaky::start().await;
    let hub = "[hub]\npublish = \"127.0.0.1:1\"\npublish_token = \"0123456789abcdef\"\n";
    let proxy = Running::start(&config(upstream.port(), hub)).await;
    let (mut bob, honoured) =
        listen(proxy.port(), Some("bob-token"), &[ALICE_NOTES, BOB_NOTES]).await;
    assert_eq!(honoured, json!([BOB_NOTES]));
    let publisher = proxy.proxy.hub.as_ref().unwrap().publisher();
    assert_eq!(publisher.resource_updated(ALICE_NOTES).await.streams, 0);
    assert_eq!(publisher.resource_updated(BOB_NOTES).await.streams, 1);
    let heard = bob
        .event(Duration::from_secs(5))
        .await
        .expect("bob's update");
    assert_eq!(heard["params"]["uri"], BOB_NOTES);
    assert_eq!(bob.event(Duration::from_millis(300)).await, None);
}

/// A `resources/read` through the proxy is granted by the same rules: bob
/// reading alice's notes is answered as for a resource that does not
/// exist, whatever spelling or duplicate hides the URI; his own pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_through_the_proxy_is_granted_as_a_listen_is() {
    use common::modern;

    let upstream = Leaky::start().await;
    let proxy = Running::start(&config(upstream.port(), "")).await;
    let read = |token: &'static str, params: &'static str| {
        let port = proxy.port();
        async move {
            let answer = modern(
                port,
                Some(token),
                9,
                "resources/read",
                Some(ALICE_NOTES),
                params,
            )
            .await;
            assert_eq!(answer.status, 200);
            answer.message().await
        }
    };
    let own = read("alice-token", r#","uri":"demo://users/alice/notes""#).await;
    assert!(own["result"]["contents"].is_array(), "{own}");
    for params in [
        r#","uri":"demo://users/alice/notes""#,
        r#","\u0075ri":"demo://users/alice/notes""#,
        r#","uri":"demo://users/bob/notes","uri":"demo://users/alice/notes""#,
        r#","uri":"demo://users/bob/../alice/notes""#,
    ] {
        let refused = read("bob-token", params).await;
        assert_eq!(refused["error"]["code"], -32002, "{params}: {refused}");
        assert_eq!(refused["id"], 9);
        assert!(!refused.to_string().contains("alice"), "{refused}");
    }
}
