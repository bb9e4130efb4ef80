//! A stream's id and its queue: what the registry and deliveries hold of
//! a listen stream (the stream's body, which drains the queue, is in
//! `stream`). An item is written once for every stream it is queued on.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};

use bytes::{Bytes, BytesMut};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::change::Change;
use crate::filter::stream::SUBSCRIPTION_ID;
use crate::filter::ListChanged;
use crate::jsonrpc::{JsonRpcError, RESOURCE_EXHAUSTED};

/// A stream's id in the registry. Never zero: a stream that holds
/// `Option<StreamId>` holds no tag for it, so that the enums around the
/// stream keep theirs in a niche of the stream's first cache line (see
/// [`ListenStream`](super::stream::ListenStream)).
pub(crate) type StreamId = NonZeroU64;

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

    /// The change it carries.
    pub(super) fn change(&self) -> &Change {
        &self.0.change
    }

    /// The list that changed, for a list change (they coalesce).
    fn list(&self) -> Option<ListChanged> {
        self.0.list
    }

    /// When it was written.
    #[inline]
    pub(super) fn at(&self) -> Instant {
        self.0.at
    }

    /// The event with a stream's [`tag`], written into this thread's
    /// buffer ([`EVENTS`]).
    pub(super) fn event_here(&self, tag: &[u8]) -> Bytes {
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

    #[inline]
    fn write(&self, tag: &[u8], buffer: &mut BytesMut) {
        buffer.extend_from_slice(self.0.head.as_bytes());
        buffer.extend_from_slice(tag);
    }
}

/// What a stream writes after an item's head: its subscription id (JSON
/// text: a number or a string, which hold no line break) and [`TAIL`].
pub(super) fn tag(id: &str) -> Vec<u8> {
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
    pub(super) fn reason(self) -> &'static str {
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
pub(super) enum Next {
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
    pub(super) fn poll_next(&self, cx: &mut Context<'_>) -> Next {
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

/// The error that ends a stream that fell behind.
pub(crate) fn lagged(backlog: usize) -> JsonRpcError {
    JsonRpcError::new(
        RESOURCE_EXHAUSTED,
        format!("the listen stream fell behind: more than {backlog} events were waiting"),
    )
    .with_data(serde_json::json!({ "limit": "backlog", "max": backlog }))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use bytes::BytesMut;

    use super::{Item, BUFFER};
    use crate::hooks::Principal;
    use crate::hub::change::Change;

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
