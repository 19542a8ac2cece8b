//! Codex CLI (`@openai/codex`), the real program at its pinned version, driven through volee:
//! `volee launch --harness codex` (`codex PROMPT`: no flag at all, so Codex runs in its default
//! daemon mode and starts its shared app-server daemon under `~/.codex/packages/`) in a private
//! tmux, with a throwaway HOME whose `~/.codex/config.toml` names a custom model provider (the
//! scripted loopback server speaking the OpenAI Responses API, key from `env_key`), trusts the
//! work folder and asks for approvals (`approval_policy = "on-request"`) — as a user would
//! configure it. Turn 1 is an `exec_command` of `touch MARKER` asking for escalated permissions
//! (so Codex asks first), turn 2 text.
//!
//! volee gives Codex no hooks (docs/adr/0005-per-launch-instrumentation.md): its states come from
//! the title and screen rules (`crates/volee-harness/rules/codex.toml`) and output activity. The
//! sequence asserted: working → needs_you (screen rule `codex.approval-prompt`) → approve with
//! `volee send ID y` → working → idle → the marker exists → `volee send ID /quit` → done (exit 0).
//! The daemon outlives the TUI: the test stops it (`codex app-server daemon stop`) and kills any
//! leftover process of the throwaway HOME.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;
use volee_test_support::model_server::{Kind, ModelServer, Turn};
use volee_test_support::{require, TestEnv};

use crate::common::{cmdline_mentions, seen_by_watcher, Diagnostics};
use crate::Observed;

pub(crate) const API_KEY: &str = "test-key";
pub(crate) const MODEL: &str = "volee-test-model";
pub(crate) const TOOL: &str = "exec_command";

/// `codex --version`'s first line ("codex-cli 0.171.0"), run with a throwaway HOME.
fn version_line(bin: &Path) -> Option<String> {
    let home = std::env::temp_dir().join(format!("volee-codex-version-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&home);
    let out = Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        .env_remove("CODEX_HOME")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok();
    let _ = std::fs::remove_dir_all(&home);
    let out = out.filter(|o| o.status.success())?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .trim()
            .to_string(),
    )
}

/// `~/.codex/config.toml` of a user who added an OpenAI-compatible endpoint as a custom model
/// provider, trusted the work folder and wants to approve commands. Returns the config.
pub(crate) fn seed_home(home: &Path, base_url: &str, work: &Path) -> String {
    let config = format!(
        "model = \"{MODEL}\"\nmodel_provider = \"volee\"\napproval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n\n[model_providers.volee]\nname = \"Volee test\"\nbase_url = \"{base_url}\"\nenv_key = \"VOLEE_TEST_MODEL_KEY\"\nwire_api = \"responses\"\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        work.display()
    );
    let codex = home.join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(codex.join("config.toml"), &config).unwrap();
    config
}

/// Stops the shared app-server daemon of the throwaway HOME and kills whatever of that HOME still
/// runs (`daemon stop` leaves its `pid-update-loop` behind), when the test ends in any way.
pub(crate) struct DaemonCleanup {
    pub(crate) bin: PathBuf,
    pub(crate) home: PathBuf,
}

impl DaemonCleanup {
    /// Pids of processes whose executable or command line lies under the throwaway HOME.
    fn leftovers(&self) -> Vec<i32> {
        let needle = self.home.display().to_string();
        let me = std::process::id() as i32;
        std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                    .filter(|pid| *pid != me)
                    .filter(|pid| {
                        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                            .map(|p| p.display().to_string())
                            .unwrap_or_default();
                        exe.starts_with(&needle) || cmdline_mentions(*pid, &needle)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn stop(&self) -> (String, Vec<i32>) {
        let out = Command::new(&self.bin)
            .args(["app-server", "daemon", "stop"])
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|e| format!("could not run: {e}"));
        std::thread::sleep(Duration::from_millis(300));
        let left = self.leftovers();
        for pid in &left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        (out, left)
    }
}

impl Drop for DaemonCleanup {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A prompt of several lines sent with `volee send` reaches the model whole, as one turn.
#[test]
fn a_multi_line_prompt_sent_to_codex_cli_arrives_whole() {
    let Some(mut w) = crate::common::world("codex", "the Codex CLI multi-line prompt test") else {
        return;
    };
    let server = ModelServer::start(vec![Turn::text("hello"), Turn::text("read it")]);
    let home = w.env.home().canonicalize().unwrap();
    seed_home(&home, &format!("{}/v1", server.base_url()), &w.work);
    let _cleanup = DaemonCleanup {
        bin: w.bin_dir.join(&crate::pinned("codex").bin),
        home: home.clone(),
    };
    w.env.extra_env.extend(
        [
            ("PATH", crate::path_with(&w.bin_dir)),
            ("VOLEE_TEST_MODEL_KEY", API_KEY.to_string()),
            ("CODEX_HOME", home.join(".codex").display().to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    crate::common::a_multi_line_prompt_arrives_whole(&w.env, &server, "codex", "/quit");
}

#[test]
fn codex_cli_asks_approval_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the Codex CLI conformance test") {
        return;
    }
    let pinned = crate::pinned("codex");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };
    let version = version_line(&bin_dir.join(&pinned.bin)).expect("codex --version");

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let no_hooks = env.root().join("no-hooks");
    std::fs::create_dir_all(&no_hooks).unwrap();

    let server = ModelServer::start(vec![
        Turn::tool(
            TOOL,
            json!({
                "cmd": format!("touch {}", marker.display()),
                "sandbox_permissions": "require_escalated",
                "justification": "volee conformance needs approval"
            }),
        ),
        Turn::text("done"),
    ]);
    server.set_main_delay(Duration::from_millis(1000));
    let home = env.home().canonicalize().unwrap();
    let config = seed_home(&home, &format!("{}/v1", server.base_url()), &work);
    let _cleanup = DaemonCleanup {
        bin: bin_dir.join(&pinned.bin),
        home: home.clone(),
    };

    let path = crate::path_with(&bin_dir);
    env.extra_env.extend(
        [
            ("PATH", path.as_str()),
            ("VOLEE_TEST_MODEL_KEY", API_KEY),
            ("CODEX_HOME", &home.join(".codex").display().to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );

    let started = Instant::now();
    let timeline = Mutex::new(Vec::<Observed>::new());
    let is_harness = |pid: i32| cmdline_mentions(pid, "codex");
    let diag = Diagnostics::new(
        "codex",
        &is_harness,
        &env,
        &server,
        &no_hooks,
        &timeline,
        started,
    );
    let stop_watching = AtomicBool::new(false);
    let env = &env;

    std::thread::scope(|scope| {
        let _stop = crate::SetOnDrop(&stop_watching);
        let id = env.ok([
            "launch",
            "--harness",
            "codex",
            "--host",
            "tmux:main",
            "--name",
            "conformance",
            "Touch the conformance marker file.",
        ]);
        let launched = diag.track(&id);
        let (stop_ref, timeline_ref, watch_id) = (&stop_watching, &timeline, id.clone());
        let watcher =
            scope.spawn(move || crate::watch_states(env, &watch_id, stop_ref, timeline_ref));
        assert_eq!(launched["harness"], "codex");
        assert_eq!(launched["profile_fit"], "measured", "{launched}");
        assert_eq!(launched["harness_version"], version.as_str());
        let command = launched["command"].to_string();
        for flag in ["approval", "-a ", "yolo", "bypass", "-c ", "sandbox"] {
            assert!(
                !command.contains(flag),
                "volee must pass no flag ({flag}): {command}"
            );
        }

        // 1. needs_you: the approval prompt, from the app-server's thread status
        //    (`active[waitingOnApproval]`) or the screen rules, whichever is first (no hooks).
        assert_eq!(env.wait_state(&id, "needs_you", 90), "needs_you");
        let asked = seen_by_watcher(&timeline, "needs_you", None);
        let tool_sent = server
            .first_tool_use_answered()
            .expect("the model server answered with a tool call");
        let tool_to_needs_you = asked.at.saturating_duration_since(tool_sent);
        assert!(
            matches!(asked.source.as_str(), "screen" | "title" | "listing"),
            "{asked:?}"
        );
        assert!(
            asked.evidence.contains("codex.") || asked.evidence.contains("waitingOnApproval"),
            "{asked:?}"
        );
        assert!(
            timeline
                .lock()
                .unwrap()
                .iter()
                .any(|o| o.state == "working" && o.at < asked.at),
            "working before the approval prompt"
        );
        assert!(!marker.exists(), "the tool ran before it was approved");
        // volee's own part of it: from the approval screen's last output reaching volee (the
        // time the screen observation carries) to needs_you in `volee ls`.
        let explained: serde_json::Value =
            serde_json::from_str(&env.ok(["explain", &id, "--json"])).unwrap();
        let asked_wall = std::time::SystemTime::now() - asked.at.elapsed();
        let screen_to_needs_you = explained["observations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["source"] == "screen" && o["kind"] == "prompt")
            .and_then(|o| humantime::parse_rfc3339(o["at"].as_str()?).ok())
            .and_then(|drawn| asked_wall.duration_since(drawn).ok());
        assert_eq!(explained["screen"]["kind"], "model", "{explained}");
        let peek = env.ok(["peek", &id, "-n", "40"]);
        assert!(peek.contains("1. Yes, proceed (y)"), "{peek}");
        // A user takes a moment: the prompt stays needs_you, and nothing runs meanwhile.
        std::thread::sleep(Duration::from_millis(1500));
        let held = env.agent(&id);
        assert_eq!(held["state"], "needs_you", "{held}");
        assert!(!marker.exists(), "the tool ran before it was approved");

        // 2. Approve once: "› 1. Yes, proceed (y)".
        let sent = env.ok(["send", &id, "y"]);
        eprintln!("volee send {id} y: {sent}");

        // 3. The turn ends: idle, and the tool really ran.
        assert_eq!(env.wait_state(&id, "idle", 60), "idle");
        let finished = seen_by_watcher(&timeline, "idle", Some(asked.at));
        assert!(marker.exists(), "the approved command did not run");
        crate::common::stays_idle(
            &timeline,
            Duration::from_secs(2),
            Duration::from_secs(20),
            || format!("{}", env.agent(&id)),
        );

        // The model saw exactly the conversation it should have.
        server.check_tool_results().unwrap();
        let mains = server.main_exchanges();
        assert_eq!(mains.len(), 2, "{}", server.summary());
        assert!(
            mains.iter().all(|e| matches!(e.kind, Kind::Main { .. })),
            "{}",
            server.summary()
        );
        assert!(
            mains[0].tool_names().iter().any(|n| n == TOOL),
            "Codex offers {:?}",
            mains[0].tool_names()
        );
        // The session id: the thread the app-server lists for this TUI (its folder, its prompt),
        // which is the id at the end of the rollout file's name.
        let view = env.agent(&id);
        let session = view["session_id"].as_str().map(String::from);
        let rollouts: Vec<String> = walk_files(&home.join(".codex/sessions"))
            .iter()
            .filter_map(|p| volee_harness::listing::session_id_from_open_file("codex", p))
            .collect();
        assert_eq!(rollouts.len(), 1, "{rollouts:?}");
        assert_eq!(session.as_deref(), Some(rollouts[0].as_str()), "{view}");
        // The session browser finds it in the rollout.
        crate::common::find_in_history(
            env,
            "codex",
            "Touch the conformance marker file.",
            &rollouts[0],
        );

        // 4. End it the way a user does. (Without hooks, the echo of the typed `/quit` is output:
        // volee may show `working` for a moment before `done`; only the end state is checked.)
        let quit_at = Instant::now();
        let out = env.ok(["send", &id, "/quit"]);
        eprintln!("volee send {id} /quit: {out}");
        assert_eq!(env.wait_state(&id, "done", 30), "done");
        let ended = env.agent(&id);
        assert_eq!(ended["exit_status"], 0, "{ended}");
        // Its usage: the rollout's `token_count` totals, one `token_usage_record` per answer.
        crate::common::usage_is_what_the_server_sent(env, &id, &server);
        std::thread::sleep(Duration::from_millis(100));
        drop(_stop);
        let (polls, polling) = watcher.join().unwrap();

        let seen = timeline.lock().unwrap().clone();
        // Before the model's first answer only output activity speaks: Codex may be silent for
        // longer than the working window while it starts (idle (silence) → working (output)).
        // After `/quit` is typed the echo and the exit race each other: only the end state counts.
        let upto = seen
            .iter()
            .position(|o| o.at >= quit_at)
            .unwrap_or(seen.len());
        // Until Codex sends the prompt to the model it is starting up: its composer may show,
        // idle, for a moment first (seen in a whole-suite run: an idle screen 80 ms before the
        // first request). What counts starts with the first request.
        let from = server
            .main_exchanges()
            .first()
            .and_then(|e| seen.iter().position(|o| o.at >= e.received))
            .unwrap_or(0)
            .min(upto);
        let (states, blips) = crate::common::states_from(
            &seen[from..upto],
            |o| o.source != "multiplexer",
            "any rule (before the model's first answer only output activity speaks: Codex may be silent for longer than the working window while it starts)",
        );
        let last = seen.last().map(|o| o.state.as_str());
        // Resumed from the session browser, it has its earlier conversation.
        crate::common::resume_from_history(
            env,
            &server,
            "Touch the conformance marker file.",
            &rollouts[0],
            "/quit",
        );
        let (stopped, leftovers) = _cleanup.stop();
        eprintln!("\n==== Codex CLI {version} through volee ====");
        eprintln!("~/.codex/config.toml seed:\n{config}");
        eprintln!("launch command: {command}");
        eprintln!("session id volee holds: {session:?}");
        eprintln!("model server:\n{}", server.summary());
        crate::common::print_timeline(&seen, started, polls, polling);
        eprintln!(
            "tool call answered → needs_you in volee ls: {:.0} ms ({} {})",
            tool_to_needs_you.as_secs_f64() * 1000.0,
            asked.source,
            asked.evidence
        );
        match screen_to_needs_you {
            Some(d) => eprintln!(
                "approval screen's last output → needs_you in volee ls: {:.0} ms (decided by {})",
                d.as_secs_f64() * 1000.0,
                asked.source
            ),
            None => eprintln!("approval screen → needs_you: no screen observation before it"),
        }
        eprintln!(
            "idle after approval: {} {}",
            finished.source, finished.evidence
        );
        eprintln!("codex app-server daemon stop: {stopped}; leftovers killed: {leftovers:?}");
        eprintln!("total: {:.1} s", started.elapsed().as_secs_f64());
        assert!(blips.is_empty(), "stale-source blips: {blips:#?}");
        // The screen may say working (its "Working (0s …)" line) before the approval prompt.
        let from_prompt: Vec<&str> = states
            .iter()
            .map(String::as_str)
            .skip_while(|s| *s == "working")
            .collect();
        assert_eq!(
            from_prompt,
            ["needs_you", "working", "idle"],
            "state sequence {states:?}"
        );
        assert_eq!(last, Some("done"), "end state");
    });
    drop(diag);
}

/// Every file under `dir`.
pub(crate) fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
