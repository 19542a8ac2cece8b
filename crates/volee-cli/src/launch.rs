//! `volee launch` and `volee resume`: what to run and where, checked, then planned by
//! [`crate::launch_plan`] and sent to the daemon.

use std::path::PathBuf;

use volee_daemon::Config;
use volee_protocol::{Amount, Host, Request};

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
    /// Working directory of the agent (default: yours; with --on, the machine's HOME, and a
    /// relative DIR is taken from there).
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
    /// Start it on this machine (`volee machine add`), through the daemon's connection to it: the
    /// machine's own environment, PATH and profiles, nothing of yours but these arguments;
    /// prints MACHINE:ID.
    #[arg(long, value_name = "MACHINE")]
    on: Option<String>,
    /// A variable for the agent's environment, over yours (repeatable); with --on, the only
    /// ones sent.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = env_pair)]
    env: Vec<(String, String)>,
    /// A budget in tokens (`200k`, `1.5M`; input + output + cache writes as its harness
    /// records them) or money (`5usd`, `$2.50`; at the price table's prices for its model): at
    /// 80 % you are told, at 100 % volee interrupts its turn and holds it until
    /// `volee budget ID +AMOUNT|off` (default: config.toml's `[budgets]` for its harness).
    #[arg(long, value_name = "AMOUNT", value_parser = budget_arg)]
    budget: Option<Amount>,
    /// First prompt, for harnesses that take one.
    prompt: Option<String>,
    /// The command to run (generic profile).
    #[arg(last = true)]
    command: Vec<String>,
}

/// Print the launched agent: its id (`MACHINE:ID` on a machine), or the agent object.
pub(crate) fn print_agent(agent: &volee_protocol::AgentView, as_json: bool) -> CliResult {
    if as_json {
        json(agent)
    } else {
        out(&volee_view::address_text(agent, 64));
        Ok(())
    }
}

/// `--env NAME=VALUE`: NAME is a shell variable name (letters, digits, `_`, not starting with a
/// digit), so every shell and `env` take it as one.
fn env_pair(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "{name:?} is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// The arguments of `volee launch` on the machine for a `launch --on`: every option the user
/// gave but `--on` (as `--option=VALUE`, so no value is read as an option there), `--json` for an
/// answer to read, the prompt, then the command after `--`. No directory of ours goes along
/// unless `--cwd` named one.
fn remote_args(args: &LaunchArgs) -> CliResult<Vec<String>> {
    let text = |flag: &str, path: &Option<PathBuf>| -> CliResult<Option<String>> {
        path.as_ref()
            .map(|p| {
                p.to_str()
                    .map(|t| format!("--{flag}={t}"))
                    .ok_or_else(|| CliError::user(format!("--{flag} {} is not UTF-8", p.display())))
            })
            .transpose()
    };
    let mut out = vec!["launch".to_owned()];
    for (flag, value) in [
        ("harness", &args.harness),
        ("host", &args.host),
        ("name", &args.name),
        ("model", &args.model),
        ("worktree", &args.worktree),
    ] {
        if let Some(v) = value {
            out.push(format!("--{flag}={v}"));
        }
    }
    out.extend(text("cwd", &args.cwd)?);
    out.extend(text("socket", &args.socket)?);
    if args.join {
        out.push("--join".into());
    }
    if let Some(limit) = args.budget {
        out.push(format!("--budget={}", limit.as_arg()));
    }
    for (name, value) in &args.env {
        out.push(format!("--env={name}={value}"));
    }
    out.push("--json".into());
    out.extend(args.prompt.clone());
    if !args.command.is_empty() {
        out.push("--".into());
        out.extend(args.command.iter().cloned());
    }
    Ok(out)
}

/// `volee launch --on MACHINE …`: `volee launch` run there; its agent printed as ours.
fn launch_on(machine: &str, args: &LaunchArgs) -> CliResult {
    crate::machine_cmd::saved(machine)?;
    let stdout = crate::on_machine::run(machine, remote_args(args)?)?;
    let agent = crate::on_machine::remote_agent(machine, &stdout)?;
    print_agent(&agent, args.json)
}

/// `--host`: (tmux session, zellij session); neither means the caller's tmux.
pub(crate) fn host_of(host: Option<&str>) -> CliResult<(Option<String>, Option<String>)> {
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

/// `--budget`: tokens or money.
fn budget_arg(text: &str) -> Result<Amount, String> {
    match Amount::parse(text)? {
        a if a.is_zero() => Err("a budget of nothing would stop it before it starts".into()),
        a => Ok(a),
    }
}

/// A budget `harness` can be held to: its profile must name a source of usage volee reads, and
/// volee's own agent (on Ollama, priced at nothing) counts tokens.
fn check_budget(profile: &volee_harness::Profile, limit: Amount) -> CliResult {
    if profile.usage == volee_harness::UsageSource::Unknown {
        return Err(error::budget_unkept(profile, limit));
    }
    if let (Amount::Usd(_), "volee") = (limit, profile.name) {
        return Err(error::budget_in_money_for_ollama());
    }
    Ok(())
}

pub fn launch(args: LaunchArgs) -> CliResult {
    if let Some(machine) = &args.on {
        return launch_on(machine, &args);
    }
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
    let config = Config::load(&paths().config_file())?;
    let budget = args
        .budget
        .or_else(|| config.budgets.get(&harness).copied());
    if let Some(limit) = budget {
        check_budget(&profile, limit)?;
    }
    // volee's own agent keeps to it itself, before each model request.
    let mut extra = args.command.clone();
    if let (Some(Amount::Tokens(tokens)), "volee") = (budget, harness.as_str()) {
        extra.extend(["--budget".to_string(), tokens.to_string()]);
    }
    let line = crate::launch_plan::line(if harness == "generic" {
        What::Command(args.command)
    } else {
        What::Harness(
            &profile,
            HarnessOptions {
                name: args.name.as_deref(),
                model: args.model.as_deref(),
                prompt: args.prompt.as_deref(),
                extra: &extra,
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
    let mut req = crate::launch_plan::request(
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
        with_pairs(crate::caller::env(), &args.env),
    );
    match budget {
        Some(Amount::Tokens(n)) => req.budget = Some(n),
        Some(Amount::Usd(c)) => req.budget_usd = Some(c),
        None => {}
    }
    let agent = match ask(&Request::Launch(Box::new(req))).and_then(agent_of) {
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

/// `env` with `pairs` over it (`--env`; the launch line's own variables still go over both).
fn with_pairs(mut env: Vec<(String, String)>, pairs: &[(String, String)]) -> Vec<(String, String)> {
    for (name, value) in pairs {
        env.retain(|(k, _)| k != name);
        env.push((name.clone(), value.clone()));
    }
    env
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
    // A session live right now is not resumed twice (a machine's agents have that machine's
    // sessions, not these).
    let live = crate::ask::agents_of(ask(&Request::List { all: false })?)?;
    if let Some(agent) = live.iter().find(|a| {
        a.machine.is_none() && a.session_id.as_deref() == Some(session_id) && !a.state.is_final()
    }) {
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
    agent_of(ask(&Request::Launch(Box::new(req)))?)
}

/// The line that resumes ended agent `old`: its profile's resume line with its session id (the
/// generic profile: its command again), joined to volee's MCP server again when it was
/// (`volee resume`, `volee restore`).
pub(crate) fn resume_line(
    old: &volee_protocol::AgentView,
    join: bool,
) -> CliResult<crate::launch_plan::Line> {
    let profile = volee_harness::profile(&old.harness).ok_or_else(|| {
        CliError::user(format!(
            "agent {} has an unknown harness {:?}",
            old.id, old.harness
        ))
    })?;
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
            None => return Err(error::no_session_id(old)),
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
    crate::launch_plan::line(what)
}

/// `volee resume ID`: relaunch an ended agent with its harness's resume line and session id (the
/// generic profile reruns its command), in the same tmux session, under the same name.
pub fn resume(id: &str, as_json: bool, join: bool) -> CliResult {
    let old = show(id)?;
    if old.machine.is_some() {
        return Err(error::resume_on_machine(&old));
    }
    if !old.state.is_final() {
        return Err(error::still_running(&old));
    }
    volee_tmux::server::version()?;
    let line = resume_line(&old, join)?;
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
    print_agent(&agent_of(ask(&Request::Launch(Box::new(req)))?)?, as_json)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        launch: LaunchArgs,
    }

    fn parse(argv: &[&str]) -> LaunchArgs {
        Cli::try_parse_from(std::iter::once("launch").chain(argv.iter().copied()))
            .map(|c| c.launch)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
    }

    #[test]
    fn a_remote_launch_forwards_every_option_but_on() {
        let mut argv: Vec<&str> = "--on box --harness claude --name=-odd --worktree wt \
                                   --env A=1 --env B=x=y --join --host zellij:work"
            .split_whitespace()
            .collect();
        argv.push("fix it");
        let args = parse(&argv);
        assert_eq!(
            remote_args(&args).unwrap(),
            [
                "launch",
                "--harness=claude",
                "--host=zellij:work",
                "--name=-odd",
                "--worktree=wt",
                "--join",
                "--env=A=1",
                "--env=B=x=y",
                "--json",
                "fix it"
            ]
        );
        // No directory of ours unless --cwd named one; the command after --.
        let args = parse(&["--on", "box", "--cwd", "src/app", "--", "sh", "-c", "x"]);
        assert_eq!(
            remote_args(&args).unwrap(),
            ["launch", "--cwd=src/app", "--json", "--", "sh", "-c", "x"]
        );
        // The remote command line parses back to the same launch.
        let back = parse(
            &remote_args(&args).unwrap()[1..]
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(back.cwd, Some(PathBuf::from("src/app")));
        assert_eq!(back.command, ["sh", "-c", "x"]);
        assert!(back.on.is_none() && back.json);
    }

    #[test]
    fn env_pairs_are_names_and_values_and_go_over_the_callers() {
        assert_eq!(env_pair("A_1=x=y"), Ok(("A_1".into(), "x=y".into())));
        assert_eq!(env_pair("_=").map(|p| p.1), Ok(String::new()));
        for bad in ["A", "=x", "1A=x", "A-B=x", "A B=x"] {
            assert!(env_pair(bad).is_err(), "{bad}");
        }
        let env = with_pairs(
            vec![("A".into(), "old".into()), ("B".into(), "b".into())],
            &[("A".into(), "new".into()), ("C".into(), "c".into())],
        );
        assert_eq!(
            env,
            [("B", "b"), ("A", "new"), ("C", "c")].map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }
}
