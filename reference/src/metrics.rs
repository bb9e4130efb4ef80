//! The deployment's metrics (`--metrics-addr`): what mcp-edge counts,
//! through the Prometheus exporter, as text at `GET /metrics` on an address
//! of its own, apart from the MCP endpoint, under the same `Host` rule.
//! docs/operations.md says what each metric means and what to alert on.

use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::middleware::from_fn_with_state;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::layers::FanoutBuilder;

use crate::edge;

/// The access hook's latency buckets, in seconds: a hook is an in-memory
/// check or a call to an authorization service.
const HOOK_SECONDS: &[f64] = &[0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];

/// A listen stream's lifetime buckets, in seconds: from a client that
/// leaves at once to one that stays a day.
const STREAM_SECONDS: &[f64] = &[1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0];

/// How often the exporter drains its histograms' samples into buckets.
const UPKEEP: Duration = Duration::from_secs(5);

/// Installs the process's recorder (once per process): from then on
/// mcp-edge's counts are kept, and with `otlp` exported too. The handle
/// renders them; its upkeep runs on the runtime until the process ends.
pub fn install(
    otlp: Option<crate::telemetry::MeterRecorder>,
) -> Result<PrometheusHandle, Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new()
        // Unit suffixes: `mcp.server.operation.duration` in seconds reads
        // `mcp_server_operation_duration_seconds`, as OpenTelemetry's
        // Prometheus form names it (every other name has its suffixes).
        .with_recommended_naming(true)
        .set_buckets_for_metric(
            Matcher::Full("mcp.server.operation.duration".to_owned()),
            mcp_edge::OPERATION_SECONDS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("mcp_edge_access_hook_seconds".to_owned()),
            HOOK_SECONDS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("mcp_edge_listen_stream_duration_seconds".to_owned()),
            STREAM_SECONDS,
        )?
        .build_recorder();
    let handle = prometheus.handle();
    let installed = match otlp {
        Some(otlp) => metrics::set_global_recorder(
            FanoutBuilder::default()
                .add_recorder(prometheus)
                .add_recorder(otlp)
                .build(),
        )
        .is_ok(),
        None => metrics::set_global_recorder(prometheus).is_ok(),
    };
    if !installed {
        return Err("a metrics recorder is installed already".into());
    }
    // Every metric listed from the first scrape.
    mcp_edge::describe_metrics();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// `GET /metrics`: the Prometheus text of `handle`, served on `port` under
/// the MCP endpoint's `Host` rule: a loopback name for this port, or 403,
/// so that a page whose name was rebound to this address cannot read it.
pub fn router(handle: PrometheusHandle, port: u16) -> Router {
    let render = move || {
        let text = handle.render();
        async move { ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response() }
    };
    Router::new()
        .route("/metrics", get(render))
        .layer(from_fn_with_state(port, edge::loopback_only))
}
