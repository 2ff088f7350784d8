//! The command line's options, each flag declared once with its doc comment (its `--help`
//! text), as ripgrep declares its flags: what a run checks ([`subject`]), its reports
//! ([`reports`]), then each command's own ([`check`], [`load`], [`docs`], [`contract`],
//! [`init`], [`discover`]). `plan` turns them into the libraries' plans; nothing of clap crosses into a
//! library.

pub mod check;
pub mod contract;
pub mod discover;
pub mod docs;
pub mod init;
pub mod load;
mod plan;
pub mod reports;
pub mod subject;

pub use check::CheckArgs;
pub use contract::ContractArgs;
pub use discover::DiscoverArgs;
pub use docs::DocsArgs;
pub use init::InitArgs;
pub use load::LoadArgs;
pub use reports::{BaselineArgs, ReportFiles};
pub use subject::SubjectArgs;

use clap::builder::{PossibleValuesParser, TypedValueParser};

/// The parser of an option whose values are a library's enum (`--profile`, `--engine`,
/// `--balancer`, `--fault-set`): `all` by `name`, listed in `--help` and in errors as clap
/// lists a value enum's.
fn one_of<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(all.iter().map(|value| name(*value))).map(move |chosen| {
        *all.iter()
            .find(|value| name(**value) == chosen)
            .expect("the parser accepts only the listed names")
    })
}
