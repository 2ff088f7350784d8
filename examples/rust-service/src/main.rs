//! The second service as a process: `PORT` (default 8081) on loopback; `PLIMSOLL_TEST_HOOKS=1`
//! honours the hold hook; `LOOKUP_URL` is the dependency `/lookup` calls; `ERROR_LOG` is the file
//! its error lines are appended to; `CLAIM_FILE` holds the claim it serves at `GET /contract`;
//! `TEMP_DIR` is the folder lookups spool their answers in.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = plimsoll_example_service::Config {
        hooks: matches!(
            std::env::var("PLIMSOLL_TEST_HOOKS").as_deref(),
            Ok("1" | "true")
        ),
        lookup_url: std::env::var("LOOKUP_URL").ok(),
        temp_dir: std::env::var_os("TEMP_DIR").map(Into::into),
        error_log: std::env::var_os("ERROR_LOG").map(Into::into),
        claim: match std::env::var_os("CLAIM_FILE") {
            Some(path) => Some(std::fs::read_to_string(path)?),
            None => None,
        },
        ..Default::default()
    };
    let port = std::env::var("PORT").unwrap_or_else(|_| "8081".into());
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!("listening on {}", listener.local_addr()?);
    plimsoll_example_service::serve(listener, &config).await?;
    Ok(())
}
