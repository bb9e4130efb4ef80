//! 7: request chunk boundaries

use super::*;

#[tokio::test]
async fn method_split_inside_its_value_is_recognized() {
    let profile = profile();
    let body = Counted::new(vec![
        Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"server/dis"#),
        Bytes::from_static(br#"cover"}"#),
    ]);
    let (out, seen) = run(
        &profile,
        discover_request(body),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert_eq!(
        seen.body(),
        br#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#
    );
    assert_eq!(
        seen.frames.len(),
        2,
        "the inner gets the chunks as they came"
    );
    assert_eq!(
        out.json()["result"]["capabilities"]["tools"],
        json!({"listChanged": true})
    );
}

#[tokio::test]
async fn discover_is_recognized_at_every_split_point() {
    let profile = profile();
    let expected = with_caps(
        caps(&profile, Era::Modern),
        json!({"experimental": {"x": 1}}),
    );
    let bytes = DISCOVER.as_bytes();
    for at in 0..=bytes.len() {
        let body = Counted::new(vec![
            Bytes::copy_from_slice(&bytes[..at]),
            Bytes::copy_from_slice(&bytes[at..]),
        ]);
        let (out, seen) = run(
            &profile,
            discover_request(body),
            Reply::json(DISCOVER_RESULT),
        )
        .await;
        assert_eq!(seen.body(), bytes, "split at {at}");
        assert_eq!(
            out.json()["result"]["capabilities"],
            expected,
            "split at {at}"
        );
        assert_eq!(out.content_length(), Some(out.body.len()));
    }
    // And without the header, as an `initialize` in one-byte frames.
    let (out, seen) = run(
        &profile,
        post_request(None, Counted::split(INITIALIZE.as_bytes(), 1)),
        Reply::json(INITIALIZE_RESULT),
    )
    .await;
    assert_eq!(seen.body(), INITIALIZE.as_bytes());
    assert_eq!(seen.frames.len(), INITIALIZE.len());
    assert_eq!(
        out.json()["result"]["capabilities"],
        caps(&profile, Era::Legacy)
    );
}
