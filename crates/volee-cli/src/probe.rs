//! `volee probe HARNESS`: run the installed program in a private tmux server with a throwaway HOME
//! and compare what it shows with its profile: version, flags, process tree, first screen.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use volee_harness::{Instrumentation, Profile, PromptStyle};
use volee_tmux::server::TmuxServer;

use crate::error::{self, CliError, CliResult, Exit};
use crate::output::out;

/// Run `program args` with a throwaway HOME, bounded to 10 s; stdout + stderr.
fn capture(program: &Path, args: &[&str], home: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let mut stderr = child.stderr.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        text + &err
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();
    reader.join().ok()
}

/// `(pid, comm)` of `root` and all its descendants, from /proc.
fn process_tree(root: u32) -> Vec<(u32, String)> {
    let mut all: Vec<(u32, u32, String)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        all.push((pid, ppid, comm));
    }
    let mut tree = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, comm) in &all {
            if *pid == parent && tree.iter().all(|(p, _)| p != pid) {
                tree.push((*pid, comm.clone()));
            }
            if *ppid == parent {
                frontier.push(*pid);
            }
        }
    }
    tree
}

fn has_flag(help: &str, flag: &str) -> bool {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == '<')
        .any(|w| w == flag)
}

struct Report {
    lines: Vec<(bool, String)>,
}

impl Report {
    fn check(&mut self, ok: bool, text: String) {
        self.lines.push((ok, text));
    }
}

pub fn probe(name: &str) -> CliResult {
    let profile: Profile =
        volee_harness::profile(name).ok_or_else(|| error::unknown_harness(name))?;
    if profile.program.is_empty() {
        return Err(CliError::user(format!(
            "the {} profile has no program of its own to probe",
            profile.name
        )));
    }
    volee_tmux::server::version()?;
    let program = volee_os::program::find(profile.program)
        .ok_or_else(|| error::harness_not_installed(&profile))?;
    let scratch = std::env::temp_dir().join(format!(
        "volee-probe-{}-{}",
        profile.name,
        std::process::id()
    ));
    let home = scratch.join("home");
    let work = scratch.join("work");
    for dir in [&home, &work] {
        std::fs::create_dir_all(dir).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    }
    let result = run_probe(&profile, &program, &scratch, &home, &work);
    let _ = std::fs::remove_dir_all(&scratch);
    let report = result?;
    let mut text = format!(
        "probe of {} ({}) against its profile:\n",
        profile.display_name,
        program.display()
    );
    for (ok, line) in &report.lines {
        text.push_str(&format!("{}  {line}\n", if *ok { "ok  " } else { "diff" }));
    }
    out(&text);
    Ok(())
}

fn run_probe(
    profile: &Profile,
    program: &Path,
    scratch: &Path,
    home: &Path,
    work: &Path,
) -> CliResult<Report> {
    let mut report = Report { lines: Vec::new() };
    // Version.
    let version = crate::program::read_version(program, Some(home));
    match (&version, profile.measured) {
        (Some(v), Some(range)) => report.check(
            range.contains(v),
            format!("version {v} (measured {}–{})", range.min, range.max),
        ),
        (None, _) => report.check(
            false,
            "version: `--version` printed nothing readable".into(),
        ),
        _ => {}
    }
    // Flags the profile relies on.
    let help = capture(program, &["--help"], home).unwrap_or_default();
    let mut flags: Vec<&str> = [
        profile.session_id_flag,
        profile.name_flag,
        profile.model_flag,
        profile.worktree_flag,
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Instrumentation::SettingsFlag(f) = profile.instrumentation {
        flags.push(f);
    }
    if let PromptStyle::Flag(f) = profile.prompt {
        flags.push(f);
    }
    for flag in flags {
        report.check(has_flag(&help, flag), format!("flag {flag} in --help"));
    }
    // First screen and process tree, in a private tmux server.
    let server = TmuxServer::new(scratch.join("tmux.sock"));
    let start = server.run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        "200",
        "-y",
        "50",
        "-c",
        &work.display().to_string(),
        "-e",
        &format!("HOME={}", home.display()),
        &program.display().to_string(),
    ]);
    if let Err(e) = start {
        return Err(CliError::from_error(Exit::Environment, &e));
    }
    let _ = server.run(&["set-option", "-g", "remain-on-exit", "on"]);
    std::thread::sleep(Duration::from_secs(6));
    let pane_pid: Option<u32> = server
        .run(&["display-message", "-p", "#{pane_pid}"])
        .ok()
        .and_then(|p| p.trim().parse().ok());
    let screen = server.run(&["capture-pane", "-p"]).unwrap_or_default();
    let title = server
        .run(&["display-message", "-p", "#{pane_title}"])
        .unwrap_or_default();
    let dead = server
        .run(&["display-message", "-p", "#{pane_dead}:#{pane_dead_status}"])
        .unwrap_or_default();
    let tree = pane_pid.map(process_tree).unwrap_or_default();
    let names: Vec<&str> = tree.iter().map(|(_, c)| c.as_str()).collect();
    report.check(
        profile.process_names.iter().any(|n| names.contains(n)),
        format!(
            "processes {:?} (profile expects one of {:?})",
            names, profile.process_names
        ),
    );
    let measured = version
        .as_deref()
        .zip(profile.measured)
        .is_some_and(|(v, r)| r.contains(v));
    match volee_harness::screen_rules(profile.name, measured).classify(&screen, title.trim()) {
        Some(m) => report.check(
            true,
            format!(
                "first screen: {} by rule {} ({:?})",
                m.state,
                m.rule,
                volee_view::plain_text(&m.text, 80)
            ),
        ),
        None => report.check(
            !dead.starts_with('1'),
            format!(
                "first screen: no rule matched (pane {}); last line {:?}",
                if dead.starts_with('1') {
                    format!("exited {}", dead.trim())
                } else {
                    "alive".into()
                },
                volee_view::plain_text(volee_harness::last_line(&screen), 80)
            ),
        ),
    }
    // End everything it started, by process group and server.
    for (pid, _) in &tree {
        if let Ok(raw) = i32::try_from(*pid) {
            let pid = nix::unistd::Pid::from_raw(raw);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let _ = server.run(&["kill-server"]);
    Ok(report)
}
