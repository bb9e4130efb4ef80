//! 1. Every filter rule, end to end.

use super::*;

#[tokio::test]
async fn every_rule_end_to_end_for_alice() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"toolsListChanged":true,"promptsListChanged":false,"resourcesListChanged":true,"resourceSubscriptions":["{ALICE_NOTES}","{README}","{BOB_NOTES}","{UNKNOWN}","{LOGO}","{README}","{NEWS}"],"taskIds":["task-alice-1","task-bob-1","task-ghost","task-alice-1"],"futureField":{{"x":[1]}}}}"#
    );
    let honoured = format!(
        r#"{{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["{ALICE_NOTES}","{README}","{NEWS}"],"taskIds":["task-alice-1"]}}"#
    );
    let request = listen_request(Some("alice-token"), "7", &requested);
    let response = run(layer(), &inner, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let stream = text(response).await;

    // The client: the first event is the honoured ack, tagged with the request id.
    let first = &messages(&stream)[0];
    assert_eq!(first["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(first["params"]["notifications"], value(&honoured));
    assert_eq!(first["params"]["_meta"][SUBSCRIPTION_ID], json!(7));
    assert_eq!(
        stream,
        ack_event("7", &honoured),
        "the inner's ack passes byte for byte"
    );

    // The inner service: the body with `params.notifications` = the ack, the rest unchanged.
    let received = inner.last();
    assert_eq!(received.text(), listen_body("7", &honoured));
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        received.body.len().to_string().as_str()
    );
    assert_eq!(received.headers["mcp-method"], "subscriptions/listen");

    // The extension.
    let filter = received.filter();
    assert_eq!(filter.ack().get(), honoured);
    assert_eq!(filter.subscription_id().get(), "7");
    let alice = Principal::new("alice");
    assert_eq!(
        filter.topics(),
        [
            Topic::List(ListChanged::Tools),
            Topic::List(ListChanged::Resources),
            Topic::Resource(ALICE_NOTES.into()),
            Topic::Resource(README.into()),
            Topic::Resource(NEWS.into()),
            Topic::Task {
                owner: alice,
                id: "task-alice-1".into()
            },
        ]
    );
    assert_eq!(
        filter.kinds().iter().collect::<Vec<_>>(),
        [
            Kind::ToolsListChanged,
            Kind::ResourcesListChanged,
            Kind::ResourceSubscriptions,
            Kind::TaskIds
        ]
    );
    assert_eq!(filter.requested_uris(), 7);
    assert_eq!(filter.requested_task_ids(), 4);
}

#[tokio::test]
async fn ack_keeps_request_order() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"taskIds":["task-bob-1"],"resourceSubscriptions":["{BOB_NOTES}"],"promptsListChanged":true,"toolsListChanged":true}}"#
    );
    let honoured = format!(
        r#"{{"taskIds":["task-bob-1"],"resourceSubscriptions":["{BOB_NOTES}"],"promptsListChanged":true,"toolsListChanged":true}}"#
    );
    let response = run(
        layer(),
        &inner,
        listen_request(Some("bob-token"), r#""b""#, &requested),
    )
    .await;
    assert_eq!(text(response).await, ack_event(r#""b""#, &honoured));
    assert_eq!(inner.last().filter().ack().get(), honoured);
}

/// A listen that honours nothing is acknowledged and ends at once: the
/// inner service is not called, no stream is held.
#[tokio::test]
async fn nothing_honoured_is_an_empty_ack_and_the_end() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"toolsListChanged":false,"resourceSubscriptions":["{UNKNOWN}","{LOGO}","{BOB_NOTES}"],"taskIds":["task-bob-1","task-ghost"],"somethingNew":true}}"#
    );
    let response = run(
        layer(),
        &inner,
        listen_request(Some("alice-token"), "1", &requested),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[http::header::CONTENT_TYPE],
        "text/event-stream"
    );
    assert_eq!(text(response).await, ended_at_once("1"));
    assert_eq!(inner.calls(), 0);
}

#[tokio::test]
async fn capabilities_the_server_lacks_are_not_honoured() {
    // Tools only, tasks off: no prompts, no resources, no task ids (and no -32021 for them).
    let profile = ServerProfile::builder()
        .base_capabilities(json!({"tools": {}}))
        .build()
        .unwrap();
    let inner = Inner::new(echo_ack(vec![]));
    let requested = format!(
        r#"{{"promptsListChanged":true,"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["{README}"],"taskIds":["task-alice-1"]}}"#
    );
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{requested}}}}}"#
    );
    let request = post(Some("subscriptions/listen"), Some("alice-token"), body);
    let response = run(ListenFilterLayer::new(profile), &inner, request).await;
    assert_eq!(
        text(response).await,
        ack_event("2", r#"{"toolsListChanged":true}"#)
    );
    assert_eq!(
        inner.last().filter().topics(),
        [Topic::List(ListChanged::Tools)]
    );
}

#[tokio::test]
async fn every_byte_outside_the_notifications_is_kept() {
    let inner = Inner::new(echo_ack(vec![]));
    let requested =
        format!(r#"{{ "toolsListChanged" : true, "resourceSubscriptions" : [ "{BOB_NOTES}" ] }}"#);
    let honoured = r#"{"toolsListChanged":true}"#;
    let template = "{ \"jsonrpc\" : \"2.0\",\n\t\"id\" : \"sub-\\u0031\" ,\"method\":\"subscriptions\\/listen\",\n\
        \"params\" : { \"_meta\" : { \"progressToken\" : 1.50, \"x\" : \"\\u00e9\\n\" } ,\"notifications\" : NOTIFICATIONS , \"cursor\" : null },\n\
        \"x-vendor\" : [ 1, {\"a\" : \"}\"} ] }\r\n";
    let original = template.replace("NOTIFICATIONS", &requested);
    let expected = template.replace("NOTIFICATIONS", honoured);
    let mut request = post(None, Some("alice-token"), original.clone());
    request
        .headers_mut()
        .insert(header::CONTENT_LENGTH, original.len().into());
    let response = run(layer(), &inner, request).await;
    let stream = text(response).await;
    assert_eq!(
        messages(&stream)[0]["params"]["notifications"],
        value(honoured)
    );
    assert_eq!(
        messages(&stream)[0]["params"]["_meta"][SUBSCRIPTION_ID],
        "sub-1"
    );

    let received = inner.last();
    assert_eq!(received.text(), expected);
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        expected.len().to_string().as_str()
    );
    assert_ne!(expected.len(), original.len());
    assert_eq!(
        received.filter().subscription_id().get(),
        r#""sub-\u0031""#,
        "the id is kept as written"
    );
}

#[tokio::test]
async fn chunked_listen_gets_a_content_length() {
    let inner = Inner::new(echo_ack(vec![]));
    let body = listen_body(
        "3",
        r#"{"toolsListChanged":true,"promptsListChanged":false}"#,
    );
    let chunks: Vec<Result<Bytes, Infallible>> = body
        .as_bytes()
        .chunks(5)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .unwrap();
    let response = run(layer(), &inner, request).await;
    assert_eq!(
        text(response).await,
        ack_event("3", r#"{"toolsListChanged":true}"#)
    );
    let received = inner.last();
    assert_eq!(
        received.text(),
        listen_body("3", r#"{"toolsListChanged":true}"#)
    );
    assert_eq!(
        received.headers[header::CONTENT_LENGTH],
        received.body.len().to_string().as_str()
    );
    assert!(received.headers.get(header::TRANSFER_ENCODING).is_none());
}
