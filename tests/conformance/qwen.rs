//! Qwen Code, the real program at its pinned version, driven through volee:
//! `volee launch --harness qwen` (`qwen --session-id ID -i PROMPT`, hooks from volee's
//! `QWEN_CODE_SYSTEM_DEFAULTS_PATH` file) in a private tmux, with a throwaway HOME whose
//! `~/.qwen/settings.json` selects OpenAI-compatible auth and the approval mode `default` (0.24.4
//! defaults to `auto`, where a classifier approves tools) — as a user would configure it; the
//! model is the scripted loopback server speaking OpenAI chat completions (turn 1: a
//! `run_shell_command` `touch`, turn 2: text).
//!
//! The sequence asserted: working (hook UserPromptSubmit) → needs_you (hook PermissionRequest /
//! Notification permission_prompt) → approve with `volee send ID 1` → working → idle (hook Stop or
//! Notification idle_prompt) → the file exists → `volee send ID /quit` → done (exit 0).

use std::path::Path;

use serde_json::{json, Value};
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, TestEnv};

use crate::common::{cmdline_mentions, drive, logger_command, Spec};

pub(crate) const API_KEY: &str = "test-key";
pub(crate) const MODEL: &str = "volee-test-model";

/// Hook events the test itself logs (beside volee's own system-defaults layer).
const LOGGED_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "Notification",
    "PostToolUse",
    "Stop",
    "StopFailure",
    "SessionEnd",
];

/// `~/.qwen/settings.json` of a user who picked an OpenAI-compatible endpoint (key and URL from
/// the environment) and the approval mode that asks. Returns it, for the report.
pub(crate) fn seed_home(home: &Path, work: &Path, hook_log: &Path) -> Value {
    let logger = logger_command(hook_log);
    let mut hooks = serde_json::Map::new();
    for event in LOGGED_EVENTS {
        hooks.insert(
            (*event).into(),
            json!([{ "matcher": "", "hooks": [{ "type": "command", "command": logger, "name": "conformance-log", "timeout": 10000 }] }]),
        );
    }
    let settings = json!({
        "security": { "auth": { "selectedType": "openai" } },
        "model": { "name": MODEL },
        // 0.24.4's default is `auto` (an LLM classifier decides); `default` asks the user.
        "tools": { "approvalMode": "default" },
        "general": { "enableAutoUpdate": false },
        "privacy": { "usageStatisticsEnabled": false },
        // After each answer 0.24.4 asks the model, with the whole conversation and its tools, what
        // the user might type next: a request the script would take for a turn.
        "ui": { "enableFollowupSuggestions": false },
        "hooks": hooks,
    });
    std::fs::create_dir_all(home.join(".qwen")).unwrap();
    std::fs::write(
        home.join(".qwen/settings.json"),
        serde_json::to_vec_pretty(&settings).unwrap(),
    )
    .unwrap();
    // Folder trust is off by default in 0.24.4; were it on, this folder is trusted.
    let mut trusted = serde_json::Map::new();
    trusted.insert(work.display().to_string(), json!("TRUST_FOLDER"));
    std::fs::write(
        home.join(".qwen/trustedFolders.json"),
        serde_json::to_vec_pretty(&Value::Object(trusted)).unwrap(),
    )
    .unwrap();
    settings
}

/// A prompt of several lines sent with `volee send` reaches the model whole, as one turn.
#[test]
fn a_multi_line_prompt_sent_to_qwen_code_arrives_whole() {
    let Some(mut w) = crate::common::world("qwen", "the Qwen Code multi-line prompt test") else {
        return;
    };
    seed_home(&w.env.home(), &w.work, &w.hook_log);
    let server = ModelServer::start(vec![Turn::text("hello"), Turn::text("read it")]);
    w.env.extra_env.extend(
        [
            ("PATH", crate::path_with(&w.bin_dir)),
            ("OPENAI_API_KEY", API_KEY.to_string()),
            ("OPENAI_BASE_URL", format!("{}/v1", server.base_url())),
            ("OPENAI_MODEL", MODEL.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    crate::common::a_multi_line_prompt_arrives_whole(&w.env, &server, "qwen", "/quit");
}

#[test]
fn qwen_code_asks_permission_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the Qwen Code conformance test") {
        return;
    }
    let pinned = crate::pinned("qwen");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let hook_log = env.root().join("hook-payloads");
    std::fs::create_dir_all(&hook_log).unwrap();
    let settings = seed_home(&env.home(), &work, &hook_log);

    let server = ModelServer::start(vec![
        Turn::tool(
            "run_shell_command",
            json!({
                "command": format!("touch {}", marker.display()),
                "description": "Create the conformance marker file",
                "is_background": false
            }),
        ),
        Turn::text("done"),
    ]);
    server.set_main_delay(std::time::Duration::from_millis(1000));

    let path = crate::path_with(&bin_dir);
    env.extra_env.extend(
        [
            ("PATH", path.as_str()),
            ("OPENAI_API_KEY", API_KEY),
            ("OPENAI_BASE_URL", &format!("{}/v1", server.base_url())),
            ("OPENAI_MODEL", MODEL),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let spec = Spec {
        harness: "qwen",
        display: "Qwen Code",
        version_line: pinned.version.clone(),
        prompt: "Run the touch command to create the marker file.",
        // The prompt's hook, or — when the listing or screen spoke between it and the watcher's
        // next poll on a loaded machine — the tool's.
        first_working: &["hook UserPromptSubmit", "hook PreToolUse"],
        needs_you: &["hook PermissionRequest", "hook Notification"],
        dialog: "Allow execution of: 'touch'?",
        approve: "1",
        exit: "/quit",
        exit_status: 0,
        events: &[
            "SessionStart",
            "UserPromptSubmit",
            "PermissionRequest(run_shell_command)",
            "Notification(permission_prompt)",
            "PreToolUse(run_shell_command)",
            "PostToolUse(run_shell_command)",
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
        session_header: None,
        report: vec![format!(
            "~/.qwen/settings.json seed (without hooks): {}",
            json!({
                "security": settings["security"],
                "model": settings["model"],
                "tools": settings["tools"],
                "general": settings["general"],
                "privacy": settings["privacy"],
                "ui": settings["ui"],
            })
        )],
    };
    drive(&spec, &env, &server, &hook_log, &marker, &|pid| {
        cmdline_mentions(pid, "qwen")
    });
}
