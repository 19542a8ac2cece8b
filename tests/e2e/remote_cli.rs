//! The command line's side of machines (issue 20): `ls --on`, `launch --on` (with `--env`, the
//! machine's own HOME, its errors), `sessions search --on`, `machine ls` from the daemon's kept
//! connection, `attach MACHINE:ID`, `stop MACHINE:ID`, and what a cut connection does to `ls`,
//! `status`, `wait` and `attach`. Against a real OpenSSH server on loopback with a second Unix
//! user as the remote account (`volee_test_support::sshd`); needs root, else skipped by hand and
//! failing under CI.

use std::os::unix::fs::chown;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use volee_test_support::sshd::{require_sshd, RemotePath, SshServer};
use volee_test_support::{wait_until, TestEnv};

use crate::machines::{stderr, with_box};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The agents `ls --on box` lists (all of them, ended ones too).
pub(crate) fn box_agents(env: &TestEnv) -> Vec<Value> {
    let listed = json(&env.ok(["ls", "--all", "--on", "box", "--json"]));
    listed.as_array().unwrap().clone()
}

/// Agent `id` of box as `ls --on box` shows it, once `ready` says so.
pub(crate) fn wait_box_agent(
    env: &TestEnv,
    id: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    wait_until(
        what,
        Duration::from_secs(20),
        || {
            box_agents(env)
                .into_iter()
                .find(|a| a["id"] == id && ready(a))
        },
        || format!("{:#?}\n{}", box_agents(env), env.log_tail()),
    )
}

/// A past Claude Code session in the remote user's HOME (the history crate's fixture, which
/// mentions "marker"), owned by that user.
fn plant_remote_session(server: &SshServer) {
    const SESSION: &str = "d4a8abe5-742d-4002-a1ab-379c1b005cb4";
    let home = server.remote_home();
    let dir = home.join(".claude/projects/-tmp-work");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "../volee-history/tests/fixtures/home/.claude/projects/-tmp-work/{SESSION}.jsonl"
        )),
        dir.join(format!("{SESSION}.jsonl")),
    )
    .unwrap();
    let (uid, gid) = (server.user.uid, server.user.gid);
    for path in [
        home.join(".claude"),
        home.join(".claude/projects"),
        dir.clone(),
        dir.join(format!("{SESSION}.jsonl")),
    ] {
        chown(&path, Some(uid), Some(gid)).unwrap();
    }
}

#[test]
fn launch_ls_and_sessions_on_a_machine() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    let server = SshServer::start(RemotePath::WithVolee(&env.bin));
    with_box(&mut env, &server);
    plant_remote_session(&server);
    // In the local environment only: never sent to the machine.
    env.extra_env
        .push(("VOLEE_TEST_LOCAL".into(), "local".into()));

    // An unknown machine is a user error naming the saved ones.
    let unknown = env.run(["ls", "--on", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("machines: box"),
        "{}",
        stderr(&unknown)
    );
    // Nothing runs there yet (ls waits for the first connection to settle).
    assert!(box_agents(&env).is_empty());

    // launch --on: only --env goes along, the machine's HOME is the directory; MACHINE:ID back.
    let launched = env.run([
        "launch",
        "--on",
        "box",
        "--name",
        "far",
        "--env",
        "GREETING=hello from here",
        "--",
        "sh",
        "-c",
        "printf '%s|%s|%s\\n' \"$GREETING\" \"$PWD\" \"${VOLEE_TEST_LOCAL:-unset}\"; exec sleep 300",
    ]);
    assert!(launched.status.success(), "{}", stderr(&launched));
    let address = stdout(&launched).trim().to_string();
    let id = address
        .strip_prefix("box:")
        .unwrap_or_else(|| panic!("not box:ID: {address:?}"))
        .to_string();
    let agent = wait_box_agent(&env, &id, "the launched agent in ls --on box", |_| true);
    assert_eq!(agent["machine"], "box", "{agent}");
    assert_eq!(agent["name"], "far", "{agent}");
    let home = server.remote_home().display().to_string();
    assert_eq!(agent["cwd"], home.as_str(), "{agent}");
    let line = format!("hello from here|{home}|unset");
    wait_until(
        "the remote agent's line on its screen",
        Duration::from_secs(10),
        || env.ok(["peek", &address]).contains(&line).then_some(()),
        || env.ok(["peek", &address]),
    );

    // --json: the agent object, with its machine.
    let second = json(&env.ok([
        "launch", "--on", "box", "--json", "--name", "far2", "--", "sleep", "300",
    ]));
    assert_eq!(second["machine"], "box", "{second}");
    assert_eq!(second["name"], "far2", "{second}");

    // A failure there keeps its exit code and says where it happened.
    let bad = env.run(["launch", "--on", "box", "--harness", "nope"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("error: on box: unknown harness"),
        "{}",
        stderr(&bad)
    );
    assert!(
        stderr(&bad).contains("hints above are for machine box"),
        "{}",
        stderr(&bad)
    );

    // ls: a MACHINE column and the address; --on box lists only box's agents.
    let table = env.ok(["ls"]);
    assert!(table.lines().next().unwrap().contains("MACHINE"), "{table}");
    assert!(table.contains(&address), "{table}");
    assert_eq!(box_agents(&env).len(), 2);

    // machine ls: the daemon's kept connection, not a new probe.
    let machines = json(&env.ok(["machine", "ls", "--json"]));
    let m = &machines[0];
    assert_eq!(m["status"], "ok", "{m}");
    assert_eq!(m["connection"], "connected", "{m}");
    assert!(m["ssh_pid"].as_u64().is_some(), "{m}");
    assert!(m["since"].is_string(), "{m}");
    assert!(m["rtt_ms"].as_u64().is_some(), "{m}");
    assert_eq!(m["latency_ms"], m["rtt_ms"], "{m}");
    let live: u64 = m["agents"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(live, 2, "{m}");
    let plain = env.ok(["machine", "ls"]);
    assert!(plain.contains("AGENTS"), "{plain}");

    // sessions search --on: the machine's own index, each hit marked with the machine.
    let hits = json(&env.ok(["sessions", "search", "marker", "--on", "box", "--json"]));
    let hits = hits.as_array().unwrap();
    assert!(!hits.is_empty(), "no hit on box");
    assert!(hits.iter().all(|h| h["machine"] == "box"), "{hits:?}");
    let plain = env.ok(["sessions", "search", "marker", "--on", "box"]);
    assert!(plain.contains("claude"), "{plain}");
    // This machine has no such session.
    let here = json(&env.ok(["sessions", "search", "marker", "--json"]));
    assert_eq!(here, Value::Array(vec![]), "{here}");

    // attach without a terminal: the ssh command over the kept connection, for the user to run.
    let attach = env.run(["attach", &address]);
    assert_eq!(attach.status.code(), Some(2), "{}", stderr(&attach));
    let said = stderr(&attach);
    assert!(said.contains("needs a terminal"), "{said}");
    assert!(said.contains("ControlMaster=no"), "{said}");
    assert!(said.contains(&format!("'volee attach {id}'")), "{said}");

    // stop by address: followed in the mirror until it ended.
    let stopped = env.ok(["stop", &address]);
    assert_eq!(stopped.trim(), format!("{address} stopped"));
}

#[test]
fn an_unreachable_machines_agents_are_counted_apart_and_waited_through() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    let mut server = SshServer::start(RemotePath::WithVolee(&env.bin));
    with_box(&mut env, &server);
    assert!(box_agents(&env).is_empty());
    let address = env
        .ok(["launch", "--on", "box", "--", "sleep", "300"])
        .trim()
        .to_string();
    let id = address.trim_start_matches("box:").to_string();
    let seen = wait_box_agent(&env, &id, "the agent mirrored", |_| true);
    let state = seen["state"].as_str().unwrap().to_string();
    let status = json(&env.ok(["status", "--format", "json"]));
    assert_eq!(status["unreachable"], 0, "{status}");

    server.cut();
    wait_box_agent(&env, &id, "reachable false", |a| a["reachable"] == false);
    // Counted apart: not in its last state, and said on every status format.
    let status = json(&env.ok(["status", "--format", "json"]));
    assert_eq!(status["unreachable"], 1, "{status}");
    assert_eq!(status[state.as_str()], 0, "{status}");
    assert_eq!(status["total"], 1, "{status}");
    assert!(
        env.ok(["status"]).contains("1 unreachable"),
        "{}",
        env.ok(["status"])
    );
    assert!(env
        .ok(["status", "--format", "tmux"])
        .contains("⚠ 1 unreachable"));
    // ls keeps its last state, marked.
    let table = env.ok(["ls"]);
    assert!(table.contains(&format!("{state}?")), "{table}");
    assert!(table.contains("cannot be reached"), "{table}");
    // wait keeps waiting, even for the state it had: a timeout (1), never ended (5).
    let waited = env.run(["wait", &address, "--until", &state, "--timeout", "2"]);
    assert_eq!(waited.status.code(), Some(1), "{}", stderr(&waited));
    assert!(
        stderr(&waited).contains("its machine cannot be reached"),
        "{}",
        stderr(&waited)
    );
    // attach: no second connection is opened.
    let attach = env.run(["attach", &address]);
    assert_eq!(attach.status.code(), Some(3), "{}", stderr(&attach));
    assert!(
        stderr(&attach).contains("machine box is not connected"),
        "{}",
        stderr(&attach)
    );
}
