//! The legacy era's sessions, each bound to the caller that opened it: a
//! request with another caller's `Mcp-Session-Id`, or one the proxy did not
//! see opened, is answered 404, as for a session that does not exist.
//! Bounded in all and per caller; a session unused for the idle time is
//! forgotten (its next request is 404, and the client opens another).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mcp_edge::Principal;

use crate::config;

/// The sessions the upstream opened through this proxy.
pub struct Sessions {
    max: usize,
    max_per_caller: usize,
    idle: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    bound: HashMap<Box<str>, Binding>,
    per_caller: HashMap<Option<Principal>, usize>,
}

struct Binding {
    caller: Option<Principal>,
    used: Instant,
}

/// Why a session was not bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// Sessions in all.
    Sessions,
    /// Sessions of this caller.
    SessionsPerCaller,
}

impl Sessions {
    pub fn new(config: &config::Sessions) -> Self {
        Self {
            max: config.max,
            max_per_caller: config.max_per_caller,
            idle: Duration::from_secs(config.idle_secs),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Counts and names: consistent after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether session `id` is `caller`'s (and still known at `now`).
    pub fn owns(&self, id: &str, caller: Option<&Principal>, now: Instant) -> bool {
        let mut state = self.lock();
        let idle = self.idle;
        match state.bound.get_mut(id) {
            Some(binding) if now.duration_since(binding.used) >= idle => {
                state.forget(id);
                false
            }
            Some(binding) if binding.caller.as_ref() == caller => {
                binding.used = now;
                true
            }
            _ => false,
        }
    }

    /// Binds the new session `id` to `caller`, within the bounds.
    pub fn bind(&self, id: &str, caller: Option<&Principal>, now: Instant) -> Result<(), Over> {
        let mut state = self.lock();
        state.expire(now, self.idle);
        if state.bound.contains_key(id) {
            // The upstream gave an id it gave before: it is not bound anew.
            return Err(Over::Sessions);
        }
        if state.bound.len() >= self.max {
            return Err(Over::Sessions);
        }
        let key = caller.cloned();
        if state.per_caller.get(&key).copied().unwrap_or(0) >= self.max_per_caller {
            return Err(Over::SessionsPerCaller);
        }
        *state.per_caller.entry(key.clone()).or_default() += 1;
        state.bound.insert(
            id.into(),
            Binding {
                caller: key,
                used: now,
            },
        );
        Ok(())
    }

    /// Forgets session `id` (the upstream ended it).
    pub fn unbind(&self, id: &str) {
        self.lock().forget(id);
    }

    /// How many sessions are bound.
    pub fn len(&self) -> usize {
        self.lock().bound.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl State {
    fn forget(&mut self, id: &str) {
        let Some(binding) = self.bound.remove(id) else {
            return;
        };
        if let Some(count) = self.per_caller.get_mut(&binding.caller) {
            *count -= 1;
            if *count == 0 {
                self.per_caller.remove(&binding.caller);
            }
        }
    }

    fn expire(&mut self, now: Instant, idle: Duration) {
        let stale: Vec<Box<str>> = self
            .bound
            .iter()
            .filter(|(_, b)| now.duration_since(b.used) >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            self.forget(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions() -> Sessions {
        Sessions::new(&config::Sessions {
            max: 3,
            max_per_caller: 2,
            idle_secs: 60,
        })
    }

    #[test]
    fn a_session_is_its_openers_and_no_one_elses() {
        let sessions = sessions();
        let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
        let now = Instant::now();
        sessions.bind("s1", Some(&alice), now).unwrap();
        sessions.bind("s2", None, now).unwrap();
        assert!(sessions.owns("s1", Some(&alice), now));
        assert!(!sessions.owns("s1", Some(&bob), now));
        assert!(!sessions.owns("s1", None, now));
        assert!(sessions.owns("s2", None, now));
        assert!(!sessions.owns("s2", Some(&alice), now));
        assert!(!sessions.owns("unknown", Some(&alice), now));
        sessions.unbind("s1");
        assert!(!sessions.owns("s1", Some(&alice), now));
    }

    #[test]
    fn sessions_are_bounded_in_all_and_per_caller_and_forgotten_when_idle() {
        let sessions = sessions();
        let alice = Principal::new("alice");
        let now = Instant::now();
        sessions.bind("a1", Some(&alice), now).unwrap();
        sessions.bind("a2", Some(&alice), now).unwrap();
        assert_eq!(
            sessions.bind("a3", Some(&alice), now),
            Err(Over::SessionsPerCaller)
        );
        sessions.bind("n1", None, now).unwrap();
        assert_eq!(sessions.bind("n2", None, now), Err(Over::Sessions));
        assert_eq!(sessions.bind("a1", Some(&alice), now), Err(Over::Sessions));
        // Used within the idle time: kept; the others go.
        let later = now + Duration::from_secs(59);
        assert!(sessions.owns("a1", Some(&alice), later));
        let idle = now + Duration::from_secs(61);
        sessions.bind("n2", None, idle).unwrap();
        assert!(sessions.owns("a1", Some(&alice), idle));
        assert!(!sessions.owns("a2", Some(&alice), idle));
        assert_eq!(sessions.len(), 2);
    }
}
