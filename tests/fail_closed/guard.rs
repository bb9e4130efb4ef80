//! 7-9. What leaves the guard is exactly what it checked.

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};

use crate::{guarded, Canned, Headers, JSON, SSE};

const TAG: &str = r#""_meta":{"io.modelcontextprotocol/subscriptionId":7}"#;

#[tokio::test]
async fn only_what_the_filter_honours_leaves_the_stream() {
    let ack = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["demo://public/a","demo://private/b"]}},"extra":"leak",{TAG}}},"extra":1}}"#
    );
    let events = [
        ack.clone(),
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{{TAG}}}}}"#),
        // Not honoured (prompts are not advertised), a case variant, a request, a batch.
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{{{TAG}}}}}"#),
        r#"{"jsonrpc":"2.0","method":"Notifications/tools/list_changed"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#.to_owned(),
        r#"[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}]"#.to_owned(),
        // A covered URI, an uncovered one, one escaping by dot segments.
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"demo://public/a/x",{TAG}}}}}"#),
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://private/b"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://public/a/../../private/b"}}"#.to_owned(),
        // Ambiguous or foreign tags.
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7,"io.modelcontextprotocol/subscriptionId":7}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":[7]}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8}}}"#.to_owned(),
        // Results for other ids; the listen's own, with a leak.
        r#"{"jsonrpc":"2.0","id":8,"result":{}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"k":1},"leak":"secret"}}"#.to_owned(),
    ];
    let mut stream: String = events
        .iter()
        .map(|data| format!("data: {data}\n\n"))
        .collect();
    // Data that is not exactly one JSON value, then an unterminated last block.
    stream.push_str(
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\ndata: {}\n\n",
    );
    stream.push_str(": keep-alive\n\n");
    stream.push_str("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
    let expected = vec![
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://public/a"]},
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {
            "uri": "demo://public/a/x", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        json!({"jsonrpc": "2.0", "id": 7, "result": {"_meta": {"k": 1}, "resultType": "complete"}}),
    ];
    for chunk in 1..=stream.len() {
        let canned = Canned {
            status: StatusCode::OK,
            headers: vec![SSE],
            body: Bytes::from(stream.clone()),
            chunk,
        };
        for (response, messages) in guarded(canned).await {
            assert_eq!(messages, expected, "chunks of {chunk}");
            let text = std::str::from_utf8(response.body()).unwrap();
            assert!(text.contains(": keep-alive\n\n"), "comments pass");
            assert!(
                !text.contains("leak") && !text.contains("extra"),
                "chunks of {chunk}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn events_leave_as_they_were_parsed() {
    let tools = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    // An unknown field, a CR-only line end inside the event, a BOM inside
    // the stream (its line is no field), a valid event.
    let stream = format!(
        "foo: hidden\ndata: {tools}\n\nid: 1\rdata: {tools}\n\n\u{feff}data: {tools}\n\nid: 2\ndata: {tools}\n\n"
    );
    for chunk in 1..=stream.len() {
        let canned = Canned {
            status: StatusCode::OK,
            headers: vec![SSE],
            body: Bytes::from(stream.clone()),
            chunk,
        };
        for (response, messages) in guarded(canned).await {
            let text = std::str::from_utf8(response.body()).unwrap();
            assert_eq!(messages.len(), 4, "ack and three events: {text}");
            assert!(
                !text.contains("foo") && !text.contains('\r') && !text.contains('\u{feff}'),
                "{text:?}"
            );
            assert!(
                text.ends_with(&format!("id: 2\ndata: {tools}\n\n")),
                "a plain event passes as it came: {text:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_listen_answered_other_than_by_a_stream_passes_only_as_its_own_answer() {
    let cases: [(Headers<'static>, &str, Option<Value>); 7] = [
        (
            &[JSON],
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"no"},"x":1}"#,
            Some(json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "no"}})),
        ),
        (
            &[("content-type", "text/plain")],
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","leak":1}}"#,
            Some(json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}})),
        ),
        (&[JSON], r#"{"jsonrpc":"2.0","id":8,"result":{}}"#, None),
        (
            &[JSON],
            r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true}}}"#,
            None,
        ),
        (&[], "plain words", None),
        (&[JSON, ("content-encoding", "gzip")], "\u{1f}\u{8b}", None),
        (&[SSE, ("content-encoding", "br")], "data: {}\n\n", None),
    ];
    for (headers, body, expected) in cases {
        let canned = Canned {
            status: StatusCode::OK,
            headers: headers.to_vec(),
            body: Bytes::from(body),
            chunk: 3,
        };
        for (response, messages) in guarded(canned).await {
            match &expected {
                Some(expected) => assert_eq!(&messages[0], expected, "{body}"),
                None => {
                    assert_eq!(
                        response.status(),
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "{body}"
                    );
                    assert_eq!(messages[0]["error"]["code"], -32603, "{body}");
                    assert_eq!(messages[0]["id"], 7, "{body}");
                    assert!(response.headers().get("content-encoding").is_none());
                }
            }
        }
    }
    // An empty answer carries nothing: it passes.
    let canned = Canned {
        status: StatusCode::OK,
        headers: vec![],
        body: Bytes::new(),
        chunk: 1,
    };
    for (response, _) in guarded(canned).await {
        assert!(response.body().is_empty());
    }
}
