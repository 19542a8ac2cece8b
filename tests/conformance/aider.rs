//! Aider (PyPI `aider-chat`), the real program at its pinned version in a virtual environment,
//! driven through volee: `volee launch --harness aider PROMPT` in a private tmux, with a
//! throwaway HOME whose `~/.aider.conf.yml` names an OpenAI-compatible endpoint (the scripted
//! loopback server; Aider offers the model no tools — its edits and shell commands are text, so
//! the server plays its script in arrival order) and the `diff` edit format, in a git repository
//! whose `.gitignore` already lists `.aider*` — as a user would have it.
//!
//! Aider has no hooks, no server and no listing, and no flag that keeps a session interactive with
//! a first prompt: volee types the prompt once the screen shows Aider's `>` prompt, and every
//! state comes from the screen rules (`crates/volee-harness/rules/aider.toml`) and output
//! activity. The sequence asserted: idle (rule `aider.prompt`) → the prompt is typed → working →
//! needs_you (rule `aider.question`: "Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]:") →
//! `volee send ID y` → idle (rule `aider.prompt`) → the marker exists → `volee send ID /exit` →
//! done (exit 0).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

use crate::common::{cmdline_mentions, seen_by_watcher, Diagnostics};
use crate::Observed;

const API_KEY: &str = "test-key";
const MODEL: &str = "openai/volee-test-model";
const PROMPT: &str = "Create the conformance marker file with touch.";

/// `~/.aider.conf.yml` of a user who picked an OpenAI-compatible endpoint, the diff edit format,
/// no analytics and no update check. Returns it.
fn seed_home(home: &Path, base_url: &str) -> String {
    let config = format!(
        "model: {MODEL}\n\
         openai-api-base: {base_url}/v1\n\
         edit-format: diff\n\
         analytics-disable: true\n\
         check-update: false\n\
         show-model-warnings: false\n\
         show-release-notes: false\n"
    );
    std::fs::write(home.join(".aider.conf.yml"), &config).unwrap();
    config
}

/// A git repository with one commit whose `.gitignore` lists `.aider*` (Aider asks to add it
/// otherwise).
fn seed_repo(work: &Path, home: &Path) {
    std::fs::write(work.join(".gitignore"), ".aider*\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", ".gitignore"],
        &[
            "-c",
            "user.name=volee test",
            "-c",
            "user.email=test@volee.invalid",
            "commit",
            "-qm",
            "start",
        ],
    ] {
        let ok = Command::new("git")
            .args(args)
            .current_dir(work)
            .env("HOME", home)
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    }
}

#[test]
fn aider_asks_to_run_a_command_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the Aider conformance test")
        || !require("git", "the Aider conformance test")
    {
        return;
    }
    let pinned = crate::pinned("aider");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let home = env.home().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let no_hooks = env.root().join("no-hooks");
    std::fs::create_dir_all(&no_hooks).unwrap();
    seed_repo(&work, &home);

    let server = ModelServer::start(vec![Turn::text(&format!(
        "I will create the marker file.\n\n```bash\ntouch {}\n```\n",
        marker.display()
    ))]);
    server.set_toolless();
    server.set_main_delay(Duration::from_millis(1000));
    let config = seed_home(&home, &server.base_url());

    let path = crate::path_with(&bin_dir);
    env.extra_env.extend(
        [("PATH", path.as_str()), ("OPENAI_API_KEY", API_KEY)]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );

    let started = Instant::now();
    let timeline = Mutex::new(Vec::<Observed>::new());
    let is_harness = |pid: i32| cmdline_mentions(pid, "aider");
    let diag = Diagnostics::new(
        "aider",
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
            "aider",
            "--host",
            "tmux:main",
            "--name",
            "conformance",
            PROMPT,
        ]);
        let launched = diag.track(&id);
        let (stop_ref, timeline_ref, watch_id) = (&stop_watching, &timeline, id.clone());
        let watcher =
            scope.spawn(move || crate::watch_states(env, &watch_id, stop_ref, timeline_ref));
        assert_eq!(launched["harness"], "aider");
        assert_eq!(launched["profile_fit"], "measured", "{launched}");
        assert_eq!(
            launched["harness_version"],
            format!("aider {}", pinned.version)
        );
        let command = launched["command"].to_string();
        assert!(
            !command.contains(PROMPT) && !command.contains("--message"),
            "the prompt is typed, never passed: {command}"
        );
        for flag in ["--yes", "yes-always", "--notifications"] {
            assert!(!command.contains(flag), "volee passes no {flag}: {command}");
        }

        // 1. Ready: Aider's prompt on screen, then volee types the first prompt into it.
        wait_until(
            "the model server gets the typed prompt",
            Duration::from_secs(60),
            || {
                server
                    .main_exchanges()
                    .first()
                    .is_some_and(|e| e.messages().iter().any(|m| m.to_string().contains(PROMPT)))
                    .then_some(())
            },
            || {
                format!(
                    "{}\n{}",
                    env.ok(["peek", &id, "-n", "15"]),
                    server.summary()
                )
            },
        );
        // The idle the prompt waited for: the screen rule's, not an earlier silence.
        let ready = wait_until(
            "volee ls --json to show idle from aider.prompt",
            Duration::from_secs(5),
            || {
                timeline
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|o| o.state == "idle" && o.evidence.contains("aider.prompt"))
                    .cloned()
            },
            || format!("{:#?}", timeline.lock().unwrap()),
        );
        let first_request = server.main_exchanges()[0].received;

        // 2. needs_you: "Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]:".
        assert_eq!(env.wait_state(&id, "needs_you", 60), "needs_you");
        let asked = seen_by_watcher(&timeline, "needs_you", Some(ready.at));
        let answered = server.main_exchanges()[0].answered;
        let reply_to_needs_you = asked.at.saturating_duration_since(answered);
        assert_eq!(asked.source, "screen", "{asked:?}");
        assert!(asked.evidence.contains("aider.question"), "{asked:?}");
        assert!(
            timeline
                .lock()
                .unwrap()
                .iter()
                .any(|o| o.state == "working" && o.at > ready.at && o.at < asked.at),
            "working while the model answered"
        );
        let peek = env.ok(["peek", &id, "-n", "20"]);
        assert!(peek.contains("Run shell command?"), "{peek}");
        assert!(!marker.exists(), "the command ran before it was approved");

        // 3. Approve: `y`. Aider may then ask whether to add the command's output to the chat
        // (only when there was output): the answer is no.
        let sent = env.ok(["send", &id, "y"]);
        eprintln!("volee send {id} y: {sent}");
        let mut second_question = false;
        let finished = loop {
            let state = env.ok(["wait", &id, "--until", "idle,needs_you", "--timeout", "60"]);
            let now = env.agent(&id);
            if state == "needs_you"
                && !second_question
                && env.ok(["peek", &id, "-n", "3"]).contains("to the chat?")
            {
                second_question = true;
                env.ok(["send", &id, "n"]);
                continue;
            }
            if state == "idle" {
                break now;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(finished["state_source"], "screen", "{finished}");
        assert!(
            finished["evidence"]
                .as_str()
                .is_some_and(|e| e.contains("aider.prompt")),
            "{finished}"
        );
        assert!(marker.exists(), "the approved command did not run");
        assert_eq!(
            server.main_exchanges().len(),
            1,
            "one model call for one prompt: {}",
            server.summary()
        );

        // 4. End it the way a user does.
        let out = env.ok(["send", &id, "/exit"]);
        eprintln!("volee send {id} /exit: {out}");
        assert_eq!(env.wait_state(&id, "done", 30), "done");
        let ended = env.agent(&id);
        assert_eq!(ended["exit_status"], 0, "{ended}");
        crate::common::keep_history(env, "work/.aider.chat.history.md");
        // No session id in Aider: the project's chat history is the session, under the id volee
        // makes from the project's path.
        let session = volee_history::aider_session_id(&work);
        crate::common::find_in_history(env, "aider", PROMPT, &session);
        drop(_stop);
        let (polls, polling) = watcher.join().unwrap();

        let seen = timeline.lock().unwrap().clone();
        eprintln!("\n==== Aider {} through volee ====", pinned.version);
        eprintln!("~/.aider.conf.yml seed:\n{config}");
        eprintln!("launch command: {command}");
        eprintln!("model server:\n{}", server.summary());
        crate::common::print_timeline(&seen, started, polls, polling);
        eprintln!(
            "ready (screen) → prompt typed and sent to the model: the first request came {:.0} ms after the idle",
            first_request.saturating_duration_since(ready.at)
                .as_secs_f64()
                * 1000.0
        );
        eprintln!(
            "model reply → needs_you in volee ls: {:.0} ms ({} {})",
            reply_to_needs_you.as_secs_f64() * 1000.0,
            asked.source,
            asked.evidence
        );
        eprintln!("output question asked too: {second_question}");
        eprintln!("total: {:.1} s", started.elapsed().as_secs_f64());
        // From the typed prompt on: working, needs_you (once or twice), idle, done.
        let states = crate::common::collapse(seen.iter().filter(|o| o.at > ready.at));
        assert_eq!(
            states.first().map(String::as_str),
            Some("working"),
            "{states:?}"
        );
        assert!(states.iter().any(|s| s == "needs_you"), "{states:?}");
        assert_eq!(
            states.last().map(String::as_str),
            Some("done"),
            "{states:?}"
        );
    });
    drop(diag);
}
