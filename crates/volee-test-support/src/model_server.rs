//! A scripted model server on `127.0.0.1` (random port) speaking four wire formats ([`Wire`]),
//! so a real harness program can play whole turns without a vendor API: the **Anthropic
//! Messages** API (Claude Code), **OpenAI chat completions** (Qwen Code with `--auth-type openai`),
//! the **OpenAI Responses** API (Codex CLI with a custom `model_providers` entry) and the
//! **Gemini** `generateContent` API (Gemini CLI with a `gemini-api-key`).
//!
//! - Responses: `POST …/responses`, always SSE: `response.created`, `response.output_item.added`
//!   and `.done` with one `function_call` (`call_id`, `name`, `arguments` as a JSON string) or one
//!   assistant `message` (`output_text`), then `response.completed` with usage; a call is answered
//!   by a `function_call_output` item in `input` with its `call_id`. Turn number: `function_call`
//!   items and assistant messages in `input`. Tools: `tools[].name`, and a `namespace` tool's own
//!   tools as `NAMESPACE/TOOL` (a script calling that name gets `name` + `namespace` in its
//!   `function_call`: Codex's MCP tools). A side request (Codex's
//!   thread title: no tools, `text.format` a JSON schema) gets a JSON object of placeholders.
//!
//! - OpenAI: `POST …/chat/completions`: SSE chunks (`data: {chat.completion.chunk}` … `data:
//!   [DONE]`) when `"stream": true`, one `chat.completion` otherwise; a tool call is one
//!   `tool_calls` entry (finish reason `tool_calls`), answered by a `role: "tool"` message with its
//!   `tool_call_id`. Turn number: `assistant` messages. Tools: `tools[].function.name`.
//! - Gemini: `POST …/models/MODEL:streamGenerateContent?alt=sse` (`data: {GenerateContentResponse}`)
//!   and `:generateContent` (one JSON); a tool call is one `functionCall` part with an `id`,
//!   answered by a `functionResponse` part with the same `id`. Turn number: `model` contents.
//!   Tools: `tools[].functionDeclarations[].name`. `:countTokens` → `{"totalTokens": N}`. A side
//!   request whose `generationConfig` asks for a JSON schema gets a JSON object of placeholders.
//! - Anthropic: `POST …/v1/messages`: streamed SSE when the body says `"stream": true`, a plain JSON message
//!   otherwise. `POST …/count_tokens` → `{"input_tokens": N}`. `HEAD`/`GET` (health probes,
//!   `/v1/models`) → 200. Anything else → 404 with an Anthropic-shaped error. Query strings
//!   (`?beta=true`) are ignored.
//! - A **script** is a list of [`Turn`]s. Which requests play it — the rule:
//!   a request is a **main** request when its tools include [`ModelServer::MAIN_TOOL`] or a tool
//!   the script calls (`Bash`, `run_shell_command`: the agent loop always offers it; side calls —
//!   session titles, summaries, classifiers — offer no tools or other ones). Its turn number is the
//!   number of `assistant` messages in its `messages` (`model` contents for Gemini) (0 for the first prompt, 1 after one
//!   tool round trip…), so a retried request gets the same answer again and side requests never
//!   consume a turn (Grok Build's turn summary, which offers the agent's tools, is told apart by
//!   its last message). A main request past the end of the script is answered with text and logged as
//!   [`Kind::Exhausted`]. Every other `/messages` request is a **side** request: a short text, or,
//!   when `output_config.format` asks for a JSON schema, a JSON object of placeholder values.
//! - Every request is recorded ([`Exchange`]) with its body, the time it came and the time its
//!   answer was written, for assertions ([`ModelServer::check_tool_results`]) and for failure
//!   reports ([`ModelServer::summary`]).
//!
//! HTTP/1.1 with keep-alive, `Content-Length` or chunked request bodies; answers always carry a
//! `Content-Length` (an SSE body is written whole, which the clients read as a stream). One thread
//! accepts, one thread per connection; dropping the server stops them all within ~100 ms.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::http1::{Reader, Request};

/// One scripted answer to a main request.
#[derive(Debug, Clone)]
pub enum Turn {
    /// One `tool_use` block (stop reason `tool_use`).
    ToolUse { name: String, input: Value },
    /// A text block (stop reason `end_turn`).
    Text(String),
}

impl Turn {
    /// A call of any tool with these arguments.
    pub fn tool(name: &str, input: Value) -> Turn {
        Turn::ToolUse {
            name: name.into(),
            input,
        }
    }
    /// A call of the Bash tool as Claude Code's schema has it.
    pub fn bash(command: &str, description: &str) -> Turn {
        Turn::ToolUse {
            name: "Bash".into(),
            input: json!({ "command": command, "description": description }),
        }
    }
    pub fn text(text: &str) -> Turn {
        Turn::Text(text.into())
    }
}

/// The API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic Messages (`/v1/messages`), and anything not recognised.
    Anthropic,
    /// OpenAI chat completions (`/chat/completions`).
    OpenAi,
    /// Gemini `generateContent` / `streamGenerateContent` / `countTokens`.
    Gemini,
    /// OpenAI Responses (`/responses`).
    Responses,
}

/// What a request was taken for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A main request answered with the script's turn of this number.
    Main {
        turn: usize,
    },
    /// A main request past the end of the script (answered with text).
    Exhausted {
        turn: usize,
    },
    /// A side request (title, summary, classifier…): a short answer, no turn consumed.
    Side,
    CountTokens,
    /// `HEAD`/`GET`.
    Probe,
    /// Not a known endpoint (404).
    Unknown,
}

/// One request and the answer it got.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// 0-based arrival order.
    pub seq: usize,
    pub method: String,
    /// As requested, query string included.
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when there was none or it was not JSON).
    pub body: Value,
    pub kind: Kind,
    pub wire: Wire,
    pub stream: bool,
    pub received: Instant,
    /// When the whole answer had been written.
    pub answered: Instant,
    /// The same moment on the wall clock (to line up with other processes' timestamps).
    pub answered_wall: SystemTime,
    /// Ids of the tool calls in the answer (`tool_use` blocks, `tool_calls`, `functionCall`s).
    pub tool_use_ids: Vec<String>,
    /// One line: what was answered.
    pub answer: String,
    /// The request body's length in bytes: every answer's usage says `body_len / 4` (at least
    /// 1) input tokens, [`OUTPUT_TOKENS`] output tokens, no cache.
    pub body_len: usize,
}

/// The output tokens every answer's usage reports.
pub const OUTPUT_TOKENS: u64 = 8;

impl Exchange {
    /// The input tokens this answer's usage reported.
    pub fn input_tokens(&self) -> u64 {
        (self.body_len as u64 / 4).max(1)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The conversation: `messages` (Anthropic, OpenAI), `contents` (Gemini) or `input`
    /// (Responses).
    pub fn messages(&self) -> &[Value] {
        messages(&self.body)
    }

    /// Ids of every tool result in the request's conversation, in order: `tool_result` blocks'
    /// `tool_use_id` (Anthropic), `role: "tool"` messages' `tool_call_id` (OpenAI),
    /// `functionResponse` parts' `id` (Gemini; `name:NAME` when a response carries no id).
    pub fn tool_result_ids(&self) -> Vec<String> {
        let msgs = self.messages();
        match self.wire {
            Wire::Anthropic => msgs
                .iter()
                .filter_map(|m| m.get("content").and_then(Value::as_array))
                .flatten()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
                .map(String::from)
                .collect(),
            Wire::OpenAi => msgs
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
                .filter_map(|m| m.get("tool_call_id").and_then(Value::as_str))
                .map(String::from)
                .collect(),
            Wire::Gemini => msgs
                .iter()
                .filter_map(|c| c.get("parts").and_then(Value::as_array))
                .flatten()
                .filter_map(|p| p.get("functionResponse"))
                .map(|r| match r.get("id").and_then(Value::as_str) {
                    Some(id) => id.to_string(),
                    None => format!(
                        "name:{}",
                        r.get("name").and_then(Value::as_str).unwrap_or("")
                    ),
                })
                .collect(),
            Wire::Responses => msgs
                .iter()
                .filter(|i| {
                    matches!(
                        i.get("type").and_then(Value::as_str),
                        Some("function_call_output" | "custom_tool_call_output")
                    )
                })
                .filter_map(|i| i.get("call_id").and_then(Value::as_str))
                .map(String::from)
                .collect(),
        }
    }

    /// Names of the tools the request offers.
    pub fn tool_names(&self) -> Vec<String> {
        tool_names(&self.body)
    }

    pub fn is_main(&self) -> bool {
        matches!(self.kind, Kind::Main { .. } | Kind::Exhausted { .. })
    }
}

struct Shared {
    script: Vec<Turn>,
    started: Instant,
    log: Mutex<Vec<Exchange>>,
    seq: AtomicUsize,
    stop: AtomicBool,
    /// Milliseconds to wait before answering a main request (a model "thinking").
    main_delay_ms: AtomicU64,
    /// Every request is a main one, played in arrival order ([`ModelServer::set_toolless`]).
    toolless: AtomicBool,
    toolless_turns: AtomicUsize,
    /// Every model request fails this way ([`ModelServer::set_failure`]).
    failure: Mutex<Option<Failure>>,
}

/// How every model request fails (a provider's error, or a connection dropped).
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// An HTTP error: its status line (`"401 Unauthorized"`) and JSON body.
    Status { status: &'static str, body: Value },
    /// The request is read and the connection closed without an answer.
    Drop,
}

/// The running server; dropping it stops it.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Largest request head and body accepted.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;
/// How often blocked reads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

impl ModelServer {
    /// The tool whose presence in `tools` makes a request a main one.
    pub const MAIN_TOOL: &'static str = "Bash";

    /// Listen on 127.0.0.1 (a free port) and serve `script`.
    pub fn start(script: Vec<Turn>) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            script,
            started: Instant::now(),
            log: Mutex::new(Vec::new()),
            seq: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            main_delay_ms: AtomicU64::new(0),
            toolless: AtomicBool::new(false),
            toolless_turns: AtomicUsize::new(0),
            failure: Mutex::new(None),
        });
        let accept = crate::http1::accept(
            listener,
            "model-server",
            shared.clone(),
            |s| &s.stop,
            serve_connection,
        );
        ModelServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Wait this long before answering each main request, as a model takes time to answer: the
    /// agent then stays in its working state long enough to be observed. Default 0.
    pub fn set_main_delay(&self, delay: Duration) {
        self.shared
            .main_delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// From now on every model request (messages, chat completions, responses, Gemini's
    /// generate) fails so; None: answered again. Model lists and probes still answer.
    pub fn set_failure(&self, failure: Option<Failure>) {
        *self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = failure;
    }

    /// For a harness that offers the model no tools (Aider: its edits and shell commands are
    /// text): every request is a main one, and the script plays in arrival order (its prompt
    /// carries example conversations, so assistant messages do not count turns).
    pub fn set_toolless(&self) {
        self.shared.toolless.store(true, Ordering::SeqCst);
    }

    /// `http://127.0.0.1:PORT` (for `ANTHROPIC_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut log = self
            .shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        log.sort_by_key(|e| e.seq);
        log
    }

    /// The main requests (script turns and past-the-end ones), in arrival order.
    pub fn main_exchanges(&self) -> Vec<Exchange> {
        self.exchanges()
            .into_iter()
            .filter(Exchange::is_main)
            .collect()
    }

    /// When the first answer holding a `tool_use` had been written.
    pub fn first_tool_use_answered(&self) -> Option<Instant> {
        self.exchanges()
            .iter()
            .find(|e| !e.tool_use_ids.is_empty())
            .map(|e| e.answered)
    }

    /// Every `tool_use` the script handed out is answered by exactly one `tool_result` in the next
    /// main request, and no `tool_result` names an id that was never handed out. A retried turn
    /// counts once (its last answer is the one the conversation continued from).
    pub fn check_tool_results(&self) -> Result<(), String> {
        let mains = self.main_exchanges();
        let turn_of = |e: &Exchange| match e.kind {
            Kind::Main { turn } | Kind::Exhausted { turn } => turn,
            _ => usize::MAX,
        };
        for (i, e) in mains.iter().enumerate() {
            // Superseded by a retry of the same turn?
            if mains[i + 1..].iter().any(|l| turn_of(l) == turn_of(e)) {
                continue;
            }
            if e.tool_use_ids.is_empty() {
                continue;
            }
            let Some(next) = mains[i + 1..].iter().find(|n| turn_of(n) == turn_of(e) + 1) else {
                return Err(format!(
                    "request #{} handed out {:?}, but no main request followed",
                    e.seq, e.tool_use_ids
                ));
            };
            let results = next.tool_result_ids();
            for id in &e.tool_use_ids {
                let n = results.iter().filter(|r| *r == id).count();
                if n != 1 {
                    return Err(format!(
                        "tool_use {id} (answer to #{}) has {n} tool_result blocks in request #{} (want exactly 1); its results: {results:?}",
                        e.seq, next.seq
                    ));
                }
            }
        }
        let all: Vec<String> = self
            .exchanges()
            .iter()
            .flat_map(|e| e.tool_use_ids.clone())
            .collect();
        for e in &mains {
            for r in e.tool_result_ids() {
                if !all.contains(&r) {
                    return Err(format!(
                        "request #{} carries a tool_result for {r}, which this server never handed out",
                        e.seq
                    ));
                }
            }
        }
        Ok(())
    }

    /// One line per request, for failure reports.
    pub fn summary(&self) -> String {
        let log = self.exchanges();
        if log.is_empty() {
            return "(no requests)".into();
        }
        log.iter()
            .map(|e| {
                let kind = match &e.kind {
                    Kind::Main { turn } => format!("main turn {turn}"),
                    Kind::Exhausted { turn } => {
                        let last = e
                            .messages()
                            .last()
                            .map(Value::to_string)
                            .unwrap_or_default();
                        let cut: String = last.chars().take(300).collect();
                        format!("main turn {turn} PAST THE SCRIPT, last message {cut}")
                    }
                    Kind::Side => "side".into(),
                    Kind::CountTokens => "count_tokens".into(),
                    Kind::Probe => "probe".into(),
                    Kind::Unknown => "unknown".into(),
                };
                let results = e.tool_result_ids();
                format!(
                    "#{} +{:.3}s {} {} [{:?} {kind}{}] messages={} tools={}{} → {} ({} ms)",
                    e.seq,
                    e.received
                        .saturating_duration_since(self.shared.started)
                        .as_secs_f64(),
                    e.method,
                    e.path,
                    e.wire,
                    if e.stream { ", stream" } else { "" },
                    e.messages().len(),
                    e.tool_names().len(),
                    if results.is_empty() {
                        String::new()
                    } else {
                        format!(" tool_results={results:?}")
                    },
                    e.answer,
                    e.answered.saturating_duration_since(e.received).as_millis()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Names of the tools a request offers, in any of the three shapes: `tools[].name` (Anthropic),
/// `tools[].function.name` (OpenAI), `tools[].functionDeclarations[].name` (Gemini).
fn tool_names(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        if let Some(n) = t.get("name").and_then(Value::as_str) {
            names.push(n.to_string());
            // A Responses `namespace` tool (Codex offers each MCP server as one): its tools as
            // `NAMESPACE/TOOL`, the name a script calls them by.
            for sub in t
                .get("tools")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                if let Some(m) = sub.get("name").and_then(Value::as_str) {
                    names.push(format!("{n}/{m}"));
                }
            }
        }
        if let Some(n) = t
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
        {
            names.push(n.to_string());
        }
        for d in t
            .get("functionDeclarations")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            if let Some(n) = d.get("name").and_then(Value::as_str) {
                names.push(n.to_string());
            }
        }
    }
    names
}

fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .or_else(|| body.get("contents"))
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    stream.set_nodelay(true)?;
    let mut reader = Reader::new(&stream, &shared.stop, MAX_HEAD, MAX_BODY);
    while let Some(req) = reader.request()? {
        let received = Instant::now();
        let seq = shared.seq.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let path = req.path.split('?').next().unwrap_or("");
        let model_call = req.method == "POST"
            && (path.ends_with("/messages")
                || path.ends_with("/chat/completions")
                || path.ends_with("/responses")
                || path.contains(":generateContent")
                || path.contains(":streamGenerateContent"));
        let failure = model_call
            .then(|| {
                shared
                    .failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
            })
            .flatten();
        let answer = match failure {
            // Read, and closed without an answer.
            Some(Failure::Drop) => None,
            Some(Failure::Status {
                status,
                body: error,
            }) => Some(Answer {
                status,
                ..Answer::json(Kind::Unknown, &error, format!("{status} {error}"))
            }),
            None => Some(route(shared, seq, &req, &body)),
        };
        let written = match &answer {
            None => Ok(()),
            Some(answer) => {
                let mut head = format!(
                    "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nrequest-id: req_volee_{seq}\r\n",
                    answer.status,
                    answer.content_type,
                    answer.body.len()
                );
                if answer.content_type == "text/event-stream" {
                    head.push_str("Cache-Control: no-cache\r\n");
                }
                head.push_str(if close {
                    "Connection: close\r\n\r\n"
                } else {
                    "Connection: keep-alive\r\n\r\n"
                });
                let mut out = head.into_bytes();
                if req.method != "HEAD" {
                    out.extend_from_slice(&answer.body);
                }
                let mut w: &TcpStream = &stream;
                w.write_all(&out).and_then(|()| w.flush())
            }
        };
        let answered = Instant::now();
        let answered_wall = SystemTime::now();
        let dropped = answer.is_none();
        let (kind, wire, event_stream, tool_use_ids, describe) = match answer {
            Some(a) => (
                a.kind,
                a.wire,
                a.content_type == "text/event-stream",
                a.tool_use_ids,
                a.describe,
            ),
            None => (
                Kind::Unknown,
                Wire::Anthropic,
                false,
                Vec::new(),
                "connection dropped".into(),
            ),
        };
        shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Exchange {
                seq,
                method: req.method.clone(),
                path: req.path.clone(),
                headers: req.headers.clone(),
                body,
                kind,
                wire,
                stream: event_stream,
                received,
                answered,
                answered_wall,
                tool_use_ids,
                body_len: req.body.len(),
                answer: match &written {
                    Ok(()) => describe,
                    Err(e) => format!("{describe} (WRITE FAILED: {e})"),
                },
            });
        if dropped {
            return Ok(());
        }
        written?;
        if close {
            break;
        }
    }
    Ok(())
}

struct Answer {
    status: &'static str,
    content_type: &'static str,
    body: Vec<u8>,
    kind: Kind,
    wire: Wire,
    tool_use_ids: Vec<String>,
    describe: String,
}

impl Answer {
    fn json(kind: Kind, value: &Value, describe: String) -> Answer {
        Answer {
            status: "200 OK",
            content_type: "application/json",
            body: value.to_string().into_bytes(),
            kind,
            wire: Wire::Anthropic,
            tool_use_ids: Vec::new(),
            describe,
        }
    }

    fn sse(
        kind: Kind,
        wire: Wire,
        sse: String,
        tool_use_ids: Vec<String>,
        describe: String,
    ) -> Answer {
        Answer {
            status: "200 OK",
            content_type: "text/event-stream",
            body: sse.into_bytes(),
            kind,
            wire,
            tool_use_ids,
            describe,
        }
    }
}

/// The script's answer to a request offering `tools` after `assistant_turns` answers of the model:
/// a main turn (waiting the main delay first) or a side answer.
fn pick_turn(
    shared: &Shared,
    tools: &[String],
    assistant_turns: usize,
    side: impl FnOnce() -> String,
) -> (Kind, Turn) {
    let main = tools.iter().any(|n| {
        n == ModelServer::MAIN_TOOL
            || shared
                .script
                .iter()
                .any(|t| matches!(t, Turn::ToolUse { name, .. } if name == n))
    });
    let toolless = shared.toolless.load(Ordering::SeqCst);
    if !main && !toolless {
        return (Kind::Side, Turn::Text(side()));
    }
    let assistant_turns = if toolless {
        shared.toolless_turns.fetch_add(1, Ordering::SeqCst)
    } else {
        assistant_turns
    };
    let delay = shared.main_delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        std::thread::sleep(Duration::from_millis(delay));
    }
    match shared.script.get(assistant_turns) {
        Some(t) => (
            Kind::Main {
                turn: assistant_turns,
            },
            t.clone(),
        ),
        None => (
            Kind::Exhausted {
                turn: assistant_turns,
            },
            Turn::text("(volee model server: the script has no more turns)"),
        ),
    }
}

/// How Grok Build's turn-summary side request begins (its last `user` message).
const GROK_SUMMARY_REQUEST: &str = "<system-reminder>Write an ultra-short dashboard line";

/// The text of the last message (a string, or its `text` parts joined).
fn last_message_text(body: &Value) -> String {
    let Some(content) = messages(body).last().and_then(|m| m.get("content")) else {
        return String::new();
    };
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn count_role(body: &Value, role: &str) -> usize {
    messages(body)
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
        .count()
}

fn describe_turn(turn: &Turn, id: &str) -> String {
    match turn {
        Turn::ToolUse { name, input } => format!("tool call {name} {id} {input}"),
        Turn::Text(text) => format!("text {text:?}"),
    }
}

/// OpenAI chat completions.
fn openai(shared: &Shared, seq: usize, req: &Request, body: &Value) -> Answer {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("volee-test-model")
        .to_string();
    // Grok Build 1.0.41 asks for a one-line summary of the turn it just ended with the agent's
    // whole conversation and tools, the instruction as a last user message: a side request.
    let tools = if last_message_text(body).starts_with(GROK_SUMMARY_REQUEST) {
        Vec::new()
    } else {
        tool_names(body)
    };
    let (kind, turn) = pick_turn(shared, &tools, count_role(body, "assistant"), || match body
        .get("response_format")
    {
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => sample(
            f.get("json_schema")
                .and_then(|j| j.get("schema"))
                .unwrap_or(&Value::Null),
        )
        .to_string(),
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_object") => "{}".into(),
        _ => "volee test".into(),
    });
    let id = format!("call_volee_{seq}_0");
    let describe = describe_turn(&turn, &id);
    let (tool_use_ids, finish) = match &turn {
        Turn::ToolUse { .. } => (vec![id.clone()], "tool_calls"),
        Turn::Text(_) => (Vec::new(), "stop"),
    };
    let prompt_tokens = (req.body.len() / 4).max(1);
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 8, "total_tokens": prompt_tokens + 8});
    let cid = format!("chatcmpl-volee-{seq}");
    let created = volee_os::clock::now_ms() / 1000;
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    if !stream {
        let message = match &turn {
            Turn::ToolUse { name, input } => json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}]}),
            Turn::Text(text) => json!({"role": "assistant", "content": text}),
        };
        let answer = json!({"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage});
        return Answer {
            wire: Wire::OpenAi,
            tool_use_ids,
            ..Answer::json(kind, &answer, describe)
        };
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = Vec::new();
    match &turn {
        Turn::ToolUse { name, input } => {
            chunks.push(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            chunks.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": input.to_string()}}]}),
                Value::Null,
            ));
        }
        Turn::Text(text) => {
            chunks.push(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ));
            chunks.push(chunk(json!({"content": text}), Value::Null));
        }
    }
    chunks.push(chunk(json!({}), json!(finish)));
    chunks.push(json!({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [], "usage": usage}));
    let mut sse = String::new();
    for c in chunks {
        sse.push_str(&format!("data: {c}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    Answer::sse(kind, Wire::OpenAi, sse, tool_use_ids, describe)
}

/// OpenAI Responses: `POST …/responses`, always answered as SSE (`response.created`,
/// `response.output_item.added`/`.done` with one `function_call` or assistant `message` item,
/// `response.completed`). The turn number is the number of `function_call` items and assistant
/// `message`s in `input`; a call is answered by a `function_call_output` item with its `call_id`.
/// A side request asking for `text.format` `json_schema` gets a JSON object of placeholders.
fn responses(shared: &Shared, seq: usize, req: &Request, body: &Value) -> Answer {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("volee-test-model")
        .to_string();
    let answered_turns = messages(body)
        .iter()
        .filter(|i| {
            i.get("type").and_then(Value::as_str) == Some("function_call")
                || i.get("role").and_then(Value::as_str) == Some("assistant")
        })
        .count();
    let (kind, turn) = pick_turn(shared, &tool_names(body), answered_turns, || {
        match body.get("text").and_then(|t| t.get("format")) {
            Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => {
                sample(f.get("schema").unwrap_or(&Value::Null)).to_string()
            }
            _ => "volee test".into(),
        }
    });
    let call_id = format!("call_volee_{seq}_0");
    let describe = describe_turn(&turn, &call_id);
    let (item, tool_use_ids) = match &turn {
        Turn::ToolUse { name, input } => {
            let mut item = json!({"type": "function_call", "id": format!("fc_volee_{seq}"),
                "call_id": call_id, "name": name, "arguments": input.to_string(),
                "status": "completed"});
            // `NAMESPACE/TOOL`: a tool of a namespace tool.
            if let Some((namespace, tool)) = name.split_once('/') {
                item["namespace"] = json!(namespace);
                item["name"] = json!(tool);
            }
            (item, vec![call_id.clone()])
        }
        Turn::Text(text) => (
            json!({"type": "message", "id": format!("msg_volee_{seq}"), "role": "assistant",
                   "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            Vec::new(),
        ),
    };
    let input_tokens = (req.body.len() / 4).max(1);
    let usage = json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + 8});
    let rid = format!("resp_volee_{seq}");
    let events = [
        json!({"type": "response.created", "response": {"id": rid, "object": "response",
               "model": model, "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": rid, "object": "response",
               "model": model, "status": "completed", "output": [item], "usage": usage}}),
    ];
    let mut sse = String::new();
    for e in events {
        sse.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap_or("")
        ));
    }
    Answer::sse(kind, Wire::Responses, sse, tool_use_ids, describe)
}

/// Gemini `generateContent` / `streamGenerateContent` / `countTokens`.
fn gemini(shared: &Shared, seq: usize, req: &Request, path: &str, body: &Value) -> Answer {
    let tokens = (req.body.len() / 4).max(1);
    if path.ends_with(":countTokens") {
        return Answer {
            wire: Wire::Gemini,
            ..Answer::json(
                Kind::CountTokens,
                &json!({"totalTokens": tokens}),
                format!("totalTokens {tokens}"),
            )
        };
    }
    let (kind, turn) = pick_turn(shared, &tool_names(body), count_role(body, "model"), || {
        let config = body.get("generationConfig");
        match config.and_then(|c| {
            c.get("responseJsonSchema")
                .or_else(|| c.get("responseSchema"))
        }) {
            Some(schema) => sample(&lowercase_types(schema)).to_string(),
            None => "volee test".into(),
        }
    });
    let id = format!("volee_call_{seq}_0");
    let describe = describe_turn(&turn, &id);
    let (part, tool_use_ids) = match &turn {
        Turn::ToolUse { name, input } => (
            json!({"functionCall": {"id": id, "name": name, "args": input}}),
            vec![id.clone()],
        ),
        Turn::Text(text) => (json!({"text": text}), Vec::new()),
    };
    let model = path
        .rsplit('/')
        .next()
        .and_then(|m| m.split(':').next())
        .unwrap_or("gemini-volee-test");
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 8, "totalTokenCount": tokens + 8},
        "modelVersion": model,
        "responseId": format!("volee-{seq}")
    });
    if path.ends_with(":streamGenerateContent") {
        return Answer::sse(
            kind,
            Wire::Gemini,
            format!("data: {answer}\n\n"),
            tool_use_ids,
            describe,
        );
    }
    Answer {
        wire: Wire::Gemini,
        tool_use_ids,
        ..Answer::json(kind, &answer, describe)
    }
}

/// Gemini's `responseSchema` spells types in capitals (`OBJECT`); [`sample`] reads lowercase.
fn lowercase_types(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("type", Value::String(t)) => Value::String(t.to_ascii_lowercase()),
                        _ => lowercase_types(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(lowercase_types).collect()),
        other => other.clone(),
    }
}

fn route(shared: &Shared, seq: usize, req: &Request, body: &Value) -> Answer {
    let path = req
        .path
        .split('?')
        .next()
        .unwrap_or("")
        .trim_end_matches('/');
    match req.method.as_str() {
        "HEAD" => return Answer::json(Kind::Probe, &json!({}), "200".into()),
        "GET" if path.ends_with("/models") => {
            let models = json!({
                "data": [{"type": "model", "id": "claude-volee-test", "display_name": "volee test model", "created_at": "2026-01-01T00:00:00Z"}],
                "has_more": false, "first_id": "claude-volee-test", "last_id": "claude-volee-test"
            });
            return Answer::json(Kind::Probe, &models, "model list".into());
        }
        "GET" => return Answer::json(Kind::Probe, &json!({}), "200 {}".into()),
        _ => {}
    }
    if req.method == "POST" && path.ends_with("/chat/completions") {
        return openai(shared, seq, req, body);
    }
    if req.method == "POST" && path.ends_with("/responses") {
        return responses(shared, seq, req, body);
    }
    if req.method == "POST"
        && (path.ends_with(":generateContent")
            || path.ends_with(":streamGenerateContent")
            || path.ends_with(":countTokens"))
    {
        return gemini(shared, seq, req, path, body);
    }
    if req.method == "POST" && path.ends_with("/count_tokens") {
        let n = (req.body.len() / 4).max(1);
        return Answer::json(
            Kind::CountTokens,
            &json!({ "input_tokens": n }),
            format!("input_tokens {n}"),
        );
    }
    if req.method != "POST" || !path.ends_with("/messages") {
        let err = json!({"type": "error", "error": {"type": "not_found_error", "message": format!("volee model server: no {} {}", req.method, req.path)}});
        return Answer {
            status: "404 Not Found",
            ..Answer::json(Kind::Unknown, &err, "404".into())
        };
    }
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-volee-test")
        .to_string();
    let input_tokens = (req.body.len() / 4).max(1);
    let (kind, turn) = pick_turn(
        shared,
        &tool_names(body),
        count_role(body, "assistant"),
        || side_text(body),
    );
    let (block, stop_reason, tool_use_ids, describe) = match &turn {
        Turn::ToolUse { name, input } => {
            let id = format!("toolu_volee_{seq}_0");
            (
                json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                "tool_use",
                vec![id.clone()],
                format!("tool_use {name} {id} {input}"),
            )
        }
        Turn::Text(text) => (
            json!({"type": "text", "text": text}),
            "end_turn",
            Vec::new(),
            format!("text {text:?}"),
        ),
    };
    let message_id = format!("msg_volee_{seq}");
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    let usage = json!({
        "input_tokens": input_tokens,
        "output_tokens": 8,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0
    });
    if !stream {
        let message = json!({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": null, "usage": usage
        });
        return Answer {
            tool_use_ids,
            ..Answer::json(kind, &message, describe)
        };
    }
    let mut events: Vec<(&str, Value)> = vec![(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }}),
    )];
    match &turn {
        Turn::ToolUse { .. } => {
            let mut start = block.clone();
            start["input"] = json!({});
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": start}),
            ));
            events.push(("ping", json!({"type": "ping"})));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            ));
        }
        Turn::Text(text) => {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(("ping", json!({"type": "ping"})));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}}),
            ));
        }
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": 8}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let mut sse = String::new();
    for (name, data) in events {
        sse.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    Answer::sse(kind, Wire::Anthropic, sse, tool_use_ids, describe)
}

/// The text of a side answer: JSON matching `output_config.format`'s schema when one is asked
/// for (a session title: `{"title": "…"}`), else a short sentence.
fn side_text(body: &Value) -> String {
    let format = body.get("output_config").and_then(|c| c.get("format"));
    match format {
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => {
            sample(f.get("schema").unwrap_or(&Value::Null)).to_string()
        }
        _ => "volee test".into(),
    }
}

/// A placeholder value for a JSON schema (objects, strings, numbers, booleans, arrays).
fn sample(schema: &Value) -> Value {
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "object" => {
            let mut out = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), sample(v));
                }
            }
            Value::Object(out)
        }
        "array" => json!([]),
        "integer" | "number" => json!(0),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => match schema.get("enum").and_then(Value::as_array) {
            Some(values) if !values.is_empty() => values[0].clone(),
            _ => json!("volee test"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, Read};

    fn post(addr: SocketAddr, path: &str, body: &Value) -> (String, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        let text = body.to_string();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )
        .unwrap();
        let mut reader = io::BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        (head, rest)
    }

    fn main_body(messages: Value, stream: bool) -> Value {
        json!({"model": "m", "stream": stream, "tools": [{"name": "Bash"}, {"name": "Read"}], "messages": messages})
    }

    #[test]
    fn plays_the_script_and_checks_tool_results() {
        let server = ModelServer::start(vec![Turn::bash("touch x", "make x"), Turn::text("done")]);
        let addr = server.addr();
        // A side request first: no turn consumed; a JSON schema gets a matching object.
        let (_, side) = post(
            addr,
            "/v1/messages?beta=true",
            &json!({"model": "m", "messages": [{"role": "user", "content": "t"}],
                    "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}),
        );
        let side: Value = serde_json::from_str(&side).unwrap();
        assert_eq!(side["content"][0]["text"], r#"{"title":"volee test"}"#);

        let (head, sse) = post(
            addr,
            "/v1/messages?beta=true",
            &main_body(json!([{"role": "user", "content": "go"}]), true),
        );
        assert!(head.contains("text/event-stream"), "{head}");
        assert!(sse.contains("\"name\":\"Bash\""), "{sse}");
        assert!(sse.contains("input_json_delta"), "{sse}");
        assert!(sse.contains("\"stop_reason\":\"tool_use\""), "{sse}");
        let id = server.main_exchanges()[0].tool_use_ids[0].clone();
        assert!(server.check_tool_results().is_err(), "no follow-up yet");

        let (_, json_answer) = post(
            addr,
            "/v1/messages",
            &main_body(
                json!([
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": ""}]}
                ]),
                false,
            ),
        );
        let answer: Value = serde_json::from_str(&json_answer).unwrap();
        assert_eq!(answer["content"][0]["text"], "done");
        assert_eq!(answer["stop_reason"], "end_turn");
        server.check_tool_results().unwrap();

        let (_, count) = post(addr, "/v1/messages/count_tokens", &json!({"messages": []}));
        assert!(count.contains("input_tokens"), "{count}");
        let kinds: Vec<Kind> = server.exchanges().iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Kind::Side,
                Kind::Main { turn: 0 },
                Kind::Main { turn: 1 },
                Kind::CountTokens
            ]
        );
        assert!(server.summary().contains("main turn 1"));
    }

    #[test]
    fn keep_alive_chunked_bodies_and_probes() {
        let server = ModelServer::start(vec![Turn::text("hi")]);
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let body = main_body(json!([{"role": "user", "content": "go"}]), false).to_string();
        let chunked = format!(
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        );
        s.write_all(chunked.as_bytes()).unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        assert!(all.starts_with("HTTP/1.1 200 OK"), "{all}");
        assert_eq!(all.matches("HTTP/1.1 200 OK").count(), 2, "{all}");
        assert!(all.contains("\"text\":\"hi\""), "{all}");
        // A second user turn past the script's end is answered and marked.
        let (_, _) = post(
            server.addr(),
            "/v1/messages",
            &main_body(
                json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "b"}]),
                false,
            ),
        );
        assert_eq!(
            server.exchanges().last().unwrap().kind,
            Kind::Exhausted { turn: 1 }
        );
    }

    #[test]
    fn grok_turn_summary_is_a_side_request() {
        let server = ModelServer::start(vec![
            Turn::tool("run_terminal_command", json!({"command": "rm -f x"})),
            Turn::text("done"),
        ]);
        let tools = json!([{"type": "function", "function": {"name": "run_terminal_command"}}]);
        let (_, answer) = post(
            server.addr(),
            "/v1/chat/completions",
            &json!({"model": "m", "tools": tools, "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": "done"},
                {"role": "user", "content": format!("{GROK_SUMMARY_REQUEST} that captures the reply")}
            ]}),
        );
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["choices"][0]["message"]["content"], "volee test");
        assert!(server.main_exchanges().is_empty());
    }

    #[test]
    fn openai_chat_completions_with_tool_calls() {
        let server = ModelServer::start(vec![
            Turn::tool("run_shell_command", json!({"command": "touch x"})),
            Turn::text("done"),
        ]);
        let addr = server.addr();
        let tools = json!([{"type": "function", "function": {"name": "run_shell_command"}}]);
        // A side request (no tools, a JSON schema): no turn consumed.
        let (_, side) = post(
            addr,
            "/v1/chat/completions",
            &json!({"model": "m", "messages": [{"role": "user", "content": "t"}],
                    "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}),
        );
        let side: Value = serde_json::from_str(&side).unwrap();
        assert_eq!(
            side["choices"][0]["message"]["content"],
            r#"{"title":"volee test"}"#
        );
        let (head, sse) = post(
            addr,
            "/v1/chat/completions",
            &json!({"model": "m", "stream": true, "tools": tools, "messages": [{"role": "user", "content": "go"}]}),
        );
        assert!(head.contains("text/event-stream"), "{head}");
        assert!(sse.contains("\"tool_calls\""), "{sse}");
        assert!(sse.contains("\"finish_reason\":\"tool_calls\""), "{sse}");
        assert!(sse.ends_with("data: [DONE]\n\n"), "{sse}");
        let id = server.main_exchanges()[0].tool_use_ids[0].clone();
        assert!(server.check_tool_results().is_err(), "no follow-up yet");
        let (_, answer) = post(
            addr,
            "/chat/completions",
            &json!({"model": "m", "tools": tools, "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "run_shell_command", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": id, "content": ""}
            ]}),
        );
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["choices"][0]["message"]["content"], "done");
        server.check_tool_results().unwrap();
        assert!(server.exchanges().iter().all(|e| e.wire == Wire::OpenAi));
    }

    #[test]
    fn openai_responses_with_a_function_call() {
        let server = ModelServer::start(vec![
            Turn::tool("exec_command", json!({"cmd": "touch x"})),
            Turn::text("done"),
        ]);
        let addr = server.addr();
        let tools = json!([{"type": "function", "name": "exec_command", "parameters": {}}]);
        // A side request (no tools): no turn consumed.
        let (_, side) = post(
            addr,
            "/v1/responses",
            &json!({"model": "m", "stream": true, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "t"}]}],
                    "text": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}),
        );
        assert!(side.contains(r#"{\"title\":\"volee test\"}"#), "{side}");
        let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]});
        let (head, sse) = post(
            addr,
            "/v1/responses",
            &json!({"model": "m", "stream": true, "tools": tools, "input": [user]}),
        );
        assert!(head.contains("text/event-stream"), "{head}");
        for event in [
            "response.created",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
        ] {
            assert!(sse.contains(&format!("event: {event}\n")), "{sse}");
        }
        assert!(sse.contains(r#""type":"function_call""#), "{sse}");
        let id = server.main_exchanges()[0].tool_use_ids[0].clone();
        assert!(sse.contains(&id), "{sse}");
        assert!(server.check_tool_results().is_err(), "no follow-up yet");
        let (_, answer) = post(
            addr,
            "/v1/responses",
            &json!({"model": "m", "stream": true, "tools": tools, "input": [user,
                {"type": "function_call", "call_id": id, "name": "exec_command", "arguments": "{}"},
                {"type": "function_call_output", "call_id": id, "output": ""}
            ]}),
        );
        assert!(answer.contains(r#""text":"done""#), "{answer}");
        assert_eq!(
            server.main_exchanges()[1].kind,
            Kind::Main { turn: 1 },
            "{}",
            server.summary()
        );
        server.check_tool_results().unwrap();
        assert!(server.exchanges().iter().all(|e| e.wire == Wire::Responses));
    }

    #[test]
    fn gemini_generate_content_with_function_calls() {
        let server = ModelServer::start(vec![
            Turn::tool("run_shell_command", json!({"command": "touch x"})),
            Turn::text("done"),
        ]);
        let addr = server.addr();
        let tools = json!([{"functionDeclarations": [{"name": "run_shell_command"}, {"name": "read_file"}]}]);
        let (_, side) = post(
            addr,
            "/v1beta/models/gemini-2.5-flash-lite:generateContent",
            &json!({"contents": [{"role": "user", "parts": [{"text": "t"}]}],
                    "generationConfig": {"responseSchema": {"type": "OBJECT", "properties": {"next_speaker": {"type": "STRING", "enum": ["user", "model"]}}}}}),
        );
        let side: Value = serde_json::from_str(&side).unwrap();
        assert_eq!(
            side["candidates"][0]["content"]["parts"][0]["text"],
            r#"{"next_speaker":"user"}"#
        );
        let (head, sse) = post(
            addr,
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            &json!({"tools": tools, "contents": [{"role": "user", "parts": [{"text": "go"}]}]}),
        );
        assert!(head.contains("text/event-stream"), "{head}");
        assert!(sse.starts_with("data: {"), "{sse}");
        assert!(sse.contains("\"functionCall\""), "{sse}");
        let id = server.main_exchanges()[0].tool_use_ids[0].clone();
        assert!(server.check_tool_results().is_err(), "no follow-up yet");
        let (_, sse) = post(
            addr,
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            &json!({"tools": tools, "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"functionCall": {"id": id, "name": "run_shell_command", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"id": id, "name": "run_shell_command", "response": {"output": ""}}}]}
            ]}),
        );
        assert!(sse.contains("\"text\":\"done\""), "{sse}");
        server.check_tool_results().unwrap();
        let (_, count) = post(
            addr,
            "/v1beta/models/gemini-2.5-pro:countTokens",
            &json!({"contents": []}),
        );
        assert!(count.contains("totalTokens"), "{count}");
        assert!(server.exchanges().iter().all(|e| e.wire == Wire::Gemini));
    }
}
