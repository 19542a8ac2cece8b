//! `volee restore [ID…] [--all] [--dry-run] [--json]` (issue 22): agents stopped because their
//! tmux server went away (killed, crashed, a reboot) come back into their places — the same tmux
//! session and window name (made when missing, windows in their old order, the layout applied
//! again once every pane of a window is back), the same cwd or worktree, the same name and volee
//! id — resumed with their profile's resume line and their own session id (`volee resume` is
//! unchanged: it makes a new agent).

use std::collections::BTreeMap;

use serde::Serialize;
use volee_protocol::{AgentView, Host, Request, WindowPlace};

use crate::ask::{agent_of, agents_of, ask, show};
use crate::error::{CliError, CliResult};
use crate::launch_plan::Place;
use crate::output::{json, out};

/// What restore does with one agent.
#[derive(Debug, Serialize)]
struct Step {
    id: String,
    name: String,
    harness: String,
    /// `restore`, `skip`.
    action: &'static str,
    /// Why it is skipped, or what restoring it means (Aider: its chat history).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    session: String,
    window: String,
    cwd: String,
    /// `--into-resurrect`: the pane tmux-resurrect restored in its place, which it runs in.
    #[serde(skip_serializing_if = "Option::is_none")]
    into_pane: Option<String>,
    /// After the restore: where it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    restored: Option<AgentView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// What a harness's restore is, honestly: None when it cannot be restored here.
fn what_restore_means(agent: &AgentView) -> Result<Option<String>, String> {
    let Some(profile) = volee_harness::profile(&agent.harness) else {
        return Err(format!("its harness {:?} is unknown", agent.harness));
    };
    if agent.harness == "generic" {
        return if agent.command.is_empty() {
            Err("no command was recorded".into())
        } else {
            Ok(Some(
                "runs its command again (a plain command keeps no conversation)".into(),
            ))
        };
    }
    if profile.resume.is_empty() {
        return Err(format!(
            "{} has no resume line: it cannot be restored here",
            profile.display_name
        ));
    }
    let needs_id = profile.resume.iter().any(|a| a.contains("{id}"));
    if !needs_id {
        return Ok(Some(format!(
            "{} restores the project's chat history, not its exact session",
            profile.display_name
        )));
    }
    if agent.session_id.is_none() {
        return Err("its session id was never learnt".into());
    }
    Ok(None)
}

/// Where restored agents go: each into its own place in tmux (the default), or all into one
/// session named by `--host` (`tmux:S`; `zellij[:S]`, a new tab each — the way back for a
/// killed zellij session's agents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Own,
    Tmux(String),
    Zellij(String),
}

impl Target {
    /// `--host`: `tmux`, `tmux:SESSION`, `zellij` (the caller's zellij session) or
    /// `zellij:SESSION`.
    pub fn from_host(host: Option<&str>) -> CliResult<Target> {
        Ok(match crate::launch::host_of(host)? {
            (Some(tmux), _) => Target::Tmux(tmux),
            (None, Some(zellij)) => Target::Zellij(zellij),
            (None, None) => Target::Own,
        })
    }
}

fn plan(agent: &AgentView, live: &[AgentView], target: &Target) -> Step {
    let (session, window) = match (&agent.host, &agent.placement, target) {
        (_, _, Target::Zellij(s)) => (s.clone(), agent.name.clone()),
        (_, Some(p), Target::Tmux(s)) => (s.clone(), p.window_name.clone()),
        (_, None, Target::Tmux(s)) => (s.clone(), agent.name.clone()),
        (Host::Tmux { session, .. }, Some(p), Target::Own) => {
            (session.clone(), p.window_name.clone())
        }
        (Host::Tmux { session, .. }, None, Target::Own) => (session.clone(), agent.name.clone()),
        _ => (String::new(), agent.name.clone()),
    };
    // Its cwd (inside its worktree when it had one).
    let cwd = agent.cwd.clone();
    let mut step = Step {
        id: agent.id.clone(),
        name: agent.name.clone(),
        harness: agent.harness.clone(),
        action: "restore",
        note: None,
        session,
        window,
        cwd: cwd.clone(),
        into_pane: None,
        restored: None,
        error: None,
    };
    let skip = |mut step: Step, why: String| {
        step.action = "skip";
        step.note = Some(why);
        step
    };
    match (&agent.host, target) {
        (Host::Tmux { .. }, _) | (Host::Zellij { .. }, Target::Zellij(_) | Target::Tmux(_)) => {}
        (Host::Zellij { session, .. }, Target::Own) => {
            return skip(
                step,
                format!(
                    "it was in zellij session {session}: restore it into a tab of a zellij \
                     session with --host zellij[:SESSION]"
                ),
            )
        }
        _ => return skip(step, "it was not in a multiplexer pane".into()),
    }
    match what_restore_means(agent) {
        Err(why) => return skip(step, why),
        Ok(note) => step.note = note,
    }
    if let Some(other) = live.iter().find(|l| {
        l.machine.is_none()
            && !l.state.is_final()
            && agent.session_id.is_some()
            && l.session_id == agent.session_id
    }) {
        return skip(
            step,
            format!(
                "its session is live in agent {} ({}): not resumed twice",
                other.id, other.name
            ),
        );
    }
    if !std::path::Path::new(&cwd).is_dir() {
        return skip(step, format!("its directory {cwd} is gone"));
    }
    step
}

/// Windows in their old order, panes in theirs.
fn order_key(agent: &AgentView) -> (String, u32, u32, String) {
    let session = match &agent.host {
        Host::Tmux { session, .. } => session.clone(),
        _ => String::new(),
    };
    let (w, p) = agent
        .placement
        .as_ref()
        .map_or((u32::MAX, u32::MAX), |p| (p.window_index, p.pane_index));
    (session, w, p, agent.created_at.clone())
}

/// `volee restore`; `into_resurrect` (`--into-resurrect`, tmux-resurrect's post-restore-all
/// hook): only the caller's tmux server's agents, each into the pane resurrect restored in its
/// place when there is one.
pub fn restore(
    ids: &[String],
    all: bool,
    dry_run: bool,
    as_json: bool,
    into_resurrect: bool,
) -> CliResult {
    restore_to(ids, all, dry_run, as_json, into_resurrect, None)
}

/// `volee restore … [--host tmux[:S]|zellij[:S]]`.
pub fn restore_to(
    ids: &[String],
    all: bool,
    dry_run: bool,
    as_json: bool,
    into_resurrect: bool,
    host: Option<&str>,
) -> CliResult {
    let target = &Target::from_host(host)?;
    let everyone = agents_of(ask(&Request::List { all: true })?)?;
    let mut chosen: Vec<AgentView> = if all {
        everyone
            .iter()
            .filter(|a| a.restorable && a.machine.is_none())
            .cloned()
            .collect()
    } else if ids.is_empty() {
        let n = everyone.iter().filter(|a| a.restorable).count();
        return Err(CliError::user(format!(
            "name the agents to restore, or --all ({n} can be restored: volee ls --all)"
        )));
    } else {
        let mut picked = Vec::new();
        for id in ids {
            let agent = show(id)?;
            if !agent.restorable {
                return Err(CliError::user(format!(
                    "agent {} ({}) is not restorable: it is {} ({})",
                    agent.id, agent.name, agent.state, agent.evidence
                )));
            }
            picked.push(agent);
        }
        picked
    };
    chosen.sort_by_key(order_key);
    chosen.dedup_by(|a, b| a.id == b.id);
    // After a tmux-resurrect restore: this server's agents, in the panes it restored.
    let resurrect_server = into_resurrect.then(|| {
        let socket = crate::caller::tmux_socket(None);
        chosen.retain(|a| crate::resurrect::on_server(a, &socket));
        volee_tmux::server::TmuxServer::new(&socket)
    });
    let live: Vec<AgentView> = everyone
        .into_iter()
        .filter(|a| !a.state.is_final())
        .collect();
    let mut steps: Vec<Step> = chosen.iter().map(|a| plan(a, &live, target)).collect();
    if let Some(server) = &resurrect_server {
        let rows = crate::resurrect::panes(server);
        let shell = crate::resurrect::default_shell(server);
        let save = crate::resurrect::save_dir(server)
            .and_then(|d| std::fs::read_to_string(d.join("last")).ok())
            .unwrap_or_default();
        let saved = crate::resurrect::saved_programs(&save);
        let takeable = crate::resurrect::Takeable {
            shell: shell.as_deref(),
            saved: &saved,
        };
        let restoring: Vec<AgentView> = chosen
            .iter()
            .zip(&steps)
            .filter(|(_, s)| s.action == "restore")
            .map(|(a, _)| a.clone())
            .collect();
        let panes = crate::resurrect::pane_for_each(&rows, &restoring, &takeable);
        for (step, pane) in steps
            .iter_mut()
            .filter(|s| s.action == "restore")
            .zip(panes)
        {
            step.into_pane = pane;
        }
    }
    if !dry_run {
        if steps.iter().any(|s| s.action == "restore") && !matches!(target, Target::Zellij(_)) {
            volee_tmux::server::version()?;
        }
        // The layout each window had, applied once all its panes are back.
        let mut layouts: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
        for (agent, step) in chosen.iter().zip(steps.iter_mut()) {
            if step.action != "restore" {
                continue;
            }
            match restore_one(agent, step, target) {
                Ok(view) => {
                    if let (Host::Tmux { socket, window, .. }, Some(p)) =
                        (&view.host, &agent.placement)
                    {
                        layouts.insert(
                            (socket.clone(), window.clone()),
                            (socket.clone(), p.window_layout.clone()),
                        );
                    }
                    step.restored = Some(view);
                }
                Err(e) => step.error = Some(e.message),
            }
        }
        for ((_, window), (socket, layout)) in layouts {
            // A layout from another pane count is refused by tmux: the panes keep tmux's own.
            let _ = volee_tmux::server::TmuxServer::new(&socket).run(&[
                "select-layout",
                "-t",
                &window,
                &layout,
            ]);
        }
    }
    if as_json {
        return json(&steps);
    }
    if steps.is_empty() {
        out("nothing to restore");
        return Ok(());
    }
    let mut text = String::new();
    for s in &steps {
        let mut place = format!("{}:{}", s.session, s.window);
        if let Some(pane) = &s.into_pane {
            place.push_str(&format!(", in tmux-resurrect's pane {pane}"));
        }
        let line = match (s.action, dry_run, &s.restored, &s.error) {
            ("skip", _, _, _) => format!(
                "skip     {} ({}): {}",
                s.id,
                s.name,
                s.note.as_deref().unwrap_or("")
            ),
            (_, true, _, _) => format!(
                "restore  {} ({}, {}) into {place} in {}{}",
                s.id,
                s.name,
                s.harness,
                s.cwd,
                s.note
                    .as_deref()
                    .map(|n| format!(" — {n}"))
                    .unwrap_or_default()
            ),
            (_, false, Some(_), _) => format!(
                "restored {} ({}, {}) into {place}{}",
                s.id,
                s.name,
                s.harness,
                s.note
                    .as_deref()
                    .map(|n| format!(" — {n}"))
                    .unwrap_or_default()
            ),
            (_, false, _, e) => format!(
                "failed   {} ({}): {}",
                s.id,
                s.name,
                e.as_deref().unwrap_or("unknown error")
            ),
        };
        text.push_str(&volee_view::text::plain_text(&line, 400));
        text.push('\n');
    }
    out(text.trim_end());
    if steps.iter().any(|s| s.error.is_some()) {
        return Err(CliError::env(
            "some agents could not be restored (see above)",
        ));
    }
    Ok(())
}

/// `volee up`: agents a lost tmux server left restorable are counted and, as `[restore] on_up`
/// says, asked about (on a terminal), restored, or only told of — with the command that
/// restores them, so `up` without a terminal (`run-shell`, a script) never waits for an answer.
pub fn on_up(agents: &[AgentView], terminal: bool) -> CliResult {
    use volee_daemon::config::{Config, OnUp};
    let n = agents
        .iter()
        .filter(|a| a.restorable && a.machine.is_none())
        .count();
    if n == 0 {
        return Ok(());
    }
    // A config volee cannot read asks (never restores unasked).
    let on_up = match Config::load(&crate::ask::paths().config_file()) {
        Ok(c) => c.restore.on_up,
        Err(e) => {
            let mut said = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                said = format!("{said}: {c}");
                cause = c.source();
            }
            eprintln!("warning: {said}");
            OnUp::Ask
        }
    };
    let them = if n == 1 {
        "1 agent whose tmux server went away".to_string()
    } else {
        format!("{n} agents whose tmux server went away")
    };
    let hint = format!(
        "{them} can be restored into their places with their conversations: volee restore --all \
         (the plan: volee restore --all --dry-run)"
    );
    match on_up {
        OnUp::Always => restore(&[], true, false, false, false),
        OnUp::Ask if terminal => {
            if crate::caller::confirm(&format!("Restore {them} now?"))? {
                restore(&[], true, false, false, false)
            } else {
                out("not restored; later: volee restore --all");
                Ok(())
            }
        }
        OnUp::Ask | OnUp::Never => {
            out(&hint);
            Ok(())
        }
    }
}

/// Relaunch one agent into its place, keeping its id.
fn restore_one(agent: &AgentView, step: &Step, target: &Target) -> CliResult<AgentView> {
    let line = crate::launch::resume_line(agent, false)?;
    let socket = match &agent.host {
        Host::Tmux { socket, .. } => socket.clone(),
        _ => crate::caller::tmux_socket(None).display().to_string(),
    };
    crate::caller::ensure_default_socket_dir(std::path::Path::new(&socket));
    let mut req = crate::launch_plan::request(
        agent.harness.clone(),
        line,
        Place {
            cwd: step.cwd.clone(),
            name: Some(agent.name.clone()),
            tmux_socket: socket,
            tmux_session: (!matches!(target, Target::Zellij(_))).then(|| step.session.clone()),
            caller_pane: None,
            zellij_session: match target {
                Target::Zellij(s) => Some(s.clone()),
                _ => None,
            },
        },
        {
            // As `volee resume` does: the caller's environment, minus where the caller is.
            let mut env = crate::caller::env();
            env.retain(|(k, _)| k != "TMUX" && k != "TMUX_PANE");
            env
        },
    );
    req.restore = Some(agent.id.clone());
    req.window = (!matches!(target, Target::Zellij(_))).then(|| WindowPlace {
        name: step.window.clone(),
        index: agent.placement.as_ref().map(|p| p.window_index),
        pane: step.into_pane.clone(),
    });
    agent_of(ask(&Request::Launch(Box::new(req)))?)
}
