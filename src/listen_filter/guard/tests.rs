use super::*;
use crate::codec::json::model;

fn raw(text: &str) -> Box<RawValue> {
    serde_json::from_str(text).unwrap()
}

fn filter(notifications: &str) -> HonouredFilter {
    let profile = crate::profile::ServerProfile::builder()
        .resource_access(|_: Option<&crate::hooks::Principal>, uris: &[&str]| {
            std::future::ready(vec![true; uris.len()])
        })
        .subscription_hook(|uris: &[&str]| std::future::ready(vec![true; uris.len()]))
        .task_directory(|_: &crate::hooks::Principal, ids: &[&str]| {
            std::future::ready(vec![true; ids.len()])
        })
        .tasks(true)
        .build()
        .unwrap();
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts
        .extensions
        .insert(crate::hooks::Principal::new("alice"));
    let params = raw(&format!(
        r#"{{"notifications":{notifications},"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{"extensions":{{"io.modelcontextprotocol/tasks":{{}}}}}}}}}}"#
    ));
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(crate::filter::honour(
            &profile,
            &parts,
            &raw("7"),
            Some(&params),
        ))
        .unwrap()
}

/// The guard's verdict with every level read by `serde_json`: the one
/// pass of the guard must agree on every input.
fn members_verdict(filter: &HonouredFilter, data: &str) -> Verdict {
    let is_object = |text: &str| text.trim_start().starts_with('{');
    let Some(message) = model::members(data) else {
        return Verdict::Drop("not one JSON-RPC message");
    };
    let field = |name: &str| json::unique(&message, name);
    let (Some(method), Some(params), Some(id), Some(result), Some(error)) = (
        field("method").unambiguous(),
        field("params").unambiguous(),
        field("id").unambiguous(),
        field("result").unambiguous(),
        field("error").unambiguous(),
    ) else {
        return Verdict::Drop("ambiguous JSON-RPC message");
    };
    let subscription_id = filter.subscription_id().get();
    let Some(method) = method else {
        let Some(id) = id.filter(|id| json::same_id(id, subscription_id)) else {
            return Verdict::Drop("response to another request");
        };
        return match (result, error) {
            (None, Some(error)) => Verdict::Answer(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#,
                id = subscription_id
            )),
            (Some(result), None) => {
                let members = model::members(result);
                let reduced = members.as_ref().and_then(|members| {
                    let meta = json::unique(members, "_meta").unambiguous()?;
                    let kind = json::unique(members, "resultType").unambiguous()?;
                    let parts: Vec<String> = [("_meta", meta), ("resultType", kind)]
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| format!(r#""{k}":{v}"#)))
                        .collect();
                    Some(parts.join(","))
                });
                let _ = id;
                match reduced {
                    Some(members) => Verdict::Answer(format!(
                        r#"{{"jsonrpc":"2.0","id":{subscription_id},"result":{{{members}}}}}"#
                    )),
                    None => Verdict::Drop("an answer whose result cannot be read"),
                }
            }
            _ => Verdict::Drop("an answer with both or neither of result and error"),
        };
    };
    if id.is_some() || result.is_some() || error.is_some() {
        return Verdict::Drop("not a notification");
    }
    let Some(method) = json::string(method) else {
        return Verdict::Drop("a method that is not a string");
    };
    // The tag: absent, one, or ambiguous.
    let object_params = params.filter(|p| is_object(p));
    let members = object_params.and_then(model::members);
    let tag: Found<&str> = match (object_params, &members) {
        (None, _) => Found::Absent,
        (Some(_), None) => Found::Ambiguous,
        (Some(_), Some(members)) => {
            let metas: Vec<&str> = members
                .iter()
                .filter(|(k, _)| k == "_meta")
                .map(|(_, v)| *v)
                .collect();
            match metas[..] {
                [] => Found::Absent,
                [meta] if is_object(meta) => match model::members(meta) {
                    Some(meta) => json::unique(&meta, SUBSCRIPTION_ID),
                    None => Found::Ambiguous,
                },
                _ => Found::Ambiguous,
            }
        }
    };
    match tag {
        Found::Absent => {}
        Found::One(tag) if json::same_id(tag, subscription_id) => {}
        Found::One(_) => return Verdict::Drop("another subscription"),
        Found::Ambiguous => return Verdict::Drop("an ambiguous subscription tag"),
    }
    let param = |name: &str| {
        members
            .as_ref()
            .and_then(|p| json::unique(p, name).one())
            .and_then(json::string)
    };
    let honoured = match method.as_ref() {
        ACKNOWLEDGED => {
            let Some(members) = members.as_ref() else {
                return Verdict::Drop("acknowledgment without params");
            };
            return match json::unique(members, "notifications") {
                Found::One(theirs) => match narrowed(filter.ack(), theirs) {
                    Some(ack) => Verdict::Ack(format!(
                        r#"{{"jsonrpc":"2.0","method":"{ACKNOWLEDGED}","params":{{"notifications":{ack},"_meta":{{"{SUBSCRIPTION_ID}":{subscription_id}}}}}}}"#
                    )),
                    None => Verdict::Drop("acknowledgment with a malformed notifications object"),
                },
                _ => Verdict::Drop("acknowledgment without one notifications object"),
            };
        }
        "notifications/tools/list_changed" => filter.honours(&Topic::List(ListChanged::Tools)),
        "notifications/prompts/list_changed" => filter.honours(&Topic::List(ListChanged::Prompts)),
        "notifications/resources/list_changed" => {
            filter.honours(&Topic::List(ListChanged::Resources))
        }
        "notifications/resources/updated" => param("uri").is_some_and(|uri| {
            filter
                .resource_uris()
                .any(|honoured| covers(honoured, &uri))
        }),
        "notifications/tasks" => {
            param("taskId").is_some_and(|id| filter.task_ids().any(|t| t == id))
        }
        _ => false,
    };
    if honoured {
        Verdict::Keep
    } else {
        Verdict::Drop("outside the honoured filter")
    }
}

const NOTIFICATIONS: &str = r#"{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["file:///logs","demo://a/","x","caf\u00e9"],"taskIds":["t1","t\"2"]}"#;

/// Messages at the edges of JSON and JSON-RPC that the guard must judge
/// exactly as the `members` walk did.
const EDGE_CASES: &[&str] = &[
    "",
    " ",
    "x",
    "[]",
    "null",
    r#""notifications/tools/list_changed""#,
    "{}",
    " { } ",
    "{} x",
    "{",
    r#"{"method":"notifications/tools/list_changed"}"#,
    r#"{"method":"notifications/tools/list_changed","params":{}}"#,
    r#"{"method":"notifications/tools/list_changed"} "#,
    "\t{ \"method\" :\r\n\"notifications/tools/list_changed\" , \"params\" : { \"_meta\" : { \"io.modelcontextprotocol/subscriptionId\" : 7 } } }\n",
    r#"{"method":"notifications/tools/list_changed","method":"notifications/tools/list_changed"}"#,
    r#"{"method":"notifications/tools/list_changed","\u006dethod":"x"}"#,
    r#"{"\u006dethod":"notifications/tools/list_changed"}"#,
    r#"{"method":"notifications\/tools\/list_changed"}"#,
    r#"{"method":"notifications/tools/list_changed","params":{},"params":{}}"#,
    r#"{"method":"notifications/tools/list_changed","id":1,"id":2}"#,
    r#"{"method":"notifications/tools/list_changed","\ud800":1}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"\ud800":1,"_meta":{"io.modelcontextprotocol/subscriptionId":8}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"\udc00":1,"io.modelcontextprotocol/subscriptionId":8}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"x":"\ud800"}}"#,
    r#"{"method":"notifications/tools/list_changed","x":1e400}"#,
    r#"{"method":"notifications/tools/list_changed","params":1e400}"#,
    r#"{"method":"notifications/tools/list_changed","params":[{"_meta":{}}]}"#,
    r#"{"method":"notifications/tools/list_changed","params":"_meta"}"#,
    r#"{"method":"notifications/tools/list_changed","params":null}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":[]}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7.0}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"7"}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":70e-1}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8,"io.modelcontextprotocol/subscriptionId":8}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8},"_meta":{}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol\/subscriptionId":8}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"a":"}\"{","_meta":{"b":["]",{"c":"\\"}],"io.modelcontextprotocol/subscriptionId":8}}}"#,
    r#"{"method":"notifications/prompts/list_changed"}"#,
    r#"{"method":"notifications/resources/list_changed"}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"file:///logs"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"file:///logs/a/b"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"file:///logs2"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"file:///log"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"file:\/\/\/logs\/x"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"demo://a/"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"demo://a/b"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"demo://a"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"x/y"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"xy"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"café/menu"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"caf\u00e9"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"cafe"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"\ud800"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":7}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"x","uri":"x"}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"x","_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#,
    r#"{"method":"notifications/resources/updated","params":{"uri":"x","_meta":{"io.modelcontextprotocol/subscriptionId":1}}}"#,
    r#"{"method":"notifications/tasks","params":{"taskId":"t1"}}"#,
    r#"{"method":"notifications/tasks","params":{"taskId":"t\"2"}}"#,
    r#"{"method":"notifications/tasks","params":{"taskId":"t\u0031"}}"#,
    r#"{"method":"notifications/tasks","params":{"taskId":"t3"}}"#,
    r#"{"method":"notifications/tasks","params":{"taskId":["t1"]}}"#,
    r#"{"method":"notifications/other"}"#,
    r#"{"method":"notification/tools/list_changed"}"#,
    r#"{"method":"ping","id":3}"#,
    r#"{"method":1,"id":7}"#,
    r#"{"method":"\ud800","id":7}"#,
    r#"{"id":7,"result":{}}"#,
    r#"{"id":7.0,"result":{}}"#,
    r#"{"id":"7","result":{}}"#,
    r#"{"id":8,"result":{}}"#,
    r#"{"result":{}}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"taskIds":["t1","t9"]}}}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":[]}}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"notifications":{}}}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":{}}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":[]}"#,
    r#"{"method":"notifications/subscriptions/acknowledged"}"#,
    r#"{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":9}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":07}}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"s":"a
b"}}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"s":"\x"}}"#,
    r#"{"method":"notifications/tools/list_changed",}"#,
    r#"{"method":"notifications/tools/list_changed" "id":1}"#,
    r#"{"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":tru}}}"#,
];

#[test]
fn judges_edge_cases_as_the_members_walk_did() {
    let filter = filter(NOTIFICATIONS);
    let guard = Guard::new(filter.clone(), None);
    for data in EDGE_CASES {
        assert_eq!(guard.judge(data), members_verdict(&filter, data), "{data}");
    }
}

proptest::proptest! {
    /// Cuts, splices and byte flips of the edge cases: mostly broken JSON,
    /// which must be judged alike too.
    #[test]
    fn judges_mangled_messages_as_the_members_walk_did(
        case in 0..EDGE_CASES.len(),
        other in 0..EDGE_CASES.len(),
        at in 0usize..200,
        to in 0usize..200,
        byte in proptest::sample::select(b" \t\n\"\\{}[]:,/0123456789.eE+-tnu7ad".to_vec()),
    ) {
        let filter = filter(NOTIFICATIONS);
        let guard = Guard::new(filter.clone(), None);
        let (a, b) = (EDGE_CASES[case].as_bytes(), EDGE_CASES[other].as_bytes());
        let (at, to) = (at.min(a.len()), to.min(b.len()));
        let mut inputs = vec![[&a[..at], &b[to..]].concat()];
        let mut flipped = a.to_vec();
        if at < a.len() {
            flipped[at] = byte;
        } else {
            flipped.push(byte);
        }
        inputs.push(flipped);
        let mut inserted = a.to_vec();
        inserted.insert(at, byte);
        inputs.push(inserted);
        for input in inputs {
            let Ok(data) = std::str::from_utf8(&input) else { continue };
            proptest::prop_assert_eq!(guard.judge(data), members_verdict(&filter, data), "{}", data);
        }
    }

    /// The sorted lookup finds a covering URI exactly when a scan does.
    #[test]
    fn uris_cover_as_the_scan_does(
        honoured in proptest::collection::vec("[ab/é]{0,5}", 0..8),
        uri in "[ab/é]{0,7}",
    ) {
        let uris = Uris::new(honoured.iter().map(String::as_str));
        proptest::prop_assert_eq!(
            uris.cover(&uri),
            honoured.iter().any(|h| covers(h, &uri))
        );
    }
}

#[test]
fn acknowledgments_narrow_to_both() {
    let ours =
        raw(r#"{"toolsListChanged":true,"resourceSubscriptions":["a","b"],"taskIds":["t"]}"#);
    let wide = raw(
        r#"{"promptsListChanged":true,"resourceSubscriptions":["c","b","a"],"toolsListChanged":true,"taskIds":["t","u"]}"#,
    );
    assert_eq!(
        narrowed(&ours, wide.get()).unwrap(),
        r#"{"toolsListChanged":true,"resourceSubscriptions":["a","b"],"taskIds":["t"]}"#
    );
    let narrow = raw(r#"{"resourceSubscriptions":["b"],"toolsListChanged":false}"#);
    assert_eq!(
        narrowed(&ours, narrow.get()).unwrap(),
        r#"{"resourceSubscriptions":["b"]}"#
    );
    assert_eq!(narrowed(&ours, "{}").unwrap(), "{}");
    assert!(narrowed(&ours, "[]").is_none());
}

#[test]
fn the_listens_own_response_passes_without_an_ack() {
    let profile = crate::profile::ServerProfile::builder().build().unwrap();
    let (parts, ()) = http::Request::new(()).into_parts();
    let id = raw("7");
    let params = raw(r#"{"notifications":{"toolsListChanged":true}}"#);
    let filter = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(crate::filter::honour(&profile, &parts, &id, Some(&params)))
        .unwrap();
    let mut guard = Guard::new(filter, None);
    let mut parser = sse::Parser::new();
    parser.push(Bytes::from_static(
        b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32022,\"message\":\"x\"}}\n\n",
    ));
    let event = parser.next_event().unwrap();
    let expected = event.raw.clone();
    let mut out = VecDeque::new();
    guard.on_event(event, &mut out);
    assert_eq!(
        out,
        [expected],
        "no acknowledgment before the listen's own error"
    );
}

#[test]
fn sub_resource_rule() {
    assert!(covers("file:///logs", "file:///logs"));
    assert!(covers("file:///logs", "file:///logs/today"));
    assert!(covers("file:///logs/", "file:///logs/today"));
    assert!(!covers("file:///logs", "file:///logs2"));
    assert!(!covers("file:///logs/today", "file:///logs"));
    assert!(!covers(
        "demo://users/alice",
        "demo://users/alice-evil/notes"
    ));
}

#[test]
fn dot_segments_are_never_below_a_prefix() {
    let honoured = "demo://users/alice/notes";
    for uri in [
        "demo://users/alice/notes/../../bob/notes",
        "demo://users/alice/notes/%2e%2E/%2e./bob/notes",
        "demo://users/alice/notes/./x",
        "demo://users/alice/notes/..",
        "demo://users/alice/notes/%2E",
    ] {
        assert!(!covers(honoured, uri), "{uri}");
        let uris = Uris::new([honoured].into_iter());
        assert!(!uris.cover(uri), "{uri}");
        // Only an exact match covers it.
        assert!(covers(uri, uri), "{uri}");
        assert!(Uris::new([uri].into_iter()).cover(uri), "{uri}");
    }
    for uri in [
        "demo://users/alice/notes/...",
        "demo://users/alice/notes/.hidden",
        "demo://users/alice/notes/a..b",
        "demo://users/alice/notes/%2e%2e%2e",
    ] {
        assert!(covers(honoured, uri), "{uri}: not a dot segment");
    }
}
