//! One reader per history format ([`HistoryKind`]): each takes a session file's lines one at a
//! time (so an append-only transcript is read from where the last read stopped) and keeps the
//! session's metadata up to date while it hands out its messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use volee_harness::HistoryKind;

use crate::time::parse_ms;
use crate::TOOL_OUTPUT_MAX;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    /// A tool call's input or its output (cut to [`TOOL_OUTPUT_MAX`]).
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

/// One message of a session, as indexed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub text: String,
    /// Epoch milliseconds, when the line said.
    pub at: Option<i64>,
}

/// Tokens the session's file recorded (cumulative). `input` is the input not read from a cache
/// (a harness that counts the cached part in its input has it taken out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Model responses counted (0 when the file does not say).
    #[serde(default)]
    pub requests: u64,
}

/// What is known of one session, kept between incremental reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The harness's native session id.
    pub id: Option<String>,
    pub project: Option<String>,
    pub branch: Option<String>,
    /// A title the harness or its user gave; else None (the first prompt stands in).
    pub title: Option<String>,
    pub first_prompt: Option<String>,
    /// Epoch milliseconds of the first and the last dated line.
    pub started: Option<i64>,
    pub last: Option<i64>,
    /// User and assistant messages (tool calls not counted).
    pub messages: u64,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    /// Claude writes one line per content block of a response, each with the response's usage:
    /// the last response counted, so it is counted once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_response: Option<String>,
    /// What the last response's lines said so far (an early line can hold a partial count of
    /// its output: a later one adds only what grew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_response_usage: Option<Usage>,
    /// The harness's id of the message the last line wrote (Gemini): kept with the messages it
    /// gave, so that a later rewind can drop them.
    #[serde(skip)]
    pub line_id: Option<String>,
    /// The last line rewound the session: the message of this id and every later one are gone
    /// (Gemini's `$rewindTo`; an id never seen drops them all).
    #[serde(skip)]
    pub rewind_to: Option<String>,
    /// Aider: the message being gathered, line by line, until a line of another kind (or the
    /// end of the file) ends it.
    #[serde(skip)]
    pub(crate) pending: Option<(Role, String)>,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.requests += other.requests;
    }
}

/// A reader of one format.
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    pub kind: HistoryKind,
}

impl Reader {
    pub fn new(kind: HistoryKind) -> Option<Reader> {
        (kind != HistoryKind::None).then_some(Reader { kind })
    }

    /// Is `rel` (a path under the sessions directory, `/`-separated) one of this format's session
    /// files?
    pub fn is_session_file(&self, rel: &[&str]) -> bool {
        let Some(name) = rel.last() else {
            return false;
        };
        match self.kind {
            HistoryKind::None => false,
            // <slug>/<id>.jsonl (subagents' transcripts live deeper and are not sessions).
            HistoryKind::ClaudeJsonl => rel.len() == 2 && name.ends_with(".jsonl"),
            HistoryKind::CodexRollout => name.starts_with("rollout-") && name.ends_with(".jsonl"),
            HistoryKind::QwenJsonl => {
                rel.len() == 3 && rel[1] == "chats" && name.ends_with(".jsonl")
            }
            HistoryKind::CopilotEvents => rel.len() == 2 && *name == "events.jsonl",
            HistoryKind::GrokChat => rel.len() == 3 && *name == "chat_history.jsonl",
            HistoryKind::GeminiChats => {
                rel.len() == 3 && rel[1] == "chats" && name.ends_with(".jsonl")
            }
            // The one database of every session, in the data directory.
            HistoryKind::OpencodeDb => rel.len() == 1 && *name == "opencode.db",
            // In the project directory itself (the root is the project).
            HistoryKind::AiderMarkdown => rel.len() == 1 && *name == AIDER_HISTORY,
            // `<id>/transcript.jsonl`; `.new-…` and `.deleted-…` are the store's own work.
            HistoryKind::VoleeStore => {
                rel.len() == 2 && *name == "transcript.jsonl" && !rel[0].starts_with('.')
            }
        }
    }

    /// How deep session files lie under the sessions directory, at most.
    pub fn max_depth(&self) -> usize {
        match self.kind {
            HistoryKind::CodexRollout => 5,
            HistoryKind::OpencodeDb | HistoryKind::AiderMarkdown => 1,
            HistoryKind::VoleeStore => 2,
            _ => 3,
        }
    }

    /// One database that holds many sessions (read by [`crate::opencode`]), not a file of lines.
    pub fn is_database(&self) -> bool {
        self.kind == HistoryKind::OpencodeDb
    }

    /// A file read whole each time it changes (Aider's: a message ends only when the next one
    /// starts, so a read that stopped in the middle of one could not go on from there).
    pub fn rereads_whole(&self) -> bool {
        self.kind == HistoryKind::AiderMarkdown
    }

    /// The file's mtime is the session's last activity (Aider dates only the start of a chat).
    pub fn dated_by_mtime(&self) -> bool {
        self.kind == HistoryKind::AiderMarkdown
    }

    /// The end of a read: the message still being gathered (Aider's last one).
    pub fn finish(&self, info: &mut SessionInfo) -> Vec<Message> {
        let mut out = Vec::new();
        flush(info, &mut out);
        count(info, &out);
        out
    }

    /// Why a file of `bad` lines and no good one is not a session file.
    pub fn bad_reason(&self, harness: &str, bad: i64) -> String {
        match self.kind {
            HistoryKind::AiderMarkdown => {
                format!("not an Aider chat history: {bad} line(s) are not text")
            }
            _ => format!("not a {harness} session file: {bad} line(s) are not JSON objects"),
        }
    }

    /// Why a file that was read gave no session id.
    pub fn no_id_reason(&self, harness: &str) -> String {
        match self.kind {
            HistoryKind::AiderMarkdown => {
                "not an Aider chat history: no `# aider chat started at` line".to_owned()
            }
            _ => format!("no {harness} session id in it"),
        }
    }

    /// Take one line of a session file: updates `info`, returns the messages it holds. A line
    /// that is not a JSON object returns None (counted by the caller; a file of nothing else is
    /// unreadable).
    pub fn line(&self, info: &mut SessionInfo, line: &[u8]) -> Option<Vec<Message>> {
        info.line_id = None;
        info.rewind_to = None;
        let mut out = Vec::new();
        if self.kind == HistoryKind::AiderMarkdown {
            // Markdown, not JSON: a line with a NUL byte is not text.
            if line.contains(&0) {
                return None;
            }
            aider(info, &String::from_utf8_lossy(line), &mut out);
            count(info, &out);
            return Some(out);
        }
        let v: Value = serde_json::from_slice(line).ok()?;
        if !v.is_object() {
            return None;
        }
        match self.kind {
            HistoryKind::None | HistoryKind::OpencodeDb | HistoryKind::AiderMarkdown => {}
            HistoryKind::ClaudeJsonl => claude(info, &v, &mut out),
            HistoryKind::CodexRollout => codex(info, &v, &mut out),
            HistoryKind::QwenJsonl => qwen(info, &v, &mut out),
            HistoryKind::CopilotEvents => copilot(info, &v, &mut out),
            HistoryKind::GrokChat => grok(info, &v, &mut out),
            HistoryKind::GeminiChats => gemini(info, &v, &mut out),
            HistoryKind::VoleeStore => volee(info, &v, &mut out),
        }
        count(info, &out);
        Some(out)
    }

    /// Files beside a session file that complete it (read whole each time it changes): Grok
    /// keeps its id, project, title and usage apart from the chat.
    pub fn sidecars(
        &self,
        info: &mut SessionInfo,
        dir: &std::path::Path,
        read: impl Fn(&std::path::Path) -> Option<Vec<u8>>,
    ) {
        if self.kind == HistoryKind::AiderMarkdown {
            // No session id in the file: the project is the session (`aider
            // --restore-chat-history` in it), so its id is made from the project's path.
            if info.started.is_some() {
                let project = dir.to_string_lossy().into_owned();
                info.id = Some(aider_session_id(dir));
                info.project = Some(project);
            }
            return;
        }
        if self.kind == HistoryKind::VoleeStore {
            if let Some(meta) = read(&dir.join("meta.json"))
                .and_then(|b| serde_json::from_slice::<volee_store::SessionMeta>(&b).ok())
            {
                info.id = Some(meta.id);
                set(&mut info.title, Some(meta.title).filter(|t| !t.is_empty()));
                info.project = Some(meta.project_root.to_string_lossy().into_owned());
                set(&mut info.model, Some(meta.model).filter(|m| !m.is_empty()));
                for ms in [meta.created_at_ms, meta.updated_at_ms] {
                    let ms = i64::try_from(ms).unwrap_or(0);
                    if ms > 0 {
                        info.started = Some(info.started.map_or(ms, |s| s.min(ms)));
                        info.last = Some(info.last.map_or(ms, |l| l.max(ms)));
                    }
                }
                info.usage = Some(Usage {
                    input: meta.usage.prompt_tokens,
                    output: meta.usage.completion_tokens,
                    requests: meta.usage.requests,
                    ..Usage::default()
                });
            }
            return;
        }
        if self.kind == HistoryKind::GeminiChats {
            // `<project>/.project_root` beside `chats/` names the project's directory.
            if let Some(root) = dir.parent().and_then(|p| read(&p.join(".project_root"))) {
                let root = String::from_utf8_lossy(&root).trim().to_owned();
                if !root.is_empty() {
                    info.project = Some(root);
                }
            }
            return;
        }
        if self.kind != HistoryKind::GrokChat {
            return;
        }
        if let Some(v) =
            read(&dir.join("summary.json")).and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            set(&mut info.id, str_at(&v, &["info", "id"]));
            set(&mut info.project, str_at(&v, &["info", "cwd"]));
            set(&mut info.title, str_at(&v, &["session_summary"]));
            set(&mut info.model, str_at(&v, &["current_model_id"]));
            stamp(info, str_at(&v, &["created_at"]).as_deref());
            stamp(info, str_at(&v, &["updated_at"]).as_deref());
        }
        if let Some(v) =
            read(&dir.join("usage.json")).and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            let s = &v["session"];
            info.usage = Some(Usage {
                input: u(&s["inputTokens"]),
                output: u(&s["outputTokens"]),
                cache_read: u(&s["cachedReadTokens"]),
                cache_write: u(&s["cacheCreationTokens"]),
                requests: u(&s["modelCalls"]),
            });
        }
        if info.id.is_none() {
            info.id = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        }
    }
}

/// Aider's chat history, in the project's git root.
pub const AIDER_HISTORY: &str = ".aider.chat.history.md";

/// The id volee gives an Aider project's chat history (Aider has none): `aider-` and 16 hex
/// digits of a digest of the project's path — plain (it passes the resume line's check), the
/// same on every scan, different per project.
pub fn aider_session_id(project: &std::path::Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in project.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("aider-{h:016x}")
}

fn count(info: &mut SessionInfo, out: &[Message]) {
    for m in out {
        if m.role != Role::Tool {
            info.messages += 1;
        }
        if m.role == Role::User && info.first_prompt.is_none() {
            info.first_prompt = Some(first_line(&m.text));
        }
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn str_at(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

fn set(slot: &mut Option<String>, value: Option<String>) {
    if value.is_some() {
        *slot = value;
    }
}

fn set_once(slot: &mut Option<String>, value: Option<String>) {
    if slot.is_none() {
        *slot = value;
    }
}

fn stamp(info: &mut SessionInfo, at: Option<&str>) -> Option<i64> {
    let ms = parse_ms(at?)?;
    info.started = Some(info.started.map_or(ms, |s| s.min(ms)));
    info.last = Some(info.last.map_or(ms, |l| l.max(ms)));
    Some(ms)
}

pub(crate) fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(200).collect()
}

pub(crate) fn cut(text: &str) -> String {
    if text.len() <= TOOL_OUTPUT_MAX {
        return text.to_owned();
    }
    let mut end = TOOL_OUTPUT_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Text the harness adds around the user's words (environment, reminders): not the user's.
fn injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<system-reminder>",
        "<environment_context>",
        "<user_instructions>",
        "<user_info>",
        "<command-",
        "<local-command",
        "Caveat:",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

fn push(out: &mut Vec<Message>, role: Role, text: String, at: Option<i64>) {
    let text = if role == Role::Tool { cut(&text) } else { text };
    if !text.trim().is_empty() {
        out.push(Message { role, text, at });
    }
}

/// A `content` that is a string, or parts with `text`: the text, parts joined by lines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn tool_call(name: &str, input: &Value) -> String {
    let input = match input {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    format!("{name} {input}")
}

/// Claude Code: `{"type":"user"|"assistant","message":{"role","content","model","usage","id"},
/// "sessionId","cwd","gitBranch","timestamp","isMeta"}`, `{"type":"custom-title","customTitle"}`,
/// `{"type":"summary","summary"}`.
fn claude(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    let kind = v["type"].as_str().unwrap_or("");
    match kind {
        "custom-title" => set(&mut info.title, str_at(v, &["customTitle"])),
        "summary" => set_once(&mut info.title, str_at(v, &["summary"])),
        "user" | "assistant" => {
            set_once(&mut info.id, str_at(v, &["sessionId"]));
            set_once(&mut info.project, str_at(v, &["cwd"]));
            set(&mut info.branch, str_at(v, &["gitBranch"]));
            let at = stamp(info, v["timestamp"].as_str());
            if v["isMeta"].as_bool() == Some(true) {
                return;
            }
            let message = &v["message"];
            set(&mut info.model, str_at(message, &["model"]));
            if let Some(usage) = message.get("usage").filter(|u| u.is_object()) {
                let id = str_at(message, &["id"]);
                let now = Usage {
                    input: u(&usage["input_tokens"]),
                    output: u(&usage["output_tokens"]),
                    cache_read: u(&usage["cache_read_input_tokens"]),
                    cache_write: u(&usage["cache_creation_input_tokens"]),
                    requests: 1,
                };
                let total = info.usage.get_or_insert_with(Usage::default);
                match info.last_response_usage.as_mut() {
                    // Another line of the same response: only what grew.
                    Some(before) if id.is_some() && id == info.last_response => {
                        let grow = |total: &mut u64, before: &mut u64, now: u64| {
                            *total += now.saturating_sub(*before);
                            *before = (*before).max(now);
                        };
                        grow(&mut total.input, &mut before.input, now.input);
                        grow(&mut total.output, &mut before.output, now.output);
                        grow(
                            &mut total.cache_read,
                            &mut before.cache_read,
                            now.cache_read,
                        );
                        grow(
                            &mut total.cache_write,
                            &mut before.cache_write,
                            now.cache_write,
                        );
                    }
                    _ => {
                        total.add(&now);
                        info.last_response = id;
                        info.last_response_usage = Some(now);
                    }
                }
            }
            let role = if kind == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            match &message["content"] {
                Value::String(text) if !injected(text) => push(out, role, text.clone(), at),
                Value::Array(blocks) => {
                    for b in blocks {
                        match b["type"].as_str() {
                            Some("text") => {
                                let text = b["text"].as_str().unwrap_or("");
                                if !injected(text) {
                                    push(out, role, text.to_owned(), at);
                                }
                            }
                            Some("tool_use") => push(
                                out,
                                Role::Tool,
                                tool_call(b["name"].as_str().unwrap_or("tool"), &b["input"]),
                                at,
                            ),
                            Some("tool_result") => {
                                let text = content_text(&b["content"]);
                                push(out, Role::Tool, text, at);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// Codex CLI rollouts: `{"type":"session_meta","payload":{"id","cwd","timestamp","git":{"branch"}}}`,
/// `{"type":"response_item","payload":{"type":"message","role","content":[{"text"}]}}` and
/// `function_call` / `function_call_output`, `{"type":"turn_context","payload":{"model"}}`,
/// `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage"}}}`.
fn codex(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    let at = stamp(info, v["timestamp"].as_str());
    let p = &v["payload"];
    match v["type"].as_str().unwrap_or("") {
        "session_meta" => {
            set_once(&mut info.id, str_at(p, &["id"]));
            set_once(&mut info.project, str_at(p, &["cwd"]));
            set(&mut info.branch, str_at(p, &["git", "branch"]));
        }
        "turn_context" => set(&mut info.model, str_at(p, &["model"])),
        "response_item" => match p["type"].as_str().unwrap_or("") {
            "message" => {
                let role = match p["role"].as_str() {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    _ => return,
                };
                let text: Vec<&str> = p["content"]
                    .as_array()
                    .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect())
                    .unwrap_or_default();
                let text = text.join("\n");
                if !injected(&text) {
                    push(out, role, text, at);
                }
            }
            "function_call" | "custom_tool_call" => push(
                out,
                Role::Tool,
                tool_call(
                    p["name"].as_str().unwrap_or("tool"),
                    p.get("arguments")
                        .or_else(|| p.get("input"))
                        .unwrap_or(&Value::Null),
                ),
                at,
            ),
            "function_call_output" | "custom_tool_call_output" => {
                let text = match &p["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                push(out, Role::Tool, text, at);
            }
            _ => {}
        },
        "event_msg" if p["type"] == "token_count" => {
            let t = &p["info"]["total_token_usage"];
            if t.is_object() {
                // Cumulative: the last one is the session's. OpenAI's input counts the cached.
                let cached = u(&t["cached_input_tokens"]);
                let requests = info.usage.map_or(0, |u| u.requests);
                info.usage = Some(Usage {
                    input: u(&t["input_tokens"]).saturating_sub(cached),
                    output: u(&t["output_tokens"]),
                    cache_read: cached,
                    cache_write: u(&t["cache_write_input_tokens"]),
                    requests,
                });
            }
        }
        // One per model response of the thread (the title's side request has none).
        "token_usage_record" if p["usage"].is_object() => {
            info.usage.get_or_insert_with(Usage::default).requests += 1;
        }
        _ => {}
    }
}

/// Qwen Code: `{"type":"user"|"assistant"|"tool_result","sessionId","cwd","timestamp","model",
/// "message":{"role","parts":[{"text"}|{"functionCall"}|{"functionResponse"}]},"usageMetadata"}`.
fn qwen(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    let kind = v["type"].as_str().unwrap_or("");
    if !matches!(kind, "user" | "assistant" | "tool_result") {
        return;
    }
    set_once(&mut info.id, str_at(v, &["sessionId"]));
    set_once(&mut info.project, str_at(v, &["cwd"]));
    set(&mut info.branch, str_at(v, &["gitBranch"]));
    set(&mut info.model, str_at(v, &["model"]));
    let at = stamp(info, v["timestamp"].as_str());
    if let Some(m) = v.get("usageMetadata").filter(|m| m.is_object()) {
        let total = info.usage.get_or_insert_with(Usage::default);
        let cached = u(&m["cachedContentTokenCount"]);
        total.input += u(&m["promptTokenCount"]).saturating_sub(cached);
        total.output += u(&m["candidatesTokenCount"]);
        total.cache_read += cached;
        total.requests += 1;
    }
    let role = match kind {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => Role::Tool,
    };
    for part in v["message"]["parts"].as_array().into_iter().flatten() {
        if let Some(text) = part["text"].as_str() {
            if part["thought"].as_bool() != Some(true) && !injected(text) {
                push(out, role, text.to_owned(), at);
            }
        } else if let Some(call) = part.get("functionCall") {
            push(
                out,
                Role::Tool,
                tool_call(call["name"].as_str().unwrap_or("tool"), &call["args"]),
                at,
            );
        } else if let Some(response) = part.get("functionResponse") {
            let r = &response["response"];
            let text = r["output"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| r.to_string());
            push(out, Role::Tool, text, at);
        }
    }
}

/// Copilot CLI: `{"type":"session.start","data":{"sessionId","selectedModel","context":{"cwd"}}}`,
/// `user.message` / `assistant.message` (`data.content`, `toolRequests`),
/// `tool.execution_start` (`toolName`, `arguments`), `session.model_change` (`newModel`),
/// `session.usage_record` (`usage`: `inputTokens`, `outputTokens`, `cacheReadTokens`,
/// `cacheWriteTokens`).
fn copilot(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    let at = stamp(info, v["timestamp"].as_str());
    let d = &v["data"];
    match v["type"].as_str().unwrap_or("") {
        "session.start" => {
            set_once(&mut info.id, str_at(d, &["sessionId"]));
            set_once(&mut info.project, str_at(d, &["context", "cwd"]));
            set(&mut info.branch, str_at(d, &["context", "branch"]));
            set(&mut info.model, str_at(d, &["selectedModel"]));
        }
        "session.model_change" => set(&mut info.model, str_at(d, &["newModel"])),
        "user.message" => {
            if let Some(text) = d["content"].as_str() {
                push(out, Role::User, text.to_owned(), at);
            }
        }
        "assistant.message" => {
            if let Some(text) = d["content"].as_str() {
                push(out, Role::Assistant, text.to_owned(), at);
            }
        }
        "tool.execution_start" => push(
            out,
            Role::Tool,
            tool_call(d["toolName"].as_str().unwrap_or("tool"), &d["arguments"]),
            at,
        ),
        "session.usage_record" => {
            let usage = &d["usage"];
            let total = info.usage.get_or_insert_with(Usage::default);
            total.input += u(&usage["inputTokens"]);
            total.output += u(&usage["outputTokens"]);
            total.cache_read += u(&usage["cacheReadTokens"]);
            total.cache_write += u(&usage["cacheWriteTokens"]);
            total.requests += 1;
        }
        _ => {}
    }
}

/// Grok Build's `chat_history.jsonl`: `{"type":"system"|"user"|"assistant"|"tool_result",
/// "content", "tool_calls", "model_id", "synthetic_reason"}` (no times, no id: those are in the
/// session directory's `summary.json`, read by [`Reader::sidecars`]). The user's words are
/// inside `<user_query>…</user_query>`.
fn grok(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    match v["type"].as_str().unwrap_or("") {
        "user" => {
            if v.get("synthetic_reason").is_some() {
                return;
            }
            let text = content_text(&v["content"]);
            if let Some(query) = text
                .split_once("<user_query>")
                .and_then(|(_, rest)| rest.split_once("</user_query>"))
            {
                push(out, Role::User, query.0.trim().to_owned(), None);
            } else if !injected(&text) {
                push(out, Role::User, text, None);
            }
        }
        "assistant" => {
            set(&mut info.model, str_at(v, &["model_id"]));
            if let Some(text) = v["content"].as_str() {
                push(out, Role::Assistant, text.to_owned(), None);
            }
            for call in v["tool_calls"].as_array().into_iter().flatten() {
                push(
                    out,
                    Role::Tool,
                    tool_call(call["name"].as_str().unwrap_or("tool"), &call["arguments"]),
                    None,
                );
            }
        }
        "tool_result" => {
            if let Some(text) = v["content"].as_str() {
                push(out, Role::Tool, text.to_owned(), None);
            }
        }
        _ => {}
    }
}

/// Gemini CLI's chats: a header `{"sessionId","startTime","lastUpdated","kind"}`, messages
/// `{"id","timestamp","type":"user"|"gemini","content","tokens","model","toolCalls"}` (a message
/// written again with the same id replaces it: counted once, its tool calls taken from the
/// rewrite), `{"$set":{…}}` updates (the session's opening context; `lastUpdated`).
fn gemini(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
        // `/rewind`: that message and every later one are gone (gemini-cli's
        // chatRecordingService drops them when it loads the file).
        info.rewind_to = Some(to.to_owned());
        info.last_response = None;
        return;
    }
    if let Some(set) = v.get("$set") {
        stamp(info, set["lastUpdated"].as_str());
        return;
    }
    if let Some(id) = str_at(v, &["sessionId"]) {
        set_once(&mut info.id, Some(id));
        stamp(info, v["startTime"].as_str());
        stamp(info, v["lastUpdated"].as_str());
        return;
    }
    let at = stamp(info, v["timestamp"].as_str());
    let id = str_at(v, &["id"]);
    let again = id.is_some() && id == info.last_response;
    info.line_id.clone_from(&id);
    info.last_response = id;
    let text = content_text(&v["content"]);
    match v["type"].as_str().unwrap_or("") {
        "user" => {
            if again {
                return;
            }
            for part in v["content"].as_array().into_iter().flatten() {
                if let Some(r) = part.get("functionResponse") {
                    let r = &r["response"];
                    let output = r["output"]
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| r.to_string());
                    push(out, Role::Tool, output, at);
                }
            }
            if !injected(&text) {
                push(out, Role::User, text, at);
            }
        }
        "gemini" => {
            set(&mut info.model, str_at(v, &["model"]));
            if !again {
                let t = &v["tokens"];
                if t.is_object() {
                    let total = info.usage.get_or_insert_with(Usage::default);
                    let cached = u(&t["cached"]);
                    total.input += u(&t["input"]).saturating_sub(cached);
                    total.output += u(&t["output"]);
                    total.cache_read += cached;
                    total.requests += 1;
                }
                push(out, Role::Assistant, text, at);
            }
            for call in v["toolCalls"].as_array().into_iter().flatten() {
                push(
                    out,
                    Role::Tool,
                    tool_call(call["name"].as_str().unwrap_or("tool"), &call["args"]),
                    at,
                );
            }
        }
        _ => {}
    }
}

/// volee's own store: `transcript.jsonl` lines `{"seq","at_ms","item":{"kind":"message",
/// "message":{"role","content","tool_calls","tool_name"}}}` (the store's own types); id, title,
/// project, model, times and usage come from `meta.json` ([`Reader::sidecars`]).
fn volee(info: &mut SessionInfo, v: &Value, out: &mut Vec<Message>) {
    let Ok(line) = serde_json::from_value::<volee_store::TranscriptLine>(v.clone()) else {
        return;
    };
    let at = i64::try_from(line.at_ms).ok().filter(|ms| *ms > 0);
    if let Some(ms) = at {
        info.started = Some(info.started.map_or(ms, |s| s.min(ms)));
        info.last = Some(info.last.map_or(ms, |l| l.max(ms)));
    }
    let volee_store::TranscriptItem::Message { message } = line.item else {
        return;
    };
    match message.role {
        volee_store::Role::System => {}
        volee_store::Role::User => push(out, Role::User, message.content, at),
        volee_store::Role::Assistant => {
            push(out, Role::Assistant, message.content, at);
            for call in &message.tool_calls {
                push(
                    out,
                    Role::Tool,
                    tool_call(&call.function.name, &call.function.arguments),
                    at,
                );
            }
        }
        volee_store::Role::Tool => push(out, Role::Tool, message.content, at),
    }
}

/// Aider's `.aider.chat.history.md`, the way Aider reads it back itself
/// (`aider/utils.py` `split_chat_history_markdown`, 0.86.2): `# aider chat started at
/// YYYY-MM-DD HH:MM:SS` (local time) starts a chat; other `# ` lines are skipped; `#### ` lines
/// are the user's (a prompt of several lines is several such lines); `> ` lines are output
/// (Aider's own: the banner, `Model: …`, `Tokens: …`, a command's output); every other line is
/// the assistant's. A message ends when a line of another kind comes.
fn aider(info: &mut SessionInfo, line: &str, out: &mut Vec<Message>) {
    if let Some(at) = line.strip_prefix("# aider chat started at ") {
        flush(info, out);
        if let Some(ms) = local_ms(at.trim()) {
            info.started = Some(info.started.map_or(ms, |s| s.min(ms)));
            info.last = Some(info.last.map_or(ms, |l| l.max(ms)));
        }
        return;
    }
    if line.starts_with("# ") {
        return;
    }
    let (role, text) = if let Some(text) = line.strip_prefix("> ") {
        if let Some(model) = text
            .strip_prefix("Model: ")
            .or_else(|| text.strip_prefix("Main model: "))
        {
            let model = model.split(" with ").next().unwrap_or(model).trim();
            set(
                &mut info.model,
                Some(model.to_owned()).filter(|m| !m.is_empty()),
            );
        }
        if let Some(tokens) = text.strip_prefix("Tokens: ") {
            aider_tokens(info, tokens);
        }
        (Role::Tool, text)
    } else if let Some(text) = line.strip_prefix("#### ") {
        (Role::User, text)
    } else {
        (Role::Assistant, line)
    };
    if info.pending.as_ref().is_some_and(|(r, _)| *r != role) {
        flush(info, out);
    }
    let (_, gathered) = info.pending.get_or_insert_with(|| (role, String::new()));
    if !gathered.is_empty() {
        gathered.push('\n');
    }
    // A user line ends in Markdown's two-space line break.
    gathered.push_str(text.trim_end_matches([' ', '\r']));
}

fn flush(info: &mut SessionInfo, out: &mut Vec<Message>) {
    if let Some((role, text)) = info.pending.take() {
        let text = text.trim();
        if !(role == Role::User && text == "<blank>") {
            push(out, role, text.to_owned(), None);
        }
    }
}

/// `Tokens: 2.4k sent, 1.2k cache hit, 16 received. Cost: …`: Aider rounds to hundreds above a
/// thousand, so these are its own figures, not exact counts.
fn aider_tokens(info: &mut SessionInfo, text: &str) {
    let text = text.split(". Cost").next().unwrap_or(text);
    let total = info.usage.get_or_insert_with(Usage::default);
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let n = match n.strip_suffix('k') {
            Some(k) => k.parse::<f64>().map(|k| (k * 1000.0).round() as u64),
            None => n.parse::<f64>().map(|n| n.round() as u64),
        };
        let Ok(n) = n else { continue };
        match (what, words.next()) {
            ("sent", _) => total.input += n,
            ("received", _) | ("received.", _) => total.output += n,
            ("cache", Some("hit")) => total.cache_read += n,
            ("cache", Some("write")) => total.cache_write += n,
            _ => {}
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS` in this machine's time zone (Aider writes `datetime.now()`), as epoch
/// milliseconds.
fn local_ms(text: &str) -> Option<i64> {
    use chrono::TimeZone;
    let naive = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").ok()?;
    let local = chrono::Local.from_local_datetime(&naive).earliest()?;
    Some(local.timestamp_millis())
}
