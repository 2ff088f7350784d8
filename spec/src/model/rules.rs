//! `[[implementation]]`: the rules an implementation follows that no clause's one sentence
//! spells out — what an implementer would otherwise have to guess (which check comes first, how
//! an estimate is defined, which code covers what). Normative like the clauses; rendered in
//! `docs/concurrency.md` under "Implementation rules".

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ClauseId;

/// One implementation rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImplementationRule {
    /// Short stable name (lowercase letters, digits and `-`), unique: the docs cite it.
    pub id: String,
    /// The part of an implementation the rule is about: its heading in the docs.
    pub topic: Topic,
    /// The clause whose check judges the rule; absent for the API as a whole (e.g. the contract
    /// endpoint, judged by the `contract` check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause: Option<ClauseId>,
    /// The rule. Placeholders as in clause prose: `{field}` of the clause's value,
    /// `{status:CODE}`, and `{a.b.c}`, a dotted path to any scalar of the contract
    /// (`{api.digitize.max_pixels}`, `{stages.digitize.0}`).
    pub rule: String,
}

/// What part of an implementation a rule is about; the docs group rules by it, in this order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum Topic {
    Endpoints,
    Input,
    Admission,
    Deadlines,
    Connections,
    Memory,
    Cancellation,
    Failures,
    Logs,
    Observability,
    Hooks,
    Relay,
}

impl Topic {
    /// Every topic, in the docs' order.
    pub const ALL: [Topic; 12] = [
        Topic::Endpoints,
        Topic::Input,
        Topic::Admission,
        Topic::Deadlines,
        Topic::Connections,
        Topic::Memory,
        Topic::Cancellation,
        Topic::Failures,
        Topic::Logs,
        Topic::Observability,
        Topic::Hooks,
        Topic::Relay,
    ];

    /// The heading the docs give the topic (distinct from every other heading of the page).
    pub fn title(self) -> &'static str {
        match self {
            Topic::Endpoints => "Routes and the contract endpoint",
            Topic::Input => "Input checks and their order",
            Topic::Admission => "Admission and Retry-After",
            Topic::Deadlines => "Deadlines and the upload read",
            Topic::Connections => "Connections",
            Topic::Memory => "Memory accounting",
            Topic::Cancellation => "Disconnects",
            Topic::Failures => "Failures and temp files",
            Topic::Logs => "The error log",
            Topic::Observability => "Metrics and Server-Timing",
            Topic::Hooks => "Hook directives",
            Topic::Relay => "Relay envelopes",
        }
    }
}
