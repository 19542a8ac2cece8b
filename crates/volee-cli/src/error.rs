//! CLI errors: a message, its causes, `hint:` lines, and the exit code of CLI.md.

use volee_protocol::{ErrorKind, Response};

/// Exit codes of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A negative answer (e.g. `wait` timed out).
    Negative = 1,
    /// Usage or user error (unknown id, bad flag).
    User = 2,
    /// The environment lacks something (no tmux).
    Environment = 3,
    /// Internal error.
    Internal = 4,
    /// `wait`: the agent ended in another final state.
    Unreachable = 5,
}

/// An error the CLI prints and exits with.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> CliError {
        CliError {
            exit,
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
        }
    }

    pub fn user(message: impl Into<String>) -> CliError {
        CliError::new(Exit::User, message)
    }

    pub fn env(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Environment, message)
    }

    pub fn internal(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Internal, message)
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    /// An error with its source chain as causes.
    pub fn from_error(exit: Exit, err: &(dyn std::error::Error + 'static)) -> CliError {
        let mut e = CliError::new(exit, err.to_string());
        let mut source = err.source();
        while let Some(s) = source {
            e.causes.push(s.to_string());
            source = s.source();
        }
        e
    }

    /// The daemon's error response.
    pub fn from_response(resp: Response) -> CliError {
        match resp {
            Response::Error {
                kind,
                message,
                hints,
            } => CliError {
                exit: match kind {
                    ErrorKind::User => Exit::User,
                    ErrorKind::Environment => Exit::Environment,
                    ErrorKind::Internal => Exit::Internal,
                },
                message,
                causes: Vec::new(),
                hints,
            },
            other => CliError::internal(format!("unexpected answer from the daemon: {other:?}")),
        }
    }

    pub fn print(&self) {
        eprintln!("error: {}", self.message);
        for cause in &self.causes {
            eprintln!("  caused by: {cause}");
        }
        for hint in &self.hints {
            eprintln!("hint: {hint}");
        }
    }
}

impl From<volee_daemon::ClientError> for CliError {
    fn from(e: volee_daemon::ClientError) -> CliError {
        use volee_daemon::ClientError;
        match &e {
            ClientError::Dirs(p) | ClientError::Untrusted(p) if p.is_untrusted() => {
                CliError::from_error(Exit::Environment, &e).hint(untrusted_path_hint(p))
            }
            ClientError::Dirs(_) => CliError::from_error(Exit::Environment, &e),
            ClientError::ForeignDaemon { path, .. } => {
                CliError::from_error(Exit::Environment, &e).hint(format!(
                    "volee talks only to a daemon of your own: set XDG_RUNTIME_DIR to a private directory of yours, or remove {path}"
                ))
            }
            // Exit 3: the daemon volee depends on is in a state outside this command (stopped by
            // a signal or a debugger), like a missing tmux server.
            ClientError::NotAnswering { pid, .. } => {
                let err = CliError::from_error(Exit::Environment, &e);
                match pid {
                    Some(pid) => err
                        .hint(format!("if it was stopped (Ctrl-Z, SIGSTOP), resume it: kill -CONT {pid}"))
                        .hint("or restart it: volee daemon stop (the next command starts a new one)"),
                    None => err.hint("restart it: volee daemon stop (the next command starts a new one)"),
                }
            }
            _ => CliError::from_error(Exit::Internal, &e)
                .hint("check the daemon log (volee.log in the state directory), or restart it: volee daemon stop"),
        }
    }
}

/// A directory or file volee will not use (exit 3, with what to do), or could not create.
pub fn path_error(e: &volee_daemon::paths::PathError) -> CliError {
    let err = CliError::from_error(Exit::Environment, e);
    if e.is_untrusted() {
        err.hint(untrusted_path_hint(e))
    } else {
        err
    }
}

/// What to do about a directory, socket or file someone else could have planted.
pub fn untrusted_path_hint(e: &volee_daemon::paths::PathError) -> String {
    use volee_daemon::paths::PathError;
    let path = e.path().display();
    let what = match e {
        PathError::ForeignOwner { owner, .. } => format!("{path} (owned by uid {owner})"),
        _ => path.to_string(),
    };
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|v| !v.is_empty())
        || std::env::var_os("VOLEE_HOME").is_some_and(|v| !v.is_empty())
    {
        format!("volee uses only what you own: remove {what}, or point VOLEE_HOME / the XDG_* variables at a private directory of yours")
    } else {
        format!("set XDG_RUNTIME_DIR to a private directory of yours (e.g. /run/user/$(id -u)), or remove {what}")
    }
}

impl From<volee_tmux::server::TmuxError> for CliError {
    fn from(e: volee_tmux::server::TmuxError) -> CliError {
        use volee_tmux::server::TmuxError;
        match &e {
            TmuxError::Missing => tmux_missing(),
            TmuxError::NoServer { .. } => {
                CliError::from_error(Exit::Environment, &e).hint("start one with `volee up`")
            }
            _ => CliError::from_error(Exit::Internal, &e),
        }
    }
}

/// The one message for a machine without tmux.
pub fn tmux_missing() -> CliError {
    CliError::env("tmux is not installed (no `tmux` on PATH)")
        .hint("install it: sudo apt-get install tmux (Debian/Ubuntu), sudo dnf install tmux (Fedora), brew install tmux (macOS)")
}
