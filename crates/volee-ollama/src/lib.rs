//! Ollama `/api/chat` client for volee's own agent.
//!
//! - [`OllamaClient::chat`]: one model turn, streamed as NDJSON ([`ChatStream`] folds the lines:
//!   content and thinking deltas, tool calls whole, an `{"error"}` line at any point, the `done`
//!   line with the counts). Every request says `truncate: false`, `shift: false` and an explicit
//!   `options.num_ctx`, so an overlong prompt is an error ([`OllamaError::PromptTooLong`]) and
//!   volee's own compaction stays the only thing that shortens a conversation.
//! - [`Usage`]: the larger of Ollama's `prompt_eval_count`/`eval_count` and a local estimate.
//! - [`OllamaClient::show`] / [`OllamaClient::ensure_ready`]: capabilities (`tools`) and the
//!   trained context length from `/api/show`; [`OllamaClient::list_models`]: `/api/tags`;
//!   [`OllamaClient::version`]: `/api/version`.
//! - Transient failures (not running, busy, broken connection, silence) are retried with
//!   exponential backoff ([`RetryPolicy`]) as long as nothing of the answer was delivered; retries
//!   are counted per answer ([`ChatResponse::retries`]) and per client.
//! - Errors say what to do ([`OllamaError::hint`]): `ollama serve`, `ollama pull gemma4`, a model
//!   with tool support, a shorter prompt.
//! - Credentials: `OLLAMA_API_KEY`, when set, is sent as a bearer token; it is read from the
//!   environment for every request and never stored.
//! - The server: `OLLAMA_HOST` read as Ollama reads it ([`parse_ollama_host`]), else
//!   `http://127.0.0.1:11434`; the model defaults to [`DEFAULT_MODEL`] (`gemma4`). Plain HTTP only.

mod client;
mod error;
mod host;
mod stream;
mod usage;
mod wire;

pub use client::{
    ChatResponse, OllamaClient, OllamaConfig, RetryPolicy, API_KEY_ENV, DEFAULT_MODEL,
    DEFAULT_NUM_CTX,
};
pub use error::{classify, OllamaError};
pub use host::{base_url_from_env, parse_ollama_host, DEFAULT_BASE_URL};
pub use stream::{looks_like_raw_tool_call, parse_whole, ChatStream, DoneInfo, StreamEvent};
pub use usage::{estimate_answer, estimate_message, estimate_prompt, estimate_text, Usage};
pub use wire::{
    ChatChunk, ChatOptions, ChatRequest, ChunkMessage, Message, ModelInfo, Role, Tool, ToolCall,
    ToolCallFunction, ToolSpec,
};
