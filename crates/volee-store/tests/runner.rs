//! Integration tests of the session store: the API, property tests of its invariants, a crash
//! test (SIGKILL at random points) and a concurrency test (processes fighting for one session).
//!
//! Child processes are this test binary re-executed with `VOLEE_STORE_CHILD` set: it runs only
//! the test `child::entry`, which then acts as the writer the parent asked for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "runner/api.rs"]
mod api;
#[path = "runner/child.rs"]
mod child;
#[path = "runner/concurrency.rs"]
mod concurrency;
#[path = "runner/crash.rs"]
mod crash;
#[path = "runner/import.rs"]
mod import;
#[path = "runner/properties.rs"]
mod properties;

use std::path::Path;
use std::process::{Command, Stdio};

use volee_store::{Message, NewSession, Store};

/// A command that re-runs this binary as a child in `mode`.
pub fn child_command(mode: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child::entry",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env("VOLEE_STORE_CHILD", mode)
    .stdin(Stdio::null());
    cmd
}

/// A new session in `store` with `n` user messages, checkpointed.
pub fn session_with(store: &Store, project: &Path, n: usize) -> String {
    let mut w = store
        .create(NewSession {
            title: "Cache investigation".into(),
            project_root: project.to_path_buf(),
            model: "gemma4".into(),
        })
        .unwrap();
    for i in 0..n {
        w.push_message(Message::user(format!("message {i}")))
            .unwrap();
    }
    w.checkpoint().unwrap();
    w.id().to_string()
}
#[path = "runner/special_files.rs"]
mod special_files;
