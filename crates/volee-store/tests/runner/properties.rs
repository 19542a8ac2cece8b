//! Property tests of the store's invariants.

use proptest::prelude::*;
use volee_store::{
    check_id, read_transcript, redact, CompactionRecord, Message, NewSession, Role, Store,
    ToolCall, ToolFunction, TranscriptItem, OUTCOME_UNKNOWN,
};

#[derive(Debug, Clone)]
enum Op {
    Push(String),
    CallTool,
    FinishTool(String),
    Compact(usize),
    Checkpoint,
    /// Drop the writer without a checkpoint (a crash of the process) and reopen for resume.
    CrashAndResume,
    Scratch(String),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => "[a-zA-Z0-9 .,]{0,40}".prop_map(Op::Push),
        1 => Just(Op::CallTool),
        1 => "[a-z ]{0,10}".prop_map(Op::FinishTool),
        1 => (0usize..5).prop_map(Op::Compact),
        3 => Just(Op::Checkpoint),
        1 => Just(Op::CrashAndResume),
        1 => "\\PC{0,20}".prop_map(Op::Scratch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the agent does, after every checkpoint: the state on disk is the writer's state,
    /// the transcript is numbered 1..=last_seq without a torn tail, and a crash loses exactly
    /// the work since the last checkpoint.
    #[test]
    fn checkpoints_are_exact_and_crashes_lose_only_unsaved_work(ops in proptest::collection::vec(op(), 1..40)) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("s"));
        let mut w = store.create(NewSession { title: "p".into(), project_root: tmp.path().into(), model: "m".into() }).unwrap();
        let id = w.id().to_string();
        let mut saved = w.state().clone();
        let mut calls = 0u32;
        for op in ops {
            match op {
                Op::Push(text) => { w.push_message(Message::user(text)).unwrap(); }
                Op::CallTool => {
                    calls += 1;
                    let call = ToolCall { id: Some(format!("c{calls}")), function: ToolFunction { index: None, name: "shell".into(), arguments: serde_json::json!({}) } };
                    let mut m = Message::assistant("");
                    m.tool_calls.push(call.clone());
                    w.push_message(m).unwrap();
                    w.begin_tool_call(call);
                }
                Op::FinishTool(out) => {
                    if let Some(cid) = w.state().pending_tool_calls.first().and_then(|p| p.call.id.clone()) {
                        w.finish_tool_call(&cid, out).unwrap();
                    }
                }
                Op::Compact(keep) => {
                    let msgs = w.state().messages.clone();
                    let kept = msgs[msgs.len().saturating_sub(keep)..].to_vec();
                    w.compact(CompactionRecord { summary: "s".into(), replaced_messages: (msgs.len() - kept.len()) as u64, tokens_before: 0, tokens_after: 0, model: "m".into(), seq: 0, at_ms: 0 }, kept).unwrap();
                }
                Op::Checkpoint => {
                    w.checkpoint().unwrap();
                    saved = w.state().clone();
                    prop_assert_eq!(&store.load(&id).unwrap(), &saved);
                }
                Op::CrashAndResume => {
                    drop(w);
                    prop_assert_eq!(&store.load(&id).unwrap(), &saved);
                    w = store.open_for_resume(&id, tmp.path()).unwrap();
                    prop_assert!(w.state().pending_tool_calls.is_empty());
                    let answered = w.state().messages.len() - saved.messages.len();
                    prop_assert_eq!(answered, saved.pending_tool_calls.len());
                    for m in &w.state().messages[saved.messages.len()..] {
                        prop_assert_eq!(m.role, Role::Tool);
                        prop_assert_eq!(m.content.as_str(), OUTCOME_UNKNOWN);
                    }
                    saved = w.state().clone();
                }
                Op::Scratch(text) => w.state_mut().scratchpad = text,
            }
            let t = read_transcript(&store, &id).unwrap();
            prop_assert!(!t.torn_tail);
            prop_assert_eq!(t.items.len() as u64, saved.last_seq);
            for (i, l) in t.items.iter().enumerate() {
                prop_assert_eq!(l.seq, i as u64 + 1);
            }
        }
        // Every message of the context since the last compaction is in the transcript, in order.
        drop(w);
        let t = read_transcript(&store, &id).unwrap().items;
        let after_compaction = t.iter().rposition(|l| matches!(l.item, TranscriptItem::Compaction { .. })).map_or(0, |p| p + 1);
        let logged: Vec<Message> = t[after_compaction..].iter().filter_map(|l| match &l.item { TranscriptItem::Message { message } => Some(message.clone()), _ => None }).collect();
        let state = store.load(&id).unwrap();
        prop_assert!(state.messages.len() >= logged.len());
        prop_assert_eq!(&state.messages[state.messages.len() - logged.len()..], &logged[..]);
    }

    /// Cutting the transcript anywhere (a writer killed mid-append) reads back exactly the
    /// complete lines before the cut.
    #[test]
    fn any_cut_of_the_transcript_reads_as_its_complete_prefix(n in 1usize..30, cut_at in 0.0f64..1.0) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("s"));
        let id = crate::session_with(&store, tmp.path(), n);
        let path = store.session_dir(&id).join("transcript.jsonl");
        let bytes = std::fs::read(&path).unwrap();
        let cut = ((bytes.len() as f64) * cut_at) as usize;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let complete = bytes[..cut].iter().filter(|b| **b == b'\n').count();
        let r = read_transcript(&store, &id).unwrap();
        prop_assert_eq!(r.items.len(), complete);
        let mid_line = cut > 0 && bytes[cut - 1] != b'\n';
        prop_assert_eq!(r.torn_tail, mid_line);
    }

    /// Planted secrets never survive redaction, and redaction is idempotent.
    #[test]
    fn planted_secrets_are_redacted(
        before in "[ -~]{0,30}",
        after in "[ -~]{0,30}",
        name in "[A-Z]{1,8}",
        secret in "[A-Za-z0-9]{12,40}",
        shape in 0usize..4,
    ) {
        let planted = match shape {
            0 => format!("{name}_API_KEY={secret}"),
            1 => format!("Authorization: Bearer {secret}"),
            2 => format!("sk-{secret}{secret}"),
            _ => format!("{name}_TOKEN: \"{secret}\""),
        };
        let text = format!("{before} {planted} {after}");
        let once = redact(&text).into_owned();
        prop_assert!(!once.contains(&secret), "{} -> {}", text, once);
        prop_assert_eq!(redact(&once).into_owned(), once);
    }

    /// Search finds any word of a transcript whatever its case, and reports its line.
    #[test]
    fn search_finds_what_was_written_in_any_case(
        words in proptest::collection::vec("[a-z]{3,8}", 1..20),
        pick in 0usize..20,
        upper in proptest::bool::ANY,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("s"));
        let id = crate::session_with(&store, tmp.path(), 0);
        let mut w = store.open_writer(&id).unwrap();
        for word in &words {
            w.push_message(Message::user(word.clone())).unwrap();
        }
        w.checkpoint().unwrap();
        drop(w);
        let word = &words[pick % words.len()];
        let query = if upper { word.to_uppercase() } else { word.clone() };
        let hits = store.search(&query, false).unwrap();
        prop_assert_eq!(hits.len(), 1);
        let expected = words.iter().filter(|w| w.contains(word.as_str())).count() as u64;
        prop_assert_eq!(hits[0].transcript_matches, expected);
        prop_assert!(hits[0].snippets[0].text.to_lowercase().contains(word.as_str()));
    }

    /// User input with a path separator or `..` never becomes a path.
    #[test]
    fn path_like_ids_are_refused(a in "[a-z0-9]{0,5}", b in "[a-z0-9]{0,5}", sep in prop_oneof![Just("/"), Just(".."), Just("\\")]) {
        let id = format!("{a}{sep}{b}");
        prop_assert!(check_id(&id).is_err());
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("s"));
        prop_assert!(store.resolve(&id).is_err());
    }
}
