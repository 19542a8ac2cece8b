//! The tmux front end: tmux-init/down leave the user's settings as they were, the status line is
//! pushed, hostile titles render literally, the picker and attach bring you to the agent.

use std::process::{Command, Stdio};
use std::time::Duration;

use volee_test_support::{wait_until, TestEnv};

use crate::{launch_sh, setup};

fn global_options(env: &TestEnv) -> String {
    env.tmux(&["show-options", "-g"])
}

fn prefix_keys(env: &TestEnv) -> String {
    env.tmux(&["list-keys", "-T", "prefix"])
}

#[test]
fn tmux_init_is_idempotent_and_down_restores_everything() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    // The user's own settings: a status-right with the placeholder and a binding on `a`.
    env.tmux(&[
        "set-option",
        "-g",
        "status-right",
        "#{volee_status} | %H:%M",
    ]);
    env.tmux(&[
        "bind-key",
        "-T",
        "prefix",
        "a",
        "display-message",
        "users-own-a",
    ]);
    let options_before = global_options(&env);
    let keys_before = prefix_keys(&env);

    let init = env.run(["tmux-init"]);
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let warned = String::from_utf8_lossy(&init.stderr).to_string();
    assert!(warned.contains("prefix a is already bound"), "{warned}");
    env.ok(["tmux-init"]);

    let status_right = env.tmux(&["show-option", "-gv", "status-right"]);
    assert_eq!(status_right.trim_end(), "#{@volee-status} | %H:%M");
    // The user's `a` is untouched; volee's next and launch keys are bound.
    assert!(env
        .tmux(&["list-keys", "-T", "prefix", "a"])
        .contains("users-own-a"));
    assert!(env
        .tmux(&["list-keys", "-T", "prefix", "A"])
        .contains("next"));
    assert!(env
        .tmux(&["list-keys", "-T", "prefix", "V"])
        .contains("command-prompt"));

    env.ok(["down"]);
    assert_eq!(global_options(&env), options_before);
    assert_eq!(prefix_keys(&env), keys_before);
    assert!(
        env.daemon_pid().is_none() || {
            let pid = env.daemon_pid().unwrap();
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err()
        }
    );
}

#[test]
fn status_line_is_pushed_with_counts() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    env.ok(["tmux-init"]);
    let status_right = env.tmux(&["show-option", "-gv", "status-right"]);
    assert!(
        status_right.starts_with("#{@volee-status}"),
        "{status_right}"
    );

    let beller = launch_sh(&env, "beller", "echo hi; printf '\\a'; exec sleep 60");
    let _quiet = launch_sh(&env, "quiet", "exec sleep 60");
    env.wait_state(&beller, "needs_you", 8);
    let status = wait_until(
        "the status option shows one agent needing you and one idle",
        Duration::from_secs(8),
        || {
            let s = env.tmux(&["show-option", "-gv", "@volee-status"]);
            (s.contains("1 needs you") && s.contains("1 idle")).then_some(s)
        },
        || env.tmux(&["show-option", "-gv", "@volee-status"]),
    );
    // needs_you comes first.
    assert!(
        status.find("needs you").unwrap() < status.find("idle").unwrap(),
        "{status}"
    );
    let plain = env.ok(["status"]);
    assert!(plain.contains("1 needs_you"), "{plain}");
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(["status", "--format", "json"])).unwrap();
    assert_eq!(json["needs_you"], 1);
}

/// A second tmux server whose only pane is a client attached to the private server, so menus and
/// popups (drawn on a client) can be captured as text.
pub(crate) struct Viewer {
    socket: std::path::PathBuf,
}

impl Viewer {
    pub(crate) fn start(env: &TestEnv) -> Viewer {
        let attach = format!(
            "TMUX_TMPDIR='{}' tmux -S '{}' attach -t main",
            env.tmux_tmpdir().display(),
            env.tmux_socket().display()
        );
        let viewer = Viewer::run(env, &attach);
        wait_until(
            "a real client is attached to the private server",
            Duration::from_secs(5),
            || viewer_client(env),
            || env.tmux(&["list-clients"]),
        );
        viewer
    }

    /// A terminal whose shell runs `command` (e.g. a tmux client that starts the private server
    /// with a config file), without waiting for anything.
    pub(crate) fn run(env: &TestEnv, command: &str) -> Viewer {
        let socket = env.root().join("viewer.sock");
        let status = Command::new("tmux")
            .args([
                "-S",
                socket.to_str().unwrap(),
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "150",
                "-y",
                "40",
            ])
            .arg(command)
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(status.success());
        Viewer { socket }
    }

    pub(crate) fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["-S", self.socket.to_str().unwrap(), "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        Command::new("tmux")
            .args(["-S", self.socket.to_str().unwrap(), "send-keys"])
            .args(keys)
            .status()
            .unwrap();
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-S", self.socket.to_str().unwrap(), "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

/// The name of the first non-control client of the private server.
pub(crate) fn viewer_client(env: &TestEnv) -> Option<String> {
    env.tmux(&[
        "list-clients",
        "-F",
        "#{client_control_mode} #{client_name}",
    ])
    .lines()
    .find_map(|l| l.strip_prefix("0 ").map(str::to_string))
}

#[test]
fn hostile_title_renders_literally_and_picker_switches() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    env.ok(["tmux-init"]);
    let pwned = env.root().join("pwned");
    let title = format!("#[fg=red]x#(touch {})", pwned.display());
    let script = format!("printf '\\033]2;%s\\033\\\\' '{title}'; exec sleep 60");
    let evil = launch_sh(&env, "evil", &script);
    let other = launch_sh(&env, "other", "echo hi; printf '\\a'; exec sleep 60");
    wait_until(
        "the hostile title is recorded",
        Duration::from_secs(5),
        || (env.agent(&evil)["title"] == title.as_str()).then_some(()),
        || env.agent(&evil).to_string(),
    );
    env.wait_state(&other, "needs_you", 8);

    let viewer = Viewer::start(&env);
    let client = viewer_client(&env).unwrap();
    env.ok(["pick", "--client", &client]);
    let screen = wait_until(
        "the picker menu is drawn",
        Duration::from_secs(5),
        || {
            // The window list in the status line also names the agents: wait for the menu's keys.
            let s = viewer.capture();
            (s.contains("(1)") && s.contains("(2)")).then_some(s)
        },
        || viewer.capture(),
    );
    // Rendered literally (no style applied, nothing run), bounded to 30 characters (where it is
    // cut depends on the temporary directory's path).
    let shown: String = title.chars().take(20).collect();
    assert!(
        screen.contains(&shown),
        "the title must render literally:\n{screen}"
    );
    // needs_you first: `other` has key 1.
    let other_line = screen.lines().find(|l| l.contains("other")).unwrap();
    assert!(other_line.contains("(1)"), "{screen}");
    viewer.keys(&["1"]);
    let other_pane = env.agent(&other)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until(
        "the picker switched the client to the agent's pane",
        Duration::from_secs(5),
        || {
            let active = env.tmux(&["display-message", "-p", "-c", &client, "#{pane_id}"]);
            (active.trim() == other_pane).then_some(())
        },
        || env.tmux(&["display-message", "-p", "-c", &client, "#{pane_id}"]),
    );
    assert!(!pwned.exists(), "a hostile title ran a command");

    // Jump to next needing you from another window lands on `other` too.
    env.tmux(&["select-window", "-t", "main:0"]);
    env.ok(["next", "--client", &client]);
    let active = env.tmux(&["display-message", "-p", "-c", &client, "#{pane_id}"]);
    assert_eq!(active.trim(), other_pane);
    assert!(!pwned.exists());
}

#[test]
fn attach_from_a_plain_shell_attaches_a_client_to_the_agent() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !volee_test_support::require("script", "attaching through a pty") {
        return;
    }
    let id = launch_sh(&env, "target", "echo target-here; exec sleep 60");
    let pane = env.agent(&id)["host"]["pane"].as_str().unwrap().to_string();
    let mut cmd = Command::new("script");
    cmd.args([
        "-qfc",
        &format!("{} attach {id}", env.bin.display()),
        "/dev/null",
    ]);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("VOLEE_HOME", env.volee_home())
        .env("TMUX_TMPDIR", env.tmux_tmpdir())
        .env("TERM", "xterm-256color")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    use std::os::unix::process::CommandExt;
    let mut child = cmd.spawn().unwrap();
    let client = wait_until(
        "a terminal client is attached (tmux list-clients)",
        Duration::from_secs(8),
        || {
            env.tmux(&[
                "list-clients",
                "-F",
                "#{client_control_mode} #{client_name} #{pane_id}",
            ])
            .lines()
            .find(|l| l.starts_with("0 "))
            .map(str::to_string)
        },
        || env.tmux(&["list-clients"]),
    );
    assert!(
        client.ends_with(&pane),
        "client {client} should show pane {pane}"
    );
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = child.wait();
}

#[test]
fn up_without_a_terminal_prepares_the_volee_session() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let out = env.ok(["up"]);
    assert!(out.contains("volee is up"), "{out}");
    assert!(out.contains("attach with: tmux attach -t volee"), "{out}");
    env.tmux(&["has-session", "-t", "=volee"]);
    assert!(env
        .tmux(&["show-option", "-gv", "status-right"])
        .contains("#{@volee-status}"));
    // Agents launched from outside tmux without --host land in session `volee`.
    let id = env.ok(["launch", "--", "sleep", "60"]);
    assert_eq!(env.agent(&id)["host"]["session"], "volee");
    // A second `up` changes nothing.
    let options = env.tmux(&["show-options", "-g"]);
    env.ok(["up"]);
    assert_eq!(env.tmux(&["show-options", "-g"]), options);
}

#[test]
fn interrupt_sends_the_interrupt_key() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(
        &env,
        "trapper",
        "trap 'echo interrupted' INT; echo ready; while :; do sleep 0.1; done",
    );
    wait_until(
        "the agent is ready",
        Duration::from_secs(5),
        || env.ok(["peek", &id]).contains("ready").then_some(()),
        || env.ok(["peek", &id]),
    );
    env.ok(["interrupt", &id]);
    wait_until(
        "the agent's INT trap ran",
        Duration::from_secs(5),
        || env.ok(["peek", &id]).contains("interrupted").then_some(()),
        || env.ok(["peek", &id]),
    );
    assert_ne!(env.agent(&id)["state"], "failed");
}

#[test]
fn attach_inside_tmux_switches_the_client() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let target = launch_sh(&env, "target", "echo here; exec sleep 60");
    let pane = env.agent(&target)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    let viewer = Viewer::start(&env);
    let client = viewer_client(&env).unwrap();
    // Type `volee attach` into the user's own shell pane (main:0), as a user would.
    env.tmux(&["select-window", "-t", "main:0"]);
    let line = format!("{} attach {target}", env.bin.display());
    env.tmux(&["send-keys", "-t", "main:0", "-l", &line]);
    env.tmux(&["send-keys", "-t", "main:0", "Enter"]);
    wait_until(
        "the client shows the agent's pane",
        Duration::from_secs(8),
        || {
            let active = env.tmux(&["display-message", "-p", "-c", &client, "#{pane_id}"]);
            (active.trim() == pane).then_some(())
        },
        || viewer.capture(),
    );
}

/// `@volee-status-cost on` (the user's option, read at `tmux-init`): the status line shows the
/// day's spend from the usage ledger after the counts — today's priced entries only; a server
/// without the option shows none (issue 23).
#[test]
fn the_status_line_shows_the_days_spend_where_asked() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let state = env.volee_home().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let line = |at: u64, cost: &str| {
        format!(
            r#"{{"at":{at},"agent":"a1","name":"n","harness":"claude","model":"claude-opus-5-5","project":"/p","input":1,"output":1,"cache_read":0,"cache_write":0,"requests":1,"cost_usd":{cost}}}"#
        ) + "\n"
    };
    // Two entries of today, one unpriced, one from three days ago.
    let ledger = [
        line(now - 1000, "0.25"),
        line(now - 500, "0.5"),
        line(now - 400, "null"),
        line(now - 3 * 86_400_000, "7.0"),
    ]
    .concat();
    std::fs::write(state.join("usage.jsonl"), ledger).unwrap();
    env.ok(["tmux-init"]);
    let plain = env.tmux(&["show-option", "-gqv", "@volee-status"]);
    assert!(!plain.contains("today"), "{plain}");
    env.tmux(&["set-option", "-g", "@volee-status-cost", "on"]);
    env.ok(["tmux-init"]);
    wait_until(
        "the day's spend on the status line",
        Duration::from_secs(10),
        || {
            env.tmux(&["show-option", "-gqv", "@volee-status"])
                .contains("$0.7500 today")
                .then_some(())
        },
        || env.tmux(&["show-option", "-gqv", "@volee-status"]),
    );
    let usage = env.ok(["usage", "--since", "1d"]);
    assert!(usage.contains("$0.7500 + ?"), "{usage}");
}
