//! `volee send ID TEXT` (and `volee mcp`'s `send_message`): the daemon types the text, then the
//! CLI watches the agent until it reacts — a state change, or output after the submit.

use std::time::{Duration, Instant};

use volee_protocol::{AgentState, AgentView, Request, Response};

use crate::ask::{agent_of, ask};
use crate::error::{self, CliError, CliResult};
use crate::output::out;

/// A state change gets this long after the first output to come first (it is the better
/// answer: a hooked agent stays idle until its hook speaks, and exiting can take seconds).
const GRACE: Duration = Duration::from_millis(1500);

/// `volee send ID TEXT`: type it in (made inert unless `raw`), then confirm the agent reacted.
pub fn send(id: &str, text: &str, raw: bool, wait: Duration) -> CliResult {
    let before = agent_of(ask(&Request::Send {
        id: id.into(),
        text: text.into(),
        raw,
    })?)?;
    out(&confirm_reaction(before, wait)?);
    Ok(())
}

/// After a send: wait for the agent (as it was before, `before`) to react, and say how it did.
pub fn confirm_reaction(before: AgentView, wait: Duration) -> CliResult<String> {
    let waiting = |s: AgentState| matches!(s, AgentState::Idle | AgentState::NeedsYou);
    if !waiting(before.state) {
        return Ok(format!(
            "sent to {} ({} was {})",
            before.id, before.name, before.state
        ));
    }
    let mut client = crate::ask::client()?;
    client.send(&Request::Watch {
        id: before.address(),
    })?;
    let deadline = Instant::now() + wait;
    let mut last = before.state;
    // Output after the submit key (the echo of the typed text does not count) is a reaction too.
    let mut drew: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if drew.is_some_and(|at| now >= at + GRACE) {
            return Ok(format!(
                "sent to {}: it reacted (output; still {last})",
                before.address()
            ));
        }
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(error::did_not_react(
                &before.address(),
                wait.as_secs(),
                &last.to_string(),
            ));
        }
        let left = match drew {
            Some(at) => left.min((at + GRACE).saturating_duration_since(now)),
            None => left,
        };
        match client.next_response_within(left)? {
            Some(Response::Agent { agent }) => {
                // A state change after the send (or a newer state_since) is the reaction.
                if agent.state != before.state || agent.state_since != before.state_since {
                    return Ok(format!("sent to {}: now {}", agent.address(), agent.state));
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
