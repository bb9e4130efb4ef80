//! 6: large pass-through, no whole-body copy

use super::*;

const MIB: usize = 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// A 4 MiB `tools/call` body in one allocation; `method_first` puts the
/// method before the 4 MiB of params, else after them.
fn big_tools_call(method_first: bool) -> Bytes {
    let head = if method_first {
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"blob":""#
    } else {
        r#"{"jsonrpc":"2.0","id":1,"params":{"name":"echo","arguments":{"blob":""#
    };
    let tail = if method_first {
        r#""}}}"#
    } else {
        r#""}},"method":"tools/call"}"#
    };
    let mut body = Vec::with_capacity(4 * MIB);
    body.extend_from_slice(head.as_bytes());
    body.extend((0..4 * MIB - head.len() - tail.len()).map(|i| b'a' + (i % 26) as u8));
    body.extend_from_slice(tail.as_bytes());
    assert_eq!(body.len(), 4 * MIB);
    Bytes::from(body)
}

/// `all` as a body of 64 KiB slices of its one allocation.
fn in_slices(all: &Bytes) -> Counted {
    Counted::new(
        (0..all.len())
            .step_by(CHUNK)
            .map(|at| all.slice(at..at + CHUNK))
            .collect(),
    )
}

/// Sends `all` in 64 KiB slices of one allocation; the inner service checks
/// that every frame it gets is one of those slices (same address, same length).
async fn big_pass_through(method_first: bool) -> usize {
    let all = big_tools_call(method_first);
    let body = in_slices(&all);
    let pulled = body.pulled.clone();
    let pulled_at_call = Arc::new(AtomicUsize::new(usize::MAX));
    let record = pulled_at_call.clone();
    let original = all.clone();
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile()))
        .service_fn(move |request: Request<RequestBody<Counted>>| {
            record.store(pulled.load(Ordering::SeqCst), Ordering::SeqCst);
            let original = original.clone();
            async move {
                let mut body = request.into_body();
                let mut frames = Vec::new();
                let mut offset = 0;
                while let Some(frame) = body.frame().await {
                    let data = frame.unwrap().into_data().unwrap();
                    assert_eq!(data.len(), CHUNK, "frame {} keeps its size", frames.len());
                    assert_eq!(
                        data.as_ptr(),
                        original[offset..].as_ptr(),
                        "frame {} is the original chunk",
                        frames.len()
                    );
                    offset += data.len();
                    frames.push(data);
                }
                assert_eq!(frames.len(), 4 * MIB / CHUNK);
                // Echo the frames back as they came.
                let mut response = Response::new(Counted::new(frames));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Ok::<_, Infallible>(response)
            }
        });
    let request = post_request(Some("tools/call"), body);
    let response = service.oneshot(request).await.unwrap();
    let echoed = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(echoed.len(), all.len());
    assert!(echoed == all, "the 4 MiB body comes back byte for byte");
    pulled_at_call.load(Ordering::SeqCst)
}

#[tokio::test]
async fn big_tools_call_passes_through_in_its_original_chunks() {
    let pulled = big_pass_through(true).await;
    assert_eq!(
        pulled, 1,
        "only the chunk holding the method was read before the inner was called"
    );
}

#[tokio::test]
async fn big_tools_call_with_a_late_method_is_refused_unbuffered() {
    // Past the peek limit (1 MiB by default) an `initialize` could hide: the
    // layer answers 413 after reading no more than the limit.
    let body = in_slices(&big_tools_call(false));
    let pulled = body.pulled.clone();
    let (out, seen) = try_run(
        &profile(),
        post_request(Some("tools/call"), body),
        Reply::json(DISCOVER_RESULT),
    )
    .await;
    assert!(seen.is_none(), "the inner service was not called");
    assert_eq!(out.status, StatusCode::PAYLOAD_TOO_LARGE);
    let read = pulled.load(Ordering::SeqCst);
    assert!(read <= MIB / CHUNK + 1, "{read} frames read");
}
