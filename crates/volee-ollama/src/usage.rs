//! Token usage of one answer: Ollama's counts, checked against a local estimate.
//!
//! `prompt_eval_count` has reported only the newly evaluated tokens when the KV cache was reused,
//! or been missing (ollama#2068, #3427, #16414), and both counts are `omitempty`. Context
//! accounting must not under-count, so each figure is the larger of Ollama's count and an
//! estimate of one token per 4 bytes of text (a deliberate over-estimate for code and English).

use crate::wire::{Message, Tool};

/// Tokens of one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// What the prompt takes: `max(prompt_eval_count, estimate)`.
    pub prompt_tokens: u64,
    /// What the answer took: `max(eval_count, estimate)`.
    pub completion_tokens: u64,
    /// Ollama's `prompt_eval_count` (None when absent).
    pub reported_prompt_tokens: Option<u64>,
    /// Ollama's `eval_count` (None when absent).
    pub reported_completion_tokens: Option<u64>,
    pub estimated_prompt_tokens: u64,
    pub estimated_completion_tokens: u64,
}

impl Usage {
    /// The max rule.
    pub fn new(
        reported_prompt: Option<u64>,
        reported_completion: Option<u64>,
        estimated_prompt: u64,
        estimated_completion: u64,
    ) -> Usage {
        Usage {
            prompt_tokens: reported_prompt.unwrap_or(0).max(estimated_prompt),
            completion_tokens: reported_completion.unwrap_or(0).max(estimated_completion),
            reported_prompt_tokens: reported_prompt,
            reported_completion_tokens: reported_completion,
            estimated_prompt_tokens: estimated_prompt,
            estimated_completion_tokens: estimated_completion,
        }
    }

    /// Prompt and answer: what the conversation occupies of the window after this answer.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Tokens of `bytes` bytes of text: one per 4, rounded up.
pub fn estimate_text(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Per-message overhead of the chat template (role markers, separators).
const PER_MESSAGE: u64 = 4;

/// Estimated tokens of one message: its text, thinking, tool calls and overhead.
pub fn estimate_message(m: &Message) -> u64 {
    let mut bytes = m.content.len() + m.thinking.as_ref().map_or(0, String::len);
    for c in &m.tool_calls {
        bytes += c.function.name.len() + c.function.arguments.to_string().len();
    }
    PER_MESSAGE + estimate_text(bytes)
}

/// Estimated tokens the model generated for `m` (its text, thinking and tool calls, no overhead).
pub fn estimate_answer(m: &Message) -> u64 {
    estimate_message(m) - PER_MESSAGE
}

/// Estimated tokens of a request's prompt: every message plus the tool definitions (rendered into
/// the prompt by the template).
pub fn estimate_prompt(messages: &[Message], tools: &[Tool]) -> u64 {
    let msgs: u64 = messages.iter().map(estimate_message).sum();
    let tools: u64 = tools
        .iter()
        .map(|t| estimate_text(serde_json::to_string(t).map_or(0, |s| s.len())))
        .sum();
    msgs + tools
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_larger_of_reported_and_estimated() {
        let u = Usage::new(Some(10), Some(50), 100, 20);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (100, 50));
        let u = Usage::new(None, None, 7, 3);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (7, 3));
        assert_eq!(u.total(), 10);
        let u = Usage::new(Some(1000), Some(2), 100, 20);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (1000, 20));
    }

    #[test]
    fn estimates_one_token_per_four_bytes() {
        assert_eq!(estimate_text(0), 0);
        assert_eq!(estimate_text(1), 1);
        assert_eq!(estimate_text(8), 2);
        assert_eq!(
            estimate_message(&Message::user("12345678")),
            2 + PER_MESSAGE
        );
        assert_eq!(
            estimate_prompt(&[Message::user("1234"), Message::assistant("")], &[]),
            1 + 2 * PER_MESSAGE
        );
    }
}
