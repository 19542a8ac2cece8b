//! `volee agent --import FILE`: an export document (`volee agent --export`) made a session of
//! this store (docs/store.md, "Import").
//!
//! The file is checked whole before anything is written:
//! - its shape, by deserialising it into the typed model ([`ExportDocument`]) — the same types
//!   `docs/session-export.schema.json` is generated from ([`export_schema`]), so the schema and
//!   this check cannot drift apart — with the JSON path of the first error;
//! - the store's invariants ([`check_export`]): transcript lines numbered 1, 2, 3, … without
//!   gaps, tool call ids unique, every tool call answered exactly once (or pending, or made in
//!   the turn the session stopped in), the context a subsequence of the transcript's messages,
//!   compactions naming compaction lines, a valid session id.
//!
//! Then the session is written whole beside the store and renamed into place
//! ([`Store::import_bundle`], the path `--sync` takes), so a refusal or a crash never leaves a
//! half-imported session.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{io_err, Result, StoreError};
use crate::files::{check_real_dir, open_read};
use crate::ids::{check_id, new_id};
use crate::model::{
    ExportDocument, ImportNote, Role, SessionState, TranscriptItem, TranscriptLine,
    OUTCOME_UNKNOWN, SCHEMA_VERSION,
};
use crate::store::{now_ms, Store};
use crate::sync::{digest_of, Bundle};

/// The largest export `--import` reads (a generous bound: exports are text, and a session's
/// context is bounded by compaction).
pub const MAX_IMPORT_BYTES: u64 = 512 << 20;

/// How many problems a refusal lists at most.
pub const MAX_PROBLEMS: usize = 5;

/// One reason an export is refused, at the JSON path it is about (`$.transcript[3].seq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportProblem {
    pub path: String,
    pub reason: String,
}

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The project directory the session works on here (default: the export's); it must exist.
    pub project_root: Option<PathBuf>,
    /// Keep the export's session id (refused when a session here has it).
    pub keep_id: bool,
    /// Files larger than this are refused unread.
    pub max_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            project_root: None,
            keep_id: false,
            max_bytes: MAX_IMPORT_BYTES,
        }
    }
}

/// What an import made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    pub id: String,
    pub original_id: String,
    pub project_root: PathBuf,
    pub messages: u64,
    pub transcript_lines: u64,
    /// The export held transcript lines after its last checkpoint: they are kept, followed by
    /// a `recovered` line, and the context is the checkpoint's (as a writer resuming it would).
    pub recovered_tail: bool,
}

/// The JSON Schema of the export document, generated from the types (published as
/// `docs/session-export.schema.json`).
pub fn export_schema() -> schemars::Schema {
    schemars::schema_for!(ExportDocument)
}

/// [`export_schema`] as the text of `docs/session-export.schema.json` (pretty, newline-ended).
pub fn export_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&export_schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Why an export did not parse.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseFailure {
    /// Exported by a newer volee (its `schema_version`).
    Newer(u32),
    Problem(ImportProblem),
}

/// Only the schema versions, to tell "newer" from "malformed" when a document does not parse.
#[derive(serde::Deserialize)]
struct VersionProbe {
    schema_version: u32,
    #[serde(default)]
    session: Option<SessionVersionProbe>,
}

#[derive(serde::Deserialize)]
struct SessionVersionProbe {
    schema_version: u32,
}

/// Parse an export, checking its shape against the model (= the schema); the first error with
/// its JSON path. A document or session of a newer schema version is [`ParseFailure::Newer`].
pub fn parse_export(bytes: &[u8]) -> Result<ExportDocument, ParseFailure> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde_path_to_error::deserialize::<_, ExportDocument>(&mut de)
        .map_err(|e| (json_path(&e.path().to_string()), e.into_inner()))
        .and_then(|doc| de.end().map(|()| doc).map_err(|e| ("$".to_string(), e)));
    match parsed {
        Ok(doc) => match newer(doc.schema_version, doc.session.schema_version) {
            Some(found) => Err(ParseFailure::Newer(found)),
            None => Ok(doc),
        },
        Err((path, error)) => {
            if let Ok(probe) = serde_json::from_slice::<VersionProbe>(bytes) {
                let session = probe.session.map_or(0, |s| s.schema_version);
                if let Some(found) = newer(probe.schema_version, session) {
                    return Err(ParseFailure::Newer(found));
                }
            }
            Err(ParseFailure::Problem(ImportProblem::new(
                path,
                &error.to_string(),
            )))
        }
    }
}

fn newer(document: u32, session: u32) -> Option<u32> {
    let found = document.max(session);
    (found > SCHEMA_VERSION).then_some(found)
}

/// serde_path_to_error's path (`transcript[3].seq`, `.` for the root) as a JSON path.
fn json_path(path: &str) -> String {
    match path {
        "" | "." => "$".into(),
        p if p.starts_with('[') => format!("${p}"),
        p => format!("$.{p}"),
    }
}

/// Problems found so far, at most [`MAX_PROBLEMS`].
struct Problems(Vec<ImportProblem>);

impl Problems {
    fn push(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        if self.0.len() < MAX_PROBLEMS {
            self.0.push(ImportProblem::new(path.into(), &reason.into()));
        }
    }
}

/// The longest reason or path a problem keeps (they quote the file).
const PROBLEM_TEXT_MAX: usize = 400;

impl ImportProblem {
    /// A problem whose texts, which may quote the file, are bounded and free of control
    /// characters (they are printed on a terminal).
    fn new(path: String, reason: &str) -> ImportProblem {
        let clean = |text: &str| -> String {
            let mut out: String = text
                .chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .take(PROBLEM_TEXT_MAX)
                .collect();
            if text.chars().count() > PROBLEM_TEXT_MAX {
                out.push('…');
            }
            out
        };
        ImportProblem {
            path: clean(&path),
            reason: clean(reason),
        }
    }
}

/// A tool call made in the transcript.
struct Call<'a> {
    /// Index of its transcript line.
    line: usize,
    path: String,
    id: Option<&'a str>,
    name: &'a str,
    /// Index of the transcript line that answered it.
    answered_at: Option<usize>,
}

impl Call<'_> {
    fn label(&self) -> String {
        match self.id {
            Some(id) => format!("{id:?}"),
            None => format!("of tool {:?} (no id)", self.name),
        }
    }
}

/// The store's invariants over a parsed export; the first problems (at most [`MAX_PROBLEMS`]),
/// empty when it can be imported.
pub fn check_export(doc: &ExportDocument) -> Vec<ImportProblem> {
    let mut problems = Problems(Vec::new());
    let session = &doc.session;
    let lines = &doc.transcript;
    if let Err(e) = check_id(&session.id) {
        problems.push("$.session.id", e.to_string());
    }
    let numbered = check_numbering(lines, &mut problems);
    let total = lines.len() as u64;
    if session.last_seq > total {
        problems.push(
            "$.session.last_seq",
            format!(
                "the session's checkpoint covers transcript line {} but the transcript has {total} lines",
                session.last_seq
            ),
        );
    }
    // Lines `..checkpoint` are the ones the session's state was checkpointed with.
    let checkpoint = session.last_seq.min(total) as usize;
    for (i, c) in doc.compactions.iter().enumerate() {
        let path = format!("$.compactions[{i}].seq");
        if c.seq == 0 || c.seq > total {
            problems.push(
                path,
                format!(
                    "it is the compaction of transcript line {}, which the transcript does not have",
                    c.seq
                ),
            );
        } else if numbered
            && !matches!(
                lines[(c.seq - 1) as usize].item,
                TranscriptItem::Compaction { .. }
            )
        {
            problems.push(
                path,
                format!(
                    "transcript line {} is not a compaction, so this record names no compaction",
                    c.seq
                ),
            );
        }
    }
    check_tool_calls(doc, checkpoint, &mut problems);
    check_context(doc, checkpoint, &mut problems);
    problems.0
}

/// Lines numbered 1, 2, 3, … without gaps (only the first break is reported: every later line is
/// off by then). Whether they are.
fn check_numbering(lines: &[TranscriptLine], problems: &mut Problems) -> bool {
    for (i, line) in lines.iter().enumerate() {
        let due = i as u64 + 1;
        if line.seq == due {
            continue;
        }
        let before = i.checked_sub(1).map(|b| lines[b].seq);
        let why = match before {
            Some(b) if b == line.seq => {
                format!("sequence number {} repeats the line before", line.seq)
            }
            Some(b) if line.seq < b => format!(
                "sequence number {} after {b}: sequence numbers must increase",
                line.seq
            ),
            _ => format!(
                "sequence number {} where {due} was due (lines are numbered 1, 2, 3, … without gaps)",
                line.seq
            ),
        };
        problems.push(format!("$.transcript[{i}].seq"), why);
        return false;
    }
    true
}

/// Every tool call answered exactly once: by a later `tool` message naming its id (a call
/// without an id: the next `tool` message naming its tool). A call may stay unanswered when the
/// session has it pending, when it was made in the turn the session stopped in (resume answers
/// it), or after the checkpoint. A second answer is allowed only as the "outcome unknown" a
/// resume gives after a `recovered` line (a writer killed between its transcript and its state).
fn check_tool_calls(doc: &ExportDocument, checkpoint: usize, problems: &mut Problems) {
    let mut calls: Vec<Call> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut open_by_name: HashMap<&str, VecDeque<usize>> = HashMap::new();
    // Every call without an id, by tool name, in order (pending ones are matched against them).
    let mut idless_by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut last_recovered: Option<usize> = None;
    let mut last_user: Option<usize> = None;
    for (i, line) in doc.transcript.iter().enumerate() {
        let message = match &line.item {
            TranscriptItem::Recovered { .. } => {
                last_recovered = Some(i);
                continue;
            }
            TranscriptItem::Message { message } => message,
            _ => continue,
        };
        let path = format!("$.transcript[{i}].item.message");
        match message.role {
            Role::User if i < checkpoint => last_user = Some(i),
            Role::Assistant => {
                for (j, call) in message.tool_calls.iter().enumerate() {
                    let call_path = format!("{path}.tool_calls[{j}]");
                    let index = calls.len();
                    match call.id.as_deref() {
                        Some(id) => {
                            if let Some(&k) = by_id.get(id) {
                                problems.push(
                                    format!("{call_path}.id"),
                                    format!(
                                        "tool call id {id:?} was used before, at transcript line {} (tool call ids are unique)",
                                        calls[k].line + 1
                                    ),
                                );
                                continue;
                            }
                            by_id.insert(id, index);
                        }
                        None => {
                            let name = call.function.name.as_str();
                            open_by_name.entry(name).or_default().push_back(index);
                            idless_by_name.entry(name).or_default().push(index);
                        }
                    }
                    calls.push(Call {
                        line: i,
                        path: call_path,
                        id: call.id.as_deref(),
                        name: &call.function.name,
                        answered_at: None,
                    });
                }
            }
            Role::Tool => match (&message.tool_call_id, &message.tool_name) {
                (Some(id), _) => match by_id.get(id.as_str()) {
                    None => problems.push(
                        format!("{path}.tool_call_id"),
                        format!(
                            "it answers tool call {id:?}, which no earlier assistant message made"
                        ),
                    ),
                    Some(&k) => match calls[k].answered_at {
                        None => calls[k].answered_at = Some(i),
                        Some(first) => {
                            let after_recovery = message.content == OUTCOME_UNKNOWN
                                && last_recovered.is_some_and(|r| r > first);
                            if !after_recovery {
                                problems.push(
                                    format!("{path}.tool_call_id"),
                                    format!(
                                        "it answers tool call {id:?} a second time (first at transcript line {}); every call is answered once",
                                        first + 1
                                    ),
                                );
                            }
                        }
                    },
                },
                (None, Some(name)) => {
                    match open_by_name
                        .get_mut(name.as_str())
                        .and_then(VecDeque::pop_front)
                    {
                        Some(k) => calls[k].answered_at = Some(i),
                        None => problems.push(
                            format!("{path}.tool_name"),
                            format!("it answers a call of tool {name:?} without an id, but no such call is waiting for an answer"),
                        ),
                    }
                }
                (None, None) => problems.push(
                    path,
                    "a tool message that names no tool call (neither tool_call_id nor tool_name)",
                ),
            },
            _ => {}
        }
    }
    // Pending calls: made in the transcript and not answered before the checkpoint.
    let mut pending: HashSet<usize> = HashSet::new();
    // Pending calls without an id take the calls of their tool not answered before the
    // checkpoint, in order.
    let mut idless_cursor: HashMap<&str, usize> = HashMap::new();
    for (j, p) in doc.session.pending_tool_calls.iter().enumerate() {
        let path = format!("$.session.pending_tool_calls[{j}].call");
        let found = match p.call.id.as_deref() {
            Some(id) => by_id.get(id).copied(),
            None => {
                let name = p.call.function.name.as_str();
                let all = idless_by_name.get(name).map(Vec::as_slice).unwrap_or(&[]);
                let cursor = idless_cursor.entry(name).or_insert(0);
                while all
                    .get(*cursor)
                    .is_some_and(|&k| calls[k].answered_at.is_some_and(|a| a < checkpoint))
                {
                    *cursor += 1;
                }
                let found = all.get(*cursor).copied();
                *cursor += 1;
                found
            }
        };
        match found {
            None => problems.push(
                path,
                format!(
                    "pending tool call {} is not a call of the transcript",
                    p.call.id.as_deref().unwrap_or(&p.call.function.name)
                ),
            ),
            Some(k) => match calls[k].answered_at.filter(|&a| a < checkpoint) {
                Some(a) => problems.push(
                    path,
                    format!(
                        "tool call {} is pending but was answered at transcript line {}",
                        calls[k].label(),
                        a + 1
                    ),
                ),
                None => {
                    pending.insert(k);
                }
            },
        }
    }
    // Calls made after the last user message (up to the checkpoint): the turn the session
    // stopped in; resuming answers them ("not started").
    let turn_start = last_user.map_or(0, |u| u + 1);
    for (k, c) in calls.iter().enumerate() {
        if c.answered_at.is_none()
            && !pending.contains(&k)
            && c.line < checkpoint
            && c.line < turn_start
        {
            problems.push(
                c.path.clone(),
                format!(
                    "tool call {} (transcript line {}) is never answered, and the session does not have it pending",
                    c.label(),
                    c.line + 1
                ),
            );
        }
    }
}

/// The context is a subsequence of the transcript's messages up to the checkpoint, except what
/// a compaction put there: one user message holding a compaction's summary (a later compaction
/// summarises the earlier summary away, so a context holds at most one) and the assistant's
/// plain acknowledgement right after it.
fn check_context(doc: &ExportDocument, checkpoint: usize, problems: &mut Problems) {
    let lines = &doc.transcript[..checkpoint.min(doc.transcript.len())];
    let summaries: Vec<&str> = lines
        .iter()
        .filter_map(|l| match &l.item {
            TranscriptItem::Compaction { record } if !record.summary.is_empty() => {
                Some(record.summary.as_str())
            }
            _ => None,
        })
        .collect();
    let find = |from: usize, m: &crate::model::Message| {
        lines[from..]
            .iter()
            .position(|l| matches!(&l.item, TranscriptItem::Message { message } if message == m))
            .map(|p| from + p)
    };
    let mut next = 0usize;
    let mut summary_seen = false;
    let mut after_summary = false;
    // Each message not found costs a scan to the end: at most three (summary,
    // acknowledgement, the refused one).
    for (i, m) in doc.session.messages.iter().enumerate() {
        if let Some(at) = find(next, m) {
            next = at + 1;
            after_summary = false;
            continue;
        }
        if !summary_seen && m.role == Role::User && summaries.iter().any(|s| m.content.contains(s))
        {
            summary_seen = true;
            after_summary = true;
            continue;
        }
        if after_summary && m.role == Role::Assistant && m.tool_calls.is_empty() {
            after_summary = false;
            continue;
        }
        problems.push(
            format!("$.session.messages[{i}]"),
            "this context message is not in the transcript (the transcript holds every message of the context, in order, up to the checkpoint)",
        );
        return;
    }
}

impl Store {
    /// Import an export document from `file` as a new session (docs/store.md, "Import"). The
    /// file is read only if it is a regular file no larger than `opts.max_bytes`, parsed against
    /// the model and checked against the store's invariants ([`check_export`]); a refusal
    /// ([`StoreError::ImportRefused`], [`StoreError::ImportNewerSchema`],
    /// [`StoreError::IdTaken`]) writes nothing. The session is written whole beside the store
    /// and renamed into place, with [`ImportNote`] as its provenance.
    pub fn import(&self, file: &Path, opts: &ImportOptions) -> Result<Imported> {
        let refuse = |path: &str, reason: String| StoreError::ImportRefused {
            file: file.to_path_buf(),
            problems: vec![ImportProblem::new(path.to_string(), &reason)],
        };
        let too_large = |len: u64| {
            refuse(
                "$",
                format!(
                    "the file is {len} bytes or more; volee imports exports of up to {} bytes ({} MiB)",
                    opts.max_bytes,
                    opts.max_bytes >> 20
                ),
            )
        };
        let input = open_read(file).map_err(io_err("read", file))?;
        let len = input.metadata().map_err(io_err("read", file))?.len();
        if len > opts.max_bytes {
            return Err(too_large(len));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        // Bounded even if the file grows while it is read.
        input
            .take(opts.max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(io_err("read", file))?;
        if bytes.len() as u64 > opts.max_bytes {
            return Err(too_large(bytes.len() as u64));
        }
        let doc = match parse_export(&bytes) {
            Ok(doc) => doc,
            Err(ParseFailure::Newer(found)) => {
                return Err(StoreError::ImportNewerSchema {
                    file: file.to_path_buf(),
                    found,
                    supported: SCHEMA_VERSION,
                })
            }
            Err(ParseFailure::Problem(p)) => {
                return Err(StoreError::ImportRefused {
                    file: file.to_path_buf(),
                    problems: vec![p],
                })
            }
        };
        drop(bytes);
        let problems = check_export(&doc);
        if !problems.is_empty() {
            return Err(StoreError::ImportRefused {
                file: file.to_path_buf(),
                problems,
            });
        }
        let project_root = match &opts.project_root {
            Some(dir) if dir.is_dir() => std::fs::canonicalize(dir).map_err(io_err("read", dir))?,
            Some(dir) => {
                return Err(refuse(
                    "--project",
                    format!("{} is not a directory here", dir.display()),
                ))
            }
            None if doc.session.project_root.is_dir() => doc.session.project_root.clone(),
            None => {
                return Err(refuse(
                    "$.session.project_root",
                    format!(
                        "the project directory {} does not exist here (give the one to use: --project DIR)",
                        doc.session.project_root.display()
                    ),
                ))
            }
        };
        let original_id = doc.session.id.clone();
        if opts.keep_id && check_real_dir(&self.session_dir(&original_id))? {
            return Err(StoreError::IdTaken { id: original_id });
        }
        let (mut bundle, state, recovered_tail) = build(doc, file, project_root)?;
        let imported = Imported {
            id: String::new(),
            original_id: original_id.clone(),
            project_root: state.project_root.clone(),
            messages: state.messages.len() as u64,
            transcript_lines: state.last_seq,
            recovered_tail,
        };
        for _ in 0..8 {
            let id = if opts.keep_id {
                original_id.clone()
            } else {
                new_id()
            };
            if !opts.keep_id && check_real_dir(&self.session_dir(&id))? {
                continue;
            }
            let state = SessionState {
                id: id.clone(),
                ..state.clone()
            };
            bundle.session_json =
                serde_json::to_string(&state).map_err(|source| StoreError::Encode {
                    path: file.to_path_buf(),
                    source,
                })?;
            bundle.digest = digest_of(
                bundle.session_json.as_bytes(),
                bundle.transcript.as_bytes(),
                bundle.compactions.as_bytes(),
            );
            bundle.id = id.clone();
            match self.import_bundle(&bundle, None) {
                Ok(_) => return Ok(Imported { id, ..imported }),
                // The id was taken between the check and the rename.
                Err(StoreError::SyncConflict { .. }) if opts.keep_id => {
                    return Err(StoreError::IdTaken { id })
                }
                Err(StoreError::SyncConflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Io {
            action: "find a free id under",
            path: self.root().to_path_buf(),
            source: std::io::Error::other("eight random ids were all taken"),
        })
    }
}

/// The session's files from a checked export: the transcript re-encoded line by line (with a
/// `recovered` line when the export has lines after its checkpoint, so the checkpoint covers
/// everything), the compactions, and the state with its provenance (id set by the caller);
/// whether a `recovered` line was added.
fn build(
    doc: ExportDocument,
    file: &Path,
    project_root: PathBuf,
) -> Result<(Bundle, SessionState, bool)> {
    let now = now_ms();
    let encode_err = |source| StoreError::Encode {
        path: file.to_path_buf(),
        source,
    };
    let mut lines = doc.transcript;
    let total = lines.len() as u64;
    let recovered_tail = total > doc.session.last_seq;
    if recovered_tail {
        lines.push(TranscriptLine {
            seq: total + 1,
            at_ms: now,
            item: TranscriptItem::Recovered {
                checkpoint_seq: doc.session.last_seq,
                last_seq: total,
            },
        });
    }
    let mut transcript = Vec::new();
    for line in &lines {
        serde_json::to_writer(&mut transcript, line).map_err(encode_err)?;
        transcript.push(b'\n');
    }
    let mut compactions = Vec::new();
    for record in &doc.compactions {
        serde_json::to_writer(&mut compactions, record).map_err(encode_err)?;
        compactions.push(b'\n');
    }
    let text = |bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|e| StoreError::Encode {
            path: file.to_path_buf(),
            source: serde::ser::Error::custom(e),
        })
    };
    let state = SessionState {
        project_root,
        last_seq: lines.len() as u64,
        transcript_bytes: transcript.len() as u64,
        imported_from: Some(ImportNote {
            file: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
            exported_at_ms: doc.exported_at_ms,
            original_id: doc.session.id.clone(),
            at_ms: now,
        }),
        ..doc.session
    };
    let bundle = Bundle {
        id: String::new(),
        session_json: String::new(),
        transcript: text(transcript)?,
        compactions: text(compactions)?,
        digest: String::new(),
    };
    Ok((bundle, state, recovered_tail))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::{Message, PendingToolCall, ToolCall, ToolFunction};

    /// `docs/session-export.schema.json` is the schema of the code: regenerated here and
    /// compared. After changing the export's types, update it with
    /// `UPDATE_SCHEMA=1 cargo test -p volee-store --lib export_schema_file_matches_the_types`.
    #[test]
    fn export_schema_file_matches_the_types() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/session-export.schema.json");
        let text = export_schema_text();
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} differs from the schema of the export's types; update it with \
             UPDATE_SCHEMA=1 cargo test -p volee-store --lib export_schema_file_matches_the_types",
            path.display()
        );
    }

    #[test]
    fn json_paths() {
        assert_eq!(json_path("."), "$");
        assert_eq!(json_path("transcript[3].seq"), "$.transcript[3].seq");
        assert_eq!(json_path("[0]"), "$[0]");
    }

    fn doc(messages: Vec<Message>, last_seq: u64, pending: Vec<ToolCall>) -> ExportDocument {
        let transcript = messages
            .iter()
            .enumerate()
            .map(|(i, m)| TranscriptLine {
                seq: i as u64 + 1,
                at_ms: 0,
                item: TranscriptItem::Message { message: m.clone() },
            })
            .collect();
        ExportDocument {
            schema_version: SCHEMA_VERSION,
            exported_at_ms: 0,
            session: SessionState {
                schema_version: SCHEMA_VERSION,
                id: "abcdefghijkl".into(),
                title: String::new(),
                parent_id: None,
                forked_at_seq: None,
                created_at_ms: 0,
                updated_at_ms: 0,
                archived: false,
                project_root: "/".into(),
                model: String::new(),
                messages: messages[..last_seq as usize].to_vec(),
                scratchpad: String::new(),
                todos: Vec::new(),
                retry_counts: Default::default(),
                tool_counts: Default::default(),
                usage: Default::default(),
                pending_tool_calls: pending
                    .into_iter()
                    .map(|call| PendingToolCall {
                        call,
                        started_at_ms: 0,
                    })
                    .collect(),
                compaction_count: 0,
                last_seq,
                transcript_bytes: 0,
                synced_from: None,
                imported_from: None,
                tags: Vec::new(),
            },
            transcript,
            compactions: Vec::new(),
            transcript_torn_tail: false,
        }
    }

    #[test]
    fn calls_without_ids_pair_by_tool_name_in_order() {
        let shell = ToolCall {
            id: None,
            function: ToolFunction {
                index: None,
                name: "shell".into(),
                arguments: serde_json::json!({}),
            },
        };
        let mut a = Message::assistant("");
        a.tool_calls = vec![shell.clone(), shell.clone()];
        let answer = Message::tool_result(&shell, "ok");
        let base = vec![Message::user("go"), a, answer.clone()];
        // The second call pending at the checkpoint.
        assert_eq!(
            check_export(&doc(base.clone(), 3, vec![shell.clone()])),
            vec![]
        );
        // Its answer written after the checkpoint (a writer killed before its state): fine.
        let mut tail = base.clone();
        tail.push(answer.clone());
        assert_eq!(
            check_export(&doc(tail.clone(), 3, vec![shell.clone()])),
            vec![]
        );
        // Both answered before the checkpoint, yet one still pending: refused.
        let p = check_export(&doc(tail, 4, vec![shell.clone()]));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].path, "$.session.pending_tool_calls[0].call", "{p:?}");
        // A third answer answers nothing.
        let mut extra = base.clone();
        extra.push(answer.clone());
        extra.push(answer);
        let p = check_export(&doc(extra, 5, vec![]));
        assert_eq!(p[0].path, "$.transcript[4].item.message.tool_name", "{p:?}");
        // Never answered, not pending, and a user message after it: refused.
        let mut later = base;
        later.push(Message::user("next"));
        let p = check_export(&doc(later, 4, vec![]));
        assert_eq!(
            p[0].path, "$.transcript[1].item.message.tool_calls[1]",
            "{p:?}"
        );
    }

    #[test]
    fn a_context_holds_at_most_one_summary() {
        let mut d = doc(vec![Message::system("s"), Message::user("q")], 2, vec![]);
        d.transcript.push(TranscriptLine {
            seq: 3,
            at_ms: 0,
            item: TranscriptItem::Compaction {
                record: crate::model::CompactionRecord {
                    summary: "the gist".into(),
                    replaced_messages: 1,
                    tokens_before: 0,
                    tokens_after: 0,
                    model: String::new(),
                    seq: 3,
                    at_ms: 0,
                },
            },
        });
        d.session.last_seq = 3;
        d.session.messages = vec![
            Message::system("s"),
            Message::user("Summary:\nthe gist"),
            Message::assistant("Understood."),
            Message::user("q"),
        ];
        assert_eq!(check_export(&d), vec![]);
        d.session
            .messages
            .insert(3, Message::user("Summary:\nthe gist"));
        let p = check_export(&d);
        assert_eq!(p[0].path, "$.session.messages[3]", "{p:?}");
    }

    #[test]
    fn problems_are_bounded() {
        let mut p = Problems(Vec::new());
        for i in 0..20 {
            p.push(format!("$.x[{i}]"), "bad");
        }
        assert_eq!(p.0.len(), MAX_PROBLEMS);
    }
}
