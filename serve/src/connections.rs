//! The accept loop's bounds on connections: how long one may take to send
//! its first request head, how long one may sit with no request in flight,
//! and how many one peer address may hold open.
//!
//! A connection that never completes a request head would otherwise be
//! held forever (hyper's HTTP/1 reads a head without a deadline unless
//! given a timer, and an HTTP/2 connection may sit in its preface): enough
//! of them exhaust the file descriptors and stop the server for everyone.
//!
//! The clocks run in one task, not in the connections: each connection
//! counts its requests in flight and begun (two atomics beside its
//! service, touched once per request), and a sweeper looks at every
//! connection once a tick, aborting the task of one that has had no
//! request in flight for longer than its bound. So a connection whose
//! listen stream sends events pays nothing per event. HTTP/1 heads are
//! bounded by hyper too (its header read timeout), exactly, whatever the
//! tick.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;

/// The bounds of [`serve_with`](crate::serve_with).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a connection may take to send its first complete request
    /// head: on HTTP/1 every head (an idle keep-alive connection waits at
    /// most this long for its next one, as hyper counts that wait as
    /// reading the head); on HTTP/2 the preface, the client's first frames
    /// and its first request (default 10 s).
    pub head: Duration,
    /// How long a connection may go with no request in flight once it has
    /// carried one (default 60 s). A connection holding a listen stream
    /// has a request in flight for as long as the stream is open.
    pub idle: Duration,
    /// Most connections open at once from one peer address (default 256).
    pub per_peer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            head: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            per_peer: 256,
        }
    }
}

impl Limits {
    /// How often the sweeper looks: a quarter of the shorter bound, between
    /// 10 ms and 1 s, so that a connection goes within a tick of its bound.
    fn tick(&self) -> Duration {
        (self.head.min(self.idle) / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

/// What one connection's requests did, shared by its service and the
/// sweeper.
#[derive(Default)]
pub(crate) struct Activity {
    /// Requests whose answer is not yet done (its body not yet dropped).
    in_flight: AtomicU32,
    /// Requests begun, ever (wrapping).
    begun: AtomicU32,
}

impl Activity {
    /// A request begins: in flight until the guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.begun.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }
}

/// A request in flight on its connection; done when dropped.
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Every open connection, under one lock: the accept loop admits, each
/// connection's [`Slot`] leaves, the sweeper looks. None holds it across
/// an await.
pub(crate) struct Connections {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    per_peer: HashMap<IpAddr, usize>,
    watched: Vec<Watched>,
}

/// A connection as the sweeper sees it.
struct Watched {
    task: AbortHandle,
    activity: Arc<Activity>,
    /// `begun` when last looked at.
    begun: u32,
    /// Since when nothing was in flight and nothing begun.
    quiet_since: Instant,
}

/// A connection's place in its peer's count; given back when dropped
/// (the connection's task ends, or is aborted).
pub(crate) struct Slot {
    connections: Arc<Connections>,
    peer: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.connections.lock();
        if let Some(count) = state.per_peer.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                state.per_peer.remove(&self.peer);
            }
        }
    }
}

impl Connections {
    pub(crate) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is counts and handles, consistent after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection from `peer`, or `None` when the peer
    /// holds as many as it may.
    pub(crate) fn admit(self: &Arc<Self>, peer: SocketAddr) -> Option<Slot> {
        // An IPv4 client seen through an IPv6 socket is the same client.
        let peer = peer.ip().to_canonical();
        let mut state = self.lock();
        let count = state.per_peer.entry(peer).or_default();
        if *count >= self.limits.per_peer {
            return None;
        }
        *count += 1;
        Some(Slot {
            connections: self.clone(),
            peer,
        })
    }

    /// Watches the connection whose task is `task`.
    pub(crate) fn watch(&self, task: AbortHandle, activity: Arc<Activity>) {
        self.lock().watched.push(Watched {
            task,
            activity,
            begun: 0,
            quiet_since: Instant::now(),
        });
    }

    /// Looks at every connection once a tick, until the accept loop is
    /// gone (it holds the other reference).
    pub(crate) async fn sweep(self: Arc<Self>) {
        let mut every = tokio::time::interval(self.limits.tick());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while Arc::strong_count(&self) > 1 {
            every.tick().await;
            self.look(Instant::now());
        }
    }

    /// Forgets the connections that ended, and aborts those quiet past
    /// their bound.
    fn look(&self, now: Instant) {
        let limits = self.limits;
        self.lock().watched.retain_mut(|watched| {
            if watched.task.is_finished() {
                return false;
            }
            let begun = watched.activity.begun.load(Ordering::Relaxed);
            let busy = watched.activity.in_flight.load(Ordering::Relaxed) > 0;
            if busy || begun != watched.begun {
                watched.begun = begun;
                watched.quiet_since = now;
                return true;
            }
            let bound = if begun == 0 { limits.head } else { limits.idle };
            if now.duration_since(watched.quiet_since) < bound {
                return true;
            }
            tracing::debug!(?bound, "closing a quiet connection");
            watched.task.abort();
            false
        });
    }

    /// How many connections are watched (ended ones until the next look).
    #[cfg(test)]
    fn watched(&self) -> usize {
        self.lock().watched.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            head: Duration::from_secs(2),
            idle: Duration::from_secs(5),
            per_peer: 2,
        }
    }

    #[test]
    fn a_peer_holds_at_most_its_share_and_gets_a_slot_back_when_one_closes() {
        let connections = Connections::new(limits());
        let (a, b) = (
            "10.0.0.1:1".parse().unwrap(),
            "[::ffff:10.0.0.1]:2".parse().unwrap(),
        );
        let first = connections.admit(a).expect("first");
        let _second = connections.admit(b).expect("second, the same peer");
        assert!(connections.admit(a).is_none());
        assert!(connections.admit("10.0.0.2:1".parse().unwrap()).is_some());
        drop(first);
        assert!(connections.admit(a).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_quiet_past_its_bound_is_aborted_and_a_busy_one_is_not() {
        let connections = Connections::new(limits());
        let spawn = || tokio::spawn(std::future::pending::<()>());
        let (silent, served, streaming) = (spawn(), spawn(), spawn());
        let activities: Vec<Arc<Activity>> = (0..3).map(|_| Arc::default()).collect();
        for (task, activity) in [&silent, &served, &streaming].iter().zip(&activities) {
            connections.watch(task.abort_handle(), activity.clone());
        }
        drop(activities[1].begin());
        let _stream = activities[2].begin();
        let start = Instant::now();
        connections.look(start);
        // No request yet: gone after `head`.
        connections.look(start + Duration::from_millis(1999));
        assert!(!silent.is_finished());
        connections.look(start + Duration::from_secs(2));
        tokio::task::yield_now().await;
        assert!(silent.is_finished());
        // One request done: gone after `idle`; one in flight: kept.
        connections.look(start + Duration::from_millis(4999));
        assert!(!served.is_finished());
        connections.look(start + Duration::from_secs(5));
        connections.look(start + Duration::from_secs(3600));
        tokio::task::yield_now().await;
        assert!(served.is_finished());
        assert!(!streaming.is_finished());
        assert_eq!(connections.watched(), 1);
    }

    #[test]
    fn the_tick_is_a_quarter_of_the_shorter_bound_within_reason() {
        assert_eq!(limits().tick(), Duration::from_millis(500));
        assert_eq!(Limits::default().tick(), Duration::from_secs(1));
        let tiny = Limits {
            head: Duration::from_millis(1),
            ..limits()
        };
        assert_eq!(tiny.tick(), Duration::from_millis(10));
    }
}
