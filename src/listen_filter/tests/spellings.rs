//! 10. URI spellings a client reads as another path: the guard and the screen.

use super::*;

/// A profile whose hook reads by prefix: everything below `file:///public/`.
fn prefix_layer() -> ListenFilterLayer {
    use crate::filter::stream::SPELLED_BELOW;
    let profile = ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, uris: &[&str]| {
            ready(
                uris.iter()
                    .map(|uri| uri.starts_with(SPELLED_BELOW))
                    .collect::<Vec<bool>>(),
            )
        })
        .build()
        .unwrap();
    ListenFilterLayer::new(profile)
}

/// `notifications/resources/updated` for `uri`, escaped as JSON needs.
fn updated_escaped(uri: &str) -> String {
    let message = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": uri}});
    format!("data: {message}\n\n")
}

/// Which of [`SPELLINGS`](crate::filter::stream::SPELLINGS) appear in `out`.
fn spellings_in(out: &str) -> Vec<&'static str> {
    use crate::filter::stream::SPELLINGS;
    SPELLINGS
        .iter()
        .map(|(spelling, _)| *spelling)
        .filter(|spelling| out.contains(&serde_json::to_string(spelling).unwrap()))
        .collect()
}

/// The spellings only a prefix vouches for, and what a client reads in
/// each, are below it.
fn plain_spellings() -> Vec<&'static str> {
    use crate::filter::stream::{resolves_elsewhere, SPELLED_BELOW, SPELLINGS};
    SPELLINGS
        .iter()
        .filter(|(spelling, read)| {
            !resolves_elsewhere(spelling.as_bytes()) && read.starts_with(SPELLED_BELOW)
        })
        .map(|(spelling, _)| *spelling)
        .collect()
}

#[tokio::test]
async fn the_guard_passes_below_a_prefix_only_what_a_client_reads_there() {
    use crate::filter::stream::SPELLINGS;

    let updates: Vec<String> = SPELLINGS.iter().map(|(s, _)| updated_escaped(s)).collect();
    let inner = Inner::new(echo_ack(updates));
    let ask = r#"{"resourceSubscriptions":["file:///public/"]}"#;
    let response = run(prefix_layer(), &inner, listen_request(None, "7", ask)).await;
    let out = text(response).await;
    assert_eq!(spellings_in(&out), plain_spellings(), "{out}");
    // Honoured exactly, an odd spelling is heard.
    let (odd, _) = SPELLINGS[0];
    let inner = Inner::new(echo_ack(vec![updated_escaped(odd)]));
    let ask = serde_json::json!({"resourceSubscriptions": [odd]}).to_string();
    let response = run(prefix_layer(), &inner, listen_request(None, "7", &ask)).await;
    assert_eq!(spellings_in(&text(response).await), [odd]);
}

#[tokio::test]
async fn the_screen_drops_what_a_client_could_read_as_another_path() {
    use crate::filter::stream::SPELLINGS;

    let updates: Vec<String> = SPELLINGS.iter().map(|(s, _)| updated_escaped(s)).collect();
    let inner = Inner::new(fixed(updates));
    let response = run(prefix_layer(), &inner, get_stream(None)).await;
    let out = text(response).await;
    assert_eq!(spellings_in(&out), plain_spellings(), "{out}");
}
