//! `--on MACHINE`: a volee command (`launch`, `sessions …`) run on a machine through the local
//! daemon's kept connection to it (`Request::RunOn`, docs/adr/0013). Nothing of the local
//! environment goes with it: the machine runs `volee ARGS` with its own login environment. What
//! comes back is remote text: it reaches the terminal only through [`volee_view::plain_lines`].

use volee_protocol::{AgentView, Request, Response};

use crate::ask::ask;
use crate::error::{CliError, CliResult, Exit};

/// The most lines of a machine's stderr shown, and their longest.
const STDERR_LINES: usize = 200;
const LINE_CHARS: usize = 2000;

/// What `volee ARGS` printed on `machine` when it succeeded (its stderr, warnings, is shown on
/// ours); a non-zero exit is an error with the remote's message, causes and hints, and its code.
pub fn run(machine: &str, args: Vec<String>) -> CliResult<String> {
    let command = args.first().cloned().unwrap_or_default();
    match ask(&Request::RunOn {
        machine: machine.to_owned(),
        args,
    })? {
        Response::Ran {
            code: 0,
            stdout,
            stderr,
        } => {
            eprint!(
                "{}",
                volee_view::plain_lines(&stderr, STDERR_LINES, LINE_CHARS)
            );
            Ok(stdout)
        }
        Response::Ran { code, stderr, .. } => Err(remote_error(machine, &command, code, &stderr)),
        other => Err(CliError::from_response(other)),
    }
}

/// The exit code of the contract a machine's volee exited with (anything else: internal).
fn exit_of(code: i32) -> Exit {
    match code {
        1 => Exit::Negative,
        2 => Exit::User,
        3 => Exit::Environment,
        5 => Exit::Unreachable,
        _ => Exit::Internal,
    }
}

/// The error a machine's volee printed (`error: …`, `  caused by: …`, `hint: …`), said as ours
/// with the machine named; lines before it (warnings) are printed as they came, made safe.
pub fn remote_error(machine: &str, command: &str, code: i32, stderr: &str) -> CliError {
    let clean = volee_view::plain_lines(stderr, STDERR_LINES, LINE_CHARS);
    let mut message: Option<String> = None;
    let mut causes = Vec::new();
    let mut hints = Vec::new();
    for line in clean.lines() {
        if let Some(m) = line.strip_prefix("error: ").filter(|_| message.is_none()) {
            message = Some(m.to_owned());
        } else if let Some(h) = line.strip_prefix("hint: ") {
            hints.push(h.to_owned());
        } else if let Some(c) = line.trim_start().strip_prefix("caused by: ") {
            causes.push(c.to_owned());
        } else if message.is_none() {
            eprintln!("{line}");
        } else if !line.trim().is_empty() {
            causes.push(line.trim().to_owned());
        }
    }
    let message = match message {
        Some(m) => format!("on {machine}: {m}"),
        None => format!("volee {command} on {machine} exited with {code}"),
    };
    let mut err = CliError::new(exit_of(code), message);
    err.causes = causes;
    if !hints.is_empty() {
        hints.push(format!("(the hints above are for machine {machine})"));
    }
    err.hints = hints;
    err
}

/// A machine's `--json` agent object (what `launch` and `sessions resume` print there), marked
/// with its machine.
pub fn remote_agent(machine: &str, stdout: &str) -> CliResult<AgentView> {
    let mut agent: AgentView = serde_json::from_str(stdout.trim()).map_err(|e| {
        CliError::internal(format!(
            "machine {machine} answered with something that is not an agent object: {e}"
        ))
    })?;
    agent.machine = Some(machine.to_owned());
    Ok(agent)
}

/// A machine's `--json` answer with `"machine": M` in every object of `key` (or in every object
/// of the answer itself when it is an array, or in the object when `key` is None and it is one).
pub fn mark_machine(
    machine: &str,
    stdout: &str,
    key: Option<&str>,
) -> CliResult<serde_json::Value> {
    let mut value: serde_json::Value = serde_json::from_str(stdout.trim()).map_err(|e| {
        CliError::internal(format!(
            "machine {machine} answered with something that is not JSON: {e}"
        ))
    })?;
    let mark = |v: &mut serde_json::Value| {
        if let Some(object) = v.as_object_mut() {
            object.insert("machine".into(), machine.into());
        }
    };
    let target = match key {
        Some(k) => value.get_mut(k),
        None => Some(&mut value),
    };
    match target {
        Some(serde_json::Value::Array(items)) => items.iter_mut().for_each(mark),
        Some(object @ serde_json::Value::Object(_)) => mark(object),
        _ => {}
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_error_keeps_its_code_message_and_hints() {
        let stderr = "warning: claude 9.9 is outside the measured range\n\
                      error: unknown harness \"nope\"\x1b[2J\n  caused by: it is not there\n\
                      hint: known harnesses: claude, codex\n";
        let e = remote_error("box", "launch", 2, stderr);
        assert_eq!(e.exit, Exit::User);
        assert_eq!(e.message, "on box: unknown harness \"nope\"[2J");
        assert_eq!(e.causes, ["it is not there"]);
        assert_eq!(
            e.hints,
            [
                "known harnesses: claude, codex",
                "(the hints above are for machine box)"
            ]
        );
        let odd = remote_error("box", "sessions", 139, "Segmentation fault\n");
        assert_eq!(odd.exit, Exit::Internal);
        assert_eq!(odd.message, "volee sessions on box exited with 139");
        assert_eq!(remote_error("box", "launch", 3, "").exit, Exit::Environment);
    }

    #[test]
    fn answers_are_marked_with_their_machine() {
        let hits = mark_machine("box", r#"[{"id": "a"}, {"id": "b"}]"#, None).unwrap();
        assert_eq!(hits[1]["machine"], "box");
        let listing = mark_machine(
            "box",
            r#"{"roots": [], "sessions": [{"id": "a"}], "unreadable": []}"#,
            Some("sessions"),
        )
        .unwrap();
        assert_eq!(listing["sessions"][0]["machine"], "box");
        assert!(listing.get("machine").is_none());
        let one = mark_machine("box", r#"{"id": "a", "messages": []}"#, None).unwrap();
        assert_eq!(one["machine"], "box");
        assert_eq!(
            mark_machine("box", "not json", None).unwrap_err().exit,
            Exit::Internal
        );
    }

    #[test]
    fn a_remote_agent_object_gets_its_machine() {
        let json = r#"{"id": "k3f9", "name": "n", "harness": "generic", "harness_version": null,
            "profile_fit": "generic", "origin": "launched", "state": "working",
            "state_source": "process", "state_since": "2026-01-01T00:00:00Z", "evidence": "",
            "exit_status": null, "pid": 1, "cwd": "/root", "session_id": null,
            "host": {"kind": "none"}, "title": null, "command": ["sh"],
            "created_at": "2026-01-01T00:00:00Z", "ended_at": null, "last_output": null,
            "machine": null, "reachable": true}"#;
        let agent = remote_agent("box", json).unwrap();
        assert_eq!(agent.address(), "box:k3f9");
        assert!(remote_agent("box", "[]").is_err());
    }
}
