//! Ollama's native API shapes (`api/types.go`): what `/api/chat` takes and streams, what
//! `/api/show` answers. Only the fields volee uses; unknown fields are ignored on the way in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of the conversation, in Ollama's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a `tool` message: the tool that produced it (Ollama's documented field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// On a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    fn plain(role: Role, content: &str) -> Message {
        Message {
            role,
            content: content.into(),
            thinking: None,
            tool_calls: Vec::new(),
            tool_name: None,
            tool_call_id: None,
        }
    }
    pub fn system(content: &str) -> Message {
        Message::plain(Role::System, content)
    }
    pub fn user(content: &str) -> Message {
        Message::plain(Role::User, content)
    }
    pub fn assistant(content: &str) -> Message {
        Message::plain(Role::Assistant, content)
    }
    /// The result of `call`, to send back in the next request.
    pub fn tool_result(call: &ToolCall, content: &str) -> Message {
        Message {
            tool_name: Some(call.function.name.clone()),
            tool_call_id: call.id.clone(),
            ..Message::plain(Role::Tool, content)
        }
    }
}

/// A tool call as Ollama sends it: whole, with the arguments already a JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `call_` + 8 characters on current servers; older servers send none (the client then makes
    /// one up, so every call can be answered by id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub function: ToolCallFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFunction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

/// A tool offered to the model (`{"type":"function","function":{…}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ToolSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON schema (keep it flat: Gemma's tool parser is fragile with nesting).
    pub parameters: Value,
}

impl Tool {
    pub fn function(name: &str, description: &str, parameters: Value) -> Tool {
        Tool {
            kind: "function".into(),
            function: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
            },
        }
    }
}

/// `options` of a chat request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatOptions {
    /// Always sent: the window volee's compaction counts against.
    pub num_ctx: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The longest answer, in tokens (compaction summaries are capped so a rambling model cannot
    /// fill the window); unset: Ollama's default, no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<u32>,
}

/// The body of `POST /api/chat`.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    #[serde(skip_serializing_if = "<[Tool]>::is_empty")]
    pub tools: &'a [Tool],
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think: Option<bool>,
    pub options: ChatOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<&'a str>,
    /// Off: an overlong prompt is an error, not silently cut (both default to true in Ollama).
    pub truncate: bool,
    /// Off: no context shift mid-generation.
    pub shift: bool,
}

/// One line of the `/api/chat` stream (or the whole non-streamed answer).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChatChunk {
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub message: Option<ChunkMessage>,
    #[serde(default)]
    pub done: bool,
    #[serde(default)]
    pub done_reason: Option<String>,
    #[serde(default)]
    pub prompt_eval_count: Option<u64>,
    #[serde(default)]
    pub eval_count: Option<u64>,
    /// Nanoseconds.
    #[serde(default)]
    pub total_duration: Option<u64>,
    #[serde(default)]
    pub load_duration: Option<u64>,
    /// An error after the stream started (status 200 already sent).
    #[serde(default)]
    pub error: Option<String>,
}

/// The message part of a chunk: deltas of content and thinking, whole tool calls.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChunkMessage {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub thinking: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// What `/api/show` says about a model (the parts volee uses).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelInfo {
    /// The name asked for.
    pub model: String,
    /// e.g. `completion`, `tools`, `thinking`, `vision`.
    pub capabilities: Vec<String>,
    /// `model_info["<arch>.context_length"]`: the trained maximum.
    pub context_length: Option<u64>,
    pub family: Option<String>,
    pub parameter_size: Option<String>,
}

impl ModelInfo {
    pub fn supports_tools(&self) -> bool {
        self.capabilities.iter().any(|c| c == "tools")
    }
    pub fn supports_thinking(&self) -> bool {
        self.capabilities.iter().any(|c| c == "thinking")
    }
    /// `requested` capped at the trained maximum (when known).
    pub fn fit_num_ctx(&self, requested: u32) -> u32 {
        match self.context_length {
            Some(max) if u64::from(requested) > max => u32::try_from(max).unwrap_or(u32::MAX),
            _ => requested,
        }
    }

    /// From the JSON of `/api/show`.
    pub fn from_show(model: &str, v: &Value) -> ModelInfo {
        let capabilities = v
            .get("capabilities")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let info = v.get("model_info").and_then(Value::as_object);
        let arch = info
            .and_then(|i| i.get("general.architecture"))
            .and_then(Value::as_str);
        let context_length = info.and_then(|i| {
            // `<arch>.context_length`; any `*.context_length` when the architecture is not named.
            arch.and_then(|a| i.get(&format!("{a}.context_length")))
                .or_else(|| {
                    i.iter()
                        .find(|(k, _)| k.ends_with(".context_length"))
                        .map(|(_, v)| v)
                })
                .and_then(Value::as_u64)
        });
        let details = v.get("details");
        let text = |k: &str| {
            details
                .and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        ModelInfo {
            model: model.into(),
            capabilities,
            context_length,
            family: text("family"),
            parameter_size: text("parameter_size"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_says_truncate_and_shift_off_and_num_ctx() {
        let msgs = [Message::user("hi")];
        let tools = [Tool::function("shell", "run", json!({"type": "object"}))];
        let req = ChatRequest {
            model: "gemma4",
            messages: &msgs,
            tools: &tools,
            stream: true,
            think: None,
            options: ChatOptions {
                num_ctx: 8192,
                temperature: None,
                seed: None,
                num_predict: None,
            },
            keep_alive: Some("10m"),
            truncate: false,
            shift: false,
        };
        let v = serde_json::to_value(&req).unwrap();
        assert_eq!(v["truncate"], json!(false));
        assert_eq!(v["shift"], json!(false));
        assert_eq!(v["options"], json!({"num_ctx": 8192}));
        assert_eq!(v["messages"], json!([{"role": "user", "content": "hi"}]));
        assert_eq!(v["tools"][0]["type"], "function");
        assert!(v.get("think").is_none());
    }

    #[test]
    fn tool_call_chunk_parses_with_and_without_id() {
        let line = r#"{"model":"gemma4","created_at":"x","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_k3x9q2ab","function":{"index":0,"name":"shell","arguments":{"cmd":"ls src"}}},{"function":{"name":"read","arguments":{"path":"a"}}}]},"done":false}"#;
        let c: ChatChunk = serde_json::from_str(line).unwrap();
        let calls = c.message.unwrap().tool_calls;
        assert_eq!(calls[0].id.as_deref(), Some("call_k3x9q2ab"));
        assert_eq!(calls[0].function.arguments, json!({"cmd": "ls src"}));
        assert_eq!(calls[1].id, None);
        assert_eq!(calls[1].function.index, None);
    }

    #[test]
    fn tool_result_message_names_call_and_tool() {
        let call = ToolCall {
            id: Some("call_1".into()),
            function: ToolCallFunction {
                index: Some(0),
                name: "shell".into(),
                arguments: json!({}),
            },
        };
        let v = serde_json::to_value(Message::tool_result(&call, "ok")).unwrap();
        assert_eq!(
            v,
            json!({"role": "tool", "content": "ok", "tool_name": "shell", "tool_call_id": "call_1"})
        );
    }

    #[test]
    fn show_gives_capabilities_and_context_length() {
        let v = json!({
            "capabilities": ["completion", "tools"],
            "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 131072},
            "details": {"family": "gemma3", "parameter_size": "4.3B"}
        });
        let m = ModelInfo::from_show("gemma3", &v);
        assert!(m.supports_tools());
        assert!(!m.supports_thinking());
        assert_eq!(m.context_length, Some(131_072));
        assert_eq!(m.fit_num_ctx(200_000), 131_072);
        assert_eq!(m.fit_num_ctx(8192), 8192);
        assert_eq!(m.parameter_size.as_deref(), Some("4.3B"));
    }
}
