//! 2. Error paths: answered by the layer, the inner service never called.

use super::*;

#[tokio::test]
async fn params_not_an_object() {
    let body = r#"{"jsonrpc":"2.0","id":11,"method":"subscriptions/listen","params":[]}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(11)).await;
    assert_eq!(
        body["error"]["message"],
        "`params` must be an object, got an array"
    );
    assert_eq!(
        rejection,
        Rejection::Listen(ListenError::InvalidParams(
            "`params` must be an object, got an array".into()
        ))
    );

    let body = r#"{"jsonrpc":"2.0","id":"n","method":"subscriptions/listen","params":{"notifications":"all"}}"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!("n")).await;
    assert_eq!(
        body["error"]["message"],
        "`params.notifications` must be an object, got a string"
    );

    let body = r#"{"jsonrpc":"2.0","id":"p","method":"subscriptions/listen"}"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!("p")).await;
    assert_eq!(body["error"]["message"], "`params` is required");
}

#[tokio::test]
async fn wrong_typed_fields_are_named() {
    for (notifications, message) in [
        (r#"{"toolsListChanged":"yes"}"#, "`notifications.toolsListChanged` must be a boolean, got a string"),
        (r#"{"resourcesListChanged":null}"#, "`notifications.resourcesListChanged` must be a boolean, got null"),
        (
            r#"{"resourceSubscriptions":"demo://public/readme"}"#,
            "`notifications.resourceSubscriptions` must be an array of strings, got a string",
        ),
        (
            r#"{"resourceSubscriptions":["demo://public/readme",3]}"#,
            "`notifications.resourceSubscriptions` must be an array of strings, got a number at index 1",
        ),
        (r#"{"taskIds":[true]}"#, "`notifications.taskIds` must be an array of strings, got a boolean at index 0"),
    ] {
        let response = run_refused(layer(), listen_request(Some("alice-token"), "5", notifications)).await;
        let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(5)).await;
        assert_eq!(body["error"]["message"], message);
        assert_eq!(rejection, Rejection::Listen(ListenError::InvalidParams(message.into())));
    }
}

#[tokio::test]
async fn too_many_uris_or_task_ids() {
    let layer = ListenFilterLayer::new(builder().max_uris(2).max_task_ids(1).build().unwrap());
    let notifications = format!(r#"{{"resourceSubscriptions":["{README}","{NEWS}","{README}"]}}"#);
    let response = run_refused(layer.clone(), listen_request(None, "6", &notifications)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(6)).await;
    assert_eq!(
        body["error"]["message"],
        "`notifications.resourceSubscriptions` lists 3 URIs; at most 2 are allowed"
    );

    let response = run_refused(layer, listen_request(None, "6", r#"{"taskIds":["a","b"]}"#)).await;
    let (body, _) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(6)).await;
    assert_eq!(
        body["error"]["message"],
        "`notifications.taskIds` lists 2 task ids; at most 1 are allowed"
    );
}

#[tokio::test]
async fn task_ids_need_the_tasks_extension() {
    for meta in [
        String::new(),
        r#""_meta":{},"#.to_owned(),
        r#""_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"other/ext":{}}}},"#.to_owned(),
        r#""_meta":{"io.modelcontextprotocol/clientCapabilities":{}},"#.to_owned(),
    ] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"t","method":"subscriptions/listen","params":{{{meta}"notifications":{{"taskIds":["task-alice-1"]}}}}}}"#
        );
        let response = run_refused(layer(), post(Some("subscriptions/listen"), Some("alice-token"), body)).await;
        let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32021, json!("t")).await;
        assert_eq!(
            body["error"]["data"],
            json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
        );
        assert_eq!(rejection, Rejection::Listen(ListenError::MissingTasksCapability));
    }
}

#[tokio::test]
async fn unreadable_uris_refused_by_policy_name_no_uri() {
    let layer = ListenFilterLayer::new(
        builder()
            .unreadable_uris(UnreadableUris::Refuse)
            .build()
            .unwrap(),
    );
    let notifications = format!(r#"{{"resourceSubscriptions":["{README}","{ALICE_NOTES}"]}}"#);
    let response = run_refused(
        layer,
        listen_request(Some("bob-token"), "8", &notifications),
    )
    .await;
    let (body, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32602, json!(8)).await;
    assert!(!body.to_string().contains("demo://"), "{body}");
    assert_eq!(
        rejection,
        Rejection::Listen(ListenError::UnreadableResource)
    );
}

#[tokio::test]
async fn duplicate_params() {
    let body = r#"{"jsonrpc":"2.0","id":12,"method":"subscriptions/listen","params":{"notifications":{}},"params":{"notifications":{"toolsListChanged":true}}}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(12)).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the request has more than one `params`")
    );
}

#[tokio::test]
async fn duplicate_method_listen_first() {
    let body = r#"{"jsonrpc":"2.0","id":13,"method":"subscriptions/listen","params":{"notifications":{}},"method":"tools/call"}"#;
    for named in [Some("subscriptions/listen"), None] {
        let response = run_refused(layer(), post(named, None, body)).await;
        let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(13)).await;
        assert_eq!(
            rejection,
            Rejection::InvalidRequest("the request has more than one `method`")
        );
    }
}

/// A server that reads the body into a `serde_json::Value` (last member wins,
/// as `axum::Json<Value>` does) would take this for an unfiltered listen.
#[tokio::test]
async fn duplicate_method_listen_last() {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":["{ALICE_NOTES}"]}}}}}}"#
    );
    assert_eq!(
        value(&body)["method"],
        "subscriptions/listen",
        "serde_json::Value keeps the last `method`"
    );
    for named in [None, Some("tools/call")] {
        let response = run_refused(layer(), post(named, Some("bob-token"), body.clone())).await;
        let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(14)).await;
        assert_eq!(
            rejection,
            Rejection::InvalidRequest("the request has more than one `method`")
        );
    }
}

/// Switched off, the scan of other bodies no longer catches a later `method`:
/// the inner service must reject duplicate members itself.
#[tokio::test]
async fn a_later_method_passes_when_the_scan_is_off() {
    let body = r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{},"method":"x"}"#;
    let inner = Inner::new(json_reply());
    let response = run(
        layer().scan_pass_through(false),
        &inner,
        post(None, None, body),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(inner.last().text(), body);
    // On by default: a body read whole is refused.
    let response = run_refused(layer(), post(None, None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, json!(15)).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the request has more than one `method`")
    );
}

#[tokio::test]
async fn batch_with_a_listen() {
    let body = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}]"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("a batch must not contain a listen request")
    );

    // Named a listen, a batch disagrees with its header.
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32020, Value::Null).await;
    assert_eq!(rejection, Rejection::HeaderMismatch);

    // A batch without a listen passes untouched.
    let inner = Inner::new(json_reply());
    let body = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    let response = run(layer(), &inner, post(None, None, body)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(inner.last().text(), body);
    assert!(inner.last().filter.is_none());
}

#[tokio::test]
async fn invalid_json_named_listen() {
    for body in [
        "not json at all",
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}},}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}} trailing"#,
        "",
    ] {
        let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
        let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32700, Value::Null).await;
        assert_eq!(rejection, Rejection::Parse, "{body}");
    }
}

#[tokio::test]
async fn listen_without_a_usable_id() {
    let body = r#"{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#;
    let response = run_refused(layer(), post(Some("subscriptions/listen"), None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("a listen request needs an id")
    );

    let body = r#"{"jsonrpc":"2.0","id":null,"method":"subscriptions/listen","params":{"notifications":{}}}"#;
    let response = run_refused(layer(), post(None, None, body)).await;
    let (_, rejection) = refusal(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the id of a listen request must be a string or a number")
    );
}

#[tokio::test]
async fn compressed_listen_is_refused() {
    let mut request = listen_request(None, "1", r#"{"toolsListChanged":true}"#);
    request
        .headers_mut()
        .insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
    let response = run_refused(layer(), request).await;
    let (_, rejection) = refusal(
        response,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        -32600,
        Value::Null,
    )
    .await;
    assert_eq!(rejection, Rejection::Encoded);
}
