//! The one tracing event per listen, and the listen hub's events: counts,
//! kinds and reasons, never a URI or a task id. Alone in its own test
//! binary, so its global subscriber sees every event.

use std::future::ready;
use std::sync::{Arc, Mutex};

use http::Request;
use http_body_util::Full;
use mcp_edge::{ListenFilterLayer, Principal, ServerProfile};
use tower::{ServiceBuilder, ServiceExt};

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn honoured_listen_is_logged_without_uris() {
    let shared = Log::default();
    let log = shared.clone();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();

    let profile = ServerProfile::builder()
        .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
            let alice = caller.is_some_and(|p| p.as_str() == "alice");
            ready(
                uris.iter()
                    .map(|u| alice && u.contains("/alice/"))
                    .collect(),
            )
        })
        .task_directory(|owner: &Principal, ids: &[&str]| {
            let owner = owner.as_str().to_owned();
            ready(ids.iter().map(|id| id.contains(&owner)).collect())
        })
        .build()
        .unwrap();
    let service = ServiceBuilder::new()
        .layer(ListenFilterLayer::new(profile))
        .service_fn(|_: Request<_>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::new())))
        });
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{
        "_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}},
        "notifications":{"toolsListChanged":true,
        "resourceSubscriptions":["demo://users/alice/notes","demo://users/bob/notes"],"taskIds":["task-alice-1"]}}}"#;
    let mut request = Request::post("/mcp")
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    request.extensions_mut().insert(Principal::new("alice"));
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);

    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("listen honoured"), "{log}");
    assert!(
        log.contains("requested_uris=2") && log.contains("honoured_uris=1"),
        "{log}"
    );
    assert!(
        log.contains("requested_task_ids=1") && log.contains("honoured_task_ids=1"),
        "{log}"
    );
    assert!(log.contains("principal=true"), "{log}");
    assert!(
        !log.contains("demo://") && !log.contains("task-alice-1"),
        "{log}"
    );
    hub_streams(&shared).await;
}

/// The listen hub's streams: opened, closed and why, a stream that fell
/// behind; never a URI or a task id at info level.
async fn hub_streams(log: &Log) {
    use http_body_util::BodyExt;
    use mcp_edge::hub::ListenHub;
    use mcp_edge::ListChanged;
    use tower::Service;

    let profile = ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, uris: &[&str]| ready(vec![true; uris.len()]))
        .build()
        .unwrap();
    let hub = ListenHub::builder(profile.clone()).backlog(1).build();
    let mut service = ServiceBuilder::new()
        .layer(ListenFilterLayer::new(profile))
        .layer(hub.layer())
        .service_fn(|_: Request<_>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::new())))
        });
    let listen = |id: u32| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"resourceSubscriptions":["demo://users/alice/notes"]}}}}}}"#
        );
        let mut request = Request::post("/mcp")
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from(body)))
            .unwrap();
        request.extensions_mut().insert(Principal::new("alice"));
        request
    };
    let first = service
        .ready()
        .await
        .unwrap()
        .call(listen(1))
        .await
        .unwrap();
    let second = service
        .ready()
        .await
        .unwrap()
        .call(listen(2))
        .await
        .unwrap();
    let mut first = first.into_body();
    first.frame().await.unwrap().unwrap();
    let publisher = hub.publisher();
    let _ = publisher.resource_updated("demo://users/alice/notes").await;
    // A second change while one waits: both streams (backlog 1) fall
    // behind and leave the registry.
    let _ = publisher.list_changed(ListChanged::Tools).await;
    assert_eq!(hub.open_streams(), 0);
    drop(first);
    hub.shutdown();
    drop(second);

    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("listen hub: stream opened"), "{log}");
    assert!(log.contains("listen hub: stream closed"), "{log}");
    assert!(log.contains("the client went away"), "{log}");
    assert!(log.contains("listen hub: shutting down"), "{log}");
    assert!(
        !log.contains("demo://") && !log.contains("task-alice-1"),
        "{log}"
    );
}
