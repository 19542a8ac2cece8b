//! OpenCode's own HTTP server as the `listing` source of OpenCode agents (measured on 1.18.33,
//! `docs/harnesses/opencode.md`).
//!
//! Started with `--port P --hostname 127.0.0.1`, the TUI serves its whole HTTP API on that loopback
//! port (`../shared/reference/probe/opencode-openapi.json`). For every live OpenCode agent whose
//! command line names such a port (volee picks one per launch; a hand-started one may have one),
//! the daemon holds one task (not a process) that reads the server-sent event stream `GET /event`
//! and, at each (re)connect, one snapshot: `GET /session/status` (busy or retry; an idle session
//! is absent), `GET /permission` and `GET /question` (pending requests of every session).
//! [`ServerView`] folds both into one state: a pending permission or question → needs_you (the
//! status stays `busy` meanwhile, so busy alone cannot tell), busy/retry → working, a session
//! error (not an abort) → failed until the next busy, else idle once a session is known.
//!
//! A resumed session (`-s ses_…`) ignores `--prompt` in 1.18.33; its first prompt goes through
//! the TUI endpoints `POST /tui/clear-prompt`, `/tui/append-prompt`, `/tui/submit-prompt`,
//! repeated until the session turns busy: the server answers before the TUI listens, and an
//! early append is dropped (measured: the first attempts return `true` and do nothing).
//!
//! The HTTP/1.1 client is a few dozen lines over `tokio::net::TcpStream` (loopback only, bounded
//! reads, timeouts, `Content-Length` or chunked bodies), rather than an HTTP client dependency.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use volee_protocol::AgentState;

/// The largest response head accepted.
const MAX_HEAD: usize = 16 << 10;
/// The largest response body accepted (a listing of pending requests).
const MAX_BODY: usize = 1 << 20;
/// The largest single server-sent event accepted (tool output travels in `message.part.updated`);
/// a bigger one drops the stream, which is reopened with a fresh snapshot.
const MAX_EVENT: usize = 8 << 20;
/// One request's time limit.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(1500);
/// The event stream's server heartbeat comes every 10 s or so; silence this long means it is gone.
const STREAM_SILENCE: Duration = Duration::from_secs(30);
/// Waits between connection attempts (the server comes up seconds after the process starts).
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long volee keeps trying to hand a resumed session its first prompt, from the moment its
/// server answers (the TUI may take many seconds more to listen on a loaded machine).
const PROMPT_DEADLINE: Duration = Duration::from_secs(90);

/// Non-TUI subcommands of `opencode` (`opencode --help`, 1.18.33): never an agent in a pane.
const NOT_AGENT_SUBCOMMANDS: &[&str] = &[
    "completion",
    "acp",
    "mcp",
    "debug",
    "providers",
    "auth",
    "agent",
    "upgrade",
    "uninstall",
    "serve",
    "web",
    "models",
    "stats",
    "export",
    "import",
    "github",
    "session",
    "plugin",
    "plug",
    "db",
];

/// OpenCode's flags that take a value (`opencode --help`, 1.18.33): their values are skipped
/// when looking for another flag (a prompt may read `--port 1`).
const VALUE_FLAGS: &[&str] = &[
    "--prompt",
    "--port",
    "--hostname",
    "-m",
    "--model",
    "-s",
    "--session",
    "--agent",
    "--log-level",
    "--mdns-domain",
    "--cors",
    "--replay-limit",
];

/// The value of `--name V` / `--name=V` in `args`.
fn flag_value<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        for n in names {
            if a == n {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        if VALUE_FLAGS.contains(&a.as_str()) {
            it.next();
        }
    }
    None
}

/// Is the boolean flag `name` among `args` (values of other flags skipped)?
fn has_flag(args: &[String], names: &[&str]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if names.contains(&a.as_str()) {
            return true;
        }
        if VALUE_FLAGS.contains(&a.as_str()) {
            it.next();
        }
    }
    false
}

/// The loopback port of an OpenCode agent's server, read from its command line (`--port P`,
/// with no `--hostname` or a loopback/any-address one). None for another harness, no port, port
/// 0 (a random one nobody can know), or a server bound elsewhere (volee talks to loopback only).
pub fn server_port(harness: &str, command: &[String]) -> Option<u16> {
    if harness != "opencode" {
        return None;
    }
    let args = command.get(1..)?;
    let port: u16 = flag_value(args, &["--port"])?.parse().ok()?;
    let loopback = match flag_value(args, &["--hostname"]) {
        None => true,
        Some(h) => matches!(
            h,
            "127.0.0.1" | "localhost" | "0.0.0.0" | "::" | "::1" | "[::1]"
        ),
    };
    (port != 0 && loopback).then_some(port)
}

/// The first prompt of a resumed session (`--prompt` with `-s`/`--session`/`-c`/`--continue`),
/// which OpenCode 1.18.33 ignores: volee hands it to the TUI through the server.
pub fn resume_prompt(command: &[String]) -> Option<String> {
    let args = command.get(1..)?;
    let resumed =
        flag_value(args, &["-s", "--session"]).is_some() || has_flag(args, &["-c", "--continue"]);
    let prompt = flag_value(args, &["--prompt"])?;
    (resumed && !prompt.is_empty()).then(|| prompt.to_string())
}

/// A found `opencode` process that is no agent: a child of one (every process an OpenCode spawns
/// carries `OPENCODE_PID`, measured) or a non-TUI subcommand (`opencode serve`, `opencode mcp …`).
pub fn not_an_agent(harness: &str, argv: &[String], env: &[(String, String)]) -> bool {
    harness == "opencode"
        && (env.iter().any(|(k, _)| k == "OPENCODE_PID")
            || argv
                .get(1)
                .is_some_and(|a| NOT_AGENT_SUBCOMMANDS.contains(&a.as_str())))
}

// ------------------------------------------------------------------------------------------------
// HTTP

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("could not connect to 127.0.0.1:{port}")]
    Connect {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("i/o error")]
    Io(#[from] std::io::Error),
    #[error("malformed HTTP response: {0}")]
    Protocol(String),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
}

/// The request bytes (`Connection: close`; a JSON body when given).
fn request_bytes(
    method: &str,
    port: u16,
    path: &str,
    body: Option<&Value>,
    accept: &str,
) -> Vec<u8> {
    let body = body.map(|b| b.to_string());
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\nUser-Agent: volee\r\nConnection: close\r\n"
    );
    match &body {
        Some(b) => head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        )),
        None if method == "POST" => head.push_str("Content-Length: 0\r\n\r\n"),
        None => head.push_str("\r\n"),
    }
    head.into_bytes()
}

/// A response head: status and the headers volee reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    status: u16,
    chunked: bool,
    length: Option<usize>,
}

/// Parse a head (without the blank line).
fn parse_head(text: &[u8]) -> Result<Head, HttpError> {
    let text =
        std::str::from_utf8(text).map_err(|_| HttpError::Protocol("head not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Protocol(format!(
            "status line {:?}",
            status_line.chars().take(60).collect::<String>()
        )));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| HttpError::Protocol("no status code".into()))?;
    let mut head = Head {
        status,
        chunked: false,
        length: None,
    };
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
            head.chunked = true;
        } else if k == "content-length" {
            head.length = Some(
                v.parse()
                    .map_err(|_| HttpError::Protocol("bad Content-Length".into()))?,
            );
        }
    }
    Ok(head)
}

/// Incremental decoder of a chunked body.
#[derive(Debug, Default)]
struct Dechunker {
    buf: Vec<u8>,
    /// Bytes left in the current chunk's data (+2 for its CRLF), when inside one.
    left: Option<usize>,
    done: bool,
}

impl Dechunker {
    /// Feed bytes; decoded data is appended to `out`. Returns true once the last chunk was read.
    fn push(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<bool, HttpError> {
        self.buf.extend_from_slice(data);
        let mut pos = 0;
        loop {
            if self.done {
                break;
            }
            match self.left {
                Some(left) => {
                    let avail = self.buf.len() - pos;
                    if avail == 0 {
                        break;
                    }
                    let take = avail.min(left);
                    // The trailing CRLF (the last two of `left`) is not data.
                    let data_left = left.saturating_sub(2);
                    let data_take = take.min(data_left);
                    out.extend_from_slice(&self.buf[pos..pos + data_take]);
                    pos += take;
                    let rest = left - take;
                    self.left = (rest > 0).then_some(rest);
                }
                None => {
                    let Some(nl) = self.buf[pos..].windows(2).position(|w| w == b"\r\n") else {
                        if self.buf.len() - pos > 1024 {
                            return Err(HttpError::Protocol("chunk size line too long".into()));
                        }
                        break;
                    };
                    let line = std::str::from_utf8(&self.buf[pos..pos + nl])
                        .map_err(|_| HttpError::Protocol("chunk size not UTF-8".into()))?;
                    let size_text = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size_text, 16)
                        .map_err(|_| HttpError::Protocol(format!("chunk size {size_text:?}")))?;
                    pos += nl + 2;
                    if size == 0 {
                        self.done = true;
                    } else {
                        self.left =
                            Some(size.checked_add(2).ok_or_else(|| {
                                HttpError::Protocol("chunk size overflows".into())
                            })?);
                    }
                }
            }
        }
        self.buf.drain(..pos);
        Ok(self.done)
    }
}

/// Split a whole response into its status and decoded body.
fn parse_response(bytes: &[u8]) -> Result<(u16, Vec<u8>), HttpError> {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| HttpError::Protocol("no end of head".into()))?;
    let head = parse_head(&bytes[..end])?;
    let rest = &bytes[end + 4..];
    let body = if head.chunked {
        let mut out = Vec::new();
        let mut d = Dechunker::default();
        if !d.push(rest, &mut out)? {
            return Err(HttpError::Protocol("chunked body ended early".into()));
        }
        out
    } else if let Some(n) = head.length {
        rest.get(..n)
            .ok_or_else(|| HttpError::Protocol("body shorter than Content-Length".into()))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok((head.status, body))
}

async fn connect(port: u16) -> Result<TcpStream, HttpError> {
    TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|source| HttpError::Connect { port, source })
}

/// One request to the server on `127.0.0.1:port`; the body of a 2xx answer.
pub async fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Vec<u8>, HttpError> {
    let exchange = async {
        let mut stream = connect(port).await?;
        stream
            .write_all(&request_bytes(method, port, path, body, "application/json"))
            .await?;
        let mut buf = Vec::new();
        let limit = (MAX_HEAD + MAX_BODY) as u64;
        (&mut stream).take(limit + 1).read_to_end(&mut buf).await?;
        if buf.len() as u64 > limit {
            return Err(HttpError::TooLarge(MAX_BODY));
        }
        let (status, body) = parse_response(&buf)?;
        if !(200..300).contains(&status) {
            return Err(HttpError::Status(status));
        }
        Ok(body)
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| HttpError::Timeout(REQUEST_TIMEOUT))?
}

async fn get_json(port: u16, path: &str) -> Result<Value, HttpError> {
    let body = request(port, "GET", path, None).await?;
    serde_json::from_slice(&body).map_err(|e| HttpError::Protocol(format!("{path}: {e}")))
}

// ------------------------------------------------------------------------------------------------
// Server-sent events

/// Splits a `text/event-stream` into the `data` of each event.
#[derive(Debug, Default)]
struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Feed decoded body bytes; returns the data of every event completed by them.
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, HttpError> {
        self.buf.extend_from_slice(bytes);
        let mut events = Vec::new();
        loop {
            // An event ends at a blank line (LF LF, or CRLF CRLF).
            let lf = self
                .buf
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|p| (p, 2));
            let crlf = self
                .buf
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|p| (p, 4));
            let Some((at, len)) = [lf, crlf].into_iter().flatten().min_by_key(|(p, _)| *p) else {
                break;
            };
            let block: Vec<u8> = self.buf.drain(..at + len).collect();
            let text = String::from_utf8_lossy(&block[..at]);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| {
                    let l = l.strip_suffix('\r').unwrap_or(l);
                    l.strip_prefix("data:")
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                })
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        if self.buf.len() > MAX_EVENT {
            return Err(HttpError::TooLarge(MAX_EVENT));
        }
        Ok(events)
    }
}

// ------------------------------------------------------------------------------------------------
// What the server says

/// A session's status (`SessionStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Idle,
    Busy,
    Retry { attempt: u64, message: String },
}

fn parse_status(v: &Value) -> Option<Status> {
    Some(match v.get("type")?.as_str()? {
        "idle" => Status::Idle,
        "busy" => Status::Busy,
        "retry" => Status::Retry {
            attempt: v.get("attempt").and_then(Value::as_u64).unwrap_or(0),
            message: short(v.get("message").and_then(Value::as_str).unwrap_or("")),
        },
        _ => return None,
    })
}

/// Text from the server, bounded and on one line (it ends up in evidence strings).
fn short(text: &str) -> String {
    let one: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(80)
        .collect();
    one.trim().to_string()
}

/// One event of `GET /event` that bears on the state (others are ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    Connected,
    SessionCreated {
        session: String,
        parent: Option<String>,
    },
    Status {
        session: String,
        status: Status,
    },
    Idle {
        session: String,
    },
    PermissionAsked {
        session: String,
        id: String,
        permission: String,
    },
    PermissionReplied {
        session: String,
        id: String,
        reply: String,
    },
    QuestionAsked {
        session: String,
        id: String,
        header: String,
    },
    /// `question.replied` or `question.rejected`.
    QuestionAnswered {
        session: String,
        id: String,
    },
    Error {
        session: Option<String>,
        name: String,
    },
    /// `server.instance.disposed`: the TUI is ending.
    Disposed,
}

/// One event's JSON (`{type, properties}`, or `/global/event`'s `{payload: {…}}`).
pub fn parse_event(v: &Value) -> Option<ServerEvent> {
    let v = v.get("payload").unwrap_or(v);
    let props = v.get("properties").unwrap_or(&Value::Null);
    let s = |k: &str| {
        props
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .map(String::from)
    };
    Some(match v.get("type")?.as_str()? {
        "server.connected" => ServerEvent::Connected,
        "server.instance.disposed" => ServerEvent::Disposed,
        "session.created" => ServerEvent::SessionCreated {
            session: s("sessionID")?,
            parent: props
                .get("info")
                .and_then(|i| i.get("parentID"))
                .and_then(Value::as_str)
                .map(String::from),
        },
        "session.status" => ServerEvent::Status {
            session: s("sessionID")?,
            status: parse_status(props.get("status")?)?,
        },
        "session.idle" => ServerEvent::Idle {
            session: s("sessionID")?,
        },
        "permission.asked" => ServerEvent::PermissionAsked {
            session: s("sessionID")?,
            id: s("id")?,
            permission: short(
                props
                    .get("permission")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
        },
        "permission.replied" => ServerEvent::PermissionReplied {
            session: s("sessionID")?,
            id: s("requestID")?,
            reply: short(props.get("reply").and_then(Value::as_str).unwrap_or("")),
        },
        "question.asked" => ServerEvent::QuestionAsked {
            session: s("sessionID")?,
            id: s("id")?,
            header: question_header(props),
        },
        "question.replied" | "question.rejected" => ServerEvent::QuestionAnswered {
            session: s("sessionID")?,
            id: s("requestID")?,
        },
        "session.error" => ServerEvent::Error {
            session: s("sessionID"),
            name: short(
                props
                    .get("error")
                    .and_then(|e| e.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("error"),
            ),
        },
        _ => return None,
    })
}

fn question_header(request: &Value) -> String {
    short(
        request
            .get("questions")
            .and_then(|q| q.get(0))
            .and_then(|q| q.get("header"))
            .and_then(Value::as_str)
            .unwrap_or(""),
    )
}

/// One look at the server: `GET /session/status`, `/permission`, `/question`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub statuses: BTreeMap<String, Status>,
    /// Pending permission id → (session, permission).
    pub permissions: BTreeMap<String, (String, String)>,
    /// Pending question id → (session, header).
    pub questions: BTreeMap<String, (String, String)>,
}

/// Build a snapshot from the three answers.
pub fn parse_snapshot(status: &Value, permissions: &Value, questions: &Value) -> Option<Snapshot> {
    let mut snap = Snapshot::default();
    for (sid, st) in status.as_object()? {
        if let Some(st) = parse_status(st) {
            snap.statuses.insert(sid.clone(), st);
        }
    }
    for p in permissions.as_array()? {
        let (Some(id), Some(sid)) = (
            p.get("id").and_then(Value::as_str),
            p.get("sessionID").and_then(Value::as_str),
        ) else {
            continue;
        };
        let perm = short(p.get("permission").and_then(Value::as_str).unwrap_or(""));
        snap.permissions.insert(id.into(), (sid.into(), perm));
    }
    for q in questions.as_array()? {
        let (Some(id), Some(sid)) = (
            q.get("id").and_then(Value::as_str),
            q.get("sessionID").and_then(Value::as_str),
        ) else {
            continue;
        };
        snap.questions
            .insert(id.into(), (sid.into(), question_header(q)));
    }
    Some(snap)
}

/// What the server told one agent so far, folded into a state.
#[derive(Debug, Clone, Default)]
pub struct ServerView {
    /// The agent's own session (root: no parent), once known.
    pub session: Option<String>,
    /// Sessions known to be sub-sessions (a subagent's).
    children: BTreeSet<String>,
    statuses: BTreeMap<String, Status>,
    permissions: BTreeMap<String, (String, String)>,
    questions: BTreeMap<String, (String, String)>,
    /// A session error (not an abort) since the last busy.
    error: Option<String>,
    /// A session's status or request was seen (or it is a resumed one): an idle server then
    /// means idle (before that it means nothing: the first prompt may not be submitted yet).
    seen_session: bool,
}

impl ServerView {
    pub fn new(session: Option<String>) -> ServerView {
        ServerView {
            seen_session: session.is_some(),
            session,
            ..ServerView::default()
        }
    }

    fn saw(&mut self, session: &str) {
        self.seen_session = true;
        self.name(session);
    }

    /// Take `session` as the agent's own unless one is known or it is a child.
    fn name(&mut self, session: &str) {
        if self.session.is_none() && !self.children.contains(session) {
            // The first session seen that is not a known child; a `session.created` with a
            // parent never lands here.
            self.session = Some(session.to_string());
        }
    }

    /// Take one event in.
    pub fn apply(&mut self, ev: &ServerEvent) {
        match ev {
            ServerEvent::Connected | ServerEvent::Disposed => {}
            // Created at the first prompt, whose `busy` follows at once: naming the session
            // is all it does (an idle in between would be a blip).
            ServerEvent::SessionCreated { session, parent } => match parent {
                Some(_) => {
                    self.children.insert(session.clone());
                }
                None => self.name(session),
            },
            ServerEvent::Status { session, status } => {
                self.saw(session);
                match status {
                    Status::Idle => {
                        self.statuses.remove(session);
                    }
                    st => {
                        self.error = None;
                        self.statuses.insert(session.clone(), st.clone());
                    }
                }
            }
            ServerEvent::Idle { session } => {
                self.saw(session);
                self.statuses.remove(session);
                // Requests of an ended turn are void.
                self.permissions.retain(|_, (s, _)| s != session);
                self.questions.retain(|_, (s, _)| s != session);
            }
            ServerEvent::PermissionAsked {
                session,
                id,
                permission,
            } => {
                self.saw(session);
                self.permissions
                    .insert(id.clone(), (session.clone(), permission.clone()));
            }
            ServerEvent::PermissionReplied { id, .. } => {
                self.permissions.remove(id);
            }
            ServerEvent::QuestionAsked {
                session,
                id,
                header,
            } => {
                self.saw(session);
                self.questions
                    .insert(id.clone(), (session.clone(), header.clone()));
            }
            ServerEvent::QuestionAnswered { id, .. } => {
                self.questions.remove(id);
            }
            ServerEvent::Error { session, name } => {
                if let Some(s) = session {
                    self.saw(s);
                }
                // Esc (an abort) ends the turn; it is no failure.
                if name != "MessageAbortedError" {
                    self.error = Some(name.clone());
                }
            }
        }
    }

    /// Replace what is pending and running by a snapshot (events missed while disconnected).
    pub fn apply_snapshot(&mut self, snap: &Snapshot) {
        self.statuses = snap.statuses.clone();
        self.permissions = snap.permissions.clone();
        self.questions = snap.questions.clone();
        let sessions: Vec<String> = snap
            .statuses
            .keys()
            .chain(snap.permissions.values().map(|(s, _)| s))
            .chain(snap.questions.values().map(|(s, _)| s))
            .cloned()
            .collect();
        for s in sessions {
            self.saw(&s);
        }
    }

    /// Mark a session as a sub-session (its `parentID` was read).
    pub fn mark_child(&mut self, session: &str) {
        self.children.insert(session.to_string());
        if self.session.as_deref() == Some(session) {
            self.session = None;
        }
    }

    /// The state and its evidence, when the server has said anything yet.
    pub fn observation(&self) -> Option<(AgentState, String)> {
        if let Some((_, perm)) = self.permissions.values().next() {
            return Some((
                AgentState::NeedsYou,
                format!("server: permission.asked {perm}"),
            ));
        }
        if let Some((_, header)) = self.questions.values().next() {
            return Some((
                AgentState::NeedsYou,
                format!("server: question.asked {header}"),
            ));
        }
        let retry = self.statuses.values().find_map(|s| match s {
            Status::Retry { attempt, message } => Some((attempt, message)),
            _ => None,
        });
        if let Some((attempt, message)) = retry {
            return Some((
                AgentState::Working,
                format!("server: status retry #{attempt} {message}"),
            ));
        }
        if !self.statuses.is_empty() {
            return Some((AgentState::Working, "server: status busy".into()));
        }
        if let Some(name) = &self.error {
            return Some((AgentState::Failed, format!("server: session.error {name}")));
        }
        self.seen_session
            .then(|| (AgentState::Idle, "server: status idle".into()))
    }
}

// ------------------------------------------------------------------------------------------------
// The watch of one agent's server

/// A state with its evidence (`server: status busy`).
pub type Observation = Option<(AgentState, String)>;

/// What a watch task reports to the daemon's actor.
#[derive(Debug, Clone)]
pub enum Update {
    /// A (re)connection's snapshot.
    Snapshot(Snapshot),
    Event(ServerEvent),
    /// A session's `parentID` was read: it is a sub-session.
    Child(String),
    /// The resumed session's first prompt was handed to the TUI (or could not be).
    PromptDelivered(Result<u32, String>),
}

/// Where the watch tasks report: (agent id, update).
pub type Report = Arc<dyn Fn(String, Update) + Send + Sync>;

/// One task per live OpenCode agent with a server port.
#[derive(Default)]
pub struct Watches {
    tasks: HashMap<String, (u16, tokio::task::AbortHandle)>,
    views: HashMap<String, ServerView>,
}

/// An agent that should be watched.
pub struct Wanted {
    pub id: String,
    pub port: u16,
    pub session: Option<String>,
    /// A resumed session's first prompt still to hand over.
    pub prompt: Option<String>,
}

impl Watches {
    /// Start tasks for new agents, end those of agents no longer wanted.
    pub fn sync(&mut self, wanted: Vec<Wanted>, report: &Report) {
        let keep: HashMap<&str, u16> = wanted.iter().map(|w| (w.id.as_str(), w.port)).collect();
        self.tasks.retain(|id, (port, task)| {
            let live = keep.get(id.as_str()) == Some(port);
            if !live {
                task.abort();
            }
            live
        });
        self.views.retain(|id, _| keep.contains_key(id.as_str()));
        for w in wanted {
            if self.tasks.contains_key(&w.id) {
                continue;
            }
            tracing::info!(
                "agent {}: watching OpenCode's server on 127.0.0.1:{}",
                w.id,
                w.port
            );
            self.views
                .entry(w.id.clone())
                .or_insert_with(|| ServerView::new(w.session.clone()));
            let report = Arc::clone(report);
            let (id, port, prompt) = (w.id.clone(), w.port, w.prompt);
            let task = tokio::spawn(watch(id.clone(), port, prompt, report));
            self.tasks.insert(id, (port, task.abort_handle()));
        }
    }

    /// Take an update in; the agent's (state, evidence) and session id when known.
    pub fn apply(&mut self, id: &str, update: &Update) -> Option<(Observation, Option<String>)> {
        let view = self.views.get_mut(id)?;
        match update {
            Update::Snapshot(s) => view.apply_snapshot(s),
            Update::Event(e) => view.apply(e),
            Update::Child(s) => view.mark_child(s),
            Update::PromptDelivered(_) => {}
        }
        Some((view.observation(), view.session.clone()))
    }
}

/// The life of one watch: connect, snapshot, follow the event stream; again after a drop, with
/// growing pauses, until the daemon aborts it (the agent ended).
async fn watch(id: String, port: u16, prompt: Option<String>, report: Report) {
    let mut pause = RETRY_FIRST;
    let mut prompt = prompt;
    loop {
        match follow(&id, port, &mut prompt, &report).await {
            Ok(()) => pause = RETRY_FIRST,
            Err(e) => tracing::trace!("agent {id}: OpenCode server 127.0.0.1:{port}: {e}"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// Open the event stream, report a snapshot, then every event until the stream ends.
async fn follow(
    id: &str,
    port: u16,
    prompt: &mut Option<String>,
    report: &Report,
) -> Result<(), HttpError> {
    let mut stream = tokio::time::timeout(REQUEST_TIMEOUT, connect(port))
        .await
        .map_err(|_| HttpError::Timeout(REQUEST_TIMEOUT))??;
    stream
        .write_all(&request_bytes(
            "GET",
            port,
            "/event",
            None,
            "text/event-stream",
        ))
        .await?;
    // The head.
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 << 10];
    let end = loop {
        let n = tokio::time::timeout(REQUEST_TIMEOUT, stream.read(&mut chunk))
            .await
            .map_err(|_| HttpError::Timeout(REQUEST_TIMEOUT))??;
        if n == 0 {
            return Err(HttpError::Protocol("closed before the head".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Err(HttpError::TooLarge(MAX_HEAD));
        }
    };
    let head = parse_head(&buf[..end])?;
    if head.status != 200 {
        return Err(HttpError::Status(head.status));
    }
    // Subscribed: what happened before is read now, so nothing falls between.
    let snapshot = take_snapshot(port).await?;
    let busy_sessions: Vec<String> = snapshot.statuses.keys().cloned().collect();
    report(id.to_string(), Update::Snapshot(snapshot));
    for s in busy_sessions {
        check_parent(id, port, &s, report).await;
    }
    if let Some(text) = prompt.take() {
        let deadline = tokio::time::Instant::now() + PROMPT_DEADLINE;
        let (id, report) = (id.to_string(), Arc::clone(report));
        tokio::spawn(async move {
            let result = deliver_prompt(port, &text, deadline).await;
            report(id, Update::PromptDelivered(result));
        });
    }
    let mut body = buf.split_off(end + 4);
    let mut dechunk = head.chunked.then(Dechunker::default);
    let mut sse = SseParser::default();
    loop {
        let mut decoded = Vec::new();
        let ended = match dechunk.as_mut() {
            Some(d) => d.push(&body, &mut decoded)?,
            None => {
                decoded = std::mem::take(&mut body);
                false
            }
        };
        body.clear();
        for data in sse.push(&decoded)? {
            let Ok(v) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if let Some(ev) = parse_event(&v) {
                report(id.to_string(), Update::Event(ev));
            }
        }
        if ended {
            return Ok(());
        }
        let n = tokio::time::timeout(STREAM_SILENCE, stream.read(&mut chunk))
            .await
            .map_err(|_| HttpError::Timeout(STREAM_SILENCE))??;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&chunk[..n]);
    }
}

async fn take_snapshot(port: u16) -> Result<Snapshot, HttpError> {
    let status = get_json(port, "/session/status").await?;
    let permissions = get_json(port, "/permission").await?;
    let questions = get_json(port, "/question").await?;
    parse_snapshot(&status, &permissions, &questions)
        .ok_or_else(|| HttpError::Protocol("unexpected snapshot shapes".into()))
}

/// A session busy when volee connected may be a subagent's: `GET /session/{id}` says.
async fn check_parent(id: &str, port: u16, session: &str, report: &Report) {
    if !session
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return;
    }
    if let Ok(info) = get_json(port, &format!("/session/{session}")).await {
        if info.get("parentID").and_then(Value::as_str).is_some() {
            report(id.to_string(), Update::Child(session.to_string()));
        }
    }
}

/// Hand a resumed session its first prompt through the TUI: clear, append, submit, then wait up
/// to 2 s for a busy session; again until the deadline. Returns the attempts it took.
async fn deliver_prompt(
    port: u16,
    text: &str,
    deadline: tokio::time::Instant,
) -> Result<u32, String> {
    let mut attempts = 0;
    while tokio::time::Instant::now() < deadline {
        attempts += 1;
        let sent = async {
            request(port, "POST", "/tui/clear-prompt", None).await?;
            request(
                port,
                "POST",
                "/tui/append-prompt",
                Some(&json!({ "text": text })),
            )
            .await?;
            request(port, "POST", "/tui/submit-prompt", None).await
        }
        .await;
        if let Err(e) = sent {
            tracing::trace!("OpenCode 127.0.0.1:{port}: prompt attempt {attempts}: {e}");
        }
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Ok(status) = get_json(port, "/session/status").await {
                if status.as_object().is_some_and(|m| !m.is_empty()) {
                    return Ok(attempts);
                }
            }
        }
    }
    Err(format!(
        "the TUI did not take the prompt in {attempts} attempts"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A captured event stream (copies of `../shared/reference/probe/opencode-sse-*.txt`, and
    /// volee's own `opencode-sse-volee-*.txt`, all 1.18.33).
    fn capture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn ports_come_from_the_command_line_and_only_for_loopback() {
        let c = args(&[
            "/x/opencode",
            "--port",
            "4100",
            "--hostname",
            "127.0.0.1",
            "--prompt",
            "hi",
        ]);
        assert_eq!(server_port("opencode", &c), Some(4100));
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port=4101"])),
            Some(4101)
        );
        assert_eq!(server_port("codex", &c), None);
        assert_eq!(server_port("opencode", &args(&["opencode"])), None);
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port", "0"])),
            None
        );
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port", "x"])),
            None
        );
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--port", "9", "--hostname", "10.0.0.2"])
            ),
            None
        );
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--hostname=0.0.0.0", "--port", "9"])
            ),
            Some(9)
        );
        // A prompt that reads like a flag is a value, not a flag.
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--prompt", "--port", "--port", "7"])
            ),
            Some(7)
        );
    }

    #[test]
    fn a_resumed_sessions_prompt_is_handed_over() {
        let c = args(&[
            "opencode", "-s", "ses_1", "--port", "1", "--prompt", "go on",
        ]);
        assert_eq!(resume_prompt(&c).as_deref(), Some("go on"));
        assert_eq!(resume_prompt(&args(&["opencode", "--prompt", "new"])), None);
        assert_eq!(resume_prompt(&args(&["opencode", "--prompt", "-c"])), None);
        assert_eq!(
            resume_prompt(&args(&["opencode", "-c", "--prompt", ""])),
            None
        );
        assert_eq!(
            resume_prompt(&args(&["opencode", "--session=ses_1", "--prompt=x"])).as_deref(),
            Some("x")
        );
    }

    #[test]
    fn children_and_subcommands_are_no_agents() {
        let env = vec![("OPENCODE_PID".to_string(), "42".to_string())];
        assert!(not_an_agent("opencode", &args(&["opencode"]), &env));
        assert!(not_an_agent("opencode", &args(&["opencode", "serve"]), &[]));
        assert!(!not_an_agent(
            "opencode",
            &args(&["opencode", "--prompt", "serve"]),
            &[]
        ));
        assert!(!not_an_agent(
            "opencode",
            &args(&["opencode", "/w/serve"]),
            &[]
        ));
        assert!(!not_an_agent("claude", &args(&["claude"]), &env));
    }

    #[test]
    fn responses_with_length_or_chunks_parse() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 36\r\nVary: Origin\r\n\r\n{\"healthy\":true,\"version\":\"1.18.33\"}";
        let (status, body) = parse_response(r).unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, br#"{"healthy":true,"version":"1.18.33"}"#);
        let c = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n[1,2\r\n2;x=y\r\n,3\r\n1\r\n]\r\n0\r\n\r\n";
        assert_eq!(parse_response(c).unwrap().1, b"[1,2,3]");
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n[1")
                .is_err()
        );
        assert!(parse_response(b"SSH-2.0\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn chunks_split_anywhere_decode_the_same() {
        let wire = b"5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n";
        for cut in 0..wire.len() {
            let mut d = Dechunker::default();
            let mut out = Vec::new();
            let a = d.push(&wire[..cut], &mut out).unwrap();
            let b = d.push(&wire[cut..], &mut out).unwrap();
            // The last chunk is known before its closing CRLF.
            assert!(!a || cut + 2 >= wire.len(), "cut {cut}");
            assert!(b, "cut {cut}");
            assert_eq!(out, b"hello world", "cut {cut}");
        }
    }

    #[test]
    fn sse_events_split_anywhere_parse_the_same() {
        let wire = "data: {\"a\":1}\n\n: comment\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\nda";
        for cut in 0..wire.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&wire.as_bytes()[..cut]).unwrap();
            got.extend(p.push(&wire.as_bytes()[cut..]).unwrap());
            assert_eq!(
                got,
                vec!["{\"a\":1}".to_string(), "{\"b\":\n2}".to_string()],
                "cut {cut}"
            );
        }
    }

    /// Every event of a captured stream, in order.
    fn events_of(capture: &str) -> Vec<ServerEvent> {
        let mut p = SseParser::default();
        p.push(capture.as_bytes())
            .unwrap()
            .iter()
            .filter_map(|d| parse_event(&serde_json::from_str(d).unwrap()))
            .collect()
    }

    #[test]
    fn the_captured_streams_give_the_measured_states() {
        // A turn against an unreachable model: busy, then retries (1.18.33 retries forever).
        let evs = events_of(&capture("opencode-sse-event.txt"));
        assert_eq!(evs.first(), Some(&ServerEvent::Connected));
        let mut view = ServerView::new(None);
        assert_eq!(view.observation(), None);
        let mut states = Vec::new();
        for e in &evs {
            view.apply(e);
            if let Some(o) = view.observation() {
                if states.last() != Some(&o) {
                    states.push(o);
                }
            }
        }
        assert_eq!(
            view.session.as_deref(),
            Some("ses_dd54f3dfcffeR5jTtBkcrS66Qh")
        );
        // session.created names the session; the busy right after it is the first state (no
        // idle blip between them).
        assert_eq!(
            states[0],
            (AgentState::Working, "server: status busy".into())
        );
        assert!(states.iter().any(|(s, e)| *s == AgentState::Working
            && e.starts_with("server: status retry #")
            && e.contains("Unable to connect")));
        // The global stream wraps the same events in {payload}.
        let global = capture("opencode-sse-global-event.txt");
        let g = events_of(&global);
        assert!(g.contains(&ServerEvent::SessionCreated {
            session: "ses_dd54f3dfcffeR5jTtBkcrS66Qh".into(),
            parent: None
        }));

        // The end of an approved turn: replied, busy, idle.
        let tui2 = events_of(&capture("opencode-sse-tui2.txt"));
        // What the snapshot at connect said: busy, one permission pending.
        let mut view = ServerView::new(None);
        view.apply(&ServerEvent::Status {
            session: "ses_dd54ce91bffexfqkq5udt3EUNH".into(),
            status: Status::Busy,
        });
        view.apply(&ServerEvent::PermissionAsked {
            session: "ses_dd54ce91bffexfqkq5udt3EUNH".into(),
            id: "per_22ab387e8001phesoeyC4lCkyT".into(),
            permission: "bash".into(),
        });
        assert_eq!(
            view.observation(),
            Some((AgentState::NeedsYou, "server: permission.asked bash".into()))
        );
        let mut seen = Vec::new();
        for e in &tui2 {
            view.apply(e);
            let o = view.observation().unwrap();
            if seen.last() != Some(&o.0) {
                seen.push(o.0);
            }
        }
        assert_eq!(
            seen,
            [AgentState::NeedsYou, AgentState::Working, AgentState::Idle]
        );
        assert_eq!(
            view.session.as_deref(),
            Some("ses_dd54ce91bffexfqkq5udt3EUNH")
        );
    }

    #[test]
    fn a_rejected_permission_and_an_esc_end_idle() {
        // volee's capture: prompt → busy → permission.asked → reply "reject" → busy → idle; a second
        // prompt through the TUI server → busy → Esc Esc → session.error MessageAbortedError → idle.
        let evs = events_of(&capture("opencode-sse-volee-reject-esc.txt"));
        let mut view = ServerView::new(None);
        let mut states = Vec::new();
        for e in &evs {
            view.apply(e);
            if let Some((s, _)) = view.observation() {
                if states.last() != Some(&s) {
                    states.push(s);
                }
            }
        }
        assert_eq!(
            states,
            [
                AgentState::Working,
                AgentState::NeedsYou,
                // Rejected: still busy for a moment, then the turn ends idle (not failed).
                AgentState::Working,
                AgentState::Idle,
                AgentState::Working,
                AgentState::Idle
            ]
        );
        assert!(evs.contains(&ServerEvent::Error {
            session: view.session.clone(),
            name: "MessageAbortedError".into()
        }));
    }

    #[test]
    fn the_api_listings_parse() {
        // Shapes measured on 1.18.33 (GET /session/status, /permission, /question).
        let status = serde_json::json!({"ses_a": {"type": "busy"}, "ses_b": {"type": "retry", "attempt": 4, "message": "Cannot connect to API", "next": 6000}});
        let perms: Value = serde_json::from_str(r#"[{"id":"per_22fe90306001peYbVi2RFxosoQ","sessionID":"ses_a","permission":"bash","patterns":["echo probe > probe.txt"],"metadata":{"command":"echo probe > probe.txt"},"always":["echo *"],"tool":{"messageID":"msg_1","callID":"call_e1efad2f"}}]"#).unwrap();
        let questions = serde_json::json!([{"id": "que_1", "sessionID": "ses_a", "questions": [{"question": "Which?", "header": "Pick one", "options": []}]}]);
        let snap = parse_snapshot(&status, &perms, &questions).unwrap();
        assert_eq!(snap.statuses.len(), 2);
        assert_eq!(
            snap.permissions.get("per_22fe90306001peYbVi2RFxosoQ"),
            Some(&("ses_a".to_string(), "bash".to_string()))
        );
        let mut view = ServerView::new(None);
        view.apply_snapshot(&snap);
        assert_eq!(view.observation().unwrap().0, AgentState::NeedsYou);
        view.apply(&ServerEvent::PermissionReplied {
            session: "ses_a".into(),
            id: "per_22fe90306001peYbVi2RFxosoQ".into(),
            reply: "once".into(),
        });
        assert_eq!(
            view.observation(),
            Some((
                AgentState::NeedsYou,
                "server: question.asked Pick one".into()
            ))
        );
        view.apply(&ServerEvent::QuestionAnswered {
            session: "ses_a".into(),
            id: "que_1".into(),
        });
        assert_eq!(
            view.observation(),
            Some((
                AgentState::Working,
                "server: status retry #4 Cannot connect to API".into()
            ))
        );
        assert!(parse_snapshot(&serde_json::json!([]), &perms, &questions).is_none());
        // An idle server before any session says nothing.
        let empty = parse_snapshot(
            &serde_json::json!({}),
            &serde_json::json!([]),
            &serde_json::json!([]),
        )
        .unwrap();
        let mut fresh = ServerView::new(None);
        fresh.apply_snapshot(&empty);
        assert_eq!(fresh.observation(), None);
        let mut resumed = ServerView::new(Some("ses_r".into()));
        resumed.apply_snapshot(&empty);
        assert_eq!(resumed.observation().unwrap().0, AgentState::Idle);
    }

    #[test]
    fn errors_fail_the_turn_but_an_abort_does_not() {
        let mut v = ServerView::new(Some("ses_a".into()));
        let busy = ServerEvent::Status {
            session: "ses_a".into(),
            status: Status::Busy,
        };
        v.apply(&busy);
        v.apply(&ServerEvent::Error {
            session: Some("ses_a".into()),
            name: "APIError".into(),
        });
        v.apply(&ServerEvent::Status {
            session: "ses_a".into(),
            status: Status::Idle,
        });
        v.apply(&ServerEvent::Idle {
            session: "ses_a".into(),
        });
        assert_eq!(
            v.observation(),
            Some((AgentState::Failed, "server: session.error APIError".into()))
        );
        v.apply(&busy);
        assert_eq!(v.observation().unwrap().0, AgentState::Working);
        v.apply(&ServerEvent::Error {
            session: Some("ses_a".into()),
            name: "MessageAbortedError".into(),
        });
        v.apply(&ServerEvent::Idle {
            session: "ses_a".into(),
        });
        assert_eq!(v.observation().unwrap().0, AgentState::Idle);
        let e = parse_event(
            &serde_json::json!({"type": "session.error", "properties": {"sessionID": "ses_a", "error": {"name": "APIError", "data": {"message": "x"}}}}),
        );
        assert_eq!(
            e,
            Some(ServerEvent::Error {
                session: Some("ses_a".into()),
                name: "APIError".into()
            })
        );
    }

    #[test]
    fn a_subagents_session_is_not_the_agents() {
        let mut v = ServerView::new(None);
        v.apply(&ServerEvent::SessionCreated {
            session: "ses_root".into(),
            parent: None,
        });
        v.apply(&ServerEvent::SessionCreated {
            session: "ses_kid".into(),
            parent: Some("ses_root".into()),
        });
        v.apply(&ServerEvent::PermissionAsked {
            session: "ses_kid".into(),
            id: "per_1".into(),
            permission: "edit".into(),
        });
        assert_eq!(v.session.as_deref(), Some("ses_root"));
        assert_eq!(v.observation().unwrap().0, AgentState::NeedsYou);
        // Connected mid-turn: the first busy session is taken unless it turns out to be a child.
        let mut late = ServerView::new(None);
        late.apply_snapshot(&Snapshot {
            statuses: [("ses_kid".to_string(), Status::Busy)].into(),
            ..Snapshot::default()
        });
        assert_eq!(late.session.as_deref(), Some("ses_kid"));
        late.mark_child("ses_kid");
        assert_eq!(late.session, None);
        late.apply(&ServerEvent::Status {
            session: "ses_root".into(),
            status: Status::Busy,
        });
        assert_eq!(late.session.as_deref(), Some("ses_root"));
    }

    #[tokio::test]
    async fn the_client_talks_to_a_loopback_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n",
            )
            .await
            .unwrap();
            req
        });
        let body = request(
            port,
            "POST",
            "/tui/append-prompt",
            Some(&json!({"text": "hi"})),
        )
        .await
        .unwrap();
        assert_eq!(body, b"[]");
        let req = server.await.unwrap();
        assert!(
            req.starts_with("POST /tui/append-prompt HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(req.ends_with("\r\n\r\n{\"text\":\"hi\"}"), "{req}");
        // Nobody listening: a clear error, quickly.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = closed.local_addr().unwrap().port();
        drop(closed);
        assert!(matches!(
            request(dead, "GET", "/permission", None).await,
            Err(HttpError::Connect { .. })
        ));
    }
}
