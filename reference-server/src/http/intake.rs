//! What a pipeline request must pass before its upload is read: the hook header, a well-formed
//! query string, its endpoint's parameters and an accepted `Content-Type`. Each failure is a 400
//! with its own code (F2).

use std::collections::HashMap;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderMap, header};
use plimsoll_spec::{ErrorCode, HookDirective, Pool};

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// The query string as axum extracts it, every pair in order, so a repeated name is seen (a
/// malformed one is answered by us, not by axum).
pub(super) type Params = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The parts of a request that passed intake.
pub(super) struct Prepared<P> {
    pub hooks: Vec<HookDirective>,
    pub params: P,
}

/// Checks a request of `pool` in the contract's order; `params` reads the endpoint's own
/// parameters from the query.
// clause: F2 — invalid input is a 400 with one code per failure mode, before any work
pub(super) fn prepare<P>(
    state: &AppState,
    id: &str,
    pool: Pool,
    query: Params,
    headers: &HeaderMap,
    content_types: &[String],
    params: impl FnOnce(&HashMap<String, String>) -> Result<P, ErrorKind>,
) -> Result<Prepared<P>, ApiError> {
    let checked = || {
        let name = &state.headers.hook;
        let hook = match headers.get(name).map(|v| v.to_str()) {
            // Bytes outside visible ASCII are no directive list: refused like any malformed hook
            // (once hooks are on), never read as an empty header.
            Some(Err(_)) if state.config.hooks_enabled => {
                return Err(ErrorKind::rejected(
                    ErrorCode::InvalidParameter,
                    format!("{name} is not ASCII text"),
                ));
            }
            Some(value) => Some(value.unwrap_or_default()),
            None => None,
        };
        let hooks =
            crate::hooks::authorise(&state.config.contract, state.config.hooks_enabled, hook)?;
        let Query(query) = query.map_err(|e| {
            ErrorKind::rejected(
                ErrorCode::InvalidParameter,
                format!("bad query string: {e}"),
            )
        })?;
        let params = params(&by_name(query)?)?;
        content_type(state, headers, content_types)?;
        Ok(Prepared { hooks, params })
    };
    checked().map_err(|kind| ApiError::new(id, Some(pool), kind))
}

/// The query's parameters by name; a name given twice is refused, whatever its values (rule
/// `query-parameters`): which of them would count is not the client's to guess.
fn by_name(pairs: Vec<(String, String)>) -> Result<HashMap<String, String>, ErrorKind> {
    let mut query = HashMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        if query.contains_key(&name) {
            return Err(ErrorKind::rejected(
                ErrorCode::InvalidParameter,
                format!("parameter `{name}` is given more than once"),
            ));
        }
        query.insert(name, value);
    }
    Ok(query)
}

/// Refuses the first query parameter that is not one of `known`.
pub(super) fn no_unknown<'k>(
    query: &HashMap<String, String>,
    known: impl IntoIterator<Item = &'k str> + Clone,
) -> Result<(), ErrorKind> {
    match query
        .keys()
        .find(|k| !known.clone().into_iter().any(|name| name == k.as_str()))
    {
        Some(unknown) => Err(ErrorKind::rejected(
            ErrorCode::InvalidParameter,
            format!("unknown parameter `{unknown}`"),
        )),
        None => Ok(()),
    }
}

/// A present `Content-Type` must be one the endpoint takes (as the server's
/// [`MediaTypes`](crate::media::MediaTypes) reads it: parameters such as `charset` aside).
fn content_type(
    state: &AppState,
    headers: &HeaderMap,
    accepted: &[String],
) -> Result<(), ErrorKind> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = state.components().media_types.media_type(value);
    if accepted.iter().any(|a| *a == media) {
        Ok(())
    } else {
        Err(ErrorKind::rejected(
            ErrorCode::UnsupportedFormat,
            format!(
                "Content-Type `{media}` is not accepted; expected {}",
                accepted.join(" or ")
            ),
        ))
    }
}
