//! [`Watch`]: a request body cut short at a second top-level `method`.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::rewind::poll_bytes;
use crate::codec::scan::{Outcome, Scanner};

pin_project! {
    /// A body whose bytes keep being scanned as the inner service reads
    /// them, when its first `method` was read but the scan for a second one
    /// was left undecided. A second `method`, or bytes the scan cannot read
    /// as JSON (a lenient parser might), could hide a request the layer did
    /// not classify, so the body ends there. Without a scan it is the body.
    pub(crate) struct Watch<B> {
        #[pin]
        body: B,
        scanner: Option<Box<Scanner>>,
        cut: bool,
    }
}

impl<B> Watch<B> {
    pub(crate) fn new(body: B, scanner: Option<Box<Scanner>>) -> Self {
        Self {
            body,
            scanner,
            cut: false,
        }
    }
}

impl<B: Body> Body for Watch<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        if *this.cut {
            return Poll::Ready(None);
        }
        let Some(scanner) = this.scanner.as_mut() else {
            return poll_bytes(this.body, cx);
        };
        let frame = ready!(poll_bytes(this.body, cx));
        if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref()) {
            match scanner.feed(data) {
                Some(Outcome::DuplicateMethod | Outcome::Invalid) => {
                    tracing::debug!(
                        "request body has a second top-level `method` or is not JSON; cut short"
                    );
                    *this.cut = true;
                    *this.scanner = None;
                    return Poll::Ready(None);
                }
                Some(_) => *this.scanner = None,
                None => {}
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.cut || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.cut {
            true => SizeHint::with_exact(0),
            false => self.body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    #[tokio::test]
    async fn a_second_method_cuts_the_body_short() {
        let mut scanner = Scanner::whole();
        assert_eq!(scanner.feed(br#"{"method":"tools/call","#), None);
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"\"params\":{},"))),
            Ok(Frame::data(Bytes::from_static(
                b"\"method\":\"subscriptions/listen\"}",
            ))),
        ];
        let body = StreamBody::new(futures_util::stream::iter(frames));
        let watched = Watch::new(body, Some(Box::new(scanner)));
        let all = watched.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], br#""params":{},"#);
    }

    #[tokio::test]
    async fn without_a_scan_it_is_the_body() {
        let body = http_body_util::Full::new(Bytes::from_static(b"{\"a\":1,\"method\":2}"));
        let watched = Watch::new(body, None);
        assert_eq!(watched.size_hint().exact(), Some(18));
        let all = watched.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"{\"a\":1,\"method\":2}");
    }
}
