//! The forwarding service and the caller, over real sockets: what the
//! upstream gets (the caller's principal, `X-Forwarded-*`, no hop-by-hop
//! header, nothing a client forged under the proxy's names), bearer tokens
//! and JWTs, legacy sessions bound to their caller, an upstream that is
//! down or slow, and the `Host`/`Origin` rule.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::routing::post;
use axum::Router;
use http::HeaderMap;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

mod common;

use common::{config, modern, request, Leaky, Running, Served};

/// An upstream that answers every POST with what it received: its headers
/// (names lower case, values joined by `, `) and its body.
async fn echo() -> Served {
    let router = Router::new().route(
        "/mcp",
        post(|headers: HeaderMap, body: Bytes| async move {
            let mut seen = serde_json::Map::new();
            for name in headers.keys() {
                let values: Vec<&str> = headers
                    .get_all(name)
                    .iter()
                    .map(|v| v.to_str().unwrap())
                    .collect();
                seen.insert(name.as_str().to_owned(), values.join(", ").into());
            }
            let body = String::from_utf8(body.to_vec()).unwrap();
            (
                [
                    ("content-type", "application/json"),
                    ("x-hop", "1"),
                    ("connection", "x-hop"),
                ],
                json!({"headers": seen, "body": body}).to_string(),
            )
        }),
    );
    Served::start(router).await
}

/// What the echo upstream saw of a `tools/list` sent with `headers`.
async fn seen_through(proxy: &Running, headers: &[(&str, &str)]) -> Value {
    let body = r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}"#;
    let mut all = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    let answer = request(proxy.port(), "POST", &all, Some(body.to_owned())).await;
    assert_eq!(answer.status, 200);
    assert!(
        answer.headers.get("x-hop").is_none(),
        "a header Connection names is dropped"
    );
    let seen: Value = serde_json::from_str(&answer.text().await).unwrap();
    assert_eq!(seen["body"], body, "the body passes unchanged");
    seen["headers"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_gets_the_caller_and_no_header_of_one_connection() {
    let upstream = echo().await;
    let proxy = Running::start(&config(upstream.port, "")).await;
    let headers = seen_through(
        &proxy,
        &[
            ("authorization", "Bearer alice-token"),
            ("x-mcp-principal", "admin"),
            ("x-forwarded-for", "203.0.113.9"),
            ("connection", "x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic eA=="),
            ("mcp-method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(headers["x-mcp-principal"], "alice");
    assert_eq!(headers["authorization"], "Bearer alice-token");
    assert_eq!(headers["host"], format!("127.0.0.1:{}", upstream.port));
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(
        headers["x-forwarded-host"],
        format!("127.0.0.1:{}", proxy.port())
    );
    assert_eq!(headers["mcp-method"], "tools/list");
    for gone in [
        "x-secret",
        "keep-alive",
        "proxy-authorization",
        "connection",
    ] {
        assert!(
            headers.get(gone).is_none(),
            "{gone} reached the upstream: {headers}"
        );
    }
    // Anonymous: no principal, whatever the client claims.
    let headers = seen_through(&proxy, &[("x-mcp-principal", "alice")]).await;
    assert!(headers.get("x-mcp-principal").is_none(), "{headers}");
    assert!(headers.get("authorization").is_none(), "{headers}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_stays_behind_when_told_and_the_principal_header_is_configurable() {
    let upstream = echo().await;
    // Top-level keys come before the tables.
    let text = format!(
        "forward_authorization = false\nprincipal_header = \"x-caller\"\n{}",
        toml_tables(upstream.port)
    );
    let config = mcp_edge_proxy::config::Config::parse(&text).unwrap();
    let proxy = Running::start(&config).await;
    let headers = seen_through(&proxy, &[("authorization", "Bearer bob-token")]).await;
    assert_eq!(headers["x-caller"], "bob");
    assert!(headers.get("authorization").is_none(), "{headers}");
    assert!(headers.get("x-mcp-principal").is_none(), "{headers}");
}

/// The test configuration, written out, for a file with top-level keys of
/// its own first.
fn toml_tables(port: u16) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nupstream = \"http://127.0.0.1:{port}/mcp\"\n\
         [[caller]]\ntoken = \"bob-token\"\nprincipal = \"bob\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_authorization_is_401_with_a_challenge_and_never_reaches_the_upstream() {
    let upstream = echo().await;
    let proxy = Running::start(&config(upstream.port, "")).await;
    for authorization in [
        "Bearer nobody",
        "Basic YWxpY2U6eA==",
        "Bearer ",
        "alice-token",
    ] {
        let answer = modern(proxy.port(), None, 1, "tools/list", None, "").await;
        assert_eq!(answer.status, 200, "anonymous passes");
        let answer = request(
            proxy.port(),
            "POST",
            &[
                ("content-type", "application/json"),
                ("authorization", authorization),
            ],
            Some("{}".into()),
        )
        .await;
        assert_eq!(answer.status, 401, "{authorization}");
        let challenge = answer
            .headers
            .get("www-authenticate")
            .unwrap()
            .to_str()
            .unwrap();
        assert!(challenge.starts_with("Bearer error="), "{challenge}");
        let body: Value = serde_json::from_str(&answer.text().await).unwrap();
        assert_eq!(body["error"]["code"], -32001);
    }
}

/// A token signed with the fixture key, with `claims`.
fn token(claims: Value, kid: &str) -> String {
    let key = EncodingKey::from_ec_pem(include_bytes!("fixtures/es256.pem")).unwrap();
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_names_its_subject_when_its_key_issuer_audience_and_time_hold() {
    let upstream = echo().await;
    let jwks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jwks.json");
    let jwt = format!(
        "[jwt]\njwks_file = \"{jwks}\"\nissuer = \"https://issuer.example\"\naudience = [\"mcp-edge-proxy\"]\n"
    );
    let proxy = Running::start(&config(upstream.port, &jwt)).await;
    let good = json!({"sub": "carol", "iss": "https://issuer.example", "aud": "mcp-edge-proxy", "exp": now() + 300});
    let bearer = format!("Bearer {}", token(good.clone(), "test-key"));
    let headers = seen_through(&proxy, &[("authorization", &bearer)]).await;
    assert_eq!(headers["x-mcp-principal"], "carol");
    let mut refused = Vec::new();
    for (what, claims, kid) in [
        (
            "another audience",
            json!({"aud": "someone-else"}),
            "test-key",
        ),
        (
            "another issuer",
            json!({"iss": "https://evil.example"}),
            "test-key",
        ),
        ("expired", json!({"exp": now() - 3600}), "test-key"),
        ("no subject", json!({"sub": ""}), "test-key"),
        ("an unknown key", json!({}), "other-key"),
    ] {
        let mut claims_all = good.clone();
        claims_all
            .as_object_mut()
            .unwrap()
            .extend(claims.as_object().unwrap().clone());
        let bearer = format!("Bearer {}", token(claims_all, kid));
        let answer = request(
            proxy.port(),
            "POST",
            &[
                ("content-type", "application/json"),
                ("authorization", &bearer),
            ],
            Some("{}".into()),
        )
        .await;
        refused.push((what, answer.status));
    }
    assert!(
        refused.iter().all(|(_, status)| *status == 401),
        "{refused:?}"
    );
    // No signature at all.
    let unsigned = format!(
        "Bearer {}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(&good.to_string())
    );
    let answer = request(
        proxy.port(),
        "POST",
        &[
            ("content-type", "application/json"),
            ("authorization", &unsigned),
        ],
        Some("{}".into()),
    )
    .await;
    assert_eq!(answer.status, 401);
}

fn b64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_down_is_502_and_a_slow_one_504_with_the_request_id() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = Running::start(&config(closed, "")).await;
    let answer = modern(proxy.port(), None, 41, "tools/list", None, "").await;
    assert_eq!(answer.status, 502);
    let body: Value = serde_json::from_str(&answer.text().await).unwrap();
    assert_eq!(
        (body["id"].clone(), body["error"]["code"].clone()),
        (json!(41), json!(-32603))
    );

    // An upstream that takes requests and never answers: 504 after the
    // configured 2 s, never a hang.
    let slow = Router::new().route(
        "/mcp",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "late"
        }),
    );
    let slow = Served::start(slow).await;
    let proxy = Running::start(&config(slow.port, "")).await;
    let started = std::time::Instant::now();
    let answer = modern(proxy.port(), None, 42, "tools/list", None, "").await;
    assert_eq!(answer.status, 504);
    assert!(started.elapsed() < Duration::from_secs(8));
    let body: Value = serde_json::from_str(&answer.text().await).unwrap();
    assert_eq!(body["id"], 42);
}

/// A legacy `initialize` through the proxy opens a session bound to its
/// caller: another caller presenting its id, or an id the proxy never saw
/// opened, is answered 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_is_its_openers_only() {
    let upstream = Leaky::start().await;
    let proxy = Running::start(&config(upstream.port(), "")).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let headers = |token: &'static str, session: Option<&str>| {
        let mut h = vec![
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
            ("authorization", format!("Bearer {token}")),
        ];
        if let Some(session) = session {
            h.push(("mcp-session-id", session.to_owned()));
            h.push(("mcp-protocol-version", "2025-11-25".to_owned()));
        }
        h
    };
    let send = |token, session: Option<String>, body: String| {
        let port = proxy.port();
        async move {
            let h = headers(token, session.as_deref());
            let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
            request(port, "POST", &h, Some(body)).await
        }
    };
    let opened = send("alice-token", None, initialize).await;
    assert_eq!(opened.status, 200);
    let session = opened
        .headers
        .get("mcp-session-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(proxy.proxy.forward.sessions(), 1);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let bob = send("bob-token", Some(session.clone()), ping.clone()).await;
    assert_eq!(bob.status, 404);
    let body: Value = serde_json::from_str(&bob.text().await).unwrap();
    assert_eq!(
        (body["id"].clone(), body["error"]["message"].clone()),
        (json!(2), json!("Session not found"))
    );
    let unknown = send("alice-token", Some("not-a-session".into()), ping.clone()).await;
    assert_eq!(unknown.status, 404);
    let alice = send("alice-token", Some(session), ping).await;
    assert_eq!(alice.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_name_or_origin_is_403() {
    let upstream = echo().await;
    let proxy = Running::start(&config(upstream.port, "")).await;
    for (host, origin) in [
        ("evil.example", None),
        ("127.0.0.1", Some("http://evil.example")),
        ("localhost", Some("null")),
    ] {
        let mut headers = vec![("content-type", "application/json"), ("host", host)];
        if let Some(origin) = origin {
            headers.push(("origin", origin));
        }
        let answer = request(proxy.port(), "POST", &headers, Some("{}".into())).await;
        assert_eq!(answer.status, 403, "{host} {origin:?}");
    }
    // The proxy's own origin passes.
    let host = format!("127.0.0.1:{}", proxy.port());
    let origin = format!("http://{host}");
    let headers = [
        ("content-type", "application/json"),
        ("origin", origin.as_str()),
    ];
    let answer = request(proxy.port(), "POST", &headers, Some("{}".into())).await;
    assert_eq!(answer.status, 200);
    // Two `Host` lines.
    let headers = [
        ("content-type", "application/json"),
        ("host", "127.0.0.1"),
        ("host", "evil.example"),
    ];
    let answer = request(proxy.port(), "POST", &headers, Some("{}".into())).await;
    assert_eq!(answer.status, 403);
}

#[test]
fn check_config_reads_everything_and_exits() {
    let binary = env!("CARGO_BIN_EXE_mcp-edge-proxy");
    let dir = std::env::temp_dir().join(format!("mcp-edge-proxy-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, toml_tables(1)).unwrap();
    let out = std::process::Command::new(binary)
        .args(["--config", good.to_str().unwrap(), "--check-config"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with(": ok\n"));
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "{}[jwt]\njwks_file = \"missing.json\"\nissuer = \"i\"\naudience = [\"a\"]\n",
            toml_tables(1)
        ),
    )
    .unwrap();
    let out = std::process::Command::new(binary)
        .args(["--config", bad.to_str().unwrap(), "--check-config"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("jwks_file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let help = std::process::Command::new(binary)
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--check-config"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An upstream on `listener` that answers every request `ok` and counts
/// the connections it accepted; aborting the task closes them all.
fn counting_upstream(
    listener: tokio::net::TcpListener,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // The connections end with this task (the set aborts them).
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            connections.spawn(async move {
                let service =
                    hyper::service::service_fn(|_: http::Request<hyper::body::Incoming>| async {
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(Bytes::from_static(
                                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
                            )),
                        ))
                    });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    })
}

/// Requests in turn share one upstream connection; when the upstream goes
/// away and comes back, the pooled connection it closed is replaced and
/// the next request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_reused_and_a_closed_one_replaced() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let upstream = counting_upstream(listener, accepted.clone());
    let proxy = Running::start(&config(port, "")).await;
    for id in 0..5 {
        let answer = modern(proxy.port(), None, id, "tools/list", None, "").await;
        assert_eq!(answer.status, 200);
        answer.text().await;
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for five requests"
    );

    // The upstream restarts: its connections are gone.
    upstream.abort();
    let _ = upstream.await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let listener = loop {
        if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            break listener;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let again = Arc::new(AtomicUsize::new(0));
    let _upstream = counting_upstream(listener, again.clone());
    let answer = modern(proxy.port(), None, 9, "tools/list", None, "").await;
    assert_eq!(answer.status, 200, "answered on a new connection");
    assert_eq!(again.load(Ordering::SeqCst), 1);
}

/// `upstream_http2`: h2c by prior knowledge to the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_to_the_upstream() {
    let upstream = echo().await;
    let text = format!("upstream_http2 = true\n{}", toml_tables(upstream.port));
    let proxy = Running::start(&mcp_edge_proxy::config::Config::parse(&text).unwrap()).await;
    let headers = seen_through(&proxy, &[("authorization", "Bearer bob-token")]).await;
    assert_eq!(headers["x-mcp-principal"], "bob");
}
