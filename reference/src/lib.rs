//! The code of the mcp-edge reference deployment: a real MCP server on rmcp,
//! hardened by mcp-edge's `EdgeLayer` and stacked with auth.
//!
//! `examples/server.rs` (the binary: arguments, logging, graceful shutdown)
//! and `tests/reference_server.rs` (which serves the same stack in-process)
//! share it from this workspace member, so both compile the very same
//! modules. [`app::build`] assembles the whole stack as one axum router;
//! everything else stays inside the crate:
//!
//! - `edge`: DNS-rebinding protection, bearer auth and legacy sessions bound
//!   to their caller (the outermost middlewares).
//! - `endpoint`: the inner service: rmcp behind mcp-edge's listen hub,
//!   which serves each honoured listen once rmcp's own checks of it pass.
//! - `handler`: the rmcp server handler (tools, resources, tasks); it
//!   publishes every change through the hub.
//! - `peer`: the listen hub's admission buckets, anonymous callers by their
//!   peer's address.
//! - `store`: the resources and tasks the handler and the mcp-edge hooks read.
//!
//! [`metrics`] serves mcp-edge's metrics for Prometheus, and [`serve`] is
//! the accept loop both listeners run, its connections bounded.

pub mod app;
mod edge;
mod endpoint;
mod handler;
pub mod metrics;
mod peer;
mod store;
pub mod telemetry;

/// The accept loop both listeners run (the workspace's `mcp-edge-serve`).
pub use mcp_edge_serve as serve;

/// What the server prints beside its address: a copy-paste `curl` for a
/// discovery and one for a listen as bob, against `url`, and what the
/// listen's acknowledgment holds there (`bare`: rmcp's, without the edge).
pub fn try_it(url: &str, bare: bool) -> String {
    let headers = "-H 'Content-Type: application/json' \\
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28'";
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let discover =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{meta}}}}}"#);
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{{meta},"notifications":{{"resourceSubscriptions":["demo://users/alice/notes","demo://users/bob/notes"]}}}}}}"#
    );
    let ack = match bare {
        false => "bob's listen is acknowledged with his notes only",
        true => "bare: rmcp acknowledges bob's listen with alice's notes too",
    };
    format!(
        "try it (callers: 'Authorization: Bearer alice-token' or bob-token, or none):
  curl -s {url} {headers} \\
    -H 'Mcp-Method: server/discover' \\
    -d '{discover}'
  curl -sN {url} -H 'Authorization: Bearer bob-token' {headers} \\
    -H 'Mcp-Method: subscriptions/listen' \\
    -d '{listen}'
  ({ack}; docs/reference-deployment.md has more)"
    )
}
