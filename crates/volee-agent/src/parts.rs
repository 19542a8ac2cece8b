//! What the loop is made of, behind traits: the model ([`Model`], Ollama in production), the place
//! shell commands run ([`Shell`], the Docker sandbox), the pane ([`Ui`]) and the daemon that
//! shows the agent's state ([`StateReporter`]). Tests and benchmarks put their own in.

use std::time::Duration;

use volee_ollama::{
    ChatResponse, Message as WireMessage, OllamaClient, OllamaError, StreamEvent, Tool,
};
use volee_sandbox::{ExecOutput, ExecRequest, Sandbox, SandboxError};
use volee_store::{Message, Role, ToolCall, ToolFunction};

/// The model: one streamed chat request.
#[allow(async_fn_in_trait)]
pub trait Model {
    /// The model's name (recorded in the session and in compaction records).
    fn name(&self) -> &str;
    /// The context window sent with every request (`options.num_ctx`).
    fn num_ctx(&self) -> u32;
    /// One answer; `on_event` sees text and tool calls as they arrive.
    async fn chat(
        &self,
        messages: &[WireMessage],
        tools: &[Tool],
        on_event: &mut dyn FnMut(&StreamEvent),
    ) -> Result<ChatResponse, OllamaError>;
    /// One answer of at most `max_tokens` tokens, no tools (compaction summaries). A model that
    /// cannot cap its answers answers in full.
    async fn chat_capped(
        &self,
        messages: &[WireMessage],
        max_tokens: u32,
    ) -> Result<ChatResponse, OllamaError> {
        let _ = max_tokens;
        self.chat(messages, &[], &mut |_| {}).await
    }
}

impl Model for OllamaClient {
    fn name(&self) -> &str {
        &self.config().model
    }
    fn num_ctx(&self) -> u32 {
        self.config().num_ctx
    }
    async fn chat(
        &self,
        messages: &[WireMessage],
        tools: &[Tool],
        on_event: &mut dyn FnMut(&StreamEvent),
    ) -> Result<ChatResponse, OllamaError> {
        OllamaClient::chat(self, messages, tools, |e| on_event(e)).await
    }
    async fn chat_capped(
        &self,
        messages: &[WireMessage],
        max_tokens: u32,
    ) -> Result<ChatResponse, OllamaError> {
        OllamaClient::chat_capped(self, messages, &[], Some(max_tokens), |_| {}).await
    }
}

/// Where `shell` tool calls run.
#[allow(async_fn_in_trait)]
pub trait Shell {
    /// Run `command` with `sh -c`, killed after `timeout`.
    async fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, SandboxError>;
    /// One line for `\info` (e.g. the container's name).
    fn describe(&self) -> String;
    /// The user interrupted the turn: end whatever commands are still running.
    async fn interrupt(&self) {}
}

impl Shell for Sandbox {
    async fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, SandboxError> {
        Sandbox::exec(self, &ExecRequest::new(command).timeout(timeout)).await
    }
    async fn interrupt(&self) {
        self.kill_user_processes().await;
    }
    fn describe(&self) -> String {
        format!(
            "Docker container {} (user {}, no network)",
            self.name(),
            self.user()
        )
    }
}

/// The user's answer to an approval question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Run this call.
    Once,
    /// Run this call and every later call of the same tool in this run of the session (never
    /// saved: a resumed session asks again).
    Always,
    /// Do not run it; the model is told so.
    Deny,
    /// The user pressed Ctrl-C at the question: the turn stops as if interrupted while running
    /// (this call and the rest of its batch are answered "not run").
    Interrupted,
}

/// An approval question: what a call will do, with the texts the user must judge shown whole
/// (the pane shows a long one's head and tail, the hidden length, and everything on request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The tool (`shell`, `write_file`, `edit_file`).
    pub tool: String,
    /// One line: the tool and its target (`write_file src/a.rs`), made literal.
    pub title: String,
    /// The call's texts: what each is (`command`, `content`, `replace`, `with`) and the text
    /// exactly as the call has it (raw: the pane makes it literal).
    pub parts: Vec<(String, String)>,
}

impl Question {
    /// The whole question as text, every part whole and made literal (tests read this).
    pub fn whole(&self) -> String {
        let mut text = self.title.clone();
        for (label, raw) in &self.parts {
            text.push_str(&format!("\n{label}:\n{}", volee_view::literal_text(raw)));
        }
        text
    }
}

/// The pane: where the model's text streams to and approvals are asked.
pub trait Ui {
    /// A piece of the model's answer, as it arrives.
    fn text(&mut self, delta: &str);
    /// A piece of the model's reasoning.
    fn thinking(&mut self, _delta: &str) {}
    /// The model's answer is complete.
    fn answer_done(&mut self) {}
    /// A tool call starts (`description`: one line).
    fn tool_started(&mut self, description: &str);
    /// It finished; `summary` is the first line of its result.
    fn tool_finished(&mut self, summary: &str);
    /// Something the user should know (compaction, a denied call, a retry…).
    fn notice(&mut self, text: &str);
    /// Ask whether the call may run as `question` shows it.
    fn approve(&mut self, question: &Question) -> Approval;
    /// Does [`Ui::approve`] wait for the user (so the agent `needs_you` meanwhile)? False when
    /// approvals are answered by a rule (`--prompt`).
    fn asks_user(&self) -> bool {
        true
    }
}

/// What the agent tells the daemon, as hook events of the `volee` harness (their meanings are
/// in `volee-harness`'s hook table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentEvent {
    /// The session is open (carries its id).
    SessionStart,
    /// A turn started: `working`.
    TurnStart,
    /// Waiting for an approval: `needs_you`.
    ApprovalAsked,
    /// The approval was answered: `working` again.
    ApprovalAnswered,
    /// The turn ended; waiting for the next prompt: `idle`.
    TurnEnd,
    /// The turn ended in an error: `failed` (a new turn clears it).
    TurnFailed,
}

impl AgentEvent {
    /// The hook event name.
    pub fn name(self) -> &'static str {
        match self {
            AgentEvent::SessionStart => "SessionStart",
            AgentEvent::TurnStart => "TurnStart",
            AgentEvent::ApprovalAsked => "ApprovalAsked",
            AgentEvent::ApprovalAnswered => "ApprovalAnswered",
            AgentEvent::TurnEnd => "TurnEnd",
            AgentEvent::TurnFailed => "TurnFailed",
        }
    }
}

/// Reports the agent's state (to volee's daemon when it runs under volee). Must never block
/// for long or fail the agent.
pub trait StateReporter {
    fn report(&self, event: AgentEvent, session_id: &str);
}

/// Reports nothing (not running under volee).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReporter;

impl StateReporter for NoReporter {
    fn report(&self, _event: AgentEvent, _session_id: &str) {}
}

/// A stored message in Ollama's wire shape.
pub fn to_wire(m: &Message) -> WireMessage {
    let role = match m.role {
        Role::System => volee_ollama::Role::System,
        Role::User => volee_ollama::Role::User,
        Role::Assistant => volee_ollama::Role::Assistant,
        Role::Tool => volee_ollama::Role::Tool,
    };
    WireMessage {
        role,
        content: m.content.clone(),
        thinking: m.thinking.clone(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| volee_ollama::ToolCall {
                id: c.id.clone(),
                function: volee_ollama::ToolCallFunction {
                    index: c.function.index,
                    name: c.function.name.clone(),
                    arguments: c.function.arguments.clone(),
                },
            })
            .collect(),
        tool_name: m.tool_name.clone(),
        tool_call_id: m.tool_call_id.clone(),
    }
}

/// An answer from Ollama as a stored message.
pub fn from_wire(m: &WireMessage) -> Message {
    let role = match m.role {
        volee_ollama::Role::System => Role::System,
        volee_ollama::Role::User => Role::User,
        volee_ollama::Role::Assistant => Role::Assistant,
        volee_ollama::Role::Tool => Role::Tool,
    };
    Message {
        role,
        content: m.content.clone(),
        thinking: m.thinking.clone().filter(|t| !t.is_empty()),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| ToolCall {
                id: c.id.clone(),
                function: ToolFunction {
                    index: c.function.index,
                    name: c.function.name.clone(),
                    arguments: c.function.arguments.clone(),
                },
            })
            .collect(),
        tool_name: m.tool_name.clone(),
        tool_call_id: m.tool_call_id.clone(),
    }
}

/// Ctrl-C as the pane sees it, shared between the interactive loop and the signal handler: while
/// a turn runs, an interrupt ends the turn (not the agent); otherwise the handler decides.
#[derive(Debug, Default)]
pub struct Interrupts {
    in_turn: std::sync::atomic::AtomicBool,
    /// An interrupt came during the current turn.
    interrupted: std::sync::atomic::AtomicBool,
    generation: std::sync::atomic::AtomicU64,
    notify: tokio::sync::Notify,
}

impl Interrupts {
    pub fn new() -> Interrupts {
        Interrupts::default()
    }

    /// From the signal handler: interrupt the running turn. False when no turn runs.
    pub fn interrupt(&self) -> bool {
        use std::sync::atomic::Ordering;
        if !self.in_turn.load(Ordering::SeqCst) {
            return false;
        }
        self.interrupted.store(true, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
        true
    }

    /// Was the running turn interrupted? (A question waiting for the user's answer gives up.)
    pub fn turn_interrupted(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.in_turn.load(Ordering::SeqCst) && self.interrupted.load(Ordering::SeqCst)
    }

    /// Is a turn running?
    pub fn in_turn(&self) -> bool {
        self.in_turn.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn set_in_turn(&self, on: bool) {
        use std::sync::atomic::Ordering;
        if on {
            self.interrupted.store(false, Ordering::SeqCst);
        }
        self.in_turn.store(on, Ordering::SeqCst);
    }

    /// Completes at the first interrupt after this call.
    pub(crate) fn next(&self) -> impl std::future::Future<Output = ()> + '_ {
        use std::sync::atomic::Ordering;
        let start = self.generation.load(Ordering::SeqCst);
        async move {
            loop {
                let notified = self.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.generation.load(Ordering::SeqCst) != start {
                    return;
                }
                notified.await;
            }
        }
    }
}
