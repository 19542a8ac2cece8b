//! A small client of the Codex CLI's shared app-server daemon (daemon mode, the default since
//! 0.171): which Codex threads are loaded, in which folder, with which first prompt, and whether
//! each is running a turn, waiting on an approval or on user input, or idle.
//!
//! The daemon's control socket (`$CODEX_HOME/app-server-control/app-server-control.sock`, CODEX_HOME
//! defaulting to `~/.codex`) speaks **WebSocket over a Unix socket**: an HTTP/1.1 upgrade, then one
//! JSON-RPC message per text frame, without a `"jsonrpc"` field. The exchange is
//! `initialize{clientInfo}` → (notification `initialized`) → `thread/loaded/list` →
//! `thread/list{includedThreadIds, limit}` (→ `thread/read{threadId}` for a loaded thread the list
//! left out). Schema: `../shared/reference/probe/codex-app-server-schema/` (`ThreadStatus` =
//! `notLoaded | idle | systemError | active{activeFlags: [waitingOnApproval | waitingOnUserInput]}`).
//!
//! The WebSocket client is written here rather than taken from `tokio-tungstenite`: the client
//! half of RFC 6455 that a local, request/response listing needs (handshake with the accept-key
//! check, masked client frames, text/continuation/ping/pong/close, 7/16/64-bit lengths, a size cap)
//! is a few hundred lines of pure, unit-tested code, against a dependency tree (`tungstenite`,
//! `http`, `sha1`, `rand`, `url`, …) added to a daemon that otherwise needs none of it. No TLS,
//! extensions or subprotocols are involved on a Unix socket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use volee_protocol::AgentState;

/// The largest message (after reassembling fragments) accepted from the daemon.
pub const MAX_MESSAGE: usize = 8 << 20;
/// The largest HTTP upgrade response accepted.
const MAX_HANDSHAKE: usize = 16 << 10;
/// Clock slack allowed by [`match_thread`] between volee's launch time and Codex's `createdAt`.
pub const CREATED_SLACK_SECS: u64 = 5;
/// `clientInfo.name` sent with `initialize`. The app-server makes the **first** client name it
/// hears the process-wide originator (`set_default_originator`, write-once): every later thread
/// of that daemon, the user's TUI sessions included, would carry it in its rollout `originator`
/// and in the `originator`/User-Agent headers of its model requests (measured on 0.171.0 with
/// the name `volee`: the TUI's requests went out as `originator: volee`,
/// `User-Agent: volee/0.171.0 …`), and Codex treats non-first-party originators differently. This
/// reserved name is exempt from that (upstream `initialize_processor`), so a listing by volee
/// leaves the user's sessions as they are; the title still says who is asking.
pub const CLIENT_NAME: &str = "codex_app_server_daemon";
/// `thread/list` and `thread/loaded/list` pages followed at most (a safety bound, not a limit
/// anyone should meet: a page of `thread/list` holds up to 100 threads).
const MAX_PAGES: usize = 20;

/// The control socket of the daemon serving `codex_home` (a user's `~/.codex`).
pub fn socket_in(codex_home: &Path) -> PathBuf {
    codex_home
        .join("app-server-control")
        .join("app-server-control.sock")
}

/// The control socket for this process's environment: `$CODEX_HOME`, else `$HOME/.codex`.
pub fn default_socket() -> Option<PathBuf> {
    let home = std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".codex"))
        })?;
    Some(socket_in(&home))
}

#[derive(Debug, thiserror::Error)]
pub enum CodexServerError {
    #[error("could not connect to the Codex app-server at {path}")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the Codex app-server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("i/o error talking to the Codex app-server")]
    Io(#[from] std::io::Error),
    #[error("the Codex app-server refused the WebSocket upgrade: {0}")]
    Handshake(String),
    #[error("WebSocket protocol error: {0}")]
    Protocol(String),
    #[error("a message from the Codex app-server exceeds {0} bytes")]
    TooLarge(usize),
    #[error("the Codex app-server closed the connection{0}")]
    Closed(String),
    #[error("the Codex app-server answered {method} with error {code}: {message}")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("unexpected message from the Codex app-server: {0}")]
    Malformed(String),
}

// ---------------------------------------------------------------------------------------------
// Threads

/// `Thread.status` of the app-server protocol (`ThreadStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadStatus {
    /// `{"type":"active","activeFlags":[…]}`: a turn is running. The flags (`ThreadActiveFlag`)
    /// say whether it waits on the user: `waitingOnApproval`, `waitingOnUserInput`; `flags` keeps
    /// them all as sent, unknown ones included.
    Active {
        waiting_on_approval: bool,
        waiting_on_input: bool,
        flags: Vec<String>,
    },
    /// `{"type":"idle"}`: loaded, no turn running.
    Idle,
    /// `{"type":"notLoaded"}`: on disk only.
    NotLoaded,
    /// `{"type":"systemError"}`: the schema says no more than the name.
    SystemError,
    /// Any other `type` (a newer Codex), or a status without one (`""`).
    Other(String),
}

impl ThreadStatus {
    /// Parses a `ThreadStatus` JSON value; never fails (unknown shapes become `Other`).
    pub fn from_json(v: &Value) -> ThreadStatus {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "active" => {
                let flags: Vec<String> = v
                    .get("activeFlags")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|f| f.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                ThreadStatus::Active {
                    waiting_on_approval: flags.iter().any(|f| f == "waitingOnApproval"),
                    waiting_on_input: flags.iter().any(|f| f == "waitingOnUserInput"),
                    flags,
                }
            }
            "idle" => ThreadStatus::Idle,
            "notLoaded" => ThreadStatus::NotLoaded,
            "systemError" => ThreadStatus::SystemError,
            other => ThreadStatus::Other(other.to_string()),
        }
    }

    /// What it means for the agent: a waiting flag → needs you; active → working; idle → idle.
    /// `notLoaded`, `systemError` (undocumented beyond its name) and unknown statuses say nothing.
    pub fn state(&self) -> Option<AgentState> {
        match self {
            ThreadStatus::Active {
                waiting_on_approval,
                waiting_on_input,
                ..
            } if *waiting_on_approval || *waiting_on_input => Some(AgentState::NeedsYou),
            ThreadStatus::Active { .. } => Some(AgentState::Working),
            ThreadStatus::Idle => Some(AgentState::Idle),
            ThreadStatus::NotLoaded | ThreadStatus::SystemError | ThreadStatus::Other(_) => None,
        }
    }

    /// A short form for evidence and logs: `active[waitingOnApproval]`, `idle`, …
    pub fn describe(&self) -> String {
        match self {
            ThreadStatus::Active { flags, .. } if flags.is_empty() => "active".into(),
            ThreadStatus::Active { flags, .. } => format!("active[{}]", flags.join(",")),
            ThreadStatus::Idle => "idle".into(),
            ThreadStatus::NotLoaded => "notLoaded".into(),
            ThreadStatus::SystemError => "systemError".into(),
            ThreadStatus::Other(t) => format!("other({t})"),
        }
    }
}

/// One Codex thread (session) as the app-server describes it (`Thread`, the fields volee uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexThread {
    /// UUIDv7 thread id (the session id `codex resume` takes).
    pub id: String,
    /// The thread's working directory.
    pub cwd: String,
    /// Usually the first user message; empty before one is sent.
    pub preview: String,
    pub status: ThreadStatus,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix seconds.
    pub updated_at: u64,
    /// The rollout file (`~/.codex/sessions/…/rollout-…-<id>.jsonl`), when materialized.
    pub path: Option<String>,
    /// The user-facing title (set from the first prompt).
    pub name: Option<String>,
    /// `source` as sent: `"cli"`, `"vscode"`, `{"subAgent":…}`, …
    pub source: Value,
    /// Set only for a sub-agent's thread.
    pub parent_thread_id: Option<String>,
    /// Not materialized on disk. Codex 0.171 keeps a loaded ephemeral helper thread per TUI
    /// (`threadSource: "thread_title"`, empty preview, no path, same cwd) to name the session.
    pub ephemeral: bool,
    /// `threadSource` (`"thread_title"` for that helper; null for a user's thread).
    pub thread_source: Option<String>,
    /// The client recorded as the thread's creator (`"codex-tui"`, …).
    pub originator: Option<String>,
}

impl CodexThread {
    /// Parses one `Thread` object; None without an `id`.
    pub fn from_json(v: &Value) -> Option<CodexThread> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
        let secs = |k: &str| {
            v.get(k)
                .and_then(|n| n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)))
                .unwrap_or(0)
        };
        Some(CodexThread {
            id: text("id").filter(|s| !s.is_empty())?,
            cwd: text("cwd").unwrap_or_default(),
            preview: text("preview").unwrap_or_default(),
            status: ThreadStatus::from_json(v.get("status").unwrap_or(&Value::Null)),
            created_at: secs("createdAt"),
            updated_at: secs("updatedAt"),
            path: text("path"),
            name: text("name"),
            source: v.get("source").cloned().unwrap_or(Value::Null),
            parent_thread_id: text("parentThreadId"),
            ephemeral: v.get("ephemeral").and_then(Value::as_bool).unwrap_or(false),
            thread_source: text("threadSource"),
            originator: text("originator"),
        })
    }

    /// See [`ThreadStatus::state`].
    pub fn state(&self) -> Option<AgentState> {
        self.status.state()
    }

    /// A sub-agent's thread (never the thread of a TUI).
    pub fn is_subagent(&self) -> bool {
        self.parent_thread_id.is_some() || self.source.get("subAgent").is_some()
    }

    /// Could this be the thread a user talks to in a TUI? Not a sub-agent's, not an ephemeral
    /// helper (the title generator), not one with a `threadSource` of its own.
    pub fn is_user_thread(&self) -> bool {
        !self.is_subagent() && !self.ephemeral && self.thread_source.is_none()
    }
}

/// The thread of one Codex TUI started at `launched_at_secs` in `cwd` (with `prompt` as its first
/// message when known): the only user thread ([`CodexThread::is_user_thread`]) in that folder created at or after the
/// launch (less [`CREATED_SLACK_SECS`]) whose preview is the prompt (or starts with it; either
/// side trimmed). None when there is no such thread **or more than one**: volee never guesses.
pub fn match_thread<'a>(
    threads: &'a [CodexThread],
    cwd: &str,
    prompt: Option<&str>,
    launched_at_secs: u64,
) -> Option<&'a CodexThread> {
    let prompt = prompt.map(str::trim).filter(|p| !p.is_empty());
    let earliest = launched_at_secs.saturating_sub(CREATED_SLACK_SECS);
    let mut found = threads.iter().filter(|t| {
        t.is_user_thread()
            && Path::new(&t.cwd) == Path::new(cwd)
            && t.created_at >= earliest
            && prompt.is_none_or(|p| t.preview.trim().starts_with(p))
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

// ---------------------------------------------------------------------------------------------
// The listing

/// The loaded threads of the daemon at `socket`, with their details, within `timeout` overall.
pub async fn list_threads(
    socket: &Path,
    timeout: Duration,
) -> Result<Vec<CodexThread>, CodexServerError> {
    match tokio::time::timeout(timeout, list_threads_inner(socket)).await {
        Ok(r) => r,
        Err(_) => Err(CodexServerError::Timeout(timeout)),
    }
}

async fn list_threads_inner(socket: &Path) -> Result<Vec<CodexThread>, CodexServerError> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|source| CodexServerError::Connect {
            path: socket.display().to_string(),
            source,
        })?;
    let mut rpc = Rpc::new(WsClient::connect(stream, "localhost", "/").await?);
    let result = list_loaded(&mut rpc).await;
    rpc.ws.close().await;
    result
}

/// The listing over an open connection (generic so tests can drive it with a scripted server).
pub(crate) async fn list_loaded<S: AsyncRead + AsyncWrite + Unpin>(
    rpc: &mut Rpc<S>,
) -> Result<Vec<CodexThread>, CodexServerError> {
    rpc.call(
        "initialize",
        json!({"clientInfo": {"name": CLIENT_NAME, "title": "volee", "version": env!("CARGO_PKG_VERSION")}}),
    )
    .await?;
    rpc.notify("initialized").await?;

    let mut loaded: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = rpc
            .call("thread/loaded/list", json!({ "cursor": cursor }))
            .await?;
        loaded.extend(string_array(&page["data"]));
        cursor = page["nextCursor"].as_str().map(String::from);
        if cursor.is_none() {
            break;
        }
    }
    let mut seen = std::collections::HashSet::new();
    loaded.retain(|id| seen.insert(id.clone()));
    if loaded.is_empty() {
        return Ok(Vec::new());
    }

    let mut threads: Vec<CodexThread> = Vec::new();
    for chunk in loaded.chunks(100) {
        let page = rpc
            .call(
                "thread/list",
                json!({ "limit": chunk.len(), "includedThreadIds": chunk }),
            )
            .await?;
        threads.extend(
            page["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(CodexThread::from_json)
                .filter(|t| chunk.contains(&t.id)),
        );
    }
    // A loaded thread the list leaves out (not materialized on disk yet): ask for it alone.
    for id in &loaded {
        if threads.iter().any(|t| &t.id == id) {
            continue;
        }
        match rpc
            .call(
                "thread/read",
                json!({ "threadId": id, "includeTurns": false }),
            )
            .await
        {
            Ok(v) => threads.extend(CodexThread::from_json(&v["thread"])),
            Err(CodexServerError::Rpc { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    threads.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
    threads.dedup_by(|a, b| a.id == b.id);
    Ok(threads)
}

fn string_array(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// JSON-RPC without the `"jsonrpc"` field, one message per text frame.
pub(crate) struct Rpc<S> {
    pub(crate) ws: WsClient<S>,
    next_id: u64,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Rpc<S> {
    pub(crate) fn new(ws: WsClient<S>) -> Rpc<S> {
        Rpc { ws, next_id: 1 }
    }

    async fn notify(&mut self, method: &str) -> Result<(), CodexServerError> {
        self.ws
            .send_text(&json!({ "method": method }).to_string())
            .await
    }

    /// Sends a request and returns its `result`, skipping notifications; a request from the server
    /// (an approval to a client that asked for none) is answered "method not found".
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, CodexServerError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "id": id, "method": method, "params": params });
        tracing::debug!(target: "volee::codex_server", "→ {request}");
        self.ws.send_text(&request.to_string()).await?;
        loop {
            let text = self.ws.next_text().await?;
            let msg: Value = serde_json::from_str(&text)
                .map_err(|e| CodexServerError::Malformed(format!("{e}: {}", clip(&text))))?;
            tracing::debug!(target: "volee::codex_server", "← {}", clip(&text));
            let has_method = msg.get("method").is_some();
            match msg.get("id") {
                Some(got) if !has_method && got.as_u64() == Some(id) => {
                    if let Some(err) = msg.get("error") {
                        return Err(CodexServerError::Rpc {
                            method: method.to_string(),
                            code: err["code"].as_i64().unwrap_or(0),
                            message: err["message"].as_str().unwrap_or("").to_string(),
                        });
                    }
                    return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
                }
                Some(got) if has_method => {
                    let reply = json!({"id": got, "error": {"code": -32601, "message": "volee only lists threads"}});
                    self.ws.send_text(&reply.to_string()).await?;
                }
                _ => {} // a notification, or an answer to nothing we wait for
            }
        }
    }
}

fn clip(text: &str) -> String {
    if text.len() <= 300 {
        return text.to_string();
    }
    let mut end = 300;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

// ---------------------------------------------------------------------------------------------
// WebSocket client (RFC 6455, client side)

pub(crate) const OP_CONTINUATION: u8 = 0x0;
pub(crate) const OP_TEXT: u8 = 0x1;
pub(crate) const OP_BINARY: u8 = 0x2;
pub(crate) const OP_CLOSE: u8 = 0x8;
pub(crate) const OP_PING: u8 = 0x9;
pub(crate) const OP_PONG: u8 = 0xA;

/// One decoded frame (payload unmasked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) fin: bool,
    pub(crate) opcode: u8,
    pub(crate) payload: Vec<u8>,
}

/// Decodes one frame from the front of `buf`: Ok(None) when more bytes are needed, else the
/// frame and the bytes it used. Reserved bits (no extension was negotiated), unknown opcodes,
/// fragmented or oversized control frames and payloads over `max` are errors.
pub(crate) fn decode_frame(
    buf: &[u8],
    max: usize,
) -> Result<Option<(Frame, usize)>, CodexServerError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (b0, b1) = (buf[0], buf[1]);
    let fin = b0 & 0x80 != 0;
    if b0 & 0x70 != 0 {
        return Err(CodexServerError::Protocol("reserved bits set".into()));
    }
    let opcode = b0 & 0x0F;
    if !matches!(
        opcode,
        OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
    ) {
        return Err(CodexServerError::Protocol(format!("opcode {opcode:#x}")));
    }
    let masked = b1 & 0x80 != 0;
    let (len, mut at) = match b1 & 0x7F {
        126 => {
            if buf.len() < 4 {
                return Ok(None);
            }
            (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4)
        }
        127 => {
            if buf.len() < 10 {
                return Ok(None);
            }
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b), 10)
        }
        n => (u64::from(n), 2),
    };
    if opcode >= OP_CLOSE && (!fin || len > 125) {
        return Err(CodexServerError::Protocol(
            "fragmented or long control frame".into(),
        ));
    }
    if len > max as u64 {
        return Err(CodexServerError::TooLarge(max));
    }
    let len = len as usize;
    let mut mask = None;
    if masked {
        if buf.len() < at + 4 {
            return Ok(None);
        }
        mask = Some([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        at += 4;
    }
    if buf.len() < at + len {
        return Ok(None);
    }
    let mut payload = buf[at..at + len].to_vec();
    if let Some(m) = mask {
        apply_mask(&mut payload, m);
    }
    Ok(Some((
        Frame {
            fin,
            opcode,
            payload,
        },
        at + len,
    )))
}

/// One frame as a client sends it: FIN set, masked with `mask`.
pub(crate) fn encode_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask);
    out
}

fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
}

/// What the reassembly of frames yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    Text(String),
    Binary,
    Ping(Vec<u8>),
    Pong,
    Close(Option<u16>, String),
}

/// Reassembles fragmented messages; control frames may come between fragments.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    partial: Option<(u8, Vec<u8>)>,
}

impl Assembler {
    pub(crate) fn push(
        &mut self,
        frame: Frame,
        max: usize,
    ) -> Result<Option<Event>, CodexServerError> {
        match frame.opcode {
            OP_PING => return Ok(Some(Event::Ping(frame.payload))),
            OP_PONG => return Ok(Some(Event::Pong)),
            OP_CLOSE => {
                let code = (frame.payload.len() >= 2)
                    .then(|| u16::from_be_bytes([frame.payload[0], frame.payload[1]]));
                let reason = frame
                    .payload
                    .get(2..)
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .unwrap_or_default();
                return Ok(Some(Event::Close(code, reason)));
            }
            _ => {}
        }
        let (opcode, mut data) = match (frame.opcode, self.partial.take()) {
            (OP_CONTINUATION, Some((op, mut data))) => {
                data.extend_from_slice(&frame.payload);
                (op, data)
            }
            (OP_CONTINUATION, None) => {
                return Err(CodexServerError::Protocol(
                    "continuation without a message".into(),
                ))
            }
            (_, Some(_)) => {
                return Err(CodexServerError::Protocol(
                    "new message inside a fragmented one".into(),
                ))
            }
            (op, None) => (op, frame.payload),
        };
        if data.len() > max {
            return Err(CodexServerError::TooLarge(max));
        }
        if !frame.fin {
            self.partial = Some((opcode, std::mem::take(&mut data)));
            return Ok(None);
        }
        Ok(Some(match opcode {
            OP_TEXT => Event::Text(
                String::from_utf8(data)
                    .map_err(|_| CodexServerError::Protocol("text message is not UTF-8".into()))?,
            ),
            _ => Event::Binary,
        }))
    }
}

/// A WebSocket client connection over any byte stream.
pub(crate) struct WsClient<S> {
    stream: S,
    buf: Vec<u8>,
    assembler: Assembler,
    masks: MaskSource,
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsClient<S> {
    /// The HTTP/1.1 upgrade: sends the request, checks `101`, `Upgrade: websocket` and the
    /// `Sec-WebSocket-Accept` digest of our key. Bytes after the response's headers are kept.
    pub(crate) async fn connect(
        mut stream: S,
        host: &str,
        path: &str,
    ) -> Result<WsClient<S>, CodexServerError> {
        let mut masks = MaskSource::new();
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&masks.next_u64().to_le_bytes());
        nonce[8..].copy_from_slice(&masks.next_u64().to_le_bytes());
        let key = base64(&nonce);
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        stream.flush().await?;

        let mut buf = Vec::with_capacity(1024);
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > MAX_HANDSHAKE {
                return Err(CodexServerError::Handshake(
                    "response headers too long".into(),
                ));
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(CodexServerError::Handshake(format!(
                    "connection closed during the upgrade (got {:?})",
                    String::from_utf8_lossy(&buf)
                )));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        check_upgrade_response(&head, &key)?;
        buf.drain(..end);
        Ok(WsClient {
            stream,
            buf,
            assembler: Assembler::default(),
            masks,
        })
    }

    pub(crate) async fn send_text(&mut self, text: &str) -> Result<(), CodexServerError> {
        self.send(OP_TEXT, text.as_bytes()).await
    }

    async fn send(&mut self, opcode: u8, payload: &[u8]) -> Result<(), CodexServerError> {
        let mask = (self.masks.next_u64() as u32).to_le_bytes();
        self.stream
            .write_all(&encode_frame(opcode, payload, mask))
            .await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// The next text message; pings are answered, pongs and binary messages skipped, a close
    /// frame is answered and reported as [`CodexServerError::Closed`].
    pub(crate) async fn next_text(&mut self) -> Result<String, CodexServerError> {
        loop {
            let frame = loop {
                if let Some((frame, used)) = decode_frame(&self.buf, MAX_MESSAGE)? {
                    self.buf.drain(..used);
                    break frame;
                }
                let mut chunk = vec![0u8; 64 << 10];
                let n = self.stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(CodexServerError::Closed(" without a close frame".into()));
                }
                self.buf.extend_from_slice(&chunk[..n]);
            };
            match self.assembler.push(frame, MAX_MESSAGE)? {
                None | Some(Event::Pong) | Some(Event::Binary) => {}
                Some(Event::Text(t)) => return Ok(t),
                Some(Event::Ping(p)) => self.send(OP_PONG, &p).await?,
                Some(Event::Close(code, reason)) => {
                    let echo = code.map(|c| c.to_be_bytes().to_vec()).unwrap_or_default();
                    let _ = self.send(OP_CLOSE, &echo).await;
                    return Err(CodexServerError::Closed(match code {
                        Some(c) => format!(" ({c} {reason})"),
                        None => String::new(),
                    }));
                }
            }
        }
    }

    /// A polite close (normal closure); errors are irrelevant at this point.
    pub(crate) async fn close(&mut self) {
        let _ = self.send(OP_CLOSE, &1000u16.to_be_bytes()).await;
        let _ = self.stream.shutdown().await;
    }
}

fn check_upgrade_response(head: &str, key: &str) -> Result<(), CodexServerError> {
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with("HTTP/1.1") || code != "101" {
        return Err(CodexServerError::Handshake(format!(
            "status line {status:?}"
        )));
    }
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if !header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")) {
        return Err(CodexServerError::Handshake(
            "no `Upgrade: websocket`".into(),
        ));
    }
    let expected = accept_key(key);
    match header("sec-websocket-accept") {
        Some(got) if got == expected => Ok(()),
        got => Err(CodexServerError::Handshake(format!(
            "Sec-WebSocket-Accept {got:?}, expected {expected:?}"
        ))),
    }
}

/// `base64(sha1(key + GUID))`, RFC 6455 section 4.2.2.
pub(crate) fn accept_key(key: &str) -> String {
    let mut input = key.as_bytes().to_vec();
    input.extend_from_slice(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64(&sha1(&input))
}

/// Masking keys and the handshake nonce. RFC 6455 wants them unpredictable to defeat cache
/// poisoning through intermediaries; a Unix socket has none, so the process's randomly keyed
/// SipHash (std's `RandomState`) over a counter is plenty and needs no RNG crate.
struct MaskSource {
    state: std::collections::hash_map::RandomState,
    counter: u64,
}

impl MaskSource {
    fn new() -> MaskSource {
        MaskSource {
            state: std::collections::hash_map::RandomState::new(),
            counter: 0,
        }
    }

    fn next_u64(&mut self) -> u64 {
        use std::hash::BuildHasher;
        self.counter += 1;
        self.state.hash_one(self.counter)
    }
}

fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 0x3F) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// SHA-1 (FIPS 180-1), only for the handshake's accept digest.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// `thread/list`'s answer as recorded from Codex 0.171.0 (`probe/codex-daemon-query.txt`,
    /// `gitInfo` and `readStates` trimmed).
    const PROBE_THREAD_LIST: &str = r#"{"id":3,"result":{"data":[{"id":"01a22ab8-34d5-7a73-9c8e-316065b6cd1a","environments":[{"environmentId":"local","cwd":"/home/dev/proj1/codex","runtimeWorkspaceRoots":["/home/dev/proj1/codex"]}],"extra":null,"sessionId":"01a22ab8-34d5-7a73-9c8e-316065b6cd1a","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"say hello daemon","ephemeral":false,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"openai","model":"gpt-6.2-sol","reasoningEffort":null,"createdAt":1796013051,"updatedAt":1796013051,"recencyAt":1796013051,"status":{"type":"active","activeFlags":[]},"path":"/home/dev/home1/codex/.codex/sessions/2026/11/30/rollout-2026-11-30T04-30-51-01a22ab8-34d5-7a73-9c8e-316065b6cd1a.jsonl","cwd":"/home/dev/proj1/codex","cliVersion":"0.171.0","originator":"codex-tui","source":"vscode","canAcceptDirectInput":null,"threadSource":null,"agentNickname":null,"agentRole":null,"gitInfo":null,"name":"say hello daemon","daybreakEnabled":null,"turns":[]},{"id":"01a22ab6-cfb5-7593-8ad5-c60afb75f756","environments":null,"extra":null,"sessionId":"01a22ab6-cfb5-7593-8ad5-c60afb75f756","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"say hello","ephemeral":false,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"openai","model":"gpt-6.2-sol","reasoningEffort":null,"createdAt":1796012959,"updatedAt":1796012960,"recencyAt":1796012960,"status":{"type":"notLoaded"},"path":"/home/dev/home1/codex/.codex/sessions/2026/11/30/rollout-2026-11-30T04-29-19-01a22ab6-cfb5-7593-8ad5-c60afb75f756.jsonl","cwd":"/home/dev/proj1/codex","cliVersion":"0.171.0","originator":"codex-tui","source":"cli","canAcceptDirectInput":null,"threadSource":null,"agentNickname":null,"agentRole":null,"gitInfo":null,"name":"say hello","daybreakEnabled":null,"turns":[]}],"nextCursor":null,"backwardsCursor":"2026-11-30T04:30:51.085Z"}}"#;

    /// `thread/read` of the ephemeral title thread every 0.171.0 TUI keeps loaded beside its own
    /// (recorded by the integration test).
    const TITLE_THREAD_READ: &str = r#"{"id":4,"result":{"thread":{"id":"01a22e2f-c9f3-7fe1-93c0-ba13760a0882","environments":[{"environmentId":"local","cwd":"/tmp/w","runtimeWorkspaceRoots":[]}],"extra":null,"sessionId":"01a22e2f-c9f3-7fe1-93c0-ba13760a0882","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"","ephemeral":true,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"volee","model":"volee-test-model","reasoningEffort":null,"createdAt":1796071215,"updatedAt":1796071215,"recencyAt":1796071215,"status":{"type":"idle"},"path":null,"cwd":"/tmp/w","cliVersion":"0.171.0","originator":"codex-tui","source":"vscode","canAcceptDirectInput":true,"threadSource":"thread_title","agentNickname":null,"agentRole":null,"gitInfo":null,"name":null,"daybreakEnabled":null,"turns":[]},"readState":null}}"#;

    fn probe_threads() -> Vec<CodexThread> {
        let v: Value = serde_json::from_str(PROBE_THREAD_LIST).unwrap();
        v["result"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(CodexThread::from_json)
            .collect()
    }

    #[test]
    fn sha1_base64_and_the_rfc_accept_key() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&sha1(b"abc")), "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=");
        // 56 bytes: the padding spills into a second block.
        assert_eq!(
            base64(&sha1(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "hJg+RBw70m66rkqh+VEp5eVGcPE="
        );
        // RFC 6455 section 1.3.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn client_frames_are_masked_with_7_16_and_64_bit_lengths() {
        let mask = [1, 2, 3, 4];
        for (len, header) in [
            (5usize, 2usize),
            (125, 2),
            (126, 4),
            (65535, 4),
            (65536, 10),
        ] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let frame = encode_frame(OP_TEXT, &payload, mask);
            assert_eq!(frame.len(), header + 4 + len, "len {len}");
            assert_eq!(frame[0], 0x81);
            assert_eq!(frame[1] & 0x80, 0x80, "mask bit");
            assert_eq!(&frame[header..header + 4], &mask);
            if len > 0 {
                assert_ne!(&frame[header + 4..], &payload[..], "payload is masked");
            }
            let (back, used) = decode_frame(&frame, MAX_MESSAGE).unwrap().unwrap();
            assert_eq!(used, frame.len());
            assert_eq!(back.payload, payload);
            assert!(back.fin);
            // Any prefix is "need more".
            assert_eq!(
                decode_frame(&frame[..frame.len() - 1], MAX_MESSAGE).unwrap(),
                None
            );
            assert_eq!(decode_frame(&frame[..1], MAX_MESSAGE).unwrap(), None);
        }
    }

    /// A server frame (unmasked), with a 16- or 64-bit length as needed.
    fn server_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            n if n < 126 => out.push(n as u8),
            n if n <= 0xFFFF => {
                out.push(126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn server_frames_decode_and_bad_ones_are_refused() {
        let big = vec![b'x'; 70_000];
        let f = server_frame(true, OP_TEXT, &big);
        assert_eq!(f[1], 127);
        let (frame, used) = decode_frame(&f, MAX_MESSAGE).unwrap().unwrap();
        assert_eq!((frame.payload.len(), used), (70_000, f.len()));
        // Over the cap: refused from the header alone, before the payload arrives.
        assert!(matches!(
            decode_frame(&f[..10], 1000),
            Err(CodexServerError::TooLarge(1000))
        ));
        // Reserved bits (no extension negotiated), unknown opcode, long or fragmented control.
        assert!(decode_frame(&[0xC1, 0], MAX_MESSAGE).is_err());
        assert!(decode_frame(&[0x83, 0], MAX_MESSAGE).is_err());
        assert!(decode_frame(&server_frame(true, OP_PING, &[0; 126]), MAX_MESSAGE).is_err());
        assert!(decode_frame(&server_frame(false, OP_PING, b"x"), MAX_MESSAGE).is_err());
    }

    #[test]
    fn fragments_reassemble_around_control_frames() {
        let mut a = Assembler::default();
        let push = |a: &mut Assembler, fin, op, p: &[u8]| {
            a.push(
                Frame {
                    fin,
                    opcode: op,
                    payload: p.to_vec(),
                },
                64,
            )
        };
        assert_eq!(push(&mut a, false, OP_TEXT, b"{\"id\":").unwrap(), None);
        assert_eq!(
            push(&mut a, true, OP_PING, b"hb").unwrap(),
            Some(Event::Ping(b"hb".to_vec()))
        );
        assert_eq!(push(&mut a, false, OP_CONTINUATION, b"1,").unwrap(), None);
        assert_eq!(
            push(&mut a, true, OP_CONTINUATION, b"\"x\":\"\xc3\xa9\"}").unwrap(),
            Some(Event::Text("{\"id\":1,\"x\":\"é\"}".into()))
        );
        assert!(push(&mut a, true, OP_CONTINUATION, b"x").is_err());
        assert_eq!(push(&mut a, false, OP_TEXT, b"a").unwrap(), None);
        assert!(
            push(&mut a, true, OP_TEXT, b"b").is_err(),
            "new message inside one"
        );
        let mut a = Assembler::default();
        assert_eq!(push(&mut a, false, OP_TEXT, &[b'a'; 40]).unwrap(), None);
        assert!(matches!(
            push(&mut a, true, OP_CONTINUATION, &[b'a'; 40]),
            Err(CodexServerError::TooLarge(64))
        ));
        let mut a = Assembler::default();
        assert!(push(&mut a, true, OP_TEXT, b"\xff").is_err(), "not UTF-8");
        assert_eq!(
            push(&mut a, true, OP_CLOSE, b"\x03\xe8bye").unwrap(),
            Some(Event::Close(Some(1000), "bye".into()))
        );
    }

    #[test]
    fn upgrade_responses_are_checked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let ok = "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        check_upgrade_response(ok, key).unwrap();
        let wrong = ok.replace("s3pP", "AAAA");
        assert!(check_upgrade_response(&wrong, key).is_err());
        let refused = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
        assert!(check_upgrade_response(refused, key).is_err());
    }

    #[test]
    fn statuses_and_their_states() {
        let s = |j: &str| ThreadStatus::from_json(&serde_json::from_str(j).unwrap());
        let asking = s(r#"{"type":"active","activeFlags":["waitingOnApproval"]}"#);
        assert_eq!(asking.state(), Some(AgentState::NeedsYou));
        assert_eq!(asking.describe(), "active[waitingOnApproval]");
        let input = s(r#"{"type":"active","activeFlags":["waitingOnUserInput"]}"#);
        assert!(matches!(
            input,
            ThreadStatus::Active {
                waiting_on_input: true,
                waiting_on_approval: false,
                ..
            }
        ));
        assert_eq!(input.state(), Some(AgentState::NeedsYou));
        let running = s(r#"{"type":"active","activeFlags":[]}"#);
        assert_eq!(running.state(), Some(AgentState::Working));
        let future = s(r#"{"type":"active","activeFlags":["somethingNew"]}"#);
        assert_eq!(future.state(), Some(AgentState::Working));
        assert_eq!(s(r#"{"type":"idle"}"#).state(), Some(AgentState::Idle));
        assert_eq!(s(r#"{"type":"notLoaded"}"#), ThreadStatus::NotLoaded);
        assert_eq!(s(r#"{"type":"systemError"}"#).state(), None);
        assert_eq!(
            s(r#"{"type":"paused"}"#),
            ThreadStatus::Other("paused".into())
        );
        assert_eq!(s("null"), ThreadStatus::Other(String::new()));
    }

    #[test]
    fn recorded_threads_parse() {
        let threads = probe_threads();
        assert_eq!(threads.len(), 2);
        let t = &threads[0];
        assert_eq!(t.id, "01a22ab8-34d5-7a73-9c8e-316065b6cd1a");
        assert_eq!(t.cwd, "/home/dev/proj1/codex");
        assert_eq!(t.preview, "say hello daemon");
        assert_eq!(t.created_at, 1796013051);
        assert_eq!(t.name.as_deref(), Some("say hello daemon"));
        assert_eq!(t.source, json!("vscode"));
        assert!(t
            .path
            .as_deref()
            .unwrap()
            .ends_with("rollout-2026-11-30T04-30-51-01a22ab8-34d5-7a73-9c8e-316065b6cd1a.jsonl"));
        assert_eq!(t.state(), Some(AgentState::Working));
        assert!(t.is_user_thread());
        assert_eq!(threads[1].status, ThreadStatus::NotLoaded);
        assert_eq!(threads[1].state(), None);

        let v: Value = serde_json::from_str(TITLE_THREAD_READ).unwrap();
        let title = CodexThread::from_json(&v["result"]["thread"]).unwrap();
        assert!(title.ephemeral);
        assert_eq!(title.thread_source.as_deref(), Some("thread_title"));
        assert_eq!(title.path, None);
        assert!(!title.is_user_thread());
        assert_eq!(CodexThread::from_json(&json!({"cwd": "/x"})), None);
    }

    fn thread(id: &str, cwd: &str, preview: &str, created: u64) -> CodexThread {
        CodexThread::from_json(&json!({
            "id": id, "cwd": cwd, "preview": preview, "createdAt": created, "updatedAt": created,
            "status": {"type": "idle"}, "source": "vscode", "ephemeral": false,
        }))
        .unwrap()
    }

    #[test]
    fn match_thread_finds_one_tui_thread_or_none() {
        let launch = 1_000;
        let mine = thread("a", "/w", "Fix the bug.\nThen test.", 1_002);
        let other_dir = thread("b", "/elsewhere", "Fix the bug.", 1_002);
        let older = thread("c", "/w", "Fix the bug.", 900);
        let v: Value = serde_json::from_str(TITLE_THREAD_READ).unwrap();
        let mut title = CodexThread::from_json(&v["result"]["thread"]).unwrap();
        title.cwd = "/w".into();
        title.created_at = 1_003;
        let mut sub = thread("s", "/w", "Fix the bug.", 1_004);
        sub.parent_thread_id = Some("a".into());
        let threads = vec![mine.clone(), other_dir, older, title, sub];

        let found = |cwd: &str, prompt: Option<&str>, at: u64| {
            match_thread(&threads, cwd, prompt, at).map(|t| t.id.as_str())
        };
        assert_eq!(found("/w", Some("Fix the bug."), launch), Some("a"));
        assert_eq!(found("/w/", Some("  Fix the bug.  "), launch), Some("a"));
        // Without a prompt: the ephemeral title thread and the sub-agent do not count.
        assert_eq!(found("/w", None, launch), Some("a"));
        assert_eq!(found("/w", Some("Something else"), launch), None);
        // Clock slack: Codex's clock a few seconds behind volee's.
        assert_eq!(found("/w", None, 1_006), Some("a"));
        assert_eq!(found("/w", None, 1_008), None);
        // Launched earlier: the older thread is a candidate too → ambiguous → None.
        assert_eq!(found("/w", Some("Fix the bug."), 800), None);
        let two = vec![mine.clone(), thread("d", "/w", "Fix the bug.", 1_001)];
        assert_eq!(match_thread(&two, "/w", Some("Fix the bug."), launch), None);
        assert_eq!(match_thread(&two, "/w", None, launch), None);
        let distinct = vec![mine, thread("e", "/w", "Write docs.", 1_001)];
        assert_eq!(
            match_thread(&distinct, "/w", Some("Write docs."), launch).map(|t| t.id.as_str()),
            Some("e")
        );
    }

    /// A scripted app-server on the other end of an in-memory pipe: checks the upgrade and the
    /// masking, answers by method, and on the way sends a ping, a notification, a server request
    /// and a fragmented answer.
    async fn fake_server(mut io: tokio::io::DuplexStream) -> Vec<Value> {
        let mut buf = Vec::new();
        let end = loop {
            let mut chunk = [0u8; 1024];
            let n = io.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8(buf[..end].to_vec()).unwrap();
        assert!(head.starts_with("GET / HTTP/1.1\r\n"), "{head}");
        let key = head
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap();
        let reply = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
            accept_key(key)
        );
        // The first frame may ride in the same write as the headers.
        let mut first = reply.into_bytes();
        first.extend(server_frame(true, OP_PING, b"are you there"));
        io.write_all(&first).await.unwrap();
        buf.drain(..end);

        let mut received = Vec::new();
        let mut pongs = 0;
        loop {
            let (frame, used) = loop {
                if let Some(f) = decode_frame(&buf, MAX_MESSAGE).unwrap() {
                    break f;
                }
                let mut chunk = [0u8; 4096];
                let n = io.read(&mut chunk).await.unwrap();
                if n == 0 {
                    return received;
                }
                buf.extend_from_slice(&chunk[..n]);
            };
            assert_eq!(buf[1] & 0x80, 0x80, "client frames are masked");
            buf.drain(..used);
            match frame.opcode {
                OP_PONG => {
                    assert_eq!(frame.payload, b"are you there");
                    pongs += 1;
                    continue;
                }
                OP_CLOSE => {
                    assert_eq!(pongs, 1);
                    return received;
                }
                _ => {}
            }
            let msg: Value = serde_json::from_slice(&frame.payload).unwrap();
            received.push(msg.clone());
            let id = msg["id"].clone();
            let answer = match msg["method"].as_str().unwrap_or("") {
                "initialize" => json!({"id": id, "result": {"userAgent": "codex_cli_rs/0.171.0"}}),
                "thread/loaded/list" => json!({"id": id, "result": {
                    "data": ["01a22ab8-34d5-7a73-9c8e-316065b6cd1a", "01a22e2f-c9f3-7fe1-93c0-ba13760a0882"],
                    "nextCursor": null}}),
                "thread/list" => {
                    let mut v: Value = serde_json::from_str(PROBE_THREAD_LIST).unwrap();
                    v["id"] = id;
                    v
                }
                "thread/read" => {
                    let mut v: Value = serde_json::from_str(TITLE_THREAD_READ).unwrap();
                    v["id"] = id;
                    v
                }
                _ => continue, // `initialized`, our answer to the server's request
            };
            let notification = json!({"method": "thread/status/changed", "params": {"threadId": "x", "status": {"type": "idle"}}});
            io.write_all(&server_frame(
                true,
                OP_TEXT,
                notification.to_string().as_bytes(),
            ))
            .await
            .unwrap();
            if msg["method"] == "thread/loaded/list" {
                let request = json!({"id": 77, "method": "item/commandExecution/requestApproval", "params": {}});
                io.write_all(&server_frame(true, OP_TEXT, request.to_string().as_bytes()))
                    .await
                    .unwrap();
            }
            // Answers in three fragments, a ping between the first two.
            let text = answer.to_string().into_bytes();
            let (a, rest) = text.split_at(text.len() / 3);
            let (b, c) = rest.split_at(rest.len() / 2);
            let mut out = server_frame(false, OP_TEXT, a);
            out.extend(server_frame(true, OP_PONG, b""));
            out.extend(server_frame(false, OP_CONTINUATION, b));
            out.extend(server_frame(true, OP_CONTINUATION, c));
            io.write_all(&out).await.unwrap();
        }
    }

    #[tokio::test]
    async fn the_listing_against_a_scripted_server() {
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(fake_server(server_io));
        let ws = WsClient::connect(client_io, "localhost", "/")
            .await
            .unwrap();
        let mut rpc = Rpc::new(ws);
        let threads = list_loaded(&mut rpc).await.unwrap();
        rpc.ws.close().await;
        let received = server.await.unwrap();

        let methods: Vec<&str> = received
            .iter()
            .map(|m| m["method"].as_str().unwrap_or("(answer)"))
            .collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "initialized",
                "thread/loaded/list",
                "(answer)",
                "thread/list",
                "thread/read"
            ]
        );
        assert!(received.iter().all(|m| m.get("jsonrpc").is_none()));
        assert_eq!(received[0]["params"]["clientInfo"]["name"], CLIENT_NAME);
        assert_eq!(received[3]["id"], 77);
        assert_eq!(received[3]["error"]["code"], -32601);
        assert_eq!(
            received[4]["params"]["includedThreadIds"],
            json!([
                "01a22ab8-34d5-7a73-9c8e-316065b6cd1a",
                "01a22e2f-c9f3-7fe1-93c0-ba13760a0882"
            ])
        );
        // Only loaded threads: the probe's notLoaded thread is not among them.
        let ids: Vec<&str> = threads.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "01a22ab8-34d5-7a73-9c8e-316065b6cd1a",
                "01a22e2f-c9f3-7fe1-93c0-ba13760a0882"
            ]
        );
        assert_eq!(threads[0].state(), Some(AgentState::Working));
        assert!(threads[1].ephemeral);
    }

    #[tokio::test]
    async fn errors_are_reported() {
        let missing =
            std::env::temp_dir().join(format!("volee-no-codex-{}.sock", std::process::id()));
        assert!(matches!(
            list_threads(&missing, Duration::from_secs(1)).await,
            Err(CodexServerError::Connect { .. })
        ));
        // A server that accepts and says nothing: the overall timeout.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let hold = tokio::spawn(async move { listener.accept().await.map(|(s, _)| s) });
        assert!(matches!(
            list_threads(&path, Duration::from_millis(200)).await,
            Err(CodexServerError::Timeout(_))
        ));
        drop(hold);
        // A plain HTTP server that refuses the upgrade.
        let (client_io, mut server_io) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            let mut b = [0u8; 1024];
            let _ = server_io.read(&mut b).await;
            let _ = server_io
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await;
        });
        assert!(matches!(
            WsClient::connect(client_io, "localhost", "/").await,
            Err(CodexServerError::Handshake(_))
        ));
        // A close frame in place of an answer.
        let (client_io, mut server_io) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            let mut b = [0u8; 1024];
            let n = server_io.read(&mut b).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&b[..n]).into_owned();
            let key = head
                .lines()
                .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                .unwrap_or("")
                .to_string();
            let mut out = format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {}\r\n\r\n", accept_key(&key)).into_bytes();
            out.extend(server_frame(true, OP_CLOSE, b"\x03\xf3going away"));
            let _ = server_io.write_all(&out).await;
            let _ = server_io.read(&mut b).await;
        });
        let mut ws = WsClient::connect(client_io, "localhost", "/")
            .await
            .unwrap();
        match ws.next_text().await {
            Err(CodexServerError::Closed(why)) => assert!(why.contains("1011"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
