//! `Store::import` (`volee agent --import`): the round trip, and corrupted exports each refused
//! at its JSON path with nothing written.

use std::fs;
use std::path::{Path, PathBuf};

use volee_store::{
    CompactionRecord, ExportDocument, ImportOptions, Message, NewSession, Store, StoreError,
    ToolCall, ToolFunction, TranscriptItem, OUTCOME_UNKNOWN, REDACTED,
};

fn call(id: Option<&str>, name: &str) -> ToolCall {
    ToolCall {
        id: id.map(str::to_string),
        function: ToolFunction {
            index: Some(0),
            name: name.into(),
            arguments: serde_json::json!({"command": "ls"}),
        },
    }
}

/// A session with what an export can hold: a secret in a prompt, a call with an id and one
/// without, both answered, a compaction, and a call left pending. Its id.
fn rich_session(store: &Store, project: &Path) -> String {
    let mut w = store
        .create(NewSession {
            title: "Import me".into(),
            project_root: project.to_path_buf(),
            model: "gemma4".into(),
        })
        .unwrap();
    w.push_message(Message::system("be brief")).unwrap();
    w.push_message(Message::user(
        "use OPENAI_API_KEY=abcdefgh1234 and list files",
    ))
    .unwrap();
    let mut a = Message::assistant("");
    a.tool_calls = vec![call(Some("call_1"), "shell"), call(None, "read_file")];
    w.push_message(a.clone()).unwrap();
    for c in &a.tool_calls {
        w.begin_tool_call(c.clone());
    }
    w.checkpoint().unwrap();
    w.finish_tool_call("call_1", "a.txt\nb.txt").unwrap();
    w.finish_tool_call("read_file", "contents").unwrap();
    w.push_message(Message::assistant("two files")).unwrap();
    w.push_message(Message::user("next question")).unwrap();
    let context = vec![
        Message::system("be brief"),
        Message::user("Summary of the conversation so far:\nlisted two files"),
        Message::assistant("Understood."),
        Message::user("next question"),
    ];
    w.compact(
        CompactionRecord {
            summary: "listed two files".into(),
            replaced_messages: 5,
            tokens_before: 900,
            tokens_after: 100,
            model: "gemma4".into(),
            seq: 0,
            at_ms: 0,
        },
        context,
    )
    .unwrap();
    let mut b = Message::assistant("");
    b.tool_calls = vec![call(Some("call_2"), "shell")];
    w.push_message(b.clone()).unwrap();
    w.begin_tool_call(b.tool_calls[0].clone());
    w.checkpoint().unwrap();
    w.id().to_string()
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    project: PathBuf,
    store: Store,
    id: String,
    doc: ExportDocument,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let project = dir.join("project");
    fs::create_dir(&project).unwrap();
    let store = Store::new(dir.join("sessions"));
    let id = rich_session(&store, &project);
    let doc = store.export(&id).unwrap();
    Fixture {
        _tmp: tmp,
        dir,
        project,
        store,
        id,
        doc,
    }
}

fn entries(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path
}

/// The export minus what an import changes: the id, the provenance, the export's time.
fn comparable(doc: &ExportDocument) -> serde_json::Value {
    let mut v = serde_json::to_value(doc).unwrap();
    v["exported_at_ms"] = 0.into();
    v["session"]["id"] = "".into();
    v["session"]
        .as_object_mut()
        .unwrap()
        .remove("imported_from");
    v
}

#[test]
fn export_import_export_is_identical_except_id_and_provenance() {
    let f = fixture();
    let file = write(
        &f.dir,
        "export.json",
        &serde_json::to_vec_pretty(&f.doc).unwrap(),
    );
    let imported = f.store.import(&file, &ImportOptions::default()).unwrap();
    assert_ne!(imported.id, f.id);
    assert_eq!(imported.original_id, f.id);
    assert!(!imported.recovered_tail);
    let again = f.store.export(&imported.id).unwrap();
    assert_eq!(comparable(&again), comparable(&f.doc));
    let note = again.session.imported_from.clone().unwrap();
    assert_eq!(note.original_id, f.id);
    assert_eq!(note.exported_at_ms, f.doc.exported_at_ms);
    assert_eq!(note.file, file);
    // The export was redacted; the imported session keeps the redacted text.
    let dir = f.store.session_dir(&imported.id);
    for name in [
        "session.json",
        "transcript.jsonl",
        "compactions.jsonl",
        "meta.json",
    ] {
        let text = fs::read_to_string(dir.join(name)).unwrap();
        assert!(!text.contains("abcdefgh1234"), "{name}");
    }
    assert!(fs::read_to_string(dir.join("transcript.jsonl"))
        .unwrap()
        .contains(&format!("OPENAI_API_KEY={REDACTED}")));

    // It resumes like any other: the pending call is answered "outcome unknown".
    let w = f.store.open_for_resume(&imported.id, &f.project).unwrap();
    assert!(w.state().pending_tool_calls.is_empty());
    assert_eq!(w.state().messages.last().unwrap().content, OUTCOME_UNKNOWN);
    drop(w);
    // And its re-export imports again (the resumed transcript is still consistent).
    let file2 = write(
        &f.dir,
        "export2.json",
        &serde_json::to_vec(&f.store.export(&imported.id).unwrap()).unwrap(),
    );
    f.store.import(&file2, &ImportOptions::default()).unwrap();
}

#[test]
fn keep_id_keeps_a_free_id_and_refuses_a_taken_one() {
    let f = fixture();
    let file = write(&f.dir, "export.json", &serde_json::to_vec(&f.doc).unwrap());
    let keep = ImportOptions {
        keep_id: true,
        ..ImportOptions::default()
    };
    let before = entries(f.store.root());
    assert!(matches!(
        f.store.import(&file, &keep),
        Err(StoreError::IdTaken { id }) if id == f.id
    ));
    assert_eq!(entries(f.store.root()), before);
    let other = Store::new(f.dir.join("other"));
    let imported = other.import(&file, &keep).unwrap();
    assert_eq!(imported.id, f.id);
    assert_eq!(
        comparable(&other.export(&f.id).unwrap()),
        comparable(&f.doc)
    );
}

#[test]
fn project_dir_re_roots_and_a_tail_after_the_checkpoint_is_recovered() {
    let f = fixture();
    let mut doc = f.doc.clone();
    // A line written after the last checkpoint (a writer killed before its session.json).
    let seq = doc.transcript.len() as u64 + 1;
    doc.transcript.push(volee_store::TranscriptLine {
        seq,
        at_ms: 1,
        item: TranscriptItem::Event {
            name: "note".into(),
            detail: serde_json::Value::Null,
        },
    });
    let file = write(&f.dir, "tail.json", &serde_json::to_vec(&doc).unwrap());
    let elsewhere = f.dir.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let imported = f
        .store
        .import(
            &file,
            &ImportOptions {
                project_root: Some(elsewhere.clone()),
                ..ImportOptions::default()
            },
        )
        .unwrap();
    assert!(imported.recovered_tail);
    let state = f.store.load(&imported.id).unwrap();
    assert_eq!(state.project_root, fs::canonicalize(&elsewhere).unwrap());
    assert_eq!(state.last_seq, seq + 1);
    let t = volee_store::read_transcript(&f.store, &imported.id).unwrap();
    assert!(matches!(
        t.items.last().unwrap().item,
        TranscriptItem::Recovered { checkpoint_seq, last_seq } if checkpoint_seq == seq - 1 && last_seq == seq
    ));
    assert!(f.store.open_for_resume(&imported.id, &elsewhere).is_ok());
}

/// A corrupted export and where and why it must be refused.
struct Variant {
    name: &'static str,
    bytes: Vec<u8>,
    opts: ImportOptions,
    /// The JSON path of the first problem (exact), or None for a newer schema.
    path: Option<&'static str>,
    /// A word of its reason.
    reason: &'static str,
}

#[test]
fn corrupted_exports_are_refused_at_their_path_and_nothing_is_written() {
    let f = fixture();
    let good = serde_json::to_value(&f.doc).unwrap();
    let opts = ImportOptions::default;
    let value = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        edit(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    let typed = |edit: &dyn Fn(&mut ExportDocument)| {
        let mut d = f.doc.clone();
        edit(&mut d);
        serde_json::to_vec(&d).unwrap()
    };
    // Renumber after inserting or removing lines, so only the invariant under test breaks.
    let renumber = |d: &mut ExportDocument| {
        for (i, l) in d.transcript.iter_mut().enumerate() {
            l.seq = i as u64 + 1;
        }
        let at = d
            .transcript
            .iter()
            .position(|l| matches!(l.item, TranscriptItem::Compaction { .. }))
            .unwrap();
        d.compactions[0].seq = at as u64 + 1;
        d.session.last_seq = d.transcript.len() as u64;
    };
    let tool_result_line = |d: &ExportDocument, id: &str| {
        d.transcript
            .iter()
            .position(|l| matches!(&l.item, TranscriptItem::Message { message } if message.tool_call_id.as_deref() == Some(id)))
            .unwrap()
    };
    let full = serde_json::to_vec(&good).unwrap();
    let v = |name, bytes, path, reason| Variant {
        name,
        bytes,
        opts: opts(),
        path,
        reason,
    };
    let variants = vec![
        v(
            "missing field",
            value(&|v| {
                v["session"]
                    .as_object_mut()
                    .unwrap()
                    .remove("created_at_ms");
            }),
            Some("$.session"),
            "missing field `created_at_ms`",
        ),
        v(
            "missing transcript",
            value(&|v| {
                v.as_object_mut().unwrap().remove("transcript");
            }),
            Some("$"),
            "missing field `transcript`",
        ),
        v(
            "wrong type",
            value(&|v| v["transcript"][1]["seq"] = "two".into()),
            Some("$.transcript[1].seq"),
            "expected u64",
        ),
        v(
            "negative number",
            value(&|v| v["session"]["usage"]["prompt_tokens"] = (-5).into()),
            Some("$.session.usage.prompt_tokens"),
            "-5",
        ),
        v(
            "unknown transcript kind",
            value(&|v| v["transcript"][0]["item"]["kind"] = "teleport".into()),
            Some("$.transcript[0].item.kind"),
            "teleport",
        ),
        v(
            "unknown role",
            value(&|v| v["session"]["messages"][0]["role"] = "robot".into()),
            Some("$.session.messages[0].role"),
            "robot",
        ),
        v(
            "truncated JSON",
            full[..full.len() / 2].to_vec(),
            None,
            "EOF",
        ),
        v(
            "trailing garbage",
            [full.as_slice(), b" {}"].concat(),
            Some("$"),
            "trailing characters",
        ),
        v(
            "seq not increasing",
            typed(&|d| d.transcript[2].seq = 1),
            Some("$.transcript[2].seq"),
            "must increase",
        ),
        v(
            "duplicate seq",
            typed(&|d| d.transcript[2].seq = 2),
            Some("$.transcript[2].seq"),
            "repeats",
        ),
        v(
            "gap in seq",
            typed(&|d| d.transcript[2].seq = 7),
            Some("$.transcript[2].seq"),
            "was due",
        ),
        v(
            "checkpoint beyond the transcript",
            typed(&|d| d.session.last_seq = 99),
            Some("$.session.last_seq"),
            "99",
        ),
        v(
            "tool call answered twice",
            typed(&|d| {
                let at = tool_result_line(d, "call_1");
                let copy = d.transcript[at].clone();
                d.transcript.insert(at + 1, copy);
                renumber(d);
            }),
            Some("$.transcript[4].item.message.tool_call_id"),
            "a second time",
        ),
        v(
            "tool call never answered",
            typed(&|d| {
                let at = tool_result_line(d, "call_1");
                d.transcript.remove(at);
                renumber(d);
            }),
            Some("$.transcript[2].item.message.tool_calls[0]"),
            "never answered",
        ),
        v(
            "answer to a call never made",
            typed(&|d| {
                let at = tool_result_line(d, "call_1");
                if let TranscriptItem::Message { message } = &mut d.transcript[at].item {
                    message.tool_call_id = Some("call_nope".into());
                }
            }),
            Some("$.transcript[3].item.message.tool_call_id"),
            "call_nope",
        ),
        v(
            "duplicate tool call id",
            typed(&|d| {
                let at = d.transcript.len() - 1;
                if let TranscriptItem::Message { message } = &mut d.transcript[at].item {
                    message.tool_calls[0].id = Some("call_1".into());
                }
                d.session.pending_tool_calls.clear();
            }),
            Some("$.transcript[8].item.message.tool_calls[0].id"),
            "used before",
        ),
        v(
            "pending call already answered",
            typed(&|d| {
                let c = d.session.pending_tool_calls[0].clone();
                d.session
                    .pending_tool_calls
                    .push(volee_store::PendingToolCall {
                        call: call(Some("call_1"), "shell"),
                        ..c
                    });
            }),
            Some("$.session.pending_tool_calls[1].call"),
            "answered",
        ),
        v(
            "context message not in the transcript",
            typed(&|d| d.session.messages[3].content = "edited".into()),
            Some("$.session.messages[3]"),
            "not in the transcript",
        ),
        v(
            "compaction naming no compaction",
            typed(&|d| d.compactions[0].seq = 1),
            Some("$.compactions[0].seq"),
            "not a compaction",
        ),
        v(
            "bad id characters",
            typed(&|d| d.session.id = "../etc".into()),
            Some("$.session.id"),
            "path separator",
        ),
        v(
            "newer export schema",
            value(&|v| v["schema_version"] = 7.into()),
            None,
            "version 7",
        ),
        v(
            "newer session schema",
            value(&|v| {
                v["session"]["schema_version"] = 3.into();
                v["session"]["messages"] = "a newer shape".into();
            }),
            None,
            "version 3",
        ),
        v(
            "project root missing",
            typed(&|d| d.session.project_root = "/nonexistent/volee-import".into()),
            Some("$.session.project_root"),
            "--project",
        ),
        Variant {
            name: "larger than the bound",
            bytes: full.clone(),
            opts: ImportOptions {
                max_bytes: 1000,
                ..opts()
            },
            path: Some("$"),
            reason: "up to 1000 bytes",
        },
        Variant {
            name: "--project not a directory",
            bytes: full.clone(),
            opts: ImportOptions {
                project_root: Some(f.dir.join("missing")),
                ..opts()
            },
            path: Some("--project"),
            reason: "not a directory",
        },
    ];
    assert!(variants.len() >= 20);
    let before = entries(f.store.root());
    let mut failures = Vec::new();
    for (n, variant) in variants.iter().enumerate() {
        let file = write(&f.dir, &format!("bad-{n}.json"), &variant.bytes);
        let result = f.store.import(&file, &variant.opts);
        let ok = match (&result, variant.path) {
            (Err(StoreError::ImportRefused { problems, .. }), Some(path)) => {
                problems[0].path == path && problems[0].reason.contains(variant.reason)
            }
            (Err(StoreError::ImportRefused { problems, .. }), None) => {
                problems[0].reason.contains(variant.reason)
            }
            (Err(e @ StoreError::ImportNewerSchema { supported: 1, .. }), None) => {
                e.to_string().contains(variant.reason)
            }
            _ => false,
        };
        if !ok {
            failures.push(format!("{}: {:?}", variant.name, result.map(|i| i.id)));
        }
        assert_eq!(
            entries(f.store.root()),
            before,
            "{} wrote something",
            variant.name
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn special_files_and_links_are_refused_unread() {
    let f = fixture();
    let real = write(&f.dir, "export.json", &serde_json::to_vec(&f.doc).unwrap());
    let link = f.dir.join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let fifo = f.dir.join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let before = entries(f.store.root());
    for path in [&link, &fifo, &f.dir] {
        match f.store.import(path, &ImportOptions::default()) {
            Err(StoreError::NotRegularFile { .. }) => {}
            other => panic!("{}: {:?}", path.display(), other.map(|i| i.id)),
        }
    }
    assert!(matches!(
        f.store
            .import(&f.dir.join("absent.json"), &ImportOptions::default()),
        Err(StoreError::Io { .. })
    ));
    assert_eq!(entries(f.store.root()), before);
}

#[test]
fn several_problems_are_listed_at_most_five() {
    let f = fixture();
    let mut d = f.doc.clone();
    d.session.id = "bad id".into();
    for m in d.transcript.iter_mut() {
        if let TranscriptItem::Message { message } = &mut m.item {
            if message.tool_call_id.is_some() {
                message.tool_call_id = Some("call_nope".into());
            }
        }
    }
    d.compactions.push(d.compactions[0].clone());
    d.compactions.push(d.compactions[0].clone());
    for c in d.compactions.iter_mut() {
        c.seq = 1000;
    }
    let problems = volee_store::check_export(&d);
    assert_eq!(problems.len(), volee_store::MAX_PROBLEMS, "{problems:?}");
    assert_eq!(problems[0].path, "$.session.id");
}
