//! `volee machine add|ls|rm` (issue 20's first slice): the machines volee reaches over ssh, kept
//! in `machines.toml` (volee-daemon's `machines`), each checked with one `ssh` of the user's
//! (`machines::ssh::probe`). `volee serve --stdio` is what a probe runs on the other side.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;
use volee_daemon::machines::ssh::{self, Probe, ProbeOutcome, SshOptions};
use volee_daemon::machines::{self, Machine, MachinesFile};
use volee_daemon::persist::Loaded;
use volee_daemon::Paths;
use volee_protocol::PROTOCOL_VERSION;

use crate::error::{self, CliError, CliResult};
use crate::output;

/// `add` waits this long for ssh to connect, and this long for the whole answer.
const ADD_CONNECT: Duration = Duration::from_secs(10);
const ADD_DEADLINE: Duration = Duration::from_secs(20);
/// `ls` asks every machine at once, briefly.
const LS_CONNECT: Duration = Duration::from_secs(3);
const LS_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Args)]
pub struct MachineArgs {
    #[command(subcommand)]
    action: MachineAction,
}

#[derive(Subcommand)]
enum MachineAction {
    /// Save a machine reached with the system's ssh, after checking it answers: its host key
    /// already known (volee never accepts one), a key that logs in without asking, and volee on
    /// its PATH at this protocol.
    #[command(after_help = "Examples:
  volee machine add box me@box.lan
  volee machine add gpu me@10.0.0.7 --port 2222 --identity ~/.ssh/id_gpu
  volee machine add lab lab                  an alias of your ~/.ssh/config

ssh runs with BatchMode=yes and StrictHostKeyChecking=yes, your ~/.ssh/config and known_hosts
(VOLEE_SSH_CONFIG=FILE: that config file instead, as ssh -F).")]
    Add {
        /// `[a-z][a-z0-9-]{0,31}`, not tmux, zellij or a harness's name.
        name: String,
        /// What ssh is given: host, user@host, or an alias of your ssh config.
        #[arg(value_name = "SSH-DEST")]
        dest: String,
        /// The ssh port (default: your ssh config's, else 22).
        #[arg(long, short = 'p', value_name = "P")]
        port: Option<u16>,
        /// The private key to log in with (ssh -i).
        #[arg(long, short = 'i', value_name = "FILE")]
        identity: Option<PathBuf>,
    },
    /// The machines, each asked now (a few seconds at most): reachable, latency, its volee.
    Ls {
        /// Print JSON: an array of machine objects.
        #[arg(long)]
        json: bool,
    },
    /// Forget a machine (nothing on it is touched).
    Rm {
        /// The machine's name.
        name: String,
    },
}

pub fn run(args: MachineArgs) -> CliResult {
    match args.action {
        MachineAction::Add {
            name,
            dest,
            port,
            identity,
        } => add(&name, &dest, port, identity.as_deref()),
        MachineAction::Ls { json } => ls(json),
        MachineAction::Rm { name } => rm(&name),
    }
}

/// The machines file, its directory made private; a corrupt one is moved aside with a warning.
fn load() -> CliResult<(PathBuf, MachinesFile)> {
    let paths = Paths::from_process_env();
    paths.ensure()?;
    let path = paths.machines_file();
    let file = match machines::load(&path, volee_os::clock::now_ms())? {
        Loaded::Missing => MachinesFile::default(),
        Loaded::Ok(file) => file,
        Loaded::Corrupt { kept_as, error } => {
            eprintln!(
                "warning: {} was not a machines file volee wrote ({error}); it is kept as {} and volee starts a new one",
                path.display(),
                kept_as.display()
            );
            MachinesFile::default()
        }
    };
    Ok((path, file))
}

fn add(name: &str, dest: &str, port: Option<u16>, identity: Option<&Path>) -> CliResult {
    machines::check_name(name).map_err(error::machine_name)?;
    machines::check_dest(dest).map_err(|e| CliError::user(e.to_string()))?;
    let identity = identity.map(absolute_identity).transpose()?;
    let (path, mut file) = load()?;
    if let Some(m) = file.get(name) {
        return Err(error::machine_exists(name, &m.dest));
    }
    let machine = Machine {
        name: name.into(),
        dest: dest.into(),
        port,
        identity,
        added: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    };
    let options = SshOptions::from_process_env();
    let probe = ssh::probe(&options, &machine, ADD_CONNECT, ADD_DEADLINE)
        .map_err(|e| error::ssh_missing(&e))?;
    let saved = matches!(
        probe.outcome,
        ProbeOutcome::Ready { .. }
            | ProbeOutcome::NoVolee { .. }
            | ProbeOutcome::Incompatible { .. }
    );
    if saved {
        // Reachable: kept, so the user can put volee there and use the name at once.
        file.machines.push(machine.clone());
        machines::save(&path, &file)?;
    }
    match &probe.outcome {
        ProbeOutcome::Ready { version } => {
            output::out(&format!(
                "added {name} ({dest}): volee {version}, protocol {PROTOCOL_VERSION}, {} ms",
                probe.elapsed.as_millis()
            ));
            Ok(())
        }
        outcome => Err(error::machine_check_failed(
            &machine,
            outcome,
            &options.accept_command(&machine),
            saved,
        )),
    }
}

/// `--identity` as an absolute path to a regular file (ssh is given it from any directory).
fn absolute_identity(path: &Path) -> CliResult<PathBuf> {
    let abs = std::path::absolute(path)
        .map_err(|e| CliError::user(format!("identity file {}: {e}", path.display())))?;
    if !abs.is_file() {
        return Err(CliError::user(format!(
            "identity file {} is not a file",
            abs.display()
        )));
    }
    Ok(abs)
}

/// One machine of `volee machine ls --json`.
#[derive(Serialize)]
struct MachineView {
    name: String,
    dest: String,
    port: Option<u16>,
    identity: Option<PathBuf>,
    added: String,
    /// ssh connected and logged in.
    reachable: bool,
    /// How long the check took: connect, log in, start volee, its first line (ms).
    latency_ms: Option<u64>,
    /// `ok`, `incompatible`, `no_volee`, `host_key_unknown`, `host_key_changed`, `auth_failed`,
    /// `unreachable`, `timed_out`, `failed`.
    status: &'static str,
    /// The remote volee's version, when it answered.
    version: Option<String>,
    /// The remote's protocol when it differs from this volee's (null when the same or unknown).
    protocol: Option<u32>,
    /// ssh's or the remote's complaint (control characters removed, bounded).
    error: Option<String>,
}

fn view(m: &Machine, probe: &Probe) -> MachineView {
    let reachable = probe.outcome.reachable();
    MachineView {
        name: m.name.clone(),
        dest: m.dest.clone(),
        port: m.port,
        identity: m.identity.clone(),
        added: m.added.clone(),
        reachable,
        latency_ms: reachable.then(|| u64::try_from(probe.elapsed.as_millis()).unwrap_or(u64::MAX)),
        status: probe.outcome.word(),
        version: probe.outcome.version().map(String::from),
        protocol: match &probe.outcome {
            ProbeOutcome::Ready { .. } => Some(PROTOCOL_VERSION),
            ProbeOutcome::Incompatible { protocol, .. } => *protocol,
            _ => None,
        },
        error: probe.outcome.detail().map(String::from),
    }
}

fn ls(json: bool) -> CliResult {
    let (_, file) = load()?;
    let options = SshOptions::from_process_env();
    // Every machine at once: `ls` takes as long as the slowest, at most LS_DEADLINE.
    let probes: Vec<Result<Probe, ssh::SshMissing>> = std::thread::scope(|s| {
        let handles: Vec<_> = file
            .machines
            .iter()
            .map(|m| s.spawn(|| ssh::probe(&options, m, LS_CONNECT, LS_DEADLINE)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or(Ok(Probe {
                    outcome: ProbeOutcome::Failed {
                        detail: "the check panicked".into(),
                    },
                    elapsed: Duration::ZERO,
                }))
            })
            .collect()
    });
    let mut views = Vec::new();
    for (m, probe) in file.machines.iter().zip(probes) {
        let probe = probe.map_err(|e| error::ssh_missing(&e))?;
        views.push(view(m, &probe));
    }
    if json {
        return output::json(&views);
    }
    if views.is_empty() {
        output::out("no machines (add one: volee machine add NAME SSH-DEST)");
        return Ok(());
    }
    let rows: Vec<[String; 5]> = views
        .iter()
        .map(|v| {
            let dest = match v.port {
                Some(p) => format!("{}:{p}", v.dest),
                None => v.dest.clone(),
            };
            let latency = v
                .latency_ms
                .map_or("-".to_string(), |ms| format!("{ms} ms"));
            let volee = match (&v.version, v.status) {
                (Some(ver), "ok") => ver.clone(),
                (Some(ver), _) => format!(
                    "{ver} (protocol {}, this volee speaks {PROTOCOL_VERSION})",
                    v.protocol.map_or("none".into(), |p| p.to_string())
                ),
                (None, status) => {
                    let why = v.error.as_deref().unwrap_or("");
                    if why.is_empty() {
                        status.replace('_', " ")
                    } else {
                        format!("{}: {why}", status.replace('_', " "))
                    }
                }
            };
            [
                v.name.clone(),
                dest,
                if v.reachable { "yes" } else { "no" }.into(),
                latency,
                volee,
            ]
        })
        .collect();
    let header = ["NAME", "SSH-DEST", "REACHABLE", "LATENCY", "VOLEE"];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .map(|r| volee_view::text::display_width(&r[i]))
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 5]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i < 4 {
                s.push_str(&volee_view::text::pad_to(c, widths[i]));
                s.push_str("  ");
            } else {
                s.push_str(c);
            }
        }
        s
    };
    let mut text = line(header) + "\n";
    for r in &rows {
        text.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
        text.push('\n');
    }
    output::out(&text);
    Ok(())
}

fn rm(name: &str) -> CliResult {
    let (path, mut file) = load()?;
    let Some(gone) = file.remove(name) else {
        return Err(error::unknown_machine(name, &file));
    };
    machines::save(&path, &file)?;
    output::out(&format!("removed {} ({})", gone.name, gone.dest));
    Ok(())
}

/// `volee serve --stdio`, run by `ssh` on a machine (`crate::serve`).
pub fn serve_stdio() -> CliResult {
    crate::serve::stdio()
}
