//! The daemon's life: restarts lose nothing, a second daemon refuses to start, a daemon of another
//! protocol version is replaced, a stale socket is taken over, the registry rebuilds from tmux.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{launch_sh, setup};

#[test]
fn killed_daemon_restarts_without_losing_agents() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let sleeper = launch_sh(&env, "sleeper", "echo hi; exec sleep 60");
    let quitter = launch_sh(&env, "quitter", "sleep 4; exit 3");
    env.wait_state(&sleeper, "idle", 8);

    let first = env.kill_daemon();
    // The socket file is stale now; the next command starts a new daemon that takes it over.
    let ls: serde_json::Value = serde_json::from_str(&env.ok(["ls", "--json"])).unwrap();
    let second = env.daemon_pid().unwrap();
    assert_ne!(first, second);
    let ids: Vec<&str> = ls
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&sleeper.as_str()) && ids.contains(&quitter.as_str()),
        "{ls}"
    );
    // The new daemon watches the panes again: the quitter's exit is seen.
    assert_eq!(env.wait_state(&quitter, "failed", 10), "failed");
    assert_eq!(env.agent(&quitter)["exit_status"], 3);

    // Lose agents.json entirely: the registry is rebuilt from the panes' @volee-agent options.
    assert_eq!(env.kill_daemon(), second);
    std::fs::remove_file(env.volee_home().join("state/agents.json")).unwrap();
    let rebuilt = env.agent(&sleeper);
    assert_eq!(rebuilt["name"], "sleeper");
    assert_eq!(rebuilt["state"], "idle");
    let bell_pane = rebuilt["host"]["pane"].as_str().unwrap().to_string();
    env.tmux(&["send-keys", "-t", &bell_pane, "C-c"]);
    assert_eq!(env.wait_state(&sleeper, "failed", 8), "failed");
}

#[test]
fn corrupt_registry_is_kept_and_rebuilt() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(&env, "keeper", "exec sleep 60");
    env.wait_state(&id, "idle", 8);
    env.kill_daemon();
    let registry = env.volee_home().join("state/agents.json");
    std::fs::write(&registry, b"{\"format\": 1, \"agents\": [ garbage").unwrap();
    assert_eq!(env.agent(&id)["name"], "keeper");
    let kept: Vec<_> = std::fs::read_dir(env.volee_home().join("state"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("agents.json.corrupt-")
        })
        .collect();
    assert_eq!(kept.len(), 1, "the corrupt file is kept aside");
}

#[test]
fn second_daemon_refuses_to_start() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    env.ok(["ls"]);
    let out = env.run(["daemon", "--foreground"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already running"), "{stderr}");
    // The first one still answers.
    env.ok(["ls"]);
}

#[test]
fn daemon_of_another_protocol_version_is_replaced() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(&env, "survivor", "exec sleep 60");
    env.wait_state(&id, "idle", 8);
    env.kill_daemon();

    // An "old daemon": answers Hello with another version and ignores everything else.
    let run = env.volee_home().join("run");
    let socket = run.join("daemon.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).unwrap();
    let mut old = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(run.join("daemon.pid"), format!("{}\n", old.id())).unwrap();
    let old_pid = old.id();
    let server = std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                let hello = format!("{{\"type\":\"hello\",\"version\":999,\"pid\":{old_pid}}}\n");
                let _ = writer.write_all(hello.as_bytes());
                line.clear();
            }
        }
    });
    let view = env.agent(&id);
    assert_eq!(view["name"], "survivor");
    // The old daemon was told to go and then signalled by its recorded pid.
    let status = old.wait().unwrap();
    assert!(!status.success(), "the old daemon process was ended");
    drop(server);
}

#[test]
fn dead_tmux_server_stops_agents() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let a = launch_sh(&env, "a", "exec sleep 60");
    let b = launch_sh(&env, "b", "while :; do echo x; sleep 0.2; done");
    env.wait_state(&a, "idle", 8);
    env.tmux(&["kill-server"]);
    assert_eq!(env.wait_state(&a, "stopped", 8), "stopped");
    assert_eq!(env.wait_state(&b, "stopped", 8), "stopped");
    assert_eq!(env.agent(&a)["evidence"], "tmux server gone");
    // The daemon is still fine.
    env.ok(["ls", "--all"]);
}

/// A prompt that appeared while no daemon ran produces no output for the next one: the new
/// control connection reads what the panes already show. (An agent that printed something
/// before is read again anyway, for its last output; this one printed nothing before.)
#[test]
fn a_prompt_printed_while_the_daemon_was_down_needs_you() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let flag = env.root().join("ask-now");
    let id = launch_sh(
        &env,
        "asker",
        &format!(
            "while [ ! -f '{}' ]; do sleep 0.05; done; printf 'Proceed? [y/N] '; read x; sleep 60",
            flag.display()
        ),
    );
    env.wait_state(&id, "idle", 8);
    let pane = env.agent(&id)["host"]["pane"].as_str().unwrap().to_string();
    env.kill_daemon();
    std::fs::write(&flag, "").unwrap();
    volee_test_support::wait_until(
        "the prompt on the pane",
        Duration::from_secs(5),
        || {
            env.tmux(&["capture-pane", "-p", "-t", &pane])
                .contains("Proceed? [y/N]")
                .then_some(())
        },
        || env.tmux(&["capture-pane", "-p", "-t", &pane]),
    );
    let asked = volee_test_support::wait_until(
        "the restarted daemon reads the prompt on screen",
        Duration::from_secs(10),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || format!("{}\n{}", env.ok(["explain", &id]), env.log_tail()),
    );
    assert_eq!(asked["state_source"], "screen", "{asked}");
}

/// A daemon killed in the middle of a launch (after the agent is recorded, before the pane gets
/// its environment) leaves a pane waiting for a file nobody will write: the next daemon says at
/// once that the agent failed, and the pane gives up with a message, instead of `idle` until the
/// pane's 15 s handover timeout.
#[test]
fn a_launch_the_daemon_never_finished_fails_at_once() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let out = env
        .volee([
            "launch",
            "--host",
            "tmux:main",
            "--name",
            "cut",
            "--",
            "sleep",
            "60",
        ])
        .env("VOLEE_FAULT", "die-before-handover")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the launch cannot have succeeded");
    let pane_exec_waits = || {
        env.tmux(&[
            "list-panes",
            "-a",
            "-F",
            "#{pane_id}|#{@volee-agent}|#{pane_dead}",
        ])
        .lines()
        .find(|l| l.split('|').nth(1).is_some_and(|a| !a.is_empty()))
        .map(str::to_string)
    };
    let row = pane_exec_waits().expect("the launched pane is marked");
    let mut fields = row.split('|');
    let (pane, id) = (fields.next().unwrap(), fields.next().unwrap().to_string());
    assert_eq!(fields.next(), Some("0"), "the pane still waits: {row}");
    let started = std::time::Instant::now();
    let failed = volee_test_support::wait_until(
        "the next daemon fails the unfinished launch",
        Duration::from_secs(5),
        || {
            let a = env.agent(&id);
            (a["state"] == "failed").then_some(a)
        },
        || format!("{}\n{}", env.ok(["explain", &id]), env.log_tail()),
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(failed["evidence"], "launch interrupted", "{failed}");
    // The pane is told too: pane-exec gives up with its hint well before its own 15 s timeout.
    // (tmux 3.3a shows a dead pane's last line of stderr only.)
    volee_test_support::wait_until(
        "the pane gives up with its hint",
        Duration::from_secs(5),
        || {
            let text = env.tmux(&["capture-pane", "-p", "-t", pane]);
            text.contains("close this pane and launch again")
                .then_some(text)
        },
        || env.tmux(&["capture-pane", "-p", "-t", pane]),
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(env.agent(&id)["state"], "failed");
}

/// Sends SIGCONT to a stopped daemon on drop, so a failing test does not leave it stopped.
struct Continue(i32);

impl Drop for Continue {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGCONT);
    }
}

#[test]
fn a_stopped_daemon_is_a_clear_error_not_a_hang() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(&env, "sleeper", "exec sleep 60");
    env.wait_state(&id, "idle", 8);
    let pid = env.daemon_pid().unwrap();

    // A live daemon's keep-alives carry a quiet watch past the client's 5 s silence limit.
    let started = Instant::now();
    let out = crate::output_within(
        env.volee(["wait", &id, "--until", "done", "--timeout", "7"]),
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a quiet wait timed out: {stderr}"
    );
    assert!(stderr.contains("timed out waiting"), "{stderr}");
    assert!(started.elapsed() >= Duration::from_secs(7));

    // A `volee wait` already following the agent notices the missing keep-alives.
    let mut wait = env.volee(["wait", &id, "--until", "done"]);
    wait.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let waiting = wait.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    let _cont = Continue(pid);
    let stopped_at = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(waiting.wait_with_output());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("volee wait did not give up on a stopped daemon")
        .unwrap();
    let took = stopped_at.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(took < Duration::from_secs(9), "wait gave up after {took:?}");
    assert!(
        stderr.contains(&format!("the volee daemon (pid {pid}) stopped answering")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "hint: if it was stopped (Ctrl-Z, SIGSTOP), resume it: kill -CONT {pid}"
        )),
        "{stderr}"
    );

    // A request/response command gives up within the connect and answer limits (2 s + 5 s).
    let started = Instant::now();
    let out = crate::output_within(env.volee(["ls"]), Duration::from_secs(20));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(took < Duration::from_secs(8), "ls gave up after {took:?}");
    assert!(stderr.contains("stopped answering"), "{stderr}");
    assert!(stderr.contains(&format!("kill -CONT {pid}")), "{stderr}");
    // It was not replaced behind the user's back: the same daemon, still there.
    assert_eq!(env.daemon_pid(), Some(pid));

    // Once continued, it answers again.
    kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    assert_eq!(env.agent(&id)["state"], "idle");
}

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn a_killed_save_leaves_no_temp_file_and_the_lock_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let Some((_serial, env)) = setup() else {
        return;
    };
    env.ok(["ls"]);
    env.kill_daemon();
    let state = env.volee_home().join("state");
    let stale = state.join(format!(".agents.json.tmp.{}", dead_pid()));
    let mut writer = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let in_use = state.join(format!(".agents.json.tmp.{}", writer.id()));
    std::fs::write(&stale, "{\"format\": 1, \"agen").unwrap();
    std::fs::write(&in_use, "{}").unwrap();
    // An older daemon's lock file (0644).
    let lock = env.volee_home().join("run/daemon.lock");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();

    env.ok(["ls"]);
    let in_use_stays = in_use.exists();
    let _ = writer.kill();
    let _ = writer.wait();
    assert!(
        !stale.exists(),
        "the dead writer's temp file is still there"
    );
    assert!(in_use_stays, "a live writer's temp file was removed");
    let mode = std::fs::metadata(&lock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "daemon.lock is {mode:o}");
}
