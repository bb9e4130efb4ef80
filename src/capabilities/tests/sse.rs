//! 3: SSE

use super::*;

const SSE_BEFORE: &str = ": keep-alive\n\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"héllo ✓\"}}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"capabilities\":{}}}\n\n";
const SSE_AFTER: &str = ": ping\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"after\"}}\n\n";
/// A second answer after the first: dropped.
const SSE_SECOND: &str =
    "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{}}}\n\n";

fn sse_input() -> String {
    format!(
        "{SSE_BEFORE}event: message\nid: ev-2\ndata: {DISCOVER_MANAGED}\n\n{SSE_AFTER}{SSE_SECOND}"
    )
}

fn sse_expected(profile: &ServerProfile) -> String {
    let rewritten = DISCOVER_MANAGED.replacen(MANAGED_CAPS, &caps_json(profile, Era::Modern), 1);
    // The answer to another request (id 2) is dropped.
    let before = SSE_BEFORE.replace(
        "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"capabilities\":{}}}\n\n",
        "",
    );
    assert_ne!(before, SSE_BEFORE);
    format!("{before}event: message\nid: ev-2\ndata: {rewritten}\n\n{SSE_AFTER}")
}

#[tokio::test]
async fn sse_rewrites_only_the_result_event() {
    let profile = profile();
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::sse(&sse_input()),
    )
    .await;
    assert_eq!(out.text(), sse_expected(&profile));
    assert_eq!(
        out.headers.get(header::CONTENT_LENGTH),
        None,
        "Content-Length is removed"
    );
    assert_eq!(out.headers[header::CONTENT_TYPE], "text/event-stream");
}

#[tokio::test]
async fn sse_rewrite_is_the_same_for_one_byte_frames() {
    let profile = profile();
    let expected = sse_expected(&profile);
    for size in [1, 2, 3, 7, 64] {
        let reply = Reply::sse(&sse_input()).split(size);
        let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), reply).await;
        assert_eq!(out.text(), expected, "frames of {size} bytes");
        assert_eq!(out.headers.get(header::CONTENT_LENGTH), None);
    }
}

#[tokio::test]
async fn sse_with_experimental_keeps_it() {
    let profile = profile();
    let input = format!("data: {DISCOVER_RESULT}\n\n");
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::sse(&input).split(5),
    )
    .await;
    let data = out
        .text()
        .strip_prefix("data: ")
        .unwrap()
        .strip_suffix("\n\n")
        .unwrap();
    let new_caps = assert_only_caps_changed(data, DISCOVER_RESULT, INNER_CAPS);
    assert_eq!(
        new_caps,
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"x": 1}})
        )
    );
}

#[tokio::test]
async fn sse_result_over_several_data_lines_is_rewritten() {
    let profile = profile();
    let input = "retry: 500\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{\"capabilities\":{\"tools\":{}}}}\n\n";
    let expected = format!(
        "retry: 500\ndata: {{\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{{\"capabilities\":{}}}}}\n\n",
        caps_json(&profile, Era::Modern)
    );
    for size in [1, input.len()] {
        let reply = Reply::sse(input).split(size);
        let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), reply).await;
        assert_eq!(out.text(), expected, "frames of {size} bytes");
    }
}

#[tokio::test]
async fn trailers_survive_a_rewrite() {
    let profile = profile();
    let sse = Reply::sse(&sse_input()).split(9).trailer("x-end", "1");
    let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), sse).await;
    assert_eq!(out.text(), sse_expected(&profile));
    assert_eq!(
        out.trailers.as_ref().map(|t| &t["x-end"]),
        Some(&HeaderValue::from_static("1")),
        "SSE"
    );

    let json = Reply::json(DISCOVER_RESULT).split(9).trailer("x-end", "1");
    let (out, _) = run(&profile, discover_request(Counted::one(DISCOVER)), json).await;
    assert_eq!(
        out.json()["result"]["capabilities"]["tools"],
        json!({"listChanged": true})
    );
    assert_eq!(
        out.trailers.as_ref().map(|t| &t["x-end"]),
        Some(&HeaderValue::from_static("1")),
        "JSON"
    );
}

#[tokio::test]
async fn trailers_survive_when_nothing_is_rewritten() {
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#;
    let json = Reply::json(error).split(9).trailer("x-end", "1");
    let (out, _) = run(&profile(), discover_request(Counted::one(DISCOVER)), json).await;
    assert_eq!(out.text(), error);
    assert_eq!(
        out.trailers.as_ref().map(|t| &t["x-end"]),
        Some(&HeaderValue::from_static("1"))
    );
}
