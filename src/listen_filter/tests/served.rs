//! 9. A stream the listen hub served is not read again.

use super::*;

/// The body the inner service answered with is this test's, for listen 7.
fn is_ours(body: &dyn std::any::Any, filter: &HonouredFilter) -> bool {
    body.is::<Body>() && filter.subscription_id().get() == "7"
}

fn is_not_ours(_: &dyn std::any::Any, _: &HonouredFilter) -> bool {
    false
}

/// The hub's mark spares the guard exactly when its test of the body says
/// so: the test is given the inner's body itself and the listen's filter.
#[tokio::test]
async fn a_mark_spares_the_guard_only_when_its_test_finds_the_body_its_own() {
    use crate::filter::stream::{BodyTest, Served};

    let leak = note(
        "notifications/resources/updated",
        "7",
        &format!(r#""uri":"{BOB_NOTES}""#),
    );
    let stream = ack_event("7", ANONYMOUS_ACK) + &leak;
    let tests: [(BodyTest, String); 2] = [
        (is_ours, stream.clone()),
        (is_not_ours, ack_event("7", ANONYMOUS_ACK)),
    ];
    for (test, expected) in tests {
        let body = stream.clone();
        let inner = Inner::new(Arc::new(move |_: &Received| {
            let mut response = sse_response(vec![Bytes::from(body.clone())]);
            response.extensions_mut().insert(Served::new(test));
            response
        }));
        let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
        assert_eq!(text(response).await, expected);
    }
}
