//! End-to-end tests: the real `volee` binary, a real tmux on a private socket, `VOLEE_HOME` in a
//! temp dir. They depend on timing, so they run one at a time (the `serial` lock).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_sync;
mod bad_input;
mod cli_docs;
mod daemon_life;
mod discovery;
mod hooks;
mod input;
mod machines;
mod mcp;
mod notify;
mod own_agent;
mod planted;
mod profiles;
mod push;
mod remote;
mod remote_cli;
mod restore;
mod resurrect;
mod sessions;
mod states;
mod tmux_front;
mod tpm;
mod worktree;
mod zellij;

use std::sync::{Mutex, MutexGuard};

use volee_test_support::{require, TestEnv};

static SERIAL: Mutex<()> = Mutex::new(());

/// Take the serial lock and make an environment with a running private tmux server, or None when
/// tmux is missing outside CI.
pub fn setup() -> Option<(MutexGuard<'static, ()>, TestEnv)> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require("tmux", "volee's end-to-end tests") {
        return None;
    }
    let env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    Some((guard, env))
}

/// `setup` without starting the tmux server: for a test that starts it the way a user does.
pub fn setup_without_server() -> Option<(MutexGuard<'static, ()>, TestEnv)> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require("tmux", "volee's end-to-end tests") {
        return None;
    }
    Some((guard, TestEnv::new(env!("CARGO_BIN_EXE_volee"))))
}

/// `setup` with the environment's directory under `parent`.
pub fn setup_in(parent: &std::path::Path) -> Option<(MutexGuard<'static, ()>, TestEnv)> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require("tmux", "volee's end-to-end tests") {
        return None;
    }
    let env = TestEnv::new_in(env!("CARGO_BIN_EXE_volee"), parent);
    env.start_tmux();
    Some((guard, env))
}

/// Run `cmd` and collect its output, killing it (and failing the test) if it has not ended
/// within `limit`: a volee command must never hang.
pub fn output_within(
    mut cmd: std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{cmd:?} did not end within {limit:?}");
        }
    }
}

/// `volee launch --host tmux:main --name NAME -- sh -c SCRIPT`, returning the id.
/// `tmux kill-server` on the test's server, returning once its process is gone (a new server at
/// the same socket started before that fails: "server exited unexpectedly").
pub fn kill_tmux_server(env: &TestEnv) {
    let server: i32 = env
        .tmux(&["display-message", "-p", "#{pid}"])
        .trim()
        .parse()
        .unwrap();
    env.tmux(&["kill-server"]);
    volee_test_support::wait_until(
        "the old tmux server gone",
        std::time::Duration::from_secs(10),
        || {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(server), None)
                .is_err()
                .then_some(())
        },
        || format!("tmux server {server} lives on"),
    );
}

pub fn launch_sh(env: &TestEnv, name: &str, script: &str) -> String {
    env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--name",
        name,
        "--",
        "sh",
        "-c",
        script,
    ])
}
