//! `metrics = "HOST:PORT"`: mcp-edge's metrics as Prometheus text at
//! `GET /metrics` on an address of its own. A request whose `Host` is not a
//! loopback name or an IP address, with the metrics port, is refused 403:
//! a page that got its own name resolved to the address (DNS rebinding)
//! reads nothing, and a scraper that names the address by IP does.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http::header::{CONTENT_TYPE, HOST};
use http::uri::Authority;
use http::StatusCode;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::answer;

/// A listen stream's lifetime buckets, in seconds.
const STREAM_SECONDS: &[f64] = &[1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0];

/// Installs the process's recorder; its upkeep runs on the runtime.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    let handle = PrometheusBuilder::new()
        // Unit suffixes: `mcp.server.operation.duration` reads
        // `mcp_server_operation_duration_seconds`, as OpenTelemetry's
        // Prometheus form names it.
        .with_recommended_naming(true)
        .set_buckets_for_metric(
            Matcher::Full("mcp.server.operation.duration".to_owned()),
            mcp_edge::OPERATION_SECONDS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("mcp_edge_listen_stream_duration_seconds".to_owned()),
            STREAM_SECONDS,
        )?
        .install_recorder()?;
    // Every metric listed from the first scrape.
    mcp_edge::describe_metrics();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// `GET /metrics` of `handle`, served on `port`.
pub fn router(handle: PrometheusHandle, port: u16) -> Router {
    let render = move || {
        let text = handle.render();
        async move { ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response() }
    };
    Router::new()
        .route("/metrics", get(render))
        .layer(from_fn_with_state(port, check_host))
}

async fn check_host(State(port): State<u16>, request: Request, next: Next) -> Response {
    let host = request.headers().get(HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|host| is_own(host, port)) {
        return answer::error(
            StatusCode::FORBIDDEN,
            None,
            -32600,
            "Forbidden: Host not allowed",
        );
    }
    next.run(request).await
}

/// `localhost`, `127.0.0.1`, `[::1]` or any IP address, with `port`.
fn is_own(host: &str, port: u16) -> bool {
    let Ok(authority) = host.parse::<Authority>() else {
        return false;
    };
    let name = authority.host();
    let literal = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok();
    (literal || name.eq_ignore_ascii_case("localhost"))
        && authority.port_u16().unwrap_or(80) == port
}

#[cfg(test)]
mod tests {
    use super::is_own;

    #[test]
    fn loopback_names_and_addresses_with_the_port_pass() {
        for host in [
            "localhost:9090",
            "127.0.0.1:9090",
            "[::1]:9090",
            "10.1.2.3:9090",
        ] {
            assert!(is_own(host, 9090), "{host}");
        }
        for host in [
            "evil.example:9090",
            "127.0.0.1:9091",
            "localhost",
            "",
            "127.0.0.1.evil:9090",
        ] {
            assert!(!is_own(host, 9090), "{host}");
        }
    }
}
