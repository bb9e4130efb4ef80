//! A listen's life in front of an inner service: one that honours nothing
//! ends at once (`rules.rs`); a caller's subscription id is one stream's
//! at a time.

use super::*;

/// While a caller's listen is open, its second listen under the same
/// subscription id is refused (-32600, 409), before the inner service; the
/// id is free again once the first stream is gone. Other ids, other
/// callers, and anonymous callers (who cannot be told apart) are not held
/// to it.
#[tokio::test]
async fn a_callers_second_listen_under_an_open_subscription_id_is_refused() {
    let layer = layer();
    let inner = Inner::new(echo_ack(vec![]));
    let notes = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}"]}}"#);
    let readme = format!(r#"{{"resourceSubscriptions":["{README}"]}}"#);
    let news = format!(r#"{{"resourceSubscriptions":["{NEWS}"]}}"#);
    let open = |token, id, asked: &str| {
        let request = listen_request(token, id, asked);
        run(layer.clone(), &inner, request)
    };
    let first = open(Some("alice-token"), "7", &notes).await;
    assert_eq!(first.status(), StatusCode::OK);

    let again = open(Some("alice-token"), "7", &notes).await;
    let (body, rejection) = refusal(again, StatusCode::CONFLICT, -32600, json!(7)).await;
    assert_eq!(
        rejection,
        Rejection::Listen(ListenError::SubscriptionIdInUse)
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("subscription id"),
        "{body}"
    );
    assert_eq!(inner.calls(), 1);

    let other_id = open(Some("alice-token"), "8", &notes).await;
    let other_caller = open(Some("bob-token"), "7", &readme).await;
    let anonymous = open(None, "9", &news).await;
    let anonymous_again = open(None, "9", &news).await;
    for response in [&other_id, &other_caller, &anonymous, &anonymous_again] {
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(inner.calls(), 5);

    drop(first);
    let reopened = open(Some("alice-token"), "7", &notes).await;
    assert_eq!(reopened.status(), StatusCode::OK);
    assert_eq!(
        text(reopened).await,
        ack_event("7", &notes),
        "the stream of the id given back"
    );
}

/// A stream read to its end gives its id back too: `"a"` and `1` are other
/// ids than `"1"`.
#[tokio::test]
async fn a_finished_stream_gives_its_id_back() {
    let layer = layer();
    let inner = Inner::new(echo_ack(vec![]));
    let notes = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}"]}}"#);
    for id in [r#""1""#, r#""1""#, "1", r#""a""#] {
        let request = listen_request(Some("alice-token"), id, &notes);
        let response = run(layer.clone(), &inner, request).await;
        assert_eq!(text(response).await, ack_event(id, &notes));
    }
    assert_eq!(inner.calls(), 4);
}
