//! zellij hosts, end to end: a real zellij 0.45.1 (from `VOLEE_ZELLIJ` or PATH) runs attached inside the test's private tmux, with its own socket,
//! config, cache and data directories. `volee launch --host zellij:SESSION` opens a generic agent
//! in a new tab; without volee's plugin loaded, the daemon watches the session with
//! `zellij action list-panes --json` and `zellij subscribe` (the fallback every user without the
//! plugin gets): title, screen text (a `(y/n)` prompt → needs_you), `volee send`, exit status,
//! `volee stop`.

use std::time::Duration;

use volee_test_support::wait_until;
use volee_test_support::zellij::{
    pane_row, plugin_wasm, start_zellij, start_zellij_with, zellij_binary, zellij_window,
    KillSession,
};

use crate::setup;

/// A test world with a zellij session `name` in which volee's plugin is loaded: the serial lock,
/// the environment, and the session's killer (which ends it whole). None when tmux, zellij or the
/// built plugin is missing outside CI (under CI each of those fails the test).
fn plugin_world(
    name: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    volee_test_support::TestEnv,
    KillSession,
)> {
    let (serial, mut env) = setup()?;
    let bin = zellij_binary()?;
    let wasm = plugin_wasm()?;
    let vars = start_zellij_with(&mut env, &bin, name, Some(&wasm));
    let kill = KillSession::new(&bin, name, vars);
    Some((serial, env, kill))
}

/// In zellij session `session`: launch `ringer` running `script` (it rings a bell), then `front`,
/// which takes the active tab; wait until the bell in ringer's hidden tab makes it need you (zellij
/// reports a bell only for a tab that is not active, and only to a plugin). Ringer's id.
fn ring_in_a_hidden_tab(env: &volee_test_support::TestEnv, session: &str, script: &str) -> String {
    let host = format!("zellij:{session}");
    let a = env.ok([
        "launch", "--host", &host, "--name", "ringer", "--", "sh", "-c", script,
    ]);
    env.ok([
        "launch", "--host", &host, "--name", "front", "--", "sleep", "300",
    ]);
    let rang = wait_until(
        "the bell in the hidden tab reaches needs_you",
        Duration::from_secs(20),
        || {
            let agent = env.agent(&a);
            (agent["state"] == "needs_you").then_some(agent)
        },
        || format!("{}\n{}", env.agent(&a), env.log_tail()),
    );
    assert_eq!(rang["evidence"], "bell", "{rang}");
    a
}

#[test]
fn a_generic_agent_in_a_zellij_tab_goes_through_its_states() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let vars = start_zellij(&mut env, &bin, "vz");
    let _kill = KillSession::new(&bin, "vz", vars);
    let id = env.ok([
        "launch",
        "--host",
        "zellij:vz",
        "--name",
        "zj",
        "--",
        "sh",
        "-c",
        r#"printf '\033]2;zj-title\007'; sleep 1; echo working; sleep 1; printf 'Continue? (y/n) '; read a; echo "got $a"; sleep 1; exit 3"#,
    ]);
    let agent = env.agent(&id);
    assert_eq!(agent["host"]["kind"], "zellij", "{agent}");
    assert_eq!(agent["host"]["session"], "vz", "{agent}");
    assert!(
        agent["host"]["pane"]
            .as_str()
            .unwrap()
            .starts_with("terminal_"),
        "{agent}"
    );
    wait_until(
        "the pane's title",
        Duration::from_secs(10),
        || (env.agent(&id)["title"] == "zj-title").then_some(()),
        || env.agent(&id).to_string(),
    );
    // The prompt on its screen (from `zellij subscribe`) is a question for the user.
    let asked = wait_until(
        "needs_you from the screen",
        Duration::from_secs(15),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    assert_eq!(asked["state_source"], "screen", "{asked}");
    let screen = env.ok(["peek", &id]);
    assert!(screen.contains("Continue? (y/n)"), "{screen:?}");
    env.ok(["send", &id, "y"]);
    let ended = wait_until(
        "the agent ends with its exit status",
        Duration::from_secs(15),
        || {
            let a = env.agent(&id);
            (a["state"] == "failed").then_some(a)
        },
        || env.agent(&id).to_string(),
    );
    assert_eq!(ended["exit_status"], 3, "{ended}");

    // `volee stop` closes the pane: stopped.
    let sleeper = env.ok([
        "launch",
        "--host",
        "zellij:vz",
        "--name",
        "zj-sleep",
        "--",
        "sleep",
        "300",
    ]);
    // `volee attach` from a shell inside the session focuses the agent's pane.
    let first = env.agent(&id)["host"]["pane"].as_str().unwrap().to_string();
    let pane = env.agent(&sleeper)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(first, pane);
    // zellij 0.45.1 now and then answers a query with nothing (while other clients talk to it,
    // like volee's watch): ask again.
    let zellij = |args: &[&str]| {
        let mut out = None;
        for _ in 0..20 {
            let o = _kill.zellij(args);
            let empty = o.stdout.is_empty();
            out = Some(o);
            if !empty || args.get(1) == Some(&"go-to-tab") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        out.unwrap()
    };
    // The user looks at the first tab (new tabs take the focus).
    assert!(zellij(&["action", "go-to-tab", "1"]).status.success());
    // Focused: the pane has the focus in its tab, and its tab is the active one.
    let focused = |p: &str| {
        let n: u32 = p["terminal_".len()..].parse().unwrap();
        let out = zellij(&["action", "list-panes", "--json", "--all"]);
        let panes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "list-panes: {e}: {} {} {}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let out = zellij(&["action", "list-tabs", "--json", "--state"]);
        let tabs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "list-tabs: {e}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let Some(me) = panes
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == n && x["is_plugin"] == false)
        else {
            return false;
        };
        me["is_focused"] == true
            && tabs
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["position"] == me["tab_position"] && t["active"] == true)
    };
    assert!(!focused(&pane), "the agent's tab is still the active one");
    let out = env
        .volee(["attach", &sleeper])
        .env("ZELLIJ_SESSION_NAME", "vz")
        .env("ZELLIJ", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(
        "the attached agent's pane has the focus",
        Duration::from_secs(5),
        || focused(&pane).then_some(()),
        || format!("{pane} not focused"),
    );
    env.ok(["stop", &sleeper]);
    wait_until(
        "the stopped agent",
        Duration::from_secs(10),
        || (env.agent(&sleeper)["state"] == "stopped").then_some(()),
        || env.agent(&sleeper).to_string(),
    );

    // A session that does not exist is a clear error.
    let out = env.run(["launch", "--host", "zellij:nosuch", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nosuch") && err.contains("not running"),
        "{err}"
    );
}

#[test]
fn a_harness_started_by_hand_in_zellij_is_discovered_in_its_tab() {
    use std::os::unix::fs::PermissionsExt;
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"1s\"\n",
    )
    .unwrap();
    let vars = start_zellij(&mut env, &bin, "vd");
    let kill = KillSession::new(&bin, "vd", vars);
    // A program whose process is called `claude`, typed into a tab the user opened.
    let fake = env.root().join("fakebin/claude");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    std::fs::write(
        &fake,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo '2.1.332 (Claude Code)'; exit 0; }\nwhile :; do sleep 1; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fake_path = fake.display().to_string();
    let out = kill.zellij(&["action", "new-tab", "--name", "mine", "--", &fake_path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.ok(["ls"]);
    let found = wait_until(
        "the process is discovered in its zellij tab",
        Duration::from_secs(15),
        || {
            let text = env.ok(["ls", "--all", "--rescan", "--json"]);
            let all: serde_json::Value = serde_json::from_str(&text).unwrap();
            all.as_array()
                .unwrap()
                .iter()
                .find(|a| {
                    a["origin"] == "discovered"
                        && a["host"]["kind"] == "zellij"
                        && a["host"]["tab"] == 1
                })
                .cloned()
        },
        || env.ok(["ls", "--all", "--json"]),
    );
    assert_eq!(found["harness"], "claude", "{found}");
    assert_eq!(found["host"]["session"], "vd", "{found}");
    let id = found["id"].as_str().unwrap().to_string();
    // Its pane is watched: closing it ends the agent.
    let pane = found["host"]["pane"].as_str().unwrap().to_string();
    assert!(kill
        .zellij(&["action", "close-pane", "--pane-id", &pane])
        .status
        .success());
    wait_until(
        "the closed agent is stopped",
        Duration::from_secs(15),
        || (env.agent(&id)["state"] == "stopped").then_some(()),
        || env.agent(&id).to_string(),
    );
}

#[test]
fn with_the_plugin_a_bell_in_a_hidden_tab_needs_you() {
    let Some((_serial, env, _kill)) = plugin_world("vp") else {
        return;
    };
    // A rings its bell after a while; B, launched after it, takes the active tab.
    let a = ring_in_a_hidden_tab(
        &env,
        "vp",
        // The second bell comes in the same breath as the output before it: that output (seen
        // on the pty at once) must not pass for output after the bell.
        "echo ready; sleep 4; printf '\\a'; sleep 4; echo working again; sleep 3; echo again; printf '\\a'; sleep 300",
    );
    // The plugin marks the hidden tab of an agent that needs you (volee's notification in
    // zellij); zellij's CLI may answer "no active session" for a live one: asked again.
    let tab = format!("ringer ({a})");
    let names = || {
        String::from_utf8_lossy(&_kill.zellij(&["action", "query-tab-names"]).stdout).to_string()
    };
    wait_until(
        "the hidden tab marked",
        Duration::from_secs(10),
        || {
            names()
                .lines()
                .any(|l| l.trim() == format!("! {tab}"))
                .then_some(())
        },
        names,
    );
    // zellij keeps the tab's bell flag up until the tab is visited: a second bell there only
    // flashes the tab, and must still be seen.
    env.wait_state(&a, "working", 20);
    // Working again: the mark goes.
    wait_until(
        "the mark removed",
        Duration::from_secs(10),
        || names().lines().any(|l| l.trim() == tab).then_some(()),
        || format!("{}\n{}\n{}", names(), env.agent(&a), env.log_tail()),
    );
    let again = wait_until(
        "the second bell in the hidden tab reaches needs_you",
        Duration::from_secs(20),
        || {
            let agent = env.agent(&a);
            (agent["state"] == "needs_you").then_some(agent)
        },
        || format!("{}\n{}", env.agent(&a), env.log_tail()),
    );
    assert_eq!(again["evidence"], "bell", "{again}");
    let log = std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap();
    assert!(
        log.contains("volee plugin"),
        "the plugin's stream carried it: {}",
        env.log_tail()
    );
}

#[test]
fn with_the_plugin_states_show_in_volee_ls_and_in_the_plugin_pane() {
    let Some((_serial, env, kill)) = plugin_world("vs") else {
        return;
    };
    let window = zellij_window(&env, "vs");
    // `talker` works for a while, rings its bell right after its last output and waits for an
    // answer, works again, goes quiet, then exits 0; `crasher` exits 3. `front` keeps the active
    // tab, so the other two are in hidden tabs, where zellij reports bells. A hidden tab's screen
    // is read when its pty is written to: the last output before the bell is not seen after it
    // as new work.
    let talker = env.ok([
        "launch",
        "--host",
        "zellij:vs",
        "--name",
        "talker",
        "--",
        "sh",
        "-c",
        r#"i=0; while [ $i -lt 40 ]; do echo "tick $i"; i=$((i+1)); sleep 0.3; done; echo asking; printf '\a'; read a; echo "got $a"; sleep 6; exit 0"#,
    ]);
    let crasher = env.ok([
        "launch",
        "--host",
        "zellij:vs",
        "--name",
        "crasher",
        "--",
        "sh",
        "-c",
        "sleep 3; exit 3",
    ]);
    let front = env.ok([
        "launch",
        "--host",
        "zellij:vs",
        "--name",
        "front",
        "--",
        "sleep",
        "300",
    ]);
    // The agents pane, floating over the active tab: the background instance, shown.
    let url = format!("file:{}", env.root().join("zj/volee.wasm").display());
    let out = kill.zellij(&["action", "launch-or-focus-plugin", "--floating", &url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each state, first in `volee ls`, then on the pane's row for that agent.
    let see = |id: &str, name: &str, state: &str, label: &str| {
        let agent = wait_until(
            &format!("{name} is {state} in volee ls"),
            Duration::from_secs(25),
            || {
                let a = env.agent(id);
                (a["state"] == state).then_some(a)
            },
            || format!("{}\n{}", env.agent(id), env.log_tail()),
        );
        wait_until(
            &format!("{name} shows {label} in the plugin pane"),
            Duration::from_secs(10),
            || pane_row(&env, &window, name).filter(|row| row.contains(label)),
            || env.tmux(&["capture-pane", "-p", "-t", &window]),
        );
        agent
    };
    see(&talker, "talker", "working", "working");
    // The shown pane ticks (the background instance ticks only while its pane is shown: an idle
    // plugin with no pane costs nothing): `front`'s age moves on by itself.
    see(&front, "front", "idle", "idle");
    let front_row = || pane_row(&env, &window, "front").unwrap_or_default();
    let before = front_row();
    wait_until(
        "the ages in the shown agents pane move",
        Duration::from_secs(5),
        || {
            let now = front_row();
            (!now.is_empty() && now != before).then_some(())
        },
        || {
            format!(
                "{before}\n{}",
                env.tmux(&["capture-pane", "-p", "-t", &window])
            )
        },
    );
    let failed = see(&crasher, "crasher", "failed", "failed");
    assert_eq!(failed["exit_status"], 3, "{failed}");
    let rang = see(&talker, "talker", "needs_you", "needs you");
    assert_eq!(rang["evidence"], "bell", "{rang}");
    // And it stays so: the output printed just before the bell is not taken for new work.
    std::thread::sleep(Duration::from_millis(1200));
    let still = env.agent(&talker);
    assert_eq!(still["state"], "needs_you", "{still}");
    // The header counts it too.
    let screen = env.tmux(&["capture-pane", "-p", "-t", &window]);
    assert!(screen.contains("● 1 needs you"), "{screen}");
    env.ok(["send", &talker, "yes"]);
    see(&talker, "talker", "idle", "idle");
    let done = see(&talker, "talker", "done", "done");
    assert_eq!(done["exit_status"], 0, "{done}");
    assert!(
        env.ok(["peek", &talker]).contains("got yes"),
        "{}",
        env.ok(["peek", &talker])
    );
}

/// zellij 0.45.1 reuses client ids at once and hands a new client answers meant for the one
/// before: with many commands in a row, some of its answers are another command's, and its
/// session check says a live session is gone. Ten launches back to back, each in its own tab.
#[test]
fn ten_agents_launched_back_to_back_each_get_a_tab() {
    let Some((_serial, env, _kill)) = plugin_world("vt") else {
        return;
    };
    let ids: Vec<String> = (0..10)
        .map(|n| {
            env.ok([
                "launch",
                "--host",
                "zellij:vt",
                "--name",
                &format!("t{n}"),
                "--",
                "sh",
                "-c",
                "echo hi; exec sleep 1000",
            ])
        })
        .collect();
    let mut panes = std::collections::BTreeSet::new();
    let mut tabs = std::collections::BTreeSet::new();
    for id in &ids {
        env.wait_state(id, "idle", 20);
        let agent = env.agent(id);
        assert!(panes.insert(agent["host"]["pane"].to_string()), "{agent}");
        assert!(tabs.insert(agent["host"]["tab"].to_string()), "{agent}");
    }
}

/// A prompt printed before volee watches the pane is on the screen `zellij subscribe` delivers
/// first (`is_initial`): it is read like any other screen. Without the plugin, the subscription
/// starts at the fallback's next tick (a second or so after the launch), so a prompt printed at
/// once is always on the initial screen.
#[test]
fn a_prompt_already_on_a_zellij_screen_needs_you() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let vars = start_zellij(&mut env, &bin, "vi");
    let _kill = KillSession::new(&bin, "vi", vars);
    let id = env.ok([
        "launch",
        "--host",
        "zellij:vi",
        "--name",
        "early",
        "--",
        "sh",
        "-c",
        "printf 'Proceed? [y/N] '; read x; sleep 60",
    ]);
    let asked = wait_until(
        "needs_you from the initial screen",
        Duration::from_secs(15),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || format!("{}\n{}", env.ok(["explain", &id]), env.log_tail()),
    );
    assert_eq!(asked["state_source"], "screen", "{asked}");
    assert!(
        asked["evidence"]
            .as_str()
            .unwrap()
            .contains("Proceed? [y/N]"),
        "{asked}"
    );

    // The same after a daemon restart: the prompt printed while no daemon ran.
    let flag = env.root().join("ask-now");
    let late = env.ok([
        "launch",
        "--host",
        "zellij:vi",
        "--name",
        "late",
        "--",
        "sh",
        "-c",
        &format!(
            "echo waiting; while [ ! -f '{}' ]; do sleep 0.05; done; printf 'Overwrite? [y/N] '; read x; sleep 60",
            flag.display()
        ),
    ]);
    env.wait_state(&late, "idle", 10);
    env.kill_daemon();
    std::fs::write(&flag, "").unwrap();
    // Let the prompt reach the screen before a new daemon starts.
    std::thread::sleep(Duration::from_millis(500));
    let asked = wait_until(
        "the restarted daemon reads the prompt on screen",
        Duration::from_secs(15),
        || {
            let a = env.agent(&late);
            (a["state"] == "needs_you").then_some(a)
        },
        || format!("{}\n{}", env.ok(["explain", &late]), env.log_tail()),
    );
    assert!(
        asked["evidence"].as_str().unwrap().contains("Overwrite?"),
        "{asked}"
    );
}

/// `volee up` inside a zellij session, with no zellij config of the user's edited: the plugin the
/// binary carries is written to volee's data dir and started in the session (hidden once its
/// permissions are granted; the test grants them ahead, as a user answers zellij's prompt), it
/// answers, and a bell in a hidden tab becomes needs_you through it. `volee down` closes it.
#[test]
fn volee_up_inside_zellij_loads_the_plugin_without_touching_the_config() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let vars = start_zellij(&mut env, &bin, "vu");
    let kill = KillSession::new(&bin, "vu", vars.clone());
    let var = |k: &str| {
        vars.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| std::path::PathBuf::from(v))
            .unwrap()
    };
    let config = var("ZELLIJ_CONFIG_DIR").join("config.kdl");
    let config_before = std::fs::read(&config).unwrap();
    // Where `volee up` puts the plugin; the user's answer to zellij's prompt, given ahead.
    let wasm = env.volee_home().join("data/zellij/volee.wasm");
    let permissions = var("XDG_CACHE_HOME").join("zellij/permissions.kdl");
    std::fs::create_dir_all(permissions.parent().unwrap()).unwrap();
    std::fs::write(
        &permissions,
        format!(
            "\"{}\" {{\n    ReadApplicationState\n    ChangeApplicationState\n    ReadPaneContents\n    ReadCliPipes\n    RunCommands\n    OpenTerminalsOrPlugins\n}}\n",
            wasm.display()
        ),
    )
    .unwrap();
    let permissions_before = std::fs::read(&permissions).unwrap();
    // `volee up` as run in a pane of that session.
    env.extra_env
        .push(("ZELLIJ_SESSION_NAME".into(), "vu".into()));
    env.extra_env.push(("ZELLIJ".into(), "0".into()));
    let said = env.ok(["up"]);
    assert!(said.contains("runs in the background"), "{said}");
    assert!(wasm.is_file(), "the plugin written to {}", wasm.display());
    let url = format!("file:{}", wasm.display());
    let plugin_pane = || {
        let out = kill.zellij(&["action", "list-panes", "--json", "--all"]);
        let panes: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        panes.as_array().and_then(|panes| {
            panes
                .iter()
                .find(|p| p["plugin_url"].as_str() == Some(url.as_str()))
                .cloned()
        })
    };
    let pane = wait_until(
        "the plugin runs hidden",
        Duration::from_secs(10),
        || plugin_pane().filter(|p| p["is_suppressed"] == true),
        || format!("{:?}", plugin_pane()),
    );
    assert_eq!(pane["is_plugin"], true, "{pane}");
    // It answers on its command pipe.
    let ping = kill.zellij(&[
        "pipe",
        "--plugin",
        &url,
        "--plugin-configuration",
        "background=true",
        "--name",
        "volee",
        "--",
        &format!(
            r#"{{"type":"ping","version":{}}}"#,
            volee_protocol::zellij::PIPE_VERSION
        ),
    ]);
    let hello = String::from_utf8_lossy(&ping.stdout).to_string();
    assert!(hello.contains(r#""type":"hello""#), "{hello}");
    // A bell in a hidden tab reaches needs_you: only a plugin sees it.
    ring_in_a_hidden_tab(&env, "vu", "echo ready; sleep 4; printf '\\a'; sleep 300");
    // `volee doctor` says the plugin runs in the session that holds agents.
    let doctor = env.run(["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains("zellij session \"vu\": volee's plugin runs"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&config).unwrap(),
        config_before,
        "config.kdl untouched"
    );
    // zellij itself writes the file again on load (same grants, its own order); volee never
    // adds to it.
    let grants = |bytes: &[u8]| {
        let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
            .lines()
            .map(|l| l.trim().to_string())
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(
        grants(&std::fs::read(&permissions).unwrap()),
        grants(&permissions_before),
        "permissions.kdl holds what the user granted, nothing more"
    );
    // `volee down` undoes it: the plugin closes, its file goes.
    env.ok(["down"]);
    wait_until(
        "the plugin closed",
        Duration::from_secs(10),
        || plugin_pane().is_none().then_some(()),
        || format!("{:?}", plugin_pane()),
    );
    assert!(!wasm.exists(), "the plugin's file removed");
}

/// The end of the zellij server's log (the plugin's `eprintln!`s, the commands it ran).
fn zellij_log_tail(env: &volee_test_support::TestEnv) -> String {
    let tmp = env.root().join("zj/tmp");
    let Ok(dirs) = std::fs::read_dir(&tmp) else {
        return String::new();
    };
    dirs.flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("zellij-log/zellij.log")).ok())
        .map(|text| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        })
        .collect()
}

/// The real Claude Code transcript of volee-history's fixtures.
const CLAUDE_SESSION: &str = "d4a8abe5-742d-4002-a1ab-379c1b005cb4";

/// That transcript under `home/.claude` as session `id` (its own id replaced), its project
/// moved to `project`.
fn plant_claude_session(home: &std::path::Path, id: &str, project: &std::path::Path) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../volee-history/tests/fixtures/home/.claude/projects/-tmp-work/{CLAUDE_SESSION}.jsonl"
    ));
    let dir = home.join(".claude/projects/-tmp-work");
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(fixture)
        .unwrap()
        .replace(
            "/tmp/volee-test-yFo20s/work",
            &project.display().to_string(),
        )
        .replace(CLAUDE_SESSION, id);
    std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
}

/// The plugin pane lists the past sessions of the daemon's index under the live agents, filters
/// them as you type, and Enter on one resumes it in this zellij session: `volee sessions resume
/// --host zellij:SESSION` run by the plugin (with zellij's environment) starts the harness's
/// resume line in the session's project, a live agent holding that session. A session whose
/// resume fails says why on the pane's message line.
#[test]
fn the_plugin_pane_lists_past_sessions_and_enter_resumes_one() {
    use crate::hooks::write_stand_in;

    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let Some(wasm) = plugin_wasm() else {
        return;
    };
    // A stand-in `claude` that records its arguments where it runs, and `volee` beside it: what
    // the plugin runs finds both on zellij's PATH (the test's, `start_zellij_with`).
    write_stand_in(
        &mut env,
        "claude",
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo \"2.1.332 (Claude Code)\"; exit 0; fi\n\
         printf '%s\\n' \"$@\" > \"$PWD/claude-args\"\nexec sleep 600\n",
    );
    std::os::unix::fs::symlink(&env.bin, env.root().join("fakebin/volee")).unwrap();
    // The real transcript, its project a directory that exists here; the same under another id
    // whose project is gone.
    let work = env.work();
    plant_claude_session(&env.home(), CLAUDE_SESSION, &work);
    let gone_id = "e5e5e5e5-742d-4002-a1ab-379c1b005cb4";
    plant_claude_session(&env.home(), gone_id, &env.root().join("gone"));

    let vars = start_zellij_with(&mut env, &bin, "vr", Some(&wasm));
    let kill = KillSession::new(&bin, "vr", vars);
    let window = zellij_window(&env, "vr");
    // The daemon watches a zellij session that holds an agent.
    env.ok([
        "launch",
        "--host",
        "zellij:vr",
        "--name",
        "front",
        "--",
        "sleep",
        "300",
    ]);
    let url = format!("file:{}", env.root().join("zj/volee.wasm").display());
    let open_pane = || {
        let out = kill.zellij(&["action", "launch-or-focus-plugin", "--floating", &url]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let screen = || env.tmux(&["capture-pane", "-p", "-t", &window]);
    let until = |what: &str, ok: &dyn Fn(&str) -> bool| {
        wait_until(
            what,
            Duration::from_secs(20),
            || {
                let s = screen();
                ok(&s).then_some(s)
            },
            || format!("{}\n{}", screen(), env.log_tail()),
        )
    };
    let past_row = |s: &str, id: &str| {
        s.lines()
            .find(|l| l.contains("↺ past") && l.contains(&id[..8]))
            .map(str::to_string)
    };
    // The agent's row in the pane (its tab's name holds its name too).
    let front_row = |s: &str| {
        s.lines()
            .position(|l| l.contains(" front ") && l.contains("generic"))
    };
    open_pane();
    let shown = until("the past session listed under the agent", &|s| {
        past_row(s, CLAUDE_SESSION).is_some() && front_row(s).is_some()
    });
    let row = past_row(&shown, CLAUDE_SESSION).unwrap();
    assert!(
        row.contains("claude") && row.contains("work") && row.contains("conformance"),
        "{row}"
    );
    let past_at = shown
        .lines()
        .position(|l| l.contains(&CLAUDE_SESSION[..8]))
        .unwrap();
    assert!(front_row(&shown) < Some(past_at), "agents first:\n{shown}");

    // Typing filters: only the session whose id starts so.
    env.tmux(&["send-keys", "-t", &window, "-l", "d4a8"]);
    until("filtered to the past session", &|s| {
        s.contains("filter: d4a8_")
            && past_row(s, CLAUDE_SESSION).is_some()
            && front_row(s).is_none()
            && past_row(s, gone_id).is_none()
    });
    env.tmux(&["send-keys", "-t", &window, "Enter"]);
    let resumed = wait_until(
        "a live agent holds the resumed session",
        Duration::from_secs(20),
        || {
            let ls: serde_json::Value = serde_json::from_str(&env.ok(["ls", "--json"])).ok()?;
            ls.as_array()?
                .iter()
                .find(|a| a["session_id"] == CLAUDE_SESSION)
                .cloned()
        },
        || {
            format!(
                "{}\n{}\n{}\n{}",
                env.ok(["ls"]),
                screen(),
                env.log_tail(),
                zellij_log_tail(&env)
            )
        },
    );
    assert_eq!(resumed["harness"], "claude", "{resumed}");
    assert_eq!(resumed["cwd"], work.display().to_string(), "{resumed}");
    assert_eq!(resumed["host"]["kind"], "zellij", "{resumed}");
    assert_eq!(resumed["host"]["session"], "vr", "{resumed}");
    let args = wait_until(
        "the resume line ran in the session's project",
        Duration::from_secs(10),
        || std::fs::read_to_string(work.join("claude-args")).ok(),
        || "no claude-args yet".into(),
    );
    let args: Vec<&str> = args.lines().collect();
    assert!(
        args.windows(2).any(|w| w == ["--resume", CLAUDE_SESSION]),
        "{args:?}"
    );

    // Shown again, the session is its live agent, no longer a past one; the other one's resume
    // fails (its project is gone), and the pane says why.
    open_pane();
    until("the pane again, the session live", &|s| {
        past_row(s, gone_id).is_some() && past_row(s, CLAUDE_SESSION).is_none()
    });
    env.tmux(&["send-keys", "-t", &window, "-l", "e5e5"]);
    until("filtered to the other session", &|s| {
        s.contains("filter: e5e5_") && past_row(s, gone_id).is_some()
    });
    env.tmux(&["send-keys", "-t", &window, "Enter"]);
    let failed = until("the failure on the pane's message line", &|s| {
        s.contains("resume failed (")
    });
    assert!(failed.contains("project directory"), "{failed}");
}

/// A killed zellij session's agents are stopped with their host gone and restorable; `volee
/// restore` without a zellij host skips them saying how, and `--host zellij:S` brings them back,
/// with their ids and names, each in a new tab of session S (issue 22).
#[test]
fn a_killed_zellij_sessions_agents_are_restored_into_another_session() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let vars = start_zellij(&mut env, &bin, "vk");
    let killed = KillSession::new(&bin, "vk", vars);
    let script = "echo ready; exec sleep 300";
    let ids: Vec<String> = ["one", "two"]
        .iter()
        .map(|name| {
            env.ok([
                "launch",
                "--host",
                "zellij:vk",
                "--name",
                name,
                "--",
                "sh",
                "-c",
                script,
            ])
        })
        .collect();
    for id in &ids {
        env.wait_state(id, "idle", 20);
    }
    let out = killed.zellij(&["kill-session", "vk"]);
    let out = if out.status.success() {
        out
    } else {
        killed
            .command()
            .args(["kill-session", "vk"])
            .output()
            .unwrap()
    };
    assert!(out.status.success(), "{out:?}");
    for id in &ids {
        let v = wait_until(
            "stopped, its host gone, restorable",
            Duration::from_secs(15),
            || {
                let v = env.agent(id);
                (v["state"] == "stopped" && v["restorable"] == true).then_some(v)
            },
            || format!("{}\n{}", env.agent(id), env.log_tail()),
        );
        assert!(v["evidence"].as_str().unwrap().contains("gone"), "{v}");
    }
    // Without a zellij session to go to: skipped, saying how.
    let plan = env.ok(["restore", "--all", "--dry-run"]);
    assert_eq!(plan.matches("skip").count(), 2, "{plan}");
    assert!(plan.contains("--host zellij"), "{plan}");

    let vars = start_zellij(&mut env, &bin, "vn");
    let _kill = KillSession::new(&bin, "vn", vars);
    let plan = env.ok(["restore", "--all", "--host", "zellij:vn", "--dry-run"]);
    assert_eq!(plan.matches("restore ").count(), 2, "{plan}");
    assert!(plan.contains("vn:one") && plan.contains("vn:two"), "{plan}");
    let done = env.ok(["restore", "--all", "--host", "zellij:vn"]);
    assert_eq!(done.matches("restored ").count(), 2, "{done}");
    let mut tabs = std::collections::BTreeSet::new();
    for (id, name) in ids.iter().zip(["one", "two"]) {
        let v = env.agent(id);
        assert_eq!(v["name"], name, "{v}");
        assert_eq!(v["host"]["kind"], "zellij", "{v}");
        assert_eq!(v["host"]["session"], "vn", "{v}");
        assert!(tabs.insert(v["host"]["tab"].to_string()), "a tab each: {v}");
        env.wait_state(id, "idle", 20);
    }
    let all: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(["ls", "--all", "--json"])).unwrap();
    assert_eq!(all.len(), 2, "no new agents: {all:#?}");
}
