//! volee's own agent: the loop over a model (Ollama), a sandbox (Docker) and the session store
//! (ARCHITECTURE.md section 8; how it works: docs/agent.md).
//!
//! - [`Agent::turn`]: one user turn — model requests streamed to the pane, tool batches run,
//!   until the model answers without calling a tool. Tools ([`tools`]): `shell` (in the
//!   sandbox), `read_file`, `write_file`, `edit_file` (confined to the project root), `todo`,
//!   `scratchpad`.
//! - Approvals: `shell`, `write_file` and `edit_file` are asked in the pane ([`Ui::approve`]:
//!   once, always for this run, deny); "always" lives only in memory, so a resumed session asks
//!   again.
//! - Recovery: every call is recorded as pending and checkpointed before it runs; resume
//!   answers a pending call with the store's "outcome unknown" and a call that never started
//!   with [`NOT_STARTED`] — nothing is re-run.
//! - Interrupts ([`Agent::turn_interruptible`], [`Interrupts`]): Ctrl-C during a turn ends the
//!   turn, not the agent — running commands killed, the running call answered [`INTERRUPTED`],
//!   calls not started [`NOT_RUN_INTERRUPTED`], checkpointed; the pane waits for a prompt.
//! - Compaction ([`Agent::compact`]): by hand, or before a request once the context reaches
//!   [`Agent::compaction_trigger`] (80 % of the budget, leaving room for the summary request).
//!   The system prompt and the current turn stay; the rest becomes a summary stored as a user
//!   message; `compactions.jsonl` logs it and the transcript keeps every original. A failed or
//!   non-shrinking summary changes nothing; over [`Agent::hard_limit`] the turn stops with
//!   [`AgentError::ContextFull`] instead of dropping history.
//! - State: [`StateReporter`] tells volee's daemon `working` / `needs_you` / `idle` / `failed`
//!   as hook events of the `volee` harness.
//! - The pane ([`pane`]): line-oriented, `\help`, `\sessions`, `\info`, `\title`, `\fork`,
//!   `\compact`, `\checkpoint`, `\checkpoints`, `\rewind` ([`rewind`]), `\exit`.
//!
//! The model and the sandbox sit behind [`Model`] and [`Shell`]; production uses
//! `volee_ollama::OllamaClient` and `volee_sandbox::Sandbox`.

mod agent;
mod error;
pub mod pane;
mod parts;
pub mod rewind;
pub mod tools;

pub use agent::{
    create_session, unanswered_calls, Agent, AgentOptions, CompactOutcome, TurnOutcome, DENIED,
    INTERRUPTED, NOT_RUN_INTERRUPTED, NOT_STARTED, SUMMARY_ACK, SUMMARY_PREFIX, SYSTEM_PROMPT,
};
pub use error::AgentError;
pub use pane::{
    interactive, ApprovalMode, InterruptibleInput, Pane, TurnInterrupted, HELP, PASTE_OFF, PASTE_ON,
};
pub use parts::{
    from_wire, to_wire, AgentEvent, Approval, Interrupts, Model, NoReporter, Question, Shell,
    StateReporter, Ui,
};
