//! The response bodies of the digitize benchmark's inputs are byte for byte what they were before
//! the pipeline was made faster (issue 39): a faster stage or serializer must leave every byte
//! where it was. The SHA-256 of each body was recorded at 8f6cb68, before any change, by
//! `examples/bench_digitize.rs` (its `body_sha256`), and is the same as at d409573: the
//! pipeline's output had not moved since.

use sha2::Digest;

use super::*;
use plimsoll_engine::synthetic;

/// The poster at each size the benchmark reports, 850 mm wide, and the SHA-256 of its body.
const RECORDED: [(f64, &str); 3] = [
    (
        1.0,
        "9bd44c4d767e9c1c5ca478c860dfa0a1832392170e41127f0931a18a66fb5372",
    ),
    (
        4.0,
        "0da23a5fdec3f4374c58925a9e1c4e6f4f63526927df9d6650c640d348d94d8c",
    ),
    (
        16.0,
        "1c935412c610c9f2b5f0ebd15d0da51adb32f5ea7d921a2ccc73de1763021594",
    ),
];

fn body_sha256(megapixels: f64) -> String {
    let root = tempfile::tempdir().unwrap();
    let image = synthetic::poster_png(megapixels);
    let out = run(root.path(), &image, &params(850.0), |_| {}).unwrap();
    sha2::Sha256::digest(&out.json)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn check(megapixels: f64) {
    let (_, recorded) = RECORDED
        .into_iter()
        .find(|(mp, _)| *mp == megapixels)
        .expect("a recorded size");
    assert_eq!(
        body_sha256(megapixels),
        recorded,
        "the body of the {megapixels} MP poster changed"
    );
}

#[test]
fn the_1_mp_posters_body_is_the_one_recorded_before_the_pipeline_was_made_faster() {
    check(1.0);
}

#[test]
fn the_4_mp_posters_body_is_the_one_recorded_before_the_pipeline_was_made_faster() {
    check(4.0);
}

#[test]
fn the_16_mp_posters_body_is_the_one_recorded_before_the_pipeline_was_made_faster() {
    check(16.0);
}
