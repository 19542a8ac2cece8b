//! The hook plumbing of a harness profile, end to end: `volee launch --harness claude` passes a
//! per-launch `--settings` file and a preset `--session-id`; the hooks it names reach the daemon
//! (`volee hook`), states follow them, `volee send` answers a prompt, and events written while the
//! daemon is down are spooled and replayed.
//!
//! The program here is a scripted stand-in named `claude` that only exercises volee's side of the
//! contract (it reads the settings file volee gave it and runs the hook commands in it). The real
//! harness programs are driven by the conformance suite (issue 3).

use std::os::unix::fs::PermissionsExt;

use volee_test_support::TestEnv;

use crate::setup;

/// A stand-in `claude` on PATH: prints a measured version, then plays one turn through the hook
/// commands of the settings file it was given.
fn install_stand_in(env: &mut TestEnv) {
    let script = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.332 (Claude Code)"; exit 0; fi
while [ $# -gt 0 ]; do
  case "$1" in --settings) S=$2; shift;; --session-id) SID=$2; shift;; esac; shift
done
[ -f "$S" ] || { echo "no settings file"; exit 9; }
VOLEE=$(grep -o "'[^']*' hook claude" "$S" | head -n 1 | cut -d"'" -f2)
hook() { printf '{"session_id":"%s","hook_event_name":"%s"%s}' "$SID" "$1" "$2" | "$VOLEE" hook claude "$1"; }
hook SessionStart ',"source":"startup"'
hook UserPromptSubmit ',"prompt":"go"'
echo "working on it"
hook PreToolUse ',"tool_name":"Bash"'
hook PermissionRequest ',"tool_name":"Bash"'
echo "Do you want to proceed?"
read answer
echo "answer: $answer"
hook PostToolUse ',"tool_name":"Bash"'
sleep 1
hook Stop ''
echo "done"
exec sleep 120
"#;
    write_stand_in(env, "claude", script);
}

/// Put an executable `program` with this script into the environment's fake bin dir, which goes
/// first on volee's PATH.
pub(crate) fn write_stand_in(env: &mut TestEnv, program: &str, script: &str) {
    let bin = env.root().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join(program);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    if !env.extra_env.iter().any(|(k, _)| k == "PATH") {
        let path_var = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        env.extra_env.push(("PATH".into(), path_var));
    }
}

#[test]
fn hooks_drive_states_and_send_answers_the_prompt() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    install_stand_in(&mut env);
    let id = env.ok([
        "launch",
        "--harness",
        "claude",
        "--host",
        "tmux:main",
        "--name",
        "c1",
        "go",
    ]);
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    let view = env.agent(&id);
    assert_eq!(view["harness"], "claude");
    assert_eq!(view["state_source"], "hooks");
    assert_eq!(view["evidence"], "hook PermissionRequest");
    assert_eq!(view["profile_fit"], "measured");
    assert_eq!(view["harness_version"], "2.1.332 (Claude Code)");
    let session = view["session_id"].as_str().unwrap().to_string();
    assert_eq!(session.len(), 36, "a preset uuid: {session}");
    let command = view["command"].to_string();
    assert!(
        command.contains("--settings") && command.contains(&session),
        "{command}"
    );

    // Answer the prompt: the agent reacts (hooks say working), then its turn ends (idle).
    let sent = env.ok(["send", &id, "1"]);
    assert!(sent.contains("now working"), "{sent}");
    assert_eq!(env.wait_state(&id, "idle", 10), "idle");
    assert_eq!(env.agent(&id)["evidence"], "hook Stop");
    let peek = env.ok(["peek", &id]);
    assert!(peek.contains("answer: 1"), "{peek}");
    let explain = env.ok(["explain", &id]);
    assert!(explain.contains("Stop means idle"), "{explain}");
}

#[test]
fn hooks_spool_while_the_daemon_is_down_and_bad_payloads_are_harmless() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    install_stand_in(&mut env);
    let id = env.ok(["launch", "--harness", "claude", "--host", "tmux:main", "go"]);
    env.wait_state(&id, "needs_you", 10);
    let token = hook_token(&env, &id);
    env.ok(["daemon", "stop"]);

    // A hook while no daemon runs: spooled, exit 0, nothing printed.
    let mut hook = env.volee(["hook", "claude", "StopFailure"]);
    hook.env("VOLEE_AGENT_ID", &id)
        .env("VOLEE_AGENT_TOKEN", &token)
        .stdin(std::process::Stdio::piped());
    let mut child = hook.stdout(std::process::Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"session_id":"x","error":"server_error"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(env.volee_home().join("state/spool/hooks.jsonl").exists());

    // The next daemon replays it: the failed turn shows.
    assert_eq!(env.wait_state(&id, "failed", 10), "failed");
    assert_eq!(env.agent(&id)["evidence"], "hook StopFailure");
    assert!(!env.volee_home().join("state/spool/hooks.jsonl").exists());

    // Malformed, huge, or for an unknown agent: exit 0, state untouched, a log line.
    for (agent, payload) in [
        (id.as_str(), b"{ not json".to_vec()),
        (id.as_str(), vec![b' '; 2 * 1024 * 1024]),
        ("nosuch", br#"{"session_id":"y"}"#.to_vec()),
    ] {
        let mut hook = env.volee(["hook", "claude", "UserPromptSubmit"]);
        hook.env("VOLEE_AGENT_ID", agent)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = hook.spawn().unwrap();
        let _ = child.stdin.take().unwrap().write_all(&payload);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stdout.is_empty());
    }
    assert_eq!(env.agent(&id)["state"], "failed");
    let log = std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap();
    assert!(log.contains("malformed JSON"), "{log}");
    assert!(log.contains("unknown agent"), "{log}");
}

#[test]
fn a_missing_harness_names_its_package() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    // A PATH with no `claude` on it.
    env.extra_env.push(("PATH".into(), "/usr/bin:/bin".into()));
    let out = env.run(["launch", "--harness", "claude", "--host", "tmux:main", "hi"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("@anthropic-ai/claude-code"), "{stderr}");
}

/// Is `path` owned by root and not group/other-writable, and every directory above it too?
fn root_owned_chain(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors().all(|p| {
        p.as_os_str().is_empty()
            || std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0)
    })
}

/// A stand-in for a harness whose hooks come from a file volee names (`config_of` prints its
/// path): version, then a turn played through the hook commands in that file.
fn install_scripted(env: &mut TestEnv, program: &str, version: &str, config_of: &str, turn: &str) {
    let script = format!(
        r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi
if [ "$1" = "--help" ]; then echo "usage: {program} [prompt]"; exit 0; fi
CONF={config_of}
[ -f "$CONF" ] || {{ echo "no hooks file at $CONF"; exec sleep 60; }}
VOLEE=$(grep -o "'[^']*' hook {program}" "$CONF" | head -n 1 | cut -d"'" -f2)
hook() {{ printf '{{"session_id":"s-1","hook_event_name":"%s"%s}}' "$1" "$2" | "$VOLEE" hook {program} "$1"; }}
{turn}
exec sleep 120
"#
    );
    write_stand_in(env, program, &script);
}

#[test]
fn gemini_hooks_come_from_a_merged_system_defaults_file() {
    // Gemini reads a system defaults file only when root owns it and every directory above it:
    // the environment lives under the target dir (root's, on CI), not /tmp.
    let parent = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let Some((_serial, mut env)) = crate::setup_in(parent) else {
        return;
    };
    let secure = root_owned_chain(env.root());
    // An administrator's system defaults, named by the variable volee must honour and keep.
    let admin = env.root().join("admin-defaults.json");
    std::fs::write(
        &admin,
        r#"{"general":{"vimMode":true},"hooks":{"AfterAgent":[{"matcher":"*","hooks":[{"type":"command","command":"true"}]}]}}"#,
    )
    .unwrap();
    env.extra_env.push((
        "GEMINI_CLI_SYSTEM_DEFAULTS_PATH".into(),
        admin.display().to_string(),
    ));
    install_scripted(
        &mut env,
        "gemini",
        "0.61.0",
        "\"$GEMINI_CLI_SYSTEM_DEFAULTS_PATH\"",
        r#"cp "$CONF" "$HOME/seen-defaults.json"
hook BeforeAgent ',"prompt":"go"'
hook Notification ',"notification_type":"ToolPermission"'
read answer
hook AfterTool ''
sleep 1
hook AfterAgent ''"#,
    );
    let out = env.run(["launch", "--harness", "gemini", "--host", "tmux:main", "go"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !secure {
        // Not root's all the way up: volee must not name a file Gemini would skip (it would then
        // run without the administrator's defaults too), and says why there are no hooks.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("gets no hooks"), "{stderr}");
        assert!(!env.agent(&id)["command"]
            .to_string()
            .contains("system-defaults"));
        assert!(!std::fs::read_to_string(&admin).unwrap().contains("volee"));
        eprintln!(
            "not root-owned ({}): checked the no-hooks path only",
            env.root().display()
        );
        return;
    }
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    assert_eq!(env.agent(&id)["evidence"], "hook Notification");
    env.ok(["send", &id, "y"]);
    assert_eq!(env.wait_state(&id, "idle", 10), "idle");
    assert_eq!(env.agent(&id)["evidence"], "hook AfterAgent");
    // The administrator's settings and hook survived in volee's copy.
    let seen: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.home().join("seen-defaults.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(seen["general"]["vimMode"], true);
    let after_agent = seen["hooks"]["AfterAgent"].as_array().unwrap();
    assert_eq!(after_agent.len(), 2, "{seen}");
    assert_eq!(after_agent[0]["hooks"][0]["command"], "true");
    // And the administrator's own file is untouched.
    assert!(!std::fs::read_to_string(&admin).unwrap().contains("volee"));
}

#[test]
fn grok_hooks_file_is_volees_own_and_goes_when_unneeded() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    install_scripted(
        &mut env,
        "grok",
        "grok 1.0.41 (4220f3b224a6)",
        "\"$HOME/.grok/hooks/volee-hooks.json\"",
        r#"hook UserPromptSubmit ''
hook Notification ',"notificationType":"permission_prompt"'
read answer
hook Stop ',"reason":"end_turn"'"#,
    );
    // A hook file of the user's own sits beside volee's and is never touched.
    let hooks_dir = env.home().join(".grok/hooks");
    std::fs::create_dir_all(&hooks_dir).unwrap();
    std::fs::write(hooks_dir.join("mine.json"), r#"{"hooks":{}}"#).unwrap();
    let id = env.ok(["launch", "--harness", "grok", "--host", "tmux:main", "go"]);
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    assert!(hooks_dir.join("volee-hooks.json").exists());
    env.ok(["send", &id, "y"]);
    assert_eq!(env.wait_state(&id, "idle", 10), "idle");
    env.ok(["stop", &id]);
    volee_test_support::wait_until(
        "volee's Grok hooks file is removed once no Grok agent lives",
        std::time::Duration::from_secs(5),
        || (!hooks_dir.join("volee-hooks.json").exists()).then_some(()),
        || env.log_tail(),
    );
    assert!(hooks_dir.join("mine.json").exists());
}

#[test]
fn probe_compares_the_installed_program_with_its_profile() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    install_scripted(&mut env, "qwen", "0.24.4", "/nonexistent", "");
    let out = env.run(["probe", "qwen"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("ok    version 0.24.4"), "{report}");
    // The stand-in has no --help: the flags the profile relies on are reported missing.
    assert!(
        report.contains("diff  flag --session-id in --help"),
        "{report}"
    );
    assert!(report.contains("processes"), "{report}");
    // It cleaned up after itself.
    let leftovers: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("volee-probe-qwen-")
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let out = env.run(["probe", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn claude_status_file_is_a_listing_source() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    // A stand-in whose hooks never fire (e.g. an untrusted folder) but whose status file, as
    // Claude keeps it in ~/.claude/sessions/<pid>.json, says what it does.
    install_scripted(
        &mut env,
        "claude",
        "2.1.332 (Claude Code)",
        "/nonexistent",
        "",
    );
    let script = env.root().join("fakebin/claude");
    let body = std::fs::read_to_string(&script).unwrap().replace(
        "CONF=/nonexistent",
        r#"mkdir -p "$HOME/.claude/sessions"; F="$HOME/.claude/sessions/$$.json"
status() { printf '{"pid":%s,"sessionId":"sid-9","status":"%s","waitingFor":"%s"}' $$ "$1" "$2" > "$F.tmp"; mv "$F.tmp" "$F"; }
status busy ""; sleep 1.2
status waiting "permission prompt"; read answer
status busy ""; sleep 1.2
status idle ""; exec sleep 120
CONF=/nonexistent"#,
    );
    std::fs::write(&script, body).unwrap();
    let id = env.ok(["launch", "--harness", "claude", "--host", "tmux:main", "go"]);
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    let view = env.agent(&id);
    assert_eq!(view["state_source"], "listing");
    assert_eq!(
        view["evidence"],
        "listing status waiting (permission prompt)"
    );
    env.ok(["send", &id, "1"]);
    assert_eq!(env.wait_state(&id, "idle", 10), "idle");
    assert_eq!(env.agent(&id)["state_source"], "listing");
}

/// `volee setup cursor` adds volee's hooks to the user's one Cursor hooks file with a backup and
/// every other entry kept; twice is once; a file it does not understand stays untouched; `volee
/// down` takes volee's entries out again.
#[test]
fn cursor_setup_merges_with_a_backup_and_down_takes_it_out() {
    let env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    let dir = env.home().join(".cursor");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hooks.json");
    let users = serde_json::json!({"version": 1, "hooks": {
        "stop": [{"command": "./audit.sh", "timeout": 5}],
        "afterFileEdit": [{"command": "./format.sh"}]
    }});
    let original = serde_json::to_string_pretty(&users).unwrap();
    std::fs::write(&file, &original).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();

    env.ok(["setup", "cursor"]);
    let backup = std::fs::read_to_string(dir.join("hooks.json.volee-backup")).unwrap();
    assert_eq!(backup, original);
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
    };
    let merged = read();
    assert_eq!(merged["hooks"]["stop"][0], users["hooks"]["stop"][0]);
    assert_eq!(
        merged["hooks"]["afterFileEdit"],
        users["hooks"]["afterFileEdit"]
    );
    let ours = merged["hooks"]["stop"][1]["command"].as_str().unwrap();
    assert!(ours.ends_with(" hook cursor stop"), "{ours}");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o640,
        "the user's permissions are kept"
    );
    env.ok(["setup", "cursor"]);
    assert_eq!(read(), merged, "a second setup adds nothing");

    // Other harnesses need no setup; an unknown one is a usage error.
    let claude = env.run(["setup", "claude"]);
    assert_eq!(claude.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&claude.stderr).contains("needs no setup"));
    assert_eq!(env.run(["setup", "nosuch"]).status.code(), Some(2));

    env.ok(["down"]);
    assert_eq!(
        read(),
        users,
        "volee down leaves the user's hooks as they were"
    );

    // A file volee does not understand is left alone.
    std::fs::write(&file, "{ not json").unwrap();
    let bad = env.run(["setup", "cursor"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not valid JSON"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");
    std::fs::write(&file, r#"{"version": 1, "hooks": {"stop": "x"}}"#).unwrap();
    assert_eq!(env.run(["setup", "cursor"]).status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"version": 1, "hooks": {"stop": "x"}}"#
    );
}

/// A `claude` stand-in that fires no hooks of its own, launched; its id and its hook token.
fn quiet_claude(env: &mut TestEnv) -> (String, String) {
    install_scripted(env, "claude", "2.1.332 (Claude Code)", "/nonexistent", "");
    let id = env.ok(["launch", "--harness", "claude", "--host", "tmux:main", "go"]);
    let token = hook_token(env, &id);
    (id, token)
}

/// Agent `id`'s hook token as the registry (agents.json, 0600) holds it.
fn hook_token(env: &TestEnv, id: &str) -> String {
    volee_test_support::wait_until(
        "the launch's hook token is recorded",
        std::time::Duration::from_secs(5),
        || {
            let text = std::fs::read_to_string(env.volee_home().join("state/agents.json")).ok()?;
            let file: serde_json::Value = serde_json::from_str(&text).ok()?;
            file["agents"].as_array()?.iter().find(|a| a["id"] == id)?["hook_token"]
                .as_str()
                .map(String::from)
        },
        || env.log_tail(),
    )
}

/// `volee hook claude EVENT` as agent `id` with this token (None: without one), payload on stdin.
fn run_hook(env: &TestEnv, id: &str, token: Option<&str>, event: &str, payload: &[u8]) {
    use std::io::Write;
    let mut hook = env.volee(["hook", "claude", event]);
    hook.env("VOLEE_AGENT_ID", id)
        .env_remove("VOLEE_AGENT_TOKEN")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    if let Some(t) = token {
        hook.env("VOLEE_AGENT_TOKEN", t);
    }
    let mut child = hook.spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(payload);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty());
}

#[test]
fn hooks_count_only_with_the_agents_token_which_is_never_shown() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let (id, token) = quiet_claude(&mut env);
    assert_eq!(token.len(), 64, "256 random bits");
    // The pane's own environment has it (that is how its hooks present it).
    let pid = env.agent(&id)["pid"].as_u64().unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let wanted = format!("VOLEE_AGENT_TOKEN={token}");
    assert!(environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()));

    // Another process that knows only the id, or guesses the token, changes nothing.
    let payload = br#"{"session_id":"s-1","tool_name":"Bash"}"#;
    run_hook(&env, &id, None, "PermissionRequest", payload);
    let wrong = "0".repeat(64);
    run_hook(&env, &id, Some(&wrong), "PermissionRequest", payload);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let explain = env.ok(["explain", &id]);
    assert!(!explain.contains("PermissionRequest"), "{explain}");
    assert_ne!(env.agent(&id)["state"], "needs_you");
    let log = std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap();
    assert!(
        log.contains("no token") && log.contains("wrong token"),
        "{log}"
    );

    // With it, the hook counts.
    run_hook(&env, &id, Some(&token), "PermissionRequest", payload);
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    assert_eq!(env.agent(&id)["evidence"], "hook PermissionRequest");

    // Never shown: not in ls --json, show, explain, the log.
    for args in [
        vec!["ls", "--json"],
        vec!["show", "--json", &id],
        vec!["show", &id],
        vec!["explain", &id],
        vec!["explain", "--json", &id],
    ] {
        let out = env.run(&args);
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(&token),
            "{args:?} shows the token"
        );
    }
    let log = std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap();
    assert!(!log.contains(&token), "the log holds the token");

    // A record from before tokens existed accepts hooks without one.
    env.ok(["daemon", "stop"]);
    let path = env.volee_home().join("state/agents.json");
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for a in file["agents"].as_array_mut().unwrap() {
        a.as_object_mut().unwrap().remove("hook_token");
    }
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    run_hook(&env, &id, None, "StopFailure", br#"{"session_id":"s-1"}"#);
    assert_eq!(env.wait_state(&id, "failed", 10), "failed");
    assert_eq!(env.agent(&id)["evidence"], "hook StopFailure");
}

#[test]
fn a_hook_event_name_with_a_line_break_is_one_log_line() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    env.ok(["ls"]);
    run_hook(&env, "nosuch", None, "Stop\nINJECTED forged line", b"");
    let log_path = env.volee_home().join("state/volee.log");
    let log = volee_test_support::wait_until(
        "the hook is logged",
        std::time::Duration::from_secs(5),
        || {
            std::fs::read_to_string(&log_path)
                .ok()
                .filter(|l| l.contains("INJECTED"))
        },
        || env.log_tail(),
    );
    assert!(
        !log.lines().any(|l| l.starts_with("INJECTED")),
        "a forged log line: {log}"
    );
    assert!(log.contains(r#""Stop\nINJECTED forged line""#), "{log}");
}

#[test]
fn a_bad_spool_line_is_skipped_and_a_repeated_event_counts_once() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let (id, token) = quiet_claude(&mut env);
    env.ok(["daemon", "stop"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let event = |name: &str, at: u64, event_id: &str| {
        let mut line = serde_json::to_vec(&serde_json::json!({
            "agent": id, "token": token, "event_id": event_id, "harness": "claude",
            "event": name, "at_ms": at, "session_id": "s-1", "fields": [["tool_name", "Bash"]],
        }))
        .unwrap();
        line.push(b'\n');
        line
    };
    // A line that is not UTF-8, then an event, then a later one under the same id (a hook whose
    // answer came late is both delivered and spooled): the first counts, its repeat does not.
    let mut spool = b"\xff\xfe{\"agent\":\"x\"}\n".to_vec();
    spool.extend(event("PermissionRequest", now, "e-1"));
    spool.extend(event("StopFailure", now + 1, "e-1"));
    let path = env.volee_home().join("state/spool/hooks.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, spool).unwrap();

    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    assert_eq!(env.agent(&id)["evidence"], "hook PermissionRequest");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        env.agent(&id)["state"],
        "needs_you",
        "the repeat was ignored"
    );
    let log = std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap();
    assert!(log.contains("skipped spooled hook line 1"), "{log}");
}

#[test]
fn a_hook_whose_stdin_stays_open_goes_on_after_two_seconds() {
    use std::io::Write;
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let (id, token) = quiet_claude(&mut env);
    let mut hook = env.volee(["hook", "claude", "PermissionRequest"]);
    hook.env("VOLEE_AGENT_ID", &id)
        .env("VOLEE_AGENT_TOKEN", &token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let started = std::time::Instant::now();
    let mut child = hook.spawn().unwrap();
    // The payload, and the pipe kept open (a harness that never closes its hook's stdin).
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(br#"{"session_id":"s-1","tool_name":"Bash"}"#)
        .unwrap();
    stdin.flush().unwrap();
    let status = volee_test_support::wait_until(
        "volee hook returns",
        std::time::Duration::from_secs(10),
        || child.try_wait().unwrap(),
        || env.log_tail(),
    );
    let took = started.elapsed();
    drop(stdin);
    assert!(status.success());
    assert!(
        took >= std::time::Duration::from_millis(1900)
            && took < std::time::Duration::from_millis(3000),
        "returned after {took:?}"
    );
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    assert_eq!(env.agent(&id)["evidence"], "hook PermissionRequest");
}
