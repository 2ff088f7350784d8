//! The JUnit file CI systems read: well-formed XML, one testcase per check, the hostile string
//! escaped yet intact.

use plimsoll_report::junit;

use super::*;
use crate::xml::well_formed;

#[test]
fn junit_is_valid_xml_with_three_cases_one_failure_one_skip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit.xml");
    let run = sample();
    junit::write(&path, &run).unwrap();
    let xml = std::fs::read_to_string(&path).unwrap();
    preview("plimsoll-junit.xml", &xml);

    well_formed(&xml).unwrap_or_else(|e| panic!("not well-formed XML ({e}):\n{xml}"));
    // A second, independent parse: quick-junit's reader is built on quick-xml.
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("parses as JUnit XML");

    assert_eq!(parsed.name.as_ref().map(|n| n.as_str()), Some("plimsoll"));
    assert_eq!(parsed.test_suites.len(), 1);
    let suite = &parsed.test_suites[0];
    assert_eq!(suite.name.as_str(), junit::SUITE_NAME);
    assert_eq!(suite.test_cases.len(), 3);
    assert_eq!((parsed.tests, parsed.failures), (3, 1));
    // The Jenkins schema allows no `skipped` on the root (ci/junit-xsd.sh): the suite says it.
    assert_eq!((suite.tests, suite.failures, suite.skipped), (3, 1, 1));
    let root = &xml[xml.find("<testsuites").unwrap()..];
    assert!(
        !root[..root.find('>').unwrap()].contains("skipped="),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 3);
    assert_eq!(xml.matches("<failure").count(), 1);
    assert_eq!(xml.matches("<skipped").count(), 1);

    let mut failures = 0;
    let mut skips = 0;
    for (case, result) in suite.test_cases.iter().zip(&run.results) {
        assert_eq!(
            case.name.as_str(),
            format!("{} {}", result.id, result.title)
        );
        assert_eq!(
            case.classname.as_ref().unwrap().as_str(),
            result.id.clause()
        );
        let time = case.time.expect("time is set").as_secs_f64() * 1000.0;
        assert!(
            (time - result.duration_ms).abs() < 1.0,
            "{time} vs {}",
            result.duration_ms
        );
        match &case.status {
            quick_junit::TestCaseStatus::Success { .. } => {
                assert_eq!(result.verdict, Verdict::Pass)
            }
            quick_junit::TestCaseStatus::NonSuccess {
                kind: quick_junit::NonSuccessKind::Failure,
                message,
                description,
                ..
            } => {
                failures += 1;
                let message = message.as_ref().unwrap().as_str();
                assert!(message.contains(&result.expected), "{message}");
                // The hostile string survives escaping and unescaping intact.
                assert!(message.contains(&result.observed), "{message}");
                assert!(message.contains(FAIL_REASON), "{message}");
                let description = description.as_ref().unwrap().as_str();
                assert!(
                    description.contains("x < y & z \"quoted\""),
                    "{description}"
                );
            }
            quick_junit::TestCaseStatus::Skipped { message, .. } => {
                skips += 1;
                assert_eq!(message.as_ref().unwrap().as_str(), SKIP_REASON);
            }
            other => panic!("unexpected status {other:?}"),
        }
        let out = case.system_out.as_ref().expect("details in system-out");
        assert!(
            out.as_str()
                .contains(&format!("expected: {}", result.expected))
        );
    }
    assert_eq!((failures, skips), (1, 1));
    // The raw text never carries the hostile markup unescaped.
    assert!(!xml.contains(HOSTILE));
}
