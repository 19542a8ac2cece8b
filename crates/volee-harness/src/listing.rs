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

/// Does this harness run a server that lists its sessions with their states (Codex's shared
/// app-server daemon, `~/.codex/app-server-control/app-server-control.sock`)?
pub fn has_listing_server(harness: &str) -> bool {
    harness == "codex"
}

/// Does this harness hold its transcript open (see [`session_id_from_open_file`])?
pub fn holds_transcript_open(harness: &str) -> bool {
    harness == "codex"
}

/// The session id in the path of a file the process holds open, for harnesses whose transcript
/// stays open while the session runs: Codex's `~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl`
/// (the id is the UUID at the end of the name).
pub fn session_id_from_open_file(harness: &str, path: &Path) -> Option<String> {
    match harness {
        "codex" => {
            let text = path.to_str()?;
            if !text.contains("/sessions/") {
                return None;
            }
            let name = path.file_name()?.to_str()?;
            let stem = name.strip_prefix("rollout-")?.strip_suffix(".jsonl")?;
            // `<ts>-<uuid>`: the UUID is the last 36 characters, in 8-4-4-4-12 hex groups.
            let id = stem.get(stem.len().checked_sub(36)?..)?;
            let groups: Vec<&str> = id.split('-').collect();
            let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12];
            (shape
                && groups
                    .iter()
                    .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit())))
            .then(|| id.to_string())
        }
        _ => None,
    }
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

    #[test]
    fn codex_session_ids_from_its_open_rollout_file() {
        let id = |p: &str| session_id_from_open_file("codex", Path::new(p));
        assert_eq!(
            id("/h/.codex/sessions/2026/11/30/rollout-2026-11-30T20-01-02-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl")
                .as_deref(),
            Some("019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b")
        );
        // Not a rollout, not under sessions/, a torn name, another harness.
        assert_eq!(id("/h/.codex/log/codex-tui.log"), None);
        assert_eq!(
            id("/tmp/rollout-2026-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"),
            None
        );
        assert_eq!(id("/h/.codex/sessions/rollout-x.jsonl"), None);
        assert_eq!(
            id("/h/.codex/sessions/rollout-2026-zzzzzzzz-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"),
            None
        );
        assert_eq!(
            session_id_from_open_file(
                "claude",
                Path::new(
                    "/h/.codex/sessions/rollout-2026-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"
                )
            ),
            None
        );
    }
}
