//! `mcp-edge-proxy`: mcp-edge in front of any MCP server.
//!
//! ```text
//! mcp-edge-proxy --config FILE [--check-config]
//! ```

use std::error::Error;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use mcp_edge_proxy::config::Config;
use mcp_edge_proxy::{app, metrics};
use mcp_edge_serve::{serve_with, Limits};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing_subscriber::EnvFilter;

/// jemalloc (feature `jemalloc`, default): its size classes leave the
/// untouched part of a held connection's buffers out of the process's
/// memory, where glibc's malloc brings it in.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long shutdown waits for open connections to finish.
const DRAIN: Duration = Duration::from_secs(10);

const USAGE: &str = "usage: mcp-edge-proxy --config FILE [--check-config]

  --config FILE    the proxy's TOML configuration (docs/proxy.md)
  --check-config   read and check the configuration (and its JWKS file), then exit
  -h, --help       this text

Logs go to stderr as RUST_LOG says (default info).";

struct Args {
    config: PathBuf,
    check: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut config = None;
    let mut check = false;
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--config" => config = Some(argv.next().ok_or("--config needs a FILE")?.into()),
            "--check-config" => check = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    let config = config.ok_or(format!("--config FILE is required\n{USAGE}"))?;
    Ok(Args { config, check })
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    };
    for warning in config.warnings() {
        eprintln!("warning: {warning}");
    }
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = runtime.block_on(async {
        if args.check {
            // Everything but binding: the JWKS file read, the profile built.
            app::build(&config, None)?;
            println!("{}: ok", args.config.display());
            return Ok(());
        }
        run(config).await
    });
    if let Err(error) = result {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

async fn run(config: Config) -> Result<(), Box<dyn Error>> {
    log();
    let proxy = app::build(&config, None)?;
    let limits = Limits {
        head: Duration::from_secs(config.connections.header_timeout_secs),
        idle: Duration::from_secs(config.connections.idle_timeout_secs),
        per_peer: config.connections.max_per_peer,
    };
    let (stop, stopped) = watch::channel(false);
    let mut servers = Vec::new();
    let listener = TcpListener::bind(config.listen).await?;
    println!(
        "listening on http://{}/mcp, in front of {}",
        listener.local_addr()?,
        config.upstream
    );
    servers.push(spawn(listener, proxy.mcp, limits, stopped.clone()));
    if let (Some(router), Some(hub)) = (proxy.publish, &config.hub) {
        let listener = TcpListener::bind(hub.publish).await?;
        println!("publish at http://{}/publish", listener.local_addr()?);
        servers.push(spawn(listener, router, limits, stopped.clone()));
    }
    if let Some(addr) = config.metrics {
        let listener = TcpListener::bind(addr).await?;
        let local: SocketAddr = listener.local_addr()?;
        println!("metrics at http://{local}/metrics");
        let router = metrics::router(metrics::install()?, local.port());
        servers.push(spawn(listener, router, limits, stopped.clone()));
    }
    shutdown_signal().await;
    // Every listen the hub holds ends with its result, so connections drain.
    if let Some(hub) = &proxy.hub {
        hub.shutdown();
    }
    let _ = stop.send(true);
    let drained = tokio::time::timeout(DRAIN, async {
        for server in &mut servers {
            let _ = server.await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
    }
    Ok(())
}

/// Serves `router` on `listener` until `stopped` turns true.
fn spawn(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) -> JoinHandle<std::io::Result<()>> {
    let shutdown = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    tokio::spawn(serve_with(listener, router, limits, shutdown))
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
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
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT: shutting down"),
        () = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}

/// Logs as `RUST_LOG` says (default `info`), colour only on a terminal.
fn log() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
