//! Long bodies stream as gapless whole frames that reassemble exactly (R5).

use super::*;

#[tokio::test]
async fn long_bodies_stream_as_gapless_frames_that_reassemble_exactly() {
    let s = TestServer::start(&[]).await;
    let max = s
        .server
        .state()
        .config
        .contract
        .clauses()
        .r5
        .value
        .max_frame_body_bytes as usize;
    let contract = s
        .client
        .get(s.url("/v1/contract"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(
        contract.len() > max,
        "the contract body is {} bytes",
        contract.len()
    );
    let design = serde_json::to_string(&zigzag(6000)).unwrap();
    let export = |format: &str| {
        s.client
            .post(s.url(&format!("/v1/export?format={format}")))
            .header("content-type", "application/json")
            .body(design.clone())
            .send()
    };
    let dst = export("dst").await.unwrap().bytes().await.unwrap();
    let svg = export("svg").await.unwrap().bytes().await.unwrap();
    assert!(dst.len() * 4 / 3 > max && svg.len() > max);

    let mut ws = Ws::connect(&s).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let hold = [(HOOK, "hold=relay:50")];
        let json = [
            ("content-type", "application/json"),
            (HOOK, "hold=relay:50"),
        ];
        for (kind, text) in [
            (
                "contract",
                envelope(&format!("contract-{i}"), "GET", "/v1/contract", &hold, ""),
            ),
            (
                "dst",
                envelope(
                    &format!("dst-{i}"),
                    "POST",
                    "/v1/export?format=dst",
                    &json,
                    &design,
                ),
            ),
            (
                "svg",
                envelope(
                    &format!("svg-{i}"),
                    "POST",
                    "/v1/export?format=svg",
                    &json,
                    &design,
                ),
            ),
        ] {
            // Two exports of each format: four at once is the export pool's size (no queue).
            if kind == "contract" || i < 2 {
                ids.push(format!("{kind}-{i}"));
                ws.send(&text).await;
            }
        }
    }
    let r = receive(&mut ws, &ids, Duration::from_secs(10)).await;
    for id in &ids {
        let frames = r.of(id);
        assert_eq!(frames[0].status, 200, "{id}: {}", frames[0].body_chunk);
        assert!(frames.len() > 1, "{id}: {} frame(s)", frames.len());
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.seq, i as u64, "{id}");
            assert_eq!(f.r#final, i + 1 == frames.len(), "{id}");
            assert_eq!(
                f.headers.is_empty(),
                i > 0,
                "{id}: headers on the first frame only"
            );
            assert!(
                f.body_chunk.len() <= max,
                "{id}: chunk of {}",
                f.body_chunk.len()
            );
            assert_eq!(f.status, 200);
        }
        let want: &[u8] = match id.split('-').next().unwrap() {
            "contract" => &contract,
            "dst" => &dst,
            _ => &svg,
        };
        assert_eq!(r.body(id), want, "{id}");
    }
    assert_eq!(
        r.of("dst-0")[0].headers["content-transfer-encoding"],
        "base64"
    );
    assert!(
        !r.of("svg-0")[0]
            .headers
            .contains_key("content-transfer-encoding")
    );
}

/// A valid design of `n` stitches (one thread, a zigzag inside 100 x 100 mm).
fn zigzag(n: usize) -> plimsoll_spec::Design {
    use plimsoll_spec::{Design, Extents, Stitch, StitchCommand, Thread};
    let mut stitches: Vec<Stitch> = (0..n)
        .map(|i| Stitch {
            x: (i % 1000) as i32,
            y: if i % 2 == 0 {
                0
            } else {
                37 + (i / 1000) as i32 * 10
            },
            cmd: StitchCommand::Stitch,
        })
        .collect();
    stitches.push(Stitch {
        x: 0,
        y: 0,
        cmd: StitchCommand::End,
    });
    Design {
        format: plimsoll_spec::design::DESIGN_FORMAT.to_owned(),
        width_mm: 100.0,
        height_mm: 100.0,
        threads: vec![Thread {
            color: "#112233".to_owned(),
        }],
        extents: Extents {
            min_x: 0,
            min_y: 0,
            max_x: 1000,
            max_y: 1000,
        },
        stitch_count: n as u64,
        stitches,
    }
}
