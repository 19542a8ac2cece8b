//! Bad input gets a clear error, the right exit code, and loses nothing.

use crate::{launch_sh, setup};

#[test]
fn unknown_and_ambiguous_ids() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let out = env.run(["show", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: no agent matches \"nope\""),
        "{stderr}"
    );
    assert!(stderr.contains("hint:"), "{stderr}");

    let mut ids = Vec::new();
    for n in 0..12 {
        ids.push(launch_sh(&env, &format!("agent{n}"), "exec sleep 60"));
    }
    // Find two ids sharing a first character: that prefix is ambiguous.
    let mut prefix = None;
    for (i, a) in ids.iter().enumerate() {
        if let Some(b) = ids[i + 1..].iter().find(|b| b[..1] == a[..1]) {
            prefix = Some((a[..1].to_string(), a.clone(), b.clone()));
            break;
        }
    }
    if let Some((p, a, b)) = prefix {
        let out = env.run(["show", &p]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("ambiguous") && stderr.contains(&a) && stderr.contains(&b),
            "{stderr}"
        );
    }
    // Names resolve, exact ids win.
    assert_eq!(env.agent("agent3")["id"], ids[3].as_str());
    // A name in use by a live agent is refused.
    let out = env.run(["launch", "--name", "agent3", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already used"));

    let out = env.run(["wait", &ids[0], "--until", "sleeping"]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(["wait", &ids[0], "--until", "done", "--timeout", "0.3"]);
    assert_eq!(out.status.code(), Some(1));
    // It prints the state it is in when it gives up.
    let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(state == "working" || state == "idle", "{state}");
}

#[test]
fn wait_for_an_unreachable_state_exits_5() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(&env, "short", "exit 0");
    let out = env.run(["wait", &id, "--until", "needs_you", "--timeout", "10"]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        env.log_tail()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
}

#[test]
fn missing_tmux_is_a_clear_error() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    // A PATH with everything but tmux.
    let bin = env.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["sh", "sleep", "true"] {
        if let Some(path) = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
        {
            std::os::unix::fs::symlink(path, bin.join(tool)).unwrap();
        }
    }
    env.extra_env
        .push(("PATH".into(), bin.display().to_string()));
    let out = env.run(["launch", "--", "true"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tmux is not installed"), "{stderr}");
    assert!(stderr.contains("apt-get install tmux"), "{stderr}");
    let out = env.run(["up"]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn bad_cwd_harness_and_host_are_user_errors() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    for args in [
        vec!["launch", "--cwd", "/no/such/dir", "--", "true"],
        vec!["launch", "--host", "screen", "--", "true"],
        vec!["launch", "--host", "tmux:nosuchsession", "--", "true"],
        vec!["launch", "--harness", "nosuch", "--", "true"],
        vec!["launch"],
        // Budgets that could not be kept, or are nothing.
        vec!["launch", "--harness", "aider", "--budget", "10k"],
        vec!["launch", "--harness", "volee", "--budget", "5usd"],
        vec!["launch", "--budget", "0usd", "--", "true"],
        vec!["launch", "--budget", "5eur", "--", "true"],
    ] {
        let out = env.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error: "),
            "{args:?}"
        );
    }
    // Nothing was recorded by the failed launches.
    let all: serde_json::Value = serde_json::from_str(&env.ok(["ls", "--all", "--json"])).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 0);
}

#[test]
fn files_and_socket_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(&env, "p", "exec sleep 60");
    env.wait_state(&id, "idle", 8);
    let mode = |p: &str| {
        std::fs::metadata(env.volee_home().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("run"), 0o700);
    assert_eq!(mode("run/daemon.sock"), 0o600);
    assert_eq!(mode("run/daemon.lock"), 0o600);
    assert_eq!(mode("run/daemon.pid"), 0o600);
    assert_eq!(mode("state"), 0o700);
    assert_eq!(mode("state/agents.json"), 0o600);
    assert_eq!(mode("state/volee.log"), 0o600);
}
