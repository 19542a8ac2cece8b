//! A real zellij for tests and benchmarks: found in `VOLEE_ZELLIJ` or on PATH (scripts/test puts
//! one there); started attached inside a [`TestEnv`]'s private tmux with its own
//! socket, config, cache and data directories, optionally with volee's plugin loaded and its
//! permissions granted ahead; ended with its session by [`KillSession`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{wait_until, TestEnv};

/// The zellij binary, or None (a failure under CI).
pub fn zellij_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VOLEE_ZELLIJ").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if crate::on_path("zellij") {
        return Some(PathBuf::from("zellij"));
    }
    if std::env::var_os("CI").is_some() {
        panic!("zellij is not installed (CI is set, so this fails): put it on PATH or set VOLEE_ZELLIJ");
    }
    eprintln!("SKIPPED: zellij is not installed");
    None
}

/// A zellij session `name`, attached in a window of the test's tmux, with isolated directories;
/// the variables volee must pass on are added to the test's environment.
pub fn start_zellij(env: &mut TestEnv, bin: &Path, name: &str) -> Vec<(String, String)> {
    start_zellij_with(env, bin, name, None)
}

/// The release build of volee's zellij plugin (scripts/test builds it before the tests), or None
/// (a failure under CI).
pub fn plugin_wasm() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let candidates = [
        // volee-cli's build script builds it here (and scripts/test).
        target.join("zellij-plugin/wasm32-wasip1/release/volee_zellij_plugin.wasm"),
        target.join("wasm32-wasip1/release/volee_zellij_plugin.wasm"),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../zellij-plugin/target/wasm32-wasip1/release/volee_zellij_plugin.wasm"),
    ];
    // The newest: a build left in another place by an older layout speaks an older protocol.
    let newest = candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .max_by_key(|(modified, _)| *modified);
    if let Some((_, found)) = newest {
        return Some(std::fs::canonicalize(found).unwrap());
    }
    let why = "volee's zellij plugin is not built (cargo build --release --manifest-path zellij-plugin/Cargo.toml --target wasm32-wasip1)";
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// [`start_zellij`], with volee's plugin loaded in the background (`load_plugins`) and its
/// permissions granted ahead (`permissions.kdl`, keyed by the bare path).
pub fn start_zellij_with(
    env: &mut TestEnv,
    bin: &Path,
    name: &str,
    plugin: Option<&Path>,
) -> Vec<(String, String)> {
    let root = env.root().join("zj");
    let dirs = ["s", "config", "cache", "data", "tmp"].map(|d| root.join(d));
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut config = "show_startup_tips false\nshow_release_notes false\nsession_serialization false\ndefault_shell \"sh\"\n".to_string();
    if let Some(wasm) = plugin {
        // A copy inside the test's world: the permissions are keyed by its path.
        let copy = root.join("volee.wasm");
        std::fs::copy(wasm, &copy).unwrap();
        config.push_str(&format!(
            "load_plugins {{\n    \"file:{}\"\n}}\n",
            copy.display()
        ));
        std::fs::create_dir_all(dirs[2].join("zellij")).unwrap();
        std::fs::write(
            dirs[2].join("zellij/permissions.kdl"),
            format!(
                "\"{}\" {{\n    ReadApplicationState\n    ChangeApplicationState\n    ReadPaneContents\n    ReadCliPipes\n    RunCommands\n    OpenTerminalsOrPlugins\n}}\n",
                copy.display()
            ),
        )
        .unwrap();
    }
    std::fs::write(dirs[1].join("config.kdl"), config).unwrap();
    let vars: Vec<(String, String)> = [
        ("ZELLIJ_SOCKET_DIR", &dirs[0]),
        ("ZELLIJ_CONFIG_DIR", &dirs[1]),
        ("XDG_CACHE_HOME", &dirs[2]),
        ("XDG_DATA_HOME", &dirs[3]),
        ("TMPDIR", &dirs[4]),
    ]
    .map(|(k, v)| (k.to_string(), v.display().to_string()))
    .to_vec();
    let bin = std::fs::canonicalize(bin)
        .or_else(|_| which(bin))
        .unwrap_or_else(|_| bin.to_path_buf());
    let mut command = vec!["env".to_string(), "TERM=xterm-256color".into()];
    command.extend(vars.iter().map(|(k, v)| format!("{k}={v}")));
    // The PATH volee commands get (a test's stand-ins): what zellij runs — the plugin's
    // commands — finds them too (tmux gives a new window its command client's PATH).
    if let Some((_, path)) = env.extra_env.iter().find(|(k, _)| k == "PATH") {
        command.push(format!("PATH={path}"));
    }
    command.extend([bin.display().to_string(), "--session".into(), name.into()]);
    let mut args = vec!["new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "main:"];
    args.extend(command.iter().map(String::as_str));
    let window = env.tmux(&args).trim().to_string();
    // If zellij dies, its last screen (a panic message) stays to be seen.
    env.tmux(&["set-option", "-p", "-t", &window, "remain-on-exit", "on"]);
    // zellij 0.45.1's server panics when a command-line client (`zellij action …`) connects
    // while the session is still being set up: wait until its screen is drawn.
    wait_until(
        "zellij draws its screen",
        Duration::from_secs(20),
        || {
            env.tmux(&["capture-pane", "-p", "-t", &window])
                .contains("Tab #1")
                .then_some(())
        },
        || env.tmux(&["capture-pane", "-p", "-t", &window]),
    );
    env.extra_env.extend(vars.iter().cloned());
    env.extra_env
        .push(("VOLEE_ZELLIJ".into(), bin.display().to_string()));
    // Up when it lists its panes.
    let zellij = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&bin);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        cmd.args(["--session", name]).args(args).output().unwrap()
    };
    wait_until(
        "zellij is up",
        Duration::from_secs(20),
        || {
            let out = zellij(&["action", "list-panes", "--json", "--all"]);
            (out.status.success()
                && serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok())
            .then_some(())
        },
        || String::from_utf8_lossy(&zellij(&["list-sessions"]).stdout).into_owned(),
    );
    vars
}

pub fn which(bin: &Path) -> std::io::Result<PathBuf> {
    bin.to_str()
        .and_then(volee_os::program::find)
        .ok_or_else(|| std::io::Error::other("not on PATH"))
}

/// A test's zellij session: runs zellij commands against it, and ends it (its server and panes)
/// when the test ends, however it ends.
pub struct KillSession {
    bin: PathBuf,
    name: String,
    vars: Vec<(String, String)>,
}

impl KillSession {
    pub fn new(bin: &Path, name: &str, vars: Vec<(String, String)>) -> KillSession {
        KillSession {
            bin: std::fs::canonicalize(bin)
                .or_else(|_| which(bin))
                .unwrap_or(bin.to_path_buf()),
            name: name.into(),
            vars,
        }
    }

    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.bin);
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    /// `zellij --session NAME ARGS…`.
    /// `zellij --session NAME ARGS…`; asked again, a few times, when zellij 0.45.1 says "There
    /// is no active session!" about this live one (a reused client id; nothing was done).
    pub fn zellij(&self, args: &[&str]) -> std::process::Output {
        let mut attempt = 0;
        loop {
            let out = self
                .command()
                .args(["--session", &self.name])
                .args(args)
                .output()
                .unwrap();
            let false_gone = !out.status.success()
                && String::from_utf8_lossy(&out.stderr).contains("There is no active session");
            if !false_gone || attempt == 4 {
                return out;
            }
            std::thread::sleep(Duration::from_millis(40 << attempt));
            attempt += 1;
        }
    }
}

impl Drop for KillSession {
    fn drop(&mut self) {
        // zellij 0.45.1 can answer "There is no active session!" about a live one: ask again.
        for _ in 0..3 {
            let out = self.command().args(["kill-session", &self.name]).output();
            if out.is_ok_and(|o| o.status.success()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Whatever is left of this world (its server, `zellij pipe` clients orphaned by a killed
        // daemon): every process whose command line or environment names its socket directory.
        let Some((_, dir)) = self.vars.iter().find(|(k, _)| k == "ZELLIJ_SOCKET_DIR") else {
            return;
        };
        let needle = dir.as_bytes();
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            let mentions = |file: &str| {
                std::fs::read(format!("/proc/{pid}/{file}"))
                    .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
            };
            if mentions("cmdline") || mentions("environ") {
                if let Ok(raw) = i32::try_from(pid) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(raw),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

/// The tmux pane the test's zellij `session` is attached in.
pub fn zellij_window(env: &TestEnv, session: &str) -> String {
    let panes = env.tmux(&["list-panes", "-a", "-F", "#{pane_id} #{pane_start_command}"]);
    panes
        .lines()
        .find(|l| l.contains(&format!("--session {session}")))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no tmux pane runs zellij session {session}: {panes}"))
        .to_string()
}

/// The line of the plugin pane (as the attached client draws it) that shows agent `name`.
pub fn pane_row(env: &TestEnv, window: &str, name: &str) -> Option<String> {
    let screen = env.tmux(&["capture-pane", "-p", "-t", window]);
    screen
        .lines()
        .find(|l| l.contains(&format!(" {name} ")) && l.contains("generic"))
        .map(str::to_string)
}
