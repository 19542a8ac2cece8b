//! The app-server's `Thread` and `ThreadStatus` (the fields volee uses), what a status means for
//! an agent, and which thread is the one of a TUI volee launched. Pure: JSON values in, values
//! out; unknown shapes never fail (fuzzed: `fuzz/fuzz_targets/listing_json.rs`).

use std::path::Path;

use serde_json::Value;
use volee_protocol::AgentState;

/// Clock slack allowed by [`match_thread`] between volee's launch time and Codex's `createdAt`.
pub const CREATED_SLACK_SECS: u64 = 5;

/// `Thread.status` of the app-server protocol (`ThreadStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadStatus {
    /// `{"type":"active","activeFlags":[…]}`: a turn is running. The flags (`ThreadActiveFlag`)
    /// say whether it waits on the user: `waitingOnApproval`, `waitingOnUserInput`; `flags` keeps
    /// them all as sent, unknown ones included.
    Active {
        waiting_on_approval: bool,
        waiting_on_input: bool,
        flags: Vec<String>,
    },
    /// `{"type":"idle"}`: loaded, no turn running.
    Idle,
    /// `{"type":"notLoaded"}`: on disk only.
    NotLoaded,
    /// `{"type":"systemError"}`: the schema says no more than the name.
    SystemError,
    /// Any other `type` (a newer Codex), or a status without one (`""`).
    Other(String),
}

impl ThreadStatus {
    /// Parses a `ThreadStatus` JSON value; never fails (unknown shapes become `Other`).
    pub fn from_json(v: &Value) -> ThreadStatus {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "active" => {
                let flags: Vec<String> = v
                    .get("activeFlags")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|f| f.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                ThreadStatus::Active {
                    waiting_on_approval: flags.iter().any(|f| f == "waitingOnApproval"),
                    waiting_on_input: flags.iter().any(|f| f == "waitingOnUserInput"),
                    flags,
                }
            }
            "idle" => ThreadStatus::Idle,
            "notLoaded" => ThreadStatus::NotLoaded,
            "systemError" => ThreadStatus::SystemError,
            other => ThreadStatus::Other(other.to_string()),
        }
    }

    /// What it means for the agent: a waiting flag → needs you; active → working; idle → idle.
    /// `notLoaded`, `systemError` (undocumented beyond its name) and unknown statuses say nothing.
    pub fn state(&self) -> Option<AgentState> {
        match self {
            ThreadStatus::Active {
                waiting_on_approval,
                waiting_on_input,
                ..
            } if *waiting_on_approval || *waiting_on_input => Some(AgentState::NeedsYou),
            ThreadStatus::Active { .. } => Some(AgentState::Working),
            ThreadStatus::Idle => Some(AgentState::Idle),
            ThreadStatus::NotLoaded | ThreadStatus::SystemError | ThreadStatus::Other(_) => None,
        }
    }

    /// A short form for evidence and logs: `active[waitingOnApproval]`, `idle`, …
    pub fn describe(&self) -> String {
        match self {
            ThreadStatus::Active { flags, .. } if flags.is_empty() => "active".into(),
            ThreadStatus::Active { flags, .. } => format!("active[{}]", flags.join(",")),
            ThreadStatus::Idle => "idle".into(),
            ThreadStatus::NotLoaded => "notLoaded".into(),
            ThreadStatus::SystemError => "systemError".into(),
            ThreadStatus::Other(t) => format!("other({t})"),
        }
    }
}

/// One Codex thread (session) as the app-server describes it (`Thread`, the fields volee uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexThread {
    /// UUIDv7 thread id (the session id `codex resume` takes).
    pub id: String,
    /// The thread's working directory.
    pub cwd: String,
    /// Usually the first user message; empty before one is sent.
    pub preview: String,
    pub status: ThreadStatus,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix seconds.
    pub updated_at: u64,
    /// The rollout file (`~/.codex/sessions/…/rollout-…-<id>.jsonl`), when materialized.
    pub path: Option<String>,
    /// The user-facing title (set from the first prompt).
    pub name: Option<String>,
    /// `source` as sent: `"cli"`, `"vscode"`, `{"subAgent":…}`, …
    pub source: Value,
    /// Set only for a sub-agent's thread.
    pub parent_thread_id: Option<String>,
    /// Not materialized on disk. Codex 0.171 keeps a loaded ephemeral helper thread per TUI
    /// (`threadSource: "thread_title"`, empty preview, no path, same cwd) to name the session.
    pub ephemeral: bool,
    /// `threadSource` (`"thread_title"` for that helper; null for a user's thread).
    pub thread_source: Option<String>,
    /// The client recorded as the thread's creator (`"codex-tui"`, …).
    pub originator: Option<String>,
}

impl CodexThread {
    /// Parses one `Thread` object; None without an `id`.
    pub fn from_json(v: &Value) -> Option<CodexThread> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
        let secs = |k: &str| {
            v.get(k)
                .and_then(|n| n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)))
                .unwrap_or(0)
        };
        Some(CodexThread {
            id: text("id").filter(|s| !s.is_empty())?,
            cwd: text("cwd").unwrap_or_default(),
            preview: text("preview").unwrap_or_default(),
            status: ThreadStatus::from_json(v.get("status").unwrap_or(&Value::Null)),
            created_at: secs("createdAt"),
            updated_at: secs("updatedAt"),
            path: text("path"),
            name: text("name"),
            source: v.get("source").cloned().unwrap_or(Value::Null),
            parent_thread_id: text("parentThreadId"),
            ephemeral: v.get("ephemeral").and_then(Value::as_bool).unwrap_or(false),
            thread_source: text("threadSource"),
            originator: text("originator"),
        })
    }

    /// See [`ThreadStatus::state`].
    pub fn state(&self) -> Option<AgentState> {
        self.status.state()
    }

    /// A sub-agent's thread (never the thread of a TUI).
    pub fn is_subagent(&self) -> bool {
        self.parent_thread_id.is_some() || self.source.get("subAgent").is_some()
    }

    /// Could this be the thread a user talks to in a TUI? Not a sub-agent's, not an ephemeral
    /// helper (the title generator), not one with a `threadSource` of its own.
    pub fn is_user_thread(&self) -> bool {
        !self.is_subagent() && !self.ephemeral && self.thread_source.is_none()
    }
}

/// The thread of one Codex TUI started at `launched_at_secs` in `cwd` (with `prompt` as its first
/// message when known): the only user thread ([`CodexThread::is_user_thread`]) in that folder created at or after the
/// launch (less [`CREATED_SLACK_SECS`]) whose preview is the prompt (or starts with it; either
/// side trimmed). None when there is no such thread **or more than one**: volee never guesses.
pub fn match_thread<'a>(
    threads: &'a [CodexThread],
    cwd: &str,
    prompt: Option<&str>,
    launched_at_secs: u64,
) -> Option<&'a CodexThread> {
    let prompt = prompt.map(str::trim).filter(|p| !p.is_empty());
    let earliest = launched_at_secs.saturating_sub(CREATED_SLACK_SECS);
    let mut found = threads.iter().filter(|t| {
        t.is_user_thread()
            && Path::new(&t.cwd) == Path::new(cwd)
            && t.created_at >= earliest
            && prompt.is_none_or(|p| t.preview.trim().starts_with(p))
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::codex::testdata::{probe_threads, TITLE_THREAD_READ};
    use serde_json::json;

    #[test]
    fn statuses_and_their_states() {
        let s = |j: &str| ThreadStatus::from_json(&serde_json::from_str(j).unwrap());
        let asking = s(r#"{"type":"active","activeFlags":["waitingOnApproval"]}"#);
        assert_eq!(asking.state(), Some(AgentState::NeedsYou));
        assert_eq!(asking.describe(), "active[waitingOnApproval]");
        let input = s(r#"{"type":"active","activeFlags":["waitingOnUserInput"]}"#);
        assert!(matches!(
            input,
            ThreadStatus::Active {
                waiting_on_input: true,
                waiting_on_approval: false,
                ..
            }
        ));
        assert_eq!(input.state(), Some(AgentState::NeedsYou));
        let running = s(r#"{"type":"active","activeFlags":[]}"#);
        assert_eq!(running.state(), Some(AgentState::Working));
        let future = s(r#"{"type":"active","activeFlags":["somethingNew"]}"#);
        assert_eq!(future.state(), Some(AgentState::Working));
        assert_eq!(s(r#"{"type":"idle"}"#).state(), Some(AgentState::Idle));
        assert_eq!(s(r#"{"type":"notLoaded"}"#), ThreadStatus::NotLoaded);
        assert_eq!(s(r#"{"type":"systemError"}"#).state(), None);
        assert_eq!(
            s(r#"{"type":"paused"}"#),
            ThreadStatus::Other("paused".into())
        );
        assert_eq!(s("null"), ThreadStatus::Other(String::new()));
    }

    #[test]
    fn recorded_threads_parse() {
        let threads = probe_threads();
        assert_eq!(threads.len(), 2);
        let t = &threads[0];
        assert_eq!(t.id, "01a22ab8-34d5-7a73-9c8e-316065b6cd1a");
        assert_eq!(t.cwd, "/home/dev/proj1/codex");
        assert_eq!(t.preview, "say hello daemon");
        assert_eq!(t.created_at, 1796013051);
        assert_eq!(t.name.as_deref(), Some("say hello daemon"));
        assert_eq!(t.source, json!("vscode"));
        assert!(t
            .path
            .as_deref()
            .unwrap()
            .ends_with("rollout-2026-11-30T04-30-51-01a22ab8-34d5-7a73-9c8e-316065b6cd1a.jsonl"));
        assert_eq!(t.state(), Some(AgentState::Working));
        assert!(t.is_user_thread());
        assert_eq!(threads[1].status, ThreadStatus::NotLoaded);
        assert_eq!(threads[1].state(), None);

        let v: Value = serde_json::from_str(TITLE_THREAD_READ).unwrap();
        let title = CodexThread::from_json(&v["result"]["thread"]).unwrap();
        assert!(title.ephemeral);
        assert_eq!(title.thread_source.as_deref(), Some("thread_title"));
        assert_eq!(title.path, None);
        assert!(!title.is_user_thread());
        assert_eq!(CodexThread::from_json(&json!({"cwd": "/x"})), None);
    }

    fn thread(id: &str, cwd: &str, preview: &str, created: u64) -> CodexThread {
        CodexThread::from_json(&json!({
            "id": id, "cwd": cwd, "preview": preview, "createdAt": created, "updatedAt": created,
            "status": {"type": "idle"}, "source": "vscode", "ephemeral": false,
        }))
        .unwrap()
    }

    #[test]
    fn match_thread_finds_one_tui_thread_or_none() {
        let launch = 1_000;
        let mine = thread("a", "/w", "Fix the bug.\nThen test.", 1_002);
        let other_dir = thread("b", "/elsewhere", "Fix the bug.", 1_002);
        let older = thread("c", "/w", "Fix the bug.", 900);
        let v: Value = serde_json::from_str(TITLE_THREAD_READ).unwrap();
        let mut title = CodexThread::from_json(&v["result"]["thread"]).unwrap();
        title.cwd = "/w".into();
        title.created_at = 1_003;
        let mut sub = thread("s", "/w", "Fix the bug.", 1_004);
        sub.parent_thread_id = Some("a".into());
        let threads = vec![mine.clone(), other_dir, older, title, sub];

        let found = |cwd: &str, prompt: Option<&str>, at: u64| {
            match_thread(&threads, cwd, prompt, at).map(|t| t.id.as_str())
        };
        assert_eq!(found("/w", Some("Fix the bug."), launch), Some("a"));
        assert_eq!(found("/w/", Some("  Fix the bug.  "), launch), Some("a"));
        // Without a prompt: the ephemeral title thread and the sub-agent do not count.
        assert_eq!(found("/w", None, launch), Some("a"));
        assert_eq!(found("/w", Some("Something else"), launch), None);
        // Clock slack: Codex's clock a few seconds behind volee's.
        assert_eq!(found("/w", None, 1_006), Some("a"));
        assert_eq!(found("/w", None, 1_008), None);
        // Launched earlier: the older thread is a candidate too → ambiguous → None.
        assert_eq!(found("/w", Some("Fix the bug."), 800), None);
        let two = vec![mine.clone(), thread("d", "/w", "Fix the bug.", 1_001)];
        assert_eq!(match_thread(&two, "/w", Some("Fix the bug."), launch), None);
        assert_eq!(match_thread(&two, "/w", None, launch), None);
        let distinct = vec![mine, thread("e", "/w", "Write docs.", 1_001)];
        assert_eq!(
            match_thread(&distinct, "/w", Some("Write docs."), launch).map(|t| t.id.as_str()),
            Some("e")
        );
    }
}
