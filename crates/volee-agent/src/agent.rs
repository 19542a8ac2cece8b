//! The loop: a user turn is model requests and tool batches until the model answers without
//! calling a tool. Checkpoints at every tool call (recorded as pending before it runs), at the
//! end of every tool batch and at the end of the turn; automatic compaction before a request
//! when the context reaches its trigger.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use volee_ollama::{
    estimate_message, estimate_prompt, ChatResponse, Message as WireMessage, OllamaError,
    StreamEvent, Tool,
};
use volee_store::{
    CompactionRecord, Message, NewSession, Role, SessionState, Store, ToolCall, TranscriptItem,
    WriterSession,
};

use crate::error::AgentError;
use crate::parts::{from_wire, to_wire, AgentEvent, Approval, Model, Shell, StateReporter, Ui};
use crate::tools;

/// The system prompt of a new session.
pub const SYSTEM_PROMPT: &str = "You are volee's coding agent, working in the user's project directory. \
Use the tools to look at and change the project: read_file, write_file and edit_file take paths relative \
to the project root; shell runs commands in a sandbox with no network that holds only the project \
directory. The user must approve shell, write_file and edit_file calls; a denied call was not run. \
Keep a todo list for multi-step work and notes in the scratchpad. Be brief; say what you changed.";

/// The first words of a compaction summary in the context (a user message: conversation data,
/// not a rule).
pub const SUMMARY_PREFIX: &str = "[volee: summary of the earlier conversation, written when the context was compacted; the full transcript is kept]";

/// The assistant's acknowledgement after a summary, so roles keep alternating.
pub const SUMMARY_ACK: &str = "Understood. I will continue from this summary.";

/// The instructions of a summary request.
const SUMMARY_SYSTEM: &str = "You write a handoff summary of a coding session for another assistant that will continue it. \
Keep: the user's goal and constraints, decisions taken, files changed and how, commands run and what they showed, \
what is done, what remains, and exact names, paths and errors that matter. Be concise and structured. \
Do not call tools.";
const SUMMARY_REQUEST: &str = "Write the summary of the conversation above now, as plain text.";

/// The result text of a call that was never started because volee stopped first.
pub const NOT_STARTED: &str = "not run — volee stopped before this tool call started, so it was never executed. Run it again if it is still needed.";

/// The result text of a denied call.
/// The result of a tool call that was running when the user interrupted the turn.
pub const INTERRUPTED: &str = "interrupted — the user stopped this tool call while it ran; its commands were killed and its outcome is unknown (it may have done part of its work). Check before running it again.";
/// The result of a tool call the model asked for but that had not started when the user
/// interrupted the turn.
pub const NOT_RUN_INTERRUPTED: &str =
    "not run — the user interrupted the turn before this tool call started.";
pub const DENIED: &str = "denied — the user did not allow this tool call, so it was not run. Do something else or ask the user.";

/// Knobs of the loop.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOptions {
    /// The context budget (`--max-context-tokens`; also `num_ctx`).
    pub max_context_tokens: u64,
    /// Default time limit of a `shell` call.
    pub shell_timeout: Duration,
    /// Model requests per turn before the turn is stopped.
    pub max_steps: u32,
    /// The session's token budget (`--budget`: prompt + completion tokens): no model request
    /// is made once it is used, so it is passed by one response at most.
    pub budget: Option<u64>,
}

impl AgentOptions {
    pub fn new(max_context_tokens: u64) -> AgentOptions {
        AgentOptions {
            max_context_tokens,
            shell_timeout: Duration::from_secs(120),
            max_steps: 40,
            budget: None,
        }
    }
}

/// What a turn did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnOutcome {
    /// The model's final answer.
    pub answer: String,
    /// Model requests made (summary requests not included).
    pub steps: u32,
    /// Tool calls run.
    pub tool_calls: u32,
    /// Tool calls denied.
    pub denied: u32,
    /// Compactions made during the turn.
    pub compactions: u32,
    /// The user interrupted the turn (see [`Agent::turn_interruptible`]).
    pub interrupted: bool,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactOutcome {
    /// The context was replaced: `replaced` messages became a summary.
    Compacted {
        before: u64,
        after: u64,
        replaced: u64,
    },
    /// Nothing changed, and why.
    Unchanged { why: String },
}

/// Create a new session for `project_root` (canonical) with the system prompt.
pub fn create_session(
    store: &Store,
    project_root: &Path,
    model: &str,
) -> Result<WriterSession, AgentError> {
    let mut w = store.create(NewSession {
        title: String::new(),
        project_root: project_root.to_path_buf(),
        model: model.into(),
    })?;
    w.push_message(Message::system(SYSTEM_PROMPT))?;
    w.checkpoint()?;
    Ok(w)
}

/// The agent: one session, its model, its sandbox.
pub struct Agent<M, S> {
    model: M,
    shell: S,
    store: Store,
    writer: WriterSession,
    root: PathBuf,
    options: AgentOptions,
    tools: Vec<Tool>,
    /// Tools the user allowed for the rest of this run ("always"); never saved.
    always: BTreeSet<String>,
    reporter: Box<dyn StateReporter>,
    /// The tokens Ollama counted for the context at the last answer, and the context length
    /// then: messages added since are estimated on top.
    floor: Option<(u64, usize)>,
}

impl<M: Model, S: Shell> Agent<M, S> {
    /// Wrap an open session (new or resumed). On a resumed one, every tool call the model made
    /// that has no result yet (volee stopped before starting it) gets [`NOT_STARTED`]; calls that
    /// were running got the store's "outcome unknown" already. Nothing is re-run.
    pub fn new(
        model: M,
        shell: S,
        store: Store,
        writer: WriterSession,
        project_root: &Path,
        options: AgentOptions,
        reporter: Box<dyn StateReporter>,
    ) -> Result<Agent<M, S>, AgentError> {
        let mut agent = Agent {
            model,
            shell,
            store,
            writer,
            root: project_root.to_path_buf(),
            options,
            tools: tools::tool_specs(),
            always: BTreeSet::new(),
            reporter,
            floor: None,
        };
        if agent.writer.state().model != agent.model.name() {
            agent.writer.state_mut().model = agent.model.name().to_string();
        }
        let unanswered = unanswered_calls(&agent.writer.state().messages);
        if !unanswered.is_empty() {
            let mut ids = Vec::new();
            for call in &unanswered {
                ids.push(call_id(call));
                agent
                    .writer
                    .push_message(Message::tool_result(call, NOT_STARTED))?;
            }
            agent.writer.record(TranscriptItem::Event {
                name: "not_started".into(),
                detail: json!({ "tool_call_ids": ids }),
            })?;
        }
        agent.writer.checkpoint()?;
        agent.report(AgentEvent::SessionStart);
        Ok(agent)
    }

    pub fn session_id(&self) -> &str {
        self.writer.id()
    }

    pub fn state(&self) -> &SessionState {
        self.writer.state()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn model(&self) -> &M {
        &self.model
    }

    pub fn shell(&self) -> &S {
        &self.shell
    }

    /// Give back the sandbox (to remove it) and the session (to release its lock).
    pub fn into_parts(self) -> (M, S, WriterSession) {
        (self.model, self.shell, self.writer)
    }

    /// Change the session's token budget (None: none).
    pub fn set_budget(&mut self, budget: Option<u64>) {
        self.options.budget = budget;
    }

    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    fn report(&self, event: AgentEvent) {
        self.reporter.report(event, self.writer.id());
    }

    /// Tell the daemon the agent waits for a prompt.
    pub fn report_idle(&self) {
        self.report(AgentEvent::TurnEnd);
    }

    /// The context's size in tokens: the larger of the local estimate and Ollama's count at the
    /// last answer plus an estimate of what was added since.
    pub fn context_tokens(&self) -> u64 {
        let msgs = &self.writer.state().messages;
        let wire = request_context(msgs);
        let estimate = estimate_prompt(&wire, &self.tools);
        match self.floor {
            Some((reported, len)) if len <= wire.len() => {
                let added: u64 = wire[len..].iter().map(estimate_message).sum();
                estimate.max(reported + added)
            }
            _ => estimate,
        }
    }

    /// Automatic compaction starts at this many tokens: 80 % of the budget, lower when the
    /// budget is so small that the summary request and its answer would not fit above it.
    pub fn compaction_trigger(&self) -> u64 {
        let b = self.options.max_context_tokens;
        let summary_room = self.summary_answer_limit() + summary_prompt_tokens();
        (b * 8 / 10).min(b.saturating_sub(summary_room))
    }

    /// The longest summary a compaction asks for, in tokens (`num_predict`): a tenth of the
    /// budget, between 64 and 4096.
    pub fn summary_answer_limit(&self) -> u64 {
        (self.options.max_context_tokens / 10).clamp(64, 4096)
    }

    /// Above this many tokens a request is not sent at all (the answer needs room too): 90 %.
    pub fn hard_limit(&self) -> u64 {
        let b = self.options.max_context_tokens;
        b - b / 10
    }

    /// Set the session's title.
    pub fn set_title(&mut self, title: &str) -> Result<(), AgentError> {
        self.writer.state_mut().title = title.trim().to_string();
        self.writer.checkpoint()?;
        Ok(())
    }

    /// Checkpoint, then copy the session into a new one; returns its id.
    pub fn fork(&mut self) -> Result<String, AgentError> {
        self.writer.checkpoint()?;
        Ok(self.store.fork(self.writer.id())?)
    }

    /// Record a named checkpoint of this session (`\checkpoint NAME`), at this turn boundary.
    pub fn save_checkpoint(&mut self, name: &str) -> Result<volee_store::Checkpoint, AgentError> {
        Ok(self.writer.save_checkpoint(name)?)
    }

    /// Return the context, scratchpad and todos to checkpoint `name` (`\rewind NAME`); files
    /// and shell effects are not undone (the record lists the calls that may have changed files).
    pub fn rewind(&mut self, name: &str) -> Result<volee_store::RewindRecord, AgentError> {
        let record = self.writer.rewind_to(name)?;
        // Ollama's last count was of a context that is gone.
        self.floor = None;
        Ok(record)
    }

    /// One user turn: model requests and tool batches until the model answers without tools.
    pub async fn turn<U: Ui>(&mut self, text: &str, ui: &mut U) -> Result<TurnOutcome, AgentError> {
        self.report(AgentEvent::TurnStart);
        let result = self.turn_inner(text, ui).await;
        match &result {
            Ok(_) => self.report(AgentEvent::TurnEnd),
            Err(_) => self.report(AgentEvent::TurnFailed),
        }
        result
    }

    /// [`Agent::turn`], ended early when `interrupt` completes (the user pressed Ctrl-C): the
    /// model's answer in progress is dropped, running commands are killed, every tool call the
    /// model asked for gets a result that says what happened, and the session is checkpointed —
    /// ready for the next prompt, with the context the model will see consistent.
    pub async fn turn_interruptible<U: Ui, F: std::future::Future<Output = ()>>(
        &mut self,
        text: &str,
        ui: &mut U,
        interrupt: F,
    ) -> Result<TurnOutcome, AgentError> {
        self.report(AgentEvent::TurnStart);
        let finished = {
            let turn = self.turn_inner(text, ui);
            tokio::pin!(turn);
            tokio::pin!(interrupt);
            tokio::select! {
                r = &mut turn => Some(r),
                () = &mut interrupt => None,
            }
        };
        let result = match finished {
            // Ctrl-C at an approval question ends the turn the same way.
            Some(Err(AgentError::Interrupted)) | None => self.recover_interrupted(ui).await,
            Some(r) => r,
        };
        match &result {
            Ok(_) => self.report(AgentEvent::TurnEnd),
            Err(_) => self.report(AgentEvent::TurnFailed),
        }
        result
    }

    /// After an interrupted turn: kill what runs, answer every call, record it, checkpoint.
    async fn recover_interrupted<U: Ui>(&mut self, ui: &mut U) -> Result<TurnOutcome, AgentError> {
        ui.answer_done();
        let running: Vec<ToolCall> = self
            .writer
            .state()
            .pending_tool_calls
            .iter()
            .map(|p| p.call.clone())
            .collect();
        if running.iter().any(|c| c.function.name == "shell") {
            self.shell.interrupt().await;
        }
        let mut ids = Vec::new();
        for call in &running {
            ids.push(call_id(call));
            self.writer.finish_tool_call(&call_id(call), INTERRUPTED)?;
        }
        for call in unanswered_calls(&self.writer.state().messages) {
            ids.push(call_id(&call));
            self.writer
                .push_message(Message::tool_result(&call, NOT_RUN_INTERRUPTED))?;
        }
        self.writer.record(TranscriptItem::Event {
            name: "interrupted".into(),
            detail: json!({ "tool_call_ids": ids }),
        })?;
        self.writer.checkpoint()?;
        ui.notice("interrupted");
        Ok(TurnOutcome {
            interrupted: true,
            ..TurnOutcome::default()
        })
    }

    async fn turn_inner<U: Ui>(
        &mut self,
        text: &str,
        ui: &mut U,
    ) -> Result<TurnOutcome, AgentError> {
        if self.writer.state().title.is_empty() {
            self.writer.state_mut().title = title_from(text);
        }
        self.writer.push_message(Message::user(text))?;
        self.writer.checkpoint()?;
        let mut outcome = TurnOutcome::default();
        for step in 1..=self.options.max_steps {
            if self.ensure_room(ui).await? {
                outcome.compactions += 1;
            }
            let answer = self.request(ui).await?;
            outcome.steps = step;
            let message = from_wire(&answer.message);
            let calls = message.tool_calls.clone();
            let content = message.content.clone();
            self.writer.push_message(message)?;
            self.floor = Some((
                answer.usage.prompt_tokens + answer.usage.completion_tokens,
                self.writer.state().messages.len(),
            ));
            if answer.raw_tool_call_text {
                ui.notice("the model wrote a tool call as text that Ollama could not parse (a known weakness of some models' tool parsers); it was not run");
                self.writer.record(TranscriptItem::Event {
                    name: "raw_tool_call_text".into(),
                    detail: Value::Null,
                })?;
            }
            if calls.is_empty() {
                self.writer.checkpoint()?;
                outcome.answer = content;
                return Ok(outcome);
            }
            for call in &calls {
                self.run_call(call, ui, &mut outcome).await?;
            }
            // The end of a tool batch.
            self.writer.checkpoint()?;
        }
        Err(AgentError::TooManySteps {
            steps: self.options.max_steps,
        })
    }

    /// One model request with the current context, streamed to the pane; usage and retries
    /// counted.
    async fn request<U: Ui>(&mut self, ui: &mut U) -> Result<ChatResponse, AgentError> {
        if let Some(budget) = self.options.budget {
            let usage = &self.writer.state().usage;
            let used = usage.prompt_tokens + usage.completion_tokens;
            if used >= budget {
                self.writer.record(TranscriptItem::Event {
                    name: "budget_reached".into(),
                    detail: json!({ "used": used, "budget": budget }),
                })?;
                self.writer.checkpoint()?;
                return Err(AgentError::BudgetReached { used, budget });
            }
        }
        let wire = request_context(&self.writer.state().messages);
        let result = {
            let mut on_event = |e: &StreamEvent| match e {
                StreamEvent::Content(t) => ui.text(t),
                StreamEvent::Thinking(t) => ui.thinking(t),
                StreamEvent::ToolCall(_) => {}
            };
            self.model.chat(&wire, &self.tools, &mut on_event).await
        };
        self.account(&result);
        match result {
            Ok(answer) => {
                ui.answer_done();
                Ok(answer)
            }
            Err(e) => {
                ui.answer_done();
                self.writer.record(TranscriptItem::Event {
                    name: "model_error".into(),
                    detail: json!({ "error": e.to_string() }),
                })?;
                self.writer.checkpoint()?;
                Err(e.into())
            }
        }
    }

    /// Usage and retry counts of one request.
    fn account(&mut self, result: &Result<ChatResponse, OllamaError>) {
        let state = self.writer.state_mut();
        let retries = match result {
            Ok(a) => {
                state.usage.prompt_tokens += a.usage.prompt_tokens;
                state.usage.completion_tokens += a.usage.completion_tokens;
                state.usage.requests += 1;
                u64::from(a.retries)
            }
            Err(OllamaError::GaveUp { attempts, .. }) => u64::from(attempts.saturating_sub(1)),
            Err(_) => 0,
        };
        if retries > 0 {
            *state.retry_counts.entry("model".into()).or_insert(0) += retries;
        }
    }

    /// Answer one tool call: ask when it needs an approval, record it as pending (durably)
    /// before running it, run it, record its result.
    async fn run_call<U: Ui>(
        &mut self,
        call: &ToolCall,
        ui: &mut U,
        outcome: &mut TurnOutcome,
    ) -> Result<(), AgentError> {
        let name = call.function.name.clone();
        let args = arguments(&call.function.arguments);
        let description = tools::describe_call(&name, &args);
        if !self.tools.iter().any(|t| t.function.name == name) {
            let known: Vec<&str> = self
                .tools
                .iter()
                .map(|t| t.function.name.as_str())
                .collect();
            self.writer.push_message(Message::tool_result(
                call,
                format!(
                    "error: there is no tool {name:?}; the tools are {}",
                    known.join(", ")
                ),
            ))?;
            return Ok(());
        }
        if tools::needs_approval(&name) && !self.always.contains(&name) {
            let asks = ui.asks_user();
            if asks {
                self.report(AgentEvent::ApprovalAsked);
            }
            let answer = ui.approve(&tools::question(&name, &args));
            if asks {
                self.report(AgentEvent::ApprovalAnswered);
            }
            self.writer.record(TranscriptItem::Event {
                name: "approval".into(),
                detail: json!({
                    "tool": name, "tool_call_id": call_id(call),
                    "answer": format!("{answer:?}").to_lowercase(),
                }),
            })?;
            match answer {
                Approval::Interrupted => return Err(AgentError::Interrupted),
                Approval::Deny => {
                    ui.notice(&format!("denied: {description}"));
                    self.writer
                        .push_message(Message::tool_result(call, DENIED))?;
                    outcome.denied += 1;
                    return Ok(());
                }
                Approval::Always => {
                    self.always.insert(name.clone());
                }
                Approval::Once => {}
            }
        }
        ui.tool_started(&description);
        // Pending and durable before it runs: a crash now leaves an honest "outcome unknown".
        self.writer.begin_tool_call(call.clone());
        self.writer.checkpoint()?;
        let result = match name.as_str() {
            "shell" => self.run_shell(&args).await,
            "read_file" => tools::read_file(&self.root, &args),
            "write_file" => tools::write_file(&self.root, &args),
            "edit_file" => tools::edit_file(&self.root, &args),
            "todo" => tools::todo(self.writer.state_mut(), &args),
            "recall" => tools::recall(&self.store, self.writer.id(), &args),
            "scratchpad" => tools::scratchpad(self.writer.state_mut(), &args),
            _ => Err(tools::ToolFailure(format!(
                "error: there is no tool {name:?}"
            ))),
        };
        let text = result.unwrap_or_else(|f| f.0);
        ui.tool_finished(text.lines().next().unwrap_or(""));
        self.writer.finish_tool_call(&call_id(call), text)?;
        outcome.tool_calls += 1;
        Ok(())
    }

    async fn run_shell(&self, args: &Value) -> Result<String, tools::ToolFailure> {
        let command = tools::arg_str(args, "command")?;
        let timeout = match tools::arg_u64(args, "timeout_secs")? {
            Some(s) => Duration::from_secs(s.clamp(1, tools::MAX_SHELL_TIMEOUT_SECS)),
            None => self.options.shell_timeout,
        };
        match self.shell.exec(command, timeout).await {
            Ok(out) => {
                let mut text = match (out.exit_code, out.timed_out) {
                    (_, true) => format!(
                        "exit code 137: killed at the time limit of {} s",
                        volee_sandbox::whole_seconds(timeout)
                    ),
                    (Some(c), false) => format!("exit code {c}"),
                    (None, false) => "exit code unknown".into(),
                };
                if !out.stdout.is_empty() {
                    text.push_str("\n[stdout]\n");
                    text.push_str(&out.stdout);
                }
                if !out.stderr.is_empty() {
                    text.push_str("\n[stderr]\n");
                    text.push_str(&out.stderr);
                }
                Ok(text)
            }
            Err(e) => Err(tools::ToolFailure(format!(
                "error: the sandbox could not run the command: {e}"
            ))),
        }
    }

    /// Before a request: compact when the context reached the trigger; stop when it is still
    /// over the hard limit. Returns whether it compacted.
    async fn ensure_room<U: Ui>(&mut self, ui: &mut U) -> Result<bool, AgentError> {
        let tokens = self.context_tokens();
        if tokens < self.compaction_trigger() {
            return Ok(false);
        }
        ui.notice(&format!(
            "the context holds about {tokens} of {} tokens: compacting",
            self.options.max_context_tokens
        ));
        match self.compact(ui).await? {
            CompactOutcome::Compacted { .. } => {
                let now = self.context_tokens();
                if now >= self.hard_limit() {
                    return Err(AgentError::ContextFull {
                        session: self.writer.id().to_string(),
                        tokens: now,
                        budget: self.options.max_context_tokens,
                        why: "the current turn alone is too large".into(),
                    });
                }
                Ok(true)
            }
            CompactOutcome::Unchanged { why } => {
                let now = self.context_tokens();
                if now >= self.hard_limit() {
                    return Err(AgentError::ContextFull {
                        session: self.writer.id().to_string(),
                        tokens: now,
                        budget: self.options.max_context_tokens,
                        why,
                    });
                }
                ui.notice(&format!(
                    "compaction left the context unchanged ({why}); going on with all of it"
                ));
                Ok(false)
            }
        }
    }

    /// Summarize everything between the system prompt and the current (last) user turn into a
    /// user message plus an acknowledgement. The system prompt and the current turn stay as
    /// they are; the transcript keeps every original; `compactions.jsonl` logs it. A failed or
    /// non-shrinking summary leaves the context unchanged.
    pub async fn compact<U: Ui>(&mut self, ui: &mut U) -> Result<CompactOutcome, AgentError> {
        let msgs = self.writer.state().messages.clone();
        let start = usize::from(msgs.first().is_some_and(|m| m.role == Role::System));
        let current = msgs
            .iter()
            .rposition(|m| m.role == Role::User && !m.content.starts_with(SUMMARY_PREFIX));
        let Some(current) = current.filter(|&i| i > start) else {
            return Ok(CompactOutcome::Unchanged {
                why: "there is nothing before the current turn to summarize".into(),
            });
        };
        let head = &msgs[start..current];
        if head.len() == 2 && head[0].content.starts_with(SUMMARY_PREFIX) {
            return self
                .compaction_failed(
                    "everything before the current turn is already one summary".into(),
                )
                .await;
        }
        // The part to summarize as one text, not as messages: no tool calls and results in a
        // request without tools (fragile in some models' templates), and long results cut.
        let request = [
            WireMessage::system(SUMMARY_SYSTEM),
            WireMessage::user(&format!(
                "The conversation to summarize:\n\n{}\n\n{SUMMARY_REQUEST}",
                render_for_summary(head)
            )),
        ];
        let limit = self.summary_answer_limit();
        let result = self.model.chat_capped(&request, limit as u32).await;
        self.account(&result);
        let summary = match result {
            Ok(a) if !a.message.content.trim().is_empty() => {
                let text = a.message.content.trim().to_string();
                if a.done_reason.as_deref() == Some("length") {
                    format!("{text}\n[volee: the summary was cut at {limit} tokens]")
                } else {
                    text
                }
            }
            Ok(_) => {
                return self
                    .compaction_failed("the model returned an empty summary".into())
                    .await
            }
            Err(e) => {
                return self
                    .compaction_failed(format!("the summary request failed: {e}"))
                    .await
            }
        };
        let mut context: Vec<Message> = msgs[..start].to_vec();
        context.push(Message::user(format!("{SUMMARY_PREFIX}\n{summary}")));
        context.push(Message::assistant(SUMMARY_ACK));
        context.extend_from_slice(&msgs[current..]);
        let before = self.context_tokens();
        let wire = request_context(&context);
        let after = estimate_prompt(&wire, &self.tools);
        if after >= before {
            return self
                .compaction_failed(format!(
                    "the summary did not shrink the context ({before} → {after} tokens)"
                ))
                .await;
        }
        let replaced = head.len() as u64;
        self.writer.compact(
            CompactionRecord {
                summary,
                replaced_messages: replaced,
                tokens_before: before,
                tokens_after: after,
                model: self.model.name().to_string(),
                seq: 0,
                at_ms: 0,
            },
            context,
        )?;
        self.floor = None;
        self.writer.checkpoint()?;
        ui.notice(&format!(
            "compacted: {replaced} messages became a summary; the context went from about {before} to {after} tokens (the transcript keeps them all)"
        ));
        Ok(CompactOutcome::Compacted {
            before,
            after,
            replaced,
        })
    }

    async fn compaction_failed(&mut self, why: String) -> Result<CompactOutcome, AgentError> {
        self.writer.record(TranscriptItem::Event {
            name: "compaction_failed".into(),
            detail: json!({ "why": why }),
        })?;
        self.writer.checkpoint()?;
        Ok(CompactOutcome::Unchanged { why })
    }
}

/// The context as sent to the model: the stored messages without the model's earlier reasoning
/// (`thinking` stays in the session and the transcript; sent back it would only fill the window).
fn request_context(messages: &[Message]) -> Vec<WireMessage> {
    messages
        .iter()
        .map(|m| {
            let mut w = to_wire(m);
            w.thinking = None;
            w
        })
        .collect()
}

/// Longest tool result quoted whole in a summary request (head and tail kept beyond it).
const SUMMARY_RESULT_MAX: usize = 8 * 1024;

/// Messages as a plain transcript for the summary request.
pub fn render_for_summary(messages: &[Message]) -> String {
    let cut = |t: &str| -> String {
        if t.len() <= SUMMARY_RESULT_MAX {
            return t.to_string();
        }
        let mut head = SUMMARY_RESULT_MAX / 2;
        while !t.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = t.len() - SUMMARY_RESULT_MAX / 2;
        while !t.is_char_boundary(tail) {
            tail += 1;
        }
        format!(
            "{}\n[… {} bytes left out …]\n{}",
            &t[..head],
            tail - head,
            &t[tail..]
        )
    };
    let mut out = String::new();
    for m in messages {
        let text = match m.role {
            Role::System => format!("[system]\n{}", m.content),
            Role::User => format!("[user]\n{}", m.content),
            Role::Assistant => {
                let mut t = format!("[assistant]\n{}", m.content);
                for c in &m.tool_calls {
                    t.push_str(&format!(
                        "\n(called {} with {})",
                        c.function.name, c.function.arguments
                    ));
                }
                t
            }
            Role::Tool => format!(
                "[result of {}]\n{}",
                m.tool_name.as_deref().unwrap_or("a tool"),
                cut(&m.content)
            ),
        };
        out.push_str(text.trim_end());
        out.push_str("\n\n");
    }
    out.trim_end().to_string()
}

/// A call's id (the stream gives every call one; the name otherwise, as the store matches).
fn call_id(call: &ToolCall) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| call.function.name.clone())
}

/// Arguments as an object: some models send them as a JSON string.
fn arguments(raw: &Value) -> Value {
    match raw {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
        Value::Null => json!({}),
        other => other.clone(),
    }
}

/// Tool calls of assistant messages that no `tool` message answers, in order.
pub fn unanswered_calls(messages: &[Message]) -> Vec<ToolCall> {
    let answered: BTreeSet<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref().or(m.tool_name.as_deref()))
        .collect();
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_calls.iter())
        .filter(|c| !answered.contains(call_id(c).as_str()))
        .cloned()
        .collect()
}

/// A title from the first prompt: its first line, at most 60 characters.
fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > 60 {
        format!("{}…", line.chars().take(59).collect::<String>())
    } else {
        line.to_string()
    }
}

fn summary_prompt_tokens() -> u64 {
    volee_ollama::estimate_text(SUMMARY_SYSTEM.len() + SUMMARY_REQUEST.len()) + 8
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn unanswered_calls_are_found() {
        let call = |id: &str| ToolCall {
            id: Some(id.into()),
            function: volee_store::ToolFunction {
                index: None,
                name: "shell".into(),
                arguments: json!({}),
            },
        };
        let mut a = Message::assistant("");
        a.tool_calls = vec![call("c1"), call("c2"), call("c3")];
        let msgs = vec![
            Message::user("x"),
            a,
            Message::tool_result(&call("c1"), "ok"),
        ];
        let ids: Vec<String> = unanswered_calls(&msgs).iter().map(call_id).collect();
        assert_eq!(ids, vec!["c2", "c3"]);
        assert_eq!(title_from("\n  fix the build  \nmore"), "fix the build");
        assert_eq!(title_from(&"x".repeat(100)).chars().count(), 60);
        assert_eq!(arguments(&json!("{\"a\":1}")), json!({"a": 1}));
        let mut a = Message::assistant("let me look");
        a.tool_calls = vec![call("c1")];
        let mut r = Message::tool_result(&call("c1"), "x".repeat(20_000));
        r.content.push_str("THE END");
        let text = render_for_summary(&[Message::user("fix it"), a, r]);
        assert!(
            text.starts_with("[user]\nfix it\n\n[assistant]\nlet me look\n(called shell with {})")
        );
        assert!(text.contains("[result of shell]\nxxx"));
        assert!(text.contains("bytes left out") && text.ends_with("THE END"));
        assert!(text.len() < 9_000, "{}", text.len());
        let mut thought = Message::assistant("answer");
        thought.thinking = Some("long reasoning".into());
        let wire = request_context(&[thought]);
        assert_eq!(
            (wire[0].content.as_str(), wire[0].thinking.as_ref()),
            ("answer", None)
        );
    }
}
