//! What each harness's hook events mean, as data (measured on the versions in
//! `docs/harnesses/`). `volee hook HARNESS EVENT` reports the raw event; the daemon asks
//! [`hook_meaning`] which state, if any, it implies.

use volee_protocol::AgentState;

/// What one hook event says about the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookMeaning {
    /// The agent is in this state from now on.
    State(AgentState),
    /// Evidence only (identity, session end): the exit status decides `done`/`failed`.
    Evidence,
}

/// One row: an event name, optionally narrowed by a payload field's value.
struct HookRule {
    event: &'static str,
    /// `(field, value)`: the rule applies only when the payload's field has this value.
    when: Option<(&'static str, &'static str)>,
    meaning: HookMeaning,
}

const fn rule(event: &'static str, meaning: HookMeaning) -> HookRule {
    HookRule {
        event,
        when: None,
        meaning,
    }
}

const fn rule_when(
    event: &'static str,
    field: &'static str,
    value: &'static str,
    meaning: HookMeaning,
) -> HookRule {
    HookRule {
        event,
        when: Some((field, value)),
        meaning,
    }
}

use AgentState::{Failed, Idle, NeedsYou, Working};
use HookMeaning::{Evidence, State};

/// Claude Code 2.1.197–2.1.332 (`../shared/reference/probe/harness1-hooklogs/claude.jsonl`).
/// Specific `Notification` rows come before the catch-all; the first matching row wins.
const CLAUDE: &[HookRule] = &[
    rule("UserPromptSubmit", State(Working)),
    rule("PreToolUse", State(Working)),
    rule("PostToolUse", State(Working)),
    rule("PostToolUseFailure", State(Working)),
    rule("PostToolBatch", State(Working)),
    rule("SubagentStart", State(Working)),
    rule("PermissionRequest", State(NeedsYou)),
    rule("Elicitation", State(NeedsYou)),
    rule_when(
        "Notification",
        "notification_type",
        "permission_prompt",
        State(NeedsYou),
    ),
    rule_when(
        "Notification",
        "notification_type",
        "elicitation_dialog",
        State(NeedsYou),
    ),
    rule_when(
        "Notification",
        "notification_type",
        "idle_prompt",
        State(Idle),
    ),
    rule("Stop", State(Idle)),
    rule("StopFailure", State(Failed)),
    rule("SessionStart", Evidence),
    rule("SessionEnd", Evidence),
];

/// Codex CLI 0.171.0: no failure hook (the screen covers failed turns).
const CODEX: &[HookRule] = &[
    rule("UserPromptSubmit", State(Working)),
    rule("PreToolUse", State(Working)),
    rule("PostToolUse", State(Working)),
    rule("PermissionRequest", State(NeedsYou)),
    rule("Stop", State(Idle)),
    rule("SessionStart", Evidence),
];

/// Gemini CLI 0.61.0.
const GEMINI: &[HookRule] = &[
    rule("BeforeAgent", State(Working)),
    rule("BeforeModel", State(Working)),
    rule("AfterModel", State(Working)),
    rule("BeforeToolSelection", State(Working)),
    rule("BeforeTool", State(Working)),
    rule("AfterTool", State(Working)),
    rule_when(
        "Notification",
        "notification_type",
        "ToolPermission",
        State(NeedsYou),
    ),
    rule("AfterAgent", State(Idle)),
    rule("SessionStart", Evidence),
    rule("SessionEnd", Evidence),
];

/// Qwen Code 0.24.4 (Claude-style events).
const QWEN: &[HookRule] = &[
    rule("UserPromptSubmit", State(Working)),
    rule("PreToolUse", State(Working)),
    rule("PostToolUse", State(Working)),
    rule("PermissionRequest", State(NeedsYou)),
    rule_when(
        "Notification",
        "notification_type",
        "permission_prompt",
        State(NeedsYou),
    ),
    rule_when(
        "Notification",
        "notification_type",
        "idle_prompt",
        State(Idle),
    ),
    rule("Stop", State(Idle)),
    rule("StopFailure", State(Failed)),
    rule("SessionStart", Evidence),
    rule("SessionEnd", Evidence),
];

/// Grok Build 1.0.41. `Stop` with `reason: "shutdown"` also fires at exit: evidence only, so the
/// agent does not flicker to idle before its exit status arrives.
const GROK: &[HookRule] = &[
    rule("UserPromptSubmit", State(Working)),
    rule("PreToolUse", State(Working)),
    rule("PostToolUse", State(Working)),
    rule("PostToolUseFailure", State(Working)),
    rule("SubagentStart", State(Working)),
    rule_when(
        "Notification",
        "notification_type",
        "permission_prompt",
        State(NeedsYou),
    ),
    rule_when(
        "Notification",
        "notification_type",
        "idle_prompt",
        State(Idle),
    ),
    // Fired at exit after SessionEnd: not a turn's end; the exit status decides.
    rule_when("Stop", "reason", "shutdown", Evidence),
    rule("Stop", State(Idle)),
    rule("StopCancelled", State(Idle)),
    rule("StopFailure", State(Failed)),
    rule("SessionStart", Evidence),
    rule("SessionEnd", Evidence),
];

fn table(harness: &str) -> Option<&'static [HookRule]> {
    Some(match harness {
        "claude" => CLAUDE,
        "codex" => CODEX,
        "gemini" => GEMINI,
        "qwen" => QWEN,
        "grok" => GROK,
        _ => return None,
    })
}

/// The events volee registers for a harness (every row's event, once).
pub fn hook_events(harness: &str) -> Vec<&'static str> {
    let mut events: Vec<&'static str> = Vec::new();
    for r in table(harness).unwrap_or(&[]) {
        if !events.contains(&r.event) {
            events.push(r.event);
        }
    }
    events
}

/// What `event` of `harness` means given its JSON payload; None for an event volee does not know.
pub fn hook_meaning(
    harness: &str,
    event: &str,
    payload: &serde_json::Value,
) -> Option<HookMeaning> {
    table(harness)?
        .iter()
        .find(|r| {
            r.event == event
                && r.when.is_none_or(|(field, value)| {
                    payload.get(field).and_then(|v| v.as_str()) == Some(value)
                        || payload.get(camel(field).as_str()).and_then(|v| v.as_str())
                            == Some(value)
                })
        })
        .map(|r| r.meaning)
}

/// `notification_type` → `notificationType` (Grok sends camelCase fields too).
fn camel(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The harness's session id in a hook payload (`session_id`, or Grok's `sessionId`).
pub fn session_id(payload: &serde_json::Value) -> Option<&str> {
    payload
        .get("session_id")
        .or_else(|| payload.get("sessionId"))
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty() && s.len() <= 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_turn_maps_to_states() {
        let m = |e, p| hook_meaning("claude", e, &p);
        assert_eq!(m("UserPromptSubmit", json!({})), Some(State(Working)));
        assert_eq!(m("PermissionRequest", json!({})), Some(State(NeedsYou)));
        assert_eq!(
            m(
                "Notification",
                json!({"notification_type": "permission_prompt"})
            ),
            Some(State(NeedsYou))
        );
        assert_eq!(
            m("Notification", json!({"notification_type": "idle_prompt"})),
            Some(State(Idle))
        );
        assert_eq!(
            m("Notification", json!({"notification_type": "auth_success"})),
            None
        );
        assert_eq!(m("Stop", json!({})), Some(State(Idle)));
        assert_eq!(
            m("StopFailure", json!({"error": "server_error"})),
            Some(State(Failed))
        );
        assert_eq!(m("SessionEnd", json!({})), Some(Evidence));
        assert_eq!(m("WorktreeCreate", json!({})), None);
    }

    #[test]
    fn grok_camel_case_payloads_match() {
        assert_eq!(
            hook_meaning(
                "grok",
                "Notification",
                &json!({"notificationType": "permission_prompt"})
            ),
            Some(State(NeedsYou))
        );
        assert_eq!(session_id(&json!({"sessionId": "abc"})), Some("abc"));
    }

    #[test]
    fn grok_shutdown_stop_is_evidence_only() {
        assert_eq!(
            hook_meaning("grok", "Stop", &json!({"reason": "shutdown"})),
            Some(Evidence)
        );
        assert_eq!(
            hook_meaning("grok", "Stop", &json!({"reason": "end_turn"})),
            Some(State(Idle))
        );
    }

    #[test]
    fn unknown_harness_or_event_means_nothing() {
        assert_eq!(hook_meaning("generic", "Stop", &json!({})), None);
        assert!(hook_events("nosuch").is_empty());
        assert!(hook_events("claude").contains(&"StopFailure"));
        assert!(!hook_events("claude").contains(&"WorktreeCreate"));
    }
}
