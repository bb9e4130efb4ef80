//! 5. Per caller, behind the auth layer.

use super::*;

async fn ack_for(token: Option<&str>, notifications: &str) -> String {
    let inner = Inner::new(echo_ack(vec![]));
    let response = run(layer(), &inner, listen_request(token, "1", notifications)).await;
    let stream = text(response).await;
    if inner.calls() == 0 {
        assert_eq!(
            stream,
            ended_at_once("1"),
            "nothing honoured: answered at once"
        );
        return "{}".to_owned();
    }
    let ack = inner.last().filter().ack().get().to_owned();
    assert_eq!(
        stream,
        ack_event("1", &ack),
        "the client sees the ack the inner service got"
    );
    assert_eq!(inner.last().text(), listen_body("1", &ack));
    ack
}

#[tokio::test]
async fn resources_per_caller() {
    let asked = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{README}"]}}"#);
    assert_eq!(
        ack_for(Some("alice-token"), &asked).await,
        format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{README}"]}}"#)
    );
    let for_bob = ack_for(Some("bob-token"), &asked).await;
    assert_eq!(
        for_bob,
        format!(r#"{{"resourceSubscriptions":["{README}"]}}"#)
    );
    // Bob cannot tell alice's notes exist: his ack is the one he gets without them.
    let without = ack_for(
        Some("bob-token"),
        &format!(r#"{{"resourceSubscriptions":["{README}"]}}"#),
    )
    .await;
    assert_eq!(for_bob, without);
    let with_unknown = ack_for(
        Some("bob-token"),
        &format!(r#"{{"resourceSubscriptions":["{UNKNOWN}","{README}"]}}"#),
    )
    .await;
    assert_eq!(for_bob, with_unknown);

    let all = format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}","{BOB_NOTES}","{NEWS}"]}}"#);
    assert_eq!(
        ack_for(None, &all).await,
        format!(r#"{{"resourceSubscriptions":["{NEWS}"]}}"#)
    );
    assert_eq!(
        ack_for(Some("mallory-token"), &all).await,
        format!(r#"{{"resourceSubscriptions":["{NEWS}"]}}"#)
    );
    assert_eq!(
        ack_for(
            None,
            &format!(r#"{{"resourceSubscriptions":["{ALICE_NOTES}"]}}"#)
        )
        .await,
        "{}"
    );
}

#[tokio::test]
async fn tasks_per_caller() {
    let asked = r#"{"taskIds":["task-alice-1","task-bob-1","task-ghost"]}"#;
    assert_eq!(
        ack_for(Some("alice-token"), asked).await,
        r#"{"taskIds":["task-alice-1"]}"#
    );
    assert_eq!(
        ack_for(Some("bob-token"), asked).await,
        r#"{"taskIds":["task-bob-1"]}"#
    );
    // A foreign task and an unknown one are dropped alike.
    let foreign = ack_for(Some("alice-token"), r#"{"taskIds":["task-bob-1"]}"#).await;
    let unknown = ack_for(Some("alice-token"), r#"{"taskIds":["task-ghost"]}"#).await;
    assert_eq!(foreign, "{}");
    assert_eq!(foreign, unknown);
    // An anonymous caller owns no task.
    assert_eq!(ack_for(None, asked).await, "{}");
}
