//! Redis servers on free loopback ports for the tests and the benches: one
//! node, or a three-node cluster. Each is stopped, and its files removed,
//! when dropped. Std only, but for the two queries over redis-rs.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A `redis-server` of this test, on a loopback port; stopped when dropped.
pub struct Redis {
    pub port: u16,
    /// What the server is started with beside its port (a cluster node's
    /// options).
    options: Vec<String>,
    child: Option<Child>,
}

impl Redis {
    /// A server on a free port. The port is free when it is picked, but
    /// another test's server may take it first: this one then exits, and
    /// another port is tried.
    pub fn start() -> Self {
        Self::start_with(|_| Vec::new())
    }

    /// A server on a free port, started with `options(port)` too.
    pub fn start_with(options: impl Fn(u16) -> Vec<String>) -> Self {
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut redis = Self {
                port,
                options: options(port),
                child: None,
            };
            redis.run();
            if redis.owns_port() {
                return redis;
            }
            redis.stop();
        }
        panic!("no free port for redis-server");
    }

    /// Whether the server still runs once its port answers (one that could
    /// not bind it has exited).
    fn owns_port(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(50));
        let child = self.child.as_mut().expect("running");
        matches!(child.try_wait(), Ok(None))
    }

    /// Starts the server (again), on its port.
    pub fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.options)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server: a stopped one keeps
    /// its connections and answers nothing.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let sent = Command::new("kill")
            .args([format!("-{signal}"), pid])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// What `redis-cli` prints for `args` sent to this server.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli is installed (apt-get install redis-server)");
        String::from_utf8(output.stdout).unwrap()
    }

    /// A plain connection, for `PUBSUB NUMSUB` and raw messages.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// `PUBLISH`es `payload` on `channel`, as any process on the prefix can.
    pub async fn publish(&self, channel: &str, payload: impl redis::ToRedisArgs) {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload)
            .query_async(&mut self.connection().await)
            .await
            .unwrap();
    }

    pub async fn numsub(&self, channel: &str) -> i64 {
        let (_, count): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut self.connection().await)
            .await
            .unwrap();
        count
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Three primaries, no replicas, every slot assigned; stopped and their
/// files removed when dropped.
pub struct Cluster {
    dir: PathBuf,
    pub nodes: Vec<Redis>,
}

impl Cluster {
    pub fn start() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcp-edge-cluster-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let nodes = (0..3)
            .map(|_| Redis::start_with(|port| node_options(&dir, port)))
            .collect();
        let cluster = Self { dir, nodes };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(
            cluster
                .nodes
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port)),
        );
        let created = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .status()
            .expect("redis-cli is installed (apt-get install redis-server)");
        assert!(created.success(), "redis-cli --cluster create failed");
        cluster.wait_ok();
        cluster
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Redis::url).collect()
    }

    /// What `redis-cli` prints for `args` sent to node `node`.
    pub fn cli(&self, node: usize, args: &[&str]) -> String {
        self.nodes[node].cli(args)
    }

    /// Waits until every node sees every slot served and every node.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in 0..self.nodes.len() {
            loop {
                let info = self.cli(node, &["cluster", "info"]);
                let ok = [
                    "cluster_state:ok",
                    "cluster_slots_ok:16384",
                    "cluster_known_nodes:3",
                ]
                .iter()
                .all(|line| info.lines().any(|l| l.trim() == *line));
                if ok {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster not ok: {info}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn id(&self, node: usize) -> String {
        self.cli(node, &["cluster", "myid"]).trim().to_owned()
    }

    /// The slots node `node` serves, as it says.
    pub fn slots(&self, node: usize) -> Vec<(u16, u16)> {
        let nodes = self.cli(node, &["cluster", "nodes"]);
        let myself = nodes
            .lines()
            .find(|line| line.contains("myself"))
            .expect("a line of its own");
        myself
            .split(' ')
            .skip(8)
            .filter(|range| !range.starts_with('['))
            .map(|range| match range.split_once('-') {
                Some((low, high)) => (low.parse().unwrap(), high.parse().unwrap()),
                None => (range.parse().unwrap(), range.parse().unwrap()),
            })
            .collect()
    }

    /// The node that serves `channel`'s slot.
    pub fn owner(&self, channel: &str) -> usize {
        let slot: u16 = self
            .cli(0, &["cluster", "keyslot", channel])
            .trim()
            .parse()
            .unwrap();
        (0..self.nodes.len())
            .find(|node| {
                self.slots(*node)
                    .iter()
                    .any(|(low, high)| (*low..=*high).contains(&slot))
            })
            .expect("every slot is served")
    }

    /// `PUBSUB SHARDNUMSUB channel` on node `node`.
    pub fn shardnumsub(&self, node: usize, channel: &str) -> i64 {
        let out = self.cli(node, &["pubsub", "shardnumsub", channel]);
        out.lines().last().unwrap().trim().parse().unwrap()
    }

    /// `PUBSUB SHARDNUMSUB channel` on the node that owns it.
    pub fn subscribers(&self, channel: &str) -> i64 {
        self.shardnumsub(self.owner(channel), channel)
    }

    /// Moves every slot of node `from` to node `to`, as an operator does.
    pub fn reshard(&self, from: usize, to: usize) {
        let count: u32 = self
            .slots(from)
            .iter()
            .map(|(low, high)| u32::from(high - low) + 1)
            .sum();
        let moved = Command::new("redis-cli")
            .args([
                "--cluster",
                "reshard",
                &format!("127.0.0.1:{}", self.nodes[from].port),
            ])
            .args([
                "--cluster-from",
                &self.id(from),
                "--cluster-to",
                &self.id(to),
            ])
            .args(["--cluster-slots", &count.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(moved.success(), "redis-cli --cluster reshard failed");
        self.wait_ok();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A cluster node's options: its configuration file in `dir`, and a free
/// port for the cluster bus.
fn node_options(dir: &std::path::Path, port: u16) -> Vec<String> {
    let bus = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        &format!("nodes-{port}.conf"),
        "--cluster-port",
        &bus.to_string(),
        "--cluster-node-timeout",
        "2000",
        "--dir",
        &dir.to_string_lossy(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A subscriber to one channel outside the deployment, as any client with
/// rights on the prefix can be: `redis-cli` running `SUBSCRIBE` (or, on a
/// cluster's shard, `SSUBSCRIBE`), the payloads it hears read off its
/// output. Stopped when dropped.
pub struct Spy {
    child: Child,
    heard: std::sync::mpsc::Receiver<String>,
}

impl Spy {
    /// A spy on `channel` of the node on `port`, subscribed with `command`
    /// (`subscribe` or `ssubscribe`).
    pub fn start(port: u16, command: &str, channel: &str) -> Self {
        use std::io::BufRead;
        let mut child = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "--raw", command, channel])
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli is installed (apt-get install redis-server)");
        let out = child.stdout.take().expect("piped");
        let (send, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Each push is three lines: its kind, the channel, the payload.
            let mut lines = std::io::BufReader::new(out).lines().map_while(Result::ok);
            while let (Some(kind), Some(_), Some(payload)) =
                (lines.next(), lines.next(), lines.next())
            {
                if (kind == "message" || kind == "smessage") && send.send(payload).is_err() {
                    break;
                }
            }
        });
        Self { child, heard }
    }

    /// The next payload heard, within 5 s.
    pub fn next(&self) -> String {
        self.heard
            .recv_timeout(Duration::from_secs(5))
            .expect("the spy heard a message within 5 s")
    }
}

impl Drop for Spy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
