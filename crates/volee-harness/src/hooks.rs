//! What each harness's hook events mean, as data (measured on the versions in
//! `docs/harnesses/`). `volee hook HARNESS EVENT` reports the raw event; the daemon asks
//! [`hook_meaning`] which state, if any, it implies.

use volee_protocol::{AgentState, HookEvent};

/// What one hook event says about the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookMeaning {
    /// The agent is in this state from now on.
    State(AgentState),
    /// Evidence only (identity, session end): the exit status decides `done`/`failed`.
    Evidence,
}

/// One row of a profile's `[[hook]]`s: an event, optionally narrowed by a payload field's
/// value, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookRule {
    pub event: &'static str,
    /// `(field, test)`: the rule applies only when the payload's field passes the test.
    pub when: Option<(&'static str, WhenTest)>,
    pub meaning: HookMeaning,
    /// Why the state, when the row says (`reason = "permission"`).
    pub reason: Option<volee_protocol::Reason>,
    /// The event ends the session (`SessionEnd`): a process that dies after it did not die
    /// silently.
    pub ends_session: bool,
}

/// What a hook row asks of a payload field.
#[derive(Debug, Clone, Copy)]
pub enum WhenTest {
    /// This exact value.
    Equals(&'static str),
    /// A value this pattern matches (Rust `regex`).
    Matches(&'static regex::Regex),
}

impl WhenTest {
    pub fn passes(&self, value: &str) -> bool {
        match self {
            WhenTest::Equals(v) => value == *v,
            WhenTest::Matches(re) => re.is_match(value),
        }
    }
}

impl PartialEq for WhenTest {
    fn eq(&self, other: &WhenTest) -> bool {
        match (self, other) {
            (WhenTest::Equals(a), WhenTest::Equals(b)) => a == b,
            (WhenTest::Matches(a), WhenTest::Matches(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Eq for WhenTest {}

fn table(harness: &str) -> Option<&'static [HookRule]> {
    crate::profile::get(harness).map(|p| p.hooks)
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
    hook_row(harness, event, payload).map(|r| r.meaning)
}

/// The profile's first `[[hook]]` row that `event` of `harness` with its JSON payload matches.
pub fn hook_row(
    harness: &str,
    event: &str,
    payload: &serde_json::Value,
) -> Option<&'static HookRule> {
    table(harness)?.iter().find(|r| {
        r.event == event
            && r.when.is_none_or(|(field, test)| {
                [field.to_string(), camel(field)].iter().any(|f| {
                    payload
                        .get(f.as_str())
                        .and_then(|v| v.as_str())
                        .is_some_and(|v| test.passes(v))
                })
            })
    })
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

/// The harness's session id in a hook payload (`session_id`, Grok's `sessionId`, Cursor's
/// `conversation_id`).
pub fn session_id(payload: &serde_json::Value) -> Option<&str> {
    payload
        .get("session_id")
        .or_else(|| payload.get("sessionId"))
        .or_else(|| payload.get("conversation_id"))
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty() && s.len() <= 200)
}

/// Largest hook payload read (bigger ones are rejected, the harness unaffected).
pub const MAX_HOOK_BYTES: usize = 1024 * 1024;

/// Payload fields a hook event keeps (short strings only).
const HOOK_FIELDS: &[&str] = &[
    "notification_type",
    "notificationType",
    "error",
    "reason",
    "source",
    "status",
    "stop_reason",
    "stopReason",
    "tool_name",
];

/// `ev` with what the hook's payload (`input`, its stdin, at most [`MAX_HOOK_BYTES`] + 1 bytes
/// read) says: the harness's session id and the short fields the meanings read, or why the
/// payload cannot be used. Empty input is no payload.
pub fn read_hook_payload(mut ev: HookEvent, input: &[u8]) -> HookEvent {
    if input.len() > MAX_HOOK_BYTES {
        ev.error = Some(format!("payload larger than {MAX_HOOK_BYTES} bytes"));
        return ev;
    }
    if input.iter().all(u8::is_ascii_whitespace) {
        return ev;
    }
    match serde_json::from_slice::<serde_json::Value>(input) {
        Ok(payload) => {
            ev.session_id = session_id(&payload).map(String::from);
            ev.fields = HOOK_FIELDS
                .iter()
                .filter_map(|k| {
                    let v = payload.get(*k)?.as_str()?;
                    (v.len() <= 200).then(|| ((*k).to_string(), v.to_string()))
                })
                .collect();
            // And every field a `when` of the harness's profile reads (its first 500
            // characters: `last_assistant_message`).
            // Read cheaply (`volee hook` runs at every event): the one profile's rows, no rules
            // compiled.
            for k in crate::file::hook_when_fields(&ev.harness) {
                let k = k.as_str();
                if ev.fields.iter().any(|(f, _)| f == k) {
                    continue;
                }
                if let Some(v) = payload.get(k).and_then(|v| v.as_str()) {
                    ev.fields
                        .push((k.to_string(), v.chars().take(500).collect()));
                }
            }
        }
        Err(e) => ev.error = Some(format!("malformed JSON: {e}")),
    }
    ev
}

/// The events of a hook spool (one JSON event per `\n`-ended line, as `volee hook` appends
/// them), and for each line that is not one its number (from 1) and why. A bad line (not
/// UTF-8, torn by a full disk, not an event) costs only itself.
pub fn parse_hook_spool(bytes: &[u8]) -> (Vec<HookEvent>, Vec<(usize, String)>) {
    let mut events = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<HookEvent>(line) {
            Ok(ev) => events.push(ev),
            Err(e) => bad.push((i + 1, e.to_string())),
        }
    }
    (events, bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use AgentState::{Failed, Idle, NeedsYou, Working};
    use HookMeaning::{Evidence, State};

    fn base() -> HookEvent {
        HookEvent {
            agent: "a1".into(),
            token: None,
            event_id: None,
            harness: "claude".into(),
            event: "Stop".into(),
            at_ms: 5,
            session_id: None,
            fields: Vec::new(),
            error: None,
        }
    }

    #[test]
    fn payloads_give_the_session_and_short_fields_or_say_why_not() {
        let ev = read_hook_payload(
            base(),
            br#"{"session_id":"s-1","reason":"end_turn","prompt":"long","error":7}"#,
        );
        assert_eq!(ev.session_id.as_deref(), Some("s-1"));
        assert_eq!(ev.fields, [("reason".to_string(), "end_turn".to_string())]);
        assert_eq!(ev.error, None);
        assert_eq!(read_hook_payload(base(), b"  \n"), base());
        let bad = read_hook_payload(base(), b"{ not json");
        assert!(bad.error.unwrap().starts_with("malformed JSON"));
        let huge = read_hook_payload(base(), &vec![b' '; MAX_HOOK_BYTES + 1]);
        assert!(huge.error.unwrap().contains("larger than"));
        let long = format!(r#"{{"reason":"{}"}}"#, "x".repeat(201));
        assert!(read_hook_payload(base(), long.as_bytes()).fields.is_empty());
    }

    #[test]
    fn a_bad_spool_line_costs_only_itself() {
        let good = serde_json::to_vec(&base()).unwrap();
        let mut spool = good.clone();
        spool.extend_from_slice(b"\n\xff\xfe not utf-8\n{\"agent\":\"torn\n\n");
        spool.extend_from_slice(&good);
        spool.extend_from_slice(b"\n");
        spool.extend_from_slice(&good[..good.len() / 2]);
        let (events, bad) = parse_hook_spool(&spool);
        assert_eq!(events, [base(), base()]);
        assert_eq!(
            bad.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            [2, 3, 6],
            "{bad:?}"
        );
        // Old spools (no token, no id) still read.
        let old = br#"{"agent":"a1","harness":"claude","event":"Stop","at_ms":5}"#;
        assert_eq!(parse_hook_spool(old).0, [base()]);
    }

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
    fn copilot_payloads_as_captured_map_to_states() {
        // Payloads of 1.0.102 (reference/probe/copilot-hooks-allowall.jsonl), cut.
        let m = |e, p| hook_meaning("copilot", e, &p);
        let notification = json!({"sessionId": "1844331b-952f-40a6-bb31-5d1491c60907",
            "message": "Run command: echo probe > probe.txt", "title": "Permission needed",
            "hook_event_name": "Notification", "notification_type": "permission_prompt"});
        assert_eq!(
            m("notification", notification.clone()),
            Some(State(NeedsYou))
        );
        assert_eq!(
            session_id(&notification),
            Some("1844331b-952f-40a6-bb31-5d1491c60907")
        );
        assert_eq!(
            m(
                "notification",
                json!({"notification_type": "elicitation_dialog"})
            ),
            Some(State(NeedsYou))
        );
        assert_eq!(
            m("notification", json!({"notification_type": "other"})),
            None
        );
        // Fires also when the tool runs unasked: never needs_you.
        assert_eq!(m("permissionRequest", json!({"toolName": "bash"})), None);
        assert_eq!(m("userPromptSubmitted", json!({})), Some(State(Working)));
        assert_eq!(
            m("preToolUse", json!({"toolName": "bash"})),
            Some(State(Working))
        );
        assert_eq!(m("postToolUse", json!({})), Some(State(Working)));
        assert_eq!(
            m("agentStop", json!({"stopReason": "end_turn"})),
            Some(State(Idle))
        );
        assert_eq!(
            m("errorOccurred", json!({"errorContext": "model_call"})),
            Some(Evidence)
        );
        assert_eq!(
            m("sessionEnd", json!({"reason": "user_exit"})),
            Some(Evidence)
        );
        // Claude's PascalCase names mean nothing here (they would get snake_case payloads).
        assert_eq!(m("Stop", json!({})), None);
        assert!(!hook_events("copilot").contains(&"permissionRequest"));
    }

    #[test]
    fn volee_events_map_to_exact_states() {
        let m = |e| hook_meaning("volee", e, &json!({}));
        assert_eq!(m("TurnStart"), Some(State(Working)));
        assert_eq!(m("ApprovalAsked"), Some(State(NeedsYou)));
        assert_eq!(m("ApprovalAnswered"), Some(State(Working)));
        assert_eq!(m("TurnEnd"), Some(State(Idle)));
        assert_eq!(m("TurnFailed"), Some(State(Failed)));
        assert_eq!(m("SessionStart"), Some(Evidence));
    }

    #[test]
    fn cursor_stop_status_decides_idle_or_failed() {
        let m = |e, p| hook_meaning("cursor", e, &p);
        assert_eq!(m("beforeSubmitPrompt", json!({})), Some(State(Working)));
        assert_eq!(m("stop", json!({"status": "completed"})), Some(State(Idle)));
        assert_eq!(m("stop", json!({"status": "aborted"})), Some(State(Idle)));
        assert_eq!(m("stop", json!({"status": "error"})), Some(State(Failed)));
        assert_eq!(
            session_id(&json!({"conversation_id": "c-1", "hook_event_name": "stop"})),
            Some("c-1")
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
