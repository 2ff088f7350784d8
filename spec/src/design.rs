//! The embroidery design: what `/v1/digitize` answers and `/v1/export` takes. Coordinates are
//! absolute integers in 0.1 mm, so a design is exact and format-neutral.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Identifies the design format (bumped on incompatible change).
pub const DESIGN_FORMAT: &str = "plimsoll-design/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Design {
    /// Always `plimsoll-design/1`.
    #[schemars(extend("const" = DESIGN_FORMAT))]
    pub format: String,
    /// Physical width of the design in millimetres.
    pub width_mm: f64,
    /// Physical height of the design in millimetres.
    pub height_mm: f64,
    /// Thread colours, indexed by colour block order.
    pub threads: Vec<Thread>,
    /// Bounding box of every needle position, in 0.1 mm.
    pub extents: Extents,
    /// Number of `stitch` commands (jumps, trims, colour changes and the end are not counted).
    pub stitch_count: u64,
    /// The needle program in order.
    pub stitches: Vec<Stitch>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Thread {
    /// `#rrggbb`.
    pub color: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Extents {
    pub min_x: i32,
    pub min_y: i32,
    pub max_x: i32,
    pub max_y: i32,
}

/// One needle command at an absolute position (0.1 mm units, y grows downwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Stitch {
    pub x: i32,
    pub y: i32,
    pub cmd: StitchCommand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StitchCommand {
    /// Move with the needle down.
    Stitch,
    /// Move with the needle up.
    Jump,
    /// Cut the thread (at the current position).
    Trim,
    /// Stop for the next thread colour (at the current position).
    ColorChange,
    /// End of the design.
    End,
}

/// Machine file formats `/v1/export` writes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// Tajima DST.
    Dst,
    /// Melco EXP.
    Exp,
    /// SVG preview.
    Svg,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 3] = [ExportFormat::Dst, ExportFormat::Exp, ExportFormat::Svg];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Dst => "dst",
            ExportFormat::Exp => "exp",
            ExportFormat::Svg => "svg",
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            ExportFormat::Dst | ExportFormat::Exp => "application/octet-stream",
            ExportFormat::Svg => "image/svg+xml",
        }
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExportFormat::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| format!("unknown export format `{s}`"))
    }
}
