//! One listen stream of the hub: the SSE body that drains its queue
//! (`queue`), with its keep-alive; and a server's own [`Watch`].

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::time::Instant;

use super::bus::BusReady;
use super::change::{heard, Change, Channel};
use super::queue::{lagged, tag, End, Next, Queue, StreamId};
use super::shared::Shared;
use crate::codec::sse::EventFields;
use crate::filter::stream::{acknowledgment, completed};
use crate::filter::HonouredFilter;
use crate::metrics::{self, Ended};

/// The SSE body of one listen stream served by the hub: the
/// acknowledgment, the queued changes as they come, keep-alive comments
/// while idle, and the listen's own end. Dropping it closes the stream and
/// frees its slot.
///
/// Laid out by hand, in two cache lines: what each event reads and writes
/// takes the first (and, for a subscription id of more than 8 bytes, the
/// tag on the heap), what the stream's open and close read comes after. The enums
/// the stream travels in (the hub's body, the edge's) keep their tags in
/// its largest niche, which is in the first line (the keep-alive's
/// `Instant`): nothing after it may have a larger one, as an `Option<u64>`
/// would. With thousands of streams, each event finds its stream's lines
/// out of the cache: the fewer, the sooner it is sent.
#[repr(C, align(64))]
pub(crate) struct ListenStream {
    queue: Arc<Queue>,
    shared: Arc<Shared>,
    keep_alive: KeepAlive,
    acknowledged: bool,
    /// Once the stream has ended on the hub's initiative.
    finished: Option<End>,
    /// The stream's [`tag`], when it is short: an event then reads no
    /// memory but the stream's first line.
    tag: InlineTag,
    /// The stream's tag when it is longer; empty otherwise.
    long_tag: Box<[u8]>,
    /// Until the bus hears the stream's channels: no acknowledgment yet.
    /// (In a `Mutex`, reached with `get_mut`, so that the body stays
    /// `Sync` whatever the bus's future is.)
    ready: Mutex<Option<BusReady>>,
    /// The stream's id in the registry, `None` when it never registered.
    id: Option<StreamId>,
    filter: HonouredFilter,
}

/// The room for a tag held in the stream itself: what its first cache
/// line leaves (a subscription id of up to 8 bytes).
const INLINE_TAG: usize = 13;

/// A stream's whole [`tag`], when it has at most [`INLINE_TAG`] bytes;
/// empty when it is longer.
#[repr(C)]
struct InlineTag {
    len: u8,
    bytes: [u8; INLINE_TAG],
}

impl InlineTag {
    fn of(tag: &[u8]) -> Self {
        let mut inline = Self {
            len: 0,
            bytes: [0; INLINE_TAG],
        };
        if let Some(room) = inline.bytes.get_mut(..tag.len()) {
            room.copy_from_slice(tag);
            inline.len = tag.len() as u8;
        }
        inline
    }

    #[inline]
    fn get(&self) -> Option<&[u8]> {
        (self.len > 0).then(|| &self.bytes[..usize::from(self.len)])
    }
}

impl ListenStream {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: Option<StreamId>,
        queue: Arc<Queue>,
        filter: HonouredFilter,
    ) -> Self {
        let keep_alive = KeepAlive::new(Instant::now(), shared.config.keep_alive);
        let ready = id.map(|_| {
            let channels: Vec<Channel<'_>> = heard(filter.topics()).collect();
            shared.bus.ready(&channels)
        });
        if id.is_some() {
            metrics::listen_stream(true);
        }
        tracing::info!(open = shared.registry().len(), "listen hub: stream opened");
        let whole = tag(filter.subscription_id().get());
        let inline = InlineTag::of(&whole);
        let long_tag = match inline.get() {
            Some(_) => Box::default(),
            None => whole.into(),
        };
        Self {
            queue,
            shared,
            keep_alive,
            acknowledged: false,
            finished: None,
            tag: inline,
            long_tag,
            ready: Mutex::new(ready),
            id,
            filter,
        }
    }

    /// The filter the stream serves.
    pub(crate) fn filter(&self) -> &HonouredFilter {
        &self.filter
    }

    /// `data` as an event (JSON text, one line).
    fn event(&mut self, data: &str) -> Bytes {
        EventFields {
            data,
            ..Default::default()
        }
        .to_bytes()
    }

    /// The listen's own answer that ends the stream.
    fn end(&self, end: End) -> String {
        match end {
            End::Shutdown => completed(&self.filter),
            End::Lagged => {
                let error =
                    lagged(self.shared.config.backlog).to_body(Some(self.filter.subscription_id()));
                String::from_utf8_lossy(&error).into_owned()
            }
        }
    }
}

/// A stream's keep-alive: due once the stream has been silent a whole
/// period. Its timer wakes the stream through the stream's queue (see
/// [`Queue`]'s `Wake`), which tells the stream it fired: until then the
/// stream leaves it alone.
struct KeepAlive {
    timer: Pin<Box<tokio::time::Sleep>>,
    /// No later than the last event was sent: when the timer fires less
    /// than a period after it, it is armed again for a period after it
    /// instead of sending a comment (no timer is touched per event).
    sent: Instant,
    /// The timer was polled since it was armed: it wakes the queue.
    polled: bool,
}

impl KeepAlive {
    fn new(opened: Instant, period: Duration) -> Self {
        Self {
            timer: Box::pin(tokio::time::sleep_until(opened + period)),
            sent: opened,
            polled: false,
        }
    }

    /// An event was sent, written at `at`.
    fn sent(&mut self, at: Instant) {
        self.sent = at;
    }

    /// Ready when a keep-alive is due (the timer is then armed for the
    /// next). A timer polled already is polled again only once it fired
    /// (`timer_fired`, from the queue it wakes).
    fn poll_silent(&mut self, queue: &Arc<Queue>, timer_fired: bool, period: Duration) -> Poll<()> {
        if self.polled && !timer_fired {
            return Poll::Pending;
        }
        let waker = Waker::from(Arc::clone(queue));
        let mut cx = Context::from_waker(&waker);
        loop {
            if self.timer.as_mut().poll(&mut cx).is_pending() {
                self.polled = true;
                return Poll::Pending;
            }
            let now = Instant::now();
            let due = self.sent + period;
            if due <= now {
                self.sent = now;
                self.arm(now + period);
                return Poll::Ready(());
            }
            // Not silent for a whole period yet.
            self.arm(due);
        }
    }

    fn arm(&mut self, deadline: Instant) {
        self.timer.as_mut().reset(deadline);
        self.polled = false;
    }
}

impl Body for ListenStream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    #[inline]
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.finished.is_some() {
            return Poll::Ready(None);
        }
        if !this.acknowledged {
            let ready = this.ready.get_mut().unwrap_or_else(|p| p.into_inner());
            if let Some(future) = ready.as_mut() {
                std::task::ready!(future.as_mut().poll(cx));
                *ready = None;
            }
            this.acknowledged = true;
            let ack = acknowledgment(&this.filter, this.filter.ack().get());
            // The timer was armed as the stream opened, with its ack.
            let event = this.event(&ack);
            return Poll::Ready(Some(Ok(Frame::data(event))));
        }
        let data = match this.queue.poll_next(cx) {
            Next::Item(item) => {
                this.keep_alive.sent(item.at());
                let tag = this.tag.get().unwrap_or(&this.long_tag);
                let event = item.event_here(tag);
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            Next::End(end) => {
                this.finished = Some(end);
                if end == End::Lagged {
                    let backlog = this.shared.config.backlog;
                    tracing::warn!(backlog, "listen hub: a stream fell behind and ends");
                }
                this.end(end)
            }
            Next::Nothing { timer_fired } => {
                let period = this.shared.config.keep_alive;
                std::task::ready!(this
                    .keep_alive
                    .poll_silent(&this.queue, timer_fired, period));
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                    b": keep-alive\n\n",
                )))));
            }
        };
        Poll::Ready(Some(Ok(Frame::data(this.event(&data)))))
    }

    fn is_end_stream(&self) -> bool {
        self.finished.is_some()
    }
}

impl Drop for ListenStream {
    fn drop(&mut self) {
        let mut registry = self.shared.registry();
        if let Some(id) = self.id {
            registry.close(id, &*self.shared.bus);
        }
        let open = registry.len();
        drop(registry);
        if self.id.is_some() {
            metrics::listen_stream(false);
        }
        metrics::listen_ended(match self.finished {
            None => Ended::ClientGone,
            Some(End::Lagged) => Ended::Backlog,
            Some(End::Shutdown) => Ended::Shutdown,
        });
        tracing::info!(
            reason = self.finished.map_or("the client went away", End::reason),
            open,
            "listen hub: stream closed"
        );
    }
}

impl std::fmt::Debug for ListenStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenStream")
            .field("acknowledged", &self.acknowledged)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// The changes under some topics, as the hub's streams hear them (the
/// sub-resource rule, task owners, send-time authorization for its caller,
/// the backlog), for a server that delivers them itself: a legacy
/// session's `resources/subscribe`, say. Dropping it unregisters it.
pub struct Watch {
    shared: Arc<Shared>,
    id: Option<StreamId>,
    queue: Arc<Queue>,
}

impl Watch {
    pub(crate) fn new(shared: Arc<Shared>, id: Option<StreamId>, queue: Arc<Queue>) -> Self {
        Self { shared, id, queue }
    }

    /// The next change, or `None` once the hub shut down or the watch fell
    /// behind its backlog.
    pub async fn next(&mut self) -> Option<Change> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Polls for the next change (see [`Watch::next`]).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Change>> {
        match self.queue.poll_next(cx) {
            Next::Item(item) => Poll::Ready(Some(item.change().clone())),
            Next::End(_) => Poll::Ready(None),
            Next::Nothing { .. } => Poll::Pending,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.shared.registry().close(id, &*self.shared.bus);
        }
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use tokio::time::Instant;

    use super::{KeepAlive, Next, Queue};

    const PERIOD: Duration = Duration::from_secs(15);

    /// What a stream does when it finds nothing to send.
    fn idle(queue: &Arc<Queue>, keep_alive: &mut KeepAlive, cx: &mut Context<'_>) -> Poll<()> {
        match queue.poll_next(cx) {
            Next::Nothing { timer_fired } => keep_alive.poll_silent(queue, timer_fired, PERIOD),
            _ => panic!("nothing was queued"),
        }
    }

    /// A queue found empty with one waker, then with another (the stream
    /// moved to another task): the keep-alive timer wakes the second, and
    /// is then due.
    #[tokio::test(start_paused = true)]
    async fn a_keep_alive_polled_from_another_task_wakes_that_task() {
        let start = Instant::now();
        let queue = Arc::new(Queue::default());
        let mut keep_alive = KeepAlive::new(start, PERIOD);
        let mut elsewhere = Context::from_waker(Waker::noop());
        assert!(idle(&queue, &mut keep_alive, &mut elsewhere).is_pending());
        let due = std::future::poll_fn(|cx| idle(&queue, &mut keep_alive, cx));
        tokio::time::timeout(2 * PERIOD, due)
            .await
            .expect("the keep-alive wakes the task that polled it last");
        assert_eq!(start.elapsed(), PERIOD);
    }

    /// An event sent meanwhile puts the keep-alive off: the timer fires a
    /// period after the stream opened, and the comment comes a period
    /// after the event.
    #[tokio::test(start_paused = true)]
    async fn an_event_puts_the_keep_alive_off_by_a_period() {
        let start = Instant::now();
        let queue = Arc::new(Queue::default());
        let mut keep_alive = KeepAlive::new(start, PERIOD);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(idle(&queue, &mut keep_alive, &mut cx).is_pending());
        tokio::time::sleep(PERIOD / 3).await;
        let sent = Instant::now();
        keep_alive.sent(sent);
        let due = std::future::poll_fn(|cx| idle(&queue, &mut keep_alive, cx));
        tokio::time::timeout(2 * PERIOD, due)
            .await
            .expect("the keep-alive comes");
        assert_eq!(Instant::now(), sent + PERIOD);
    }

    /// What every event reads and writes: one cache line for the queue,
    /// one for the stream when its subscription id is short (the second
    /// and the long tag's when it is not).
    #[test]
    fn a_queue_keeps_to_one_cache_line_and_a_stream_to_two() {
        use super::{InlineTag, ListenStream};
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!((size_of::<Queue>(), align_of::<Queue>()), (64, 64));
        assert_eq!(align_of::<ListenStream>(), 64);
        assert!(size_of::<ListenStream>() <= 128);
        assert!(offset_of!(ListenStream, finished) < offset_of!(ListenStream, tag));
        let first_line_tag = offset_of!(ListenStream, tag) + offset_of!(InlineTag, bytes);
        assert_eq!(first_line_tag + super::INLINE_TAG, 64);
        // The registry's id brings no tag, with a niche larger than the
        // first line's.
        assert_eq!(size_of::<Option<super::StreamId>>(), 8);
    }
}
