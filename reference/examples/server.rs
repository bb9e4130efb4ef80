//! The mcp-edge reference deployment: a real MCP server on rmcp, hardened by
//! mcp-edge and stacked with auth.
//!
//! ```text
//! cargo run --example server -- [--addr HOST:PORT] [--bare]
//! ```
//!
//! It serves `http://127.0.0.1:8080/mcp`: protocol 2026-07-28 statelessly,
//! and the legacy era (2025-11-25, `initialize`) in rmcp sessions. The stack,
//! outermost first:
//!
//! 1. DNS-rebinding protection: `Host` and `Origin` must name this server on
//!    a loopback name, or 403 (`edge.rs`).
//! 2. Bearer auth: `alice-token` is alice, `bob-token` is bob, no header is
//!    anonymous, anything else is 401 (`edge.rs`).
//! 3. [`EdgeLayer`], both promises with one read of each body:
//!    `server/discover` advertises the profile's capabilities, exactly what
//!    is served, and each `subscriptions/listen` filter is honoured for its
//!    caller (only URIs the caller may read, only tasks it owns).
//! 4. mcp-edge's listen hub: it serves every honoured listen, after rmcp's
//!    own checks of it (`endpoint.rs`); the handler publishes every change
//!    through the hub. With `--redis URL` (built with `--features redis`),
//!    instances on one Redis share listen topics; with `--redis-cluster
//!    URL,URL,...`, instances on one Redis Cluster, over sharded pub/sub.
//! 5. rmcp (`handler.rs`).
//!
//! Listen streams are capped in all (`--max-streams`, default 10 000) and
//! per caller (`--max-streams-per-caller`, default 64); a listen over a cap
//! is answered 429. An anonymous caller is counted by its peer's address,
//! which axum puts in each request's extensions (`ConnectInfo`, below).
//! Behind a reverse proxy, `--trust-forwarded-for` takes that address from
//! the rightmost `X-Forwarded-For` entry, the one the proxy appended;
//! without the flag the header is ignored, as any client can write it.
//! Legacy sessions are capped too (`--max-sessions`,
//! `--max-sessions-per-caller`), on what rmcp answers: a session opened
//! beyond the caps is closed and the answer is 429.
//!
//! `--bare` drops 3 and 4: rmcp then answers listens itself, acknowledging
//! whatever URIs exist whoever asks, and never delivering task updates.
//!
//! Connections are bounded: a request head must be complete within
//! `--header-timeout-secs` (default 10; on HTTP/2 the preface and the
//! first request), a connection with no request in flight closes after
//! `--idle-timeout-secs` (default 60), and one peer address holds at most
//! `--max-connections-per-peer` (default 256) open.
//!
//! `--metrics-addr HOST:PORT` serves mcp-edge's metrics as Prometheus text
//! at `GET /metrics` on that address (`metrics.rs`; docs/operations.md
//! lists them). Without it no recorder is installed, and the counts cost
//! nothing but a look for one.
//!
//! The modules named here are in the workspace member `reference/`
//! (`reference/src/`, the library `mcp_edge_reference`); this file is the
//! binary around them. The router is assembled in `app.rs`, so
//! `tests/reference_server.rs` can serve the same stack in-process.
//! Resources, tasks and the three mcp-edge hooks all read one store
//! (`store.rs`). `GET /debug/streams` (loopback
//! peers only) counts the open listen streams. Logs go through `RUST_LOG`
//! (default `info`).
//!
//! Try it:
//!
//! ```text
//! curl -N http://127.0.0.1:8080/mcp -H 'Authorization: Bearer bob-token' \
//!   -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
//!   -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: subscriptions/listen' \
//!   -d '{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{
//!        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
//!                 "io.modelcontextprotocol/clientCapabilities":{}},
//!        "notifications":{"resourceSubscriptions":["demo://users/alice/notes","demo://users/bob/notes"]}}}'
//! ```
//!
//! The acknowledgment lists only bob's notes.

use std::error::Error;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use mcp_edge::hub::Bus;
use mcp_edge_reference::telemetry::Otlp;
use mcp_edge_reference::{app, serve};
use tokio::net::TcpListener;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// rmcp's log level when `RUST_LOG` is not set.
const DEFAULT_RMCP_LOG: &str = "warn";

/// How long shutdown waits for open connections to finish.
const DRAIN: Duration = Duration::from_secs(10);

const USAGE: &str = "usage: server [--addr HOST:PORT] [--bare] [--max-sessions N]
              [--max-sessions-per-caller N] [--body-timeout SECS]
              [--max-streams N] [--max-streams-per-caller N] [--trust-forwarded-for]
              [--keep-alive-secs N] [--redis URL | --redis-cluster URL,URL,...]
              [--metrics-addr HOST:PORT] [--header-timeout-secs N]
              [--idle-timeout-secs N] [--max-connections-per-peer N]
              [--otlp-endpoint URL]

  --addr HOST:PORT             where to listen (default 127.0.0.1:8080)
  --bare                       the same server without the mcp-edge layers (auth stays)
  --max-sessions N             most legacy sessions open at once (default 1000)
  --max-sessions-per-caller N  most per caller, anonymous callers together (default 16)
  --body-timeout SECS          cut off a request body idle this long (default 10)
  --max-streams N              most listen streams open at once (default 10000)
  --max-streams-per-caller N   most listen streams per caller, each anonymous
                               peer address counting as one (default 64)
  --trust-forwarded-for        take an anonymous caller's address from the rightmost
                               X-Forwarded-For entry (only behind a proxy that appends it)
  --keep-alive-secs N          keep-alive comment on an idle listen stream (default 15)
  --redis URL                  share listen topics with every instance on this Redis
                               (built with --features redis)
  --redis-cluster URL,URL,...  the same on the Redis Cluster these nodes belong to,
                               over sharded pub/sub (built with --features redis)
  --metrics-addr HOST:PORT     serve mcp-edge's metrics for Prometheus at /metrics there
  --otlp-endpoint URL          export mcp-edge's spans and metrics over OTLP/HTTP to this
                               base URL (http://; /v1/traces and /v1/metrics are added);
                               without it, OTEL_EXPORTER_OTLP_ENDPOINT turns the export on
  --header-timeout-secs N      close a connection whose request head is not complete
                               this long after it started waiting for one: on HTTP/2,
                               the preface and the first request (default 10)
  --idle-timeout-secs N        close a connection with no request in flight this long
                               (default 60; an open listen stream is in flight)
  --max-connections-per-peer N most connections open at once from one peer address
                               (default 256)";

struct Args {
    addr: String,
    bare: bool,
    bounds: app::Bounds,
    connections: serve::Limits,
    redis: Option<Redis>,
    metrics: Option<String>,
    otlp: Option<String>,
}

/// Where the instances share listen topics.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
enum Redis {
    Node(String),
    Cluster(Vec<String>),
}

fn number(argv: &mut impl Iterator<Item = String>, flag: &str) -> Result<u64, String> {
    argv.next()
        .and_then(|value| value.parse().ok())
        .filter(|n| *n > 0)
        .ok_or(format!("{flag} needs a positive number"))
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        addr: "127.0.0.1:8080".to_owned(),
        bare: false,
        bounds: app::Bounds::default(),
        connections: serve::Limits::default(),
        redis: None,
        metrics: None,
        otlp: None,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--addr" => args.addr = argv.next().ok_or("--addr needs HOST:PORT")?,
            "--bare" => args.bare = true,
            "--metrics-addr" => {
                args.metrics = Some(argv.next().ok_or("--metrics-addr needs HOST:PORT")?);
            }
            "--otlp-endpoint" => {
                let url = argv.next().ok_or("--otlp-endpoint needs a URL")?;
                if !url.starts_with("http://") {
                    return Err(format!("--otlp-endpoint takes an http:// URL, not `{url}`"));
                }
                args.otlp = Some(url);
            }
            "--max-sessions" => args.bounds.sessions = number(&mut argv, &arg)? as usize,
            "--max-sessions-per-caller" => {
                args.bounds.sessions_per_caller = number(&mut argv, &arg)? as usize;
            }
            "--body-timeout" => {
                args.bounds.body_read = Duration::from_secs(number(&mut argv, &arg)?);
            }
            "--max-streams" => args.bounds.streams = number(&mut argv, &arg)? as usize,
            "--max-streams-per-caller" => {
                args.bounds.streams_per_caller = number(&mut argv, &arg)? as usize;
            }
            "--trust-forwarded-for" => {
                args.bounds.peer_address = app::PeerAddress::ForwardedFor;
            }
            "--keep-alive-secs" => {
                args.bounds.keep_alive = Duration::from_secs(number(&mut argv, &arg)?);
            }
            "--header-timeout-secs" => {
                args.connections.head = Duration::from_secs(number(&mut argv, &arg)?);
            }
            "--idle-timeout-secs" => {
                args.connections.idle = Duration::from_secs(number(&mut argv, &arg)?);
            }
            "--max-connections-per-peer" => {
                args.connections.per_peer = number(&mut argv, &arg)? as usize;
            }
            "--redis" | "--redis-cluster" if args.redis.is_some() => {
                return Err("give --redis or --redis-cluster once".to_owned());
            }
            "--redis" => args.redis = Some(Redis::Node(argv.next().ok_or("--redis needs a URL")?)),
            "--redis-cluster" => {
                let urls = argv.next().ok_or("--redis-cluster needs URL,URL,...")?;
                let urls = urls
                    .split(',')
                    .filter(|url| !url.is_empty())
                    .map(str::to_owned);
                args.redis = Some(Redis::Cluster(urls.collect()));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    Ok(args)
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot watch SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT: shutting down"),
        () = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let otlp = Otlp::new(args.otlp.as_deref())?;
    log(otlp.as_ref());

    let listener = TcpListener::bind(&args.addr).await?;
    let local = listener.local_addr()?;
    let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    let recorder = otlp.as_ref().map(Otlp::recorder);
    let metrics = match &args.metrics {
        Some(addr) => Some(serve_metrics(addr, recorder, metrics_stopped).await?),
        None => {
            if recorder.is_some() {
                mcp_edge_reference::metrics::install(recorder)?;
            }
            None
        }
    };
    let app::App {
        router,
        hub,
        stop_rmcp,
        ..
    } = app::build_on(local.port(), args.bare, args.bounds, bus(args.redis)?)?;

    let mode = if args.bare {
        " (bare: no mcp-edge layers)"
    } else {
        ""
    };
    println!("listening on http://{local}/mcp{mode}");
    println!(
        "{}",
        mcp_edge_reference::try_it(&format!("http://{local}/mcp"), args.bare)
    );

    let (signalled, on_signal) = tokio::sync::oneshot::channel();
    let shutdown = {
        let hub = hub.clone();
        async move {
            shutdown_signal().await;
            // Every open listen ends with its graceful-close result, and
            // rmcp ends its sessions' streams (a legacy GET stream among
            // them), so the connections can drain.
            hub.shutdown();
            stop_rmcp();
            let _ = stop_metrics.send(());
            let _ = signalled.send(());
        }
    };
    let mut server = tokio::spawn(serve::serve_with(
        listener,
        router,
        args.connections,
        shutdown,
    ));
    let drained = tokio::select! {
        result = &mut server => Some(result),
        () = async {
            let _ = on_signal.await;
            tokio::time::sleep(DRAIN).await;
        } => None,
    };
    match drained {
        Some(result) => result??,
        None => {
            tracing::warn!("connections still open after {DRAIN:?}; closing them");
            server.abort();
        }
    }
    if let Some(metrics) = metrics {
        metrics.await??;
    }
    tracing::info!(open_streams = hub.open_streams(), "stopped");
    if let Some(otlp) = otlp {
        otlp.shutdown();
    }
    Ok(())
}

/// Installs the metrics recorder and serves it at `addr` until `stopped`.
async fn serve_metrics(
    addr: &str,
    otlp: Option<mcp_edge_reference::telemetry::MeterRecorder>,
    stopped: tokio::sync::oneshot::Receiver<()>,
) -> Result<tokio::task::JoinHandle<std::io::Result<()>>, Box<dyn Error>> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    println!("metrics at http://{local}/metrics");
    let handle = mcp_edge_reference::metrics::install(otlp)?;
    let router = mcp_edge_reference::metrics::router(handle, local.port());
    let stopped = async move {
        let _ = stopped.await;
    };
    Ok(tokio::spawn(serve::serve(listener, router, stopped)))
}

/// Logs as `RUST_LOG` says; without it, `info`, but rmcp's own lines
/// (three a request) only from `warn` up. Colour only on a terminal. With
/// `otlp`, mcp-edge's spans (and the events in them) are exported too,
/// whatever `RUST_LOG` says.
fn log(otlp: Option<&Otlp>) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("info,rmcp={DEFAULT_RMCP_LOG}")));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stdout().is_terminal())
        .with_filter(filter);
    let export = otlp.map(|otlp| {
        otlp.layer()
            .with_filter(Targets::new().with_target("mcp_edge", Level::DEBUG))
    });
    tracing_subscriber::registry().with(fmt).with(export).init();
}

/// The bus to the other instances, when asked for: a Redis node, or a
/// Redis Cluster.
#[cfg(feature = "redis")]
fn bus(redis: Option<Redis>) -> Result<Option<Arc<dyn Bus>>, Box<dyn Error>> {
    const PREFIX: &str = "mcp-edge-reference";
    let bus = match redis {
        None => return Ok(None),
        Some(Redis::Node(url)) => {
            println!("sharing listen topics through Redis at {url}");
            mcp_edge::hub::RedisBus::new(&url, PREFIX)?
        }
        Some(Redis::Cluster(urls)) => {
            println!(
                "sharing listen topics through the Redis Cluster of {}",
                urls.join(", ")
            );
            mcp_edge::hub::RedisBus::cluster(&urls, PREFIX)?
        }
    };
    Ok(Some(Arc::new(bus)))
}

/// The bus to the other instances: none without the `redis` feature.
#[cfg(not(feature = "redis"))]
fn bus(redis: Option<Redis>) -> Result<Option<Arc<dyn Bus>>, Box<dyn Error>> {
    match redis {
        Some(_) => {
            Err("--redis and --redis-cluster need the example built with --features redis".into())
        }
        None => Ok(None),
    }
}
