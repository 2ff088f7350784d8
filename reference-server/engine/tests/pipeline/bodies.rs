//! The response bodies of the digitize benchmark's inputs are byte for byte what they were before
//! the pipeline was made faster (issue 39): a faster stage or serializer must leave every byte
//! where it was. The SHA-256 of each body was recorded at 8f6cb68, before any change, by
//! `examples/bench_digitize.rs` (its `body_sha256`): `synthetic::BODY_SHA256`.

use sha2::Digest;

use super::*;
use plimsoll_engine::synthetic;

fn body_sha256(megapixels: f64) -> String {
    let root = tempfile::tempdir().unwrap();
    let image = synthetic::poster_png(megapixels);
    // `synthetic::QUERY`'s parameters.
    let out = run(root.path(), &image, &params(850.0), |_| {}).unwrap();
    let mut sha = sha2::Sha256::new();
    for part in out.json.parts() {
        sha.update(part);
    }
    sha.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn check(megapixels: f64) {
    let recorded = synthetic::recorded_body_sha256(megapixels).expect("a recorded size");
    assert_eq!(
        body_sha256(megapixels),
        recorded,
        "the body of the {megapixels} MP poster changed"
    );
}

/// 1 and 4 MP, one after the other in one test: the engine's other tests include wall-clock
/// bounds on checkpoint gaps, and a 16 MP job beside them (~1.5 s of a core, in parallel) made
/// those flaky on two cores. The 16 MP body is checked by the benchmarks, which print whether
/// its digest is the recorded one (`bench_pipeline` fails if it is not).
#[test]
fn the_posters_bodies_are_those_recorded_before_the_pipeline_was_made_faster() {
    check(1.0);
    check(4.0);
}
