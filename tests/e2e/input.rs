//! What `volee send` and `send_message` type is one prompt: a carriage return or an `ESC[201~`
//! inside the text never submits part of it early, so it can never answer a prompt its first
//! part raised (issue 16 item 4). `--raw` types the text as it is.
//!
//! The receiver is a stand-in that reads its terminal raw, the way a TUI does: bracketed-paste
//! mode on, a paste read whole, Enter outside a paste ends one input. It records every input and
//! asks `Proceed? [y/N]` after the first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use volee_test_support::TestEnv;

use crate::setup;

/// The stand-in's script; every input it reads goes to `record` as one JSON string per line.
pub fn receiver_script(record: &Path) -> String {
    format!(
        r#"import json, os, sys, tty
if len(sys.argv) > 1 and sys.argv[1] == "--version":
    print("2.1.332 (Claude Code)")
    sys.exit(0)
REC = {record:?}
tty.setraw(0)
os.write(1, b"\x1b[?2004hready\r\n")
START, END = b"\x1b[200~", b"\x1b[201~"
buf, pending, paste, n = b"", b"", False, 0
while True:
    chunk = os.read(0, 4096)
    if not chunk:
        break
    pending += chunk
    while pending:
        if pending.startswith(START):
            paste, pending = True, pending[6:]
            continue
        if pending.startswith(END):
            paste, pending = False, pending[6:]
            continue
        if pending[:1] == b"\x1b" and len(pending) < 6 and (START.startswith(pending) or END.startswith(pending)):
            break
        c, pending = pending[:1], pending[1:]
        if c in (b"\r", b"\n") and not paste:
            with open(REC, "a") as f:
                f.write(json.dumps(buf.decode("utf-8", "replace")) + "\n")
            buf, n = b"", n + 1
            os.write(1, b"Proceed? [y/N] " if n == 1 else b"\r\nanswered\r\n")
        else:
            buf += b"\n" if c == b"\r" else c
"#
    )
}

/// The inputs recorded so far, once they have been still for a second (so a late second input
/// would be seen).
pub fn settled_inputs(env: &TestEnv, record: &Path, at_least: usize) -> Vec<String> {
    let read = || -> Vec<String> {
        std::fs::read_to_string(record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<String>(l).unwrap())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while read().len() < at_least {
        assert!(
            Instant::now() < deadline,
            "fewer than {at_least} inputs: {:?}\n{}",
            read(),
            env.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1200));
    read()
}

/// Write the receiver into the environment and launch it as a generic command; its id and
/// record file.
pub fn launch_receiver(env: &TestEnv, name: &str) -> (String, PathBuf) {
    let record = env.root().join(format!("{name}-inputs.jsonl"));
    let script = env.root().join(format!("{name}.py"));
    std::fs::write(&script, receiver_script(&record)).unwrap();
    let id = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--name",
        name,
        "--",
        "python3",
        &script.display().to_string(),
    ]);
    volee_test_support::wait_until(
        "the receiver is ready",
        Duration::from_secs(15),
        || env.ok(["peek", &id]).contains("ready").then_some(()),
        || env.log_tail(),
    );
    (id, record)
}

#[test]
fn a_carriage_return_in_a_sent_message_submits_nothing_early() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !volee_test_support::require("python3", "the raw-terminal receiver") {
        return;
    }
    let (id, record) = launch_receiver(&env, "recv");
    // The generic profile types keys (no paste): the break becomes a space, one Enter submits.
    env.ok(["send", &id, "hello there\ry\x03\x1b[2J"]);
    let inputs = settled_inputs(&env, &record, 1);
    assert_eq!(inputs, ["hello there y"], "one input, the whole text");
    assert!(!env.ok(["peek", &id]).contains("answered"));

    // --raw types it as it is: the carriage return submits, `z` answers the prompt.
    env.ok(["send", "--raw", &id, "x\rz"]);
    let inputs = settled_inputs(&env, &record, 3);
    assert_eq!(inputs, ["hello there y", "x", "z"]);
}

#[test]
fn a_paste_end_marker_inside_a_message_does_not_end_the_paste() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    if !volee_test_support::require("python3", "the raw-terminal receiver") {
        return;
    }
    // Claude's profile pastes: the stand-in is a `claude` on PATH running the receiver.
    let record = env.root().join("paste-inputs.jsonl");
    let py = env.root().join("receiver.py");
    std::fs::write(&py, receiver_script(&record)).unwrap();
    crate::hooks::write_stand_in(
        &mut env,
        "claude",
        &format!("#!/bin/sh\nexec python3 '{}' \"$@\"\n", py.display()),
    );
    let id = env.ok(["launch", "--harness", "claude", "--host", "tmux:main"]);
    volee_test_support::wait_until(
        "the receiver is ready",
        Duration::from_secs(15),
        || env.ok(["peek", &id]).contains("ready").then_some(()),
        || env.log_tail(),
    );
    env.ok(["send", &id, "first line\x1b[201~\ry\nlast \u{9b}201~line"]);
    let inputs = settled_inputs(&env, &record, 1);
    assert_eq!(inputs, ["first line\ny\nlast line"], "one paste, one input");
    assert!(!env.ok(["peek", &id]).contains("answered"));
}
