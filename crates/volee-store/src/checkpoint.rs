//! Named checkpoints of a session and rewind to them (issue 21; format in docs/store.md).
//!
//! A checkpoint is `checkpoints/NAME.json` in the session directory: the context, scratchpad,
//! todos and counters at a turn boundary, and the transcript line and byte length it was taken
//! at. It is written whole to a temp file, fsync'd and hard-linked into place (so a name is never
//! replaced, and a crash leaves no file or the whole one). Rewind puts the context, scratchpad
//! and todos back, appends a `rewound` event to the transcript (which keeps everything) and
//! checkpoints the session once: a crash leaves the session as before or rewound. Usage and the
//! other counters stay cumulative. Files and shell effects are not undone: the calls since the
//! checkpoint that may have changed files are read from the transcript after the checkpoint's
//! byte offset only, never before it.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{io_err, Result, StoreError};
use crate::files::{ensure_private_dir, fsync_dir, open_read, read_regular, write_temp};
use crate::model::{
    Message, Role, SessionState, Todo, ToolCall, TranscriptItem, TranscriptLine, Usage,
    SCHEMA_VERSION,
};
use crate::store::{now_ms, Store, WriterSession, TRANSCRIPT_FILE};

/// The directory of a session's checkpoints.
pub(crate) const CHECKPOINTS_DIR: &str = "checkpoints";

/// The tools whose calls may change files (volee-agent's tools that need an approval; a test
/// there keeps the two lists equal). `shell` only possibly: what a command did is not known.
pub const FILE_CHANGING_TOOLS: &[&str] = &["edit_file", "shell", "write_file"];

/// The name of the transcript event a rewind appends (`{"kind": "event", "name": "rewound",
/// "detail": RewindRecord}`): an event, so that every volee of schema version 1 reads it.
pub const REWOUND_EVENT: &str = "rewound";

/// At most this many calls are named in the `rewound` event (all are counted).
const EVENT_CALLS_MAX: usize = 100;

/// `checkpoints/NAME.json`: a named point of a session to rewind to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub schema_version: u32,
    pub session_id: String,
    pub name: String,
    pub at_ms: u64,
    /// The last transcript line when it was taken.
    pub seq: u64,
    /// The transcript's length in bytes up to and including line `seq`.
    pub transcript_bytes: u64,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub scratchpad: String,
    #[serde(default)]
    pub todos: Vec<Todo>,
    /// The counters then (for the record: a rewind keeps the session's cumulative ones).
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_counts: BTreeMap<String, u64>,
    #[serde(default)]
    pub retry_counts: BTreeMap<String, u64>,
    #[serde(default)]
    pub compaction_count: u64,
}

/// One row of `volee agent --checkpoints SID`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedCheckpoint {
    pub name: String,
    /// `ok`, or `damaged` with `reason` (a file volee did not write whole; it is left as it is).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at_ms: u64,
    pub seq: u64,
    pub transcript_bytes: u64,
    pub messages: u64,
    pub todos: u64,
}

/// A tool call made after a checkpoint that may have changed files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedCall {
    /// The transcript line of the assistant message that made the call.
    pub seq: u64,
    pub tool: String,
    /// The file (`write_file`, `edit_file`) or the command (`shell`).
    pub target: String,
    /// `changed` (a file tool that ran), `possibly` (a shell command: what it did is not known),
    /// `unknown` (no result recorded: interrupted).
    pub effect: String,
}

/// What a rewind did: the `rewound` event's detail and what the CLI and the pane print.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewindRecord {
    /// The checkpoint's name.
    pub checkpoint: String,
    pub checkpoint_seq: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_at_ms: u64,
    /// The session's last transcript line before the rewind.
    pub rewound_from_seq: u64,
    pub messages_before: u64,
    pub messages_after: u64,
    /// Calls since the checkpoint that may have changed files (not undone); at most 100 in the
    /// event, all of them in what the store returns.
    pub changed_calls: Vec<ChangedCall>,
    pub changed_calls_total: u64,
    /// Set when the rewind made a new fork (`--into-fork`): the session it was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

impl RewindRecord {
    /// The transcript item a rewind appends.
    pub fn to_item(&self) -> TranscriptItem {
        let mut shown = self.clone();
        shown.changed_calls.truncate(EVENT_CALLS_MAX);
        TranscriptItem::Event {
            name: REWOUND_EVENT.into(),
            detail: serde_json::to_value(&shown).unwrap_or_default(),
        }
    }

    /// The record of a `rewound` event, if `item` is one.
    pub fn from_item(item: &TranscriptItem) -> Option<RewindRecord> {
        match item {
            TranscriptItem::Event { name, detail } if name == REWOUND_EVENT => {
                serde_json::from_value(detail.clone()).ok()
            }
            _ => None,
        }
    }
}

/// A checkpoint name: `[A-Za-z0-9._-]{1,64}`, not starting with `.` (a file name of its own).
pub fn check_checkpoint_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 64 {
        Some("it is longer than 64 characters")
    } else if name.starts_with('.') {
        Some("it starts with a dot")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("only letters, digits, '.', '_' and '-' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StoreError::InvalidCheckpointName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

fn checkpoint_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(CHECKPOINTS_DIR).join(format!("{name}.json"))
}

/// Read and check one checkpoint file; a torn or foreign file is an error, never half-read.
fn read_checkpoint(id: &str, dir: &Path, name: &str) -> Result<Checkpoint> {
    let path = checkpoint_path(dir, name);
    let bytes = match read_regular(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::UnknownCheckpoint {
                id: id.to_string(),
                name: name.to_string(),
                known: names(dir),
            })
        }
        Err(e) => return Err(io_err("read", &path)(e)),
    };
    let damaged = |reason: String| StoreError::CheckpointDamaged {
        id: id.to_string(),
        path: path.clone(),
        reason,
    };
    let cp: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
    if cp.schema_version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            id: id.to_string(),
            found: cp.schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    if cp.session_id != id || cp.name != name {
        return Err(damaged(format!(
            "it names checkpoint {:?} of session {:?}",
            cp.name, cp.session_id
        )));
    }
    Ok(cp)
}

/// The names of the checkpoints in `dir` (sorted; temp files and other names left out).
fn names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir.join(CHECKPOINTS_DIR)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
        .filter(|n| check_checkpoint_name(n).is_ok())
        .collect();
    names.sort();
    names
}

impl WriterSession {
    /// Checkpoint the session, then record it under `name` (refused when the name is taken,
    /// or while tool calls are pending: a checkpoint is a turn boundary).
    pub fn save_checkpoint(&mut self, name: &str) -> Result<Checkpoint> {
        check_checkpoint_name(name)?;
        let pending = self.state().pending_tool_calls.len();
        if pending > 0 {
            return Err(StoreError::CheckpointMidTurn {
                id: self.id().to_string(),
                pending,
            });
        }
        self.checkpoint()?;
        let dir = self.dir().to_path_buf();
        let path = checkpoint_path(&dir, name);
        if fs::symlink_metadata(&path).is_ok() {
            return Err(StoreError::CheckpointExists {
                id: self.id().to_string(),
                name: name.to_string(),
            });
        }
        let s = self.state();
        let cp = Checkpoint {
            schema_version: SCHEMA_VERSION,
            session_id: s.id.clone(),
            name: name.to_string(),
            at_ms: now_ms(),
            seq: s.last_seq,
            transcript_bytes: s.transcript_bytes,
            messages: s.messages.clone(),
            scratchpad: s.scratchpad.clone(),
            todos: s.todos.clone(),
            usage: s.usage,
            tool_counts: s.tool_counts.clone(),
            retry_counts: s.retry_counts.clone(),
            compaction_count: s.compaction_count,
        };
        let cdir = dir.join(CHECKPOINTS_DIR);
        ensure_private_dir(&cdir)?;
        let bytes = serde_json::to_vec(&cp).map_err(|source| StoreError::Encode {
            path: path.clone(),
            source,
        })?;
        let tmp = write_temp(&path, &bytes)?;
        // A hard link never replaces: the name is taken once, by a whole file.
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::CheckpointExists {
                    id: self.id().to_string(),
                    name: name.to_string(),
                })
            }
            Err(e) => return Err(io_err("write", &path)(e)),
        }
        fsync_dir(&cdir)?;
        Ok(cp)
    }

    /// Return the context, scratchpad and todos to checkpoint `name`; the transcript gets a
    /// `rewound` event and keeps everything, usage and counters stay cumulative. One checkpoint
    /// of the session makes it durable (a crash leaves it as before or rewound). Returns what
    /// was done, with the calls since the checkpoint that may have changed files.
    pub fn rewind_to(&mut self, name: &str) -> Result<RewindRecord> {
        check_checkpoint_name(name)?;
        let dir = self.dir().to_path_buf();
        let cp = read_checkpoint(self.id(), &dir, name)?;
        // Lines recorded but not yet durable must be on disk before the scan.
        self.checkpoint()?;
        let record = self.rewind_record(&cp, None)?;
        self.record(record.to_item())?;
        apply(self.state_mut(), &cp);
        self.checkpoint()?;
        Ok(record)
    }

    fn rewind_record(&self, cp: &Checkpoint, forked_from: Option<String>) -> Result<RewindRecord> {
        let s = self.state();
        let transcript = self.dir().join(TRANSCRIPT_FILE);
        if cp.transcript_bytes > s.transcript_bytes || cp.seq > s.last_seq {
            return Err(StoreError::CheckpointDamaged {
                id: self.id().to_string(),
                path: checkpoint_path(self.dir(), &cp.name),
                reason: format!(
                    "it was taken at transcript line {} ({} bytes), past the session's line {} ({} bytes)",
                    cp.seq, cp.transcript_bytes, s.last_seq, s.transcript_bytes
                ),
            });
        }
        let calls = changed_calls_since(
            self.id(),
            &transcript,
            cp.transcript_bytes,
            s.transcript_bytes,
        )?;
        Ok(RewindRecord {
            checkpoint: cp.name.clone(),
            checkpoint_seq: cp.seq,
            checkpoint_bytes: cp.transcript_bytes,
            checkpoint_at_ms: cp.at_ms,
            rewound_from_seq: s.last_seq,
            messages_before: s.messages.len() as u64,
            messages_after: cp.messages.len() as u64,
            changed_calls_total: calls.len() as u64,
            changed_calls: calls,
            forked_from,
        })
    }
}

/// The state a rewind leaves: the checkpoint's context and notes; no pending call (those made
/// after the checkpoint are not in its context; they are listed as not undone).
fn apply(state: &mut SessionState, cp: &Checkpoint) {
    state.messages = cp.messages.clone();
    state.scratchpad = cp.scratchpad.clone();
    state.todos = cp.todos.clone();
    state.pending_tool_calls.clear();
}

/// The calls of [`FILE_CHANGING_TOOLS`] in the transcript's bytes `from..to`, read from `from`
/// on only (the file is never read before the checkpoint's offset), with what their results say.
fn changed_calls_since(id: &str, path: &Path, from: u64, to: u64) -> Result<Vec<ChangedCall>> {
    let mut file = open_read(path).map_err(io_err("read", path))?;
    file.seek(SeekFrom::Start(from))
        .map_err(io_err("read", path))?;
    let mut reader = BufReader::with_capacity(1 << 16, std::io::Read::take(file, to - from));
    let mut calls: Vec<(ChangedCall, Option<String>)> = Vec::new();
    let mut results: BTreeMap<String, String> = BTreeMap::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(io_err("read", path))?;
        if n == 0 {
            break;
        }
        let parsed: TranscriptLine =
            serde_json::from_slice(&line).map_err(|e| StoreError::TranscriptCorrupt {
                id: id.to_string(),
                line: 0,
                reason: format!("after byte {from}: {e}"),
            })?;
        let TranscriptItem::Message { message } = parsed.item else {
            continue;
        };
        match message.role {
            Role::Assistant => {
                for call in &message.tool_calls {
                    if let Some(c) = changed_call(parsed.seq, call) {
                        calls.push((c, call.id.clone()));
                    }
                }
            }
            Role::Tool => {
                if let Some(call_id) = message.tool_call_id.clone() {
                    results.insert(call_id, message.content);
                }
            }
            _ => {}
        }
    }
    Ok(calls
        .into_iter()
        .filter_map(|(mut c, call_id)| {
            let result = call_id.and_then(|i| results.get(&i));
            match result {
                // Refused or never started: nothing changed.
                Some(r) if r.starts_with("denied —") || r.starts_with("not run —") => None,
                Some(_) => Some(c),
                None => {
                    c.effect = "unknown".into();
                    Some(c)
                }
            }
        })
        .collect())
}

fn changed_call(seq: u64, call: &ToolCall) -> Option<ChangedCall> {
    let name = call.function.name.as_str();
    if !FILE_CHANGING_TOOLS.contains(&name) {
        return None;
    }
    let arg = |k: &str| {
        call.function
            .arguments
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let (target, effect) = match name {
        "shell" => (arg("command"), "possibly"),
        _ => (arg("path"), "changed"),
    };
    Some(ChangedCall {
        seq,
        tool: name.to_string(),
        target,
        effect: effect.into(),
    })
}

impl Store {
    /// Record checkpoint `name` of a session (takes the writer lock).
    pub fn save_checkpoint(&self, id_or_prefix: &str, name: &str) -> Result<Checkpoint> {
        check_checkpoint_name(name)?;
        let mut w = self.open_writer(id_or_prefix)?;
        w.save_checkpoint(name)
    }

    /// A session's checkpoints, oldest first (reads without the lock; a damaged file is listed
    /// as such).
    pub fn checkpoints(&self, id_or_prefix: &str) -> Result<Vec<ListedCheckpoint>> {
        let id = self.resolve(id_or_prefix)?;
        let dir = self.checked_session_dir(&id)?;
        let mut out: Vec<ListedCheckpoint> = names(&dir)
            .into_iter()
            .map(|name| match read_checkpoint(&id, &dir, &name) {
                Ok(cp) => ListedCheckpoint {
                    name,
                    status: "ok",
                    reason: None,
                    at_ms: cp.at_ms,
                    seq: cp.seq,
                    transcript_bytes: cp.transcript_bytes,
                    messages: cp.messages.len() as u64,
                    todos: cp.todos.len() as u64,
                },
                Err(e) => ListedCheckpoint {
                    name,
                    status: "damaged",
                    reason: Some(crate::store::error_text(&e)),
                    at_ms: 0,
                    seq: 0,
                    transcript_bytes: 0,
                    messages: 0,
                    todos: 0,
                },
            })
            .collect();
        out.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.name.cmp(&b.name)));
        Ok(out)
    }

    /// One checkpoint of a session (reads without the lock).
    pub fn checkpoint_of(&self, id_or_prefix: &str, name: &str) -> Result<Checkpoint> {
        check_checkpoint_name(name)?;
        let id = self.resolve(id_or_prefix)?;
        let dir = self.checked_session_dir(&id)?;
        read_checkpoint(&id, &dir, name)
    }

    /// Rewind a session to its checkpoint `name` (takes the writer lock: refused while a writer
    /// holds the session).
    pub fn rewind(&self, id_or_prefix: &str, name: &str) -> Result<(String, RewindRecord)> {
        check_checkpoint_name(name)?;
        let mut w = self.open_writer(id_or_prefix)?;
        let record = w.rewind_to(name)?;
        Ok((w.id().to_string(), record))
    }

    /// Rewind into a new fork: the session stays as it is (read without its lock, like
    /// `fork`); the fork is made whole, then rewound, then made visible under its id; returns
    /// its id. A crash leaves no fork, or the whole rewound one.
    pub fn rewind_into_fork(
        &self,
        id_or_prefix: &str,
        name: &str,
    ) -> Result<(String, RewindRecord)> {
        check_checkpoint_name(name)?;
        let src = self.resolve(id_or_prefix)?;
        let cp = self.checkpoint_of(&src, name)?;
        let fork = self.fork_hidden(&src)?;
        let result = (|| {
            let mut w = self.open_writer_at(&fork.id, &fork.tmp)?;
            let record = w.rewind_record(&cp, Some(src.clone()))?;
            w.record(record.to_item())?;
            apply(w.state_mut(), &cp);
            w.checkpoint()?;
            drop(w);
            self.reveal(&fork)?;
            Ok(record)
        })();
        match result {
            Ok(record) => Ok((fork.id.clone(), record)),
            Err(e) => {
                let _ = fs::remove_dir_all(&fork.tmp);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::ToolFunction;
    use crate::store::NewSession;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("sessions"));
        (dir, store)
    }

    fn new_session(store: &Store) -> WriterSession {
        store
            .create(NewSession {
                title: "t".into(),
                project_root: "/tmp".into(),
                model: "m".into(),
            })
            .unwrap()
    }

    /// A turn: the user's prompt, a write_file call and its result, the answer.
    fn turn(w: &mut WriterSession, n: u32) {
        w.push_message(Message::user(format!("prompt {n}")))
            .unwrap();
        let call = ToolCall {
            id: Some(format!("call_{n}")),
            function: ToolFunction {
                index: None,
                name: "write_file".into(),
                arguments: serde_json::json!({"path": format!("f{n}.txt"), "content": "x"}),
            },
        };
        let mut a = Message::assistant("");
        a.tool_calls.push(call.clone());
        w.push_message(a).unwrap();
        w.begin_tool_call(call.clone());
        w.checkpoint().unwrap();
        w.finish_tool_call(&format!("call_{n}"), "wrote 1 byte")
            .unwrap();
        w.push_message(Message::assistant(format!("done {n}")))
            .unwrap();
        w.state_mut().usage.requests += 2;
        w.state_mut().scratchpad.push_str(&format!("note {n}\n"));
        w.checkpoint().unwrap();
    }

    fn transcript_lines(store: &Store, id: &str) -> Vec<TranscriptLine> {
        crate::read_transcript(store, id).unwrap().items
    }

    #[test]
    fn checkpoint_two_turns_rewind_restores_the_context_and_keeps_the_transcript() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        turn(&mut w, 1);
        let id = w.id().to_string();
        let cp = w.save_checkpoint("before-refactor").unwrap();
        let at_cp = w.state().clone();
        turn(&mut w, 2);
        turn(&mut w, 3);
        let lines_before = transcript_lines(&store, &id).len();
        assert_eq!(lines_before, at_cp.last_seq as usize + 2 * 4);
        let usage_before = w.state().usage;
        drop(w);

        let (rid, record) = store.rewind(&id, "before-refactor").unwrap();
        assert_eq!(rid, id);
        let after = store.load(&id).unwrap();
        assert_eq!(after.messages, at_cp.messages);
        assert_eq!(after.messages, cp.messages);
        assert_eq!(after.scratchpad, at_cp.scratchpad);
        assert_eq!(after.todos, at_cp.todos);
        // Usage is cumulative, not rewound.
        assert_eq!(after.usage, usage_before);
        // The transcript grew by the two turns plus the event, and keeps everything.
        let lines = transcript_lines(&store, &id);
        assert_eq!(lines.len(), lines_before + 1);
        let event = RewindRecord::from_item(&lines.last().unwrap().item).unwrap();
        assert_eq!(event, record);
        assert_eq!(record.checkpoint_seq, cp.seq);
        // The two write_file calls since the checkpoint, not the one before it.
        let targets: Vec<&str> = record
            .changed_calls
            .iter()
            .map(|c| c.target.as_str())
            .collect();
        assert_eq!(targets, ["f2.txt", "f3.txt"]);
        assert!(record.changed_calls.iter().all(|c| c.effect == "changed"));
        // The session resumes from there like any other.
        let w = store.open_writer(&id).unwrap();
        assert_eq!(w.state().messages, cp.messages);
    }

    #[test]
    fn rewind_reads_nothing_before_the_checkpoints_offset() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        turn(&mut w, 1);
        let cp = w.save_checkpoint("a").unwrap();
        turn(&mut w, 2);
        let id = w.id().to_string();
        drop(w);
        // Everything before the checkpoint's offset made unparsable, in place: a rewind that
        // read it would fail.
        let path = store.session_dir(&id).join(TRANSCRIPT_FILE);
        let mut bytes = fs::read(&path).unwrap();
        for b in &mut bytes[..cp.transcript_bytes as usize - 1] {
            *b = b'#';
        }
        fs::write(&path, &bytes).unwrap();
        let (_, record) = store.rewind(&id, "a").unwrap();
        assert_eq!(record.changed_calls.len(), 1);
        assert_eq!(store.load(&id).unwrap().messages, cp.messages);
    }

    #[test]
    fn rewind_while_held_is_refused_with_the_holder() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        turn(&mut w, 1);
        w.save_checkpoint("a").unwrap();
        turn(&mut w, 2);
        let id = w.id().to_string();
        match store.rewind(&id, "a") {
            Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
        assert!(matches!(
            store.save_checkpoint(&id, "b"),
            Err(StoreError::Locked { .. })
        ));
        // Nothing changed.
        assert_eq!(store.load(&id).unwrap().messages, w.state().messages);
    }

    #[test]
    fn unknown_duplicate_and_bad_names_are_refused() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        turn(&mut w, 1);
        w.save_checkpoint("one").unwrap();
        assert!(matches!(
            w.save_checkpoint("one"),
            Err(StoreError::CheckpointExists { .. })
        ));
        match w.rewind_to("two") {
            Err(StoreError::UnknownCheckpoint { known, .. }) => assert_eq!(known, ["one"]),
            other => panic!("expected UnknownCheckpoint, got {other:?}"),
        }
        for bad in ["", "../x", "a/b", ".hidden", "sp ace", &"x".repeat(65)] {
            assert!(
                matches!(
                    w.save_checkpoint(bad),
                    Err(StoreError::InvalidCheckpointName { .. })
                ),
                "{bad:?}"
            );
        }
        // Mid-turn (a call pending) is not a turn boundary.
        let call = ToolCall {
            id: Some("c".into()),
            function: ToolFunction {
                index: None,
                name: "shell".into(),
                arguments: serde_json::json!({"command": "ls"}),
            },
        };
        w.begin_tool_call(call);
        assert!(matches!(
            w.save_checkpoint("mid"),
            Err(StoreError::CheckpointMidTurn { pending: 1, .. })
        ));
    }

    #[test]
    fn a_torn_checkpoint_is_never_half_read() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        turn(&mut w, 1);
        w.save_checkpoint("good").unwrap();
        let id = w.id().to_string();
        let path = checkpoint_path(w.dir(), "good");
        let whole = fs::read(&path).unwrap();
        let torn = w.dir().join(CHECKPOINTS_DIR).join("torn.json");
        fs::write(&torn, &whole[..whole.len() / 2]).unwrap();
        // A temp file left by a crash before the link is not a checkpoint.
        fs::write(
            w.dir().join(CHECKPOINTS_DIR).join(".x.json.tmp.1"),
            &whole[..10],
        )
        .unwrap();
        turn(&mut w, 2);
        let messages = w.state().messages.clone();
        assert!(matches!(
            w.rewind_to("torn"),
            Err(StoreError::CheckpointDamaged { .. })
        ));
        assert_eq!(w.state().messages, messages);
        drop(w);
        let listed = store.checkpoints(&id).unwrap();
        let names: Vec<(&str, &str)> = listed.iter().map(|c| (c.name.as_str(), c.status)).collect();
        assert_eq!(names, [("torn", "damaged"), ("good", "ok")]);
    }

    #[test]
    fn rewind_into_a_fork_leaves_the_session_as_it_is() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        turn(&mut w, 1);
        let cp = w.save_checkpoint("a").unwrap();
        turn(&mut w, 2);
        let id = w.id().to_string();
        let state = w.state().clone();
        drop(w);
        let (fork, record) = store.rewind_into_fork(&id, "a").unwrap();
        assert_ne!(fork, id);
        assert_eq!(record.forked_from.as_deref(), Some(id.as_str()));
        assert_eq!(store.load(&id).unwrap(), state);
        let f = store.load(&fork).unwrap();
        assert_eq!(f.messages, cp.messages);
        assert_eq!(f.parent_id.as_deref(), Some(id.as_str()));
        let lines = transcript_lines(&store, &fork);
        assert!(RewindRecord::from_item(&lines.last().unwrap().item).is_some());
        assert_eq!(record.changed_calls.len(), 1);
        // Nothing but the two sessions in the store.
        let n = fs::read_dir(store.root()).unwrap().count();
        assert_eq!(n, 2);
    }

    #[test]
    fn shell_calls_are_possibly_and_denied_calls_are_left_out() {
        let (_d, store) = store();
        let mut w = new_session(&store);
        w.push_message(Message::user("go")).unwrap();
        w.save_checkpoint("start").unwrap();
        let call = |id: &str, name: &str, args| ToolCall {
            id: Some(id.into()),
            function: ToolFunction {
                index: None,
                name: name.into(),
                arguments: args,
            },
        };
        let calls = [
            call(
                "c1",
                "shell",
                serde_json::json!({"command": "rm -rf target"}),
            ),
            call("c2", "write_file", serde_json::json!({"path": "a.txt"})),
            call("c3", "read_file", serde_json::json!({"path": "b.txt"})),
            call("c4", "edit_file", serde_json::json!({"path": "c.txt"})),
        ];
        let mut a = Message::assistant("");
        a.tool_calls = calls.to_vec();
        w.push_message(a).unwrap();
        w.push_message(Message::tool_result(&calls[0], "exit 0"))
            .unwrap();
        w.push_message(Message::tool_result(
            &calls[1],
            "denied — the user did not allow it",
        ))
        .unwrap();
        w.push_message(Message::tool_result(&calls[2], "hello"))
            .unwrap();
        // c4: no result (interrupted before it was recorded).
        w.checkpoint().unwrap();
        let r = w.rewind_to("start").unwrap();
        let got: Vec<(&str, &str)> = r
            .changed_calls
            .iter()
            .map(|c| (c.tool.as_str(), c.effect.as_str()))
            .collect();
        assert_eq!(got, [("shell", "possibly"), ("edit_file", "unknown")]);
    }
}
