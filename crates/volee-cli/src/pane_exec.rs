//! `volee pane-exec ENV_FILE -- COMMAND…`: the first process of every agent pane.
//!
//! tmux starts panes with the tmux server's environment, not the caller's. The daemon writes the
//! caller's cwd and environment to a private file once the pane is marked (`remain-on-exit`,
//! `@volee-agent`); this waits for it, deletes it, and `exec`s the command with exactly that
//! environment — so no helper process stays behind and an instant exit still leaves its status.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{self, CliError, CliResult};

/// How long a pane waits for the daemon to hand over the environment.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(15);

/// Read the handover file only if it is the user's own private regular file (no symlink): its
/// environment is exec'd with, so a planted one could run anything.
fn read_private(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.uid() != nix::unistd::getuid().as_raw() || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private file of yours (uid {}, mode {:o}); refusing it",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

pub fn run(env_file: &Path, command: &[OsString]) -> CliResult {
    let deadline = Instant::now() + HANDOVER_TIMEOUT;
    let bytes = loop {
        match read_private(env_file) {
            Ok(bytes) => break bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(3));
            }
            Err(e) => return Err(error::handover_unreadable(&e)),
        }
    };
    let _ = std::fs::remove_file(env_file);
    if bytes == volee_daemon::handover::CANCELLED {
        return Err(error::handover_cancelled());
    }
    let mut fields = bytes.split(|&b| b == 0);
    let cwd = OsString::from_vec(fields.next().unwrap_or_default().to_vec());
    let Some((program, args)) = command.split_first() else {
        return Err(CliError::user("pane-exec needs a command"));
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env_clear();
    for field in fields.filter(|f| !f.is_empty()) {
        if let Some(eq) = field.iter().position(|&b| b == b'=') {
            let key = OsString::from_vec(field[..eq].to_vec());
            // The pane's own tmux variables describe where it really runs.
            if key == "TMUX" || key == "TMUX_PANE" {
                continue;
            }
            cmd.env(key, OsString::from_vec(field[eq + 1..].to_vec()));
        }
    }
    for key in ["TMUX", "TMUX_PANE"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    if !cwd.is_empty() {
        cmd.current_dir(&cwd);
    }
    let err = cmd.exec();
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    eprintln!("volee: cannot run {}: {err}", program.to_string_lossy());
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write_mode(path: &Path, mode: u32) {
        std::fs::write(path, b"/\0LD_PRELOAD=/tmp/evil.so\0").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_a_private_env_file_of_our_own_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let own = tmp.path().join("own.env");
        write_mode(&own, 0o600);
        assert!(read_private(&own).is_ok());

        let wide = tmp.path().join("wide.env");
        write_mode(&wide, 0o644);
        assert!(read_private(&wide).is_err(), "a 0644 env file was read");

        let link = tmp.path().join("link.env");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert!(
            read_private(&link).is_err(),
            "a symlinked env file was read"
        );

        if volee_test_support::require_root("an env file owned by another user") {
            let theirs = tmp.path().join("theirs.env");
            write_mode(&theirs, 0o600);
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(
                read_private(&theirs).is_err(),
                "another user's env file was read"
            );
        }
    }
}
