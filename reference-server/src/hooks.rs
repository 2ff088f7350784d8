//! Test hooks (`X-Plimsoll-Hook`): honoured only when the server runs with them enabled, parsed
//! by the contract's grammar. The HTTP endpoints and the relay bridge refuse them alike.

use plimsoll_spec::{Contract, ErrorCode, HookDirective};

use crate::error::ErrorKind;

/// The directives of a request's hook header (`None`: the request has none).
pub(crate) fn authorise(
    contract: &Contract,
    enabled: bool,
    value: Option<&str>,
) -> Result<Vec<HookDirective>, ErrorKind> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let h = contract.hooks();
    if !enabled {
        return Err(ErrorKind::rejected(
            h.disabled_code,
            format!(
                "{} is only honoured when the server runs with {}=1",
                h.header, h.env
            ),
        ));
    }
    plimsoll_spec::parse_hooks(value)
        .map_err(|e| ErrorKind::rejected(ErrorCode::InvalidParameter, e.to_string()))
}
