//! The corpus: each request body under the heads, deliveries, profiles, options and answers.

use std::fmt::{self, Display};
use std::sync::LazyLock;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request};
use mcp_edge::Principal;
use serde_json::json;

use crate::common::modern_body;
use crate::{whole, Answer, Chunked, Setup, ALICE, JSON, SETUPS};

/// A request body: what it is, the method it names first, its bytes.
#[derive(Debug)]
pub(crate) struct Sample {
    pub(crate) name: &'static str,
    pub(crate) method: Option<&'static str>,
    pub(crate) bytes: Bytes,
}

const TASKS_META: &str = r#"{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A listen with `id` and `params`.
pub(crate) fn listen(id: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{params}}}"#)
}

/// `text` with two bytes that are not UTF-8 before `before`.
fn with_bad_utf8(text: &str, before: &str) -> Vec<u8> {
    let (head, tail) = text.split_at(text.find(before).expect("the mark is in the text"));
    [head.as_bytes(), b"\xff\xfe", tail.as_bytes()].concat()
}

/// Every request body of the corpus.
fn samples() -> Vec<Sample> {
    let pad = "x".repeat(300);
    let short_pad = "y".repeat(150);
    let discover = r#"{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{}}"#;
    let tools_call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
    let valid_listen = listen(
        "1",
        r#"{"notifications":{"toolsListChanged":true,"promptsListChanged":false,"resourceSubscriptions":["demo://public/readme","demo://private/notes","demo://public/readme"]}}"#,
    );
    let text = |name, method, text: String| Sample {
        name,
        method,
        bytes: Bytes::from(text),
    };
    let raw = |name, method, bytes: Vec<u8>| Sample {
        name,
        method,
        bytes: Bytes::from(bytes),
    };
    let (call, disc, init, lis) = (
        Some("tools/call"),
        Some("server/discover"),
        Some("initialize"),
        Some("subscriptions/listen"),
    );
    vec![
        // Other methods.
        text("tools/call, method first", call, tools_call.into()),
        text(
            "tools/call, method last",
            call,
            r#"{"jsonrpc":"2.0","id":1,"params":{"name":"echo","arguments":{"text":"hi"}},"method":"tools/call"}"#.into(),
        ),
        text(
            "tools/call with escapes",
            call,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\"b\\n\u00e9"}}}"#.into(),
        ),
        text(
            "tools/call, padded after the method",
            call,
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"blob":"{pad}"}}}}"#),
        ),
        text(
            "tools/call, padded before the method",
            call,
            format!(r#"{{"jsonrpc":"2.0","id":1,"params":{{"blob":"{pad}"}},"method":"tools/call"}}"#),
        ),
        text("ping", Some("ping"), r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#.into()),
        text(
            "notification",
            Some("notifications/initialized"),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
        ),
        text("no method", None, r#"{"jsonrpc":"2.0","id":1,"params":{}}"#.into()),
        text("method a number", None, r#"{"jsonrpc":"2.0","id":1,"method":5}"#.into()),
        // initialize and server/discover.
        text(
            "initialize",
            init,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#.into(),
        ),
        text(
            "initialize, string id, method last",
            init,
            r#"{"jsonrpc":"2.0","id":"i-1","params":{"protocolVersion":"2025-06-18","capabilities":{}},"method":"initialize"}"#.into(),
        ),
        text("discover", disc, discover.into()),
        text(
            "discover, string id, _meta",
            disc,
            modern_body("server/discover", json!("d-1"), json!({})),
        ),
        text(
            "discover without id",
            disc,
            r#"{"jsonrpc":"2.0","method":"server/discover"}"#.into(),
        ),
        text(
            "discover, id after the method",
            disc,
            r#"{"jsonrpc":"2.0","method":"server/discover","params":{},"id":"after"}"#.into(),
        ),
        text(
            "discover, id null",
            disc,
            r#"{"jsonrpc":"2.0","id":null,"method":"server/discover"}"#.into(),
        ),
        text(
            "discover, two ids",
            disc,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"server/discover"}"#.into(),
        ),
        text(
            "discover, padded",
            disc,
            format!(r#"{{"jsonrpc":"2.0","id":8,"method":"server/discover","params":{{"pad":"{pad}"}}}}"#),
        ),
        // Listens.
        text("listen", lis, valid_listen.clone()),
        text(
            "listen, string id, method last",
            lis,
            r#"{"jsonrpc":"2.0","id":"l-1","params":{"notifications":{"resourcesListChanged":true,"resourceSubscriptions":["demo://public/a","demo://public/fixed"]}},"method":"subscriptions/listen"}"#.into(),
        ),
        text(
            "listen, tasks declared",
            lis,
            listen("2", &format!(r#"{{"_meta":{TASKS_META},"notifications":{{"taskIds":["task-alice-1","task-bob-1"],"toolsListChanged":true}}}}"#)),
        ),
        text(
            "listen, tasks undeclared",
            lis,
            listen("3", r#"{"notifications":{"taskIds":["task-alice-1"]}}"#),
        ),
        text(
            "listen, flag not a boolean",
            lis,
            listen("4", r#"{"notifications":{"toolsListChanged":"yes"}}"#),
        ),
        text(
            "listen, URIs not an array",
            lis,
            listen("5", r#"{"notifications":{"resourceSubscriptions":"demo://public/a"}}"#),
        ),
        text(
            "listen, notifications an array",
            lis,
            listen("6", r#"{"notifications":[]}"#),
        ),
        text(
            "listen, too many URIs",
            lis,
            listen("7", r#"{"notifications":{"resourceSubscriptions":["demo://public/1","demo://public/2","demo://public/3","demo://public/4"]}}"#),
        ),
        text(
            "listen, too many task ids",
            lis,
            listen("8", &format!(r#"{{"_meta":{TASKS_META},"notifications":{{"taskIds":["task-alice-1","task-alice-2","task-alice-3"]}}}}"#)),
        ),
        text(
            "listen without params",
            lis,
            r#"{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen"}"#.into(),
        ),
        text(
            "listen, id an object",
            lis,
            listen(r#"{"a":1}"#, r#"{"notifications":{}}"#),
        ),
        text(
            "listen without id",
            lis,
            r#"{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{}}}"#.into(),
        ),
        text(
            "listen, two params",
            lis,
            r#"{"jsonrpc":"2.0","id":"dup","method":"subscriptions/listen","params":{"notifications":{}},"params":{"notifications":{"toolsListChanged":true}}}"#.into(),
        ),
        text(
            "listen, padded",
            lis,
            listen("10", &format!(r#"{{"notifications":{{"toolsListChanged":true}},"pad":"{short_pad}"}}"#)),
        ),
        text(
            "listen, padded before the method",
            lis,
            format!(r#"{{"jsonrpc":"2.0","id":11,"params":{{"notifications":{{"toolsListChanged":true}},"pad":"{short_pad}"}},"method":"subscriptions/listen"}}"#),
        ),
        // Duplicate and hidden methods.
        text(
            "discover, then tools/call",
            disc,
            r#"{"jsonrpc":"2.0","id":3,"method":"server/discover","method":"tools/call"}"#.into(),
        ),
        text(
            "listen, then tools/call",
            lis,
            r#"{"jsonrpc":"2.0","id":13,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}},"method":"tools/call"}"#.into(),
        ),
        text(
            "tools/call, then listen",
            call,
            r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{},"method":"subscriptions/listen"}"#.into(),
        ),
        text(
            "tools/call, then discover",
            call,
            r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","method":"server/discover"}"#.into(),
        ),
        text(
            "initialize, then discover",
            init,
            r#"{"jsonrpc":"2.0","id":16,"method":"initialize","method":"server/discover"}"#.into(),
        ),
        text(
            "null method, then listen",
            None,
            r#"{"jsonrpc":"2.0","id":3,"method":null,"method":"subscriptions/listen","params":{"notifications":{}}}"#.into(),
        ),
        text(
            "nested method",
            call,
            r#"{"jsonrpc":"2.0","id":7,"params":{"method":"subscriptions/listen"},"method":"tools/call"}"#.into(),
        ),
        text(
            "escaped key, listen",
            lis,
            r#"{"jsonrpc":"2.0","id":5,"m\u0065thod":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#.into(),
        ),
        text(
            "escaped key, discover",
            disc,
            r#"{"jsonrpc":"2.0","id":5,"m\u0065thod":"server/discover"}"#.into(),
        ),
        text(
            "escaped value, listen",
            lis,
            r#"{"jsonrpc":"2.0","id":6,"method":"subscriptions\/listen","params":{"notifications":{}}}"#.into(),
        ),
        text(
            "tools/call, then an escaped key",
            call,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","m\u0065thod":"subscriptions/listen"}"#.into(),
        ),
        // Batches.
        text(
            "batch with a listen",
            None,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{}}}]"#.into(),
        ),
        text(
            "batch without a listen",
            None,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"server/discover"}]"#.into(),
        ),
        text("empty batch", None, "[]".into()),
        text(
            "batch, not JSON",
            None,
            r#"[{"method":"subscriptions/listen"}, NaN]"#.into(),
        ),
        // Not JSON, or not all of it.
        text("plain text", None, "hello".into()),
        text("empty", None, String::new()),
        text("null", None, "null".into()),
        text("a number", None, "42".into()),
        raw("BOM, then a discover", disc, [&b"\xEF\xBB\xBF"[..], discover.as_bytes()].concat()),
        raw(
            "invalid UTF-8 in a tools/call",
            call,
            with_bad_utf8(tools_call, "hi"),
        ),
        raw(
            "invalid UTF-8 in a listen",
            lis,
            with_bad_utf8(&valid_listen, "readme"),
        ),
        text("truncated discover", disc, discover[..discover.len() - 3].into()),
        text("truncated listen", lis, valid_listen[..valid_listen.len() - 20].into()),
        text(
            "truncated before the method",
            None,
            r#"{"jsonrpc":"2.0","id":1,"par"#.into(),
        ),
        text(
            "tools/call, cut after the method",
            call,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":"#.into(),
        ),
        text("discover, trailing bytes", disc, format!("{discover} x")),
        text("discover, trailing brace", disc, format!("{discover}}}")),
        text(
            "tools/call, then a listen object",
            call,
            format!(r#"{tools_call}{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{{}}}}}}"#),
        ),
        text("listen, trailing whitespace", lis, format!("{valid_listen}  \n")),
        text("listen, trailing bytes", lis, format!("{valid_listen} x")),
    ]
}

/// Every sample, made once.
static SAMPLES: LazyLock<Vec<Sample>> = LazyLock::new(samples);

/// The sample called `name`.
pub(crate) fn sample(name: &str) -> &'static Sample {
    SAMPLES
        .iter()
        .find(|s| s.name == name)
        .expect("a sample of that name")
}

/// The `Content-Length` a request declares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Length {
    /// The body's real length.
    Actual,
    Absent,
    Declared(&'static str),
}

/// How a request body arrives.
#[derive(Debug, Clone)]
pub(crate) enum Delivery {
    /// One chunk, the end known with it.
    Whole,
    /// One chunk; the end known only when the stream ends.
    Stream,
    /// Chunks of this many bytes, each after a pending poll, the end known.
    Small(usize),
    /// 3-byte chunks with empty frames between them, then trailers.
    Trailers,
    /// The first half of the body in two chunks, then an error.
    Failing,
    /// Chunks ending at these offsets.
    Cuts {
        at: Vec<usize>,
        exact: bool,
        stall: bool,
    },
}

impl Delivery {
    /// `bytes` delivered this way.
    fn body(&self, bytes: &Bytes) -> Chunked {
        match self {
            Self::Whole => Chunked::split(bytes, usize::MAX, true),
            Self::Stream => Chunked::split(bytes, usize::MAX, false),
            Self::Small(size) => Chunked {
                stall: true,
                ..Chunked::split(bytes, *size, true)
            },
            Self::Trailers => {
                let chunks = Chunked::split(bytes, 3, false).chunks;
                let with_empty = chunks.into_iter().flat_map(|c| [c, Bytes::new()]);
                let mut trailers = HeaderMap::new();
                trailers.insert("x-checksum", HeaderValue::from_static("none"));
                Chunked {
                    trailers: Some(trailers),
                    ..Chunked::new(with_empty.collect(), false)
                }
            }
            Self::Failing => {
                let half = bytes.slice(..bytes.len() / 2);
                Chunked {
                    error: Some("connection reset"),
                    ..Chunked::cut(&half, &[half.len() / 2], false)
                }
            }
            Self::Cuts { at, exact, stall } => Chunked {
                stall: *stall,
                ..Chunked::cut(bytes, at, *exact)
            },
        }
    }
}

/// One request, and everything around it that can change its answer.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) method: Method,
    pub(crate) content_type: Option<&'static str>,
    pub(crate) mcp_method: Option<&'static str>,
    pub(crate) encoding: Option<&'static str>,
    pub(crate) length: Length,
    /// A header sent after the others (a second `Mcp-Method`, say).
    pub(crate) extra: Option<(&'static str, &'static str)>,
    pub(crate) sample: &'static Sample,
    pub(crate) delivery: Delivery,
    pub(crate) setup: Setup,
    pub(crate) guard: bool,
    pub(crate) scan: bool,
    /// Whether the request carries alice's `Principal`.
    pub(crate) caller: bool,
    pub(crate) answer: Answer,
}

impl Case {
    /// A JSON POST of `sample` in one chunk, everything else at its default.
    pub(crate) fn post(sample: &'static Sample) -> Self {
        Self {
            method: Method::POST,
            content_type: Some(JSON),
            mcp_method: None,
            encoding: None,
            length: Length::Actual,
            extra: None,
            sample,
            delivery: Delivery::Whole,
            setup: SETUPS[0],
            guard: true,
            scan: true,
            caller: false,
            answer: whole(false),
        }
    }

    /// The request.
    pub(crate) fn request(&self) -> Request<Chunked> {
        let bytes = &self.sample.bytes;
        let mut request = Request::builder().method(self.method.clone()).uri("/mcp");
        let length = match self.length {
            Length::Actual => Some(bytes.len().to_string()),
            Length::Absent => None,
            Length::Declared(length) => Some(length.to_owned()),
        };
        let headers = [
            (header::CONTENT_TYPE.as_str(), self.content_type),
            ("mcp-method", self.mcp_method),
            (header::CONTENT_ENCODING.as_str(), self.encoding),
            (header::CONTENT_LENGTH.as_str(), length.as_deref()),
        ];
        let extra = self.extra.map(|(name, value)| (name, Some(value)));
        for (name, value) in headers.into_iter().chain(extra) {
            if let Some(value) = value {
                request = request.header(name, value);
            }
        }
        let mut request = request.body(self.delivery.body(bytes)).unwrap();
        if self.caller {
            request.extensions_mut().insert(Principal::new(ALICE));
        }
        request
    }
}

impl Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} `{}` [content-type {:?}, mcp-method {:?}, encoding {:?}, length {:?}, extra {:?}, {:?}, {}, guard {}, scan {}, caller {}, answers {}]",
            self.method,
            self.sample.name,
            self.content_type,
            self.mcp_method,
            self.encoding,
            self.length,
            self.extra,
            self.delivery,
            self.setup.name,
            self.guard,
            self.scan,
            if self.caller { ALICE } else { "anonymous" },
            self.answer,
        )
    }
}

/// The `Mcp-Method` headers worth sending with `sample`: none, each
/// intercepted method, another, and the sample's own.
fn headers_for(sample: &Sample) -> Vec<Option<&'static str>> {
    let mut headers = vec![
        None,
        Some("initialize"),
        Some("server/discover"),
        Some("subscriptions/listen"),
        Some("tools/call"),
    ];
    if !headers.contains(&sample.method) {
        headers.push(sample.method);
    }
    headers
}

const CONTENT_TYPES: [Option<&str>; 4] = [
    Some(JSON),
    Some("application/x+json"),
    Some("text/plain"),
    None,
];

/// `case` with the layer options, the caller and the inner's answer set by
/// the low bits of `bits`, the answer in chunks of `chunk` bytes.
fn varied(case: Case, bits: u64, chunk: usize) -> Case {
    Case {
        guard: bits & 1 == 0,
        scan: bits & 2 == 0,
        caller: bits & 4 == 0,
        answer: Answer {
            sse: bits & 8 == 0,
            fail: bits & 16 == 0,
            chunk,
        },
        ..case
    }
}

/// Every case of the differential test.
pub(crate) static CORPUS: LazyLock<Vec<Case>> = LazyLock::new(corpus);

/// The corpus: each sample under every head, delivery and profile, the
/// options spread over them; then every option, content coding, declared
/// length, other HTTP method and doubled header, each over every sample.
fn corpus() -> Vec<Case> {
    let deliveries = [
        Delivery::Whole,
        Delivery::Stream,
        Delivery::Small(7),
        Delivery::Trailers,
        Delivery::Failing,
    ];
    let mut cases = Vec::new();
    for sample in SAMPLES.iter() {
        let post = Case::post(sample);
        for content_type in CONTENT_TYPES {
            for mcp_method in headers_for(sample) {
                for delivery in &deliveries {
                    for setup in SETUPS {
                        // Options, caller and answer follow the case's index
                        // (scrambled): every mix of them meets many heads and
                        // deliveries without multiplying the corpus.
                        let mix = (cases.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                        let length = match delivery {
                            Delivery::Whole | Delivery::Small(_) => Length::Actual,
                            _ => Length::Absent,
                        };
                        let case = Case {
                            content_type,
                            mcp_method,
                            length,
                            delivery: delivery.clone(),
                            setup,
                            ..post.clone()
                        };
                        let chunk = [usize::MAX, 5, 33][(mix >> 5) as usize % 3];
                        cases.push(varied(case, mix, chunk));
                    }
                }
            }
        }
        for mcp_method in [None, sample.method] {
            for options in 0..32 {
                let case = Case {
                    mcp_method,
                    ..post.clone()
                };
                cases.push(varied(case, options, 11));
            }
            for encoding in ["gzip", "identity", "", "IDENTITY"] {
                for content_type in CONTENT_TYPES {
                    cases.push(Case {
                        content_type,
                        mcp_method,
                        encoding: Some(encoding),
                        ..post.clone()
                    });
                }
            }
            for extra in [
                ("mcp-method", "subscriptions/listen"),
                ("mcp-method", "server/discover"),
                ("content-type", "text/plain"),
                ("content-encoding", "gzip"),
            ] {
                cases.push(Case {
                    mcp_method,
                    extra: Some(extra),
                    ..post.clone()
                });
            }
        }
        for mcp_method in headers_for(sample) {
            for declared in ["300", "100000", "2000000"] {
                for content_type in [Some(JSON), Some("text/plain")] {
                    for setup in SETUPS {
                        cases.push(Case {
                            content_type,
                            mcp_method,
                            length: Length::Declared(declared),
                            delivery: Delivery::Stream,
                            setup,
                            ..post.clone()
                        });
                    }
                }
            }
            for method in [Method::GET, Method::DELETE, Method::PUT] {
                for content_type in [Some(JSON), None] {
                    cases.push(Case {
                        method: method.clone(),
                        content_type,
                        mcp_method,
                        ..post.clone()
                    });
                }
            }
        }
    }
    cases
}
