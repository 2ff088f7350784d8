//! The options of `plimsoll init`.

use std::path::PathBuf;

/// `plimsoll init`'s command line: where the routes come from, how they are pooled, and where
/// the draft goes.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// A route of the service, `'METHOD PATH'` (`'POST /v1/items/{id}'`); repeat for more. Each
    /// gets a pool of its own unless --group is given.
    #[arg(
        long = "route",
        value_name = "'METHOD PATH'",
        required_unless_present = "openapi",
        help_heading = "Service"
    )]
    pub routes: Vec<String>,
    /// The body of the request the draft sends to each --route (at most 64 KB of UTF-8 text).
    #[arg(
        long,
        value_name = "FILE",
        requires = "routes",
        help_heading = "Service"
    )]
    pub body: Option<PathBuf>,
    /// An OpenAPI 3.x document, as JSON (this build has no YAML reader): one pool per operation,
    /// its request from the operation's examples where it has them.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["routes", "body"],
        help_heading = "Service"
    )]
    pub openapi: Option<PathBuf>,
    /// Put every route in one pool of this id instead of a pool per route.
    #[arg(long, value_name = "NAME", help_heading = "Service")]
    pub group: Option<String>,
    /// The contract's short stable name (`[contract].name`); without it, a placeholder (or, from
    /// OpenAPI, the document's title).
    #[arg(long, value_name = "NAME", help_heading = "Service")]
    pub name: Option<String>,
    /// Write the draft here instead of stdout.
    #[arg(long, short, value_name = "FILE", help_heading = "Run")]
    pub output: Option<PathBuf>,
    /// Overwrite --output if it exists.
    #[arg(long, requires = "output", help_heading = "Run")]
    pub force: bool,
    /// Where the draft's `#:schema` line sends an editor for the language's JSON Schema
    /// (`spec/schemas/contract.schema.json` of the Plimsoll repository), as a path relative to
    /// the draft or a URL.
    #[arg(
        long,
        value_name = "PATH|URL",
        default_value = "contract.schema.json",
        help_heading = "Run"
    )]
    pub schema: String,
}
