//! tmux-resurrect and tmux-continuum (issue 22, item 3): a resurrect restore brings volee's
//! agents back in the panes resurrect restores in their places, never beside them; volee sets
//! resurrect's post-restore-all hook only when it is unset, and `volee down` unsets only that.
//!
//! tmux-resurrect is no package here: `fixtures/resurrect/stand-in.sh` is a STAND-IN for it,
//! replaying what resurrect itself does (its save file, its hooks in their order, its panes),
//! as recorded from a run of resurrect's own scripts (`fixtures/resurrect/README.md`; the save
//! file resurrect wrote is `fixtures/resurrect/save.txt`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use volee_test_support::{wait_until, TestEnv};

use crate::{launch_sh, setup};

const HOOK: &str = "@resurrect-hook-post-restore-all";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/fixtures/resurrect")
}

/// The stand-in for resurrect's scripts, run inside tmux as resurrect's key bindings run them.
fn stand_in(env: &TestEnv, what: &str) {
    let script = fixtures().join("stand-in.sh");
    env.tmux(&["run-shell", &format!("{} {what}", script.display())]);
}

/// What a user's tmux.conf with resurrect sets in a server (resurrect.tmux sets the script
/// paths when it loads; here they name the stand-in).
fn resurrect_loaded(env: &TestEnv, save_dir: &Path) {
    let script = fixtures().join("stand-in.sh").display().to_string();
    for (option, value) in [
        ("@resurrect-dir", save_dir.display().to_string()),
        ("@resurrect-save-script-path", format!("{script} save")),
        (
            "@resurrect-restore-script-path",
            format!("{script} restore"),
        ),
        // The agents' program on resurrect's list: resurrect types it back into their panes.
        ("@resurrect-processes", "sleep".into()),
    ] {
        env.tmux(&["set-option", "-g", option, &value]);
    }
}

fn option(env: &TestEnv, name: &str) -> String {
    env.tmux(&["show-option", "-gqv", name])
        .trim_end_matches('\n')
        .to_string()
}

fn all_agents(env: &TestEnv) -> Vec<Value> {
    serde_json::from_str(&env.ok(["ls", "--all", "--json"])).unwrap()
}

/// Every pane of session `main`: (window index, window name, pane index, its agent or "").
fn panes(env: &TestEnv) -> Vec<(u32, String, u32, String)> {
    let text = env.tmux(&[
        "list-panes",
        "-s",
        "-t",
        "=main",
        "-F",
        "#{window_index}\t#{window_name}\t#{pane_index}\t#{@volee-agent}",
    ]);
    let mut rows: Vec<(u32, String, u32, String)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].parse().unwrap(),
                f[1].to_string(),
                f[2].parse().unwrap(),
                f.get(3).unwrap_or(&"").to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// The tab-separated fields of each line of a resurrect save file, by line type.
fn shape(text: &str) -> Vec<(String, usize)> {
    let mut shapes: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f.len())
        })
        .collect();
    shapes.sort();
    shapes.dedup();
    shapes
}

#[test]
fn a_resurrect_restore_brings_the_agents_back_in_its_own_panes_never_beside_them() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    save_kill_restore(&env, false);
}

/// A reboot: volee's daemon goes with the tmux server; the new server's tmux.conf starts it
/// again (volee's plugin runs tmux-init) before resurrect restores, and its old panes' ids are
/// reused by resurrect's new panes.
#[test]
fn after_a_reboot_the_hook_brings_the_agents_back_in_resurrects_panes() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    save_kill_restore(&env, true);
}

/// Agents and a shell of the user's, resurrect's save, the server killed (with the daemon when
/// `reboot`), a fresh server, tmux-init, resurrect's restore: the same panes, each agent in its
/// own place.
fn save_kill_restore(env: &TestEnv, reboot: bool) {
    let bin = env!("CARGO_BIN_EXE_volee");
    let save_dir = env.root().join("resurrect");
    resurrect_loaded(env, &save_dir);
    env.ok(["tmux-init"]);
    let hook = option(env, HOOK);
    assert!(
        hook.contains(&format!("'{bin}' restore --all --into-resurrect")),
        "{hook}"
    );

    // alpha alone in its window; beta, a shell of the user's and gamma in window "pair".
    let script = "echo ready; exec sleep 300";
    let a = launch_sh(env, "alpha", script);
    let b = launch_sh(env, "beta", script);
    // gamma's shell stays, its program a child: resurrect saves that program and, as it is on
    // its list, types it back into the shell it restores there.
    let c = launch_sh(env, "gamma", "echo ready; sleep 300; true");
    let host = |id: &str, what: &str| env.agent(id)["host"][what].as_str().unwrap().to_string();
    let pair = host(&b, "window");
    env.tmux(&["split-window", "-d", "-t", &host(&b, "pane")]);
    env.tmux(&["join-pane", "-d", "-s", &host(&c, "pane"), "-t", &pair]);
    env.tmux(&["rename-window", "-t", &pair, "pair"]);
    let before = panes(env);
    let agents_in = |rows: &[(u32, String, u32, String)]| {
        rows.iter()
            .filter(|r| !r.3.is_empty())
            .map(|r| r.3.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(agents_in(&before).len(), 3, "{before:?}");
    assert_eq!(
        before.iter().filter(|r| r.1 == "pair").count(),
        3,
        "{before:?}"
    );
    wait_until(
        "placements recorded",
        Duration::from_secs(10),
        || {
            let agents = all_agents(env);
            agents
                .iter()
                .all(|v| {
                    let p = &v["placement"];
                    let name = if v["id"] == a.as_str() {
                        "alpha"
                    } else {
                        "pair"
                    };
                    p["window_name"] == name
                })
                .then_some(())
        },
        || format!("{:#?}", all_agents(env)),
    );

    // Resurrect's save (the stand-in's), in the format resurrect itself wrote.
    stand_in(env, "save");
    let saved = std::fs::read_to_string(save_dir.join("last")).unwrap();
    let recorded = std::fs::read_to_string(fixtures().join("save.txt")).unwrap();
    assert_eq!(shape(&saved), shape(&recorded), "{saved}\n---\n{recorded}");
    assert_eq!(
        saved
            .lines()
            .filter(|l| l.starts_with("pane\tmain\t"))
            .count(),
        before.len(),
        "{saved}"
    );
    assert!(saved.contains("\t:sleep 300\n"), "{saved}");

    // The reboot; then tmux starts again (a fresh server's session "0"), its tmux.conf loads
    // resurrect and volee's plugin (tmux-init), and resurrect restores.
    if reboot {
        env.kill_daemon();
        crate::kill_tmux_server(env);
    } else {
        env.tmux(&["kill-server"]);
        wait_until(
            "stopped and restorable",
            Duration::from_secs(10),
            || {
                all_agents(env)
                    .iter()
                    .all(|v| v["state"] == "stopped" && v["restorable"] == true)
                    .then_some(())
            },
            || format!("{:#?}\n{}", all_agents(env), env.log_tail()),
        );
    }
    env.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        "160",
        "-y",
        "40",
    ]);
    resurrect_loaded(env, &save_dir);
    env.ok(["tmux-init"]);
    assert_eq!(option(env, HOOK), hook);
    stand_in(env, "restore");

    // The hook runs volee in the background: wait for the agents.
    wait_until(
        "agents back",
        Duration::from_secs(20),
        || {
            all_agents(env)
                .iter()
                .all(|v| v["state"] != "stopped" && v["restorable"] == false)
                .then_some(())
        },
        || {
            format!(
                "{:#?}\n{}\nhook log: {}",
                all_agents(env),
                env.log_tail(),
                std::fs::read_to_string(env.volee_home().join("state/resurrect.log"))
                    .unwrap_or_default()
            )
        },
    );
    let after = panes(env);
    // The same panes in the same places, each agent in its own: none beside resurrect's.
    assert_eq!(after, before, "{after:?}");
    let sessions = env.tmux(&["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(
        sessions.trim(),
        "main",
        "resurrect's fresh session 0 is gone"
    );
    let agents = all_agents(env);
    assert_eq!(agents.len(), 3, "{agents:#?}");
    for v in &agents {
        assert_eq!(v["restored"].as_array().map(Vec::len), Some(1), "{v}");
        let pane = v["host"]["pane"].as_str().unwrap();
        // Its own command runs in it (what resurrect typed there is gone with its shell).
        let start = env.tmux(&["display-message", "-p", "-t", pane, "#{pane_start_command}"]);
        assert!(start.contains("pane-exec"), "{start}");
    }
    let log = std::fs::read_to_string(env.volee_home().join("state/resurrect.log")).unwrap();
    assert_eq!(log.matches("restored ").count(), 3, "{log}");
    assert_eq!(
        log.matches("in tmux-resurrect's pane %").count(),
        3,
        "{log}"
    );

    // Run again (a second restore): nothing left, nothing opened.
    let again = env.ok(["restore", "--all", "--into-resurrect"]);
    assert_eq!(again, "nothing to restore");
    assert_eq!(panes(env), before);

    // volee down takes its hook out, as it set it.
    env.ok(["down"]);
    assert_eq!(option(env, HOOK), "");
    assert_eq!(option(env, "@volee-resurrect-hook"), "");
}

#[test]
fn a_users_own_resurrect_hook_is_left_alone_and_volee_prints_the_line_to_add() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_volee");
    // Without resurrect, volee sets nothing of it.
    env.ok(["tmux-init"]);
    assert_eq!(option(&env, HOOK), "");
    let doctor = env.ok(["doctor"]);
    assert!(doctor.contains("tmux-resurrect not found"), "{doctor}");

    // Installed by TPM but not loaded yet (listed after volee's plugin): the hook is set.
    let plugin = env.home().join(".tmux/plugins/tmux-resurrect");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(plugin.join("resurrect.tmux"), "#!/bin/sh\n").unwrap();
    env.ok(["tmux-init"]);
    assert!(option(&env, HOOK).contains("--into-resurrect"));
    let doctor = env.ok(["doctor"]);
    assert!(
        doctor.contains("installed in") && doctor.contains("brings volee's agents back"),
        "{doctor}"
    );
    env.ok(["down"]);
    assert_eq!(option(&env, HOOK), "");
    std::fs::remove_dir_all(&plugin).unwrap();

    // With it, and a hook of the user's own.
    resurrect_loaded(&env, &env.root().join("resurrect"));
    env.tmux(&["set-option", "-g", HOOK, "echo \"mine\" > /dev/null"]);
    let init = env.run(["tmux-init"]);
    assert!(init.status.success(), "{init:?}");
    let said = String::from_utf8_lossy(&init.stderr).to_string();
    assert_eq!(option(&env, HOOK), "echo \"mine\" > /dev/null");
    let line = said
        .lines()
        .find_map(|l| l.split_once("make it in tmux.conf: ").map(|(_, line)| line))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(line.starts_with(&format!("set -g {HOOK} \"echo")), "{line}");
    let doctor = env.ok(["doctor"]);
    assert!(
        doctor.contains("your own @resurrect-hook-post-restore-all does not bring"),
        "{doctor}"
    );

    // The printed line, put in tmux.conf, is theirs then volee's; tmux-init is then quiet.
    let conf = env.root().join("tmux.conf");
    std::fs::write(&conf, format!("{line}\n")).unwrap();
    env.tmux(&["source-file", conf.to_str().unwrap()]);
    let value = option(&env, HOOK);
    assert!(
        value.starts_with("echo \"mine\" > /dev/null; { '"),
        "{value}"
    );
    assert!(
        value.contains(&format!("'{bin}' restore --all --into-resurrect")),
        "{value}"
    );
    let init = env.run(["tmux-init"]);
    assert!(init.status.success());
    assert!(!String::from_utf8_lossy(&init.stderr).contains("resurrect"));
    let doctor = env.ok(["doctor"]);
    assert!(
        doctor.contains("its restore brings volee's agents back"),
        "{doctor}"
    );

    // volee down leaves the user's hook as it is.
    env.ok(["down"]);
    assert_eq!(option(&env, HOOK), value);
}
