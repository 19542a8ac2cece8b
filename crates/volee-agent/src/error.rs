//! What can stop the agent, each with what to do about it ([`AgentError::hint`]).

use volee_ollama::OllamaError;
use volee_sandbox::SandboxError;
use volee_store::StoreError;

/// An error of the agent loop. A tool that fails is not an error: its failure is the tool's
/// result, and the model sees it.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Talking to Ollama failed (not running, model missing, no tool support, …).
    #[error(transparent)]
    Model(#[from] OllamaError),
    /// The sandbox could not be used (Docker missing, image missing, …).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The session store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The context is too large to send and compaction could not shrink it; nothing was dropped.
    #[error("session {session}: the conversation (about {tokens} tokens) no longer fits the context window of {budget} tokens, and compaction could not shrink it ({why}); nothing was dropped")]
    ContextFull {
        session: String,
        tokens: u64,
        budget: u64,
        why: String,
    },
    /// The model kept calling tools without ever answering.
    #[error("the turn was stopped after {steps} model requests without a final answer")]
    TooManySteps { steps: u32 },
    /// The user interrupted the turn at an approval question ([`crate::Agent::turn_interruptible`]
    /// turns this into an interrupted turn; a plain turn reports it).
    #[error("the turn was interrupted at an approval question")]
    Interrupted,
    /// The session used its token budget (`--budget`): the next model request is refused.
    #[error("its budget is used ({used} of {budget} tokens): no more model requests")]
    BudgetReached { used: u64, budget: u64 },
}

impl AgentError {
    /// What to do next, for a `hint:` line.
    pub fn hint(&self) -> Option<String> {
        match self {
            AgentError::Model(e) => e.hint(),
            AgentError::Sandbox(e) => e.hint(),
            AgentError::Store(_) => None,
            AgentError::ContextFull { session, .. } => Some(format!(
                "raise --max-context-tokens if the model and memory allow (`volee agent --resume {session} --max-context-tokens N`), or start a new session; the transcript keeps everything"
            )),
            AgentError::TooManySteps { .. } => {
                Some("ask again with a narrower request; the session keeps what was done".into())
            }
            AgentError::Interrupted => None,
            AgentError::BudgetReached { .. } => Some(
                "raise it: volee budget ID +AMOUNT (from volee), or `volee agent --resume SESSION --budget N`"
                    .into(),
            ),
        }
    }

    /// The environment lacks something (exit code 3): Ollama or Docker not there, a model not
    /// installed or without tools, an image missing.
    pub fn is_environment(&self) -> bool {
        match self {
            AgentError::Model(e) => matches!(
                e.root(),
                OllamaError::NotRunning { .. }
                    | OllamaError::ModelMissing { .. }
                    | OllamaError::NoToolSupport { .. }
                    | OllamaError::NoThinkingSupport { .. }
            ),
            AgentError::Sandbox(e) => matches!(
                e,
                SandboxError::DockerNotRunning { .. }
                    | SandboxError::PermissionDenied { .. }
                    | SandboxError::ImageMissing { .. }
                    | SandboxError::BusyboxMissing { .. }
                    | SandboxError::BusyboxNotStatic { .. }
            ),
            _ => false,
        }
    }
}
