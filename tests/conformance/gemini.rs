//! Gemini CLI, the real program at its pinned version, driven through volee:
//! `volee launch --harness gemini` (`gemini --session-id ID PROMPT`, hooks from volee's
//! `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` file) in a private tmux, with a throwaway HOME whose
//! `~/.gemini/settings.json` selects API-key auth and the approval mode `default`, and whose
//! `~/.gemini/trustedFolders.json` trusts the work folder — as a user would have it; the model is
//! the scripted loopback server speaking the Gemini API (`GOOGLE_GEMINI_BASE_URL`; turn 1: a
//! `run_shell_command` `touch`, turn 2: text).
//!
//! The sequence asserted: working (hook BeforeAgent) → needs_you (hook Notification
//! ToolPermission) → approve with `volee send ID 1` → working → idle (hook AfterAgent) → the file
//! exists → `volee send ID /quit` → done. Gemini's processes survive a killed pane, so the test
//! kills the agent's process group when it ends, whatever happened.

use std::path::Path;

use serde_json::{json, Value};
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, TestEnv};

use crate::common::{cmdline_mentions, drive, logger_command, Spec};

pub(crate) const API_KEY: &str = "test-key";

/// Hook events the test itself logs (beside volee's own system-defaults layer). The per-model-call
/// events (BeforeModel, AfterModel, BeforeToolSelection) are left out: they fire on every call.
const LOGGED_EVENTS: &[&str] = &[
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "Notification",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
];

/// `~/.gemini/settings.json` and `~/.gemini/trustedFolders.json` of a user who chose API-key auth,
/// the approval mode that asks, and trusted the work folder. Returns both, for the report.
pub(crate) fn seed_home(home: &Path, work: &Path, hook_log: &Path) -> (Value, Value) {
    let logger = logger_command(hook_log);
    let mut hooks = serde_json::Map::new();
    for event in LOGGED_EVENTS {
        hooks.insert(
            (*event).into(),
            json!([{ "matcher": "", "hooks": [{ "type": "command", "command": logger, "name": "conformance-log", "timeout": 10000 }] }]),
        );
    }
    let settings = json!({
        // Without it: the auth picker ("How would you like to authenticate?").
        "security": { "auth": { "selectedType": "gemini-api-key" }, "folderTrust": { "enabled": true } },
        // The default already, pinned as a user who chose it.
        "general": { "defaultApprovalMode": "default", "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
        "privacy": { "usageStatisticsEnabled": false },
        "ide": { "enabled": false, "hasSeenNudge": true },
        "hooks": hooks,
    });
    let mut trusted = serde_json::Map::new();
    // Without it: "Do you trust the files in this folder?", and a restart once answered.
    trusted.insert(work.display().to_string(), json!("TRUST_FOLDER"));
    let trusted = Value::Object(trusted);
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        serde_json::to_vec_pretty(&settings).unwrap(),
    )
    .unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        serde_json::to_vec_pretty(&trusted).unwrap(),
    )
    .unwrap();
    (settings, trusted)
}

/// The first directory from `dir` up that Gemini CLI 0.61.0 deems insecure for a system settings
/// file (not owned by root, or writable by group or others).
fn insecure_ancestor(dir: &Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    dir.ancestors()
        .find(|d| std::fs::metadata(d).map_or(true, |m| m.uid() != 0 || m.mode() & 0o022 != 0))
        .map(Path::to_path_buf)
}

/// A test world where Gemini CLI reads volee's system-defaults file. 0.61.0 reads one only when
/// the file and every directory above it belong to root and are not group/other-writable;
/// otherwise it shows "Security Warning: Skipping system defaults file …" (volee then uses its
/// extension). So the world cannot live under /tmp: it goes under cargo's target tmp directory.
/// None (said on stderr) when this user or that directory cannot have one. Call it with the
/// test lock held, before the test starts threads (it changes TMPDIR for a moment).
pub(crate) fn system_defaults_env(version: &str) -> Option<TestEnv> {
    if !nix::unistd::getuid().is_root() {
        eprintln!(
            "SKIPPED: Gemini CLI {version} ignores a system-defaults file unless root owns it, \
             so volee gives this user (uid {}) its hooks through its extension instead",
            nix::unistd::getuid()
        );
        return None;
    }
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    // The test lock is held and no other thread of this test runs yet: nothing reads the
    // environment while it changes (tempfile reads TMPDIR).
    let previous = std::env::var_os("TMPDIR");
    std::env::set_var("TMPDIR", base);
    let env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    match previous {
        Some(v) => std::env::set_var("TMPDIR", v),
        None => std::env::remove_var("TMPDIR"),
    }
    if let Some(insecure) = insecure_ancestor(env.root()) {
        eprintln!(
            "SKIPPED: {} is group/other-writable or not root's, so Gemini CLI would skip volee's system-defaults file",
            insecure.display()
        );
        return None;
    }
    Some(env)
}

/// How volee gives Gemini its hooks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hooks {
    /// `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` (per launch; needs a root-owned file).
    SystemDefaults,
    /// volee's own extension in `~/.gemini/extensions/volee-hooks/` (any user).
    Extension,
}

/// A prompt of several lines sent with `volee send` reaches the model whole, as one turn
/// (hooks through volee's extension: any user).
#[test]
fn a_multi_line_prompt_sent_to_gemini_cli_arrives_whole() {
    let Some(mut w) = crate::common::world("gemini", "the Gemini CLI multi-line prompt test")
    else {
        return;
    };
    seed_home(&w.env.home(), &w.work, &w.hook_log);
    let server = ModelServer::start(vec![Turn::text("hello"), Turn::text("read it")]);
    w.env.extra_env.extend(
        [
            ("VOLEE_GEMINI_HOOKS", "extension".to_string()),
            ("PATH", crate::path_with(&w.bin_dir)),
            ("GEMINI_API_KEY", API_KEY.to_string()),
            ("GOOGLE_GEMINI_BASE_URL", server.base_url()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    crate::common::a_multi_line_prompt_arrives_whole(&w.env, &server, "gemini", "/quit");
}

#[test]
fn gemini_cli_asks_permission_and_finishes_its_turn() {
    run(Hooks::SystemDefaults);
}

#[test]
fn gemini_cli_through_volees_extension_asks_permission_and_finishes_its_turn() {
    run(Hooks::Extension);
}

fn run(hooks: Hooks) {
    let _serial = crate::serial();
    if !require("tmux", "the Gemini CLI conformance test") {
        return;
    }
    let pinned = crate::pinned("gemini");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };

    let mut env = if hooks == Hooks::Extension {
        let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
        // As root volee would use the system-defaults file: ask for the extension.
        env.extra_env
            .push(("VOLEE_GEMINI_HOOKS".into(), "extension".into()));
        env
    } else {
        let Some(env) = system_defaults_env(&pinned.version) else {
            return;
        };
        env
    };
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let hook_log = env.root().join("hook-payloads");
    std::fs::create_dir_all(&hook_log).unwrap();
    let (settings, trusted) = seed_home(&env.home(), &work, &hook_log);

    let server = ModelServer::start(vec![
        Turn::tool(
            "run_shell_command",
            json!({
                "command": format!("touch {}", marker.display()),
                "description": "Create the conformance marker file"
            }),
        ),
        Turn::text("done"),
    ]);
    server.set_main_delay(std::time::Duration::from_millis(1000));

    let path = crate::path_with(&bin_dir);
    env.extra_env.extend(
        [
            ("PATH", path.as_str()),
            ("GEMINI_API_KEY", API_KEY),
            ("GOOGLE_GEMINI_BASE_URL", &server.base_url()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let mut without_hooks = settings.clone();
    without_hooks.as_object_mut().unwrap().remove("hooks");
    let spec = Spec {
        harness: "gemini",
        display: "Gemini CLI",
        version_line: pinned.version.clone(),
        prompt: "Run the touch command to create the marker file.",
        first_working: &["hook BeforeAgent"],
        needs_you: &["hook Notification"],
        dialog: "Allow execution of [Shell]?",
        approve: "1",
        exit: "/quit",
        exit_status: 0,
        events: &[
            "SessionStart",
            "BeforeAgent",
            "BeforeTool(run_shell_command)",
            "Notification(ToolPermission)",
            "AfterTool(run_shell_command)",
            "AfterAgent",
            "SessionEnd",
        ],
        order: &["BeforeAgent", "Notification", "AfterTool", "AfterAgent"],
        end_event: Some("SessionEnd"),
        session_header: None,
        report: vec![
            format!("~/.gemini/settings.json seed (without hooks): {without_hooks}"),
            format!("~/.gemini/trustedFolders.json seed: {trusted}"),
        ],
    };
    let extension = env.home().join(".gemini/extensions/volee-hooks");
    drive(&spec, &env, &server, &hook_log, &marker, &|pid| {
        cmdline_mentions(pid, "gemini")
    });
    if hooks == Hooks::Extension {
        // The agent is done: nothing needs volee's extension any more.
        volee_test_support::wait_until(
            "volee removes its Gemini extension",
            std::time::Duration::from_secs(10),
            || (!extension.exists()).then_some(()),
            || format!("{} still exists", extension.display()),
        );
    } else {
        assert!(
            !extension.exists(),
            "the system-defaults launch wrote an extension"
        );
    }
}
