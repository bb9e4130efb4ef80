//! Scale-out model of the listen hub on Redis: many hubs (simulated
//! instances) in one process, each with its own [`Bus`] on one in-process
//! model of a Redis deployment, which counts what each Redis node would
//! hold, receive and send. `docs/scale-out.md` reads its output.
//!
//! ```text
//! cargo run --release --example scale_out -- [--instances 100] [--streams 1000]
//!     [--uris 1000000] [--depth 3] [--broad 0] [--zipf 0] [--uris-per-stream 1]
//!     [--callers-per-instance 100] [--list-share 0] [--list-changes 0]
//!     [--updates 1000] [--batch 100] [--shards 1,3,6,12] [--prefix mcp] [--seed 1]
//! ```
//!
//! | option | default | what it sets |
//! |---|---|---|
//! | `--instances N` | 100 | hubs, each with its own bus |
//! | `--streams N` | 1000 | streams per instance |
//! | `--uris N` | 1000000 | distinct leaf URIs, `file:///s{a}/s{b}/…` |
//! | `--depth D` | 3 | path segments of a leaf URI |
//! | `--broad P` | 0 | share of a stream's URIs that are a directory above a leaf (1 to D−1 segments, uniform) |
//! | `--zipf S` | 0 | leaf popularity, for streams and updates alike: Zipf of exponent S (0: uniform) |
//! | `--uris-per-stream K` | 1 | honoured URIs per stream |
//! | `--callers-per-instance N` | 100 | callers the streams of an instance are shared among |
//! | `--list-share P` | 0 | share of streams that also honour the tools list |
//! | `--list-changes N` | 0 | tools list changes published (at most one per batch) |
//! | `--updates N` | 1000 | resource updates, each on a leaf URI, on a random instance |
//! | `--batch N` | 100 | updates between two checks (distinct URIs within one) |
//! | `--shards LIST` | 1,3,6,12 | Redis node counts to report (comma-separated) |
//! | `--prefix P` | mcp | the channel prefix (a `{…}` in it is a hash tag) |
//! | `--seed N` | 1 | the random seed |
//!
//! **Streams** are opened with [`ListenHub::watch`] (the registry and
//! delivery of listen streams, without HTTP), updates published with the
//! hub's [`Publisher`](mcp_edge::hub::Publisher) on random instances. After
//! each batch every stream is drained: it must have heard each update its
//! URIs cover (by the generator's tree, not by the crate's rule) exactly
//! once, and nothing else; any miss, duplicate or stranger ends the run
//! with status 1.
//!
//! **Channels** are named as `RedisBus` names them (`{prefix}:r:{base64url(uri)}`,
//! `{prefix}:l:tools`; an update is published on the channel of every URI
//! that covers it), reproduced here; built with `--features redis`, every
//! name is also checked against `RedisBus::channel_name`.
//!
//! **The model** keeps, per channel, the instances subscribed to it (one
//! subscription per channel per instance, as `RedisBus` makes them), and
//! counts every publication for each node count S of `--shards`, in two
//! deployments:
//!
//! - *sharded* (`SSUBSCRIBE`/`SPUBLISH` on a Redis Cluster of S masters, no
//!   replicas): a channel lives on the master that owns its hash slot,
//!   CRC16-XMODEM of the name (or of its `{hash tag}`) mod 16384, the
//!   slots split as `redis-cli --cluster create` splits them. A
//!   publication goes into that master only, which sends it to the
//!   channel's subscribers.
//! - *classic* (`SUBSCRIBE`/`PUBLISH` on a cluster of S masters; S = 1 is
//!   one Redis): instance i is connected to node i mod S, and subscribes
//!   and publishes there. A publication goes into the publisher's node,
//!   which copies it to every other node over the cluster bus; every node
//!   sends it to its own subscribers of the channel.
//!
//! A *publication* is one `PUBLISH` (or `SPUBLISH`) on one channel; a
//! *change* (an update or a list change, one `Publisher` call) makes one
//! publication per channel it is published on. Per node the model counts:
//! the subscriptions it holds, the publications clients send into it, the
//! messages it sends to subscribers, and (classic) the node-to-node copies
//! it sends and receives. Per instance: the messages Redis sends it, and
//! the deliveries left after it drops its own messages and the same
//! message heard on a second channel (as `RedisBus` does). Subscriptions
//! are printed as totals, everything else per change, so that it can be
//! scaled to any rate of changes.

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use base64::Engine;
use mcp_edge::hub::{Bus, BusFuture, Change, Channel, Inbox, ListenHub, Publisher, Watch};
use mcp_edge::{ListChanged, Principal, ServerProfile, Topic};

/// Redis Cluster's number of hash slots.
const SLOTS: u16 = 16384;

/// How many failures are printed in full.
const SHOWN: usize = 10;

#[derive(Debug, Clone)]
struct Args {
    instances: usize,
    streams: usize,
    uris: u64,
    depth: u32,
    broad: f64,
    zipf: f64,
    uris_per_stream: usize,
    callers: usize,
    list_share: f64,
    list_changes: usize,
    updates: usize,
    batch: usize,
    shards: Vec<usize>,
    prefix: String,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        instances: 100,
        streams: 1000,
        uris: 1_000_000,
        depth: 3,
        broad: 0.0,
        zipf: 0.0,
        uris_per_stream: 1,
        callers: 100,
        list_share: 0.0,
        list_changes: 0,
        updates: 1000,
        batch: 100,
        shards: vec![1, 3, 6, 12],
        prefix: "mcp".into(),
        seed: 1,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let value = argv.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        let share = || match value.parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
            _ => Err(format!("{flag}: a share from 0 to 1, got `{value}`")),
        };
        match flag.as_str() {
            "--instances" => args.instances = number()?.max(1) as usize,
            "--streams" => args.streams = number()? as usize,
            "--uris" => args.uris = number()?.max(1),
            "--depth" => args.depth = number()?.clamp(1, 16) as u32,
            "--broad" => args.broad = share()?,
            "--zipf" => args.zipf = value.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--uris-per-stream" => args.uris_per_stream = number()?.max(1) as usize,
            "--callers-per-instance" => args.callers = number()?.max(1) as usize,
            "--list-share" => args.list_share = share()?,
            "--list-changes" => args.list_changes = number()? as usize,
            "--updates" => args.updates = number()? as usize,
            "--batch" => args.batch = number()?.max(1) as usize,
            "--shards" => {
                args.shards = value
                    .split(',')
                    .map(|s| match s.parse::<usize>() {
                        Ok(n) if (1..=usize::from(SLOTS)).contains(&n) => Ok(n),
                        _ => Err(format!("--shards: node counts from 1 to 16384, got `{s}`")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--prefix" => args.prefix = value,
            "--seed" => args.seed = number()?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if args.batch as u64 > args.uris {
        return Err("--batch must not exceed --uris (the URIs of a batch are distinct)".into());
    }
    Ok(args)
}

/// SplitMix64: small, seeded, good enough to spread load.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The URI tree: leaf `i` is `file:///s{d1}/s{d2}/…`, its digits `i` in
/// base `fanout`; a directory is a leaf's first `level` segments. A URI
/// is named by its level and the index of its directory at that level.
struct Tree {
    depth: u32,
    fanout: u64,
    /// Zipf's cumulative weights over the leaves (empty: uniform).
    cdf: Vec<f64>,
    leaves: u64,
}

/// A URI of the tree: `level` segments, the `index`-th directory (or leaf)
/// of that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Node {
    level: u32,
    index: u64,
}

impl Tree {
    fn new(args: &Args) -> Self {
        let mut fanout = (args.uris as f64).powf(1.0 / f64::from(args.depth)).ceil() as u64;
        while fanout.pow(args.depth) < args.uris {
            fanout += 1;
        }
        let cdf = match args.zipf {
            s if s > 0.0 => {
                let mut sum = 0.0;
                (0..args.uris)
                    .map(|rank| {
                        sum += 1.0 / ((rank + 1) as f64).powf(s);
                        sum
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        Self {
            depth: args.depth,
            fanout: fanout.max(2),
            cdf,
            leaves: args.uris,
        }
    }

    /// A leaf, by popularity.
    fn leaf(&self, rng: &mut Rng) -> Node {
        let index = match self.cdf.last() {
            None => rng.below(self.leaves),
            Some(total) => {
                let at = rng.unit() * total;
                self.cdf.partition_point(|&c| c <= at) as u64
            }
        };
        Node {
            level: self.depth,
            index: index.min(self.leaves - 1),
        }
    }

    /// The directory of `leaf` with `level` segments.
    fn above(&self, leaf: Node, level: u32) -> Node {
        Node {
            level,
            index: leaf.index / self.fanout.pow(self.depth - level),
        }
    }

    /// Whether `node` covers `leaf` (is it, or a directory above it).
    fn covers(&self, node: Node, leaf: Node) -> bool {
        self.above(leaf, node.level) == node
    }

    fn uri(&self, node: Node) -> String {
        let mut uri = String::from("file://");
        for level in (0..node.level).rev() {
            let digit = node.index / self.fanout.pow(level) % self.fanout;
            uri.push_str(&format!("/s{digit}"));
        }
        uri
    }
}

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The Redis channel of `channel`, as `RedisBus` names it (its docs' table).
fn channel_name(prefix: &str, channel: Channel<'_>) -> String {
    match channel {
        Channel::Resource(uri) => format!("{prefix}:r:{}", B64.encode(uri)),
        Channel::List(ListChanged::Tools) => format!("{prefix}:l:tools"),
        Channel::List(ListChanged::Prompts) => format!("{prefix}:l:prompts"),
        Channel::List(ListChanged::Resources) => format!("{prefix}:l:resources"),
        Channel::Task { owner, id } => format!(
            "{prefix}:t:{}:{}",
            B64.encode(owner.as_str()),
            B64.encode(id)
        ),
    }
}

/// The URIs that cover `uri` by the sub-resource rule (README, "The listen
/// hub"): every prefix ending before or after a `/`, and `uri` itself;
/// only `uri` when a client could read it as another path (a `\`, a
/// control character, a dot segment). An update is published on each.
fn coverers(uri: &str) -> Vec<&str> {
    let odd = uri.bytes().any(|b| b < 0x20 || b == 0x7F || b == b'\\')
        || uri.split('/').any(|segment| {
            let s = segment.to_ascii_lowercase().replace("%2e", ".");
            s == "." || s == ".."
        });
    let mut ends: Vec<usize> = Vec::new();
    if !odd {
        for (at, _) in uri.match_indices('/') {
            ends.extend([at, at + 1]);
        }
    }
    ends.push(uri.len());
    ends.dedup();
    ends.into_iter().map(|end| &uri[..end]).collect()
}

/// CRC16-XMODEM (polynomial 0x1021, initial 0), Redis Cluster's key hash.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| match crc & 0x8000 {
            0 => crc << 1,
            _ => (crc << 1) ^ 0x1021,
        })
    })
}

/// The hash slot of `name`: of its hash tag (the bytes between its first
/// `{` and the next `}`, if there are any), else of all of it.
fn slot(name: &[u8]) -> u16 {
    let tag = name.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &name[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tag.unwrap_or(name)) % SLOTS
}

/// The first slot of each of `masters`, as `redis-cli --cluster create`
/// splits 16384 slots (`clusterManagerCommandCreate`, in `f32`).
fn slot_starts(masters: usize) -> Vec<u16> {
    let per = f32::from(SLOTS) / masters as f32;
    let (mut first, mut cursor, mut starts) = (0i64, 0f32, Vec::new());
    for i in 0..masters {
        starts.push(first as u16);
        let mut last = (cursor + per - 1.0).round() as i64;
        if last > i64::from(SLOTS) || i == masters - 1 {
            last = i64::from(SLOTS) - 1;
        }
        first = last.max(first) + 1;
        cursor += per;
    }
    starts
}

/// What one node counts (a master of a sharded cluster, or a node of a
/// classic one).
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    /// Subscriptions it holds (channel, instance).
    subscriptions: u64,
    /// Publications clients send into it.
    published: u64,
    /// Messages it sends to subscribers.
    sent: u64,
    /// Node-to-node copies it sends (classic).
    copies_out: u64,
    /// Node-to-node copies it receives (classic).
    copies_in: u64,
}

/// The counts of one deployment of S nodes.
struct Deployment {
    starts: Vec<u16>,
    sharded: Vec<Tally>,
    classic: Vec<Tally>,
}

impl Deployment {
    fn new(nodes: usize) -> Self {
        Self {
            starts: slot_starts(nodes),
            sharded: vec![Tally::default(); nodes],
            classic: vec![Tally::default(); nodes],
        }
    }

    fn nodes(&self) -> usize {
        self.starts.len()
    }

    /// The master that owns `slot`.
    fn owner(&self, slot: u16) -> usize {
        self.starts.partition_point(|&start| start <= slot) - 1
    }

    /// The classic node instance `i` is connected to.
    fn node_of(&self, instance: usize) -> usize {
        instance % self.nodes()
    }

    /// Counts one publication by `publisher` on a channel of `slot` that
    /// `subscribers` are subscribed to.
    fn count(&mut self, publisher: usize, slot: u16, subscribers: &[usize]) {
        let owner = self.owner(slot);
        self.sharded[owner].published += 1;
        self.sharded[owner].sent += subscribers.len() as u64;
        let entry = self.node_of(publisher);
        let nodes = self.nodes();
        self.classic[entry].published += 1;
        self.classic[entry].copies_out += nodes as u64 - 1;
        for (node, tally) in self.classic.iter_mut().enumerate() {
            if node != entry {
                tally.copies_in += 1;
            }
        }
        for &instance in subscribers {
            self.classic[instance % nodes].sent += 1;
        }
    }

    /// Counts the subscriptions of one channel of `slot`.
    fn hold(&mut self, slot: u16, subscribers: &[usize]) {
        let owner = self.owner(slot);
        self.sharded[owner].subscriptions += subscribers.len() as u64;
        let nodes = self.nodes();
        for &instance in subscribers {
            self.classic[instance % nodes].subscriptions += 1;
        }
    }
}

/// What one instance counts of the bus.
#[derive(Debug, Clone, Copy, Default)]
struct Heard {
    /// Messages Redis sent it (its own included).
    received: u64,
    /// Changes handed to its hub: others' messages, each once.
    delivered: u64,
    /// Events its hub queued for them on its streams.
    queued: u64,
    /// Publications it sent (one per channel).
    published: u64,
}

/// One channel: its slot and its subscribers.
struct Chan {
    slot: u16,
    subscribers: Vec<usize>,
}

/// The Redis deployment: the channels, who is subscribed, and the counts.
struct Model {
    prefix: String,
    channels: HashMap<String, Chan>,
    inboxes: Vec<Option<Inbox>>,
    deployments: Vec<Deployment>,
    heard: Vec<Heard>,
    /// Subscriptions made, and dropped, over the run.
    subscribes: u64,
    unsubscribes: u64,
    /// The bytes of the messages published, one per publication.
    message_bytes: u64,
    #[cfg(feature = "redis")]
    check: mcp_edge::hub::RedisBus,
}

impl Model {
    fn new(args: &Args) -> Self {
        Self {
            prefix: args.prefix.clone(),
            channels: HashMap::new(),
            inboxes: vec![None; args.instances],
            deployments: args.shards.iter().map(|&s| Deployment::new(s)).collect(),
            heard: vec![Heard::default(); args.instances],
            subscribes: 0,
            unsubscribes: 0,
            message_bytes: 0,
            // Never started: it only names channels.
            #[cfg(feature = "redis")]
            check: mcp_edge::hub::RedisBus::new("redis://127.0.0.1:1/", &args.prefix)
                .expect("a valid URL"),
        }
    }

    fn name(&self, channel: Channel<'_>) -> String {
        let name = channel_name(&self.prefix, channel);
        #[cfg(feature = "redis")]
        assert_eq!(
            name,
            self.check.channel_name(channel),
            "channel names differ"
        );
        name
    }

    fn subscribe(&mut self, instance: usize, channel: Channel<'_>) {
        let name = self.name(channel);
        let slot = slot(name.as_bytes());
        let chan = self.channels.entry(name).or_insert(Chan {
            slot,
            subscribers: Vec::new(),
        });
        assert!(!chan.subscribers.contains(&instance), "subscribed twice");
        chan.subscribers.push(instance);
        self.subscribes += 1;
    }

    fn unsubscribe(&mut self, instance: usize, channel: Channel<'_>) {
        let name = self.name(channel);
        if let Some(chan) = self.channels.get_mut(&name) {
            chan.subscribers.retain(|&i| i != instance);
        }
        self.unsubscribes += 1;
    }

    /// Routes `change` from `publisher`: counts every publication, and
    /// returns the instances that hear it, each once, with their inboxes.
    fn publish(&mut self, publisher: usize, change: &Change) -> Vec<(usize, Inbox)> {
        let names = match change {
            Change::ResourceUpdated { uri } => coverers(uri)
                .into_iter()
                .map(|coverer| self.name(Channel::Resource(coverer)))
                .collect(),
            Change::ListChanged(list) => vec![self.name(Channel::List(*list))],
            Change::TaskStatus { owner, task_id, .. } => {
                vec![self.name(Channel::Task { owner, id: task_id })]
            }
        };
        let bytes = message_len(change) as u64;
        let mut hearing = vec![false; self.heard.len()];
        self.heard[publisher].published += names.len() as u64;
        for name in &names {
            self.message_bytes += bytes;
            let (slot, subscribers) = match self.channels.get(name) {
                Some(chan) => (chan.slot, chan.subscribers.as_slice()),
                None => (slot(name.as_bytes()), &[][..]),
            };
            for deployment in &mut self.deployments {
                deployment.count(publisher, slot, subscribers);
            }
            for &instance in subscribers {
                self.heard[instance].received += 1;
                hearing[instance] = true;
            }
        }
        hearing[publisher] = false;
        let mut inboxes = Vec::new();
        for (instance, _) in hearing.iter().enumerate().filter(|(_, &h)| h) {
            self.heard[instance].delivered += 1;
            if let Some(inbox) = &self.inboxes[instance] {
                inboxes.push((instance, inbox.clone()));
            }
        }
        inboxes
    }
}

/// The length of the message `RedisBus` publishes for `change`, with an
/// instance id as long as its own (`{pid:x}-{nanos:x}`: 22 bytes here)
/// and a 4-digit `seq`.
fn message_len(change: &Change) -> usize {
    let change = match change {
        Change::ResourceUpdated { uri } => {
            serde_json::json!({"type": "resource_updated", "uri": uri})
        }
        Change::ListChanged(_) => serde_json::json!({"type": "list_changed", "list": "tools"}),
        Change::TaskStatus { .. } => serde_json::json!({"type": "task_status"}),
    };
    format!(r#"{{"v":1,"from":"1f2e3-187d4c2a9b3e5f10","seq":1000,"change":{change}}}"#).len()
}

fn lock(model: &Mutex<Model>) -> MutexGuard<'_, Model> {
    model
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One instance's bus: it subscribes in the model, and publishes through
/// it to the other instances' hubs.
struct SimBus {
    model: Arc<Mutex<Model>>,
    instance: usize,
}

impl Bus for SimBus {
    fn start(&self, inbox: Inbox) {
        lock(&self.model).inboxes[self.instance] = Some(inbox);
    }

    fn watch(&self, channel: Channel<'_>) {
        lock(&self.model).subscribe(self.instance, channel);
    }

    fn unwatch(&self, channel: Channel<'_>) {
        lock(&self.model).unsubscribe(self.instance, channel);
    }

    fn publish(&self, change: &Change) -> BusFuture {
        let inboxes = lock(&self.model).publish(self.instance, change);
        let (model, change) = (self.model.clone(), change.clone());
        Box::pin(async move {
            for (instance, inbox) in inboxes {
                let queued = inbox.deliver(change.clone()).await as u64;
                lock(&model).heard[instance].queued += queued;
            }
            Ok(())
        })
    }
}

/// One stream: its watch, and what it honours.
struct Stream {
    watch: Watch,
    uris: Vec<Node>,
    tools: bool,
}

/// Failures, counted and the first few shown.
#[derive(Default)]
struct Failures(usize);

impl Failures {
    fn add(&mut self, what: impl FnOnce() -> String) {
        self.0 += 1;
        if self.0 <= SHOWN {
            eprintln!("FAILED: {}", what());
        }
    }
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Opens every instance's streams; the index of the streams by honoured
/// URI, for the check.
fn open_streams(
    args: &Args,
    tree: &Tree,
    hubs: &[ListenHub],
    rng: &mut Rng,
) -> (Vec<Stream>, HashMap<Node, Vec<u32>>) {
    let mut streams = Vec::with_capacity(args.instances * args.streams);
    let mut index: HashMap<Node, Vec<u32>> = HashMap::new();
    for (instance, hub) in hubs.iter().enumerate() {
        for n in 0..args.streams {
            let caller = Principal::new(format!("i{instance}-c{}", n % args.callers));
            let mut uris: Vec<Node> = (0..args.uris_per_stream)
                .map(|_| {
                    let leaf = tree.leaf(rng);
                    match tree.depth > 1 && rng.unit() < args.broad {
                        true => tree.above(leaf, 1 + rng.below(u64::from(tree.depth - 1)) as u32),
                        false => leaf,
                    }
                })
                .collect();
            uris.sort_by_key(|node| (node.level, node.index));
            uris.dedup();
            let tools = rng.unit() < args.list_share;
            let mut topics: Vec<Topic> = uris
                .iter()
                .map(|&node| Topic::Resource(tree.uri(node)))
                .collect();
            if tools {
                topics.push(Topic::List(ListChanged::Tools));
            }
            let id = streams.len() as u32;
            for &node in &uris {
                index.entry(node).or_default().push(id);
            }
            let watch = hub.watch(Some(caller), topics);
            streams.push(Stream { watch, uris, tools });
        }
    }
    (streams, index)
}

/// The streams entitled to an update of `leaf`, each once (`stamp` marks
/// those already counted for update `mark`).
fn entitled(
    tree: &Tree,
    index: &HashMap<Node, Vec<u32>>,
    leaf: Node,
    stamp: &mut [u64],
    mark: u64,
) -> u64 {
    let mut count = 0;
    for level in 1..=tree.depth {
        for &id in index.get(&tree.above(leaf, level)).into_iter().flatten() {
            if stamp[id as usize] != mark {
                stamp[id as usize] = mark;
                count += 1;
            }
        }
    }
    count
}

/// Drains every stream and checks what it heard against the batch: each
/// update its URIs cover once, the list change if it honours tools, and
/// nothing else. How many events were read.
fn check_batch(
    tree: &Tree,
    streams: &mut [Stream],
    batch: &HashMap<String, Node>,
    list_changed: bool,
    failures: &mut Failures,
) -> u64 {
    let mut cx = Context::from_waker(Waker::noop());
    let mut read = 0;
    for (id, stream) in streams.iter_mut().enumerate() {
        let mut heard: Vec<Node> = Vec::new();
        let mut tools = 0;
        loop {
            match stream.watch.poll_next(&mut cx) {
                Poll::Ready(Some(Change::ResourceUpdated { uri })) => match batch.get(&uri) {
                    Some(&leaf) if stream.uris.iter().any(|&n| tree.covers(n, leaf)) => {
                        heard.push(leaf)
                    }
                    _ => failures
                        .add(|| format!("stream {id} heard an update it is not entitled to")),
                },
                Poll::Ready(Some(Change::ListChanged(ListChanged::Tools))) if stream.tools => {
                    tools += 1
                }
                Poll::Ready(Some(other)) => failures.add(|| format!("stream {id} heard {other:?}")),
                Poll::Ready(None) => {
                    failures.add(|| format!("stream {id} ended"));
                    break;
                }
                Poll::Pending => break,
            }
        }
        read += heard.len() as u64 + tools;
        let expected = batch
            .values()
            .filter(|&&leaf| stream.uris.iter().any(|&n| tree.covers(n, leaf)))
            .count();
        heard.sort_by_key(|node| node.index);
        let distinct = {
            let mut d = heard.clone();
            d.dedup();
            d.len()
        };
        if distinct != heard.len() {
            failures.add(|| format!("stream {id} heard an update twice"));
        }
        if distinct != expected {
            failures.add(|| format!("stream {id} heard {distinct} of its {expected} updates"));
        }
        let tools_expected = u64::from(stream.tools && list_changed);
        if tools != tools_expected {
            failures
                .add(|| format!("stream {id} heard {tools} list changes, not {tools_expected}"));
        }
    }
    read
}

/// What the publication phase counted.
#[derive(Default)]
struct Run {
    updates: u64,
    list_changes: u64,
    /// Events queued on the publishers' own streams.
    local: u64,
    /// Events the streams were entitled to, and read.
    entitled: u64,
    read: u64,
    seconds: f64,
}

async fn publish_all(
    args: &Args,
    tree: &Tree,
    publishers: &[Publisher],
    streams: &mut [Stream],
    index: &HashMap<Node, Vec<u32>>,
    rng: &mut Rng,
    failures: &mut Failures,
) -> Run {
    let mut run = Run::default();
    let mut stamp = vec![u64::MAX; streams.len()];
    let started = Instant::now();
    let mut left = args.updates;
    let mut batch_no = 0usize;
    while left > 0 || batch_no < args.list_changes {
        let size = left.min(args.batch);
        left -= size;
        let mut batch: HashMap<String, Node> = HashMap::new();
        while batch.len() < size {
            let leaf = tree.leaf(rng);
            batch.entry(tree.uri(leaf)).or_insert(leaf);
        }
        for (uri, &leaf) in &batch {
            run.entitled += entitled(tree, index, leaf, &mut stamp, run.updates);
            let publisher = &publishers[rng.below(publishers.len() as u64) as usize];
            let published = publisher.resource_updated(uri).await;
            run.local += published.streams as u64;
            run.updates += 1;
            if let Err(error) = published.remote {
                failures.add(|| format!("a publication failed: {error}"));
            }
        }
        let list_changed = batch_no < args.list_changes;
        if list_changed {
            let publisher = &publishers[rng.below(publishers.len() as u64) as usize];
            let published = publisher.list_changed(ListChanged::Tools).await;
            run.local += published.streams as u64;
            run.entitled += streams.iter().filter(|s| s.tools).count() as u64;
            run.list_changes += 1;
        }
        run.read += check_batch(tree, streams, &batch, list_changed, failures);
        batch_no += 1;
    }
    run.seconds = started.elapsed().as_secs_f64();
    run
}

/// Checks the hash and the slot split against Redis's own figures.
fn self_test() {
    assert_eq!(
        crc16(b"123456789"),
        0x31C3,
        "the Redis Cluster spec's CRC16 test vector"
    );
    assert_eq!(slot(b"foo"), 12182, "CLUSTER KEYSLOT foo");
    assert_eq!(
        slot(b"{user1000}.following"),
        slot(b"user1000"),
        "a hash tag"
    );
    assert_eq!(
        slot(b"foo{}{bar}"),
        crc16(b"foo{}{bar}") % SLOTS,
        "an empty tag is no tag"
    );
    assert_eq!(
        slot_starts(3),
        [0, 5461, 10923],
        "redis-cli's split of three masters"
    );
    assert_eq!(
        coverers("file:///a/b"),
        [
            "file:",
            "file:/",
            "file://",
            "file:///",
            "file:///a",
            "file:///a/",
            "file:///a/b"
        ]
    );
    assert_eq!(coverers("file:///a/../b"), ["file:///a/../b"]);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) => {
            eprintln!("scale_out: {why}");
            return ExitCode::from(2);
        }
    };
    self_test();
    let tree = Tree::new(&args);
    let mut rng = Rng(args.seed);
    let model = Arc::new(Mutex::new(Model::new(&args)));
    let profile = ServerProfile::builder().build().expect("a profile");
    let hubs: Vec<ListenHub> = (0..args.instances)
        .map(|instance| {
            let bus = SimBus {
                model: model.clone(),
                instance,
            };
            ListenHub::builder(profile.clone())
                .backlog(args.batch + 1)
                .bus(bus)
                .build()
        })
        .collect();
    let publishers: Vec<Publisher> = hubs.iter().map(ListenHub::publisher).collect();

    let rss_before = rss_kib();
    let opened = Instant::now();
    let (mut streams, index) = open_streams(&args, &tree, &hubs, &mut rng);
    let open_seconds = opened.elapsed().as_secs_f64();
    let rss_open = rss_kib();

    let mut failures = Failures::default();
    let run = publish_all(
        &args,
        &tree,
        &publishers,
        &mut streams,
        &index,
        &mut rng,
        &mut failures,
    )
    .await;
    if run.read != run.entitled {
        failures.add(|| format!("{} events read, {} entitled", run.read, run.entitled));
    }

    {
        let mut model = lock(&model);
        let model = &mut *model;
        for chan in model.channels.values() {
            for deployment in &mut model.deployments {
                deployment.hold(chan.slot, &chan.subscribers);
            }
        }
        report(&args, &tree, model, &run, &streams);
        println!(
            "hubs: {} streams opened in {open_seconds:.1} s; process RSS {rss_before} KiB before, {rss_open} KiB after ({:.0} bytes per stream, every hub and the model in one process)",
            streams.len(),
            (rss_open.saturating_sub(rss_before) * 1024) as f64 / streams.len().max(1) as f64
        );
        println!(
            "publication phase: {:.1} s for {} updates and {} list changes, checks included",
            run.seconds, run.updates, run.list_changes
        );
    }
    drop(streams);
    let left: usize = hubs.iter().map(ListenHub::open_streams).sum();
    let held: usize = lock(&model)
        .channels
        .values()
        .map(|c| c.subscribers.len())
        .sum();
    if held != 0 || left != 0 {
        failures.add(|| format!("{held} subscriptions left after every stream was dropped"));
    }
    match failures.0 {
        0 => {
            println!(
                "check: ok ({} events, each entitled stream heard each update once; 0 subscriptions left after the streams were dropped)",
                run.read
            );
            ExitCode::SUCCESS
        }
        n => {
            println!("check: FAILED ({n} failures)");
            ExitCode::from(1)
        }
    }
}

/// Prints what the run counted.
fn report(args: &Args, tree: &Tree, model: &Model, run: &Run, streams: &[Stream]) {
    let changes = run.updates + run.list_changes;
    let per = |n: u64| n as f64 / changes.max(1) as f64;
    let sum = |f: fn(&Heard) -> u64| model.heard.iter().map(f).sum::<u64>();
    let max = |f: fn(&Heard) -> u64| model.heard.iter().map(f).max().unwrap_or(0);
    let subscriptions: u64 = model
        .channels
        .values()
        .map(|c| c.subscribers.len() as u64)
        .sum();
    let topics: u64 = streams
        .iter()
        .map(|s| s.uris.len() as u64 + u64::from(s.tools))
        .sum();
    let published = sum(|h| h.published);
    println!(
        "scale_out: {} instances x {} streams = {} streams; {} leaf URIs, depth {}, fanout {}, broad {}, zipf {}, {} URIs per stream, list share {}",
        args.instances,
        args.streams,
        streams.len(),
        tree.leaves,
        tree.depth,
        tree.fanout,
        args.broad,
        args.zipf,
        args.uris_per_stream,
        args.list_share
    );
    println!(
        "published: {changes} changes ({} updates, {} list changes) on random instances; {:.2} channels per change; message {:.0} bytes (mean)",
        run.updates,
        run.list_changes,
        per(published),
        model.message_bytes as f64 / published.max(1) as f64
    );
    println!(
        "subscriptions: {subscriptions} held ({:.3} per stream, {:.3} per honoured topic, {:.1} per instance); {} made, {} dropped during the run",
        subscriptions as f64 / streams.len().max(1) as f64,
        subscriptions as f64 / topics.max(1) as f64,
        subscriptions as f64 / args.instances as f64,
        model.subscribes,
        model.unsubscribes
    );
    println!(
        "instances, per change: Redis sends {:.3} messages to all, {:.3} to the busiest; {:.3} delivered to hubs after echoes and repeats are dropped ({:.3} to the busiest); events queued on streams {:.3} ({:.3} by the publisher's own hub)",
        per(sum(|h| h.received)),
        per(max(|h| h.received)),
        per(sum(|h| h.delivered)),
        per(max(|h| h.delivered)),
        per(sum(|h| h.queued) + run.local),
        per(run.local),
    );
    println!();
    println!("per node: subscriptions held; the rest per change (one per channel: into node, copies, handled = into + copies in, sent); max over the S nodes, mean in brackets");
    println!("| S | mode | subscriptions | into node | copies out | copies in | handled | sent to subscribers |");
    println!("|---|---|---|---|---|---|---|---|");
    for deployment in &model.deployments {
        let s = deployment.nodes();
        for (mode, tallies) in [
            ("sharded", &deployment.sharded),
            ("classic", &deployment.classic),
        ] {
            let column = |f: fn(&Tally) -> u64, scale: &dyn Fn(u64) -> f64, digits: usize| {
                let max = tallies.iter().map(f).max().unwrap_or(0);
                let sum: u64 = tallies.iter().map(f).sum();
                format!(
                    "{:.digits$} ({:.digits$})",
                    scale(max),
                    scale(sum) / s as f64
                )
            };
            println!(
                "| {s} | {mode} | {} | {} | {} | {} | {} | {} |",
                column(|t| t.subscriptions, &|n| n as f64, 0),
                column(|t| t.published, &per, 3),
                column(|t| t.copies_out, &per, 3),
                column(|t| t.copies_in, &per, 3),
                column(|t| t.published + t.copies_in, &per, 3),
                column(|t| t.sent, &per, 3),
            );
        }
    }
    println!();
    println!("sharded: the masters an instance holds subscriptions on (one connection to each)");
    for deployment in &model.deployments {
        let mut masters = vec![HashSet::new(); args.instances];
        for chan in model.channels.values() {
            for &instance in &chan.subscribers {
                masters[instance].insert(deployment.owner(chan.slot));
            }
        }
        let counts = masters.iter().map(HashSet::len);
        println!(
            "  S = {}: {} to {} of {}",
            deployment.nodes(),
            counts.clone().min().unwrap_or(0),
            counts.max().unwrap_or(0),
            deployment.nodes()
        );
    }
}
