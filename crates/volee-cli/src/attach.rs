//! `volee attach ID`: bring this terminal to the agent's pane. In tmux: from inside its server,
//! switch this client; from a plain shell, attach. In zellij (through `volee_zellij`): from
//! inside its session, focus the pane; from outside zellij, attach to the session (its tab
//! carries the agent's name and id). `volee attach MACHINE:ID`: `volee attach ID` on the machine,
//! in this terminal, over the daemon's kept ssh connection to it (never a second one).

use std::os::unix::process::CommandExt;
use std::path::Path;

use volee_daemon::machines::ssh::SshOptions;
use volee_daemon::machines::Machine;
use volee_protocol::{AgentView, Host};
use volee_tmux::server::TmuxServer;

use crate::caller::{inside_server, stdin_is_tty};
use crate::error::{self, CliError, CliResult, Exit};

pub fn attach(id: &str) -> CliResult {
    // `M:ID` with M a saved machine is that machine's agent; otherwise the whole text is a local
    // id or name (agents named before names lost `:` keep theirs).
    if let Some((machine, _)) = id.split_once(':') {
        if let Some(m) = crate::machine_cmd::find_saved(machine)? {
            return attach_remote(&m, id);
        }
    }
    let agent = crate::ask::show(id)?;
    match &agent.host {
        Host::Zellij { session, pane, .. } => attach_zellij(&agent, session, pane),
        Host::Tmux { socket, pane, .. } => attach_tmux(&agent, socket, pane),
        _ => Err(CliError::user(format!(
            "agent {} is not in a tmux pane",
            agent.id
        ))),
    }
}

/// Is `id` an agent id volee can put into a remote shell line as it is (`[A-Za-z0-9_-]{1,64}`)?
pub(crate) fn is_plain_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `volee attach MACHINE:ID`: the agent as the daemon's mirror knows it (an id, a name or a
/// prefix there), then `ssh -t` over the daemon's ControlMaster running `volee attach ID` on the
/// machine, exec'd so this terminal is the user's there.
fn attach_remote(machine: &Machine, query: &str) -> CliResult {
    let agent = crate::ask::show(query)?;
    // The id goes into a shell line on the machine: only one that is plainly an id.
    if !is_plain_id(&agent.id) {
        return Err(CliError::internal(format!(
            "machine {} named agent {:?}, which is not an id volee would make",
            machine.name,
            volee_view::plain_text(&agent.id, 80)
        )));
    }
    let control = crate::ask::paths().ssh_control(&machine.name);
    if !agent.reachable || !control.exists() {
        return Err(error::machine_not_connected(&machine.name));
    }
    let args = SshOptions::from_process_env().over_master_args(
        machine,
        &control,
        true,
        &format!("volee attach {}", agent.id),
    );
    if !stdin_is_tty() {
        let line: Vec<String> = std::iter::once("ssh".to_owned())
            .chain(
                args.iter()
                    .map(|a| volee_view::sh_quote(&a.to_string_lossy())),
            )
            .collect();
        return Err(error::needs_terminal(&line.join(" ")));
    }
    let err = std::process::Command::new("ssh").args(&args).exec();
    Err(error::ssh_missing(
        &volee_daemon::machines::ssh::SshMissing(err),
    ))
}

fn attach_tmux(agent: &AgentView, socket: &str, pane: &str) -> CliResult {
    volee_tmux::server::version()?;
    let server = TmuxServer::new(socket);
    let pane_exists = server
        .run(&["display-message", "-p", "-t", pane, "#{pane_id}"])
        .map(|p| p.trim() == pane)
        .unwrap_or(false);
    if !pane_exists {
        return Err(error::agent_ended(agent, "has no pane any more"));
    }
    if std::env::var_os("TMUX").is_some() {
        if !inside_server(Path::new(socket)) {
            return Err(error::on_another_tmux_server(agent, socket));
        }
        // Our terminal is the pane's pty, not the client's: keep `$TMUX` so tmux itself picks
        // the client attached to the caller's session, as it does for a command typed in a pane.
        let status = std::process::Command::new("tmux")
            .arg("-S")
            .arg(socket)
            .args(["switch-client", "-t", pane])
            .stdin(std::process::Stdio::null())
            .status()
            .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
        if !status.success() {
            return Err(CliError::internal(format!(
                "tmux switch-client -t {pane} failed"
            )));
        }
        return Ok(());
    }
    if !stdin_is_tty() {
        return Err(error::needs_terminal(&format!(
            "tmux -S {socket} attach -t {pane}"
        )));
    }
    let err = server
        .client_command()
        .args(["attach-session", "-t", pane])
        .exec();
    Err(CliError::from_error(Exit::Environment, &err))
}

fn attach_zellij(agent: &AgentView, session: &str, pane: &str) -> CliResult {
    if agent.state.is_final() {
        return Err(error::agent_ended(agent, "has ended"));
    }
    let zellij = volee_zellij::ZellijCli::new(volee_zellij::find_binary()?, session);
    match std::env::var("ZELLIJ_SESSION_NAME").ok().as_deref() {
        Some(s) if s == session => {
            let number = volee_protocol::zellij::parse_terminal_id(pane).ok_or_else(|| {
                CliError::internal(format!("{pane:?} is not a zellij terminal pane"))
            })?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
            Ok(runtime.block_on(zellij.focus_pane(number))?)
        }
        Some(other) => Err(error::in_another_zellij_session(
            agent, session, other, pane,
        )),
        None => {
            if !stdin_is_tty() {
                return Err(error::needs_terminal(&format!("zellij attach {session}")));
            }
            let err = zellij.attach_command().exec();
            Err(CliError::from_error(Exit::Environment, &err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_go_into_a_remote_line() {
        for ok in ["k3f9", "a", "A_b-9", &"x".repeat(64)] {
            assert!(is_plain_id(ok), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "a;rm -rf",
            "$(x)",
            "a'b",
            "é",
            &"x".repeat(65),
            "-\n",
        ] {
            assert!(!is_plain_id(bad), "{bad}");
        }
    }
}
