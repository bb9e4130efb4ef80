//! The listen hub's Redis bus on a real three-node Redis Cluster (sharded
//! pub/sub), which each test starts on free loopback ports
//! (`redis-server --cluster-enabled yes`, then `redis-cli --cluster
//! create`) and stops at its end. Two hubs on the cluster stand for two
//! instances of a deployment.
#![cfg(feature = "redis")]

use std::process::Command;
use std::time::Duration;

use mcp_edge::hub::{Channel, RedisBus};
use serde_json::json;

mod bus;

use bus::{
    crosses, eventually, forged_ahead, fresh_update_crosses, profile, Cluster, Instance, Spy,
    Stream,
};

/// An instance on `cluster`, with the test profile.
fn instance(cluster: &Cluster) -> Instance {
    Instance::on(RedisBus::cluster(cluster.urls(), "app").unwrap(), profile())
}

/// Alice's documents, the first whose channel is on each node, in node
/// order.
fn one_per_node(cluster: &Cluster, bus: &RedisBus) -> Vec<String> {
    let mut found: Vec<Option<String>> = vec![None; cluster.nodes.len()];
    for i in 0.. {
        let uri = format!("demo://users/alice/doc-{i}");
        let owner = cluster.owner(&bus.channel_name(Channel::Resource(&uri)));
        found[owner].get_or_insert(uri);
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    found.into_iter().flatten().collect()
}

/// Waits until the node that owns `uri`'s channel holds `count`
/// subscriptions to it, and no other node any.
async fn subscribed(cluster: &Cluster, bus: &RedisBus, uri: &str, count: i64) {
    let channel = bus.channel_name(Channel::Resource(uri));
    eventually("the subscriptions on the channel's shard", || async {
        let owner = cluster.owner(&channel);
        (0..cluster.nodes.len()).all(|node| {
            let expected = if node == owner { count } else { 0 };
            cluster.shardnumsub(node, &channel) == expected
        })
    })
    .await;
}

/// Two instances a and b on `cluster`, and a stream of alice's on b for
/// one document per node, b subscribed on each node.
async fn alice_on_b(cluster: &Cluster) -> (Instance, Instance, Vec<String>, Stream) {
    let (a, b) = (instance(cluster), instance(cluster));
    let docs = one_per_node(cluster, &b.bus);
    let notifications = json!({"resourceSubscriptions": docs});
    let on_b = b.listen("alice", 1, notifications).await;
    for doc in &docs {
        subscribed(cluster, &b.bus, doc, 1).await;
    }
    (a, b, docs, on_b)
}

const BOB_NOTES: &str = "demo://users/bob/notes";
const LOGS: &str = "demo://public/logs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_deliver_across_the_cluster_to_the_entitled_streams_only() {
    let cluster = Cluster::start();
    let (a, b, docs, mut alice) = alice_on_b(&cluster).await;
    let mut bob = b
        .listen(
            "bob",
            2,
            json!({"resourceSubscriptions": [BOB_NOTES, LOGS]}),
        )
        .await;
    for uri in [BOB_NOTES, LOGS] {
        subscribed(&cluster, &b.bus, uri, 1).await;
    }
    eventually("a connected", || async { a.bus.is_connected() }).await;

    // An update on each shard reaches alice; none of them reaches bob.
    for doc in &docs {
        let published = a.hub.publisher().resource_updated(doc).await;
        assert_eq!((published.streams, published.remote), (0, Ok(())));
        assert_eq!(alice.message().await["params"]["uri"], doc.as_str());
    }
    bob.silent(Duration::from_millis(500)).await;
    // Below an honoured URI: bob hears it, alice does not.
    let _ = a
        .hub
        .publisher()
        .resource_updated(&format!("{LOGS}/today"))
        .await;
    assert_eq!(
        bob.message().await["params"]["uri"],
        format!("{LOGS}/today")
    );
    alice.silent(Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sharded_subscription_per_channel_per_instance_on_its_shard() {
    let cluster = Cluster::start();
    let (a, b) = (instance(&cluster), instance(&cluster));
    let docs = one_per_node(&cluster, &a.bus);
    let mut streams = Vec::new();
    for (i, instance) in [&a, &a, &b, &b].into_iter().enumerate() {
        let notifications = json!({"resourceSubscriptions": docs});
        streams.push(instance.listen("alice", i as u32, notifications).await);
    }
    for doc in &docs {
        subscribed(&cluster, &a.bus, doc, 2).await;
    }
    // Sharded pub/sub only: no classic subscription anywhere.
    for node in 0..cluster.nodes.len() {
        assert_eq!(cluster.cli(node, &["pubsub", "channels"]).trim(), "");
        assert_eq!(cluster.cli(node, &["pubsub", "numpat"]).trim(), "0");
    }
    // The last stream of an instance gone, it leaves the channel's shard.
    streams.truncate(2);
    for doc in &docs {
        subscribed(&cluster, &a.bus, doc, 1).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_and_started_again_both_keep_serving_and_delivery_resumes() {
    let mut cluster = Cluster::start();
    let (a, b, docs, mut on_b) = alice_on_b(&cluster).await;
    let mut on_a = a
        .listen("alice", 2, json!({"resourceSubscriptions": [&docs[0]]}))
        .await;

    // Node 0 down for 3 s (past the node timeout): each instance goes on
    // serving its own streams and its requests meanwhile.
    cluster.nodes[0].stop();
    eventually("a sees the outage", || async { !a.bus.is_connected() }).await;
    let published = a.hub.publisher().resource_updated(&docs[0]).await;
    assert_eq!(published.streams, 1);
    assert_eq!(on_a.message().await["params"]["uri"], docs[0].as_str());
    let mut late = b
        .listen("bob", 3, json!({"resourceSubscriptions": [BOB_NOTES]}))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.nodes[0].run();
    cluster.wait_ok();

    // Delivery resumes on every shard, the restarted one's included.
    eventually("a connected again", || async { a.bus.is_connected() }).await;
    for (i, doc) in docs.iter().enumerate() {
        crosses(&a, &mut on_b, doc, "the node's restart").await;
        // Once per instance: docs[0] is on_a's too.
        subscribed(&cluster, &b.bus, doc, if i == 0 { 2 } else { 1 }).await;
    }
    subscribed(&cluster, &b.bus, BOB_NOTES, 1).await;
    let _ = a.hub.publisher().resource_updated(BOB_NOTES).await;
    assert_eq!(late.message().await["params"]["uri"], BOB_NOTES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_moved_mid_stream_keep_their_channels_delivering() {
    let cluster = Cluster::start();
    let (a, b, docs, mut on_b) = alice_on_b(&cluster).await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    crosses(&a, &mut on_b, &docs[1], "the start").await;

    // Every slot of node 1 moves to node 2, docs[1]'s among them.
    cluster.reshard(1, 2);
    let channel = b.bus.channel_name(Channel::Resource(&docs[1]));
    assert_eq!(cluster.owner(&channel), 2);
    subscribed(&cluster, &b.bus, &docs[1], 1).await;
    for doc in &docs {
        crosses(&a, &mut on_b, doc, "the reshard").await;
    }
    // docs[1]'s channel left with its slot: its window is counted, and
    // the channels that stayed are not.
    assert_eq!(b.bus.moved(), 1);
    assert_eq!(a.bus.moved(), 0);
}

/// The ACL user of docs/security.md for a cluster, set on every node.
const ACL_USER: &str = "edge on >secret resetchannels &app:* -@all +ssubscribe +sunsubscribe +spublish +ping +cluster|info +cluster|slots";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_run_as_a_redis_user_held_to_the_prefix_on_every_node() {
    let cluster = Cluster::start();
    for node in 0..cluster.nodes.len() {
        let mut set = vec!["acl", "setuser"];
        set.extend(ACL_USER.split(' '));
        assert_eq!(cluster.cli(node, &set).trim(), "OK");
    }
    let urls: Vec<String> = (cluster.nodes.iter())
        .map(|node| format!("redis://edge:secret@127.0.0.1:{}", node.port))
        .collect();
    let on = |urls: &[String]| Instance::on(RedisBus::cluster(urls, "app").unwrap(), profile());
    let (a, b) = (on(&urls), on(&urls));
    let docs = one_per_node(&cluster, &b.bus);
    let mut stream = b
        .listen("alice", 1, json!({"resourceSubscriptions": docs}))
        .await;
    for doc in &docs {
        subscribed(&cluster, &b.bus, doc, 1).await;
    }
    eventually("a connected", || async { a.bus.is_connected() }).await;
    for doc in &docs {
        crosses(&a, &mut stream, doc, "connecting as the user").await;
    }
    // The last stream gone, b leaves every shard; pings go on meanwhile.
    drop(stream);
    for doc in &docs {
        subscribed(&cluster, &b.bus, doc, 0).await;
    }
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(a.bus.is_connected() && b.bus.is_connected());
    for node in 0..cluster.nodes.len() {
        let refused = cluster.cli(node, &["acl", "log"]);
        assert_eq!(refused.trim(), "", "node {node} refused the bus");
    }
    // Outside the prefix the user may not publish.
    let outside = Command::new("redis-cli")
        .args([
            "-p",
            &cluster.nodes[0].port.to_string(),
            "--user",
            "edge",
            "--pass",
            "secret",
        ])
        .args(["--no-auth-warning", "spublish", "other:x", "m"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&outside.stdout).contains("NOPERM"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_published_after_the_acknowledgment_crosses_on_every_shard() {
    let cluster = Cluster::start();
    let (a, b) = (instance(&cluster), instance(&cluster));
    let _warm = b
        .listen("alice", 0, json!({"toolsListChanged": true}))
        .await;
    eventually("both connected", || async {
        a.bus.is_connected() && b.bus.is_connected()
    })
    .await;
    // Fresh channels, on every shard: each listen is acknowledged once its
    // shard confirmed the subscription.
    let mut shards = std::collections::HashSet::new();
    for i in 0..20 {
        let uri = fresh_update_crosses(&a, &b, i).await;
        shards.insert(cluster.owner(&b.bus.channel_name(Channel::Resource(&uri))));
    }
    assert_eq!(shards.len(), 3, "the fresh channels span every shard");
}

/// The forged-ahead copies of `tests/redis.rs`, on the cluster: sent with
/// `SPUBLISH` on the channel's shard, they suppress none of the updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_sent_ahead_of_an_instance_suppress_none_of_its_updates_on_the_cluster() {
    const LOGS: &str = "demo://public/logs";
    let cluster = Cluster::start();
    let (a, b) = (instance(&cluster), instance(&cluster));
    let mut stream = b
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    subscribed(&cluster, &b.bus, LOGS, 1).await;
    let channel = b.bus.channel_name(Channel::Resource(LOGS));
    let owner = cluster.owner(&channel);
    let spy = Spy::start(cluster.nodes[owner].port, "ssubscribe", &channel);
    subscribed(&cluster, &b.bus, LOGS, 2).await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    let publish = |payload: String| {
        let (cluster, channel) = (&cluster, channel.clone());
        async move {
            cluster.cli(owner, &["spublish", &channel, &payload]);
        }
    };
    forged_ahead(&a, &b, &mut stream, &spy, LOGS, publish).await;
}
