//! The macros for newtypes, as tower-http's `opaque_body!`: each layer's
//! response body and future are its own types around the shared ones.

/// Defines a layer's response body: its own type around the `Reply` of
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
                    $crate::http::intercept::Events<$rules>,
                    <$rules as $crate::http::intercept::Rules>::Screen,
                >,
            }
        }

        impl<B: http_body::Body> $name<B> {
            pub(crate) fn new(
                reply: $crate::http::reply::Reply<
                    B,
                    $crate::http::intercept::Events<$rules>,
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
/// `ResponseFuture` (`http::intercept`) of its `$rules`,
/// yielding its own response body `$body`.
macro_rules! response_future {
    ($(#[$attr:meta])* pub struct $name:ident, rules: $rules:ty, body: $body:ident) => {
        pin_project_lite::pin_project! {
            $(#[$attr])*
            pub struct $name<S, ReqBody, ResBody>
            where
                S: tower_service::Service<http::Request<$crate::http::body::RequestBody<ReqBody>>>,
                ReqBody: http_body::Body,
                ResBody: http_body::Body,
            {
                #[pin]
                inner: $crate::http::intercept::ResponseFuture<$rules, S, ReqBody, ResBody>,
            }
        }

        impl<S, ReqBody, ResBody> $name<S, ReqBody, ResBody>
        where
            S: tower_service::Service<http::Request<$crate::http::body::RequestBody<ReqBody>>>,
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
                http::Request<$crate::http::body::RequestBody<ReqBody>>,
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

pub(crate) use {response_body, response_future};
