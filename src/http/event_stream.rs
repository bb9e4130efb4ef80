//! A response body that decides, event by event, what of an SSE stream
//! goes on: each event is kept byte for byte, replaced, or dropped, one at a
//! time as it completes; the stream is never buffered whole.
//!
//! Two parts decide: an [`EventRule`] (what the layer makes of the answer to
//! a request it took) and, before it, an optional [`Screen`] (which events
//! may reach this caller at all), which may have to look something up first.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use pin_project_lite::pin_project;

use super::rewind::poll_bytes;
use crate::codec::sse::{Event, Parser};

/// What a layer does with the events of a stream.
pub(crate) trait EventRule {
    /// Pushes what goes out for `event`: its `raw` bytes, a rewrite, nothing, or more.
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>);

    /// True once every further byte passes untouched, so parsing can stop
    /// (unless a [`Screen`] goes on judging every event).
    fn passes_rest(&self) -> bool {
        false
    }

    /// Pushes what goes out for the unterminated last block of a stream
    /// that ended inside an event (the SSE rules discard it).
    fn on_unterminated(&mut self, tail: Bytes, out: &mut VecDeque<Bytes>);
}

/// Which events of a stream may reach its caller, judged before the
/// [`EventRule`]; a judgment may wait on a lookup.
pub(crate) trait Screen {
    /// Whether `event` goes on. `Pending` while the screen looks something
    /// up; it is asked about the same event again when woken.
    fn poll_admits(&mut self, cx: &mut Context<'_>, event: &Event) -> Poll<bool>;
}

/// The screen of a layer that screens nothing: it never exists.
pub(crate) enum Unscreened {}

impl Screen for Unscreened {
    fn poll_admits(&mut self, _: &mut Context<'_>, _: &Event) -> Poll<bool> {
        match *self {}
    }
}

/// The rule of a stream that is only screened: every event goes on as
/// parsed; the unterminated last block, which the SSE rules discard, does not.
pub(crate) struct Verbatim;

impl EventRule for Verbatim {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        emit_parsed(event, out);
    }

    fn on_unterminated(&mut self, _: Bytes, _: &mut VecDeque<Bytes>) {
        tracing::debug!("event stream: dropped an unterminated last block");
    }
}

/// Pushes `event` as it was parsed: its bytes when they say exactly what
/// was parsed of it, else its fields written anew; a block without data
/// whose bytes say more than its fields is left out (it dispatches nothing).
/// Data that is not UTF-8 passes as it came: every client decodes it as the
/// parser did, with replacement characters.
pub(crate) fn emit_parsed(event: Event, out: &mut VecDeque<Bytes>) {
    if event.is_plain() {
        out.push_back(event.raw);
    } else if let Some(data) = event.data() {
        out.push_back(event.with_data(&data));
    }
}

/// Where an [`EventStream`] is.
enum Phase {
    /// Reading the body, its events parsed.
    Parsing,
    /// Reading the body, its bytes passed on as they come: the rule passes
    /// the rest and no screen judges it.
    Raw,
    /// The body ended: the parser's complete events go first, then its
    /// unterminated last block, if any.
    Closing(Option<Bytes>),
    /// Everything went out but the trailers.
    Ended,
}

pin_project! {
    /// An SSE body filtered through an optional [`Screen`], then an [`EventRule`].
    pub(crate) struct EventStream<B, R, S> {
        #[pin]
        body: B,
        parser: Parser,
        rule: R,
        screen: Option<S>,
        // An event the screen is still judging.
        held: Option<Event>,
        out: VecDeque<Bytes>,
        trailers: Option<HeaderMap>,
        phase: Phase,
        // The span of the request the stream answers, if it is observed:
        // what the rule and the screen log is the request's.
        span: tracing::Span,
    }
}

impl<B, R> EventStream<B, R, Unscreened> {
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn new(body: B, rule: R) -> Self {
        Self::screened(body, rule, None)
    }
}

impl<B, R, S> EventStream<B, R, S> {
    pub(crate) fn screened(body: B, rule: R, screen: Option<S>) -> Self {
        Self {
            body,
            parser: Parser::new(),
            rule,
            screen,
            held: None,
            out: VecDeque::new(),
            trailers: None,
            phase: Phase::Parsing,
            span: tracing::Span::current(),
        }
    }
}

impl<B, R, S> Body for EventStream<B, R, S>
where
    B: Body,
    R: EventRule,
    S: Screen,
{
    type Data = Bytes;
    type Error = B::Error;

    // Out of line: it is large, and a body that inlines it (a layer's, in
    // front of every kind of answer) would pay for it on every frame of a
    // stream passed untouched.
    #[inline(never)]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        let _entered = this.span.enter();
        loop {
            if let Some(chunk) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            let event = match this.phase {
                Phase::Ended => {
                    return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
                }
                // Unscreened: nothing is ever held.
                Phase::Raw => None,
                Phase::Parsing | Phase::Closing(_) => {
                    this.held.take().or_else(|| this.parser.next_event())
                }
            };
            if let Some(event) = event {
                if let Some(screen) = this.screen.as_mut() {
                    match screen.poll_admits(cx, &event) {
                        Poll::Pending => {
                            *this.held = Some(event);
                            return Poll::Pending;
                        }
                        Poll::Ready(false) => continue,
                        Poll::Ready(true) => {}
                    }
                }
                ruled(
                    event,
                    this.rule,
                    this.screen.is_some(),
                    this.parser,
                    this.out,
                    this.phase,
                );
                continue;
            }
            if let Phase::Closing(tail) = this.phase {
                let tail = tail.take();
                *this.phase = Phase::Ended;
                if let Some(tail) = tail {
                    match this.rule.passes_rest() {
                        // Screened past the rule: the screen cannot judge
                        // what the SSE rules discard anyway.
                        true => Verbatim.on_unterminated(tail, this.out),
                        false => this.rule.on_unterminated(tail, this.out),
                    }
                }
                continue;
            }
            match ready!(poll_bytes(this.body.as_mut(), cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(chunk) if matches!(this.phase, Phase::Raw) => {
                        if !chunk.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(chunk))));
                        }
                    }
                    Ok(chunk) => this.parser.push(chunk),
                    Err(frame) => {
                        *this.trailers = frame.into_trailers().ok();
                        end_input(this.parser, this.phase);
                    }
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => end_input(this.parser, this.phase),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Ended) && self.out.is_empty() && self.trailers.is_none()
    }
}

/// What goes out for an admitted `event`: the rule's say, or the event as
/// parsed once the rule passes the rest of a screened stream. When the rule
/// comes to pass the rest of an unscreened stream, what the parser holds
/// goes out as it came, and so does the rest of the body.
#[inline]
fn ruled<R: EventRule>(
    event: Event,
    rule: &mut R,
    screened: bool,
    parser: &mut Parser,
    out: &mut VecDeque<Bytes>,
    phase: &mut Phase,
) {
    if rule.passes_rest() {
        // Only a screened stream is still parsed here.
        emit_parsed(event, out);
        return;
    }
    rule.on_event(event, out);
    if !rule.passes_rest() || screened {
        return;
    }
    while let Some(event) = parser.next_event() {
        out.push_back(event.raw);
    }
    let tail = parser.finish();
    while let Some(event) = parser.next_event() {
        out.push_back(event.raw);
    }
    out.extend(tail);
    *phase = match phase {
        // The body had ended: its unterminated last block goes too.
        Phase::Closing(tail) => {
            out.extend(tail.take());
            Phase::Ended
        }
        _ => Phase::Raw,
    };
}

/// The body ended: the parser gives up its incomplete tail (its complete
/// blocks stay to be taken first).
fn end_input(parser: &mut Parser, phase: &mut Phase) {
    *phase = match phase {
        Phase::Raw => Phase::Ended,
        _ => Phase::Closing(parser.finish()),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    /// Drops events whose data is "drop", upper-cases "up", passes the rest
    /// untouched after an event with data "done".
    #[derive(Default)]
    struct Rule {
        done: bool,
        seen: usize,
    }

    impl EventRule for Rule {
        fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
            self.seen += 1;
            match event.data().as_deref() {
                Some("drop") => {}
                Some("up") => out.push_back(Bytes::from_static(b"data: UP\n\n")),
                Some("done") => {
                    self.done = true;
                    out.push_back(event.raw);
                }
                _ => out.push_back(event.raw),
            }
        }

        fn passes_rest(&self) -> bool {
            self.done
        }

        fn on_unterminated(&mut self, tail: Bytes, out: &mut VecDeque<Bytes>) {
            out.push_back(tail);
        }
    }

    async fn run(input: &[u8], split: usize) -> (Vec<u8>, Option<HeaderMap>) {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-end", "1".parse().unwrap());
        let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> = input
            .chunks(split.max(1))
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        frames.push(Ok(Frame::trailers(trailers)));
        let body = StreamBody::new(futures_util::stream::iter(frames));
        let collected = EventStream::new(body, Rule::default())
            .collect()
            .await
            .unwrap();
        let trailers = collected.trailers().cloned();
        (collected.to_bytes().to_vec(), trailers)
    }

    #[tokio::test]
    async fn keeps_replaces_drops_and_passes_the_rest_at_every_split() {
        let input = b": ping\n\ndata: keep\r\n\r\ndata: drop\n\ndata: up\n\nid: 1\ndata: done\n\ndata: drop\n\ndata: tail";
        let expected = b": ping\n\ndata: keep\r\n\r\ndata: UP\n\nid: 1\ndata: done\n\ndata: drop\n\ndata: tail";
        for split in 1..=input.len() {
            let (out, trailers) = run(input, split).await;
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(expected),
                "split {split}"
            );
            assert_eq!(trailers.unwrap()["x-end"], "1");
        }
    }

    /// Drops events whose data is "secret", and makes every event wait once.
    #[derive(Default)]
    struct Slow {
        waited: bool,
    }

    impl Screen for Slow {
        fn poll_admits(&mut self, cx: &mut Context<'_>, event: &Event) -> Poll<bool> {
            if !std::mem::take(&mut self.waited) {
                self.waited = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(event.data().as_deref() != Some("secret"))
        }
    }

    #[tokio::test]
    async fn a_screen_that_waits_keeps_the_order_at_every_split() {
        // The rule passes the rest after "done": the screen still judges it.
        let input = b"data: a\n\ndata: secret\n\ndata: up\n\ndata: done\n\ndata: secret\r\n\r\nx: 1\ndata: b\n\ndata: tail";
        let expected = "data: a\n\ndata: UP\n\ndata: done\n\ndata: b\n\n";
        for split in 1..=input.len() {
            let mut trailers = HeaderMap::new();
            trailers.insert("x-end", "1".parse().unwrap());
            let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> = input
                .chunks(split)
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            frames.push(Ok(Frame::trailers(trailers)));
            let body = StreamBody::new(futures_util::stream::iter(frames));
            let screened = EventStream::screened(body, Rule::default(), Some(Slow::default()));
            let collected = screened.collect().await.unwrap();
            assert_eq!(collected.trailers().unwrap()["x-end"], "1", "split {split}");
            assert_eq!(
                String::from_utf8_lossy(&collected.to_bytes()),
                expected,
                "split {split}"
            );
        }
    }

    #[tokio::test]
    async fn body_errors_pass_through() {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"data: a\n\n"))),
            Err(std::io::Error::other("gone")),
        ];
        let mut body = EventStream::new(
            StreamBody::new(futures_util::stream::iter(frames)),
            Rule::default(),
        );
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "data: a\n\n"
        );
        assert!(body.frame().await.unwrap().is_err());
    }
}
