//! What the unit tests of several modules share.

use http::{header, Request};

use crate::hooks::Principal;

/// The auth layer in front: a bearer token names the principal
/// (`alice-token` alice, `bob-token` bob; anything else, nobody).
pub(crate) fn authenticate<B>(mut request: Request<B>) -> Request<B> {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let name = match token {
        Some("Bearer alice-token") => Some("alice"),
        Some("Bearer bob-token") => Some("bob"),
        _ => None,
    };
    if let Some(name) = name {
        request.extensions_mut().insert(Principal::new(name));
    }
    request
}
