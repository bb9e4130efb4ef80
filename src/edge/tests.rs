//! The combined layer reads each body once: one peek, one classification,
//! one scan of every byte, where the two layers stacked peek twice and scan
//! what both of them need.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use serde_json::Value;
use tower::{Layer, Service, ServiceExt};

use super::layer::EdgeLayer;
use crate::capabilities::layer::CapabilitiesLayer;
use crate::http::body::RequestBody;
use crate::http::peek::tally;
use crate::listen_filter::layer::ListenFilterLayer;
use crate::profile::ServerProfile;

fn profile() -> ServerProfile {
    ServerProfile::builder()
        .base_capabilities(serde_json::json!({"tools": {}}))
        .build()
        .unwrap()
}

/// Reads the whole request and answers it with a `server/discover` result,
/// which the capabilities promise rewrites when the request was one.
async fn inner<B>(request: Request<RequestBody<B>>) -> Result<Response<String>, Infallible>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let id = serde_json::from_slice::<Value>(&body).map_or(Value::Null, |v| v["id"].clone());
    let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
        "resultType": "complete", "capabilities": {"prompts": {}}
    }});
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(answer.to_string())
        .unwrap();
    Ok(response)
}

/// A body handed over in pieces, its end told only after the last one.
type Streamed =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

fn post(pieces: &[String]) -> Request<Streamed> {
    let frames: Vec<_> = pieces
        .iter()
        .map(|piece| Ok(Frame::data(Bytes::from(piece.clone()))))
        .collect();
    Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(futures_util::stream::iter(frames)))
        .unwrap()
}

/// Sends `pieces` through `service`, reads the answer to its end, and
/// returns the peeks begun and the bytes scanned on the way.
async fn reads<S, B>(service: S, pieces: &[String]) -> (usize, usize)
where
    S: Service<Request<Streamed>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let _ = tally::take();
    let response = service.oneshot(post(pieces)).await.unwrap();
    assert_eq!(response.status(), 200, "{pieces:?}");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&body).unwrap();
    // The capabilities promise was kept: a discover's answer is the profile's.
    let discover = pieces.concat().contains("server/discover");
    let capabilities = &answer["result"]["capabilities"];
    assert_eq!(capabilities.get("tools").is_some(), discover, "{answer}");
    assert_eq!(capabilities.get("prompts").is_some(), !discover, "{answer}");
    tally::take()
}

/// A 1 KiB `tools/call`, its method first or last, and a `server/discover`,
/// each in one piece and in three.
fn requests() -> Vec<Vec<String>> {
    let padding = "x".repeat(1000);
    let first = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{padding}"}}}}}}"#
    );
    let last = format!(
        r#"{{"jsonrpc":"2.0","id":7,"params":{{"name":"echo","arguments":{{"text":"{padding}"}}}},"method":"tools/call"}}"#
    );
    let discover = r#"{"jsonrpc":"2.0","id":8,"method":"server/discover","params":{}}"#.to_owned();
    let mut requests = Vec::new();
    for body in [first, last, discover] {
        let third = body.len() / 3;
        requests.push(vec![body.clone()]);
        requests.push(vec![
            body[..third].to_owned(),
            body[third..2 * third].to_owned(),
            body[2 * third..].to_owned(),
        ]);
    }
    requests
}

#[tokio::test]
async fn the_combined_layer_peeks_once_and_scans_every_byte_once() {
    let service = || tower::service_fn(inner::<Streamed>);
    for pieces in requests() {
        let length: usize = pieces.iter().map(String::len).sum();
        let edge = EdgeLayer::new(profile()).layer(service());
        assert_eq!(reads(edge, &pieces).await, (1, length), "{pieces:?}");
    }
}

#[tokio::test]
async fn the_two_layers_stacked_peek_and_scan_twice() {
    let discover = |pieces: &[String]| pieces.concat().contains("server/discover");
    for pieces in requests() {
        let length: usize = pieces.iter().map(String::len).sum();
        let caps_outside = CapabilitiesLayer::new(profile()).layer(
            ListenFilterLayer::new(profile())
                .layer(tower::service_fn(inner::<RequestBody<Streamed>>)),
        );
        let listen_outside = ListenFilterLayer::new(profile()).layer(
            CapabilitiesLayer::new(profile())
                .layer(tower::service_fn(inner::<RequestBody<Streamed>>)),
        );
        for (peeks, scanned) in [
            reads(caps_outside, &pieces).await,
            reads(listen_outside, &pieces).await,
        ] {
            assert_eq!(peeks, 2, "{pieces:?}");
            // The listen promise scans every byte, the capabilities one up
            // to the method, or all of a discover.
            assert!(scanned > length, "{scanned} of {length}: {pieces:?}");
            if discover(&pieces) {
                assert_eq!(scanned, 2 * length, "{pieces:?}");
            }
        }
    }
}

#[tokio::test]
async fn the_response_body_is_made_from_bytes() {
    crate::http::reply::assert_made_from_bytes::<super::ResponseBody<http_body_util::Full<Bytes>>>(
    )
    .await;
}
