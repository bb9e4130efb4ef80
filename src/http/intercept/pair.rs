//! Two layers' rules in one: `(A, B)` keeps both promises with one peek
//! and one watch of the body, as [`EdgeLayer`](crate::EdgeLayer) does.

use std::any::Any;
use std::collections::VecDeque;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{response, Response};
use http_body::Body;

use super::rules::{AnswerRule, Decision, Later, Rewritten, Rules, Settings, Take};
use crate::codec::scan::Method;
use crate::codec::sse::Event;
use crate::http::classify::{Classified, Head};
use crate::http::event_stream::{EventRule, Screen};
use crate::http::peek::Peek;
use crate::rejection::Rejection;

/// One of two things, for the rules of two layers in one.
pub(crate) enum Either<A, B> {
    Left(A),
    Right(B),
}

/// Two layers' rules in one: the first is the outer layer of the two
/// stacked. Their interests must not overlap, so a request is taken by one
/// of them at most; either may refuse it, the first before the second.
impl<A: Rules, B: Rules> Rules for (A, B) {
    type Take = Either<A::Take, B::Take>;
    type Whole = Either<A::Whole, B::Whole>;
    type Screen = Either<A::Screen, B::Screen>;

    fn settings(&self) -> Settings {
        self.0.settings().and(self.1.settings())
    }

    fn check_head(&self, head: &Head) -> Result<(), Rejection> {
        self.0.check_head(head)?;
        self.1.check_head(head)
    }

    fn decide<Bd: Body>(
        &self,
        head: &Head,
        classified: &Classified,
        peek: &Peek<Bd>,
        parts: &Parts,
    ) -> Decision<Self> {
        let a = self.0.decide(head, classified, peek, parts);
        if let Decision::Refuse(rejection) = a {
            return Decision::Refuse(rejection);
        }
        let b = self.1.decide(head, classified, peek, parts);
        match (a, b) {
            (_, Decision::Refuse(rejection)) => Decision::Refuse(rejection),
            (Decision::Take(a), b) => {
                debug_assert!(matches!(b, Decision::Pass), "both layers took a request");
                Decision::Take(Either::Left(a))
            }
            (Decision::Whole { whole, limit }, b) => {
                debug_assert!(matches!(b, Decision::Pass), "both layers took a request");
                let whole = Either::Left(whole);
                Decision::Whole { whole, limit }
            }
            (_, Decision::Take(b)) => Decision::Take(Either::Right(b)),
            (_, Decision::Whole { whole, limit }) => {
                let whole = Either::Right(whole);
                Decision::Whole { whole, limit }
            }
            _ => Decision::Pass,
        }
    }

    fn whole<T, F>(&self, whole: Self::Whole, parts: Parts, body: Bytes, take: F) -> Later<T>
    where
        F: FnOnce(Self::Take) -> T + Send + 'static,
    {
        match whole {
            Either::Left(whole) => self.0.whole(whole, parts, body, |t| take(Either::Left(t))),
            Either::Right(whole) => self.1.whole(whole, parts, body, |t| take(Either::Right(t))),
        }
    }

    /// The first layer's screen, or else the second's: one layer screens.
    fn screen(&self, parts: &Parts) -> Option<Self::Screen> {
        let first = self.0.screen(parts).map(Either::Left);
        first.or_else(|| self.1.screen(parts).map(Either::Right))
    }

    /// The message of the layer that intercepts `method`.
    fn in_batch(&self, method: Method) -> &'static str {
        match self.0.settings().interest.contains(method) {
            true => self.0.in_batch(method),
            false => self.1.in_batch(method),
        }
    }
}

impl<A: Take, B: Take> Take for Either<A, B> {
    type Answer = Either<A::Answer, B::Answer>;

    fn into_answer(self) -> Option<Self::Answer> {
        match self {
            Either::Left(take) => take.into_answer().map(Either::Left),
            Either::Right(take) => take.into_answer().map(Either::Right),
        }
    }

    fn screens(&self) -> bool {
        match self {
            Either::Left(take) => take.screens(),
            Either::Right(take) => take.screens(),
        }
    }

    fn answer_alone(&mut self) -> Option<Response<Bytes>> {
        match self {
            Either::Left(take) => take.answer_alone(),
            Either::Right(take) => take.answer_alone(),
        }
    }
}

impl<A: Screen, B: Screen> Screen for Either<A, B> {
    fn poll_admits(&mut self, cx: &mut Context<'_>, event: &Event) -> Poll<bool> {
        match self {
            Either::Left(screen) => screen.poll_admits(cx, event),
            Either::Right(screen) => screen.poll_admits(cx, event),
        }
    }
}

impl<A: EventRule, B: EventRule> EventRule for Either<A, B> {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        match self {
            Either::Left(rule) => rule.on_event(event, out),
            Either::Right(rule) => rule.on_event(event, out),
        }
    }

    fn passes_rest(&self) -> bool {
        match self {
            Either::Left(rule) => rule.passes_rest(),
            Either::Right(rule) => rule.passes_rest(),
        }
    }

    fn on_unterminated(&mut self, tail: Bytes, out: &mut VecDeque<Bytes>) {
        match self {
            Either::Left(rule) => rule.on_unterminated(tail, out),
            Either::Right(rule) => rule.on_unterminated(tail, out),
        }
    }
}

impl<A: AnswerRule, B: AnswerRule> AnswerRule for Either<A, B> {
    type Events = Either<A::Events, B::Events>;

    fn limit(&self) -> usize {
        match self {
            Either::Left(rule) => rule.limit(),
            Either::Right(rule) => rule.limit(),
        }
    }

    fn id(&self) -> &str {
        match self {
            Either::Left(rule) => rule.id(),
            Either::Right(rule) => rule.id(),
        }
    }

    fn rewrite(&self, text: &str) -> Rewritten {
        match self {
            Either::Left(rule) => rule.rewrite(text),
            Either::Right(rule) => rule.rewrite(text),
        }
    }

    fn into_events(self) -> Self::Events {
        match self {
            Either::Left(rule) => Either::Left(rule.into_events()),
            Either::Right(rule) => Either::Right(rule.into_events()),
        }
    }

    fn vouched(&self, answer: &response::Parts, body: &dyn Any) -> bool {
        match self {
            Either::Left(rule) => rule.vouched(answer, body),
            Either::Right(rule) => rule.vouched(answer, body),
        }
    }
}

#[cfg(test)]
mod tests {

    use http_body_util::Empty;

    use super::*;
    use crate::codec::scan::Outcome;
    use crate::http::classify::{Interest, Shape};
    use crate::http::peek::{PeekLimits, Scan};

    /// A layer's rules that decide as told, by name, and record nothing:
    /// enough to see which of two layers' decisions stands.
    #[derive(Clone)]
    struct Told {
        name: &'static str,
        interest: Interest,
        head: Result<(), Rejection>,
        decision: Telling,
        screens: bool,
    }

    struct Named(&'static str);

    impl Take for Named {
        type Answer = Named;

        fn into_answer(self) -> Option<Named> {
            Some(self)
        }

        fn screens(&self) -> bool {
            true
        }
    }

    impl AnswerRule for Named {
        type Events = Named;

        fn limit(&self) -> usize {
            0
        }

        fn id(&self) -> &str {
            self.0
        }

        fn rewrite(&self, _: &str) -> Rewritten {
            Rewritten::Kept
        }

        fn into_events(self) -> Named {
            self
        }
    }

    impl EventRule for Named {
        fn on_event(&mut self, _: Event, _: &mut VecDeque<Bytes>) {}

        fn on_unterminated(&mut self, _: Bytes, _: &mut VecDeque<Bytes>) {}
    }

    impl Screen for Named {
        fn poll_admits(&mut self, _: &mut Context<'_>, _: &Event) -> Poll<bool> {
            Poll::Ready(true)
        }
    }

    impl Rules for Told {
        type Take = Named;
        type Whole = Named;
        type Screen = Named;

        fn settings(&self) -> Settings {
            let limit = if self.name == "outer" { 10 } else { 20 };
            let mut settings = Settings::new(self.interest, limit, 30 - limit);
            if self.name == "outer" {
                settings.scan = Scan::UntilDecided;
            }
            settings
        }

        fn check_head(&self, _: &Head) -> Result<(), Rejection> {
            self.head.clone()
        }

        fn decide<B: Body>(
            &self,
            _: &Head,
            _: &Classified,
            _: &Peek<B>,
            _: &Parts,
        ) -> Decision<Self> {
            (self.decision)(self.name)
        }

        fn whole<T, F>(&self, _: Named, _: Parts, _: Bytes, _: F) -> Later<T>
        where
            F: FnOnce(Named) -> T + Send + 'static,
        {
            unreachable!("not read whole here")
        }

        fn screen(&self, _: &Parts) -> Option<Named> {
            self.screens.then_some(Named(self.name))
        }

        fn in_batch(&self, _: Method) -> &'static str {
            self.name
        }
    }

    /// How a layer decides, by its name.
    type Telling = fn(&'static str) -> Decision<Told>;

    fn pass(_: &'static str) -> Decision<Told> {
        Decision::Pass
    }

    fn take(name: &'static str) -> Decision<Told> {
        Decision::Take(Named(name))
    }

    fn whole(name: &'static str) -> Decision<Told> {
        Decision::Whole {
            whole: Named(name),
            limit: 5,
        }
    }

    fn parse(_: &'static str) -> Decision<Told> {
        Decision::Refuse(Rejection::Parse)
    }

    fn encoded(_: &'static str) -> Decision<Told> {
        Decision::Refuse(Rejection::Encoded)
    }

    fn layer(name: &'static str, decision: Telling) -> Told {
        let interest = match name {
            "outer" => Interest::of(&[Method::Initialize, Method::Discover]),
            _ => Interest::of(&[Method::Listen, Method::Subscribe]),
        };
        Told {
            name,
            interest,
            head: Ok(()),
            decision,
            screens: false,
        }
    }

    /// What the pair of `outer` and `inner` decides, as `outer:…` /
    /// `inner:…` for a take or a whole read, or the rejection.
    fn decided(outer: Told, inner: Told) -> String {
        let (parts, ()) = http::Request::post("/mcp").body(()).unwrap().into_parts();
        let head = Head::read(&parts);
        let classified = Classified {
            first: Some(Method::Other),
            shape: Shape::Decided(Outcome::Method(Method::Other)),
        };
        let limits = PeekLimits {
            method: 64,
            listen: 64,
        };
        let peek = Peek::new(Empty::<Bytes>::new(), limits, Scan::UntilDecided);
        match (outer, inner).decide(&head, &classified, &peek, &parts) {
            Decision::Pass => "pass".into(),
            Decision::Take(Either::Left(Named(n)) | Either::Right(Named(n))) => format!("take {n}"),
            Decision::Whole {
                whole: Either::Left(Named(n)) | Either::Right(Named(n)),
                limit,
            } => format!("whole {n} {limit}"),
            Decision::Refuse(rejection) => format!("refuse {rejection:?}"),
        }
    }

    /// A refusal of either layer stands over a take of the other, the outer
    /// layer's first; a take or a whole read goes to the layer that asked.
    #[test]
    fn refusals_come_first_and_the_outer_layers_before_the_inner() {
        let cases: [(Telling, Telling, &str); 9] = [
            (pass, pass, "pass"),
            (take, pass, "take outer"),
            (pass, take, "take inner"),
            (whole, pass, "whole outer 5"),
            (pass, whole, "whole inner 5"),
            (parse, take, "refuse Parse"),
            (take, parse, "refuse Parse"),
            (whole, parse, "refuse Parse"),
            (parse, encoded, "refuse Parse"),
        ];
        for (outer, inner, expected) in cases {
            assert_eq!(
                decided(layer("outer", outer), layer("inner", inner)),
                expected
            );
        }
        assert_eq!(
            decided(layer("outer", encoded), layer("inner", parse)),
            "refuse Encoded"
        );
    }

    /// The head: the outer layer's refusal before the inner's.
    #[test]
    fn the_outer_layers_head_check_comes_first() {
        let (parts, ()) = http::Request::post("/mcp").body(()).unwrap().into_parts();
        let head = Head::read(&parts);
        let mut outer = layer("outer", pass);
        let mut inner = layer("inner", pass);
        assert_eq!((outer.clone(), inner.clone()).check_head(&head), Ok(()));
        inner.head = Err(Rejection::HeaderMismatch);
        assert_eq!(
            (outer.clone(), inner.clone()).check_head(&head),
            Err(Rejection::HeaderMismatch)
        );
        outer.head = Err(Rejection::Parse);
        assert_eq!((outer, inner).check_head(&head), Err(Rejection::Parse));
    }

    /// Both interests, the lower limits, the further scan; one layer
    /// screens, the outer if it does; a batch is refused in the words of
    /// the layer that intercepts its method.
    #[test]
    fn the_pair_merges_settings_picks_one_screen_and_routes_batch_messages() {
        let (outer, mut inner) = (layer("outer", pass), layer("inner", pass));
        let settings = (outer.clone(), inner.clone()).settings();
        assert!(settings.interest.contains(Method::Initialize));
        assert!(settings.interest.contains(Method::Listen));
        assert_eq!((settings.limits.method, settings.limits.listen), (10, 10));
        assert!(matches!(settings.scan, Scan::Watching));

        let (parts, ()) = http::Request::post("/mcp").body(()).unwrap().into_parts();
        assert!((outer.clone(), inner.clone()).screen(&parts).is_none());
        inner.screens = true;
        let screen = (outer.clone(), inner.clone()).screen(&parts);
        assert!(matches!(screen, Some(Either::Right(Named("inner")))));
        let mut both = outer.clone();
        both.screens = true;
        let screen = (both, inner.clone()).screen(&parts);
        assert!(matches!(screen, Some(Either::Left(Named("outer")))));

        let pair = (outer, inner);
        assert_eq!(pair.in_batch(Method::Discover), "outer");
        assert_eq!(pair.in_batch(Method::Subscribe), "inner");
    }
}
