//! The hub's vocabulary: a change, the channel a stream listens on, and
//! which channels a stream's topics are heard through. Every other file of
//! the hub speaks it; it knows none of them.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::filter::stream::coverers;
use crate::filter::{ListChanged, Topic};
use crate::hooks::Principal;

/// What a stream listens on, as a bus names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel<'a> {
    /// Updates of this honoured URI, and of every URI it covers.
    Resource(&'a str),
    /// A list change.
    List(ListChanged),
    /// The status of a task of its owner.
    Task {
        /// The task's owner.
        owner: &'a Principal,
        /// The task id.
        id: &'a str,
    },
}

impl<'a> Channel<'a> {
    /// The channel a stream registered under `topic` listens on.
    pub fn of(topic: &'a Topic) -> Self {
        use Topic;
        match topic {
            Topic::List(list) => Channel::List(*list),
            Topic::Resource(uri) => Channel::Resource(uri),
            Topic::Task { owner, id } => Channel::Task { owner, id },
        }
    }
}

/// The channels a stream that hears `topics` is registered under: every
/// topic, except a URI that another of its URIs covers. So a resource
/// update finds each stream once, through the broadest of its URIs that
/// covers the update's: of two URIs that both cover a third, the shorter
/// covers the longer.
pub(crate) fn heard(topics: &[Topic]) -> impl Iterator<Item = Channel<'_>> {
    let uris: HashSet<&str> = topics
        .iter()
        .filter_map(|topic| match topic {
            Topic::Resource(uri) => Some(uri.as_str()),
            _ => None,
        })
        .collect();
    topics
        .iter()
        .filter(move |topic| match topic {
            Topic::Resource(uri) if uris.len() > 1 => {
                !coverers(uri).any(|coverer| coverer.len() < uri.len() && uris.contains(coverer))
            }
            _ => true,
        })
        .map(Channel::of)
}

impl Change {
    /// The method of its notification.
    pub(crate) fn method(&self) -> &'static str {
        match self {
            Change::ResourceUpdated { .. } => "notifications/resources/updated",
            Change::ListChanged(list) => list.method(),
            Change::TaskStatus { .. } => "notifications/tasks",
        }
    }
}

/// A change published on one instance, for the streams of every other.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// `notifications/resources/updated` for this URI.
    ResourceUpdated {
        /// The URI that changed.
        uri: String,
    },
    /// A list changed.
    ListChanged(ListChanged),
    /// `notifications/tasks` for a task of `owner`.
    TaskStatus {
        /// The task's owner.
        owner: Principal,
        /// The task id.
        task_id: String,
        /// The notification's `params` (its `taskId` is set to `task_id`).
        params: Map<String, Value>,
    },
}
