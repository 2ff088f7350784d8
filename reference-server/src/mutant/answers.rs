//! Broken answers: each is the contract's answer ([`ContractAnswers`]) with one thing changed.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use plimsoll_spec::{Contract, ErrorCode, Pool};

use crate::error::ApiError;
use crate::problem::{Answer, ContractAnswers, ErrorMapper};

/// The contract's answer, then `tweak`.
#[derive(Clone, Copy)]
pub(super) struct Tweaked {
    what: &'static str,
    tweak: fn(&ApiError, &Contract, &mut Answer),
}

impl std::fmt::Debug for Tweaked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContractAnswers but {}", self.what)
    }
}

impl Tweaked {
    pub(super) fn arc(self) -> Arc<dyn ErrorMapper> {
        Arc::new(self)
    }
}

impl ErrorMapper for Tweaked {
    fn answer(&self, error: &ApiError, contract: &Contract) -> Answer {
        let mut answer = ContractAnswers.answer(error, contract);
        (self.tweak)(error, contract, &mut answer);
        answer
    }
}

/// T3: 503 without Retry-After.
pub(super) const NO_RETRY_AFTER: Tweaked = Tweaked {
    what: "no Retry-After",
    tweak: |_, _, a| a.retry_after = None,
};

/// T3: `Retry-After: 0`.
pub(super) const RETRY_AFTER_ZERO: Tweaked = Tweaked {
    what: "Retry-After: 0",
    tweak: |_, _, a| replace_retry_after(a, "0"),
};

/// T3: Retry-After as an HTTP-date.
pub(super) const RETRY_AFTER_HTTP_DATE: Tweaked = Tweaked {
    what: "Retry-After as an HTTP-date",
    tweak: |_, _, a| replace_retry_after(a, "Wed, 21 Oct 2026 07:28:00 GMT"),
};

/// B1: a timeout is answered 500.
pub(super) const TIMEOUT_AS_500: Tweaked = Tweaked {
    what: "timeout as 500",
    tweak: |e, _, a| internal_error_for(ErrorCode::Timeout, e, a),
};

/// F2: a malformed image is answered 500.
pub(super) const MALFORMED_AS_500: Tweaked = Tweaked {
    what: "malformed image as 500",
    tweak: |e, _, a| internal_error_for(ErrorCode::MalformedImage, e, a),
};

/// F1: `failed_stage` (and the log's `stage`) names the next digitize stage.
pub(super) const NEXT_FAILED_STAGE: Tweaked = Tweaked {
    what: "failed_stage names the next stage",
    tweak: |_, contract, a| {
        let stages = contract.pool(Pool::Digitize).stages;
        if let Some(stage) = a.body.failed_stage.as_mut()
            && let Some(i) = stages.iter().position(|s| s == stage)
        {
            *stage = stages[(i + 1) % stages.len()];
            a.log_stage = stage.as_str();
        }
    },
};

/// F1: `completed_stages` is empty.
pub(super) const NO_COMPLETED_STAGES: Tweaked = Tweaked {
    what: "completed_stages is empty",
    tweak: |_, _, a| {
        if let Some(done) = a.body.completed_stages.as_mut() {
            done.clear();
        }
    },
};

/// F4: a 503 or 504 body names another `request_id` than the response's `X-Request-Id`.
pub(super) const BODY_ID_MISMATCH: Tweaked = Tweaked {
    what: "503 and 504 bodies carry another request_id",
    tweak: |_, _, a| {
        if matches!(a.status.as_u16(), 503 | 504) {
            a.body.request_id.push_str("-other");
        }
    },
};

/// F4 (rule `routes`): a plain `GET` of the relay path is a 400 `invalid_parameter`, as a
/// WebSocket library answers a request that is no upgrade, rather than 426 `upgrade_required`.
pub(super) const UPGRADE_REQUIRED_AS_400: Tweaked = Tweaked {
    what: "a plain GET of the relay path is 400",
    tweak: |e, _, a| {
        if e.code() == ErrorCode::UpgradeRequired {
            a.status = StatusCode::BAD_REQUEST;
            a.body.status = a.status.as_u16();
            a.body.code = ErrorCode::InvalidParameter;
        }
    },
};

/// F3: the log line's `stage` names the stage after the one that failed (the body is right).
pub(super) const WRONG_LOG_STAGE: Tweaked = Tweaked {
    what: "the log's stage is not the failed stage",
    tweak: |_, contract, a| {
        if let Some(failed) = a.body.failed_stage {
            let digitize = contract.pool(Pool::Digitize).stages;
            let stages = if contract.pool(Pool::Export).stages.contains(&failed) {
                contract.pool(Pool::Export).stages
            } else {
                digitize
            };
            let other = match stages.iter().position(|s| *s == failed) {
                Some(i) => stages[(i + 1) % stages.len()],
                None => digitize[0],
            };
            a.log_stage = other.as_str();
        }
    },
};

fn replace_retry_after(answer: &mut Answer, value: &'static str) {
    if answer.retry_after.is_some() {
        answer.retry_after = Some(HeaderValue::from_static(value));
    }
}

fn internal_error_for(code: ErrorCode, error: &ApiError, answer: &mut Answer) {
    if error.code() == code {
        answer.status = StatusCode::INTERNAL_SERVER_ERROR;
        answer.body.status = answer.status.as_u16();
    }
}
