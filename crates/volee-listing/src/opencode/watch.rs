//! One task (not a process) per live OpenCode agent with a server port: subscribe to the event
//! stream, take a snapshot, report every event; again after a drop, with growing pauses. The
//! caller's actor keeps [`Watches`] and folds the [`Update`]s it is sent into states.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use volee_protocol::AgentState;

use super::events::{parse_event, parse_snapshot, ServerEvent, ServerView, Snapshot};
use super::http::{HttpError, Server};

/// Waits between connection attempts (the server comes up seconds after the process starts).
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long volee keeps trying to hand a resumed session its first prompt, from the moment its
/// server answers (the TUI may take many seconds more to listen on a loaded machine).
const PROMPT_DEADLINE: Duration = Duration::from_secs(90);

/// A state with its evidence (`server: status busy`).
pub type Observation = Option<(AgentState, String)>;

/// What a watch task reports to the daemon's actor.
#[derive(Debug, Clone)]
pub enum Update {
    /// A (re)connection's snapshot.
    Snapshot(Snapshot),
    Event(ServerEvent),
    /// A session's `parentID` was read: it is a sub-session.
    Child(String),
    /// The resumed session's first prompt was handed to the TUI (or could not be).
    PromptDelivered(Result<u32, String>),
}

/// Where the watch tasks report: (agent id, update).
pub type Report = Arc<dyn Fn(String, Update) + Send + Sync>;

/// One task per live OpenCode agent with a server port.
#[derive(Default)]
pub struct Watches {
    tasks: HashMap<String, (u16, tokio::task::AbortHandle)>,
    views: HashMap<String, ServerView>,
}

/// An agent that should be watched.
pub struct Wanted {
    pub id: String,
    pub port: u16,
    pub session: Option<String>,
    /// A resumed session's first prompt still to hand over.
    pub prompt: Option<String>,
}

impl Watches {
    /// Start tasks for new agents, end those of agents no longer wanted.
    pub fn sync(&mut self, wanted: Vec<Wanted>, report: &Report) {
        let keep: HashMap<&str, u16> = wanted.iter().map(|w| (w.id.as_str(), w.port)).collect();
        self.tasks.retain(|id, (port, task)| {
            let live = keep.get(id.as_str()) == Some(port);
            if !live {
                task.abort();
            }
            live
        });
        self.views.retain(|id, _| keep.contains_key(id.as_str()));
        for w in wanted {
            if self.tasks.contains_key(&w.id) {
                continue;
            }
            tracing::info!(
                "agent {}: watching OpenCode's server on 127.0.0.1:{}",
                w.id,
                w.port
            );
            self.views
                .entry(w.id.clone())
                .or_insert_with(|| ServerView::new(w.session.clone()));
            let report = Arc::clone(report);
            let (id, port, prompt) = (w.id.clone(), w.port, w.prompt);
            let task = tokio::spawn(watch(id.clone(), port, prompt, report));
            self.tasks.insert(id, (port, task.abort_handle()));
        }
    }

    /// Take an update in; the agent's (state, evidence) and session id when known.
    pub fn apply(&mut self, id: &str, update: &Update) -> Option<(Observation, Option<String>)> {
        let view = self.views.get_mut(id)?;
        match update {
            Update::Snapshot(s) => view.apply_snapshot(s),
            Update::Event(e) => view.apply(e),
            Update::Child(s) => view.mark_child(s),
            Update::PromptDelivered(_) => {}
        }
        Some((view.observation(), view.session.clone()))
    }

    /// Why agent `id` is needs_you or failed, as its server said.
    pub fn reason(&self, id: &str) -> Option<volee_protocol::Reason> {
        self.views.get(id)?.reason()
    }

    /// Agent `id`'s tokens as its server counts them for its own session (its last
    /// `session.updated`; the requests are its `step-finish` parts): None until the server
    /// said any.
    pub fn usage(&self, id: &str) -> Option<volee_protocol::AgentUsage> {
        let view = self.views.get(id)?;
        let (tokens, model) = view.tokens.clone()?;
        let port = self.tasks.get(id).map_or(0, |(p, _)| *p);
        Some(volee_protocol::AgentUsage {
            input: tokens.input,
            // Reasoning is output the model was billed for.
            output: tokens.output + tokens.reasoning,
            cache_read: tokens.cache_read,
            cache_write: tokens.cache_write,
            requests: Some(view.steps.len() as u64),
            model,
            source: format!(
                "OpenCode's server 127.0.0.1:{port}, session {}",
                view.session.as_deref().unwrap_or("?")
            ),
            cost_usd: None,
        })
    }
}

/// The life of one watch: connect, snapshot, follow the event stream; again after a drop, with
/// growing pauses, until the daemon aborts it (the agent ended).
async fn watch(id: String, port: u16, prompt: Option<String>, report: Report) {
    let server = match Server::new(port) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("agent {id}: OpenCode server 127.0.0.1:{port} not watched: {e}");
            return;
        }
    };
    let mut pause = RETRY_FIRST;
    let mut prompt = prompt;
    loop {
        match follow(&id, &server, &mut prompt, &report).await {
            Ok(()) => pause = RETRY_FIRST,
            Err(e) => tracing::trace!("agent {id}: OpenCode server 127.0.0.1:{port}: {e}"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// Open the event stream, report a snapshot, then every event until the stream ends.
async fn follow(
    id: &str,
    server: &Server,
    prompt: &mut Option<String>,
    report: &Report,
) -> Result<(), HttpError> {
    let mut events = server.events().await?;
    // Subscribed: what happened before is read now, so nothing falls between.
    let snapshot = take_snapshot(server).await?;
    let busy_sessions: Vec<String> = snapshot.statuses.keys().cloned().collect();
    report(id.to_string(), Update::Snapshot(snapshot));
    for s in busy_sessions {
        check_parent(id, server, &s, report).await;
    }
    if let Some(text) = prompt.take() {
        let deadline = tokio::time::Instant::now() + PROMPT_DEADLINE;
        let (id, report, server) = (id.to_string(), Arc::clone(report), server.clone());
        tokio::spawn(async move {
            let result = deliver_prompt(&server, &text, deadline).await;
            report(id, Update::PromptDelivered(result));
        });
    }
    while let Some(data) = events.next_data().await? {
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if let Some(ev) = parse_event(&v) {
            report(id.to_string(), Update::Event(ev));
        }
    }
    Ok(())
}

async fn take_snapshot(server: &Server) -> Result<Snapshot, HttpError> {
    let status = server.get_json("/session/status").await?;
    let permissions = server.get_json("/permission").await?;
    let questions = server.get_json("/question").await?;
    parse_snapshot(&status, &permissions, &questions)
        .ok_or_else(|| HttpError::Protocol("unexpected snapshot shapes".into()))
}

/// A session busy when volee connected may be a subagent's: `GET /session/{id}` says.
async fn check_parent(id: &str, server: &Server, session: &str, report: &Report) {
    if !session
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return;
    }
    if let Ok(info) = server.get_json(&format!("/session/{session}")).await {
        if info.get("parentID").and_then(Value::as_str).is_some() {
            report(id.to_string(), Update::Child(session.to_string()));
        }
    }
}

/// Hand a resumed session its first prompt through the TUI: clear, append, submit, then wait up
/// to 2 s for a busy session; again until the deadline. Returns the attempts it took.
///
/// A resumed session (`-s ses_…`) ignores `--prompt` in 1.18.33, so the prompt goes through the
/// TUI endpoints, repeated until the session turns busy: the server answers before the TUI
/// listens, and an early append is dropped (measured: the first attempts return `true` and do
/// nothing).
async fn deliver_prompt(
    server: &Server,
    text: &str,
    deadline: tokio::time::Instant,
) -> Result<u32, String> {
    let mut attempts = 0;
    while tokio::time::Instant::now() < deadline {
        attempts += 1;
        let sent = async {
            server
                .request(Method::POST, "/tui/clear-prompt", None)
                .await?;
            server
                .request(
                    Method::POST,
                    "/tui/append-prompt",
                    Some(&json!({ "text": text })),
                )
                .await?;
            server
                .request(Method::POST, "/tui/submit-prompt", None)
                .await
        }
        .await;
        if let Err(e) = sent {
            tracing::trace!(
                "OpenCode 127.0.0.1:{}: prompt attempt {attempts}: {e}",
                server.port()
            );
        }
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Ok(status) = server.get_json("/session/status").await {
                if status.as_object().is_some_and(|m| !m.is_empty()) {
                    return Ok(attempts);
                }
            }
        }
    }
    Err(format!(
        "the TUI did not take the prompt in {attempts} attempts"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::opencode::events::Status;
    use std::sync::Mutex;

    #[tokio::test]
    async fn watches_follow_the_wanted_agents_and_fold_their_updates() {
        // Nobody listens on the port: the task retries quietly, the updates still fold.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let got: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&got);
        let report: Report = Arc::new(move |id, _| sink.lock().unwrap().push(id));
        let mut w = Watches::default();
        let wanted = |session: Option<&str>| Wanted {
            id: "a1".into(),
            port,
            session: session.map(String::from),
            prompt: None,
        };
        w.sync(vec![wanted(Some("ses_r"))], &report);
        // A resumed session: idle as soon as the server is heard from.
        let empty = Snapshot::default();
        assert_eq!(
            w.apply("a1", &Update::Snapshot(empty)),
            Some((
                Some((AgentState::Idle, "server: status idle".into())),
                Some("ses_r".into())
            ))
        );
        let busy = Update::Event(ServerEvent::Status {
            session: "ses_r".into(),
            status: Status::Busy,
        });
        assert_eq!(
            w.apply("a1", &busy).unwrap().0.unwrap().0,
            AgentState::Working
        );
        assert_eq!(w.apply("other", &busy), None);
        // Wanted again: the same task and view; not wanted: both gone.
        w.sync(vec![wanted(None)], &report);
        assert_eq!(
            w.apply("a1", &Update::Child("ses_x".into())).unwrap().1,
            Some("ses_r".into())
        );
        w.sync(vec![], &report);
        assert_eq!(w.apply("a1", &busy), None);
        assert!(w.tasks.is_empty());
        assert!(
            got.lock().unwrap().is_empty(),
            "a dead port reports nothing"
        );
    }
}
