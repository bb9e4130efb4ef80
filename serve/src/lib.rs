//! The accept loop of mcp-edge's binaries (the reference deployment and
//! the proxy): what `axum::serve` does, without hyper-util's version check
//! in front of HTTP/1.
//!
//! Each connection is HTTP/1.1 or, after the HTTP/2 preface, HTTP/2 by
//! prior knowledge, as with `axum::serve` (there are no upgrades: MCP has
//! no use for them); every request carries its peer's address
//! (`ConnectInfo<SocketAddr>`: anonymous listens are counted by it);
//! `TCP_NODELAY` is set (listen streams carry small, latency-sensitive
//! events). The preface is looked for here: behind hyper-util's check
//! (which `axum::serve` uses), hyper's HTTP/1 connection first reads the 24
//! bytes the check read, then reserves its next read beyond them, which
//! grows its read buffer from 8 to 16 KiB on every connection, for as long
//! as it is open (~7 KiB of RSS per listen stream). Here the first bytes
//! are peeked at, and left in the socket for hyper to read; only a
//! connection whose first bytes are a part of the preface, and not all of
//! it yet, has them read here.
//!
//! A connection's state is kept as lean as hyper's own: every event a
//! listen stream sends polls it, and with thousands of streams open each
//! poll finds it out of the cache, one miss per cache line it reads.
//!
//! Connections are bounded (`connections.rs`, [`Limits`]): in time to
//! their first request head and with no request in flight, and in number
//! per peer address. HTTP/2 connections are pinged every 30 s while they
//! hold a stream, and closed when a ping goes unanswered for 20 s.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tower::Service;

mod connections;

pub use crate::connections::Limits;
use crate::connections::{Activity, Connections, InFlight, Slot};

const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// How often an HTTP/2 connection is pinged, and how long a ping may go
/// unanswered.
const H2_PING: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves `router` on `listener` until `shutdown` completes; then every
/// connection is shut down gracefully, and this returns once they are
/// all closed. Connections are bounded by the default [`Limits`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with(listener, router, Limits::default(), shutdown).await
}

/// [`serve`], its connections bounded by `limits`.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let (stop, stopped) = watch::channel(false);
    let (open, mut all_closed) = mpsc::channel::<Infallible>(1);
    let connections = Connections::new(limits);
    tokio::spawn(connections.clone().sweep());
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                accept_failed(error).await;
                continue;
            }
        };
        let Some(slot) = connections.admit(peer) else {
            tracing::debug!(%peer, "a peer at its connection cap: closed");
            continue;
        };
        let activity = Arc::new(Activity::default());
        let service = PeerService(Arc::new(Peer {
            router: router.clone(),
            address: peer,
            activity: activity.clone(),
        }));
        // The task is the connection's future itself: an `async` block
        // that awaited it would hold it twice.
        let task = tokio::spawn(connection(
            tcp,
            service,
            connections.limits().head,
            stopped.clone(),
            (open.clone(), slot),
        ));
        connections.watch(task.abort_handle(), activity);
    }
    drop(listener);
    let _ = stop.send(true);
    drop(open);
    // Every connection task holds a sender: `None` once all are done.
    let _ = all_closed.recv().await;
    Ok(())
}

/// As `axum::serve`: a failed connection is the client's business; any
/// other error (out of file descriptors, say) pauses the loop.
async fn accept_failed(error: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "accept failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Serves one connection, its heads bounded by `head`; `_open` (the
/// accept loop's count, and the peer's) is held until it is closed.
async fn connection(
    tcp: TcpStream,
    service: PeerService,
    head: Duration,
    stopped: watch::Receiver<bool>,
    _open: (mpsc::Sender<Infallible>, Slot),
) {
    if let Err(error) = tcp.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    let result = match peek_preface(&tcp).await {
        Ok(Some(false)) => http1(tcp, service, head, stopped).await,
        Ok(Some(true)) => http2(tcp, service, stopped).await,
        // Boxed: the task of every connection need not have room for this
        // rare one.
        Ok(None) => Box::pin(prefaced(tcp, service, head, stopped)).await,
        Err(error) => return tracing::trace!(%error, "connection closed before a request"),
    };
    if let Err(error) = result {
        tracing::trace!(%error, "connection error");
    }
}

/// Whether `tcp` begins with the HTTP/2 preface, by a peek at its first
/// bytes; `None` when they are a part of it, and not all of it yet. A
/// connection closed before a request is not HTTP/2.
async fn peek_preface(tcp: &TcpStream) -> io::Result<Option<bool>> {
    let mut first = [0; 24];
    let len = tcp.peek(&mut first).await?;
    Ok(if first[..len] != H2_PREFACE[..len] || len == 0 {
        Some(false)
    } else if len == H2_PREFACE.len() {
        Some(true)
    } else {
        None
    })
}

/// Reads the first bytes of a connection until they are not the preface,
/// or are all of it, then serves it.
async fn prefaced(
    tcp: TcpStream,
    service: PeerService,
    head: Duration,
    stopped: watch::Receiver<bool>,
) -> hyper::Result<()> {
    let io = match Prefaced::read(tcp).await {
        Ok(io) => io,
        Err(error) => {
            tracing::trace!(%error, "connection closed before a request");
            return Ok(());
        }
    };
    if io.is_http2() {
        http2(io, service, stopped).await
    } else {
        http1(io, service, head, stopped).await
    }
}

/// `io` served as HTTP/1.1 until it closes, or shut down gracefully once
/// `stopped` turns true; each request head is read within `head`.
fn http1<I>(
    io: I,
    service: PeerService,
    head: Duration,
    stopped: watch::Receiver<bool>,
) -> impl Future<Output = hyper::Result<()>>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head)
        .serve_connection(TokioIo::new(io), service);
    graceful(connection, stopped, |c| c.graceful_shutdown())
}

/// As [`http1`], for HTTP/2.
fn http2<I>(
    io: I,
    service: PeerService,
    stopped: watch::Receiver<bool>,
) -> impl Future<Output = hyper::Result<()>>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Boxed: the task of every HTTP/1 connection need not have room for
    // an HTTP/2 one.
    let connection = Box::pin(
        http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(H2_PING)
            .keep_alive_timeout(H2_PING_TIMEOUT)
            .serve_connection(TokioIo::new(io), service),
    );
    graceful(connection, stopped, |c| {
        c.get_mut().as_mut().graceful_shutdown()
    })
}

/// The router, for the requests of one peer's connection: each carries the
/// peer's address, and is counted in flight until its answer is done. One
/// pointer in the connection's state.
#[derive(Clone)]
struct PeerService(Arc<Peer>);

struct Peer {
    router: Router,
    address: SocketAddr,
    activity: Arc<Activity>,
}

impl hyper::service::Service<http::Request<Incoming>> for PeerService {
    type Response = http::Response<Counted<axum::body::Body>>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        let peer = &*self.0;
        let mut request = request.map(axum::body::Body::new);
        request.extensions_mut().insert(ConnectInfo(peer.address));
        Answer {
            // A `Router` is always ready.
            future: Box::pin(peer.router.clone().call(request)),
            in_flight: Some(peer.activity.begin()),
        }
    }
}

pin_project_lite::pin_project! {
    /// The router's answer, its body counted in flight. The router's
    /// future is boxed: hyper keeps room for a connection's future as long
    /// as the connection lives, and a held stream's connection then keeps
    /// a pointer's room, not the router's whole state.
    struct Answer {
        future: Pin<Box<axum::routing::future::RouteFuture<Infallible>>>,
        in_flight: Option<InFlight>,
    }
}

impl Future for Answer {
    type Output = Result<http::Response<Counted<axum::body::Body>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.future.as_mut().poll(cx))?;
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(response.map(|body| Counted {
            body,
            _in_flight: in_flight,
        })))
    }
}

pin_project_lite::pin_project! {
    /// An answer's body: its request is in flight until it is dropped.
    struct Counted<B> {
        #[pin]
        body: B,
        _in_flight: Option<InFlight>,
    }
}

impl<B: http_body::Body> http_body::Body for Counted<B> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

pin_project_lite::pin_project! {
    /// A connection, shut down gracefully once `stop` completes. A future
    /// of its own, so that each connection's task holds the connection
    /// once: 1.1 KiB a task, where an `async fn` that took the connection
    /// and `select!`ed over it, awaited in an `async` block, made 4 KiB.
    ///
    /// `stop` is polled again only once `signal` (the channel it waits on)
    /// has changed: the task that polled it first, the connection's own,
    /// is the one it wakes, and every other wake (each event a listen
    /// stream sends) leaves it alone instead of taking its lock. What each
    /// poll reads comes first, on the cache line where the task's own
    /// state begins, not after the connection's kilobyte.
    #[repr(C)]
    struct Graceful<C, S> {
        signal: watch::Receiver<bool>,
        waiting: bool,
        stopping: bool,
        shut_down: fn(Pin<&mut C>),
        #[pin]
        stop: S,
        #[pin]
        connection: C,
    }
}

/// `connection`, shut down gracefully with `shut_down` once `stopped`
/// turns true.
fn graceful<C>(
    connection: C,
    stopped: watch::Receiver<bool>,
    shut_down: fn(Pin<&mut C>),
) -> Graceful<C, impl Future<Output = ()>> {
    let signal = stopped.clone();
    let mut stopped = stopped;
    let stop = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    Graceful {
        signal,
        waiting: false,
        stopping: false,
        shut_down,
        stop,
        connection,
    }
}

impl<C: Future, S: Future<Output = ()>> Future for Graceful<C, S> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let mut this = self.project();
        // A closed channel counts as changed: `stop` then completes.
        if !*this.stopping && (!*this.waiting || this.signal.has_changed().unwrap_or(true)) {
            *this.waiting = true;
            if this.stop.poll(cx).is_ready() {
                *this.stopping = true;
                (this.shut_down)(this.connection.as_mut());
            }
        }
        this.connection.poll(cx)
    }
}

/// A connection whose first bytes were read to look for the HTTP/2
/// preface; its first read hands them over with what else the socket
/// holds.
struct Prefaced {
    tcp: TcpStream,
    first: [u8; 24],
    len: usize,
    given: usize,
}

impl Prefaced {
    /// Reads until the bytes are not the preface, or are all of it (as
    /// hyper-util does), or the connection ends.
    async fn read(mut tcp: TcpStream) -> io::Result<Self> {
        let mut first = [0; 24];
        let mut len = 0;
        while len < first.len() && first[..len] == H2_PREFACE[..len] {
            match tcp.read(&mut first[len..]).await? {
                0 => break,
                n => len += n,
            }
        }
        Ok(Self {
            tcp,
            first,
            len,
            given: 0,
        })
    }

    fn is_http2(&self) -> bool {
        self.first[..self.len] == H2_PREFACE[..]
    }
}

impl AsyncRead for Prefaced {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.given == this.len {
            return Pin::new(&mut this.tcp).poll_read(cx, buf);
        }
        let n = (this.len - this.given).min(buf.remaining());
        buf.put_slice(&this.first[this.given..this.given + n]);
        this.given += n;
        if buf.remaining() > 0 {
            // What else has come, in the same read. Not ready: these
            // bytes are enough for now. An error comes again at the next
            // read.
            let _ = Pin::new(&mut this.tcp).poll_read(cx, buf);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Prefaced {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
