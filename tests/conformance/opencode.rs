//! OpenCode (npm `opencode-ai`), the real program at its pinned version, driven through volee:
//! `volee launch --harness opencode` (`opencode --port P --hostname 127.0.0.1 --prompt PROMPT`,
//! P a free loopback port volee picked) in a private tmux, with a throwaway HOME whose
//! `~/.config/opencode/opencode.json` names a custom OpenAI-compatible provider as the model and
//! asks before `bash` — as a user would configure it; the model is the scripted loopback server
//! speaking OpenAI chat completions (turn 1: a `bash` `touch` of the marker, turn 2: text).
//!
//! OpenCode has no hooks: its states come from its own server (`GET /event` and a snapshot of
//! `/session/status`, `/permission`, `/question`), read by the daemon as the `listing` source.
//! The sequence asserted: working (server: status busy) → needs_you (server: permission.asked
//! bash) → approve with `volee send ID ""` (Enter on the preselected "Allow once") → working →
//! idle (server: status idle) → the marker exists → `volee send ID /exit` → done (exit 0); the
//! session id volee read from the server is the one OpenCode prints at exit. Then the session is
//! resumed with a prompt (`volee launch --harness opencode PROMPT -- -s SES`): OpenCode 1.18.33
//! ignores `--prompt` with `-s`, so the daemon hands it over through `/tui/append-prompt` and
//! `/tui/submit-prompt`; the model must get it and the agent go working → idle.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

use crate::common::{cmdline_mentions, seen_by_watcher, stays_idle, Diagnostics};
use crate::Observed;

const MODEL: &str = "volee-test-model";
const PROMPT: &str = "Run the touch command to create the marker file.";
const RESUME_PROMPT: &str = "Say that you are back.";

/// `~/.config/opencode/opencode.json`: a custom provider (`@ai-sdk/openai-compatible`, bundled in
/// 1.18.33) at the scripted server, as the model and the small model, and `bash: ask`.
pub(crate) fn seed_home(home: &std::path::Path, base_url: &str) -> serde_json::Value {
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "volee": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "volee test",
                "options": { "baseURL": format!("{base_url}/v1"), "apiKey": "test-key" },
                "models": { MODEL: { "name": "volee test model" } }
            }
        },
        "model": format!("volee/{MODEL}"),
        "small_model": format!("volee/{MODEL}"),
        "permission": { "bash": "ask", "edit": "ask" }
    });
    let dir = home.join(".config/opencode");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("opencode.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    config
}

/// The user's side of a test: the seeded HOME ([`seed_home`], returned), the pinned OpenCode on
/// PATH, no models.dev fetch (the provider is declared in full), and `extra` variables.
fn user_world(
    env: &mut TestEnv,
    bin_dir: &std::path::Path,
    server: &ModelServer,
    extra: &[(&str, &str)],
) -> serde_json::Value {
    let config = seed_home(&env.home(), &server.base_url());
    env.extra_env
        .push(("PATH".into(), crate::path_with(bin_dir)));
    env.extra_env
        .push(("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()));
    env.extra_env
        .extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    config
}

#[test]
fn opencode_asks_permission_through_its_server_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the OpenCode conformance test") {
        return;
    }
    let pinned = crate::pinned("opencode");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let hook_log = env.root().join("no-hooks");
    std::fs::create_dir_all(&hook_log).unwrap();

    let server = ModelServer::start(vec![
        Turn::tool(
            "bash",
            json!({
                "command": format!("touch {}", marker.display()),
                "description": "Create the conformance marker file"
            }),
        ),
        Turn::text("done"),
        // The resumed session's turn.
        Turn::text("back"),
    ]);
    server.set_main_delay(Duration::from_millis(1000));
    let config = user_world(&mut env, &bin_dir, &server, &[]);

    let env = &env;
    let started = Instant::now();
    let timeline = Mutex::new(Vec::<Observed>::new());
    let is_harness = |pid: i32| cmdline_mentions(pid, "opencode");
    let diag = Diagnostics::new(
        "opencode",
        &is_harness,
        env,
        &server,
        &hook_log,
        &timeline,
        started,
    );
    let stop_watching = AtomicBool::new(false);

    std::thread::scope(|scope| {
        let _stop = crate::SetOnDrop(&stop_watching);
        let id = env.ok([
            "launch",
            "--harness",
            "opencode",
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
        assert_eq!(launched["harness"], "opencode");
        assert_eq!(launched["profile_fit"], "measured", "{launched}");
        assert_eq!(launched["harness_version"], pinned.version.as_str());
        let command: Vec<String> = launched["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let port_at = command.iter().position(|a| a == "--port").expect("--port");
        let port: u16 = command[port_at + 1].parse().unwrap();
        assert!(port > 0);
        assert!(
            command.windows(2).any(|w| w == ["--hostname", "127.0.0.1"]),
            "{command:?}"
        );
        assert!(
            !command
                .iter()
                .any(|a| a == "--auto" || a.contains("permission")),
            "volee must not pass a permission flag: {command:?}"
        );
        // Nothing of volee's in the project.
        assert!(!work.join(".opencode").exists());

        // 1. working, from the server.
        let working = wait_until(
            "a state from the server",
            Duration::from_secs(90),
            || {
                timeline
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .find(|o| o.source == "listing")
                    .cloned()
            },
            || format!("{}", env.agent(&id)),
        );
        assert_eq!(working.state, "working", "{working:?}");
        assert_eq!(
            working.evidence, "listing server: status busy",
            "{working:?}"
        );

        // 2. needs_you: the permission request, from the server.
        assert_eq!(env.wait_state(&id, "needs_you", 60), "needs_you");
        let asked = seen_by_watcher(&timeline, "needs_you", None);
        let tool_sent = server
            .first_tool_use_answered()
            .expect("the model server answered with a tool call");
        let tool_to_needs_you = asked.at.saturating_duration_since(tool_sent);
        assert_eq!(asked.source, "listing", "{asked:?}");
        assert_eq!(
            asked.evidence, "listing server: permission.asked bash",
            "{asked:?}"
        );
        assert!(!marker.exists(), "the tool ran before it was approved");
        wait_until(
            "the permission dialog on screen",
            Duration::from_secs(5),
            || {
                env.ok(["peek", &id, "-n", "40"])
                    .contains("Permission required")
                    .then_some(())
            },
            || env.ok(["peek", &id, "-n", "40"]),
        );
        let dialog_after_needs_you = asked.at.elapsed();
        std::thread::sleep(Duration::from_millis(1500));
        let held = env.agent(&id);
        assert_eq!(held["state"], "needs_you", "{held}");
        assert!(!marker.exists(), "the tool ran before it was approved");

        // 3. Approve once: "Allow once" is preselected; Enter confirms.
        let sent = env.ok(["send", &id, ""]);
        assert!(sent.contains("now working"), "{sent}");

        // 4. The turn ends: idle from the server, and the tool really ran.
        assert_eq!(env.wait_state(&id, "idle", 60), "idle");
        assert!(marker.exists(), "the approved command did not run");
        let finished = seen_by_watcher(&timeline, "idle", Some(asked.at));
        assert_eq!(finished.source, "listing", "{finished:?}");
        assert_eq!(finished.evidence, "listing server: status idle");
        stays_idle(
            &timeline,
            Duration::from_secs(1),
            Duration::from_secs(15),
            || format!("{}", env.agent(&id)),
        );
        server.check_tool_results().unwrap();
        let mains = server.main_exchanges();
        assert_eq!(mains.len(), 2, "{}", server.summary());

        // 5. The session id, read from the server.
        let session = env.agent(&id)["session_id"]
            .as_str()
            .expect("a session id from the server")
            .to_string();
        assert!(session.starts_with("ses_"), "{session}");
        // Its past session, read from OpenCode's database while OpenCode runs (WAL).
        crate::common::keep_history(env, "home/.local/share/opencode");
        crate::common::find_in_history(env, "opencode", PROMPT, &session);
        // Its usage, from its server's events (`session.updated`, `step-finish`).
        crate::common::usage_is_what_the_server_sent(env, &id, &server);

        // 6. End it the way a user does.
        let out = env.ok(["send", &id, "/exit"]);
        eprintln!("volee send {id} /exit: {out}");
        assert_eq!(env.wait_state(&id, "done", 30), "done");
        let ended = env.agent(&id);
        assert_eq!(ended["exit_status"], 0, "{ended}");
        let goodbye = env.ok(["peek", &id, "-n", "40"]);
        assert!(
            goodbye.contains(&format!("opencode -s {session}")),
            "OpenCode's exit screen names another session than {session}:\n{goodbye}"
        );
        std::thread::sleep(Duration::from_millis(100));
        drop(_stop);
        let (polls, polling) = watcher.join().unwrap();
        let seen = timeline.lock().unwrap().clone();

        // 7. Resume it with a prompt (ignored by OpenCode with -s; handed over by the daemon).
        let resumed_at = Instant::now();
        let id2 = env.ok([
            "launch",
            "--harness",
            "opencode",
            "--host",
            "tmux:main",
            "--name",
            "resumed",
            RESUME_PROMPT,
            "--",
            "-s",
            &session,
        ]);
        *diag.id.borrow_mut() = Some(id2.clone());
        diag.pid
            .set(env.agent(&id2)["pid"].as_u64().map(|p| p as i32));
        wait_until(
            "the resumed prompt at the model",
            Duration::from_secs(150),
            || (server.main_exchanges().len() >= 3).then_some(()),
            || server.summary(),
        );
        let third = &server.main_exchanges()[2];
        assert!(
            third.body.to_string().contains(RESUME_PROMPT),
            "{}",
            server.summary()
        );
        assert_eq!(env.wait_state(&id2, "idle", 60), "idle");
        let resumed_turn = resumed_at.elapsed();
        let resumed = env.agent(&id2);
        assert_eq!(resumed["session_id"], session.as_str(), "{resumed}");
        assert_eq!(resumed["state_source"], "listing", "{resumed}");
        // The prompt went in once.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(server.main_exchanges().len(), 3, "{}", server.summary());
        env.ok(["send", &id2, "/exit"]);
        assert_eq!(env.wait_state(&id2, "done", 30), "done");
        // After both runs: the resumed turn is in the same session.
        crate::common::find_in_history(env, "opencode", RESUME_PROMPT, &session);
        crate::common::keep_history(env, "home/.local/share/opencode");

        let (states, blips) =
            crate::common::states_from(&seen, |o| o.source == "listing", "the server spoke");
        eprintln!("\n==== OpenCode {} through volee ====", pinned.version);
        eprintln!("~/.config/opencode/opencode.json seed: {config}");
        eprintln!("launch command: {command:?}");
        eprintln!("model server:\n{}", server.summary());
        crate::common::print_timeline(&seen, started, polls, polling);
        eprintln!(
            "tool call answered → needs_you in volee ls: {:.0} ms",
            tool_to_needs_you.as_secs_f64() * 1000.0
        );
        eprintln!(
            "  the dialog was on screen at most {:.0} ms after needs_you",
            dialog_after_needs_you.as_secs_f64() * 1000.0
        );
        eprintln!(
            "resumed with a prompt through the TUI server: idle after {:.1} s",
            resumed_turn.as_secs_f64()
        );
        eprintln!("total: {:.1} s", started.elapsed().as_secs_f64());
        assert!(blips.is_empty(), "stale-source blips: {blips:#?}");
        assert_eq!(
            crate::common::with_quick_start(states),
            ["working", "needs_you", "working", "idle", "done"],
            "state sequence"
        );
    });
    drop(diag);
}

/// OpenCode's question tool (off by default; a user turns it on with
/// `OPENCODE_ENABLE_QUESTION_TOOL=1`): the model asks the user to pick an option. volee must see
/// needs_you from the server while the question is open, and working → idle once it is answered
/// in the pane; the answer reaches the model.
#[test]
fn opencode_asks_a_question_through_its_server() {
    let _serial = crate::serial();
    if !require("tmux", "the OpenCode conformance test") {
        return;
    }
    let pinned = crate::pinned("opencode");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };
    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let hook_log = env.root().join("no-hooks");
    std::fs::create_dir_all(&hook_log).unwrap();
    let server = ModelServer::start(vec![
        Turn::tool(
            "question",
            json!({"questions": [{
                "question": "Which colour should the marker be?",
                "header": "Marker colour",
                "options": [
                    {"label": "Red", "description": "A red marker"},
                    {"label": "Blue", "description": "A blue marker"}
                ]
            }]}),
        ),
        Turn::text("done"),
    ]);
    // A model takes a moment to answer: the turn after the answer is then working long enough
    // to be seen (with none, it lasted under the watcher's 10 ms polls once in a whole-suite
    // run: needs_you → idle).
    server.set_main_delay(std::time::Duration::from_millis(1000));
    user_world(
        &mut env,
        &bin_dir,
        &server,
        &[("OPENCODE_ENABLE_QUESTION_TOOL", "1")],
    );
    let env = &env;
    let started = Instant::now();
    let timeline = Mutex::new(Vec::<Observed>::new());
    let is_harness = |pid: i32| cmdline_mentions(pid, "opencode");
    let diag = Diagnostics::new(
        "opencode",
        &is_harness,
        env,
        &server,
        &hook_log,
        &timeline,
        started,
    );
    let stop_watching = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _stop = crate::SetOnDrop(&stop_watching);
        let id = env.ok([
            "launch",
            "--harness",
            "opencode",
            "--host",
            "tmux:main",
            "--name",
            "question",
            "Ask me which colour the marker should be.",
        ]);
        diag.track(&id);
        let (stop_ref, timeline_ref, watch_id) = (&stop_watching, &timeline, id.clone());
        let watcher =
            scope.spawn(move || crate::watch_states(env, &watch_id, stop_ref, timeline_ref));

        assert_eq!(env.wait_state(&id, "needs_you", 90), "needs_you");
        let asked = seen_by_watcher(&timeline, "needs_you", None);
        assert_eq!(asked.source, "listing", "{asked:?}");
        assert_eq!(
            asked.evidence, "listing server: question.asked Marker colour",
            "{asked:?}"
        );
        wait_until(
            "the question on screen",
            Duration::from_secs(10),
            || {
                env.ok(["peek", &id, "-n", "40"])
                    .contains("Which colour should the marker be?")
                    .then_some(())
            },
            || env.ok(["peek", &id, "-n", "40"]),
        );
        std::thread::sleep(Duration::from_millis(1500));
        let held = env.agent(&id);
        assert_eq!(held["state"], "needs_you", "{held}");
        eprintln!("the question:\n{}", env.ok(["peek", &id, "-n", "40"]));

        // Enter picks the highlighted first option.
        env.ok(["send", &id, ""]);
        assert_eq!(env.wait_state(&id, "idle", 60), "idle");
        let mains = server.main_exchanges();
        assert_eq!(mains.len(), 2, "{}", server.summary());
        let answer = mains[1].body.to_string();
        assert!(
            answer.contains("=\\\"Red\\\""),
            "the answer reached the model: {answer}"
        );
        env.ok(["send", &id, "/exit"]);
        wait_until(
            "done after /exit",
            Duration::from_secs(30),
            || (env.agent(&id)["state"] == "done").then_some(()),
            || {
                format!(
                    "{}\n{}",
                    env.ok(["explain", &id]),
                    env.ok(["peek", &id, "-n", "40"])
                )
            },
        );
        drop(_stop);
        let (polls, polling) = watcher.join().unwrap();
        let seen = timeline.lock().unwrap().clone();
        crate::common::print_timeline(&seen, started, polls, polling);
        let (states, blips) =
            crate::common::states_from(&seen, |o| o.source == "listing", "the server spoke");
        assert!(blips.is_empty(), "stale-source blips: {blips:#?}");
        assert_eq!(
            crate::common::with_quick_start(states),
            ["working", "needs_you", "working", "idle", "done"],
            "state sequence"
        );
    });
    drop(diag);
}
