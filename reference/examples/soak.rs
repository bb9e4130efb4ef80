//! Load client for the reference deployment: `benches/soak.sh` runs it.
//!
//! ```text
//! cargo run --example soak -- --port PORT [--pid SERVER_PID]
//!     [--streams 10000] [--wave 500] [--requests 1000000] [--workers 16]
//!     [--rss-baseline-wave 1] [--hold N [--http2] [--events 4]]
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
//! With `--hold N`, phase 1 is instead: N listen streams opened (`--wave` at
//! a time) and all held open at once, each on its own connection (bound to
//! the source addresses 127.0.0.1, 127.0.0.2, … 10 000 streams each, so that
//! no source address runs out of ephemeral ports), or with `--http2` 200 on
//! each HTTP/2 connection (the server's concurrent stream limit, hyper's
//! default). `GET /debug/streams` must count all N; `--events` updates of
//! alice's notes, which every stream is entitled to, must all be read off
//! every stream (0 lost); with `--pid`, the server's RSS per open stream is
//! reported; then all are dropped and the count must fall back to 0.
//!
//! Any unexpected status or body is counted, the first few are printed, and
//! the exit status is 1 when anything went wrong. Every network wait is
//! bounded by a timeout.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use memchr::memmem;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::{timeout, timeout_at};

/// The bound on any single network wait.
const WAIT: Duration = Duration::from_secs(30);
/// How many failures are printed in full.
const SHOWN: u64 = 10;
/// With `--hold`: the bound on reading every held stream's updates, and on
/// the count falling back to 0 once they are dropped.
const HOLD_WAIT: Duration = Duration::from_secs(120);
/// Held streams per source address (one address has ~28 000 ephemeral
/// ports towards one server port).
const STREAMS_PER_SOURCE: u64 = 10_000;
/// Held streams per HTTP/2 connection: hyper's default
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, which the server keeps.
const STREAMS_PER_H2: u64 = 200;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

struct Args {
    port: u16,
    pid: Option<u32>,
    /// A second instance on the same Redis: streams alternate between
    /// the two, and every wave's updates are published on both.
    peer_port: Option<u16>,
    peer_pid: Option<u32>,
    /// Updates published per wave (two instances only), or once all
    /// `hold` streams are open.
    events: u64,
    /// Listen streams held open at once instead of the waves (0: waves).
    hold: u64,
    /// The held streams go over HTTP/2 connections.
    http2: bool,
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
        hold: 0,
        http2: false,
        streams: 10_000,
        wave: 500,
        requests: 1_000_000,
        workers: 16,
        rss_baseline_wave: 1,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        if flag == "--http2" {
            args.http2 = true;
            continue;
        }
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
            "--hold" => args.hold = number()?,
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
    if args.http2 && args.hold == 0 {
        return Err("--http2 goes with --hold".into());
    }
    if args.hold > 0 && args.peer_port.is_some() {
        return Err("--hold is for one instance: no --peer-port".into());
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
        Self::open_from(port, None).await
    }

    /// A connection from `source` (port chosen by the kernel), or from
    /// wherever the kernel routes it.
    async fn open_from(port: u16, source: Option<Ipv4Addr>) -> Result<Self> {
        let socket = TcpSocket::new_v4()?;
        // The client closes first, thousands of times: an abortive close
        // keeps the loopback port range free of TIME_WAIT entries.
        #[allow(deprecated)]
        socket.set_linger(Some(Duration::ZERO))?;
        if let Some(source) = source {
            socket.bind(SocketAddr::from((source, 0)))?;
        }
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
    listen_on(Conn::open(port).await?, id).await
}

/// Sends a listen on `conn` and reads its acknowledgment.
async fn listen_on(mut conn: Conn, id: u64) -> Result<Conn> {
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

// --- phase 1 with --hold ---------------------------------------------------

/// One listen stream held open: on its own HTTP/1.1 connection, or one
/// stream of an HTTP/2 connection.
enum Held {
    Http1(Conn),
    Http2(Incoming),
}

impl Held {
    /// The next piece of the stream's body, or None at its end.
    async fn data(&mut self) -> Result<Option<Bytes>> {
        match self {
            Held::Http1(conn) => Ok(conn.chunk().await?.map(Bytes::from)),
            Held::Http2(body) => loop {
                let Some(frame) = timeout(WAIT, body.frame()).await? else {
                    return Ok(None);
                };
                if let Ok(data) = frame?.into_data() {
                    return Ok(Some(data));
                }
            },
        }
    }

    /// Reads until `events` resource updates came, the stream ended or
    /// `deadline` passed; how many came.
    async fn updates(&mut self, events: u64, deadline: tokio::time::Instant) -> u64 {
        const UPDATED: &[u8] = b"notifications/resources/updated";
        // An update split between two pieces is counted once it is whole.
        let mut carry = Vec::new();
        let mut seen = 0;
        while seen < events {
            let Ok(Ok(Some(data))) = timeout_at(deadline, self.data()).await else {
                break;
            };
            carry.extend_from_slice(&data);
            seen += memmem::find_iter(&carry, UPDATED).count() as u64;
            let keep = carry.len().min(UPDATED.len() - 1);
            carry.drain(..carry.len() - keep);
        }
        seen
    }
}

/// An HTTP/2 connection (prior knowledge) and the task that drives it.
async fn h2_connect(port: u16) -> Result<(SendRequest<Full<Bytes>>, JoinHandle<()>)> {
    let tcp = timeout(WAIT, TcpStream::connect(("127.0.0.1", port))).await??;
    tcp.set_nodelay(true)?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await?;
    let task = tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("an HTTP/2 connection ended: {error}");
        }
    });
    Ok((sender, task))
}

/// Opens a listen stream on an HTTP/2 connection and reads its
/// acknowledgment.
async fn listen_h2(mut sender: SendRequest<Full<Bytes>>, port: u16, id: u64) -> Result<Held> {
    timeout(WAIT, sender.ready()).await??;
    let body = listen_body(id, GOOD_FILTER);
    let mut request = http::Request::post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Content-Length", body.len());
    for (name, value) in post_headers("subscriptions/listen", None) {
        request = request.header(name, value);
    }
    let request = request.body(Full::new(Bytes::from(body)))?;
    let response = timeout(WAIT, sender.send_request(request)).await??;
    if response.status() != 200 {
        return Err(format!("listen answered {}", response.status()).into());
    }
    let mut held = Held::Http2(response.into_body());
    let first = held.data().await?.ok_or("listen stream ended at once")?;
    let first = String::from_utf8_lossy(&first);
    if !first.contains("notifications/subscriptions/acknowledged") {
        return Err(format!("listen began with {first:?}").into());
    }
    Ok(held)
}

/// Opens `args.hold` listen streams, `args.wave` at a time; the HTTP/2
/// connections' tasks, to be aborted once the streams are dropped.
async fn open_held(args: &Args, failures: &Failures) -> Result<(Vec<Held>, Vec<JoinHandle<()>>)> {
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    if args.http2 {
        for _ in 0..args.hold.div_ceil(STREAMS_PER_H2) {
            let (sender, task) = h2_connect(args.port).await?;
            senders.push(sender);
            tasks.push(task);
        }
    }
    let sources = args.hold.div_ceil(STREAMS_PER_SOURCE).min(254);
    let port = args.port;
    let opened: Vec<Result<Held>> = futures_util::stream::iter(0..args.hold)
        .map(|id| {
            let sender = senders.get((id / STREAMS_PER_H2) as usize).cloned();
            async move {
                match sender {
                    Some(sender) => listen_h2(sender, port, id).await,
                    None => {
                        let source = Ipv4Addr::new(127, 0, 0, 1 + (id % sources) as u8);
                        let conn = Conn::open_from(port, Some(source)).await?;
                        Ok(Held::Http1(listen_on(conn, id).await?))
                    }
                }
            }
        })
        .buffer_unordered(args.wave as usize)
        .collect()
        .await;
    let mut held = Vec::with_capacity(opened.len());
    for result in opened {
        match result {
            Ok(stream) => held.push(stream),
            Err(error) => failures.record("listen (held)", error),
        }
    }
    Ok((held, tasks))
}

/// Waits, within [`HOLD_WAIT`], for `GET /debug/streams` to count `expected`.
async fn settle(port: u16, expected: u64) -> Result<u64> {
    let deadline = Instant::now() + HOLD_WAIT;
    let mut registered = open_streams(port).await?;
    while registered != expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        registered = open_streams(port).await?;
    }
    Ok(registered)
}

async fn hold(args: &Args, failures: &Failures) -> Result<()> {
    let rss = || args.pid.and_then(rss_kib);
    let before = rss();
    let transport = if args.http2 {
        format!("{} HTTP/2 connections", args.hold.div_ceil(STREAMS_PER_H2))
    } else {
        let sources = args.hold.div_ceil(STREAMS_PER_SOURCE).min(254);
        format!("one connection each, from 127.0.0.1 to 127.0.0.{sources}")
    };
    let started = Instant::now();
    let (mut held, tasks) = open_held(args, failures).await?;
    println!(
        "held: {} of {} listen streams open in {:.1} s ({transport}, {} at a time)",
        held.len(),
        args.hold,
        started.elapsed().as_secs_f64(),
        args.wave
    );
    let registered = open_streams(args.port).await?;
    println!("registered: {registered}");
    if registered != args.hold {
        failures.record(
            "registered streams",
            format!("{registered} registered, {} asked for", args.hold),
        );
    }
    let with_open = rss();
    if let (Some(before), Some(with_open)) = (before, with_open) {
        println!(
            "RSS before: {before} KiB, with {} open: {with_open} KiB: {:.0} bytes per open stream",
            held.len(),
            (with_open as f64 - before as f64) * 1024.0 / held.len().max(1) as f64
        );
    }

    // Every stream is entitled to every update of alice's notes.
    for event in 0..args.events {
        touch(args.port, event).await?;
    }
    let reading = Instant::now();
    let deadline = tokio::time::Instant::now() + HOLD_WAIT;
    let seen = futures_util::future::join_all(
        held.iter_mut()
            .map(|stream| stream.updates(args.events, deadline)),
    )
    .await;
    let delivered: u64 = seen.iter().sum();
    let lost: u64 = seen.iter().map(|n| args.events.saturating_sub(*n)).sum();
    println!(
        "updates: {delivered} delivered, {lost} lost (every stream is entitled to {}), read in {:.1} s",
        args.events,
        reading.elapsed().as_secs_f64()
    );
    if lost > 0 {
        failures.record("updates lost", lost);
    }

    let dropping = Instant::now();
    drop(held);
    for task in tasks {
        task.abort();
    }
    let left = settle(args.port, 0).await?;
    println!(
        "dropped: {left} left registered after {:.1} s, RSS {}",
        dropping.elapsed().as_secs_f64(),
        rss().map_or("?".to_owned(), |kib| format!("{kib} KiB"))
    );
    if left != 0 {
        failures.record("streams left after the held ones were dropped", left);
    }
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
    if args.hold > 0 {
        hold(&args, &failures).await?;
    } else {
        listen_waves(&args, &failures).await?;
    }
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
