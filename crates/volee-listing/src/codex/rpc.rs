//! The app-server's JSON-RPC, as volee speaks it: messages without a `"jsonrpc"` field, one per
//! WebSocket text message. Pure: what volee sends, and what a message from the server is to a
//! caller waiting for the answer to its request `id` (fuzzed: `fuzz/fuzz_targets/listing_json.rs`).

use serde_json::{json, Value};

/// A request (`{"id", "method", "params"}`).
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({ "id": id, "method": method, "params": params })
}

/// A notification (`{"method"}`).
pub fn notification(method: &str) -> Value {
    json!({ "method": method })
}

/// The answer to a request from the server (an approval to a client that asked for none):
/// "method not found".
pub fn refusal(id: &Value) -> Value {
    json!({"id": id, "error": {"code": -32601, "message": "volee only lists threads"}})
}

/// What one message from the server is to a caller waiting for the answer to request `id`.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer: its `result` (null when it has none).
    Answer(Value),
    /// The answer is an error.
    Failed { code: i64, message: String },
    /// A request from the server, with its id, to be refused ([`refusal`]).
    Request(Value),
    /// A notification, or an answer to another request: skipped.
    Other,
}

/// Classifies `msg` for a caller waiting on request `id`: a message with a `method` is the
/// server's (a request when it has an `id`, else a notification); one without is an answer, ours
/// when its id is `id`.
pub fn classify(msg: &Value, id: u64) -> Incoming {
    let has_method = msg.get("method").is_some();
    match msg.get("id") {
        Some(got) if !has_method && got.as_u64() == Some(id) => match msg.get("error") {
            Some(err) => Incoming::Failed {
                code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            },
            None => Incoming::Answer(msg.get("result").cloned().unwrap_or(Value::Null)),
        },
        Some(got) if has_method => Incoming::Request(got.clone()),
        _ => Incoming::Other,
    }
}

/// The strings of a JSON array (others skipped; not an array: none).
pub fn string_array(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// `text` cut to 300 bytes (at a character boundary) for logs and errors.
pub fn clip(text: &str) -> String {
    if text.len() <= 300 {
        return text.to_string();
    }
    let mut end = 300;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        let answer = json!({"id": 3, "result": {"data": []}});
        assert_eq!(classify(&answer, 3), Incoming::Answer(json!({"data": []})));
        assert_eq!(classify(&answer, 4), Incoming::Other, "another request's");
        assert_eq!(
            classify(&json!({"id": 3}), 3),
            Incoming::Answer(Value::Null)
        );
        assert_eq!(
            classify(
                &json!({"id": 3, "error": {"code": -32600, "message": "bad"}}),
                3
            ),
            Incoming::Failed {
                code: -32600,
                message: "bad".into()
            }
        );
        assert_eq!(
            classify(&json!({"id": 3, "error": "odd"}), 3),
            Incoming::Failed {
                code: 0,
                message: String::new()
            }
        );
        // The server's request, even with our id.
        let asks = json!({"id": 3, "method": "item/commandExecution/requestApproval"});
        assert_eq!(classify(&asks, 3), Incoming::Request(json!(3)));
        let named = json!({"id": "a", "method": "x"});
        assert_eq!(classify(&named, 3), Incoming::Request(json!("a")));
        let note = json!({"method": "thread/status/changed", "params": {}});
        assert_eq!(classify(&note, 3), Incoming::Other);
        assert_eq!(classify(&json!([1, 2]), 3), Incoming::Other);
        assert_eq!(
            refusal(&json!(77)),
            json!({"id": 77, "error": {"code": -32601, "message": "volee only lists threads"}})
        );
        assert!(request(1, "initialize", json!({})).get("jsonrpc").is_none());
    }

    #[test]
    fn clips_at_a_character_boundary() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(200);
        let c = clip(&long);
        assert!(c.ends_with('…'));
        assert_eq!(c.len(), 300 + '…'.len_utf8());
        assert_eq!(
            string_array(&json!(["a", 1, "b"])),
            vec!["a".to_string(), "b".to_string()]
        );
        assert!(string_array(&json!({"a": 1})).is_empty());
    }
}
