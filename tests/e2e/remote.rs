//! Remote machines through the daemon's kept connection (issue 20): a real OpenSSH server on
//! loopback with a second Unix user as the remote account (`volee_test_support::sshd`), whose
//! own volee daemon and tmux server run the remote agents. Needs root; without it the tests are
//! skipped by hand and fail under CI.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use volee_test_support::sshd::{require_sshd, RemotePath, SshServer};
use volee_test_support::{wait_until, TestEnv};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A local volee with machine `box` added (host key trusted first, the way a user would).
fn with_box(env: &mut TestEnv, server: &SshServer) {
    env.extra_env.push((
        "VOLEE_SSH_CONFIG".into(),
        server.ssh_config.to_string_lossy().into_owned(),
    ));
    server.trust_host_key();
    let port = server.port.to_string();
    env.ok(["machine", "add", "box", &server.dest(), "--port", &port]);
}

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

fn remote_agents(env: &TestEnv) -> Vec<Value> {
    let out = env.run(["ls", "--all", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    all.into_iter().filter(|a| a["machine"] == "box").collect()
}

/// The remote agent named `name` as the local `ls` shows it, once `ready` says so.
fn wait_remote(env: &TestEnv, name: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    wait_until(
        what,
        Duration::from_secs(20),
        || {
            remote_agents(env)
                .into_iter()
                .find(|a| a["name"] == name && ready(a))
        },
        || format!("{:#?}\n{}", remote_agents(env), env.log_tail()),
    )
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
    assert!(stderr(&unknown).contains("no machine named nosuch"), "{}", stderr(&unknown));

    // Forwarded: explain, send, peek, stop.
    let explained = env.ok(["explain", &address]);
    assert!(explained.contains("bell"), "{explained}");
    env.ok(["send", &address, "hello there"]);
    wait_until(
        "the sent text on the remote screen",
        Duration::from_secs(10),
        || env.ok(["peek", &address]).contains("hello there").then_some(()),
        || env.ok(["peek", &address]),
    );

    // The connection cut (sshd and every process of the connection killed): the agent keeps its
    // state, flagged unreachable, within 10 s; never stopped.
    let last_known = remote_agents(&env)
        .into_iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap()["state"]
        .clone();
    let cut_at = Instant::now();
    server.cut();
    let cut = wait_remote(&env, "ringer", "reachable false", |a| a["reachable"] == false);
    assert!(cut_at.elapsed() < Duration::from_secs(10), "{:?}", cut_at.elapsed());
    assert_eq!(cut["state"], last_known, "{cut}");
    assert!(cut["unreachable_since"].is_string(), "{cut}");
    let refused = env.run(["send", &address, "x"]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("unreachable"), "{}", stderr(&refused));

    // sshd back: reconnected (backoff ≤ 30 s), the same agent once, reachable again.
    server.restart();
    wait_remote(&env, "ringer", "reachable again", |a| a["reachable"] == true);
    let agents = remote_agents(&env);
    assert_eq!(
        agents.iter().filter(|a| a["id"] == id.as_str()).count(),
        1,
        "{agents:#?}"
    );

    // The local daemon killed: the next command rebuilds the mirror.
    env.kill_daemon();
    let again = remote_agents(&env);
    assert!(
        again.iter().any(|a| a["id"] == id.as_str() && a["reachable"] == true),
        "{again:#?}"
    );

    // Stopped through the connection.
    env.ok(["stop", &address]);
    wait_remote(&env, "ringer", "stopped mirrored", |a| a["state"] == "stopped");
}
