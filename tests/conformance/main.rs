//! Harness conformance tests: the **real** harness programs, at pinned versions
//! (`harnesses.txt`), driven through volee in a private tmux against a scripted loopback model
//! server (`volee_test_support::model_server`) — no vendor API: Claude Code (Anthropic Messages),
//! Qwen Code (OpenAI chat completions), Gemini CLI (Gemini `streamGenerateContent`). The hooked harnesses
//! (Claude, Qwen, Gemini, Grok) share `common::drive`; Codex (hookless) has its own body, and so
//! has OpenCode (hookless; its states come from its own HTTP server).
//!
//! Each harness is installed with npm into
//! `${VOLEE_HARNESS_CACHE:-$HOME/.cache/volee-ci/harnesses}/NAME-VERSION/` unless it is already
//! there (`.ci/run` pre-installs them). Without node/npm (or when the install fails) a test is
//! skipped with a printed reason, and fails when `CI` is set. The tests run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod aider;
mod budget;
mod claude;
mod codex;
mod common;
mod copilot;
mod discovery;
mod failures;
mod gemini;
mod grok;
mod join;
mod opencode;
mod pi;
mod qwen;
mod restore;
mod worktree;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use volee_test_support::{require, TestEnv};

static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One line of `harnesses.txt`.
#[derive(Debug, Clone)]
pub struct Pinned {
    pub name: String,
    pub package: String,
    pub version: String,
    pub bin: String,
}

/// The pinned harness called `name`.
pub fn pinned(name: &str) -> Pinned {
    include_str!("harnesses.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[0] == name).then(|| Pinned {
                name: f[0].into(),
                package: f[1].into(),
                version: f[2].into(),
                bin: f[3].into(),
            })
        })
        .unwrap_or_else(|| panic!("no harness {name:?} in tests/conformance/harnesses.txt"))
}

/// `PATH` with the pinned harness's bin directory first.
pub fn path_with(bin_dir: &Path) -> String {
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Where pinned harnesses are installed.
pub fn cache_root() -> PathBuf {
    match std::env::var_os("VOLEE_HARNESS_CACHE").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into()))
            .join(".cache/volee-ci/harnesses"),
    }
}

/// Under `CI` a missing prerequisite fails the test; by hand it is skipped, loudly.
fn fail_or_skip<T>(why: &str) -> Option<T> {
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// Does `bin --version` print `version` first? (Run with a throwaway HOME: a harness may write
/// its state files on any start.)
fn has_version(bin: &Path, version: &str) -> bool {
    if !bin.is_file() {
        return false;
    }
    let home = std::env::temp_dir().join(format!("volee-version-home-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&home);
    let ok = Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            // `2.1.332 (Claude Code)`, `grok 1.0.41 (4220f3b224a6)`: any word of the first line
            // (a sentence's final dot dropped) — of standard output, else of standard error
            // (Pi prints its version there).
            let says = |bytes: &[u8]| {
                String::from_utf8_lossy(bytes)
                    .lines()
                    .next()
                    .is_some_and(|l| {
                        // `GitHub Copilot CLI 1.0.102.` ends its sentence with a dot.
                        l.split_whitespace()
                            .any(|w| w == version || w.strip_suffix('.') == Some(version))
                    })
            };
            o.status.success() && (says(&o.stdout) || (o.stdout.is_empty() && says(&o.stderr)))
        })
        .unwrap_or(false);
    let _ = std::fs::remove_dir_all(&home);
    ok
}

/// The pinned harness's bin directory (its `node_modules/.bin`), installing it if missing; None
/// when it cannot be had outside CI (the test is skipped).
pub fn install(p: &Pinned) -> Option<PathBuf> {
    if let Some(package) = p.package.strip_prefix("pypi:") {
        return install_pypi(p, package);
    }
    let root = cache_root();
    let dir = root.join(format!("{}-{}", p.name, p.version));
    let bin_dir = dir.join("node_modules/.bin");
    if has_version(&bin_dir.join(&p.bin), &p.version) {
        return Some(bin_dir);
    }
    let why = format!("the {} conformance test", p.name);
    if !require("node", &why) || !require("npm", &why) {
        return None;
    }
    std::fs::create_dir_all(&root).unwrap();
    // Install next to the final place, then rename: an interrupted install never looks complete.
    let partial = root.join(format!(
        ".{}-{}.partial-{}",
        p.name,
        p.version,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).unwrap();
    let spec = format!("{}@{}", p.package, p.version);
    eprintln!(
        "installing {spec} into {} (once; .ci/run does this ahead)",
        dir.display()
    );
    let started = Instant::now();
    let out = Command::new("npm")
        .args(["install", "--prefix"])
        .arg(&partial)
        .args([
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--loglevel=error",
            &spec,
        ])
        .current_dir(&partial)
        // Grok's postinstall writes into $GROK_HOME (default ~/.grok): keep it in the cache.
        .env("GROK_HOME", partial.join(".grok-home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return fail_or_skip(&format!(
            "npm install {spec} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if !has_version(&partial.join("node_modules/.bin").join(&p.bin), &p.version) {
        let _ = std::fs::remove_dir_all(&partial);
        return fail_or_skip(&format!(
            "npm installed {spec}, but `{} --version` does not print {} (its native binary may not fit this machine)",
            p.bin, p.version
        ));
    }
    // A broken earlier install is replaced; a concurrent complete one is kept.
    if dir.exists() && !has_version(&bin_dir.join(&p.bin), &p.version) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if std::fs::rename(&partial, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    eprintln!(
        "installed {spec} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    has_version(&bin_dir.join(&p.bin), &p.version)
        .then_some(bin_dir)
        .or_else(|| fail_or_skip(&format!("{spec} is not usable in {}", dir.display())))
}

/// A harness from PyPI (`pypi:PACKAGE` in `harnesses.txt`): a virtual environment at
/// `NAME-VERSION/venv` (built in place: its scripts name their interpreter by absolute path);
/// returns its `bin`. An unfinished one fails the version check and is built again.
fn install_pypi(p: &Pinned, package: &str) -> Option<PathBuf> {
    let dir = cache_root().join(format!("{}-{}", p.name, p.version));
    let bin_dir = dir.join("venv/bin");
    if has_version(&bin_dir.join(&p.bin), &p.version) {
        return Some(bin_dir);
    }
    let why = format!("the {} conformance test", p.name);
    if !require("python3", &why) {
        return None;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = format!("{package}=={}", p.version);
    eprintln!(
        "installing {spec} into {} (once; .ci/run does this ahead)",
        dir.display()
    );
    let started = Instant::now();
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir.join("venv"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = if venv.status.success() {
        Command::new(bin_dir.join("pip"))
            .args(["install", "-q", "--disable-pip-version-check", &spec])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    } else {
        venv
    };
    if !out.status.success() || !has_version(&bin_dir.join(&p.bin), &p.version) {
        let _ = std::fs::remove_dir_all(&dir);
        return fail_or_skip(&format!(
            "pip install {spec} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    eprintln!(
        "installed {spec} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Some(bin_dir)
}

/// One observed change of an agent in `volee ls --all --json`.
#[derive(Debug, Clone)]
pub struct Observed {
    pub at: Instant,
    pub state: String,
    pub source: String,
    pub evidence: String,
}

impl Observed {
    pub fn line(&self, since: Instant) -> String {
        format!(
            "+{:>7.3}s {:<9} {:<11} {}",
            self.at.saturating_duration_since(since).as_secs_f64(),
            self.state,
            self.source,
            self.evidence
        )
    }
}

/// Polls `volee ls --all --json` as fast as it answers and records every change of the agent's
/// (state, source, evidence), until `stop` is set. Returns the number of polls made and the time
/// they took.
pub fn watch_states(
    env: &TestEnv,
    id: &str,
    stop: &AtomicBool,
    timeline: &Mutex<Vec<Observed>>,
) -> (usize, Duration) {
    let began = Instant::now();
    let mut polls = 0;
    // One last look after the stop: a test stops its watcher once `volee wait` saw the final
    // state, which the watcher's previous poll may have missed.
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let out = env.run(["ls", "--all", "--json"]);
        let at = Instant::now();
        polls += 1;
        let agents: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        if let Some(a) = agents
            .as_array()
            .and_then(|all| all.iter().find(|a| a["id"] == id))
        {
            let now = Observed {
                at,
                state: a["state"].as_str().unwrap_or("").into(),
                source: a["state_source"].as_str().unwrap_or("").into(),
                evidence: a["evidence"].as_str().unwrap_or("").into(),
            };
            let mut t = timeline.lock().unwrap_or_else(|e| e.into_inner());
            let changed = t.last().is_none_or(|l| {
                (&l.state, &l.source, &l.evidence) != (&now.state, &now.source, &now.evidence)
            });
            if changed {
                t.push(now);
            }
        }
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (polls, began.elapsed())
}

/// Sets the flag when dropped (so a panicking test still ends its watcher thread).
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
