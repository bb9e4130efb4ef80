//! The proxy's configuration: one TOML file, read and checked once at
//! start (`--check-config` stops there). Unknown keys are errors, so that a
//! misspelt key never silently falls back to a default.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::header::HeaderName;
use http::Uri;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A publish token shorter than this is warned about.
const MIN_TOKEN: usize = 16;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where MCP clients connect (the endpoint is `/mcp`).
    pub listen: SocketAddr,
    /// The MCP server behind the proxy: an `http://` URL, its path
    /// included.
    #[serde(deserialize_with = "uri")]
    pub upstream: Uri,
    /// Where Prometheus text is served at `/metrics` (optional).
    pub metrics: Option<SocketAddr>,
    /// Speak HTTP/2 to the upstream by prior knowledge (h2c) instead of
    /// HTTP/1.1 (default false).
    #[serde(default)]
    pub upstream_http2: bool,
    /// How long a connection to the upstream may take (seconds, default 5).
    #[serde(default = "five")]
    pub connect_timeout_secs: u64,
    /// How long the upstream may take to begin its answer (seconds,
    /// default 30); its body then streams for as long as it lasts.
    #[serde(default = "thirty")]
    pub response_timeout_secs: u64,
    /// The header that tells the upstream who the caller is (absent for an
    /// anonymous caller); the proxy always removes it from what clients
    /// send (default `x-mcp-principal`).
    #[serde(default = "principal_header", deserialize_with = "header_name")]
    pub principal_header: HeaderName,
    /// Whether a `resources/read` is checked against the `[[allow]]` rules
    /// as listens are (default true): each POST body is then read whole,
    /// within `max_body_bytes`, before it goes on.
    #[serde(default = "yes")]
    pub check_reads: bool,
    /// The largest request body read whole (bytes, default 1 MiB); a longer
    /// one is answered 413.
    #[serde(default = "mebibyte")]
    pub max_body_bytes: usize,
    /// Whether the client's `Authorization` goes to the upstream unchanged
    /// (default true).
    #[serde(default = "yes")]
    pub forward_authorization: bool,
    /// Host names the proxy answers to besides IP addresses and
    /// `localhost` (a request under another name is refused 403).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// `Origin`s allowed to call the proxy (a browser's page on another
    /// origin otherwise is refused 403; a request without `Origin` passes).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// The profile's base capabilities: what the upstream serves. A key
    /// `completions` turns completions on, `logging` the legacy era's
    /// `logging/setLevel`; every other key is advertised as written.
    #[serde(default)]
    pub capabilities: Map<String, Value>,
    /// Static bearer tokens.
    #[serde(default, rename = "caller")]
    pub callers: Vec<Caller>,
    /// JWT bearer tokens, verified against the keys of a JWKS file.
    pub jwt: Option<Jwt>,
    /// Who may read which resources; nothing is readable that no rule
    /// allows.
    #[serde(default, rename = "allow")]
    pub allows: Vec<Allow>,
    /// The legacy era's sessions, bound to the caller that opened them.
    #[serde(default)]
    pub sessions: Sessions,
    /// The bounds on client connections.
    #[serde(default)]
    pub connections: Connections,
    /// Present: the proxy serves every honoured listen itself, and the
    /// upstream publishes its changes.
    pub hub: Option<Hub>,
}

/// A static bearer token and the principal it names.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caller {
    pub token: String,
    pub principal: String,
}

/// Where JWT bearer tokens are verified.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jwt {
    /// A JWKS file (`{"keys": [...]}`): RSA, EC or Ed25519 public keys.
    pub jwks_file: PathBuf,
    /// The `iss` a token must carry.
    pub issuer: String,
    /// The `aud` a token must carry (one of them).
    pub audience: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf` (seconds, default 60).
    #[serde(default = "sixty")]
    pub leeway_secs: u64,
}

/// Who may read which resources.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allow {
    /// Principals, or `"*"`: every caller, anonymous included.
    pub principals: Vec<String>,
    /// The URIs allowed, each with every URI below it by path
    /// (`mcp_edge::covers`).
    pub uri_prefixes: Vec<String>,
}

/// The legacy era's sessions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Most sessions at once (default 1 000).
    #[serde(default = "thousand")]
    pub max: usize,
    /// Most sessions of one caller, anonymous callers together (default 16).
    #[serde(default = "sixteen")]
    pub max_per_caller: usize,
    /// A session unused this long is forgotten (seconds, default 3 600).
    #[serde(default = "hour")]
    pub idle_secs: u64,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            max: thousand(),
            max_per_caller: sixteen(),
            idle_secs: hour(),
        }
    }
}

/// The bounds on client connections (see the serve loop's `Limits`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Connections {
    #[serde(default = "ten")]
    pub header_timeout_secs: u64,
    #[serde(default = "sixty")]
    pub idle_timeout_secs: u64,
    #[serde(default = "per_peer")]
    pub max_per_peer: usize,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            header_timeout_secs: ten(),
            idle_timeout_secs: sixty(),
            max_per_peer: per_peer(),
        }
    }
}

/// The listen hub: the proxy holds the streams.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hub {
    /// Where the upstream posts its changes (`POST /publish`).
    pub publish: SocketAddr,
    /// The bearer token a publication must carry (not empty; one shorter
    /// than 16 characters is warned about).
    pub publish_token: String,
    /// A Redis shared with the other proxies.
    pub redis: Option<String>,
    /// A Redis Cluster shared with the other proxies (any of its nodes).
    pub redis_cluster: Option<Vec<String>>,
    /// The prefix of the Redis channels (default `mcp-edge-proxy`).
    #[serde(default = "prefix")]
    pub prefix: String,
    /// Most listen streams open at once (default 10 000).
    #[serde(default = "ten_thousand")]
    pub max_streams: usize,
    /// Most listen streams of one caller (default 64); anonymous callers
    /// are counted by address.
    #[serde(default = "sixty_four")]
    pub max_streams_per_caller: usize,
    /// A keep-alive comment on a silent stream (seconds, default 15).
    #[serde(default = "fifteen")]
    pub keep_alive_secs: u64,
}

fn five() -> u64 {
    5
}
fn ten() -> u64 {
    10
}
fn fifteen() -> u64 {
    15
}
fn thirty() -> u64 {
    30
}
fn sixty() -> u64 {
    60
}
fn hour() -> u64 {
    3600
}
fn sixteen() -> usize {
    16
}
fn sixty_four() -> usize {
    64
}
fn thousand() -> usize {
    1000
}
fn ten_thousand() -> usize {
    10_000
}
fn per_peer() -> usize {
    256
}
fn mebibyte() -> usize {
    1024 * 1024
}
fn yes() -> bool {
    true
}
fn prefix() -> String {
    "mcp-edge-proxy".to_owned()
}
fn principal_header() -> HeaderName {
    HeaderName::from_static("x-mcp-principal")
}

fn uri<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Uri, D::Error> {
    let text = String::deserialize(de)?;
    text.parse().map_err(serde::de::Error::custom)
}

fn header_name<'de, D: serde::Deserializer<'de>>(de: D) -> Result<HeaderName, D::Error> {
    let text = String::deserialize(de)?;
    HeaderName::from_bytes(text.as_bytes()).map_err(serde::de::Error::custom)
}

/// Why a configuration is refused: the file, and what is wrong in it.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The configuration in `path`, checked.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        let config =
            Self::parse(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        // A relative JWKS path is relative to the configuration file.
        Ok(config.relative_to(path.parent().unwrap_or(Path::new("."))))
    }

    /// The configuration `text` holds, checked.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    fn relative_to(mut self, dir: &Path) -> Self {
        if let Some(jwt) = &mut self.jwt {
            if jwt.jwks_file.is_relative() {
                jwt.jwks_file = dir.join(&jwt.jwks_file);
            }
        }
        self
    }

    /// What the types cannot say.
    fn check(&self) -> Result<(), ConfigError> {
        let fail = |what: String| Err(ConfigError(what));
        if self.upstream.scheme_str() != Some("http") || self.upstream.authority().is_none() {
            return fail(format!(
                "`upstream` must be an http:// URL with a host (h2c with `upstream_http2`), got `{}`",
                self.upstream
            ));
        }
        let mut tokens = HashSet::new();
        for (i, caller) in self.callers.iter().enumerate() {
            if caller.token.is_empty() || caller.principal.is_empty() {
                return fail(format!(
                    "`caller[{i}]`: `token` and `principal` must not be empty"
                ));
            }
            if !tokens.insert(caller.token.as_str()) {
                return fail(format!("`caller[{i}]`: this token is given twice"));
            }
        }
        if let Some(jwt) = &self.jwt {
            if jwt.audience.is_empty() || jwt.issuer.is_empty() {
                return fail("`jwt`: `issuer` and `audience` must not be empty".to_owned());
            }
        }
        for (i, allow) in self.allows.iter().enumerate() {
            if allow.principals.is_empty() || allow.uri_prefixes.is_empty() {
                return fail(format!(
                    "`allow[{i}]`: `principals` and `uri_prefixes` must not be empty"
                ));
            }
        }
        for origin in &self.allowed_origins {
            // An origin is a scheme and an authority, nothing after.
            let parsed = origin.parse::<Uri>().ok();
            let scheme = parsed.as_ref().and_then(Uri::scheme_str);
            let bare = parsed
                .as_ref()
                .is_some_and(|u| u.path() == "/" && !origin.ends_with('/'));
            if !matches!(scheme, Some("http" | "https")) || !bare {
                return fail(format!("`allowed_origins`: `{origin}` is not an origin"));
            }
        }
        if let Some(hub) = &self.hub {
            if hub.publish_token.is_empty() {
                return fail("`hub.publish_token` must not be empty".to_owned());
            }
            if hub.redis.is_some() && hub.redis_cluster.is_some() {
                return fail("`hub`: give `redis` or `redis_cluster`, not both".to_owned());
            }
            if hub.redis_cluster.as_ref().is_some_and(Vec::is_empty) {
                return fail("`hub.redis_cluster` names no node".to_owned());
            }
            if hub.prefix.is_empty() || hub.prefix.contains('{') {
                return fail("`hub.prefix` must not be empty nor hold `{`".to_owned());
            }
            if hub.publish == self.listen || Some(hub.publish) == self.metrics {
                return fail("`hub.publish` must be an address of its own".to_owned());
            }
        }
        if self.metrics.is_some() && self.metrics == Some(self.listen) {
            return fail("`metrics` must be an address of its own".to_owned());
        }
        Ok(())
    }

    /// What is allowed but unwise, one line each, for the log at start
    /// and `--check-config`.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(hub) = &self.hub {
            if hub.publish_token.len() < MIN_TOKEN {
                warnings.push(format!(
                    "`hub.publish_token` is shorter than {MIN_TOKEN} characters: \
                     whoever guesses it can publish to every stream"
                ));
            }
        }
        warnings
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }

    pub fn response_timeout(&self) -> Duration {
        Duration::from_secs(self.response_timeout_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
listen = "127.0.0.1:8080"
upstream = "http://127.0.0.1:3000/mcp"
"#;

    #[test]
    fn the_documented_example_parses_with_its_defaults() {
        let config = Config::parse(
            r#"
listen = "127.0.0.1:8080"
upstream = "http://127.0.0.1:3000/mcp"
metrics = "127.0.0.1:9090"

[capabilities]
tools = {}
resources = {}

[[caller]]
token = "alice-token"
principal = "alice"

[[allow]]
principals = ["alice"]
uri_prefixes = ["demo://users/alice/"]

[hub]
publish = "127.0.0.1:9091"
publish_token = "change-me"
"#,
        )
        .unwrap();
        assert_eq!(config.callers[0].principal, "alice");
        assert_eq!(config.principal_header, "x-mcp-principal");
        assert!(config.forward_authorization);
        // A short publish token is allowed, and said to be unwise.
        let warnings = config.warnings();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("shorter than 16"), "{warnings:?}");
        let hub = config.hub.unwrap();
        assert_eq!(
            (hub.max_streams, hub.prefix.as_str()),
            (10_000, "mcp-edge-proxy")
        );
        assert_eq!(config.connections.max_per_peer, 256);
    }

    #[test]
    fn mistakes_are_refused_and_named() {
        for (extra, says) in [
            ("typo = 1\n", "unknown field `typo`"),
            ("[[caller]]\ntoken = \"\"\nprincipal = \"a\"\n", "caller[0]"),
            (
                "[[caller]]\ntoken = \"t\"\nprincipal = \"a\"\n[[caller]]\ntoken = \"t\"\nprincipal = \"b\"\n",
                "given twice",
            ),
            ("[[allow]]\nprincipals = []\nuri_prefixes = [\"a\"]\n", "allow[0]"),
            (
                "[hub]\npublish = \"127.0.0.1:9\"\npublish_token = \"\"\n",
                "must not be empty",
            ),
            (
                "[hub]\npublish = \"127.0.0.1:9\"\npublish_token = \"0123456789abcdef\"\nredis = \"redis://a\"\nredis_cluster = [\"redis://b\"]\n",
                "not both",
            ),
            ("principal_header = \"bad header\"\n", "invalid HTTP header name"),
            ("allowed_origins = [\"nope\"]\n", "not an origin"),
            ("allowed_origins = [\"https://a.example/x\"]\n", "not an origin"),
        ] {
            let error = Config::parse(&format!("{MINIMAL}{extra}")).unwrap_err().0;
            assert!(error.contains(says), "{extra}: {error}");
        }
        let https = "listen = \"127.0.0.1:1\"\nupstream = \"https://h/mcp\"\n";
        assert!(Config::parse(https).unwrap_err().0.contains("http:// URL"));
    }
}
