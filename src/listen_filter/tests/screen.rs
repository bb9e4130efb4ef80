//! 8. Every other event stream: resource updates only for what the caller reads.

use super::*;

fn updated(uri: &str) -> String {
    format!(
        r#"data: {{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{uri}"}}}}"#
    ) + "\n\n"
}

/// A leaky legacy stream, and what of it reaches anonymous callers, bob and alice.
fn leaky_legacy_stream() -> (Vec<String>, [String; 3]) {
    let answer =
        r#"data: {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a\\nb"}]}}"#
            .to_owned()
            + "\n\n";
    let log = r#"data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"notifications/resources/updated"}}"#.to_owned() + "\n\n";
    let escaped_bob = format!(
        r#"data: {{"method":"notifications\/resources\/updated","params":{{"uri":"{}"}}}}"#,
        BOB_NOTES.replace('/', "\\/")
    ) + "\n\n";
    let batch = format!(
        r#"data: [{{"method":"notifications/resources/updated","params":{{"uri":"{README}"}}}},{{"method":"notifications/resources/updated","params":{{"uri":"{ALICE_NOTES}"}}}}]"#
    ) + "\n\n";
    let unclear =
        r#"data: {"method":"notifications/resources/updated","params":{"uri":"a","uri":"b"}}"#
            .to_owned()
            + "\n\n";
    // CR line ends and an unknown field: written anew from what was parsed.
    let odd_alice = format!(
        "x-odd: 1\rdata: {{\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{ALICE_NOTES}\"}}}}\r\r"
    );
    let odd_alice_out = format!(
        "data: {{\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{ALICE_NOTES}\"}}}}\n\n"
    );
    let events = vec![
        ": keep-alive\n\n".to_owned(),
        "id: 0\nretry: 1000\ndata:\n\n".to_owned(),
        updated(README),
        updated(BOB_NOTES),
        answer.clone(),
        updated(ALICE_NOTES),
        log.clone(),
        escaped_bob.clone(),
        batch.clone(),
        unclear,
        odd_alice,
        updated(UNKNOWN),
        "data: {\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"tail"
            .to_owned(),
    ];
    let common = |mine: &[&str]| -> String {
        let mut out = vec![events[0].clone(), events[1].clone(), updated(README)];
        if mine.contains(&BOB_NOTES) {
            out.push(updated(BOB_NOTES));
        }
        out.push(answer.clone());
        if mine.contains(&ALICE_NOTES) {
            out.push(updated(ALICE_NOTES));
        }
        out.push(log.clone());
        if mine.contains(&BOB_NOTES) {
            out.push(escaped_bob.clone());
        }
        if mine.contains(&ALICE_NOTES) {
            out.push(batch.clone());
            out.push(odd_alice_out.clone());
        }
        out.concat()
    };
    let expected = [common(&[]), common(&[BOB_NOTES]), common(&[ALICE_NOTES])];
    (events, expected)
}

#[tokio::test]
async fn other_streams_drop_updates_the_caller_may_not_read_at_every_split() {
    let (events, expected) = leaky_legacy_stream();
    let total = events.concat().len();
    for (token, expected) in [None, Some("bob-token"), Some("alice-token")]
        .into_iter()
        .zip(&expected)
    {
        for size in 1..=total {
            let inner = Inner::new(split(&events, size));
            let response = run(layer(), &inner, get_stream(token)).await;
            assert_eq!(
                &text(response).await,
                expected,
                "{token:?}, chunks of {size}"
            );
        }
    }
}

#[tokio::test]
async fn other_streams_are_screened_alike_cut_anywhere_in_two() {
    let (events, expected) = leaky_legacy_stream();
    let all = Bytes::from(events.concat());
    for at in 0..=all.len() {
        let (head, tail) = (all.slice(..at), all.slice(at..));
        let inner = Inner::new(Arc::new(move |_: &Received| {
            sse_response(vec![head.clone(), tail.clone()])
        }));
        let response = run(layer(), &inner, get_stream(Some("alice-token"))).await;
        assert_eq!(text(response).await, expected[2], "cut at {at}");
    }
}

#[tokio::test]
async fn the_sse_answer_of_a_post_is_screened_too() {
    let answer = r#"data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.to_owned() + "\n\n";
    let events = vec![updated(BOB_NOTES), updated(README), answer.clone()];
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
    let inner = Inner::new(fixed(events));
    let response = run(layer(), &inner, post(None, Some("alice-token"), call)).await;
    assert_eq!(text(response).await, updated(README) + &answer);

    // The answer to a checked `resources/subscribe` as well.
    let subscribe = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{{"uri":"{ALICE_NOTES}"}}}}"#
    );
    let answer = r#"data: {"jsonrpc":"2.0","id":2,"result":{}}"#.to_owned() + "\n\n";
    let inner = Inner::new(fixed(vec![updated(BOB_NOTES), answer.clone()]));
    let response = run(layer(), &inner, post(None, Some("alice-token"), subscribe)).await;
    assert_eq!(text(response).await, answer);
}

#[tokio::test]
async fn unscreened_streams_pass_untouched() {
    let (events, _) = leaky_legacy_stream();
    // Switched off.
    let inner = Inner::new(fixed(events.clone()));
    let response = run(layer().check_updates(false), &inner, get_stream(None)).await;
    assert_eq!(text(response).await, events.concat());
    // No access hook: every URI is everyone's.
    let open = ListenFilterLayer::new(ServerProfile::builder().build().unwrap());
    let inner = Inner::new(fixed(events.clone()));
    let response = run(open, &inner, get_stream(None)).await;
    assert_eq!(text(response).await, events.concat());
    // An unguarded listen's stream is the inner's.
    let inner = Inner::new(fixed(events.clone()));
    let request = listen_request(None, "7", ANONYMOUS_ASK);
    let response = run(layer().guard_stream(false), &inner, request).await;
    assert_eq!(text(response).await, events.concat());
}

#[tokio::test]
async fn a_compressed_stream_is_replaced() {
    let inner = Inner::new(Arc::new(|_: &Received| {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CONTENT_ENCODING, "gzip")
            .body(Body::from(updated(BOB_NOTES)))
            .unwrap()
    }));
    let response = run(layer(), &inner, get_stream(None)).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let answer = value(&text(response).await);
    assert_eq!(answer["id"], Value::Null);
    assert_eq!(answer["error"]["code"], -32603);
}

/// A profile whose access hook counts its calls, answers a moment later,
/// and reads who may read what from `grants`.
fn counted_profile(
    ttl: Duration,
    grants: Arc<Mutex<Vec<(&'static str, &'static str)>>>,
) -> (ServerProfile, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let profile = ServerProfile::builder()
        .access_ttl(ttl)
        .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
            counted.fetch_add(1, Ordering::SeqCst);
            let name = caller.map(|c| c.as_str().to_owned());
            let grants = grants.lock().unwrap().clone();
            let uris: Vec<String> = uris.iter().map(|uri| uri.to_string()).collect();
            async move {
                tokio::task::yield_now().await;
                uris.iter()
                    .map(|uri| {
                        grants
                            .iter()
                            .any(|(who, what)| Some(*who) == name.as_deref() && what == uri)
                    })
                    .collect()
            }
        })
        .build()
        .unwrap();
    (profile, calls)
}

#[tokio::test]
async fn the_hook_is_asked_once_per_caller_and_uri_within_the_ttl() {
    let grants = Arc::new(Mutex::new(vec![("alice", ALICE_NOTES)]));
    let events = vec![
        updated(ALICE_NOTES),
        updated(BOB_NOTES),
        updated(ALICE_NOTES),
        updated(BOB_NOTES),
    ];
    let expected = updated(ALICE_NOTES).repeat(2);

    let (profile, calls) = counted_profile(Duration::from_secs(30), grants.clone());
    let inner = Inner::new(fixed(events.clone()));
    let layer = ListenFilterLayer::new(profile);
    let response = run(layer.clone(), &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Another stream of the same caller asks nothing; another caller asks.
    let response = run(layer.clone(), &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let response = run(layer.clone(), &inner, get_stream(Some("bob-token"))).await;
    assert_eq!(text(response).await, "");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // Within the TTL a revoked reader still hears what was decided.
    grants.lock().unwrap().clear();
    let response = run(layer, &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);

    // With no TTL every update asks, and a revocation holds at once.
    let (profile, calls) = counted_profile(Duration::ZERO, grants.clone());
    grants.lock().unwrap().push(("alice", ALICE_NOTES));
    let layer = ListenFilterLayer::new(profile);
    let response = run(layer.clone(), &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, expected);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    grants.lock().unwrap().clear();
    let response = run(layer, &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, "");
}

#[tokio::test]
async fn a_checked_subscription_fills_the_cache() {
    let grants = Arc::new(Mutex::new(vec![("alice", ALICE_NOTES)]));
    let (profile, calls) = counted_profile(Duration::from_secs(30), grants);
    let layer = ListenFilterLayer::new(profile);
    let subscribe = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{{"uri":"{ALICE_NOTES}"}}}}"#
    );
    let inner = Inner::new(json_reply());
    run(
        layer.clone(),
        &inner,
        post(None, Some("alice-token"), subscribe),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let inner = Inner::new(fixed(vec![updated(ALICE_NOTES)]));
    let response = run(layer, &inner, get_stream(Some("alice-token"))).await;
    assert_eq!(text(response).await, updated(ALICE_NOTES));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
