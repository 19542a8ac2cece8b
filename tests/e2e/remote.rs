//! Remote machines through the daemon's kept connection (issue 20): a real OpenSSH server on
//! loopback with a second Unix user as the remote account (`volee_test_support::sshd`), whose
//! own volee daemon and tmux server run the remote agents. Needs root; without it the tests are
//! skipped by hand and fail under CI.

use std::time::{Duration, Instant};

use serde_json::Value;
use volee_test_support::sshd::{require_sshd, RemotePath, SshServer};
use volee_test_support::{wait_until, TestEnv};

use crate::machines::{stderr, with_box};
use crate::remote_cli::{box_agents, wait_box_agent};

/// Run `volee ARGS` on the remote as its user would (a separate ssh, the test's own).
fn remote_volee(server: &SshServer, line: &str) -> String {
    let out = server.ssh().arg(format!("volee {line}")).output().unwrap();
    assert!(
        out.status.success(),
        "remote volee {line}: {}\nsshd log:\n{}",
        stderr(&out),
        server.log()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The remote agent named `name`, once `ready` says so.
fn wait_remote(env: &TestEnv, name: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let id = wait_until(
        what,
        Duration::from_secs(20),
        || {
            box_agents(env)
                .into_iter()
                .find(|a| a["name"] == name)
                .map(|a| a["id"].as_str().unwrap_or_default().to_string())
        },
        || format!("{:#?}\n{}", box_agents(env), env.log_tail()),
    );
    wait_box_agent(env, &id, what, ready)
}

#[test]
fn a_remote_agent_is_mirrored_addressed_and_survives_a_cut_connection() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    let mut server = SshServer::start(RemotePath::WithVolee(&env.bin));
    with_box(&mut env, &server);
    // The user's notification command: what it is told about, one line each.
    let notified = env.root().join("notified.txt");
    let config = env.volee_home().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[notify]\ndesktop = false\non_needs_you = \"echo $VOLEE_EVENT $VOLEE_AGENT_ID >> '{}'\"\n",
            notified.display()
        ),
    )
    .unwrap();

    // An agent started on the machine by its own user (its tmux server set up by `volee up`),
    // ringing the bell after a moment.
    remote_volee(&server, "up --no-attach");
    let id = remote_volee(
        &server,
        "launch --name ringer -- sh -c 'sleep 3; printf \"\\a\"; exec sleep 300'",
    );
    assert!(!id.is_empty());
    let seen = wait_remote(&env, "ringer", "the remote agent in local ls", |_| true);
    let id = seen["id"].as_str().unwrap().to_string();
    assert_eq!(seen["reachable"], true, "{seen}");
    let address = format!("box:{id}");

    // Its bell: needs_you, here, addressed as box:ID.
    let rang = wait_remote(&env, "ringer", "needs_you mirrored", |a| {
        a["state"] == "needs_you"
    });
    assert_eq!(rang["machine"], "box");
    // The notification names the machine: the user's command gets the address.
    wait_until(
        "the needs_you notification",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&notified)
                .ok()
                .filter(|t| t.contains(&format!("needs_you {address}")))
        },
        || env.log_tail(),
    );
    let shown: Value = serde_json::from_str(&env.ok(["show", &address, "--json"])).unwrap();
    assert_eq!(shown["id"], id.as_str());
    assert_eq!(shown["machine"], "box");
    // By name and by prefix too; a bare id stays local.
    let by_name: Value = serde_json::from_str(&env.ok(["show", "box:ringer", "--json"])).unwrap();
    assert_eq!(by_name["id"], id.as_str());
    let bare = env.run(["show", &id]);
    assert_eq!(bare.status.code(), Some(2), "{}", stderr(&bare));
    let unknown = env.run(["show", "nosuch:abc"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("no machine named nosuch"),
        "{}",
        stderr(&unknown)
    );

    // Forwarded: explain, send, peek, stop.
    let explained = env.ok(["explain", &address]);
    assert!(explained.contains("bell"), "{explained}");
    env.ok(["send", &address, "hello there"]);
    wait_until(
        "the sent text on the remote screen",
        Duration::from_secs(10),
        || {
            env.ok(["peek", &address])
                .contains("hello there")
                .then_some(())
        },
        || env.ok(["peek", &address]),
    );

    // The connection cut (sshd and every process of the connection killed): the agent keeps its
    // state, flagged unreachable, within 10 s; never stopped.
    let last_known = box_agents(&env)
        .into_iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap()["state"]
        .clone();
    let cut_at = Instant::now();
    server.cut();
    let cut = wait_remote(&env, "ringer", "reachable false", |a| {
        a["reachable"] == false
    });
    assert!(
        cut_at.elapsed() < Duration::from_secs(10),
        "{:?}",
        cut_at.elapsed()
    );
    assert_eq!(cut["state"], last_known, "{cut}");
    assert!(cut["unreachable_since"].is_string(), "{cut}");
    let refused = env.run(["send", &address, "x"]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("unreachable"),
        "{}",
        stderr(&refused)
    );

    // sshd back: reconnected (backoff ≤ 30 s), the same agent once, reachable again.
    server.restart();
    wait_remote(&env, "ringer", "reachable again", |a| {
        a["reachable"] == true
    });
    let agents = box_agents(&env);
    assert_eq!(
        agents.iter().filter(|a| a["id"] == id.as_str()).count(),
        1,
        "{agents:#?}"
    );

    // The local daemon killed: the next command rebuilds the mirror.
    env.kill_daemon();
    let again = box_agents(&env);
    assert!(
        again
            .iter()
            .any(|a| a["id"] == id.as_str() && a["reachable"] == true),
        "{again:#?}"
    );

    // Stopped through the connection.
    env.ok(["stop", &address]);
    wait_remote(&env, "ringer", "stopped mirrored", |a| {
        a["state"] == "stopped"
    });
}

/// One agent object as a hostile machine might send it.
fn hostile_agent(id: &str, name: &str) -> String {
    serde_json::json!({
        "id": id, "name": name, "harness": "generic", "harness_version": null,
        "profile_fit": "generic", "origin": "launched", "state": "needs_you",
        "state_source": "screen", "state_since": "2026-12-04T10:00:00Z",
        "evidence": "bell\u{1b}]0;pwned\u{7}", "exit_status": null, "pid": 1, "cwd": "/",
        "session_id": null, "host": {"kind": "none"}, "title": "#[fg=red]#(touch /tmp/x)"
    })
    .to_string()
}

#[test]
fn a_hostile_machine_cannot_crash_or_inject_into_the_local_daemon() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    // A fake `volee` there: a hello at our protocol, a line that is not JSON, agents with escape
    // sequences and tmux formats in their text and ids that are not ids, then a line longer than
    // any frame may be, then silence.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("volee");
    let agents = format!(
        "[{},{},{}]",
        hostile_agent("ok12", "evil\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{7}name"),
        hostile_agent("bad:id", "colon"),
        hostile_agent("$(touch /tmp/y)", "shell"),
    );
    let frame = format!(r#"{{"response":{{"type":"agents","agents":{agents}}}}}"#);
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'volee 9.9.9'; exit 0; fi\n\
             printf '%s\\n' '{{\"protocol\":{},\"version\":\"9.9.9\"}}'\n\
             printf 'not json at all\\n'\n\
             cat <<'FRAME'\n{frame}\nFRAME\n\
             head -c 9000000 /dev/zero | tr '\\000' x\n\
             sleep 60\n",
            volee_protocol::PROTOCOL_VERSION
        ),
    )
    .unwrap();
    let mut server = SshServer::start(RemotePath::WithVolee(&fake));
    // `add` sees volee 9.9.9 at our protocol and keeps it.
    with_box(&mut env, &server);

    let agent = wait_remote(
        &env,
        "evil[2J]52;c;cHduZWQ=name",
        "the cleaned agent",
        |_| true,
    );
    assert_eq!(agent["id"], "ok12");
    assert_eq!(agent["evidence"], "bell]0;pwned");
    let agents = box_agents(&env);
    assert_eq!(
        agents.len(),
        1,
        "ids that are not ids were kept: {agents:#?}"
    );
    // The over-long line ends that connection (it is not trusted further): unreachable, the
    // daemon alive and answering, the agent kept with its last state.
    let pid = env.daemon_pid().unwrap();
    let cut = wait_remote(
        &env,
        "evil[2J]52;c;cHduZWQ=name",
        "unreachable after the long line",
        |a| a["reachable"] == false,
    );
    assert_eq!(cut["state"], "needs_you");
    assert_eq!(env.daemon_pid(), Some(pid));
    let log = env.log_tail();
    assert!(log.contains("longer than"), "{log}");
    assert!(log.contains("unreadable line"), "{log}");
    // Its text never reaches tmux unescaped: the plain ls has no escape byte.
    let table = env.ok(["ls"]);
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{7}'),
        "{table:?}"
    );
    server.cut();
}
