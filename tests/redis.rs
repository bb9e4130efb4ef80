//! The listen hub's Redis bus against a real `redis-server`, started on a
//! free loopback port by each test and stopped at its end (`.ci/run`
//! installs the Debian package when it is missing). Two hubs on one Redis
//! stand for two instances of a deployment.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_edge::hub::Channel;
use mcp_edge::ListChanged;
use mcp_edge::Principal;
use serde_json::json;

mod bus;

use bus::{
    crosses, eventually, forged_ahead, fresh_update_crosses, overflow, profile, slow_listen,
    slow_profile, subscribed, Calls, Instance, Overflowed, Redis, Spy, SLOW,
};

/// An instance on `redis`, with the test profile.
fn instance(redis: &Redis, prefix: &str) -> Instance {
    Instance::with(&redis.url(), prefix, profile())
}

const ALICE_NOTES: &str = "demo://users/alice/notes";
const BOB_NOTES: &str = "demo://users/bob/notes";
const LOGS: &str = "demo://public/logs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_on_one_instance_reaches_exactly_the_entitled_streams_on_the_other() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut alice = b
        .listen(
            "alice",
            1,
            json!({"resourceSubscriptions": [ALICE_NOTES, LOGS], "toolsListChanged": true}),
        )
        .await;
    let mut bob = b
        .listen(
            "bob",
            2,
            json!({"resourceSubscriptions": [BOB_NOTES, LOGS]}),
        )
        .await;
    subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    eventually("a connected", || async { a.bus.is_connected() }).await;

    // Below an honoured URI: both hear it, through one subscription.
    let published = a
        .hub
        .publisher()
        .resource_updated(&format!("{LOGS}/today"))
        .await;
    assert_eq!((published.streams, published.remote), (0, Ok(())));
    for stream in [&mut alice, &mut bob] {
        assert_eq!(
            stream.message().await["params"]["uri"],
            format!("{LOGS}/today")
        );
    }
    // Alice's notes reach alice only; a list change only where honoured.
    let _ = a.hub.publisher().resource_updated(ALICE_NOTES).await;
    let _ = a.hub.publisher().list_changed(ListChanged::Tools).await;
    assert_eq!(alice.message().await["params"]["uri"], ALICE_NOTES);
    assert_eq!(
        alice.message().await["method"],
        "notifications/tools/list_changed"
    );
    bob.silent(Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_event_reaches_only_its_owners_streams() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut alice = b
        .listen("alice", 1, json!({"taskIds": ["task-alice-1"]}))
        .await;
    let mut bob = b
        .listen("bob", 2, json!({"taskIds": ["task-alice-1", "task-bob-1"]}))
        .await;
    let owner = Principal::new("alice");
    let channel = b.bus.channel_name(Channel::Task {
        owner: &owner,
        id: "task-alice-1",
    });
    eventually("b subscribed", || async {
        redis.numsub(&channel).await == 1
    })
    .await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    let params = json!({"status": "completed"}).as_object().unwrap().clone();
    let _ = a
        .hub
        .publisher()
        .task_status(&owner, "task-alice-1", params)
        .await;
    let message = alice.message().await;
    assert_eq!(
        (
            message["method"].as_str(),
            message["params"]["taskId"].as_str()
        ),
        (Some("notifications/tasks"), Some("task-alice-1"))
    );
    bob.silent(Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_subscription_per_channel_per_instance() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut streams = Vec::new();
    for i in 0..1_000 {
        streams.push(
            b.listen("alice", i, json!({"resourceSubscriptions": [LOGS]}))
                .await,
        );
    }
    let _on_a = a
        .listen("bob", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = b.bus.channel_name(Channel::Resource(LOGS));
    eventually("one subscription from each instance", || async {
        redis.numsub(&channel).await == 2
    })
    .await;
    // The last stream gone, the instance unsubscribes.
    drop(streams);
    eventually("b unsubscribed", || async {
        redis.numsub(&channel).await == 1
    })
    .await;
}

/// A Redis that stalls without dropping its connections: the bus reports
/// the outage and, once pings are answered again, that it is connected;
/// delivery crosses again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_is_reported_and_recovered() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut on_b = b
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    redis.signal("STOP");
    eventually("b sees the stall", || async { !b.bus.is_connected() }).await;
    redis.signal("CONT");
    eventually("b connected again", || async { b.bus.is_connected() }).await;
    crosses(&a, &mut on_b, LOGS, "the stall").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_keep_serving_while_redis_is_down_and_deliver_again_after() {
    let mut redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut on_a = a
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let mut on_b = b
        .listen("alice", 2, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = b.bus.channel_name(Channel::Resource(LOGS));
    eventually("both subscribed", || async {
        redis.numsub(&channel).await == 2
    })
    .await;

    redis.stop();
    eventually("a sees the outage", || async { !a.bus.is_connected() }).await;
    // Local delivery goes on; the publisher hears that the others did not.
    let published = a.hub.publisher().resource_updated(LOGS).await;
    assert_eq!(published.streams, 1);
    assert!(published.remote.is_err(), "{:?}", published.remote);
    assert_eq!(on_a.message().await["params"]["uri"], LOGS);
    // A new listen is served meanwhile, its channel subscribed once Redis
    // is back.
    eventually("b sees the outage", || async { !b.bus.is_connected() }).await;
    let mut late = b
        .listen("bob", 3, json!({"resourceSubscriptions": [BOB_NOTES]}))
        .await;
    // Down for longer than a subscription may take.
    tokio::time::sleep(Duration::from_secs(1)).await;

    redis.run();
    let late_channel = b.bus.channel_name(Channel::Resource(BOB_NOTES));
    eventually("both resubscribed", || async {
        redis.numsub(&channel).await == 2 && redis.numsub(&late_channel).await == 1
    })
    .await;
    eventually("a connected again", || async { a.bus.is_connected() }).await;
    // Subscribed again, the next publication crosses.
    crosses(&a, &mut on_b, LOGS, "the restart").await;
    let _ = a.hub.publisher().resource_updated(BOB_NOTES).await;
    assert_eq!(late.message().await["params"]["uri"], BOB_NOTES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_dropped_and_counted() {
    let redis = Redis::start();
    let b = instance(&redis, "app");
    let mut stream = b
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    let mut connection = redis.connection().await;
    let too_long = format!(
        r#"{{"v":1,"from":"x","seq":1,"change":{{"type":"resource_updated","uri":"{LOGS}/{}"}}}}"#,
        "a".repeat(70 * 1024)
    );
    for payload in [
        "not json".to_owned(),
        r#"{"v":2,"from":"x","seq":1,"change":{"type":"resource_updated","uri":"demo://public/logs"}}"#.to_owned(),
        r#"{"v":1,"from":"x","seq":2,"change":{"type":"list_changed","list":"widgets"}}"#.to_owned(),
        too_long,
    ] {
        let _: i64 = redis::cmd("PUBLISH").arg(&channel).arg(payload).query_async(&mut connection).await.unwrap();
    }
    eventually("four dropped", || async { b.bus.dropped() == 4 }).await;
    stream.silent(Duration::from_millis(300)).await;
    // A well-formed one from any process is delivered.
    let good = format!(
        r#"{{"v":1,"from":"worker","seq":1,"change":{{"type":"resource_updated","uri":"{LOGS}"}}}}"#
    );
    let _: i64 = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg(good)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(stream.message().await["params"]["uri"], LOGS);
}

/// Anything that can publish on the prefix can claim another instance's
/// name and its next number: that message is heard, and the instance's
/// own next message, different bytes, is heard too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_message_with_the_next_number_does_not_suppress_the_real_one() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut stream = b
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    // a's first message is its number 0.
    let first = a.hub.publisher().resource_updated(LOGS).await;
    assert_eq!(first.remote, Ok(()));
    assert_eq!(stream.message().await["params"]["uri"], LOGS);

    let forged = json!({"v": 1, "from": a.bus.instance(), "seq": 1,
        "change": {"type": "resource_updated", "uri": format!("{LOGS}/forged")}});
    redis.publish(&channel, forged.to_string()).await;
    assert_eq!(
        stream.message().await["params"]["uri"],
        format!("{LOGS}/forged")
    );
    let real = a
        .hub
        .publisher()
        .resource_updated(&format!("{LOGS}/real"))
        .await;
    assert_eq!(real.remote, Ok(()));
    assert_eq!(
        stream.message().await["params"]["uri"],
        format!("{LOGS}/real")
    );
    assert_eq!(b.bus.dropped(), 0);
}

/// A copy of an instance's message sent with its next numbers, before it
/// sends them, suppresses none of them: each message's id is drawn at
/// random.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_sent_ahead_of_an_instance_suppress_none_of_its_updates() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut stream = b
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    let spy = Spy::start(redis.port, "subscribe", &channel);
    eventually("the spy subscribed", || async {
        redis.numsub(&channel).await == 2
    })
    .await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    let publish = |payload: String| {
        let (redis, channel) = (&redis, channel.clone());
        async move { redis.publish(&channel, payload).await }
    };
    forged_ahead(&a, &b, &mut stream, &spy, LOGS, publish).await;
}

/// An update is published on the channel of every URI that covers it: an
/// instance subscribed to two of them hears it twice and delivers it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_copies_of_one_publication_are_delivered_once() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut broad = b
        .listen(
            "alice",
            1,
            json!({"resourceSubscriptions": ["demo://public"]}),
        )
        .await;
    let mut narrow = b
        .listen("bob", 2, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    for uri in ["demo://public", LOGS] {
        let channel = b.bus.channel_name(Channel::Resource(uri));
        eventually("b subscribed to both", || async {
            redis.numsub(&channel).await == 1
        })
        .await;
    }
    eventually("a connected", || async { a.bus.is_connected() }).await;
    let today = format!("{LOGS}/today");
    for _ in 0..3 {
        let published = a.hub.publisher().resource_updated(&today).await;
        assert_eq!(published.remote, Ok(()));
        for stream in [&mut broad, &mut narrow] {
            assert_eq!(stream.message().await["params"]["uri"], today);
        }
    }
    broad.silent(Duration::from_millis(300)).await;
    narrow.silent(Duration::from_millis(300)).await;
    // Each publication was heard twice: the second copy counted.
    assert_eq!(b.bus.duplicates(), 3);
}

/// A `ResourceAccess` hook that takes 2 s per call holds up the deliveries
/// behind it, never the connection: while it runs, a new stream's
/// subscription is made within its 500 ms and an outage is noticed within
/// a ping's interval and timeout (1.5 s). Every update is delivered after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_hook_does_not_stall_the_connection() {
    let redis = Redis::start();
    let calls = Arc::new(Calls::default());
    let a = instance(&redis, "app");
    let b = Instance::with(&redis.url(), "app", slow_profile(calls.clone()));
    let mut slow = slow_listen(&redis, &a, &b, json!({})).await;
    for i in 0..3 {
        let published = a
            .hub
            .publisher()
            .resource_updated(&format!("{SLOW}{i}"))
            .await;
        assert_eq!(published.remote, Ok(()));
    }
    eventually("the hook runs", || async { calls.begun() == 1 }).await;

    let asked = Instant::now();
    let _logs = b
        .listen("alice", 2, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = b.bus.channel_name(Channel::Resource(LOGS));
    assert_eq!(redis.numsub(&channel).await, 1, "subscribed at the ack");
    let took = asked.elapsed();
    assert!(took < Duration::from_millis(500), "the ack took {took:?}");
    assert_eq!(calls.ended(), 0, "the hook still runs");

    redis.signal("STOP");
    let stopped = Instant::now();
    while b.bus.is_connected() {
        let took = stopped.elapsed();
        assert!(
            took < Duration::from_millis(1_800),
            "no outage noticed in {took:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(calls.ended() < 3, "the hook's deliveries still run");
    redis.signal("CONT");
    for i in 0..3 {
        assert_eq!(slow.message().await["params"]["uri"], format!("{SLOW}{i}"));
    }
    assert_eq!((b.bus.overflowed(), b.bus.dropped()), (0, 0));
}

/// Deliveries behind a slow hook queue up to 1024 messages; the newest
/// past them are dropped and counted, and the queue is delivered after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_delivery_queue_drops_the_newest_and_counts_them() {
    let redis = Redis::start();
    let Overflowed {
        b,
        calls,
        mut stream,
        ..
    } = overflow(&redis).await;
    assert_eq!(calls.ended(), 0, "the hook still runs");
    assert_eq!(stream.message().await["params"]["uri"], format!("{SLOW}0"));
    assert_eq!(
        stream.message().await["method"],
        "notifications/tools/list_changed"
    );
    assert_eq!((b.bus.overflowed(), b.bus.dropped()), (76, 0));
}

/// The rules of docs/security.md's Redis user for the prefix `app`.
const ACL_USER: &str =
    "edge on >secret resetchannels &app:* -@all +subscribe +unsubscribe +publish +ping";

/// Two instances run as a Redis user held to the deployment's channels:
/// delivery crosses, a channel is left, pings are answered, Redis refused
/// nothing the bus sent, and the user cannot publish outside the prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_run_as_a_redis_user_held_to_the_prefix() {
    let redis = Redis::start();
    let mut admin = redis.connection().await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(ACL_USER.split(' ').collect::<Vec<_>>())
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://edge:secret@127.0.0.1:{}/", redis.port);
    let a = Instance::with(&url, "app", profile());
    let b = Instance::with(&url, "app", profile());
    let mut stream = b
        .listen(
            "alice",
            1,
            json!({"resourceSubscriptions": [LOGS], "toolsListChanged": true}),
        )
        .await;
    let channel = subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    eventually("a connected", || async { a.bus.is_connected() }).await;
    crosses(&a, &mut stream, LOGS, "connecting as the user").await;
    let _ = a.hub.publisher().list_changed(ListChanged::Tools).await;
    assert_eq!(
        stream.message().await["method"],
        "notifications/tools/list_changed"
    );
    // The last stream gone, b leaves the channel; pings go on meanwhile.
    drop(stream);
    eventually("b unsubscribed", || async {
        redis.numsub(&channel).await == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(a.bus.is_connected() && b.bus.is_connected());
    let refused: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(refused.is_empty(), "Redis refused the bus: {refused:?}");

    let mut edge = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let inside: Result<i64, _> = redis::cmd("PUBLISH")
        .arg("app:x")
        .arg("m")
        .query_async(&mut edge)
        .await;
    assert_eq!(inside.unwrap(), 0);
    let outside: Result<i64, redis::RedisError> = redis::cmd("PUBLISH")
        .arg("other:x")
        .arg("m")
        .query_async(&mut edge)
        .await;
    let error = outside.unwrap_err();
    assert_eq!(error.code(), Some("NOPERM"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_while_redis_is_down_serves_and_connects_later() {
    let mut redis = Redis::start();
    redis.stop();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    let mut on_a = a
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let mut on_b = b
        .listen("alice", 2, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let published = a.hub.publisher().resource_updated(LOGS).await;
    assert_eq!(published.streams, 1);
    assert_eq!(published.remote, Err(mcp_edge::hub::BusError::Unavailable));
    assert_eq!(on_a.message().await["params"]["uri"], LOGS);

    redis.run();
    let channel = b.bus.channel_name(Channel::Resource(LOGS));
    eventually("both connected and subscribed", || async {
        a.bus.is_connected() && redis.numsub(&channel).await == 2
    })
    .await;
    let published = a.hub.publisher().resource_updated(LOGS).await;
    assert_eq!(published.remote, Ok(()));
    assert_eq!(on_b.message().await["params"]["uri"], LOGS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_published_after_the_acknowledgment_crosses() {
    let redis = Redis::start();
    let (a, b) = (instance(&redis, "app"), instance(&redis, "app"));
    // Both connected: the first listen on a channel is acknowledged only
    // once its instance's subscription is in place.
    let _warm = b
        .listen("alice", 0, json!({"toolsListChanged": true}))
        .await;
    eventually("both connected", || async {
        a.bus.is_connected() && b.bus.is_connected()
    })
    .await;
    for i in 0..20 {
        fresh_update_crosses(&a, &b, i).await;
    }
}
