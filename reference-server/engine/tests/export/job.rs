//! Export as a job: the file written in the job's temp dir, designs parsed exactly or refused
//! naming the problem (F2), failures naming their stage and leaving nothing behind (F1).

use super::*;

#[test]
fn export_writes_the_file_in_the_job_dir_and_cleans_up() {
    let d = digitized();
    let json = serde_json::to_vec(&d).unwrap();
    for format in ExportFormat::ALL {
        let root = tempfile::tempdir().unwrap();
        let mut ctx = JobContext::new(config(root.path())).unwrap();
        let out = export(&mut ctx, &json, format).unwrap();
        assert_eq!(out.file_name, format!("design.{}", format.as_str()));
        assert_eq!(out.path, ctx.temp_dir().join(&out.file_name));
        assert_eq!(std::fs::read(&out.path).unwrap(), out.bytes);
        let expected = match format {
            ExportFormat::Dst => encode_dst(&d),
            ExportFormat::Exp => encode_exp(&d),
            ExportFormat::Svg => render_svg(&d).into_bytes(),
        };
        assert_eq!(out.bytes, expected);
        assert_eq!(
            ctx.progress().snapshot(),
            (None, vec![Stage::Parse, Stage::Encode, Stage::Write])
        );
        drop(ctx);
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none());
    }
}

#[test]
fn parse_reads_a_design_exactly_as_serde_json_does() {
    let d = digitized();
    let root = tempfile::tempdir().unwrap();
    let ctx = JobContext::new(config(root.path())).unwrap();
    let json = serde_json::to_vec(&d).unwrap();
    assert_eq!(parse(&ctx, &json).unwrap(), d);
    let pretty = serde_json::to_vec_pretty(&d).unwrap();
    assert_eq!(parse(&ctx, &pretty).unwrap(), d);
}

fn malformed(json: &[u8]) -> String {
    let root = tempfile::tempdir().unwrap();
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let err = export(&mut ctx, json, ExportFormat::Dst).unwrap_err();
    assert_eq!(err.failed_stage, Stage::Parse);
    assert!(err.completed_stages.is_empty());
    match err.kind {
        JobErrorKind::Invalid {
            code: ErrorCode::MalformedDesign,
            message,
        } => message,
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_designs_are_refused_naming_the_problem() {
    let good = awkward();
    let json = |d: &Design| serde_json::to_vec(d).unwrap();
    let with = |f: &dyn Fn(&mut Design)| {
        let mut d = good.clone();
        f(&mut d);
        json(&d)
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{not json".to_vec(), "key must be a string"),
        (b"".to_vec(), "EOF"),
        (b"[]".to_vec(), "invalid length 0"),
        (
            with(&|d| d.format = "plimsoll-design/2".into()),
            "format is `plimsoll-design/2`",
        ),
        (with(&|d| d.stitches[3].x = -1_000_001), "beyond"),
        (
            with(&|d| d.threads.clear()),
            "3 stitched colour blocks but 0 threads",
        ),
        (
            with(&|d| d.threads[1].color = "\"/><script>".into()),
            "is not #rrggbb",
        ),
        (with(&|d| d.stitch_count += 1), "stitch_count"),
        (
            with(&|d| d.stitches.insert(2, st(500, -300, StitchCommand::End))),
            "not the last",
        ),
        (with(&|d| d.extents.max_x = 0), "outside the extents"),
        (with(&|d| d.extents.min_x = i32::MIN), "extents.min_x"),
        (with(&|d| d.width_mm = -1.0), "width_mm"),
        (
            json(&good).iter().chain(b"x").copied().collect(),
            "trailing",
        ),
    ];
    for (doc, want) in cases {
        let message = malformed(&doc);
        assert!(
            message.contains(want),
            "{message:?} should mention {want:?}"
        );
    }
    let mut huge = design(1, vec![st(1, 1, StitchCommand::Stitch); 10_000_001]);
    huge.stitch_count = 10_000_001;
    let err = validate_design(&huge, &mut || Ok(())).unwrap_err();
    assert!(
        format!("{err:?}").contains("more than the limit of 10000000"),
        "{err:?}"
    );
}

#[test]
fn export_failures_name_their_stage_and_leave_nothing_behind() {
    let json = serde_json::to_vec(&digitized()).unwrap();
    let cases = [
        (
            HookDirective::Fail {
                stage: Stage::Encode,
            },
            Stage::Encode,
            vec![Stage::Parse],
        ),
        (
            HookDirective::Panic {
                stage: Stage::Write,
            },
            Stage::Write,
            vec![Stage::Parse, Stage::Encode],
        ),
        (
            HookDirective::Fail {
                stage: Stage::Parse,
            },
            Stage::Parse,
            vec![],
        ),
    ];
    for (hook, stage, completed) in cases {
        let root = tempfile::tempdir().unwrap();
        let mut cfg = config(root.path());
        cfg.hooks = vec![hook];
        let mut ctx = JobContext::new(cfg).unwrap();
        let err = export(&mut ctx, &json, ExportFormat::Dst).unwrap_err();
        assert_eq!((err.failed_stage, err.completed_stages), (stage, completed));
        drop(ctx);
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none());
    }
    // A budget smaller than the upload: refused while parsing.
    let root = tempfile::tempdir().unwrap();
    let mut cfg = config(root.path());
    cfg.memory_cap_bytes = json.len() as u64 / 2;
    let mut ctx = JobContext::new(cfg).unwrap();
    let err = export(&mut ctx, &json, ExportFormat::Exp).unwrap_err();
    assert!(
        matches!(
            err.kind,
            JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.failed_stage, Stage::Parse);
    // Cancelled before it starts: the first stage says so.
    let cfg = config(root.path());
    cfg.cancel.cancel();
    let mut ctx = JobContext::new(cfg).unwrap();
    let err = export(&mut ctx, &json, ExportFormat::Svg).unwrap_err();
    assert_eq!(
        (err.kind, err.failed_stage),
        (
            JobErrorKind::Interrupted(Interrupt::Cancelled),
            Stage::Parse
        )
    );
}
