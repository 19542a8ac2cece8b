//! Who runs this command: the tmux server it means, whether it runs inside it, its environment
//! (what an agent it launches gets), whether a terminal is attached.

use std::path::{Path, PathBuf};

/// The tmux server the caller means: `--socket`, else the one it runs in, else tmux's default.
pub fn tmux_socket(explicit: Option<PathBuf>) -> PathBuf {
    explicit.unwrap_or_else(|| {
        volee_tmux::connection::default_socket(
            std::env::var("TMUX").ok().as_deref(),
            std::env::var("TMUX_TMPDIR").ok().as_deref(),
            nix::unistd::getuid().as_raw(),
        )
    })
}

/// Make the directory of tmux's default socket (`/tmp/tmux-UID`, or under `TMUX_TMPDIR`) the
/// way tmux does when it starts a server itself: tmux given `-S` creates no directory, so on a
/// fresh machine (or a fresh login over ssh) the first server volee starts would fail. Only that
/// directory, private; one that exists is left as it is (tmux checks its owner and mode).
pub fn ensure_default_socket_dir(socket: &Path) {
    let uid = nix::unistd::getuid().as_raw();
    let default = volee_tmux::connection::default_socket(
        None,
        std::env::var("TMUX_TMPDIR").ok().as_deref(),
        uid,
    );
    if socket != default {
        return;
    }
    if let Some(dir) = socket.parent().filter(|d| !d.exists()) {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    }
}

/// True when the caller runs inside a pane of the server at `socket`.
pub fn inside_server(socket: &Path) -> bool {
    std::env::var("TMUX")
        .ok()
        .and_then(|t| t.split(',').next().map(PathBuf::from))
        .is_some_and(|s| s == socket)
}

/// The caller's environment (the variables that are text), as an agent it launches gets it.
pub fn env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Is stdin a terminal (one to attach a multiplexer client to)?
/// Ask on the terminal; false on anything but y/yes.
pub fn confirm(question: &str) -> crate::error::CliResult<bool> {
    use std::io::{BufRead, Write};
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| crate::error::CliError::from_error(crate::error::Exit::User, &e))?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

pub fn stdin_is_tty() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}
