//! 4. Readiness: `EdgeLayer` is ready when its inner is, and calls the one it readied.

use std::task::Poll;

use http::{Request, Response, StatusCode};
use mcp_edge::{EdgeLayer, HonouredFilter, RequestBody};
use serde_json::{json, Value};

use super::corpus::{sample, Case, Delivery};
use crate::{whole, Answer, Chunked, Drained, SETUPS};

type MockRequest = Request<RequestBody<Chunked>>;
type MockResponse = Response<Chunked>;

#[tokio::test]
async fn edge_is_ready_when_the_inner_is_and_calls_the_one_readied() {
    let (profile, _) = SETUPS[0].profile();
    let (mut service, mut handle) =
        tower_test::mock::spawn_layer::<MockRequest, MockResponse, _>(EdgeLayer::new(profile));
    let answer = Answer {
        chunk: 4,
        ..whole(false)
    };

    handle.allow(0);
    assert!(
        service.poll_ready().is_pending(),
        "pending while the inner is"
    );
    handle.allow(1);
    assert!(service.is_woken(), "the inner's wake-up reaches the caller");
    assert!(matches!(service.poll_ready(), Poll::Ready(Ok(()))));

    // A discover is handed on only once its body is read, from the future:
    // a clone that was never readied would panic when called.
    let discover = Case {
        delivery: Delivery::Small(3),
        ..Case::post(sample("discover"))
    };
    let future = tokio::spawn(service.call(discover.request()));
    let (request, respond) = handle.next_request().await.expect("the inner was called");
    let body = Drained::of(request.into_body()).await;
    assert_eq!(body.data, discover.sample.bytes);
    respond.send_response(answer.respond(&body.data).0);
    let response = future.await.unwrap().unwrap();
    let message: Value =
        serde_json::from_slice(&Drained::of(response.into_body()).await.data).unwrap();
    assert_eq!(message["result"]["capabilities"]["logging"], json!({}));

    // The permit was spent on that call: the service left is not ready.
    assert!(
        service.poll_ready().is_pending(),
        "a spent permit is not reused"
    );
    handle.allow(1);
    assert!(matches!(service.poll_ready(), Poll::Ready(Ok(()))));
    let listen = Case::post(sample("listen"));
    let future = tokio::spawn(service.call(listen.request()));
    let (request, respond) = handle.next_request().await.expect("the inner was called");
    assert!(request.extensions().get::<HonouredFilter>().is_some());
    respond.send_response(Response::new(Chunked::new(Vec::new(), true)));
    assert_eq!(future.await.unwrap().unwrap().status(), StatusCode::OK);

    // The inner's readiness error is the outer's.
    handle.send_error("overloaded");
    match service.poll_ready() {
        Poll::Ready(Err(error)) => assert_eq!(error.to_string(), "overloaded"),
        other => panic!("expected the inner's error, got {other:?}"),
    }
}
