//! GitHub Copilot CLI (`@github/copilot`), the real program at its pinned version, driven through
//! volee: `volee launch --harness copilot` (`copilot --session-id ID -n NAME -i PROMPT`, with
//! `COPILOT_AUTO_UPDATE=false`; volee's hooks go in its own `~/.copilot/hooks/volee.json`, which
//! the daemon writes into the launch's HOME and removes once no Copilot agent lives) in a private
//! tmux, with a throwaway HOME whose `~/.copilot/config.json` trusts the work folder
//! (`trustedFolders`, what "Yes, and remember this folder" writes) — as a user would have it. The
//! model is the scripted loopback server speaking OpenAI chat completions through Copilot's BYOK
//! variables (`COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_API_KEY`, `COPILOT_OFFLINE=true`):
//! turn 1 a `bash` tool call that creates the marker, turn 2 text.
//!
//! The sequence asserted: working (hook userPromptSubmitted) → needs_you (hook notification
//! permission_prompt) → approve with `volee send ID 1` ("❯ 1. Yes") → working → idle (hook
//! agentStop) → the marker exists → `volee send ID /exit` → done (exit 0); every payload's
//! `sessionId` is the id volee preset; volee's hooks file was there while the agent lived and is
//! gone after, the test's own hooks file untouched.
//!
//! The test's own hook logger normalises Copilot's camelCase payloads for the shared checks
//! (`common::drive` reads `hook_event_name`, `session_id`, `tool_name`): it adds them, copied from
//! the registered event name, `sessionId` and `toolName`, and keeps every original field (a
//! `hook_event_name` Copilot sent is kept as `original_hook_event_name`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

use crate::common::{cmdline_mentions, drive, Spec};

pub const API_KEY: &str = "test-key";
/// The model name Copilot sends (BYOK takes any).
pub const MODEL: &str = "gpt-4.1";

/// Hook events the test itself logs (beside volee's own hooks file).
const LOGGED_EVENTS: &[&str] = &[
    "sessionStart",
    "userPromptSubmitted",
    "preToolUse",
    "permissionRequest",
    "notification",
    "postToolUse",
    "postToolUseFailure",
    "agentStop",
    "errorOccurred",
    "sessionEnd",
];

/// `copilot --version`'s first line ("GitHub Copilot CLI 1.0.102."), run with a throwaway HOME.
pub fn version_line(bin: &Path) -> Option<String> {
    let home = std::env::temp_dir().join(format!("volee-copilot-version-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&home);
    let out = Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        .env("COPILOT_AUTO_UPDATE", "false")
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

/// Run `copilot --version` once with this HOME, as a user who ran Copilot before has: the first run
/// in a HOME unpacks the package into `~/.cache/copilot/pkg/` (3–4 s here), and volee's version
/// read of a discovered process is bounded to 3 s.
pub fn warm_package_cache(bin: &Path, home: &Path) {
    let out = Command::new(bin)
        .arg("--version")
        .env("HOME", home)
        .env("COPILOT_AUTO_UPDATE", "false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A hook command that writes the payload, normalised (see the module documentation), to `dir`,
/// one file per call named by the hook's start time in ns (read by `common::timed_hook_payloads`).
fn logger_command(node: &Path, event: &str, dir: &Path) -> String {
    const SCRIPT: &str = "let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{\
        const [ev,dir,t]=process.argv.slice(1);let p;\
        try{p=JSON.parse(d)}catch(e){p={unparsed:d}}\
        if(p===null||typeof p!=='object'||Array.isArray(p))p={payload:p};\
        if('hook_event_name' in p)p.original_hook_event_name=p.hook_event_name;\
        p.hook_event_name=ev;\
        if('sessionId' in p)p.session_id=p.sessionId;\
        if('toolName' in p)p.tool_name=p.toolName;\
        require('fs').writeFileSync(dir+'/'+t+'-'+process.pid+'.json',JSON.stringify(p));\
        process.stdout.write('{}')})";
    format!(
        "t=$(date +%s%N); '{}' -e \"{SCRIPT}\" {event} '{}' \"$t\"",
        node.display(),
        dir.display()
    )
}

/// A throwaway Copilot home (`~/.copilot`, or what `COPILOT_HOME` names): `config.json` trusting
/// `work`, and the test's own hook logger as `hooks/conformance-log.json`.
pub fn seed_home(copilot_home: &Path, work: &Path, hook_log: &Path) -> String {
    std::fs::create_dir_all(copilot_home.join("hooks")).unwrap();
    let config = serde_json::to_string_pretty(&json!({
        "trustedFolders": [work.display().to_string()]
    }))
    .unwrap();
    std::fs::write(copilot_home.join("config.json"), &config).unwrap();
    let node = which("node").expect("node on PATH (Copilot's loader needs it too)");
    let mut hooks = serde_json::Map::new();
    for event in LOGGED_EVENTS {
        hooks.insert(
            (*event).into(),
            json!([{
                "type": "command",
                "bash": logger_command(&node, event, hook_log),
                "timeoutSec": 10
            }]),
        );
    }
    std::fs::write(
        copilot_home.join("hooks/conformance-log.json"),
        serde_json::to_vec_pretty(&json!({ "version": 1, "hooks": hooks })).unwrap(),
    )
    .unwrap();
    config
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The BYOK environment pointing Copilot at `server`.
pub fn byok_env(server: &ModelServer) -> Vec<(String, String)> {
    [
        (
            "COPILOT_PROVIDER_BASE_URL",
            format!("{}/v1", server.base_url()),
        ),
        ("COPILOT_PROVIDER_API_KEY", API_KEY.to_string()),
        ("COPILOT_OFFLINE", "true".to_string()),
        ("COPILOT_MODEL", MODEL.to_string()),
        ("COPILOT_AUTO_UPDATE", "false".to_string()),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .to_vec()
}

/// The pinned Copilot's bin directory and its version line.
pub fn installed() -> Option<(PathBuf, String)> {
    let pinned = crate::pinned("copilot");
    let dir = crate::install(&pinned)?;
    let line = version_line(&dir.join(&pinned.bin))?;
    Some((dir, line))
}

#[test]
fn copilot_cli_asks_permission_and_finishes_its_turn() {
    let _serial = crate::serial();
    if !require("tmux", "the Copilot CLI conformance test") {
        return;
    }
    let Some((bin_dir, version)) = installed() else {
        return;
    };

    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let marker = work.join("volee-conformance-touched");
    let hook_log = env.root().join("hook-payloads");
    std::fs::create_dir_all(&hook_log).unwrap();

    let server = ModelServer::start(vec![
        Turn::tool(
            "bash",
            json!({
                "command": format!("touch {}", marker.display()),
                "description": "Create the conformance marker"
            }),
        ),
        Turn::text("done"),
    ]);
    server.set_main_delay(Duration::from_millis(1000));
    let home = env.home();
    let config = seed_home(&home.join(".copilot"), &work, &hook_log);
    let volee_hooks = home.join(".copilot/hooks/volee.json");
    assert!(!volee_hooks.exists());

    let path = crate::path_with(&bin_dir);
    env.extra_env.push(("PATH".into(), path));
    env.extra_env.extend(byok_env(&server));
    let spec = Spec {
        harness: "copilot",
        display: "GitHub Copilot CLI",
        version_line: version,
        prompt: "Create the conformance marker file.",
        first_working: &["hook userPromptSubmitted", "hook preToolUse"],
        needs_you: &["hook notification"],
        dialog: "Do you want to run this command?",
        // "❯ 1. Yes": the digit picks and confirms (the Enter after it lands in the empty input).
        approve: "1",
        exit: "/exit",
        exit_status: 0,
        events: &[
            "sessionStart",
            "userPromptSubmitted",
            "preToolUse(bash)",
            "permissionRequest(bash)",
            "notification(permission_prompt)",
            "postToolUse(bash)",
            "agentStop",
            "sessionEnd",
        ],
        order: &[
            "userPromptSubmitted",
            "preToolUse",
            "notification",
            "postToolUse",
            "agentStop",
        ],
        end_event: Some("sessionEnd"),
        session_header: None,
        report: vec![format!("~/.copilot/config.json seed:\n{config}")],
    };

    // volee's hooks file, seen while the agent lives.
    let stop = AtomicBool::new(false);
    let seen_hooks_file = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut seen = None;
            while !stop.load(Ordering::SeqCst) {
                if seen.is_none() {
                    seen = std::fs::read_to_string(&volee_hooks).ok();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        let _stop = crate::SetOnDrop(&stop);
        drive(&spec, &env, &server, &hook_log, &marker, &|pid| {
            cmdline_mentions(pid, "copilot")
        });
        drop(_stop);
        watcher.join().unwrap()
    });
    let seen_hooks_file = seen_hooks_file.unwrap_or_else(|| {
        panic!(
            "volee's hooks file never appeared in {}",
            volee_hooks.display()
        )
    });
    let written: serde_json::Value = serde_json::from_str(&seen_hooks_file).unwrap();
    assert_eq!(written["version"], 1, "{written}");
    assert!(
        written["hooks"]["notification"][0]["bash"]
            .as_str()
            .is_some_and(|c| c.ends_with(" hook copilot notification")),
        "{written}"
    );
    wait_until(
        "volee's hooks file removed after the agent ended",
        Duration::from_secs(10),
        || (!volee_hooks.exists()).then_some(()),
        || format!("{} still there", volee_hooks.display()),
    );
    assert!(home.join(".copilot/hooks/conformance-log.json").is_file());
    // The payloads as Copilot sent them: `sessionId` (drive checked the copy the logger made).
    let payloads = crate::common::hook_payloads(&hook_log);
    assert!(!payloads.is_empty());
    for p in &payloads {
        assert!(p["sessionId"].is_string(), "{p}");
        assert_eq!(p["sessionId"], p["session_id"], "{p}");
    }
    let notification = payloads
        .iter()
        .find(|p| p["hook_event_name"] == "notification")
        .unwrap();
    assert_eq!(notification["notification_type"], "permission_prompt");
    eprintln!("notification payload: {notification}");
}
