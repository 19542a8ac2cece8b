//! Fuzz what volee makes of the JSON that harnesses' own servers send (`volee-listing`):
//! `cargo +nightly fuzz run listing_json` (from `fuzz/`). The input is one JSON document, read
//! as each of Codex's app-server answers (a `Thread`, a `ThreadStatus`, a JSON-RPC message, a
//! page of threads) and each of OpenCode's (an event, the snapshot's three answers, a stream of
//! events folded by `ServerView`): never panic, keep evidence short, never guess a thread.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use volee_listing::codex::rpc::{classify, Incoming};
use volee_listing::codex::{match_thread, CodexThread, ThreadStatus, CREATED_SLACK_SECS};
use volee_listing::opencode::{parse_event, parse_snapshot, ServerEvent, ServerView};
use volee_protocol::AgentState;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    codex(&v);
    opencode(&v);
});

fn codex(v: &Value) {
    let status = ThreadStatus::from_json(v);
    let _ = status.describe();
    if let ThreadStatus::Active {
        waiting_on_approval,
        waiting_on_input,
        ..
    } = &status
    {
        let asks = *waiting_on_approval || *waiting_on_input;
        assert_eq!(status.state() == Some(AgentState::NeedsYou), asks);
    }
    if let Some(t) = CodexThread::from_json(v) {
        assert!(!t.id.is_empty());
        let _ = (t.state(), t.is_user_thread());
    }
    match classify(v, 1) {
        Incoming::Answer(_) | Incoming::Failed { .. } => {
            assert!(v.get("method").is_none());
            assert_eq!(v.get("id").and_then(Value::as_u64), Some(1));
        }
        Incoming::Request(id) => {
            assert!(v.get("method").is_some());
            assert_eq!(v.get("id"), Some(&id));
        }
        Incoming::Other => {}
    }
    let Some(items) = v.as_array() else { return };
    let threads: Vec<CodexThread> = items.iter().filter_map(CodexThread::from_json).collect();
    for t in &threads {
        let prompt = (!t.preview.is_empty()).then_some(t.preview.as_str());
        if let Some(found) = match_thread(&threads, &t.cwd, prompt, t.created_at) {
            assert!(found.is_user_thread());
            // Never a guess: the match is the only candidate.
            let others = threads.iter().filter(|o| {
                o.is_user_thread()
                    && std::path::Path::new(&o.cwd) == std::path::Path::new(&t.cwd)
                    && o.created_at >= t.created_at.saturating_sub(CREATED_SLACK_SECS)
                    && prompt.is_none_or(|p| o.preview.trim().starts_with(p.trim()))
            });
            assert_eq!(others.count(), 1);
        }
    }
}

fn opencode(v: &Value) {
    if let Some(ev) = parse_event(v) {
        check_event(&ev);
    }
    let Some(items) = v.as_array() else { return };
    if let [status, permissions, questions, ..] = items.as_slice() {
        if let Some(snap) = parse_snapshot(status, permissions, questions) {
            let mut view = ServerView::new(None);
            view.apply_snapshot(&snap);
            check_view(&view);
        }
    }
    let mut view = ServerView::new(None);
    for item in items {
        if let Some(ev) = parse_event(item) {
            check_event(&ev);
            view.apply(&ev);
            check_view(&view);
        }
    }
}

fn check_event(ev: &ServerEvent) {
    let short = |s: &str| assert!(s.chars().count() <= 80 && !s.chars().any(char::is_control));
    let id = |s: &str| assert!(!s.is_empty() && s.len() <= 200);
    match ev {
        ServerEvent::Connected | ServerEvent::Disposed => {}
        ServerEvent::SessionTokens { session, model, .. } => {
            id(session);
            if let Some(m) = model {
                short(m);
            }
        }
        ServerEvent::StepFinished { session, part } => {
            id(session);
            id(part);
        }
        ServerEvent::SessionCreated { session, .. } | ServerEvent::Idle { session } => id(session),
        ServerEvent::Status { session, .. } => id(session),
        ServerEvent::PermissionAsked {
            session,
            id: rid,
            permission,
        } => {
            id(session);
            id(rid);
            short(permission);
        }
        ServerEvent::PermissionReplied {
            session,
            id: rid,
            reply,
        } => {
            id(session);
            id(rid);
            short(reply);
        }
        ServerEvent::QuestionAsked {
            session,
            id: rid,
            header,
        } => {
            id(session);
            id(rid);
            short(header);
        }
        ServerEvent::QuestionAnswered { session, id: rid } => {
            id(session);
            id(rid);
        }
        ServerEvent::Error { session, name, .. } => {
            if let Some(s) = session {
                id(s);
            }
            short(name);
        }
    }
}

fn check_view(view: &ServerView) {
    if let Some((_, evidence)) = view.observation() {
        // "server: status retry #N " + 80 characters at most.
        assert!(evidence.chars().count() <= 140, "{evidence}");
    }
}
