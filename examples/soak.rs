//! Load client for the reference deployment: `benches/soak.sh` runs it.
//!
//! ```text
//! cargo run --example soak -- --port PORT [--pid SERVER_PID]
//!     [--streams 10000] [--wave 500] [--requests 1000000] [--workers 16]
//!     [--rss-baseline-wave 1]
//! ```
//!
//! Two phases, against `http://127.0.0.1:PORT` only:
//!
//! 1. Listen waves: `--streams` listen streams in waves of `--wave`. Each
//!    wave opens its streams at once, waits for every acknowledgment, checks
//!    `GET /debug/streams` counts them, drops them all (the client closes
//!    the connections), and waits for the count to fall back to 0. With
//!    `--pid`, the server's RSS is read after each wave: the last must be
//!    within 10 % of the one after wave `--rss-baseline-wave` (default 1).
//! 2. Mixed requests: `--requests` requests over `--workers` keep-alive
//!    connections: `server/discover`, `tools/call` echo, listen open and
//!    close (a fresh connection each), and listens with a bad filter (400).
//!
//! Any unexpected status or body is counted, the first few are printed, and
//! the exit status is 1 when anything went wrong. Every network wait is
//! bounded by a timeout.

use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::timeout;

/// The bound on any single network wait.
const WAIT: Duration = Duration::from_secs(30);
/// How many failures are printed in full.
const SHOWN: u64 = 10;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

struct Args {
    port: u16,
    pid: Option<u32>,
    /// A second instance on the same Redis: streams alternate between
    /// the two, and every wave's updates are published on both.
    peer_port: Option<u16>,
    peer_pid: Option<u32>,
    /// Updates published per wave (two instances only).
    events: u64,
    streams: u64,
    wave: u64,
    requests: u64,
    workers: u64,
    rss_baseline_wave: u64,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        port: 0,
        pid: None,
        peer_port: None,
        peer_pid: None,
        events: 4,
        streams: 10_000,
        wave: 500,
        requests: 1_000_000,
        workers: 16,
        rss_baseline_wave: 1,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let value = argv.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--port" => args.port = value.parse().map_err(|e| format!("--port: {e}"))?,
            "--pid" => args.pid = Some(value.parse().map_err(|e| format!("--pid: {e}"))?),
            "--peer-port" => {
                args.peer_port = Some(value.parse().map_err(|e| format!("--peer-port: {e}"))?)
            }
            "--peer-pid" => {
                args.peer_pid = Some(value.parse().map_err(|e| format!("--peer-pid: {e}"))?)
            }
            "--events" => args.events = number()?,
            "--streams" => args.streams = number()?,
            "--wave" => args.wave = number()?.max(1),
            "--requests" => args.requests = number()?,
            "--workers" => args.workers = number()?.max(1),
            "--rss-baseline-wave" => args.rss_baseline_wave = number()?.max(1),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if args.port == 0 {
        return Err("--port is required".into());
    }
    Ok(args)
}

/// Failures, counted and the first few shown.
#[derive(Default)]
struct Failures(AtomicU64);

impl Failures {
    fn record(&self, what: &str, detail: impl std::fmt::Display) {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        if n < SHOWN {
            eprintln!("UNEXPECTED {what}: {detail}");
        }
    }
    fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

// --- HTTP/1.1 over one connection ------------------------------------------

struct Conn {
    port: u16,
    reader: BufReader<TcpStream>,
}

struct Head {
    status: u16,
    chunked: bool,
    length: Option<usize>,
    close: bool,
}

impl Conn {
    async fn open(port: u16) -> Result<Self> {
        let socket = TcpSocket::new_v4()?;
        // The client closes first, thousands of times: an abortive close
        // keeps the loopback port range free of TIME_WAIT entries.
        #[allow(deprecated)]
        socket.set_linger(Some(Duration::ZERO))?;
        let stream = timeout(WAIT, socket.connect(([127, 0, 0, 1], port).into())).await??;
        stream.set_nodelay(true)?;
        Ok(Self {
            port,
            reader: BufReader::new(stream),
        })
    }

    async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Head> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n",
            self.port
        );
        for (name, value) in headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        if method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        head.push_str(body);
        timeout(WAIT, self.reader.get_mut().write_all(head.as_bytes())).await??;
        timeout(WAIT, self.read_head()).await?
    }

    async fn read_head(&mut self) -> Result<Head> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            return Err("connection closed before a response".into());
        }
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| format!("bad status line {line:?}"))?;
        let mut head = Head {
            status,
            chunked: false,
            length: None,
            close: false,
        };
        loop {
            line.clear();
            self.reader.read_line(&mut line).await?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                return Ok(head);
            }
            let Some((name, value)) = trimmed.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = value.contains("chunked");
            } else if name.eq_ignore_ascii_case("content-length") {
                head.length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("connection") {
                head.close = value.eq_ignore_ascii_case("close");
            }
        }
    }

    /// The next piece of a chunked body, or None at its end.
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut line = String::new();
        timeout(WAIT, self.reader.read_line(&mut line)).await??;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| format!("bad chunk size {line:?}"))?;
        let mut data = vec![0; size + 2];
        timeout(WAIT, self.reader.read_exact(&mut data)).await??;
        data.truncate(size);
        Ok((size > 0).then_some(data))
    }

    async fn body(&mut self, head: &Head) -> Result<Vec<u8>> {
        if head.chunked {
            let mut body = Vec::new();
            while let Some(chunk) = self.chunk().await? {
                body.extend(chunk);
            }
            Ok(body)
        } else {
            let mut body = vec![0; head.length.unwrap_or(0)];
            timeout(WAIT, self.reader.read_exact(&mut body)).await??;
            Ok(body)
        }
    }
}

fn post_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Authorization", "Bearer alice-token"),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    headers
}

fn listen_body(id: u64, notifications: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{{META},"notifications":{notifications}}}}}"#
    )
}

const GOOD_FILTER: &str = r#"{"resourceSubscriptions":["demo://users/alice/notes","demo://public/readme"],"toolsListChanged":true}"#;
const BAD_FILTERS: [&str; 3] = [
    r#"{"resourceSubscriptions":"demo://public/readme"}"#,
    r#"{"taskIds":["task-alice-1"]}"#,
    r#"{"toolsListChanged":"yes"}"#,
];

/// Opens a listen stream and reads its acknowledgment; the caller drops it.
async fn open_listen(port: u16, id: u64) -> Result<Conn> {
    let mut conn = Conn::open(port).await?;
    let head = conn
        .send(
            "POST",
            "/mcp",
            &post_headers("subscriptions/listen", None),
            &listen_body(id, GOOD_FILTER),
        )
        .await?;
    if head.status != 200 || !head.chunked {
        return Err(format!("listen answered {}", head.status).into());
    }
    let first = conn.chunk().await?.ok_or("listen stream ended at once")?;
    let first = String::from_utf8_lossy(&first);
    if !first.contains("notifications/subscriptions/acknowledged") {
        return Err(format!("listen began with {first:?}").into());
    }
    Ok(conn)
}

/// The listen streams registered on every instance at `ports`.
async fn registered_now(ports: &[u16]) -> Result<u64> {
    let mut registered = 0;
    for port in ports {
        registered += open_streams(*port).await?;
    }
    Ok(registered)
}

async fn open_streams(port: u16) -> Result<u64> {
    let mut conn = Conn::open(port).await?;
    let head = conn.send("GET", "/debug/streams", &[], "").await?;
    let body = conn.body(&head).await?;
    let body = String::from_utf8_lossy(&body);
    body.trim()
        .strip_prefix(r#"{"streams":"#)
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("GET /debug/streams answered {} {body:?}", head.status).into())
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `touch_resource` on alice's notes, as alice, on the instance at `port`.
async fn touch(port: u16, id: u64) -> Result<()> {
    let mut conn = Conn::open(port).await?;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{META},"name":"touch_resource","arguments":{{"uri":"demo://users/alice/notes"}}}}}}"#
    );
    let head = conn
        .send(
            "POST",
            "/mcp",
            &post_headers("tools/call", Some("touch_resource")),
            &body,
        )
        .await?;
    let answer = conn.body(&head).await?;
    if head.status != 200 || !String::from_utf8_lossy(&answer).contains("touched") {
        return Err(format!("touch_resource answered {}", head.status).into());
    }
    Ok(())
}

/// Reads `stream` until it carried `events` resource updates; how many it
/// did within the wait.
async fn updates(stream: &mut Conn, events: u64) -> u64 {
    let mut seen = 0;
    while seen < events {
        match stream.chunk().await {
            Ok(Some(chunk)) => {
                if String::from_utf8_lossy(&chunk).contains("notifications/resources/updated") {
                    seen += 1;
                }
            }
            _ => break,
        }
    }
    seen
}

// --- phase 1 ---------------------------------------------------------------

async fn listen_waves(args: &Args, failures: &Failures) -> Result<()> {
    let ports: Vec<u16> = [Some(args.port), args.peer_port]
        .into_iter()
        .flatten()
        .collect();
    let pids: Vec<Option<u32>> = vec![args.pid, args.peer_pid];
    // With two instances, one stream on each stays open throughout, so that
    // each keeps its Redis subscriptions while the waves come and go; a
    // probe published on each must reach both before the waves begin.
    let mut anchors = Vec::new();
    if ports.len() > 1 {
        for (i, port) in ports.iter().enumerate() {
            anchors.push(open_listen(*port, 1_000_000 + i as u64).await?);
        }
        let deadline = Instant::now() + WAIT;
        'probe: loop {
            for (i, port) in ports.iter().enumerate() {
                touch(*port, i as u64).await?;
            }
            let mut all = true;
            for anchor in &mut anchors {
                let wait = timeout(
                    Duration::from_millis(500),
                    updates(anchor, ports.len() as u64),
                );
                all &= matches!(wait.await, Ok(n) if n == ports.len() as u64);
            }
            if all {
                break 'probe;
            }
            if Instant::now() > deadline {
                return Err("the instances never heard each other's updates".into());
            }
        }
    }
    let mut lost = 0u64;
    let mut delivered = 0u64;
    let waves = args.streams.div_ceil(args.wave);
    let mut baseline_rss = None;
    let (mut peer_baseline_rss, mut peer_last_rss) = (None, None);
    let mut halfway_rss = None;
    let mut last_rss = None;
    let started = Instant::now();
    for wave in 0..waves {
        let size = args.wave.min(args.streams - wave * args.wave);
        let opened = futures_util::future::join_all((0..size).map(|i| {
            let id = wave * args.wave + i;
            open_listen(ports[id as usize % ports.len()], id)
        }))
        .await;
        let mut open = Vec::with_capacity(opened.len());
        for result in opened {
            match result {
                Ok(conn) => open.push(conn),
                Err(error) => failures.record("listen (wave)", error),
            }
        }
        let registered = registered_now(&ports).await?;
        let expected = open.len() as u64 + anchors.len() as u64;
        if registered != expected {
            failures.record(
                "registered streams",
                format!("{registered} registered, {expected} open"),
            );
        }
        if ports.len() > 1 {
            // Every stream is entitled to every update, wherever published.
            for event in 0..args.events {
                touch(ports[event as usize % ports.len()], event).await?;
            }
            let seen = futures_util::future::join_all(
                open.iter_mut()
                    .chain(anchors.iter_mut())
                    .map(|stream| updates(stream, args.events)),
            )
            .await;
            for seen in seen {
                delivered += seen;
                lost += args.events - seen;
            }
        }
        drop(open);
        let deadline = Instant::now() + WAIT;
        let mut left = registered_now(&ports).await? - anchors.len() as u64;
        while left != 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            left = registered_now(&ports).await? - anchors.len() as u64;
        }
        if left != 0 {
            failures.record("streams left after a wave", left);
        }
        let rss = pids[0].and_then(rss_kib);
        let peer_rss = pids[1].and_then(rss_kib);
        if wave + 1 == args.rss_baseline_wave {
            baseline_rss = rss;
            peer_baseline_rss = peer_rss;
        }
        peer_last_rss = peer_rss;
        if wave + 1 == waves.div_ceil(2) {
            halfway_rss = rss;
        }
        last_rss = rss;
        if wave == 0 || wave + 1 == waves || (wave + 1) % 5 == 0 {
            let rss = rss.map_or("?".to_owned(), |kib| format!("{kib} KiB"));
            println!("wave {:>3}/{waves}: {size} streams opened and dropped, {left} left registered, RSS {rss}", wave + 1);
        }
    }
    println!(
        "listen waves: {} streams in {:.1} s; registered at the end: {}",
        args.streams,
        started.elapsed().as_secs_f64(),
        registered_now(&ports).await? - anchors.len() as u64
    );
    let growth = |from: u64, to: u64| (to as f64 - from as f64) / from as f64 * 100.0;
    if let (Some(half), Some(last)) = (halfway_rss, last_rss) {
        println!(
            "RSS after wave {}: {half} KiB, after the last: {last} KiB ({:+.1} %)",
            waves.div_ceil(2),
            growth(half, last)
        );
    }
    for (who, base, last) in [
        ("", baseline_rss, last_rss),
        (" (peer)", peer_baseline_rss, peer_last_rss),
    ] {
        let (Some(base), Some(last)) = (base, last) else {
            continue;
        };
        let growth = growth(base, last);
        println!(
            "RSS{who} after wave {}: {base} KiB, after the last: {last} KiB ({growth:+.1} %, limit 10 %)",
            args.rss_baseline_wave
        );
        if growth.abs() > 10.0 {
            failures.record("RSS", format!("{who} {growth:+.1} % (limit 10 %)"));
        }
    }
    if ports.len() > 1 {
        println!(
            "updates: {delivered} delivered, {lost} lost (every stream is entitled to {} per wave)",
            args.events
        );
        if lost > 0 {
            failures.record("updates lost", lost);
        }
    }
    drop(anchors);
    Ok(())
}

// --- phase 2 ---------------------------------------------------------------

#[derive(Default)]
struct Mix {
    discover: AtomicU64,
    echo: AtomicU64,
    listen: AtomicU64,
    bad_filter: AtomicU64,
}

async fn worker(
    port: u16,
    next: Arc<AtomicU64>,
    total: u64,
    mix: Arc<Mix>,
    failures: Arc<Failures>,
) {
    let mut conn: Option<Conn> = None;
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= total {
            return;
        }
        let outcome = match n % 10 {
            0..=3 => {
                mix.discover.fetch_add(1, Ordering::Relaxed);
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{n},"method":"server/discover","params":{{{META}}}}}"#
                );
                keep_alive(
                    &mut conn,
                    port,
                    &post_headers("server/discover", None),
                    &body,
                    200,
                    "\"capabilities\"",
                )
                .await
            }
            4..=7 => {
                mix.echo.fetch_add(1, Ordering::Relaxed);
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{{META},"name":"echo","arguments":{{"text":"soak {n}"}}}}}}"#
                );
                let expected = format!("soak {n}");
                keep_alive(
                    &mut conn,
                    port,
                    &post_headers("tools/call", Some("echo")),
                    &body,
                    200,
                    &expected,
                )
                .await
            }
            8 => {
                mix.listen.fetch_add(1, Ordering::Relaxed);
                open_listen(port, n).await.map(drop)
            }
            _ => {
                mix.bad_filter.fetch_add(1, Ordering::Relaxed);
                let filter = BAD_FILTERS[(n / 10 % 3) as usize];
                let body = listen_body(n, filter);
                keep_alive(
                    &mut conn,
                    port,
                    &post_headers("subscriptions/listen", None),
                    &body,
                    400,
                    "\"error\"",
                )
                .await
            }
        };
        if let Err(error) = outcome {
            failures.record("request", format!("#{n}: {error}"));
        }
    }
}

/// One request on the worker's keep-alive connection (reopened as needed).
async fn keep_alive(
    conn: &mut Option<Conn>,
    port: u16,
    headers: &[(&str, &str)],
    body: &str,
    status: u16,
    contains: &str,
) -> Result<()> {
    if conn.is_none() {
        *conn = Some(Conn::open(port).await?);
    }
    let open = conn.as_mut().expect("just opened");
    let result = async {
        let head = open.send("POST", "/mcp", headers, body).await?;
        let answer = open.body(&head).await?;
        Ok::<_, Box<dyn Error + Send + Sync>>((head, answer))
    }
    .await;
    let (head, answer) = match result {
        Ok(ok) => ok,
        Err(error) => {
            *conn = None;
            return Err(error);
        }
    };
    if head.close {
        *conn = None;
    }
    let answer = String::from_utf8_lossy(&answer);
    if head.status != status || !answer.contains(contains) {
        return Err(format!(
            "status {} (expected {status}), body {answer:.200}",
            head.status
        )
        .into());
    }
    Ok(())
}

async fn mixed(args: &Args, failures: &Arc<Failures>) -> Result<()> {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mix = Arc::new(Mix::default());
    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            tokio::spawn(worker(
                args.port,
                next.clone(),
                args.requests,
                mix.clone(),
                failures.clone(),
            ))
        })
        .collect();
    let progress = {
        let next = next.clone();
        let total = args.requests;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(30)).await;
                let done = next.load(Ordering::Relaxed).min(total);
                println!(
                    "  {done}/{total} requests, {:.0} s",
                    started.elapsed().as_secs_f64()
                );
            }
        })
    };
    for worker in workers {
        worker.await?;
    }
    progress.abort();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "mixed: {} requests in {secs:.1} s ({:.0}/s): {} discover, {} echo, {} listen open/close, {} bad filter",
        args.requests,
        args.requests as f64 / secs,
        mix.discover.load(Ordering::Relaxed),
        mix.echo.load(Ordering::Relaxed),
        mix.listen.load(Ordering::Relaxed),
        mix.bad_filter.load(Ordering::Relaxed),
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let failures = Arc::new(Failures::default());
    listen_waves(&args, &failures).await?;
    if args.requests > 0 {
        mixed(&args, &failures).await?;
    }
    // Everything the mixed phase opened is gone too.
    let deadline = Instant::now() + WAIT;
    let mut left = open_streams(args.port).await?;
    while left != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = open_streams(args.port).await?;
    }
    println!("streams registered at the end: {left}");
    if let Some(rss) = args.pid.and_then(rss_kib) {
        println!("server RSS at the end: {rss} KiB");
    }
    if left != 0 {
        failures.record("streams left at the end", left);
    }
    println!("unexpected: {}", failures.count());
    if failures.count() > 0 {
        std::process::exit(1);
    }
    Ok(())
}
