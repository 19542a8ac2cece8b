//! Claude Code, the real program at its pinned version, driven through volee:
//! `volee launch --harness claude` in a private tmux, a throwaway HOME seeded as a user who has
//! finished onboarding, trusted the work folder, approved the API key and chosen a permission mode
//! that prompts; the model is the scripted loopback server (turn 1: a Bash `touch`, turn 2: text).
//!
//! The sequence asserted: working (hooks) → needs_you (hooks, the permission prompt) → approve
//! with `volee send ID 1` → working → idle (hook Stop) → the file exists → `volee send ID /exit` →
//! done (exit 0); the hook payloads' session id is volee's; every tool_use was answered once.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use volee_test_support::model_server::{Kind, ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

use crate::common::{
    event_line, hook_payloads, seen_by_watcher, timed_hook_payloads, transient_blips, Diagnostics,
};
use crate::{Observed, SetOnDrop};

/// The key the throwaway user "approved" (Claude stores the last 20 characters of an approved
/// key in `customApiKeyResponses.approved`).
pub(crate) const API_KEY: &str = "test-key";

/// Hook events the test itself logs (in the throwaway user's settings, beside volee's own
/// `--settings` layer), to compare payloads with what volee reports.
const LOGGED_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "Notification",
    "PostToolUse",
    "PostToolBatch",
    "Stop",
    "StopFailure",
    "SessionEnd",
];

/// `~/.claude.json` and `~/.claude/settings.json` of a user who has been through every
/// first-run dialog. Returns both, for the report.
pub(crate) fn seed_home(home: &Path, work: &Path, hook_log: &Path) -> (Value, Value) {
    let key_tail = &API_KEY[API_KEY.len().saturating_sub(20)..];
    let mut projects = serde_json::Map::new();
    projects.insert(
        work.display().to_string(),
        json!({ "hasTrustDialogAccepted": true }),
    );
    let state = json!({
        // No onboarding (theme picker, login): offline it would end in "Unable to connect to
        // Anthropic services" and exit 1.
        "hasCompletedOnboarding": true,
        // 2.1.332 offers "Make auto mode your default permission mode?" after the first turn of a
        // user whose settings pin another mode; it would sit over the prompt box.
        "hasSeenAutoDefaultNudge": true,
        // "Detected a custom API key in your environment … Do you want to use this API key?"
        "customApiKeyResponses": { "approved": [key_tail], "rejected": [] },
        // "Accessing workspace … Yes, I trust this folder" (hooks fire only in trusted folders).
        "projects": projects,
    });
    let logger = format!("cat > '{}'/\"$(date +%s%N)-$$.json\"", hook_log.display());
    let mut hooks = serde_json::Map::new();
    for event in LOGGED_EVENTS {
        hooks.insert(
            (*event).into(),
            json!([{ "hooks": [{ "type": "command", "command": logger, "timeout": 10 }] }]),
        );
    }
    // `default` shows as "manual mode" in 2.1.332; without it 2.1.332 may start in auto mode,
    // where a classifier instead of the user approves tools.
    let settings = json!({ "permissions": { "defaultMode": "default" }, "hooks": hooks });
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(
        home.join(".claude.json"),
        serde_json::to_vec_pretty(&state).unwrap(),
    )
    .unwrap();
    std::fs::write(
        home.join(".claude/settings.json"),
        serde_json::to_vec_pretty(&settings).unwrap(),
    )
    .unwrap();
    (state, settings)
}

#[test]
fn claude_code_asks_permission_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the Claude Code conformance test") {
        return;
    }
    let pinned = crate::pinned("claude");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };
    let started = Instant::now();

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let hook_log = env.root().join("hook-payloads");
    let claude_tmp = env.root().join("claude-tmp");
    std::fs::create_dir_all(&hook_log).unwrap();
    std::fs::create_dir_all(&claude_tmp).unwrap();
    let (state_json, settings_json) = seed_home(&env.home(), &work, &hook_log);

    let server = ModelServer::start(vec![
        Turn::bash(
            &format!("touch {}", marker.display()),
            "Create the conformance marker file",
        ),
        Turn::text("done"),
    ]);
    // A model takes a moment to answer: long enough to see the hook-driven working state.
    server.set_main_delay(Duration::from_millis(1000));

    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.extra_env.extend(
        [
            ("PATH", path.as_str()),
            ("ANTHROPIC_BASE_URL", server.base_url().as_str()),
            ("ANTHROPIC_API_KEY", API_KEY),
            // Its sockets and scratch files (default /tmp/cc-socks, /tmp/claude-UID) stay ours.
            ("CLAUDE_CODE_TMPDIR", &claude_tmp.display().to_string()),
            // No telemetry, feature-flag fetches or marketplace installs: the same program
            // behaves the same with or without a network.
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let timeline = Mutex::new(Vec::<Observed>::new());
    let diag = Diagnostics {
        harness: "claude",
        is_harness: &|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .unwrap_or_default()
                .trim()
                == "claude"
        },
        env: &env,
        server: &server,
        hook_log: &hook_log,
        timeline: &timeline,
        started,
        id: RefCell::new(None),
        pid: Cell::new(None),
    };
    let stop_watching = AtomicBool::new(false);

    std::thread::scope(|scope| {
        let _stop = SetOnDrop(&stop_watching);
        let id = env.ok([
            "launch",
            "--harness",
            "claude",
            "--host",
            "tmux:main",
            "--name",
            "conformance",
            "Run the touch command to create the marker file.",
        ]);
        *diag.id.borrow_mut() = Some(id.clone());
        let launched = env.agent(&id);
        diag.pid.set(launched["pid"].as_u64().map(|p| p as i32));
        let (env_ref, stop_ref, timeline_ref, watch_id) =
            (&env, &stop_watching, &timeline, id.clone());
        let watcher =
            scope.spawn(move || crate::watch_states(env_ref, &watch_id, stop_ref, timeline_ref));
        assert_eq!(launched["harness"], "claude");
        assert_eq!(launched["profile_fit"], "measured", "{launched}");
        assert_eq!(
            launched["harness_version"],
            format!("{} (Claude Code)", pinned.version)
        );
        let command = launched["command"].to_string();
        assert!(
            !command.contains("permission") && !command.contains("dangerously"),
            "volee must not pass a permission flag: {command}"
        );

        // 1. working, from the hooks (UserPromptSubmit; the model is still "thinking"): the
        //    first hook-driven state volee shows.
        let working = wait_until(
            "a state from the hooks",
            Duration::from_secs(60),
            || {
                timeline
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .find(|o| o.source == "hooks")
                    .cloned()
            },
            || format!("{}", env.agent(&id)),
        );
        assert_eq!(
            (working.state.as_str(), working.evidence.as_str()),
            ("working", "hook UserPromptSubmit"),
            "{working:?}"
        );

        // 2. needs_you: the permission prompt, reported by the hooks.
        assert_eq!(env.wait_state(&id, "needs_you", 60), "needs_you");
        let asked = seen_by_watcher(&timeline, "needs_you", None);
        let tool_use_sent = server
            .first_tool_use_answered()
            .expect("the model server answered with a tool_use");
        let tool_to_needs_you = asked.at.saturating_duration_since(tool_use_sent);
        assert_eq!(asked.source, "hooks", "{asked:?}");
        assert!(
            asked.evidence == "hook PermissionRequest" || asked.evidence == "hook Notification",
            "{asked:?}"
        );
        assert!(!marker.exists(), "the tool ran before it was approved");
        // The PermissionRequest hook runs before the dialog is drawn (a hook may decide the
        // permission itself), so the screen can lag the state by a few milliseconds.
        wait_until(
            "the permission dialog on screen",
            Duration::from_secs(5),
            || {
                env.ok(["peek", &id, "-n", "30"])
                    .contains("Do you want to proceed?")
                    .then_some(())
            },
            || env.ok(["peek", &id, "-n", "30"]),
        );
        let dialog_after_needs_you = asked.at.elapsed();
        // A user takes a moment: the prompt stays needs_you once the screen has settled and been
        // read (the screen rule agrees with the hook), and nothing runs meanwhile.
        std::thread::sleep(Duration::from_millis(1500));
        let held = env.agent(&id);
        assert_eq!(held["state"], "needs_you", "{held}");
        assert!(!marker.exists(), "the tool ran before it was approved");

        // 3. Approve: the dialog takes the option's digit as a keystroke.
        let sent = env.ok(["send", &id, "1"]);
        assert!(sent.contains("now working"), "{sent}");

        // 4. The turn ends: idle from the Stop hook, and the tool really ran.
        assert_eq!(env.wait_state(&id, "idle", 60), "idle");
        assert!(marker.exists(), "the approved touch did not run");
        let finished = seen_by_watcher(&timeline, "idle", Some(asked.at));
        assert_eq!(
            (finished.source.as_str(), finished.evidence.as_str()),
            ("hooks", "hook Stop"),
            "{finished:?}"
        );
        // …and it stays idle: a user reads the answer before typing again.
        crate::common::stays_idle(
            &timeline,
            Duration::from_secs(1),
            Duration::from_secs(15),
            || format!("{}", env.agent(&id)),
        );

        // The model saw exactly the conversation it should have.
        server.check_tool_results().unwrap();
        let mains = server.main_exchanges();
        assert_eq!(mains.len(), 2, "{}", server.summary());
        assert!(
            mains
                .iter()
                .all(|e| e.is_main() && !matches!(e.kind, Kind::Exhausted { .. })),
            "{}",
            server.summary()
        );

        // 5. The session id volee holds is the one in the hook payloads (and in the requests).
        let view = env.agent(&id);
        let session = view["session_id"]
            .as_str()
            .expect("a session id")
            .to_string();
        let payloads = hook_payloads(&hook_log);
        assert!(!payloads.is_empty(), "the test's hook logger saw nothing");
        for p in &payloads {
            assert_eq!(p["session_id"], session.as_str(), "{p}");
        }
        for e in &mains {
            if let Some(h) = e.header("x-claude-code-session-id") {
                assert_eq!(h, session, "request #{}", e.seq);
            }
        }

        // 6. End it the way a user does.
        let out = env.ok(["send", &id, "/exit"]);
        eprintln!("volee send {id} /exit: {out}");
        assert_eq!(env.wait_state(&id, "done", 30), "done");
        let ended = env.agent(&id);
        assert_eq!(ended["exit_status"], 0, "{ended}");
        wait_until(
            "the SessionEnd hook",
            Duration::from_secs(10),
            || {
                hook_payloads(&hook_log)
                    .iter()
                    .any(|p| p["hook_event_name"] == "SessionEnd")
                    .then_some(())
            },
            || "no SessionEnd payload".into(),
        );
        std::thread::sleep(Duration::from_millis(100));
        drop(_stop);
        let (polls, polling) = watcher.join().unwrap();

        // The states volee showed from the first hook on, in order (consecutive repeats of a
        // state folded). Before it, only the launch's own working/idle (a slow cold start may
        // pass the 2 s working window before Claude prints anything).
        let seen = timeline.lock().unwrap().clone();
        let first_hook = seen
            .iter()
            .position(|o| o.source == "hooks")
            .expect("a hook-driven state");
        for o in &seen[..first_hook] {
            assert!(
                o.state == "working" || o.state == "idle",
                "before any hook: {o:?}"
            );
        }
        // A screen or listing observation must never undo a newer hook, not even for a moment.
        let (kept, blips) = transient_blips(&seen[first_hook..]);
        assert!(blips.is_empty(), "stale-source blips: {blips:#?}");
        let mut states: Vec<&str> = Vec::new();
        for o in &kept {
            if states.last() != Some(&o.state.as_str()) {
                states.push(&o.state);
            }
        }
        let events: Vec<String> = hook_payloads(&hook_log).iter().map(event_line).collect();
        eprintln!("\n==== Claude Code {} through volee ====", pinned.version);
        eprintln!("~/.claude.json seed: {state_json}");
        eprintln!(
            "~/.claude/settings.json seed (permissions): {}",
            settings_json["permissions"]
        );
        eprintln!("hook events: {}", events.join(" → "));
        eprintln!("model server:\n{}", server.summary());
        eprintln!(
            "volee ls --all --json, {polls} polls, one every {:.1} ms:",
            polling.as_secs_f64() * 1000.0 / polls.max(1) as f64
        );
        for o in &seen {
            eprintln!("  {}", o.line(started));
        }
        eprintln!(
            "tool_use answered → needs_you in volee ls: {:.0} ms",
            tool_to_needs_you.as_secs_f64() * 1000.0
        );
        let tool_use_wall = mains[0]
            .answered_wall
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let hook_started = |name: &str| {
            timed_hook_payloads(&hook_log)
                .iter()
                .find(|(_, p)| p["hook_event_name"] == name)
                .map(|(ns, _)| format!("{:.0} ms", (*ns as f64 - tool_use_wall as f64) / 1e6))
                .unwrap_or_else(|| "-".into())
        };
        eprintln!(
            "  the dialog was on screen at most {:.0} ms after needs_you",
            dialog_after_needs_you.as_secs_f64() * 1000.0
        );
        eprintln!(
            "  of which: PreToolUse hook started after {}, PermissionRequest hook started after {}",
            hook_started("PreToolUse"),
            hook_started("PermissionRequest")
        );
        eprintln!("total: {:.1} s", started.elapsed().as_secs_f64());
        assert_eq!(
            states,
            ["working", "needs_you", "working", "idle", "done"],
            "state sequence"
        );
        for expected in [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse(Bash)",
            "PermissionRequest(Bash)",
            "PostToolUse(Bash)",
            "Stop",
            "SessionEnd",
        ] {
            assert!(
                events.iter().any(|e| e.starts_with(expected)),
                "no {expected} among {events:?}"
            );
        }
        let order: Vec<&str> = events
            .iter()
            .map(|e| e.split('(').next().unwrap_or(""))
            .collect();
        let pos = |name: &str| order.iter().position(|e| *e == name).unwrap();
        assert!(
            pos("UserPromptSubmit") < pos("PermissionRequest")
                && pos("PermissionRequest") < pos("PostToolUse")
                && pos("PostToolUse") < pos("Stop"),
            "{events:?}"
        );
    });
    drop(diag);
}

#[test]
fn a_stale_screen_blip_after_a_hook_is_told_apart_from_a_wrong_state() {
    let t0 = Instant::now();
    let o = |ms: u64, state: &str, source: &str| Observed {
        at: t0 + Duration::from_millis(ms),
        state: state.into(),
        source: source.into(),
        evidence: String::new(),
    };
    // idle (hook Stop) → working (stale screen) 5 ms later → idle again 300 ms later: a blip.
    let (kept, blips) = transient_blips(&[
        o(0, "working", "hooks"),
        o(100, "idle", "hooks"),
        o(105, "working", "screen"),
        o(400, "idle", "screen"),
        o(900, "done", "multiplexer"),
    ]);
    assert_eq!(blips.len(), 1, "{blips:?}");
    let states: Vec<&str> = kept.iter().map(|k| k.state.as_str()).collect();
    assert_eq!(states, ["working", "idle", "idle", "done"]);
    // A working state that lasts, or comes from the hooks, is kept.
    let (_, blips) = transient_blips(&[
        o(0, "idle", "hooks"),
        o(5, "working", "screen"),
        o(2000, "idle", "screen"),
    ]);
    assert!(blips.is_empty());
    let (_, blips) = transient_blips(&[
        o(0, "idle", "hooks"),
        o(5, "working", "hooks"),
        o(200, "idle", "hooks"),
    ]);
    assert!(blips.is_empty());
}
