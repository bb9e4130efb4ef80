//! [`Reply`]: what a layer's response body is made of, and the macros that
//! give each layer its own service, body and future around the shared ones.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::event_stream::{EventRule, EventStream, Screen, Verbatim};
use super::once::Once;
use super::rewind::{poll_bytes, Rewind};

pin_project! {
    /// A response as a layer hands it back: the inner service's body
    /// untouched, a body the layer wrote (a rewrite, or its own answer), a
    /// body it read and replays, an SSE stream ruled event by event, or one
    /// only screened. The last three are boxed: they are rare next to the
    /// first, and every response is moved a few times on its way out.
    #[project = ReplyProj]
    pub(crate) enum Reply<B, E, S>
    where
        B: Body,
    {
        PassThrough {
            #[pin]
            body: B,
        },
        Full {
            body: Once,
        },
        Rewound {
            body: Pin<Box<Rewind<B>>>,
        },
        Events {
            body: Pin<Box<EventStream<B, E, S>>>,
        },
        Screened {
            body: Pin<Box<EventStream<B, Verbatim, S>>>,
        },
    }
}

impl<B: Body, E, S> Reply<B, E, S> {
    /// A body the layer wrote, with the trailers the inner's body ended with.
    pub(crate) fn full(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        Self::Full {
            body: Once::with_trailers(data, trailers),
        }
    }

    /// The inner's body read in part, replayed whole.
    pub(crate) fn rewound(body: Pin<Box<Rewind<B>>>) -> Self {
        Self::Rewound { body }
    }

    /// The inner's event stream, screened by `screen` and ruled by `rule`.
    pub(crate) fn events(body: B, rule: E, screen: Option<S>) -> Self {
        Self::Events {
            body: Box::pin(EventStream::screened(body, rule, screen)),
        }
    }

    /// The inner's event stream, screened by `screen` and passed as parsed.
    pub(crate) fn screened(body: B, screen: S) -> Self {
        Self::Screened {
            body: Box::pin(EventStream::screened(body, Verbatim, Some(screen))),
        }
    }

    /// The variant's name, for `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::PassThrough { .. } => "PassThrough",
            Self::Full { .. } => "Full",
            Self::Rewound { .. } => "Rewound",
            Self::Events { .. } => "Events",
            Self::Screened { .. } => "Screened",
        }
    }
}

impl<B: Body, E, S> From<Bytes> for Reply<B, E, S> {
    fn from(data: Bytes) -> Self {
        Self::full(data, None)
    }
}

impl<B: Body, E: EventRule, S: Screen> Body for Reply<B, E, S> {
    type Data = Bytes;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project() {
            ReplyProj::PassThrough { body } => poll_bytes(body, cx),
            ReplyProj::Full { body } => Poll::Ready(body.next_frame().map(Ok)),
            ReplyProj::Rewound { body } => body.as_mut().poll_frame(cx),
            ReplyProj::Events { body } => body.as_mut().poll_frame(cx),
            ReplyProj::Screened { body } => body.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::PassThrough { body } => body.is_end_stream(),
            Self::Full { body } => body.is_end_stream(),
            Self::Rewound { body } => body.is_end_stream(),
            Self::Events { body } => body.is_end_stream(),
            Self::Screened { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::PassThrough { body } => body.size_hint(),
            Self::Full { body } => body.size_hint(),
            Self::Rewound { body } => body.size_hint(),
            Self::Events { .. } | Self::Screened { .. } => SizeHint::default(),
        }
    }
}

/// Defines a layer's response body: its own type around the [`Reply`] of
/// its requests, with the event rule and screen of its `$rules`.
macro_rules! response_body {
    ($(#[$attr:meta])* pub struct $name:ident, rules: $rules:ty) => {
        pin_project_lite::pin_project! {
            $(#[$attr])*
            pub struct $name<B>
            where
                B: http_body::Body,
            {
                #[pin]
                reply: $crate::http::reply::Reply<
                    B,
                    <$rules as $crate::http::intercept::Rules>::Events,
                    <$rules as $crate::http::intercept::Rules>::Screen,
                >,
            }
        }

        impl<B: http_body::Body> $name<B> {
            pub(crate) fn new(
                reply: $crate::http::reply::Reply<
                    B,
                    <$rules as $crate::http::intercept::Rules>::Events,
                    <$rules as $crate::http::intercept::Rules>::Screen,
                >,
            ) -> Self {
                Self { reply }
            }
        }

        impl<B: http_body::Body> http_body::Body for $name<B> {
            type Data = bytes::Bytes;
            type Error = B::Error;

            #[inline]
            fn poll_frame(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, B::Error>>> {
                self.project().reply.poll_frame(cx)
            }

            #[inline]
            fn is_end_stream(&self) -> bool {
                self.reply.is_end_stream()
            }

            #[inline]
            fn size_hint(&self) -> http_body::SizeHint {
                self.reply.size_hint()
            }
        }

        /// A body of `data`, for middleware that answers with its own bytes.
        impl<B: http_body::Body> From<bytes::Bytes> for $name<B> {
            fn from(data: bytes::Bytes) -> Self {
                Self::new(data.into())
            }
        }

        /// An empty body, for layers such as tower-http's auth and timeout
        /// that answer with a default body.
        impl<B: http_body::Body> Default for $name<B> {
            fn default() -> Self {
                Self::new(bytes::Bytes::new().into())
            }
        }

        impl<B: http_body::Body> std::fmt::Debug for $name<B> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("kind", &self.reply.kind())
                    .finish_non_exhaustive()
            }
        }
    };
}

/// Defines a layer's response future: its own type around the
/// [`ResponseFuture`](super::intercept::ResponseFuture) of its `$rules`,
/// yielding its own response body `$body`.
macro_rules! response_future {
    ($(#[$attr:meta])* pub struct $name:ident, rules: $rules:ty, body: $body:ident) => {
        pin_project_lite::pin_project! {
            $(#[$attr])*
            pub struct $name<S, ReqBody, ResBody>
            where
                S: tower_service::Service<http::Request<$crate::RequestBody<ReqBody>>>,
                ReqBody: http_body::Body,
                ResBody: http_body::Body,
            {
                #[pin]
                inner: $crate::http::intercept::ResponseFuture<$rules, S, ReqBody, ResBody>,
            }
        }

        impl<S, ReqBody, ResBody> $name<S, ReqBody, ResBody>
        where
            S: tower_service::Service<http::Request<$crate::RequestBody<ReqBody>>>,
            ReqBody: http_body::Body,
            ResBody: http_body::Body,
        {
            pub(crate) fn new(
                inner: $crate::http::intercept::ResponseFuture<$rules, S, ReqBody, ResBody>,
            ) -> Self {
                Self { inner }
            }
        }

        impl<S, ReqBody, ResBody> std::future::Future for $name<S, ReqBody, ResBody>
        where
            S: tower_service::Service<
                http::Request<$crate::RequestBody<ReqBody>>,
                Response = http::Response<ResBody>,
            >,
            ReqBody: http_body::Body,
            ResBody: http_body::Body + 'static,
        {
            type Output = Result<http::Response<$body<ResBody>>, S::Error>;

            #[inline]
            fn poll(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Self::Output> {
                self.project()
                    .inner
                    .poll(cx)
                    .map(|result| result.map(|response| response.map($body::new)))
            }
        }
    };
}

/// Defines a layer's service: `$name<S>` holding the inner service and its
/// `$layer`, with tower-http's accessors, calling the shared
/// [`call`](super::intercept::call) with the rules `$rules` reads from the
/// layer, and answering with the layer's own `ResponseFuture` and
/// `ResponseBody`, which must be in scope.
macro_rules! middleware {
    ($(#[$attr:meta])* pub struct $name:ident, layer: $layer:ident, rules: |$l:ident| $rules:expr) => {
        $(#[$attr])*
        #[derive(Debug, Clone)]
        pub struct $name<S> {
            inner: S,
            layer: $layer,
        }

        impl<S> $name<S> {
            pub(super) fn from_layer(inner: S, layer: $layer) -> Self {
                Self { inner, layer }
            }

            #[doc = concat!("Returns a new [`Layer`](tower_layer::Layer) that wraps services with [`", stringify!($name), "`].")]
            pub fn layer(profile: $crate::ServerProfile) -> $layer {
                $layer::new(profile)
            }

            /// Gets a reference to the inner service.
            pub fn get_ref(&self) -> &S {
                &self.inner
            }

            /// Gets a mutable reference to the inner service.
            pub fn get_mut(&mut self) -> &mut S {
                &mut self.inner
            }

            /// Consumes `self`, returning the inner service.
            pub fn into_inner(self) -> S {
                self.inner
            }
        }

        impl<S, ReqBody, ResBody> tower_service::Service<http::Request<ReqBody>> for $name<S>
        where
            S: tower_service::Service<
                    http::Request<$crate::RequestBody<ReqBody>>,
                    Response = http::Response<ResBody>,
                > + Clone,
            ReqBody: http_body::Body,
            ResBody: http_body::Body + 'static,
        {
            type Response = http::Response<ResponseBody<ResBody>>;
            type Error = S::Error;
            type Future = ResponseFuture<S, ReqBody, ResBody>;

            #[inline]
            fn poll_ready(
                &mut self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Self::Error>> {
                self.inner.poll_ready(cx)
            }

            fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
                let $l = &self.layer;
                ResponseFuture::new($crate::http::intercept::call(
                    $rules,
                    &mut self.inner,
                    request,
                ))
            }
        }
    };
}

pub(crate) use {middleware, response_body, response_future};

/// Asserts that a layer's response body made from bytes (the layer's own
/// answers) is exactly those bytes, with an exact size hint.
#[cfg(test)]
pub(crate) async fn assert_made_from_bytes<B>()
where
    B: From<bytes::Bytes> + http_body::Body,
    B::Error: std::fmt::Debug,
{
    use http_body_util::BodyExt;

    let data = bytes::Bytes::from_static(b"{\"jsonrpc\":\"2.0\"}");
    let body = B::from(data.clone());
    assert_eq!(body.size_hint().exact(), Some(data.len() as u64));
    assert_eq!(body.collect().await.unwrap().to_bytes(), data);
}
