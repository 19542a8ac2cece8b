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
    let FirstRun {
        screen,
        title,
        tree,
        dead,
    } = first_run(program, scratch, home, work)?;
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
            dead.is_none(),
            format!(
                "first screen: no rule matched (pane {}); last line {:?}",
                dead.as_deref().unwrap_or("alive"),
                volee_view::plain_text(volee_harness::last_line(&screen), 80)
            ),
        ),
    }
    Ok(report)
}

/// What a first run of a program showed, for a new profile.
struct FirstRun {
    screen: String,
    title: String,
    /// `(pid, comm)` of the pane's process tree.
    tree: Vec<(u32, String)>,
    /// The pane's process exited (and its status).
    dead: Option<String>,
}

/// Run `program` in a private tmux server with `home` as HOME and `work` as its directory, for
/// `wait`; what it showed. Everything it started is ended after.
fn first_run(program: &Path, scratch: &Path, home: &Path, work: &Path) -> CliResult<FirstRun> {
    let server = TmuxServer::new(scratch.join("tmux.sock"));
    server
        .run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "48",
            "-c",
            &work.display().to_string(),
            "-e",
            &format!("HOME={}", home.display()),
            &program.display().to_string(),
        ])
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    let _ = server.run(&["set-option", "-g", "remain-on-exit", "on"]);
    std::thread::sleep(Duration::from_secs(6));
    let shown = |format: &str| {
        server
            .run(&["display-message", "-p", format])
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let pane_pid: Option<u32> = shown("#{pane_pid}").parse().ok();
    let screen = server.run(&["capture-pane", "-p"]).unwrap_or_default();
    let title = shown("#{pane_title}");
    let dead = shown("#{pane_dead}:#{pane_dead_status}");
    let tree = pane_pid.map(process_tree).unwrap_or_default();
    for (pid, _) in &tree {
        if let Ok(raw) = i32::try_from(*pid) {
            let pid = nix::unistd::Pid::from_raw(raw);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let _ = server.run(&["kill-server"]);
    Ok(FirstRun {
        screen,
        title,
        tree,
        dead: dead
            .strip_prefix("1:")
            .map(|status| format!("exited {status}")),
    })
}

/// The first of `flags` that `help` lists.
fn first_flag<'a>(help: &str, flags: &[&'a str]) -> Option<&'a str> {
    flags.iter().copied().find(|f| has_flag(help, f))
}

/// A TOML string (a basic string, escaped as JSON escapes it, which TOML reads).
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// `volee probe --new NAME PROGRAM [--out DIR]`: run a program volee has no profile for and
/// draft its profile file from what it shows, with its first screen as a fixture.
pub fn probe_new(name: &str, program: &str, out_dir: Option<&Path>) -> CliResult {
    let valid = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(CliError::user(format!(
            "{name:?}: a harness's name is lower-case letters, digits and '-', at most 40"
        )));
    }
    volee_tmux::server::version()?;
    let path = if program.contains('/') {
        Some(std::path::PathBuf::from(program))
    } else {
        volee_os::program::find(program)
    }
    .filter(|p| p.is_file())
    .ok_or_else(|| CliError::env(format!("no program {program:?} (not on PATH)")))?;
    let out_dir = out_dir.map_or_else(|| std::path::PathBuf::from("."), Path::to_path_buf);
    let draft_path = out_dir.join(format!("{name}.toml"));
    let capture_path = out_dir.join(format!("{name}-01-start.txt"));
    for p in [&draft_path, &capture_path] {
        if std::fs::symlink_metadata(p).is_ok() {
            return Err(CliError::user(format!(
                "{} exists: nothing is written over it",
                p.display()
            )));
        }
    }
    let scratch =
        std::env::temp_dir().join(format!("volee-probe-new-{name}-{}", std::process::id()));
    let home = scratch.join("home");
    let work = scratch.join("work");
    for dir in [&home, &work] {
        std::fs::create_dir_all(dir).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    }
    let version = crate::program::read_version(&path, Some(&home));
    let help = capture(&path, &["--help"], &home).unwrap_or_default();
    let run = first_run(&path, &scratch, &home, &work);
    let _ = std::fs::remove_dir_all(&scratch);
    let run = run?;
    let program_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.to_string());
    let draft = draft_profile(name, &program_name, version.as_deref(), &help, &run);
    // The draft must be a profile volee reads: checked before it is written.
    if let Err(problems) = volee_harness::file::parse(&draft, &draft_path.display().to_string()) {
        let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(CliError::internal(format!(
            "the draft does not check: {}",
            lines.join("; ")
        )));
    }
    std::fs::create_dir_all(&out_dir).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    let capture = format!(
        "source: volee probe --new {name} {program_name} ({})\ntitle: {}\n---\n{}",
        version.as_deref().unwrap_or("version unknown"),
        run.title,
        run.screen
    );
    for (p, text) in [(&draft_path, &draft), (&capture_path, &capture)] {
        std::fs::write(p, text).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    }
    out(&format!(
        "{}: a draft profile ({} processes, first screen {})\n{}: its first screen and title\n\
         review the draft (flags, prompt style, rules), then: volee profiles check {}",
        draft_path.display(),
        run.tree.len(),
        run.dead.as_deref().unwrap_or("alive"),
        capture_path.display(),
        draft_path.display()
    ));
    Ok(())
}

/// The profile file a first run suggests: what was measured, and `# TODO` where a person must
/// decide.
fn draft_profile(
    name: &str,
    program: &str,
    version: Option<&str>,
    help: &str,
    run: &FirstRun,
) -> String {
    let mut t = String::new();
    let numbers = version
        .and_then(volee_harness::profile::parse_version)
        .map(|v| v.iter().map(u64::to_string).collect::<Vec<_>>().join("."));
    t.push_str(&format!(
        "# {name}: drafted by `volee probe --new` from {program} {} — review every line.\n",
        version.unwrap_or("(no version read)")
    ));
    t.push_str(&format!(
        "# First screen: {name}-01-start.txt (pane {}; title {:?}).\n\n",
        run.dead.as_deref().unwrap_or("alive after 6 s"),
        run.title
    ));
    t.push_str(&format!("name = {}\n", toml_string(name)));
    let display: String = name
        .chars()
        .enumerate()
        .map(|(i, c)| if i == 0 { c.to_ascii_uppercase() } else { c })
        .collect();
    t.push_str(&format!("display_name = {}\n", toml_string(&display)));
    t.push_str(&format!("program = {}\n", toml_string(program)));
    if let Some(v) = &numbers {
        t.push_str(&format!(
            "measured = {{ min = {}, max = {} }}\n",
            toml_string(v),
            toml_string(v)
        ));
    }
    t.push_str("usage = \"unknown\"\n\n[launch]\n");
    t.push_str(
        "# TODO: how a first prompt is passed (positional, after_double_dash, flag, typed).\n",
    );
    t.push_str("prompt = { style = \"positional\" }\n");
    let flags = [
        ("model_flag", &["--model", "-m"][..]),
        ("name_flag", &["--name", "-n"][..]),
        ("session_id_flag", &["--session-id", "--session"][..]),
        ("worktree_flag", &["--worktree", "-w"][..]),
    ];
    for (key, candidates) in flags {
        if let Some(flag) = first_flag(help, candidates) {
            t.push_str(&format!("{key} = {}   # in --help\n", toml_string(flag)));
        }
    }
    t.push_str("\n[resume]\n");
    match first_flag(help, &["--resume", "--session", "-r"]) {
        Some(flag) => t.push_str(&format!(
            "args = [{}, \"{{id}}\"]   # {flag} is in --help: check that it takes an id\n",
            toml_string(flag)
        )),
        None => t.push_str("args = []   # no resume flag in --help\n"),
    }
    // The processes: the innermost of the pane's tree that is not a shell.
    let shells = ["sh", "bash", "dash", "zsh", "fish"];
    let names: Vec<&str> = run
        .tree
        .iter()
        .map(|(_, c)| c.as_str())
        .filter(|c| !shells.contains(c))
        .collect();
    t.push_str("\n[process]\n");
    t.push_str(&format!(
        "# Seen: {:?}. A node or bun wrapper runs under its runtime's name: add its script's path\n\
         # (a part of it) to `scripts`.\n",
        run.tree.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>()
    ));
    let mut process_names = vec![program.to_string()];
    for n in names
        .iter()
        .filter(|n| !["node", "bun", "python3", "python"].contains(n))
    {
        if !process_names.iter().any(|p| p == n) {
            process_names.push(n.to_string());
        }
    }
    let list = |v: &[String]| {
        v.iter()
            .map(|x| toml_string(x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    t.push_str(&format!(
        "names = [{}]\nscripts = []\nhelpers = []\n",
        list(&process_names)
    ));
    t.push_str("\n[states]\nsources = [\"screen\", \"activity\"]\n");
    t.push_str("\n[input]\n# TODO: the key that interrupts a turn (Escape, C-c).\ninterrupt_key = \"Escape\"\n");
    // A rule from the first screen's last line, as a start: it says idle.
    let last = volee_harness::last_line(&run.screen).trim_end();
    if !last.trim().is_empty() && run.dead.is_none() {
        let pattern = format!("^{}$", regex::escape(last.trim_start()));
        t.push_str(&format!(
            "\n# The first screen's last line, taken as its idle prompt ({name}-01-start.txt):\n\
             # TODO: keep what stays the same (drop counters, paths), and add rules for working,\n\
             # needs_you and failed screens from captures of them.\n\
             [[rule]]\nid = \"{name}.idle-start\"\nregion = \"last_line\"\nmatch = {}\n\
             state = \"idle\"\npriority = 20\n",
            toml_string(&pattern)
        ));
    }
    t
}
