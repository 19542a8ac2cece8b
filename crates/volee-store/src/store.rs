//! The store: one directory per session under a root, listing, management, resume.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{io_err, Result, StoreError};
use crate::files::{
    check_real_dir, ensure_private_dir, fsync_dir, kind_of, open_append, open_read, open_regular,
    read_regular, replace_all,
};
use crate::ids::{check_id, new_id};
use crate::jsonl::{read_jsonl, read_transcript, scan_tail};
use crate::lock::WriterLock;
use crate::model::{
    CompactionRecord, ExportDocument, Message, PendingToolCall, SessionMeta, SessionState,
    ToolCall, TranscriptItem, TranscriptLine, OUTCOME_UNKNOWN, SCHEMA_VERSION,
};
use crate::redact::{redact, redacted};

pub(crate) const SESSION_FILE: &str = "session.json";
pub(crate) const META_FILE: &str = "meta.json";
pub(crate) const TRANSCRIPT_FILE: &str = "transcript.jsonl";
pub(crate) const COMPACTIONS_FILE: &str = "compactions.jsonl";

/// Milliseconds since the epoch.
pub use volee_os::clock::now_ms;

/// A session store rooted at a directory (`$XDG_DATA_HOME/volee/sessions`, or `--memory-dir`).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// What a new session starts with.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub title: String,
    pub project_root: PathBuf,
    pub model: String,
}

/// Whether a listed session can be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Health {
    Ok,
    /// Its `session.json` is missing or does not parse; it is kept as it is.
    Damaged {
        reason: String,
    },
    /// Written by a newer volee.
    NewerSchema {
        schema_version: u32,
    },
}

/// One row of a listing.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub id: String,
    #[serde(flatten)]
    pub health: Health,
    /// Absent when the session is damaged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<SessionMeta>,
}

impl Listed {
    pub fn updated_at_ms(&self) -> u64 {
        self.meta.as_ref().map(|m| m.updated_at_ms).unwrap_or(0)
    }
    pub fn archived(&self) -> bool {
        self.meta.as_ref().is_some_and(|m| m.archived)
    }
}

/// A store entry with a valid id's name that is not a real session directory, and why.
type Refused = (String, String);

/// Only the schema version, to tell "newer" from "corrupt" when a file does not parse.
#[derive(serde::Deserialize)]
struct VersionProbe {
    schema_version: u32,
}

impl Store {
    /// A store at `root` (created on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of session `id` (an exact id).
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// The directory of session `id` (an exact id), once the store root and it are checked to
    /// be real directories of this user (never a symlink: nothing is read or written through
    /// one); a missing one is an unknown id.
    pub fn checked_session_dir(&self, id: &str) -> Result<PathBuf> {
        check_id(id)?;
        let dir = self.session_dir(id);
        if check_real_dir(&self.root)? && check_real_dir(&dir)? {
            Ok(dir)
        } else {
            Err(StoreError::UnknownId { id: id.to_string() })
        }
    }

    /// Every session directory name (valid ids only; `.`-names are in-progress creations and
    /// deletions), and the entries with a valid id's name that are not real directories (a
    /// symlink, a file) with why they are refused.
    fn ids(&self) -> Result<(Vec<String>, Vec<Refused>)> {
        if !check_real_dir(&self.root)? {
            return Ok((Vec::new(), Vec::new()));
        }
        let entries = fs::read_dir(&self.root).map_err(io_err("read", &self.root))?;
        let mut ids = Vec::new();
        let mut refused = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("read", &self.root))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.starts_with('.') || check_id(&name).is_err() {
                continue;
            }
            // The entry's own type: a symlink is not followed.
            match entry.file_type() {
                Ok(t) if t.is_dir() => ids.push(name),
                Ok(t) => {
                    let why = match check_real_dir(&entry.path()) {
                        Err(e) => error_text(&e),
                        Ok(_) => format!("{} is {}", entry.path().display(), kind_of(t)),
                    };
                    refused.push((name, why));
                }
                Err(_) => {}
            }
        }
        Ok((ids, refused))
    }

    /// An exact id, else a unique prefix of one.
    pub fn resolve(&self, id_or_prefix: &str) -> Result<String> {
        check_id(id_or_prefix)?;
        if !check_real_dir(&self.root)? {
            return Err(StoreError::UnknownId {
                id: id_or_prefix.to_string(),
            });
        }
        if check_real_dir(&self.session_dir(id_or_prefix))? {
            return Ok(id_or_prefix.to_string());
        }
        let mut candidates: Vec<String> = self
            .ids()?
            .0
            .into_iter()
            .filter(|id| id.starts_with(id_or_prefix))
            .collect();
        match candidates.len() {
            0 => Err(StoreError::UnknownId {
                id: id_or_prefix.to_string(),
            }),
            1 => Ok(candidates.remove(0)),
            _ => {
                candidates.sort();
                Err(StoreError::Ambiguous {
                    prefix: id_or_prefix.to_string(),
                    candidates,
                })
            }
        }
    }

    /// Read `session.json` of an exact id: a newer schema and a damaged file are errors.
    pub fn load(&self, id: &str) -> Result<SessionState> {
        let path = self.checked_session_dir(id)?.join(SESSION_FILE);
        let bytes = match read_regular(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Corrupt {
                    id: id.to_string(),
                    path,
                    reason: "the file is missing".into(),
                });
            }
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        parse_state(id, &path, &bytes)
    }

    /// All sessions, most recently updated first; archived ones only when asked. Reads only the
    /// small `meta.json` files (and `session.json` of a session whose meta is missing or stale).
    /// A damaged session is listed as such and never hides the others.
    pub fn list(&self, include_archived: bool) -> Result<Vec<Listed>> {
        let (ids, refused) = self.ids()?;
        // Many small files: read them on every core.
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8);
        let chunk = ids.len().div_ceil(threads).max(256);
        let mut out: Vec<Listed> = std::thread::scope(|scope| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|id| self.listed(id.clone()))
                            .filter(|l| include_archived || !l.archived())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        // Reported, never read through: a session directory that is a symlink or not a directory.
        out.extend(refused.into_iter().map(|(id, reason)| Listed {
            id,
            health: Health::Damaged { reason },
            meta: None,
        }));
        out.sort_by(|a, b| {
            b.updated_at_ms()
                .cmp(&a.updated_at_ms())
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(out)
    }

    fn listed(&self, id: String) -> Listed {
        let dir = self.session_dir(&id);
        let meta_path = dir.join(META_FILE);
        let meta_bytes = match read_small(&meta_path) {
            Ok(bytes) => Some(bytes),
            // A FIFO or device where meta.json should be: not written by volee; reported, and
            // left as it is.
            Err(e)
                if e.get_ref()
                    .is_some_and(|e| e.is::<crate::error::NotRegular>()) =>
            {
                return Listed {
                    id,
                    health: Health::Damaged {
                        reason: error_text(&io_err("read", &meta_path)(e)),
                    },
                    meta: None,
                }
            }
            Err(_) => None,
        };
        if let Some(bytes) = meta_bytes {
            if let Ok(meta) = serde_json::from_slice::<SessionMeta>(&bytes) {
                if meta.schema_version > SCHEMA_VERSION {
                    return Listed {
                        id,
                        health: Health::NewerSchema {
                            schema_version: meta.schema_version,
                        },
                        meta: Some(meta),
                    };
                }
                let session_len = fs::symlink_metadata(dir.join(SESSION_FILE))
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len());
                if session_len == Some(meta.session_json_bytes) && meta.id == id {
                    return Listed {
                        id,
                        health: Health::Ok,
                        meta: Some(clean_title(meta)),
                    };
                }
            }
        }
        // No usable meta: the truth is session.json.
        match self.load(&id) {
            Ok(state) => Listed {
                id,
                health: Health::Ok,
                meta: Some(clean_title(state.meta())),
            },
            Err(StoreError::NewerSchema { found, .. }) => Listed {
                id,
                health: Health::NewerSchema {
                    schema_version: found,
                },
                meta: None,
            },
            Err(e) => Listed {
                id,
                health: Health::Damaged {
                    reason: error_text(&e),
                },
                meta: None,
            },
        }
    }

    /// Start a new session; the caller holds its writer lock.
    pub fn create(&self, new: NewSession) -> Result<WriterSession> {
        ensure_private_dir(&self.root)?;
        let now = now_ms();
        for _ in 0..8 {
            let id = new_id();
            let state = SessionState {
                schema_version: SCHEMA_VERSION,
                id: id.clone(),
                title: new.title.clone(),
                parent_id: None,
                forked_at_seq: None,
                created_at_ms: now,
                updated_at_ms: now,
                archived: false,
                project_root: new.project_root.clone(),
                model: new.model.clone(),
                messages: Vec::new(),
                scratchpad: String::new(),
                todos: Vec::new(),
                retry_counts: Default::default(),
                tool_counts: Default::default(),
                usage: Default::default(),
                pending_tool_calls: Vec::new(),
                compaction_count: 0,
                last_seq: 0,
                transcript_bytes: 0,
                synced_from: None,
                imported_from: None,
                tags: Vec::new(),
            };
            let tmp = self.root.join(format!(".new-{id}-{}", std::process::id()));
            ensure_private_dir(&tmp)?;
            write_state_files(&tmp, &state)?;
            for name in [TRANSCRIPT_FILE, COMPACTIONS_FILE] {
                open_append(&tmp.join(name))?;
            }
            let lock = WriterLock::acquire(&id, &tmp)?;
            fsync_dir(&tmp)?;
            let dir = self.session_dir(&id);
            if dir.exists() {
                let _ = fs::remove_dir_all(&tmp);
                continue;
            }
            fs::rename(&tmp, &dir).map_err(io_err("create", &dir))?;
            fsync_dir(&self.root)?;
            return WriterSession::from_parts(id, dir, state, lock, 0, 1);
        }
        Err(StoreError::Io {
            action: "find a free id under",
            path: self.root.clone(),
            source: std::io::Error::other("eight random ids were all taken"),
        })
    }

    /// Open a session for writing (management commands): takes the writer lock, refuses a damaged
    /// or newer session, and recovers a transcript tail written after the last checkpoint.
    pub fn open_writer(&self, id_or_prefix: &str) -> Result<WriterSession> {
        let id = self.resolve(id_or_prefix)?;
        let dir = self.session_dir(&id);
        let lock = WriterLock::acquire(&id, &dir)?;
        let state = self.load(&id)?;
        let transcript_path = dir.join(TRANSCRIPT_FILE);
        let tail = scan_tail(
            &id,
            &transcript_path,
            state.transcript_bytes,
            state.last_seq,
        )?;
        if tail.file_len > tail.good_len {
            // A torn line after the last checkpoint: a writer was killed mid-append.
            let f = open_regular(&transcript_path, fs::OpenOptions::new().write(true))
                .map_err(io_err("open", &transcript_path))?;
            f.set_len(tail.good_len)
                .and_then(|()| f.sync_all())
                .map_err(io_err("truncate", &transcript_path))?;
        }
        cut_incomplete_line(&dir.join(COMPACTIONS_FILE))?;
        let checkpoint_seq = state.last_seq;
        let mut w =
            WriterSession::from_parts(id, dir, state, lock, tail.good_len, tail.last_seq + 1)?;
        if tail.last_seq > checkpoint_seq {
            w.record(TranscriptItem::Recovered {
                checkpoint_seq,
                last_seq: tail.last_seq,
            })?;
        }
        Ok(w)
    }

    /// Open a session to resume it (the agent loop): as [`Store::open_writer`], and refuses an
    /// archived session or one of another project; tool calls interrupted before their result was
    /// recorded get [`OUTCOME_UNKNOWN`] as their result (never replayed), then a checkpoint.
    pub fn open_for_resume(
        &self,
        id_or_prefix: &str,
        project_root: &Path,
    ) -> Result<WriterSession> {
        let mut w = self.open_writer(id_or_prefix)?;
        resume_refusal(&w.id, &w.state, project_root)?;
        let pending = std::mem::take(&mut w.state.pending_tool_calls);
        if !pending.is_empty() {
            let mut ids = Vec::new();
            for p in &pending {
                ids.push(
                    p.call
                        .id
                        .clone()
                        .unwrap_or_else(|| p.call.function.name.clone()),
                );
                w.push_message(Message::tool_result(&p.call, OUTCOME_UNKNOWN))?;
            }
            w.record(TranscriptItem::Interrupted { tool_call_ids: ids })?;
        }
        if w.has_unsaved_lines() {
            w.checkpoint()?;
        }
        Ok(w)
    }

    /// What [`Store::open_for_resume`] would refuse, found by reading only (no lock taken,
    /// nothing written): a damaged or newer session, an archived one, another project's. The
    /// agent asks this before it asks the model, so the store's reason comes first.
    pub fn check_resumable(&self, id_or_prefix: &str, project_root: &Path) -> Result<String> {
        let id = self.resolve(id_or_prefix)?;
        let state = self.load(&id)?;
        resume_refusal(&id, &state, project_root)?;
        Ok(id)
    }

    /// Copy a session into a new independent one with `parent_id`; returns the new id. The
    /// source is read without its lock, up to its last checkpoint; tool calls pending there stay
    /// pending in the fork (answered as interrupted when it is resumed).
    pub fn fork(&self, id_or_prefix: &str) -> Result<String> {
        let fork = self.fork_hidden(id_or_prefix)?;
        self.reveal(&fork)?;
        Ok(fork.id)
    }

    /// [`Store::fork`] made whole in a hidden directory, not yet under its id (a rewind into a
    /// fork changes it first); [`Store::reveal`] renames it into place.
    pub(crate) fn fork_hidden(&self, id_or_prefix: &str) -> Result<HiddenFork> {
        let src_id = self.resolve(id_or_prefix)?;
        let src_dir = self.session_dir(&src_id);
        let src = self.load(&src_id)?;
        ensure_private_dir(&self.root)?;
        let id = new_id();
        let tmp = self.root.join(format!(".new-{id}-{}", std::process::id()));
        ensure_private_dir(&tmp)?;
        let result = (|| {
            // The transcript up to the checkpoint, byte for byte.
            let src_t = src_dir.join(TRANSCRIPT_FILE);
            let dst_t = tmp.join(TRANSCRIPT_FILE);
            let mut out = open_append(&dst_t)?;
            if src.transcript_bytes > 0 {
                let input = open_read(&src_t).map_err(io_err("read", &src_t))?;
                let copied = std::io::copy(&mut input.take(src.transcript_bytes), &mut out)
                    .map_err(io_err("copy", &src_t))?;
                if copied != src.transcript_bytes {
                    return Err(StoreError::TranscriptCorrupt {
                        id: src_id.clone(),
                        line: src.last_seq,
                        reason: format!(
                            "the file has {copied} bytes but the last checkpoint covers {}",
                            src.transcript_bytes
                        ),
                    });
                }
            }
            let now = now_ms();
            let forked = TranscriptLine {
                seq: src.last_seq + 1,
                at_ms: now,
                item: TranscriptItem::Forked {
                    parent_id: src_id.clone(),
                    parent_seq: src.last_seq,
                },
            };
            let line = encode_line(&dst_t, &forked)?;
            out.write_all(&line)
                .and_then(|()| out.sync_all())
                .map_err(io_err("write", &dst_t))?;
            // Compactions the copied transcript covers.
            let compactions = read_jsonl::<CompactionRecord>(
                &src_id,
                &src_dir.join(COMPACTIONS_FILE),
                |_, _| Ok(()),
            )?;
            let dst_c = tmp.join(COMPACTIONS_FILE);
            let mut c = open_append(&dst_c)?;
            let mut bytes = Vec::new();
            for rec in compactions.items.iter().filter(|r| r.seq <= src.last_seq) {
                bytes.extend(encode_line(&dst_c, rec)?);
            }
            c.write_all(&bytes)
                .and_then(|()| c.sync_all())
                .map_err(io_err("write", &dst_c))?;
            let state = SessionState {
                id: id.clone(),
                title: if src.title.is_empty() {
                    String::new()
                } else {
                    format!("{} (fork)", src.title)
                },
                parent_id: Some(src_id.clone()),
                forked_at_seq: Some(src.last_seq),
                created_at_ms: now,
                updated_at_ms: now,
                archived: false,
                last_seq: forked.seq,
                transcript_bytes: src.transcript_bytes + line.len() as u64,
                // A fork of a synced fork is the user's own copy.
                synced_from: None,
                ..src.clone()
            };
            write_state_files(&tmp, &state)?;
            open_regular(
                &tmp.join("lock"),
                fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o600),
            )
            .map_err(io_err("create", tmp.join("lock")))?;
            fsync_dir(&tmp)
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        result.map(|()| HiddenFork { id, tmp })
    }

    /// Rename a hidden fork into place under its id (removed if that fails).
    pub(crate) fn reveal(&self, fork: &HiddenFork) -> Result<()> {
        let dir = self.session_dir(&fork.id);
        let result = fs::rename(&fork.tmp, &dir)
            .map_err(io_err("create", &dir))
            .and_then(|()| fsync_dir(&self.root));
        if result.is_err() {
            let _ = fs::remove_dir_all(&fork.tmp);
        }
        result
    }

    /// The writer of a session made in a hidden directory (a fork not yet revealed): its lock,
    /// its state; its transcript ends at its checkpoint.
    pub(crate) fn open_writer_at(&self, id: &str, dir: &Path) -> Result<WriterSession> {
        let lock = WriterLock::acquire(id, dir)?;
        let path = dir.join(SESSION_FILE);
        let bytes = read_regular(&path).map_err(io_err("read", &path))?;
        let state = parse_state(id, &path, &bytes)?;
        let (len, next) = (state.transcript_bytes, state.last_seq + 1);
        WriterSession::from_parts(id.to_string(), dir.to_path_buf(), state, lock, len, next)
    }

    /// Set the title (takes the writer lock).
    pub fn rename(&self, id_or_prefix: &str, title: &str) -> Result<String> {
        let mut w = self.open_writer(id_or_prefix)?;
        w.state.title = title.to_string();
        w.checkpoint()?;
        Ok(w.id)
    }

    /// Archive or unarchive (takes the writer lock).
    pub fn set_archived(&self, id_or_prefix: &str, archived: bool) -> Result<String> {
        let mut w = self.open_writer(id_or_prefix)?;
        w.state.archived = archived;
        w.checkpoint()?;
        Ok(w.id)
    }

    /// Delete a session, damaged or not (takes the writer lock). The directory is first renamed
    /// out of sight, so a crash mid-delete never leaves a half session listed.
    pub fn delete(&self, id_or_prefix: &str) -> Result<String> {
        let id = self.resolve(id_or_prefix)?;
        let dir = self.session_dir(&id);
        let lock = WriterLock::acquire(&id, &dir)?;
        let gone = self
            .root
            .join(format!(".deleted-{id}-{}", std::process::id()));
        fs::rename(&dir, &gone).map_err(io_err("delete", &dir))?;
        fsync_dir(&self.root)?;
        fs::remove_dir_all(&gone).map_err(io_err("delete", &gone))?;
        drop(lock);
        Ok(id)
    }

    /// The session as one JSON document, secrets redacted. Reads without the lock.
    pub fn export(&self, id_or_prefix: &str) -> Result<ExportDocument> {
        let id = self.resolve(id_or_prefix)?;
        let dir = self.session_dir(&id);
        let session = self.load(&id)?;
        let transcript = read_transcript(&id, &dir.join(TRANSCRIPT_FILE))?;
        let compactions = read_jsonl(&id, &dir.join(COMPACTIONS_FILE), |_, _| Ok(()))?;
        let doc = ExportDocument {
            schema_version: SCHEMA_VERSION,
            exported_at_ms: now_ms(),
            session,
            transcript: transcript.items,
            compactions: compactions.items,
            transcript_torn_tail: transcript.torn_tail,
        };
        redacted(&doc).map_err(|source| StoreError::Encode { path: dir, source })
    }

    /// Facts about one session (reads without the lock).
    pub fn info(&self, id_or_prefix: &str) -> Result<SessionInfo> {
        let id = self.resolve(id_or_prefix)?;
        let dir = self.session_dir(&id);
        let state = self.load(&id)?;
        let len = |name| {
            fs::symlink_metadata(dir.join(name))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        Ok(SessionInfo {
            meta: SessionMeta {
                session_json_bytes: len(SESSION_FILE),
                ..clean_title(state.meta())
            },
            forked_at_seq: state.forked_at_seq,
            compaction_count: state.compaction_count,
            tool_counts: state.tool_counts.clone(),
            retry_counts: state.retry_counts.clone(),
            todos: state.todos.len() as u64,
            pending_tool_names: state
                .pending_tool_calls
                .iter()
                .map(|p| p.call.function.name.clone())
                .collect(),
            transcript_file_bytes: len(TRANSCRIPT_FILE),
            synced_from: state.synced_from.clone(),
            imported_from: state.imported_from.clone(),
            dir,
        })
    }
}

/// A fork written whole in a hidden directory of the store, not yet renamed into place.
#[derive(Debug)]
pub(crate) struct HiddenFork {
    pub(crate) id: String,
    pub(crate) tmp: PathBuf,
}

/// `volee agent --info`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    #[serde(flatten)]
    pub meta: SessionMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at_seq: Option<u64>,
    pub compaction_count: u64,
    pub tool_counts: std::collections::BTreeMap<String, u64>,
    pub retry_counts: std::collections::BTreeMap<String, u64>,
    pub todos: u64,
    /// Names of the tools whose calls are pending.
    pub pending_tool_names: Vec<String>,
    pub transcript_file_bytes: u64,
    /// A fork made by `volee agent --sync`: where it came from and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synced_from: Option<crate::model::SyncNote>,
    /// A session made by `volee agent --import`: the file, its export time, the id there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<crate::model::ImportNote>,
    pub dir: PathBuf,
}

/// A small file's bytes in as few system calls as possible (listing reads thousands of them):
/// one `read` when the file fits the buffer. A short read taken for the end can only truncate
/// the record, which then fails to parse and listing falls back to `session.json`.
fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = open_read(path)?;
    let mut bytes = vec![0u8; 8192];
    let mut len = 0;
    loop {
        match file.read(&mut bytes[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len < bytes.len() {
                    break;
                }
                bytes.resize(len * 2, 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Why a session cannot be resumed in `project_root`, if it cannot: archived, or another
/// project's (canonical paths compared).
fn resume_refusal(id: &str, state: &SessionState, project_root: &Path) -> Result<()> {
    if state.archived {
        return Err(StoreError::Archived { id: id.to_string() });
    }
    let canonical = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canonical(&state.project_root) != canonical(project_root) {
        return Err(StoreError::ProjectMismatch {
            id: id.to_string(),
            recorded: state.project_root.clone(),
            given: project_root.to_path_buf(),
        });
    }
    Ok(())
}

/// A record with its title redacted (a session written before titles were).
fn clean_title(mut meta: SessionMeta) -> SessionMeta {
    if let std::borrow::Cow::Owned(title) = redact(&meta.title) {
        meta.title = title;
    }
    meta
}

pub(crate) fn error_text(e: &StoreError) -> String {
    volee_os::error::chain(e)
}

pub(crate) fn parse_state(id: &str, path: &Path, bytes: &[u8]) -> Result<SessionState> {
    match serde_json::from_slice::<SessionState>(bytes) {
        Ok(state) if state.schema_version > SCHEMA_VERSION => Err(StoreError::NewerSchema {
            id: id.to_string(),
            found: state.schema_version,
            supported: SCHEMA_VERSION,
        }),
        Ok(state) if state.id != id => Err(StoreError::Corrupt {
            id: id.to_string(),
            path: path.to_path_buf(),
            reason: format!("it names session {:?}", state.id),
        }),
        Ok(state) => Ok(state),
        Err(e) => match serde_json::from_slice::<VersionProbe>(bytes) {
            Ok(p) if p.schema_version > SCHEMA_VERSION => Err(StoreError::NewerSchema {
                id: id.to_string(),
                found: p.schema_version,
                supported: SCHEMA_VERSION,
            }),
            _ => Err(StoreError::Corrupt {
                id: id.to_string(),
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        },
    }
}

pub(crate) fn encode_line<T: Serialize>(path: &Path, value: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(value).map_err(|source| StoreError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Write `session.json` then `meta.json` (each atomically) and fsync the directory.
fn write_state_files(dir: &Path, state: &SessionState) -> Result<()> {
    // A title is shown wherever sessions are listed: a first prompt's secret must not stay there.
    let clean;
    let state = match redact(&state.title) {
        std::borrow::Cow::Borrowed(_) => state,
        std::borrow::Cow::Owned(title) => {
            clean = SessionState {
                title,
                ..state.clone()
            };
            &clean
        }
    };
    let session_path = dir.join(SESSION_FILE);
    let meta_path = dir.join(META_FILE);
    let session = serde_json::to_vec(state).map_err(|source| StoreError::Encode {
        path: session_path.clone(),
        source,
    })?;
    let meta = serde_json::to_vec(&SessionMeta {
        session_json_bytes: session.len() as u64,
        ..state.meta()
    })
    .map_err(|source| StoreError::Encode {
        path: meta_path.clone(),
        source,
    })?;
    replace_all(dir, &[(&session_path, &session), (&meta_path, &meta)])
}

/// Drop an incomplete last line of an append-only file (the writer was cut off).
fn cut_incomplete_line(path: &Path) -> Result<()> {
    let bytes = match read_regular(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("read", path)(e)),
    };
    if bytes.is_empty() || bytes.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = memchr::memrchr(b'\n', &bytes).map(|i| i + 1).unwrap_or(0);
    let f = open_regular(path, fs::OpenOptions::new().write(true)).map_err(io_err("open", path))?;
    f.set_len(keep as u64)
        .and_then(|()| f.sync_all())
        .map_err(io_err("truncate", path))
}

/// The one writer of a session: holds its lock, keeps its state in memory, and makes it durable
/// at each [`WriterSession::checkpoint`].
#[derive(Debug)]
pub struct WriterSession {
    id: String,
    dir: PathBuf,
    state: SessionState,
    _lock: WriterLock,
    transcript: File,
    /// Bytes of the transcript on disk (all complete lines).
    transcript_len: u64,
    next_seq: u64,
    /// Encoded transcript lines waiting for the next checkpoint.
    unsaved_lines: Vec<u8>,
    unsaved_compactions: Vec<u8>,
}

impl WriterSession {
    fn from_parts(
        id: String,
        dir: PathBuf,
        state: SessionState,
        lock: WriterLock,
        transcript_len: u64,
        next_seq: u64,
    ) -> Result<WriterSession> {
        let transcript = open_append(&dir.join(TRANSCRIPT_FILE))?;
        Ok(WriterSession {
            id,
            dir,
            state,
            _lock: lock,
            transcript,
            transcript_len,
            next_seq,
            unsaved_lines: Vec::new(),
            unsaved_compactions: Vec::new(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state as of the last change (saved at the next checkpoint).
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// Change the state (scratchpad, todos, usage, retry counts, title, model…); saved at the
    /// next checkpoint. Messages should go through [`WriterSession::push_message`] so the
    /// transcript records them.
    pub fn state_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }

    /// The sequence number the next transcript line gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Are there transcript lines not yet made durable?
    pub fn has_unsaved_lines(&self) -> bool {
        !self.unsaved_lines.is_empty()
    }

    /// Queue a transcript line (secrets redacted) for the next checkpoint; returns its seq.
    pub fn record(&mut self, item: TranscriptItem) -> Result<u64> {
        let path = self.dir.join(TRANSCRIPT_FILE);
        let item = redacted(&item).map_err(|source| StoreError::Encode {
            path: path.clone(),
            source,
        })?;
        let seq = self.next_seq;
        let line = TranscriptLine {
            seq,
            at_ms: now_ms(),
            item,
        };
        self.unsaved_lines.extend(encode_line(&path, &line)?);
        self.next_seq += 1;
        Ok(seq)
    }

    /// Add a message to the context and the transcript.
    pub fn push_message(&mut self, message: Message) -> Result<u64> {
        let seq = self.record(TranscriptItem::Message {
            message: message.clone(),
        })?;
        self.state.messages.push(message);
        Ok(seq)
    }

    /// A tool call is about to run: recorded as pending (checkpoint before running it, so a crash
    /// leaves it pending and resume answers it as interrupted).
    pub fn begin_tool_call(&mut self, call: ToolCall) {
        *self
            .state
            .tool_counts
            .entry(call.function.name.clone())
            .or_insert(0) += 1;
        self.state.pending_tool_calls.push(PendingToolCall {
            call,
            started_at_ms: now_ms(),
        });
    }

    /// A pending tool call finished: its result joins the context and the transcript. Calls
    /// without an id are matched by tool name.
    pub fn finish_tool_call(&mut self, call_id: &str, content: impl Into<String>) -> Result<u64> {
        let pos = self
            .state
            .pending_tool_calls
            .iter()
            .position(|p| match &p.call.id {
                Some(id) => id == call_id,
                None => p.call.function.name == call_id,
            })
            .ok_or_else(|| StoreError::NoPendingToolCall {
                id: self.id.clone(),
                call_id: call_id.to_string(),
            })?;
        let pending = self.state.pending_tool_calls.remove(pos);
        self.push_message(Message::tool_result(&pending.call, content))
    }

    /// Replace the context by a compacted one; the record goes to the transcript and
    /// `compactions.jsonl` at the next checkpoint. Returns the compaction's seq.
    pub fn compact(&mut self, mut record: CompactionRecord, context: Vec<Message>) -> Result<u64> {
        record.seq = self.next_seq;
        record.at_ms = now_ms();
        let path = self.dir.join(COMPACTIONS_FILE);
        let clean = redacted(&record).map_err(|source| StoreError::Encode {
            path: path.clone(),
            source,
        })?;
        self.unsaved_compactions.extend(encode_line(&path, &clean)?);
        let seq = self.record(TranscriptItem::Compaction { record })?;
        self.state.messages = context;
        self.state.compaction_count += 1;
        Ok(seq)
    }

    /// Make everything durable: append the new transcript lines (and compactions) and fsync,
    /// then replace `session.json` and `meta.json` atomically and fsync the directory. The cost
    /// depends on the new lines and the context, never on the transcript's length.
    pub fn checkpoint(&mut self) -> Result<()> {
        if !self.unsaved_lines.is_empty() {
            let path = self.dir.join(TRANSCRIPT_FILE);
            let written = self
                .transcript
                .write_all(&self.unsaved_lines)
                .and_then(|()| self.transcript.sync_data());
            if let Err(e) = written {
                // Leave no partial line behind (e.g. the disk filled up mid-write).
                let _ = self.transcript.set_len(self.transcript_len);
                return Err(io_err("append to", path)(e));
            }
            self.transcript_len += self.unsaved_lines.len() as u64;
            self.unsaved_lines.clear();
        }
        if !self.unsaved_compactions.is_empty() {
            let path = self.dir.join(COMPACTIONS_FILE);
            let mut f = open_append(&path)?;
            f.write_all(&self.unsaved_compactions)
                .and_then(|()| f.sync_data())
                .map_err(io_err("append to", &path))?;
            self.unsaved_compactions.clear();
        }
        if let std::borrow::Cow::Owned(title) = redact(&self.state.title) {
            self.state.title = title;
        }
        self.state.last_seq = self.next_seq - 1;
        self.state.transcript_bytes = self.transcript_len;
        self.state.updated_at_ms = now_ms().max(self.state.updated_at_ms);
        write_state_files(&self.dir, &self.state)
    }
}
