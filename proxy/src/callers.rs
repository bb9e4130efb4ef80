//! Who the caller is: a static bearer token, a JWT verified against the
//! keys of a JWKS file, or no `Authorization` at all (the anonymous
//! caller). Any other `Authorization` is answered 401 with
//! `WWW-Authenticate`, as the MCP authorization spec asks, and never
//! reaches the upstream (`admit` asks this module, for every request).

use std::time::Duration;

use axum::response::Response;
use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, StatusCode};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use mcp_edge::Principal;
use serde::Deserialize;

use crate::answer;
use crate::config::{Config, ConfigError, Jwt};

/// The callers the proxy knows.
pub struct Callers {
    /// Static tokens and their principals.
    tokens: Vec<(Box<[u8]>, Principal)>,
    jwt: Option<Verifier>,
}

/// Why a request's `Authorization` names no caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not `Bearer`, or given twice.
    Malformed,
    /// A bearer token the proxy does not accept (unknown, expired, not
    /// signed by a known key, another issuer or audience).
    Invalid,
}

impl Callers {
    /// The callers of `config`: its static tokens, and its JWKS file read.
    pub fn from_config(config: &Config) -> Result<Self, ConfigError> {
        let tokens = config
            .callers
            .iter()
            .map(|c| {
                (
                    c.token.as_bytes().into(),
                    Principal::new(c.principal.as_str()),
                )
            })
            .collect();
        let jwt = config.jwt.as_ref().map(Verifier::load).transpose()?;
        Ok(Self { tokens, jwt })
    }

    /// The caller `headers` name: `None` for an anonymous one.
    pub fn identify(&self, headers: &HeaderMap) -> Result<Option<Principal>, Refused> {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(Refused::Malformed);
        }
        let token = value
            .as_bytes()
            .strip_prefix(b"Bearer ")
            .or_else(|| value.as_bytes().strip_prefix(b"bearer "))
            .ok_or(Refused::Malformed)?;
        // Every static token is compared, in time that does not depend on
        // where the first difference is.
        let mut found = None;
        for (known, principal) in &self.tokens {
            if constant_time_eq(known, token) {
                found = Some(principal.clone());
            }
        }
        if let Some(principal) = found {
            return Ok(Some(principal));
        }
        let token = std::str::from_utf8(token).map_err(|_| Refused::Invalid)?;
        match &self.jwt {
            Some(verifier) => verifier.verify(token).map(Some),
            None => Err(Refused::Invalid),
        }
    }
}

/// Whether `a` and `b` are the same bytes, in a time that depends on their
/// lengths only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let differ = a
        .iter()
        .zip(b)
        .fold(a.len() ^ b.len(), |acc, (x, y)| acc | usize::from(x ^ y));
    differ == 0
}

impl Refused {
    /// 401, with the challenge the MCP authorization spec asks for.
    pub fn answer(self) -> Response {
        let (challenge, message) = match self {
            Refused::Malformed => (
                r#"Bearer error="invalid_request""#,
                "Unauthorized: the Authorization header must be one `Bearer` token",
            ),
            Refused::Invalid => (
                r#"Bearer error="invalid_token""#,
                "Unauthorized: the bearer token is not accepted",
            ),
        };
        let mut response = answer::error(StatusCode::UNAUTHORIZED, None, -32001, message);
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        response
    }
}

/// JWT verification against a JWKS file's keys.
struct Verifier {
    /// Each key, its id and the one algorithm it verifies.
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
    issuer: String,
    audience: Vec<String>,
    leeway: Duration,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
}

impl Verifier {
    fn load(jwt: &Jwt) -> Result<Self, ConfigError> {
        let file = jwt.jwks_file.display();
        let text = std::fs::read_to_string(&jwt.jwks_file)
            .map_err(|e| ConfigError(format!("`jwt.jwks_file` {file}: {e}")))?;
        let set: JwkSet = serde_json::from_str(&text)
            .map_err(|e| ConfigError(format!("`jwt.jwks_file` {file}: not a JWKS: {e}")))?;
        let mut keys = Vec::new();
        for (i, jwk) in set.keys.iter().enumerate() {
            let algorithm = algorithm_of(jwk).ok_or_else(|| {
                ConfigError(format!(
                    "`jwt.jwks_file` {file}: key {i} is not an RSA, EC (P-256, P-384) or Ed25519 public key"
                ))
            })?;
            let key = DecodingKey::from_jwk(jwk)
                .map_err(|e| ConfigError(format!("`jwt.jwks_file` {file}: key {i}: {e}")))?;
            keys.push((jwk.common.key_id.clone(), algorithm, key));
        }
        if keys.is_empty() {
            return Err(ConfigError(format!("`jwt.jwks_file` {file}: no key")));
        }
        Ok(Self {
            keys,
            issuer: jwt.issuer.clone(),
            audience: jwt.audience.clone(),
            leeway: Duration::from_secs(jwt.leeway_secs),
        })
    }

    /// The principal of a token: its `sub`, once its signature (by a key
    /// of its `kid` and of the key's own algorithm), issuer, audience and
    /// lifetime hold.
    fn verify(&self, token: &str) -> Result<Principal, Refused> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refused::Invalid)?;
        let candidates = self.keys.iter().filter(|(kid, algorithm, _)| {
            *algorithm == header.alg && (header.kid.is_none() || header.kid == *kid)
        });
        for (_, algorithm, key) in candidates {
            let mut validation = Validation::new(*algorithm);
            validation.set_issuer(&[&self.issuer]);
            validation.set_audience(&self.audience);
            validation.leeway = self.leeway.as_secs();
            validation.validate_nbf = true;
            if let Ok(data) = jsonwebtoken::decode::<Claims>(token, key, &validation) {
                if data.claims.sub.is_empty() {
                    return Err(Refused::Invalid);
                }
                return Ok(Principal::new(data.claims.sub));
            }
        }
        Err(Refused::Invalid)
    }
}

/// The one algorithm a key verifies: its `alg`, else the usual one of its
/// type. Symmetric keys are not taken: a JWKS file holds public keys.
fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    let default = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => Algorithm::EdDSA,
            _ => return None,
        },
        _ => return None,
    };
    let algorithm = match jwk.common.key_algorithm {
        Some(given) => Algorithm::try_from(given).ok()?,
        None => default,
    };
    (algorithm.family() == default.family()).then_some(algorithm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_in_full() {
        assert!(constant_time_eq(b"alice-token", b"alice-token"));
        assert!(!constant_time_eq(b"alice-token", b"alice-tokem"));
        assert!(!constant_time_eq(b"alice-token", b"alice-token-"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
