//! A scripted Ollama stand-in on `127.0.0.1` (random port) speaking Ollama's native API exactly as
//! `ollama serve` does, for testing `volee-ollama` and volee's own agent without a model:
//!
//! - `POST /api/chat`: `application/x-ndjson`, `Transfer-Encoding: chunked`, one JSON object per
//!   line and per chunk: content arrives as deltas (`{"model","created_at","message":{"role":
//!   "assistant","content":"…"},"done":false}`), a tool call arrives **whole** in one `done:false`
//!   line (`message.tool_calls[]` with `id` `call_xxxxxxxx`, `function.index`, `function.name` and
//!   `function.arguments` as a JSON object), and the last line is `done:true` with `done_reason`
//!   (`stop`), `total_duration`, `load_duration`, `prompt_eval_count`, `prompt_eval_duration`,
//!   `eval_count`, `eval_duration` (nanoseconds). A model that is not installed → 404
//!   `{"error":"model 'NAME' not found"}`; `"stream": false` → one JSON object.
//! - `POST /api/show {"model"}` → `capabilities`, `model_info["<family>.context_length"]`,
//!   `details`; unknown model → 404. `GET /api/tags` → `{"models":[…]}`. `GET /api/version` →
//!   `{"version": VERSION}`. `GET /` → `Ollama is running`. Anything else → 404 `{"error":"…"}`.
//! - A **script** is a list of [`OllamaTurn`]s; every `/api/chat` request for an installed model
//!   plays the next one in order (so a retried request consumes a turn: script `HttpError(503)`
//!   then `Text` to test retries). Past the end of the script → 500 `{"error":"…script…"}`.
//! - Every request is recorded ([`OllamaExchange`]); [`OllamaServer::check_invariants`] checks
//!   what volee promises Ollama: `truncate:false`, `shift:false`, an explicit `options.num_ctx`,
//!   and every tool call handed out answered by exactly one `role:"tool"` message later.
//!
//! One thread accepts, one thread per connection (HTTP/1.1 keep-alive, `Content-Length` request
//! bodies); dropping the server stops them all within ~100 ms.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::http1::Reader;

/// One scripted answer to an `/api/chat` request.
#[derive(Debug, Clone)]
pub enum OllamaTurn {
    /// Text streamed as several content deltas (split after spaces), then `done`.
    Text(String),
    /// Some text (possibly empty), then one line holding these tool calls, then `done`.
    ToolCalls {
        text: String,
        calls: Vec<(String, Value)>,
        /// Older servers send no `id` on tool calls.
        with_ids: bool,
    },
    /// Status 200, `text` streamed, then a final line `{"error": MESSAGE}` (Ollama's error after
    /// the stream started).
    InStreamError { text: String, error: String },
    /// An HTTP error before any byte of the stream: `{"error": MESSAGE}` with this status.
    HttpError { status: u16, error: String },
    /// Wait this long before the first byte, then play `then`.
    Slow {
        delay: Duration,
        then: Box<OllamaTurn>,
    },
    /// `then`, with these counts in the final line (`None`: left out, as Ollama's `omitempty`).
    Usage {
        prompt_eval_count: Option<u64>,
        eval_count: Option<u64>,
        then: Box<OllamaTurn>,
    },
    /// Send the response head and the first line of `text`, then close the connection without
    /// the final chunk (a crash of `ollama serve` mid-answer).
    Cut { text: String },
    /// Like `Text`, ended by the `num_predict` cap: `done_reason` is `length` (what a `Text`
    /// longer than the request's `options.num_predict` becomes).
    Length(String),
}

impl OllamaTurn {
    pub fn text(text: &str) -> OllamaTurn {
        OllamaTurn::Text(text.into())
    }
    /// One tool call, with an id.
    pub fn tool(name: &str, arguments: Value) -> OllamaTurn {
        OllamaTurn::ToolCalls {
            text: String::new(),
            calls: vec![(name.into(), arguments)],
            with_ids: true,
        }
    }
    pub fn in_stream_error(text: &str, error: &str) -> OllamaTurn {
        OllamaTurn::InStreamError {
            text: text.into(),
            error: error.into(),
        }
    }
    pub fn http_error(status: u16, error: &str) -> OllamaTurn {
        OllamaTurn::HttpError {
            status,
            error: error.into(),
        }
    }
    pub fn slow(delay: Duration, then: OllamaTurn) -> OllamaTurn {
        OllamaTurn::Slow {
            delay,
            then: Box::new(then),
        }
    }
    pub fn with_usage(
        prompt_eval_count: Option<u64>,
        eval_count: Option<u64>,
        then: OllamaTurn,
    ) -> OllamaTurn {
        OllamaTurn::Usage {
            prompt_eval_count,
            eval_count,
            then: Box::new(then),
        }
    }
}

/// A model the stand-in has "installed".
#[derive(Debug, Clone)]
pub struct FakeModel {
    /// As `ollama list` shows it, e.g. `gemma4:latest`; `gemma4` matches it too.
    pub name: String,
    pub family: String,
    pub capabilities: Vec<String>,
    pub context_length: u64,
}

impl FakeModel {
    /// `gemma4:latest`: completion, tools, thinking; 131072 tokens trained context.
    pub fn gemma4() -> FakeModel {
        FakeModel {
            name: "gemma4:latest".into(),
            family: "gemma4".into(),
            capabilities: vec!["completion".into(), "tools".into(), "thinking".into()],
            context_length: 131_072,
        }
    }
    /// `gemma3:4b`: no tools (the library template has none).
    pub fn gemma3() -> FakeModel {
        FakeModel {
            name: "gemma3:4b".into(),
            family: "gemma3".into(),
            capabilities: vec!["completion".into(), "vision".into()],
            context_length: 131_072,
        }
    }
    fn matches(&self, asked: &str) -> bool {
        self.name == asked || self.name.strip_suffix(":latest") == Some(asked)
    }
}

/// One request and what it got.
#[derive(Debug, Clone)]
pub struct OllamaExchange {
    /// 0-based arrival order.
    pub seq: usize,
    pub method: String,
    pub path: String,
    /// The JSON body (`Null` when none or not JSON).
    pub body: Value,
    /// Request headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The script turn this `/api/chat` request played.
    pub turn: Option<usize>,
    /// HTTP status sent.
    pub status: u16,
    /// Ids of the tool calls handed out in the answer.
    pub tool_call_ids: Vec<String>,
    pub received: Instant,
    pub answered: Instant,
    /// One line: what was answered.
    pub answer: String,
}

impl OllamaExchange {
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
    /// `tool_call_id` of every `role:"tool"` message, in order.
    pub fn tool_result_ids(&self) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .filter_map(|m| m.get("tool_call_id").and_then(Value::as_str))
            .map(String::from)
            .collect()
    }
    pub fn is_chat(&self) -> bool {
        self.path == "/api/chat"
    }
}

struct Shared {
    script: Vec<OllamaTurn>,
    models: Mutex<Vec<FakeModel>>,
    next_turn: AtomicUsize,
    seq: AtomicUsize,
    log: Mutex<Vec<OllamaExchange>>,
    stop: AtomicBool,
    /// Milliseconds between streamed lines.
    line_delay_ms: AtomicU64,
    ids: AtomicUsize,
    started: Instant,
}

/// The running stand-in; dropping it stops it.
pub struct OllamaServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// The version `GET /api/version` reports (a real Ollama release's number).
pub const VERSION: &str = "0.12.6";
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;
/// How often blocked reads and sleeps look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

impl OllamaServer {
    /// Listen on 127.0.0.1 (a free port) with `gemma4` installed and serve `script`.
    pub fn start(script: Vec<OllamaTurn>) -> OllamaServer {
        OllamaServer::start_with_models(script, vec![FakeModel::gemma4()])
    }

    pub fn start_with_models(script: Vec<OllamaTurn>, models: Vec<FakeModel>) -> OllamaServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            script,
            models: Mutex::new(models),
            next_turn: AtomicUsize::new(0),
            seq: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            line_delay_ms: AtomicU64::new(0),
            ids: AtomicUsize::new(0),
            started: Instant::now(),
        });
        let accept = crate::http1::accept(
            listener,
            "ollama-server",
            shared.clone(),
            |s| &s.stop,
            serve_connection,
        );
        OllamaServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT` (what `OLLAMA_HOST` would say).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Wait this long between streamed lines (a model generating). Default 0.
    pub fn set_line_delay(&self, delay: Duration) {
        self.shared
            .line_delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Replace the installed models.
    pub fn set_models(&self, models: Vec<FakeModel>) {
        *self.shared.models.lock().unwrap_or_else(|e| e.into_inner()) = models;
    }

    /// Every request so far, in arrival order.
    pub fn exchanges(&self) -> Vec<OllamaExchange> {
        let mut log = self
            .shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        log.sort_by_key(|e| e.seq);
        log
    }

    /// The `/api/chat` requests, in arrival order.
    pub fn chat_requests(&self) -> Vec<OllamaExchange> {
        self.exchanges()
            .into_iter()
            .filter(OllamaExchange::is_chat)
            .collect()
    }

    /// What volee promises Ollama, over every `/api/chat` request so far: `truncate` and `shift`
    /// false, `options.num_ctx` a positive number; within every request, each tool call of an
    /// assistant message answered by exactly one later `role:"tool"` message (by
    /// `tool_call_id`) and no tool result without its call; every tool call handed out answered
    /// in the next request that carries the conversation on, and in every later request that still
    /// holds the call (compaction may replace old calls and their results by a summary, both
    /// together); no tool result for an id never handed out.
    pub fn check_invariants(&self) -> Result<(), String> {
        let chats = self.chat_requests();
        for e in &chats {
            for field in ["truncate", "shift"] {
                if e.body.get(field) != Some(&Value::Bool(false)) {
                    return Err(format!(
                        "request #{} has {field} = {:?} (want false)",
                        e.seq,
                        e.body.get(field)
                    ));
                }
            }
            let num_ctx = e
                .body
                .get("options")
                .and_then(|o| o.get("num_ctx"))
                .and_then(Value::as_u64);
            if num_ctx.is_none_or(|n| n == 0) {
                return Err(format!("request #{} has no options.num_ctx", e.seq));
            }
            check_pairing(e)?;
        }
        let handed_out: Vec<String> = chats.iter().flat_map(|e| e.tool_call_ids.clone()).collect();
        for (i, e) in chats.iter().enumerate() {
            for id in &e.tool_call_ids {
                let mut carried = false;
                for later in &chats[i + 1..] {
                    let holds = call_ids_in(later).contains(id);
                    let n = later.tool_result_ids().iter().filter(|r| *r == id).count();
                    if holds {
                        carried = true;
                    } else if n > 0 {
                        return Err(format!(
                            "request #{} answers tool call {id} without carrying the call",
                            later.seq
                        ));
                    }
                }
                // A later request that continues the conversation (it has tools, like the one that
                // got the call) must carry it; summary requests carry older parts only.
                let continued = chats[i + 1..].iter().any(|l| l.body.get("tools").is_some());
                if continued && !carried {
                    return Err(format!(
                        "tool call {id} (answer to #{}) is in no later request with its result",
                        e.seq
                    ));
                }
            }
            for r in e.tool_result_ids() {
                if !handed_out.contains(&r) {
                    return Err(format!(
                        "request #{} carries a tool result for {r}, which this server never handed out",
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
                format!(
                    "#{} +{:.3}s {} {}{} messages={} → {} {} ({} ms)",
                    e.seq,
                    e.received
                        .saturating_duration_since(self.shared.started)
                        .as_secs_f64(),
                    e.method,
                    e.path,
                    e.turn.map(|t| format!(" [turn {t}]")).unwrap_or_default(),
                    e.messages().len(),
                    e.status,
                    e.answer,
                    e.answered.saturating_duration_since(e.received).as_millis()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Ids of the tool calls in a request's assistant messages.
fn call_ids_in(e: &OllamaExchange) -> Vec<String> {
    e.messages()
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str))
        .map(String::from)
        .collect()
}

/// Within one request: every assistant tool call answered by exactly one later tool message,
/// every tool message answering a call made before it.
fn check_pairing(e: &OllamaExchange) -> Result<(), String> {
    let msgs = e.messages();
    for (i, m) in msgs.iter().enumerate() {
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                for c in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let Some(id) = c.get("id").and_then(Value::as_str) else {
                        continue;
                    };
                    let n = msgs[i + 1..]
                        .iter()
                        .filter(|r| {
                            r.get("role").and_then(Value::as_str) == Some("tool")
                                && r.get("tool_call_id").and_then(Value::as_str) == Some(id)
                        })
                        .count();
                    if n != 1 {
                        return Err(format!(
                            "request #{}: tool call {id} has {n} tool results after it (want exactly 1)",
                            e.seq
                        ));
                    }
                }
            }
            Some("tool") => {
                if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) {
                    let made_before = msgs[..i].iter().any(|a| {
                        a.get("tool_calls")
                            .and_then(Value::as_array)
                            .is_some_and(|cs| {
                                cs.iter()
                                    .any(|c| c.get("id").and_then(Value::as_str) == Some(id))
                            })
                    });
                    if !made_before {
                        return Err(format!(
                            "request #{}: tool result {id} answers no call made before it",
                            e.seq
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

impl Drop for OllamaServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Sleep `d`, waking early when the server stops; false when it stopped.
fn nap(shared: &Shared, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
    !shared.stop.load(Ordering::SeqCst)
}

/// What was sent, for the log.
struct Sent {
    status: u16,
    turn: Option<usize>,
    tool_call_ids: Vec<String>,
    answer: String,
    /// Close the connection after this answer.
    close: bool,
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    stream.set_nodelay(true)?;
    let mut reader = Reader::new(&stream, &shared.stop, MAX_HEAD, MAX_BODY);
    while let Some(req) = reader.request()? {
        let received = Instant::now();
        let seq = shared.seq.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let close_asked = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        // Logged on arrival (a client may act on the answer before the write returns).
        shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(OllamaExchange {
                seq,
                method: req.method.clone(),
                path: req.path.clone(),
                body: body.clone(),
                headers: req.headers.clone(),
                turn: None,
                status: 0,
                tool_call_ids: Vec::new(),
                received,
                answered: received,
                answer: "(answering)".into(),
            });
        let mut w: &TcpStream = &stream;
        let path = req.path.split('?').next().unwrap_or("").to_string();
        let result = route(shared, &mut w, &req.method, &path, &body);
        let (sent, failed) = match result {
            Ok(sent) => (sent, None),
            Err(e) => (
                Sent {
                    status: 0,
                    turn: None,
                    tool_call_ids: Vec::new(),
                    answer: String::new(),
                    close: true,
                },
                Some(e),
            ),
        };
        if let Some(entry) = shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .find(|e| e.seq == seq)
        {
            entry.turn = sent.turn;
            entry.status = sent.status;
            entry.tool_call_ids = sent.tool_call_ids.clone();
            entry.answered = Instant::now();
            entry.answer = match &failed {
                None => sent.answer.clone(),
                Some(e) => format!("{} (WRITE FAILED: {e})", sent.answer),
            };
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if sent.close || close_asked {
            break;
        }
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn write_whole(w: &mut impl Write, status: u16, content_type: &str, body: &[u8]) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
        reason(status),
        body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    w.write_all(&out)?;
    w.flush()
}

fn json_answer(w: &mut impl Write, status: u16, value: &Value, answer: String) -> io::Result<Sent> {
    write_whole(
        w,
        status,
        "application/json; charset=utf-8",
        value.to_string().as_bytes(),
    )?;
    Ok(Sent {
        status,
        turn: None,
        tool_call_ids: Vec::new(),
        answer,
        close: false,
    })
}

fn find_model(shared: &Shared, asked: &str) -> Option<FakeModel> {
    shared
        .models
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|m| m.matches(asked))
        .cloned()
}

fn route(
    shared: &Shared,
    w: &mut impl Write,
    method: &str,
    path: &str,
    body: &Value,
) -> io::Result<Sent> {
    let asked = body.get("model").and_then(Value::as_str).unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/") => {
            write_whole(w, 200, "text/plain; charset=utf-8", b"Ollama is running")?;
            Ok(Sent {
                status: 200,
                turn: None,
                tool_call_ids: Vec::new(),
                answer: "probe".into(),
                close: false,
            })
        }
        ("GET", "/api/version") => {
            let version = json!({ "version": VERSION }).to_string();
            write_whole(
                w,
                200,
                "application/json; charset=utf-8",
                version.as_bytes(),
            )?;
            Ok(Sent {
                status: 200,
                turn: None,
                tool_call_ids: Vec::new(),
                answer: "version".into(),
                close: false,
            })
        }
        ("GET", "/api/tags") => {
            let models: Vec<Value> = shared
                .models
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|m| {
                    json!({
                        "name": m.name, "model": m.name,
                        "modified_at": "2026-11-30T12:00:00.000000000Z",
                        "size": 9_608_350_718u64,
                        "digest": "c6eb396dbd5992bbe3f5cdb947e8bbc0ee413d7c17e2beaae69f5d569cf982eb",
                        "details": {"parent_model": "", "format": "gguf", "family": m.family,
                                    "families": [m.family], "parameter_size": "8.0B",
                                    "quantization_level": "Q4_K_M"}
                    })
                })
                .collect();
            json_answer(w, 200, &json!({ "models": models }), "tags".into())
        }
        ("POST", "/api/show") => match find_model(shared, asked) {
            Some(m) => {
                let mut info = serde_json::Map::new();
                info.insert("general.architecture".into(), json!(m.family));
                info.insert(
                    format!("{}.context_length", m.family),
                    json!(m.context_length),
                );
                info.insert(format!("{}.embedding_length", m.family), json!(2560));
                let v = json!({
                    "license": "…",
                    "modelfile": format!("FROM {}\n", m.name),
                    "parameters": "temperature 1\ntop_k 64\ntop_p 0.95",
                    "template": "{{ .Prompt }}",
                    "details": {"parent_model": "", "format": "gguf", "family": m.family,
                                "families": [m.family], "parameter_size": "8.0B",
                                "quantization_level": "Q4_K_M"},
                    "model_info": info,
                    "capabilities": m.capabilities,
                    "modified_at": "2026-11-30T12:00:00.000000000Z"
                });
                json_answer(w, 200, &v, format!("show {}", m.name))
            }
            None => json_answer(
                w,
                404,
                &json!({ "error": format!("model '{asked}' not found") }),
                format!("show: {asked} not found"),
            ),
        },
        ("POST", "/api/chat") => {
            if find_model(shared, asked).is_none() {
                return json_answer(
                    w,
                    404,
                    &json!({ "error": format!("model '{asked}' not found") }),
                    format!("chat: {asked} not found"),
                );
            }
            let n = shared.next_turn.fetch_add(1, Ordering::SeqCst);
            let Some(turn) = shared.script.get(n).cloned() else {
                let mut sent = json_answer(
                    w,
                    500,
                    &json!({ "error": "volee ollama stand-in: the script has no more turns" }),
                    format!("turn {n} PAST THE SCRIPT"),
                )?;
                sent.turn = Some(n);
                return Ok(sent);
            };
            let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(true);
            // `options.num_predict`: a text answer longer than that many tokens (one per 4
            // bytes, as the counts below) is cut there and ends with `done_reason: length`.
            let cap = body.pointer("/options/num_predict").and_then(Value::as_u64);
            let turn = cap_text(turn, cap);
            let mut sent = play(shared, w, asked, turn, stream, None)?;
            sent.turn = Some(n);
            Ok(sent)
        }
        _ => json_answer(
            w,
            404,
            &json!({ "error": "404 page not found" }),
            format!("unknown {method} {path}"),
        ),
    }
}

/// A line of the stream with the common fields.
fn line(model: &str, message: Value, done: bool) -> Value {
    json!({
        "model": model,
        "created_at": "2026-11-30T12:00:00.000000000Z",
        "message": message,
        "done": done,
    })
}

/// Text split into deltas after spaces (at most ~8 pieces).
fn deltas(text: &str) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let per = words.len().div_ceil(8).max(1);
    words.chunks(per).map(|c| c.concat()).collect()
}

fn play(
    shared: &Shared,
    w: &mut impl Write,
    model: &str,
    turn: OllamaTurn,
    stream: bool,
    counts: Option<Counts>,
) -> io::Result<Sent> {
    match turn {
        OllamaTurn::Slow { delay, then } => {
            if !nap(shared, delay) {
                return Err(io::Error::other("server stopped"));
            }
            play(shared, w, model, *then, stream, counts)
        }
        OllamaTurn::Usage {
            prompt_eval_count,
            eval_count,
            then,
        } => play(
            shared,
            w,
            model,
            *then,
            stream,
            Some((prompt_eval_count, eval_count)),
        ),
        OllamaTurn::HttpError { status, error } => json_answer(
            w,
            status,
            &json!({ "error": error }),
            format!("HTTP {status} {error:?}"),
        ),
        OllamaTurn::Text(ref text) | OllamaTurn::Length(ref text) => {
            let lines: Vec<Value> = deltas(text)
                .into_iter()
                .map(|d| line(model, json!({"role": "assistant", "content": d}), false))
                .collect();
            let mut done = done_line(model, counts, text);
            if matches!(turn, OllamaTurn::Length(_)) {
                done["done_reason"] = json!("length");
            }
            stream_lines(shared, w, stream, lines, Some(done), false)?;
            Ok(Sent {
                status: 200,
                turn: None,
                tool_call_ids: Vec::new(),
                answer: format!("text {text:?}"),
                close: false,
            })
        }
        OllamaTurn::ToolCalls {
            text,
            calls,
            with_ids,
        } => {
            let mut lines: Vec<Value> = deltas(&text)
                .into_iter()
                .map(|d| line(model, json!({"role": "assistant", "content": d}), false))
                .collect();
            let mut ids = Vec::new();
            let calls_json: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(index, (name, arguments))| {
                    let mut call = json!({
                        "function": {"index": index, "name": name, "arguments": arguments}
                    });
                    if with_ids {
                        let n = shared.ids.fetch_add(1, Ordering::SeqCst);
                        // Ollama: `call_` and 8 characters of [a-z0-9].
                        let id = format!("call_{:08x}", 0x5eed_0000u32 + n as u32);
                        call["id"] = json!(id);
                        ids.push(id);
                    }
                    call
                })
                .collect();
            lines.push(line(
                model,
                json!({"role": "assistant", "content": "", "tool_calls": calls_json}),
                false,
            ));
            let done = done_line(model, counts, &text);
            stream_lines(shared, w, stream, lines, Some(done), false)?;
            let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
            Ok(Sent {
                status: 200,
                turn: None,
                tool_call_ids: ids,
                answer: format!("tool calls {names:?}"),
                close: false,
            })
        }
        OllamaTurn::InStreamError { text, error } => {
            let mut lines: Vec<Value> = deltas(&text)
                .into_iter()
                .map(|d| line(model, json!({"role": "assistant", "content": d}), false))
                .collect();
            lines.push(json!({ "error": error }));
            stream_lines(shared, w, stream, lines, None, false)?;
            Ok(Sent {
                status: 200,
                turn: None,
                tool_call_ids: Vec::new(),
                answer: format!("in-stream error {error:?}"),
                close: false,
            })
        }
        OllamaTurn::Cut { text } => {
            let lines: Vec<Value> = deltas(&text)
                .into_iter()
                .take(1)
                .map(|d| line(model, json!({"role": "assistant", "content": d}), false))
                .collect();
            stream_lines(shared, w, true, lines, None, true)?;
            Ok(Sent {
                status: 200,
                turn: None,
                tool_call_ids: Vec::new(),
                answer: "cut mid-stream".into(),
                close: true,
            })
        }
    }
}

/// A `Text` answer (possibly inside `Slow`/`Usage`) longer than `cap` tokens becomes the
/// cut text with `done_reason: length`, as Ollama ends an answer at `num_predict`.
fn cap_text(turn: OllamaTurn, cap: Option<u64>) -> OllamaTurn {
    let Some(cap) = cap else { return turn };
    match turn {
        OllamaTurn::Text(text) if (text.len() as u64).div_ceil(4) > cap => {
            let mut end = (cap * 4) as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            OllamaTurn::Length(text[..end].to_string())
        }
        OllamaTurn::Slow { delay, then } => OllamaTurn::Slow {
            delay,
            then: Box::new(cap_text(*then, Some(cap))),
        },
        OllamaTurn::Usage {
            prompt_eval_count,
            eval_count,
            then,
        } => OllamaTurn::Usage {
            prompt_eval_count,
            eval_count,
            then: Box::new(cap_text(*then, Some(cap))),
        },
        other => other,
    }
}

/// `prompt_eval_count` and `eval_count` as scripted; `None` inside: left out (`omitempty`).
type Counts = (Option<u64>, Option<u64>);

fn done_line(model: &str, counts: Option<Counts>, text: &str) -> Value {
    let mut v = line(model, json!({"role": "assistant", "content": ""}), true);
    v["done_reason"] = json!("stop");
    v["total_duration"] = json!(182_242_375u64);
    v["load_duration"] = json!(41_295_167u64);
    v["prompt_eval_duration"] = json!(24_573_166u64);
    v["eval_duration"] = json!(115_959_084u64);
    // Unscripted: a plausible prompt size and one token per 4 bytes of text.
    let (prompt, eval) =
        counts.unwrap_or((Some(169), Some((text.len() as u64).div_ceil(4).max(1))));
    if let Some(n) = prompt {
        v["prompt_eval_count"] = json!(n);
    }
    if let Some(n) = eval {
        v["eval_count"] = json!(n);
    }
    v
}

/// Write `lines` (then `done`) as NDJSON: chunked and paced when streaming, one object otherwise
/// (the last line with the text gathered). `cut`: stop without the terminating chunk.
fn stream_lines(
    shared: &Shared,
    w: &mut impl Write,
    stream: bool,
    mut lines: Vec<Value>,
    done: Option<Value>,
    cut: bool,
) -> io::Result<()> {
    if !stream {
        // `"stream": false`: one object, content and tool calls gathered into the done line.
        let mut content = String::new();
        let mut calls = Vec::new();
        for l in &lines {
            if let Some(e) = l.get("error") {
                return write_whole(
                    w,
                    500,
                    "application/json; charset=utf-8",
                    json!({"error": e}).to_string().as_bytes(),
                );
            }
            if let Some(c) = l["message"]["content"].as_str() {
                content.push_str(c);
            }
            if let Some(t) = l["message"]["tool_calls"].as_array() {
                calls.extend(t.iter().cloned());
            }
        }
        let mut last = done.unwrap_or_else(|| json!({}));
        last["message"]["content"] = json!(content);
        if !calls.is_empty() {
            last["message"]["tool_calls"] = json!(calls);
        }
        return write_whole(
            w,
            200,
            "application/json; charset=utf-8",
            last.to_string().as_bytes(),
        );
    }
    w.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
    )?;
    w.flush()?;
    lines.extend(done);
    let delay = Duration::from_millis(shared.line_delay_ms.load(Ordering::SeqCst));
    for (i, l) in lines.iter().enumerate() {
        if i > 0 && !delay.is_zero() && !nap(shared, delay) {
            return Err(io::Error::other("server stopped"));
        }
        let mut data = l.to_string().into_bytes();
        data.push(b'\n');
        w.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
        w.write_all(&data)?;
        w.write_all(b"\r\n")?;
        w.flush()?;
    }
    if cut {
        return Ok(());
    }
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}
