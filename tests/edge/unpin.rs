//! 2. Bodies that are not `Unpin` pass every layer.

use std::convert::Infallible;
use std::fmt::Display;

use bytes::Bytes;
use http::{header, Request, Response};
use http_body::Body;
use mcp_edge::{CapabilitiesLayer, EdgeLayer, Era, ListenFilterLayer, ServerProfile};
use serde_json::{json, Value};
use tower::{Layer, Service, ServiceBuilder};

use super::corpus::listen;
use super::run::exchange;
use crate::common::{modern_body, sse_messages};
use crate::{take, whole, Answer, Chunked, Log, Recorder, INNER_CAPS, JSON, SETUPS};

/// Implemented twice for an `Unpin` type, once for any other: naming
/// `check` compiles only for a type that is not `Unpin`.
trait NotUnpin<Which> {
    fn check() {}
}
impl<T: ?Sized> NotUnpin<()> for T {}
impl<T: ?Sized + Unpin> NotUnpin<u8> for T {}

/// Sends a discover, a listen and a tools/call, each body in `!Unpin`
/// chunks, through `service` (answered in `!Unpin` chunks too), and checks
/// each answer by what the stack is said to do.
async fn check_unpin_free<S, B>(
    name: &str,
    service: S,
    (profile, log): (&ServerProfile, &Log),
    rewrites: bool,
    honours: bool,
) where
    S: Service<Request<Chunked>, Response = Response<B>, Error = Infallible> + Clone,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let post = |body: String| {
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, JSON)
            .body(Chunked::split(&Bytes::from(body), 5, false))
            .unwrap()
    };
    let discover = modern_body("server/discover", json!(1), json!({}));
    let (_, _, body) = exchange(service.clone(), post(discover)).await;
    let capabilities = &sse_messages(&body.data)[1]["result"]["capabilities"];
    let expected: Value = match rewrites {
        true => {
            let mut ours = profile.capabilities_for(None, Era::Modern);
            ours.insert("experimental".into(), json!({"inner": {}}));
            Value::Object(ours)
        }
        false => serde_json::from_str(INNER_CAPS).unwrap(),
    };
    assert_eq!(capabilities, &expected, "{name}: discover");

    let asked = r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme","demo://private/notes"]}"#;
    let honoured = r#"{"toolsListChanged":true,"resourceSubscriptions":["demo://public/readme"]}"#;
    let listen = listen("\"u-1\"", &format!(r#"{{"notifications":{asked}}}"#));
    let (_, _, body) = exchange(service.clone(), post(listen)).await;
    let seen = take(log).pop().expect("the inner was called");
    let ack = &sse_messages(&body.data)[0]["params"]["notifications"];
    match honours {
        true => {
            let filter = seen.filter.expect("a HonouredFilter");
            assert_eq!(
                filter,
                (honoured.to_owned(), "\"u-1\"".to_owned()),
                "{name}"
            );
            assert_eq!(
                ack,
                &serde_json::from_str::<Value>(honoured).unwrap(),
                "{name}"
            );
        }
        false => assert_eq!(
            seen.filter, None,
            "{name}: no filter without the listen layer"
        ),
    }

    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#;
    let (_, _, body) = exchange(service, post(call.to_owned())).await;
    let seen = take(log).pop().expect("the inner was called");
    assert_eq!(
        seen.body.data, call,
        "{name}: the inner read the body byte for byte"
    );
    assert_eq!(
        body.data, seen.answered,
        "{name}: the answer passed byte for byte"
    );
}

#[tokio::test]
async fn bodies_that_are_not_unpin_pass_every_layer() {
    <Chunked as NotUnpin<_>>::check();
    let (profile, _) = SETUPS[0].profile();
    let (inner, log) = Recorder::new(Answer {
        chunk: 9,
        ..whole(true)
    });
    let caps = CapabilitiesLayer::new(profile.clone());
    let listen = ListenFilterLayer::new(profile.clone());
    let both = ServiceBuilder::new()
        .layer(caps.clone())
        .layer(listen.clone());
    let edge = EdgeLayer::new(profile.clone());
    let with = (&profile, &log);
    check_unpin_free(
        "CapabilitiesLayer",
        caps.layer(inner.clone()),
        with,
        true,
        false,
    )
    .await;
    check_unpin_free(
        "ListenFilterLayer",
        listen.layer(inner.clone()),
        with,
        false,
        true,
    )
    .await;
    check_unpin_free(
        "both stacked",
        both.service(inner.clone()),
        with,
        true,
        true,
    )
    .await;
    check_unpin_free("EdgeLayer", edge.layer(inner), with, true, true).await;
}
