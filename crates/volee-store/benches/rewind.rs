//! `volee agent --rewind` figure (issue 21): rewind of a session whose transcript holds 100,000
//! messages (36 MB), to a checkpoint taken two turns earlier (target ≤ 10 ms p50). Each run is
//! what the CLI does: checkpoint NAME, two turns (8 lines, a `write_file` call in each), then
//! `Store::rewind` timed whole — writer lock, `session.json`, the checkpoint file, the
//! transcript read after the checkpoint's byte offset only, the `rewound` event and one store
//! checkpoint (append + fdatasync, atomic replace of `session.json` and `meta.json`). A last part
//! rewinds to a checkpoint 10,000 messages back, to show the cost follows the distance, not the
//! transcript's length. `BENCH_DIR` picks the disk, `RUNS` the count (default 200).
//! `cargo bench -p volee-store --bench rewind`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use volee_store::{Message, NewSession, Store, ToolCall, ToolFunction, WriterSession};

/// Context messages kept (compaction keeps the context bounded).
const CONTEXT: usize = 50;
const MESSAGES: u64 = 100_000;

/// min/p50/p99/max of samples in milliseconds.
fn stats(v: Vec<f64>) -> String {
    volee_test_support::bench::summary(v, 2)
}

fn text(i: u64) -> String {
    format!(
        "message {i}: ran cargo test in crates/volee-store and looked at the failing assertion in \
         tests/crash.rs; the transcript grows while the context stays bounded by compaction, so \
         a checkpoint writes the new lines and the context, never the whole transcript again."
    )
}

fn bound(w: &mut WriterSession) {
    let m = &mut w.state_mut().messages;
    let cut = m.len().saturating_sub(CONTEXT);
    m.drain(..cut);
}

/// A turn of four messages: the prompt, a `write_file` call, its result, the answer.
fn turn(w: &mut WriterSession, i: u64) {
    w.push_message(Message::user(text(i))).unwrap();
    let id = format!("call_{i}");
    let call = ToolCall {
        id: Some(id.clone()),
        function: ToolFunction {
            index: None,
            name: "write_file".into(),
            arguments: serde_json::json!({"path": format!("src/f{i}.rs"), "content": text(i)}),
        },
    };
    let mut a = Message::assistant("");
    a.tool_calls.push(call.clone());
    w.push_message(a).unwrap();
    w.begin_tool_call(call);
    w.finish_tool_call(&id, "wrote 280 bytes").unwrap();
    w.push_message(Message::assistant(text(i + 1))).unwrap();
    bound(w);
}

fn main() {
    let base = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let root: &Path = dir.path();
    let store = Store::new(root.join("sessions"));
    let mut w = store
        .create(NewSession {
            title: "bench".into(),
            project_root: root.into(),
            model: "gemma4".into(),
        })
        .unwrap();
    let mut i = 0;
    while i < MESSAGES {
        for _ in 0..250 {
            turn(&mut w, i);
            i += 4;
        }
        w.checkpoint().unwrap();
    }
    let id = w.id().to_string();
    let len = std::fs::metadata(w.dir().join("transcript.jsonl"))
        .unwrap()
        .len();
    drop(w);

    // A checkpoint, `turns` turns after it, then the timed rewind to it: (ms, changed calls).
    let mut rewind_over = |name: &str, turns: usize| {
        let mut w = store.open_writer(&id).unwrap();
        w.save_checkpoint(name).unwrap();
        for _ in 0..turns {
            turn(&mut w, i);
            i += 4;
        }
        w.checkpoint().unwrap();
        drop(w);
        let t = Instant::now();
        let (_, record) = store.rewind(&id, name).unwrap();
        (
            t.elapsed().as_secs_f64() * 1000.0,
            record.changed_calls.len(),
        )
    };
    let mut ms = Vec::new();
    let mut calls = 0;
    for k in 0..runs {
        let (took, n) = rewind_over(&format!("cp-{k}"), 2);
        ms.push(took);
        calls = n;
    }
    println!(
        "rewind two turns back, {MESSAGES} messages in the transcript ({:.1} MB), {calls} changed calls listed: {}",
        len as f64 / 1e6,
        stats(ms)
    );

    // The far case: the checkpoint 10,000 messages back; the scan reads those lines only.
    let mut ms = Vec::new();
    for k in 0..5 {
        let (took, n) = rewind_over(&format!("far-{k}"), 2500);
        ms.push(took);
        calls = n;
    }
    println!(
        "rewind 10,000 messages back ({calls} changed calls listed): {}",
        stats(ms)
    );
}
