//! Dev-only helpers shared by volee's end-to-end tests.
//!
//! - [`require`]: a test that needs tmux (or Docker, zellij…) and does not find it is skipped with
//!   a printed reason when run by hand, and **fails** when `CI` is set — never a silent pass.
//! - [`TestEnv`]: a hermetic environment for every spawned `volee`: `VOLEE_HOME`, `HOME` and
//!   `TMUX_TMPDIR` in a temp dir (so tmux's default server is a private socket there), a cleared
//!   environment; on drop it stops the daemon and kills the private tmux server.
//! - [`wait_until`]: polls a condition and on timeout panics with the sentence, the last value
//!   seen and the daemon's log tail.
//! - [`require_root`] and [`TempUser`]: a second Unix user, created by a test and removed after
//!   it (even on panic), for tests about other users' processes.
//! - [`sshd`]: a real OpenSSH server on loopback with a user of its own, for remote machines.
//! - [`model_server`]: a scripted Anthropic Messages server on 127.0.0.1 for driving real harness
//!   programs (conformance tests).
//! - [`ntfy_server`]: a stand-in for an ntfy server on 127.0.0.1 that records every publish (the
//!   daemon's push to the phone).

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod bench;
mod http1;
pub mod model_server;
pub mod ntfy_server;
pub mod ollama_server;
pub mod sshd;
pub mod users;
pub mod zellij;

pub use users::{require_root, TempUser};

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Is `program` on PATH?
pub fn on_path(program: &str) -> bool {
    volee_os::program::find(program).is_some()
}

/// True when the tool is present. Missing: panics under `CI`, otherwise prints why the test is
/// skipped and returns false (the caller returns).
pub fn require(program: &str, why: &str) -> bool {
    if on_path(program) {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{program} is required for {why} and is not installed (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: {program} is not installed; needed for {why}");
    false
}

/// Does a Docker daemon answer `GET /_ping` on its socket (`DOCKER_HOST` when it is a `unix://`
/// path, else `/var/run/docker.sock`)?
pub fn docker_answers() -> bool {
    use std::io::{Read, Write};
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(String::from))
        .unwrap_or_else(|| "/var/run/docker.sock".into());
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(&socket) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    reply.starts_with(b"HTTP/1.") && String::from_utf8_lossy(&reply).contains(" 200 ")
}

/// True when Docker answers. Missing: panics under `CI`, otherwise prints why the test is
/// skipped and returns false (the caller returns).
pub fn require_docker(why: &str) -> bool {
    if docker_answers() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("Docker is required for {why} and does not answer (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: Docker does not answer; needed for {why}");
    false
}

/// A private volee + tmux world in a temp dir.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    /// The `volee` binary under test.
    pub bin: PathBuf,
    /// Extra environment for spawned volee commands.
    pub extra_env: Vec<(String, String)>,
}

impl TestEnv {
    /// `bin` is `env!("CARGO_BIN_EXE_volee")`.
    pub fn new(bin: impl Into<PathBuf>) -> TestEnv {
        TestEnv::new_in(bin, std::env::temp_dir())
    }

    /// The same, with its temp dir under `parent` (e.g. a root-owned directory for harnesses that
    /// only read root-owned files).
    pub fn new_in(bin: impl Into<PathBuf>, parent: impl AsRef<Path>) -> TestEnv {
        std::fs::create_dir_all(parent.as_ref()).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("volee-test-")
            .tempdir_in(parent)
            .unwrap();
        for sub in ["home", "volee", "tmux", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let env = TestEnv {
            dir,
            bin: bin.into(),
            extra_env: Vec::new(),
        };
        // Discovery scans the machine's real /proc: off unless a test turns it on, so a test daemon
        // never adopts processes of other tests or of the developer.
        let config = env.volee_home().join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.toml"), "discovery_interval = \"off\"\n").unwrap();
        // tmux -S does not create the socket's directory; tmux itself wants it private.
        let socket_dir = env.tmux_socket().parent().unwrap().to_path_buf();
        std::fs::create_dir_all(&socket_dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        env
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn volee_home(&self) -> PathBuf {
        self.root().join("volee")
    }
    pub fn home(&self) -> PathBuf {
        self.root().join("home")
    }
    /// A directory to run agents in.
    pub fn work(&self) -> PathBuf {
        self.root().join("work")
    }
    pub fn tmux_tmpdir(&self) -> PathBuf {
        self.root().join("tmux")
    }
    /// The private tmux server's socket (tmux's default socket under our `TMUX_TMPDIR`).
    pub fn tmux_socket(&self) -> PathBuf {
        self.tmux_tmpdir()
            .join(format!("tmux-{}", nix::unistd::getuid().as_raw()))
            .join("default")
    }
    pub fn log_tail(&self) -> String {
        let text =
            std::fs::read_to_string(self.volee_home().join("state/volee.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The hermetic environment; `extra_env` only for volee itself, so a test that takes tmux off
    /// volee's PATH can still clean up its server.
    fn base_env(&self, cmd: &mut Command, with_extra: bool) {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("VOLEE_HOME", self.volee_home())
            .env("TMUX_TMPDIR", self.tmux_tmpdir())
            .env("LANG", "C.UTF-8")
            .env("TERM", "xterm-256color")
            .env("VOLEE_LOG", "debug");
        if with_extra {
            for (k, v) in &self.extra_env {
                cmd.env(k, v);
            }
        }
    }

    /// `volee ARGS` in this environment, cwd = work dir.
    pub fn volee<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(&self.bin);
        self.base_env(&mut cmd, true);
        cmd.args(args).current_dir(self.work()).stdin(Stdio::null());
        cmd
    }

    /// Run volee and return its output (whatever the exit code).
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.volee(args).output().unwrap()
    }

    /// Run volee, assert success, return trimmed stdout.
    pub fn ok<I, S>(&self, args: I) -> String
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<S> = args.into_iter().collect();
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        let out = self.run(args);
        assert!(
            out.status.success(),
            "volee {} failed ({}):\nstdout: {}\nstderr: {}\nlog:\n{}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tail()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A `tmux` command on the private server.
    pub fn tmux_command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        self.base_env(&mut cmd, false);
        cmd.arg("-S").arg(self.tmux_socket()).stdin(Stdio::null());
        cmd
    }

    /// Run tmux, assert success, return stdout.
    pub fn tmux<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = self.tmux_command().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "tmux {:?} failed: {}",
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Start the private tmux server with a session `main` (the user's own session).
    pub fn start_tmux(&self) {
        self.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            "160",
            "-y",
            "40",
        ]);
    }

    /// The agent object of `volee show ID --json`.
    pub fn agent(&self, id: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(["show", id, "--json"])).unwrap()
    }

    /// `volee wait ID --until STATES --timeout SECS`, asserting it reached one of them.
    pub fn wait_state(&self, id: &str, until: &str, secs: u32) -> String {
        let out = self.run(["wait", id, "--until", until, "--timeout", &secs.to_string()]);
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success(),
            "agent {id} did not reach {until} within {secs} s (it is {state:?}; {})\nexplain:\n{}\nlog:\n{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&self.run(["explain", id]).stdout),
            self.log_tail()
        );
        state
    }

    /// The daemon's pid, from its pid file.
    pub fn daemon_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.volee_home().join("run/daemon.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// SIGKILL the running daemon (as a crash would end it) and wait until it is gone; its pid.
    pub fn kill_daemon(&self) -> i32 {
        let pid = self.daemon_pid().expect("a running daemon");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("SIGKILL the daemon");
        wait_process_gone(
            "the daemon process is gone",
            i64::from(pid),
            Duration::from_secs(5),
        );
        pid
    }

    /// A new tmux window in session `main` running `program`; its pane id.
    pub fn open_window(&self, program: &Path) -> String {
        self.tmux(&[
            "new-window".as_ref(),
            "-d".as_ref(),
            "-P".as_ref(),
            "-F".as_ref(),
            "#{pane_id}".as_ref(),
            "-t".as_ref(),
            "main:".as_ref(),
            program.as_os_str(),
        ])
        .trim()
        .to_string()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self
            .tmux_command()
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
        // VOLEE_TEST_KEEP=1 keeps the directory (logs, zellij's log under zj/tmp) to look at.
        if std::env::var_os("VOLEE_TEST_KEEP").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("kept {}", self.dir.path().display());
        }
    }
}

/// Wait until process `pid` has exited (gone, or a zombie), panicking after `timeout` with `what`.
pub fn wait_process_gone(what: &str, pid: i64, timeout: Duration) {
    let stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    wait_until(
        what,
        timeout,
        || {
            let s = stat();
            (s.is_empty() || s.contains(") Z ")).then_some(())
        },
        || format!("pid {pid} still alive: {}", stat()),
    );
}

/// Poll `check` every 20 ms until it returns `Some`, or panic after `timeout` with `what` and the
/// last diagnostic `describe` gives.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    describe: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {timeout:?} waiting for: {what}\n{}",
                describe()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
