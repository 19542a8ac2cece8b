//! After a reboot (issue 22): agents whose tmux server went away are `stopped`, marked
//! restorable, and `volee restore` brings them back into their places with their ids. The
//! server is killed with `tmux kill-server` (what a reboot does to it, as far as volee can tell).

use std::time::Duration;

use serde_json::Value;
use volee_test_support::{wait_until, TestEnv};

use crate::{launch_sh, setup};

fn all_agents(env: &TestEnv) -> Vec<Value> {
    serde_json::from_str(&env.ok(["ls", "--all", "--json"])).unwrap()
}

fn by_id<'a>(agents: &'a [Value], id: &str) -> &'a Value {
    agents.iter().find(|a| a["id"] == id).unwrap()
}

/// Each window's name and its panes' agents, in window order.
fn windows(env: &TestEnv) -> Vec<(String, Vec<String>)> {
    let text = env.tmux(&[
        "list-panes",
        "-s",
        "-t",
        "=main",
        "-F",
        "#{window_index} #{window_name} #{pane_index} #{@volee-agent}",
    ]);
    let mut rows: Vec<(u32, String, u32, String)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Some((
                f[0].parse().ok()?,
                f[1].into(),
                f[2].parse().ok()?,
                f.get(3)?.to_string(),
            ))
        })
        .filter(|r| !r.3.is_empty())
        .collect();
    rows.sort();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (_, name, _, agent) in rows {
        match out.last_mut() {
            Some((n, agents)) if *n == name => agents.push(agent),
            _ => out.push((name, vec![agent])),
        }
    }
    out
}

#[test]
fn agents_of_a_killed_tmux_server_are_restored_into_their_windows_with_their_ids() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    let dir_a = env.root().join("proj-a");
    std::fs::create_dir_all(&dir_a).unwrap();
    // Three agents; the third joins the second's window, renamed "pair".
    let script = "echo ready; exec sleep 300";
    let a = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--name",
        "alpha",
        "--cwd",
        dir_a.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    let b = launch_sh(&env, "beta", script);
    let c = launch_sh(&env, "gamma", script);
    let pane = |id: &str| env.agent(id)["host"]["pane"].as_str().unwrap().to_string();
    let window = |id: &str| {
        env.agent(id)["host"]["window"]
            .as_str()
            .unwrap()
            .to_string()
    };
    env.tmux(&["join-pane", "-d", "-s", &pane(&c), "-t", &window(&b)]);
    env.tmux(&["rename-window", "-t", &window(&b), "pair"]);
    let before = windows(&env);
    assert_eq!(
        before,
        vec![
            ("alpha".to_string(), vec![a.clone()]),
            ("pair".to_string(), vec![b.clone(), c.clone()]),
        ],
        "{before:?}"
    );
    // volee has recorded where each one sits.
    wait_until(
        "placements recorded",
        Duration::from_secs(10),
        || {
            let agents = all_agents(&env);
            let name = |id: &str| by_id(&agents, id)["placement"]["window_name"].clone();
            (name(&a) == "alpha" && name(&b) == "pair" && name(&c) == "pair").then_some(())
        },
        || format!("{:#?}", all_agents(&env)),
    );

    env.tmux(&["kill-server"]);
    wait_until(
        "stopped and restorable",
        Duration::from_secs(10),
        || {
            let agents = all_agents(&env);
            [&a, &b, &c]
                .iter()
                .all(|id| {
                    let v = by_id(&agents, id);
                    v["state"] == "stopped" && v["restorable"] == true
                })
                .then_some(())
        },
        || format!("{:#?}\n{}", all_agents(&env), env.log_tail()),
    );
    let evidence = env.agent(&a)["evidence"].as_str().unwrap().to_string();
    assert!(evidence.contains("gone"), "{evidence}");

    // The plan changes nothing.
    let plan = env.ok(["restore", "--all", "--dry-run"]);
    for name in ["alpha", "beta", "gamma"] {
        assert!(plan.contains(name), "{plan}");
    }
    assert!(plan.contains("main:pair"), "{plan}");
    let still: Vec<Value> = all_agents(&env);
    assert!(still.iter().all(|v| v["state"] == "stopped"), "{still:#?}");

    // Restored: same ids, names, windows (in order), cwd.
    let done = env.ok(["restore", "--all"]);
    assert_eq!(done.matches("restored ").count(), 3, "{done}");
    let agents = all_agents(&env);
    assert_eq!(
        agents.len(),
        3,
        "one record each, no new agents: {agents:#?}"
    );
    for (id, name) in [(&a, "alpha"), (&b, "beta"), (&c, "gamma")] {
        let v = by_id(&agents, id);
        assert_eq!(v["name"], name);
        assert_ne!(v["state"], "stopped", "{v}");
        assert_eq!(v["restorable"], false, "{v}");
        assert_eq!(v["restored"].as_array().map(Vec::len), Some(1), "{v}");
    }
    assert_eq!(
        by_id(&agents, &a)["cwd"].as_str(),
        Some(dir_a.to_str().unwrap())
    );
    let after = windows(&env);
    assert_eq!(
        after,
        vec![
            ("alpha".to_string(), vec![a.clone()]),
            ("pair".to_string(), vec![b.clone(), c.clone()]),
        ],
        "{after:?}"
    );
    // Nothing is left to restore.
    let again = env.ok(["restore", "--all"]);
    assert_eq!(again, "nothing to restore");

    // The restored server (started by the restore) is lost in turn: restorable again, back again.
    env.tmux(&["kill-server"]);
    wait_until(
        "restorable a second time",
        Duration::from_secs(10),
        || {
            let agents = all_agents(&env);
            agents
                .iter()
                .all(|v| v["state"] == "stopped" && v["restorable"] == true)
                .then_some(())
        },
        || format!("{:#?}\n{}", all_agents(&env), env.log_tail()),
    );
    let done = env.ok(["restore", "--all"]);
    assert_eq!(done.matches("restored ").count(), 3, "{done}");
    for v in all_agents(&env) {
        assert_eq!(v["restored"].as_array().map(Vec::len), Some(2), "{v}");
    }
    assert_eq!(windows(&env), after);
}

/// What a reboot does, as far as volee can tell: its daemon dies with the tmux server (here
/// SIGKILLed first), a new server starts at the same socket (its first pane takes the old
/// first pane's id), then the user runs `volee up`. The agents are told apart from panes
/// closed on purpose by their server's pid and start, so they are restorable; `up` says so
/// without a terminal (`[restore] on_up = "ask"`, the default) and restores them with
/// `on_up = "always"`.
#[test]
fn after_the_daemon_and_the_server_die_up_offers_the_restore_and_always_does_it() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    let script = "echo ready; exec sleep 300";
    let a = launch_sh(&env, "first", script);
    let b = launch_sh(&env, "second", script);
    // Recorded at launch: its window and its server.
    for id in [&a, &b] {
        let placed = env.agent(id)["placement"].clone();
        assert!(
            placed["server_pid"].as_u64().is_some_and(|p| p > 0)
                && placed["server_started"].as_u64().is_some_and(|s| s > 0),
            "{placed}"
        );
    }
    let old_pane = env.agent(&a)["host"]["pane"].as_str().unwrap().to_string();
    env.kill_daemon();
    crate::kill_tmux_server(&env);
    env.start_tmux();
    let new_first = env.tmux(&["display-message", "-p", "-t", "=main:", "#{pane_id}"]);
    // Not asked (no terminal): told how.
    let said = env.ok(["up"]);
    assert!(
        said.contains("2 agents whose tmux server went away can be restored")
            && said.contains("volee restore --all"),
        "{said}"
    );
    let agents = all_agents(&env);
    for id in [&a, &b] {
        let v = by_id(&agents, id);
        assert_eq!(v["state"], "stopped", "{v}");
        assert_eq!(v["restorable"], true, "{v}");
        assert!(v["evidence"].as_str().unwrap().contains("gone"), "{v}");
    }
    assert_eq!(
        agents.len(),
        2,
        "the new server's shell is no agent: {agents:#?}"
    );
    eprintln!("old pane {old_pane}, the new server's first pane {new_first}");

    std::fs::create_dir_all(env.volee_home().join("config")).unwrap();
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"off\"\n[restore]\non_up = \"always\"\n",
    )
    .unwrap();
    let said = env.ok(["up"]);
    assert_eq!(said.matches("restored ").count(), 2, "{said}");
    let agents = all_agents(&env);
    assert_eq!(agents.len(), 2, "{agents:#?}");
    for (id, name) in [(&a, "first"), (&b, "second")] {
        let v = by_id(&agents, id);
        assert_eq!(v["name"], name);
        assert_ne!(v["state"], "stopped", "{v}");
        assert_eq!(v["host"]["session"], "main", "{v}");
    }
    let names: Vec<String> = windows(&env).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first", "second"], "{names:?}");
    // Nothing left: `up` says nothing of a restore.
    let said = env.ok(["up"]);
    assert!(!said.contains("restore"), "{said}");
}
