//! One listen stream of the hub: its queue, and the SSE body that drains it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::bus::{heard, BusReady, Channel};
use super::registry::StreamId;
use super::{Change, ListChanged, Shared};
use crate::codec::sse::EventFields;
use crate::filter::stream::{acknowledgment, SUBSCRIPTION_ID};
use crate::jsonrpc::{JsonRpcError, RESOURCE_EXHAUSTED};
use crate::metrics;
use crate::HonouredFilter;

/// What is queued for a stream: the notification, written once for every
/// stream it is queued on, up to and after the subscription id each stream
/// tags it with. Cheap to clone: one change is queued on many streams.
#[derive(Debug, Clone)]
pub(crate) struct Item(Arc<Notice>);

#[derive(Debug)]
struct Notice {
    /// The change, for a server that delivers it itself ([`Watch`](super::Watch)).
    change: Change,
    /// The list that changed, for a list change (they coalesce).
    list: Option<ListChanged>,
    /// `data: ` and the message up to the subscription id.
    head: Box<str>,
    /// When it was written (once for every stream it is queued on): a
    /// stream sent it no earlier.
    at: Instant,
}

/// The room of the buffer events are written in (see [`Item::event`]).
const BUFFER: usize = 1024;

thread_local! {
    /// Where the streams polled on this thread write their events (see
    /// [`Item::event`]). One buffer for all of them, not one per stream:
    /// each event is written over the last few, on lines still in the
    /// cache, where a stream's own buffer is out of it again by its next
    /// event once thousands of streams are open. An event waiting for a
    /// slow client holds the buffer's room until it is sent; the next are
    /// written in a new one.
    static EVENTS: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The message after the subscription id, and the event's end.
const TAIL: &[u8] = b"}}}\n\n";

/// The event a stream of subscription `id` (JSON text) sends for `change`.
#[cfg(feature = "fuzzing")]
pub(crate) fn event_of(change: &Change, id: &str) -> Bytes {
    Item::of(change).event(&tag(id), &mut BytesMut::new())
}

impl Item {
    /// The item of `change`. The hub owns the members it writes: the
    /// message's `jsonrpc` and `method`, a task's `taskId`, and the
    /// subscription id in `params._meta`. A task's `params` may bring other
    /// members of `_meta` (kept, merged with the hub's), never a second one
    /// of the hub's: every event is one JSON object with unique keys.
    pub(crate) fn of(change: &Change) -> Self {
        let mut head = String::with_capacity(160);
        head.push_str(r#"data: {"jsonrpc":"2.0","method":""#);
        let mut list = None;
        let mut meta = None;
        match change {
            Change::ResourceUpdated { uri } => {
                head.push_str(r#"notifications/resources/updated","params":{"uri":"#);
                head.push_str(&serde_json::to_string(uri).expect("a string serializes"));
                head.push(',');
            }
            Change::ListChanged(kind) => {
                list = Some(*kind);
                head.push_str(kind.method());
                head.push_str(r#"","params":{"#);
            }
            Change::TaskStatus {
                task_id, params, ..
            } => {
                let mut params = params.clone();
                params.insert("taskId".into(), task_id.as_str().into());
                // A `_meta` that is not an object cannot be merged: it is replaced.
                meta = match params.remove("_meta") {
                    Some(Value::Object(mut meta)) => {
                        meta.remove(SUBSCRIPTION_ID);
                        Some(meta)
                    }
                    _ => None,
                };
                head.push_str(r#"notifications/tasks","params":{"#);
                push_members(&mut head, &params);
            }
        }
        head.push_str(r#""_meta":{"#);
        if let Some(meta) = &meta {
            push_members(&mut head, meta);
        }
        head.push('"');
        head.push_str(SUBSCRIPTION_ID);
        head.push_str(r#"":"#);
        Self(Arc::new(Notice {
            change: change.clone(),
            list,
            head: head.into(),
            at: Instant::now(),
        }))
    }

    /// The list that changed, for a list change (they coalesce).
    fn list(&self) -> Option<ListChanged> {
        self.0.list
    }

    /// When it was written.
    fn at(&self) -> Instant {
        self.0.at
    }

    /// The event with a stream's [`tag`], written into this thread's
    /// buffer ([`EVENTS`]).
    fn event_here(&self, tag: &[u8]) -> Bytes {
        EVENTS.with_borrow_mut(|buffer| self.event(tag, buffer))
    }

    /// The event with a stream's [`tag`], written into `buffer`: once the
    /// events taken from it are dropped, the next are written over them (no
    /// allocation per event). An event larger than [`BUFFER`] gets a buffer
    /// of its own, which is not kept.
    #[inline]
    fn event(&self, tag: &[u8], buffer: &mut BytesMut) -> Bytes {
        let len = self.0.head.len() + tag.len();
        if len > BUFFER {
            let mut own = BytesMut::with_capacity(len);
            self.write(tag, &mut own);
            return own.freeze();
        }
        if buffer.capacity() < len {
            buffer.reserve(BUFFER);
        }
        self.write(tag, buffer);
        buffer.split().freeze()
    }

    fn write(&self, tag: &[u8], buffer: &mut BytesMut) {
        buffer.extend_from_slice(self.0.head.as_bytes());
        buffer.extend_from_slice(tag);
    }
}

/// What a stream writes after an item's head: its subscription id (JSON
/// text: a number or a string, which hold no line break) and [`TAIL`].
fn tag(id: &str) -> Vec<u8> {
    [id.as_bytes(), TAIL].concat()
}

/// Writes each member of `object` and a comma after it.
fn push_members(head: &mut String, object: &Map<String, Value>) {
    for (key, value) in object {
        head.push_str(&serde_json::to_string(key).expect("a string serializes"));
        head.push(':');
        head.push_str(&value.to_string());
        head.push(',');
    }
}

/// Why a stream ends on the hub's initiative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The hub shuts down: the listen's own successful response.
    Shutdown,
    /// More than the backlog was waiting: an error for the listen.
    Lagged,
}

impl End {
    /// Why the stream closed, for the log.
    fn reason(self) -> &'static str {
        match self {
            End::Shutdown => "shutdown",
            End::Lagged => "fell behind",
        }
    }
}

/// What became of an item pushed onto a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Queued (or, a list change already pending, folded into it).
    Queued,
    /// The stream ends already: dropped.
    Ended,
    /// The stream fell behind and ends now.
    Lagged,
}

/// The events waiting for one stream. A cache line of its own: the
/// delivery writes it and the stream's task reads it, for every event,
/// and nothing else shares the line.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct Queue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    items: Items,
    waker: Option<Waker>,
    end: Option<End>,
    /// The list changes queued and not yet sent.
    pending: [bool; 3],
    /// The stream's keep-alive timer fired since the stream last found
    /// nothing to send (see [`KeepAlive`]).
    timer_fired: bool,
}

/// The items waiting, oldest first. The first is held in place: most
/// streams have one at most, and reach it without another allocation.
#[derive(Default)]
struct Items {
    first: Option<Item>,
    /// Behind `first`; empty while `first` is. Boxed, so that the queue
    /// keeps to one cache line.
    #[expect(
        clippy::box_collection,
        reason = "the box keeps the queue's state within one cache line"
    )]
    rest: Option<Box<VecDeque<Item>>>,
}

impl Items {
    #[inline]
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.as_ref().map_or(0, |rest| rest.len())
    }

    #[inline]
    fn push(&mut self, item: Item) {
        match self.first {
            None => self.first = Some(item),
            Some(_) => self.rest.get_or_insert_default().push_back(item),
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<Item> {
        let first = self.first.take()?;
        self.first = self.rest.as_mut().and_then(|rest| rest.pop_front());
        Some(first)
    }

    fn clear(&mut self) {
        self.first = None;
        self.rest = None;
    }
}

/// What a stream sends next.
enum Next {
    Item(Item),
    End(End),
    /// Nothing yet; whether the keep-alive timer fired meanwhile.
    Nothing {
        timer_fired: bool,
    },
}

impl Queue {
    #[inline]
    fn state(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// Queues `item`, within `backlog` events; the stream's waker goes to
    /// `wakers`.
    pub(crate) fn push(&self, item: &Item, backlog: usize, wakers: &mut Wakers) -> Pushed {
        let mut state = self.state();
        if state.end.is_some() {
            return Pushed::Ended;
        }
        if let Some(list) = item.list() {
            if state.pending[list.index()] {
                return Pushed::Queued;
            }
        }
        if state.items.len() >= backlog {
            state.items.clear();
            state.end = Some(End::Lagged);
            wakers.take(&mut state);
            return Pushed::Lagged;
        }
        if let Some(list) = item.list() {
            state.pending[list.index()] = true;
        }
        state.items.push(item.clone());
        wakers.take(&mut state);
        Pushed::Queued
    }

    /// Ends the stream after what is queued (at shutdown); the stream's
    /// waker goes to `wakers`.
    pub(crate) fn end(&self, end: End, wakers: &mut Wakers) {
        let mut state = self.state();
        if state.end.is_none() {
            state.end = Some(end);
            wakers.take(&mut state);
        }
    }

    /// A queue that has ended already (it has no waker yet).
    pub(crate) fn ended(end: End) -> Arc<Self> {
        let queue = Arc::new(Queue::default());
        queue.end(end, &mut Wakers::default());
        queue
    }

    #[inline]
    fn poll_next(&self, cx: &mut Context<'_>) -> Next {
        let mut state = self.state();
        if let Some(item) = state.items.pop() {
            if let Some(list) = item.list() {
                state.pending[list.index()] = false;
            }
            return Next::Item(item);
        }
        if let Some(end) = state.end {
            return Next::End(end);
        }
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Next::Nothing {
            timer_fired: std::mem::take(&mut state.timer_fired),
        }
    }
}

/// The waker of a stream's keep-alive timer: it marks the queue, then
/// wakes the stream's task the way an event does. The stream then looks at
/// its timer only when it fired, without a clock read or a timer touched
/// per event, whichever task it is polled from.
impl std::task::Wake for Queue {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state();
        state.timer_fired = true;
        let waker = state.waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The wakers of the streams given something to send under the registry's
/// lock, woken once it is released: a woken stream never waits on a lock
/// its waker held. The list keeps its room from one delivery to the next.
#[derive(Default)]
pub(crate) struct Wakers(Vec<Waker>);

impl Wakers {
    /// Takes the waker of a stream whose queue's lock is held.
    fn take(&mut self, state: &mut State) {
        if let Some(waker) = state.waker.take() {
            self.0.push(waker);
        }
    }

    /// Wakes every stream taken; the list is left empty.
    pub(crate) fn wake(&mut self) {
        for waker in self.0.drain(..) {
            waker.wake();
        }
    }
}

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
        let id = self.filter.subscription_id().get();
        match end {
            End::Shutdown => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
            ),
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

/// The error that ends a stream that fell behind.
pub(crate) fn lagged(backlog: usize) -> JsonRpcError {
    JsonRpcError::new(
        RESOURCE_EXHAUSTED,
        format!("the listen stream fell behind: more than {backlog} events were waiting"),
    )
    .with_data(serde_json::json!({ "limit": "backlog", "max": backlog }))
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
            Next::Item(item) => Poll::Ready(Some(item.0.change.clone())),
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
    use serde_json::{json, Value};

    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use tokio::time::Instant;

    use bytes::BytesMut;

    use super::{Item, KeepAlive, Next, Queue, BUFFER};
    use crate::hub::Change;
    use crate::Principal;

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

    /// A stream's events are written over the ones it sent once those are
    /// dropped, and a large event does not leave a large buffer behind.
    #[test]
    fn events_reuse_the_streams_buffer_and_a_large_one_is_not_kept() {
        let small = Item::of(&Change::ResourceUpdated {
            uri: "demo://a\"b".into(),
        });
        let mut buffer = BytesMut::new();
        let tag = b"7}}}\n\n";
        let first = small.event(tag, &mut buffer);
        let text = std::str::from_utf8(&first).unwrap();
        let message: Value = serde_json::from_str(
            text.strip_prefix("data: ")
                .and_then(|text| text.strip_suffix("\n\n"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            message,
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": "demo://a\"b", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}})
        );
        let at = first.as_ptr();
        drop(first);
        let reused = (0..BUFFER).any(|_| small.event(tag, &mut buffer).as_ptr() == at);
        assert!(reused, "the buffer is written over");

        let mut params = serde_json::Map::new();
        params.insert("status".into(), "x".repeat(4 * BUFFER).into());
        let large = Item::of(&Change::TaskStatus {
            owner: Principal::new("alice"),
            task_id: "t".into(),
            params,
        });
        let before = buffer.capacity();
        let event = large.event(tag, &mut buffer);
        assert!(event.len() > 4 * BUFFER);
        assert_eq!(
            buffer.capacity(),
            before,
            "the large event has its own buffer"
        );
        assert!(buffer.capacity() <= BUFFER);
    }
}
