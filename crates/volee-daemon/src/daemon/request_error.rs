//! Why a request failed, and how the client is told: one error type for every request, each
//! kind with its exit class (user, environment, internal) and hints, turned into the protocol's
//! `Response::Error` in one place.

use volee_protocol::{ErrorKind, Response};

use crate::host::HostError;

/// A request that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Resolve(#[from] volee_core::ResolveError),
    #[error("agent {id} has already ended ({state})")]
    Ended { id: String, state: String },
    #[error("agent {id} is not in a tmux pane")]
    NoPane { id: String },
    #[error("agent {id} is still running")]
    StillRunning { id: String },
    #[error("{message}")]
    User { message: String, hints: Vec<String> },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    Environment(String),
}

impl RequestError {
    pub fn user(message: impl Into<String>) -> RequestError {
        RequestError::User {
            message: message.into(),
            hints: Vec::new(),
        }
    }

    /// What the client is told.
    pub fn response(&self) -> Response {
        use volee_tmux::server::TmuxError;
        use volee_zellij::ZellijError;
        let message = self.to_string();
        match self {
            RequestError::Resolve(e) => {
                let hint = match e {
                    volee_core::ResolveError::Unknown { .. } => "list agents with: volee ls --all",
                    volee_core::ResolveError::Ambiguous { .. } => {
                        "type more of the id, or use the exact name"
                    }
                };
                user_error(&message, vec![hint.to_string()])
            }
            RequestError::StillRunning { id } => {
                user_error(&message, vec![format!("stop it first: volee stop {id}")])
            }
            RequestError::Ended { .. } | RequestError::NoPane { .. } => {
                user_error(&message, vec![])
            }
            RequestError::User { hints, .. } => user_error(&message, hints.clone()),
            RequestError::Host(HostError::Tmux(e)) => match e {
                TmuxError::Missing => {
                    env_error("tmux is not installed", e.hint().into_iter().collect())
                }
                TmuxError::NoServer { .. } => env_error(&message, e.hint().into_iter().collect()),
                _ => internal_error(&message),
            },
            RequestError::Host(HostError::Zellij(e)) => {
                let hints = e.hint().into_iter().collect();
                match e {
                    ZellijError::NotInstalled => env_error(&message, hints),
                    ZellijError::NoSession(_) => user_error(&message, hints),
                    _ => internal_error(&message),
                }
            }
            RequestError::Host(HostError::NoSession(_)) => {
                user_error(&message, vec!["list sessions with: tmux ls".into()])
            }
            RequestError::Host(HostError::BadArgument(_)) => user_error(&message, vec![]),
            RequestError::Host(_) | RequestError::Internal(_) => internal_error(&message),
            RequestError::Environment(_) => env_error(&message, vec![]),
        }
    }
}

pub fn user_error(message: &str, hints: Vec<String>) -> Response {
    Response::Error {
        kind: ErrorKind::User,
        message: message.into(),
        hints,
    }
}

fn env_error(message: &str, hints: Vec<String>) -> Response {
    Response::Error {
        kind: ErrorKind::Environment,
        message: message.into(),
        hints,
    }
}

fn internal_error(message: &str) -> Response {
    Response::Error {
        kind: ErrorKind::Internal,
        message: message.into(),
        hints: vec!["see the daemon log: volee.log in the state directory".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_says_its_class_and_hint() {
        let unknown = RequestError::from(volee_core::ResolveError::Unknown { query: "zz".into() });
        let Response::Error { kind, hints, .. } = unknown.response() else {
            panic!("not an error");
        };
        assert_eq!(kind, ErrorKind::User);
        assert_eq!(hints, vec!["list agents with: volee ls --all".to_string()]);
        let missing = RequestError::from(HostError::Tmux(volee_tmux::server::TmuxError::Missing));
        let Response::Error { kind, message, .. } = missing.response() else {
            panic!("not an error");
        };
        assert_eq!(kind, ErrorKind::Environment);
        assert_eq!(message, "tmux is not installed");
        let refused = RequestError::from(HostError::Refused("no such pane".into()));
        let Response::Error {
            kind,
            message,
            hints,
        } = refused.response()
        else {
            panic!("not an error");
        };
        assert_eq!(kind, ErrorKind::Internal);
        assert_eq!(message, "tmux: no such pane");
        assert!(hints[0].contains("volee.log"));
        let running = RequestError::StillRunning { id: "ab12".into() };
        let Response::Error { hints, .. } = running.response() else {
            panic!("not an error");
        };
        assert_eq!(hints, vec!["stop it first: volee stop ab12".to_string()]);
    }
}
