//! The MCP server itself: an rmcp [`ServerHandler`] over the [`Store`].
//!
//! Everything it reads about resources and tasks comes from the store, and
//! everything it changes is published through the mcp-edge listen hub's
//! publisher. It serves `subscriptions/listen` itself only in `--bare`
//! mode; with the mcp-edge layers in front, the hub serves listens. Legacy
//! `resources/subscribe` subscriptions (and bare listens) hear the hub
//! through a [`Watch`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mcp_edge::hub::{Change, ListenHub, Watch};
use mcp_edge::ListChanged;
use mcp_edge::{Principal, Topic};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::InputResponses;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CacheScope, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams,
    InitializeResult, InputRequest, InputRequests, InputRequiredResult, ListResourcesResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{tool, tool_handler, tool_router, ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::task::AbortHandle;

use crate::store::Store;

/// The protocol revisions served: 2026-07-28, the stateless one, where
/// every request carries its own `_meta` and listens replace
/// `resources/subscribe`; and 2025-11-25, the last with the `initialize`
/// handshake, served in rmcp's sessions (`Mcp-Session-Id`), where
/// `resources/subscribe` delivers updates on the session's GET stream.
const SUPPORTED_VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25];

/// The protocol versions a `subscriptions/listen` may name: those without
/// the `initialize` handshake.
pub fn listen_versions() -> impl Iterator<Item = &'static str> {
    SUPPORTED_VERSIONS
        .iter()
        .filter(|version| !version.has_initialize())
        .map(ProtocolVersion::as_str)
}

/// The demo server; cheap to clone. rmcp asks for one per stateless
/// request and one per legacy session (see [`Demo::for_session`]).
#[derive(Clone)]
pub struct Demo {
    store: Arc<Store>,
    hub: ListenHub,
    /// What `server/discover` advertises: the profile's modern set.
    capabilities: ServerCapabilities,
    /// What `initialize` advertises: the profile's legacy set, which
    /// promises no `logging/setLevel` and no list changes (the legacy era
    /// has no delivery for them here).
    legacy_capabilities: ServerCapabilities,
    /// Whether `resources/subscribe` is checked here (`--bare`): with the
    /// mcp-edge layer, the edge checks it before the handler runs.
    checks_subscriptions: bool,
    /// The legacy-era `resources/subscribe` subscriptions of one session.
    legacy: Arc<LegacySubscriptions>,
    /// The tools, routed once: rmcp's default builds the router (its
    /// schemas, its name checks) again at every tool call, list and look-up.
    tool_router: Arc<ToolRouter<Demo>>,
}

/// A legacy session's resource subscriptions: one forwarding task per URI,
/// from a hub watch to the session's peer (its GET stream). They all end when
/// the session's handler is dropped, that is when the session ends.
#[derive(Default)]
struct LegacySubscriptions {
    tasks: Mutex<HashMap<String, AbortHandle>>,
}

impl LegacySubscriptions {
    fn tasks(&self) -> MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for LegacySubscriptions {
    fn drop(&mut self) {
        for (_, task) in self.tasks().drain() {
            task.abort();
        }
    }
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct EchoArgs {
    /// The text to return.
    text: String,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct UriArgs {
    /// The URI of a resource the caller may read.
    uri: String,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct TaskArgs {
    /// The id of a task the caller owns.
    #[serde(rename = "taskId")]
    task_id: String,
}

/// The caller, as the auth middleware put it into the HTTP request.
fn caller(context: &RequestContext<RoleServer>) -> Option<Principal> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<Principal>()
        .cloned()
}

/// The answer for a URI the caller may not read: the same as for one that
/// does not exist, so the error reveals nothing.
fn resource_not_found(uri: &str) -> McpError {
    McpError::invalid_params("resource not found", Some(json!({ "uri": uri })))
}

/// The answer for a task the caller does not own, or that does not exist.
fn task_not_found() -> McpError {
    McpError::invalid_params("task not found", None)
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[tool_router]
impl Demo {
    /// A server over `store` that publishes its changes through `hub` and
    /// advertises `capabilities` (the profile's modern set) to
    /// `server/discover`, `legacy_capabilities` to `initialize`.
    pub fn new(
        store: Arc<Store>,
        hub: ListenHub,
        capabilities: ServerCapabilities,
        legacy_capabilities: ServerCapabilities,
    ) -> Self {
        Self {
            store,
            hub,
            capabilities,
            legacy_capabilities,
            checks_subscriptions: true,
            legacy: Arc::default(),
            tool_router: Arc::new(Self::tool_router()),
        }
    }

    /// Whether the handler checks `resources/subscribe` itself (default
    /// `true`); behind the mcp-edge layer, which checks it, it need not.
    pub fn checking_subscriptions(mut self, checks: bool) -> Self {
        self.checks_subscriptions = checks;
        self
    }

    /// A handler for one rmcp session or stateless request: shares the
    /// store and the hub, with subscriptions of its own.
    pub fn for_session(&self) -> Self {
        Self {
            legacy: Arc::default(),
            ..self.clone()
        }
    }

    #[tool(description = "Returns the text it is given")]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(
        description = "Marks a resource you may read as changed: listen streams subscribed to it hear notifications/resources/updated"
    )]
    async fn touch_resource(
        &self,
        Parameters(UriArgs { uri }): Parameters<UriArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if !self.store.may_read(caller(&context).as_ref(), &uri) {
            return Err(resource_not_found(&uri));
        }
        let published = self.hub.publisher().resource_updated(&uri).await;
        if let Err(error) = published.remote {
            tracing::warn!(%error, "an update did not reach the other instances");
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{uri} touched"
        ))]))
    }

    #[tool(
        description = "Completes a task you own: listen streams following it hear notifications/tasks"
    )]
    async fn complete_task(
        &self,
        Parameters(TaskArgs { task_id }): Parameters<TaskArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (owner, task, changed) = self
            .store
            .complete_task(caller(&context).as_ref(), &task_id)
            .ok_or_else(task_not_found)?;
        let task = serde_json::to_value(task).map_err(|error| {
            McpError::internal_error(format!("task does not serialize: {error}"), None)
        })?;
        if changed {
            self.publish_task(owner, &task_id, task.clone()).await;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            task.to_string(),
        )]))
    }

    // The tools below are fixtures the official conformance suite calls
    // (scenario `server-stateless`).

    #[tool(description = "Conformance fixture: needs the client's sampling capability")]
    // Sampling is deprecated by SEP-2577; the fixture only names it.
    #[allow(deprecated)]
    async fn test_missing_capability(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let declared = context
            .meta
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.sampling.is_some());
        if !declared {
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_sampling().build(),
            ));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "sampling capability declared",
        )]))
    }

    #[tool(
        description = "Conformance fixture: asks for input the 2026-07-28 way, with an InputRequiredResult, never with a request on the stream"
    )]
    async fn test_streaming_elicitation(
        &self,
        InputResponses(responses): InputResponses,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let declared = context
            .meta
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        if !declared {
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_elicitation().build(),
            ));
        }
        if let Some(answer) = responses
            .as_ref()
            .and_then(|responses| responses.get("name"))
        {
            let name = answer
                .pointer("/content/name")
                .and_then(Value::as_str)
                .unwrap_or("stranger");
            let result =
                CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name}"))]);
            return Ok(result.into());
        }
        let request: InputRequest = serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {
                    "type": "object",
                    "properties": { "name": { "type": "string" } },
                    "required": ["name"]
                }
            }
        }))
        .map_err(|error| McpError::internal_error(error.to_string(), None))?;
        let requests = InputRequests::from([("name".to_owned(), request)]);
        Ok(InputRequiredResult::from_input_requests(requests).into())
    }

    #[tool(
        description = "Conformance fixture: logs only when the request's _meta sets a log level"
    )]
    // Logging is deprecated by SEP-2577 but still part of 2026-07-28: a
    // request that sets `io.modelcontextprotocol/logLevel` may get messages.
    #[allow(deprecated)]
    async fn test_logging_tool(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
        if let Some(level) = context.meta.log_level() {
            if matches!(level, LoggingLevel::Debug | LoggingLevel::Info) {
                let message = LoggingMessageNotificationParam::new(
                    LoggingLevel::Info,
                    json!("test_logging_tool ran"),
                );
                if let Err(error) = context.peer.notify_logging_message(message).await {
                    tracing::debug!(%error, "log message not delivered");
                }
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "logging evaluated",
        )]))
    }

    #[tool(
        description = "Conformance fixture: announces a tool-list change to listen streams that asked for it"
    )]
    async fn test_trigger_tool_change(&self) -> String {
        let _ = self.hub.publisher().list_changed(ListChanged::Tools).await;
        "tool list change announced".to_owned()
    }
}

impl Demo {
    async fn publish_task(&self, owner: Principal, id: &str, task: Value) {
        let _ = self
            .hub
            .publisher()
            .task_status(&owner, id, object(task))
            .await;
    }

    /// `--bare` mode: delivers one change through rmcp's subscription sink
    /// (the hub's watch already dropped updates the caller may not read).
    async fn forward(
        &self,
        subscription: &SubscriptionContext,
        change: Change,
    ) -> Result<(), rmcp::service::SubscriptionSendError> {
        let sink = subscription.sink();
        match change {
            Change::ListChanged(ListChanged::Tools) => sink.notify_tool_list_changed().await,
            Change::ListChanged(ListChanged::Prompts) => sink.notify_prompt_list_changed().await,
            Change::ListChanged(ListChanged::Resources) => {
                sink.notify_resource_list_changed().await
            }
            Change::ResourceUpdated { uri } => sink.notify_resource_updated(uri).await,
            // rmcp's sink cannot carry notifications/tasks (its filter has
            // no `taskIds`), so bare listens never hear about tasks.
            _ => Ok(()),
        }
    }
}

/// The hub topics of a filter rmcp accepted (`--bare` mode).
fn topics_of(filter: &SubscriptionFilter) -> Vec<Topic> {
    let flags = [
        (filter.tools_list_changed, Topic::List(ListChanged::Tools)),
        (
            filter.prompts_list_changed,
            Topic::List(ListChanged::Prompts),
        ),
        (
            filter.resources_list_changed,
            Topic::List(ListChanged::Resources),
        ),
    ];
    let uris = filter.resource_subscriptions.iter().flatten();
    flags
        .into_iter()
        .filter_map(|(flag, topic)| (flag == Some(true)).then_some(topic))
        .chain(uris.map(|uri| Topic::Resource(uri.clone())))
        .collect()
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(self.capabilities.clone())
            .with_server_info(Implementation::new(
                "mcp-edge-reference",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Demo resources under demo://; tools echo, touch_resource and complete_task.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    /// rmcp's own negotiation, advertising the legacy era's capabilities:
    /// what this server serves there (behind the edge the layer writes the
    /// same; bare, rmcp's answer is all a client sees).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        result.capabilities = self.legacy_capabilities.clone();
        Ok(result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let caller = caller(&context);
        let resources = self
            .store
            .readable(caller.as_ref())
            .map(|resource| {
                Resource::new(resource.uri, resource.name)
                    .with_description(resource.description)
                    .with_mime_type("text/plain")
            })
            .collect();
        // The list depends on who asks: no shared cache may serve it.
        Ok(ListResourcesResult::with_all_items(resources)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let resource = self
            .store
            .read(caller(&context).as_ref(), &request.uri)
            .ok_or_else(|| resource_not_found(&request.uri))?;
        let contents = vec![ResourceContents::text(resource.text, resource.uri)];
        Ok(ReadResourceResult::new(contents)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private)
            .into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.store
            .task(caller(&context).as_ref(), &request.task_id)
            .map(GetTaskResult::new)
            .ok_or_else(task_not_found)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // No demo task ever waits for input, so there is nothing to apply.
        self.store
            .task(caller(&context).as_ref(), &request.task_id)
            .map(drop)
            .ok_or_else(task_not_found)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (owner, task, changed) = self
            .store
            .cancel_task(caller(&context).as_ref(), &request.task_id)
            .ok_or_else(task_not_found)?;
        if changed {
            let task = serde_json::to_value(task).unwrap_or_default();
            self.publish_task(owner, &request.task_id, task).await;
        }
        Ok(())
    }

    // Legacy era (2025-11-25 sessions): `resources/subscribe` and
    // `resources/unsubscribe`, deprecated by 2026-07-28 in favour of listens.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri;
        // Behind the mcp-edge layer the edge made these checks already (the
        // caller may read it, the subscription hook accepts it); bare, the
        // handler makes them itself.
        if self.checks_subscriptions {
            if !self.store.may_read(caller(&context).as_ref(), &uri) {
                return Err(resource_not_found(&uri));
            }
            if !self.store.accepts_subscription(&uri) {
                return Err(McpError::invalid_params(
                    "resource does not support subscriptions",
                    Some(json!({ "uri": uri })),
                ));
            }
        }
        let mut watch: Watch = self
            .hub
            .watch(caller(&context), [Topic::Resource(uri.clone())]);
        let peer = context.peer.clone();
        let task = tokio::spawn(async move {
            // Ends at shutdown, when the watch lags, or when the session's
            // peer is gone.
            while let Some(change) = watch.next().await {
                let Change::ResourceUpdated { uri } = change else {
                    continue;
                };
                let update = ResourceUpdatedNotificationParam::new(uri);
                if peer.notify_resource_updated(update).await.is_err() {
                    break;
                }
            }
        });
        if let Some(previous) = self.legacy.tasks().insert(uri, task.abort_handle()) {
            previous.abort();
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(task) = self.legacy.tasks().remove(&request.uri) {
            task.abort();
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // `--bare` mode only. rmcp gives this hook no caller, so it can only
        // drop what nobody may subscribe to; readability is not checked here.
        let mut accepted = requested.clone();
        if let Some(uris) = accepted.resource_subscriptions.as_mut() {
            uris.retain(|uri| self.store.accepts_subscription(uri));
        }
        Some(accepted)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let caller = caller(subscription.request_context());
        let mut watch = self.hub.watch(caller, topics_of(subscription.accepted()));
        loop {
            let change = tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                change = watch.next() => change,
            };
            // Returning Ok sends the graceful-close result: at shutdown, or
            // when the watch fell behind (the client listens again).
            let Some(change) = change else {
                return Ok(());
            };
            if self.forward(&subscription, change).await.is_err() {
                return Ok(());
            }
        }
    }
}
