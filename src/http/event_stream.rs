//! A response body that decides, event by event, what of an SSE stream
//! goes on: each event is kept byte for byte, replaced, or dropped, one at a
//! time as it completes; the stream is never buffered whole.

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

    /// True once every further byte passes untouched, so parsing can stop.
    fn passes_rest(&self) -> bool {
        false
    }

    /// Pushes what goes out for the unterminated last block of a stream
    /// that ended inside an event (the SSE rules discard it).
    fn on_unterminated(&mut self, tail: Bytes, out: &mut VecDeque<Bytes>);
}

pin_project! {
    /// An SSE body filtered through an [`EventRule`].
    pub(crate) struct EventStream<B, R> {
        #[pin]
        body: B,
        parser: Parser,
        rule: R,
        out: VecDeque<Bytes>,
        trailers: Option<HeaderMap>,
        ended: bool,
        raw: bool,
    }
}

impl<B, R> EventStream<B, R> {
    pub(crate) fn new(body: B, rule: R) -> Self {
        Self {
            body,
            parser: Parser::new(),
            rule,
            out: VecDeque::new(),
            trailers: None,
            ended: false,
            raw: false,
        }
    }
}

impl<B, R> Body for EventStream<B, R>
where
    B: Body,
    R: EventRule,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        loop {
            if let Some(chunk) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            if let Some(trailers) = this.trailers.take() {
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            if *this.ended {
                return Poll::Ready(None);
            }
            match ready!(poll_bytes(this.body.as_mut(), cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(chunk) => {
                        if *this.raw {
                            if !chunk.is_empty() {
                                return Poll::Ready(Some(Ok(Frame::data(chunk))));
                            }
                            continue;
                        }
                        this.parser.push(chunk);
                        while let Some(event) = this.parser.next_event() {
                            this.rule.on_event(event, this.out);
                            if this.rule.passes_rest() {
                                *this.raw = true;
                                drain(this.parser, this.rule, this.out);
                                break;
                            }
                        }
                    }
                    Err(frame) => {
                        *this.trailers = frame.into_trailers().ok();
                        *this.ended = true;
                        drain(this.parser, this.rule, this.out);
                    }
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => {
                    *this.ended = true;
                    drain(this.parser, this.rule, this.out);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.out.is_empty() && self.trailers.is_none()
    }
}

/// Ends the parse: complete blocks still buffered go through the rule (or
/// pass raw once the rule passes the rest), then the incomplete tail.
fn drain<R: EventRule>(parser: &mut Parser, rule: &mut R, out: &mut VecDeque<Bytes>) {
    let tail = parser.finish();
    while let Some(event) = parser.next_event() {
        if rule.passes_rest() {
            out.push_back(event.raw);
        } else {
            rule.on_event(event, out);
        }
    }
    match tail {
        Some(tail) if rule.passes_rest() => out.push_back(tail),
        Some(tail) => rule.on_unterminated(tail, out),
        None => {}
    }
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
