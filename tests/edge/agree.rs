//! 1. Stacked and combined agree: on every case of the corpus, and over any chunking.

use std::collections::BTreeSet;

use mcp_edge::ListenFilterLayer;
use proptest::prelude::*;
use proptest::sample::Index;

use super::corpus::{sample, Case, Delivery, Length, CORPUS};
use super::run::{both, differences, kinds, observe, stacked};

#[tokio::test]
async fn edge_answers_every_corpus_case_as_the_stacked_layers() {
    let mut differing = Vec::new();
    let mut covered = BTreeSet::new();
    for case in CORPUS.iter() {
        let (stacked, combined) = both(case).await;
        let fields = differences(&stacked, &combined);
        if !fields.is_empty() {
            differing.push(format!(
                "{case}: {fields:?} differ\n  stacked: {stacked:?}\n  edge:    {combined:?}"
            ));
        }
        covered.extend(kinds(case, &stacked));
    }
    let missing: Vec<&str> = [
        "-32020",
        "-32700",
        "-32600",
        "413",
        "unreadable",
        "415",
        "-32021",
        "-32602",
        "listen stream guarded",
        "listen honoured, answer untouched",
        "capabilities rewritten",
        "answer untouched",
        "the inner read the body's error",
        "body cut short",
        "the inner read the trailers",
        "the client read the inner's error",
    ]
    .into_iter()
    .filter(|kind| !covered.contains(kind))
    .collect();
    assert!(missing.is_empty(), "no case led to {missing:?}");
    assert!(
        differing.is_empty(),
        "{} of {} cases differ; the first:\n{}",
        differing.len(),
        CORPUS.len(),
        differing[..differing.len().min(3)].join("\n")
    );
}

/// The comparison sees what a layer does: without `CapabilitiesLayer`, a
/// discover's answer is not the stacked one.
#[tokio::test]
async fn the_comparison_tells_a_missing_layer() {
    let discover = sample("discover");
    let case = Case::post(discover);
    let stacked = observe(&case, |profile| stacked(&case, profile)).await;
    let listen_only = observe(&case, ListenFilterLayer::new).await;
    assert_eq!(
        differences(&stacked, &listen_only),
        ["headers", "size hint", "body"],
        "{case}"
    );
}

/// A body in one chunk whose end is told only by the next poll (a chunked
/// upload, a stream without `Content-Length`). Stacked, the outer layer's
/// peek has met the end before the inner layer reads the chunk again, so
/// the inner one scans it as the body's last chunk; `EdgeLayer`'s one peek
/// must come to the same answer.
#[tokio::test]
async fn a_truncated_body_streamed_in_one_chunk_is_answered_as_stacked() {
    for (name, mcp_method) in [
        ("truncated discover", None),
        ("truncated discover", Some("subscriptions/listen")),
        ("truncated listen", Some("tools/call")),
    ] {
        let case = Case {
            mcp_method,
            length: Length::Absent,
            delivery: Delivery::Stream,
            ..Case::post(sample(name))
        };
        let (stacked, combined) = both(&case).await;
        assert_eq!(
            (combined.status, &combined.rejection, combined.calls.len()),
            (stacked.status, &stacked.rejection, stacked.calls.len()),
            "{case}: EdgeLayer (left) and the stacked layers (right) disagree on `{}`",
            String::from_utf8_lossy(&case.sample.bytes)
        );
    }
}

/// A tokio runtime for one property case.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

proptest! {
    /// Any case of the corpus, its body cut anywhere and the inner's answer
    /// in chunks of any size: the same observations both ways.
    #[test]
    fn edge_agrees_with_the_stack_on_any_chunking(
        pick in any::<Index>(),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
        exact in any::<bool>(),
        stall in any::<bool>(),
        chunk in 1usize..80,
    ) {
        let mut case = pick.get(CORPUS.as_slice()).clone();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(case.sample.bytes.len() + 1)).collect();
        at.sort_unstable();
        case.delivery = Delivery::Cuts { at, exact, stall };
        case.answer.chunk = chunk;
        let (stacked, combined) = runtime().block_on(both(&case));
        prop_assert!(
            differences(&stacked, &combined).is_empty(),
            "{}: {:?} differ\n  stacked: {:?}\n  edge:    {:?}",
            case, differences(&stacked, &combined), stacked, combined
        );
    }
}
