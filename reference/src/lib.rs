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

pub mod app;
mod edge;
mod endpoint;
mod handler;
mod peer;
pub mod serve;
mod store;
