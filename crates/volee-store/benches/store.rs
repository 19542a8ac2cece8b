//! Session store figures (ARCHITECTURE.md section 10): checkpoint latency at growing transcript
//! lengths (target: flat), listing 10,000 sessions (< 200 ms), searching 1 GB of transcripts
//! (< 2 s). `SEARCH_BYTES` makes the search corpus smaller, `BENCH_DIR` picks the disk,
//! `BENCH_ONLY=checkpoint|list|search` runs one part.
//! `cargo bench -p volee-store --bench store`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use volee_store::{Message, NewSession, Store, TranscriptItem, TranscriptLine};

/// Context messages kept (compaction keeps the context bounded).
const CONTEXT: usize = 50;

/// min/p50/p99/max of samples in milliseconds.
fn stats(v: Vec<f64>) -> String {
    volee_test_support::bench::summary(v, 2)
}

/// CPU time this process used so far (user + system, all threads), in ms: unlike wall time,
/// it barely moves with the machine's other load.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 11 and 12 after the command.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks * 10.0
}

fn text(i: u64) -> String {
    format!(
        "message {i}: ran cargo test in crates/volee-store and looked at the failing assertion in \
         tests/crash.rs; the transcript grows while the context stays bounded by compaction, so \
         a checkpoint writes the new lines and the context, never the whole transcript again."
    )
}

fn checkpoint_latency(root: &Path) {
    for n in [100u64, 10_000, 100_000] {
        let store = Store::new(root.join(format!("ckpt-{n}")));
        let mut w = store
            .create(NewSession {
                title: "bench".into(),
                project_root: root.into(),
                model: "gemma4".into(),
            })
            .unwrap();
        // Build the transcript in large checkpoints.
        let mut i = 0;
        while i < n {
            for _ in 0..1000.min(n - i) {
                w.push_message(Message::user(text(i))).unwrap();
                i += 1;
            }
            let m = &mut w.state_mut().messages;
            let cut = m.len().saturating_sub(CONTEXT);
            m.drain(..cut);
            w.checkpoint().unwrap();
        }
        let transcript = std::fs::metadata(w.dir().join("transcript.jsonl"))
            .unwrap()
            .len();
        let mut ms = Vec::new();
        for k in 0..200 {
            let t = Instant::now();
            w.push_message(Message::assistant(text(n + k))).unwrap();
            let m = &mut w.state_mut().messages;
            let cut = m.len().saturating_sub(CONTEXT);
            m.drain(..cut);
            w.checkpoint().unwrap();
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "checkpoint (1 new message, {CONTEXT}-message context) with {n:>6} messages in the transcript ({:.1} MB): {}",
            transcript as f64 / 1e6,
            stats(ms)
        );
    }
}

/// Copy one real session directory under new ids (no fsync: setup only).
fn clone_sessions(store: &Store, template: &str, count: usize, prefix: &str) -> Vec<String> {
    let dir = store.session_dir(template);
    let session = std::fs::read_to_string(dir.join("session.json")).unwrap();
    let meta = std::fs::read_to_string(dir.join("meta.json")).unwrap();
    let mut ids = Vec::new();
    for i in 0..count {
        let width = template.len() - prefix.len();
        let id = format!("{prefix}{i:0width$}");
        let d = store.session_dir(&id);
        std::fs::create_dir_all(&d).unwrap();
        let s = session.replace(template, &id);
        // meta.json records session.json's size: the same, since ids have the same length.
        assert_eq!(s.len(), session.len());
        std::fs::write(d.join("session.json"), s).unwrap();
        std::fs::write(d.join("meta.json"), meta.replace(template, &id)).unwrap();
        std::fs::write(d.join("transcript.jsonl"), "").unwrap();
        std::fs::write(d.join("lock"), "").unwrap();
        ids.push(id);
    }
    ids
}

fn template(store: &Store, root: &Path, messages: u64) -> String {
    let mut w = store
        .create(NewSession {
            title: "Cache investigation".into(),
            project_root: root.into(),
            model: "gemma4".into(),
        })
        .unwrap();
    for i in 0..messages {
        w.push_message(Message::user(text(i))).unwrap();
    }
    w.checkpoint().unwrap();
    w.id().to_string()
}

fn list_10k(root: &Path) {
    let store = Store::new(root.join("list"));
    let t = template(&store, root, 30);
    clone_sessions(&store, &t, 9_999, "lst");
    let mut ms = Vec::new();
    let mut n = 0;
    let cpu = cpu_ms();
    for _ in 0..20 {
        let t = Instant::now();
        n = store.list(true).unwrap().len();
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let cpu = (cpu_ms() - cpu) / 20.0;
    println!(
        "list {n} sessions (30-message contexts, meta.json only): {}; CPU {cpu:.0} ms a listing",
        stats(ms)
    );
}

fn search_corpus(root: &Path, bytes: u64) {
    let store = Store::new(root.join("search"));
    let t = template(&store, root, 0);
    let per_session: u64 = 10 << 20;
    let sessions = bytes.div_ceil(per_session).max(1) as usize;
    let ids = clone_sessions(&store, &t, sessions, "src");
    let mut total = 0u64;
    let mut planted = 0u64;
    for (s, id) in ids.iter().enumerate() {
        let path = store.session_dir(id).join("transcript.jsonl");
        let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
        let mut written = 0u64;
        let mut seq = 0u64;
        while written < per_session.min(bytes - total) {
            seq += 1;
            // One line in 20,000 mentions the needle.
            let body = if seq % 20_000 == 7 {
                planted += 1;
                format!("session {s}: the FlakyWidget test fails on Mondays")
            } else {
                text(seq)
            };
            let mut line = serde_json::to_vec(&TranscriptLine {
                seq,
                at_ms: 1_700_000_000_000 + seq,
                item: TranscriptItem::Message {
                    message: Message::user(body),
                },
            })
            .unwrap();
            line.push(b'\n');
            out.write_all(&line).unwrap();
            written += line.len() as u64;
        }
        out.flush().unwrap();
        total += written;
    }
    // The first run reads what was just written (page cache warm, as on a machine in use).
    let mut ms = Vec::new();
    let mut found = 0;
    let mut scanned = 0;
    let cpu = cpu_ms();
    for _ in 0..5 {
        let t = Instant::now();
        let (hits, stats) = store.search_with_stats("flakywidget", true).unwrap();
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        found = hits.iter().map(|h| h.transcript_matches).sum::<u64>();
        scanned = stats.bytes;
    }
    let cpu = (cpu_ms() - cpu) / 5.0;
    assert_eq!(found, planted);
    let p50 = {
        let mut v = ms.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "search {:.2} GB in {sessions} transcripts ({found} matching lines): {} — {:.0} MB/s at p50; CPU {cpu:.0} ms a search (all threads)",
        scanned as f64 / 1e9,
        stats(ms),
        scanned as f64 / 1e6 / (p50 / 1000.0)
    );
    // A query that is everywhere: every line is a candidate and is parsed.
    let t = Instant::now();
    let (hits, stats) = store.search_with_stats("compaction", true).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let lines: u64 = hits.iter().map(|h| h.transcript_matches).sum();
    println!(
        "search worst case (query on every line, {lines} matching lines): {:.0} ms — {:.0} MB/s",
        secs * 1000.0,
        stats.bytes as f64 / 1e6 / secs
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let base = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::tempdir_in(&base).unwrap();
    println!("store under {}", tmp.path().display());
    let search_bytes: u64 = std::env::var("SEARCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30);
    // BENCH_ONLY=checkpoint|list|search runs one part.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |part: &str| only.is_empty() || only == part;
    if run("checkpoint") {
        checkpoint_latency(tmp.path());
    }
    if run("list") {
        list_10k(tmp.path());
    }
    if run("search") {
        search_corpus(tmp.path(), search_bytes);
    }
}
