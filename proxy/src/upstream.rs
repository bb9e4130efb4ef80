//! The connections to an HTTP/1.1 upstream, pooled, each driven by the
//! task of the request it carries.
//!
//! hyper's pooled client runs every connection in a task of its own, so
//! each answer crosses from that task to the request's, frame by frame:
//! the end of a short answer comes one task switch after its data, and the
//! client gets the answer in two writes. Here a request takes a connection
//! out of the pool and polls it itself, while it waits for the answer's
//! head and then with every poll of the answer's body: what the upstream
//! sent at once goes on at once. When the body ends, the connection goes
//! back to the pool (at most [`MAX_IDLE`], none kept longer than the idle
//! time); an answer dropped before its end closes its connection. A pooled
//! connection the upstream closed meanwhile is noticed when a request is
//! handed to it, and the request goes on a new connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What goes to the upstream.
pub type UpstreamBody =
    http_body_util::combinators::UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Most connections kept idle.
pub const MAX_IDLE: usize = 256;
/// How long an idle connection is kept.
const IDLE: Duration = Duration::from_secs(60);

/// One connection: the handle requests go through, and the connection
/// itself, which whoever holds it polls. The connection is boxed: an
/// answer's body holds a `Link`, and every body through the proxy, a held
/// listen stream's included, has the size of the largest.
struct Link {
    sender: SendRequest<UpstreamBody>,
    connection: Box<Connection<TokioIo<TcpStream>, UpstreamBody>>,
}

/// Why a request got no answer from the upstream.
#[derive(Debug)]
pub enum Failure {
    /// No connection could be made (refused, unreachable, timed out).
    Connect(std::io::Error),
    /// The connection failed before the answer's head.
    Exchange(hyper::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(error) => write!(f, "connect: {error}"),
            Failure::Exchange(error) => write!(f, "exchange: {error}"),
        }
    }
}

/// The pool of one upstream; cloning is an `Arc` clone.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    /// `host:port` to connect to.
    address: String,
    connect_timeout: Duration,
    idle: Mutex<Vec<(Link, Instant)>>,
}

impl Pool {
    /// The pool of the upstream at `address` (`host:port`).
    pub fn new(address: String, connect_timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                address,
                connect_timeout,
                idle: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Sends `request` and waits for its answer's head; the answer's body
    /// carries the connection until its end.
    pub async fn send(&self, request: Request<UpstreamBody>) -> Result<Response<Pooled>, Failure> {
        let mut request = request;
        loop {
            let (link, pooled) = match self.inner.checkout() {
                Some(link) => (link, true),
                None => (self.inner.connect().await?, false),
            };
            match (Exchange::new(link, request).await, pooled) {
                (Ok((answer, link)), _) => {
                    let pool = self.inner.clone();
                    return Ok(answer.map(|body| Pooled {
                        body,
                        link: Some(link),
                        done: false,
                        pool,
                    }));
                }
                // A pooled connection the upstream had closed: the request
                // was not sent on it.
                (Err(Unsent::Returned(returned)), true) => request = *returned,
                (Err(Unsent::Returned(_)), false) => {
                    let closed =
                        std::io::Error::new(std::io::ErrorKind::ConnectionReset, "closed at once");
                    return Err(Failure::Connect(closed));
                }
                (Err(Unsent::Failed(error)), _) => return Err(Failure::Exchange(error)),
            }
        }
    }

    /// How many connections are idle in the pool.
    pub fn idle(&self) -> usize {
        self.inner.lock().len()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Vec<(Link, Instant)>> {
        // A list of connections: consistent after any panic.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently used idle connection that is still open.
    fn checkout(&self) -> Option<Link> {
        let now = Instant::now();
        let mut idle = self.lock();
        while let Some((mut link, since)) = idle.pop() {
            if now.duration_since(since) >= IDLE || link.sender.is_closed() {
                continue;
            }
            // What the upstream did meanwhile (closed it, say) is taken in.
            let waker = std::task::Waker::noop();
            let polled = Pin::new(&mut link.connection).poll(&mut Context::from_waker(waker));
            if polled.is_pending() && !link.sender.is_closed() {
                return Some(link);
            }
        }
        None
    }

    /// Keeps `link` for the next request.
    fn checkin(&self, link: Link) {
        if link.sender.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut idle = self.lock();
        idle.retain(|(_, since)| now.duration_since(*since) < IDLE);
        if idle.len() < MAX_IDLE {
            idle.push((link, now));
        }
    }

    async fn connect(&self) -> Result<Link, Failure> {
        let connect = TcpStream::connect(self.address.as_str());
        let tcp = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(error)) => return Err(Failure::Connect(error)),
            Err(_) => {
                let late = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
                return Err(Failure::Connect(late));
            }
        };
        let _ = tcp.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(Failure::Exchange)?;
        let connection = Box::new(connection);
        Ok(Link { sender, connection })
    }
}

/// Why a request was not answered on a connection.
enum Unsent {
    /// The connection would not take it: here it is again.
    Returned(Box<Request<UpstreamBody>>),
    Failed(hyper::Error),
}

type Answer = Pin<
    Box<
        dyn Future<
                Output = Result<
                    Response<Incoming>,
                    hyper::client::conn::TrySendError<Request<UpstreamBody>>,
                >,
            > + Send,
    >,
>;

/// A request on a connection, the connection polled until the answer's
/// head.
struct Exchange {
    link: Option<Link>,
    answer: Answer,
    closed: bool,
}

impl Exchange {
    fn new(mut link: Link, request: Request<UpstreamBody>) -> Self {
        let answer = Box::pin(link.sender.try_send_request(request));
        Self {
            link: Some(link),
            answer,
            closed: false,
        }
    }
}

impl Future for Exchange {
    type Output = Result<(Response<Incoming>, Link), Unsent>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            if let Poll::Ready(answer) = this.answer.as_mut().poll(cx) {
                return Poll::Ready(match answer {
                    Ok(answer) => Ok((answer, this.link.take().expect("polled once"))),
                    Err(mut error) => match error.take_message() {
                        Some(request) => Err(Unsent::Returned(Box::new(request))),
                        None => Err(Unsent::Failed(error.into_error())),
                    },
                });
            }
            if this.closed {
                // The connection ended; its answer (an error) comes next.
                return Poll::Pending;
            }
            let link = this.link.as_mut().expect("polled until ready");
            match Pin::new(&mut link.connection).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(_) => this.closed = true,
            }
        }
    }
}

/// An answer's body, with the connection it came on: polling the body
/// polls the connection, and its end gives the connection back.
pub struct Pooled {
    body: Incoming,
    link: Option<Link>,
    /// The connection ended: it is polled no more, nor given back.
    done: bool,
    pool: Arc<Inner>,
}

impl Body for Pooled {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        loop {
            // The connection first: what it reads is the body's at once.
            let mut progressed = false;
            if let (false, Some(link)) = (this.done, this.link.as_mut()) {
                match Pin::new(&mut link.connection).poll(cx) {
                    Poll::Ready(_) => {
                        this.done = true;
                        progressed = true;
                    }
                    Poll::Pending => {}
                }
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(None) => {
                    this.give_back();
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(frame)) => {
                    if this.body.is_end_stream() {
                        this.give_back();
                    }
                    return Poll::Ready(Some(frame));
                }
                Poll::Pending if progressed => {}
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Pooled {
    /// The body ended whole: its connection serves the next request.
    fn give_back(&mut self) {
        if let (false, Some(mut link)) = (self.done, self.link.take()) {
            // Let the connection take in the end of the answer.
            let waker = std::task::Waker::noop();
            let finished = Pin::new(&mut link.connection).poll(&mut Context::from_waker(waker));
            if finished.is_pending() {
                self.pool.checkin(link);
            }
        }
    }
}
