//! The embroidery design: what `/v1/digitize` answers and `/v1/export` takes. Coordinates are
//! absolute integers in 0.1 mm, so a design is exact and format-neutral.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Identifies the design format (bumped on incompatible change).
pub const DESIGN_FORMAT: &str = "plimsoll-design/1";

/// Largest design accepted by the pipeline and by export (stitch commands).
pub const MAX_STITCHES: u64 = 10_000_000;

/// Largest coordinate magnitude of a design, in 0.1 mm (100 m).
pub const MAX_COORDINATE: i32 = 1_000_000;

/// Largest physical width or height of a design in millimetres: [`MAX_COORDINATE`] in mm.
pub const MAX_SIZE_MM: f64 = MAX_COORDINATE as f64 / 10.0;

/// What JSON Schema cannot say about a design and export still refuses (`malformed_design`):
/// rules that relate one member to another.
pub const CROSS_MEMBER_RULES: &str = "every needle position lies within `extents`; `stitch_count` is the number of `stitch` commands; there is a thread for every colour block with a stitch; `end`, if present, is the last command";

/// A needle program: what digitize produces and export consumes, exact and format-neutral.
/// (The schema's description is the `extend` below, which also lists [`CROSS_MEMBER_RULES`].)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("description" = format!("A needle program in absolute 0.1 mm coordinates. Beyond this schema, export requires: {CROSS_MEMBER_RULES}.")))]
pub struct Design {
    /// Always `plimsoll-design/1`.
    #[schemars(extend("const" = DESIGN_FORMAT))]
    pub format: String,
    /// Physical width of the design in millimetres.
    #[schemars(range(min = 0.0, max = MAX_SIZE_MM))]
    pub width_mm: f64,
    /// Physical height of the design in millimetres.
    #[schemars(range(min = 0.0, max = MAX_SIZE_MM))]
    pub height_mm: f64,
    /// Thread colours, indexed by colour block order.
    pub threads: Vec<Thread>,
    /// Bounding box of every needle position, in 0.1 mm.
    pub extents: Extents,
    /// Number of `stitch` commands (jumps, trims, colour changes and the end are not counted).
    #[schemars(range(max = MAX_STITCHES))]
    #[serde(deserialize_with = "integral::deserialize")]
    pub stitch_count: u64,
    /// The needle program in order.
    #[schemars(length(max = MAX_STITCHES))]
    pub stitches: Vec<Stitch>,
}

/// One thread colour; colour block `i` of the program is sewn with `threads[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(description = "")]
pub struct Thread {
    /// `#rrggbb`.
    #[schemars(regex(pattern = r"^#[0-9a-fA-F]{6}$"), length(min = 7, max = 7))]
    pub color: String,
}

/// The bounding box of a design's needle positions (0.1 mm); export refuses a position outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(description = "")]
pub struct Extents {
    /// Smallest x of any needle position.
    #[schemars(range(min = -MAX_COORDINATE, max = MAX_COORDINATE), description = "")]
    #[serde(deserialize_with = "integral::deserialize")]
    pub min_x: i32,
    /// Smallest y of any needle position (y grows downwards, so this is the top edge).
    #[schemars(range(min = -MAX_COORDINATE, max = MAX_COORDINATE), description = "")]
    #[serde(deserialize_with = "integral::deserialize")]
    pub min_y: i32,
    /// Largest x of any needle position.
    #[schemars(range(min = -MAX_COORDINATE, max = MAX_COORDINATE), description = "")]
    #[serde(deserialize_with = "integral::deserialize")]
    pub max_x: i32,
    /// Largest y of any needle position (the bottom edge).
    #[schemars(range(min = -MAX_COORDINATE, max = MAX_COORDINATE), description = "")]
    #[serde(deserialize_with = "integral::deserialize")]
    pub max_y: i32,
}

/// One needle command at an absolute position (0.1 mm units, y grows downwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Stitch {
    /// Where the needle goes, horizontally.
    #[schemars(range(min = -MAX_COORDINATE, max = MAX_COORDINATE), description = "")]
    #[serde(deserialize_with = "integral::deserialize")]
    pub x: i32,
    /// Where the needle goes, vertically (downwards).
    #[schemars(range(min = -MAX_COORDINATE, max = MAX_COORDINATE), description = "")]
    #[serde(deserialize_with = "integral::deserialize")]
    pub y: i32,
    /// What the needle does: `stitch` and `jump` move it here; `trim`, `color_change` and `end`
    /// act where it is.
    #[schemars(description = "")]
    pub cmd: StitchCommand,
}

/// The kind of a needle command; only `stitch` counts towards a design's `stitch_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "")]
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

/// JSON has one number type: `3.0` is the integer 3, as JSON Schema's `integer` says, so the
/// design's integer members read any number without a fractional part that fits their type.
mod integral {
    use std::marker::PhantomData;

    use serde::Deserializer;
    use serde::de::{Error, Unexpected, Visitor};

    pub(super) fn deserialize<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<i64> + TryFrom<u64>,
    {
        deserializer.deserialize_any(Integral(PhantomData))
    }

    struct Integral<T>(PhantomData<T>);

    impl<T: TryFrom<i64> + TryFrom<u64>> Visitor<'_> for Integral<T> {
        type Value = T;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "an integer that fits {}", std::any::type_name::<T>())
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<T, E> {
            // Every integer an i64 holds is below 2^63; the cast is exact for those.
            if v.fract() == 0.0 && v >= -(2f64.powi(63)) && v < 2f64.powi(63) {
                self.visit_i64(v as i64)
            } else {
                Err(E::invalid_value(Unexpected::Float(v), &self))
            }
        }
    }
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
    /// Every format, in the order the contract and the docs list them.
    pub const ALL: [ExportFormat; 3] = [ExportFormat::Dst, ExportFormat::Exp, ExportFormat::Svg];

    /// The name of the `format` query parameter and of the contract's `formats` list.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Dst => "dst",
            ExportFormat::Exp => "exp",
            ExportFormat::Svg => "svg",
        }
    }

    /// The `Content-Type` an export in this format is answered with.
    pub fn media_type(self) -> &'static str {
        match self {
            ExportFormat::Dst | ExportFormat::Exp => "application/octet-stream",
            ExportFormat::Svg => "image/svg+xml",
        }
    }
}

/// A name that is no export format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown export format `{0}`")]
pub struct UnknownExportFormat(
    /// The text that was parsed, as given.
    pub String,
);

impl std::str::FromStr for ExportFormat {
    type Err = UnknownExportFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExportFormat::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownExportFormat(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_members_read_integral_numbers_only() {
        let stitch = |x: &str| {
            serde_json::from_str::<Stitch>(&format!(r#"{{"x":{x},"y":-0,"cmd":"jump"}}"#))
        };
        assert_eq!(stitch("3").unwrap().x, 3);
        assert_eq!(stitch("-3.0").unwrap().x, -3);
        assert_eq!(stitch("3e2").unwrap().x, 300);
        for bad in ["3.5", "2147483648", "3e10", "\"3\"", "null"] {
            assert!(stitch(bad).is_err(), "{bad}");
        }
    }
}
