//! The `[[allow]]` rules: who may read which resources. A listen's URIs,
//! a legacy subscription and a `resources/read` through the proxy are
//! granted by them alike; nothing is readable that no rule grants.

use std::sync::Arc;

use mcp_edge::{covers, Principal};

use crate::config::{Allow, Config};

/// Every rule of a configuration; cloning is an `Arc` clone.
#[derive(Clone)]
pub struct Allows(Arc<[Rule]>);

impl Allows {
    pub fn of(config: &Config) -> Self {
        Self(config.allows.iter().map(Rule::from).collect())
    }

    /// Whether some rule lets `caller` read `uri`.
    pub fn allows(&self, caller: Option<&Principal>, uri: &str) -> bool {
        self.0.iter().any(|rule| rule.allows(caller, uri))
    }
}

/// One `[[allow]]` rule.
struct Rule {
    everyone: bool,
    principals: Vec<String>,
    prefixes: Vec<String>,
}

impl From<&Allow> for Rule {
    fn from(allow: &Allow) -> Self {
        Self {
            everyone: allow.principals.iter().any(|p| p == "*"),
            principals: allow.principals.clone(),
            prefixes: allow.uri_prefixes.clone(),
        }
    }
}

impl Rule {
    /// Whether `caller` may read `uri` by this rule: a principal it names
    /// (or everyone), and a prefix that covers the URI by the sub-resource
    /// rule (so never a URI a client could read as another path).
    fn allows(&self, caller: Option<&Principal>, uri: &str) -> bool {
        let named = self.everyone
            || caller.is_some_and(|caller| self.principals.iter().any(|p| p == caller.as_str()));
        named && self.prefixes.iter().any(|prefix| covers(prefix, uri))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(principals: &[&str], prefixes: &[&str]) -> Rule {
        Rule::from(&Allow {
            principals: principals.iter().map(|p| p.to_string()).collect(),
            uri_prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
        })
    }

    #[test]
    fn a_rule_allows_its_principals_below_its_prefixes_only() {
        let alice = Principal::new("alice");
        let bob = Principal::new("bob");
        let own = rule(&["alice"], &["demo://users/alice/"]);
        assert!(own.allows(Some(&alice), "demo://users/alice/notes"));
        assert!(!own.allows(Some(&bob), "demo://users/alice/notes"));
        assert!(!own.allows(None, "demo://users/alice/notes"));
        assert!(!own.allows(Some(&alice), "demo://users/alice/../bob/notes"));
        assert!(!own.allows(Some(&alice), "demo://users/alice/%2e%2e?/bob/notes"));
        assert!(!own.allows(Some(&alice), "demo://users/alicex/notes"));
        let public = rule(&["*"], &["demo://public"]);
        assert!(public.allows(None, "demo://public/readme"));
        assert!(public.allows(Some(&bob), "demo://public"));
        assert!(!public.allows(None, "demo://publicity"));
    }
}
