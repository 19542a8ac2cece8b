//! `volee mcp`: volee's MCP server over stdio (the `rmcp` SDK), the tools an agent of any harness
//! gets when it joins: see the other agents and their states, wait for one, hand one a message,
//! read its screen. Every tool talks to the calling user's own daemon (its socket is private and
//! checks the peer's uid), so it reaches that user's agents only.
//!
//! The agent that runs this server is named by `VOLEE_AGENT_ID` (its pane's environment, which
//! the harness passes on): `send_message` and `wait_for_state` refuse it as their target, so an
//! agent does not type into its own input or wait on itself by accident.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;
use volee_protocol::{AgentState, AgentView, Request, Response};

use crate::ask::{agent_of, agents_of, ask, show, text_of};
use crate::error::{self, CliError, CliResult, Exit};

/// The longest `wait_for_state` waits.
pub const MAX_WAIT_SECS: u64 = 600;
/// The most screen lines `read_screen` returns.
pub const MAX_SCREEN_LINES: u32 = 200;
/// The longest message `send_message` types.
pub const MAX_MESSAGE_CHARS: usize = 8000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ListArgs {
    /// Also list agents that have ended (done, failed, stopped).
    #[serde(default)]
    all: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AgentArgs {
    /// The agent: its id, its name, or a unique prefix of its id; MACHINE:ID for one on a
    /// machine.
    id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct WaitArgs {
    /// The agent: its id, its name, or a unique prefix of its id; MACHINE:ID for one on a
    /// machine.
    id: String,
    /// States to wait for: working, needs_you, idle, done, failed, stopped.
    states: Vec<String>,
    /// Give up after this many seconds (default 60, at most 600).
    #[serde(default)]
    timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SendArgs {
    /// The agent: its id, its name, or a unique prefix of its id; MACHINE:ID for one on a
    /// machine.
    id: String,
    /// The message, typed into the agent's input and submitted.
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ScreenArgs {
    /// The agent: its id, its name, or a unique prefix of its id; MACHINE:ID for one on a
    /// machine.
    id: String,
    /// How many of the last non-empty lines (default 40, at most 200).
    #[serde(default)]
    lines: Option<u32>,
}

#[derive(Clone)]
pub struct VoleeMcp {
    /// The agent this server serves, when it runs inside one: `VOLEE_AGENT_ID`, else found once
    /// by its process ancestry (harnesses give MCP servers a reduced environment).
    caller: Arc<OnceLock<Option<String>>>,
    env_caller: Option<String>,
    #[allow(dead_code)] // read by the tool_handler macro
    tool_router: ToolRouter<VoleeMcp>,
}

/// A tool's answer: JSON or text on success, the CLI's message and hints as a tool error.
fn answer(result: CliResult<String>) -> CallToolResult {
    match result {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(e) => {
            let mut text = e.message;
            for hint in e.hints {
                text.push_str(&format!("\nhint: {hint}"));
            }
            CallToolResult::error(vec![ContentBlock::text(text)])
        }
    }
}

/// Run a blocking daemon conversation off the async runtime.
async fn blocking(f: impl FnOnce() -> CliResult<String> + Send + 'static) -> CallToolResult {
    answer(
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| Err(CliError::internal(format!("tool task failed: {e}")))),
    )
}

fn pretty(value: &impl serde::Serialize) -> CliResult<String> {
    Ok(serde_json::to_string_pretty(value)?)
}

/// The parent pid of `pid` (`/proc/PID/stat`, the field after the parenthesised name).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The live agent whose process is this process's ancestor (the harness that started this
/// server, or its pane's shell).
fn caller_by_ancestry() -> Option<String> {
    let Ok(Response::Agents { agents }) = ask(&Request::List { all: false }) else {
        return None;
    };
    let mut pid = std::process::id();
    for _ in 0..64 {
        pid = parent_of(pid).filter(|p| *p > 1)?;
        if let Some(a) = agents.iter().find(|a| a.pid == Some(pid)) {
            return Some(a.id.clone());
        }
    }
    None
}

impl VoleeMcp {
    pub fn new(caller: Option<String>) -> VoleeMcp {
        VoleeMcp {
            caller: Arc::new(OnceLock::new()),
            env_caller: caller.filter(|c| !c.is_empty()),
            tool_router: Self::tool_router(),
        }
    }

    /// The calling agent (looked up once, off the async runtime).
    async fn caller(&self) -> Option<String> {
        if let Some(c) = self.caller.get() {
            return c.clone();
        }
        let found = match self.env_caller.clone() {
            Some(id) => Some(id),
            None => tokio::task::spawn_blocking(caller_by_ancestry)
                .await
                .ok()
                .flatten(),
        };
        self.caller.get_or_init(|| found).clone()
    }

    /// The target agent, refused when it is the caller itself (an agent on a machine never is:
    /// the caller runs here).
    fn other_agent(caller: &Option<String>, id: &str, doing: &str) -> CliResult<AgentView> {
        let agent = show(id)?;
        if agent.machine.is_none() && caller.as_deref() == Some(agent.id.as_str()) {
            return Err(CliError::user(format!(
                "agent {} ({}) is the agent calling this tool: it cannot {doing} itself",
                agent.id, agent.name
            )));
        }
        Ok(agent)
    }
}

#[tool_router]
impl VoleeMcp {
    #[tool(
        description = "List the agents volee supervises for this user (every harness, launched or discovered, here and on the user's machines): id, name, harness, state (working, needs_you, idle, done, failed, stopped), where the state came from and its evidence, working directory, session id, machine (null here; an agent on a machine is addressed MACHINE:ID, and while its reachable is false its state is the last one known). JSON array."
    )]
    async fn list_agents(&self, Parameters(args): Parameters<ListArgs>) -> CallToolResult {
        let caller = self.caller().await;
        blocking(move || {
            let agents = agents_of(ask(&Request::List { all: args.all })?)?;
            pretty(&serde_json::json!({
                "you": caller,
                "agents": agents,
            }))
        })
        .await
    }

    #[tool(
        description = "One agent's state with the evidence behind it: every source's latest observation (hooks, listing, screen, multiplexer, process) and the rule that decided. JSON."
    )]
    async fn agent_state(&self, Parameters(args): Parameters<AgentArgs>) -> CallToolResult {
        blocking(move || match ask(&Request::Explain { id: args.id })? {
            Response::Explanation { explanation } => pretty(&explanation),
            other => Err(CliError::from_response(other)),
        })
        .await
    }

    #[tool(
        description = "Wait until another agent (ID, or MACHINE:ID on a machine) reaches one of the given states (e.g. idle or done when it has finished its turn), at most timeout_secs (default 60, at most 600); while its machine cannot be reached it keeps waiting. Answers the state it is in at the end and whether it got there."
    )]
    async fn wait_for_state(&self, Parameters(args): Parameters<WaitArgs>) -> CallToolResult {
        let caller = self.caller().await;
        blocking(move || {
            let mut states = Vec::new();
            for s in &args.states {
                states.push(crate::commands::Target::parse(s.trim())?);
            }
            if states.is_empty() {
                return Err(CliError::user("states names no state to wait for"));
            }
            let secs = args.timeout_secs.unwrap_or(60);
            if secs > MAX_WAIT_SECS {
                return Err(CliError::user(format!(
                    "timeout_secs is at most {MAX_WAIT_SECS}"
                )));
            }
            let agent = Self::other_agent(&caller, &args.id, "wait for")?;
            let until = args.states.join(",");
            let (state, result) = crate::commands::wait_for(
                &agent.address(),
                &until,
                &states,
                Some(Duration::from_secs(secs)),
            )?;
            pretty(&serde_json::json!({
                "id": agent.id,
                "machine": agent.machine,
                "state": state,
                "reached": result.is_ok(),
                "note": result.err().map(|e| e.message),
            }))
        })
        .await
    }

    #[tool(
        description = "Hand another agent (ID, or MACHINE:ID on a machine) a message: it is typed into that agent's input and submitted the way its harness takes input, then volee confirms the agent reacted. Refused while the agent waits for its user's answer (needs_you): an agent never answers another agent's permission prompt."
    )]
    async fn send_message(&self, Parameters(args): Parameters<SendArgs>) -> CallToolResult {
        let caller = self.caller().await;
        blocking(move || {
            // Controls would be keys of their own (a carriage return submits the rest unsigned):
            // the daemon types the message inert and submits it once; this only judges what remains.
            if volee_harness::sanitize_input(&args.text, false)
                .trim()
                .is_empty()
            {
                return Err(CliError::user("the message is empty"));
            }
            if args.text.chars().count() > MAX_MESSAGE_CHARS {
                return Err(CliError::user(format!(
                    "the message is longer than {MAX_MESSAGE_CHARS} characters"
                )));
            }
            let agent = Self::other_agent(&caller, &args.id, "send a message to")?;
            if agent.state == AgentState::NeedsYou {
                return Err(error::waits_for_its_user(&agent));
            }
            if agent.state.is_final() {
                return Err(CliError::user(format!(
                    "agent {} ({}) has ended ({})",
                    agent.id, agent.name, agent.state
                )));
            }
            // The receiver is told where the message comes from.
            let text = match &caller {
                Some(from) => format!("(message from volee agent {from}) {}", args.text),
                None => args.text.clone(),
            };
            let before = agent_of(ask(&Request::Send {
                id: agent.address(),
                text,
                raw: false,
            })?)?;
            crate::send::confirm_reaction(before, Duration::from_secs(5))
        })
        .await
    }

    #[tool(
        description = "The last lines of another agent's screen (ID, or MACHINE:ID on a machine; default 40, at most 200), escape sequences removed."
    )]
    async fn read_screen(&self, Parameters(args): Parameters<ScreenArgs>) -> CallToolResult {
        blocking(move || {
            let lines = args.lines.unwrap_or(40);
            if lines == 0 || lines > MAX_SCREEN_LINES {
                return Err(CliError::user(format!("lines is 1 to {MAX_SCREEN_LINES}")));
            }
            text_of(ask(&Request::Peek { id: args.id, lines })?)
        })
        .await
    }
}

#[tool_handler]
impl ServerHandler for VoleeMcp {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "volee".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info.instructions = Some(
            "volee supervises the coding agents of this user in tmux and zellij: list them, see why each is in its state, wait for one, hand one a message, read its screen."
                .into(),
        );
        info
    }
}

/// `volee mcp`: serve on stdin/stdout until the client closes them.
pub fn serve() -> CliResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    runtime.block_on(async {
        let server = VoleeMcp::new(std::env::var("VOLEE_AGENT_ID").ok());
        let (stdin, stdout) = rmcp::transport::stdio();
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (from_server, to_server) = tokio::io::split(ours);
        let (parse_errors, errors_rx) = tokio::sync::mpsc::unbounded_channel();
        let reader = tokio::spawn(forward_input(stdin, to_server, parse_errors));
        let writer = tokio::spawn(forward_output(from_server, errors_rx, stdout));
        let result = async {
            let running = server
                .serve(tokio::io::split(theirs))
                .await
                .map_err(|e| CliError::internal(format!("MCP initialization failed: {e}")))?;
            running
                .waiting()
                .await
                .map_err(|e| CliError::internal(format!("MCP server stopped: {e}")))?;
            Ok(())
        }
        .await;
        reader.abort();
        // The server's side is gone: the writer drains what it wrote, then ends.
        let _ = writer.await;
        result
    })
}

/// The longest line read from the client (rmcp's own bound is larger; a longer line is dropped).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The JSON-RPC answer to a line that is not JSON: its id cannot be known.
fn parse_error_line(e: &serde_json::Error) -> Vec<u8> {
    let mut line = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {e}")},
    })
    .to_string()
    .into_bytes();
    line.push(b'\n');
    line
}

/// Client lines to the server; a line that is not JSON is answered with a parse error (-32700)
/// instead (rmcp drops such lines without a word, and the client would wait forever).
async fn forward_input(
    stdin: impl tokio::io::AsyncRead + Unpin,
    mut to_server: impl tokio::io::AsyncWrite + Unpin,
    parse_errors: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut stdin = tokio::io::BufReader::new(stdin);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut oversized = false;
        loop {
            let Ok(buf) = stdin.fill_buf().await else {
                return;
            };
            if buf.is_empty() {
                break;
            }
            let (part, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (&buf[..=i], true),
                None => (buf, false),
            };
            let n = part.len();
            if line.len() + n <= MAX_LINE_BYTES {
                line.extend_from_slice(part);
            } else {
                oversized = true;
            }
            stdin.consume(n);
            if done {
                break;
            }
        }
        if line.is_empty() {
            // End of input: the server sees it too.
            let _ = to_server.shutdown().await;
            return;
        }
        if oversized {
            continue;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            Ok(_) => {
                if to_server.write_all(&line).await.is_err() {
                    return;
                }
                if !line.ends_with(b"\n") && to_server.write_all(b"\n").await.is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = parse_errors.send(parse_error_line(&e));
            }
        }
    }
}

/// The server's lines and the parse errors to the client, whole lines only, so they never mix.
async fn forward_output(
    from_server: impl tokio::io::AsyncRead + Unpin,
    mut errors: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    mut stdout: impl tokio::io::AsyncWrite + Unpin,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut from_server = tokio::io::BufReader::new(from_server);
    let mut line = Vec::new();
    loop {
        tokio::select! {
            // `read_until` keeps what it read in `line` when the other branch wins.
            read = from_server.read_until(b'\n', &mut line) => {
                match read {
                    Ok(0) | Err(_) => {
                        if !line.is_empty() {
                            let _ = stdout.write_all(&line).await;
                        }
                        let _ = stdout.flush().await;
                        return;
                    }
                    Ok(_) => {
                        if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                            return;
                        }
                        line.clear();
                    }
                }
            }
            Some(error) = errors.recv() => {
                if stdout.write_all(&error).await.is_err() || stdout.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}
