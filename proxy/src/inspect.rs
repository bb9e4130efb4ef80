//! What the forwarding service reads of a request's body: its JSON-RPC id
//! (for an error in the upstream's place), and the URIs of any
//! `resources/read` in it, which the `[[allow]]` rules must grant the
//! caller as they grant a listen.
//!
//! A reader that keeps the first of duplicate keys and one that keeps the
//! last must not read different things into a body the proxy let pass:
//! every `method` and every `params.uri` is collected, and a read passes
//! only when each URI named is granted.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A visitor's answer to a scalar where it looks for an object or an
/// array: nothing to read in it.
macro_rules! scalars_read_as_nothing {
    () => {
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }

        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }

        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }

        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }

        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    };
}

/// What one body says, as far as the proxy needs.
#[derive(Debug, Default)]
pub struct Inspected {
    /// The id of the (first) message, as JSON text.
    pub id: Option<Box<RawValue>>,
    /// Whether a message of the body is a `resources/read`.
    pub reads: bool,
    /// Every `params.uri` of such a message.
    pub uris: Vec<String>,
}

impl Inspected {
    /// What `body` says: nothing when it is not JSON (the upstream then
    /// answers it as it must).
    pub fn of(body: &[u8]) -> Self {
        let mut inspected = Self::default();
        let mut reader = serde_json::Deserializer::from_slice(body);
        let parsed = serde::de::DeserializeSeed::deserialize(Body(&mut inspected), &mut reader)
            .and_then(|()| reader.end());
        if parsed.is_err() {
            // Only what was read before the error counts for the id; a
            // read is refused rather than guessed at.
            inspected.reads |= inspected.uris.is_empty() && mentions_read(body);
        }
        inspected
    }
}

/// Whether `body` might name `resources/read` in a way the parse could not
/// follow (the parse failed): a refusal is cheaper than a guess.
fn mentions_read(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    text.contains("resources/read") || text.contains("resources\\/read") || text.contains("\\u")
}

/// A body: one message, or a batch of them.
struct Body<'a>(&'a mut Inspected);

impl<'de> serde::de::DeserializeSeed<'de> for Body<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Body<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message or a batch")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        Message(self.0).visit_map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inspected = self.0;
        let first_id = inspected.id.take();
        while seq
            .next_element_seed(MessageSeed(&mut *inspected))?
            .is_some()
        {}
        // A batch answers with an array: no one id stands for it.
        inspected.id = first_id;
        Ok(())
    }

    scalars_read_as_nothing!();
}

struct MessageSeed<'a>(&'a mut Inspected);

impl<'de> serde::de::DeserializeSeed<'de> for MessageSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(Message(self.0))
    }
}

/// One message's members.
struct Message<'a>(&'a mut Inspected);

impl<'de> Visitor<'de> for Message<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inspected = self.0;
        let mut uris = Vec::new();
        let mut reads = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "method" => {
                    let method: serde_json::Value = map.next_value()?;
                    reads |= method.as_str() == Some("resources/read");
                }
                "id" if inspected.id.is_none() => inspected.id = Some(map.next_value()?),
                "params" => map.next_value_seed(Params(&mut uris))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if reads {
            inspected.reads = true;
            inspected.uris.extend(uris);
        }
        Ok(())
    }

    // Anything else in a batch is not a message: nothing to read in it.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    scalars_read_as_nothing!();
}

/// A message's `params`: every `uri` in it (a string, or recorded as an
/// empty one, which no rule grants).
struct Params<'a>(&'a mut Vec<String>);

impl<'de> serde::de::DeserializeSeed<'de> for Params<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Params<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("params")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "uri" {
                let uri: serde_json::Value = map.next_value()?;
                self.0.push(uri.as_str().unwrap_or_default().to_owned());
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    scalars_read_as_nothing!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> (Option<String>, bool, Vec<String>) {
        let inspected = Inspected::of(text.as_bytes());
        (
            inspected.id.map(|id| id.get().to_owned()),
            inspected.reads,
            inspected.uris,
        )
    }

    #[test]
    fn ids_and_reads_are_found_in_any_spelling() {
        assert_eq!(
            of(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#),
            (Some("7".into()), false, vec![])
        );
        assert_eq!(
            of(r#"{"params":{"uri":"demo://a"},"method":"resources/read","id":"r"}"#),
            (Some(r#""r""#.into()), true, vec!["demo://a".into()])
        );
        // Escaped names are names.
        assert_eq!(
            of(r#"{"id":1,"\u006dethod":"resources\/read","params":{"\u0075ri":"demo://b"}}"#),
            (Some("1".into()), true, vec!["demo://b".into()])
        );
        // Duplicates: every one counts.
        assert_eq!(
            of(
                r#"{"id":1,"method":"resources/read","params":{"uri":"demo://ok","uri":"demo://secret"}}"#
            ),
            (
                Some("1".into()),
                true,
                vec!["demo://ok".into(), "demo://secret".into()]
            )
        );
        assert!(of(r#"{"id":1,"method":"tools/call","method":"resources/read","params":{"uri":"demo://x"}}"#).1);
        // A batch: each message.
        assert_eq!(
            of(
                r#"[{"id":1,"method":"ping"},{"id":2,"method":"resources/read","params":{"uri":"demo://c"}}]"#
            ),
            (None, true, vec!["demo://c".into()])
        );
        // A uri that is not a string is granted to no one.
        assert_eq!(
            of(r#"{"id":1,"method":"resources/read","params":{"uri":7}}"#).2,
            vec![String::new()]
        );
        // Not JSON: a read is assumed when it might be one.
        assert!(of(r#"{"id":1,"method":"resources/read""#).1);
        assert!(!of("not json").1);
        assert_eq!(
            of(r#"{"id":3,"method":"tools/list""#).0.as_deref(),
            Some("3")
        );
    }
}
