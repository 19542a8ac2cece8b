//! The daemon's per-turn usage read (issue 23): a live session's file grows by one turn and
//! [`UsageTail::read`] reads what was appended. The file is the real Claude Code transcript and
//! Codex rollout of `tests/fixtures` (one session each), repeated to SIZE_MB before the first
//! read; each turn appends the whole fixture once more (a full turn: prompt, tool call, tool
//! result, answers, usage lines — about 160 KB for Claude, 50 KB for Codex).
//!
//! `SIZE_MB=20 TURNS=200 cargo bench -p volee-history --bench usage_tail`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use volee_harness::HistoryKind;
use volee_history::{Reader, UsageTail};

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn summary(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "min {:.3}  p50 {:.3}  p99 {:.3}  max {:.3} ms ({} reads)",
        ms[0],
        at(0.5),
        at(0.99),
        ms[ms.len() - 1],
        ms.len()
    )
}

fn run(label: &str, kind: HistoryKind, fixture: &Path, file_name: &str) {
    let size_mb = env_num("SIZE_MB", 20);
    let turns = env_num("TURNS", 200);
    let turn = std::fs::read(fixture).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file_name);
    let mut file = std::fs::File::create(&path).unwrap();
    while (file.metadata().unwrap().len() as usize) < size_mb << 20 {
        file.write_all(&turn).unwrap();
    }
    let mut tail = UsageTail::new(Reader::new(kind).unwrap(), path);
    let t = Instant::now();
    assert!(tail.read().unwrap());
    let first = t.elapsed();
    let mut reads = Vec::new();
    for _ in 0..turns {
        file.write_all(&turn).unwrap();
        let t = Instant::now();
        assert!(tail.read().unwrap(), "a turn changes the usage");
        reads.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let u = tail.usage().unwrap();
    println!(
        "| {label} | {size_mb} MB first read {:.0} ms | a turn ({} KB): {} |",
        first.as_secs_f64() * 1e3,
        turn.len() / 1024,
        summary(reads)
    );
    assert!(u.requests > 0 && u.output > 0);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/home");
    println!("| session file | first read | per-turn read |");
    println!("|---|---|---|");
    run(
        "Claude Code transcript",
        HistoryKind::ClaudeJsonl,
        &fixtures.join(".claude/projects/-tmp-work/d4a8abe5-742d-4002-a1ab-379c1b005cb4.jsonl"),
        "d4a8abe5-742d-4002-a1ab-379c1b005cb4.jsonl",
    );
    run(
        "Codex rollout",
        HistoryKind::CodexRollout,
        &fixtures.join(
            ".codex/sessions/2026/12/04/rollout-2026-12-04T08-52-32-01a24041-53e3-7ff1-bade-1cfdc8562944.jsonl",
        ),
        "rollout-2026-12-04T08-52-32-01a24041-53e3-7ff1-bade-1cfdc8562944.jsonl",
    );
}
