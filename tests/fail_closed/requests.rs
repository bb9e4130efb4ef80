//! 1-5. Every POST classified by its body: `Mcp-Method`, second methods, batches, encodings.

use std::sync::atomic::Ordering;

use http::StatusCode;

use crate::{
    assert_refused, json_of, leaked, post, post_split, send, Headers, DISCOVER, INITIALIZE, LISTEN,
    STACKS,
};

// ---------------------------------------------------------------------------
// 1. Every POST is classified by its body, whatever its content type.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_content_type_decides_nothing() {
    let types: [&[(&str, &str)]; 4] = [
        &[("content-type", "text/plain")],
        &[("content-type", "application/x-www-form-urlencoded")],
        &[("content-type", "application/octet-stream")],
        &[],
    ];
    for stack in STACKS {
        for headers in types {
            let what = format!("{stack:?} {headers:?}");
            for body in [DISCOVER, INITIALIZE] {
                let (response, lenient) = send(stack, post(headers, body)).await;
                assert_eq!(lenient.calls(), 1, "{what}");
                assert_eq!(
                    leaked(&response),
                    !stack.keeps_capabilities(),
                    "{what}: {body}"
                );
            }
            let (response, lenient) = send(stack, post(headers, LISTEN)).await;
            assert_eq!(
                lenient.unhonoured_listens.load(Ordering::SeqCst),
                usize::from(!stack.keeps_listens()),
                "{what}: {}",
                String::from_utf8_lossy(response.body())
            );
        }
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_up_to_its_method_is_refused() {
    for stack in STACKS {
        for body in [
            "method=subscriptions/listen",
            "",
            "{\"method\"",
            "\"initialize\"",
            "{\"id\":1,]",
        ] {
            let (response, lenient) =
                send(stack, post(&[("content-type", "text/plain")], body)).await;
            assert_refused(
                &response,
                StatusCode::BAD_REQUEST,
                -32700,
                &format!("{stack:?} {body:?}"),
            );
            assert_eq!(lenient.calls(), 0);
        }
    }
}

// ---------------------------------------------------------------------------
// 2. `Mcp-Method` is decoded before it is compared.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_base64_method_header_that_matches_the_body_is_accepted() {
    let cases = [
        (DISCOVER, "=?base64?c2VydmVyL2Rpc2NvdmVy?="),
        (INITIALIZE, "=?base64?aW5pdGlhbGl6ZQ==?="),
        (LISTEN, "=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4=?="),
    ];
    for stack in STACKS {
        for (body, encoded) in cases {
            let headers = [("content-type", "text/plain"), ("mcp-method", encoded)];
            let (response, lenient) = send(stack, post(&headers, body)).await;
            assert_eq!(lenient.calls(), 1, "{stack:?} {encoded}");
            assert_eq!(response.status(), StatusCode::OK, "{stack:?} {encoded}");
            assert!(
                !stack.keeps_capabilities() || !leaked(&response),
                "{stack:?} {encoded}"
            );
            assert_eq!(
                lenient.unhonoured_listens.load(Ordering::SeqCst),
                usize::from(body == LISTEN && !stack.keeps_listens()),
            );
        }
    }
}

#[tokio::test]
async fn an_undecodable_or_repeated_method_header_is_refused_with_the_id() {
    // The body, the headers, and whether the capabilities layer and the
    // listen filter each refuse it: a value that does not decode could name
    // anything; a repeated one, what its values name.
    let cases: [(&str, Headers, bool, bool); 5] = [
        (
            DISCOVER,
            &[("mcp-method", "=?base64?c2VydmVyL2Rpc2NvdmVy")],
            true,
            true,
        ),
        (LISTEN, &[("mcp-method", "=?base64?***?=")], true, true),
        (
            LISTEN,
            &[
                ("mcp-method", "subscriptions/listen"),
                ("mcp-method", "subscriptions/listen"),
            ],
            false,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            &[
                ("mcp-method", "tools/call"),
                ("mcp-method", "server/discover"),
            ],
            true,
            false,
        ),
        (
            INITIALIZE,
            &[
                ("mcp-method", "initialize"),
                ("mcp-method", "=?base64?aW5pdGlhbGl6ZQ==?="),
            ],
            true,
            false,
        ),
    ];
    for (body, headers, capabilities, listen) in cases {
        for stack in STACKS {
            let what = format!("{stack:?} {headers:?}");
            let (response, lenient) = send(stack, post(headers, body)).await;
            let refused =
                capabilities && stack.keeps_capabilities() || listen && stack.keeps_listens();
            if refused {
                assert_refused(&response, StatusCode::BAD_REQUEST, -32020, &what);
                assert_eq!(json_of(&response)["id"], 7, "{what}");
                assert_eq!(lenient.calls(), 0, "{what}");
            } else {
                assert_eq!(lenient.calls(), 1, "{what}: not this layer's method");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 3. A second top-level `method`, with either layer alone.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_second_method_never_reaches_a_last_wins_parser() {
    let hidden = [
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
    ];
    for stack in STACKS {
        for body in hidden {
            // In one chunk the layer reads both methods before the call.
            let (response, lenient) = send(stack, post(&[], body)).await;
            assert_refused(
                &response,
                StatusCode::BAD_REQUEST,
                -32600,
                &format!("{stack:?} {body}"),
            );
            assert_eq!(lenient.calls(), 0);
            // Cut anywhere, either refused or cut short before the second method.
            for at in 0..=body.len() {
                let (response, lenient) = send(stack, post_split(&[], body, at)).await;
                let what = format!("{stack:?} split at {at}: {body}");
                assert!(!leaked(&response), "{what}");
                assert_eq!(
                    lenient.unhonoured_listens.load(Ordering::SeqCst),
                    0,
                    "{what}"
                );
                assert_eq!(lenient.capabilities.load(Ordering::SeqCst), 0, "{what}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 4. Batches and notifications of intercepted methods.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_batch_holding_an_intercepted_method_is_refused() {
    let batches = [
        (format!("[{DISCOVER}]"), false),
        (
            format!(r#"[{{"jsonrpc":"2.0","id":1,"method":"tools/list"}},{INITIALIZE}]"#),
            false,
        ),
        (format!("[{LISTEN}]"), true),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"server/discover"}]"#
                .to_owned(),
            false,
        ),
    ];
    for stack in STACKS {
        for (batch, listen) in &batches {
            let what = format!("{stack:?} {batch}");
            let (response, lenient) =
                send(stack, post(&[("content-type", "text/plain")], batch)).await;
            let kept = stack.keeps(*listen);
            if kept {
                assert_refused(&response, StatusCode::BAD_REQUEST, -32600, &what);
                assert_eq!(lenient.calls(), 0, "{what}");
            } else {
                assert_eq!(lenient.calls(), 1, "{what}: not this layer's method");
            }
        }
        let plain = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#;
        let (_, lenient) = send(stack, post(&[], plain)).await;
        assert_eq!(
            lenient.calls(),
            1,
            "{stack:?}: a batch of other methods passes"
        );
    }
}

#[tokio::test]
async fn an_intercepted_method_without_an_id_is_refused() {
    let notifications = [
        (r#"{"jsonrpc":"2.0","method":"server/discover"}"#, false),
        (
            r#"{"jsonrpc":"2.0","method":"initialize","params":{}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
            true,
        ),
    ];
    for stack in STACKS {
        for (body, listen) in notifications {
            let what = format!("{stack:?} {body}");
            let (response, lenient) = send(stack, post(&[], body)).await;
            let kept = stack.keeps(listen);
            if kept {
                assert_refused(&response, StatusCode::BAD_REQUEST, -32600, &what);
                assert_eq!(lenient.calls(), 0, "{what}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 5. An empty `Content-Encoding` is identity.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn an_empty_content_encoding_is_identity() {
    for stack in STACKS {
        let headers = [("content-encoding", "")];
        let (response, lenient) = send(stack, post(&headers, DISCOVER)).await;
        assert_eq!(lenient.calls(), 1, "{stack:?}");
        assert_eq!(leaked(&response), !stack.keeps_capabilities(), "{stack:?}");
        let (_, lenient) = send(stack, post(&headers, LISTEN)).await;
        assert_eq!(
            lenient.unhonoured_listens.load(Ordering::SeqCst),
            usize::from(!stack.keeps_listens()),
            "{stack:?}"
        );
    }
}
