//! The child processes of the crash and concurrency tests (this binary re-executed).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use volee_store::{Message, Store, StoreError, ToolCall, ToolFunction};

/// Context messages the crash writer keeps (its stand-in for compaction).
pub const CONTEXT: usize = 20;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// Runs only in a child: a plain test run passes through.
#[test]
fn entry() {
    match std::env::var("VOLEE_STORE_CHILD").as_deref() {
        Ok("crash") => crash_writer(),
        Ok("fight") => fighter(),
        _ => {}
    }
}

/// The user message the crash writer writes at `seq` of session `j`.
pub fn user_text(j: usize, seq: u64) -> String {
    format!("s{j} m{seq}")
}

/// The id of the tool call the crash writer makes at `seq` of session `j`.
pub fn call_id(j: usize, seq: u64) -> String {
    format!("c{j}-{seq}")
}

pub fn result_text(id: &str) -> String {
    format!("result of {id}")
}

/// Checkpoints forever over the sessions in `VOLEE_STORE_IDS` until killed; after each one,
/// prints `ckpt J LAST_SEQ`. Each step depends only on the session's next seq and pending call,
/// so the parent can check every line.
fn crash_writer() {
    let store = Store::new(PathBuf::from(env("VOLEE_STORE_DIR")));
    let project = PathBuf::from(env("VOLEE_STORE_PROJECT"));
    let ids: Vec<String> = env("VOLEE_STORE_IDS")
        .split(',')
        .map(String::from)
        .collect();
    let mut writers: Vec<_> = ids
        .iter()
        .map(|id| store.open_for_resume(id, &project).unwrap())
        .collect();
    let stdout = std::io::stdout();
    for k in 0.. {
        let j = k % writers.len();
        let w = &mut writers[j];
        let seq = w.next_seq();
        let pending = w
            .state()
            .pending_tool_calls
            .first()
            .and_then(|p| p.call.id.clone());
        if let Some(id) = pending {
            w.finish_tool_call(&id, result_text(&id)).unwrap();
        } else if seq % 5 == 0 {
            let call = ToolCall {
                id: Some(call_id(j, seq)),
                function: ToolFunction {
                    index: Some(0),
                    name: "shell".into(),
                    arguments: serde_json::json!({"cmd": format!("step {seq}")}),
                },
            };
            let mut m = Message::assistant("");
            m.tool_calls.push(call.clone());
            w.push_message(m).unwrap();
            w.begin_tool_call(call);
        } else {
            for _ in 0..(1 + seq % 3) {
                let s = w.next_seq();
                w.push_message(Message::user(user_text(j, s))).unwrap();
            }
        }
        let messages = &mut w.state_mut().messages;
        if messages.len() > CONTEXT {
            let cut = messages.len() - CONTEXT;
            messages.drain(..cut);
        }
        w.checkpoint().unwrap();
        let mut out = stdout.lock();
        writeln!(out, "ckpt {j} {}", w.state().last_seq).unwrap();
        out.flush().unwrap();
    }
}

/// Fights for one session for a while: each time it gets the lock it appends a block of
/// messages (one checkpoint each) and lets go. Writes what it did to `result-PID.json`.
fn fighter() {
    let store = Store::new(PathBuf::from(env("VOLEE_STORE_DIR")));
    let project = PathBuf::from(env("VOLEE_STORE_PROJECT"));
    let id = env("VOLEE_STORE_IDS");
    let block: u64 = env("VOLEE_STORE_BLOCK").parse().unwrap();
    let until = Instant::now() + Duration::from_millis(env("VOLEE_STORE_MS").parse().unwrap());
    let pid = std::process::id();
    let mut appended = 0u64;
    let mut refused_by: Vec<u32> = Vec::new();
    let mut holds = 0u64;
    while Instant::now() < until {
        match store.open_for_resume(&id, &project) {
            Ok(mut w) => {
                holds += 1;
                for n in 0..block {
                    w.push_message(Message::user(format!("p{pid} h{holds} n{n}")))
                        .unwrap();
                    w.checkpoint().unwrap();
                    appended += 1;
                }
                // Hold on longer than a contender waits before it gives up.
                std::thread::sleep(Duration::from_millis(150));
            }
            Err(StoreError::Locked {
                pid: Some(holder), ..
            }) => refused_by.push(holder),
            // The holder had locked and not yet written its pid.
            Err(StoreError::Locked { pid: None, .. }) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let result = serde_json::json!({"pid": pid, "appended": appended, "holds": holds, "refused_by": refused_by});
    std::fs::write(
        PathBuf::from(env("VOLEE_STORE_DIR")).join(format!("result-{pid}.json")),
        result.to_string(),
    )
    .unwrap();
}
