//! `volee machine install NAME`: this volee binary copied to a machine, after checking that the
//! machine runs the same OS and architecture and after asking (`--yes` for scripts).
//!
//! Every ssh runs fixed remote command text (nothing of the user's or the machine's is put into
//! it); the binary goes on stdin to a temporary file in `~/.local/bin` that is renamed over
//! `volee` only once its size is right, then the copy's `--version` is asked. Over the kept
//! connection when there is one; a machine without volee has none (its `volee serve` cannot
//! start), so then one ssh connection of its own per step.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use volee_daemon::machines::ssh::{SshMissing, SshOptions};
use volee_daemon::machines::Machine;

use crate::error::{self, CliError, CliResult, Exit};
use crate::output;

/// Where the copy goes: the per-user bin directory many distributions put on the PATH.
const INSTALL_DIR: &str = ".local/bin";
/// What `uname -sm` says, the copy's size, where a non-interactive command finds `volee`.
const ASK_SYSTEM: &str = "uname -sm";
const WRITE_COPY: &str = "umask 077 && mkdir -p \"$HOME/.local/bin\" && cat > \"$HOME/.local/bin/.volee.part\" && wc -c < \"$HOME/.local/bin/.volee.part\"";
const PUT_IN_PLACE: &str = "chmod 755 \"$HOME/.local/bin/.volee.part\" && mv -f \"$HOME/.local/bin/.volee.part\" \"$HOME/.local/bin/volee\" && \"$HOME/.local/bin/volee\" --version";
const DROP_COPY: &str = "rm -f \"$HOME/.local/bin/.volee.part\"";
const FIND_VOLEE: &str = "command -v volee || true";

/// The most read of a step's output.
const MAX_OUTPUT: u64 = 64 * 1024;

/// This binary's OS and architecture as `uname -sm` writes them.
fn local_system() -> String {
    let os = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        other => other,
    };
    format!("{os} {}", std::env::consts::ARCH)
}

/// Does a machine's `uname -sm` name the system this binary is built for? (`arm64` and
/// `aarch64` are one architecture.)
pub fn same_system(local: &str, remote: &str) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .map(|w| match w {
                "arm64" => "aarch64",
                "amd64" => "x86_64",
                w => w,
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    norm(local) == norm(remote)
}

/// One step: `remote_command` on the machine with `stdin`, its stdout (bounded) or why it failed.
fn step(
    options: &SshOptions,
    machine: &Machine,
    control: &Path,
    remote_command: &str,
    stdin: Option<std::fs::File>,
) -> CliResult<String> {
    let mut child = Command::new("ssh")
        .args(options.command_args(machine, control, remote_command))
        .stdin(match stdin {
            Some(f) => Stdio::from(f),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| error::ssh_missing(&SshMissing(e)))?;
    // stderr on a thread of its own: neither pipe may fill while the other is read.
    let stderr = child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            let mut err = Vec::new();
            let _ = e.take(MAX_OUTPUT).read_to_end(&mut err);
            err
        })
    });
    let mut out = Vec::new();
    if let Some(o) = child.stdout.take() {
        let _ = o.take(MAX_OUTPUT).read_to_end(&mut out);
    }
    let err = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let status = child
        .wait()
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    if !status.success() {
        let said: String = String::from_utf8_lossy(&err)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .filter(|c| !c.is_control())
            .take(300)
            .collect();
        return Err(error::install_step_failed(
            &machine.name,
            remote_command,
            &status.to_string(),
            &said,
        ));
    }
    Ok(String::from_utf8_lossy(&out)
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect())
}

/// `volee machine install`.
pub fn install(machine: &Machine, control: &Path, yes: bool) -> CliResult {
    let options = SshOptions::from_process_env();
    let exe: PathBuf =
        std::env::current_exe().map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    let size = std::fs::metadata(&exe)
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?
        .len();
    let remote = step(&options, machine, control, ASK_SYSTEM, None)?;
    let remote = remote.trim();
    let local = local_system();
    if !same_system(&local, remote) {
        return Err(error::install_other_system(&machine.name, remote, &local));
    }
    let target = format!("~/{INSTALL_DIR}/volee");
    if !yes {
        if !crate::caller::stdin_is_tty() {
            return Err(error::install_needs_yes(&machine.name));
        }
        let question = format!(
            "Copy {} ({:.1} MB, volee {}) to {} ({}) as {target}?",
            exe.display(),
            size as f64 / 1e6,
            env!("CARGO_PKG_VERSION"),
            machine.name,
            machine.dest
        );
        if !crate::caller::confirm(&question)? {
            return Err(CliError::user("not installed"));
        }
    }
    let file = std::fs::File::open(&exe).map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    let written = step(&options, machine, control, WRITE_COPY, Some(file))?;
    if written.trim().parse::<u64>().ok() != Some(size) {
        let _ = step(&options, machine, control, DROP_COPY, None);
        return Err(CliError::env(format!(
            "the copy on {} is {} bytes, not {size}: it was removed",
            machine.name,
            written.trim()
        )));
    }
    let version = step(&options, machine, control, PUT_IN_PLACE, None)?;
    let expected = format!("volee {}", env!("CARGO_PKG_VERSION"));
    if !version.lines().any(|l| l.trim() == expected) {
        return Err(CliError::env(format!(
            "the copy on {} does not run as {expected} (it said {:?})",
            machine.name,
            version.trim()
        )));
    }
    output::out(&format!(
        "installed {expected} on {} as {target}",
        machine.name
    ));
    let found = step(&options, machine, control, FIND_VOLEE, None)?;
    let found = found.trim();
    if !found.ends_with(&format!("{INSTALL_DIR}/volee")) {
        output::out(&format!(
            "note: a non-interactive ssh command on {} finds {}; put ~/{INSTALL_DIR} first on the PATH there (e.g. in ~/.bashrc before its interactive check, or ~/.ssh/environment if the server allows it)",
            machine.name,
            if found.is_empty() { "no volee".to_string() } else { found.to_string() }
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systems_match_by_os_and_architecture() {
        assert!(same_system("Linux x86_64", "Linux x86_64\n"));
        assert!(same_system("Linux aarch64", "Linux arm64"));
        assert!(same_system("Darwin aarch64", "Darwin arm64"));
        assert!(!same_system("Linux x86_64", "Linux aarch64"));
        assert!(!same_system("Linux x86_64", "Darwin x86_64"));
        assert!(!same_system("Linux x86_64", ""));
        assert!(same_system(&local_system(), &local_system()));
    }
}
