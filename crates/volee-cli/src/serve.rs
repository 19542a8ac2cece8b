//! `volee serve --stdio`: what the daemon's kept ssh connection runs on a machine (docs/adr/0013).
//!
//! The first line says the protocol and version ([`RemoteHello`]). Then it relays: every request
//! line ([`RemoteRequest`]) is answered on a thread of its own by this machine's daemon (started
//! on demand, like any command), its answer written back with the request's id; and the daemon's
//! agents (`WatchAll`) are written whenever they change — at once when an agent came, went or
//! changed state, else at most every [`QUIET_CHANGES`] (output times, titles), so an idle
//! connection carries nothing but ssh's keep-alives. `RunOn` runs `volee ARGS` here (only
//! [`REMOTE_COMMANDS`]), with this machine's own login environment. It ends when stdin does.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use volee_protocol::remote::{RemoteFrame, RemoteHello, RemoteRequest, MAX_FRAME_BYTES};
use volee_protocol::{
    AgentState, AgentView, ErrorKind, Request, Response, PROTOCOL_VERSION, REMOTE_COMMANDS,
};

use crate::error::CliResult;

/// Changes that leave every agent's state as it was are sent at most this often.
const QUIET_CHANGES: Duration = Duration::from_secs(2);
/// A `RunOn` command is killed after this long.
const RUN_DEADLINE: Duration = Duration::from_secs(120);
/// The most of a `RunOn` command's output sent back, per stream.
const RUN_OUTPUT: usize = 4 * 1024 * 1024;

type Out = Arc<Mutex<std::io::Stdout>>;

/// Write one line; the local side is gone when it fails, and so is our reason to run.
fn write_line(out: &Out, line: &[u8]) {
    let ok = match out.lock() {
        Ok(mut out) => out
            .write_all(line)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .is_ok(),
        Err(_) => false,
    };
    if !ok {
        std::process::exit(0);
    }
}

fn write_frame(out: &Out, frame: &RemoteFrame) {
    if let Ok(line) = serde_json::to_vec(frame) {
        write_line(out, &line);
    }
}

pub fn stdio() -> CliResult {
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let hello = RemoteHello {
        protocol: PROTOCOL_VERSION,
        version: env!("CARGO_PKG_VERSION").into(),
    };
    write_line(&out, &serde_json::to_vec(&hello)?);
    {
        let out = out.clone();
        std::thread::spawn(move || stream_agents(&out));
    }
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut stdin)
            .take(MAX_FRAME_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => std::process::exit(0),
            Ok(_) => {}
        }
        if line.len() > MAX_FRAME_BYTES {
            eprintln!("volee serve: a request longer than {MAX_FRAME_BYTES} bytes; closing");
            std::process::exit(2);
        }
        let request: RemoteRequest = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("volee serve: an unreadable request: {e}");
                continue;
            }
        };
        let out = out.clone();
        std::thread::spawn(move || {
            let response = answer(request.request);
            write_frame(
                &out,
                &RemoteFrame {
                    id: Some(request.id),
                    response,
                },
            );
        });
    }
}

/// This machine's daemon, started on demand.
fn daemon() -> Result<volee_daemon::Client, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    volee_daemon::ensure_daemon(&crate::ask::paths(), &exe).map_err(|e| e.to_string())
}

fn error(kind: ErrorKind, message: String) -> Response {
    Response::Error {
        kind,
        message,
        hints: Vec::new(),
    }
}

/// One request, answered by this machine.
fn answer(request: Request) -> Response {
    match request {
        Request::RunOn { args, .. } => run_volee(&args),
        Request::Watch { .. } | Request::WatchAll | Request::Shutdown => error(
            ErrorKind::User,
            "not a request a machine's connection carries".into(),
        ),
        request => match daemon() {
            Ok(mut client) => client.request(&request).unwrap_or_else(|e| {
                error(ErrorKind::Environment, format!("volee daemon there: {e}"))
            }),
            Err(e) => error(ErrorKind::Environment, format!("volee daemon there: {e}")),
        },
    }
}

/// `volee ARGS` of [`REMOTE_COMMANDS`], run by this binary with this machine's environment.
fn run_volee(args: &[String]) -> Response {
    if !args
        .first()
        .is_some_and(|a| REMOTE_COMMANDS.contains(&a.as_str()))
    {
        return error(
            ErrorKind::User,
            format!("only {} run on a machine", REMOTE_COMMANDS.join(" and ")),
        );
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return error(ErrorKind::Internal, format!("this volee's path: {e}")),
    };
    // Nobody is inside tmux on a machine reached over ssh: a launch into tmux there needs a
    // server, which `volee up` starts (detached, volee's own integration; `volee down` undoes).
    if args[0] == "launch"
        && !args
            .iter()
            .any(|a| a == "--host" || a.starts_with("--host="))
    {
        let socket = crate::caller::tmux_socket(None);
        if !volee_tmux::server::TmuxServer::new(&socket).is_running() {
            let up = exec_volee(&exe, &["up".to_string(), "--no-attach".to_string()]);
            if !matches!(up, Response::Ran { code: 0, .. }) {
                return up;
            }
        }
    }
    exec_volee(&exe, args)
}

/// `volee ARGS` run by this binary, its output bounded, killed after [`RUN_DEADLINE`].
fn exec_volee(exe: &std::path::Path, args: &[String]) -> Response {
    let mut child = match Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return error(ErrorKind::Internal, format!("running volee: {e}")),
    };
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(RUN_OUTPUT as u64).read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code().unwrap_or(4),
            Ok(None) if started.elapsed() < RUN_DEADLINE => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                break 4;
            }
        }
    };
    Response::Ran {
        code,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// What makes a change worth sending at once: agents, their states and reachability.
fn shape(agents: &[AgentView]) -> Vec<(String, AgentState)> {
    agents.iter().map(|a| (a.id.clone(), a.state)).collect()
}

/// The daemon's agents, written whenever they change, for as long as we run; a daemon that
/// went away (replaced by another build) is connected again.
fn stream_agents(out: &Out) {
    loop {
        if let Ok(mut client) = daemon() {
            if client.send(&Request::WatchAll).is_ok() {
                relay(&mut client, out);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn relay(client: &mut volee_daemon::Client, out: &Out) {
    let mut sent_shape: Option<Vec<(String, AgentState)>> = None;
    let mut sent_at = Instant::now();
    let mut held: Option<Vec<AgentView>> = None;
    loop {
        let wait = match held {
            Some(_) => QUIET_CHANGES.saturating_sub(sent_at.elapsed()),
            None => Duration::from_secs(3600),
        };
        let response = match client.next_response_within(wait) {
            Ok(r) => r,
            Err(_) => return,
        };
        let agents = match response {
            Some(Response::Agents { agents }) => agents,
            Some(_) => continue,
            None => match held.take() {
                Some(agents) => agents,
                None => continue,
            },
        };
        let now_shape = shape(&agents);
        let urgent = sent_shape.as_ref() != Some(&now_shape);
        if urgent || sent_at.elapsed() >= QUIET_CHANGES {
            write_frame(
                out,
                &RemoteFrame {
                    id: None,
                    response: Response::Agents { agents },
                },
            );
            sent_shape = Some(now_shape);
            sent_at = Instant::now();
            held = None;
        } else {
            held = Some(agents);
        }
    }
}
