//! The two Redis deployments the bus runs on, and what differs between
//! them: how it connects, subscribes and publishes. On one node the bus
//! uses classic pub/sub (`SUBSCRIBE`, `PUBLISH`) over redis-rs's connection
//! manager; on a cluster, sharded pub/sub only (`SSUBSCRIBE`, `SPUBLISH`)
//! over redis-rs's cluster connection, so that each channel lives on the
//! shard that owns its slot and a publication reaches no other shard.

use futures_util::stream::{self, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, RedisResult};
use tokio::sync::mpsc;

use super::TIMEOUT;
use crate::hub::bus::BusError;

/// The longest wait between two attempts to connect.
pub(super) const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(5);
/// How many subscriptions are in flight at once when many are made.
const IN_FLIGHT: usize = 64;

/// Where the bus's Redis is.
pub(super) enum Deployment {
    /// One node (or a primary behind one address).
    Node(redis::Client),
    /// A Redis Cluster (Redis ≥ 7), found from any of its nodes.
    Cluster(Box<ClusterClient>),
}

/// A connection of the bus: the one it subscribes on (its pushes go to
/// the connection task), or the one it publishes on.
#[derive(Clone)]
pub(super) enum Connection {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

/// What a push from Redis means to the bus.
pub(super) enum Heard {
    /// A message on a channel: its payload.
    Message(Vec<u8>),
    /// Redis confirmed a subscription to this channel.
    Subscribed(String),
    /// This channel is no longer subscribed: the bus left it, or (on a
    /// cluster) its slot moved to another shard.
    Unsubscribed(String),
    /// The connection (to one node of a cluster, or to the node) is gone.
    Lost,
    Other,
}

impl Deployment {
    /// One node at `url`, over RESP3.
    pub(super) fn node(url: &str) -> RedisResult<Self> {
        let separator = if url.contains('?') { '&' } else { '?' };
        redis::Client::open(format!("{url}{separator}protocol=resp3")).map(Self::Node)
    }

    /// The cluster that any of `urls` belongs to, over RESP3. A slot that
    /// moved (`MOVED`, `ASK`) is followed by the client, which learns the
    /// new slot map; a node that restarts is connected again.
    pub(super) fn cluster<S: AsRef<str>>(urls: impl IntoIterator<Item = S>) -> RedisResult<Self> {
        let urls: Vec<String> = urls
            .into_iter()
            .map(|url| url.as_ref().to_owned())
            .collect();
        ClusterClientBuilder::new(urls)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .retries(3)
            .min_retry_wait(50)
            .max_retry_wait(400)
            .build()
            .map(|client| Self::Cluster(Box::new(client)))
    }

    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// A connection for subscriptions, its pushes sent to `pushes`, and one
    /// for publications.
    pub(super) async fn open(
        &self,
        pushes: mpsc::UnboundedSender<PushInfo>,
    ) -> RedisResult<(Connection, Connection)> {
        match self {
            Self::Node(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_push_sender(pushes)
                    .set_automatic_resubscription()
                    .set_connection_timeout(Some(TIMEOUT))
                    .set_response_timeout(Some(TIMEOUT))
                    .set_max_delay(MAX_BACKOFF);
                let subscriber = client.get_connection_manager_with_config(config).await?;
                let publisher = client.get_connection_manager().await?;
                Ok((Connection::Node(subscriber), Connection::Node(publisher)))
            }
            Self::Cluster(client) => {
                let config = ClusterConfig::new()
                    .set_push_sender(pushes)
                    .set_connection_timeout(TIMEOUT)
                    .set_response_timeout(TIMEOUT);
                let subscriber = client.get_async_connection_with_config(config).await?;
                let publisher = client.get_async_connection().await?;
                Ok((
                    Connection::Cluster(subscriber),
                    Connection::Cluster(publisher),
                ))
            }
        }
    }
}

impl Connection {
    /// Subscribes to `channel` (on a cluster, on its shard), or leaves it.
    pub(super) async fn subscribe(&mut self, channel: &str, on: bool) -> Result<(), String> {
        let done = tokio::time::timeout(TIMEOUT, async {
            match (self, on) {
                (Self::Node(node), true) => node.subscribe(channel).await,
                (Self::Node(node), false) => node.unsubscribe(channel).await,
                (Self::Cluster(cluster), true) => cluster.ssubscribe(channel).await,
                (Self::Cluster(cluster), false) => cluster.sunsubscribe(channel).await,
            }
        })
        .await;
        match done {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err("timed out".to_owned()),
        }
    }

    /// Subscribes to each of `channels`, many at a time; the channels
    /// subscribed, and the errors of the others.
    pub(super) async fn subscribe_all(
        &self,
        channels: Vec<String>,
    ) -> Vec<(String, Result<(), String>)> {
        stream::iter(channels)
            .map(|channel| {
                let mut connection = self.clone();
                async move {
                    let done = connection.subscribe(&channel, true).await;
                    (channel, done)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await
    }

    /// Whether Redis answers a ping in time; on a cluster, every primary
    /// the client is connected to, and a node that says every slot is
    /// served (`cluster_state:ok`).
    pub(super) async fn ping(&mut self) -> bool {
        let ping = redis::cmd("PING");
        let pinged = tokio::time::timeout(TIMEOUT, async {
            match self {
                Self::Node(node) => ping.query_async::<()>(node).await.map(|()| true),
                Self::Cluster(cluster) => {
                    ping.query_async::<()>(cluster).await?;
                    let info: String = redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query_async(cluster)
                        .await?;
                    Ok(info.lines().any(|line| line.trim() == "cluster_state:ok"))
                }
            }
        })
        .await;
        matches!(pinged, Ok(Ok(true)))
    }

    /// Publishes `payload` on each of `channels`: in one pipeline on a
    /// node; on a cluster, one `SPUBLISH` per channel, all at once, each
    /// to its channel's shard.
    pub(super) async fn publish(
        &mut self,
        channels: &[String],
        payload: &[u8],
    ) -> Result<(), BusError> {
        let published = tokio::time::timeout(TIMEOUT, async {
            match self {
                Self::Node(node) => {
                    let mut pipe = redis::pipe();
                    for channel in channels {
                        pipe.cmd("PUBLISH").arg(channel).arg(payload).ignore();
                    }
                    pipe.query_async::<()>(node).await
                }
                Self::Cluster(cluster) => {
                    let sends = channels.iter().map(|channel| {
                        let mut cluster = cluster.clone();
                        async move {
                            redis::cmd("SPUBLISH")
                                .arg(channel)
                                .arg(payload)
                                .query_async::<()>(&mut cluster)
                                .await
                        }
                    });
                    let sent = futures_util::future::join_all(sends).await;
                    sent.into_iter().collect()
                }
            }
        })
        .await;
        match published {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(BusError::Failed(error.to_string())),
            Err(_) => Err(BusError::Failed("timed out".to_owned())),
        }
    }
}

impl Heard {
    /// What `push` means, in either deployment's kinds.
    pub(super) fn of(push: PushInfo) -> Self {
        let mut data = push.data.into_iter();
        match push.kind {
            PushKind::Message | PushKind::SMessage => match data.nth(1) {
                Some(redis::Value::BulkString(payload)) => Self::Message(payload),
                _ => Self::Other,
            },
            PushKind::Subscribe | PushKind::SSubscribe => {
                name(data.next()).map_or(Self::Other, Self::Subscribed)
            }
            PushKind::Unsubscribe | PushKind::SUnsubscribe => {
                name(data.next()).map_or(Self::Other, Self::Unsubscribed)
            }
            PushKind::Disconnection => Self::Lost,
            _ => Self::Other,
        }
    }
}

/// A channel's name in a push.
fn name(value: Option<redis::Value>) -> Option<String> {
    match value? {
        redis::Value::BulkString(name) => String::from_utf8(name).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn push(kind: PushKind, data: &[&[u8]]) -> PushInfo {
        let data = data.iter().map(|d| Value::BulkString(d.to_vec())).collect();
        PushInfo { kind, data }
    }

    /// Both deployments' pushes mean the same to the bus: a sharded
    /// message is a message, a shard's (un)subscription an (un)subscription.
    #[test]
    fn the_pushes_of_either_deployment_are_read_alike() {
        for kind in [PushKind::Message, PushKind::SMessage] {
            let heard = Heard::of(push(kind, &[b"app:l:tools", b"{}"]));
            assert!(matches!(heard, Heard::Message(payload) if payload == b"{}"));
        }
        for kind in [PushKind::Subscribe, PushKind::SSubscribe] {
            let heard = Heard::of(push(kind, &[b"app:l:tools", b"1"]));
            assert!(matches!(heard, Heard::Subscribed(name) if name == "app:l:tools"));
        }
        for kind in [PushKind::Unsubscribe, PushKind::SUnsubscribe] {
            let heard = Heard::of(push(kind, &[b"app:l:tools", b"0"]));
            assert!(matches!(heard, Heard::Unsubscribed(name) if name == "app:l:tools"));
        }
        assert!(matches!(
            Heard::of(push(PushKind::Disconnection, &[])),
            Heard::Lost
        ));
        // A message without a payload, a name that is not UTF-8: nothing.
        assert!(matches!(
            Heard::of(push(PushKind::SMessage, &[b"c"])),
            Heard::Other
        ));
        let heard = Heard::of(push(PushKind::SSubscribe, &[b"\xff"]));
        assert!(matches!(heard, Heard::Other));
    }
}
