//! Talking to the daemon: its paths, a client (the daemon started on demand), one request whose
//! error answer becomes a [`CliError`], and the answers commands expect.

use volee_daemon::{Client, Paths};
use volee_protocol::{AgentView, Request, Response};

use crate::error::{CliError, CliResult, Exit};

/// volee's directories for this user (`VOLEE_HOME`, else XDG).
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

/// The agent an answer carries.
pub fn agent_of(resp: Response) -> CliResult<AgentView> {
    match resp {
        Response::Agent { agent } => Ok(agent),
        other => Err(CliError::from_response(other)),
    }
}

/// The agents an answer carries.
pub fn agents_of(resp: Response) -> CliResult<Vec<AgentView>> {
    match resp {
        Response::Agents { agents } => Ok(agents),
        other => Err(CliError::from_response(other)),
    }
}

/// The text an answer carries.
pub fn text_of(resp: Response) -> CliResult<String> {
    match resp {
        Response::Text { text } => Ok(text),
        other => Err(CliError::from_response(other)),
    }
}

/// One agent by id, name or id prefix.
pub fn show(id: &str) -> CliResult<AgentView> {
    agent_of(ask(&Request::Show { id: id.into() })?)
}
