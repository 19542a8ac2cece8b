//! Claude Code, the real program at its pinned version, driven through volee:
//! `volee launch --harness claude` in a private tmux, a throwaway HOME seeded as a user who has
//! finished onboarding, trusted the work folder, approved the API key and chosen a permission mode
//! that prompts; the model is the scripted loopback server (turn 1: a Bash `touch`, turn 2: text).
//!
//! The sequence asserted: working (hooks) → needs_you (hooks, the permission prompt) → approve
//! with `volee send ID 1` → working → idle (hook Stop) → the file exists → `volee send ID /exit` →
//! done (exit 0); the hook payloads' session id is volee's; every tool_use was answered once.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, TestEnv};

use crate::common::{drive, transient_blips, Spec};
use crate::Observed;

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

/// The environment a Claude Code test launches with: the pinned program first on PATH, the
/// scripted model server and its key, Claude's scratch files under `claude_tmp`, no
/// non-essential traffic (the same program behaves the same with or without a network).
pub(crate) fn claude_env(
    env: &mut TestEnv,
    bin_dir: &Path,
    server: &ModelServer,
    claude_tmp: &Path,
) {
    std::fs::create_dir_all(claude_tmp).unwrap();
    env.extra_env.extend(
        [
            ("PATH", crate::path_with(bin_dir)),
            ("ANTHROPIC_BASE_URL", server.base_url()),
            ("ANTHROPIC_API_KEY", API_KEY.to_string()),
            ("CLAUDE_CODE_TMPDIR", claude_tmp.display().to_string()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
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

    claude_env(&mut env, &bin_dir, &server, &claude_tmp);
    let spec = Spec {
        harness: "claude",
        display: "Claude Code",
        version_line: format!("{} (Claude Code)", pinned.version),
        prompt: "Run the touch command to create the marker file.",
        // The model is still "thinking": the first hook-driven state volee shows.
        // The prompt's hook, or — when the listing or screen spoke between it and the watcher's
        // next poll on a loaded machine — the tool's.
        first_working: &["hook UserPromptSubmit", "hook PreToolUse"],
        needs_you: &[
            "hook PermissionRequest",
            "hook Notification",
            "listing status waiting (permission prompt)",
        ],
        // The PermissionRequest hook runs before the dialog is drawn (a hook may decide the
        // permission itself), so the screen can lag the state by a few milliseconds.
        dialog: "Do you want to proceed?",
        // The dialog takes the option's digit as a keystroke.
        approve: "1",
        exit: "/exit",
        exit_status: 0,
        events: &[
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse(Bash)",
            "PermissionRequest(Bash)",
            "PostToolUse(Bash)",
            "Stop",
            "SessionEnd",
        ],
        order: &[
            "UserPromptSubmit",
            "PermissionRequest",
            "PostToolUse",
            "Stop",
        ],
        end_event: Some("SessionEnd"),
        session_header: Some("x-claude-code-session-id"),
        report: vec![
            format!("~/.claude.json seed: {state_json}"),
            format!(
                "~/.claude/settings.json seed (permissions): {}",
                settings_json["permissions"]
            ),
        ],
    };
    drive(&spec, &env, &server, &hook_log, &marker, &|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            == "claude"
    });
}

/// A prompt of several lines sent with `volee send` reaches the model as one message, whole
/// (`@path` tokens open Claude's completion menu, which could eat the Enter).
#[test]
fn a_multi_line_prompt_sent_to_claude_code_arrives_whole() {
    let Some(mut w) = crate::common::world("claude", "the Claude Code multi-line prompt test")
    else {
        return;
    };
    seed_home(&w.env.home(), &w.work, &w.hook_log);
    let server = ModelServer::start(vec![Turn::text("hello"), Turn::text("read it")]);
    let claude_tmp = w.env.root().join("claude-tmp");
    claude_env(&mut w.env, &w.bin_dir, &server, &claude_tmp);
    crate::common::a_multi_line_prompt_arrives_whole(&w.env, &server, "claude", "/exit");
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
