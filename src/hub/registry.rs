//! The hub's open streams, indexed by what they hear.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::stream::{End, Item, Pushed, Queue};
use super::{Config, ListChanged};
use crate::filter::stream::covers;
use crate::{HonouredFilter, Principal, Topic};

/// Every open stream, and the indexes deliveries look streams up by.
#[derive(Default)]
pub(super) struct Registry {
    next: u64,
    closed: bool,
    streams: HashMap<u64, Entry>,
    /// Honoured URI → the streams honouring it.
    uris: HashMap<Box<[u8]>, HashSet<u64>>,
    /// Per list kind, the streams honouring it.
    lists: [HashSet<u64>; 3],
    /// (owner, task id) → the streams honouring it.
    tasks: HashMap<(Principal, Box<str>), HashSet<u64>>,
    /// Open streams per admission bucket.
    buckets: HashMap<Option<String>, usize>,
}

struct Entry {
    queue: Arc<Queue>,
    filter: HonouredFilter,
    bucket: Option<String>,
}

/// What becomes of a listen the hub is asked to serve.
pub(super) enum Admission {
    /// Registered under this id.
    Open(u64, Arc<Queue>),
    /// Over a cap: its name and value.
    Full { limit: &'static str, max: usize },
    /// The hub shut down: the stream is acknowledged and ends at once.
    Closed(Arc<Queue>),
}

impl Registry {
    /// Registers a stream for `filter` in `bucket`, within the caps.
    pub(super) fn open(
        &mut self,
        filter: &HonouredFilter,
        bucket: Option<String>,
        config: &Config,
    ) -> Admission {
        if self.closed {
            let queue = Arc::new(Queue::default());
            queue.end(End::Shutdown);
            return Admission::Closed(queue);
        }
        if self.streams.len() >= config.max_streams {
            return Admission::Full {
                limit: "streams",
                max: config.max_streams,
            };
        }
        let open = self.buckets.get(&bucket).copied().unwrap_or(0);
        if open >= config.max_streams_per_caller {
            return Admission::Full {
                limit: "streams_per_caller",
                max: config.max_streams_per_caller,
            };
        }
        let id = self.next;
        self.next += 1;
        for topic in filter.topics() {
            match topic {
                Topic::ToolsListChanged => self.lists[ListChanged::Tools.index()].insert(id),
                Topic::PromptsListChanged => self.lists[ListChanged::Prompts.index()].insert(id),
                Topic::ResourcesListChanged => {
                    self.lists[ListChanged::Resources.index()].insert(id)
                }
                Topic::Resource(uri) => self
                    .uris
                    .entry(uri.as_bytes().into())
                    .or_default()
                    .insert(id),
                Topic::Task { owner, id: task } => self
                    .tasks
                    .entry((owner.clone(), task.as_str().into()))
                    .or_default()
                    .insert(id),
            };
        }
        *self.buckets.entry(bucket.clone()).or_default() += 1;
        let queue = Arc::new(Queue::default());
        self.streams.insert(
            id,
            Entry {
                queue: queue.clone(),
                filter: filter.clone(),
                bucket,
            },
        );
        Admission::Open(id, queue)
    }

    /// Removes stream `id` from every index, freeing its slot.
    pub(super) fn close(&mut self, id: u64) {
        let Some(entry) = self.streams.remove(&id) else {
            return;
        };
        for topic in entry.filter.topics() {
            match topic {
                Topic::ToolsListChanged => {
                    self.lists[ListChanged::Tools.index()].remove(&id);
                }
                Topic::PromptsListChanged => {
                    self.lists[ListChanged::Prompts.index()].remove(&id);
                }
                Topic::ResourcesListChanged => {
                    self.lists[ListChanged::Resources.index()].remove(&id);
                }
                Topic::Resource(uri) => remove(&mut self.uris, uri.as_bytes(), id),
                Topic::Task { owner, id: task } => {
                    let key = (owner.clone(), Box::<str>::from(task.as_str()));
                    if let Some(ids) = self.tasks.get_mut(&key) {
                        ids.remove(&id);
                        if ids.is_empty() {
                            self.tasks.remove(&key);
                        }
                    }
                }
            }
        }
        if let Some(open) = self.buckets.get_mut(&entry.bucket) {
            *open -= 1;
            if *open == 0 {
                self.buckets.remove(&entry.bucket);
            }
        }
    }

    /// The streams whose honoured URIs cover `uri`, with their callers:
    /// `uri` itself and every prefix of it that ends before or after a `/`.
    pub(super) fn covering(&self, uri: &[u8]) -> Vec<(u64, Option<Principal>)> {
        let ends = memchr::memchr_iter(b'/', uri).flat_map(|at| [at, at + 1]);
        let mut ids: Vec<u64> = ends
            .chain([uri.len()])
            .filter_map(|end| {
                let honoured = &uri[..end];
                let ids = self.uris.get(honoured)?;
                covers(honoured, uri).then_some(ids)
            })
            .flatten()
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| {
                let entry = self.streams.get(&id)?;
                Some((id, entry.filter.principal().cloned()))
            })
            .collect()
    }

    /// The streams that honour `list`.
    pub(super) fn listing(&self, list: ListChanged) -> Vec<u64> {
        self.lists[list.index()].iter().copied().collect()
    }

    /// The streams of `owner` that honour task `task`.
    pub(super) fn following(&self, owner: &Principal, task: &str) -> Vec<u64> {
        self.tasks
            .get(&(owner.clone(), task.into()))
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Queues `item` on stream `id`; false when it was not (gone, ended,
    /// or ended now for falling behind).
    pub(super) fn push(&mut self, id: u64, item: &Item, config: &Config) -> bool {
        let Some(entry) = self.streams.get(&id) else {
            return false;
        };
        match entry.queue.push(item, config.backlog) {
            Pushed::Queued => true,
            Pushed::Ended => false,
            Pushed::Lagged => {
                // It ends, and hears nothing more: its slot is free at once.
                self.close(id);
                false
            }
        }
    }

    /// Ends every stream gracefully, and every later one at once; how many
    /// were open.
    pub(super) fn shut(&mut self) -> usize {
        self.closed = true;
        let open = self.streams.len();
        for entry in self.streams.values() {
            entry.queue.end(End::Shutdown);
        }
        open
    }

    /// How many streams are open.
    pub(super) fn len(&self) -> usize {
        self.streams.len()
    }
}

fn remove(index: &mut HashMap<Box<[u8]>, HashSet<u64>>, key: &[u8], id: u64) {
    if let Some(ids) = index.get_mut(key) {
        ids.remove(&id);
        if ids.is_empty() {
            index.remove(key);
        }
    }
}
