//! The engine: the service call and the response future every layer runs,
//! over the layer's [`Rules`].
//!
//! A layer says what it intercepts and what it does with it; the engine
//! does the rest, the same way for every layer: read the [`Head`], peek the
//! body until its method decides it, let the rules decide, read the body
//! whole if they ask, call the inner service with the body handed on
//! (rewound, watched, or rewritten), and pass the response through the
//! rules. Two layers' rules combine into one (`(A, B)`), which keeps both
//! promises with one peek and one watch of the body.
//!
//! - `rules.rs`: what a layer implements: [`Rules`], [`Take`],
//!   [`AnswerRule`], and what they answer with ([`Decision`],
//!   [`Rewritten`]).
//! - `call.rs`: [`call`], from the request's head to the inner service's
//!   call or the peek.
//! - `future.rs`: [`ResponseFuture`], one function per state, and the
//!   layer's own answers (a refusal, an answer replaced).
//! - `pair.rs`: the rules of two layers in one.
//!
//! [`Head`]: crate::http::classify::Head

mod call;
mod future;
mod pair;
mod rules;

pub(crate) use self::call::call;
pub(crate) use self::future::{replace_answer, ResponseFuture};
pub(crate) use self::rules::{
    AnswerRule, Decision, Events, Later, Refusal, Rewritten, Rules, Settings, Take,
};
