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

/// Does this harness hold its transcript (Codex) or a per-session lock file (Copilot) open (see
/// [`session_id_from_open_file`])?
pub fn holds_transcript_open(harness: &str) -> bool {
    harness == "codex" || harness == "copilot"
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
        // Copilot holds `<COPILOT_HOME>/session-state/<id>/inuse.<pid>.hold` open while the
        // session runs in it (measured on 1.0.102).
        "copilot" => {
            let name = path.file_name()?.to_str()?;
            let pid = name.strip_prefix("inuse.")?.strip_suffix(".hold")?;
            if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let session_dir = path.parent()?;
            if session_dir.parent()?.file_name()?.to_str()? != "session-state" {
                return None;
            }
            let id = session_dir.file_name()?.to_str()?;
            copilot_session_id_shape(id).then(|| id.to_string())
        }
        _ => None,
    }
}

/// A Copilot session id: a UUID (`--session-id` takes only these), lowercase or not.
fn copilot_session_id_shape(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Copilot's state directory for a process environment: `$COPILOT_HOME` when set (absolute),
/// else `$HOME/.copilot`.
pub fn copilot_home(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(home) = var("COPILOT_HOME").filter(|v| !v.is_empty()) {
        let home = PathBuf::from(home);
        return home.is_absolute().then_some(home);
    }
    var("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".copilot"))
}

/// Copilot writes `<copilot home>/session-state/<id>/inuse.<pid>.lock` (content: that pid) for a
/// running process and removes it at exit: the session of process `pid`, found by looking into
/// each session directory. None when none or more than one (a stale lock of a crashed process
/// whose pid came back) says so: never a guess.
pub fn copilot_session_from_lock_files(copilot_home: &Path, pid: u32) -> Option<String> {
    let name = format!("inuse.{pid}.lock");
    let mut found: Option<String> = None;
    let entries = std::fs::read_dir(copilot_home.join("session-state")).ok()?;
    for entry in entries.filter_map(Result::ok).take(100_000) {
        let Some(id) = entry.file_name().to_str().map(String::from) else {
            continue;
        };
        if !copilot_session_id_shape(&id) {
            continue;
        }
        let says_pid = std::fs::read(entry.path().join(&name))
            .ok()
            .filter(|b| b.len() <= 64)
            .is_some_and(|b| String::from_utf8_lossy(&b).trim() == pid.to_string());
        if says_pid {
            if found.is_some() {
                return None;
            }
            found = Some(id);
        }
    }
    found
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
    fn copilot_session_ids_from_its_hold_and_lock_files() {
        let id = "11111111-2222-4333-8444-555555555555";
        let open = |p: &str| session_id_from_open_file("copilot", Path::new(p));
        assert_eq!(
            open(&format!("/h/.copilot/session-state/{id}/inuse.21840.hold")).as_deref(),
            Some(id)
        );
        // The package cache holds one too (not a session); torn names; another dir.
        assert_eq!(
            open("/h/.cache/copilot/pkg/linux-x64/1.0.102/inuse.21840.hold"),
            None
        );
        assert_eq!(
            open(&format!("/h/.copilot/session-state/{id}/inuse.x.hold")),
            None
        );
        assert_eq!(
            open(&format!("/h/.copilot/session-state/{id}/events.jsonl")),
            None
        );
        assert_eq!(
            open("/h/.copilot/session-state/not-a-uuid/inuse.1.hold"),
            None
        );
        assert_eq!(
            open(&format!("/h/.copilot/other/{id}/inuse.21840.hold")),
            None
        );

        let home = std::env::temp_dir().join(format!("volee-copilot-locks-{}", std::process::id()));
        let state = home.join("session-state");
        let other = "aaaaaaaa-2222-4333-8444-555555555555";
        std::fs::create_dir_all(state.join(id)).unwrap();
        std::fs::create_dir_all(state.join(other)).unwrap();
        std::fs::create_dir_all(state.join(".session-operation-locks")).unwrap();
        std::fs::write(state.join(id).join("inuse.4242.lock"), "4242").unwrap();
        std::fs::write(state.join(other).join("inuse.7.lock"), "7").unwrap();
        assert_eq!(
            copilot_session_from_lock_files(&home, 4242).as_deref(),
            Some(id)
        );
        assert_eq!(copilot_session_from_lock_files(&home, 9), None);
        // A lock whose content names another pid does not count.
        std::fs::write(state.join(other).join("inuse.4242.lock"), "1").unwrap();
        assert_eq!(
            copilot_session_from_lock_files(&home, 4242).as_deref(),
            Some(id)
        );
        // Two sessions claiming one pid: no guess.
        std::fs::write(state.join(other).join("inuse.4242.lock"), "4242\n").unwrap();
        assert_eq!(copilot_session_from_lock_files(&home, 4242), None);
        std::fs::remove_dir_all(&home).unwrap();

        let var = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            copilot_home(var(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.copilot"))
        );
        assert_eq!(
            copilot_home(var(&[("HOME", "/h"), ("COPILOT_HOME", "/c")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(copilot_home(var(&[("COPILOT_HOME", "rel")])), None);
        assert_eq!(copilot_home(var(&[])), None);
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
