//! Status files a harness documents, read as a state source (`listing`).
//!
//! Claude Code keeps `~/.claude/sessions/<pid>.json` = `{pid, sessionId, status, waitingFor, …}`
//! (measured on 2.1.197 and 2.1.332: status `busy|shell|idle|waiting`, waitingFor `permission
//! prompt|input needed|dialog open|worker request|sandbox request`).

use std::path::{Path, PathBuf};

use volee_protocol::AgentState;

/// What one status file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingObservation {
    pub state: AgentState,
    /// `status waiting (permission prompt)`.
    pub evidence: String,
    pub session_id: Option<String>,
}

/// The status file of a harness process, when the harness keeps one.
pub fn status_file(harness: &str, home: &Path, pid: u32) -> Option<PathBuf> {
    match harness {
        "claude" => Some(
            home.join(".claude")
                .join("sessions")
                .join(format!("{pid}.json")),
        ),
        _ => None,
    }
}

/// Parse a status file of `harness`; None when it says nothing volee knows.
pub fn parse_status(harness: &str, text: &str) -> Option<ListingObservation> {
    if harness != "claude" || text.len() > 1024 * 1024 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let status = v.get("status")?.as_str()?;
    let waiting_for = v.get("waitingFor").and_then(|w| w.as_str()).unwrap_or("");
    let state = match status {
        "busy" | "shell" => AgentState::Working,
        "idle" => AgentState::Idle,
        // Every documented reason is the user's turn: a permission prompt, a question, a dialog.
        "waiting" => AgentState::NeedsYou,
        _ => return None,
    };
    let evidence = if waiting_for.is_empty() {
        format!("status {status}")
    } else {
        format!(
            "status {status} ({})",
            waiting_for.chars().take(40).collect::<String>()
        )
    };
    Some(ListingObservation {
        state,
        evidence,
        session_id: v
            .get("sessionId")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .map(String::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_statuses_map_to_states() {
        let waiting = r#"{"pid":1,"sessionId":"s-1","status":"waiting","waitingFor":"permission prompt","kind":"interactive"}"#;
        let o = parse_status("claude", waiting).unwrap();
        assert_eq!(o.state, AgentState::NeedsYou);
        assert_eq!(o.evidence, "status waiting (permission prompt)");
        assert_eq!(o.session_id.as_deref(), Some("s-1"));
        assert_eq!(
            parse_status("claude", r#"{"status":"busy"}"#).map(|o| o.state),
            Some(AgentState::Working)
        );
        assert_eq!(
            parse_status("claude", r#"{"status":"idle"}"#).map(|o| o.state),
            Some(AgentState::Idle)
        );
        assert_eq!(parse_status("claude", r#"{"status":"sleeping"}"#), None);
        assert_eq!(parse_status("claude", "{ torn"), None);
        assert_eq!(parse_status("codex", r#"{"status":"idle"}"#), None);
    }

    #[test]
    fn only_claude_keeps_a_status_file() {
        let p = status_file("claude", Path::new("/h"), 42).unwrap();
        assert_eq!(p, PathBuf::from("/h/.claude/sessions/42.json"));
        assert!(status_file("qwen", Path::new("/h"), 42).is_none());
    }
}

/// Where a harness publishes the session id of a running process, when it does:
/// Claude and Qwen `~/.<h>/sessions/<pid>.json` (`sessionId`), Grok `~/.grok/active_sessions.json`
/// (a list of `{session_id, pid, …}`).
pub fn session_file(harness: &str, home: &Path, pid: u32) -> Option<PathBuf> {
    match harness {
        "claude" => status_file(harness, home, pid),
        "qwen" => Some(
            home.join(".qwen")
                .join("sessions")
                .join(format!("{pid}.json")),
        ),
        "grok" => Some(home.join(".grok").join("active_sessions.json")),
        _ => None,
    }
}

/// The session id of process `pid` in the text of its harness's [`session_file`].
pub fn parse_session_id(harness: &str, text: &str, pid: u32) -> Option<String> {
    if text.len() > 4 * 1024 * 1024 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let id = match harness {
        "claude" | "qwen" => v.get("sessionId")?.as_str()?,
        "grok" => v
            .as_array()?
            .iter()
            .find(|s| s.get("pid").and_then(|p| p.as_u64()) == Some(u64::from(pid)))?
            .get("session_id")?
            .as_str()?,
        _ => return None,
    };
    (!id.is_empty() && id.len() <= 200).then(|| id.to_string())
}

#[cfg(test)]
mod session_tests {
    use super::*;

    #[test]
    fn session_ids_from_each_harness_file() {
        assert_eq!(
            parse_session_id("qwen", r#"{"pid":7,"sessionId":"q-1","kind":"tui"}"#, 7).as_deref(),
            Some("q-1")
        );
        let grok =
            r#"[{"session_id":"g-1","pid":5,"cwd":"/w"},{"session_id":"g-2","pid":7,"cwd":"/w"}]"#;
        assert_eq!(parse_session_id("grok", grok, 7).as_deref(), Some("g-2"));
        assert_eq!(parse_session_id("grok", grok, 9), None);
        assert_eq!(parse_session_id("codex", "{}", 1), None);
        assert_eq!(parse_session_id("qwen", "{ torn", 1), None);
        assert_eq!(
            session_file("grok", Path::new("/h"), 3),
            Some(PathBuf::from("/h/.grok/active_sessions.json"))
        );
    }
}
