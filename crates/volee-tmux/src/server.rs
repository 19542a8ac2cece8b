//! One-shot tmux commands against one server (`tmux -S SOCKET …`), for the CLI and for the
//! daemon's rare structural work (launch, resync). Steady-state traffic goes over a
//! [`crate::connection::ControlConnection`] instead, so watching agents spawns nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A tmux command that failed.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error("tmux is not installed (no `tmux` on PATH)")]
    Missing,
    #[error("could not run tmux")]
    Spawn(#[source] std::io::Error),
    #[error("tmux {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("no tmux server is running on {}", socket.display())]
    NoServer { socket: PathBuf },
}

impl TmuxError {
    /// What to do about it: the one spelling every volee process gives.
    pub fn hint(&self) -> Option<String> {
        match self {
            TmuxError::Missing => Some(INSTALL_HINT.into()),
            TmuxError::NoServer { .. } => {
                Some("start one with `volee up`, or run volee inside tmux".into())
            }
            _ => None,
        }
    }
}

/// How to get tmux.
pub const INSTALL_HINT: &str = "install it: sudo apt-get install tmux (Debian/Ubuntu), sudo dnf install tmux (Fedora), brew install tmux (macOS)";

/// A tmux server, addressed by its socket path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmuxServer {
    socket: PathBuf,
}

impl TmuxServer {
    pub fn new(socket: impl Into<PathBuf>) -> TmuxServer {
        TmuxServer {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `tmux -u -S SOCKET` with the caller's `TMUX` removed, so it never refuses to nest and
    /// never talks to another server. `-u`: what tmux prints is UTF-8 whatever the locale — in a
    /// C locale (a fresh Debian, a container) tmux otherwise prints `_` for every control
    /// character and every non-ASCII one, the field separator of volee's formats and accented
    /// names included (seen on a fresh Debian 12: `new-window -P -F` printed `@1_%1`).
    pub fn command(&self) -> Command {
        let mut cmd = self.client_command();
        cmd.arg("-u");
        cmd
    }

    /// [`TmuxServer::command`] without `-u`, for a client the user sees (`attach-session`): tmux
    /// then draws for the user's own terminal as their locale says.
    pub fn client_command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S")
            .arg(&self.socket)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE");
        cmd
    }

    /// Same as [`TmuxServer::command`] for async callers.
    pub fn command_async(&self) -> tokio::process::Command {
        tokio::process::Command::from(self.command())
    }

    /// Run one command, returning stdout. Every argument arrives verbatim (see [`literal_arg`]).
    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> Result<String, TmuxError> {
        self.run_commands(&[args])
    }

    /// Run several commands in one tmux invocation (joined by `;`), returning stdout.
    pub fn run_commands<S: AsRef<str>>(&self, commands: &[&[S]]) -> Result<String, TmuxError> {
        let argv = join_commands(commands);
        let output = self
            .command()
            .args(&argv)
            .stdin(Stdio::null())
            .output()
            .map_err(spawn_error)?;
        self.check(&argv, output)
    }

    /// Run one command asynchronously, returning stdout.
    pub async fn run_async<S: AsRef<str>>(&self, args: &[S]) -> Result<String, TmuxError> {
        self.run_commands_async(&[args]).await
    }

    /// Run several commands asynchronously in one tmux invocation.
    pub async fn run_commands_async<S: AsRef<str>>(
        &self,
        commands: &[&[S]],
    ) -> Result<String, TmuxError> {
        let argv = join_commands(commands);
        let output = self
            .command_async()
            .args(&argv)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(spawn_error)?;
        self.check(&argv, output)
    }

    fn check(&self, args: &[String], output: Output) -> Result<String, TmuxError> {
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if server_gone(&stderr) {
            return Err(TmuxError::NoServer {
                socket: self.socket.clone(),
            });
        }
        Err(TmuxError::Failed {
            command: args.first().cloned().unwrap_or_default(),
            stderr,
        })
    }

    /// True when a server answers on the socket.
    pub fn is_running(&self) -> bool {
        self.socket.exists() && self.run(&["list-sessions", "-F", "#{session_id}"]).is_ok()
    }

    /// True when the server has a session with exactly this name.
    pub fn has_session(&self, name: &str) -> bool {
        self.run(&["has-session", "-t", &format!("={name}")])
            .is_ok()
    }
}

/// Does a tmux client's stderr say there is no server (none running, or one that went away while
/// the client talked to it)? A server being killed answers a command that reached it with
/// `server exited unexpectedly` (seen: the daemon's pane listing racing `tmux kill-server`; taken
/// for an ordinary failure, the lost server's agents were never marked stopped).
fn server_gone(stderr: &str) -> bool {
    [
        "no server running",
        "error connecting to",
        "No such file or directory",
        "server exited unexpectedly",
        "lost server",
    ]
    .iter()
    .any(|said| stderr.contains(said))
}

/// tmux reads an argv argument that ends in `;` as the end of a command (`set @t 'a;'` stores
/// `a`); a `\` before that `;` makes it literal. This keeps every argument verbatim.
pub fn literal_arg(arg: &str) -> String {
    match arg.strip_suffix(';') {
        Some(head) => format!("{head}\\;"),
        None => arg.to_string(),
    }
}

fn join_commands<S: AsRef<str>>(commands: &[&[S]]) -> Vec<String> {
    let mut argv = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        if i > 0 {
            argv.push(";".to_string());
        }
        argv.extend(command.iter().map(|a| literal_arg(a.as_ref())));
    }
    argv
}

fn spawn_error(e: std::io::Error) -> TmuxError {
    if e.kind() == std::io::ErrorKind::NotFound {
        TmuxError::Missing
    } else {
        TmuxError::Spawn(e)
    }
}

/// The installed tmux version (`tmux -V`), or [`TmuxError::Missing`].
pub fn version() -> Result<String, TmuxError> {
    let out = Command::new("tmux")
        .arg("-V")
        .stdin(Stdio::null())
        .output()
        .map_err(spawn_error)?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_semicolons_are_escaped() {
        assert_eq!(literal_arg("a;"), "a\\;");
        assert_eq!(literal_arg(";"), "\\;");
        assert_eq!(literal_arg("a\\;"), "a\\\\;");
        assert_eq!(literal_arg("a;b"), "a;b");
        let argv = join_commands(&[&["set", "-g", "@a", "x;"][..], &["show", "-gv", "@a"][..]]);
        assert_eq!(argv, ["set", "-g", "@a", "x\\;", ";", "show", "-gv", "@a"]);
    }

    #[test]
    fn a_server_that_went_away_is_no_server() {
        for said in [
            "no server running on /tmp/tmux-0/default",
            "error connecting to /tmp/x (Connection refused)",
            "server exited unexpectedly",
            "lost server",
        ] {
            assert!(server_gone(said), "{said}");
        }
        assert!(!server_gone("can't find session: main"));
    }

    /// The rule checked against the real tmux: values ending in `;` (and a lone `;`) survive argv.
    #[test]
    fn argv_values_arrive_verbatim_in_real_tmux() {
        if volee_os::program::find("tmux").is_none() {
            assert!(std::env::var_os("CI").is_none(), "tmux is required in CI");
            eprintln!("SKIPPED: tmux not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let server = TmuxServer::new(dir.path().join("sock"));
        server
            .run(&["-f", "/dev/null", "new-session", "-d", "-s", "t"])
            .unwrap();
        for value in ["a;", ";", "a\\;", "x ; y", "#{pane_id};", "it's \"q\";"] {
            server.run(&["set-option", "-g", "@t", value]).unwrap();
            let back = server.run(&["show-option", "-gv", "@t"]).unwrap();
            assert_eq!(back.trim_end_matches('\n'), value);
        }
        let _ = server.run(&["kill-server"]);
    }
}
