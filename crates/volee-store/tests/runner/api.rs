//! The store's API, one behaviour per test.

use std::fs;
use std::path::Path;

use volee_store::{
    read_transcript, CompactionRecord, Health, Message, Role, Store, StoreError, ToolCall,
    ToolFunction, TranscriptItem, OUTCOME_UNKNOWN, SCHEMA_VERSION,
};

use crate::session_with;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path().join("sessions"));
    (dir, store)
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: Some(id.into()),
        function: ToolFunction {
            index: Some(0),
            name: "shell".into(),
            arguments: serde_json::json!({"cmd": "touch x"}),
        },
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn checkpoint_round_trips_and_files_are_private() {
    let (tmp, store) = store();
    let mut w = store
        .create(volee_store::NewSession {
            title: "t".into(),
            project_root: tmp.path().into(),
            model: "gemma4".into(),
        })
        .unwrap();
    w.push_message(Message::system("be brief")).unwrap();
    w.push_message(Message::user("hello")).unwrap();
    w.state_mut().scratchpad = "notes".into();
    w.state_mut().todos.push(volee_store::Todo {
        text: "fix".into(),
        done: false,
    });
    w.state_mut().usage.prompt_tokens = 12;
    *w.state_mut()
        .retry_counts
        .entry("model_error".into())
        .or_default() += 1;
    w.checkpoint().unwrap();
    let loaded = store.load(w.id()).unwrap();
    assert_eq!(&loaded, w.state());
    assert_eq!(loaded.last_seq, 2);
    let t = read_transcript(&store, w.id()).unwrap();
    assert_eq!(t.items.len(), 2);
    assert!(!t.torn_tail);
    let dir = store.session_dir(w.id());
    assert_eq!(mode(store.root()), 0o700);
    assert_eq!(mode(&dir), 0o700);
    for f in [
        "session.json",
        "meta.json",
        "transcript.jsonl",
        "compactions.jsonl",
        "lock",
    ] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
    assert_eq!(
        fs::read_to_string(dir.join("lock")).unwrap().trim(),
        std::process::id().to_string()
    );
}

#[test]
fn a_second_writer_is_refused_naming_the_holder() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 1);
    let w = store.open_writer(&id).unwrap();
    for attempt in [
        store.open_writer(&id).map(|_| ()),
        store.rename(&id, "x").map(|_| ()),
        store.set_archived(&id, true).map(|_| ()),
        store.delete(&id).map(|_| ()),
        store.open_for_resume(&id, tmp.path()).map(|_| ()),
    ] {
        match attempt {
            Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
    }
    // Readers never block.
    assert_eq!(store.list(false).unwrap().len(), 1);
    store.export(&id).unwrap();
    store.info(&id).unwrap();
    store.search("message", false).unwrap();
    drop(w);
    store.rename(&id, "renamed").unwrap();
    assert_eq!(store.load(&id).unwrap().title, "renamed");
}

#[test]
fn archived_sessions_must_be_unarchived_before_resuming() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 1);
    store.set_archived(&id, true).unwrap();
    assert!(store.list(false).unwrap().is_empty());
    assert_eq!(store.list(true).unwrap().len(), 1);
    assert!(matches!(
        store.open_for_resume(&id, tmp.path()),
        Err(StoreError::Archived { .. })
    ));
    store.set_archived(&id, false).unwrap();
    store.open_for_resume(&id, tmp.path()).unwrap();
}

#[test]
fn resume_in_another_project_is_refused() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 1);
    let other = tempfile::tempdir().unwrap();
    match store.open_for_resume(&id, other.path()) {
        Err(StoreError::ProjectMismatch { recorded, .. }) => assert_eq!(recorded, tmp.path()),
        other => panic!("expected ProjectMismatch, got {other:?}"),
    }
    // The same directory by another spelling is the same project.
    let dotted = tmp.path().join(".");
    store.open_for_resume(&id, &dotted).unwrap();
}

#[test]
fn interrupted_tool_calls_get_outcome_unknown_and_are_never_replayed() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 1);
    {
        let mut w = store.open_for_resume(&id, tmp.path()).unwrap();
        let mut a = Message::assistant("");
        a.tool_calls = vec![call("call_1"), call("call_2")];
        w.push_message(a).unwrap();
        w.begin_tool_call(call("call_1"));
        w.begin_tool_call(call("call_2"));
        w.checkpoint().unwrap();
        w.finish_tool_call("call_1", "done").unwrap();
        w.checkpoint().unwrap();
        // Dropped here with call_2 pending: as if the process died while it ran.
    }
    let w = store.open_for_resume(&id, tmp.path()).unwrap();
    assert!(w.state().pending_tool_calls.is_empty());
    let last = w.state().messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.tool_call_id.as_deref(), Some("call_2"));
    assert_eq!(last.content, OUTCOME_UNKNOWN);
    assert_eq!(w.state().tool_counts["shell"], 2);
    drop(w);
    let t = read_transcript(&store, &id).unwrap().items;
    let answers = |cid: &str| {
        t.iter()
            .filter(|l| matches!(&l.item, TranscriptItem::Message { message } if message.tool_call_id.as_deref() == Some(cid)))
            .count()
    };
    assert_eq!(answers("call_1"), 1);
    assert_eq!(answers("call_2"), 1);
    assert!(t.iter().any(|l| matches!(&l.item, TranscriptItem::Interrupted { tool_call_ids } if tool_call_ids == &["call_2"])));
    // A second resume has nothing to answer.
    let before = t.len();
    drop(store.open_for_resume(&id, tmp.path()).unwrap());
    assert_eq!(read_transcript(&store, &id).unwrap().items.len(), before);
}

#[test]
fn fork_is_an_independent_copy_with_its_parent() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 3);
    let fork = store.fork(&id).unwrap();
    assert_ne!(fork, id);
    let f = store.load(&fork).unwrap();
    let s = store.load(&id).unwrap();
    assert_eq!(f.parent_id.as_deref(), Some(id.as_str()));
    assert_eq!(f.forked_at_seq, Some(3));
    assert_eq!(f.messages, s.messages);
    assert_eq!(f.title, "Cache investigation (fork)");
    let ft = read_transcript(&store, &fork).unwrap().items;
    let st = read_transcript(&store, &id).unwrap().items;
    assert_eq!(&ft[..3], &st[..]);
    assert!(
        matches!(&ft[3].item, TranscriptItem::Forked { parent_id, parent_seq: 3 } if parent_id == &id)
    );
    // Writing to the fork leaves the source alone.
    let mut w = store.open_for_resume(&fork, tmp.path()).unwrap();
    w.push_message(Message::user("only in the fork")).unwrap();
    w.checkpoint().unwrap();
    drop(w);
    assert_eq!(store.load(&id).unwrap(), s);
    assert_eq!(read_transcript(&store, &id).unwrap().items, st);
    assert_eq!(read_transcript(&store, &fork).unwrap().items.len(), 5);
}

#[test]
fn delete_removes_everything() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 1);
    let keep = session_with(&store, tmp.path(), 1);
    store.delete(&id).unwrap();
    assert!(!store.session_dir(&id).exists());
    assert!(matches!(store.load(&id), Err(StoreError::UnknownId { .. })));
    let listed: Vec<String> = store
        .list(true)
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(listed, vec![keep]);
    // Nothing left behind under the root.
    assert_eq!(fs::read_dir(store.root()).unwrap().count(), 1);
}

#[test]
fn bad_ids_are_clear_errors() {
    let (tmp, store) = store();
    for bad in ["../etc", "a/b", "..", ""] {
        assert!(
            matches!(store.resolve(bad), Err(StoreError::InvalidId { .. })),
            "{bad}"
        );
        assert!(matches!(
            store.delete(bad),
            Err(StoreError::InvalidId { .. })
        ));
    }
    assert!(matches!(
        store.resolve("zzzz"),
        Err(StoreError::UnknownId { .. })
    ));
    // Two sessions with a shared prefix: the prefix is ambiguous, a longer one resolves.
    fs::create_dir_all(store.root()).unwrap();
    let a = session_with(&store, tmp.path(), 0);
    let b = session_with(&store, tmp.path(), 0);
    let a2 = format!("{}x", &a[..4]);
    fs::rename(store.session_dir(&b), store.session_dir(&a2)).unwrap();
    match store.resolve(&a[..4]) {
        Err(StoreError::Ambiguous { candidates, .. }) => assert_eq!(candidates.len(), 2),
        other => panic!("expected Ambiguous, got {other:?}"),
    }
    assert_eq!(store.resolve(&a[..6]).unwrap(), a);
    assert_eq!(store.resolve(&a).unwrap(), a);
}

#[test]
fn a_corrupt_session_is_listed_as_damaged_never_overwritten_and_hides_nothing() {
    let (tmp, store) = store();
    let good = session_with(&store, tmp.path(), 2);
    let bad = session_with(&store, tmp.path(), 2);
    let path = store.session_dir(&bad).join("session.json");
    let bytes = fs::read(&path).unwrap();
    // Truncated mid-file.
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let listed = store.list(false).unwrap();
    assert_eq!(listed.len(), 2);
    let b = listed.iter().find(|l| l.id == bad).unwrap();
    assert!(matches!(b.health, Health::Damaged { .. }), "{b:?}");
    let g = listed.iter().find(|l| l.id == good).unwrap();
    assert_eq!(g.health, Health::Ok);
    for attempt in [
        store.open_writer(&bad).map(|_| ()),
        store.rename(&bad, "x").map(|_| ()),
        store.set_archived(&bad, true).map(|_| ()),
        store.export(&bad).map(|_| ()),
        store.fork(&bad).map(|_| ()),
    ] {
        assert!(
            matches!(attempt, Err(StoreError::Corrupt { .. })),
            "{attempt:?}"
        );
    }
    assert_eq!(fs::read(&path).unwrap(), &bytes[..bytes.len() / 2]);
    // Garbage of the same length is caught when the session is opened.
    let mut garbage = bytes.clone();
    garbage[0] = b'x';
    fs::write(&path, &garbage).unwrap();
    assert!(matches!(store.load(&bad), Err(StoreError::Corrupt { .. })));
    // A damaged session can be deleted.
    store.delete(&bad).unwrap();
    assert_eq!(store.list(false).unwrap().len(), 1);
}

#[test]
fn a_session_of_a_newer_schema_is_refused_and_listed() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 1);
    let dir = store.session_dir(&id);
    let newer = SCHEMA_VERSION + 1;
    for f in ["session.json", "meta.json"] {
        let mut v: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join(f)).unwrap()).unwrap();
        v["schema_version"] = newer.into();
        v["messages"] = serde_json::json!("a shape this volee does not know");
        fs::write(dir.join(f), serde_json::to_vec(&v).unwrap()).unwrap();
    }
    assert!(matches!(
        store.open_writer(&id),
        Err(StoreError::NewerSchema { found, .. }) if found == newer
    ));
    let listed = store.list(false).unwrap();
    assert_eq!(
        listed[0].health,
        Health::NewerSchema {
            schema_version: newer
        }
    );
    // Without meta.json the newer session.json is recognised too.
    fs::remove_file(dir.join("meta.json")).unwrap();
    assert!(matches!(
        store.list(false).unwrap()[0].health,
        Health::NewerSchema { .. }
    ));
}

#[test]
fn listing_rebuilds_a_missing_meta_from_the_session() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 2);
    fs::remove_file(store.session_dir(&id).join("meta.json")).unwrap();
    let listed = store.list(false).unwrap();
    assert_eq!(listed[0].health, Health::Ok);
    assert_eq!(listed[0].meta.as_ref().unwrap().message_count, 2);
}

#[test]
fn export_holds_everything_with_secrets_redacted() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 0);
    let mut w = store.open_writer(&id).unwrap();
    w.push_message(Message::user(
        "use OPENAI_API_KEY=abcdefgh12345 and Authorization: Bearer tok_abcdefghijk",
    ))
    .unwrap();
    w.compact(
        CompactionRecord {
            summary: "the key was sk-abcdefghijklmnopqrstu".into(),
            replaced_messages: 1,
            tokens_before: 100,
            tokens_after: 10,
            model: "gemma4".into(),
            seq: 0,
            at_ms: 0,
        },
        vec![Message::user("summary")],
    )
    .unwrap();
    w.checkpoint().unwrap();
    drop(w);
    let doc = store.export(&id).unwrap();
    let text = serde_json::to_string(&doc).unwrap();
    for secret in [
        "abcdefgh12345",
        "tok_abcdefghijk",
        "sk-abcdefghijklmnopqrstu",
    ] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert_eq!(doc.transcript.len(), 2);
    assert_eq!(doc.compactions.len(), 1);
    assert_eq!(doc.compactions[0].seq, 2);
    assert_eq!(doc.session.messages, vec![Message::user("summary")]);
    assert_eq!(doc.session.compaction_count, 1);
    // The transcript on disk is redacted too; the context keeps what the model needs.
    let raw = fs::read_to_string(store.session_dir(&id).join("transcript.jsonl")).unwrap();
    assert!(!raw.contains("abcdefgh12345"));
}

#[test]
fn a_torn_transcript_tail_is_cut_by_the_next_writer_and_numbering_continues() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 2);
    let path = store.session_dir(&id).join("transcript.jsonl");
    // A complete line past the checkpoint, then a torn one.
    let line = serde_json::to_string(&volee_store::TranscriptLine {
        seq: 3,
        at_ms: 0,
        item: TranscriptItem::Message {
            message: Message::user("written, not checkpointed"),
        },
    })
    .unwrap();
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    use std::io::Write;
    write!(f, "{line}\n{{\"seq\":4,\"at_ms\"").unwrap();
    drop(f);
    let r = read_transcript(&store, &id).unwrap();
    assert_eq!(r.items.len(), 3);
    assert!(r.torn_tail);
    let mut w = store.open_writer(&id).unwrap();
    w.push_message(Message::user("after")).unwrap();
    w.checkpoint().unwrap();
    drop(w);
    let r = read_transcript(&store, &id).unwrap();
    assert!(!r.torn_tail);
    let seqs: Vec<u64> = r.items.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    assert!(matches!(
        r.items[3].item,
        TranscriptItem::Recovered {
            checkpoint_seq: 2,
            last_seq: 3
        }
    ));
    // The context resumed from the checkpoint: message 3 is in the transcript only.
    assert_eq!(store.load(&id).unwrap().messages.len(), 3);
}

#[test]
fn search_finds_titles_and_transcripts_with_snippets() {
    let (tmp, store) = store();
    let a = session_with(&store, tmp.path(), 0);
    let mut w = store.open_writer(&a).unwrap();
    w.push_message(Message::user("Why is the build SLOW on Mondays?"))
        .unwrap();
    w.checkpoint().unwrap();
    drop(w);
    let b = session_with(&store, tmp.path(), 2);
    store.rename(&b, "Slow build").unwrap();
    let hits = store.search("slow", false).unwrap();
    assert_eq!(hits.len(), 2);
    let ha = hits.iter().find(|h| h.id == a).unwrap();
    assert_eq!(ha.transcript_matches, 1);
    assert_eq!(ha.snippets[0].text, "Why is the build SLOW on Mondays?");
    assert!(!ha.title_matches);
    let hb = hits.iter().find(|h| h.id == b).unwrap();
    assert!(hb.title_matches);
    assert!(store.search("absent", false).unwrap().is_empty());
    store.set_archived(&a, true).unwrap();
    assert_eq!(store.search("slow", false).unwrap().len(), 1);
    assert_eq!(store.search("slow", true).unwrap().len(), 2);
}

#[test]
fn a_torn_compaction_line_is_tolerated_and_cut_by_the_next_writer() {
    let (tmp, store) = store();
    let id = session_with(&store, tmp.path(), 2);
    let mut w = store.open_writer(&id).unwrap();
    let record = CompactionRecord {
        summary: "two messages".into(),
        replaced_messages: 2,
        tokens_before: 20,
        tokens_after: 5,
        model: "m".into(),
        seq: 0,
        at_ms: 0,
    };
    w.compact(record, vec![Message::user("summary")]).unwrap();
    w.checkpoint().unwrap();
    drop(w);
    let path = store.session_dir(&id).join("compactions.jsonl");
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    use std::io::Write;
    write!(f, "{{\"summary\":\"cut off").unwrap();
    drop(f);
    let doc = store.export(&id).unwrap();
    assert_eq!(doc.compactions.len(), 1);
    drop(store.open_writer(&id).unwrap());
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.ends_with('\n'));
}
