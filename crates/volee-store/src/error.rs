//! What can go wrong in the store; every variant names the session or file it is about.

use std::io;
use std::path::PathBuf;

/// A store error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid session id {id:?}: {reason}")]
    InvalidId { id: String, reason: &'static str },
    #[error("no session {id:?}")]
    UnknownId { id: String },
    #[error("session id prefix {prefix:?} is ambiguous: it matches {}", candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("session {id} is in use by another process ({})", holder_text(*pid))]
    Locked { id: String, pid: Option<u32> },
    #[error("session {id} is damaged: {} does not parse ({reason})", path.display())]
    Corrupt {
        id: String,
        path: PathBuf,
        reason: String,
    },
    #[error("session {id} was written by a newer volee (schema version {found}; this volee reads up to {supported})")]
    NewerSchema {
        id: String,
        found: u32,
        supported: u32,
    },
    #[error("session {id} is archived")]
    Archived { id: String },
    #[error("session {id} belongs to project {}, not {}", recorded.display(), given.display())]
    ProjectMismatch {
        id: String,
        recorded: PathBuf,
        given: PathBuf,
    },
    #[error("the transcript of session {id} is damaged at line {line} ({reason})")]
    TranscriptCorrupt {
        id: String,
        line: u64,
        reason: String,
    },
    #[error("session {id} has no pending tool call {call_id:?}")]
    NoPendingToolCall { id: String, call_id: String },
    #[error("{} is {kind}, not a regular file: the store opens only regular files and leaves it as it is", path.display())]
    NotRegularFile { path: PathBuf, kind: &'static str },
    /// `volee agent --sync`: the session here is not the one the other side last saw (a writer
    /// came in between, or it was created or deleted meanwhile); nothing was replaced.
    #[error("session {id} was not replaced: {reason}")]
    SyncConflict { id: String, reason: String },
    /// `volee agent --sync`: a copy of a session that came from elsewhere does not check out
    /// (damaged in transit, or not what volee writes); nothing was written.
    #[error("the copy of session {id} that came is refused: {reason}")]
    BadBundle { id: String, reason: String },
    /// `volee agent --import`: the file is not an export this volee can take (its JSON, its
    /// shape or the store's invariants); the first problems, each at its JSON path. Nothing
    /// was written.
    #[error("refusing to import {}:{}", file.display(), problems_text(problems))]
    ImportRefused {
        file: PathBuf,
        problems: Vec<crate::import::ImportProblem>,
    },
    /// `volee agent --import`: an export of a newer volee; nothing was written.
    #[error("refusing to import {}: it was exported by a newer volee (export schema version {found}; this volee imports up to {supported})", file.display())]
    ImportNewerSchema {
        file: PathBuf,
        found: u32,
        supported: u32,
    },
    /// `volee agent --import --keep-id`: a session with the export's id exists here.
    #[error("session {id} exists here already, so --keep-id cannot keep its id")]
    IdTaken { id: String },
    /// A tag that is not a short word (`[a-z0-9][a-z0-9._-]{0,31}`).
    #[error("invalid tag {tag:?}: {reason}")]
    InvalidTag { tag: String, reason: &'static str },
    /// A checkpoint name that is not a short word (`[A-Za-z0-9._-]{1,64}`).
    #[error("invalid checkpoint name {name:?}: {reason}")]
    InvalidCheckpointName { name: String, reason: &'static str },
    #[error("session {id} has a checkpoint named {name:?} already")]
    CheckpointExists { id: String, name: String },
    #[error("session {id} has no checkpoint {name:?}{}", known_text(known))]
    UnknownCheckpoint {
        id: String,
        name: String,
        known: Vec<String>,
    },
    /// A checkpoint is a turn boundary: no tool call may be waiting for its result.
    #[error("session {id} is in the middle of a turn ({pending} tool call(s) without a recorded result), so it has no turn boundary to checkpoint")]
    CheckpointMidTurn { id: String, pending: usize },
    /// A checkpoint file that volee did not write whole, or that is not this session's; it is
    /// left as it is and never half-read.
    #[error("a checkpoint of session {id} is damaged: {} ({reason})", path.display())]
    CheckpointDamaged {
        id: String,
        path: PathBuf,
        reason: String,
    },
    #[error("refusing {}: {reason}", path.display())]
    Unsafe { path: PathBuf, reason: String },
    #[error("could not {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not encode {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("held by pid {pid}"),
        None => "holder's pid unknown".to_string(),
    }
}

fn problems_text(problems: &[crate::import::ImportProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("\n  at {}: {}", p.path, p.reason))
        .collect()
}

fn known_text(known: &[String]) -> String {
    if known.is_empty() {
        " (it has none)".to_string()
    } else {
        format!(" (it has {})", known.join(", "))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// `map_err` helper: an I/O error about `path` (a refused special file becomes
/// [`StoreError::NotRegularFile`]).
pub(crate) fn io_err(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.into();
    move |source| {
        let not_regular = source
            .get_ref()
            .and_then(|e| e.downcast_ref::<NotRegular>())
            .map(|n| n.0);
        match not_regular {
            Some(kind) => StoreError::NotRegularFile { path, kind },
            None => StoreError::Io {
                action,
                path,
                source,
            },
        }
    }
}

/// The I/O error of an open that found something other than a regular file (what it found).
#[derive(Debug)]
pub(crate) struct NotRegular(pub &'static str);

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "it is {}, not a regular file", self.0)
    }
}

impl std::error::Error for NotRegular {}
