//! `volee_listing::codex` against the **real** Codex CLI (pinned 0.171.0) in its default
//! daemon mode: a Codex TUI started in a private tmux server with a throwaway HOME whose
//! `~/.codex/config.toml` names a custom model provider (the scripted loopback server of
//! `volee_test_support::model_server`, speaking the OpenAI Responses API), trusts the work folder
//! and asks for approvals. The model's first answer is an `exec_command` asking for escalated
//! permissions, so Codex asks first; the second is text.
//!
//! Asserted: the TUI's thread appears in `list_threads` with the work folder as cwd and the prompt
//! as preview, `match_thread` finds it (and only it), and its status goes `active` →
//! `active[waitingOnApproval]` (needs you) while the screen shows the approval prompt; after `y`
//! it runs again and ends `idle`, the marker file exists.
//!
//! The shared app-server daemon outlives the TUI: the test stops it (`codex app-server daemon
//! stop`) and kills whatever still runs from the throwaway HOME, on success and on panic alike.
//! Without tmux, node or the pinned Codex (in `${VOLEE_HARNESS_CACHE:-~/.cache/volee-ci/harnesses}`,
//! installed by `.ci/run` or the conformance tests) the test is skipped, loudly, and fails under CI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use volee_listing::codex::{
    list_threads, match_thread, socket_in, CodexServerError, CodexThread, ThreadStatus,
};
use volee_protocol::AgentState;
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::require;

const CODEX_VERSION: &str = "0.171.0";
const PROMPT: &str = "Create the marker file.";
const API_KEY: &str = "test-key";
const MODEL: &str = "volee-test-model";

/// Under `CI` a missing prerequisite fails the test; by hand it is skipped, loudly.
fn fail_or_skip(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: {why}");
}

/// The pinned Codex's `node_modules/.bin`, as the conformance tests install it.
fn codex_bin_dir() -> PathBuf {
    let cache = match std::env::var_os("VOLEE_HARNESS_CACHE").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into()))
            .join(".cache/volee-ci/harnesses"),
    };
    cache
        .join(format!("codex-{CODEX_VERSION}"))
        .join("node_modules/.bin")
}

fn seed_home(home: &Path, base_url: &str, work: &Path) {
    let config = format!(
        "model = \"{MODEL}\"\nmodel_provider = \"volee\"\napproval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n\n[model_providers.volee]\nname = \"Volee test\"\nbase_url = \"{base_url}\"\nenv_key = \"VOLEE_TEST_MODEL_KEY\"\nwire_api = \"responses\"\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        work.display()
    );
    let codex = home.join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(codex.join("config.toml"), config).unwrap();
}

fn cmdline_mentions(pid: i32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains(needle))
        .unwrap_or(false)
}

/// Kills the private tmux server, stops the shared app-server daemon of the throwaway HOME and
/// kills whatever of that HOME still runs (`daemon stop` leaves its `pid-update-loop` behind),
/// however the test ends (Drop runs on panic too).
struct Cleanup {
    codex: PathBuf,
    home: PathBuf,
    tmux_socket_name: String,
    tmux_tmpdir: PathBuf,
}

impl Cleanup {
    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env("TMUX_TMPDIR", &self.tmux_tmpdir)
            .env_remove("TMUX")
            .args(["-L", &self.tmux_socket_name])
            .stdin(Stdio::null());
        cmd
    }

    /// Pids of processes whose executable or command line lies under the throwaway HOME.
    fn leftovers(&self) -> Vec<i32> {
        let needle = self.home.display().to_string();
        let me = std::process::id() as i32;
        std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                    .filter(|pid| *pid != me)
                    .filter(|pid| {
                        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                            .map(|p| p.display().to_string())
                            .unwrap_or_default();
                        exe.starts_with(&needle) || cmdline_mentions(*pid, &needle)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn stop(&self) -> (String, Vec<i32>) {
        let _ = self.tmux().arg("kill-server").output();
        let out = Command::new(&self.codex)
            .args(["app-server", "daemon", "stop"])
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|e| format!("could not run: {e}"));
        std::thread::sleep(Duration::from_millis(300));
        let left = self.leftovers();
        for pid in &left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        (out, left)
    }

    fn screen(&self) -> String {
        self.tmux()
            .args(["capture-pane", "-p", "-t", "codex"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (stopped, left) = self.stop();
        eprintln!("cleanup: codex app-server daemon stop: {stopped}; leftovers killed: {left:?}");
    }
}

/// The protocol exchange is logged (target `volee::listing::codex`, debug) only while this is set.
static VERBOSE: AtomicBool = AtomicBool::new(false);

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "volee::listing::codex=debug",
        ))
        .with_writer(|| -> Box<dyn Write> {
            if VERBOSE.load(Ordering::Relaxed) {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::sink())
            }
        })
        .with_target(false)
        .without_time()
        .try_init();
}

/// One poll's view of the TUI's thread.
struct Seen {
    at: Duration,
    status: String,
    state: Option<AgentState>,
    screen_asks: bool,
}

#[tokio::test]
async fn real_codex_daemon_lists_the_tui_thread_and_its_approval_wait() {
    if !require("tmux", "the Codex app-server test")
        || !require("node", "the Codex app-server test")
    {
        return;
    }
    let bin_dir = codex_bin_dir();
    let codex = bin_dir.join("codex");
    if !codex.is_file() {
        fail_or_skip(&format!(
            "the pinned Codex {CODEX_VERSION} is not installed at {} (cargo test --test conformance installs it)",
            codex.display()
        ));
        return;
    }
    init_logging();

    let dir = tempfile::Builder::new()
        .prefix("volee-cx-")
        .tempdir()
        .unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, work, tmux_tmpdir) = (root.join("home"), root.join("work"), root.join("tmux"));
    for d in [&home, &work, &tmux_tmpdir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let marker = work.join("volee-codex-server-marker");
    let server = ModelServer::start(vec![
        Turn::tool(
            "exec_command",
            json!({
                "cmd": format!("touch {}", marker.display()),
                "sandbox_permissions": "require_escalated",
                "justification": "volee codex app-server test needs approval"
            }),
        ),
        Turn::text("done"),
    ]);
    // The thread is active for a second before the tool call arrives.
    server.set_main_delay(Duration::from_millis(1500));
    seed_home(&home, &format!("{}/v1", server.base_url()), &work);
    let codex_home = home.join(".codex");
    let socket = socket_in(&codex_home);

    let cleanup = Cleanup {
        codex: codex.clone(),
        home: home.clone(),
        tmux_socket_name: format!("volee-cx-{}", std::process::id()),
        tmux_tmpdir: tmux_tmpdir.clone(),
    };
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let launched_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let started = Instant::now();
    let out = cleanup
        .tmux()
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &home)
        .env("CODEX_HOME", &codex_home)
        .env("VOLEE_TEST_MODEL_KEY", API_KEY)
        .env("TMUX_TMPDIR", &tmux_tmpdir)
        .env("TERM", "xterm-256color")
        .env("LANG", "C.UTF-8")
        .args(["-f", "/dev/null", "new-session", "-d", "-s", "codex"])
        .args(["-x", "160", "-y", "40", "-c"])
        .arg(&work)
        .arg(format!("{} {PROMPT:?}", codex.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tmux new-session: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut seen: Vec<Seen> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let mut found: Option<CodexThread> = None;
    let mut logged_first = false;
    let approval_at: Duration;
    let deadline = started + Duration::from_secs(120);
    let describe = |seen: &[Seen], errors: &[String], cleanup: &Cleanup, server: &ModelServer| {
        let lines: Vec<String> = seen
            .iter()
            .map(|s| {
                format!(
                    "  +{:>6.2}s {:<28} {:<10} screen asks: {}",
                    s.at.as_secs_f64(),
                    s.status,
                    s.state.map_or("-", |x| x.as_str()),
                    s.screen_asks
                )
            })
            .collect();
        format!(
            "statuses:\n{}\nerrors: {errors:?}\nscreen:\n{}\nmodel server:\n{}",
            lines.join("\n"),
            cleanup.screen(),
            server.summary()
        )
    };

    // 1. The thread appears, then asks for approval (the screen shows the prompt too).
    loop {
        assert!(
            Instant::now() < deadline,
            "no waitingOnApproval within 120 s\n{}",
            describe(&seen, &errors, &cleanup, &server)
        );
        let verbose = !logged_first && socket.exists();
        VERBOSE.store(verbose, Ordering::Relaxed);
        let listed = list_threads(&socket, Duration::from_secs(5)).await;
        VERBOSE.store(false, Ordering::Relaxed);
        match listed {
            Ok(threads) => {
                logged_first |= verbose;
                if let Some(t) = match_thread(
                    &threads,
                    &work.display().to_string(),
                    Some(PROMPT),
                    launched_at,
                ) {
                    let screen_asks = cleanup.screen().contains("Yes, proceed");
                    record(&mut seen, started.elapsed(), &t.status, screen_asks);
                    if found.is_none() {
                        eprintln!(
                            "thread found after {:.2} s: {t:#?}",
                            started.elapsed().as_secs_f64()
                        );
                        eprintln!("all loaded threads: {:#?}", threads);
                    }
                    let asks = matches!(
                        t.status,
                        ThreadStatus::Active {
                            waiting_on_approval: true,
                            ..
                        }
                    );
                    found = Some(t.clone());
                    if asks && screen_asks {
                        approval_at = started.elapsed();
                        VERBOSE.store(true, Ordering::Relaxed);
                        let again = list_threads(&socket, Duration::from_secs(5)).await;
                        VERBOSE.store(false, Ordering::Relaxed);
                        again.unwrap();
                        break;
                    }
                }
            }
            Err(CodexServerError::Connect { .. }) => {} // the daemon is starting
            Err(e) => {
                let msg = format!("+{:.2}s {e:?}", started.elapsed().as_secs_f64());
                if errors.last() != Some(&msg) {
                    errors.push(msg);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let approval = approval_at;
    let thread = found.clone().unwrap();
    assert_eq!(thread.cwd, work.display().to_string());
    assert_eq!(thread.preview, PROMPT);
    assert_eq!(thread.state(), Some(AgentState::NeedsYou));
    assert!(!marker.exists(), "the tool ran before it was approved");
    assert!(
        seen.iter().any(|s| s.status == "active"),
        "active (no flag) before the approval wait\n{}",
        describe(&seen, &errors, &cleanup, &server)
    );
    let first_wait = seen
        .iter()
        .position(|s| s.status.contains("waitingOnApproval"))
        .unwrap();
    assert!(
        seen[..first_wait].iter().all(|s| s.status == "active"),
        "only active before the wait\n{}",
        describe(&seen, &errors, &cleanup, &server)
    );

    // 2. Approve: the turn runs the command and ends idle.
    let out = cleanup
        .tmux()
        .args(["send-keys", "-t", "codex", "y"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let approved = started.elapsed();
    loop {
        assert!(
            Instant::now() < started + Duration::from_secs(180),
            "not idle after the approval\n{}",
            describe(&seen, &errors, &cleanup, &server)
        );
        match list_threads(&socket, Duration::from_secs(5)).await {
            Ok(threads) => {
                let t = threads.iter().find(|t| t.id == thread.id).cloned();
                let t = t.unwrap_or_else(|| panic!("thread gone: {threads:#?}"));
                record(
                    &mut seen,
                    started.elapsed(),
                    &t.status,
                    cleanup.screen().contains("Yes, proceed"),
                );
                if t.status == ThreadStatus::Idle {
                    break;
                }
            }
            Err(e) => errors.push(format!("+{:.2}s {e:?}", started.elapsed().as_secs_f64())),
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(marker.exists(), "the approved command did not run");

    eprintln!(
        "\n==== Codex {CODEX_VERSION} app-server, thread {} ====",
        thread.id
    );
    eprintln!(
        "approval wait seen at +{:.2}s, 'y' sent at +{:.2}s",
        approval.as_secs_f64(),
        approved.as_secs_f64()
    );
    eprintln!("{}", describe(&seen, &errors, &cleanup, &server));
    for e in server.exchanges() {
        eprintln!(
            "model request #{}: originator {:?}, user-agent {:?}",
            e.seq,
            e.header("originator"),
            e.header("user-agent")
        );
    }
    eprintln!("thread originator: {:?}", thread.originator);
    // volee's listing (which may reach a fresh daemon before the TUI does) must not become the
    // daemon's originator: the TUI's thread and its model requests keep Codex's own identity.
    assert_eq!(thread.originator.as_deref(), Some("codex-tui"));
    for e in server.exchanges() {
        assert_eq!(
            e.header("originator"),
            Some("codex-tui"),
            "request #{}",
            e.seq
        );
        assert!(
            !e.header("user-agent").unwrap_or("").contains("volee"),
            "request #{}: {:?}",
            e.seq,
            e.header("user-agent")
        );
    }
    let (stopped, left) = cleanup.stop();
    eprintln!("codex app-server daemon stop: {stopped}; leftovers killed: {left:?}");
}

/// Keeps one line per change of status (or of the screen's approval prompt).
fn record(seen: &mut Vec<Seen>, at: Duration, status: &ThreadStatus, screen_asks: bool) {
    let status_text = status.describe();
    if seen
        .last()
        .is_some_and(|s| s.status == status_text && s.screen_asks == screen_asks)
    {
        return;
    }
    seen.push(Seen {
        at,
        status: status_text,
        state: status.state(),
        screen_asks,
    });
}
