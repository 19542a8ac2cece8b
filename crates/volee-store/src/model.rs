//! The store's serde types: the model context (Ollama-shaped messages), a session's state, its
//! small metadata record, transcript lines, compaction records and the export document.
//!
//! Every type ignores unknown fields on read, so an older volee reads what a newer one of the same
//! schema version added; a schema change that an older volee must not read bumps
//! [`SCHEMA_VERSION`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version of `session.json`, `meta.json`, transcript lines and the export document.
pub const SCHEMA_VERSION: u32 = 1;

/// The text given as the result of a tool call that was interrupted before its result was
/// recorded. The call is never replayed.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown — the session was interrupted while this tool \
call ran and its result was never recorded; it was not re-run. Check the filesystem before retrying.";

/// Who wrote a message (Ollama `/api/chat` roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of the model context, shaped like Ollama's `api.Message` so it is sent as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a `tool` message: the tool that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// On a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            thinking: None,
            tool_calls: Vec::new(),
            tool_name: None,
            tool_call_id: None,
        }
    }
    pub fn system(content: impl Into<String>) -> Message {
        Message::plain(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message::plain(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::plain(Role::Assistant, content)
    }
    /// The result of a tool call.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>) -> Message {
        Message {
            tool_name: Some(call.function.name.clone()),
            tool_call_id: call.id.clone(),
            ..Message::plain(Role::Tool, content)
        }
    }
}

/// A tool call as Ollama streams it (arguments already a JSON object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub function: ToolFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolFunction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    pub name: String,
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// One item of the agent's todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Todo {
    pub text: String,
    #[serde(default)]
    pub done: bool,
}

/// Token usage summed over the session (Ollama's `prompt_eval_count` / `eval_count`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub requests: u64,
}

/// A tool call that was started and whose result is not recorded yet. Recorded (and checkpointed)
/// before the tool runs, so a crash leaves it here and resume answers it with
/// [`OUTCOME_UNKNOWN`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingToolCall {
    pub call: ToolCall,
    pub started_at_ms: u64,
}

/// `session.json`: everything needed to resume a session (the model context and the agent's
/// state). Replaced atomically at each checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionState {
    pub schema_version: u32,
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// The parent's transcript sequence number the fork was taken at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_at_seq: Option<u64>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default)]
    pub archived: bool,
    pub project_root: PathBuf,
    #[serde(default)]
    pub model: String,
    /// The model context, kept bounded by compaction.
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(default)]
    pub scratchpad: String,
    #[serde(default)]
    pub todos: Vec<Todo>,
    /// Retries by cause (e.g. `model_error`, `context_overflow`).
    #[serde(default)]
    pub retry_counts: BTreeMap<String, u64>,
    /// Calls by tool name.
    #[serde(default)]
    pub tool_counts: BTreeMap<String, u64>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub pending_tool_calls: Vec<PendingToolCall>,
    #[serde(default)]
    pub compaction_count: u64,
    /// The last transcript line this checkpoint covers.
    #[serde(default)]
    pub last_seq: u64,
    /// Length in bytes of the transcript up to and including line `last_seq`.
    #[serde(default)]
    pub transcript_bytes: u64,
    /// Set on a session that arrived from another machine as a fork (`volee agent --sync`):
    /// where it came from and why it is a fork. Absent otherwise; an older volee ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_from: Option<SyncNote>,
    /// Set on a session made by `volee agent --import FILE`: the file, its export time and the
    /// session's id there. Absent otherwise; an older volee ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportNote>,
    /// Short words the user gave it (`volee agent --tag`), sorted, each once
    /// ([`crate::check_tag`]). Absent when none; an older volee ignores it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// Why a session is a fork made by `volee agent --sync`: the other machine's version of a
/// session changed on both sides since the last sync (neither overwrites the other).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SyncNote {
    /// The machine (`volee machine add` name) the version came from.
    pub machine: String,
    /// The session it is that machine's version of (its `parent_id` too).
    pub original_id: String,
    /// In words, as `volee agent --info` shows it.
    #[serde(default)]
    pub note: String,
    /// When the fork was made (ms since the epoch).
    #[serde(default)]
    pub at_ms: u64,
}

/// Where an imported session came from (`volee agent --import FILE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImportNote {
    /// The export file as given (made absolute).
    pub file: PathBuf,
    /// The export's `exported_at_ms`.
    pub exported_at_ms: u64,
    /// The session's id in the export (the same as this one's with `--keep-id`).
    pub original_id: String,
    /// When it was imported (ms since the epoch).
    #[serde(default)]
    pub at_ms: u64,
}

impl SessionState {
    /// The small record listing reads.
    pub fn meta(&self) -> SessionMeta {
        SessionMeta {
            schema_version: self.schema_version,
            id: self.id.clone(),
            title: self.title.clone(),
            parent_id: self.parent_id.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            archived: self.archived,
            project_root: self.project_root.clone(),
            model: self.model.clone(),
            message_count: self.messages.len() as u64,
            last_seq: self.last_seq,
            transcript_bytes: self.transcript_bytes,
            pending_tool_calls: self.pending_tool_calls.len() as u64,
            usage: self.usage,
            session_json_bytes: 0,
            tags: self.tags.clone(),
        }
    }
}

/// `meta.json`: what listing shows, rewritten with `session.json` at every checkpoint (and
/// rebuilt from it when missing or damaged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub schema_version: u32,
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default)]
    pub archived: bool,
    pub project_root: PathBuf,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub message_count: u64,
    #[serde(default)]
    pub last_seq: u64,
    #[serde(default)]
    pub transcript_bytes: u64,
    #[serde(default)]
    pub pending_tool_calls: u64,
    #[serde(default)]
    pub usage: Usage,
    /// Size of the `session.json` this record was written with: listing notices a torn or
    /// newer `session.json` by its size without parsing it (0: unknown).
    #[serde(default)]
    pub session_json_bytes: u64,
    /// The session's tags (`volee agent --tag`), as in `session.json`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// One line of `transcript.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TranscriptLine {
    /// 1, 2, 3, … without gaps.
    pub seq: u64,
    pub at_ms: u64,
    pub item: TranscriptItem,
}

/// What a transcript line records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TranscriptItem {
    /// A message added to the context (secrets redacted).
    Message { message: Message },
    /// The context was compacted; the same record is in `compactions.jsonl`.
    Compaction { record: CompactionRecord },
    /// Resume answered interrupted tool calls with [`OUTCOME_UNKNOWN`].
    Interrupted { tool_call_ids: Vec<String> },
    /// Lines after the last checkpoint were found when a writer opened the session: the context
    /// resumes from `checkpoint_seq`, lines up to `last_seq` stay in the transcript.
    Recovered { checkpoint_seq: u64, last_seq: u64 },
    /// This session was forked from another one.
    Forked { parent_id: String, parent_seq: u64 },
    /// Anything else the agent wants on record (e.g. an approval asked and answered).
    Event {
        name: String,
        #[serde(default)]
        detail: serde_json::Value,
    },
}

/// A compaction: a line of `compactions.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompactionRecord {
    pub summary: String,
    /// How many context messages the summary replaced.
    pub replaced_messages: u64,
    #[serde(default)]
    pub tokens_before: u64,
    #[serde(default)]
    pub tokens_after: u64,
    #[serde(default)]
    pub model: String,
    /// The transcript line of this compaction (set by the store).
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub at_ms: u64,
}

/// `volee agent --export ID`: one JSON document, secrets redacted (described in docs/store.md;
/// its JSON Schema, generated from these types, is docs/session-export.schema.json). What
/// `volee agent --import FILE` reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExportDocument {
    pub schema_version: u32,
    pub exported_at_ms: u64,
    pub session: SessionState,
    pub transcript: Vec<TranscriptLine>,
    pub compactions: Vec<CompactionRecord>,
    /// True when the transcript's last line was incomplete (a writer was cut off) and left out.
    pub transcript_torn_tail: bool,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn messages_have_ollamas_shape() {
        let call = ToolCall {
            id: Some("call_k3x9q2ab".into()),
            function: ToolFunction {
                index: Some(0),
                name: "shell".into(),
                arguments: serde_json::json!({"cmd": "ls src"}),
            },
        };
        let mut a = Message::assistant("");
        a.tool_calls.push(call.clone());
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::json!({"role":"assistant","content":"","tool_calls":[{"id":"call_k3x9q2ab","function":{"index":0,"name":"shell","arguments":{"cmd":"ls src"}}}]})
        );
        let t = Message::tool_result(&call, "main.rs\nlib.rs");
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            serde_json::json!({"role":"tool","content":"main.rs\nlib.rs","tool_name":"shell","tool_call_id":"call_k3x9q2ab"})
        );
        // Ollama's streamed form parses back.
        let m: Message = serde_json::from_str(r#"{"role":"assistant","content":"","tool_calls":[{"function":{"name":"shell","arguments":{"cmd":"ls"}}}],"images":null}"#).unwrap();
        assert_eq!(m.tool_calls[0].id, None);
    }

    #[test]
    fn transcript_lines_are_tagged() {
        let line = TranscriptLine {
            seq: 3,
            at_ms: 5,
            item: TranscriptItem::Message {
                message: Message::user("hi"),
            },
        };
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(
            text,
            r#"{"seq":3,"at_ms":5,"item":{"kind":"message","message":{"role":"user","content":"hi"}}}"#
        );
        assert_eq!(serde_json::from_str::<TranscriptLine>(&text).unwrap(), line);
    }
}
