//! The accept loop: HTTP/2 by prior knowledge and HTTP/1.1, however their first bytes arrive.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::{Server, MODERN, WAIT};

/// The accept loop serves HTTP/2 by prior knowledge beside HTTP/1.1 (which
/// every other test here goes over).
#[tokio::test]
async fn http2_by_prior_knowledge_is_served_by_the_accept_loop() {
    let server = Server::start().await;
    let tcp = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    discover_over_http2(tcp, server.port).await;
    server.stop().await;
}

/// The HTTP/2 preface in two parts, the second a moment after the first:
/// the accept loop, having seen a part of it, reads the rest.
#[tokio::test]
async fn http2_whose_preface_comes_in_two_parts_is_served() {
    let server = Server::start().await;
    let tcp = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    discover_over_http2(SplitFirstWrite::new(tcp), server.port).await;
    server.stop().await;
}

/// An HTTP/1.1 request whose first byte (the preface's first) comes alone:
/// the accept loop waits for the next before it tells the two apart.
#[tokio::test]
async fn http1_whose_first_byte_comes_alone_is_served() {
    let server = Server::start().await;
    let port = server.port;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
         Mcp-Method: server/discover\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut split = SplitFirstWrite::new(&mut tcp);
    split.write_all(request.as_bytes()).await.expect("send");
    let mut answer = String::new();
    timeout(WAIT, tcp.read_to_string(&mut answer))
        .await
        .expect("bounded")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"capabilities\""), "{answer}");
    server.stop().await;
}

/// A `server/discover` over HTTP/2 on `io`: answered 200, over HTTP/2,
/// with the capabilities.
async fn discover_over_http2<I>(io: I, port: u16)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let (mut send, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let request = http::Request::post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "server/discover")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let response = timeout(WAIT, send.send_request(request))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("\"capabilities\""), "{text}");
}

/// A connection whose first write sends its first byte alone, and whose
/// next waits a moment: the server sees a part of what comes first.
struct SplitFirstWrite<W> {
    inner: W,
    written: bool,
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<W> SplitFirstWrite<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            written: false,
            pause: None,
        }
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for SplitFirstWrite<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if !this.written {
            let sent =
                std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_write(cx, &buf[..1]))?;
            this.written = true;
            this.pause = Some(Box::pin(tokio::time::sleep(Duration::from_millis(100))));
            return std::task::Poll::Ready(Ok(sent));
        }
        if let Some(pause) = this.pause.as_mut() {
            std::task::ready!(std::future::Future::poll(pause.as_mut(), cx));
            this.pause = None;
        }
        std::pin::Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<W: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for SplitFirstWrite<W> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}
