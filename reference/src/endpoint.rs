//! The inner service at `/mcp`: listens the layers honoured go to the bus,
//! everything else to rmcp.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use mcp_edge::HonouredFilter;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::StreamableHttpService;
use tower::Service;

use crate::handler::Demo;
use crate::listen::{ListenEndpoint, McpBody};

/// rmcp's Streamable HTTP service: stateless for 2026-07-28 requests, with
/// sessions for the legacy era (an `initialize` opens one).
pub type RmcpService = StreamableHttpService<Demo, LocalSessionManager>;

/// Routes by the [`HonouredFilter`] extension that `EdgeLayer`
/// inserts: only a listen it honoured carries one.
#[derive(Clone)]
pub struct McpEndpoint {
    rmcp: RmcpService,
    listen: ListenEndpoint,
}

impl McpEndpoint {
    /// Listens with an honoured filter go to `listen`, everything else to `rmcp`.
    pub fn new(rmcp: RmcpService, listen: ListenEndpoint) -> Self {
        Self { rmcp, listen }
    }
}

impl<B> Service<Request<B>> for McpEndpoint
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Display,
{
    type Response = Response<McpBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Both routes are always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if request.extensions().get::<HonouredFilter>().is_some() {
            let listen = self.listen.clone();
            Box::pin(async move { Ok(listen.serve(request).await) })
        } else {
            self.rmcp.call(request)
        }
    }
}
