//! Discovery of the **real** harness programs started outside volee: the user opens a tmux window
//! and types `claude PROMPT`, `qwen -i PROMPT` or `codex PROMPT` (throwaway HOME seeded as in the
//! harness's own conformance test, model = the scripted loopback server whose first turn asks for
//! a shell tool). volee never launched them, so it has no hooks, no session flag and no pane
//! option: it must find the process in `/proc`, place it in its pane, learn the session id from
//! what the harness publishes (Claude and Qwen `sessions/<pid>.json`, Codex the rollout file it
//! holds open), see the permission prompt (Claude's status file; Qwen's and Codex's screens), and
//! end the agent as `stopped` when the pane goes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

/// What differs between the harnesses.
struct Case<'a> {
    harness: &'a str,
    /// The command line the user types (program first).
    command: Vec<String>,
    /// Environment of the window (beside PATH).
    env: Vec<(String, String)>,
    /// The session id the harness published for process `pid`, read the way a user could; None
    /// when the process itself publishes none.
    published: Option<&'a dyn Fn(u32) -> Option<String>>,
    /// More checks while the agent waits for the user (given its pid).
    also: &'a dyn Fn(u32),
    /// Sources that may report the permission prompt.
    needs_you_sources: &'a [&'a str],
}

fn agents(env: &TestEnv) -> Vec<Value> {
    let text = env.ok(["ls", "--all", "--json"]);
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Start `case` in a new window of the test's tmux (not through volee) and check what volee
/// makes of it.
fn discover(env: &TestEnv, bin_dir: &Path, case: &Case) {
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        "discovery_interval = \"1s\"\n",
    )
    .unwrap();
    // The daemon reads its config at start: start it now, with discovery on.
    env.ok(["ls"]);
    let path = crate::path_with(bin_dir);
    let mut args: Vec<String> = ["new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "main:"]
        .map(String::from)
        .to_vec();
    args.extend(["-c".into(), env.work().display().to_string()]);
    for (k, v) in &case.env {
        args.extend(["-e".into(), format!("{k}={v}")]);
    }
    args.extend(case.command.iter().cloned());
    // Keep the pane when the program exits early, to show why.
    env.tmux(&["set-option", "-g", "remain-on-exit", "on"]);
    let started = Instant::now();
    // tmux gives a new window the PATH of the client that asks for it (not `-e PATH=`): the
    // user's shell has the harness on its PATH.
    let out = env
        .tmux_command()
        .env("PATH", &path)
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pane = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let agent = wait_until(
        &format!("the {} process is discovered in its pane", case.harness),
        Duration::from_secs(30),
        || {
            agents(env).into_iter().find(|a| {
                a["origin"] == "discovered"
                    && a["harness"] == case.harness
                    && a["host"]["pane"] == pane.as_str()
            })
        },
        || {
            format!(
                "{}\nscreen:\n{}",
                env.ok(["ls", "--all", "--json"]),
                env.tmux(&["capture-pane", "-p", "-t", &pane])
            )
        },
    );
    let found_after = started.elapsed();
    let id = agent["id"].as_str().unwrap().to_string();
    // Its version is asked off the daemon's loop (generic rules until it answers).
    let versioned = wait_until(
        "the discovered agent's version",
        Duration::from_secs(30),
        || {
            let a = env.agent(&id);
            (a["profile_fit"] == "measured").then_some(a)
        },
        || env.agent(&id).to_string(),
    );
    assert_eq!(versioned["profile_fit"], "measured", "{versioned}");
    assert_eq!(agent["host"]["kind"], "tmux", "{agent}");

    // The permission prompt of the model's first turn, seen without hooks.
    let needs_you = wait_until(
        "the discovered agent needs the user (the tool permission prompt)",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || {
            format!(
                "{}\nscreen:\n{}",
                env.agent(&id),
                env.tmux(&["capture-pane", "-p", "-t", &pane])
            )
        },
    );
    let source = needs_you["state_source"].as_str().unwrap_or("").to_string();
    assert!(
        case.needs_you_sources.contains(&source.as_str()),
        "needs_you from {source:?}: {needs_you}"
    );

    // The agent follows its launcher chain to the innermost process (Qwen starts three).
    let pid = env.agent(&id)["pid"].as_u64().unwrap() as u32;
    (case.also)(pid);

    // The session id, as the harness published it (it may publish only after the first prompt).
    let session = match case.published {
        Some(published) => {
            // The agent's pid as volee shows it now: while Qwen runs a tool, a scan has been
            // seen to name a process of the tool call for a moment (1 full run in 3 on
            // 2026-12-04; issue 25's note), and the next scan the harness again.
            let published = wait_until(
                "the harness publishes its session id",
                Duration::from_secs(20),
                || {
                    let now = env.agent(&id)["pid"].as_u64().map_or(pid, |p| p as u32);
                    published(now)
                },
                || {
                    let files: Vec<String> = walk(&env.home())
                        .into_iter()
                        .filter(|p| p.to_string_lossy().contains("session"))
                        .map(|p| p.display().to_string())
                        .collect();
                    format!("pid {pid}; agent {}; files {files:#?}", env.agent(&id))
                },
            );
            wait_until(
                "volee reports the published session id",
                Duration::from_secs(10),
                || (env.agent(&id)["session_id"] == published.as_str()).then_some(()),
                || env.agent(&id).to_string(),
            );
            published
        }
        None => {
            assert_eq!(env.agent(&id)["session_id"], Value::Null, "a guessed id");
            "none published".to_string()
        }
    };
    eprintln!(
        "{}: discovered {:.2} s after the window opened; needs_you from {source}; session {session}",
        case.harness,
        found_after.as_secs_f64()
    );

    // The user closes the window: the agent is stopped, "process gone".
    env.tmux(&["kill-pane", "-t", &pane]);
    wait_until(
        "the vanished agent is stopped",
        Duration::from_secs(15),
        || (env.agent(&id)["state"] == "stopped").then_some(()),
        || env.agent(&id).to_string(),
    );
    volee_test_support::wait_process_gone(case.harness, i64::from(pid), Duration::from_secs(10));
}

/// The test lock, the pinned harness's bin directory, a test world with its tmux running and its
/// work folder; None when the harness cannot be had here (skipped outside CI).
fn world(
    harness: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    PathBuf,
    TestEnv,
    PathBuf,
)> {
    let serial = crate::serial();
    if !require("tmux", &format!("the {harness} discovery test")) {
        return None;
    }
    let bin_dir = crate::install(&crate::pinned(harness))?;
    let env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    Some((serial, bin_dir, env, work))
}

fn json_field(path: PathBuf, field: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v.get(field)?.as_str().map(String::from)
}

#[test]
fn a_claude_code_started_by_hand_is_discovered_with_its_session() {
    let Some((_serial, bin_dir, env, work)) = world("claude") else {
        return;
    };
    let hook_log = env.root().join("hook-payloads");
    let claude_tmp = env.root().join("claude-tmp");
    std::fs::create_dir_all(&hook_log).unwrap();
    std::fs::create_dir_all(&claude_tmp).unwrap();
    crate::claude::seed_home(&env.home(), &work, &hook_log);
    let server = ModelServer::start(vec![
        Turn::bash(
            &format!("touch {}", work.join("discovered").display()),
            "Create a marker file",
        ),
        Turn::text("done"),
    ]);
    let home = env.home();
    let published = |pid: u32| {
        json_field(
            home.join(format!(".claude/sessions/{pid}.json")),
            "sessionId",
        )
    };
    let case = Case {
        harness: "claude",
        command: vec!["claude".into(), "Create the marker file.".into()],
        env: [
            ("ANTHROPIC_BASE_URL", server.base_url()),
            ("ANTHROPIC_API_KEY", crate::claude::API_KEY.to_string()),
            ("CLAUDE_CODE_TMPDIR", claude_tmp.display().to_string()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
            ("DISABLE_AUTOUPDATER", "1".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec(),
        published: Some(&published),
        // `claude agents --json` lists the same sessions as the status files volee reads (without
        // a process per look): compare them while the agent waits.
        also: &|pid| {
            let out = std::process::Command::new(bin_dir.join("claude"))
                .args(["agents", "--json"])
                .env("HOME", &home)
                .env("CLAUDE_CODE_TMPDIR", &claude_tmp)
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .current_dir(&work)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            eprintln!(
                "claude agents --json ({}): {text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let listed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let entry = listed
                .as_array()
                .and_then(|a| a.iter().find(|e| e["pid"] == pid))
                .unwrap_or_else(|| panic!("pid {pid} not in claude agents --json: {text}"));
            assert_eq!(entry["sessionId"].as_str(), published(pid).as_deref());
            assert_eq!(entry["status"], "waiting", "{entry}");
        },
        // Claude publishes `waiting` in its status file; its screen rule may be first.
        needs_you_sources: &["listing", "screen"],
    };
    discover(&env, &bin_dir, &case);
}

#[test]
fn a_qwen_code_started_by_hand_is_discovered_with_its_session() {
    let Some((_serial, bin_dir, env, work)) = world("qwen") else {
        return;
    };
    let hook_log = env.root().join("hook-payloads");
    std::fs::create_dir_all(&hook_log).unwrap();
    crate::qwen::seed_home(&env.home(), &work, &hook_log);
    let server = ModelServer::start(vec![
        Turn::tool(
            "run_shell_command",
            json!({
                "command": format!("touch {}", work.join("discovered").display()),
                "description": "Create a marker file",
                "is_background": false
            }),
        ),
        Turn::text("done"),
    ]);
    let home = env.home();
    let published =
        |pid: u32| json_field(home.join(format!(".qwen/sessions/{pid}.json")), "sessionId");
    let case = Case {
        harness: "qwen",
        command: vec!["qwen".into(), "-i".into(), "Create the marker file.".into()],
        env: [
            ("OPENAI_API_KEY", crate::qwen::API_KEY.to_string()),
            ("OPENAI_BASE_URL", format!("{}/v1", server.base_url())),
            ("OPENAI_MODEL", crate::qwen::MODEL.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec(),
        published: Some(&published),
        also: &|_| {},
        needs_you_sources: &["screen", "title"],
    };
    discover(&env, &bin_dir, &case);
}

#[test]
fn a_codex_cli_started_by_hand_is_discovered_with_its_session() {
    let pinned = crate::pinned("codex");
    let Some((_serial, bin_dir, env, work)) = world("codex") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::tool(
            crate::codex::TOOL,
            json!({
                "cmd": format!("touch {}", work.join("discovered").display()),
                "sandbox_permissions": "require_escalated",
                "justification": "volee discovery test needs approval"
            }),
        ),
        Turn::text("done"),
    ]);
    let home = env.home().canonicalize().unwrap();
    crate::codex::seed_home(&home, &format!("{}/v1", server.base_url()), &work);
    let _cleanup = crate::codex::DaemonCleanup {
        bin: bin_dir.join(&pinned.bin),
        home: home.clone(),
    };
    // Codex 0.171.0 in its default daemon mode: the rollout file (named by the session id) is
    // written and held open by the shared app-server daemon, which serves every Codex TUI of the
    // user, not by the TUI process volee finds (checked below). volee asks that daemon instead:
    // the thread in the TUI's folder whose first message is the TUI's prompt.
    let sessions = home.join(".codex/sessions");
    let rollout_id = |_pid: u32| {
        walk(&sessions)
            .iter()
            .find_map(|p| volee_harness::listing::session_id_from_open_file("codex", p))
    };
    let case = Case {
        harness: "codex",
        command: vec!["codex".into(), "Create the marker file.".into()],
        env: [
            ("VOLEE_TEST_MODEL_KEY", crate::codex::API_KEY.to_string()),
            ("CODEX_HOME", home.join(".codex").display().to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec(),
        published: Some(&rollout_id),
        also: &|tui| {
            let holders = holders_of(&sessions);
            eprintln!("codex: the TUI is pid {tui}; rollout files held by {holders:?}");
            assert!(!holders.is_empty(), "no process holds a rollout file");
            assert!(
                holders.iter().all(|(pid, _)| *pid != tui),
                "the TUI holds its rollout file: volee should read the id from it"
            );
        },
        // The app-server's `active[waitingOnApproval]`, or the screen, whichever is first.
        needs_you_sources: &["listing", "screen", "title"],
    };
    discover(&env, &bin_dir, &case);
}

/// GitHub Copilot CLI, typed by the user as `copilot -i PROMPT` with its state in a
/// `COPILOT_HOME` of its own: volee finds the native process (the `node` loader is its wrapper),
/// reads the session id from the `inuse.<pid>.hold` it holds open (the same id as its
/// `session-state/<id>/inuse.<pid>.lock`), and sees the permission dialog on the screen (no volee
/// Copilot agent lives, so volee's hooks file is not there).
#[test]
fn a_copilot_cli_started_by_hand_is_discovered_with_its_session() {
    let Some((_serial, _bin_dir, env, work)) = world("copilot") else {
        return;
    };
    let Some((bin_dir, _)) = crate::copilot::installed() else {
        return;
    };
    let hook_log = env.root().join("hook-payloads");
    std::fs::create_dir_all(&hook_log).unwrap();
    let copilot_home = env.root().join("copilot-home");
    crate::copilot::seed_home(&copilot_home, &work, &hook_log);
    crate::copilot::warm_package_cache(&bin_dir.join("copilot"), &env.home());
    let server = ModelServer::start(vec![
        Turn::tool(
            "bash",
            json!({
                "command": format!("touch {}", work.join("discovered").display()),
                "description": "Create a marker file"
            }),
        ),
        Turn::text("done"),
    ]);
    let state = copilot_home.join("session-state");
    // What a user sees: the session directory holding `inuse.<pid>.lock` with that pid in it.
    let published = |pid: u32| {
        std::fs::read_dir(&state)
            .ok()?
            .flatten()
            .find(|d| {
                std::fs::read_to_string(d.path().join(format!("inuse.{pid}.lock")))
                    .is_ok_and(|t| t.trim() == pid.to_string())
            })
            .map(|d| d.file_name().to_string_lossy().into_owned())
    };
    let mut case_env = crate::copilot::byok_env(&server);
    case_env.push((
        "COPILOT_HOME".to_string(),
        copilot_home.display().to_string(),
    ));
    let case = Case {
        harness: "copilot",
        command: vec![
            "copilot".into(),
            "-i".into(),
            "Create the marker file.".into(),
        ],
        env: case_env,
        published: Some(&published),
        // The agent is the native binary (`comm` MainThread), not the node loader of the pane.
        also: &|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            eprintln!(
                "copilot: agent pid {pid}, comm {comm:?}, exe {}",
                exe.display()
            );
            assert!(
                exe.to_string_lossy()
                    .contains("@github/copilot-linux-x64/copilot"),
                "{}",
                exe.display()
            );
            assert!(
                !copilot_home.join("hooks/volee.json").exists(),
                "volee's hooks file without a volee Copilot agent"
            );
        },
        needs_you_sources: &["screen"],
    };
    discover(&env, &bin_dir, &case);
}

/// Processes holding a file under `dir` open, with their command lines.
fn holders_of(dir: &Path) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let holds = std::fs::read_dir(entry.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target.starts_with(dir));
        if holds {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    out
}

/// Every file under `dir` (for diagnostics).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
