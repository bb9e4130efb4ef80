//! What a layer implements: its [`Rules`] (what it intercepts, how far it
//! reads, what it decides on a classified body and on one read whole, how
//! it screens event streams), the [`Take`] of a request it took and the
//! [`AnswerRule`] that checks the answer. The engine (`call`, `future`)
//! runs them the same way for every layer.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::request::Parts;
use http::{response, Response};
use http_body::Body;
use serde_json::value::RawValue;

use crate::codec::scan::Method;
use crate::http::classify::{Classified, Head, Interest};
use crate::http::event_stream::{EventRule, Screen};
use crate::http::peek::{Peek, PeekLimits, Scan};
use crate::metrics::Replaced;
use crate::rejection::Rejection;

/// What a layer intercepts and what it does with it. The engine skips a
/// request whose head says it is not one a layer looks into
/// ([`Head::inspected`]) and refuses a compressed one; the rules decide the
/// rest.
pub(crate) trait Rules: Clone {
    /// What the response to a taken request needs.
    type Take: Take;
    /// What a body is read whole for.
    type Whole;
    /// Which events of any event stream may reach the caller.
    type Screen: Screen;

    /// What the layer intercepts and how far it reads.
    fn settings(&self) -> Settings;

    /// The refusal of a request by its head alone, if any (a request the
    /// engine peeks, not compressed).
    fn check_head(&self, head: &Head) -> Result<(), Rejection>;

    /// The decision once the peek classified the body.
    fn decide<B: Body>(
        &self,
        head: &Head,
        classified: &Classified,
        peek: &Peek<B>,
        parts: &Parts,
    ) -> Decision<Self>;

    /// The decision on a body read whole; what the response needs is handed
    /// back through `take`, so that a pair of rules wraps it without a
    /// second box.
    fn whole<T, F>(&self, whole: Self::Whole, parts: Parts, body: Bytes, take: F) -> Later<T>
    where
        F: FnOnce(Self::Take) -> T + Send + 'static;

    /// The screen of the event streams answering this request, `None` when
    /// they are not screened. Asked for every request, before anything else.
    fn screen(&self, parts: &Parts) -> Option<Self::Screen>;

    /// Why a batch naming `method`, one the layer intercepts, is refused.
    fn in_batch(&self, method: Method) -> &'static str;
}

/// What a layer does with a request once the peek classified its body.
pub(crate) enum Decision<R: Rules> {
    /// Handed on, rewound and watched as the layer set up the peek.
    Pass,
    /// Handed on the same way; the response goes through the take's
    /// [`Take::into_answer`].
    Take(R::Take),
    /// Read whole first, at most `limit` bytes, then [`Rules::whole`] decides.
    Whole { whole: R::Whole, limit: usize },
    /// Answered by the layer, with the request's id when the body, read
    /// whole within the limit, has one.
    Refuse(Rejection),
}

/// A rejection with the request id to echo.
pub(crate) type Refusal = (Rejection, Option<Box<RawValue>>);

/// The request a layer hands on after its own asynchronous work on a body
/// read whole (its hooks): the head and body to call the inner service with,
/// and what the response needs (`T`, as the caller of [`Rules::whole`] asked
/// for it). Boxed once: it runs once per such request, off the hot path.
pub(crate) type Later<T> =
    Pin<Box<dyn Future<Output = Result<(Parts, Bytes, T), Refusal>> + Send + 'static>>;

/// How a layer checks the answer to a request it took. The plumbing routes
/// the answer, whatever its `Content-Type`: a compressed one is replaced by
/// an error for the request's id (the request went without its
/// `Accept-Encoding`), an event stream is ruled event by event, and any other
/// body is read whole, within the rule's limit, and rewritten when it could
/// carry what the rule checks: an error status whose body holds no JSON-RPC
/// `result` (plain text, a JSON-RPC error) is the inner's own answer and
/// passes as it came.
pub(crate) trait AnswerRule {
    /// The rule of an event stream.
    type Events: EventRule;

    /// Most bytes read of an answer that is not a stream.
    fn limit(&self) -> usize;

    /// The request's id, as JSON text, for an error in the answer's place.
    fn id(&self) -> &str;

    /// What becomes of an answer read whole, `text`, that could carry what
    /// the rule checks: a success that is not blank, or an answer of any
    /// status in which a client could read a JSON-RPC `result`. Any other
    /// passes as it came (its status, headers and body), and one too long,
    /// failed or not UTF-8 is replaced.
    fn rewrite(&self, text: &str) -> Rewritten;

    /// The rule of the answer, an event stream.
    fn into_events(self) -> Self::Events;

    /// True when the answer's head vouches that its body, which it may
    /// test by type, needs no check.
    fn vouched(&self, _answer: &response::Parts, _body: &dyn Any) -> bool {
        false
    }
}

/// What an [`AnswerRule`] makes of an answer read whole.
pub(crate) enum Rewritten {
    /// Passes as it came.
    Kept,
    /// Its body rewritten, the head kept.
    Body(String),
    /// Replaced by an error for the request's id: counted by its kind,
    /// logged with the reason.
    Replaced(Replaced, &'static str),
}

/// What a layer intercepts and how far it reads: the same for every
/// request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// The methods the layer intercepts.
    pub(crate) interest: Interest,
    /// How far the peek reads.
    pub(crate) limits: PeekLimits,
    /// How far the peek scans a body with another method.
    pub(crate) scan: Scan,
}

impl Settings {
    /// A layer's settings: what it intercepts, and how far the peek reads
    /// (`method` bytes until the method is known, `listen` of a listen);
    /// the peek watches every other body (see [`Scan::Watching`]).
    pub(crate) fn new(interest: Interest, method: usize, listen: usize) -> Self {
        Self {
            interest,
            limits: PeekLimits { method, listen },
            scan: Scan::Watching,
        }
    }

    /// The settings of two layers in one: both interests, the lower
    /// limits, and the further scan.
    #[inline]
    pub(super) fn and(self, other: Self) -> Self {
        Self {
            interest: self.interest.and(other.interest),
            limits: PeekLimits {
                method: self.limits.method.min(other.limits.method),
                listen: self.limits.listen.min(other.limits.listen),
            },
            scan: match (self.scan, other.scan) {
                (Scan::UntilDecided, Scan::UntilDecided) => Scan::UntilDecided,
                _ => Scan::Watching,
            },
        }
    }
}

/// What the response to a request a layer took needs.
pub(crate) trait Take: Send + 'static {
    /// The check of the answer.
    type Answer: AnswerRule;

    /// The check of the answer; `None` passes it untouched.
    fn into_answer(self) -> Option<Self::Answer>;

    /// Whether the answer is screened too (an answer whose every event the
    /// layer vouches for itself is not).
    fn screens(&self) -> bool;

    /// The layer's own answer, when the request needs no inner service
    /// after all (a listen that honours nothing): the inner is not called.
    fn answer_alone(&mut self) -> Option<Response<Bytes>> {
        None
    }
}

/// The check of the answers to a layer's taken requests.
pub(crate) type Answer<R> = <<R as Rules>::Take as Take>::Answer;

/// The rule of the event streams answering a layer's taken requests.
pub(crate) type Events<R> = <Answer<R> as AnswerRule>::Events;
