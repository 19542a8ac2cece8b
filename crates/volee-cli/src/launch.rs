//! `volee launch` and `volee resume`: what to run and where, checked, then planned by
//! [`crate::launch_plan`] and sent to the daemon.

use std::path::PathBuf;

use volee_daemon::Config;
use volee_protocol::{Host, Request};

use crate::ask::{agent_of, ask, paths, show};
use crate::error::{self, CliError, CliResult, Exit};
use crate::launch_plan::{HarnessOptions, Place, What};
use crate::output::{json, out};

/// `volee launch`.
#[derive(clap::Args)]
pub struct LaunchArgs {
    /// Harness profile (default: `generic` when a command is given after --).
    #[arg(long)]
    harness: Option<String>,
    /// Where: `tmux`, `tmux:SESSION`, `zellij` or `zellij:SESSION` (default: your tmux session,
    /// else session `volee`).
    #[arg(long, value_name = "tmux[:SESSION]|zellij[:SESSION]")]
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
    /// Print the agent object as JSON instead of its id.
    #[arg(long)]
    json: bool,
    /// First prompt, for harnesses that take one.
    prompt: Option<String>,
    /// The command to run (generic profile).
    #[arg(last = true)]
    command: Vec<String>,
}

/// Print the launched agent: its id, or the agent object.
fn print_agent(agent: &volee_protocol::AgentView, as_json: bool) -> CliResult {
    if as_json {
        json(agent)
    } else {
        out(&agent.id);
        Ok(())
    }
}

/// `--host`: (tmux session, zellij session); neither means the caller's tmux.
fn host_of(host: Option<&str>) -> CliResult<(Option<String>, Option<String>)> {
    Ok(match host {
        None | Some("tmux") => (None, None),
        Some(h) if h.starts_with("tmux:") => (Some(h["tmux:".len()..].to_string()), None),
        Some("zellij") => match std::env::var("ZELLIJ_SESSION_NAME") {
            Ok(s) if !s.is_empty() => (None, Some(s)),
            _ => return Err(error::not_inside_zellij()),
        },
        Some(h) if h.starts_with("zellij:") && h.len() > "zellij:".len() => {
            (None, Some(h["zellij:".len()..].to_string()))
        }
        Some(h) => return Err(error::unknown_host(h)),
    })
}

pub fn launch(args: LaunchArgs) -> CliResult {
    let harness = match (&args.harness, args.command.is_empty()) {
        (Some(h), _) => h.clone(),
        (None, false) => "generic".to_string(),
        (None, true) => Config::load(&paths().config_file())?
            .default_harness
            .ok_or_else(error::nothing_to_launch)?,
    };
    let Some(profile) = volee_harness::profile(&harness) else {
        return Err(error::unknown_harness(&harness));
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
    let (tmux_session, zellij_session) = host_of(args.host.as_deref())?;
    if zellij_session.is_none() {
        volee_tmux::server::version()?;
    }
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| CliError::from_error(Exit::User, &e))?,
    };
    let cwd = cwd.canonicalize().map_err(|e| error::bad_cwd(&cwd, &e))?;
    if !cwd.is_dir() {
        return Err(CliError::user(format!(
            "{} is not a directory",
            cwd.display()
        )));
    }
    let socket = crate::caller::tmux_socket(args.socket);
    let caller_pane = crate::caller::inside_server(&socket)
        .then(|| std::env::var("TMUX_PANE").ok())
        .flatten();
    let line = crate::launch_plan::line(if harness == "generic" {
        What::Command(args.command)
    } else {
        What::Harness(
            &profile,
            HarnessOptions {
                name: args.name.as_deref(),
                model: args.model.as_deref(),
                prompt: args.prompt.as_deref(),
                extra: &args.command,
                resume: None,
                join: args.join,
            },
        )
    })?;
    // The worktree last, once everything else checked out: a failed launch removes it again.
    let made = match &args.worktree {
        Some(name) => Some(crate::worktree::create(&cwd, name)?),
        None => None,
    };
    let cwd = made.as_ref().map(|m| m.cwd.clone()).unwrap_or(cwd);
    let req = crate::launch_plan::request(
        harness,
        line,
        Place {
            cwd: cwd.display().to_string(),
            name: args.name,
            tmux_socket: socket.display().to_string(),
            tmux_session,
            caller_pane,
            zellij_session,
        },
        crate::caller::env(),
    );
    let agent = match ask(&Request::Launch(req)).and_then(agent_of) {
        Ok(agent) => agent,
        Err(e) => {
            if let Some(m) = &made {
                let _ = crate::worktree::remove(&m.path, Some(&m.branch), true);
            }
            return Err(e);
        }
    };
    print_agent(&agent, args.json)
}

/// `volee sessions resume SID`: a past session of a harness, resumed with its profile's resume
/// line and native id, in the session's project directory, in a new supervised pane.
pub fn resume_session(
    harness: &str,
    session_id: &str,
    project: &std::path::Path,
    host: Option<&str>,
    name: Option<String>,
    as_json: bool,
) -> CliResult {
    let agent = resume_session_beside(harness, session_id, project, host, name, None)?;
    print_agent(&agent, as_json)
}

/// [`resume_session`]'s launch; `beside` is (tmux socket, pane) the new pane goes next to when
/// the caller is not in a pane (the browser in a popup), else the caller's own pane.
pub fn resume_session_beside(
    harness: &str,
    session_id: &str,
    project: &std::path::Path,
    host: Option<&str>,
    name: Option<String>,
    beside: Option<(&std::path::Path, &str)>,
) -> CliResult<volee_protocol::AgentView> {
    let profile = volee_harness::profile(harness).ok_or_else(|| error::unknown_harness(harness))?;
    // A resume line without the id (Aider's `--restore-chat-history`) resumes the project's
    // history: the session is its project directory, where the line runs.
    if profile.resume.is_empty() {
        return Err(CliError::user(format!(
            "{} resumes no session",
            profile.display_name
        )));
    }
    // A session live right now is not resumed twice.
    let live = crate::ask::agents_of(ask(&Request::List { all: false })?)?;
    if let Some(agent) = live
        .iter()
        .find(|a| a.session_id.as_deref() == Some(session_id) && !a.state.is_final())
    {
        return Err(CliError::user(format!(
            "session {session_id} is live in agent {} ({}): volee attach {}",
            agent.id, agent.name, agent.id
        )));
    }
    let (tmux_session, zellij_session) = host_of(host)?;
    if zellij_session.is_none() {
        volee_tmux::server::version()?;
    }
    if !project.is_dir() {
        return Err(CliError::user(format!(
            "the session's project directory {} is gone",
            project.display()
        )));
    }
    let (socket, caller_pane) = match beside {
        Some((socket, pane)) => (socket.to_path_buf(), Some(pane.to_owned())),
        None => {
            let socket = crate::caller::tmux_socket(None);
            let pane = crate::caller::inside_server(&socket)
                .then(|| std::env::var("TMUX_PANE").ok())
                .flatten();
            (socket, pane)
        }
    };
    let line = crate::launch_plan::line(What::Harness(
        &profile,
        HarnessOptions {
            name: name.as_deref(),
            resume: Some(session_id),
            ..HarnessOptions::default()
        },
    ))?;
    let req = crate::launch_plan::request(
        harness.to_owned(),
        line,
        Place {
            cwd: project.display().to_string(),
            name,
            tmux_socket: socket.display().to_string(),
            tmux_session,
            caller_pane,
            zellij_session,
        },
        {
            // From a popup: the popup's TMUX is not the new pane's.
            let mut env = crate::caller::env();
            if beside.is_some() {
                env.retain(|(k, _)| k != "TMUX" && k != "TMUX_PANE");
            }
            env
        },
    );
    agent_of(ask(&Request::Launch(req))?)
}

/// `volee resume ID`: relaunch an ended agent with its harness's resume line and session id (the
/// generic profile reruns its command), in the same tmux session, under the same name.
pub fn resume(id: &str, as_json: bool, join: bool) -> CliResult {
    let old = show(id)?;
    if !old.state.is_final() {
        return Err(error::still_running(&old));
    }
    let profile = volee_harness::profile(&old.harness).ok_or_else(|| {
        CliError::user(format!(
            "agent {} has an unknown harness {:?}",
            old.id, old.harness
        ))
    })?;
    volee_tmux::server::version()?;
    let what = if old.harness == "generic" {
        if old.command.is_empty() {
            return Err(CliError::user(format!(
                "agent {} has no recorded command",
                old.id
            )));
        }
        What::Command(old.command.clone())
    } else {
        // Aider's resume line names no session (its chat history file is the session).
        let needs_id = profile.resume.iter().any(|a| a.contains("{id}"));
        let session = match old.session_id.as_deref() {
            Some(s) => s,
            None if !needs_id => "",
            None => return Err(error::no_session_id(&old)),
        };
        What::Harness(
            &profile,
            HarnessOptions {
                resume: Some(session),
                // Joined before (its recorded command names volee's MCP server): joined again.
                join: join
                    || old
                        .command
                        .iter()
                        .any(|a| a.contains("volee-mcp-") || a.contains("mcp_servers.volee")),
                ..HarnessOptions::default()
            },
        )
    };
    let line = crate::launch_plan::line(what)?;
    let (socket, session) = match &old.host {
        Host::Tmux {
            socket, session, ..
        } => (socket.clone(), Some(session.clone())),
        _ => (crate::caller::tmux_socket(None).display().to_string(), None),
    };
    // A zellij agent resumes in its zellij session.
    let zellij_session = match &old.host {
        Host::Zellij { session, .. } => Some(session.clone()),
        _ => None,
    };
    let server = volee_tmux::server::TmuxServer::new(&socket);
    let session = session.filter(|s| server.has_session(s));
    if let Some(wt) = &old.worktree {
        if !std::path::Path::new(&wt.path).is_dir() {
            return Err(error::worktree_gone(&old, &wt.path));
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
    let req = crate::launch_plan::request(
        old.harness.clone(),
        line,
        Place {
            cwd,
            name: Some(old.name.clone()),
            tmux_socket: socket,
            tmux_session: session,
            caller_pane: None,
            zellij_session,
        },
        crate::caller::env(),
    );
    print_agent(&agent_of(ask(&Request::Launch(req))?)?, as_json)
}
