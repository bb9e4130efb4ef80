//! `mcp-edge-proxy`: mcp-edge in front of any MCP server, over HTTP.
//!
//! The binary (`src/main.rs`) reads one TOML file ([`config`]) and serves
//! the stack [`app`] builds from mcp-edge's public layers: the `Host`,
//! `Origin` and caller checks ([`admit`], [`callers`]), `EdgeLayer`, with
//! `[hub]` the listen hub and its publish endpoint ([`publish`]), and the
//! forwarding service ([`forward`]), which grants reads by the `[[allow]]`
//! rules ([`allow`], [`inspect`]) and binds legacy sessions to their
//! caller ([`sessions`]). docs/proxy.md is the configuration reference.

pub mod admit;
pub mod allow;
pub mod answer;
pub mod app;
pub mod callers;
pub mod config;
pub mod forward;
pub mod inspect;
pub mod metrics;
pub mod publish;
pub mod sessions;
pub mod upstream;
