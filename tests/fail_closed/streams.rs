//! Every other event stream: resource updates only for what the caller reads.

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;

use crate::{common, listen_profile, post, through, Canned, Stack, SSE, STACKS};

#[tokio::test]
async fn every_other_stream_drops_updates_the_caller_may_not_read() {
    let update = |uri: &str| {
        format!(
            "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{uri}\"}}}}\n\n"
        )
    };
    let answer = |id: u32| {
        format!(
            r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{}},"serverInfo":{{"name":"x","version":"1"}}}}}}"#
        ) + "\n\n"
    };
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
    let stream = [
        update("demo://private/b"),
        update("demo://public/a"),
        answer(1),
        "data: {\"method\":\"notifications\\/resources\\/updated\",\"params\":{\"uri\":\"demo://private/c\"}}\n\n"
            .to_owned(),
    ]
    .concat();
    let request = |what: &str| match what {
        "GET" => Request::get("/mcp")
            .header("accept", "text/event-stream")
            .body(Full::new(Bytes::new()))
            .unwrap(),
        "tools/call" => post(&[], call),
        _ => post(&[], initialize),
    };
    for what in ["GET", "tools/call", "initialize"] {
        for chunk in 1..=stream.len() {
            let canned = Canned {
                status: StatusCode::OK,
                headers: vec![SSE],
                body: Bytes::from(stream.clone()),
                chunk,
            };
            for stack in STACKS {
                let response =
                    through(stack, listen_profile(), canned.clone(), request(what)).await;
                let messages = common::sse_messages(response.body());
                let uris: Vec<&str> = messages
                    .iter()
                    .filter_map(|m| m["params"]["uri"].as_str())
                    .collect();
                let context = format!("{what} through {stack:?}, chunks of {chunk}");
                // The capabilities layer alone makes no promise about updates.
                match stack {
                    Stack::Capabilities => assert_eq!(
                        uris,
                        ["demo://private/b", "demo://public/a", "demo://private/c"],
                        "{context}"
                    ),
                    _ => assert_eq!(uris, ["demo://public/a"], "{context}"),
                }
                assert!(
                    messages.iter().any(|m| m["id"] == 1),
                    "the answer arrives: {context}"
                );
            }
        }
    }
}
