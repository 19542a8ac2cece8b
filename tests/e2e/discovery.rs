//! Discovery: harness processes started outside volee — in a tmux pane and on a bare pty — appear
//! in `volee ls` with `origin: "discovered"` and their host; volee's own are never listed twice;
//! a vanished one ends as `stopped`.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use volee_test_support::{require, wait_until};

use crate::setup;

fn agents(env: &volee_test_support::TestEnv) -> Vec<serde_json::Value> {
    let text = env.ok(["ls", "--all", "--rescan", "--json"]);
    serde_json::from_str::<serde_json::Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn processes_started_elsewhere_are_discovered_with_their_host() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    if !require("script", "a bare pty for discovery") {
        return;
    }
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"1s\"\n",
    )
    .unwrap();
    // A program whose process is called `claude` (a shell script: comm is the script's name),
    // installed as a package whose manifest says its version. Run with `--version`, it notes who
    // asked: discovery reads the manifest and never runs what a process's arguments name.
    let bin = env.root().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let package = env
        .root()
        .join("lib/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    std::fs::write(
        package.join("package.json"),
        r#"{"name":"@anthropic-ai/claude-code","version":"2.1.332"}"#,
    )
    .unwrap();
    let asked = env.root().join("asked-version");
    let script = package.join("bin/claude");
    std::fs::write(
        &script,
        format!(
            concat!(
                "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo $PPID >> '{}'; echo '2.1.332 (Claude Code)'; exit 0; }}\n",
                // Like Claude: publish the session in ~/.claude/sessions/<pid>.json.
                "mkdir -p \"$HOME/.claude/sessions\"\n",
                "printf '{{\"pid\":%s,\"sessionId\":\"disc-%s\",\"status\":\"idle\"}}' $$ $$ > \"$HOME/.claude/sessions/$$.json\"\n",
                "while :; do sleep 1; done\n"
            ),
            asked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let claude = bin.join("claude");
    std::os::unix::fs::symlink(&script, &claude).unwrap();
    env.extra_env.push((
        "PATH".into(),
        format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    ));

    // 1. In a tmux window the user opened themselves.
    let pane = env.open_window(&claude);
    // 2. On a bare pty, outside any multiplexer.
    let bare = Command::new("script")
        .args(["-qfc", claude.to_str().unwrap(), "/dev/null"])
        .env_remove("TMUX")
        .env("HOME", env.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let _bare = KillOnDrop {
        child: bare,
        pattern: claude.display().to_string(),
    };
    // 3. One volee launched: listed once, as launched.
    let launched = env.ok(["launch", "--harness", "claude", "--host", "tmux:main", "hi"]);

    let found = wait_until(
        "both outside processes are discovered",
        Duration::from_secs(10),
        || {
            let all = agents(&env);
            let discovered: Vec<serde_json::Value> = all
                .iter()
                .filter(|a| a["origin"] == "discovered" && a["harness"] == "claude")
                .cloned()
                .collect();
            let in_pane = discovered
                .iter()
                .any(|a| a["host"]["pane"] == pane.as_str());
            let on_tty = discovered.iter().any(|a| a["host"]["kind"] == "tty");
            (in_pane && on_tty).then_some(all)
        },
        || env.ok(["ls", "--all", "--json"]),
    );
    let launched_entries: Vec<&serde_json::Value> = found
        .iter()
        .filter(|a| {
            a["id"] == launched.as_str()
                || a["host"]["pane"] == env.agent(&launched)["host"]["pane"]
        })
        .collect();
    assert_eq!(
        launched_entries.len(),
        1,
        "volee's own agent is listed once: {found:?}"
    );
    assert_eq!(launched_entries[0]["origin"], "launched");

    // Identity and state from what the harness publishes.
    let pane_agent = found
        .iter()
        .find(|a| a["host"]["pane"] == pane.as_str())
        .unwrap()
        .clone();
    let pid = pane_agent["pid"].as_u64().unwrap();
    assert_eq!(
        pane_agent["session_id"],
        format!("disc-{pid}").as_str(),
        "{pane_agent}"
    );
    // Its version is learnt off the daemon's loop: generic rules until then.
    let versioned = wait_until(
        "the discovered agent's version",
        Duration::from_secs(10),
        || {
            let a = env.agent(pane_agent["id"].as_str().unwrap());
            (!a["harness_version"].is_null()).then_some(a)
        },
        || env.agent(pane_agent["id"].as_str().unwrap()).to_string(),
    );
    assert_eq!(versioned["harness_version"], "2.1.332", "{versioned}");
    assert_eq!(versioned["profile_fit"], "measured");
    // Only `volee launch` asked (the user's own command); the daemon ran nothing.
    let daemon = env.daemon_pid().unwrap().to_string();
    let askers = std::fs::read_to_string(&asked).unwrap_or_default();
    assert!(
        !askers.lines().any(|ppid| ppid == daemon),
        "the daemon ({daemon}) ran the found script: {askers:?}"
    );
    wait_until(
        "the discovered agent's state comes from its status file",
        Duration::from_secs(5),
        || {
            (env.agent(pane_agent["id"].as_str().unwrap())["state_source"] == "listing")
                .then_some(())
        },
        || env.agent(pane_agent["id"].as_str().unwrap()).to_string(),
    );
    // A hook from a session volee did not launch (volee's hooks file is read by every session
    // of some harnesses) has no agent id: it reaches the discovered agent whose published
    // session id it names, and no other.
    let hook = |session: &str| {
        use std::io::Write;
        let mut child = env
            .volee(["hook", "claude", "PermissionRequest"])
            .env_remove("VOLEE_AGENT_ID")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let payload =
            format!(r#"{{"session_id":"{session}","hook_event_name":"PermissionRequest"}}"#);
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    };
    let pane_id = pane_agent["id"].as_str().unwrap();
    hook("someone-else");
    hook(&format!("disc-{pid}"));
    wait_until(
        "the agent-less hook reaches the discovered agent by its session id",
        Duration::from_secs(5),
        || {
            let a = env.agent(pane_id);
            (a["state"] == "needs_you" && a["state_source"] == "hooks").then_some(())
        },
        || env.agent(pane_id).to_string(),
    );
    let others: Vec<Value> = agents(&env)
        .into_iter()
        .filter(|a| a["id"] != pane_id && a["state_source"] == "hooks")
        .collect();
    assert!(
        others.is_empty(),
        "the hook reached another agent: {others:?}"
    );

    // The pane one goes away: stopped, "process gone".
    let in_pane = found
        .iter()
        .find(|a| a["host"]["pane"] == pane.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.tmux(&["kill-pane", "-t", &pane]);
    wait_until(
        "the vanished process is stopped",
        Duration::from_secs(10),
        || (env.agent(&in_pane)["state"] == "stopped").then_some(()),
        || env.agent(&in_pane).to_string(),
    );
    assert_eq!(env.agent(&in_pane)["evidence"], "process gone");
}

/// Ends the `script` process and the program it runs on its own pty (which `script` puts in a
/// session of its own, out of reach of a signal to `script`'s group).
struct KillOnDrop {
    child: std::process::Child,
    pattern: String,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&self.pattern) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Another user's process named `claude` is theirs: a root daemon never runs the program it names
/// (`--version` ran it as root), never lists it, never signals it. The user's own `claude`, beside
/// it, is discovered as usual — the scans did look.
#[test]
fn another_users_harness_process_is_never_run_nor_listed() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !volee_test_support::require_root("a process of a second Unix user")
        || !require("setpriv", "a process of a second Unix user")
        || !require("useradd", "a second Unix user")
    {
        return;
    }
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"1s\"\n",
    )
    .unwrap();
    let user = volee_test_support::TempUser::create();
    // Outside the test's private directory, so the other user can run the script; the marker
    // directory takes a note from whoever runs it with `--version`.
    let shared = tempfile::Builder::new()
        .prefix("volee-foreign-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let notes = shared.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let marker = notes.join("ran-version");
    let script = |dir: &str| {
        let path = shared.path().join(dir).join("claude");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::set_permissions(
            path.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$1\" = --version ] && {{ id -u >> '{}'; echo '2.1.332 (Claude Code)'; exit 0; }}\nwhile :; do sleep 1; done\n",
                marker.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let theirs = script("theirs");
    let mine = script("mine");

    // Their `claude`, in a window of the root user's tmux (so its environment names the server).
    let uid = format!("--reuid={}", user.uid);
    let gid = format!("--regid={}", user.gid);
    let their_pane = env
        .tmux(&[
            "new-window",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-t",
            "main:",
            "setpriv",
            &uid,
            &gid,
            "--clear-groups",
            "--",
            theirs.to_str().unwrap(),
        ])
        .trim()
        .to_string();
    let their_pid = wait_until(
        "the other user's claude runs",
        Duration::from_secs(10),
        || {
            user.pids().into_iter().find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default()
                    == "claude\n"
            })
        },
        || format!("{:?}", user.pids()),
    );
    let my_pane = env.open_window(&mine);

    // Two scans (the first `ls` starts the daemon; each `--rescan` reads every process).
    let mine_found = wait_until(
        "the user's own claude is discovered",
        Duration::from_secs(10),
        || {
            agents(&env)
                .into_iter()
                .find(|a| a["origin"] == "discovered" && a["host"]["pane"] == my_pane.as_str())
        },
        || env.ok(["ls", "--all", "--json"]),
    );
    let all = agents(&env);
    // A version task would have run by now (it starts at discovery and has 3 s).
    std::thread::sleep(Duration::from_secs(4));
    let all_after = agents(&env);
    for list in [&all, &all_after] {
        let foreign: Vec<&Value> = list
            .iter()
            .filter(|a| {
                a["pid"].as_i64() == Some(i64::from(their_pid))
                    || a["host"]["pane"] == their_pane.as_str()
            })
            .collect();
        assert!(
            foreign.is_empty(),
            "another user's process listed: {foreign:?}"
        );
    }
    assert_eq!(mine_found["harness"], "claude");
    // Nobody ran either script with `--version`: not theirs (the old root daemon did), not ours.
    assert!(
        !marker.exists(),
        "a found claude was run with --version, by uid {:?}",
        std::fs::read_to_string(&marker)
    );
    // Their process was left alone.
    assert!(
        std::path::Path::new(&format!("/proc/{their_pid}")).exists(),
        "the other user's process was ended"
    );
    // Stopping by its pid or pane finds nothing to stop.
    let out = env.run(["stop", &their_pid.to_string()]);
    assert!(!out.status.success(), "stop found another user's process");
    env.tmux(&["kill-pane", "-t", &their_pane]);
    env.tmux(&["kill-pane", "-t", &my_pane]);
    drop(user);
}

/// A harness that relaunches its inner process (Gemini CLI and Qwen Code restart it for more
/// heap or after a settings change; the launcher waits for it) stays the same agent: same id,
/// moved to the new process, never "process gone" and found again as a new agent.
#[test]
fn a_harness_that_relaunches_itself_keeps_its_agent_id() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"1s\"\n",
    )
    .unwrap();
    // A stand-in named `qwen` (comm is the script's name): the launcher runs an inner process,
    // and when that one exits (told to, by a file) starts a second one, as a relaunch does —
    // after a gap longer than a scan interval, so scans see no inner process for a while.
    let dir = env.root().join("relaunch");
    std::fs::create_dir_all(&dir).unwrap();
    let qwen = dir.join("qwen");
    let go = dir.join("relaunch-now");
    std::fs::write(
        &qwen,
        format!(
            concat!(
                "#!/bin/sh\n",
                "case \"$1\" in\n",
                "  --inner-1) while [ ! -e '{go}' ]; do sleep 0.05; done; exit 0 ;;\n",
                "  --inner-2) while :; do sleep 1; done ;;\n",
                "esac\n",
                // The gap a loaded machine may leave before the next inner process runs.
                "\"$0\" --inner-1\n",
                "sleep 2\n",
                "\"$0\" --inner-2\n",
            ),
            go = go.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&qwen, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pane = env.open_window(&qwen);
    let in_pane = |env: &volee_test_support::TestEnv| -> Vec<Value> {
        agents(env)
            .into_iter()
            .filter(|a| a["origin"] == "discovered" && a["host"]["pane"] == pane.as_str())
            .collect()
    };
    let inner_1 = |a: &Value| {
        let pid = a["pid"].as_i64().unwrap_or(0);
        std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .contains("--inner-1")
    };
    let first = wait_until(
        "the harness is discovered at its inner process",
        Duration::from_secs(10),
        || in_pane(&env).into_iter().find(&inner_1),
        || env.ok(["ls", "--all", "--json"]),
    );
    let id = first["id"].as_str().unwrap().to_string();
    let old_pid = first["pid"].as_i64().unwrap();

    // The inner process exits; the launcher starts the next one.
    std::fs::write(&go, "").unwrap();
    volee_test_support::wait_process_gone(
        "the first inner process",
        old_pid,
        Duration::from_secs(5),
    );
    // (In the gap it may stand at the launcher, the harness's only process then.)
    let runs_inner_2 = |pid: i64| {
        std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .contains("--inner-2")
    };
    let moved = wait_until(
        "the agent follows its harness to the relaunched process",
        Duration::from_secs(15),
        || {
            let a = env.agent(&id);
            (a["state"] != "stopped" && a["pid"].as_i64().is_some_and(runs_inner_2)).then_some(a)
        },
        || env.ok(["ls", "--all", "--json"]),
    );
    assert_ne!(moved["pid"].as_i64(), Some(old_pid));
    // A few scans later: still one live agent in the pane, the same one.
    std::thread::sleep(Duration::from_secs(2));
    let agents_now = in_pane(&env);
    assert_eq!(
        agents_now.len(),
        1,
        "one agent in the pane, not an ended one and a new one: {agents_now:?}"
    );
    assert_eq!(agents_now[0]["id"], id.as_str());
    assert_ne!(agents_now[0]["state"], "stopped", "{agents_now:?}");
    env.tmux(&["kill-pane", "-t", &pane]);
    wait_until(
        "the agent ends with its pane",
        Duration::from_secs(10),
        || (env.agent(&id)["state"] == "stopped").then_some(()),
        || env.agent(&id).to_string(),
    );
}

/// A discovered agent's stored pid is rechecked before it is signalled: pids are reused. Here
/// the registry (as a daemon restart finds it) names pids that now belong to another user's
/// `claude` and to an unrelated process of the user's; with discovery off, nothing rescans them.
/// The first agent ends when the daemon loads it, the second when `volee stop` rechecks its pid,
/// both as "process gone"; neither process is signalled.
#[test]
fn stop_never_signals_a_reused_pid() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !volee_test_support::require_root("a process of a second Unix user")
        || !require("setpriv", "a process of a second Unix user")
        || !require("useradd", "a second Unix user")
    {
        return;
    }
    let config = env.volee_home().join("config/config.toml");
    std::fs::write(&config, "discovery_interval = \"1s\"\n").unwrap();
    let user = volee_test_support::TempUser::create();
    let shared = tempfile::Builder::new()
        .prefix("volee-reuse-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let claude = shared.path().join("claude");
    std::fs::write(&claude, "#!/bin/sh\nwhile :; do sleep 1; done\n").unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Two agents discovered as usual.
    let mut panes = Vec::new();
    for _ in 0..2 {
        panes.push(env.open_window(&claude));
    }
    let ids: Vec<String> = wait_until(
        "both claude processes are discovered",
        Duration::from_secs(10),
        || {
            let ids: Vec<String> = panes
                .iter()
                .filter_map(|pane| {
                    agents(&env)
                        .into_iter()
                        .find(|a| a["origin"] == "discovered" && a["host"]["pane"] == pane.as_str())
                        .map(|a| a["id"].as_str().unwrap().to_string())
                })
                .collect();
            (ids.len() == 2).then_some(ids)
        },
        || env.ok(["ls", "--all", "--json"]),
    );
    env.ok(["daemon", "stop"]);
    std::fs::write(&config, "discovery_interval = \"off\"\n").unwrap();

    // The pids are reused meanwhile: by another user's claude, by a process of the user's own.
    let mut theirs = user
        .command(claude.to_str().unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut mine = Command::new("sleep").arg("600").spawn().unwrap();
    let reused = [i64::from(theirs.id()), i64::from(mine.id())];
    let registry = env.volee_home().join("state/agents.json");
    let mut file: Value =
        serde_json::from_str(&std::fs::read_to_string(&registry).unwrap()).unwrap();
    for agent in file["agents"].as_array_mut().unwrap() {
        if let Some(i) = ids.iter().position(|id| agent["id"] == id.as_str()) {
            agent["pid"] = reused[i].into();
        }
    }
    std::fs::write(&registry, serde_json::to_string(&file).unwrap()).unwrap();

    // The daemon starts again: the agent whose pid is another user's ends at once, and a stop
    // of it is refused; the other one's pid is the user's, so stop looks closer before it acts.
    let first = env.agent(&ids[0]);
    assert_eq!(first["state"], "stopped", "{first}");
    let out = env.run(["stop", &ids[0]]);
    assert!(!out.status.success(), "stop of an ended agent succeeded");
    env.ok(["stop", &ids[1]]);
    for id in &ids {
        wait_until(
            "the agent whose pid was reused has ended",
            Duration::from_secs(5),
            || {
                let a = env.agent(id);
                (a["state"] == "stopped" && a["evidence"] == "process gone").then_some(())
            },
            || env.agent(id).to_string(),
        );
    }
    // Past the stop's SIGKILL escalation: both processes live on, unsignalled.
    std::thread::sleep(Duration::from_millis(3500));
    assert!(
        theirs.try_wait().unwrap().is_none(),
        "the other user's process was signalled"
    );
    assert!(
        mine.try_wait().unwrap().is_none(),
        "the unrelated process was signalled"
    );
    let _ = mine.kill();
    let _ = mine.wait();
    drop(user);
    let _ = theirs.wait();
    for pane in &panes {
        env.tmux(&["kill-pane", "-t", pane]);
    }
}

/// A harness found with a prompt already on its screen: the pane is read when volee starts
/// watching it, not only after its next output.
#[test]
fn a_discovered_agent_waiting_at_a_prompt_needs_you() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"1s\"\n",
    )
    .unwrap();
    env.ok(["ls"]);
    let bin = env.root().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\nprintf 'Proceed? [y/N] '; read x; sleep 60\n",
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pane = env.open_window(&claude);
    let found = wait_until(
        "the waiting agent is discovered and needs you",
        Duration::from_secs(15),
        || {
            agents(&env)
                .into_iter()
                .find(|a| a["host"]["pane"] == pane.as_str() && a["state"] == "needs_you")
        },
        || format!("{:#?}\n{}", agents(&env), env.log_tail()),
    );
    assert_eq!(found["origin"], "discovered", "{found}");
    assert_eq!(found["state_source"], "screen", "{found}");
}
