//! The system's OpenSSH client (`ssh`, never a library: the user's keys, agent, config and
//! known_hosts are what volee trusts) run against one machine: the argv, and `probe` — one
//! connection that asks the remote `volee --version` and the first line of `volee serve --stdio`.
//!
//! What comes back is hostile: read at most [`MAX_OUTPUT`] bytes of each stream, give up after a
//! deadline, and keep only a version of safe characters and a bounded, control-free line of
//! ssh's own complaint.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use volee_protocol::remote::{RemoteHello, MAX_HELLO_BYTES};
use volee_protocol::PROTOCOL_VERSION;

use super::Machine;

/// The variable naming an ssh config file volee gives `ssh -F` instead of the user's
/// `~/.ssh/config` (tests point it at a private one; so can a user who keeps volee's machines
/// apart). `-F` also skips the system-wide `/etc/ssh/ssh_config`.
pub const SSH_CONFIG_VAR: &str = "VOLEE_SSH_CONFIG";

/// The most volee reads of each of ssh's output streams.
pub const MAX_OUTPUT: u64 = 64 * 1024;

/// What the remote shell runs for a probe: fixed text, nothing of the user's or the remote's.
pub const PROBE_COMMAND: &str = "volee --version && volee serve --stdio";

/// What the daemon's kept connection runs on the machine: fixed text.
pub const SERVE_COMMAND: &str = "volee serve --stdio";

/// ssh's keep-alive on the kept connection: asked every this many seconds, given up after
/// `SERVER_ALIVE_COUNT` unanswered (a silently dead link is found within 9 s).
pub const SERVER_ALIVE_SECS: u32 = 3;
pub const SERVER_ALIVE_COUNT: u32 = 3;

/// How volee runs `ssh` for everyone: the config file of [`SSH_CONFIG_VAR`], if set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshOptions {
    pub config: Option<PathBuf>,
}

impl SshOptions {
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> SshOptions {
        SshOptions {
            config: get(SSH_CONFIG_VAR)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }

    pub fn from_process_env() -> SshOptions {
        SshOptions::from_env(|k| std::env::var(k).ok())
    }

    /// `-F FILE`, `-p PORT`, `-i FILE`: what every ssh of this machine is given.
    fn machine_args(&self, machine: &Machine) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if let Some(config) = &self.config {
            args.push("-F".into());
            args.push(config.into());
        }
        if let Some(port) = machine.port {
            args.push("-p".into());
            args.push(port.to_string().into());
        }
        if let Some(identity) = &machine.identity {
            args.push("-i".into());
            args.push(identity.into());
        }
        args
    }

    /// The argv after `ssh`: the machine's `-F`/`-p`/`-i`, `-o` for each option (every ssh volee
    /// runs has `BatchMode=yes` and `StrictHostKeyChecking=yes`: no prompt can hang it, and
    /// volee never accepts a host key whatever the user's config says), `-S control`, the
    /// flags, the destination and the remote command.
    fn argv(
        &self,
        machine: &Machine,
        options: &[String],
        control: Option<&Path>,
        flags: &[&str],
        remote_command: &str,
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = self.machine_args(machine);
        for option in ["BatchMode=yes", "StrictHostKeyChecking=yes"]
            .into_iter()
            .map(String::from)
            .chain(options.iter().cloned())
        {
            args.push("-o".into());
            args.push(option.into());
        }
        if let Some(control) = control {
            args.push("-S".into());
            args.push(control.into());
        }
        args.extend(flags.iter().map(OsString::from));
        args.push(machine.dest.clone().into());
        args.push(remote_command.into());
        args
    }

    /// The argv after `ssh` for a non-interactive command on the machine: no terminal, stdin
    /// closed.
    pub fn batch_args(
        &self,
        machine: &Machine,
        connect_timeout: Duration,
        remote_command: &str,
    ) -> Vec<OsString> {
        let timeout = format!("ConnectTimeout={}", connect_timeout.as_secs().max(1));
        self.argv(machine, &[timeout], None, &["-T", "-n"], remote_command)
    }

    /// The argv after `ssh` of the daemon's kept connection to the machine: the ControlMaster at
    /// `control` (ssh's own multiplexing: `attach` and the rest run over it), keep-alives set by
    /// volee (a dead link is found in at most `SERVER_ALIVE_SECS * SERVER_ALIVE_COUNT`), no
    /// terminal; stdin carries requests.
    pub fn master_args(
        &self,
        machine: &Machine,
        control: &Path,
        remote_command: &str,
    ) -> Vec<OsString> {
        let options = [
            "ConnectTimeout=10".to_string(),
            format!("ServerAliveInterval={SERVER_ALIVE_SECS}"),
            format!("ServerAliveCountMax={SERVER_ALIVE_COUNT}"),
            "ControlMaster=yes".to_string(),
            "ControlPersist=no".to_string(),
        ];
        self.argv(machine, &options, Some(control), &["-T"], remote_command)
    }

    /// The argv after `ssh` of a session over the kept connection at `control` (never a second
    /// connection: `ControlMaster=no`, and ssh fails when the master is not there), with a
    /// terminal when `tty` (`attach`).
    pub fn over_master_args(
        &self,
        machine: &Machine,
        control: &Path,
        tty: bool,
        remote_command: &str,
    ) -> Vec<OsString> {
        let flag = if tty { "-t" } else { "-T" };
        let options = ["ControlMaster=no".to_string()];
        self.argv(machine, &options, Some(control), &[flag], remote_command)
    }

    /// The argv after `ssh` of one command on the machine whose stdin is given (`machine
    /// install` sends a file on it): over the kept connection at `control` when its master
    /// listens there, else one connection of its own (a machine without volee has no kept
    /// connection: its `volee serve` cannot start). No terminal.
    pub fn command_args(
        &self,
        machine: &Machine,
        control: &Path,
        remote_command: &str,
    ) -> Vec<OsString> {
        if std::os::unix::net::UnixStream::connect(control).is_ok() {
            return self.over_master_args(machine, control, false, remote_command);
        }
        let options = ["ConnectTimeout=10".to_string()];
        self.argv(machine, &options, None, &["-T"], remote_command)
    }

    /// The command a user runs to see the host key's fingerprint and accept it (ssh asks), one
    /// shell line.
    pub fn accept_command(&self, machine: &Machine) -> String {
        let mut words = vec!["ssh".to_string()];
        words.extend(
            self.machine_args(machine)
                .iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        words.extend([
            "-o".into(),
            "StrictHostKeyChecking=ask".into(),
            machine.dest.clone(),
            "true".into(),
        ]);
        words
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a probe of one machine found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// volee answered at this protocol.
    Ready { version: String },
    /// volee answered, at another protocol (`None`: too old to have `volee serve`).
    Incompatible {
        version: String,
        protocol: Option<u32>,
    },
    /// ssh worked; there is no `volee` on the PATH of a non-interactive command there.
    NoVolee { detail: String },
    /// The machine's host key is not in known_hosts.
    HostKeyUnknown { detail: String },
    /// The machine's host key differs from the one in known_hosts.
    HostKeyChanged { detail: String },
    /// The machine refused every key volee could offer without asking.
    AuthFailed { detail: String },
    /// ssh could not connect (name, route, refused, timed out).
    Unreachable { detail: String },
    /// No answer before the deadline (the probe was killed).
    TimedOut,
    /// Something else: ssh or the remote command failed.
    Failed { detail: String },
}

impl ProbeOutcome {
    /// Did ssh reach the machine and log in?
    pub fn reachable(&self) -> bool {
        matches!(
            self,
            ProbeOutcome::Ready { .. }
                | ProbeOutcome::Incompatible { .. }
                | ProbeOutcome::NoVolee { .. }
                | ProbeOutcome::Failed { .. }
        )
    }

    /// A short word for tables and JSON: `ok`, `incompatible`, `no_volee`, `host_key_unknown`,
    /// `host_key_changed`, `auth_failed`, `unreachable`, `timed_out`, `failed`.
    pub fn word(&self) -> &'static str {
        match self {
            ProbeOutcome::Ready { .. } => "ok",
            ProbeOutcome::Incompatible { .. } => "incompatible",
            ProbeOutcome::NoVolee { .. } => "no_volee",
            ProbeOutcome::HostKeyUnknown { .. } => "host_key_unknown",
            ProbeOutcome::HostKeyChanged { .. } => "host_key_changed",
            ProbeOutcome::AuthFailed { .. } => "auth_failed",
            ProbeOutcome::Unreachable { .. } => "unreachable",
            ProbeOutcome::TimedOut => "timed_out",
            ProbeOutcome::Failed { .. } => "failed",
        }
    }

    /// The remote volee's version, when it answered.
    pub fn version(&self) -> Option<&str> {
        match self {
            ProbeOutcome::Ready { version } | ProbeOutcome::Incompatible { version, .. } => {
                Some(version)
            }
            _ => None,
        }
    }

    /// ssh's or the remote's complaint, cleaned (no control characters, bounded).
    pub fn detail(&self) -> Option<&str> {
        match self {
            ProbeOutcome::NoVolee { detail }
            | ProbeOutcome::HostKeyUnknown { detail }
            | ProbeOutcome::HostKeyChanged { detail }
            | ProbeOutcome::AuthFailed { detail }
            | ProbeOutcome::Unreachable { detail }
            | ProbeOutcome::Failed { detail } => Some(detail),
            _ => None,
        }
    }
}

/// A probe's outcome and how long it took (connect, log in, run, answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub outcome: ProbeOutcome,
    pub elapsed: Duration,
}

/// `ssh` could not be run at all.
#[derive(Debug, thiserror::Error)]
#[error("could not run ssh")]
pub struct SshMissing(#[source] pub std::io::Error);

/// One connection to `machine` that runs [`PROBE_COMMAND`], killed after `deadline`.
pub fn probe(
    options: &SshOptions,
    machine: &Machine,
    connect_timeout: Duration,
    deadline: Duration,
) -> Result<Probe, SshMissing> {
    let started = Instant::now();
    let mut child = Command::new("ssh")
        .args(options.batch_args(machine, connect_timeout, PROBE_COMMAND))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(SshMissing)?;
    let (tx, rx) = mpsc::channel();
    let (hello_tx, hello_rx) = mpsc::channel();
    for (which, pipe) in [
        (
            0u8,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            1u8,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let tx = tx.clone();
        let hello_tx = hello_tx.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 4096];
                while bytes.len() < MAX_OUTPUT as usize {
                    match pipe.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                    }
                    // The hello is what a probe asks: a remote that goes on talking, or hangs,
                    // after it is not waited for.
                    if which == 0 && has_hello(&bytes) {
                        let _ = hello_tx.send(());
                        break;
                    }
                }
            }
            let _ = tx.send((which, bytes));
        });
    }
    drop(tx);
    let end = started + deadline;
    let status = loop {
        if hello_rx.try_recv().is_ok() {
            let _ = child.kill();
            let _ = child.wait();
            break Some(std::process::ExitStatus::default());
        }
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let elapsed = started.elapsed();
    let Some(status) = status else {
        return Ok(Probe {
            outcome: ProbeOutcome::TimedOut,
            elapsed,
        });
    };
    // The streams end with ssh; a process ssh left holding them is not waited for long.
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok((0, b)) => stdout = b,
            Ok((_, b)) => stderr = b,
            Err(_) => break,
        }
    }
    Ok(Probe {
        outcome: classify(status.code(), &stdout, &stderr),
        elapsed,
    })
}

/// Does `stdout` hold a whole hello line?
fn has_hello(stdout: &[u8]) -> bool {
    stdout
        .split(|b| *b == b'\n')
        .rev()
        .skip(1)
        .any(|l| l.len() <= MAX_HELLO_BYTES && serde_json::from_slice::<RemoteHello>(l).is_ok())
}

/// What ssh's exit code and output say (pure: the tests feed it real ssh's words).
pub fn classify(code: Option<i32>, stdout: &[u8], stderr: &[u8]) -> ProbeOutcome {
    let err = String::from_utf8_lossy(stderr);
    let detail = last_line(&err);
    if err.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        return ProbeOutcome::HostKeyChanged { detail };
    }
    if err.contains("Host key verification failed") {
        return ProbeOutcome::HostKeyUnknown { detail };
    }
    if code == Some(255) {
        if err.contains("Permission denied") || err.contains("Too many authentication failures") {
            return ProbeOutcome::AuthFailed { detail };
        }
        return ProbeOutcome::Unreachable { detail };
    }
    let out = String::from_utf8_lossy(stdout);
    let version = out
        .lines()
        .find_map(|l| l.strip_prefix("volee "))
        .map(clean_version);
    let hello = out
        .lines()
        .filter(|l| l.len() <= MAX_HELLO_BYTES)
        .find_map(|l| serde_json::from_str::<RemoteHello>(l.trim()).ok());
    match (hello, version) {
        (Some(h), _) if h.protocol == PROTOCOL_VERSION => ProbeOutcome::Ready {
            version: clean_version(&h.version),
        },
        (Some(h), _) => ProbeOutcome::Incompatible {
            version: clean_version(&h.version),
            protocol: Some(h.protocol),
        },
        (None, Some(version)) => ProbeOutcome::Incompatible {
            version,
            protocol: None,
        },
        (None, None) if code == Some(127) || err.contains("volee: not found") => {
            ProbeOutcome::NoVolee { detail }
        }
        (None, None) => ProbeOutcome::Failed { detail },
    }
}

/// One word of a shell line a user copies: as it is when it needs no quoting, else quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
    if plain {
        word.to_string()
    } else {
        volee_view::sh_quote(word)
    }
}

/// A remote's version string as volee shows it: at most 64 of `[0-9A-Za-z.+-_]`, else `?`.
pub(crate) fn clean_version(raw: &str) -> String {
    let v: String = raw
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_'))
        .take(64)
        .collect();
    if v.is_empty() {
        "?".into()
    } else {
        v
    }
}

/// The last non-empty line of ssh's stderr, without control characters, at most 300 characters.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    volee_view::plain_text(line, 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine {
            name: "box".into(),
            dest: "me@127.0.0.1".into(),
            port: Some(2222),
            identity: Some("/k/id ed".into()),
            added: String::new(),
        }
    }

    #[test]
    fn batch_argv_forbids_prompts_and_new_keys() {
        let opts = SshOptions::from_env(|k| (k == SSH_CONFIG_VAR).then(|| "/t/ssh_config".into()));
        let args: Vec<String> = opts
            .batch_args(&machine(), Duration::from_secs(3), PROBE_COMMAND)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "-F",
                "/t/ssh_config",
                "-p",
                "2222",
                "-i",
                "/k/id ed",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "ConnectTimeout=3",
                "-T",
                "-n",
                "me@127.0.0.1",
                PROBE_COMMAND
            ]
        );
        assert_eq!(
            opts.accept_command(&machine()),
            "ssh -F /t/ssh_config -p 2222 -i '/k/id ed' -o StrictHostKeyChecking=ask me@127.0.0.1 true"
        );
        assert_eq!(SshOptions::from_env(|_| Some(String::new())).config, None);
    }

    #[test]
    fn what_ssh_says_is_classified() {
        let hello =
            format!("volee 0.1.0\n{{\"protocol\":{PROTOCOL_VERSION},\"version\":\"0.1.0\"}}\n");
        assert_eq!(
            classify(Some(0), hello.as_bytes(), b""),
            ProbeOutcome::Ready {
                version: "0.1.0".into()
            }
        );
        assert_eq!(
            classify(
                Some(0),
                b"volee 0.0.9\n{\"protocol\":1,\"version\":\"0.0.9\"}\n",
                b""
            ),
            ProbeOutcome::Incompatible {
                version: "0.0.9".into(),
                protocol: Some(1)
            }
        );
        // An older volee without `serve`: its --version answered, then clap refused.
        assert_eq!(
            classify(
                Some(2),
                b"volee 0.0.1\n",
                b"error: unrecognized subcommand 'serve'\n"
            ),
            ProbeOutcome::Incompatible {
                version: "0.0.1".into(),
                protocol: None
            }
        );
        assert!(matches!(
            classify(Some(127), b"", b"sh: 1: volee: not found\n"),
            ProbeOutcome::NoVolee { detail } if detail == "sh: 1: volee: not found"
        ));
        let unknown = b"No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\r\nHost key verification failed.\r\n";
        assert!(matches!(
            classify(Some(255), b"", unknown),
            ProbeOutcome::HostKeyUnknown { .. }
        ));
        let changed = b"@@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\nHost key verification failed.\r\n";
        assert!(matches!(
            classify(Some(255), b"", changed),
            ProbeOutcome::HostKeyChanged { .. }
        ));
        assert!(matches!(
            classify(
                Some(255),
                b"",
                b"me@127.0.0.1: Permission denied (publickey).\r\n"
            ),
            ProbeOutcome::AuthFailed { .. }
        ));
        assert!(matches!(
            classify(Some(255), b"", b"ssh: connect to host 127.0.0.1 port 1: Connection refused\r\n"),
            ProbeOutcome::Unreachable { detail } if detail.ends_with("Connection refused")
        ));
    }

    #[test]
    fn a_hostile_remote_is_bounded_and_cleaned() {
        let evil = "volee 1.0\u{1b}]0;pwned\u{7}\n{\"protocol\":5,\"version\":\"\\u001b[2J9.9\"}\n";
        let out = classify(Some(0), evil.as_bytes(), b"");
        assert_eq!(out.version(), Some("?"));
        let noisy = format!("x\n{}\u{1b}[31mred\n", "y".repeat(1000));
        match classify(Some(1), b"", noisy.as_bytes()) {
            ProbeOutcome::Failed { detail } => {
                assert!(detail.chars().count() <= 300);
                assert!(!detail.contains('\u{1b}'));
            }
            other => panic!("{other:?}"),
        }
        let long_hello = format!(
            "{{\"protocol\":{PROTOCOL_VERSION},\"version\":\"{}\"}}\n",
            "1".repeat(MAX_HELLO_BYTES)
        );
        assert!(matches!(
            classify(Some(0), long_hello.as_bytes(), b""),
            ProbeOutcome::Failed { .. }
        ));
    }
}
