//! How long one Codex listing takes against a running app-server daemon (connect, upgrade,
//! `initialize`, `thread/loaded/list`, `thread/list`, `thread/read` as needed, close):
//!
//! ```text
//! cargo run --release -p volee-listing --example list_threads_latency -- SOCKET [N]
//! ```
//!
//! SOCKET is `$CODEX_HOME/app-server-control/app-server-control.sock` of a daemon serving at
//! least one Codex TUI; N listings (default 200) run one after the other. Prints the loaded
//! threads' count and p50/p90/max in milliseconds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(
        args.next()
            .ok_or("usage: list_threads_latency SOCKET [N]")?,
    );
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);
    if n == 0 {
        return Err("N must be at least 1".into());
    }
    let mut times = Vec::with_capacity(n);
    let mut threads = 0;
    for _ in 0..n {
        let start = Instant::now();
        let listed = volee_listing::codex::list_threads(&socket, Duration::from_secs(5)).await?;
        times.push(start.elapsed());
        threads = listed.len();
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{n} listings, {threads} threads: p50 {:.3} ms, p90 {:.3} ms, max {:.3} ms",
        ms(times[n / 2]),
        ms(times[n * 9 / 10]),
        ms(times[n - 1])
    );
    Ok(())
}
