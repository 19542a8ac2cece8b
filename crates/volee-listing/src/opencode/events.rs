//! What OpenCode's server says, and what it means: one event of `GET /event`
//! ([`parse_event`]), the snapshot of `GET /session/status`, `/permission`, `/question`
//! ([`parse_snapshot`]), and [`ServerView`], which folds both into one agent's state. Pure: JSON
//! values in, values out; unknown shapes are ignored (fuzzed: `fuzz/fuzz_targets/listing_json.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use volee_protocol::{AgentState, Reason};

/// A session's status (`SessionStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Idle,
    Busy,
    Retry { attempt: u64, message: String },
}

fn parse_status(v: &Value) -> Option<Status> {
    Some(match v.get("type")?.as_str()? {
        "idle" => Status::Idle,
        "busy" => Status::Busy,
        "retry" => Status::Retry {
            attempt: v.get("attempt").and_then(Value::as_u64).unwrap_or(0),
            message: short(v.get("message").and_then(Value::as_str).unwrap_or("")),
        },
        _ => return None,
    })
}

/// Text from the server, bounded and on one line (it ends up in evidence strings).
fn short(text: &str) -> String {
    let one: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(80)
        .collect();
    one.trim().to_string()
}

/// One event of `GET /event` that bears on the state (others are ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    Connected,
    SessionCreated {
        session: String,
        parent: Option<String>,
    },
    Status {
        session: String,
        status: Status,
    },
    Idle {
        session: String,
    },
    PermissionAsked {
        session: String,
        id: String,
        permission: String,
    },
    PermissionReplied {
        session: String,
        id: String,
        reply: String,
    },
    QuestionAsked {
        session: String,
        id: String,
        header: String,
    },
    /// `question.replied` or `question.rejected`.
    QuestionAnswered {
        session: String,
        id: String,
    },
    Error {
        session: Option<String>,
        name: String,
        /// Why, from its name, its HTTP status and its message.
        reason: Reason,
    },
    /// `server.instance.disposed`: the TUI is ending.
    Disposed,
    /// `session.updated`: a session's tokens so far (cumulative) and its model.
    SessionTokens {
        session: String,
        tokens: Tokens,
        model: Option<String>,
    },
    /// `message.part.updated` of a `step-finish` part: one model response of a session ended.
    StepFinished {
        session: String,
        part: String,
    },
}

/// A session's tokens as OpenCode counts them (`tokens {input, output, reasoning, cache {read,
/// write}}`; its input leaves the cached input out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// An id from the server: a string, not empty, at most 200 bytes.
fn bounded(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 200)
        .map(String::from)
}

fn tokens_of(v: &Value) -> Option<Tokens> {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    v.is_object().then(|| Tokens {
        input: n(v.get("input")),
        output: n(v.get("output")),
        reasoning: n(v.get("reasoning")),
        cache_read: n(v.get("cache").and_then(|c| c.get("read"))),
        cache_write: n(v.get("cache").and_then(|c| c.get("write"))),
    })
}

/// One event's JSON (`{type, properties}`, or `/global/event`'s `{payload: {…}}`).
pub fn parse_event(v: &Value) -> Option<ServerEvent> {
    let v = v.get("payload").unwrap_or(v);
    let props = v.get("properties").unwrap_or(&Value::Null);
    let s = |k: &str| {
        props
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .map(String::from)
    };
    Some(match v.get("type")?.as_str()? {
        "server.connected" => ServerEvent::Connected,
        "server.instance.disposed" => ServerEvent::Disposed,
        "session.created" => ServerEvent::SessionCreated {
            session: s("sessionID")?,
            parent: props
                .get("info")
                .and_then(|i| i.get("parentID"))
                .and_then(Value::as_str)
                .map(String::from),
        },
        "session.status" => ServerEvent::Status {
            session: s("sessionID")?,
            status: parse_status(props.get("status")?)?,
        },
        "session.idle" => ServerEvent::Idle {
            session: s("sessionID")?,
        },
        "permission.asked" => ServerEvent::PermissionAsked {
            session: s("sessionID")?,
            id: s("id")?,
            permission: short(
                props
                    .get("permission")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
        },
        "permission.replied" => ServerEvent::PermissionReplied {
            session: s("sessionID")?,
            id: s("requestID")?,
            reply: short(props.get("reply").and_then(Value::as_str).unwrap_or("")),
        },
        "question.asked" => ServerEvent::QuestionAsked {
            session: s("sessionID")?,
            id: s("id")?,
            header: question_header(props),
        },
        "question.replied" | "question.rejected" => ServerEvent::QuestionAnswered {
            session: s("sessionID")?,
            id: s("requestID")?,
        },
        "session.updated" => {
            let info = props.get("info")?;
            ServerEvent::SessionTokens {
                session: s("sessionID").or_else(|| bounded(info.get("id")))?,
                tokens: tokens_of(info.get("tokens")?)?,
                model: info
                    .get("model")
                    .and_then(|m| m.get("id"))
                    .and_then(Value::as_str)
                    .map(short),
            }
        }
        "message.part.updated" => {
            let part = props.get("part")?;
            if part.get("type").and_then(Value::as_str) != Some("step-finish") {
                return None;
            }
            ServerEvent::StepFinished {
                session: bounded(part.get("sessionID")).or_else(|| s("sessionID"))?,
                part: bounded(part.get("id"))?,
            }
        }
        "session.error" => {
            let error = props.get("error");
            let name = error
                .and_then(|e| e.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("error");
            let data = error.and_then(|e| e.get("data"));
            ServerEvent::Error {
                session: s("sessionID"),
                name: short(name),
                reason: error_reason(
                    name,
                    data.and_then(|d| d.get("statusCode"))
                        .and_then(Value::as_u64),
                    data.and_then(|d| d.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                ),
            }
        }
        _ => return None,
    })
}

/// Why a session failed, from OpenCode's error (`ProviderAuthError`; an `APIError`'s
/// `statusCode` and `message`).
fn error_reason(name: &str, status: Option<u64>, message: &str) -> Reason {
    let m = message.to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| m.contains(w));
    match (name, status) {
        ("ProviderAuthError", _) | (_, Some(401 | 403)) => Reason::Auth,
        (_, Some(429)) => Reason::UsageLimit,
        _ if says(&["usage limit", "rate limit", "quota"]) => Reason::UsageLimit,
        _ if says(&[
            "econnrefused",
            "econnreset",
            "fetch failed",
            "unable to connect",
            "socket",
            "network",
        ]) =>
        {
            Reason::Network
        }
        _ => Reason::ApiError,
    }
}

fn question_header(request: &Value) -> String {
    short(
        request
            .get("questions")
            .and_then(|q| q.get(0))
            .and_then(|q| q.get("header"))
            .and_then(Value::as_str)
            .unwrap_or(""),
    )
}

/// One look at the server: `GET /session/status`, `/permission`, `/question`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub statuses: BTreeMap<String, Status>,
    /// Pending permission id → (session, permission).
    pub permissions: BTreeMap<String, (String, String)>,
    /// Pending question id → (session, header).
    pub questions: BTreeMap<String, (String, String)>,
}

/// Build a snapshot from the three answers.
pub fn parse_snapshot(status: &Value, permissions: &Value, questions: &Value) -> Option<Snapshot> {
    let mut snap = Snapshot::default();
    for (sid, st) in status.as_object()? {
        if let Some(st) = parse_status(st) {
            snap.statuses.insert(sid.clone(), st);
        }
    }
    for p in permissions.as_array()? {
        let (Some(id), Some(sid)) = (
            p.get("id").and_then(Value::as_str),
            p.get("sessionID").and_then(Value::as_str),
        ) else {
            continue;
        };
        let perm = short(p.get("permission").and_then(Value::as_str).unwrap_or(""));
        snap.permissions.insert(id.into(), (sid.into(), perm));
    }
    for q in questions.as_array()? {
        let (Some(id), Some(sid)) = (
            q.get("id").and_then(Value::as_str),
            q.get("sessionID").and_then(Value::as_str),
        ) else {
            continue;
        };
        snap.questions
            .insert(id.into(), (sid.into(), question_header(q)));
    }
    Some(snap)
}

/// What the server told one agent so far, folded into a state.
#[derive(Debug, Clone, Default)]
pub struct ServerView {
    /// The agent's own session (root: no parent), once known.
    pub session: Option<String>,
    /// Sessions known to be sub-sessions (a subagent's).
    children: BTreeSet<String>,
    statuses: BTreeMap<String, Status>,
    permissions: BTreeMap<String, (String, String)>,
    questions: BTreeMap<String, (String, String)>,
    /// A session error (not an abort) since the last busy.
    error: Option<(String, Reason)>,
    /// A session's status or request was seen (or it is a resumed one): an idle server then
    /// means idle (before that it means nothing: the first prompt may not be submitted yet).
    seen_session: bool,
    /// The agent's own session's tokens (its last `session.updated`) and model.
    pub tokens: Option<(Tokens, Option<String>)>,
    /// Its own session's model responses seen ended (`step-finish` parts, each once).
    pub steps: BTreeSet<String>,
}

impl ServerView {
    pub fn new(session: Option<String>) -> ServerView {
        ServerView {
            seen_session: session.is_some(),
            session,
            ..ServerView::default()
        }
    }

    fn saw(&mut self, session: &str) {
        self.seen_session = true;
        self.name(session);
    }

    /// Take `session` as the agent's own unless one is known or it is a child.
    fn name(&mut self, session: &str) {
        if self.session.is_none() && !self.children.contains(session) {
            // The first session seen that is not a known child; a `session.created` with a
            // parent never lands here.
            self.session = Some(session.to_string());
        }
    }

    /// Take one event in.
    pub fn apply(&mut self, ev: &ServerEvent) {
        match ev {
            ServerEvent::Connected | ServerEvent::Disposed => {}
            ServerEvent::SessionTokens {
                session,
                tokens,
                model,
            } => {
                if self.session.as_deref() == Some(session.as_str()) {
                    self.tokens = Some((*tokens, model.clone()));
                }
            }
            ServerEvent::StepFinished { session, part } => {
                if self.session.as_deref() == Some(session.as_str()) {
                    self.steps.insert(part.clone());
                }
            }
            // Created at the first prompt, whose `busy` follows at once: naming the session
            // is all it does (an idle in between would be a blip).
            ServerEvent::SessionCreated { session, parent } => match parent {
                Some(_) => {
                    self.children.insert(session.clone());
                }
                None => self.name(session),
            },
            ServerEvent::Status { session, status } => {
                self.saw(session);
                match status {
                    Status::Idle => {
                        self.statuses.remove(session);
                    }
                    st => {
                        self.error = None;
                        self.statuses.insert(session.clone(), st.clone());
                    }
                }
            }
            ServerEvent::Idle { session } => {
                self.saw(session);
                self.statuses.remove(session);
                // Requests of an ended turn are void.
                self.permissions.retain(|_, (s, _)| s != session);
                self.questions.retain(|_, (s, _)| s != session);
            }
            ServerEvent::PermissionAsked {
                session,
                id,
                permission,
            } => {
                self.saw(session);
                self.permissions
                    .insert(id.clone(), (session.clone(), permission.clone()));
            }
            ServerEvent::PermissionReplied { id, .. } => {
                self.permissions.remove(id);
            }
            ServerEvent::QuestionAsked {
                session,
                id,
                header,
            } => {
                self.saw(session);
                self.questions
                    .insert(id.clone(), (session.clone(), header.clone()));
            }
            ServerEvent::QuestionAnswered { id, .. } => {
                self.questions.remove(id);
            }
            ServerEvent::Error {
                session,
                name,
                reason,
            } => {
                if let Some(s) = session {
                    self.saw(s);
                }
                // Esc (an abort) ends the turn; it is no failure.
                if name != "MessageAbortedError" {
                    self.error = Some((name.clone(), *reason));
                }
            }
        }
    }

    /// Replace what is pending and running by a snapshot (events missed while disconnected).
    pub fn apply_snapshot(&mut self, snap: &Snapshot) {
        self.statuses = snap.statuses.clone();
        self.permissions = snap.permissions.clone();
        self.questions = snap.questions.clone();
        let sessions: Vec<String> = snap
            .statuses
            .keys()
            .chain(snap.permissions.values().map(|(s, _)| s))
            .chain(snap.questions.values().map(|(s, _)| s))
            .cloned()
            .collect();
        for s in sessions {
            self.saw(&s);
        }
    }

    /// Mark a session as a sub-session (its `parentID` was read).
    pub fn mark_child(&mut self, session: &str) {
        self.children.insert(session.to_string());
        if self.session.as_deref() == Some(session) {
            self.session = None;
        }
    }

    /// The state and its evidence, when the server has said anything yet.
    pub fn observation(&self) -> Option<(AgentState, String)> {
        if let Some((_, perm)) = self.permissions.values().next() {
            return Some((
                AgentState::NeedsYou,
                format!("server: permission.asked {perm}"),
            ));
        }
        if let Some((_, header)) = self.questions.values().next() {
            return Some((
                AgentState::NeedsYou,
                format!("server: question.asked {header}"),
            ));
        }
        let retry = self.statuses.values().find_map(|s| match s {
            Status::Retry { attempt, message } => Some((attempt, message)),
            _ => None,
        });
        if let Some((attempt, message)) = retry {
            return Some((
                AgentState::Working,
                format!("server: status retry #{attempt} {message}"),
            ));
        }
        if !self.statuses.is_empty() {
            return Some((AgentState::Working, "server: status busy".into()));
        }
        if let Some((name, _)) = &self.error {
            return Some((AgentState::Failed, format!("server: session.error {name}")));
        }
        self.seen_session
            .then(|| (AgentState::Idle, "server: status idle".into()))
    }

    /// Why the state of [`Self::observation`], when it is needs_you or failed.
    pub fn reason(&self) -> Option<Reason> {
        match self.observation()?.0 {
            AgentState::NeedsYou if self.permissions.is_empty() => Some(Reason::Question),
            AgentState::NeedsYou => Some(Reason::Permission),
            AgentState::Failed => self.error.as_ref().map(|(_, r)| *r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::opencode::http::testing::{capture, data_of};

    /// Every event of a captured stream, in order.
    async fn events_of(capture: &str) -> Vec<ServerEvent> {
        data_of(capture.as_bytes())
            .await
            .iter()
            .filter_map(|d| parse_event(&serde_json::from_str(d).unwrap()))
            .collect()
    }

    #[test]
    fn session_tokens_and_steps_are_the_agents_own_sessions_usage() {
        let updated = serde_json::json!({"type": "session.updated", "properties": {
            "sessionID": "ses_a", "info": {"id": "ses_a", "model": {"id": "m1", "providerID": "p"},
            "tokens": {"input": 100, "output": 7, "reasoning": 3, "cache": {"read": 40, "write": 2}}}}});
        let step = |session: &str, part: &str| {
            serde_json::json!({"type": "message.part.updated", "properties": {"sessionID": session,
                "part": {"id": part, "sessionID": session, "type": "step-finish",
                         "tokens": {"input": 1, "output": 1}}}})
        };
        let text_part = serde_json::json!({"type": "message.part.updated", "properties": {
            "sessionID": "ses_a", "part": {"id": "prt_t", "type": "text"}}});
        assert_eq!(parse_event(&text_part), None);
        let mut view = ServerView::new(Some("ses_a".into()));
        for e in [
            updated.clone(),
            step("ses_a", "prt_1"),
            step("ses_a", "prt_1"),
            step("ses_a", "prt_2"),
            step("ses_child", "prt_3"),
        ] {
            view.apply(&parse_event(&e).unwrap());
        }
        let (tokens, model) = view.tokens.clone().unwrap();
        assert_eq!(
            tokens,
            Tokens {
                input: 100,
                output: 7,
                reasoning: 3,
                cache_read: 40,
                cache_write: 2
            }
        );
        assert_eq!(model.as_deref(), Some("m1"));
        // Each step once; another session's not at all.
        assert_eq!(view.steps.len(), 2);
        // Another session's tokens are not the agent's.
        let mut other = ServerView::new(Some("ses_b".into()));
        other.apply(&parse_event(&updated).unwrap());
        assert_eq!(other.tokens, None);
    }

    #[tokio::test]
    async fn the_captured_streams_give_the_measured_states() {
        // A turn against an unreachable model: busy, then retries (1.18.33 retries forever).
        let evs = events_of(&capture("opencode-sse-event.txt")).await;
        assert_eq!(evs.first(), Some(&ServerEvent::Connected));
        let mut view = ServerView::new(None);
        assert_eq!(view.observation(), None);
        let mut states = Vec::new();
        for e in &evs {
            view.apply(e);
            if let Some(o) = view.observation() {
                if states.last() != Some(&o) {
                    states.push(o);
                }
            }
        }
        assert_eq!(
            view.session.as_deref(),
            Some("ses_dd54f3dfcffeR5jTtBkcrS66Qh")
        );
        // session.created names the session; the busy right after it is the first state (no
        // idle blip between them).
        assert_eq!(
            states[0],
            (AgentState::Working, "server: status busy".into())
        );
        assert!(states.iter().any(|(s, e)| *s == AgentState::Working
            && e.starts_with("server: status retry #")
            && e.contains("Unable to connect")));
        // The global stream wraps the same events in {payload}.
        let global = capture("opencode-sse-global-event.txt");
        let g = events_of(&global).await;
        assert!(g.contains(&ServerEvent::SessionCreated {
            session: "ses_dd54f3dfcffeR5jTtBkcrS66Qh".into(),
            parent: None
        }));

        // The end of an approved turn: replied, busy, idle.
        let tui2 = events_of(&capture("opencode-sse-tui2.txt")).await;
        // What the snapshot at connect said: busy, one permission pending.
        let mut view = ServerView::new(None);
        view.apply(&ServerEvent::Status {
            session: "ses_dd54ce91bffexfqkq5udt3EUNH".into(),
            status: Status::Busy,
        });
        view.apply(&ServerEvent::PermissionAsked {
            session: "ses_dd54ce91bffexfqkq5udt3EUNH".into(),
            id: "per_22ab387e8001phesoeyC4lCkyT".into(),
            permission: "bash".into(),
        });
        assert_eq!(
            view.observation(),
            Some((AgentState::NeedsYou, "server: permission.asked bash".into()))
        );
        let mut seen = Vec::new();
        for e in &tui2 {
            view.apply(e);
            let o = view.observation().unwrap();
            if seen.last() != Some(&o.0) {
                seen.push(o.0);
            }
        }
        assert_eq!(
            seen,
            [AgentState::NeedsYou, AgentState::Working, AgentState::Idle]
        );
        assert_eq!(
            view.session.as_deref(),
            Some("ses_dd54ce91bffexfqkq5udt3EUNH")
        );
    }

    #[tokio::test]
    async fn a_rejected_permission_and_an_esc_end_idle() {
        // volee's capture: prompt → busy → permission.asked → reply "reject" → busy → idle; a second
        // prompt through the TUI server → busy → Esc Esc → session.error MessageAbortedError → idle.
        let evs = events_of(&capture("opencode-sse-volee-reject-esc.txt")).await;
        let mut view = ServerView::new(None);
        let mut states = Vec::new();
        for e in &evs {
            view.apply(e);
            if let Some((s, _)) = view.observation() {
                if states.last() != Some(&s) {
                    states.push(s);
                }
            }
        }
        assert_eq!(
            states,
            [
                AgentState::Working,
                AgentState::NeedsYou,
                // Rejected: still busy for a moment, then the turn ends idle (not failed).
                AgentState::Working,
                AgentState::Idle,
                AgentState::Working,
                AgentState::Idle
            ]
        );
        assert!(evs.contains(&ServerEvent::Error {
            session: view.session.clone(),
            name: "MessageAbortedError".into(),
            reason: Reason::ApiError,
        }));
    }

    #[test]
    fn the_api_listings_parse() {
        // Shapes measured on 1.18.33 (GET /session/status, /permission, /question).
        let status = serde_json::json!({"ses_a": {"type": "busy"}, "ses_b": {"type": "retry", "attempt": 4, "message": "Cannot connect to API", "next": 6000}});
        let perms: Value = serde_json::from_str(r#"[{"id":"per_22fe90306001peYbVi2RFxosoQ","sessionID":"ses_a","permission":"bash","patterns":["echo probe > probe.txt"],"metadata":{"command":"echo probe > probe.txt"},"always":["echo *"],"tool":{"messageID":"msg_1","callID":"call_e1efad2f"}}]"#).unwrap();
        let questions = serde_json::json!([{"id": "que_1", "sessionID": "ses_a", "questions": [{"question": "Which?", "header": "Pick one", "options": []}]}]);
        let snap = parse_snapshot(&status, &perms, &questions).unwrap();
        assert_eq!(snap.statuses.len(), 2);
        assert_eq!(
            snap.permissions.get("per_22fe90306001peYbVi2RFxosoQ"),
            Some(&("ses_a".to_string(), "bash".to_string()))
        );
        let mut view = ServerView::new(None);
        view.apply_snapshot(&snap);
        assert_eq!(view.observation().unwrap().0, AgentState::NeedsYou);
        view.apply(&ServerEvent::PermissionReplied {
            session: "ses_a".into(),
            id: "per_22fe90306001peYbVi2RFxosoQ".into(),
            reply: "once".into(),
        });
        assert_eq!(
            view.observation(),
            Some((
                AgentState::NeedsYou,
                "server: question.asked Pick one".into()
            ))
        );
        view.apply(&ServerEvent::QuestionAnswered {
            session: "ses_a".into(),
            id: "que_1".into(),
        });
        assert_eq!(
            view.observation(),
            Some((
                AgentState::Working,
                "server: status retry #4 Cannot connect to API".into()
            ))
        );
        assert!(parse_snapshot(&serde_json::json!([]), &perms, &questions).is_none());
        // An idle server before any session says nothing.
        let empty = parse_snapshot(
            &serde_json::json!({}),
            &serde_json::json!([]),
            &serde_json::json!([]),
        )
        .unwrap();
        let mut fresh = ServerView::new(None);
        fresh.apply_snapshot(&empty);
        assert_eq!(fresh.observation(), None);
        let mut resumed = ServerView::new(Some("ses_r".into()));
        resumed.apply_snapshot(&empty);
        assert_eq!(resumed.observation().unwrap().0, AgentState::Idle);
    }

    #[test]
    fn errors_fail_the_turn_but_an_abort_does_not() {
        let mut v = ServerView::new(Some("ses_a".into()));
        let busy = ServerEvent::Status {
            session: "ses_a".into(),
            status: Status::Busy,
        };
        v.apply(&busy);
        v.apply(&ServerEvent::Error {
            session: Some("ses_a".into()),
            name: "APIError".into(),
            reason: Reason::UsageLimit,
        });
        v.apply(&ServerEvent::Status {
            session: "ses_a".into(),
            status: Status::Idle,
        });
        v.apply(&ServerEvent::Idle {
            session: "ses_a".into(),
        });
        assert_eq!(
            v.observation(),
            Some((AgentState::Failed, "server: session.error APIError".into()))
        );
        assert_eq!(v.reason(), Some(Reason::UsageLimit));
        v.apply(&busy);
        assert_eq!(v.reason(), None);
        assert_eq!(v.observation().unwrap().0, AgentState::Working);
        v.apply(&ServerEvent::Error {
            session: Some("ses_a".into()),
            name: "MessageAbortedError".into(),
            reason: Reason::ApiError,
        });
        v.apply(&ServerEvent::Idle {
            session: "ses_a".into(),
        });
        assert_eq!(v.observation().unwrap().0, AgentState::Idle);
        let e = parse_event(
            &serde_json::json!({"type": "session.error", "properties": {"sessionID": "ses_a", "error": {"name": "APIError", "data": {"message": "x"}}}}),
        );
        assert_eq!(
            e,
            Some(ServerEvent::Error {
                session: Some("ses_a".into()),
                name: "APIError".into(),
                reason: Reason::ApiError,
            })
        );
        // Why, from the error's name, HTTP status and message.
        let reason_of = |error: serde_json::Value| match parse_event(
            &serde_json::json!({"type": "session.error", "properties": {"sessionID": "ses_a", "error": error}}),
        ) {
            Some(ServerEvent::Error { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason_of(
                serde_json::json!({"name": "ProviderAuthError", "data": {"providerID": "x", "message": "no key"}})
            ),
            Reason::Auth
        );
        assert_eq!(
            reason_of(
                serde_json::json!({"name": "APIError", "data": {"message": "Unauthorized", "statusCode": 401, "isRetryable": false}})
            ),
            Reason::Auth
        );
        assert_eq!(
            reason_of(
                serde_json::json!({"name": "APIError", "data": {"message": "Too Many Requests", "statusCode": 429, "isRetryable": true}})
            ),
            Reason::UsageLimit
        );
        assert_eq!(
            reason_of(
                serde_json::json!({"name": "UnknownError", "data": {"message": "Unable to connect. Is the computer able to access the url?"}})
            ),
            Reason::Network
        );
        assert_eq!(
            reason_of(
                serde_json::json!({"name": "APIError", "data": {"message": "Internal Server Error", "statusCode": 500}})
            ),
            Reason::ApiError
        );
    }

    #[test]
    fn a_subagents_session_is_not_the_agents() {
        let mut v = ServerView::new(None);
        v.apply(&ServerEvent::SessionCreated {
            session: "ses_root".into(),
            parent: None,
        });
        v.apply(&ServerEvent::SessionCreated {
            session: "ses_kid".into(),
            parent: Some("ses_root".into()),
        });
        v.apply(&ServerEvent::PermissionAsked {
            session: "ses_kid".into(),
            id: "per_1".into(),
            permission: "edit".into(),
        });
        assert_eq!(v.session.as_deref(), Some("ses_root"));
        assert_eq!(v.observation().unwrap().0, AgentState::NeedsYou);
        // Connected mid-turn: the first busy session is taken unless it turns out to be a child.
        let mut late = ServerView::new(None);
        late.apply_snapshot(&Snapshot {
            statuses: [("ses_kid".to_string(), Status::Busy)].into(),
            ..Snapshot::default()
        });
        assert_eq!(late.session.as_deref(), Some("ses_kid"));
        late.mark_child("ses_kid");
        assert_eq!(late.session, None);
        late.apply(&ServerEvent::Status {
            session: "ses_root".into(),
            status: Status::Busy,
        });
        assert_eq!(late.session.as_deref(), Some("ses_root"));
    }
}
