//! zellij hosts, end to end: a real zellij 0.45.1 (from PATH, `VOLEE_ZELLIJ`, or the prebuilt
//! `../shared/bin/zellij-0.45.1`) runs attached inside the test's private tmux, with its own socket,
//! config, cache and data directories. `volee launch --host zellij:SESSION` opens a generic agent
//! in a new tab; without volee's plugin loaded, the daemon watches the session with
//! `zellij action list-panes --json` and `zellij subscribe` (the fallback every user without the
//! plugin gets): title, screen text (a `(y/n)` prompt → needs_you), `volee send`, exit status,
//! `volee stop`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use volee_test_support::{wait_until, TestEnv};

use crate::setup;

/// The zellij binary, or None (a failure under CI).
pub fn zellij_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VOLEE_ZELLIJ").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if volee_test_support::on_path("zellij") {
        return Some(PathBuf::from("zellij"));
    }
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bin/zellij-0.45.1");
    if shared.is_file() {
        return Some(shared);
    }
    if std::env::var_os("CI").is_some() {
        panic!("zellij is not installed (CI is set, so this fails): put it on PATH or set VOLEE_ZELLIJ");
    }
    eprintln!("SKIPPED: zellij is not installed");
    None
}

/// A zellij session `name`, attached in a window of the test's tmux, with isolated directories;
/// the variables volee must pass on are added to the test's environment.
pub fn start_zellij(env: &mut TestEnv, bin: &Path, name: &str) -> Vec<(String, String)> {
    start_zellij_with(env, bin, name, None)
}

/// The release build of volee's zellij plugin (scripts/test builds it before the tests), or None
/// (a failure under CI).
pub fn plugin_wasm() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let candidates = [
        target.join("wasm32-wasip1/release/volee_zellij_plugin.wasm"),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../zellij-plugin/target/wasm32-wasip1/release/volee_zellij_plugin.wasm"),
    ];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Some(std::fs::canonicalize(found).unwrap());
    }
    let why = "volee's zellij plugin is not built (cargo build --release --manifest-path zellij-plugin/Cargo.toml --target wasm32-wasip1)";
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// [`start_zellij`], with volee's plugin loaded in the background (`load_plugins`) and its
/// permissions granted ahead (`permissions.kdl`, keyed by the bare path).
pub fn start_zellij_with(
    env: &mut TestEnv,
    bin: &Path,
    name: &str,
    plugin: Option<&Path>,
) -> Vec<(String, String)> {
    let root = env.root().join("zj");
    let dirs = ["s", "config", "cache", "data", "tmp"].map(|d| root.join(d));
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut config = "show_startup_tips false\nshow_release_notes false\nsession_serialization false\ndefault_shell \"sh\"\n".to_string();
    if let Some(wasm) = plugin {
        // A copy inside the test's world: the permissions are keyed by its path.
        let copy = root.join("volee.wasm");
        std::fs::copy(wasm, &copy).unwrap();
        config.push_str(&format!(
            "load_plugins {{\n    \"file:{}\"\n}}\n",
            copy.display()
        ));
        std::fs::create_dir_all(dirs[2].join("zellij")).unwrap();
        std::fs::write(
            dirs[2].join("zellij/permissions.kdl"),
            format!(
                "\"{}\" {{\n    ReadApplicationState\n    ChangeApplicationState\n    ReadPaneContents\n    ReadCliPipes\n    RunCommands\n    OpenTerminalsOrPlugins\n}}\n",
                copy.display()
            ),
        )
        .unwrap();
    }
    std::fs::write(dirs[1].join("config.kdl"), config).unwrap();
    let vars: Vec<(String, String)> = [
        ("ZELLIJ_SOCKET_DIR", &dirs[0]),
        ("ZELLIJ_CONFIG_DIR", &dirs[1]),
        ("XDG_CACHE_HOME", &dirs[2]),
        ("XDG_DATA_HOME", &dirs[3]),
        ("TMPDIR", &dirs[4]),
    ]
    .map(|(k, v)| (k.to_string(), v.display().to_string()))
    .to_vec();
    let bin = std::fs::canonicalize(bin)
        .or_else(|_| which(bin))
        .unwrap_or_else(|_| bin.to_path_buf());
    let mut command = vec!["env".to_string(), "TERM=xterm-256color".into()];
    command.extend(vars.iter().map(|(k, v)| format!("{k}={v}")));
    command.extend([bin.display().to_string(), "--session".into(), name.into()]);
    let mut args = vec!["new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "main:"];
    args.extend(command.iter().map(String::as_str));
    let window = env.tmux(&args).trim().to_string();
    // zellij 0.45.1's server panics when a command-line client (`zellij action …`) connects
    // while the session is still being set up: wait until its screen is drawn.
    wait_until(
        "zellij draws its screen",
        Duration::from_secs(20),
        || {
            env.tmux(&["capture-pane", "-p", "-t", &window])
                .contains("Tab #1")
                .then_some(())
        },
        || env.tmux(&["capture-pane", "-p", "-t", &window]),
    );
    env.extra_env.extend(vars.iter().cloned());
    env.extra_env
        .push(("VOLEE_ZELLIJ".into(), bin.display().to_string()));
    // Up when it lists its panes.
    let zellij = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&bin);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        cmd.args(["--session", name]).args(args).output().unwrap()
    };
    wait_until(
        "zellij is up",
        Duration::from_secs(20),
        || {
            let out = zellij(&["action", "list-panes", "--json", "--all"]);
            (out.status.success()
                && serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok())
            .then_some(())
        },
        || String::from_utf8_lossy(&zellij(&["list-sessions"]).stdout).into_owned(),
    );
    vars
}

fn which(bin: &Path) -> std::io::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
        .ok_or_else(|| std::io::Error::other("not on PATH"))
}

/// A test's zellij session: runs zellij commands against it, and ends it (its server and panes)
/// when the test ends, however it ends.
struct KillSession {
    bin: PathBuf,
    name: String,
    vars: Vec<(String, String)>,
}

impl KillSession {
    fn new(bin: &Path, name: &str, vars: Vec<(String, String)>) -> KillSession {
        KillSession {
            bin: std::fs::canonicalize(bin)
                .or_else(|_| which(bin))
                .unwrap_or(bin.to_path_buf()),
            name: name.into(),
            vars,
        }
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.bin);
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    /// `zellij --session NAME ARGS…`.
    fn zellij(&self, args: &[&str]) -> std::process::Output {
        self.command()
            .args(["--session", &self.name])
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for KillSession {
    fn drop(&mut self) {
        let _ = self.command().args(["kill-session", &self.name]).output();
    }
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
    assert!(env.ok(["peek", &id]).contains("Continue? (y/n)"));
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
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let Some(wasm) = plugin_wasm() else {
        return;
    };
    let vars = start_zellij_with(&mut env, &bin, "vp", Some(&wasm));
    let _kill = KillSession::new(&bin, "vp", vars);
    // A rings its bell after a while; B, launched after it, takes the active tab.
    let a = env.ok([
        "launch",
        "--host",
        "zellij:vp",
        "--name",
        "ringer",
        "--",
        "sh",
        "-c",
        "echo ready; sleep 4; printf '\\a'; sleep 300",
    ]);
    env.ok([
        "launch",
        "--host",
        "zellij:vp",
        "--name",
        "front",
        "--",
        "sleep",
        "300",
    ]);
    // zellij reports a bell only for a tab that is not active, and only to a plugin.
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
    assert!(
        env.log_tail().contains("volee plugin"),
        "the plugin's stream carried it: {}",
        env.log_tail()
    );
}
