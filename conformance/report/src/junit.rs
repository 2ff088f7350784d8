//! `--junit FILE`: the run as JUnit XML, the format CI systems already know how to show.
//!
//! One suite, `plimsoll check`; one testcase per check, named `{id} {title}` with the clause
//! as classname so CI groups them by clause. quick-junit does the XML escaping.

use std::path::Path;

use plimsoll_conformance::checks::contract::{adopted_line, refused_line};
use plimsoll_conformance::verdict::{CheckResult, RunReport, Verdict};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::duration_from_ms;

/// The name of the single suite every testcase sits in.
pub const SUITE_NAME: &str = "plimsoll check";

/// Everything behind a verdict, as the testcase's `system-out`: CI shows it next to the test.
fn details(r: &CheckResult) -> String {
    let mut out = format!("expected: {}\nobserved: {}\n", r.expected, r.observed);
    match &r.verdict {
        Verdict::Pass => {}
        Verdict::Fail(why) => out.push_str(&format!("reason: {why}\n")),
        Verdict::Skip(why) => out.push_str(&format!("skipped: {why}\n")),
        Verdict::NotApplicable(why) => out.push_str(&format!("not applicable: {why}\n")),
        Verdict::Waived(why) => out.push_str(&format!("waived: {why}\n")),
    }
    if let Some(note) = &r.waiver {
        out.push_str(&format!("waiver: {note}\n"));
    }
    for delta in &r.deltas {
        out.push_str(&format!("baseline: {delta}\n"));
    }
    if !r.trials_ms.is_empty() {
        let trials: Vec<String> = r.trials_ms.iter().map(|t| format!("{t:.1}")).collect();
        out.push_str(&format!("trials_ms: {}\n", trials.join(", ")));
    }
    if !r.evidence.is_empty() {
        out.push_str("evidence:\n");
        for line in &r.evidence {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

fn test_case(r: &CheckResult) -> TestCase {
    let status = match &r.verdict {
        Verdict::Pass => TestCaseStatus::success(),
        Verdict::Fail(why) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(format!(
                    "expected {}; observed {}; {why}",
                    r.expected, r.observed
                ))
                .set_type(format!("clause {}", r.id.clause()))
                .set_description(r.evidence.join("\n"));
            status
        }
        Verdict::Skip(why) => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(why.as_str());
            status
        }
        // Nothing was judged: a skipped test to CI systems, its message saying why it is none.
        Verdict::NotApplicable(why) => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(format!("not applicable: {why}"));
            status
        }
        // A known deviation: shown, not failing, as CI systems show a skipped test.
        Verdict::Waived(why) => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(format!("waived: {why}"));
            status
        }
    };
    let mut case = TestCase::new(format!("{} {}", r.id, r.title), status);
    case.set_classname(r.id.clause())
        .set_time(duration_from_ms(r.duration_ms))
        .set_system_out(details(r));
    case
}

/// The quick-junit model of the run, for callers that want to add to it.
pub fn build(report: &RunReport) -> Report {
    let m = &report.manifest;
    let mut suite = TestSuite::new(SUITE_NAME);
    // Properties carry the manifest, so a CI artifact alone says how the run was made.
    suite.add_properties([
        Property::new("tool", format!("{} {}", m.tool, m.version)),
        Property::new("target", m.target.as_str()),
        Property::new("mode", m.mode.as_str()),
        Property::new("contract_version", m.contract_version.as_str()),
        Property::new("contract_hash", m.contract_hash.as_str()),
        Property::new("scaled", m.scaled.to_string()),
        Property::new("differences", m.differences.join("; ")),
        Property::new(
            "adopted",
            m.adopted
                .iter()
                .map(adopted_line)
                .collect::<Vec<_>>()
                .join("; "),
        ),
        Property::new(
            "refused",
            m.refused
                .iter()
                .map(refused_line)
                .collect::<Vec<_>>()
                .join("; "),
        ),
        Property::new("trials", m.trials.to_string()),
        Property::new("seed", m.seed.to_string()),
        Property::new("started_unix_ms", m.started_unix_ms.to_string()),
    ]);
    suite.add_test_cases(report.results.iter().map(test_case));
    // A stopped run must not read as a green one in a CI tool that only counts failures.
    if let Some(why) = &m.incomplete {
        suite.add_property(Property::new("incomplete", why.as_str()));
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
        status.set_message(format!("the run is incomplete: {why}"));
        let mut case = TestCase::new("run complete", status);
        case.set_classname("run");
        suite.add_test_case(case);
    }
    let total_ms = super::total_ms(report);
    suite.set_time(duration_from_ms(total_ms));

    let mut junit = Report::new("plimsoll");
    junit.set_time(duration_from_ms(total_ms));
    junit.add_test_suite(suite);
    junit
}

/// A fault matrix as JUnit: one test suite per fault (`plimsoll under latency`), each with the
/// run's test cases, so a CI tool shows every check under every fault.
pub fn render_matrix(columns: &[super::MatrixColumn<'_>]) -> std::io::Result<String> {
    let mut junit = Report::new("plimsoll");
    let mut total_ms = 0.0;
    for col in columns {
        for mut suite in build(col.report).test_suites {
            suite.name = format!("{SUITE_NAME} under {}", col.name).into();
            suite.add_property(Property::new("fault", col.spec.as_str()));
            junit.add_test_suite(suite);
        }
        total_ms += col.seconds * 1000.0;
    }
    junit.set_time(duration_from_ms(total_ms));
    let xml = junit.to_string().map_err(std::io::Error::other)?;
    Ok(without_root_skipped(xml))
}

/// The XML text, valid against the Jenkins xunit plugin's JUnit schema (`junit-10.xsd`, which
/// `ci/junit-xsd.sh` validates every report of CI against).
pub fn render(report: &RunReport) -> std::io::Result<String> {
    let xml = build(report).to_string().map_err(std::io::Error::other)?;
    Ok(without_root_skipped(xml))
}

/// `xml` without the `skipped` count quick-junit always writes on the root `<testsuites>`: the
/// schema does not allow it there (only `name`, `time`, `tests`, `failures`, `errors`), and a
/// validating reader rejects the whole file for it. The suite keeps its own `skipped` count.
fn without_root_skipped(mut xml: String) -> String {
    const ATTRIBUTE: &str = " skipped=\"";
    let Some(root) = xml.find("<testsuites") else {
        return xml;
    };
    let tag_end = xml[root..].find('>').map_or(xml.len(), |end| root + end);
    // An attribute value never holds a raw `"` (it is escaped), so the first quote ends it.
    let found = xml[root..tag_end].find(ATTRIBUTE).and_then(|at| {
        let value = root + at + ATTRIBUTE.len();
        let close = xml[value..tag_end].find('"')?;
        Some(root + at..value + close + 1)
    });
    if let Some(range) = found {
        xml.replace_range(range, "");
    }
    xml
}

/// Writes [`render`] to `path`.
pub fn write(path: &Path, report: &RunReport) -> std::io::Result<()> {
    std::fs::write(path, render(report)?)
}

#[cfg(test)]
mod tests {
    use super::without_root_skipped;

    #[test]
    fn only_the_root_loses_its_skipped_count() {
        let xml = "<?xml version=\"1.0\"?>\n<testsuites name=\"plimsoll\" tests=\"3\" \
                   skipped=\"1\" failures=\"1\" errors=\"0\">\n<testsuite name=\"s\" \
                   tests=\"3\" skipped=\"1\">";
        assert_eq!(
            without_root_skipped(xml.to_owned()),
            "<?xml version=\"1.0\"?>\n<testsuites name=\"plimsoll\" tests=\"3\" \
             failures=\"1\" errors=\"0\">\n<testsuite name=\"s\" tests=\"3\" skipped=\"1\">"
        );
        let no_root = "<testsuite name=\"s\" skipped=\"1\">";
        assert_eq!(without_root_skipped(no_root.to_owned()), no_root);
    }
}
