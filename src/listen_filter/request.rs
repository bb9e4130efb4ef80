//! Reading a request the listen filter intercepts, read whole: its id and
//! params, a listen's body rewritten to carry the honoured ack, and a
//! `resources/subscribe`'s URI.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::codec::json::{self, Found, Walk};
use crate::codec::scan::Method;
use crate::http::intercept::Refusal;
use crate::rejection::Rejection;

/// A `subscriptions/listen` or `resources/subscribe` request, borrowed from
/// its body.
pub(crate) struct InterceptedRequest<'a> {
    text: &'a str,
    /// The request's id: a string or a number.
    id: &'a str,
    /// `params`, when present.
    pub(crate) params: Option<&'a str>,
}

impl<'a> InterceptedRequest<'a> {
    /// Reads the body of a request the scanner classified as `kind`: one
    /// JSON object, checked whole in one pass, with one `method`, at most
    /// one `params` and one usable `id`.
    pub(crate) fn parse(body: &'a [u8], kind: Method) -> Result<Self, Refusal> {
        let text = std::str::from_utf8(body).map_err(|_| (Rejection::Parse, None))?;
        let (mut id, mut method, mut params) = (Found::Absent, Found::Absent, Found::Absent);
        Walk::document(text, |walk, key| {
            let slot = match &*key {
                "id" => &mut id,
                "method" => &mut method,
                "params" => &mut params,
                _ => return walk.skip(),
            };
            slot.record(walk.value()?);
            Some(())
        })
        .ok_or((Rejection::Parse, None))?;
        let usable = id.one().filter(|id| json::is_usable_id(id));
        let refuse = |message| (Rejection::InvalidRequest(message), usable.map(raw));
        if method == Found::Ambiguous {
            return Err(refuse("the request has more than one `method`"));
        }
        let params = params
            .unambiguous()
            .ok_or_else(|| refuse("the request has more than one `params`"))?;
        let id = match (id, usable) {
            (_, Some(id)) => id,
            (Found::One(_), None) => {
                return Err(refuse(match kind {
                    Method::Subscribe => {
                        "the id of a `resources/subscribe` request must be a string or a number"
                    }
                    _ => "the id of a listen request must be a string or a number",
                }))
            }
            (Found::Ambiguous, None) => return Err(refuse("the request has more than one `id`")),
            (Found::Absent, None) => {
                return Err(refuse(match kind {
                    Method::Subscribe => "a `resources/subscribe` request needs an id",
                    _ => "a listen request needs an id",
                }))
            }
        };
        Ok(Self { text, id, params })
    }

    /// The request's id.
    pub(crate) fn id(&self) -> Box<RawValue> {
        raw(self.id)
    }

    /// True when the request is of the 2026-07-28 era: its
    /// `MCP-Protocol-Version` header names that version or a later one, or
    /// its `params._meta` carries the protocol version, as only that era's
    /// requests do.
    pub(crate) fn is_modern(&self, parts: &http::request::Parts) -> bool {
        let header = parts
            .headers
            .get("mcp-protocol-version")
            .is_some_and(|version| version.as_bytes() >= b"2026-07-28".as_slice());
        header
            || self
                .params
                .and_then(json::members)
                .and_then(|params| json::unique(&params, "_meta").one())
                .and_then(json::members)
                .is_some_and(|meta| {
                    meta.iter()
                        .any(|(key, _)| key == "io.modelcontextprotocol/protocolVersion")
                })
    }

    /// The `params.uri` of a `resources/subscribe`: `params` one object
    /// with one `uri`, a string.
    pub(crate) fn uri(&self) -> Result<Cow<'a, str>, &'static str> {
        let params = self.params.ok_or("`params.uri` is missing")?;
        let members = json::members(params).ok_or("`params` must be an object")?;
        match json::unique(&members, "uri") {
            Found::One(uri) => json::string(uri).ok_or("`params.uri` must be a string"),
            Found::Absent => Err("`params.uri` is missing"),
            Found::Ambiguous => Err("`params` has more than one `uri`"),
        }
    }

    /// The body with `notifications`, a value borrowed from its `params`,
    /// replaced by `ack`, every other byte kept.
    pub(crate) fn with_ack(&self, notifications: &str, ack: &RawValue) -> String {
        json::splice(
            self.text,
            &[(json::span(self.text, notifications), ack.get())],
        )
    }
}

/// A value of a checked document, as a `RawValue`.
fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("the walk checked the value")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &str) -> (Rejection, Option<String>) {
        let (rejection, id) = InterceptedRequest::parse(body.as_bytes(), Method::Listen)
            .err()
            .unwrap();
        (rejection, id.map(|id| id.get().to_owned()))
    }

    #[test]
    fn parses_id_and_params() {
        let body = br#"{"jsonrpc":"2.0","id":"a-1","method":"subscriptions/listen","params":{"notifications":{}}}  "#;
        let request = InterceptedRequest::parse(body, Method::Listen).unwrap();
        assert_eq!(request.id().get(), r#""a-1""#);
        assert_eq!(request.params.unwrap(), r#"{"notifications":{}}"#);
    }

    #[test]
    fn refusals_echo_the_id() {
        assert_eq!(
            refusal(r#"{"id":1,"method":"subscriptions/listen","params":{},"params":{}}"#),
            (
                Rejection::InvalidRequest("the request has more than one `params`"),
                Some("1".into())
            )
        );
        assert_eq!(
            refusal(r#"{"id":1,"method":"subscriptions/listen","method":"x"}"#).0,
            Rejection::InvalidRequest("the request has more than one `method`")
        );
        assert_eq!(
            refusal(r#"{"method":"subscriptions/listen"}"#),
            (
                Rejection::InvalidRequest("a listen request needs an id"),
                None
            )
        );
        assert_eq!(
            refusal(r#"{"id":1,"id":2,"method":"subscriptions/listen"}"#),
            (
                Rejection::InvalidRequest("the request has more than one `id`"),
                None
            )
        );
        assert_eq!(
            refusal(r#"{"id":null,"method":"subscriptions/listen"}"#).0,
            Rejection::InvalidRequest("the id of a listen request must be a string or a number")
        );
        assert_eq!(
            refusal(r#"{"id":1,"method":"subscriptions/listen","#),
            (Rejection::Parse, None)
        );
        assert_eq!(
            InterceptedRequest::parse(b"\xff{}", Method::Listen)
                .err()
                .unwrap()
                .0,
            Rejection::Parse
        );
    }

    #[test]
    fn with_ack_keeps_every_other_byte() {
        let body = br#"{"id":7, "method":"subscriptions/listen", "params":{"_meta":{"k":1}, "notifications": {"toolsListChanged":true,"x":[1]}}, "extra":true}"#;
        let request = InterceptedRequest::parse(body, Method::Listen).unwrap();
        let ack: Box<RawValue> = serde_json::from_str(r#"{"toolsListChanged":true}"#).unwrap();
        let params = json::members(request.params.unwrap()).unwrap();
        let notifications = json::unique(&params, "notifications").one().unwrap();
        assert_eq!(
            request.with_ack(notifications, &ack),
            r#"{"id":7, "method":"subscriptions/listen", "params":{"_meta":{"k":1}, "notifications": {"toolsListChanged":true}}, "extra":true}"#
        );
    }
}
