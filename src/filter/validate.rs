//! Steps 1 to 3 of honouring a filter: its shape and types, before any hook
//! runs, so bad input costs no hook calls.

use std::borrow::Cow;

use super::{Kind, Kinds, ListenError};
use crate::advertise::TASKS_EXTENSION;
use crate::codec::json::{self, Found};
use crate::profile::ServerProfile;

pub(super) fn invalid(message: String) -> ListenError {
    ListenError::InvalidParams(message)
}

/// The validated, not yet authorized, fields of a filter in request order.
pub(super) enum Field<'a> {
    Flag(Kind, bool),
    Uris(Vec<Cow<'a, str>>),
    TaskIds(Vec<Cow<'a, str>>),
}

/// A filter past steps 1 and 2.
pub(super) struct Validated<'a> {
    pub(super) fields: Vec<Field<'a>>,
    /// `params._meta`, for step 3.
    pub(super) meta: Option<&'a str>,
    /// `params.notifications`: what the ack replaces in the body.
    pub(super) notifications: &'a str,
}

/// One member of `notifications`: its text, and its items when it was read
/// as an array of strings on the way.
type Entry<'a> = (Cow<'a, str>, &'a str, Option<Vec<Cow<'a, str>>>);

/// Steps 1 and 2: shape and types. `params` is valid JSON text.
pub(super) fn validate<'a>(
    profile: &ServerProfile,
    params: Option<&'a str>,
) -> Result<Validated<'a>, ListenError> {
    let params = params.ok_or_else(|| invalid("`params` is required".into()))?;
    let limits = profile.limits();
    // One skim of `params`: the first `notifications` object has its members
    // read on the way, its string arrays with them.
    let most = limits.max_uris.max(limits.max_task_ids);
    let (mut notifications, mut meta) = (Found::Absent, Found::Absent);
    let mut first: Option<(Vec<Entry<'a>>, bool)> = None;
    let mut skim = json::Skim::new(params);
    let read = skim.members(|skim, key| {
        match &*key {
            "notifications" if notifications == Found::Absent && skim.at_object() => {
                let mut entries = Vec::with_capacity(4);
                let (text, readable) = skim.members(|skim, key| {
                    let lists = matches!(
                        Kind::from_field(&key),
                        Some(Kind::ResourceSubscriptions | Kind::TaskIds)
                    );
                    let (text, items) = skim.value_and_strings(if lists { most } else { 0 })?;
                    entries.push((key, text, items));
                    Some(())
                })?;
                notifications.record(text);
                first = Some((entries, readable));
            }
            "notifications" => notifications.record(skim.value()?),
            "_meta" => meta.record(skim.value()?),
            _ => skim.skip()?,
        }
        Some(())
    });
    if !matches!(read, Some((_, true))) {
        return Err(invalid(format!(
            "`params` must be an object, got {}",
            json::kind(params)
        )));
    }
    let notifications = match notifications {
        Found::One(notifications) => notifications,
        Found::Absent => return Err(invalid("`params.notifications` is required".into())),
        Found::Ambiguous => {
            return Err(invalid(
                "`params.notifications` appears more than once".into(),
            ))
        }
    };
    let meta = meta
        .unambiguous()
        .ok_or_else(|| invalid("`params._meta` appears more than once".into()))?;
    let Some((entries, true)) = first else {
        return Err(invalid(format!(
            "`params.notifications` must be an object, got {}",
            json::kind(notifications)
        )));
    };

    let fields = fields(profile, entries)?;
    Ok(Validated {
        fields,
        meta,
        notifications,
    })
}

/// Step 2 on the members of `notifications`: the fields honoured here,
/// each of the right type and within its limit, none twice.
fn fields<'a>(
    profile: &ServerProfile,
    entries: Vec<Entry<'a>>,
) -> Result<Vec<Field<'a>>, ListenError> {
    let limits = profile.limits();
    let mut seen = Kinds::default();
    let mut fields = Vec::with_capacity(entries.len());
    for (name, value, scanned) in entries {
        let Some(kind) = Kind::from_field(&name) else {
            continue;
        };
        if kind == Kind::TaskIds && !profile.tasks_enabled() {
            continue;
        }
        if seen.contains(kind) {
            return Err(invalid(format!(
                "`notifications.{name}` appears more than once"
            )));
        }
        seen.insert(kind);
        fields.push(match kind {
            Kind::ResourceSubscriptions => {
                Field::Uris(strings(kind, value, scanned, limits.max_uris, "URIs")?)
            }
            Kind::TaskIds => Field::TaskIds(strings(
                kind,
                value,
                scanned,
                limits.max_task_ids,
                "task ids",
            )?),
            flag => match value {
                "true" => Field::Flag(flag, true),
                "false" => Field::Flag(flag, false),
                _ => {
                    return Err(invalid(format!(
                        "`notifications.{}` must be a boolean, got {}",
                        flag.field(),
                        json::kind(value)
                    )))
                }
            },
        });
    }
    Ok(fields)
}

/// An array of at most `max` strings; `scanned` is its items when the skim
/// already read them.
fn strings<'a>(
    kind: Kind,
    value: &'a str,
    scanned: Option<Vec<Cow<'a, str>>>,
    max: usize,
    what: &str,
) -> Result<Vec<Cow<'a, str>>, ListenError> {
    if let Some(items) = scanned.filter(|items| items.len() <= max) {
        return Ok(items);
    }
    // Not a short enough array of strings: read it again, to say why.
    let field = kind.field();
    let items: Vec<&'a serde_json::value::RawValue> =
        serde_json::from_str(value).map_err(|_| {
            invalid(format!(
                "`notifications.{field}` must be an array of strings, got {}",
                json::kind(value)
            ))
        })?;
    if items.len() > max {
        return Err(invalid(format!(
            "`notifications.{field}` lists {} {what}; at most {max} are allowed",
            items.len()
        )));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            json::string(item.get()).ok_or_else(|| {
                let got = match json::kind(item.get()) {
                    "a string" => "a string that is not valid Unicode",
                    other => other,
                };
                invalid(format!(
                    "`notifications.{field}` must be an array of strings, got {got} at index {index}"
                ))
            })
        })
        .collect()
}

/// Step 3's question: `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`
/// has the tasks extension (objects at every level; anything else declares
/// nothing).
pub(super) fn declares_tasks(meta: Option<&str>) -> bool {
    fn member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
        json::unique(&json::members(object)?, key).one()
    }
    meta.and_then(|meta| member(meta, "io.modelcontextprotocol/clientCapabilities"))
        .and_then(|caps| member(caps, "extensions"))
        .and_then(json::members)
        .is_some_and(|extensions| extensions.iter().any(|(key, _)| key == TASKS_EXTENSION))
}
