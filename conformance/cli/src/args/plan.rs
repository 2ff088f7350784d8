//! The one place the command line becomes the libraries' plans: each `*Args` of this module
//! turned into the plain struct its run takes (`CheckPlan`, `LoadPlan`, `SubjectPlan`,
//! `BridgePlan`, `BaselinePlan`), with nothing of clap in them.

use std::time::Duration;

use plimsoll_conformance::baseline::BaselinePlan;
use plimsoll_conformance::check::CheckPlan;
use plimsoll_conformance::check::bridge::BridgePlan;
use plimsoll_conformance::session::{DEFAULT_TIMEOUT_S, SubjectPlan};
use plimsoll_load::LoadPlan;

use super::check::CheckArgs;
use super::load::LoadArgs;
use super::reports::BaselineArgs;
use super::subject::SubjectArgs;

impl SubjectArgs {
    /// What is checked, and how long the run may take (`--timeout`, else
    /// [`DEFAULT_TIMEOUT_S`]).
    pub fn plan(&self) -> SubjectPlan {
        SubjectPlan {
            target: self.target.clone(),
            contract: self.contract.clone(),
            allow_overrides: self.allow_overrides,
            temp_dir: self.temp_dir.clone(),
            pid: self.pid,
            ca_file: self.ca_file.clone(),
            timeout: Duration::from_secs(self.timeout.unwrap_or(DEFAULT_TIMEOUT_S)),
        }
    }
}

impl BaselineArgs {
    /// The earlier run to compare with, if any.
    pub fn plan(&self) -> BaselinePlan {
        BaselinePlan {
            report: self.baseline.clone(),
            fail_on_regression: self.fail_on_regression,
        }
    }
}

impl CheckArgs {
    /// The suite's run (`--server-log`, `--full-timeouts` and the bridge's options name the
    /// subject, which the binary starts; `--fault-set` is one run per fault).
    pub fn plan(&self) -> CheckPlan {
        CheckPlan {
            subject: self.subject.plan(),
            strict: self.strict,
            require: self.require.clone(),
            only: self.only.clone(),
            skip: self.skip.clone(),
            waivers: self.waivers.clone(),
            trials: self.trials,
            fault: self.fault,
            seed: self.seed,
            baseline: self.baseline.plan(),
        }
    }

    /// Bridge mode's two ends and the bridge that dials them.
    pub fn bridge_plan(&self) -> BridgePlan {
        BridgePlan {
            relay: self.relay_end(),
            upstream_listen: self.upstream_listen,
            command: self.bridge_command.clone(),
        }
    }
}

impl LoadArgs {
    /// The profile's run; its progress bar shows unless `--quiet` (on an interactive terminal).
    pub fn plan(&self) -> LoadPlan {
        LoadPlan {
            subject: self.subject.plan(),
            replica: self.replica.clone(),
            balancer: self.balancer,
            profile: self.profile,
            pool: self.pool.clone(),
            duration: self.duration,
            waves: self.waves,
            load_factor: self.load_factor,
            users: self.users,
            engine: self.engine,
            locust_workers: self.locust_workers,
            locust_expect: self.locust_expect,
            locust_bind: self.locust_bind.clone(),
            seed: self.seed,
            baseline: self.baseline.plan(),
            report: self.report.clone(),
            progress: self.reports.style().color,
        }
    }
}
