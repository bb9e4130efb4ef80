//! [`Watch`]: a request body cut short at a second top-level `method`.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::codec::scan::{Outcome, Scanner};

pin_project! {
    /// A body with the method scanner beside it. Off, it is the body. Once
    /// started, when the scan read the body's first `method` but was left
    /// undecided, its bytes keep being scanned as the inner service reads
    /// them: a second `method`, or bytes the scan cannot read as JSON (a
    /// lenient parser might), could hide a request the layer did not
    /// classify, so the body ends there.
    pub(crate) struct Watch<B> {
        #[pin]
        body: B,
        scanner: Scanner,
        // Bytes the body yields first that the scanner already read.
        seen: usize,
        state: State,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Off,
    Watching,
    Cut,
}

impl<B> Watch<B> {
    /// `body`, not watched yet, with `scanner` for the layer to feed.
    pub(crate) fn new(body: B, scanner: Scanner) -> Self {
        Self {
            body,
            scanner,
            seen: 0,
            state: State::Off,
        }
    }

    /// The body.
    pub(crate) fn body(&self) -> &B {
        &self.body
    }

    /// The scanner.
    pub(crate) fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// The body and the scanner, to read the one and feed the other.
    pub(crate) fn parts(self: Pin<&mut Self>) -> (Pin<&mut B>, &mut Scanner) {
        let this = self.project();
        (this.body, this.scanner)
    }

    /// Starts watching: the scanner already read the first `seen` bytes the
    /// body yields, and reads the rest as it passes.
    pub(crate) fn start(self: Pin<&mut Self>, seen: usize) {
        let this = self.project();
        *this.seen = seen;
        *this.state = State::Watching;
    }
}

/// Over [`Rewind`](super::rewind::Rewind), whose data are `Bytes` already.
impl<B: Body<Data = Bytes>> Body for Watch<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        match *this.state {
            State::Off => return this.body.poll_frame(cx),
            State::Cut => return Poll::Ready(None),
            State::Watching => {}
        }
        let frame = ready!(this.body.poll_frame(cx));
        if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref()) {
            let skip = data.len().min(*this.seen);
            *this.seen -= skip;
            #[cfg(test)]
            super::peek::tally::scan(data.len() - skip);
            match this.scanner.feed(&data[skip..]) {
                Some(Outcome::DuplicateMethod | Outcome::Invalid) => {
                    tracing::debug!(
                        "request body has a second top-level `method` or is not JSON; cut short"
                    );
                    *this.state = State::Cut;
                    return Poll::Ready(None);
                }
                Some(_) => *this.state = State::Off,
                None => {}
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.state == State::Cut || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Cut => SizeHint::with_exact(0),
            _ => self.body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    fn frames(chunks: &[&'static [u8]]) -> impl Body<Data = Bytes, Error = std::io::Error> {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_second_method_cuts_the_body_short() {
        let head: &[u8] = br#"{"method":"tools/call","#;
        let mut scanner = Scanner::whole();
        assert_eq!(scanner.feed(head), None);
        let body = frames(&[
            head,
            b"\"params\":{},",
            b"\"method\":\"subscriptions/listen\"}",
        ]);
        let mut watched = Box::pin(Watch::new(body, scanner));
        watched.as_mut().start(head.len());
        let all = watched.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], br#"{"method":"tools/call","params":{},"#);
    }

    #[tokio::test]
    async fn off_it_is_the_body() {
        let body = http_body_util::Full::new(Bytes::from_static(b"{\"a\":1,\"method\":2}"));
        let watched = Watch::new(body, Scanner::whole());
        assert_eq!(watched.size_hint().exact(), Some(18));
        let all = watched.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"{\"a\":1,\"method\":2}");
    }
}
