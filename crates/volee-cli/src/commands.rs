//! The supervising commands: each asks the daemon and prints its answer.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use volee_daemon::{Client, Config, Paths};
use volee_protocol::{AgentState, AgentView, LaunchRequest, Request, Response};

use crate::error::{CliError, CliResult, Exit};

/// Print to stdout; a closed pipe (`volee ls | head`) ends the program quietly.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let written = if text.ends_with('\n') || text.is_empty() {
        stdout.write_all(text.as_bytes())
    } else {
        writeln!(stdout, "{text}")
    };
    if written.and_then(|()| stdout.flush()).is_err() {
        std::process::exit(0);
    }
}

pub fn paths() -> Paths {
    Paths::from_process_env()
}

/// A client of a running daemon (started on demand).
pub fn client() -> CliResult<Client> {
    let exe = std::env::current_exe().map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    Ok(volee_daemon::ensure_daemon(&paths(), &exe)?)
}

/// Send a request, turning an error response into a CLI error.
pub fn ask(req: &Request) -> CliResult<Response> {
    let resp = client()?.request(req)?;
    match resp {
        Response::Error { .. } => Err(CliError::from_response(resp)),
        other => Ok(other),
    }
}

fn agent_of(resp: Response) -> CliResult<AgentView> {
    match resp {
        Response::Agent { agent } => Ok(agent),
        other => Err(CliError::from_response(other)),
    }
}

fn agents_of(resp: Response) -> CliResult<Vec<AgentView>> {
    match resp {
        Response::Agents { agents } => Ok(agents),
        other => Err(CliError::from_response(other)),
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn json(value: &impl serde::Serialize) -> CliResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    out(&text);
    Ok(())
}

/// `volee launch`.
#[derive(clap::Args)]
pub struct LaunchArgs {
    /// Harness profile (default: `generic` when a command is given after --).
    #[arg(long)]
    harness: Option<String>,
    /// Where: `tmux` or `tmux:SESSION` (default: your tmux session, else session `volee`).
    #[arg(long, value_name = "tmux[:SESSION]")]
    host: Option<String>,
    /// Working directory of the agent (default: yours).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// A name to refer to it by (unique among live agents).
    #[arg(long)]
    name: Option<String>,
    /// Model for harnesses that take one.
    #[arg(long)]
    model: Option<String>,
    /// Give the agent volee's MCP tools (see the other agents, wait for one, hand one a message),
    /// the profile's way for one launch. Off unless asked: see docs/adr/0008-join.md.
    #[arg(long)]
    join: bool,
    /// Run in a new git worktree of this name.
    #[arg(long)]
    worktree: Option<String>,
    /// tmux server socket (default: the server you are in, else tmux's default server).
    #[arg(long)]
    socket: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// First prompt, for harnesses that take one.
    prompt: Option<String>,
    /// The command to run (generic profile).
    #[arg(last = true)]
    command: Vec<String>,
}

/// The tmux server the caller means: `--socket`, else the one it runs in, else tmux's default.
pub fn caller_socket(explicit: Option<PathBuf>) -> PathBuf {
    explicit.unwrap_or_else(|| {
        volee_tmux::connection::default_socket(
            std::env::var("TMUX").ok().as_deref(),
            std::env::var("TMUX_TMPDIR").ok().as_deref(),
            nix::unistd::getuid().as_raw(),
        )
    })
}

/// True when the caller runs inside a pane of the server at `socket`.
pub fn inside_server(socket: &std::path::Path) -> bool {
    std::env::var("TMUX")
        .ok()
        .and_then(|t| t.split(',').next().map(PathBuf::from))
        .is_some_and(|s| s == socket)
}

pub fn launch(args: LaunchArgs) -> CliResult {
    let harness = match (&args.harness, args.command.is_empty()) {
        (Some(h), _) => h.clone(),
        (None, false) => "generic".to_string(),
        (None, true) => {
            let config = Config::load(&paths().config_file())
                .map_err(|e| CliError::from_error(Exit::User, &e))?;
            config.default_harness.ok_or_else(|| {
                CliError::user("nothing to launch: give a command after --, or a --harness")
                    .hint("example: volee launch -- python3 agent.py")
                    .hint("or set default_harness in config.toml")
            })?
        }
    };
    let Some(profile) = volee_harness::profile(&harness) else {
        let names: Vec<&str> = volee_harness::profiles().iter().map(|p| p.name).collect();
        return Err(CliError::user(format!("unknown harness {harness:?}"))
            .hint(format!("known harnesses: {}", names.join(", "))));
    };
    if harness == "generic" {
        let unsupported = [
            ("--model", args.model.is_some()),
            ("a PROMPT", args.prompt.is_some()),
        ];
        if let Some((what, _)) = unsupported.iter().find(|(_, used)| *used) {
            return Err(CliError::user(format!(
                "the generic profile takes no {what}: put everything in the command after --"
            )));
        }
        if args.command.is_empty() {
            return Err(CliError::user(
                "the generic profile needs a command after --",
            ));
        }
    }
    let (tmux_session, zellij_session) = match args.host.as_deref() {
        None | Some("tmux") => (None, None),
        Some(h) if h.starts_with("tmux:") => (Some(h["tmux:".len()..].to_string()), None),
        Some("zellij") => match std::env::var("ZELLIJ_SESSION_NAME") {
            Ok(s) if !s.is_empty() => (None, Some(s)),
            _ => {
                return Err(CliError::user("not inside zellij: which session?")
                    .hint("use --host zellij:SESSION (sessions: zellij list-sessions)"))
            }
        },
        Some(h) if h.starts_with("zellij:") && h.len() > "zellij:".len() => {
            (None, Some(h["zellij:".len()..].to_string()))
        }
        Some(h) => {
            return Err(CliError::user(format!("unknown host {h:?}"))
                .hint("use --host tmux[:SESSION] or --host zellij[:SESSION]"))
        }
    };
    if zellij_session.is_none() {
        volee_tmux::server::version()?;
    }
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| CliError::from_error(Exit::User, &e))?,
    };
    let cwd = cwd.canonicalize().map_err(|e| {
        CliError::from_error(Exit::User, &e)
            .hint(format!("--cwd {} must be a directory", cwd.display()))
    })?;
    if !cwd.is_dir() {
        return Err(CliError::user(format!(
            "{} is not a directory",
            cwd.display()
        )));
    }
    let socket = caller_socket(args.socket);
    let caller_pane = inside_server(&socket)
        .then(|| std::env::var("TMUX_PANE").ok())
        .flatten();
    let env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let launch = if harness == "generic" {
        crate::harness_cli::HarnessLaunch {
            command: args.command,
            version: None,
            fit: volee_protocol::ProfileFit::Generic,
            session_id: None,
            env: Vec::new(),
            hooks_extension: false,
            typed_prompt: None,
        }
    } else {
        crate::harness_cli::launch_line(
            &profile,
            &crate::harness_cli::LaunchOptions {
                name: args.name.as_deref(),
                model: args.model.as_deref(),
                // volee makes the worktree itself, for every harness (docs/adr/0009).
                worktree: None,
                prompt: args.prompt.as_deref(),
                extra: &args.command,
                resume: None,
                join: args.join,
            },
        )?
    };
    let mut env = env;
    for (k, v) in launch.env {
        env.retain(|(key, _)| key != &k);
        env.push((k, v));
    }
    // The worktree last, once everything else checked out: a failed launch removes it again.
    let made = match &args.worktree {
        Some(name) => Some(crate::worktree::create(&cwd, name)?),
        None => None,
    };
    let cwd = made.as_ref().map(|m| m.cwd.clone()).unwrap_or(cwd);
    let req = LaunchRequest {
        harness,
        command: launch.command,
        harness_version: launch.version,
        profile_fit: launch.fit,
        session_id: launch.session_id,
        hooks_extension: launch.hooks_extension,
        typed_prompt: launch.typed_prompt,
        cwd: cwd.display().to_string(),
        name: args.name,
        env,
        tmux_socket: socket.display().to_string(),
        tmux_session,
        caller_pane,
        zellij_session,
    };
    let agent = match ask(&Request::Launch(req)).and_then(agent_of) {
        Ok(agent) => agent,
        Err(e) => {
            if let Some(m) = &made {
                let _ = crate::worktree::remove(&m.path, Some(&m.branch), true);
            }
            return Err(e);
        }
    };
    if args.json {
        json(&agent)
    } else {
        out(&agent.id);
        Ok(())
    }
}

pub fn ls(all: bool, as_json: bool, rescan: bool) -> CliResult {
    if rescan {
        ask(&Request::Rescan)?;
    }
    let agents = agents_of(ask(&Request::List { all })?)?;
    if as_json {
        json(&agents)
    } else {
        out(&volee_view::agents_table(&agents, now_secs()));
        Ok(())
    }
}

pub fn show(id: &str, as_json: bool) -> CliResult {
    let agent = agent_of(ask(&Request::Show { id: id.into() })?)?;
    if as_json {
        json(&agent)
    } else {
        out(&volee_view::agent_detail(&agent, now_secs()));
        Ok(())
    }
}

pub fn explain(id: &str, as_json: bool) -> CliResult {
    match ask(&Request::Explain { id: id.into() })? {
        Response::Explanation { explanation } if as_json => json(&explanation),
        Response::Explanation { explanation } => {
            out(&volee_view::explanation_text(&explanation, now_secs()));
            Ok(())
        }
        other => Err(CliError::from_response(other)),
    }
}

fn parse_states(text: &str) -> CliResult<Vec<AgentState>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            AgentState::parse(s).ok_or_else(|| {
                CliError::user(format!("unknown state {s:?}"))
                    .hint("states: working, needs_you, idle, done, failed, stopped")
            })
        })
        .collect::<CliResult<Vec<_>>>()
        .and_then(|v| {
            if v.is_empty() {
                Err(CliError::user("--until needs at least one state"))
            } else {
                Ok(v)
            }
        })
}

/// Follow an agent until `done` says stop; returns the last view seen, or None on timeout.
fn follow(
    id: &str,
    timeout: Option<Duration>,
    mut done: impl FnMut(&AgentView) -> bool,
) -> CliResult<(Option<AgentView>, Option<AgentView>)> {
    let mut client = client()?;
    client.send(&Request::Watch { id: id.into() })?;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut last = None;
    loop {
        let resp = match deadline {
            None => Some(client.next_response()?),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    None
                } else {
                    client.next_response_within(left)?
                }
            }
        };
        match resp {
            None => return Ok((None, last)),
            Some(Response::Agent { agent }) => {
                if done(&agent) {
                    return Ok((Some(agent), last));
                }
                last = Some(agent);
            }
            Some(other) => return Err(CliError::from_response(other)),
        }
    }
}

pub fn wait(id: &str, until: &str, timeout: Option<f64>) -> CliResult {
    let states = parse_states(until)?;
    let timeout = match timeout {
        Some(t) if !(t.is_finite() && t >= 0.0) => {
            return Err(CliError::user(
                "--timeout must be a non-negative number of seconds",
            ))
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let (state, result) = wait_for(id, until, &states, timeout)?;
    out(&state);
    result
}

/// Follow agent `id` until it is in one of `states` (`until` names them for messages): the state
/// it ends in, and Ok, or the error `volee wait` exits with (ended elsewhere, timed out).
pub fn wait_for(
    id: &str,
    until: &str,
    states: &[AgentState],
    timeout: Option<Duration>,
) -> CliResult<(String, CliResult)> {
    let (hit, last) = follow(id, timeout, |a| {
        states.contains(&a.state) || a.state.is_final()
    })?;
    Ok(match (hit, last) {
        (Some(agent), _) if states.contains(&agent.state) => (agent.state.to_string(), Ok(())),
        (Some(agent), _) => (
            agent.state.to_string(),
            Err(CliError::new(
                Exit::Unreachable,
                format!(
                    "agent {} ended as {} and can no longer reach {until}",
                    agent.id, agent.state
                ),
            )),
        ),
        (None, last) => {
            let state = last.map(|a| a.state.to_string()).unwrap_or_default();
            let err = CliError::new(
                Exit::Negative,
                format!("timed out waiting for {id} to reach {until} (it is {state})"),
            );
            (state, Err(err))
        }
    })
}

/// `volee stop ID [--remove-worktree [--delete-branch]]`: the worktree goes only when nothing
/// would be lost — checked before the agent is stopped (then nothing is stopped) and again after.
pub fn stop_and_remove(id: &str, remove_worktree: bool, delete_branch: bool) -> CliResult {
    if !remove_worktree {
        if delete_branch {
            return Err(CliError::user(
                "--delete-branch goes with --remove-worktree",
            ));
        }
        return stop(id);
    }
    let agent = agent_of(ask(&Request::Show { id: id.into() })?)?;
    let Some(wt) = agent.worktree.clone() else {
        return Err(CliError::user(format!(
            "agent {} ({}) works in no linked worktree",
            agent.id, agent.name
        )));
    };
    let path = std::path::PathBuf::from(&wt.path);
    let lost = crate::worktree::would_lose(&path, wt.branch.as_deref())?;
    if !lost.is_empty() {
        let mut e = CliError::user(format!(
            "agent {} not stopped: removing its worktree {} would lose what is below",
            agent.id, wt.path
        ));
        e.causes = lost;
        return Err(
            e.hint("commit and merge (or push) it first, or stop without --remove-worktree")
        );
    }
    if !agent.state.is_final() {
        stop(&agent.id)?;
    }
    out(&crate::worktree::remove(
        &path,
        wt.branch.as_deref(),
        delete_branch,
    )?);
    Ok(())
}

pub fn stop(id: &str) -> CliResult {
    let agent = agent_of(ask(&Request::Stop { id: id.into() })?)?;
    let (hit, last) = follow(&agent.id, Some(Duration::from_secs(10)), |a| {
        a.state.is_final()
    })?;
    match hit {
        Some(a) => {
            out(&format!("{} {}", a.id, a.state));
            Ok(())
        }
        None => Err(CliError::internal(format!(
            "agent {} did not end within 10 s (it is {})",
            agent.id,
            last.map(|a| a.state.to_string()).unwrap_or_default()
        ))),
    }
}

pub fn interrupt(id: &str) -> CliResult {
    ask(&Request::Interrupt { id: id.into() }).map(|_| ())
}

pub fn peek(id: &str, lines: u32) -> CliResult {
    match ask(&Request::Peek {
        id: id.into(),
        lines,
    })? {
        Response::Text { text } => {
            out(&text);
            Ok(())
        }
        other => Err(CliError::from_response(other)),
    }
}

/// `volee quiet [DURATION|off]`.
pub fn quiet(duration: Option<&str>) -> CliResult {
    let until_ms = match duration {
        Some("off") => None,
        other => {
            let d = match other {
                None => Duration::from_secs(3600),
                Some(text) => humantime_duration(text)?,
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            Some(now + d.as_millis() as u64)
        }
    };
    match ask(&Request::Quiet { until_ms })? {
        Response::Text { text } => {
            out(&text);
            Ok(())
        }
        other => Err(CliError::from_response(other)),
    }
}

fn humantime_duration(text: &str) -> CliResult<Duration> {
    volee_daemon::config::Config::parse(&format!("retention = {text:?}"), "DURATION")
        .map(|c| c.retention)
        .map_err(|_| {
            CliError::user(format!("{text:?} is not a duration"))
                .hint("examples: 30m, 2h, 1day, or off")
        })
}

pub fn rm(id: &str) -> CliResult {
    ask(&Request::Remove { id: id.into() }).map(|_| ())
}

pub fn prune() -> CliResult {
    match ask(&Request::Prune)? {
        Response::Text { text } => {
            out(&text);
            Ok(())
        }
        other => Err(CliError::from_response(other)),
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum StatusFormat {
    Tmux,
    Plain,
    Json,
}

pub fn status(format: StatusFormat) -> CliResult {
    let agents = agents_of(ask(&Request::List { all: true })?)?;
    let counts = volee_view::Counts::from_agents(&agents);
    // Whether `volee quiet` holds notifications back (an older daemon cannot say: not shown).
    let quiet_until = match ask(&Request::QuietState) {
        Ok(Response::Quiet { until_ms }) => until_ms,
        _ => None,
    };
    let until = quiet_until.map(volee_store::rfc3339);
    match format {
        StatusFormat::Tmux => {
            let mark = if until.is_some() {
                volee_view::QUIET_TMUX
            } else {
                ""
            };
            out(&format!("{}{mark}", volee_view::status_tmux(&counts)));
        }
        StatusFormat::Plain => match &until {
            Some(u) => out(&format!(
                "{}; quiet until {u}",
                volee_view::status_plain(&counts)
            )),
            None => out(&volee_view::status_plain(&counts)),
        },
        StatusFormat::Json => {
            let mut v = volee_view::status_json(&counts);
            v["quiet_until"] = until.map_or(serde_json::Value::Null, Into::into);
            return json(&v);
        }
    }
    Ok(())
}

pub fn daemon(foreground: bool) -> CliResult {
    let paths = paths();
    paths.ensure().map_err(|e| crate::error::path_error(&e))?;
    let config =
        Config::load(&paths.config_file()).map_err(|e| CliError::from_error(Exit::User, &e))?;
    let log = volee_daemon::logging::RotatingLog::open(paths.log_file(), config.log_max_bytes)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("VOLEE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if foreground {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let _ = tracing_subscriber::registry()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(log)
                    .with_ansi(false),
            )
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .try_init();
    } else {
        // Leave the caller's session so a closing terminal or tmux job does not take us down.
        let _ = nix::unistd::setsid();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(log)
            .with_ansi(false)
            .try_init();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    tracing::info!("daemon starting (pid {})", std::process::id());
    runtime
        .block_on(volee_daemon::daemon::run(paths, config))
        .map_err(|e| match e {
            volee_daemon::daemon::DaemonError::AlreadyRunning { .. } => {
                CliError::from_error(Exit::User, &e).hint("stop it with: volee daemon stop")
            }
            volee_daemon::daemon::DaemonError::Paths(ref p) if p.is_untrusted() => {
                CliError::from_error(Exit::Environment, &e)
                    .hint(crate::error::untrusted_path_hint(p))
            }
            other => CliError::from_error(Exit::Internal, &other),
        })
}

pub fn daemon_stop() -> CliResult {
    let paths = paths();
    match Client::connect(&paths) {
        Ok(mut client) => {
            volee_daemon::client::stop_daemon(&paths, &mut client, None);
            out("daemon stopped");
        }
        Err(
            e @ (volee_daemon::ClientError::Untrusted(_)
            | volee_daemon::ClientError::ForeignDaemon { .. }),
        ) => return Err(e.into()),
        Err(_) => out("no daemon running"),
    }
    Ok(())
}

/// `volee resume ID`: relaunch an ended agent with its harness's resume line and session id (the
/// generic profile reruns its command), in the same tmux session, under the same name.
pub fn resume(id: &str, as_json: bool, join: bool) -> CliResult {
    let old = agent_of(ask(&Request::Show { id: id.into() })?)?;
    if !old.state.is_final() {
        return Err(
            CliError::user(format!("agent {} is still running ({})", old.id, old.state))
                .hint(format!("go to it: volee attach {}", old.id)),
        );
    }
    let profile = volee_harness::profile(&old.harness).ok_or_else(|| {
        CliError::user(format!(
            "agent {} has an unknown harness {:?}",
            old.id, old.harness
        ))
    })?;
    volee_tmux::server::version()?;
    let launch = if old.harness == "generic" {
        if old.command.is_empty() {
            return Err(CliError::user(format!(
                "agent {} has no recorded command",
                old.id
            )));
        }
        crate::harness_cli::HarnessLaunch {
            command: old.command.clone(),
            version: None,
            fit: volee_protocol::ProfileFit::Generic,
            session_id: None,
            env: Vec::new(),
            hooks_extension: false,
            typed_prompt: None,
        }
    } else {
        // Aider's resume line names no session (its chat history file is the session).
        let needs_id = profile.resume.iter().any(|a| a.contains("{id}"));
        let session = match old.session_id.as_deref() {
            Some(s) => s,
            None if !needs_id => "",
            None => {
                return Err(
                    CliError::user(format!("agent {} never reported a session id", old.id))
                        .hint("start a new one: volee launch --harness …"),
                )
            }
        };
        crate::harness_cli::launch_line(
            &profile,
            &crate::harness_cli::LaunchOptions {
                name: None,
                model: None,
                worktree: None,
                prompt: None,
                extra: &[],
                resume: Some(session),
                // Joined before (its recorded command names volee's MCP server): joined again.
                join: join
                    || old
                        .command
                        .iter()
                        .any(|a| a.contains("volee-mcp-") || a.contains("mcp_servers.volee")),
            },
        )?
    };
    let (socket, session) = match &old.host {
        volee_protocol::Host::Tmux {
            socket, session, ..
        } => (socket.clone(), Some(session.clone())),
        _ => (caller_socket(None).display().to_string(), None),
    };
    // A zellij agent resumes in its zellij session.
    let zellij_session = match &old.host {
        volee_protocol::Host::Zellij { session, .. } => Some(session.clone()),
        _ => None,
    };
    let server = volee_tmux::server::TmuxServer::new(&socket);
    let session = session.filter(|s| server.has_session(s));
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    for (k, v) in launch.env {
        env.retain(|(key, _)| key != &k);
        env.push((k, v));
    }
    if let Some(wt) = &old.worktree {
        if !std::path::Path::new(&wt.path).is_dir() {
            return Err(CliError::user(format!(
                "agent {} worked in worktree {}, which is gone",
                old.id, wt.path
            ))
            .hint("start a new one: volee launch --worktree NAME …"));
        }
    }
    let cwd = if std::path::Path::new(&old.cwd).is_dir() {
        old.cwd.clone()
    } else {
        std::env::current_dir()
            .map_err(|e| CliError::from_error(Exit::User, &e))?
            .display()
            .to_string()
    };
    let req = LaunchRequest {
        harness: old.harness.clone(),
        command: launch.command,
        harness_version: launch.version,
        profile_fit: launch.fit,
        session_id: launch.session_id,
        hooks_extension: launch.hooks_extension,
        typed_prompt: launch.typed_prompt,
        cwd,
        name: Some(old.name.clone()),
        env,
        tmux_socket: socket,
        tmux_session: session,
        caller_pane: None,
        zellij_session,
    };
    let agent = agent_of(ask(&Request::Launch(req))?)?;
    if as_json {
        json(&agent)
    } else {
        out(&agent.id);
        Ok(())
    }
}
