//! 8: no inspection

use super::*;

#[tokio::test]
async fn get_and_delete_are_not_inspected() {
    let profile = profile();
    let requests = [
        Request::get("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header("mcp-method", "server/discover"),
        Request::delete("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header("mcp-method", "server/discover"),
    ];
    for builder in requests {
        let request = builder
            .body(Counted::split(DISCOVER.as_bytes(), 10))
            .unwrap();
        let method = request.method().clone();
        let request_headers = request.headers().clone();
        let (out, seen) = run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
        assert_eq!(seen.method, method);
        assert_eq!(
            seen.pulled_at_call, 0,
            "{method}: the body was not read before the call"
        );
        assert_eq!(seen.body(), DISCOVER.as_bytes(), "{method}");
        assert_eq!(
            seen.frames.len(),
            DISCOVER.len().div_ceil(10),
            "{method}: chunks as they came"
        );
        assert_eq!(seen.headers, request_headers, "{method}: headers as sent");
        assert_eq!(out.text(), DISCOVER_RESULT, "{method}: response untouched");
        assert_eq!(out.content_length(), Some(DISCOVER_RESULT.len()));
    }
}

#[tokio::test]
async fn every_post_is_inspected_whatever_its_type() {
    // Lenient inner services read any body as JSON: the content type decides
    // nothing.
    let profile = profile();
    let requests = [
        Request::post("/mcp"),
        Request::post("/mcp").header(header::CONTENT_TYPE, "text/plain"),
        Request::post("/mcp").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded"),
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, "text/plain")
            .header("mcp-method", "server/discover"),
        Request::post("/mcp")
            .header(header::CONTENT_TYPE, "text/plain")
            .header("mcp-method", "=?base64?c2VydmVyL2Rpc2NvdmVy?="),
    ];
    for builder in requests {
        let request = builder.body(Counted::one(DISCOVER)).unwrap();
        let (out, seen) = run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
        assert_eq!(seen.body(), DISCOVER.as_bytes());
        assert_eq!(
            out.json()["result"]["capabilities"],
            with_caps(
                caps(&profile, Era::Modern),
                json!({"experimental": {"x": 1}})
            )
        );
    }
}

#[tokio::test]
async fn bodies_that_are_not_json_up_to_their_method_are_refused() {
    // A lenient parser behind the layer could still find a method in them.
    let profile = profile();
    for body in [
        "hello world",
        "",
        "[1,2",
        "{\"method\":",
        "\"server/discover\"",
        "method=server/discover",
    ] {
        for content_type in ["application/json", "text/plain"] {
            let request = Request::post("/mcp")
                .header(header::CONTENT_TYPE, content_type)
                .body(Counted::split(body.as_bytes(), 4))
                .unwrap();
            let (out, seen) = try_run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
            assert!(seen.is_none(), "{body:?}: the inner service was not called");
            assert_eq!(out.status, StatusCode::BAD_REQUEST, "{body:?}");
            assert_eq!(out.rejection, Some(Rejection::Parse), "{body:?}");
            assert_eq!(out.json()["error"]["code"], -32700, "{body:?}");
        }
    }
}

#[tokio::test]
async fn other_methods_pass_through() {
    let profile = profile();
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    // The inner answers with something that looks like a discover result: not ours to touch.
    let (out, seen) = run(
        &profile,
        post_request(Some("tools/call"), Counted::split(call.as_bytes(), 7)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(seen.body(), call.as_bytes());
    assert_eq!(out.text(), DISCOVER_RESULT);
    // A listen is not this layer's business either.
    let listen = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#;
    let (out, seen) = run(
        &profile,
        post_request(Some("subscriptions/listen"), Counted::one(listen)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(seen.body(), listen.as_bytes());
    assert_eq!(out.text(), DISCOVER_RESULT);
}

/// A compressed request body cannot be read, so it is not inspected (see
/// `gate` in `http/intercept.rs`): it either reaches the inner service unread, or is
/// refused as `Encoded` (415) the way the listen layer refuses it. It is never
/// a header mismatch: nothing was compared.
#[tokio::test]
async fn compressed_requests_are_not_peeked() {
    let gzip: &[u8] =
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\x56\xca\x4d\x2d\xc9\xc8\x4f\x51";
    for mcp_method in [Some("server/discover"), None, Some("tools/call")] {
        let mut request = post_request(mcp_method, Counted::split(gzip, 4));
        request
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let (out, seen) = try_run(&profile(), request, Reply::json(DISCOVER_RESULT)).await;
        assert_ne!(
            out.rejection,
            Some(Rejection::HeaderMismatch),
            "{mcp_method:?}: a compressed body has no method to compare"
        );
        match seen {
            Some(seen) => {
                assert_eq!(seen.body(), gzip, "{mcp_method:?}");
                assert_eq!(
                    seen.pulled_at_call, 0,
                    "{mcp_method:?}: the compressed body was read before the call"
                );
                assert_eq!(out.text(), DISCOVER_RESULT);
            }
            None => {
                assert_eq!(out.rejection, Some(Rejection::Encoded), "{mcp_method:?}");
                assert_eq!(out.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
            }
        }
    }
}
