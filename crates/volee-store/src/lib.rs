//! The session store of volee's own agent (ARCHITECTURE.md section 8; layout and guarantees in
//! docs/store.md).
//!
//! One directory per session under the store's root:
//! - `session.json`: the resumable model context and agent state ([`SessionState`]), replaced
//!   atomically (temp file, fsync, rename, fsync of the directory) at each checkpoint;
//! - `meta.json`: the small record listing reads ([`SessionMeta`]), replaced with it;
//! - `transcript.jsonl`: append-only, lossless, one sequence-numbered [`TranscriptLine`] per
//!   event, fsync'd at each checkpoint, secrets redacted; a torn last line is tolerated on read;
//! - `compactions.jsonl`: one [`CompactionRecord`] per compaction;
//! - `lock`: the single writer's `fd-lock`, with its pid.
//!
//! [`Store`] lists, searches, exports, forks and manages sessions; [`WriterSession`] is the one
//! writer of a session, for the agent loop ([`Store::create`], [`Store::open_for_resume`]).
//! Readers never take the lock and never see a half-written file.
//!
//! `volee agent --sync` moves sessions between stores as [`Bundle`]s compared by digest
//! ([`digest_of`]): [`Store::sync_manifest`], [`Store::export_bundle`],
//! [`Store::import_bundle`] (checked, then swapped in compare-and-swap under the writer lock) and
//! [`Store::fork_from_bundle`] (a session changed on both sides arrives as a fork).
//!
//! `volee agent --import FILE` makes an export document a session: [`Store::import`] checks its
//! shape against the typed model ([`parse_export`]; the JSON Schema [`export_schema`] is
//! generated from the same types) and the store's invariants ([`check_export`]), then writes it
//! whole beside the store and renames it into place, with an [`ImportNote`].

mod checkpoint;
mod error;
mod files;
mod fork_project;
mod ids;
mod import;
mod jsonl;
mod lock;
mod model;
pub mod parse;
mod recall;
mod redact;
mod retention;
mod search;
mod store;
mod sync;
mod tags;

pub use checkpoint::{
    check_checkpoint_name, ChangedCall, Checkpoint, ListedCheckpoint, RewindRecord,
    FILE_CHANGING_TOOLS, REWOUND_EVENT,
};
pub use error::{Result, StoreError};
pub use fork_project::REPROJECTED_EVENT;
pub use ids::check_id;
pub use import::{
    check_export, export_schema, export_schema_text, parse_export, ImportOptions, ImportProblem,
    Imported, ParseFailure, MAX_IMPORT_BYTES, MAX_PROBLEMS,
};
pub use jsonl::JsonlRead;
pub use model::{
    CompactionRecord, ExportDocument, ImportNote, Message, PendingToolCall, Role, SessionMeta,
    SessionState, SyncNote, Todo, ToolCall, ToolFunction, TranscriptItem, TranscriptLine, Usage,
    OUTCOME_UNKNOWN, SCHEMA_VERSION,
};
pub use recall::Recalled;
pub use redact::{redact, redact_value, REDACTED};
pub use retention::{
    plan as retention_plan, RetentionAction, RetentionKind, RetentionOutcome, RetentionPolicy,
};
pub use search::{SearchHit, SearchStats, Snippet};
pub use store::{now_ms, Health, Listed, NewSession, SessionInfo, Store, WriterSession};
pub use sync::{digest_of, is_digest, Bundle, ManifestEntry, MAX_BUNDLE_LINE};
pub use tags::{check_tag, MAX_TAGS};

/// Read a session's transcript (tolerant of a torn last line), e.g. for tests and tools.
pub fn read_transcript(store: &Store, id: &str) -> Result<JsonlRead<TranscriptLine>> {
    let dir = store.checked_session_dir(id)?;
    jsonl::read_transcript(id, &dir.join("transcript.jsonl"))
}

/// A time in milliseconds since the epoch as RFC 3339 UTC, to the second.
pub fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}
