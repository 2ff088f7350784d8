//! `Server-Timing: queue;dur=…, run;dur=…` on every pipeline response: how long the job waited
//! for its slot and how long it ran, so a checker can place it on a timeline.

use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::Response;

use crate::state::AppState;

/// Queue and run durations of one job.
pub(super) struct Timing {
    pub queue: Duration,
    pub run: Duration,
}

impl Timing {
    pub(super) fn stamp(&self, state: &AppState, response: &mut Response) {
        let names = &state.config.contract.observability().server_timing_metrics;
        let value = names
            .iter()
            .zip([self.queue, self.run])
            .map(|(name, d)| format!("{name};dur={:.1}", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(", ");
        let claimed = HeaderValue::from_str(&value)
            .ok()
            .and_then(|v| state.components().claims.server_timing(v));
        if let Some(v) = claimed {
            response
                .headers_mut()
                .insert(state.headers.server_timing.clone(), v);
        }
    }
}
