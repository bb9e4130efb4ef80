//! 1, 2, 4: JSON rewrites

use super::*;

#[tokio::test]
async fn modern_discover_json_replaces_managed_keys_only() {
    let profile = profile();
    let (out, seen) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(
        seen.body(),
        DISCOVER.as_bytes(),
        "the inner sees the request as sent"
    );
    assert_eq!(out.status, StatusCode::OK);
    let new_caps = assert_only_caps_changed(out.text(), DISCOVER_RESULT, INNER_CAPS);
    assert_eq!(
        new_caps,
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"x": 1}})
        )
    );
    assert_eq!(
        new_caps,
        json!({"tools": {"listChanged": true}, "resources": {"listChanged": true, "subscribe": true},
               "prompts": {"listChanged": true}, "logging": {}, "experimental": {"x": 1}})
    );
    assert_eq!(out.content_length(), Some(out.body.len()));
    assert_eq!(out.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(
        out.json()["result"]["cacheScope"],
        "shared",
        "no narrowing, no private scope"
    );
    assert!(out.rejection.is_none());
}

#[tokio::test]
async fn legacy_initialize_gets_legacy_caps() {
    let profile = profile();
    let request = post_request(None, Counted::one(INITIALIZE));
    let (out, seen) = run(&profile, request, Reply::json(INITIALIZE_RESULT)).await;
    assert_eq!(seen.body(), INITIALIZE.as_bytes());
    let new_caps = assert_only_caps_changed(
        out.text(),
        INITIALIZE_RESULT,
        r#"{"tools":{"listChanged":true},"logging":{}}"#,
    );
    assert_eq!(
        new_caps,
        json!({"tools": {"listChanged": false}, "resources": {"listChanged": false}, "prompts": {"listChanged": false}})
    );
    assert_eq!(
        out.text(),
        INITIALIZE_RESULT.replacen(
            r#"{"tools":{"listChanged":true},"logging":{}}"#,
            &caps_json(&profile, Era::Legacy),
            1
        )
    );
    assert_eq!(out.content_length(), Some(out.body.len()));
    assert!(
        out.json()["result"].get("cacheScope").is_none(),
        "legacy results get no cacheScope"
    );
}

#[tokio::test]
async fn legacy_initialize_with_a_matching_header_and_charset() {
    let profile = profile();
    let request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .header("mcp-method", "initialize")
        .body(Counted::one(INITIALIZE))
        .unwrap();
    let (out, _) = run(
        &profile,
        request,
        Reply::new("application/json; charset=utf-8", INITIALIZE_RESULT),
    )
    .await;
    assert_eq!(
        out.json()["result"]["capabilities"],
        caps(&profile, Era::Legacy)
    );
}

#[tokio::test]
async fn experimental_and_foreign_extensions_are_kept() {
    let profile = profile();
    let inner_caps = r#"{"experimental":{"a":{"b":[1,2]}},"extensions":{"com.example/x":{"v":1},"io.modelcontextprotocol/tasks":{}},"tools":{"listChanged":false}}"#;
    let input = DISCOVER_RESULT.replacen(INNER_CAPS, inner_caps, 1);
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(&input),
    )
    .await;
    let new_caps = assert_only_caps_changed(out.text(), &input, inner_caps);
    // The tasks extension is managed: this profile has tasks off, so it goes.
    assert_eq!(
        new_caps,
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"a": {"b": [1, 2]}}, "extensions": {"com.example/x": {"v": 1}}})
        )
    );
}

#[tokio::test]
async fn missing_capabilities_are_added() {
    let profile = profile();
    let input = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"s","version":"1"}}}"#;
    let (out, _) = run(
        &profile,
        post_request(None, Counted::one(INITIALIZE)),
        Reply::json(input),
    )
    .await;
    let expected = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"protocolVersion":"2025-06-18","serverInfo":{{"name":"s","version":"1"}},"capabilities":{}}}}}"#,
        caps_json(&profile, Era::Legacy)
    );
    assert_eq!(out.text(), expected);
    assert_eq!(out.content_length(), Some(expected.len()));

    let input = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}"#;
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(input),
    )
    .await;
    assert_eq!(
        out.json()["result"]["capabilities"],
        caps(&profile, Era::Modern)
    );
    assert!(out.json()["result"].get("cacheScope").is_none());
}

#[tokio::test]
async fn string_ids_and_trailing_newline() {
    let profile = profile();
    let request = DISCOVER.replacen(r#""id":1"#, r#""id":"req-7""#, 1);
    let input = format!(
        "{}\n",
        DISCOVER_RESULT.replacen(r#""id":1"#, r#""id":"req-7""#, 1)
    );
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(&request)),
        Reply::json(&input),
    )
    .await;
    assert!(
        out.text().ends_with("}\n"),
        "bytes after the object are kept"
    );
    let new_caps = assert_only_caps_changed(out.text(), &input, INNER_CAPS);
    assert_eq!(new_caps["tools"], json!({"listChanged": true}));
    assert_eq!(out.content_length(), Some(out.body.len()));
}
