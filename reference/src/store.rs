//! The demo's data — its resources and tasks, and who may see them.
//!
//! This is the one source of truth. `resources/list`, `resources/read`,
//! `tasks/get` and the tools read it, and so do the three mcp-edge hooks
//! (resource access, subscription hook, task directory). What a listen
//! acknowledges and what a read returns can therefore never disagree.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_edge::Principal;
use rmcp::model::{CallToolResult, ContentBlock, DetailedTask, Task, TaskPayload, TaskStatus};

/// Who may read a resource.
#[derive(Debug, Clone, Copy)]
enum Readers {
    Everyone,
    Only(&'static str),
}

/// One resource the server serves.
#[derive(Debug)]
pub struct DemoResource {
    /// Its `demo://` URI.
    pub uri: &'static str,
    /// Its name in `resources/list`.
    pub name: &'static str,
    /// Its description in `resources/list`.
    pub description: &'static str,
    /// Its content, as text.
    pub text: &'static str,
    readers: Readers,
    /// Whether the content can change, and so whether a subscription to it
    /// means anything.
    changes: bool,
}

impl DemoResource {
    fn readable_by(&self, caller: Option<&Principal>) -> bool {
        match self.readers {
            Readers::Everyone => true,
            Readers::Only(owner) => caller.is_some_and(|caller| caller.as_str() == owner),
        }
    }
}

struct TaskRecord {
    owner: Principal,
    task: DetailedTask,
}

/// Resources and tasks, shared by the handler and the hooks.
pub struct Store {
    resources: Vec<DemoResource>,
    tasks: Mutex<HashMap<String, TaskRecord>>,
}

impl Store {
    /// The fixed demo data set.
    pub fn demo() -> Arc<Self> {
        let resources = vec![
            DemoResource {
                uri: "demo://public/readme",
                name: "readme",
                description: "What this server is; everyone may read it",
                text: "This server is the mcp-edge reference deployment.",
                readers: Readers::Everyone,
                changes: true,
            },
            DemoResource {
                uri: "demo://public/static/logo",
                name: "logo",
                description: "Static content: readable by everyone, never changes",
                text: "(mcp-edge)",
                readers: Readers::Everyone,
                changes: false,
            },
            DemoResource {
                uri: "demo://users/alice/notes",
                name: "alice-notes",
                description: "Alice's notes; only alice may read them",
                text: "alice: buy milk",
                readers: Readers::Only("alice"),
                changes: true,
            },
            DemoResource {
                uri: "demo://users/bob/notes",
                name: "bob-notes",
                description: "Bob's notes; only bob may read them",
                text: "bob: call alice",
                readers: Readers::Only("bob"),
                changes: true,
            },
            // The resource the official conformance suite subscribes to in
            // its legacy-era scenarios (resources-subscribe, -unsubscribe).
            DemoResource {
                uri: "test://watched-resource",
                name: "watched-resource",
                description: "Conformance fixture: a public resource to subscribe to",
                text: "watch me",
                readers: Readers::Everyone,
                changes: true,
            },
        ];
        let now = rfc3339_now();
        let tasks = [("task-alice-1", "alice"), ("task-bob-1", "bob")]
            .into_iter()
            .map(|(id, owner)| {
                let task = Task::new(id, TaskStatus::Working, now.clone(), now.clone())
                    .with_poll_interval_ms(5_000);
                let record = TaskRecord {
                    owner: Principal::new(owner),
                    task: DetailedTask::new(task, TaskPayload::Working),
                };
                (id.to_owned(), record)
            })
            .collect();
        Arc::new(Self {
            resources,
            tasks: Mutex::new(tasks),
        })
    }

    /// The access rule of `resources/read`: an unknown URI is unreadable.
    pub fn may_read(&self, caller: Option<&Principal>, uri: &str) -> bool {
        self.read(caller, uri).is_some()
    }

    /// The resource at `uri`, if it exists and `caller` may read it.
    pub fn read(&self, caller: Option<&Principal>, uri: &str) -> Option<&DemoResource> {
        self.resources
            .iter()
            .find(|resource| resource.uri == uri)
            .filter(|resource| resource.readable_by(caller))
    }

    /// The resources `caller` may read, in a stable order.
    pub fn readable<'a>(
        &'a self,
        caller: Option<&'a Principal>,
    ) -> impl Iterator<Item = &'a DemoResource> + 'a {
        self.resources
            .iter()
            .filter(move |resource| resource.readable_by(caller))
    }

    /// The subscription hook: the resource exists and can change.
    pub fn accepts_subscription(&self, uri: &str) -> bool {
        self.resources
            .iter()
            .any(|resource| resource.uri == uri && resource.changes)
    }

    /// The task directory: the task exists and `owner` owns it.
    pub fn owns_task(&self, owner: &Principal, id: &str) -> bool {
        self.tasks()
            .get(id)
            .is_some_and(|record| &record.owner == owner)
    }

    /// The task as `tasks/get` returns it, if `caller` owns it.
    pub fn task(&self, caller: Option<&Principal>, id: &str) -> Option<DetailedTask> {
        let caller = caller?;
        self.tasks()
            .get(id)
            .filter(|record| &record.owner == caller)
            .map(|record| record.task.clone())
    }

    /// Completes `caller`'s task. Returns its owner, the task, and whether
    /// this call changed it (a finished task stays as it is).
    pub fn complete_task(
        &self,
        caller: Option<&Principal>,
        id: &str,
    ) -> Option<(Principal, DetailedTask, bool)> {
        self.finish_task(caller, id, |id| {
            let result = CallToolResult::success(vec![ContentBlock::text(format!("{id} is done"))]);
            let result = match serde_json::to_value(result) {
                Ok(serde_json::Value::Object(result)) => result,
                _ => serde_json::Map::new(),
            };
            TaskPayload::Completed { result }
        })
    }

    /// Cancels `caller`'s task; see [`complete_task`](Self::complete_task).
    pub fn cancel_task(
        &self,
        caller: Option<&Principal>,
        id: &str,
    ) -> Option<(Principal, DetailedTask, bool)> {
        self.finish_task(caller, id, |_| TaskPayload::Cancelled)
    }

    fn finish_task(
        &self,
        caller: Option<&Principal>,
        id: &str,
        payload: impl FnOnce(&str) -> TaskPayload,
    ) -> Option<(Principal, DetailedTask, bool)> {
        let caller = caller?;
        let mut tasks = self.tasks();
        let record = tasks.get_mut(id).filter(|record| &record.owner == caller)?;
        let changed = !record.task.status().is_terminal();
        if changed {
            let mut task = record.task.task.clone();
            task.last_updated_at = rfc3339_now();
            record.task = DetailedTask::new(task, payload(id));
        }
        Some((record.owner.clone(), record.task.clone(), changed))
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskRecord>> {
        // The map holds plain data; a panic elsewhere cannot leave it half-written.
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Now as an RFC 3339 UTC timestamp, to the second.
fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
