//! Machines over ssh (issue 20, first slice): `volee machine add|ls|rm` against a real OpenSSH
//! server on loopback (`volee_test_support::sshd`: its own sshd_config and host key, a second
//! Unix user as the remote account, private known_hosts and ssh config named by
//! `VOLEE_SSH_CONFIG`). They need root; without it they are skipped by hand and fail under CI.

use std::os::unix::fs::PermissionsExt;

use volee_test_support::sshd::{require_sshd, RemotePath, SshServer};
use volee_test_support::TestEnv;

pub(crate) fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The environment's volee pointed at the server's private ssh config.
pub(crate) fn with_ssh(env: &mut TestEnv, server: &SshServer) {
    env.extra_env.push((
        "VOLEE_SSH_CONFIG".into(),
        server.ssh_config.to_string_lossy().into_owned(),
    ));
}

/// A local volee with machine `box` added (host key trusted first, the way a user would).
pub(crate) fn with_box(env: &mut TestEnv, server: &SshServer) {
    with_ssh(env, server);
    server.trust_host_key();
    let port = server.port.to_string();
    env.ok(["machine", "add", "box", &server.dest(), "--port", &port]);
}

fn machines_file(env: &TestEnv) -> std::path::PathBuf {
    env.volee_home().join("config/machines.toml")
}

fn ls_json(env: &TestEnv) -> Vec<serde_json::Value> {
    serde_json::from_str(&env.ok(["machine", "ls", "--json"])).unwrap()
}

#[test]
fn add_refuses_an_unknown_host_key_then_checks_the_remote_volee() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    let server = SshServer::start(RemotePath::WithVolee(&env.bin));
    with_ssh(&mut env, &server);
    let port = server.port.to_string();
    let dest = server.dest();

    // The host key is unknown: refused, with the exact ssh command that shows and accepts it.
    let out = env.run(["machine", "add", "box", &dest, "--port", &port]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let accept = format!(
        "ssh -F {} -p {port} -o StrictHostKeyChecking=ask {dest} true",
        server.ssh_config.display()
    );
    assert!(stderr(&out).contains(&accept), "{}", stderr(&out));
    assert!(stderr(&out).contains("never accepts"), "{}", stderr(&out));
    assert!(!machines_file(&env).exists(), "a refused machine was saved");
    assert_eq!(
        std::fs::read_to_string(&server.known_hosts).unwrap(),
        "",
        "the host key was accepted behind the user's back"
    );

    // Accepted the way a user would (ssh-keyscan into the private known_hosts): added.
    server.trust_host_key();
    let added = env.ok(["machine", "add", "box", &dest, "--port", &port]);
    assert!(
        added.starts_with(&format!(
            "added box ({dest}): volee {}",
            env!("CARGO_PKG_VERSION")
        )),
        "{added}"
    );
    let file = machines_file(&env);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("name = \"box\"") && text.contains(&format!("port = {port}")),
        "{text}"
    );

    let machines = ls_json(&env);
    assert_eq!(machines.len(), 1, "{machines:?}");
    let m = &machines[0];
    assert_eq!(m["name"], "box");
    assert_eq!(m["dest"], dest.as_str());
    assert_eq!(m["port"], server.port);
    assert_eq!(m["reachable"], true, "{m}");
    assert_eq!(m["status"], "ok", "{m}");
    assert_eq!(m["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(m["protocol"], volee_protocol::PROTOCOL_VERSION);
    assert!(m["latency_ms"].as_u64().is_some(), "{m}");
    let table = env.ok(["machine", "ls"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("box") && table.contains(" yes "), "{table}");

    // The same name again is refused; rm forgets it; rm of an unknown name is refused.
    let again = env.run(["machine", "add", "box", &dest, "--port", &port]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("volee machine rm box"),
        "{}",
        stderr(&again)
    );
    assert!(env.ok(["machine", "rm", "box"]).starts_with("removed box"));
    assert!(ls_json(&env).is_empty());
    assert_eq!(mode(&file), 0o600);
    let gone = env.run(["machine", "rm", "box"]);
    assert_eq!(gone.status.code(), Some(2), "{}", stderr(&gone));
}

#[test]
fn a_remote_without_volee_gets_the_install_hint() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    let server = SshServer::start(RemotePath::WithoutVolee);
    with_ssh(&mut env, &server);
    server.trust_host_key();
    let port = server.port.to_string();
    let out = env.run(["machine", "add", "bare", &server.dest(), "--port", &port]);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{err}\nsshd log:\n{}",
        server.log()
    );
    assert!(err.contains("no volee on its PATH"), "{err}");
    assert!(err.contains("hint: install volee on bare"), "{err}");
    // ssh works, so the machine is kept: volee can be put there and the name used at once.
    let machines = ls_json(&env);
    assert_eq!(machines.len(), 1, "{machines:?}");
    assert_eq!(machines[0]["reachable"], true);
    assert_eq!(machines[0]["status"], "no_volee");
    assert_eq!(machines[0]["version"], serde_json::Value::Null);
}

#[test]
fn bad_machine_names_and_destinations_are_refused() {
    let Some((_guard, env)) = crate::setup_without_server() else {
        return;
    };
    for name in [
        "Box",
        "1box",
        "tmux",
        "zellij",
        "claude",
        "a:b",
        "b_x",
        &"a".repeat(33),
    ] {
        let out = env.run(["machine", "add", name, "me@127.0.0.1"]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("machine name"),
            "{name}: {}",
            stderr(&out)
        );
    }
    // After `--` clap takes it as SSH-DEST; volee still refuses what ssh would read as an option.
    let out = env.run(["machine", "add", "--", "box", "-oProxyCommand=touch /tmp/x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("starts with '-'"), "{}", stderr(&out));
    assert!(!machines_file(&env).exists());
}

#[test]
fn a_corrupt_machines_file_is_moved_aside() {
    let Some((_guard, env)) = crate::setup_without_server() else {
        return;
    };
    let file = machines_file(&env);
    std::fs::write(&file, "[[machine]\nname = ").unwrap();
    let out = env.run(["machine", "ls", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    assert!(stderr(&out).contains("is kept as"), "{}", stderr(&out));
    let kept: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("machines.toml.corrupt-")
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        std::fs::read_to_string(kept[0].path()).unwrap(),
        "[[machine]\nname = "
    );
}

#[test]
fn new_agent_names_may_not_contain_a_colon() {
    let Some((_guard, env)) = crate::setup() else {
        return;
    };
    let out = env.run(["launch", "--name", "a:b", "--", "sleep", "30"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("MACHINE:ID"), "{}", stderr(&out));
}

#[test]
fn install_copies_this_volee_to_a_machine_without_one_after_asking() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the remote machine tests") {
        return;
    }
    let server = SshServer::start(RemotePath::LocalBinFirst);
    with_ssh(&mut env, &server);
    server.trust_host_key();
    let port = server.port.to_string();
    // No volee there: kept, with the install command in the hint.
    let out = env.run(["machine", "add", "bare", &server.dest(), "--port", &port]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("volee machine install bare"),
        "{}",
        stderr(&out)
    );
    // Without a terminal to ask on and without --yes: nothing is copied.
    let asked = env.run(["machine", "install", "bare"]);
    assert_eq!(asked.status.code(), Some(2), "{}", stderr(&asked));
    assert!(stderr(&asked).contains("--yes"), "{}", stderr(&asked));
    let copy = server.remote_home().join(".local/bin/volee");
    assert!(!copy.exists());
    // With --yes: copied, checked, and the machine answers at this protocol.
    let done = env.ok(["machine", "install", "bare", "--yes"]);
    assert!(
        done.contains(&format!(
            "installed volee {} on bare",
            env!("CARGO_PKG_VERSION")
        )),
        "{done}"
    );
    assert!(!done.contains("note:"), "{done}");
    let meta = std::fs::metadata(&copy).unwrap();
    assert_eq!(meta.len(), std::fs::metadata(&env.bin).unwrap().len());
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.uid(), server.user.uid, "the copy is the remote user's");
    volee_test_support::wait_until(
        "the machine connected after install",
        std::time::Duration::from_secs(15),
        || {
            let m = ls_json(&env);
            (m.len() == 1 && m[0]["status"] == "ok").then_some(())
        },
        || format!("{:?}\n{}", ls_json(&env), server.log()),
    );
}
