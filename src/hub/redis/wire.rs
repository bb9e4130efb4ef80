//! The bus's wire format: the names of its channels and its messages.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::filter::stream::coverers;
#[cfg(test)]
use crate::filter::stream::covers_bytes as covers;
use crate::filter::ListChanged;
use crate::hooks::Principal;
use crate::hub::change::{Change, Channel};

/// The longest instance id a message may name.
pub(super) const MAX_FROM: usize = 64;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The Redis channel of `channel`, under `prefix`.
pub(super) fn channel_name(prefix: &str, channel: Channel<'_>) -> String {
    match channel {
        Channel::Resource(uri) => format!("{prefix}:r:{}", B64.encode(uri)),
        Channel::List(list) => format!("{prefix}:l:{}", list_name(list)),
        Channel::Task { owner, id } => format!(
            "{prefix}:t:{}:{}",
            B64.encode(owner.as_str()),
            B64.encode(id)
        ),
    }
}

/// The name of a list, in its channel and in messages.
fn list_name(list: ListChanged) -> &'static str {
    match list {
        ListChanged::Tools => "tools",
        ListChanged::Prompts => "prompts",
        ListChanged::Resources => "resources",
    }
}

/// The channels a change is published on: for an update, its URI's and
/// every covering URI's.
pub(super) fn channels_of(prefix: &str, change: &Change) -> Vec<String> {
    match change {
        Change::ResourceUpdated { uri } => coverers(uri)
            .map(|honoured| channel_name(prefix, Channel::Resource(honoured)))
            .collect(),
        Change::ListChanged(list) => vec![channel_name(prefix, Channel::List(*list))],
        Change::TaskStatus { owner, task_id, .. } => {
            vec![channel_name(prefix, Channel::Task { owner, id: task_id })]
        }
    }
}

/// A message on the wire.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Message {
    v: u32,
    from: String,
    seq: u64,
    /// 128 random bits in hex, drawn per message: what makes its bytes
    /// unknown to anyone before it is sent. Optional on read, so that a
    /// process may publish without one (and be predictable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    change: Wire,
}

/// A message id: 128 bits from the operating system's generator, in hex.
pub(super) fn random_id() -> Result<String, getrandom::Error> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits)?;
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Wire {
    ResourceUpdated {
        uri: String,
    },
    ListChanged {
        list: String,
    },
    TaskStatus {
        owner: String,
        #[serde(rename = "taskId")]
        task_id: String,
        params: Map<String, Value>,
    },
}

impl Message {
    /// Message `seq` of instance `from`, its id `id`, carrying `change`.
    pub(super) fn new(from: &str, seq: u64, id: String, change: &Change) -> Self {
        Self {
            v: 1,
            from: from.to_owned(),
            seq,
            id: Some(id),
            change: Wire::of(change),
        }
    }

    /// The message `payload` holds, if it is one: of version 1, from an
    /// instance id of at most [`MAX_FROM`] bytes.
    pub(super) fn read(payload: &[u8]) -> Option<Self> {
        serde_json::from_slice::<Message>(payload)
            .ok()
            .filter(|message| message.v == 1 && message.from.len() <= MAX_FROM)
    }

    /// The instance that sent it.
    pub(super) fn from(&self) -> &str {
        &self.from
    }

    /// The change it carries, if the hub knows it.
    pub(super) fn into_change(self) -> Option<Change> {
        self.change.into_change()
    }
}

/// How every message of `instance` starts on the wire.
pub(super) fn echo(instance: &str) -> Vec<u8> {
    format!(r#"{{"v":1,"from":"{instance}","#).into_bytes()
}

impl Wire {
    fn of(change: &Change) -> Self {
        match change {
            Change::ResourceUpdated { uri } => Wire::ResourceUpdated { uri: uri.clone() },
            Change::ListChanged(list) => Wire::ListChanged {
                list: list_name(*list).to_owned(),
            },
            Change::TaskStatus {
                owner,
                task_id,
                params,
            } => Wire::TaskStatus {
                owner: owner.as_str().to_owned(),
                task_id: task_id.clone(),
                params: params.clone(),
            },
        }
    }

    fn into_change(self) -> Option<Change> {
        Some(match self {
            Wire::ResourceUpdated { uri } => Change::ResourceUpdated { uri },
            Wire::ListChanged { list } => Change::ListChanged(match list.as_str() {
                "tools" => ListChanged::Tools,
                "prompts" => ListChanged::Prompts,
                "resources" => ListChanged::Resources,
                _ => return None,
            }),
            Wire::TaskStatus {
                owner,
                task_id,
                params,
            } => Change::TaskStatus {
                owner: Principal::new(owner),
                task_id,
                params,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn channel_names_are_injective_and_under_the_prefix() {
        let alice = Principal::new("a:b");
        let names = [
            channel_name("p", Channel::Resource("file:///a:b")),
            channel_name("p", Channel::Resource("file:///a")),
            channel_name("p", Channel::List(ListChanged::Tools)),
            channel_name(
                "p",
                Channel::Task {
                    owner: &alice,
                    id: "c",
                },
            ),
            channel_name(
                "p",
                Channel::Task {
                    owner: &Principal::new("a"),
                    id: "b:c",
                },
            ),
        ];
        let distinct: HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert!(names.iter().all(|name| name.starts_with("p:")));
        assert_eq!(names[2], "p:l:tools");
        // Any byte a URI may hold stays inside its own segment.
        let odd = channel_name("p", Channel::Resource("x:*?[]\n\u{0}é"));
        assert_eq!(odd.matches(':').count(), 2);
    }

    #[test]
    fn an_update_goes_to_the_channel_of_every_covering_uri() {
        let names = channels_of(
            "p",
            &Change::ResourceUpdated {
                uri: "file:///logs/today".into(),
            },
        );
        let expected: Vec<String> = [
            "file:",
            "file:/",
            "file://",
            "file:///",
            "file:///logs",
            "file:///logs/",
            "file:///logs/today",
        ]
        .into_iter()
        .filter(|h| covers(h.as_bytes(), b"file:///logs/today"))
        .map(|h| channel_name("p", Channel::Resource(h)))
        .collect();
        assert_eq!(names, expected);
        assert!(names.contains(&channel_name("p", Channel::Resource("file:///logs"))));
        // A URI with a dot segment is covered only by itself, whatever
        // ends the segment.
        for uri in [
            "file:///logs/../etc",
            "file:///logs/..?/etc",
            "file:///logs/%2e#x",
        ] {
            let names = channels_of("p", &Change::ResourceUpdated { uri: uri.into() });
            assert_eq!(names, [channel_name("p", Channel::Resource(uri))], "{uri}");
        }
    }

    /// Ids are 32 hex digits, and no two drawn alike.
    #[test]
    fn ids_are_random_128_bit_hex() {
        let ids: HashSet<String> = (0..1000).map(|_| random_id().unwrap()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids
            .iter()
            .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())));
    }

    #[test]
    fn messages_round_trip_and_strangers_are_refused() {
        let change = Change::TaskStatus {
            owner: Principal::new("alice"),
            task_id: "t-1".into(),
            params: serde_json::json!({"status": "completed"})
                .as_object()
                .unwrap()
                .clone(),
        };
        let message = Message::new("i", 3, "0f".repeat(16), &change);
        let text = serde_json::to_string(&message).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"from":"i","seq":3,"id":"0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f","change":{"type":"task_status","owner":"alice","taskId":"t-1","params":{"status":"completed"}}}"#
        );
        let back: Message = serde_json::from_str(&text).unwrap();
        assert_eq!(back.change.into_change(), Some(change.clone()));
        // A process may publish without an id.
        let plain = r#"{"v":1,"from":"p","seq":1,"change":{"type":"list_changed","list":"tools"}}"#;
        let back = Message::read(plain.as_bytes()).map(Message::into_change);
        assert_eq!(back, Some(Some(Change::ListChanged(ListChanged::Tools))));
        for bad in [
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"list_changed","list":"widgets"}}"#,
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"deleted"}}"#,
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"resource_updated","uri":"a","extra":1}}"#,
            r#"{"v":1,"from":"i","change":{"type":"resource_updated","uri":"a"}}"#,
            r#"{"v":1,"from":"i","seq":3,"id":7,"change":{"type":"resource_updated","uri":"a"}}"#,
        ] {
            let parsed = serde_json::from_str::<Message>(bad)
                .ok()
                .and_then(|m| m.change.into_change());
            assert_eq!(parsed, None, "{bad}");
        }
    }
}
