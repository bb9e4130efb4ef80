use std::collections::VecDeque;

use bytes::Bytes;

use crate::era::{self, Advertised, Era, Skip};
use crate::event_stream::EventRule;
use crate::sse::Event;
use crate::{Principal, ServerProfile};

/// What a response to an intercepted request is rewritten with.
pub(crate) struct Target {
    /// The request's id, as JSON text.
    id: Box<str>,
    era: Era,
    profile: ServerProfile,
    narrowed: Option<Advertised>,
}

impl Target {
    pub(crate) fn new(
        id: Box<str>,
        era: Era,
        profile: ServerProfile,
        caller: Option<&Principal>,
    ) -> Self {
        let narrowed = profile
            .narrows_per_caller()
            .then(|| Advertised::new(profile.capabilities_for(caller, era)));
        Self {
            id,
            era,
            profile,
            narrowed,
        }
    }

    /// The rewritten JSON-RPC response, or why `body` is left alone.
    pub(crate) fn rewrite(&self, body: &str) -> Result<String, Skip> {
        let caps = self
            .narrowed
            .as_ref()
            .unwrap_or_else(|| self.profile.advertised(self.era));
        // Capabilities that depend on the caller must not be cached for others.
        let private = self.narrowed.is_some() && self.era == Era::Modern;
        era::rewrite_response(body, &self.id, caps, private)
    }
}

/// Rewrites the one event of an SSE response that carries the result.
pub(crate) struct ResultRewrite {
    target: Target,
    done: bool,
}

impl ResultRewrite {
    pub(crate) fn new(target: Target) -> Self {
        Self {
            target,
            done: false,
        }
    }
}

impl EventRule for ResultRewrite {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        let rewritten = event.data().map(|data| self.target.rewrite(&data));
        match rewritten {
            Some(Ok(data)) => {
                self.done = true;
                out.push_back(event.with_data(&data));
            }
            _ => out.push_back(event.raw),
        }
    }

    fn passes_rest(&self) -> bool {
        self.done
    }
}
