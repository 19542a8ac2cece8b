//! `volee restore` with the real harnesses (issue 22): Claude Code and Codex CLI, each with one
//! turn done, lose their tmux server (`tmux kill-server` on the test's private socket: what a
//! reboot or a crash does to it, as far as volee can tell); the harness dies of the hang-up
//! before anything is restored (so its session file is complete), volee marks the agent
//! `stopped` and restorable, and `volee restore` brings it back with the same volee id, in the
//! same tmux session and window, on the **same** native session: the agent's session id is the
//! one from before, the model server's first request after a new prompt carries the earlier
//! prompt and names that session, and no new session file appears. Then the restored agent's
//! states work as before: idle → a prompt makes it working → idle → its exit command makes it
//! done. No harness process outlives the test.
//!
//! Codex's shared app-server daemon (started by its TUI, detached) does not die with the tmux
//! server: one test leaves it running (the restored TUI finds its thread loaded there), the other
//! stops it as a reboot would (the restored Codex reads its thread back from the rollout file).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use volee_test_support::model_server::{Exchange, ModelServer, Turn};
use volee_test_support::{wait_until, TestEnv};

use crate::common::{cmdline_mentions, collapse, Diagnostics};
use crate::Observed;

/// The first prompt, and what the question after the restore asks about.
const EARLIER: &str = "Remember the file restore-notes.md for later.";
const QUESTION: &str = "Which file did I ask you to remember?";

/// The model's two answers: one per prompt.
fn script() -> Vec<Turn> {
    vec![Turn::text("noted"), Turn::text("restore-notes.md")]
}

/// What differs between the harnesses.
struct Case<'a> {
    harness: &'static str,
    /// What `volee send` types to end the harness, and the exit status volee records then.
    exit: &'static str,
    exit_status: i64,
    /// `volee restore ID` when false, `volee restore --all` when true.
    all: bool,
    /// The harness's session files (transcripts, rollouts), to tell a resumed session from a new
    /// one.
    session_files: &'a dyn Fn() -> Vec<PathBuf>,
    /// Where the harness's request names its session (as [`names_session`] says it).
    session_in: &'a [&'static str],
    /// Is this pid a harness process (for the cleanup)?
    is_harness: &'a dyn Fn(i32) -> bool,
    /// Is this pid (under the harness) a process meant to outlive it (Codex's app-server
    /// daemon)? Such processes are not expected to end with the tmux server.
    shared: &'a dyn Fn(i32) -> bool,
    /// Some: the shared processes are ended too once the harness is gone (what a reboot ends
    /// besides the tmux server), so the restored harness reads its session back from its files;
    /// it says what it did. None: they live on (only the tmux server died).
    end_shared: Option<&'a dyn Fn() -> String>,
}

/// `pid` and its descendants (from `/proc`'s parent links).
fn process_tree(pid: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<i32>().ok())
        {
            parents.push((p, ppid));
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        out.push(p);
        queue.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
    }
    out
}

/// Is `pid` still running (not gone, not a zombie)?
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.is_empty() && !s.contains(") Z "))
}

fn describe(pid: i32) -> String {
    let args = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default();
    format!(
        "{pid}:{}",
        args.chars().take(100).collect::<String>().trim()
    )
}

/// Waits up to `limit` for every pid of `pids` to end; SIGKILLs the ones left. Returns how long
/// the last one took and the ones that had to be killed.
fn ended_or_killed(pids: &[i32], limit: Duration) -> (Duration, Vec<String>) {
    let began = Instant::now();
    while pids.iter().any(|p| alive(*p)) && began.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = began.elapsed();
    let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    let shown = left.iter().map(|p| describe(*p)).collect();
    for p in left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    (took, shown)
}

/// Where a request names `session`: the headers and top-level body fields whose value it is.
fn names_session(e: &Exchange, session: &str) -> Vec<String> {
    let mut found: Vec<String> = e
        .headers
        .iter()
        .filter(|(_, v)| v == session)
        .map(|(k, _)| format!("header {k}"))
        .collect();
    if let Some(body) = e.body.as_object() {
        found.extend(
            body.iter()
                .filter(|(_, v)| v.as_str() == Some(session))
                .map(|(k, _)| format!("body {k}")),
        );
    }
    found
}

/// The agent loop's requests: main ones, and those that offer tools (a script of text turns
/// calls no tool, so Codex's requests, which offer no `Bash`, are answered as side ones).
fn agent_requests(server: &ModelServer) -> Vec<Exchange> {
    server
        .exchanges()
        .into_iter()
        .filter(|e| e.is_main() || !e.tool_names().is_empty())
        .collect()
}

fn all_agents(env: &TestEnv) -> Vec<Value> {
    serde_json::from_str(&env.ok(["ls", "--all", "--json"])).unwrap()
}

/// The window (name) and tmux session of the pane that carries agent `id`, if any.
fn pane_of(env: &TestEnv, id: &str) -> Option<(String, String)> {
    let out = env
        .tmux_command()
        .args([
            "list-panes",
            "-a",
            "-F",
            "#{session_name}\t#{window_name}\t#{@volee-agent}",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split('\t').collect();
        (f.len() == 3 && f[2] == id).then(|| (f[0].to_string(), f[1].to_string()))
    })
}

/// The sequence: launch → first turn answered, idle → kill the tmux server → the harness is gone,
/// the agent stopped and restorable → `volee restore` → same id, place and session → idle → a
/// prompt: working → idle, and the model got the earlier conversation on the same session → exit:
/// done.
fn restore_after_the_tmux_server_died(case: &Case, env: &TestEnv, server: &ModelServer) {
    let started = Instant::now();
    let timeline = Mutex::new(Vec::<Observed>::new());
    let no_hooks = env.root().join("no-hook-log");
    let diag = Diagnostics::new(
        case.harness,
        case.is_harness,
        env,
        server,
        &no_hooks,
        &timeline,
        started,
    );
    let h = case.harness;

    // 1. One turn done.
    let id = env.ok([
        "launch",
        "--harness",
        h,
        "--host",
        "tmux:main",
        "--name",
        "restorable",
        EARLIER,
    ]);
    diag.track(&id);
    wait_until(
        "the first turn answered, and the agent idle",
        Duration::from_secs(60),
        || {
            let asked = agent_requests(server).iter().any(|e| {
                serde_json::to_string(e.messages())
                    .unwrap_or_default()
                    .contains(EARLIER)
            });
            (asked && env.agent(&id)["state"] == "idle").then_some(())
        },
        || format!("{}\n{}", env.agent(&id), server.summary()),
    );
    let before = wait_until(
        "the session id learnt and the placement recorded",
        Duration::from_secs(20),
        || {
            let a = env.agent(&id);
            (a["session_id"].is_string() && a["placement"]["window_name"].is_string()).then_some(a)
        },
        || env.agent(&id).to_string(),
    );
    let session = before["session_id"].as_str().unwrap().to_string();
    let window = before["placement"]["window_name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        pane_of(env, &id),
        Some(("main".to_string(), window.clone())),
        "{before}"
    );
    let files_before = (case.session_files)();
    assert!(
        files_before
            .iter()
            .any(|f| f.display().to_string().contains(&session)),
        "{h}'s session {session} has no file among {files_before:?}"
    );
    let pid = before["pid"].as_i64().expect("a pid") as i32;
    let (shared, harness_pids): (Vec<i32>, Vec<i32>) = process_tree(pid)
        .into_iter()
        .partition(|p| (case.shared)(*p));
    let shown: Vec<String> = harness_pids.iter().map(|p| describe(*p)).collect();

    // 2. The tmux server goes away. Its panes' processes get SIGHUP: every process of the
    // harness must be gone before the restore (a survivor would write the same session as the
    // restored one; an exiting one flushes its session file).
    let killed_at = Instant::now();
    env.tmux(&["kill-server"]);
    let (hup_took, survivors) = ended_or_killed(&harness_pids, Duration::from_secs(10));
    assert!(
        survivors.is_empty(),
        "{h}'s processes outlived their tmux server by 10 s (killed): {survivors:?}"
    );
    // What a reboot ends too: the harness's own daemon (Codex's app-server, which outlives
    // its TUI by design), so the restored harness reads its session back from its files.
    let shared_alive = shared.iter().filter(|p| alive(**p)).count();
    let after_kill = match case.end_shared {
        Some(end) => {
            let said = end();
            let (_, left) = ended_or_killed(&shared, Duration::from_secs(10));
            assert!(left.is_empty(), "outlived their stop: {left:?}");
            said
        }
        None => "left running".to_string(),
    };
    let stopped = wait_until(
        "the agent stopped and restorable",
        Duration::from_secs(15),
        || {
            let a = env.agent(&id);
            (a["state"] == "stopped" && a["restorable"] == true).then_some(a)
        },
        || format!("{}\n{}", env.agent(&id), env.log_tail()),
    );
    let stopped_after = killed_at.elapsed();
    let file = files_before
        .iter()
        .find(|f| f.display().to_string().contains(&session))
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap_or_default();
    assert!(
        text.contains("restore-notes.md"),
        "{h}'s session file {} lacks the first prompt after the hang-up",
        file.display()
    );

    // 3. The plan, then the restore.
    let plan: Value =
        serde_json::from_str(&env.ok(["restore", "--all", "--dry-run", "--json"])).unwrap();
    let step = plan
        .as_array()
        .and_then(|p| p.iter().find(|s| s["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{plan}"))
        .clone();
    assert_eq!(step["action"], "restore", "{step}");
    assert_eq!(step["session"], "main", "{step}");
    assert_eq!(step["window"], window.as_str(), "{step}");
    assert_eq!(
        env.agent(&id)["state"],
        "stopped",
        "a dry run restores nothing"
    );
    let restore_at = Instant::now();
    let said = if case.all {
        env.ok(["restore", "--all"])
    } else {
        env.ok(["restore", &id])
    };
    assert!(said.contains(&format!("restored {id}")), "{said}");
    let agents = all_agents(env);
    assert_eq!(agents.len(), 1, "one record, no new agent: {agents:#?}");
    let restored = wait_until(
        "the restored agent holds its session id",
        Duration::from_secs(20),
        || {
            let a = env.agent(&id);
            (a["session_id"] == session.as_str()).then_some(a)
        },
        || env.agent(&id).to_string(),
    );
    diag.track(&id);
    assert_eq!(restored["name"], "restorable", "{restored}");
    assert_eq!(restored["harness"], h, "{restored}");
    assert_eq!(restored["restorable"], false, "{restored}");
    assert_eq!(
        restored["restored"].as_array().map(Vec::len),
        Some(1),
        "{restored}"
    );
    assert_eq!(restored["cwd"], before["cwd"], "{restored}");
    assert_eq!(
        pane_of(env, &id),
        Some(("main".to_string(), window.clone())),
        "its old window in its old session"
    );
    let command = restored["command"].to_string();
    assert!(command.contains(&session), "a resume line: {command}");

    // 4. Its states work as before.
    let stop_watching = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _stop = crate::SetOnDrop(&stop_watching);
        let (stop_ref, timeline_ref, watch_id) = (&stop_watching, &timeline, id.clone());
        let watcher =
            scope.spawn(move || crate::watch_states(env, &watch_id, stop_ref, timeline_ref));
        assert_eq!(env.wait_state(&id, "idle", 60), "idle");
        let idle_after = restore_at.elapsed();
        // A resumed TUI draws the earlier conversation once its prompt is up: its screen settles
        // before anything is typed (as in `resume_from_history`).
        let mut last = env.ok(["peek", &id, "-n", "60"]);
        let settle_by = Instant::now() + Duration::from_secs(15);
        while Instant::now() < settle_by {
            std::thread::sleep(Duration::from_secs(1));
            let now = env.ok(["peek", &id, "-n", "60"]);
            if now == last {
                break;
            }
            last = now;
        }
        assert!(
            last.contains("restore-notes.md") || last.contains("Remember the file"),
            "the restored {h} shows no earlier conversation:\n{last}"
        );
        let asked_before = agent_requests(server).len();
        let sent_at = Instant::now();
        env.ok(["send", &id, QUESTION]);
        let asked = wait_until(
            "the restored harness's request to the model",
            Duration::from_secs(30),
            || {
                agent_requests(server)
                    .into_iter()
                    .skip(asked_before)
                    .find(|e| {
                        serde_json::to_string(e.messages())
                            .unwrap_or_default()
                            .contains(QUESTION)
                    })
            },
            || {
                format!(
                    "{}\n{}",
                    server.summary(),
                    env.ok(["peek", &id, "-n", "60"])
                )
            },
        );
        let messages = serde_json::to_string(asked.messages()).unwrap();
        assert!(
            messages.contains(EARLIER),
            "the restored session's first request lacks the earlier prompt: {messages}"
        );
        let named = names_session(&asked, &session);
        assert!(
            case.session_in.iter().all(|w| named.iter().any(|n| n == w)),
            "the restored {h}'s request does not name its session {session} in {:?} (found: {named:?}): {:?} {}",
            case.session_in,
            asked.headers,
            asked.body
        );
        assert_eq!(env.wait_state(&id, "idle", 60), "idle");
        let answered = crate::common::seen_by_watcher(&timeline, "idle", Some(asked.received));
        let after_send: Vec<Observed> = timeline
            .lock()
            .unwrap()
            .iter()
            .filter(|o| o.at >= sent_at && o.at <= answered.at)
            .cloned()
            .collect();
        let states = collapse(&after_send);
        assert!(
            states.iter().any(|s| s == "working")
                && states.last().map(String::as_str) == Some("idle"),
            "a prompt makes the restored agent working, then idle: {states:?}"
        );
        // The same session: no new session file.
        let files_after = (case.session_files)();
        assert_eq!(
            files_after, files_before,
            "the restore made a new session file"
        );

        // 5. Ended the way a user ends it.
        env.ok(["send", &id, case.exit]);
        assert_eq!(env.wait_state(&id, "done", 30), "done");
        let ended = env.agent(&id);
        assert_eq!(ended["exit_status"], case.exit_status, "{ended}");
        drop(_stop);
        let (polls, polling) = watcher.join().unwrap();

        // No process of the restored harness outlives the test.
        let pid = ended["pid"].as_i64().map(|p| p as i32);
        let (_, left) = pid.map_or((Duration::ZERO, Vec::new()), |p| {
            ended_or_killed(&process_tree(p), Duration::from_secs(10))
        });

        eprintln!("\n==== volee restore: {h} ====");
        eprintln!("agent {id}, session {session}, window main:{window}");
        eprintln!("harness processes before the kill: {shown:?}");
        eprintln!(
            "tmux kill-server → every harness process gone: {:.0} ms; → stopped in volee: {:.0} ms ({})",
            hup_took.as_secs_f64() * 1000.0,
            stopped_after.as_secs_f64() * 1000.0,
            stopped["evidence"]
        );
        eprintln!(
            "shared processes under the harness ({shared_alive} alive after the kill): {after_kill}"
        );
        eprintln!("session files: {files_before:?}");
        eprintln!("volee restore: {said}");
        eprintln!("resume line: {command}");
        eprintln!("volee restore → idle: {:.1} s", idle_after.as_secs_f64());
        eprintln!("the first request after the restore names the session in: {named:?}");
        eprintln!("states after the new prompt: {states:?}");
        eprintln!("model server:\n{}", server.summary());
        crate::common::print_timeline(&timeline.lock().unwrap(), started, polls, polling);
        eprintln!("left running after done (killed): {left:?}");
        eprintln!("total: {:.1} s", started.elapsed().as_secs_f64());
        assert!(left.is_empty(), "outlived its exit: {left:?}");
    });
    drop(diag);
}

/// Every file under `dir` whose name ends with `.jsonl`, sorted.
fn jsonl_under(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = crate::codex::walk_files(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    out.sort();
    out
}

#[test]
fn claude_code_is_restored_on_its_own_session_after_its_tmux_server_died() {
    let Some(mut w) = crate::common::world("claude", "the Claude Code restore test") else {
        return;
    };
    crate::claude::seed_home(&w.env.home(), &w.work, &w.hook_log);
    let server = ModelServer::start(script());
    // A model takes a moment to answer: long enough to see working.
    server.set_main_delay(Duration::from_millis(800));
    let claude_tmp = w.env.root().join("claude-tmp");
    crate::claude::claude_env(&mut w.env, &w.bin_dir, &server, &claude_tmp);
    let projects = w.env.home().join(".claude/projects");
    let session_files = || jsonl_under(&projects);
    let is_harness = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            == "claude"
    };
    let case = Case {
        harness: "claude",
        exit: "/exit",
        exit_status: 0,
        all: false,
        session_files: &session_files,
        session_in: &["header x-claude-code-session-id"],
        is_harness: &is_harness,
        shared: &|_| false,
        end_shared: None,
    };
    restore_after_the_tmux_server_died(&case, &w.env, &server);
}

/// Codex CLI's TUI dies with its tmux server; its shared app-server daemon (started by the
/// TUI, detached) lives on: the restored TUI finds its thread there (`volee restore --all`).
#[test]
fn codex_cli_is_restored_on_its_own_session_after_its_tmux_server_died() {
    codex_restore(false);
}

/// As after a reboot: the app-server daemon is stopped too, so the restored Codex reads its
/// thread back from its rollout file (`volee restore ID`).
#[test]
fn codex_cli_is_restored_from_its_rollout_when_its_daemon_went_away_too() {
    codex_restore(true);
}

fn codex_restore(reboot: bool) {
    let Some(mut w) = crate::common::world("codex", "the Codex CLI restore test") else {
        return;
    };
    // A third turn, never reached, names Codex's shell tool: the model server then takes the
    // requests that offer it for the agent loop's (main: answered from the script, after the
    // delay that keeps working visible) rather than side requests answered at once.
    let mut turns = script();
    turns.push(Turn::tool(
        crate::codex::TOOL,
        serde_json::json!({ "cmd": "true" }),
    ));
    let server = ModelServer::start(turns);
    // Codex's state comes from its app-server, asked once a second (volee's listing poll), and
    // from its screen: a turn shorter than that can pass unseen (a whole-suite run saw an 800 ms
    // turn only as idle). Two seconds keep working visible.
    server.set_main_delay(Duration::from_millis(2000));
    let home = w.env.home().canonicalize().unwrap();
    crate::codex::seed_home(&home, &format!("{}/v1", server.base_url()), &w.work);
    // Codex's shared app-server daemon outlives its TUI (and the tmux server): stopped, and
    // whatever of the throwaway HOME still runs killed, when the test ends.
    let cleanup = crate::codex::DaemonCleanup {
        bin: w.bin_dir.join(&crate::pinned("codex").bin),
        home: home.clone(),
    };
    w.env.extra_env.extend(
        [
            ("PATH", crate::path_with(&w.bin_dir)),
            ("VOLEE_TEST_MODEL_KEY", crate::codex::API_KEY.to_string()),
            ("CODEX_HOME", home.join(".codex").display().to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    let sessions = home.join(".codex/sessions");
    let session_files = || jsonl_under(&sessions);
    let is_harness = |pid: i32| cmdline_mentions(pid, "codex");
    let end_daemon = || {
        let (said, killed) = cleanup.stop();
        format!(
            "codex app-server daemon stop: {said}; then killed: {}",
            killed.len()
        )
    };
    let case = Case {
        harness: "codex",
        exit: "/quit",
        exit_status: 0,
        all: !reboot,
        session_files: &session_files,
        session_in: &[
            "header session-id",
            "header thread-id",
            "body prompt_cache_key",
        ],
        is_harness: &is_harness,
        shared: &|pid| cmdline_mentions(pid, "app-server-daemon"),
        end_shared: reboot.then_some(&end_daemon as &dyn Fn() -> String),
    };
    restore_after_the_tmux_server_died(&case, &w.env, &server);
    drop(cleanup);
}
