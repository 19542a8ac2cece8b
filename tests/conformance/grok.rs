//! Grok Build (xAI's `@xai-official/grok`), the real program at its pinned version, driven through
//! volee: `volee launch --harness grok` (`grok --session-id ID PROMPT`; volee's hooks go in its own
//! `~/.grok/hooks/volee-hooks.json`, which the daemon writes into the launch's HOME and removes
//! once no Grok agent lives) in a private tmux, with a throwaway HOME whose `~/.grok/config.toml`
//! names a custom model (`[model.<id>]` with `base_url` and `env_key`) as the default — as a user
//! would configure it; the model is the scripted loopback server speaking OpenAI chat completions
//! (turn 1: a `run_terminal_command` `rm -f` of a file the test made, then a `touch` of the marker;
//! turn 2: text). In the default permission mode 1.0.41 runs `touch` unasked but asks for `rm -f`.
//!
//! The sequence asserted: working (hook UserPromptSubmit) → needs_you (hook Notification
//! permission_prompt) → approve with `volee send ID 2` ("2 (○) Yes, proceed") → working → idle
//! (hook Stop) → the file is gone and the marker exists → `volee send ID /quit` → done (exit 0);
//! volee's hooks file was in `~/.grok/hooks/` while the agent lived and is gone after.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

use crate::common::{cmdline_mentions, drive, logger_command, Spec};

const API_KEY: &str = "test-key";
/// The `[model.<id>]` key, and the model name sent to the API.
const MODEL_ID: &str = "volee-test";
const MODEL: &str = "volee-test-model";

/// Hook events the test itself logs (beside volee's own hooks file).
const LOGGED_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "StopFailure",
    "StopCancelled",
    "SessionEnd",
];

/// `grok --version`'s first line ("grok 1.0.41 (4220f3b224a6)"), run with a throwaway HOME.
fn version_line(bin: &Path) -> Option<String> {
    let home = std::env::temp_dir().join(format!("volee-grok-version-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&home);
    let out = Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        .env("GROK_HOME", home.join(".grok"))
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

/// The pinned Grok Build's bin directory. `grok --version` prints "grok 1.0.41 (…)", not the
/// version first, so the shared check (`crate::install`) does not recognise a good install: a
/// cached one is taken here when its version line names the pinned version.
fn installed(p: &crate::Pinned) -> Option<(PathBuf, String)> {
    let bin_dir = crate::cache_root()
        .join(format!("{}-{}", p.name, p.version))
        .join("node_modules/.bin");
    let fits = |dir: &Path| {
        version_line(&dir.join(&p.bin)).filter(|l| l.split_whitespace().any(|w| w == p.version))
    };
    if let Some(line) = fits(&bin_dir) {
        return Some((bin_dir, line));
    }
    let dir = crate::install(p)?;
    let line = fits(&dir)?;
    Some((dir, line))
}

/// `~/.grok/config.toml` of a user who added an OpenAI-compatible endpoint as a custom model and
/// made it the default, and the test's own hook logger as a global hooks file. Returns the config.
fn seed_home(home: &Path, base_url: &str, hook_log: &Path) -> String {
    let config = format!(
        "[models]\ndefault = \"{MODEL_ID}\"\n\n[model.{MODEL_ID}]\nmodel = \"{MODEL}\"\nname = \"Volee test\"\nbase_url = \"{base_url}\"\nenv_key = \"VOLEE_TEST_MODEL_KEY\"\n\n[dashboard]\nenabled = false\n"
    );
    let grok = home.join(".grok");
    std::fs::create_dir_all(grok.join("hooks")).unwrap();
    std::fs::write(grok.join("config.toml"), &config).unwrap();
    let logger = logger_command(hook_log);
    let mut hooks = serde_json::Map::new();
    for event in LOGGED_EVENTS {
        hooks.insert(
            (*event).into(),
            json!([{ "hooks": [{ "type": "command", "command": logger, "timeout": 10 }] }]),
        );
    }
    std::fs::write(
        grok.join("hooks/conformance-log.json"),
        serde_json::to_vec_pretty(&json!({ "hooks": hooks })).unwrap(),
    )
    .unwrap();
    config
}

#[test]
fn grok_build_asks_permission_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the Grok Build conformance test") {
        return;
    }
    let pinned = crate::pinned("grok");
    let Some((bin_dir, version)) = installed(&pinned) else {
        return;
    };

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let victim = work.join("volee-conformance-remove-me");
    std::fs::write(&victim, "made by the test\n").unwrap();
    let marker = work.join("volee-conformance-touched");
    let hook_log = env.root().join("hook-payloads");
    std::fs::create_dir_all(&hook_log).unwrap();

    let server = ModelServer::start(vec![
        Turn::tool(
            "run_terminal_command",
            json!({
                "command": format!("rm -f {} && touch {}", victim.display(), marker.display()),
                "description": "Remove the conformance file",
                "is_background": false
            }),
        ),
        Turn::text("done"),
    ]);
    server.set_main_delay(Duration::from_millis(1000));
    let home = env.home();
    let config = seed_home(&home, &format!("{}/v1", server.base_url()), &hook_log);
    let volee_hooks = home.join(".grok/hooks/volee-hooks.json");
    assert!(!volee_hooks.exists());

    let path = crate::path_with(&bin_dir);
    env.extra_env.extend(
        [
            ("PATH", path.as_str()),
            ("VOLEE_TEST_MODEL_KEY", API_KEY),
            ("XAI_API_KEY", API_KEY),
            ("GROK_HOME", &home.join(".grok").display().to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let spec = Spec {
        harness: "grok",
        display: "Grok Build",
        version_line: version,
        prompt: "Run the command that removes the conformance file.",
        first_working: &["hook UserPromptSubmit", "hook PreToolUse"],
        needs_you: &["hook Notification"],
        // For this compound command the menu has no "Always allow" line (a lone `rm -f` has,
        // and "Yes, proceed" is 3 there); the digit picks and confirms.
        dialog: "2 (○) Yes, proceed",
        approve: "2",
        exit: "/quit",
        exit_status: 0,
        events: &[
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse(run_terminal_command)",
            "Notification",
            "PostToolUse(run_terminal_command)",
            "Stop",
            "SessionEnd",
        ],
        order: &[
            "UserPromptSubmit",
            "PreToolUse",
            "Notification",
            "PostToolUse",
            "Stop",
        ],
        end_event: Some("SessionEnd"),
        // Grok sends the session id in every request (checked when present).
        session_header: Some("x-grok-session-id"),
        report: vec![format!("~/.grok/config.toml seed:\n{config}")],
    };

    // volee's hooks file, seen while the agent lives.
    let stop = AtomicBool::new(false);
    let seen_hooks_file = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut seen = false;
            while !stop.load(Ordering::SeqCst) {
                seen |= volee_hooks.is_file();
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        let _stop = crate::SetOnDrop(&stop);
        drive(&spec, &env, &server, &hook_log, &marker, &|pid| {
            cmdline_mentions(pid, "grok")
        });
        drop(_stop);
        watcher.join().unwrap()
    });
    assert!(
        seen_hooks_file,
        "volee's hooks file never appeared in {}",
        volee_hooks.display()
    );
    assert!(
        !victim.exists(),
        "the approved rm -f did not remove the file"
    );
    wait_until(
        "volee's hooks file removed after the agent ended",
        Duration::from_secs(10),
        || (!volee_hooks.exists()).then_some(()),
        || format!("{} still there", volee_hooks.display()),
    );
    assert!(home.join(".grok/hooks/conformance-log.json").is_file());
    // Grok's payloads carry the session id twice: `session_id` (checked by `drive`) and
    // `sessionId`; both must agree.
    let payloads = crate::common::hook_payloads(&hook_log);
    assert!(!payloads.is_empty());
    for p in &payloads {
        assert_eq!(p["sessionId"], p["session_id"], "{p}");
    }
}
