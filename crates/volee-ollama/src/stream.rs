//! The `/api/chat` stream as a pure fold: bytes in (any split), events and a final answer out.
//! Lines are NDJSON; content and thinking are deltas, tool calls arrive whole, the last line has
//! `done: true` with the counts, and an `{"error": …}` line can come at any point.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::error::{classify, OllamaError};
use crate::wire::{ChatChunk, Message, Role, ToolCall};

/// Something the model produced, as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    Content(String),
    /// A piece of the model's reasoning.
    Thinking(String),
    /// A whole tool call (its id filled in when Ollama sent none).
    ToolCall(ToolCall),
}

/// What the final `done` line said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DoneInfo {
    /// `stop`, `length`, … (never `tool_calls`: look at the calls instead).
    pub done_reason: Option<String>,
    pub prompt_eval_count: Option<u64>,
    pub eval_count: Option<u64>,
    pub total_duration_ns: Option<u64>,
    pub load_duration_ns: Option<u64>,
}

/// Folds the stream; feed it bytes with [`ChatStream::push`], then take [`ChatStream::finish`].
#[derive(Debug)]
pub struct ChatStream {
    model: String,
    url: String,
    num_ctx: u32,
    pending: Vec<u8>,
    content: String,
    thinking: String,
    tool_calls: Vec<ToolCall>,
    done: Option<DoneInfo>,
}

/// Longest line accepted (a runaway answer without newlines is a protocol error, not an OOM).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// Ids made up for tool calls that came without one, unique within this process.
static SYNTH_IDS: AtomicU64 = AtomicU64::new(0);

fn synthesize_id() -> String {
    let n = SYNTH_IDS.fetch_add(1, Ordering::Relaxed);
    let t = volee_os::clock::now_ms();
    format!("call_v{:x}{n:x}", t & 0xffff_ffff)
}

impl ChatStream {
    /// `model`, `url` and `num_ctx` only shape error messages.
    pub fn new(model: &str, url: &str, num_ctx: u32) -> ChatStream {
        ChatStream {
            model: model.into(),
            url: url.into(),
            num_ctx,
            pending: Vec::new(),
            content: String::new(),
            thinking: String::new(),
            tool_calls: Vec::new(),
            done: None,
        }
    }

    /// Feed bytes as they come; returns the events of the lines completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, OllamaError> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let rest = self.pending.split_off(nl + 1);
            let line = std::mem::replace(&mut self.pending, rest);
            self.line(&line, &mut events)?;
        }
        if self.pending.len() > MAX_LINE {
            return Err(OllamaError::Protocol {
                what: format!("a line longer than {MAX_LINE} bytes"),
            });
        }
        Ok(events)
    }

    /// Seen the `done` line?
    pub fn is_done(&self) -> bool {
        self.done.is_some()
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<StreamEvent>) -> Result<(), OllamaError> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let chunk: ChatChunk = serde_json::from_str(text).map_err(|e| OllamaError::Protocol {
            what: format!("not an Ollama chat line ({e}): {}", cut(text, 200)),
        })?;
        if let Some(message) = chunk.error {
            return Err(classify(
                None,
                &message,
                &self.model,
                &self.url,
                self.num_ctx,
            ));
        }
        if let Some(m) = chunk.message {
            if let Some(t) = m.thinking.filter(|t| !t.is_empty()) {
                self.thinking.push_str(&t);
                events.push(StreamEvent::Thinking(t));
            }
            if !m.content.is_empty() {
                self.content.push_str(&m.content);
                events.push(StreamEvent::Content(m.content));
            }
            for mut call in m.tool_calls {
                if call.id.as_deref().is_none_or(str::is_empty) {
                    call.id = Some(synthesize_id());
                }
                self.tool_calls.push(call.clone());
                events.push(StreamEvent::ToolCall(call));
            }
        }
        if chunk.done {
            self.done = Some(DoneInfo {
                done_reason: chunk.done_reason,
                prompt_eval_count: chunk.prompt_eval_count,
                eval_count: chunk.eval_count,
                total_duration_ns: chunk.total_duration,
                load_duration_ns: chunk.load_duration,
            });
        }
        Ok(())
    }

    /// The end of the body: the assistant message and the `done` line's facts. A stream that
    /// ended without `done` is an error (Ollama went away mid-answer).
    pub fn finish(mut self) -> Result<(Message, DoneInfo), OllamaError> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            let mut events = Vec::new();
            self.line(&rest, &mut events)?;
        }
        let Some(done) = self.done else {
            return Err(OllamaError::Protocol {
                what: "the answer ended before its `done` line".into(),
            });
        };
        let message = Message {
            role: Role::Assistant,
            content: self.content,
            thinking: (!self.thinking.is_empty()).then_some(self.thinking),
            tool_calls: self.tool_calls,
            tool_name: None,
            tool_call_id: None,
        };
        Ok((message, done))
    }
}

fn cut(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Gemma sometimes writes its native tool-call syntax as text instead of a parsed call (ollama
/// #15539, #18275): true when `content` looks like that, so the caller can say so.
pub fn looks_like_raw_tool_call(content: &str) -> bool {
    content.contains("<|tool_call>")
        || content.contains("<tool_call|>")
        || content.contains("<tool_call>")
        || content.trim_start().starts_with("call:")
}

/// Parse a non-streamed answer (one JSON object) the same way.
pub fn parse_whole(
    body: &[u8],
    model: &str,
    url: &str,
    num_ctx: u32,
) -> Result<(Message, DoneInfo), OllamaError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| OllamaError::Protocol {
        what: format!("not JSON: {e}"),
    })?;
    let mut s = ChatStream::new(model, url, num_ctx);
    s.push(v.to_string().as_bytes())?;
    s.push(b"\n")?;
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const STREAM: &str = concat!(
        r#"{"model":"gemma4","created_at":"t","message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}"#,
        "\n",
        r#"{"model":"gemma4","created_at":"t","message":{"role":"assistant","content":"I'll list "},"done":false}"#,
        "\n",
        r#"{"model":"gemma4","created_at":"t","message":{"role":"assistant","content":"them."},"done":false}"#,
        "\n",
        r#"{"model":"gemma4","created_at":"t","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_k3x9q2ab","function":{"index":0,"name":"shell","arguments":{"cmd":"ls src"}}}]},"done":false}"#,
        "\n",
        r#"{"model":"gemma4","created_at":"t","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":182242375,"load_duration":41295167,"prompt_eval_count":169,"prompt_eval_duration":24573166,"eval_count":15,"eval_duration":115959084}"#,
        "\n"
    );

    #[test]
    fn folds_a_stream_split_anywhere() {
        for split in [1usize, 7, 64, STREAM.len()] {
            let mut s = ChatStream::new("gemma4", "u", 8192);
            let mut events = Vec::new();
            for piece in STREAM.as_bytes().chunks(split) {
                events.extend(s.push(piece).unwrap());
            }
            assert!(s.is_done());
            let (msg, done) = s.finish().unwrap();
            assert_eq!(msg.content, "I'll list them.");
            assert_eq!(msg.thinking.as_deref(), Some("hmm"));
            assert_eq!(msg.tool_calls.len(), 1);
            assert_eq!(
                msg.tool_calls[0].function.arguments,
                json!({"cmd": "ls src"})
            );
            assert_eq!(done.done_reason.as_deref(), Some("stop"));
            assert_eq!(done.prompt_eval_count, Some(169));
            assert_eq!(done.eval_count, Some(15));
            assert_eq!(
                events,
                vec![
                    StreamEvent::Thinking("hmm".into()),
                    StreamEvent::Content("I'll list ".into()),
                    StreamEvent::Content("them.".into()),
                    StreamEvent::ToolCall(msg.tool_calls[0].clone()),
                ]
            );
        }
    }

    #[test]
    fn error_line_mid_stream_is_an_error() {
        let mut s = ChatStream::new("gemma4", "u", 8192);
        s.push(b"{\"message\":{\"role\":\"assistant\",\"content\":\"par\"},\"done\":false}\n")
            .unwrap();
        let e = s
            .push(b"{\"error\":\"model runner has unexpectedly stopped\"}\n")
            .unwrap_err();
        assert!(matches!(e, OllamaError::InStream { ref message } if message.contains("runner")));
    }

    #[test]
    fn missing_done_and_garbage_are_protocol_errors() {
        let mut s = ChatStream::new("gemma4", "u", 1);
        s.push(b"{\"message\":{\"role\":\"assistant\",\"content\":\"a\"},\"done\":false}\n")
            .unwrap();
        assert!(matches!(s.finish(), Err(OllamaError::Protocol { .. })));
        let mut s = ChatStream::new("gemma4", "u", 1);
        assert!(matches!(
            s.push(b"<html>\n"),
            Err(OllamaError::Protocol { .. })
        ));
    }

    #[test]
    fn tool_calls_without_id_get_distinct_ids() {
        let mut s = ChatStream::new("gemma4", "u", 1);
        s.push(br#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"a","arguments":{}}},{"function":{"name":"b","arguments":{}}}]},"done":false}
{"done":true,"done_reason":"stop"}
"#)
        .unwrap();
        let (msg, done) = s.finish().unwrap();
        let a = msg.tool_calls[0].id.clone().unwrap();
        let b = msg.tool_calls[1].id.clone().unwrap();
        assert!(a.starts_with("call_v") && a != b);
        assert_eq!(done.prompt_eval_count, None);
    }

    #[test]
    fn raw_tool_call_text_is_recognised() {
        assert!(looks_like_raw_tool_call(
            "<|tool_call>call:shell{cmd:ls}<tool_call|>"
        ));
        assert!(looks_like_raw_tool_call("call:shell{cmd:<|\"|>ls<|\"|>}"));
        assert!(!looks_like_raw_tool_call("I will call the shell."));
    }
}
