//! The line a finished check prints the moment it finishes, and the mark-and-id head it shares
//! with the summary's entries, so a check reads the same in both places.

use plimsoll_conformance::verdict::{CheckResult, Verdict};

use super::format_duration;
use super::style::{DIM, Style, paint, symbol, verdict_colour};
use super::text::{chars, one_line, truncate};

/// The id column of a check line (`contract` is the longest id of `check`).
const ID_WIDTH: usize = 8;

/// The verdict's mark and the id, padded to the id column: `✓ T1       ` (in colour, with
/// the columns it takes).
pub(super) fn mark_and_id(r: &CheckResult, color: bool) -> (String, usize) {
    let text = format!("{} {}", symbol(&r.verdict), one_line(&r.id.to_string()));
    let columns = (chars(&text) + 1).max(ID_WIDTH + 3);
    let fill = " ".repeat(columns - chars(&text));
    let shown = paint(&text, verdict_colour(&r.verdict), color);
    (format!("{shown}{fill}"), columns)
}

/// One line for a finished check, printed as soon as it finishes, at most `style.width`
/// columns: `✓ T1       Max concurrent digitize requests: busy gauge max 4; …   1.44 s`.
/// A skip shows its reason instead of an observation, because a skipped check observed
/// nothing; the observed part is what gets cut to fit (a failure's is in the summary in full).
pub fn progress_line(r: &CheckResult, style: Style) -> String {
    let (head, head_width) = mark_and_id(r, style.color);
    let duration = format!("{:>7}", format_duration(r.duration_ms));
    let title = one_line(&r.title);
    let detail = match &r.verdict {
        Verdict::Skip(reason) => format!("skipped: {}", one_line(reason)),
        Verdict::Waived(reason) => format!("waived: {}", one_line(reason)),
        Verdict::Pass | Verdict::Fail(_) | Verdict::NotApplicable(_) => one_line(&r.observed),
    };
    let room = style
        .width
        .saturating_sub(head_width + chars(&duration) + 2);
    let text = if detail.is_empty() {
        truncate(&title, room)
    } else {
        truncate(&format!("{title}: {detail}"), room)
    };
    let fill = " ".repeat(room - chars(&text) + 2);
    // The title stands out; what was observed is dimmed (colour only).
    let title_end = text
        .char_indices()
        .nth(chars(&title) + 1)
        .map_or(text.len(), |(i, _)| i);
    let (title, detail) = text.split_at(title_end);
    format!(
        "{head}{title}{}{fill}{}",
        paint(detail, DIM, style.color && !detail.is_empty()),
        paint(&duration, DIM, style.color)
    )
}
