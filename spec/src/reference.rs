//! The reference surface: the sections a contract of the reference service declares together
//! (`[api]`, `[hooks]`, `[observability]`, `[clauses.*]`, `[connections]`, `[upload]`). Another
//! service's contract may leave any of them out; the loader requires all of them once `[api]` is
//! declared ([`Contract::is_reference`]), so the reference server and the checks that judge the
//! reference surface read them through the accessors here, which cannot fail on a loaded
//! contract that declares `[api]`. Everything else asks the `Option` fields what was declared.

use crate::model::{Api, Clauses, Connections, Contract, Hooks, Observability, Upload};

/// The invariant every accessor below relies on, in the words of its panic.
const HELD_BY_THE_LOADER: &str =
    "a contract that declares [api] declares every reference section (held by the loader)";

/// The sections of the reference surface, named as the contract spells them: the loader names
/// each one missing from a contract that declares `[api]`.
pub const REFERENCE_SECTIONS: [&str; 6] = [
    "hooks",
    "observability",
    "clauses",
    "connections",
    "upload",
    "errors",
];

impl Contract {
    /// Whether the contract declares the reference service's surface (its `[api]`): then every
    /// reference section is present, and the checks that judge that surface apply.
    pub fn is_reference(&self) -> bool {
        self.api.is_some()
    }

    /// The reference sections the contract lacks although it declares `[api]` (empty for any
    /// contract without `[api]`).
    pub fn missing_reference_sections(&self) -> Vec<&'static str> {
        if !self.is_reference() {
            return Vec::new();
        }
        let present = [
            self.hooks.is_some(),
            self.observability.is_some(),
            self.clauses.is_some(),
            self.connections.is_some(),
            self.upload.is_some(),
            !self.errors.is_empty(),
        ];
        REFERENCE_SECTIONS
            .into_iter()
            .zip(present)
            .filter(|(_, p)| !p)
            .map(|(name, _)| name)
            .collect()
    }

    /// Where the service serves its claim of its effective values: the reference's
    /// `api.contract`, or `[claim]`'s; None when it serves none.
    pub fn claim_path(&self) -> Option<&str> {
        match (&self.api, &self.claim) {
            (Some(api), _) => Some(&api.contract.path),
            (None, Some(claim)) => Some(&claim.path),
            (None, None) => None,
        }
    }

    /// The reference API. Only for a contract that [declares it](Contract::is_reference).
    pub fn api(&self) -> &Api {
        self.api.as_ref().expect(HELD_BY_THE_LOADER)
    }

    /// The reference hooks. Only for a contract that [declares `[api]`](Contract::is_reference).
    pub fn hooks(&self) -> &Hooks {
        self.hooks.as_ref().expect(HELD_BY_THE_LOADER)
    }

    /// The reference observability. Only for a contract that [declares
    /// `[api]`](Contract::is_reference).
    pub fn observability(&self) -> &Observability {
        self.observability.as_ref().expect(HELD_BY_THE_LOADER)
    }

    /// Every clause's prose and values. Only for a contract that [declares
    /// `[api]`](Contract::is_reference).
    pub fn clauses(&self) -> &Clauses {
        self.clauses.as_ref().expect(HELD_BY_THE_LOADER)
    }

    /// The connection bounds. Only for a contract that [declares
    /// `[api]`](Contract::is_reference).
    pub fn connections(&self) -> &Connections {
        self.connections.as_ref().expect(HELD_BY_THE_LOADER)
    }

    /// The connection cap, which a reference contract must declare. Only for a contract that
    /// [declares `[api]`](Contract::is_reference).
    pub fn connection_cap(&self) -> usize {
        self.connections()
            .max_connections
            .expect(HELD_BY_THE_LOADER) as usize
    }

    /// The upload bounds. Only for a contract that [declares `[api]`](Contract::is_reference).
    pub fn upload(&self) -> &Upload {
        self.upload.as_ref().expect(HELD_BY_THE_LOADER)
    }

    /// The upload budget in MB, which a reference contract must declare. Only for a contract
    /// that [declares `[api]`](Contract::is_reference).
    pub fn upload_budget_mb(&self) -> u64 {
        self.upload().budget_mb.expect(HELD_BY_THE_LOADER)
    }
}
