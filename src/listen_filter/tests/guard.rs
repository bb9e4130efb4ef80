//! 7. The stream guard.

use super::*;

#[tokio::test]
async fn guard_narrows_a_wide_ack() {
    let wide = r#"{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["demo://public/readme","demo://users/bob/notes"]}"#;
    let events = [
        format!("event: message\nid: 1\ndata: {}\n\n", ack_data("7", wide)),
        note("notifications/tools/list_changed", "7", ""),
    ];
    let inner = Inner::new(Arc::new(move |_: &Received| {
        let mut response = sse_response(events.iter().cloned().map(Bytes::from).collect());
        let length = events.concat().len();
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, length.into());
        response
    }));
    let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
    assert!(
        response.headers().get(header::CONTENT_LENGTH).is_none(),
        "a guarded stream has no fixed length"
    );
    let stream = text(response).await;
    assert_eq!(
        stream,
        format!(
            "event: message\nid: 1\ndata: {}\n\n",
            ack_data("7", ANONYMOUS_ACK)
        ) + &note("notifications/tools/list_changed", "7", "")
    );
}

/// The guard narrows; it must not widen an ack the inner service narrowed further.
#[tokio::test]
async fn guard_never_widens_the_inner_ack() {
    let narrower = r#"{"toolsListChanged":true}"#;
    let inner = Inner::new(fixed(vec![ack_event("7", narrower)]));
    let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
    let stream = text(response).await;
    assert_eq!(
        messages(&stream)[0]["params"]["notifications"],
        value(narrower),
        "{stream}"
    );
}

#[tokio::test]
async fn guard_sends_a_missing_ack_first() {
    let notification = note("notifications/tools/list_changed", r#""s""#, "");
    let inner = Inner::new(fixed(vec![": hello\n\n".into(), notification.clone()]));
    let response = run(
        layer(),
        &inner,
        listen_request(None, r#""s""#, ANONYMOUS_ASK),
    )
    .await;
    let stream = text(response).await;
    assert!(stream.starts_with(": hello\n\n"), "{stream}");
    let messages = messages(&stream);
    assert_eq!(messages.len(), 2, "{stream}");
    assert_eq!(messages[0]["jsonrpc"], "2.0");
    assert_eq!(
        messages[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(messages[0]["params"]["notifications"], value(ANONYMOUS_ACK));
    assert_eq!(messages[0]["params"]["_meta"][SUBSCRIPTION_ID], "s");
    assert!(
        stream.ends_with(&notification),
        "the notification passes byte for byte: {stream}"
    );
}

/// Alice listens to prompts, the readme and her task; the inner leaks everything else.
fn leaky_stream() -> (String, Vec<String>, String) {
    let ask = format!(
        r#"{{"promptsListChanged":true,"resourceSubscriptions":["{README}","{BOB_NOTES}"],"taskIds":["task-alice-1","task-bob-1"]}}"#
    );
    let ack = format!(
        r#"{{"promptsListChanged":true,"resourceSubscriptions":["{README}"],"taskIds":["task-alice-1"]}}"#
    );
    let readme = format!(r#""uri":"{README}""#);
    let events = vec![
        // 0: the inner's own ack, already the honoured one.
        ack_event("7", &ack),
        // 1: keep-alive.
        ": keep-alive\n\n".to_owned(),
        // 2: leak: a URI alice did not get.
        note(
            "notifications/resources/updated",
            "7",
            &format!(r#""uri":"{BOB_NOTES}""#),
        ),
        // 3: honoured, with an id line and CRLF line ends.
        format!(
            "id: 42\r\n{}\r\n\r\n",
            note("notifications/resources/updated", "7", &readme)
                .trim_end()
                .replace('\n', "\r\n")
        ),
        // 4: leak: bob's task.
        note(
            "notifications/tasks",
            "7",
            r#""taskId":"task-bob-1","status":"completed""#,
        ),
        // 5: honoured task.
        note(
            "notifications/tasks",
            "7",
            r#""taskId":"task-alice-1","status":"working""#,
        ),
        // 6: leak: not requested.
        note("notifications/tools/list_changed", "7", ""),
        // 7: honoured.
        note("notifications/prompts/list_changed", "7", ""),
        // 8: leak: another subscription's.
        note("notifications/resources/updated", "8", &readme),
        // 9: leak: resources list changes were not requested.
        note("notifications/resources/list_changed", "7", ""),
        // 10: leak: a response to another request.
        "data: {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n\n".to_owned(),
        // 11: the listen's own response (graceful close).
        "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n".to_owned(),
    ];
    let kept = [0, 1, 3, 5, 7, 11]
        .iter()
        .map(|i| events[*i].as_str())
        .collect::<String>();
    (ask, events, kept)
}

#[tokio::test]
async fn guard_drops_leaks_and_keeps_the_rest_byte_for_byte() {
    let (ask, events, kept) = leaky_stream();
    let inner = Inner::new(fixed(events));
    let response = run(
        layer(),
        &inner,
        listen_request(Some("alice-token"), "7", &ask),
    )
    .await;
    assert_eq!(text(response).await, kept);
}

#[tokio::test]
async fn guard_at_every_chunk_size() {
    let (ask, events, kept) = leaky_stream();
    let total = events.concat().len();
    for size in (1..=64).chain([100, 333, total]) {
        let inner = Inner::new(split(&events, size));
        let response = run(
            layer(),
            &inner,
            listen_request(Some("alice-token"), "7", &ask),
        )
        .await;
        assert_eq!(text(response).await, kept, "chunks of {size} bytes");
    }
}

#[tokio::test]
async fn guard_sub_resource_rule() {
    let updated = |uri: &str| {
        note(
            "notifications/resources/updated",
            "7",
            &format!(r#""uri":"{uri}""#),
        )
    };
    let ask = format!(r#"{{"resourceSubscriptions":["{README}"]}}"#);
    let events = vec![
        ack_event("7", &ask),
        updated("demo://public/readme/part"),
        updated("demo://public/readme2"),
        updated("demo://public/readme"),
        updated("demo://public"),
    ];
    let inner = Inner::new(fixed(events.clone()));
    let response = run(layer(), &inner, listen_request(None, "7", &ask)).await;
    assert_eq!(
        text(response).await,
        [&*events[0], &*events[1], &*events[3]].concat()
    );
}

#[tokio::test]
async fn guard_switched_off_passes_the_stream_unchanged() {
    let (ask, events, _) = leaky_stream();
    // No ack first and every leak: all of it arrives.
    let events = events[1..].to_vec();
    let inner = Inner::new(fixed(events.clone()));
    let response = run(
        layer().guard_stream(false),
        &inner,
        listen_request(Some("alice-token"), "7", &ask),
    )
    .await;
    assert_eq!(text(response).await, events.concat());
    // The request side still honours.
    assert_eq!(
        inner.last().filter().ack().get(),
        format!(
            r#"{{"promptsListChanged":true,"resourceSubscriptions":["{README}"],"taskIds":["task-alice-1"]}}"#
        )
    );
}

#[tokio::test]
async fn json_answer_to_a_listen_passes() {
    let answer = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#;
    let inner = Inner::new(Arc::new(move |_: &Received| {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(answer))
            .unwrap()
    }));
    let response = run(layer(), &inner, listen_request(None, "7", ANONYMOUS_ASK)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(text(response).await, answer);
}
