//! 8. A client that goes away drops the inner stream.

use super::*;

struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn client_disconnect_drops_the_inner_stream() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let producer = Arc::new(Mutex::new(None::<tokio::task::JoinHandle<usize>>));
    let (count, slot) = (dropped.clone(), producer.clone());
    let inner = Inner::new(Arc::new(move |received: &Received| {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let ack = ack_event("9", received.filter().ack().get());
        // Sends forever, until the stream is gone; returns how many it sent.
        let task = tokio::spawn(async move {
            let mut sent = 0;
            if tx.send(Bytes::from(ack)).await.is_err() {
                return sent;
            }
            loop {
                let event = note("notifications/tools/list_changed", "9", "");
                if tx.send(Bytes::from(event)).await.is_err() {
                    return sent;
                }
                sent += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        *slot.lock().unwrap() = Some(task);
        let guard = CountDrop(count.clone());
        let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
            let chunk = rx.recv().await?;
            Some((Ok::<_, Infallible>(chunk), (rx, guard)))
        });
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap()
    }));
    let response = run(
        layer(),
        &inner,
        listen_request(None, "9", r#"{"toolsListChanged":true}"#),
    )
    .await;
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, ack_event("9", r#"{"toolsListChanged":true}"#));
    let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(second, note("notifications/tools/list_changed", "9", ""));
    assert_eq!(dropped.load(Ordering::SeqCst), 0);

    drop(body);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the inner stream is dropped with the response body"
    );
    let task = producer.lock().unwrap().take().unwrap();
    let sent = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the producer stops once the stream is gone")
        .unwrap();
    assert!(sent >= 1);
}
