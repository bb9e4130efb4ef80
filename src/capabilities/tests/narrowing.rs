//! 10: per-caller narrowing

use super::*;

#[tokio::test]
async fn anonymous_discover_is_narrowed_and_private() {
    let profile = narrowing_profile();
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    let body = out.json();
    let mut expected = with_caps(
        caps(&profile, Era::Modern),
        json!({"experimental": {"x": 1}}),
    );
    expected.as_object_mut().unwrap().remove("prompts");
    assert_eq!(body["result"]["capabilities"], expected);
    assert!(body["result"]["capabilities"].get("prompts").is_none());
    assert_eq!(body["result"]["cacheScope"], "private");
    assert_eq!(out.content_length(), Some(out.body.len()));
    // Everything but the capabilities and the scope keeps its bytes.
    let result = member(out.text(), "result");
    for key in ["resultType", "supportedVersions", "_meta", "ttlMs"] {
        assert_eq!(
            member(result, key),
            member(member(DISCOVER_RESULT, "result"), key),
            "{key}"
        );
    }
}

#[tokio::test]
async fn known_caller_gets_everything_but_still_private() {
    let profile = narrowing_profile();
    let mut request = discover_request(Counted::one(DISCOVER));
    request.extensions_mut().insert(Principal::new("alice"));
    let (out, _) = run(&profile, request, Reply::json(DISCOVER_RESULT)).await;
    let body = out.json();
    assert_eq!(
        body["result"]["capabilities"],
        with_caps(
            caps(&profile, Era::Modern),
            json!({"experimental": {"x": 1}})
        )
    );
    assert_eq!(body["result"]["cacheScope"], "private");
}

#[tokio::test]
async fn narrowed_discover_without_scope_gets_one() {
    let profile = narrowing_profile();
    let input = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","capabilities":{"tools":{}}}}"#;
    let (out, _) = run(
        &profile,
        discover_request(Counted::one(DISCOVER)),
        Reply::json(input),
    )
    .await;
    assert_eq!(out.json()["result"]["cacheScope"], "private");
}

#[tokio::test]
async fn narrowed_initialize_has_no_cache_scope() {
    let profile = narrowing_profile();
    let (out, _) = run(
        &profile,
        post_request(None, Counted::one(INITIALIZE)),
        Reply::json(INITIALIZE_RESULT),
    )
    .await;
    let body = out.json();
    assert_eq!(
        body["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "resources": {"listChanged": false}})
    );
    assert!(body["result"].get("cacheScope").is_none());
}
