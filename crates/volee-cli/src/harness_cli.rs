//! Harness-specific commands: the launch line of a profile (with its per-launch instrumentation),
//! `volee hook`, `volee profiles`, `volee send`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use volee_harness::{Instrumentation, Profile, PromptStyle};
use volee_protocol::{AgentState, HookEvent, ProfileFit, Request, Response};

use crate::commands::{ask, out, paths};
use crate::error::{CliError, CliResult, Exit};

/// What a harness launch adds to the request.
pub struct HarnessLaunch {
    pub command: Vec<String>,
    /// Environment the instrumentation needs (added to the caller's).
    pub env: Vec<(String, String)>,
    pub version: Option<String>,
    pub fit: ProfileFit,
    pub session_id: Option<String>,
    /// Hooks through volee's own extension directory (written by the daemon).
    pub hooks_extension: bool,
    /// A first prompt the daemon types once the harness is ready ([`PromptStyle::Typed`]).
    pub typed_prompt: Option<String>,
}

/// Options of `volee launch` that a profile turns into flags.
pub struct LaunchOptions<'a> {
    pub name: Option<&'a str>,
    pub model: Option<&'a str>,
    pub worktree: Option<&'a str>,
    pub prompt: Option<&'a str>,
    /// Extra arguments after `--`, passed to the harness before the prompt.
    pub extra: &'a [String],
    /// Resume this harness session instead of starting one.
    pub resume: Option<&'a str>,
    /// Give the harness volee's MCP server (`volee mcp`), the profile's way.
    pub join: bool,
}

/// The environment `volee mcp` needs to find the caller's daemon, passed in the MCP server's
/// entry (harnesses start MCP servers with a reduced environment).
fn mcp_env() -> Vec<(String, String)> {
    [
        "VOLEE_HOME",
        "XDG_RUNTIME_DIR",
        "XDG_STATE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "HOME",
    ]
    .iter()
    .filter_map(|k| {
        std::env::var(k)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (k.to_string(), v))
    })
    .collect()
}

/// Find `program` on the caller's PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// `PROGRAM --version`, bounded to 10 s.
fn read_version(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .to_string();
    volee_harness::profile::parse_version(&line).map(|_| line)
}

/// A loopback TCP port nobody listens on right now (the harness binds it a moment later).
fn free_loopback_port() -> CliResult<u16> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| {
            CliError::from_error(Exit::Environment, &e)
                .hint("volee needs a free loopback port for the harness's server")
        })
}

/// A random version-4 UUID (for `--session-id`).
fn uuid_v4() -> CliResult<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// Claude's per-launch settings file: every hook event volee reads calls `volee hook claude EVENT`.
/// One file for all Claude agents (the agent is named by `VOLEE_AGENT_ID` in the environment);
/// it lives in volee's private runtime directory, never in the user's settings.
fn claude_settings_file(volee_bin: &str) -> CliResult<PathBuf> {
    let settings = volee_harness::instrument::hooks_settings("claude", volee_bin);
    let dir = paths().runtime_dir.join("harness");
    let path = dir.join("claude-settings.json");
    write_private_json(&paths(), &dir, &path, &settings)?;
    Ok(path)
}

/// A system-defaults file for Gemini or Qwen: the file the variable named before (or nothing),
/// with volee's hook entries appended to each event's array — the variable *replaces* the system
/// defaults, so an administrator's settings must survive in volee's copy.
fn system_defaults_file(
    harness: &str,
    var: &str,
    volee_bin: &str,
    extra: Option<&serde_json::Value>,
) -> CliResult<PathBuf> {
    let base_path = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        let default = match harness {
            "gemini" => "/etc/gemini-cli/system-defaults.json",
            _ => "/etc/qwen-code/system-defaults.json",
        };
        Path::new(default).is_file().then(|| PathBuf::from(default))
    });
    let dir = paths().runtime_dir.join("harness");
    // A joined launch gets its own file: the other launches' must not name volee's MCP server.
    let ours = match extra {
        Some(_) => dir.join(format!("{harness}-system-defaults-join.json")),
        None => dir.join(format!("{harness}-system-defaults.json")),
    };
    let mut settings = match base_path.filter(|p| p != &ours) {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                CliError::from_error(Exit::Environment, &e).hint(format!(
                    "{var} names {}, which volee must merge",
                    path.display()
                ))
            })?;
            serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
                CliError::from_error(Exit::Environment, &e)
                    .hint(format!("{} is not valid JSON", path.display()))
            })?
        }
        None => serde_json::json!({}),
    };
    if !volee_harness::instrument::append_hooks(&mut settings, harness, volee_bin) {
        return Err(CliError::env(format!(
            "the system defaults named by {var} are not a JSON object with an object \"hooks\""
        )));
    }
    if let Some(extra) = extra {
        volee_harness::instrument::merge_json(&mut settings, extra);
    }
    write_private_json(&paths(), &dir, &ours, &settings)?;
    Ok(ours)
}

/// Is `path` owned by root and not group/other-writable, and so is every directory above it?
fn root_owned_chain(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors().all(|p| {
        p.as_os_str().is_empty()
            || std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0)
    })
}

/// Write `value` to `path` in `dir`, a directory under volee's own: those are checked first, so
/// nothing is written into a runtime dir someone else planted (a harness would run its hooks).
fn write_private_json(
    paths: &volee_daemon::Paths,
    dir: &Path,
    path: &Path,
    value: &serde_json::Value,
) -> CliResult {
    paths.ensure().map_err(|e| crate::error::path_error(&e))?;
    volee_daemon::paths::ensure_private_dir(dir).map_err(|e| crate::error::path_error(&e))?;
    let bytes =
        serde_json::to_vec_pretty(value).map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    volee_daemon::persist::write_atomic(path, &bytes)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))
}

/// Build a harness's launch line, check its version, set up its per-launch instrumentation.
pub fn launch_line(profile: &Profile, opts: &LaunchOptions) -> CliResult<HarnessLaunch> {
    // volee's own agent is this very binary (which may not be on PATH).
    let own = (profile.instrumentation == Instrumentation::BuiltIn)
        .then(std::env::current_exe)
        .and_then(Result::ok);
    let program = own.or_else(|| which(profile.program)).ok_or_else(|| {
        let mut e = CliError::env(format!(
            "{} is not installed (no `{}` on PATH)",
            profile.display_name, profile.program
        ));
        if let (Some(pkg), Some(install)) = (profile.package, profile.install_hint()) {
            e = e.hint(format!("it comes from the package {pkg}: {install}"));
        }
        e
    })?;
    let version = read_version(&program);
    let fit = match (&version, profile.measured) {
        (Some(v), Some(range)) if range.contains(v) => ProfileFit::Measured,
        (Some(_), Some(_)) => ProfileFit::OtherVersion,
        _ => ProfileFit::Generic,
    };
    if let (ProfileFit::OtherVersion, Some(v), Some(range)) = (fit, &version, profile.measured) {
        eprintln!(
            "warning: {} {v} is outside the measured range {}–{}: hooks are used, screen states fall back to the generic rules",
            profile.display_name, range.min, range.max
        );
    }
    let mut command = vec![program.display().to_string()];
    if profile.instrumentation == Instrumentation::BuiltIn && opts.resume.is_none() {
        command.push("agent".into());
    }
    let mut env = Vec::new();
    let mut hooks_extension = false;
    let bin = std::env::current_exe()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?
        .display()
        .to_string();
    let join = if opts.join {
        Some(
            volee_harness::instrument::join(profile.name, &bin, &mcp_env()).map_err(|why| {
                CliError::user(format!(
                    "{} cannot be given volee's tools per launch: {why}",
                    profile.display_name
                ))
            })?,
        )
    } else {
        None
    };
    let gemini_join = match &join {
        Some(volee_harness::instrument::Join::SystemDefaults { json }) => Some(json.clone()),
        _ => None,
    };
    match profile.instrumentation {
        Instrumentation::SettingsFlag(flag) => {
            let file = claude_settings_file(&bin)?;
            command.extend([flag.to_string(), file.display().to_string()]);
        }
        Instrumentation::SystemDefaultsEnv(var) => {
            let file = system_defaults_file(profile.name, var, &bin, gemini_join.as_ref())?;
            // Gemini skips a system defaults file unless it and every directory above it belong
            // to root and are not group/other-writable — and then runs with no system defaults
            // at all. Naming an insecure file would drop the administrator's settings too.
            // The administrator's settings then stay as they are; volee's hooks come from its
            // own extension instead (`VOLEE_GEMINI_HOOKS=extension` asks for that anyway).
            let forced = std::env::var("VOLEE_GEMINI_HOOKS").is_ok_and(|v| v == "extension");
            if profile.name == "gemini" && (forced || !root_owned_chain(&file)) {
                hooks_extension = true;
            } else {
                env.push((var.to_string(), file.display().to_string()));
            }
        }
        // The daemon writes it when it records the agent, and removes it (docs/adr/0005).
        Instrumentation::OwnHooksFile(_) => {}
        // Only after `volee setup HARNESS`; the entries then serve every launch.
        Instrumentation::UserOptIn(_) => {}
        // Codex: `-c hooks.*` needs --dangerously-bypass-hook-trust (which would also run an
        // untrusted repository's hooks) and forces embedded mode; see docs/adr/0005.
        Instrumentation::ConfigOverrides | Instrumentation::None => {}
        // It reports its states itself, to the agent id the daemon puts in its environment.
        Instrumentation::BuiltIn => {}
        // Its own HTTP server on a free loopback port, read by the daemon (the port is on the
        // recorded command line).
        Instrumentation::ServerPort(flag) => {
            command.extend([
                flag.to_string(),
                free_loopback_port()?.to_string(),
                "--hostname".to_string(),
                "127.0.0.1".to_string(),
            ]);
        }
    }
    match join {
        Some(volee_harness::instrument::Join::Args { args, file }) => {
            let path = match file {
                Some((name, json)) => {
                    let dir = paths().runtime_dir.join("harness");
                    let path = dir.join(name);
                    write_private_json(&paths(), &dir, &path, &json)?;
                    Some(path.display().to_string())
                }
                None => None,
            };
            command.extend(args.into_iter().map(|a| match &path {
                Some(p) => a.replace("{file}", p),
                None => a,
            }));
        }
        Some(volee_harness::instrument::Join::EnvJson { var, json }) => {
            let mut merged = match std::env::var(var) {
                Ok(text) if !text.trim().is_empty() => {
                    serde_json::from_str(&text).map_err(|e| {
                        CliError::user(format!("${var} is not valid JSON: {e}"))
                            .hint("volee merges its MCP server into it")
                    })?
                }
                _ => serde_json::json!({}),
            };
            volee_harness::instrument::merge_json(&mut merged, &json);
            env.push((var.to_string(), merged.to_string()));
        }
        Some(volee_harness::instrument::Join::SystemDefaults { .. }) if hooks_extension => {
            return Err(CliError::user(format!(
                "{} takes volee's tools only through its system-defaults file, which it reads only when root owns it and every directory above",
                profile.display_name
            ))
            .hint("launch without --join, or run volee where its runtime directory is root-owned"));
        }
        Some(volee_harness::instrument::Join::SystemDefaults { .. }) | None => {}
    }
    let session_id = match (opts.resume, profile.session_id_flag) {
        (Some(id), _) => {
            if profile.resume.is_empty() {
                return Err(CliError::user(format!(
                    "{} has no resume line",
                    profile.display_name
                )));
            }
            command.extend(profile.resume.iter().map(|a| a.replace("{id}", id)));
            Some(id.to_string()).filter(|id| !id.is_empty())
        }
        (None, Some(flag)) => {
            let id = uuid_v4()?;
            command.extend([flag.to_string(), id.clone()]);
            Some(id)
        }
        (None, None) => None,
    };
    let flag_for =
        |value: Option<&str>, flag: Option<&str>, what: &str| -> CliResult<Vec<String>> {
            match (value, flag) {
                (None, _) => Ok(Vec::new()),
                (Some(v), Some(f)) => Ok(vec![f.to_string(), v.to_string()]),
                (Some(_), None) => Err(CliError::user(format!(
                    "{} takes no {what}",
                    profile.display_name
                ))),
            }
        };
    // A name is volee's own; the harness gets it too when it has a flag for it.
    if let (Some(n), Some(f)) = (opts.name, profile.name_flag) {
        command.extend([f.to_string(), n.to_string()]);
    }
    command.extend(flag_for(opts.model, profile.model_flag, "--model")?);
    command.extend(flag_for(
        opts.worktree,
        profile.worktree_flag,
        "--worktree",
    )?);
    command.extend(opts.extra.iter().cloned());
    let mut typed_prompt = None;
    if let Some(prompt) = opts.prompt {
        match profile.prompt {
            PromptStyle::AfterDoubleDash => command.extend(["--".to_string(), prompt.to_string()]),
            PromptStyle::Positional => command.push(prompt.to_string()),
            PromptStyle::Flag(f) => command.extend([f.to_string(), prompt.to_string()]),
            // The daemon types it once the screen shows the harness ready.
            PromptStyle::Typed => typed_prompt = Some(prompt.to_string()),
            PromptStyle::Unsupported => {
                return Err(CliError::user(format!(
                    "{} takes no first prompt volee could verify on its command line",
                    profile.display_name
                ))
                .hint("launch it without one, then: volee send ID TEXT"))
            }
        }
    }
    Ok(HarnessLaunch {
        command,
        version,
        fit,
        session_id,
        env,
        hooks_extension,
        typed_prompt,
    })
}

/// `volee setup HARNESS [--undo]`: only Cursor keeps every hook in one file of the user's.
pub fn setup(harness: &str, undo: bool) -> CliResult {
    let Some(profile) = volee_harness::profile(harness) else {
        return Err(CliError::user(format!("no harness profile {harness:?}"))
            .hint("see them: volee profiles"));
    };
    let Instrumentation::UserOptIn(rel) = profile.instrumentation else {
        return Err(CliError::user(format!(
            "{} needs no setup: volee gives it its hooks at each launch, without touching its settings",
            profile.display_name
        )));
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| CliError::env("HOME is not set"))?;
    let path = home.join(rel);
    if undo {
        return match unsetup_cursor(&path)? {
            0 => {
                out(&format!("{} holds no hooks of volee's", path.display()));
                Ok(())
            }
            n => {
                out(&format!("took volee's {n} hooks out of {}", path.display()));
                Ok(())
            }
        };
    }
    let existing = read_user_json(&path)?;
    let bin = std::env::current_exe()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?
        .display()
        .to_string();
    let merged =
        volee_harness::instrument::cursor_hooks_merge(existing.clone(), &bin).map_err(|why| {
            CliError::user(format!(
                "{} is not a hooks file volee understands: {why}",
                path.display()
            ))
            .hint("volee changed nothing")
        })?;
    let dir = path.parent().unwrap_or(&home);
    std::fs::create_dir_all(dir).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    if existing.is_some() {
        let backup = path.with_extension("json.volee-backup");
        std::fs::copy(&path, &backup).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
        out(&format!("backup: {}", backup.display()));
    }
    write_user_json(&path, &merged)?;
    out(&format!(
        "volee's hooks are in {}; `volee setup {harness} --undo` or `volee down` takes them out",
        path.display()
    ));
    Ok(())
}

/// Take volee's entries out of Cursor's hooks file; how many there were.
pub fn unsetup_cursor(path: &Path) -> CliResult<usize> {
    let Some(file) = read_user_json(path)? else {
        return Ok(0);
    };
    let (cleaned, removed) = volee_harness::instrument::cursor_hooks_unmerge(file);
    if removed > 0 {
        write_user_json(path, &cleaned)?;
    }
    Ok(removed)
}

/// A JSON file of the user's; None when there is none.
fn read_user_json(path: &Path) -> CliResult<Option<serde_json::Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            CliError::user(format!("{} is not valid JSON: {e}", path.display()))
                .hint("volee changed nothing")
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::from_error(Exit::Environment, &e)),
    }
}

/// Write a file of the user's atomically, keeping its permissions (0600 for a new one).
fn write_user_json(path: &Path, value: &serde_json::Value) -> CliResult {
    use std::os::unix::fs::PermissionsExt;
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    bytes.push(b'\n');
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0o600);
    volee_daemon::persist::write_atomic(path, &bytes)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| CliError::from_error(Exit::Environment, &e))
}

/// How long `volee hook` waits for its payload's end: a harness that keeps the pipe open must
/// not hold its hook (and so its turn) forever.
const HOOK_STDIN_WAIT: Duration = Duration::from_secs(2);

/// Stdin up to EOF, at most `max` bytes, or what arrived within `wait`.
fn read_stdin_within(max: usize, wait: Duration) -> Vec<u8> {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    // The reader may block for good; the process exits without it.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut read = 0;
        let mut buf = vec![0u8; 64 * 1024];
        while read <= max {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    read += n;
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let deadline = Instant::now() + wait;
    let mut input = Vec::new();
    while let Ok(chunk) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        input.extend_from_slice(&chunk);
        if input.len() > max {
            break;
        }
    }
    input
}

/// 16 random bytes as hex (event ids), from the kernel.
fn random_hex16() -> Option<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// `volee hook HARNESS EVENT`: never fails the harness, never prints, spools when no daemon answers.
pub fn hook(harness: &str, event: &str) -> CliResult {
    let max = volee_harness::hooks::MAX_HOOK_BYTES;
    let input = read_stdin_within(max, HOOK_STDIN_WAIT);
    let at_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let base = HookEvent {
        agent: std::env::var("VOLEE_AGENT_ID").unwrap_or_default(),
        token: std::env::var("VOLEE_AGENT_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .map(volee_protocol::HookToken),
        event_id: random_hex16(),
        harness: harness.chars().take(32).collect(),
        event: event.chars().take(64).collect(),
        at_ms,
        session_id: None,
        fields: Vec::new(),
        error: None,
    };
    let ev = volee_harness::hooks::read_hook_payload(base, &input[..input.len().min(max + 1)]);
    let paths = paths();
    let delivered = volee_daemon::Client::connect(&paths)
        .ok()
        .and_then(|mut c| {
            c.send(&Request::Hook(ev.clone())).ok()?;
            c.next_response_within(Duration::from_millis(500)).ok()?
        })
        .is_some();
    if !delivered {
        spool(&paths, &paths.hook_spool(), &ev);
    }
    Ok(())
}

/// Append one event to the spool the next daemon replays (0600, bounded to 8 MiB).
fn spool(paths: &volee_daemon::Paths, path: &Path, ev: &HookEvent) {
    // Only into volee's own directories (a hook must not write where someone else reads).
    if paths.ensure().is_err() {
        return;
    }
    if let Some(dir) = path.parent() {
        if volee_daemon::paths::ensure_private_dir(dir).is_err() {
            return;
        }
    }
    if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) > 8 * 1024 * 1024 {
        return;
    }
    let Ok(mut line) = serde_json::to_vec(ev) else {
        return;
    };
    line.push(b'\n');
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    if let Ok(mut f) = volee_daemon::paths::open_private(path, opts) {
        let _ = f.write_all(&line);
    }
}

pub fn profiles(json: bool) -> CliResult {
    let all = volee_harness::profiles();
    if json {
        let text = serde_json::to_string_pretty(&all)
            .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
        out(&text);
        return Ok(());
    }
    let mut text = format!(
        "{:<8}  {:<18}  {:<16}  {:<46}  {}\n",
        "NAME", "HARNESS", "MEASURED", "HOOKS PER LAUNCH", "STATES (best first)"
    );
    for p in &all {
        let measured = p
            .measured
            .map(|r| {
                if r.min == r.max {
                    r.min.to_string()
                } else {
                    format!("{}–{}", r.min, r.max)
                }
            })
            .unwrap_or_else(|| "-".into());
        let hooks = match p.instrumentation {
            Instrumentation::SettingsFlag(f) => format!("{f} FILE"),
            Instrumentation::SystemDefaultsEnv(v) => format!("${v}"),
            Instrumentation::ConfigOverrides => "none (title and screen)".into(),
            Instrumentation::OwnHooksFile(d) => {
                format!(
                    "~/{d}/{}",
                    volee_harness::instrument::own_hooks_file_name(p.name)
                )
            }
            Instrumentation::BuiltIn => "built in (reports to the daemon)".into(),
            Instrumentation::UserOptIn(f) => format!("~/{f} after volee setup {}", p.name),
            Instrumentation::ServerPort(f) => format!("none; its server ({f} P)"),
            Instrumentation::None => "-".into(),
        };
        let states: Vec<String> = p
            .states
            .iter()
            .map(|s| format!("{s:?}").to_lowercase())
            .collect();
        text.push_str(&format!(
            "{:<8}  {:<18}  {:<16}  {:<46}  {}\n",
            p.name,
            p.display_name,
            measured,
            hooks,
            states.join(", ")
        ));
    }
    out(&text);
    Ok(())
}

/// `volee send ID TEXT`: type it in (made inert unless `raw`), then confirm the agent reacted.
pub fn send(id: &str, text: &str, raw: bool, wait: Duration) -> CliResult {
    let before = match ask(&Request::Send {
        id: id.into(),
        text: text.into(),
        raw,
    })? {
        Response::Agent { agent } => agent,
        other => return Err(CliError::from_response(other)),
    };
    out(&confirm_reaction(before, wait)?);
    Ok(())
}

/// After a send: wait for the agent (as it was before, `before`) to react, and say how it did.
pub fn confirm_reaction(before: volee_protocol::AgentView, wait: Duration) -> CliResult<String> {
    let waiting = |s: AgentState| matches!(s, AgentState::Idle | AgentState::NeedsYou);
    if !waiting(before.state) {
        return Ok(format!(
            "sent to {} ({} was {})",
            before.id, before.name, before.state
        ));
    }
    let mut client = crate::commands::client()?;
    client.send(&Request::Watch {
        id: before.id.clone(),
    })?;
    let deadline = Instant::now() + wait;
    let mut last = before.state;
    // Output after the submit key (the echo of the typed text does not count) is a reaction too:
    // a hooked agent stays idle until its hook speaks, and exiting can take seconds. A state
    // change is the better answer, so it gets a moment to come first.
    let mut drew: Option<Instant> = None;
    const GRACE: Duration = Duration::from_millis(1500);
    loop {
        let now = Instant::now();
        if drew.is_some_and(|at| now >= at + GRACE) {
            return Ok(format!(
                "sent to {}: it reacted (output; still {last})",
                before.id
            ));
        }
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(CliError::new(
                Exit::Negative,
                format!(
                    "sent to {}, but it did not react within {} s (still {last})",
                    before.id,
                    wait.as_secs()
                ),
            )
            .hint(format!("look at it: volee peek {}", before.id)));
        }
        let left = match drew {
            Some(at) => left.min((at + GRACE).saturating_duration_since(now)),
            None => left,
        };
        match client.next_response_within(left)? {
            Some(Response::Agent { agent }) => {
                // A state change after the send (or a newer state_since) is the reaction.
                if agent.state != before.state || agent.state_since != before.state_since {
                    return Ok(format!("sent to {}: now {}", agent.id, agent.state));
                }
                if drew.is_none()
                    && agent.last_output.is_some()
                    && agent.last_output > before.last_output
                {
                    drew = Some(Instant::now());
                }
                last = agent.state;
            }
            Some(other) => return Err(CliError::from_response(other)),
            None => {}
        }
    }
}

#[cfg(test)]
mod private_file_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn no_harness_file_is_written_into_a_planted_runtime_dir() {
        if !volee_test_support::require_root("a runtime dir owned by another user") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let paths = volee_daemon::Paths {
            config_dir: tmp.path().join("config"),
            data_dir: tmp.path().join("data"),
            state_dir: tmp.path().join("state"),
            runtime_dir: tmp.path().join("volee-0"),
        };
        std::fs::create_dir(&paths.runtime_dir).unwrap();
        std::fs::set_permissions(&paths.runtime_dir, std::fs::Permissions::from_mode(0o777))
            .unwrap();
        std::os::unix::fs::chown(&paths.runtime_dir, Some(65534), Some(65534)).unwrap();
        let dir = paths.runtime_dir.join("harness");
        let file = dir.join("claude-settings.json");
        let err =
            write_private_json(&paths, &dir, &file, &serde_json::json!({"hooks": {}})).unwrap_err();
        assert_eq!(err.exit, Exit::Environment);
        assert!(err.message.contains("owned by uid 65534"), "{err:?}");
        assert!(!err.hints.is_empty());
        assert!(
            !dir.exists(),
            "a directory was made in the planted runtime dir"
        );

        // Our own runtime dir: written, 0600.
        let own = volee_daemon::Paths {
            runtime_dir: tmp.path().join("run"),
            ..paths
        };
        let dir = own.runtime_dir.join("harness");
        let file = dir.join("claude-settings.json");
        write_private_json(&own, &dir, &file, &serde_json::json!({})).unwrap();
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
