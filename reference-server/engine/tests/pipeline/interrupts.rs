//! The job context stops a real job: cancellation (B3), the deadline (B1), the memory budget
//! (B2), stage failures (F1), and it cleans up after itself.

use super::*;

#[test]
fn cancellation_stops_a_real_four_megapixel_job_within_a_second() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(2000, 2000));
    let cfg = config(root.path());
    let token = cfg.cancel.clone();
    let mut ctx = JobContext::new(cfg).unwrap();
    let progress = ctx.progress();
    let canceller = std::thread::spawn(move || {
        // Cancel 50 ms into the job, once it is inside a pixel or stitch loop (past decode).
        std::thread::sleep(Duration::from_millis(50));
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let (current, completed) = progress.snapshot();
            if let Some(stage) = current.filter(|s| *s != Stage::Decode) {
                token.cancel();
                return (Instant::now(), Some(stage));
            }
            if completed.len() == DIGITIZE.len() || Instant::now() > give_up {
                return (Instant::now(), None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    // 2000 mm wide: ~3M stitches, so even an optimised build is still running at 50 ms.
    let result = digitize(&mut ctx, &image, &params(2000.0));
    let returned = Instant::now();
    let (cancelled_at, stage) = canceller.join().unwrap();
    let stage = stage.expect("the job was still running when cancelled");
    let err = failed(result);
    assert_eq!(err.kind, JobErrorKind::Interrupted(Interrupt::Cancelled));
    let lag = returned.duration_since(cancelled_at);
    assert!(
        lag < Duration::from_secs(1),
        "stopped {lag:?} after the cancel"
    );
    // Stopped inside the stage that was running (its loop saw the flag) — or, if the cancel
    // landed on a stage boundary, at the start of the next one.
    let at = DIGITIZE.iter().position(|s| *s == stage).unwrap();
    assert!(
        err.failed_stage == stage || DIGITIZE.get(at + 1) == Some(&err.failed_stage),
        "cancelled during {stage}, failed at {}",
        err.failed_stage
    );
    let failed_at = DIGITIZE
        .iter()
        .position(|s| *s == err.failed_stage)
        .unwrap();
    assert_eq!(err.completed_stages, DIGITIZE[..failed_at]);
    drop(ctx);
    assert!(is_empty_dir(root.path()));
}

#[test]
fn the_deadline_stops_a_job_within_a_second() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(1000, 1000));
    let started = Instant::now();
    // 2000 mm wide: ~3M stitches, well past 100 ms even in an optimised build.
    let err = failed(run(root.path(), &image, &params(2000.0), |c| {
        c.deadline = Instant::now() + Duration::from_millis(100)
    }));
    assert_eq!(
        err.kind,
        JobErrorKind::Interrupted(Interrupt::DeadlineExceeded)
    );
    assert_eq!(err.kind.code(), Some(ErrorCode::Timeout));
    assert!(
        started.elapsed() < Duration::from_millis(1100),
        "{:?}",
        started.elapsed()
    );
    assert!(is_empty_dir(root.path()));

    // A held stage observes the deadline too.
    let started = Instant::now();
    let err = failed(run(
        root.path(),
        &png(&poster(40, 30)),
        &params(40.0),
        |c| {
            c.deadline = Instant::now() + Duration::from_millis(150);
            c.hooks = vec![HookDirective::Hold {
                stage: Stage::Fill,
                ms: 10_000,
            }];
        },
    ));
    assert_eq!(
        (err.kind, err.failed_stage),
        (
            JobErrorKind::Interrupted(Interrupt::DeadlineExceeded),
            Stage::Fill
        )
    );
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[test]
fn the_memory_budget_names_the_stage_that_ran_out() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&rectangle(512, 512, (0, 0, 512, 512)));
    // Enough for the pixels (512² × 10 = 2.5 MiB estimated), not for 1.6M stitches of 1400 mm².
    let (err, peak) = heap_peak_of(|| {
        failed(run(root.path(), &image, &params(1400.0), |c| {
            c.memory_cap_bytes = 4 << 20
        }))
    });
    // Charged before allocated: the job never held much more than its cap (the slack is the
    // small uncharged bookkeeping: paths, the error, the stage records).
    assert!(
        peak < (4 << 20) + (256 << 10),
        "peak heap {peak} bytes with a 4 MiB cap"
    );
    assert!(
        matches!(err.kind, JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { cap_bytes, .. }) if cap_bytes == 4 << 20),
        "{err:?}"
    );
    assert_eq!(err.failed_stage, Stage::Fill);
    assert_eq!(
        err.completed_stages,
        [Stage::Decode, Stage::Quantize, Stage::Segment]
    );
    // The same job with room to spare succeeds: the refusal was the budget, nothing else.
    let (ok, peak) = heap_peak_of(|| {
        run(root.path(), &image, &params(1400.0), |c| {
            c.memory_cap_bytes = 256 << 20
        })
        .unwrap()
    });
    assert!(ok.design.stitch_count > 1_000_000);
    assert!(peak > 4 << 20, "{peak}");

    // Too small for the pixels: refused by decode's header estimate.
    let err = failed(run(root.path(), &image, &params(100.0), |c| {
        c.memory_cap_bytes = 1 << 20
    }));
    assert!(
        matches!(err.kind, JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { requested_bytes, .. }) if requested_bytes == 512 * 512 * ESTIMATED_BYTES_PER_PIXEL)
    );
    assert_eq!(err.failed_stage, Stage::Decode);

    // An `alloc=` hook is charged at the first stage and held.
    let err = failed(run(root.path(), &image, &params(100.0), |c| {
        c.memory_cap_bytes = 64 << 20;
        c.hooks = vec![HookDirective::Alloc { mb: 100 }];
    }));
    assert!(
        matches!(err.kind, JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { requested_bytes, .. }) if requested_bytes == 100 << 20)
    );
    assert_eq!(err.failed_stage, Stage::Decode);
    // Held past the first stage: 62 MiB + decode's 1 MiB fits in 64, quantize's 2 MiB more not.
    let err = failed(run(root.path(), &image, &params(100.0), |c| {
        c.memory_cap_bytes = 64 << 20;
        c.hooks = vec![HookDirective::Alloc { mb: 62 }];
    }));
    assert!(
        matches!(
            err.kind,
            JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.failed_stage, Stage::Quantize);
    assert!(is_empty_dir(root.path()));
}

#[test]
fn completed_stages_are_exactly_those_before_the_failed_one() {
    let image = png(&poster(60, 40));
    for (i, &stage) in DIGITIZE.iter().enumerate() {
        for hook in [
            HookDirective::Fail { stage },
            HookDirective::Panic { stage },
        ] {
            let root = tempfile::tempdir().unwrap();
            let mut cfg = config(root.path());
            cfg.hooks = vec![hook];
            let mut ctx = JobContext::new(cfg).unwrap();
            let progress = ctx.progress();
            let err = failed(digitize(&mut ctx, &image, &params(40.0)));
            assert_eq!(err.failed_stage, stage);
            assert_eq!(err.completed_stages, DIGITIZE[..i], "{hook:?}");
            assert_eq!(progress.snapshot(), (Some(stage), DIGITIZE[..i].to_vec()));
            match (&hook, &err.kind) {
                (HookDirective::Fail { .. }, JobErrorKind::Failed { message, backtrace }) => {
                    assert_eq!(message, &format!("injected failure at {stage}"));
                    assert!(!backtrace.is_empty());
                }
                (HookDirective::Panic { .. }, JobErrorKind::Panicked { message, backtrace }) => {
                    assert!(
                        message.starts_with(&format!("injected panic at {stage}")),
                        "{message}"
                    );
                    assert!(backtrace.contains("run_stage"), "{backtrace}");
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(err.kind.code(), Some(ErrorCode::StageFailed));
            // Partial state exists until the job is dropped, then it is gone.
            let dir = ctx.temp_dir().to_path_buf();
            assert!(dir.exists());
            if stage != Stage::Decode {
                assert!(dir.join("upload.bin").exists());
            }
            drop(ctx);
            assert!(is_empty_dir(root.path()), "{hook:?} left files behind");
        }
    }
}

#[test]
fn the_temp_dir_goes_away_on_success_and_when_a_panic_unwinds_past_the_job() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(60, 40));
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let out = digitize(&mut ctx, &image, &params(40.0)).unwrap();
    assert!(ctx.temp_dir().join("upload.bin").exists());
    assert_eq!(ctx.progress().snapshot(), (None, DIGITIZE.to_vec()));
    let timings = ctx.stage_timings();
    assert_eq!(timings.iter().map(|t| t.0).collect::<Vec<_>>(), DIGITIZE);
    assert!(out.design.stitch_count > 0);
    drop(ctx);
    assert!(is_empty_dir(root.path()));

    // A panic outside any stage (in the caller) unwinds through the context: still removed.
    let path = root.path().to_path_buf();
    let result = std::panic::catch_unwind(move || {
        let mut ctx = JobContext::new(config(&path)).unwrap();
        let _ = digitize(&mut ctx, &png(&poster(20, 20)), &params(20.0));
        assert!(!is_empty_dir(&path));
        panic!("caller panics while holding the job");
    });
    assert!(result.is_err());
    assert!(is_empty_dir(root.path()));
}

#[test]
fn progress_is_visible_from_another_thread_while_a_stage_is_held() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(60, 40));
    let mut cfg = config(root.path());
    cfg.hooks = vec![HookDirective::Hold {
        stage: Stage::Segment,
        ms: 300,
    }];
    let mut ctx = JobContext::new(cfg).unwrap();
    let progress: Arc<_> = ctx.progress();
    let watcher = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let snap = progress.snapshot();
            if snap.0 == Some(Stage::Segment) {
                return snap;
            }
            assert!(Instant::now() < until, "never saw segment running");
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let started = Instant::now();
    digitize(&mut ctx, &image, &params(40.0)).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    let (current, completed) = watcher.join().unwrap();
    assert_eq!(current, Some(Stage::Segment));
    assert_eq!(completed, [Stage::Decode, Stage::Quantize]);
}

/// Stops the job from inside `stage`, at its `at`-th checkpoint: cancels its token, or holds
/// that checkpoint until the deadline has passed, as a slow stretch of work would.
#[derive(Debug)]
struct StopInside {
    stage: Stage,
    at: u64,
    cancel: Option<CancellationToken>,
    deadline: Option<Instant>,
    state: std::sync::Mutex<(Option<Stage>, u64)>,
}

impl plimsoll_engine::job::CheckpointObserver for StopInside {
    fn stage_started(&self, stage: Stage) {
        *self.state.lock().unwrap() = (Some(stage), 0);
    }

    fn checkpoint(&self) {
        let mut state = self.state.lock().unwrap();
        if state.0 != Some(self.stage) {
            return;
        }
        state.1 += 1;
        if state.1 != self.at {
            return;
        }
        if let Some(token) = &self.cancel {
            token.cancel();
        }
        if let Some(deadline) = self.deadline {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        }
    }

    fn stage_ended(&self, _stage: Stage) {}
}

/// The serializer writes the body in blocks with a checkpoint between them (issue 39 made it
/// write the stitches itself): a cancellation (B3) or a deadline (B1) that comes while it is
/// writing stops the job there, named as the `serialize` stage after the five before it, with
/// no body — so the server answers B1's 504 or lets the client go, never half a design.
#[test]
fn a_cancellation_or_a_deadline_inside_the_serializers_loop_stops_the_job_at_serialize() {
    // 300 mm wide: ~45K stitches, a dozen blocks of writing on the job's thread: the 6th
    // checkpoint is inside the writing.
    stops_inside_serialize(300.0, 6);
}

/// The same with a design long enough to be written by two threads (600 mm wide: ~225K
/// stitches, over `serialize`'s two-thread threshold): the job's thread passes a checkpoint for
/// every block either thread starts, so it stops at the same count a one-thread writer would,
/// the helper with it, and no half-written body comes out.
#[test]
fn a_cancellation_or_a_deadline_stops_serialize_written_by_two_threads() {
    // ~55 blocks of writing, one checkpoint each whichever thread writes it: the 24th is inside
    // the writing, while both threads write.
    stops_inside_serialize(600.0, 24);
}

/// `quantize` counts and maps an image of 512K pixels or more with two threads, a half of its
/// rows each (issue 39): a cancellation or a deadline in either pass stops the job at the same
/// checkpoint a one-thread pass would, named as `quantize`, the helper with it.
#[test]
fn a_cancellation_or_a_deadline_stops_quantize_on_two_threads_in_either_pass() {
    // 1 MP: 64 checkpoints of counting (one per 16,384 pixels, either half), a few in the
    // median cut, then as many of mapping: the 20th is inside the histogram, the 110th inside
    // the mapping.
    let image = png(&poster(1024, 1024));
    for at in [20, 110] {
        stops_inside(Stage::Quantize, &image, 300.0, at);
    }
}

/// Digitizes the poster at `width_mm` with the job cancelled, then with its deadline held past,
/// at `serialize`'s `at`-th checkpoint: the job must stop there, at `serialize`.
fn stops_inside_serialize(width_mm: f64, at: u64) {
    stops_inside(Stage::Serialize, &png(&poster(300, 200)), width_mm, at);
}

/// Digitizes `image` at `width_mm` with the job cancelled, then with its deadline held past, at
/// `stage`'s `at`-th checkpoint: the job must stop there, at `stage`, after the stages before
/// it, with nothing left behind.
fn stops_inside(stage: Stage, image: &[u8], width_mm: f64, at: u64) {
    let before = DIGITIZE.iter().position(|s| *s == stage).unwrap();
    for deadline_case in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let mut cfg = config(root.path());
        if deadline_case {
            cfg.deadline = Instant::now() + Duration::from_secs(2);
        }
        let observer = Arc::new(StopInside {
            stage,
            at,
            cancel: (!deadline_case).then(|| cfg.cancel.clone()),
            deadline: deadline_case.then_some(cfg.deadline),
            state: Default::default(),
        });
        let mut ctx = JobContext::new(cfg).unwrap();
        ctx.observe(observer.clone());
        let err = failed(digitize(&mut ctx, image, &params(width_mm)));
        let expected = if deadline_case {
            Interrupt::DeadlineExceeded
        } else {
            Interrupt::Cancelled
        };
        assert_eq!(err.kind, JobErrorKind::Interrupted(expected));
        assert_eq!(err.failed_stage, stage);
        assert_eq!(err.completed_stages, DIGITIZE[..before]);
        // Stopped where it was told: a cancel at that checkpoint, a deadline at the next (the
        // held checkpoint read its clock before it was held).
        let stopped_at = if deadline_case { at + 1 } else { at };
        let (seen, checkpoints) = *observer.state.lock().unwrap();
        assert_eq!((seen, checkpoints), (Some(stage), stopped_at));
        drop(ctx);
        assert!(is_empty_dir(root.path()));
    }
}
