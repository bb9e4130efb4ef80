//! The whole stack as one axum [`Router`], shared by `examples/server.rs`
//! (the binary) and `tests/reference_server.rs` (which serves it in-process).

use std::error::Error;
use std::future::ready;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http::header::CONTENT_TYPE;
use http::StatusCode;
use mcp_edge::hub::{Bus, ListenHub};
use mcp_edge::{EdgeLayer, Era, Principal, ServerProfile};
use rmcp::model::ServerCapabilities;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::StreamableHttpServerConfig;
use tower::ServiceBuilder;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::edge;
use crate::endpoint::{McpEndpoint, RmcpService};
use crate::handler::Demo;
use crate::peer;
use crate::store::Store;

pub use crate::peer::PeerAddress;

/// Keep-alive comment interval on rmcp's idle streams.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The assembled server, ready for [`serve::serve`](crate::serve::serve)
/// (or `axum::serve` with connect info,
/// `into_make_service_with_connect_info::<SocketAddr>()`).
pub struct App {
    /// Every route: `/mcp` behind the whole stack, and `/debug/streams`.
    pub router: Router,
    /// The listen hub; [`ListenHub::shutdown`] ends every open listen gracefully.
    pub hub: ListenHub,
    /// Stops rmcp: its sessions and its open streams.
    pub stop_rmcp: Box<dyn FnOnce() + Send>,
    /// rmcp's legacy sessions; `sessions` holds the live ones.
    pub rmcp_sessions: Arc<LocalSessionManager>,
}

/// What the server offers. The hooks read the same store as the handler.
fn profile(store: &Arc<Store>) -> Result<ServerProfile, mcp_edge::BuildError> {
    let (access, subscriptions, directory) = (store.clone(), store.clone(), store.clone());
    ServerProfile::builder()
        .base_capabilities(serde_json::json!({
            "tools": { "listChanged": false },
            "resources": { "listChanged": false },
        }))
        .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
            ready(
                uris.iter()
                    .map(|uri| access.may_read(caller, uri))
                    .collect::<Vec<_>>(),
            )
        })
        .subscription_hook(move |uris: &[&str]| {
            ready(
                uris.iter()
                    .map(|uri| subscriptions.accepts_subscription(uri))
                    .collect::<Vec<_>>(),
            )
        })
        .task_directory(move |owner: &Principal, ids: &[&str]| {
            ready(
                ids.iter()
                    .map(|id| directory.owns_task(owner, id))
                    .collect::<Vec<_>>(),
            )
        })
        .completions(false)
        .legacy_logging(false)
        .build()
}

/// What the deployment bounds, for anonymous clients and everyone else.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Most legacy sessions open at once (default 1 000).
    pub sessions: usize,
    /// Most legacy sessions one caller may hold; anonymous callers share
    /// one count (default 16).
    pub sessions_per_caller: usize,
    /// How long a legacy session may sit idle before rmcp closes it
    /// (default 5 minutes).
    pub session_idle: Duration,
    /// How long a request body may go without a frame before it is cut off
    /// (default 10 s).
    pub body_read: Duration,
    /// Most listen streams open at once, whoever holds them (default
    /// 10 000).
    pub streams: usize,
    /// Most listen streams one caller may hold open (default 64); each
    /// anonymous peer address counts as a caller of its own.
    pub streams_per_caller: usize,
    /// Where an anonymous caller's address is read, for
    /// `streams_per_caller` (default: the connection's peer).
    pub peer_address: PeerAddress,
    /// How long an idle listen stream waits before a keep-alive comment
    /// (default 15 s).
    pub keep_alive: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            sessions: 1000,
            sessions_per_caller: 16,
            session_idle: Duration::from_secs(300),
            body_read: Duration::from_secs(10),
            streams: 10_000,
            streams_per_caller: 64,
            peer_address: PeerAddress::Connection,
            keep_alive: KEEP_ALIVE,
        }
    }
}

/// The server for `port` (the `Host`/`Origin` check needs it), with the
/// default [`Bounds`]; `bare` leaves out the mcp-edge layer.
pub fn build(port: u16, bare: bool) -> Result<App, Box<dyn Error>> {
    build_with(port, bare, Bounds::default())
}

/// [`build`] with `bounds`.
pub fn build_with(port: u16, bare: bool, bounds: Bounds) -> Result<App, Box<dyn Error>> {
    build_on(port, bare, bounds, None)
}

/// [`build_with`] on `bus` (default: none, this instance alone), which
/// carries the hub's changes to the other instances of the deployment.
pub fn build_on(
    port: u16,
    bare: bool,
    bounds: Bounds,
    bus: Option<Arc<dyn Bus>>,
) -> Result<App, Box<dyn Error>> {
    let store = Store::demo();
    let profile = profile(&store)?;
    let keys = profile.clone();
    let mut hub = ListenHub::builder(profile.clone())
        .keep_alive(bounds.keep_alive)
        .max_streams(bounds.streams)
        .max_streams_per_caller(bounds.streams_per_caller)
        // Anonymous callers by address: otherwise they all share one count.
        .admission_key(move |parts| peer::admission_key(&keys, bounds.peer_address, parts));
    if let Some(bus) = bus {
        hub = hub.bus(bus);
    }
    let hub = hub.build();
    // rmcp advertises (and enforces, e.g. for tasks/*) the capabilities
    // the profile computes for each era, so bare mode advertises what it
    // serves too.
    let capabilities: ServerCapabilities =
        serde_json::from_value(profile.capabilities(Era::Modern).clone().into())?;
    let legacy_capabilities: ServerCapabilities =
        serde_json::from_value(profile.capabilities(Era::Legacy).clone().into())?;

    // 2026-07-28 requests are stateless whatever this says; legacy-era
    // requests (`initialize`, then `Mcp-Session-Id`) get rmcp's sessions.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_sse_keep_alive(Some(KEEP_ALIVE));
    let rmcp_token = config.cancellation_token.clone();
    let demo = Demo::new(store, hub.clone(), capabilities, legacy_capabilities)
        .checking_subscriptions(bare);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(bounds.session_idle);
    let manager = Arc::new(manager);
    let rmcp = RmcpService::new(move || Ok(demo.for_session()), manager.clone(), config);

    let routes = if bare {
        Router::new().route_service("/mcp", rmcp)
    } else {
        // Both promises, with one read of each body; the hub serves the
        // listens the layer honoured.
        let layered = ServiceBuilder::new()
            .layer(EdgeLayer::new(profile))
            .service(McpEndpoint::new(tower::Layer::layer(&hub.layer(), rmcp)));
        Router::new().route_service("/mcp", layered)
    };
    let debug = Router::new()
        .route("/debug/streams", get(open_streams))
        .with_state(hub.clone());
    // `layer` wraps what is already there: the last one added runs first.
    let router = routes
        .layer(from_fn_with_state(
            edge::Sessions::new(bounds.sessions, bounds.sessions_per_caller, manager.clone()),
            edge::bind_sessions,
        ))
        .layer(from_fn(edge::bearer_auth))
        // A body that trickles in slower than this is cut off.
        .layer(RequestBodyTimeoutLayer::new(bounds.body_read))
        .merge(debug)
        .layer(from_fn_with_state(port, edge::loopback_only));
    Ok(App {
        router,
        hub,
        stop_rmcp: Box::new(move || rmcp_token.cancel()),
        rmcp_sessions: manager,
    })
}

/// `GET /debug/streams`: how many listen streams the hub has open,
/// as `{"streams":N}`. Only for a peer on the loopback interface (and, like
/// everything, only under a loopback `Host`).
async fn open_streams(
    State(hub): State<ListenHub>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return edge::rejection(
            StatusCode::FORBIDDEN,
            -32600,
            "Forbidden: not a loopback peer",
        );
    }
    (
        [(CONTENT_TYPE, "application/json")],
        format!(r#"{{"streams":{}}}"#, hub.open_streams()),
    )
        .into_response()
}
