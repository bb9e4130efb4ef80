use std::future::ready;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::filter::ListChanged;
use crate::hooks::TaskDirectory;
use crate::profile::ServerProfileBuilder;

const PUBLIC: &str = "demo://public/readme";
const ALICE: &str = "demo://users/alice/notes";
const STATIC: &str = "demo://public/static/logo";

/// alice may read her notes; everyone may read public URIs; nothing else exists.
fn readable(caller: Option<&Principal>, uri: &str) -> bool {
    uri.starts_with("demo://public/")
        || (uri == ALICE && caller.map(Principal::as_str) == Some("alice"))
}

fn tasks() -> impl TaskDirectory {
    |owner: &Principal, ids: &[&str]| {
        let owner = owner.as_str().to_owned();
        let answers = ids
            .iter()
            .map(|id| *id == format!("task-{owner}-1"))
            .collect();
        ready(answers)
    }
}

fn builder() -> ServerProfileBuilder {
    ServerProfile::builder()
        .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
            ready(uris.iter().map(|u| readable(caller, u)).collect())
        })
        .subscription_hook(|uris: &[&str]| ready(uris.iter().map(|u| *u != STATIC).collect()))
        .task_directory(tasks())
}

fn parts(principal: Option<&str>) -> Parts {
    let (mut parts, ()) = http::Request::new(()).into_parts();
    if let Some(name) = principal {
        parts.extensions.insert(Principal::new(name));
    }
    parts
}

const TASKS_META: &str = r#"{"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}"#;

fn run(
    profile: &ServerProfile,
    caller: Option<&str>,
    params: &str,
) -> Result<HonouredFilter, ListenError> {
    let params: Box<RawValue> = serde_json::from_str(params).unwrap();
    let id: Box<RawValue> = serde_json::from_str("42").unwrap();
    let parts = parts(caller);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(honour(profile, &parts, &id, Some(&params)))
}

fn listen(
    profile: &ServerProfile,
    caller: Option<&str>,
    notifications: Value,
) -> Result<HonouredFilter, ListenError> {
    let params = format!(r#"{{"_meta": {TASKS_META}, "notifications": {notifications}}}"#);
    run(profile, caller, &params)
}

fn ack(profile: &ServerProfile, caller: Option<&str>, notifications: Value) -> Value {
    serde_json::from_str(listen(profile, caller, notifications).unwrap().ack().get()).unwrap()
}

fn invalid_message(result: Result<HonouredFilter, ListenError>) -> String {
    match result {
        Err(ListenError::InvalidParams(message)) => message,
        other => panic!("expected -32602, got {other:?}"),
    }
}

/// A profile whose hooks panic: proves validation errors reach no hook.
fn panicking() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(
            |_: Option<&Principal>, _: &[&str]| -> std::future::Ready<Vec<bool>> {
                panic!("access hook called")
            },
        )
        .subscription_hook(|_: &[&str]| -> std::future::Ready<Vec<bool>> {
            panic!("subscription hook called")
        })
        .task_directory(
            |_: &Principal, _: &[&str]| -> std::future::Ready<Vec<bool>> {
                panic!("task directory called")
            },
        )
        .build()
        .unwrap()
}

#[test]
fn params_must_be_an_object() {
    let profile = builder().build().unwrap();
    for params in ["[]", "1", "null", "\"x\""] {
        let message = invalid_message(run(&profile, None, params));
        assert!(
            message.starts_with("`params` must be an object"),
            "{message}"
        );
    }
    let id: Box<RawValue> = serde_json::from_str("1").unwrap();
    let result = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(honour(&profile, &parts(None), &id, None));
    assert_eq!(invalid_message(result), "`params` is required");
}

#[test]
fn notifications_missing_array_or_null() {
    let profile = panicking();
    assert_eq!(
        invalid_message(run(&profile, None, "{}")),
        "`params.notifications` is required"
    );
    assert_eq!(
        invalid_message(run(&profile, None, r#"{"notifications": []}"#)),
        "`params.notifications` must be an object, got an array"
    );
    assert_eq!(
        invalid_message(run(&profile, None, r#"{"notifications": null}"#)),
        "`params.notifications` must be an object, got null"
    );
    assert_eq!(
        invalid_message(run(
            &profile,
            None,
            r#"{"notifications": {}, "notifications": {}}"#
        )),
        "`params.notifications` appears more than once"
    );
}

#[test]
fn wrong_types_name_the_field() {
    let profile = panicking();
    let wrong = [
        ("a string", json!("yes")),
        ("a number", json!(1)),
        ("null", json!(null)),
        ("an object", json!({})),
    ];
    for field in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        for (kind, value) in &wrong {
            let message = invalid_message(listen(&profile, Some("alice"), json!({ field: value })));
            assert_eq!(
                message,
                format!("`notifications.{field}` must be a boolean, got {kind}")
            );
        }
    }
    for field in ["resourceSubscriptions", "taskIds"] {
        for (kind, value) in &wrong {
            let message = invalid_message(listen(&profile, Some("alice"), json!({ field: value })));
            assert_eq!(
                message,
                format!("`notifications.{field}` must be an array of strings, got {kind}")
            );
        }
        let message = invalid_message(listen(
            &profile,
            Some("alice"),
            json!({ field: ["a", "b", "c", 7] }),
        ));
        assert_eq!(
            message,
            format!("`notifications.{field}` must be an array of strings, got a number at index 3")
        );
    }
}

#[test]
fn duplicate_fields_are_invalid() {
    let profile = panicking();
    let message = invalid_message(run(
        &profile,
        None,
        r#"{"notifications": {"toolsListChanged": true, "toolsListChanged": false}}"#,
    ));
    assert_eq!(
        message,
        "`notifications.toolsListChanged` appears more than once"
    );
}

#[test]
fn uri_and_task_limits() {
    let profile = builder().build().unwrap();
    let uris: Vec<String> = (0..1000).map(|i| format!("demo://public/{i}")).collect();
    let filter = listen(&profile, None, json!({"resourceSubscriptions": uris})).unwrap();
    assert_eq!(filter.resource_uris().count(), 1000);
    assert_eq!(filter.requested_uris(), 1000);
    let uris: Vec<String> = (0..1001).map(|i| format!("demo://public/{i}")).collect();
    assert_eq!(
        invalid_message(listen(
            &profile,
            None,
            json!({"resourceSubscriptions": uris})
        )),
        "`notifications.resourceSubscriptions` lists 1001 URIs; at most 1000 are allowed"
    );

    let ids: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
    assert!(listen(&profile, Some("alice"), json!({"taskIds": ids})).is_ok());
    let ids: Vec<String> = (0..1001).map(|i| format!("t{i}")).collect();
    assert_eq!(
        invalid_message(listen(&profile, Some("alice"), json!({"taskIds": ids}))),
        "`notifications.taskIds` lists 1001 task ids; at most 1000 are allowed"
    );

    let small = builder().max_uris(2).max_task_ids(1).build().unwrap();
    assert!(listen(&small, None, json!({"resourceSubscriptions": ["a", "b"]})).is_ok());
    assert!(listen(
        &small,
        None,
        json!({"resourceSubscriptions": ["a", "b", "c"]})
    )
    .is_err());
    assert!(listen(&small, Some("alice"), json!({"taskIds": ["a"]})).is_ok());
    assert!(listen(&small, Some("alice"), json!({"taskIds": ["a", "b"]})).is_err());
}

#[test]
fn task_ids_without_declared_extension() {
    let profile = builder().build().unwrap();
    let result = run(
        &profile,
        Some("alice"),
        r#"{"notifications": {"taskIds": ["task-alice-1"]}}"#,
    );
    let error = result.unwrap_err();
    assert_eq!(error, ListenError::MissingTasksCapability);
    let rpc = error.to_jsonrpc();
    assert_eq!(rpc.code(), -32021);
    assert_eq!(rpc.status(), http::StatusCode::BAD_REQUEST);
    assert_eq!(
        rpc.data().unwrap()["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({})
    );
    // Declared under other extensions only: still missing.
    let params = r#"{"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"x/y": {}}}},
                     "notifications": {"taskIds": []}}"#;
    assert_eq!(
        run(&profile, Some("alice"), params).unwrap_err(),
        ListenError::MissingTasksCapability
    );
    // The type check comes first (rule 2 before rule 3).
    let params = r#"{"notifications": {"taskIds": "t"}}"#;
    assert!(matches!(
        run(&profile, Some("alice"), params),
        Err(ListenError::InvalidParams(_))
    ));
}

#[test]
fn task_ids_with_tasks_off_are_an_unknown_field() {
    let profile = ServerProfile::builder().build().unwrap();
    let filter = run(
        &profile,
        Some("alice"),
        r#"{"notifications": {"taskIds": 5, "toolsListChanged": true}}"#,
    )
    .unwrap();
    assert_eq!(filter.ack().get(), r#"{"toolsListChanged":true}"#);
    assert!(!filter.kinds().contains(Kind::TaskIds));
}

#[test]
fn validation_errors_reach_no_hook() {
    let profile = panicking();
    for notifications in [
        json!({"resourceSubscriptions": [PUBLIC], "toolsListChanged": 1}),
        json!({"resourceSubscriptions": [PUBLIC, null]}),
        json!({"taskIds": ["task-alice-1", {}]}),
    ] {
        assert!(listen(&profile, Some("alice"), notifications).is_err());
    }
    let missing = run(
        &profile,
        Some("alice"),
        r#"{"notifications": {"taskIds": ["task-alice-1"]}}"#,
    );
    assert_eq!(missing.unwrap_err(), ListenError::MissingTasksCapability);
}

#[test]
fn flags_false_or_unadvertised_are_omitted() {
    let profile = builder()
        .base_capabilities(json!({"tools": {}, "resources": {}}))
        .build()
        .unwrap();
    let ack = ack(
        &profile,
        None,
        json!({"toolsListChanged": false, "promptsListChanged": true, "resourcesListChanged": true}),
    );
    assert_eq!(ack, json!({"resourcesListChanged": true}));
}

#[test]
fn duplicates_collapse_keeping_the_first_position() {
    let profile = builder().build().unwrap();
    let filter = listen(
        &profile,
        Some("alice"),
        json!({"resourceSubscriptions": [PUBLIC, ALICE, PUBLIC, ALICE], "taskIds": ["task-alice-1", "task-alice-1"]}),
    )
    .unwrap();
    assert_eq!(
        filter.ack().get(),
        format!(r#"{{"resourceSubscriptions":["{PUBLIC}","{ALICE}"],"taskIds":["task-alice-1"]}}"#)
    );
    assert_eq!(filter.requested_uris(), 4);
    assert_eq!(filter.requested_task_ids(), 2);
}

#[test]
fn ack_follows_request_order() {
    let profile = builder().build().unwrap();
    let filter = listen(
        &profile,
        Some("alice"),
        json!({"taskIds": ["task-alice-1"], "resourceSubscriptions": [PUBLIC], "toolsListChanged": true}),
    );
    // `json!` sorts keys, so write the params by hand to fix the order.
    drop(filter);
    let params = format!(
        r#"{{"_meta": {TASKS_META}, "notifications": {{"taskIds": ["task-alice-1"], "toolsListChanged": true, "resourceSubscriptions": ["{PUBLIC}"]}}}}"#
    );
    let filter = run(&profile, Some("alice"), &params).unwrap();
    assert_eq!(
        filter.ack().get(),
        format!(
            r#"{{"taskIds":["task-alice-1"],"toolsListChanged":true,"resourceSubscriptions":["{PUBLIC}"]}}"#
        )
    );
}

#[test]
fn unreadable_unknown_and_refused_uris_drop_alike() {
    let profile = builder().build().unwrap();
    let alone = ack(
        &profile,
        Some("bob"),
        json!({"resourceSubscriptions": [PUBLIC]}),
    );
    for hidden in [ALICE, "demo://nothing/here", STATIC] {
        let with = ack(
            &profile,
            Some("bob"),
            json!({"resourceSubscriptions": [PUBLIC, hidden]}),
        );
        assert_eq!(with, alone, "{hidden}");
        let only = ack(
            &profile,
            Some("bob"),
            json!({"resourceSubscriptions": [hidden]}),
        );
        assert_eq!(only, json!({}), "empty list is omitted for {hidden}");
    }
    // alice may read her notes.
    assert_eq!(
        ack(
            &profile,
            Some("alice"),
            json!({"resourceSubscriptions": [ALICE]})
        ),
        json!({"resourceSubscriptions": [ALICE]})
    );
}

#[test]
fn foreign_and_unknown_task_ids_drop_alike() {
    let profile = builder().build().unwrap();
    let alone = ack(
        &profile,
        Some("alice"),
        json!({"taskIds": ["task-alice-1"]}),
    );
    assert_eq!(alone, json!({"taskIds": ["task-alice-1"]}));
    for hidden in ["task-bob-1", "task-nobody"] {
        assert_eq!(
            ack(
                &profile,
                Some("alice"),
                json!({"taskIds": ["task-alice-1", hidden]})
            ),
            alone
        );
        assert_eq!(
            ack(&profile, Some("alice"), json!({"taskIds": [hidden]})),
            json!({})
        );
    }
}

#[test]
fn anonymous_callers_own_no_task_and_the_directory_is_not_asked() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let profile = ServerProfile::builder()
        .task_directory(move |_: &Principal, ids: &[&str]| {
            counted.fetch_add(1, Ordering::SeqCst);
            ready(vec![true; ids.len()])
        })
        .build()
        .unwrap();
    assert_eq!(
        ack(&profile, None, json!({"taskIds": ["task-alice-1"]})),
        json!({})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        ack(&profile, Some("alice"), json!({"taskIds": ["t"]})),
        json!({"taskIds": ["t"]})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn unknown_fields_are_omitted() {
    let profile = builder().build().unwrap();
    let params =
        r#"{"notifications": {"futureField": [1, 2], "toolsListChanged": true, "x": null}}"#;
    assert_eq!(
        run(&profile, None, params).unwrap().ack().get(),
        r#"{"toolsListChanged":true}"#
    );
}

#[test]
fn refuse_policy_fails_without_naming_the_uri() {
    let profile = builder()
        .unreadable_uris(UnreadableUris::Refuse)
        .build()
        .unwrap();
    let error = listen(
        &profile,
        Some("bob"),
        json!({"resourceSubscriptions": [PUBLIC, ALICE]}),
    )
    .unwrap_err();
    assert_eq!(error, ListenError::UnreadableResource);
    let rpc = error.to_jsonrpc();
    assert_eq!(rpc.code(), -32602);
    assert!(!rpc.message().contains("demo://"), "{}", rpc.message());
    assert!(!String::from_utf8_lossy(&error.to_body(None)).contains("alice"));
    // Readable URIs still pass under Refuse.
    assert!(listen(
        &profile,
        Some("alice"),
        json!({"resourceSubscriptions": [PUBLIC, ALICE]})
    )
    .is_ok());
}

#[test]
fn topics_kinds_and_subscription_id() {
    let profile = builder().build().unwrap();
    let filter = listen(
        &profile,
        Some("alice"),
        json!({"toolsListChanged": true, "resourceSubscriptions": [PUBLIC], "taskIds": ["task-alice-1"]}),
    )
    .unwrap();
    assert_eq!(filter.subscription_id().get(), "42");
    assert_eq!(filter.principal(), Some(&Principal::new("alice")));
    assert!(filter.honours(&Topic::List(ListChanged::Tools)));
    assert!(filter.honours(&Topic::Resource(PUBLIC.into())));
    assert!(filter.honours(&Topic::Task {
        owner: Principal::new("alice"),
        id: "task-alice-1".into()
    }));
    assert!(!filter.honours(&Topic::List(ListChanged::Prompts)));
    assert_eq!(
        filter.kinds().iter().collect::<Vec<_>>(),
        [
            Kind::ToolsListChanged,
            Kind::ResourceSubscriptions,
            Kind::TaskIds
        ]
    );
    assert_eq!(
        format!("{:?}", filter.kinds()),
        r#"{"toolsListChanged", "resourceSubscriptions", "taskIds"}"#
    );
    assert_eq!(filter.task_ids().collect::<Vec<_>>(), ["task-alice-1"]);
}

#[test]
fn narrowing_applies_to_honouring() {
    let profile = builder()
        .narrowing(
            |caller: Option<&Principal>, _: Era, caps: &mut Map<String, Value>| {
                if caller.is_none() {
                    caps.remove("tools");
                    caps.remove("extensions");
                }
            },
        )
        .build()
        .unwrap();
    assert_eq!(
        ack(
            &profile,
            None,
            json!({"toolsListChanged": true, "taskIds": ["x"]})
        ),
        json!({})
    );
    assert_eq!(
        ack(&profile, Some("alice"), json!({"toolsListChanged": true})),
        json!({"toolsListChanged": true})
    );
}

#[test]
fn escaped_uris_are_decoded() {
    let profile = builder().build().unwrap();
    let params = r#"{"notifications": {"resourceSubscriptions": ["demo:\/\/public\/readme", "demo://public/readme"]}}"#;
    let filter = run(&profile, None, params).unwrap();
    assert_eq!(filter.resource_uris().collect::<Vec<_>>(), [PUBLIC]);
}

#[test]
fn short_hook_answers_deny() {
    let profile = ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, _: &[&str]| ready(vec![true]))
        .build()
        .unwrap();
    let filter = listen(&profile, None, json!({"resourceSubscriptions": ["a", "b"]})).unwrap();
    assert_eq!(filter.resource_uris().collect::<Vec<_>>(), ["a"]);
}

#[test]
fn filter_fits_http_extensions() {
    fn assert_extension<T: Clone + Send + Sync + 'static>() {}
    assert_extension::<HonouredFilter>();
    let profile = builder().build().unwrap();
    let filter = listen(&profile, None, json!({"toolsListChanged": true})).unwrap();
    let mut extensions = http::Extensions::new();
    extensions.insert(filter);
    assert!(extensions
        .get::<HonouredFilter>()
        .unwrap()
        .honours(&Topic::List(ListChanged::Tools)));
}

#[test]
fn escaped_items_are_re_escaped_in_the_ack() {
    let profile = builder().build().unwrap();
    let params = r#"{"notifications": {"resourceSubscriptions": ["demo://public/\"q\"\u0001", "demo://public/\u00e9"]}}"#;
    let filter = run(&profile, None, params).unwrap();
    assert_eq!(
        filter.ack().get(),
        r#"{"resourceSubscriptions":["demo://public/\"q\"\u0001","demo://public/é"]}"#
    );
}
