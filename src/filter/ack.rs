//! The acknowledgment's `notifications` object, written as the honoured
//! fields are decided.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::Kind;

/// The acknowledgment's `notifications` object, written in request order.
pub(super) struct Ack(String);

impl Ack {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self(String::with_capacity(capacity))
    }

    fn key(&mut self, kind: Kind) {
        self.0.push(if self.0.is_empty() { '{' } else { ',' });
        self.0.push('"');
        self.0.push_str(kind.field());
        self.0.push_str("\":");
    }

    pub(super) fn push_true(&mut self, kind: Kind) {
        self.key(kind);
        self.0.push_str("true");
    }

    pub(super) fn push_strings(&mut self, kind: Kind, items: &[&Cow<'_, str>]) {
        self.key(kind);
        self.0.push('[');
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.0.push(',');
            }
            match item {
                // The request's own text, which has nothing to escape: it is
                // what serde_json would write.
                Cow::Borrowed(text) => {
                    self.0.push('"');
                    self.0.push_str(text);
                    self.0.push('"');
                }
                Cow::Owned(text) => self
                    .0
                    .push_str(&serde_json::to_string(text).expect("strings serialize")),
            }
        }
        self.0.push(']');
    }

    pub(super) fn finish(mut self) -> Box<RawValue> {
        if self.0.is_empty() {
            self.0.push('{');
        }
        self.0.push('}');
        RawValue::from_string(self.0).expect("the ack is a JSON object")
    }
}
