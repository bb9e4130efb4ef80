//! 5: responses left alone

use super::*;

async fn assert_untouched(request: Request<Counted>, reply: Reply) {
    let mut expected_headers: HeaderMap = reply.clone().into_response().headers().clone();
    let sse = expected_headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream")
        && !expected_headers.contains_key(header::CONTENT_ENCODING);
    if sse {
        // A stream is let through before its events are seen, so its length
        // is dropped whether or not an event turns out to need a rewrite.
        expected_headers.remove(header::CONTENT_LENGTH);
    }
    let expected_body = reply.chunks.concat();
    let (out, _) = run(&profile(), request, reply).await;
    assert_eq!(&out.body[..], &expected_body[..], "body untouched");
    assert_eq!(out.headers, expected_headers, "headers untouched");
    assert!(out.rejection.is_none());
}

/// The answer to `request` (id `id`) is the layer's -32603 error in place of
/// `reply`: the inner service's capabilities never reach the client.
async fn assert_replaced(request: Request<Counted>, reply: Reply, id: Value) {
    let (out, _) = run(&profile(), request, reply).await;
    let sse = out
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream");
    let message = match sse {
        true => {
            let text = out.text();
            let data = text.strip_prefix("data: ").expect("one event");
            serde_json::from_str(data.trim_end()).unwrap()
        }
        false => {
            assert_eq!(out.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(out.headers[header::CONTENT_TYPE], "application/json");
            assert!(out.headers.get(header::CONTENT_ENCODING).is_none());
            out.json()
        }
    };
    assert_eq!(message["error"]["code"], -32603, "{message}");
    assert_eq!(message["id"], id, "{message}");
    assert!(message.get("result").is_none(), "{message}");
}

#[tokio::test]
async fn error_responses_are_untouched() {
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no","data":{"capabilities":{}}}}"#;
    assert_untouched(discover_request(Counted::one(DISCOVER)), Reply::json(error)).await;
    assert_untouched(
        post_request(None, Counted::one(INITIALIZE)),
        Reply::json(error),
    )
    .await;
    let sse = format!("data: {error}\n\n");
    assert_untouched(discover_request(Counted::one(DISCOVER)), Reply::sse(&sse)).await;
}

#[tokio::test]
async fn answers_for_another_id() {
    // As the whole answer, it is not the answer: replaced.
    let other = DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":2"#, 1);
    assert_replaced(
        discover_request(Counted::one(DISCOVER)),
        Reply::json(&other),
        json!(1),
    )
    .await;
    // On a stream it is dropped: a client matching ids loosely could take
    // it for this request's answer.
    let sse = format!("data: {other}\n\n");
    let (out, _) = run(
        &profile(),
        discover_request(Counted::one(DISCOVER)),
        Reply::sse(&sse),
    )
    .await;
    assert_eq!(out.text(), "");
}

#[tokio::test]
async fn the_request_id_is_read_wherever_it_stands() {
    // Before the method the scan reads it in its one pass; after the method,
    // or escaped, the request is walked for it.
    let after = r#"{"jsonrpc":"2.0","method":"server/discover","params":{},"id":"a"}"#;
    let escaped = r#"{"jsonrpc":"2.0","id":"\u0061","method":"server/discover","params":{}}"#;
    let before = r#"{"jsonrpc":"2.0","id":"a","method":"server/discover","params":{}}"#;
    let result = DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":"a""#, 1);
    let other = DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":"b""#, 1);
    for request in [before, after, escaped] {
        let (out, _) = run(
            &profile(),
            discover_request(Counted::one(request)),
            Reply::json(&result),
        )
        .await;
        let caps = assert_only_caps_changed(out.text(), &result, INNER_CAPS);
        assert_eq!(caps["tools"], json!({"listChanged": true}), "{request}");
        assert_replaced(
            discover_request(Counted::one(request)),
            Reply::json(&other),
            json!("a"),
        )
        .await;
    }
}

#[tokio::test]
async fn compressed_answers_are_replaced() {
    let gzip = Reply {
        status: StatusCode::OK,
        headers: vec![
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
            (header::CONTENT_LENGTH, HeaderValue::from_static("6")),
        ],
        chunks: vec![Bytes::from_static(b"\x1f\x8b\x08\x00\xff\xfe")],
        trailers: None,
    };
    assert_replaced(discover_request(Counted::one(DISCOVER)), gzip, json!(1)).await;
    let sse_gzip = Reply::sse(&format!("data: {DISCOVER_RESULT}\n\n"))
        .header(header::CONTENT_ENCODING, "gzip");
    assert_replaced(discover_request(Counted::one(DISCOVER)), sse_gzip, json!(1)).await;
}

#[tokio::test]
async fn answers_of_any_type_are_rewritten() {
    // A lenient client reads any body as JSON.
    let no_type = Reply {
        status: StatusCode::OK,
        headers: vec![],
        chunks: vec![Bytes::from_static(DISCOVER_RESULT.as_bytes())],
        trailers: None,
    };
    for reply in [
        Reply::new("text/plain", DISCOVER_RESULT),
        Reply::new("application/octet-stream", DISCOVER_RESULT),
        no_type,
    ] {
        let (out, _) = run(&profile(), discover_request(Counted::one(DISCOVER)), reply).await;
        let caps = assert_only_caps_changed(out.text(), DISCOVER_RESULT, INNER_CAPS);
        assert_eq!(caps["tools"], json!({"listChanged": true}));
    }
}

#[tokio::test]
async fn unreadable_answers_are_replaced_and_empty_ones_kept() {
    let both = DISCOVER_RESULT.replacen(r#""result":"#, r#""error":{"code":1},"result":"#, 1);
    let shapeless = r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":[{"tools":{}}]}}"#;
    for body in [
        "{not json",
        r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        &format!("{DISCOVER_RESULT}{DISCOVER_RESULT}"),
        &both,
        shapeless,
        "\u{feff}{}",
    ] {
        assert_replaced(
            discover_request(Counted::one(DISCOVER)),
            Reply::json(body).split(3),
            json!(1),
        )
        .await;
    }
    // Too long to read whole.
    let long = DISCOVER_RESULT.replacen(
        r#""ttlMs""#,
        &format!(r#""pad":"{}","ttlMs""#, "x".repeat(2 << 20)),
        1,
    );
    assert_replaced(
        discover_request(Counted::one(DISCOVER)),
        Reply::json(&long),
        json!(1),
    )
    .await;
    // Nothing to read: nothing to replace.
    assert_untouched(discover_request(Counted::one(DISCOVER)), Reply::json("")).await;
}

#[tokio::test]
async fn intercepted_methods_without_an_id_are_refused() {
    // A discover without an id is a notification: no answer to it could be
    // told from another, so none may come back unrewritten.
    for request in [
        r#"{"jsonrpc":"2.0","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"server/discover"}"#,
    ] {
        let (out, seen) = try_run(
            &profile(),
            post_request(None, Counted::one(request)),
            Reply::json(DISCOVER_RESULT),
        )
        .await;
        assert!(
            seen.is_none(),
            "{request}: the inner service was not called"
        );
        assert_eq!(out.status, StatusCode::BAD_REQUEST, "{request}");
        assert_eq!(out.json()["error"]["code"], -32600, "{request}");
        assert!(
            matches!(out.rejection, Some(Rejection::InvalidRequest(_))),
            "{request}"
        );
    }
}

/// A discover whose body is longer than the buffer limit (1 MiB) must not get
/// the inner service's own capabilities through: it is either rewritten or
/// refused. Refused as what it is: its header and body agree, so -32020 is
/// the wrong answer.
#[tokio::test]
async fn oversized_discover_does_not_fail_open() {
    let profile = narrowing_profile();
    let padding = "x".repeat(2 * 1024 * 1024);
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"pad":"{padding}"}}}}"#
    );
    for mcp_method in [None, Some("server/discover")] {
        let (out, seen) = try_run(
            &profile,
            post_request(mcp_method, Counted::split(request.as_bytes(), 64 * 1024)),
            Reply::json(DISCOVER_RESULT),
        )
        .await;
        if seen.is_some() {
            let body = out.json();
            assert!(
                body["result"]["capabilities"].get("prompts").is_none(),
                "{mcp_method:?}: an anonymous caller got the inner's un-narrowed capabilities: {}",
                body["result"]
            );
            assert_eq!(body["result"]["cacheScope"], "private", "{mcp_method:?}");
        } else {
            assert!(
                out.rejection.is_some(),
                "{mcp_method:?}: refused by the layer"
            );
            assert_ne!(
                out.rejection,
                Some(Rejection::HeaderMismatch),
                "{mcp_method:?}: header and body agree"
            );
        }
    }
}
