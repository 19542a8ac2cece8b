//! The session browser's first frame and `volee sessions --json`, over the past-sessions corpus
//! of the `volee-history` benchmark (10,000 sessions, 1 GB), as a user starts them: the real
//! `volee` binary, a real daemon, a terminal (a pty, 120×40) for the browser.
//!
//! ```sh
//! CORPUS_DIR=/tmp/corpus CORPUS_MB=1024 SESSIONS=10000 cargo bench -p volee-history --bench index
//! CORPUS_DIR=/tmp/corpus RUNS=20 cargo bench -p volee-cli --bench browse_open
//! ```
//!
//! First frame: from spawning `volee browse` to the list's title (`N live, M past`) on its
//! terminal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use volee_test_support::bench::percentile;

fn volee(bin: &Path, home: &Path, volee_home: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VOLEE_HOME", volee_home)
        .env("TERM", "xterm-256color");
    cmd
}

/// Spawn the browser on a new pty; the time until its first frame shows the list's title.
fn first_frame(bin: &Path, home: &Path, volee_home: &Path) -> Duration {
    let size = nix::pty::Winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let slave: OwnedFd = pty.slave;
    let mut master = std::fs::File::from(pty.master);
    let t = Instant::now();
    let mut child = volee(bin, home, volee_home)
        .arg("browse")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // A thread drains the terminal (the browser blocks if nobody reads it).
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = t + Duration::from_secs(10);
    let took = loop {
        let chunk = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| {
                panic!(
                    "no first frame in 10 s: {:?}",
                    String::from_utf8_lossy(&seen)
                )
            });
        seen.extend_from_slice(&chunk);
        // The title `0 live, N past` (blank cells are not written: words arrive apart).
        let text = String::from_utf8_lossy(&seen);
        if text.contains("live,") && text.contains("past") {
            break t.elapsed();
        }
    };
    // Esc quits.
    master.write_all(b"\x1b").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the browser did not quit on Esc");
        std::thread::sleep(Duration::from_millis(10));
    }
    took
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(corpus) = std::env::var_os("CORPUS_DIR").map(PathBuf::from) else {
        eprintln!("CORPUS_DIR is needed: make it with the volee-history benchmark (see the top of this file)");
        std::process::exit(2);
    };
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let home = std::fs::read_dir(&corpus)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("home-"))
        })
        .expect("no home-* directory in CORPUS_DIR");
    let volee_home = corpus.join("volee");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_volee"));

    // A daemon, its first look at the corpus over (it reads what changed since the index was
    // made: nothing), so its work is not in the figures.
    let out = volee(&bin, &home, &volee_home)
        .args(["ls"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_secs(15));

    let mut listing = Vec::new();
    let mut sessions = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let out = volee(&bin, &home, &volee_home)
            .args(["sessions", "--json", "--all"])
            .output()
            .unwrap();
        listing.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        sessions = v["sessions"].as_array().map_or(0, Vec::len);
    }
    listing.sort_by(f64::total_cmp);
    assert!(
        sessions > 0,
        "no sessions listed: is CORPUS_DIR's index there?"
    );

    let mut frames = Vec::new();
    for _ in 0..runs {
        frames.push(first_frame(&bin, &home, &volee_home).as_secs_f64() * 1000.0);
        // The browser's own scan (on its thread after the first frame) is over before the next.
        std::thread::sleep(Duration::from_millis(300));
    }
    frames.sort_by(f64::total_cmp);
    let _ = volee(&bin, &home, &volee_home)
        .args(["daemon", "stop"])
        .output();

    println!("| {sessions} sessions indexed, {runs} runs | p50 | p99 | max |");
    println!("|---|---|---|---|");
    for (what, v) in [
        (
            "`volee sessions --json --all`, whole command (ms)",
            &listing,
        ),
        (
            "`volee browse`: spawn → first frame on its terminal (ms)",
            &frames,
        ),
    ] {
        println!(
            "| {what} | {:.1} | {:.1} | {:.1} |",
            percentile(v, 0.5),
            percentile(v, 0.99),
            v[v.len() - 1]
        );
    }
}
