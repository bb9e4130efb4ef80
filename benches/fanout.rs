//! The load client of `benches/fanout.sh`: fan-out end to end, the
//! reference server against a floor (`benches/fanout_floor.rs`).
//!
//! ```text
//! fanout --reference PORT:PID --floor PORT:PID [--streams 1000]
//!        [--updates 50] [--rounds 4] [--wait-secs 10] [--interleave]
//! fanout --proxy PORT:PID --publish PORT:TOKEN --reference PORT:PID [...]
//! ```
//!
//! With `--proxy` (`benches/proxy.sh`), the first server is mcp-edge-proxy
//! holding the streams (`[hub]`), its trigger a `POST /publish` of the
//! update to `--publish` with the token, and the second the reference
//! server: the ratio is proxy / reference.
//!
//! Each round runs both servers, alternating which goes first (ABAB…).
//! A run on one server opens `--streams` listen streams, one connection
//! and one task each (in waves of [`WAVE`]), and waits for every
//! acknowledgment; then sends `--updates` updates one at a time: the
//! trigger (`tools/call` of `touch_resource`, as alice, on a keep-alive
//! connection of its own), then waits until every stream has read that
//! update, at most `--wait-secs`; a stream that has not by then lost it.
//! Every event a stream reads must be, byte for byte, the event the
//! reference server writes for that stream.
//!
//! Per run: last delivery (trigger sent → the last stream's arrival) and
//! median arrival, each the median over the updates; lost updates; the
//! server's RSS per stream ((VmRSS with the streams open − VmRSS before
//! they opened) / streams, `/proc/PID/status`; the figure is the first
//! run's, on a fresh server: later runs reuse the heap it left); its CPU
//! per update ((utime + stime) over the updates / updates,
//! `/proc/PID/stat`). Per
//! round, reference / floor of last delivery; the figure is their median.
//!
//! With `--interleave`, both servers' streams are open at once and the
//! `--updates` × `--rounds` updates go to one server and the other in
//! turn, alternating which goes first: each pair is measured within a
//! second, where rounds are seconds apart and swing with the machine's
//! other load. The ratio is the median over the pairs of reference /
//! floor of last delivery; each server's figures are over its updates.
//!
//! Run without `--reference` and `--floor` (as `cargo bench` does), it
//! says so and exits.

use std::error::Error;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio::time::timeout;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// Streams opened at once (the servers' accept queues hold 1 024).
const WAVE: usize = 500;
/// The bound on any one network wait while streams open.
const WAIT: Duration = Duration::from_secs(30);

const URI: &str = "demo://users/alice/notes";
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One server under test.
#[derive(Clone, Copy)]
struct Server {
    name: &'static str,
    port: u16,
    pid: u32,
    /// How it is told an update: `tools/call` of `touch_resource` on its
    /// own port, or a `POST /publish` to this port with this token.
    publish: Option<(u16, &'static str)>,
}

struct Args {
    servers: [Server; 2],
    streams: usize,
    updates: usize,
    rounds: usize,
    wait: Duration,
    /// Both servers' streams open at once, updates in turn (see [`interleaved`]).
    interleave: bool,
}

fn server(name: &'static str, value: &str) -> std::result::Result<Server, String> {
    let (port, pid) = value
        .split_once(':')
        .ok_or(format!("--{name} needs PORT:PID"))?;
    Ok(Server {
        name,
        port: port.parse().map_err(|e| format!("--{name} port: {e}"))?,
        pid: pid.parse().map_err(|e| format!("--{name} pid: {e}"))?,
        publish: None,
    })
}

fn parse_args() -> std::result::Result<Option<Args>, String> {
    let (mut reference, mut floor, mut proxy, mut publish) = (None, None, None, None);
    let (mut streams, mut updates, mut rounds, mut wait) = (1000, 50, 4, 10);
    let mut interleave = false;
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        if !flag.starts_with("--") || flag == "--bench" {
            continue;
        }
        if flag == "--interleave" {
            interleave = true;
            continue;
        }
        let value = argv.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--reference" => reference = Some(server("reference", &value)?),
            "--floor" => floor = Some(server("floor", &value)?),
            "--proxy" => proxy = Some(server("proxy", &value)?),
            "--publish" => {
                let (port, token) = value.split_once(':').ok_or("--publish needs PORT:TOKEN")?;
                let port = port
                    .parse::<u16>()
                    .map_err(|e| format!("--publish port: {e}"))?;
                publish = Some((port, &*Box::leak(token.to_owned().into_boxed_str())));
            }
            "--streams" => streams = number()?.max(1),
            "--updates" => updates = number()?.max(1),
            "--rounds" => rounds = number()?.max(1),
            "--wait-secs" => wait = number()?.max(1),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let servers = match (proxy, reference, floor) {
        (Some(mut proxy), Some(reference), None) => {
            proxy.publish = Some(publish.ok_or("--proxy needs --publish PORT:TOKEN")?);
            [proxy, reference]
        }
        (None, Some(reference), Some(floor)) => [reference, floor],
        _ => return Ok(None),
    };
    Ok(Some(Args {
        servers,
        streams,
        updates,
        rounds,
        wait: Duration::from_secs(wait as u64),
        interleave,
    }))
}

// --- HTTP/1.1 over one connection ------------------------------------------

struct Conn {
    port: u16,
    reader: BufReader<TcpStream>,
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

    /// Sends a POST to `/mcp` as alice; the status and whether the answer is chunked.
    async fn post(&mut self, method: &str, name: Option<&str>, body: &str) -> Result<(u16, bool)> {
        let name = name.map_or(String::new(), |name| format!("Mcp-Name: {name}\r\n"));
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: {method}\r\n{name}Authorization: Bearer alice-token\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        );
        self.reader.get_mut().write_all(request.as_bytes()).await?;
        let mut line = String::new();
        let status = self.status(&mut line).await?;
        let mut chunked = false;
        loop {
            line.clear();
            self.reader.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                return Ok((status, chunked));
            }
            if let Some((name, value)) = line.split_once(':') {
                chunked |=
                    name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked");
            }
        }
    }

    /// A response's status line, read into `line`: its status.
    async fn status(&mut self, line: &mut String) -> Result<u16> {
        if self.reader.read_line(line).await? == 0 {
            return Err("connection closed before a response".into());
        }
        line.split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| format!("bad status line {line:?}").into())
    }

    /// A response's status line and headers: its status and its
    /// `Content-Length` (0 when absent).
    async fn head(&mut self) -> Result<(u16, usize)> {
        let mut line = String::new();
        let status = self.status(&mut line).await?;
        let mut length = 0;
        loop {
            line.clear();
            self.reader.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                return Ok((status, length));
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse()?;
                }
            }
        }
    }

    /// The next chunk of a chunked body, or `None` at its end.
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            return Err("connection closed".into());
        }
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| format!("bad chunk size {line:?}"))?;
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data).await?;
        data.truncate(size);
        Ok((size > 0).then_some(data))
    }
}

// --- streams -----------------------------------------------------------------

/// When each stream read each update, in nanoseconds after `base` (0: not yet).
struct Arrivals {
    base: Instant,
    streams: usize,
    at: Vec<AtomicU64>,
    count: Vec<AtomicUsize>,
    all: Notify,
    /// Events that were not the expected bytes.
    wrong: AtomicUsize,
}

impl Arrivals {
    fn new(streams: usize, updates: usize) -> Self {
        Self {
            base: Instant::now(),
            streams,
            at: (0..streams * updates).map(|_| AtomicU64::new(0)).collect(),
            count: (0..updates).map(|_| AtomicUsize::new(0)).collect(),
            all: Notify::new(),
            wrong: AtomicUsize::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn arrive(&self, update: usize, stream: usize) {
        let now = self.now().max(1);
        let Some(count) = self.count.get(update) else {
            return;
        };
        self.at[update * self.streams + stream].store(now, Ordering::Relaxed);
        if count.fetch_add(1, Ordering::AcqRel) + 1 == self.streams {
            self.all.notify_one();
        }
    }

    /// Waits until every stream read `update`, at most `wait`.
    async fn wait(&self, update: usize, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        while self.count[update].load(Ordering::Acquire) < self.streams {
            if timeout_at(deadline, self.all.notified()).await.is_err() {
                return;
            }
        }
    }

    /// The arrival times of `update`, after `sent`, in microseconds, sorted.
    fn of(&self, update: usize, sent: u64) -> Vec<f64> {
        let row = &self.at[update * self.streams..(update + 1) * self.streams];
        let mut times: Vec<f64> = row
            .iter()
            .map(|at| at.load(Ordering::Relaxed))
            .filter(|at| *at != 0)
            .map(|at| at.saturating_sub(sent) as f64 / 1e3)
            .collect();
        times.sort_by(f64::total_cmp);
        times
    }
}

async fn timeout_at<F: std::future::Future>(
    deadline: tokio::time::Instant,
    future: F,
) -> std::result::Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout_at(deadline, future).await
}

fn listen_body(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{{META},"notifications":{{"resourceSubscriptions":["{URI}"]}}}}}}"#
    )
}

/// The event the reference server's hub writes for an update of [`URI`] on
/// the stream of subscription `id`.
fn expected_event(id: usize) -> Vec<u8> {
    format!(
        r#"data: {{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{URI}","_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
    )
    .into_bytes()
    .into_iter()
    .chain(*b"\n\n")
    .collect()
}

/// The acknowledgment the reference server writes for [`listen_body`].
fn expected_ack(id: usize) -> Vec<u8> {
    format!(
        r#"data: {{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{{"resourceSubscriptions":["{URI}"]}},"_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
    )
    .into_bytes()
    .into_iter()
    .chain(*b"\n\n")
    .collect()
}

/// Opens listen stream `id` and reads its acknowledgment.
async fn open_listen(port: u16, id: usize) -> Result<Conn> {
    let mut conn = Conn::open(port).await?;
    let (status, chunked) = timeout(
        WAIT,
        conn.post("subscriptions/listen", None, &listen_body(id)),
    )
    .await??;
    if status != 200 || !chunked {
        return Err(format!("listen answered {status}").into());
    }
    let first = timeout(WAIT, conn.chunk()).await??;
    let first = first.ok_or("listen stream ended at once")?;
    if first != expected_ack(id) {
        return Err(format!("listen began with {:?}", String::from_utf8_lossy(&first)).into());
    }
    Ok(conn)
}

/// Reads stream `id` until it ends, recording each update's arrival.
async fn read_stream(mut conn: Conn, id: usize, arrivals: Arc<Arrivals>) {
    let event = expected_event(id);
    let mut seen = 0;
    while let Ok(Some(chunk)) = conn.chunk().await {
        if chunk.starts_with(b":") {
            continue; // a keep-alive comment
        }
        if chunk != event {
            arrivals.wrong.fetch_add(1, Ordering::Relaxed);
        }
        arrivals.arrive(seen, id);
        seen += 1;
    }
}

/// The update of [`URI`], sent on the keep-alive connection `conn` as
/// `server` is told one: `touch_resource`, or a publication.
async fn trigger(conn: &mut Conn, server: Server, id: usize) -> Result<()> {
    match server.publish {
        None => touch(conn, id).await,
        Some((_, token)) => publish(conn, token).await,
    }
}

/// `POST /publish` of an update of [`URI`] with `token`; answered 202.
async fn publish(conn: &mut Conn, token: &str) -> Result<()> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{URI}"}}}}"#
    );
    let request = format!(
        "POST /publish HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        conn.port,
        body.len()
    );
    conn.reader.get_mut().write_all(request.as_bytes()).await?;
    let (status, length) = conn.head().await?;
    let mut answer = vec![0; length];
    conn.reader.read_exact(&mut answer).await?;
    if status != 202 {
        return Err(format!(
            "publish answered {status}: {}",
            String::from_utf8_lossy(&answer)
        )
        .into());
    }
    Ok(())
}

/// `touch_resource` of [`URI`] on the keep-alive connection `conn`; the
/// answer is read whole.
async fn touch(conn: &mut Conn, id: usize) -> Result<()> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{META},"name":"touch_resource","arguments":{{"uri":"{URI}"}}}}}}"#
    );
    let (status, chunked) = conn
        .post("tools/call", Some("touch_resource"), &body)
        .await?;
    if status != 200 || !chunked {
        return Err(format!("touch_resource answered {status}").into());
    }
    let mut answer = Vec::new();
    while let Some(chunk) = conn.chunk().await? {
        answer.extend(chunk);
    }
    if !String::from_utf8_lossy(&answer).contains("touched") {
        return Err(format!(
            "touch_resource answered {:?}",
            String::from_utf8_lossy(&answer)
        )
        .into());
    }
    Ok(())
}

// --- /proc -------------------------------------------------------------------

fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS".into())
}

/// utime + stime of the process, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .ok_or("bad stat")?
        .1
        .split_whitespace()
        .collect();
    let field = |n: usize| -> Result<u64> { Ok(fields.get(n).ok_or("short stat")?.parse()?) };
    // utime and stime are fields 14 and 15, the 12th and 13th after the name.
    Ok(field(11)? + field(12)?)
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

// --- one run -----------------------------------------------------------------

/// What one run on one server measured.
struct Run {
    /// Median over the updates of the last stream's arrival (µs).
    last: f64,
    /// Median over the updates of the median arrival (µs).
    median: f64,
    /// Median over the updates of the first stream's arrival (µs).
    first: f64,
    lost: usize,
    rss_per_stream_kib: f64,
    cpu_per_update_us: f64,
}

impl Run {
    /// The run of `updates`, on streams that took `rss_per_stream_kib`,
    /// the server using `cpu_ticks` over them.
    fn of(updates: &[Update], rss_per_stream_kib: f64, cpu_ticks: u64, hz: f64) -> Self {
        let heard: Vec<&Arrived> = updates.iter().filter_map(|u| u.arrived.as_ref()).collect();
        let pick =
            |f: fn(&Arrived) -> f64| median(&mut heard.iter().map(|a| f(a)).collect::<Vec<_>>());
        Self {
            last: pick(|a| a.last),
            median: pick(|a| a.median),
            first: pick(|a| a.first),
            lost: updates.iter().map(|u| u.lost).sum(),
            rss_per_stream_kib,
            cpu_per_update_us: cpu_ticks as f64 / hz * 1e6 / updates.len() as f64,
        }
    }
}

/// One update on one server: when its streams heard it, and how many did not.
struct Update {
    arrived: Option<Arrived>,
    lost: usize,
}

/// The first, median and last arrival of an update (µs after the trigger).
struct Arrived {
    first: f64,
    median: f64,
    last: f64,
}

/// One server's listen streams, open and read.
struct Opened {
    server: Server,
    trigger: Conn,
    arrivals: Arc<Arrivals>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    rss_per_stream_kib: f64,
    /// Updates sent so far.
    sent: usize,
}

impl Opened {
    /// Opens `args.streams` listen streams on `server`, for up to `updates` updates.
    async fn open(server: Server, args: &Args, updates: usize) -> Result<Self> {
        let trigger_port = server.publish.map_or(server.port, |(port, _)| port);
        let mut trigger_conn = Conn::open(trigger_port).await?;
        // One trigger before anything is measured: whatever the server sets up
        // on first use is set up.
        trigger(&mut trigger_conn, server, 0).await?;
        let rss_before = rss_kib(server.pid)?;
        let arrivals = Arc::new(Arrivals::new(args.streams, updates));
        let mut readers = Vec::with_capacity(args.streams);
        for wave in (0..args.streams).step_by(WAVE) {
            let ids = wave..(wave + WAVE).min(args.streams);
            let opened =
                futures_util::future::join_all(ids.clone().map(|id| open_listen(server.port, id)))
                    .await;
            for (id, conn) in ids.zip(opened) {
                let conn = conn.map_err(|e| format!("{}: stream {id}: {e}", server.name))?;
                readers.push(tokio::spawn(read_stream(conn, id, arrivals.clone())));
            }
        }
        // Let the server settle (its acknowledgments are written, its timers armed).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let rss_open = rss_kib(server.pid)?;
        // A fresh connection for the updates: opening the streams may take
        // longer than the server keeps an idle connection.
        drop(trigger_conn);
        let trigger_conn = Conn::open(trigger_port).await?;
        Ok(Self {
            server,
            trigger: trigger_conn,
            arrivals,
            readers,
            rss_per_stream_kib: (rss_open as f64 - rss_before as f64) / args.streams as f64,
            sent: 0,
        })
    }

    /// Sends the next update and waits until every stream heard it, at
    /// most `wait`; the server's CPU ticks meanwhile.
    async fn update(&mut self, wait: Duration) -> Result<(Update, u64)> {
        let update = self.sent;
        self.sent += 1;
        let cpu_before = cpu_ticks(self.server.pid)?;
        let sent = self.arrivals.now();
        trigger(&mut self.trigger, self.server, update + 1).await?;
        self.arrivals.wait(update, wait).await;
        let cpu = cpu_ticks(self.server.pid)? - cpu_before;
        let mut times = self.arrivals.of(update, sent);
        let lost = self.arrivals.streams - times.len();
        let arrived = times.last().copied().map(|last| Arrived {
            first: times[0],
            median: median(&mut times),
            last,
        });
        Ok((Update { arrived, lost }, cpu))
    }

    /// Closes the streams; an error if an event was not the expected bytes.
    async fn close(self) -> Result<()> {
        for reader in &self.readers {
            reader.abort();
        }
        for reader in self.readers {
            let _ = reader.await;
        }
        let wrong = self.arrivals.wrong.load(Ordering::Relaxed);
        if wrong > 0 {
            return Err(format!(
                "{}: {wrong} events were not the expected bytes",
                self.server.name
            )
            .into());
        }
        // The server sees the connections go before the next run.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    }
}

async fn run(server: Server, args: &Args, hz: f64) -> Result<Run> {
    let mut opened = Opened::open(server, args, args.updates).await?;
    let (mut updates, mut cpu) = (Vec::new(), 0);
    for _ in 0..args.updates {
        let (update, ticks) = opened.update(args.wait).await?;
        updates.push(update);
        cpu += ticks;
    }
    let rss = opened.rss_per_stream_kib;
    opened.close().await?;
    Ok(Run::of(&updates, rss, cpu, hz))
}

/// Both servers' streams open at once, updates sent to one and the other
/// in turn (alternating which goes first): each pair of updates is
/// measured within a second of each other. The ratios are of the pairs.
async fn interleaved(args: &Args, hz: f64) -> Result<([Run; 2], Vec<f64>)> {
    let pairs = args.updates * args.rounds;
    let mut opened = [
        Opened::open(args.servers[0], args, pairs).await?,
        Opened::open(args.servers[1], args, pairs).await?,
    ];
    let mut updates: [Vec<Update>; 2] = [Vec::new(), Vec::new()];
    let mut cpu = [0, 0];
    let mut ratios = Vec::new();
    for pair in 0..pairs {
        let order: [usize; 2] = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (update, ticks) = opened[i].update(args.wait).await?;
            updates[i].push(update);
            cpu[i] += ticks;
        }
        let lasts = [0, 1].map(|i| updates[i][pair].arrived.as_ref().map(|a| a.last));
        if let [Some(reference), Some(floor)] = lasts {
            ratios.push(reference / floor);
        }
    }
    let rss = [0, 1].map(|i| opened[i].rss_per_stream_kib);
    let [reference, floor] = opened;
    reference.close().await?;
    floor.close().await?;
    let runs = [0, 1].map(|i| Run::of(&updates[i], rss[i], cpu[i], hz));
    Ok((runs, ratios))
}

/// Rounds of one run on each server, alternating which goes first (ABAB…).
async fn rounds(args: &Args, hz: f64) -> Result<([Vec<Run>; 2], Vec<f64>)> {
    let mut runs: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
    let mut ratios = Vec::new();
    for round in 1..=args.rounds {
        let order: [usize; 2] = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        for i in order {
            let measured = run(args.servers[i], args, hz).await?;
            print_run(&format!("round {round}"), args.servers[i], &measured);
            runs[i].push(measured);
        }
        let ratio = runs[0][round - 1].last / runs[1][round - 1].last;
        let (a, b) = (args.servers[0].name, args.servers[1].name);
        println!("FANOUT_ROUND\tround {round}\t{a}/{b} last delivery {ratio:.3}");
        ratios.push(ratio);
    }
    Ok((runs, ratios))
}

fn print_run(round: &str, server: Server, run: &Run) {
    println!(
        "FANOUT_RUN\t{round}\t{:<9}\tfirst {:>8.0} us\tlast {:>9.0} us\tmedian {:>9.0} us\tlost {}\tRSS/stream {:>6.2} KiB\tCPU/update {:>8.0} us",
        server.name, run.first, run.last, run.median, run.lost, run.rss_per_stream_kib, run.cpu_per_update_us
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let Some(args) = parse_args()? else {
        println!(
            "fanout: the load client of benches/fanout.sh, which runs it (nothing to do here)"
        );
        return Ok(());
    };
    let hz = clock_ticks_per_second();
    println!(
        "fan-out: {} streams, {} updates, {} rounds; bound per update {:?}",
        args.streams, args.updates, args.rounds, args.wait
    );
    let (runs, ratios) = if args.interleave {
        let (runs, ratios) = interleaved(&args, hz).await?;
        for (server, run) in args.servers.iter().zip(&runs) {
            print_run("interleaved", *server, run);
        }
        (runs.map(|run| vec![run]), ratios)
    } else {
        rounds(&args, hz).await?
    };
    let basis = if args.interleave {
        format!(
            "over {} updates each, interleaved",
            args.updates * args.rounds
        )
    } else {
        format!("medians over {} rounds", args.rounds)
    };
    for (i, server) in args.servers.iter().enumerate() {
        let runs = &runs[i];
        let pick = |f: fn(&Run) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        println!(
            "FANOUT_SERVER\t{:<9}\tlast {:.0} us\tmedian {:.0} us\tlost {}\tRSS/stream {:.2} KiB (first run)\tCPU/update {:.0} us\t({})",
            server.name,
            pick(|r| r.last),
            pick(|r| r.median),
            runs.iter().map(|r| r.lost).sum::<usize>(),
            // Later runs open their streams on the heap the first one left.
            runs[0].rss_per_stream_kib,
            pick(|r| r.cpu_per_update_us),
            basis,
        );
    }
    let ratio = median(&mut ratios.clone());
    if args.interleave {
        let (low, high) = ratios
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
        println!(
            "FANOUT_RATIO\t{}/{} last delivery {ratio:.3}\t(median of {} pairs, {low:.3} to {high:.3})",
            args.servers[0].name,
            args.servers[1].name,
            ratios.len()
        );
    } else {
        println!(
            "FANOUT_RATIO\t{}/{} last delivery {ratio:.3}\t(median of {:?})",
            args.servers[0].name,
            args.servers[1].name,
            ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>()
        );
    }
    Ok(())
}
