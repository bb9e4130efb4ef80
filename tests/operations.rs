//! Every request whose method the edge reads is one operation span, named
//! and attributed as OpenTelemetry's MCP conventions say, whatever the
//! layers stacked; a request it does not read makes none.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use mcp_edge::{CapabilitiesLayer, ListenFilterLayer, ServerProfile};
use serde_json::json;
use tower::{ServiceBuilder, ServiceExt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span's name, its fields and the messages of its events.
type Opened = (String, BTreeMap<String, String>, Vec<String>);

/// Every span opened, by span id.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<BTreeMap<u64, Opened>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0
            .lock()
            .unwrap()
            .insert(id.into_u64(), (name, fields, Vec::new()));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, fields, _)) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, cx: Context<'_, S>) {
        let Some(span) = cx.event_span(event) else {
            return;
        };
        let mut message = Message(String::new());
        event.record(&mut message);
        if let Some((_, _, events)) = self.0.lock().unwrap().get_mut(&span.id().into_u64()) {
            events.push(message.0);
        }
    }
}

impl Spans {
    /// The operation spans (`mcp.server`): their fields and events.
    fn operations(&self) -> Vec<(BTreeMap<String, String>, Vec<String>)> {
        let spans = self.0.lock().unwrap();
        spans
            .values()
            .filter(|(name, ..)| name == "mcp.server")
            .map(|(_, fields, events)| (fields.clone(), events.clone()))
            .collect()
    }
}

fn post(body: serde_json::Value) -> Request<Full<Bytes>> {
    Request::post("/mcp")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn each_request_read_is_one_operation_span() {
    let spans = Spans::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let profile = ServerProfile::builder().build().unwrap();
    // Two layers of the edge stacked: each request is observed once.
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .layer(ListenFilterLayer::new(profile))
        .service_fn(|_: Request<_>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(
                r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#,
            ))))
        });

    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "get-weather", "arguments": {"city": "Oslo"}}});
    let answer = service.clone().oneshot(post(call)).await.unwrap();
    assert_eq!(answer.status(), 200);
    let operations = spans.operations();
    assert_eq!(operations.len(), 1, "{operations:?}");
    let (fields, _) = &operations[0];
    for (key, value) in [
        ("otel.name", "tools/call get-weather"),
        ("otel.kind", "server"),
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "get-weather"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", "3"),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("network.protocol.version", "1.1"),
    ] {
        assert_eq!(
            fields.get(key).map(String::as_str),
            Some(value),
            "{key}: {fields:?}"
        );
    }
    assert!(!fields.contains_key("error.type"), "{fields:?}");

    // A method outside the schema is `_OTHER`, and a tool name that could
    // carry anything names nothing.
    let odd = json!({"jsonrpc": "2.0", "id": "a", "method": "x/y",
        "params": {"name": "demo://users/alice"}});
    service.clone().oneshot(post(odd)).await.unwrap();
    let operations = spans.operations();
    let (fields, _) = &operations[1];
    assert_eq!(fields["otel.name"], "_OTHER");
    assert_eq!(fields["jsonrpc.request.id"], "a");
    assert!(!fields.contains_key("gen_ai.tool.name"), "{fields:?}");

    // A listen the edge refuses: its code, not an error on a server's
    // side, and the refusal an event of the span.
    let listen = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
        "params": {"notifications": {"resourceSubscriptions": "file:///x"}}});
    let answer = service.clone().oneshot(post(listen)).await.unwrap();
    assert_eq!(answer.status(), 400);
    let operations = spans.operations();
    let (fields, events) = &operations[2];
    assert_eq!(fields["otel.name"], "subscriptions/listen");
    assert_eq!(fields["rpc.response.status_code"], "-32602");
    assert!(!fields.contains_key("error.type"), "{fields:?}");
    assert!(
        events
            .iter()
            .any(|event| event.contains("answered by the layer")),
        "{events:?}"
    );

    // A GET is not read: no operation.
    let get = Request::get("/mcp").body(Full::new(Bytes::new())).unwrap();
    service.oneshot(get).await.unwrap();
    assert_eq!(spans.operations().len(), 3);
}
