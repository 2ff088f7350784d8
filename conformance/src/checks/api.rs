//! API: every reply of the run matched the contract's OpenAPI document (documented status per
//! operation, header types) and, for errors, the problem schema and media type.

use std::sync::Arc;

use plimsoll_spec::CheckId;

use crate::checks::ctx::Ctx;
use crate::checks::registry::{Check, Run};
use crate::remote::Target;

/// The `API` check's entry in the registry: the evidence the docs print, and `api`, which gathers
/// it from every reply of the run.
pub const CHECK: Check = Check::whole_run(
    CheckId::Api,
    "Responses match the OpenAPI document and problem schema",
    "Every reply of the run is validated as it arrives against the contract's OpenAPI document \
     (a status documented for its operation, headers of the documented type) and, for errors, \
     the problem media type and schema, so API runs last. Each clause check fails only for its \
     own clause; this one gathers every violation.",
    Run::Target(|t, c| Box::pin(api(t, c))),
);

async fn api(t: &Arc<Target>, c: &mut Ctx) {
    c.expected = "every status documented for its operation; error bodies valid problem+json; headers as typed".into();
    let seen = t.seen.lock().unwrap_or_else(|e| e.into_inner()).len();
    let violations = t
        .violations
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    c.observed = format!("{} violation(s) in {seen} replies", violations.len());
    if let Some(first) = violations.first() {
        c.fail(format!("{} violation(s); first: {first}", violations.len()));
    }
    c.evidence.extend(violations.into_iter().take(50));
}
