//! `volee machine add|ls|rm` (issue 20): the machines volee reaches over ssh, kept in
//! `machines.toml` (volee-daemon's `machines`). `add` checks one with one `ssh` of the user's
//! (`machines::ssh::probe`) and tells a running daemon; `ls` asks the daemon about its kept
//! connections and probes only the machines it is not connected to. `volee serve --stdio` is what
//! a probe and the daemon's connection run on the other side.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;
use volee_daemon::machines::ssh::{self, Probe, ProbeOutcome, SshOptions};
use volee_daemon::machines::{self, Machine, MachinesFile};
use volee_daemon::persist::Loaded;
use volee_daemon::Paths;
use volee_protocol::{AgentState, MachineLink, Request, Response, PROTOCOL_VERSION};

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
    /// The machines: one the daemon is connected to as its kept connection says (round trip,
    /// agents by state, since when), every other one checked now (a few seconds at most).
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
    /// Copy this volee binary to a saved machine as ~/.local/bin/volee, after checking it runs
    /// the same OS and architecture, and after asking.
    #[command(after_help = "Examples:
  volee machine install box
  volee machine install box --yes            no question (scripts)

Over the daemon's kept connection when there is one, else one ssh of its own (a machine
without volee has no kept connection). The copy's size and `--version` are checked before it
is put in place; then the daemon connects to the machine at once.")]
    Install {
        /// The machine's name.
        name: String,
        /// Copy without asking.
        #[arg(long, short = 'y')]
        yes: bool,
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
        MachineAction::Install { name, yes } => install(&name, yes),
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

/// Machine `name` as `machines.toml` has it (`--on NAME`, `attach NAME:ID`); a name that is none
/// of the saved ones (or no machine name at all) is a user error naming the saved ones.
pub(crate) fn saved(name: &str) -> CliResult<Machine> {
    let (_, file) = load()?;
    match file.get(name) {
        Some(m) if machines::check_name(name).is_ok() => Ok(m.clone()),
        _ => Err(error::unknown_machine(name, &file)),
    }
}

/// Machine `name` if it is a saved one (None for anything else, a name volee would not take too).
pub(crate) fn find_saved(name: &str) -> CliResult<Option<Machine>> {
    if machines::check_name(name).is_err() {
        return Ok(None);
    }
    Ok(load()?.1.get(name).cloned())
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
        tell_daemon();
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
    /// A round trip on the daemon's kept connection, or for a machine it is not connected to,
    /// how long the check took: connect, log in, start volee, its first line (ms).
    latency_ms: Option<u64>,
    /// `ok`, `incompatible`, `no_volee`, `host_key_unknown`, `host_key_changed`, `auth_failed`,
    /// `unreachable`, `timed_out`, `failed`.
    status: &'static str,
    /// The remote volee's version, when it answered.
    version: Option<String>,
    /// The remote's protocol (null when unknown).
    protocol: Option<u32>,
    /// ssh's or the remote's complaint (control characters removed, bounded).
    error: Option<String>,
    /// The daemon's kept connection: `connected`, `connecting`, `unreachable`, `incompatible`;
    /// null when the daemon keeps none (no daemon, or the machine was just added).
    connection: Option<String>,
    /// A round trip on the kept connection (ms); null when not connected.
    rtt_ms: Option<u64>,
    /// RFC 3339: connected since, or unreachable since (the kept connection's).
    since: Option<String>,
    /// Its agents that have not ended, by state (`working`, `needs_you`, …), as the daemon's
    /// mirror has them; empty when not connected.
    agents: BTreeMap<String, u32>,
    /// The ssh process of the kept connection.
    ssh_pid: Option<u32>,
}

/// A machine the daemon is connected to, as its kept connection says.
fn connected_view(m: &Machine, link: &MachineLink) -> MachineView {
    MachineView {
        name: m.name.clone(),
        dest: m.dest.clone(),
        port: m.port,
        identity: m.identity.clone(),
        added: m.added.clone(),
        reachable: true,
        latency_ms: link.rtt_ms,
        status: "ok",
        version: link.version.clone(),
        protocol: link.protocol.or(Some(PROTOCOL_VERSION)),
        error: None,
        connection: Some(link.status.clone()),
        rtt_ms: link.rtt_ms,
        since: link.since.clone(),
        agents: link.agents.clone(),
        ssh_pid: link.ssh_pid,
    }
}

/// A machine checked with a probe of its own; `link`: what the daemon knows of its connection.
fn probed_view(m: &Machine, probe: &Probe, link: Option<&MachineLink>) -> MachineView {
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
        connection: link.map(|l| l.status.clone()),
        rtt_ms: None,
        since: link.and_then(|l| l.since.clone()),
        agents: BTreeMap::new(),
        ssh_pid: link.and_then(|l| l.ssh_pid),
    }
}

/// What the daemon knows of its kept connections, a round trip timed on each connected one (the
/// daemon started on demand, as for any command); nothing when it cannot be asked.
fn daemon_links() -> Vec<MachineLink> {
    match crate::ask::ask(&Request::Machines { ping: true }) {
        Ok(Response::Machines { machines }) => machines,
        _ => Vec::new(),
    }
}

/// Agents by state in words, in the order states are shown everywhere: `2 working, 1 needs_you`.
fn agents_text(agents: &BTreeMap<String, u32>) -> String {
    let rank = |state: &str| {
        AgentState::parse(state)
            .and_then(|s| volee_view::DISPLAY_ORDER.iter().position(|d| *d == s))
            .unwrap_or(usize::MAX)
    };
    let mut counts: Vec<(&String, &u32)> = agents.iter().filter(|(_, n)| **n > 0).collect();
    counts.sort_by_key(|(state, _)| rank(state));
    if counts.is_empty() {
        return "none".into();
    }
    counts
        .iter()
        .map(|(state, n)| format!("{n} {}", volee_view::plain_text(state, 20)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `volee machine ls`: a machine the daemon is connected to as its kept connection says (no new
/// connection); every other one checked now with a probe, all at once.
fn ls(json: bool) -> CliResult {
    let (_, file) = load()?;
    let links = if file.machines.is_empty() {
        Vec::new()
    } else {
        daemon_links()
    };
    let link_of = |m: &Machine| links.iter().find(|l| l.name == m.name);
    let connected = |m: &Machine| link_of(m).filter(|l| l.status == "connected");
    let options = SshOptions::from_process_env();
    // Every machine not connected at once: `ls` takes as long as the slowest, at most LS_DEADLINE.
    let probes: Vec<Option<Result<Probe, ssh::SshMissing>>> = std::thread::scope(|s| {
        let handles: Vec<_> = file
            .machines
            .iter()
            .map(|m| {
                connected(m)
                    .is_none()
                    .then(|| s.spawn(|| ssh::probe(&options, m, LS_CONNECT, LS_DEADLINE)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.map(|h| {
                    h.join().unwrap_or(Ok(Probe {
                        outcome: ProbeOutcome::Failed {
                            detail: "the check panicked".into(),
                        },
                        elapsed: Duration::ZERO,
                    }))
                })
            })
            .collect()
    });
    let mut views = Vec::new();
    for (m, probe) in file.machines.iter().zip(probes) {
        views.push(match (connected(m), probe) {
            (Some(link), _) => connected_view(m, link),
            (None, Some(probe)) => {
                probed_view(m, &probe.map_err(|e| error::ssh_missing(&e))?, link_of(m))
            }
            (None, None) => {
                return Err(CliError::internal(
                    "a machine was neither asked nor checked",
                ))
            }
        });
    }
    if json {
        return output::json(&views);
    }
    if views.is_empty() {
        output::out("no machines (add one: volee machine add NAME SSH-DEST)");
        return Ok(());
    }
    let rows: Vec<[String; 6]> = views
        .iter()
        .map(|v| {
            let dest = match v.port {
                Some(p) => format!("{}:{p}", v.dest),
                None => v.dest.clone(),
            };
            let latency = v
                .latency_ms
                .map_or("-".to_string(), |ms| format!("{ms} ms"));
            let agents = if v.connection.as_deref() == Some("connected") {
                agents_text(&v.agents)
            } else {
                "-".into()
            };
            let volee = match (&v.version, v.status) {
                (Some(ver), "ok") => volee_view::plain_text(ver, 40),
                (Some(ver), _) => format!(
                    "{} (protocol {}, this volee speaks {PROTOCOL_VERSION})",
                    volee_view::plain_text(ver, 40),
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
                agents,
                volee,
            ]
        })
        .collect();
    let header = [
        "NAME",
        "SSH-DEST",
        "REACHABLE",
        "LATENCY",
        "AGENTS",
        "VOLEE",
    ];
    let last = header.len() - 1;
    let widths: Vec<usize> = (0..last)
        .map(|i| {
            rows.iter()
                .map(|r| volee_view::text::display_width(&r[i]))
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i < last {
                s.push_str(&volee_view::text::pad_to(c, widths[i]));
                s.push_str("  ");
            } else {
                s.push_str(c);
            }
        }
        s.trim_end().to_owned()
    };
    let mut text = line(&header) + "\n";
    for r in &rows {
        text.push_str(&line(&r.each_ref().map(String::as_str)));
        text.push('\n');
    }
    output::out(&text);
    Ok(())
}

/// Tell a running daemon that `machines.toml` changed: it connects to a new machine and drops a
/// removed one at once. No daemon is started for it (one that starts reads the file anyway), and
/// one that cannot be told (another version) reads it when it is replaced.
fn tell_daemon() {
    if let Ok(mut client) = volee_daemon::Client::connect(&Paths::from_process_env()) {
        let _ = client.request(&Request::MachinesChanged);
    }
}

fn rm(name: &str) -> CliResult {
    let (path, mut file) = load()?;
    let Some(gone) = file.remove(name) else {
        return Err(error::unknown_machine(name, &file));
    };
    machines::save(&path, &file)?;
    tell_daemon();
    output::out(&format!("removed {} ({})", gone.name, gone.dest));
    Ok(())
}

fn install(name: &str, yes: bool) -> CliResult {
    let (_, file) = load()?;
    let Some(machine) = file.get(name) else {
        return Err(error::unknown_machine(name, &file));
    };
    let paths = Paths::from_process_env();
    crate::machine_install::install(machine, &paths.ssh_control(name), yes)?;
    tell_daemon();
    Ok(())
}

/// `volee serve --stdio`, run by `ssh` on a machine (`crate::serve`).
pub fn serve_stdio() -> CliResult {
    crate::serve::stdio()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_said_in_display_order() {
        let agents: BTreeMap<String, u32> = [
            ("idle", 1),
            ("working", 2),
            ("needs_you", 1),
            ("odd\x1b", 1),
            ("done", 0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(
            agents_text(&agents),
            "1 needs_you, 2 working, 1 idle, 1 odd"
        );
        assert_eq!(agents_text(&BTreeMap::new()), "none");
    }
}
