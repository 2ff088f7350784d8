//! Which report files a run leaves behind: only those asked for, and a bad path for one does not
//! stop the others.

use plimsoll_report as report;

use super::*;

#[test]
fn write_all_writes_only_the_requested_files() {
    let dir = tempfile::tempdir().unwrap();
    let (j, x, h) = (
        dir.path().join("r.json"),
        dir.path().join("r.xml"),
        dir.path().join("r.html"),
    );
    let run = sample();
    let files = |json, junit, html| report::Files {
        json,
        junit,
        html,
        ..report::Files::default()
    };
    report::write_all(&run, &files(Some(&j), None, Some(&h))).unwrap();
    assert!(j.exists() && h.exists() && !x.exists());
    report::write_all(&run, &files(None, Some(&x), None)).unwrap();
    assert!(std::fs::read_to_string(&x).unwrap().starts_with("<?xml"));

    // A bad path is reported, and the other files are still written.
    std::fs::remove_file(&j).unwrap();
    let bad = dir.path().join("missing-dir").join("r.xml");
    let err = report::write_all(&run, &files(Some(&j), Some(&bad), None)).unwrap_err();
    assert!(err.to_string().contains("missing-dir"), "{err}");
    assert!(j.exists());
}
