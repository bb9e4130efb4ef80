//! Property tests for the listen filter, the method peek, the SSE codec and
//! the stream guard.
//!
//! The checks themselves live in `tests/oracles/` and are shared with the fuzz
//! targets (`fuzz/fuzz_targets/`): each property here generates inputs shaped
//! like real traffic (proptest, default case counts) and hands them to the same
//! check the fuzzer runs on arbitrary bytes. The method peek and SSE checks
//! reach crate-private code through the hidden `mcp_edge::fuzzing` module.

#[path = "oracles/event_oracle.rs"]
mod event_oracle;
#[path = "oracles/filter_oracle.rs"]
mod filter_oracle;
#[path = "oracles/guard_oracle.rs"]
mod guard_oracle;
#[path = "oracles/peek_oracle.rs"]
mod peek_oracle;
#[path = "oracles/sse_oracle.rs"]
mod sse_oracle;

use mcp_edge::fuzzing::{self, sse_parse, sse_write, Method, Outcome};
use mcp_edge::ListenError;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// JSON text generation: text, not `Value`s, so duplicate keys, escapes and odd
// spacing occur.

/// A JSON string literal for `s`, with some ASCII characters written as `\u`
/// escapes (picked by `mask`), so decoded and raw text differ.
fn literal(s: &str, mask: u64) -> String {
    let mut out = String::from("\"");
    for (i, c) in s.chars().enumerate() {
        match c {
            c if c.is_ascii_alphanumeric() && mask >> (i % 64) & 1 == 1 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            '/' if mask >> (i % 64) & 1 == 1 => out.push_str("\\/"),
            c => {
                let escaped = serde_json::to_string(&c.to_string()).unwrap();
                out.push_str(&escaped[1..escaped.len() - 1]);
            }
        }
    }
    out.push('"');
    out
}

/// Mostly no escapes; sometimes some.
fn mask() -> impl Strategy<Value = u64> {
    prop_oneof![4 => Just(0u64), 1 => any::<u64>()]
}

fn string_text(s: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (s, mask()).prop_map(|(s, mask)| literal(&s, mask))
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![6 => Just(""), 1 => Just(" "), 1 => Just("\n  "), 1 => Just("\t\r\n")]
}

/// Any JSON value as text, nested, keys possibly repeated.
fn any_json() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("0".to_owned()),
        Just("-1.5e3".to_owned()),
        Just("12345678901234567890123".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        string_text(".{0,8}"),
        string_text(prop::sample::select(vec![
            "pub://a".to_owned(),
            "alice:1".to_owned(),
            "notifications".to_owned(),
            "taskIds".to_owned(),
        ])),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec((ws(), inner.clone()), 0..6).prop_map(|items| {
                let items: Vec<String> =
                    items.into_iter().map(|(w, v)| format!("{w}{v}")).collect();
                format!("[{}]", items.join(","))
            }),
            prop::collection::vec((key(), ws(), inner), 0..6).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, w, v)| format!("{k}:{w}{v}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// Object keys: the filter's field names (escaped or not), near misses, anything.
fn key() -> impl Strategy<Value = String> {
    string_text(prop_oneof![
        3 => prop::sample::select(vec![
            "notifications",
            "_meta",
            "toolsListChanged",
            "promptsListChanged",
            "resourcesListChanged",
            "resourceSubscriptions",
            "taskIds",
            "extensions",
            "io.modelcontextprotocol/clientCapabilities",
            "io.modelcontextprotocol/tasks",
            "TaskIds",
            "method",
            "",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z_]{0,6}",
    ])
}

/// URIs that the deterministic hooks treat in every way: always readable,
/// never readable, refused, hash-decided (per caller), odd text.
fn uri() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        3 => prop::sample::select(vec![
            "pub://a", "pub://b", "secret://s", "refused://r", "pub-refused", "x://1", "x://2",
            "x://3", "file:///a", "", "é", "pub://a\u{0}",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z]{1,3}://[a-z0-9]{0,3}",
    ]
}

/// Task ids: owned by alice/bob/"" by prefix, hash-decided, or odd.
fn task_id() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        3 => prop::sample::select(vec!["alice:1", "alice:2", "bob:1", ":1", "t1", "t2", "t3", "", "alice"])
            .prop_map(str::to_owned),
        1 => "[a-z:]{0,6}",
    ]
}

/// An array of strings (sometimes long enough to pass the small limits,
/// sometimes with a non-string item).
fn string_array(item: impl Strategy<Value = String> + Clone) -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::collection::vec(string_text(item.clone()), 0..6).prop_map(|items| format!("[{}]", items.join(","))),
        1 => (prop::collection::vec(string_text(item), 0..4), any_json(), any::<prop::sample::Index>()).prop_map(
            |(mut items, odd, at)| {
                let at = at.index(items.len() + 1);
                items.insert(at, odd);
                format!("[{}]", items.join(", "))
            }
        ),
        1 => any_json(),
    ]
}

/// One member of `notifications`.
fn notification_member() -> impl Strategy<Value = (String, String)> {
    let flag = (
        prop::sample::select(vec!["toolsListChanged", "promptsListChanged", "resourcesListChanged"]),
        mask(),
        prop_oneof![8 => prop::sample::select(vec!["true", "false"]).prop_map(str::to_owned), 1 => any_json()],
    )
        .prop_map(|(name, mask, value)| (literal(name, mask), value));
    let uris = (mask(), string_array(uri()))
        .prop_map(|(mask, v)| (literal("resourceSubscriptions", mask), v));
    let tasks =
        (mask(), string_array(task_id())).prop_map(|(mask, v)| (literal("taskIds", mask), v));
    let other = (key(), any_json());
    prop_oneof![3 => flag, 3 => uris, 3 => tasks, 1 => other]
}

/// `_meta` values: declaring the tasks extension or not, in many shapes.
fn meta() -> impl Strategy<Value = String> {
    const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
    const TASKS: &str = "io.modelcontextprotocol/tasks";
    prop_oneof![
        4 => Just(filter_oracle::TASKS_META.to_owned()),
        1 => Just(format!(r#"{{"{CAPS}":{{"extensions":{{"other":{{}}}}}}}}"#)),
        1 => Just(format!(r#"{{"{CAPS}":{{"extensions":{{"{TASKS}":{{}},"{TASKS}":1}}}}}}"#)),
        1 => Just(format!(r#"{{"{CAPS}":{{"extensions":{{"{TASKS}":{{}}}},"extensions":{{}}}}}}"#)),
        1 => Just(format!(r#"{{"{CAPS}":{{"extensions":{{"{TASKS}":{{}}}}}},"{CAPS}":{{}}}}"#)),
        1 => Just(format!(r#"{{"{CAPS}":{{"extensions":null}}}}"#)),
        1 => Just(format!(r#"{{"{CAPS}":null,"progressToken":1}}"#)),
        1 => Just(r#"{"io.modelcontextprotocol/clientcapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#.to_owned()),
        1 => any_json(),
    ]
}

/// `params` text: mostly a well-formed listen, with every kind of damage.
fn params() -> impl Strategy<Value = String> {
    let notifications = prop_oneof![
        8 => (prop::collection::vec((notification_member(), ws()), 0..7)).prop_map(|members| {
            let members: Vec<String> =
                members.into_iter().map(|((k, v), w)| format!("{w}{k}:{w}{v}")).collect();
            format!("{{{}}}", members.join(","))
        }),
        1 => any_json(),
    ];
    let member = prop_oneof![
        6 => (mask(), notifications).prop_map(|(mask, v)| (literal("notifications", mask), v)),
        3 => (mask(), meta()).prop_map(|(mask, v)| (literal("_meta", mask), v)),
        1 => (key(), any_json()),
    ];
    prop_oneof![
        12 => prop::collection::vec(member, 0..5).prop_shuffle().prop_map(|members| {
            let members: Vec<String> = members.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("{{{}}}", members.join(","))
        }),
        1 => any_json(),
    ]
}

/// A well-formed listen: one `notifications` object whose known fields are
/// distinct and well typed (in random order, among unknown ones), with `_meta`
/// usually declaring the tasks extension.
fn listen_params() -> impl Strategy<Value = String> {
    let flag = |name: &'static str| {
        prop::option::weighted(0.6, (mask(), any::<bool>()))
            .prop_map(move |f| f.map(|(mask, on)| (literal(name, mask), on.to_string())))
    };
    let list = |name: &'static str, items: BoxedStrategy<String>| {
        prop::option::weighted(
            0.8,
            (mask(), prop::collection::vec(string_text(items), 0..6)),
        )
        .prop_map(move |f| {
            f.map(|(mask, items)| (literal(name, mask), format!("[{}]", items.join(","))))
        })
    };
    (
        (
            flag("toolsListChanged"),
            flag("promptsListChanged"),
            flag("resourcesListChanged"),
            list("resourceSubscriptions", uri().boxed()),
            list("taskIds", task_id().boxed()),
        ),
        prop::collection::vec((key(), any_json()), 0..2),
        any::<prop::sample::Index>(),
        prop_oneof![6 => Just(Some(filter_oracle::TASKS_META.to_owned())), 1 => Just(None), 2 => meta().prop_map(Some)],
    )
        .prop_map(|((a, b, c, d, e), unknown, seed, meta)| {
            let mut members: Vec<(String, String)> = [a, b, c, d, e].into_iter().flatten().collect();
            for member in unknown {
                let at = seed.index(members.len() + 1);
                members.insert(at, member);
            }
            // A rotation by a random amount: any field may come first.
            let turn = seed.index(members.len().max(1));
            let turn = turn.min(members.len());
            members.rotate_left(turn);
            let members: Vec<String> = members.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
            let notifications = format!("{{{}}}", members.join(","));
            match meta {
                Some(meta) => format!(r#"{{"_meta":{meta},"notifications":{notifications}}}"#),
                None => format!(r#"{{"notifications":{notifications}}}"#),
            }
        })
}

/// The profile family of `filter_oracle::setup`.
fn config() -> impl Strategy<Value = u16> {
    0u16..1024
}

proptest! {
    /// Arbitrary params: never panics; errors before any hook runs; the ack is
    /// exactly what the model of the rules says, holds only known honoured
    /// keys, URIs readable and accepted, owned tasks, no duplicates, request
    /// order; -32021 exactly under its conditions; re-honouring the ack gives
    /// the ack; removing rejected URIs and tasks from the request does not
    /// change the ack. (All in `filter_oracle::check`.)
    #[test]
    fn filter_on_arbitrary_params(config in config(), params in params()) {
        filter_oracle::check(config, &params);
    }

    /// The same on requests that pass validation more often.
    #[test]
    fn filter_on_well_formed_listens(config in config(), params in listen_params()) {
        filter_oracle::check(config, &params);
    }

    /// No params at all is -32602.
    #[test]
    fn filter_without_params(config in config()) {
        let setup = filter_oracle::setup(config);
        prop_assert!(matches!(filter_oracle::run(&setup, None), Err(ListenError::InvalidParams(_))));
    }
}

/// The generators reach every kind of result, so the properties above cover
/// them all: each error, and acks holding every honoured field.
#[test]
fn filter_generators_cover_every_result() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = (config(), prop_oneof![params(), listen_params()]);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3000 {
        let (config, params) = strategy.new_tree(&mut runner).unwrap().current();
        let setup = filter_oracle::setup(config);
        match filter_oracle::run(&setup, Some(&params)) {
            Err(ListenError::InvalidParams(_)) => seen.insert("invalid"),
            Err(ListenError::MissingTasksCapability) => seen.insert("-32021"),
            Err(ListenError::UnreadableResource) => seen.insert("unreadable"),
            Err(_) => false,
            Ok(filter) => {
                for kind in filter.kinds().iter() {
                    seen.insert(kind.field());
                }
                if filter.resource_uris().count() > 1 {
                    seen.insert("several URIs");
                }
                if filter.task_ids().count() > 1 {
                    seen.insert("several tasks");
                }
                seen.insert("ok")
            }
        };
    }
    for what in [
        "invalid",
        "-32021",
        "unreadable",
        "ok",
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
        "resourceSubscriptions",
        "taskIds",
        "several URIs",
        "several tasks",
    ] {
        assert!(seen.contains(what), "{what} never generated: {seen:?}");
    }
}

/// An array-shaped `_meta` (or client capabilities) declares nothing: by
/// the design `_meta` is an object, so such a request gets -32021.
#[test]
fn array_shaped_meta_does_not_declare_tasks() {
    let setup = filter_oracle::setup(0b101); // alice, tasks on
    for meta in [
        r#"[{"extensions":{"io.modelcontextprotocol/tasks":{}}}]"#,
        r#"{"io.modelcontextprotocol/clientCapabilities":[{"io.modelcontextprotocol/tasks":{}}]}"#,
    ] {
        let params = format!(r#"{{"_meta":{meta},"notifications":{{"taskIds":["alice:1"]}}}}"#);
        let result = filter_oracle::run(&setup, Some(&params));
        assert!(
            matches!(result, Err(ListenError::MissingTasksCapability)),
            "{params}: {result:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// Method peek.

/// A body like a JSON-RPC request: mostly an object with keys that are, or
/// look like, `method` (duplicates allowed), method values of every type.
fn peek_document() -> impl Strategy<Value = String> {
    let method_key = prop::sample::select(vec![
        "\"method\"",
        "\"\\u006dethod\"",
        "\"m\\u0065thod\"",
        "\"metho\\u0064\"",
        "\"methods\"",
        "\"metho\"",
        "\"Method\"",
        "\"\\\"method\"",
        "\"method\\u0000\"",
    ]);
    let other_key = prop::sample::select(vec![
        "\"id\"",
        "\"jsonrpc\"",
        "\"params\"",
        "\"\"",
        "\"x\\\\\"",
    ]);
    let method_value = prop_oneof![
        6 => prop::sample::select(vec![
            "\"initialize\"",
            "\"server/discover\"",
            "\"subscriptions/listen\"",
            "\"subscriptions\\/listen\"",
            "\"\\u0069nitialize\"",
            "\"server\\u002fdiscover\"",
            "\"tools/call\"",
            "\"\"",
            "\"Initialize\"",
            "\"initialize \"",
            "\"\\ud83d\\ude00\"",
            "\"caf\\u00e9\"",
            "\"\\\\initialize\"",
            "null",
            "42",
            "-0.5e-3",
            "true",
            "{\"method\":\"initialize\"}",
            "[\"initialize\"]",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z/]{60,70}".prop_map(|s| format!("\"{s}\"")),
        1 => string_text(".{0,10}"),
    ];
    let member = prop_oneof![
        4 => (method_key, ws(), method_value).prop_map(|(k, w, v)| format!("{k}{w}:{w}{v}")),
        3 => (other_key, ws(), any_json()).prop_map(|(k, w, v)| format!("{k}:{w}{v}")),
        1 => (key(), any_json()).prop_map(|(k, v)| format!("{k}:{v}")),
    ];
    prop_oneof![
        8 => (ws(), prop::collection::vec((member, ws()), 0..6), ws()).prop_map(|(lead, members, trail)| {
            let members: Vec<String> = members.into_iter().map(|(m, w)| format!("{w}{m}{w}")).collect();
            format!("{lead}{{{}}}{trail}", members.join(","))
        }),
        1 => any_json(),
    ]
}

/// Broken copies of a document: truncated, or one byte replaced by junk.
fn damaged(doc: String) -> impl Strategy<Value = Vec<u8>> {
    let len = doc.len();
    let bytes = doc.into_bytes();
    prop_oneof![
        4 => Just(bytes.clone()),
        1 => (0..=len).prop_map({
            let bytes = bytes.clone();
            move |at| bytes[..at].to_vec()
        }),
        1 => (0..len.max(1), prop::sample::select(b"\"\\{}[],: x\xff\x00".to_vec())).prop_map(move |(at, junk)| {
            let mut bytes = bytes.clone();
            if let Some(b) = bytes.get_mut(at) {
                *b = junk;
            }
            bytes
        }),
    ]
}

/// Cut points into chunks.
fn chunks<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for p in points {
        out.push(&bytes[at..p]);
        at = p;
    }
    out.push(&bytes[at..]);
    out
}

proptest! {
    /// Every chunking and both scanner modes give the same answer, which agrees
    /// with serde_json (first `method` wins; `DuplicateMethod` for a second
    /// `method` after an intercepted one); a decision sticks; `consumed()` is
    /// exactly the deciding byte. (All in `peek_oracle::check`.)
    #[test]
    fn method_peek_agrees_with_serde_json(
        body in peek_document().prop_flat_map(damaged),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        peek_oracle::check(&body, &chunks(&body, &cuts));
    }

    /// Arbitrary bytes: the same invariants, never a panic.
    #[test]
    fn method_peek_on_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..64),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        peek_oracle::check(&body, &chunks(&body, &cuts));
    }
}

/// The generator reaches every outcome, including `DuplicateMethod`, so the
/// property above covers them all.
#[test]
fn method_peek_generator_covers_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = peek_document();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        let doc = strategy.new_tree(&mut runner).unwrap().current();
        seen.insert(fuzzing::scan(&[doc.as_bytes()]).0);
    }
    for outcome in [
        Outcome::Method(Method::Initialize),
        Outcome::Method(Method::Discover),
        Outcome::Method(Method::Listen),
        Outcome::Method(Method::Other),
        Outcome::Batch,
        Outcome::NoMethod,
        Outcome::DuplicateMethod,
        Outcome::Invalid,
    ] {
        assert!(seen.contains(&outcome), "{outcome:?} never generated");
    }
}

// ---------------------------------------------------------------------------
// SSE codec.

/// Bytes biased to SSE syntax.
fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        6 => prop::sample::select(vec![
            &b"data:"[..], b"data: ", b"data", b"event: ", b"id: ", b"id:", b"retry: ", b"retry:",
            b": ping", b":", b" ", b"\n", b"\r", b"\r\n", b"\n\n", b"\r\r", b"\xEF\xBB\xBF",
            b"\xEF\xBB", b"\0", b"x", b"12", b"99999999999999999999999", b"{\"jsonrpc\":\"2.0\"}",
            "é".as_bytes(), b"\xff",
        ])
        .prop_map(<[u8]>::to_vec),
        1 => prop::collection::vec(any::<u8>(), 1..4),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// Text for event fields: line breaks of every kind included.
fn sse_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "",
            "x",
            " ",
            "  lead",
            ":",
            "a:b",
            "\n",
            "\r",
            "\r\n",
            "\n\r",
            "é",
            "{\"id\":1}",
            "data: ",
            "\0",
        ]),
        0..8,
    )
    .prop_map(|pieces| pieces.concat())
}

proptest! {
    /// Any split of any input gives the same events and tail as the whole
    /// input (draining after each chunk or at the end), the same as a plain
    /// reference parser, and raw + tail == input. (All in `sse_oracle::check`.)
    #[test]
    fn sse_parse_is_split_invariant_and_lossless(
        input in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        seed in any::<u8>(),
    ) {
        sse_oracle::check(&input, &chunks(&input, &cuts), seed);
    }

    /// parse(write(events)) == events: the fields come back (data line ends as
    /// LF, event and id cut at their first line break, an id with NUL
    /// omitted), and each event's raw bytes are exactly what was written,
    /// however the stream is split.
    #[test]
    fn sse_write_then_parse_round_trips(
        events in prop::collection::vec(
            (prop::option::of(sse_text()), prop::option::of(sse_text()), prop::option::of(any::<u64>()), sse_text()),
            0..6,
        ),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for (event, id, retry, data) in &events {
            let written = sse_write(event.as_deref(), id.as_deref(), *retry, data);
            let cut = |s: &str| s.split(['\r', '\n']).next().unwrap_or("").to_owned();
            expected.push(fuzzing::SseEvent {
                raw: written.clone(),
                data: Some(data.replace("\r\n", "\n").replace('\r', "\n")),
                event: event.as_deref().map(cut),
                id: id.as_deref().map(cut).filter(|id| !id.contains('\0')),
                retry: *retry,
            });
            stream.extend(written);
        }
        let (parsed, tail) = sse_parse(&chunks(&stream, &cuts), false);
        prop_assert_eq!(tail, None);
        prop_assert_eq!(parsed, expected);
    }
}

// ---------------------------------------------------------------------------
// The stream guard: arbitrary inner streams, every message that leaves it
// within the honoured filter (`tests/oracles/guard_oracle.rs`).

/// A subscription tag: ours, another's, twice, or `_meta` of the wrong shape.
fn guard_meta() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(r#","_meta":{"io.modelcontextprotocol/subscriptionId":7}"#.to_owned()),
        Just(r#","_meta":{"io.modelcontextprotocol/subscriptionId":"s-1"}"#.to_owned()),
        Just(r#","_meta":{"io.modelcontextprotocol/subscriptionId":8}"#.to_owned()),
        Just(r#","_meta":{"io.modelcontextprotocol/subscriptionId":7,"io.modelcontextprotocol/subscriptionId":8}"#.to_owned()),
        Just(r#","_meta":[7]"#.to_owned()),
        Just(r#","_meta":{},"_meta":{"io.modelcontextprotocol/subscriptionId":8}"#.to_owned()),
    ]
}

/// A URI near the setup's: covered, uncovered, escaping by dot segments.
fn guard_uri() -> impl Strategy<Value = String> {
    let base = prop::sample::select(guard_oracle::URIS.to_vec());
    let tail = prop::sample::select(vec![
        "",
        "/x",
        "x",
        "/../secret/e",
        "/%2e%2E/y",
        "/./z",
        "/...",
        "/.x",
        "/..?/secret/e",
        "/%2e#q",
        "/x?/../y",
    ]);
    (base, tail).prop_map(|(base, tail)| format!("{base}{tail}"))
}

/// One message an inner service might send on a listen stream.
fn guard_message() -> impl Strategy<Value = String> {
    let method = prop::sample::select(vec![
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "Notifications/tools/list_changed",
        "notifications/message",
        "ping",
    ]);
    prop_oneof![
        (method, guard_meta(), any::<bool>()).prop_map(|(method, meta, id)| {
            let id = if id { r#""id":3,"# } else { "" };
            format!(r#"{{"jsonrpc":"2.0",{id}"method":"{method}","params":{{"x":1{meta}}}}}"#)
        }),
        (guard_uri(), guard_meta(), any::<bool>()).prop_map(|(uri, meta, twice)| {
            let uri = serde_json::to_string(&uri).unwrap();
            let second = if twice { r#","uri":"pub/a""# } else { "" };
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":{uri}{second}{meta}}}}}"#)
        }),
        (prop::sample::select(vec!["t1", "t\\\"2", "t3", "t4"]), guard_meta()).prop_map(|(id, meta)| {
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/tasks","params":{{"taskId":"{id}","status":"working"{meta}}}}}"#)
        }),
        (any::<bool>(), guard_meta()).prop_map(|(wide, meta)| {
            let notifications = if wide {
                r#"{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["pub/a","secret/e","x/d"],"taskIds":["t1","t3"]}"#
            } else {
                r#"{"resourceSubscriptions":["pub/b/"]}"#
            };
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{notifications},"extra":1{meta}}},"extra":2}}"#)
        }),
        prop::sample::select(vec![
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","leak":1,"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":"s-1","error":{"code":-32603,"message":"x"},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"a","resultType":"b"}}"#,
            r#"[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}]"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"} {}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","method":"ping"}"#,
            "not json",
            "",
        ])
        .prop_map(str::to_owned),
    ]
}

/// One SSE block carrying `message`, framed in one of the ways a leaky
/// inner service might frame it.
fn guard_block() -> impl Strategy<Value = String> {
    let framing = prop::sample::select(vec![
        "data: {}\n\n",
        "data:{}\r\n\r\n",
        "id: 4\nevent: message\ndata: {}\n\n",
        "foo: bar\ndata: {}\n\n",
        "id: 5\rdata: {}\n\n",
        "data: {}\r\r",
        "\u{feff}data: {}\n\n",
        "data: {}\ndata: {}\n\n",
        ": keep-alive\n\n",
        "retry: x\ndata: {}\n\n",
        "\n",
    ]);
    (framing, guard_message()).prop_map(|(framing, message)| framing.replace("{}", &message))
}

proptest! {
    /// Arbitrary inner streams (events, tags, methods, URIs, framings, an
    /// unterminated tail), cut anywhere: everything that leaves the guard
    /// satisfies the honoured filter, read by an independent model.
    #[test]
    fn the_guard_emits_only_what_the_filter_honours(
        config in 0u8..8,
        blocks in prop::collection::vec(guard_block(), 0..12),
        tail in prop::sample::select(vec!["", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}", ": x"]),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let filter = guard_oracle::setup(config);
        let stream = blocks.concat() + tail;
        guard_oracle::check(&filter, stream.as_bytes(), &cuts);
    }
}

/// The generator reaches what the guard must drop and what it must pass:
/// the check is not vacuous.
#[test]
fn guard_generator_reaches_kept_and_dropped_messages() {
    let filter = guard_oracle::setup(0);
    let kept = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"pub/a/x\"}}\n\n";
    let out = mcp_edge::listen_filter::fuzz_guard(&filter, &[kept.as_bytes()]);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("pub/a/x") && out.contains("acknowledged"),
        "{out}"
    );
    let escaping = kept.replace("pub/a/x", "pub/a/../secret/e");
    assert!(mcp_edge::listen_filter::fuzz_guard(&filter, &[escaping.as_bytes()]).is_empty());
    guard_oracle::check(&filter, kept.as_bytes(), &[3, 40]);
}

// ---------------------------------------------------------------------------
// The listen hub's event writer: what a publisher (or a bus message) puts in
// a task status never makes a member the hub writes appear twice.

/// Keys a publisher may send, the hub's own among them.
fn event_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "_meta", "taskId", "status", "jsonrpc", "method", "params",
            "io.modelcontextprotocol/subscriptionId", "",
        ])
        .prop_map(str::to_owned),
        1 => "\\PC{0,6}",
    ]
}

fn event_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((event_key(), inner), 0..4)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Arbitrary task status params, `_meta` and the hub's own members among
    /// them: each event is one JSON object with unique keys at every level,
    /// the hub's members the hub's, the publisher's others as published.
    #[test]
    fn hub_events_have_unique_keys_whatever_the_params(
        params in prop::collection::vec((event_key(), event_value()), 0..6),
        meta in prop::collection::vec((event_key(), event_value()), 0..4),
        task_id in "\\PC{0,8}",
        id in prop::sample::select(vec!["7", "\"sub-1\"", "-0.5e3"]),
    ) {
        let mut params: serde_json::Map<_, _> = params.into_iter().collect();
        if !meta.is_empty() {
            params.insert("_meta".into(), serde_json::Value::Object(meta.into_iter().collect()));
        }
        let event = mcp_edge::hub::fuzz_task_event(&task_id, params.clone(), id);
        event_oracle::check_task_event(&event, &task_id, &params, id);
    }
}

/// A forged subscription id in `_meta` is replaced, another `_meta` member
/// kept, a `_meta` that is not an object replaced; the reader rejects a key
/// twice (the check is not vacuous).
#[test]
fn hub_events_merge_the_publishers_meta() {
    let params = serde_json::json!({"status": "working", "taskId": "forged",
        "_meta": {"io.modelcontextprotocol/subscriptionId": 99, "trace": "t-1"}});
    let params = params.as_object().unwrap().clone();
    let event = mcp_edge::hub::fuzz_task_event("t-1", params.clone(), "7");
    event_oracle::check_task_event(&event, "t-1", &params, "7");
    let text = String::from_utf8(event).unwrap();
    assert_eq!(text.matches("_meta").count(), 1, "{text}");
    assert!(
        text.contains(r#""_meta":{"trace":"t-1","io.modelcontextprotocol/subscriptionId":7}"#),
        "{text}"
    );
    let params = serde_json::json!({"_meta": "not an object"})
        .as_object()
        .unwrap()
        .clone();
    let event = mcp_edge::hub::fuzz_task_event("t-1", params.clone(), "7");
    event_oracle::check_task_event(&event, "t-1", &params, "7");
    // A float whose text serde_json does not read back to the same last
    // digit (found by the fuzz target): compared as the event reads.
    let text = format!(r#"{{"e":{}2667}}"#, "6".repeat(124));
    let params: serde_json::Map<_, _> = serde_json::from_str(&text).unwrap();
    let event = mcp_edge::hub::fuzz_task_event("t-1", params.clone(), "7");
    event_oracle::check_task_event(&event, "t-1", &params, "7");
    assert!(event_oracle::strict(r#"{"a":{"b":1,"b":2}}"#).is_err());
    assert!(event_oracle::strict(r#"{"a":{"b":1,"c":2}}"#).is_ok());
}
