//! What can go wrong talking to Ollama, each with what to do about it ([`OllamaError::hint`]).

use std::time::Duration;

/// An error of the Ollama client. [`OllamaError::hint`] says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum OllamaError {
    /// Nothing listens at the URL (connection refused, unknown host…).
    #[error("cannot reach Ollama at {url}")]
    NotRunning {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// `404 model '…' not found`.
    #[error("model {model:?} is not installed in Ollama at {url}")]
    ModelMissing { model: String, url: String },
    /// `400 … does not support tools`, or `/api/show` lists no `tools` capability.
    #[error("model {model:?} does not support tool calling")]
    NoToolSupport { model: String },
    /// `400 … does not support thinking`.
    #[error("model {model:?} does not support thinking")]
    NoThinkingSupport { model: String },
    /// The prompt does not fit `num_ctx` (with `truncate`/`shift` off Ollama says so instead of
    /// dropping messages).
    #[error("the prompt is longer than the context window of model {model:?} (num_ctx {num_ctx}): {message}")]
    PromptTooLong {
        model: String,
        num_ctx: u32,
        message: String,
    },
    /// Any other HTTP error status, with Ollama's `{"error": …}` text.
    #[error("Ollama answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    /// An error line after the stream had started (status 200 already sent).
    #[error("Ollama reported an error mid-answer: {message}")]
    InStream { message: String },
    /// No byte for this long (first byte or between lines).
    #[error("Ollama sent nothing for {} s", .after.as_secs_f32())]
    Stalled { after: Duration },
    /// The connection broke mid-request or mid-stream.
    #[error("the connection to Ollama at {url} broke")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// A line that is not Ollama's JSON, or a stream that ended without `done`.
    #[error("unexpected answer from Ollama: {what}")]
    Protocol { what: String },
    /// The base URL cannot be used.
    #[error("invalid Ollama URL {url:?}: {why}")]
    BadUrl { url: String, why: String },
    /// The client could not be set up.
    #[error("cannot set up the HTTP client")]
    Client {
        #[source]
        source: reqwest::Error,
    },
    /// Transient failures kept happening; `last` is the final one.
    #[error("gave up after {attempts} attempts")]
    GaveUp {
        attempts: u32,
        #[source]
        last: Box<OllamaError>,
    },
}

impl OllamaError {
    /// The error itself, looking through [`OllamaError::GaveUp`].
    pub fn root(&self) -> &OllamaError {
        match self {
            OllamaError::GaveUp { last, .. } => last.root(),
            other => other,
        }
    }

    /// What to do next, for a `hint:` line.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            OllamaError::GaveUp { last, .. } => return last.hint(),
            OllamaError::NotRunning { url, .. } => format!(
                "start Ollama with `ollama serve` (or check OLLAMA_HOST: volee tried {url})"
            ),
            OllamaError::ModelMissing { model, .. } => {
                format!("download the model with `ollama pull {model}`")
            }
            OllamaError::NoToolSupport { model } => format!(
                "volee's agent needs a model with tool calling: `ollama show {model}` lists no `tools` capability; use e.g. `ollama pull gemma4` and `--model gemma4`"
            ),
            OllamaError::NoThinkingSupport { .. } => {
                "turn thinking off for this model, or use one whose `ollama show` lists `thinking`"
                    .into()
            }
            OllamaError::PromptTooLong { num_ctx, .. } => format!(
                "the conversation does not fit {num_ctx} tokens: compact it, or raise --max-context-tokens if the model and memory allow"
            ),
            OllamaError::Http {
                status: 429 | 503, ..
            } => {
                "Ollama is busy with other requests: try again later, or raise OLLAMA_NUM_PARALLEL / OLLAMA_MAX_QUEUE"
                    .into()
            }
            OllamaError::Http { status, .. } if *status >= 500 => {
                "Ollama failed internally: see its log (`journalctl -u ollama`, or the terminal running `ollama serve`)"
                    .into()
            }
            OllamaError::Http { .. } => return None,
            OllamaError::InStream { .. } => {
                "see Ollama's log (`journalctl -u ollama`, or the terminal running `ollama serve`); the answer so far is incomplete"
                    .into()
            }
            OllamaError::Stalled { .. } => {
                "the model may still be loading or the machine is overloaded: check `ollama ps`, or raise the timeout"
                    .into()
            }
            OllamaError::Transport { .. } => {
                "Ollama may have crashed or restarted: check `ollama ps` and its log".into()
            }
            OllamaError::Protocol { .. } => {
                "is OLLAMA_HOST pointing at Ollama (not another server)? `curl $OLLAMA_HOST/api/tags` should list models"
                    .into()
            }
            OllamaError::BadUrl { .. } => {
                "set OLLAMA_HOST to host:port, e.g. `127.0.0.1:11434`".into()
            }
            OllamaError::Client { .. } => return None,
        })
    }

    /// Worth trying again (with backoff): Ollama restarting, busy, or a connection that broke
    /// before any answer.
    pub fn is_transient(&self) -> bool {
        match self {
            OllamaError::NotRunning { .. }
            | OllamaError::Stalled { .. }
            | OllamaError::Transport { .. } => true,
            OllamaError::Http { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
            _ => false,
        }
    }
}

/// Turn Ollama's `{"error": message}` (with the HTTP status, or `None` in-stream) into an error.
pub fn classify(
    status: Option<u16>,
    message: &str,
    model: &str,
    url: &str,
    num_ctx: u32,
) -> OllamaError {
    let lower = message.to_ascii_lowercase();
    if lower.contains("does not support tools") {
        return OllamaError::NoToolSupport {
            model: model.into(),
        };
    }
    if lower.contains("does not support thinking") {
        return OllamaError::NoThinkingSupport {
            model: model.into(),
        };
    }
    if lower.contains("prompt is longer than the context")
        || lower.contains("exceeds the context")
        || lower.contains("input length exceeds")
    {
        return OllamaError::PromptTooLong {
            model: model.into(),
            num_ctx,
            message: message.into(),
        };
    }
    if lower.contains("not found") && (status == Some(404) || lower.contains("model")) {
        return OllamaError::ModelMissing {
            model: model.into(),
            url: url.into(),
        };
    }
    match status {
        Some(status) => OllamaError::Http {
            status,
            message: message.into(),
        },
        None => OllamaError::InStream {
            message: message.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_ollama_error_texts() {
        let c = |s, m: &str| classify(s, m, "gemma4", "http://x", 4096);
        assert!(matches!(
            c(Some(404), "model 'gemma4' not found"),
            OllamaError::ModelMissing { .. }
        ));
        assert!(matches!(
            c(
                Some(404),
                r#"model "gemma4" not found, try pulling it first"#
            ),
            OllamaError::ModelMissing { .. }
        ));
        assert!(matches!(
            c(
                Some(400),
                "registry.ollama.ai/library/gemma3:4b does not support tools"
            ),
            OllamaError::NoToolSupport { .. }
        ));
        assert!(matches!(
            c(
                Some(400),
                "the prompt is longer than the context length currently available to the model"
            ),
            OllamaError::PromptTooLong { num_ctx: 4096, .. }
        ));
        assert!(matches!(
            c(None, "model runner has unexpectedly stopped"),
            OllamaError::InStream { .. }
        ));
        let busy = c(Some(503), "server busy, please try again.");
        assert!(busy.is_transient());
        assert!(busy.hint().unwrap().contains("busy"));
        assert!(!c(Some(400), "bad").is_transient());
    }

    #[test]
    fn hints_say_what_to_do() {
        let e = classify(Some(404), "model 'gemma4' not found", "gemma4", "u", 1);
        assert_eq!(
            e.hint().unwrap(),
            "download the model with `ollama pull gemma4`"
        );
        let wrapped = OllamaError::GaveUp {
            attempts: 3,
            last: Box::new(e),
        };
        assert!(wrapped.hint().unwrap().contains("ollama pull gemma4"));
        assert!(matches!(wrapped.root(), OllamaError::ModelMissing { .. }));
    }
}
