//! The index over real session files: each fixture under `fixtures/home` was written by the real
//! harness program, driven by its conformance test against volee's scripted model server
//! (Claude Code 2.1.332, Codex CLI 0.171.0, Gemini CLI 0.61.0, Qwen Code 0.24.4, Copilot CLI
//! 1.0.102, Grok Build 1.0.41, OpenCode 1.18.33 — its database as it was after the test, with
//! its write-ahead log and shared memory —, Aider 0.86.2 — `work/.aider.chat.history.md`, the
//! project directory of an agent). volee's own store is written by the store's own writer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use volee_history::{aider_session_id, project_roots, roots, Index, Role};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    db: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/home"),
        &home,
    );
    let db = dir.path().join("sessions.db");
    World {
        home,
        db,
        _dir: dir,
    }
}

/// The last `n` messages of the session with this id.
fn messages_of(index: &Index, id: &str, n: usize) -> Vec<volee_history::Message> {
    let sessions = index.sessions().unwrap();
    let session = sessions
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no session {id} in {sessions:#?}"));
    index.messages(session, n).unwrap()
}

const QWEN: &str = "b4ddfa0f-3b45-4338-a4d3-10c6f22f94ef";
const OPENCODE: &str = "ses_dbf48a668ffeH9NzUebsYz5AID";

impl World {
    /// The roots under HOME, and the project directory `work` an agent ran in (Aider's).
    fn roots(&self) -> Vec<volee_history::Root> {
        let home = self.home.display().to_string();
        let mut all = roots(|k| (k == "HOME").then(|| home.clone()));
        let work = vec![(self.home.join("work"), "cwd of agent a1".to_owned())];
        all.extend(project_roots(&work, &all));
        all
    }
    fn opencode_dir(&self) -> PathBuf {
        self.home.join(".local/share/opencode")
    }
    fn index(&self) -> Index {
        Index::open(&self.db).unwrap()
    }
}

#[test]
fn every_real_session_file_is_listed_with_its_metadata() {
    let w = world();
    let mut index = w.index();
    let scan = index.scan(&w.roots()).unwrap();
    assert_eq!(scan.files, 8, "{scan:?}");
    assert!(scan.unreadable.is_empty(), "{scan:?}");
    let sessions = index.sessions().unwrap();
    let by = |h: &str| {
        sessions
            .iter()
            .find(|s| s.harness == h)
            .unwrap_or_else(|| panic!("no {h} session in {sessions:#?}"))
    };

    let claude = by("claude");
    assert_eq!(claude.id, "d4a8abe5-742d-4002-a1ab-379c1b005cb4");
    assert_eq!(
        claude.project.as_deref(),
        Some("/tmp/volee-test-yFo20s/work")
    );
    assert_eq!(claude.branch.as_deref(), Some("HEAD"));
    assert_eq!(claude.title.as_deref(), Some("conformance"));
    assert_eq!(
        claude.first_prompt.as_deref(),
        Some("Run the touch command to create the marker file.")
    );
    assert_eq!(claude.model.as_deref(), Some("claude-opus-5-5"));
    let usage = claude.usage.unwrap();
    assert_eq!((usage.input, usage.output), (13777 + 13863, 16));
    assert_eq!(claude.messages, 2, "{claude:?}");
    assert_eq!(claude.started.as_deref(), Some("2026-12-04T08:52:22.860Z"));

    let codex = by("codex");
    assert_eq!(codex.id, "01a24041-53e3-7ff1-bade-1cfdc8562944");
    assert_eq!(
        codex.project.as_deref(),
        Some("/tmp/volee-test-aGEg5w/work")
    );
    assert_eq!(
        codex.first_prompt.as_deref(),
        Some("Touch the conformance marker file.")
    );
    assert_eq!(codex.model.as_deref(), Some("volee-test-model"));
    let usage = codex.usage.unwrap();
    assert_eq!((usage.input, usage.output), (26944, 16));

    let qwen = by("qwen");
    assert_eq!(qwen.id, "b4ddfa0f-3b45-4338-a4d3-10c6f22f94ef");
    assert_eq!(qwen.project.as_deref(), Some("/tmp/volee-test-wjPsMf/work"));
    assert_eq!(qwen.usage.unwrap().output, 16);

    let copilot = by("copilot");
    assert_eq!(copilot.id, "a726d5e6-af1d-446e-8f33-855e2126ef51");
    assert_eq!(
        copilot.project.as_deref(),
        Some("/tmp/volee-test-4carQ5/work")
    );
    assert_eq!(copilot.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(
        copilot.first_prompt.as_deref(),
        Some("Create the conformance marker file.")
    );

    let gemini = by("gemini");
    assert_eq!(gemini.id, "25db2aef-e8a2-40fb-b8b6-ae9a248b1099");
    assert_eq!(
        gemini.project.as_deref(),
        Some("/work/target/tmp/volee-test-VZ4LnL/work")
    );
    assert_eq!(
        gemini.first_prompt.as_deref(),
        Some("Run the touch command to create the marker file.")
    );
    assert_eq!(gemini.model.as_deref(), Some("gemini-3.1-pro-preview"));
    // The prompt and the last answer (the first answer is only a tool call, written twice: its
    // tokens counted once).
    assert_eq!(gemini.messages, 2, "{gemini:?}");
    let usage = gemini.usage.unwrap();
    assert_eq!((usage.input, usage.output), (12096 + 12221, 16));

    let grok = by("grok");
    assert_eq!(grok.id, "b3e193bb-efe1-44f1-8369-5414246c0038");
    assert_eq!(grok.project.as_deref(), Some("/tmp/volee-test-5VsQN9/work"));
    assert_eq!(
        grok.title.as_deref(),
        Some("Run the command that removes the conformance file.")
    );
    assert_eq!(grok.usage.unwrap().input, 28548);

    let opencode = by("opencode");
    assert_eq!(opencode.id, OPENCODE);
    assert_eq!(
        opencode.project.as_deref(),
        Some("/tmp/volee-test-bYF0Jp/work")
    );
    assert_eq!(opencode.title.as_deref(), Some("volee test"));
    assert_eq!(
        opencode.first_prompt.as_deref(),
        Some("Run the touch command to create the marker file.")
    );
    assert_eq!(opencode.model.as_deref(), Some("volee-test-model"));
    // Two prompts (the second after the resume) and two answers with text; the tool call and
    // its output are messages of the tool.
    assert_eq!(opencode.messages, 4, "{opencode:#?}");
    let usage = opencode.usage.unwrap();
    assert_eq!((usage.input, usage.output), (24396, 24));
    assert_eq!(
        opencode.started.as_deref(),
        Some("2026-12-04T11:01:27.575Z")
    );
    assert_eq!(opencode.last.as_deref(), Some("2026-12-04T11:01:49.518Z"));
    let roles: Vec<Role> = messages_of(&index, OPENCODE, 10)
        .iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Tool,
            Role::Tool,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ]
    );

    let aider = by("aider");
    let work = w.home.join("work").canonicalize().unwrap();
    assert_eq!(aider.id, aider_session_id(&work));
    assert!(aider.id.starts_with("aider-"), "{aider:#?}");
    assert_eq!(aider.project.as_deref(), work.to_str());
    assert_eq!(
        aider.first_prompt.as_deref(),
        Some("Create the conformance marker file with touch.")
    );
    assert_eq!(aider.model.as_deref(), Some("openai/volee-test-model"));
    // `Tokens: 2.5k sent, 33 received.` — Aider's own rounding.
    let usage = aider.usage.unwrap();
    assert_eq!((usage.input, usage.output), (2500, 33));
    // The prompt, the answer, `/exit`.
    assert_eq!(aider.messages, 3, "{aider:#?}");
    let texts: Vec<(Role, String)> = messages_of(&index, &aider.id, 10)
        .into_iter()
        .map(|m| (m.role, m.text))
        .collect();
    assert_eq!(texts[0].0, Role::Tool);
    assert!(texts[0].1.contains("Aider v0.86.2"), "{texts:#?}");
    assert_eq!(
        texts[1],
        (
            Role::User,
            "Create the conformance marker file with touch.".to_owned()
        )
    );
    assert_eq!(texts[2].0, Role::Assistant);
    assert!(texts[2].1.starts_with("I will create the marker file."));
    assert!(texts[2].1.contains("touch /tmp/volee-test-WeTfhr/work"));
    assert_eq!(texts[3].0, Role::Tool);
    assert!(texts[3].1.contains("Run shell command?"), "{texts:#?}");
    assert_eq!(texts[4], (Role::User, "/exit".to_owned()));
    // Started at the chat's local time; last at the file's mtime (the copy's, here).
    assert!(aider.started.is_some() && aider.last >= aider.started);

    // Newest first.
    let lasts: Vec<&str> = sessions.iter().filter_map(|s| s.last.as_deref()).collect();
    let mut sorted = lasts.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(lasts, sorted);
}

#[test]
fn search_finds_words_of_prompts_answers_and_tool_calls_with_a_snippet() {
    let w = world();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let hits = index.search("marker file", 10).unwrap();
    let harnesses: Vec<&str> = hits.iter().map(|h| h.session.harness.as_str()).collect();
    for h in ["claude", "codex", "copilot", "opencode", "aider"] {
        assert!(harnesses.contains(&h), "{h} not in {hits:#?}");
    }
    assert!(
        hits.iter().all(|h| h.snippet.contains("[marker]")),
        "{hits:#?}"
    );
    // A tool call's input is indexed.
    let hits = index.search("volee-conformance-touched", 10).unwrap();
    assert!(hits.iter().any(|h| h.role == Role::Tool), "{hits:#?}");
    // FTS5's own syntax in a query is text, not an error.
    assert!(index.search("\"AND OR NOT -x: (", 10).unwrap().is_empty());
    assert!(index.search("   ", 10).unwrap().is_empty());
    // A prefix.
    assert!(!index.search("confor*", 10).unwrap().is_empty());
}

#[test]
fn a_grown_file_is_read_from_where_the_last_read_stopped_and_a_rewritten_one_again() {
    let w = world();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let file = std::fs::read_dir(w.home.join(".qwen/projects/-tmp-work/chats"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let before = messages_of(&index, QWEN, 100).len();
    // Nothing changed: nothing read.
    let again = index.scan(&w.roots()).unwrap();
    assert_eq!(again.read, 0, "{again:?}");

    // A line being written (no newline yet) waits; once whole, only it is read.
    let line = r#"{"uuid":"x","sessionId":"b4ddfa0f-3b45-4338-a4d3-10c6f22f94ef","timestamp":"2026-12-04T09:00:00.000Z","type":"user","cwd":"/tmp/volee-test-wjPsMf/work","message":{"role":"user","parts":[{"text":"and now the zebra question"}]}}"#;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(&line.as_bytes()[..40]).unwrap();
    let partial = index.scan(&w.roots()).unwrap();
    assert_eq!(partial.read, 1);
    assert_eq!(partial.bytes, 0, "{partial:?}");
    assert!(index.search("zebra", 5).unwrap().is_empty());
    f.write_all(&line.as_bytes()[40..]).unwrap();
    f.write_all(b"\n").unwrap();
    let grown = index.scan(&w.roots()).unwrap();
    assert_eq!(grown.bytes, line.len() as u64 + 1, "{grown:?}");
    assert_eq!(messages_of(&index, QWEN, 100).len(), before + 1);
    assert_eq!(index.search("zebra", 5).unwrap().len(), 1);
    let qwen = index
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.harness == "qwen")
        .unwrap();
    assert_eq!(qwen.last.as_deref(), Some("2026-12-04T09:00:00.000Z"));

    // Rewritten shorter: read again from the start, the old messages gone.
    std::fs::write(&file, format!("{line}\n")).unwrap();
    index.scan(&w.roots()).unwrap();
    assert_eq!(messages_of(&index, QWEN, 100).len(), 1);
    assert_eq!(
        index
            .search("volee-conformance-touched", 10)
            .unwrap()
            .iter()
            .filter(|h| h.session.harness == "qwen")
            .count(),
        0
    );

    // Deleted: forgotten.
    std::fs::remove_file(&file).unwrap();
    index.scan(&w.roots()).unwrap();
    assert!(index
        .sessions()
        .unwrap()
        .iter()
        .all(|s| s.harness != "qwen"));
}

#[test]
fn bad_files_are_listed_unreadable_with_the_reason_and_nothing_hangs() {
    let w = world();
    let projects = w.home.join(".claude/projects/-tmp-work");
    // A binary file named like a transcript.
    std::fs::write(
        projects.join("binary.jsonl"),
        [0u8, 159, 146, 150, 10, 255, 0, 10],
    )
    .unwrap();
    // A FIFO named like one (opening it for reading would wait for a writer).
    nix::unistd::mkfifo(&projects.join("fifo.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A symlink named like one, and a symlink loop of directories.
    std::os::unix::fs::symlink("/etc/passwd", projects.join("link.jsonl")).unwrap();
    std::os::unix::fs::symlink(&projects, projects.join("loop")).unwrap();
    // A truncated last line in a real transcript: the rest is read.
    let codex = w.home.join(".codex/sessions/2026/12/04");
    let rollout = std::fs::read_dir(&codex)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&rollout)
        .unwrap();
    f.write_all(b"{\"type\":\"response_item\",\"payl").unwrap();
    // A session id that a resume line could take for a flag.
    std::fs::write(
        projects.join("flag.jsonl"),
        concat!(
            r#"{"type":"user","sessionId":"--dangerously-skip-permissions","cwd":"/w","timestamp":"2026-12-04T08:00:00Z","message":{"role":"user","content":"hi"}}"#,
            "\n"
        ),
    )
    .unwrap();
    // A transcript someone else owns (root can make one: the suite runs as root in CI).
    let foreign = projects.join("foreign.jsonl");
    if nix::unistd::getuid().is_root() {
        std::fs::copy(
            projects.join("d4a8abe5-742d-4002-a1ab-379c1b005cb4.jsonl"),
            &foreign,
        )
        .unwrap();
        nix::unistd::chown(&foreign, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    }
    // A directory the user cannot read (root reads everything: only checked for others).
    let locked = w.home.join(".copilot/session-state/locked");
    std::fs::create_dir_all(&locked).unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();

    let mut index = w.index();
    let scan = index.scan(&w.roots()).unwrap();
    let reason = |name: &str| {
        scan.unreadable
            .iter()
            .find(|u| u.path.ends_with(name))
            .map(|u| u.reason.clone())
            .unwrap_or_else(|| panic!("{name} not listed: {scan:#?}"))
    };
    assert!(reason("binary.jsonl").contains("not JSON"), "{scan:#?}");
    assert!(
        reason("fifo.jsonl").contains("not a regular file"),
        "{scan:#?}"
    );
    assert!(reason("link.jsonl").contains("symbolic link"), "{scan:#?}");
    assert!(reason("flag.jsonl").contains("is not one"), "{scan:#?}");
    if nix::unistd::getuid().is_root() {
        assert!(
            reason("foreign.jsonl").contains("owned by another user"),
            "{scan:#?}"
        );
    } else {
        assert!(reason("locked").contains("cannot read"), "{scan:#?}");
    }
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let sessions = index.sessions().unwrap();
    assert_eq!(sessions.len(), 8, "{sessions:#?}");
    assert!(sessions.iter().any(|s| s.harness == "codex"));
}

#[test]
fn a_corrupt_index_is_rebuilt_and_a_symlinked_one_refused() {
    let w = world();
    std::fs::write(
        &w.db,
        b"this is not a database, it is a text file of some length ....",
    )
    .unwrap();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    assert_eq!(index.sessions().unwrap().len(), 8);
    // The database and its write-ahead log and shared memory: 0600 like the store's files.
    for suffix in ["", "-wal", "-shm"] {
        let path = PathBuf::from(format!("{}{suffix}", w.db.display()));
        if let Ok(meta) = std::fs::metadata(&path) {
            let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        } else {
            assert!(!suffix.is_empty(), "no index file");
        }
    }

    let link = w.db.with_file_name("link.db");
    std::os::unix::fs::symlink(&w.db, &link).unwrap();
    assert!(Index::open(&link).is_err());
}

#[test]
fn secrets_are_redacted_before_they_reach_the_index() {
    let w = world();
    let file = w.home.join(".claude/projects/-tmp-work/secret.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"user","sessionId":"s1","cwd":"/w","timestamp":"2026-12-04T08:00:00Z","message":{"role":"user","content":"use OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx for the call"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let text: Vec<String> = messages_of(&index, "s1", 10)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(text.len(), 1);
    assert!(!text[0].contains("sk-abcdefghijklmnop"), "{text:?}");
    assert!(index
        .search("abcdefghijklmnopqrstuvwx", 5)
        .unwrap()
        .is_empty());
    let raw = std::fs::read(&w.db).unwrap();
    assert!(!raw.windows(12).any(|w| w == b"sk-abcdefghi"));
}

/// Gemini starts a new chat file, with the same session id, when a session is resumed (seen in
/// its conformance test): one session, shown as its newest file, one search hit.
#[test]
fn a_session_kept_in_two_files_is_one_session() {
    let w = world();
    let chats = w.home.join(".gemini/tmp/work/chats");
    let first = std::fs::read_dir(&chats)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&first).unwrap();
    let resumed = text.replace("2026-12-04T09:25:1", "2026-12-04T10:25:1");
    std::fs::write(
        chats.join("session-2026-12-04T10-25-25db2aef.jsonl"),
        resumed,
    )
    .unwrap();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let gemini: Vec<_> = index
        .sessions()
        .unwrap()
        .into_iter()
        .filter(|s| s.harness == "gemini")
        .collect();
    assert_eq!(gemini.len(), 1, "{gemini:#?}");
    assert!(
        gemini[0]
            .last
            .as_deref()
            .unwrap()
            .starts_with("2026-12-04T10:25"),
        "{gemini:#?}"
    );
    let hits = index.search("marker", 10).unwrap();
    assert_eq!(
        hits.iter()
            .filter(|h| h.session.harness == "gemini")
            .count(),
        1,
        "{hits:#?}"
    );
}

/// Gemini's `/rewind` writes `{"$rewindTo": ID}`: that message and every later one are gone
/// from the session (gemini-cli's chatRecordingService drops them when it loads the file), in
/// the same read or a later one; an id never seen drops them all.
#[test]
fn a_gemini_rewind_drops_the_rewound_messages() {
    let w = world();
    let chats = w.home.join(".gemini/tmp/work/chats");
    let file = std::fs::read_dir(&chats)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    const GEMINI: &str = "25db2aef-e8a2-40fb-b8b6-ae9a248b1099";
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let before = messages_of(&index, GEMINI, 100);
    let count = |index: &Index| {
        index
            .sessions()
            .unwrap()
            .into_iter()
            .find(|s| s.id == GEMINI)
            .unwrap()
            .messages
    };
    let counted = count(&index);
    let append = |lines: &[&str]| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    };
    append(&[
        r#"{"id":"r1","timestamp":"2026-12-04T09:30:00.000Z","type":"user","content":[{"text":"ask about the zebra"}]}"#,
        r#"{"id":"r2","timestamp":"2026-12-04T09:30:01.000Z","type":"gemini","content":"the zebra answer","model":"gemini-3.1-pro-preview"}"#,
    ]);
    index.scan(&w.roots()).unwrap();
    assert_eq!(index.search("zebra", 5).unwrap().len(), 1);
    assert_eq!(count(&index), counted + 2);
    // Rewound in a later read: both gone (r1 and everything after it).
    append(&[r#"{"$rewindTo":"r1"}"#]);
    index.scan(&w.roots()).unwrap();
    assert!(index.search("zebra", 5).unwrap().is_empty());
    assert_eq!(messages_of(&index, GEMINI, 100), before);
    assert_eq!(count(&index), counted);
    // In the same read: the answer rewound, the prompt kept, a new answer after it.
    append(&[
        r#"{"id":"r3","timestamp":"2026-12-04T09:31:00.000Z","type":"user","content":[{"text":"ask about the okapi"}]}"#,
        r#"{"id":"r4","timestamp":"2026-12-04T09:31:01.000Z","type":"gemini","content":"a wrong okapi answer"}"#,
        r#"{"$rewindTo":"r4"}"#,
        r#"{"id":"r5","timestamp":"2026-12-04T09:31:02.000Z","type":"gemini","content":"the right okapi answer"}"#,
    ]);
    index.scan(&w.roots()).unwrap();
    let texts: Vec<String> = messages_of(&index, GEMINI, 2)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["ask about the okapi", "the right okapi answer"]);
    assert!(index.search("wrong", 5).unwrap().is_empty());
    assert_eq!(count(&index), counted + 2);
    // An id never seen: every message is gone (as Gemini CLI loads it).
    append(&[r#"{"$rewindTo":"nowhere"}"#]);
    index.scan(&w.roots()).unwrap();
    assert!(messages_of(&index, GEMINI, 100).is_empty());
    assert_eq!(count(&index), 0);
    // Read again from nothing (a new index), the same.
    let mut fresh = Index::open(&w.db.with_file_name("fresh.db")).unwrap();
    fresh.scan(&w.roots()).unwrap();
    assert!(messages_of(&fresh, GEMINI, 100).is_empty());
}

/// volee's own agent's store, written by the store's own writer (the code `volee agent` runs):
/// listed with the fields of `volee agent --list-sessions`, searched, read incrementally.
#[test]
fn volees_own_store_is_read_with_its_metadata_and_incrementally() {
    use volee_store::{Message as StoreMessage, NewSession, Store, ToolCall, ToolFunction};
    let w = world();
    let store = Store::new(w.home.join(".local/share/volee/sessions"));
    let mut writer = store
        .create(NewSession {
            title: "giraffe feeder".into(),
            project_root: PathBuf::from("/tmp/zoo"),
            model: "qwen3:8b".into(),
        })
        .unwrap();
    let id = writer.id().to_owned();
    writer
        .push_message(StoreMessage::user("build the giraffe feeder"))
        .unwrap();
    let call = ToolCall {
        id: Some("call_1".into()),
        function: ToolFunction {
            index: None,
            name: "shell".into(),
            arguments: serde_json::json!({"cmd": "ls feeders"}),
        },
    };
    let mut answer = StoreMessage::assistant("I will look first.");
    answer.tool_calls.push(call.clone());
    writer.push_message(answer).unwrap();
    writer
        .push_message(StoreMessage::tool_result(&call, "north.txt south.txt"))
        .unwrap();
    writer.checkpoint().unwrap();
    drop(writer);

    let mut index = w.index();
    let scan = index.scan(&w.roots()).unwrap();
    assert!(scan.unreadable.is_empty(), "{scan:#?}");
    let sessions = index.sessions().unwrap();
    let s = sessions.iter().find(|s| s.harness == "volee").unwrap();
    let listed = &store.list(false).unwrap()[0];
    let meta = listed.meta.as_ref().unwrap();
    assert_eq!(s.id, id);
    assert_eq!(s.id, listed.id);
    assert_eq!(s.title.as_deref(), Some(meta.title.as_str()));
    assert_eq!(s.project.as_deref(), Some("/tmp/zoo"));
    assert_eq!(s.model.as_deref(), Some("qwen3:8b"));
    assert_eq!(s.first_prompt.as_deref(), Some("build the giraffe feeder"));
    assert_eq!(s.messages, 2, "{s:#?}");
    let hits = index.search("giraffe", 5).unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].session.harness, "volee");
    // The tool call's input and its output are indexed.
    let roles: Vec<Role> = messages_of(&index, &id, 10)
        .iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Tool]);
    assert_eq!(index.search("south", 5).unwrap().len(), 1);

    // Resumed later: only what was appended is read.
    let mut writer = store.open_writer(&id).unwrap();
    writer
        .push_message(StoreMessage::user("now paint it orange"))
        .unwrap();
    writer.checkpoint().unwrap();
    drop(writer);
    let again = index.scan(&w.roots()).unwrap();
    assert_eq!(again.read, 1, "{again:#?}");
    let transcript = w
        .home
        .join(".local/share/volee/sessions")
        .join(&id)
        .join("transcript.jsonl");
    assert!(again.bytes < std::fs::metadata(&transcript).unwrap().len());
    assert_eq!(index.search("orange", 5).unwrap().len(), 1);
    let s = index
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap();
    assert_eq!(s.messages, 3);
}

/// Every file under a directory with its bytes (what "untouched" is compared by).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out: Vec<(String, Vec<u8>, u32)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let bytes = if meta.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                bytes,
                meta.mode(),
            )
        })
        .collect();
    out.sort();
    out
}

/// OpenCode's directory is byte for byte what it was after a read: its database, write-ahead
/// log and shared memory (SQLite writes read marks into `-shm` and may create `-wal`/`-shm`:
/// volee reads a private copy), and none appear where there were none.
#[test]
fn opencodes_directory_is_left_byte_for_byte_untouched() {
    let w = world();
    let dir = w.opencode_dir();
    let before = snapshot(&dir);
    assert_eq!(before.len(), 3, "the fixture has its -wal and -shm");
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    assert_eq!(snapshot(&dir), before);
    // A database without its log (OpenCode not running, checkpointed): nothing is created.
    std::fs::remove_file(dir.join("opencode.db-wal")).unwrap();
    std::fs::remove_file(dir.join("opencode.db-shm")).unwrap();
    let before = snapshot(&dir);
    let scan = index.scan(&w.roots()).unwrap();
    assert!(scan.unreadable.is_empty(), "{scan:#?}");
    assert_eq!(snapshot(&dir), before);
    // No private copy is left beside the index.
    let left: Vec<String> = std::fs::read_dir(w.db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".read-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A writer of OpenCode's database (OpenCode itself, played by the test on its copy): a
/// session that changed is read again, one that did not is not, a new one is listed, a deleted
/// one forgotten.
#[test]
fn opencodes_database_is_read_again_only_for_sessions_that_changed() {
    let w = world();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let again = index.scan(&w.roots()).unwrap();
    assert_eq!(again.read, 0, "{again:#?}");
    let db = rusqlite::Connection::open(w.opencode_dir().join("opencode.db")).unwrap();
    // A new session with a prompt, the way OpenCode writes one.
    db.execute_batch(
        r#"INSERT INTO session(id, project_id, slug, directory, title, version, time_created, time_updated)
             VALUES ('ses_zebra1', 'global', 'zebra', '/srv/zoo', 'Zebra stripes', '1.18.33', 1796390000000, 1796390005000);
           INSERT INTO message(id, session_id, time_created, time_updated, data)
             VALUES ('msg_z1', 'ses_zebra1', 1796390000000, 1796390000000, '{"role":"user","time":{"created":1796390000000}}');
           INSERT INTO part(id, message_id, session_id, time_created, time_updated, data)
             VALUES ('prt_z1', 'msg_z1', 'ses_zebra1', 1796390000001, 1796390000001, '{"type":"text","text":"count the zebra stripes"}');"#,
    )
    .unwrap();
    let scan = index.scan(&w.roots()).unwrap();
    assert_eq!(scan.read, 1, "{scan:#?}");
    let hits = index.search("zebra", 5).unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].session.id, "ses_zebra1");
    assert_eq!(hits[0].session.project.as_deref(), Some("/srv/zoo"));
    assert_eq!(hits[0].session.title.as_deref(), Some("Zebra stripes"));
    // The other session's messages were not read again: same rows.
    let ids_before = messages_of(&index, OPENCODE, 100);
    // A part added to the new session: its messages are read again, once each.
    db.execute_batch(
        r#"INSERT INTO message(id, session_id, time_created, time_updated, data)
             VALUES ('msg_z2', 'ses_zebra1', 1796390001000, 1796390001000, '{"role":"assistant","modelID":"m1","tokens":{"input":5,"output":7,"cache":{"read":0,"write":0}}}');
           INSERT INTO part(id, message_id, session_id, time_created, time_updated, data)
             VALUES ('prt_z2', 'msg_z2', 'ses_zebra1', 1796390001001, 1796390001001, '{"type":"text","text":"there are forty stripes"}');"#,
    )
    .unwrap();
    index.scan(&w.roots()).unwrap();
    let texts: Vec<String> = messages_of(&index, "ses_zebra1", 10)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(
        texts,
        ["count the zebra stripes", "there are forty stripes"]
    );
    assert_eq!(messages_of(&index, OPENCODE, 100), ids_before);
    let zebra = index
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.id == "ses_zebra1")
        .unwrap();
    assert_eq!(zebra.messages, 2);
    assert_eq!(zebra.model.as_deref(), Some("m1"));
    assert_eq!(zebra.usage.map(|u| (u.input, u.output)), Some((5, 7)));
    // A subagent's session (parent_id set) is not a session of its own; a session whose id
    // could pass for a flag is left out.
    db.execute_batch(
        r#"INSERT INTO session(id, project_id, parent_id, slug, directory, title, version, time_created, time_updated)
             VALUES ('ses_child', 'global', 'ses_zebra1', 'c', '/srv/zoo', 'child', '1.18.33', 1, 2);
           INSERT INTO session(id, project_id, slug, directory, title, version, time_created, time_updated)
             VALUES ('--help', 'global', 'h', '/srv/zoo', 'flag', '1.18.33', 1, 2);"#,
    )
    .unwrap();
    index.scan(&w.roots()).unwrap();
    let ids: Vec<String> = index
        .sessions()
        .unwrap()
        .into_iter()
        .filter(|s| s.harness == "opencode")
        .map(|s| s.id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    // Deleted: forgotten, its text too.
    db.execute_batch(
        "DELETE FROM part WHERE session_id = 'ses_zebra1';
         DELETE FROM message WHERE session_id = 'ses_zebra1';
         DELETE FROM session WHERE id = 'ses_zebra1';",
    )
    .unwrap();
    index.scan(&w.roots()).unwrap();
    assert!(index.search("zebra", 5).unwrap().is_empty());
    assert!(index
        .sessions()
        .unwrap()
        .iter()
        .all(|s| s.id != "ses_zebra1"));
    assert!(index.sessions().unwrap().iter().any(|s| s.id == OPENCODE));
}

/// A file named `opencode.db` that is not OpenCode's database: listed unreadable with the
/// reason, the rest read.
#[test]
fn a_bad_opencode_database_is_listed_unreadable() {
    let reason = |setup: &dyn Fn(&Path)| {
        let w = world();
        let dir = w.opencode_dir();
        for f in ["opencode.db", "opencode.db-wal", "opencode.db-shm"] {
            std::fs::remove_file(dir.join(f)).unwrap();
        }
        setup(&dir);
        let mut index = w.index();
        let scan = index.scan(&w.roots()).unwrap();
        assert_eq!(index.sessions().unwrap().len(), 7, "the others are read");
        scan.unreadable
            .iter()
            .find(|u| u.harness == "opencode")
            .map(|u| u.reason.clone())
            .unwrap_or_else(|| panic!("not listed: {scan:#?}"))
    };
    // Corrupt: text where the database should be.
    let r = reason(&|dir| std::fs::write(dir.join("opencode.db"), vec![b'x'; 8192]).unwrap());
    assert!(r.contains("not a database"), "{r}");
    // A database of another schema.
    let r = reason(&|dir| {
        let db = rusqlite::Connection::open(dir.join("opencode.db")).unwrap();
        db.execute_batch(
            "CREATE TABLE notes(id TEXT, body TEXT); INSERT INTO notes VALUES ('a', 'b');",
        )
        .unwrap();
    });
    assert!(r.contains("no such table: session"), "{r}");
    // A symbolic link where the database should be, and one where its log should be.
    let r =
        reason(&|dir| std::os::unix::fs::symlink("/etc/passwd", dir.join("opencode.db")).unwrap());
    assert!(r.contains("symbolic link"), "{r}");
    let r = reason(&|dir| {
        rusqlite::Connection::open(dir.join("opencode.db"))
            .unwrap()
            .execute_batch("CREATE TABLE session(id TEXT)")
            .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("opencode.db-wal")).unwrap()
    });
    assert!(
        r.contains("write-ahead log") && r.contains("symbolic link"),
        "{r}"
    );
    // Another user's database (root can make one: the suite runs as root in CI).
    if nix::unistd::getuid().is_root() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/home/.local/share/opencode/opencode.db");
        let r = reason(&|dir| {
            std::fs::copy(&fixture, dir.join("opencode.db")).unwrap();
            nix::unistd::chown(
                &dir.join("opencode.db"),
                Some(nix::unistd::Uid::from_raw(65534)),
                None,
            )
            .unwrap();
        });
        assert!(r.contains("owned by another user"), "{r}");
    }
}

/// Aider appends to its chat history: the file is read whole again when it changed (a message
/// ends only when the next one starts), a line being written waits, a new chat is the same
/// session (the project's).
#[test]
fn aiders_history_is_read_again_when_it_grows() {
    let w = world();
    let file = w.home.join("work/.aider.chat.history.md");
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let id = aider_session_id(&w.home.join("work").canonicalize().unwrap());
    let before = messages_of(&index, &id, 100).len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(b"\n# aider chat started at 2026-12-04 12:00:00\n\n#### paint the zebra")
        .unwrap();
    index.scan(&w.roots()).unwrap();
    // The prompt's line has no newline yet: not read.
    assert!(index.search("zebra", 5).unwrap().is_empty());
    f.write_all(b"  \n#### in stripes  \n\nStriped it.\n")
        .unwrap();
    index.scan(&w.roots()).unwrap();
    let hits = index.search("zebra", 5).unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].session.id, id);
    let messages = messages_of(&index, &id, 100);
    assert_eq!(messages.len(), before + 2, "{messages:#?}");
    assert_eq!(messages[before].text, "paint the zebra\nin stripes");
    assert_eq!(messages[before + 1].text, "Striped it.");
    let aider = index
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap();
    assert_eq!(aider.messages, 5);
}

/// Files named like Aider's history that are not one: listed unreadable with the reason.
#[test]
fn a_bad_aider_history_is_listed_unreadable() {
    let w = world();
    let roots = |dirs: &[&str]| {
        let mut all = w.roots();
        let dirs: Vec<(PathBuf, String)> = dirs
            .iter()
            .map(|d| (w.home.join(d), format!("cwd of {d}")))
            .collect();
        all.extend(project_roots(&dirs, &all));
        all
    };
    for (dir, content) in [
        ("plain", &b"# Notes\n\nsome text\n"[..]),
        ("binary", &[0u8, 1, 2, 10, 0, 255, 10][..]),
    ] {
        std::fs::create_dir_all(w.home.join(dir)).unwrap();
        std::fs::write(w.home.join(dir).join(".aider.chat.history.md"), content).unwrap();
    }
    std::fs::create_dir_all(w.home.join("linked")).unwrap();
    std::os::unix::fs::symlink(
        w.home.join("work/.aider.chat.history.md"),
        w.home.join("linked/.aider.chat.history.md"),
    )
    .unwrap();
    let mut index = w.index();
    let scan = index.scan(&roots(&["plain", "binary", "linked"])).unwrap();
    let reason = |name: &str| {
        scan.unreadable
            .iter()
            .find(|u| u.path.parent().is_some_and(|p| p.ends_with(name)))
            .map(|u| u.reason.clone())
            .unwrap_or_else(|| panic!("{name} not listed: {scan:#?}"))
    };
    assert!(
        reason("plain").contains("no `# aider chat started at`"),
        "{scan:#?}"
    );
    assert!(reason("binary").contains("not text"), "{scan:#?}");
    assert!(reason("linked").contains("symbolic link"), "{scan:#?}");
    assert_eq!(
        index
            .sessions()
            .unwrap()
            .iter()
            .filter(|s| s.harness == "aider")
            .count(),
        1
    );
    // A project directory that holds other roots deeper down forgets none of their files.
    let home_as_project = roots(&[""]);
    index.scan(&home_as_project).unwrap();
    assert_eq!(index.sessions().unwrap().len(), 8);
}

/// The process's peak resident memory (VmHWM), in kB.
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Issue 19's bad input: a 200 MB transcript, in Claude Code's lines (as the fixture's; its bulk
/// tool output, each result twice as Claude writes it, as in real long sessions), with one line
/// longer than the reader takes (16 MiB, skipped by design and counted), is read in bounded
/// memory; its session is listed with its messages and a word of its last line is found. The
/// read takes 15 s in a debug build, 1.4 s in release (2 cores).
#[test]
fn a_200_mb_transcript_with_an_overlong_line_is_read_in_bounded_memory() {
    const ID: &str = "5e1c2b9e-0d4a-4c1e-9b7a-2000000000aa";
    const SIZE: u64 = 200 << 20;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let projects = home.join(".claude/projects/-tmp-big");
    std::fs::create_dir_all(&projects).unwrap();
    let path = projects.join(format!("{ID}.jsonl"));
    let line = |n: usize, kind: &str, message: &str, extra: &str| {
        format!(
            r#"{{"parentUuid":"u{}","isSidechain":false,"type":"{kind}","message":{message},{extra}"uuid":"u{n}","timestamp":"2026-12-04T{:02}:{:02}:{:02}.000Z","userType":"external","entrypoint":"cli","cwd":"/tmp/big","sessionId":"{ID}","version":"2.1.332","gitBranch":"main"}}"#,
            n.saturating_sub(1),
            8 + n / 3600 % 12,
            n / 60 % 60,
            n % 60
        )
    };
    // A tool's output of 48 KB: a build log.
    let log: String = (0..600)
        .map(|i| format!("   Compiling crate-{i} v0.{i}.0 (/tmp/big/crates/crate-{i})\n"))
        .collect();
    let log = serde_json::to_string(&log).unwrap();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let (mut written, mut n, mut exchanges) = (0u64, 0usize, 0u64);
    let mut overlong = false;
    while written < SIZE {
        let mut lines = Vec::new();
        if !overlong && written > SIZE / 2 {
            // A user message of 17 MiB in one line (a pasted dump): longer than the reader
            // buffers. Written in pieces, as the rest, so the test itself stays small.
            overlong = true;
            let head = line(n, "user", r#"{"role":"user","content":"overlongword "#, "");
            let (start, end) = head.split_at(head.find("overlongword ").unwrap() + 13);
            out.write_all(start.as_bytes()).unwrap();
            let piece = "overlongword ".repeat(1 << 10);
            for _ in 0..(17 << 20) / piece.len() + 1 {
                out.write_all(piece.as_bytes()).unwrap();
            }
            out.write_all(end.as_bytes()).unwrap();
            out.write_all(b"\n").unwrap();
            written += 17 << 20;
            n += 1;
        }
        let e = exchanges;
        lines.push(line(
            n,
            "user",
            &format!(r#"{{"role":"user","content":"step {e}: rebuild the workspace and report the warnings"}}"#),
            r#""promptId":"p","permissionMode":"default","#,
        ));
        lines.push(line(
            n + 1,
            "assistant",
            &format!(
                r#"{{"id":"msg_{e}","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{{"type":"text","text":"Rebuilding for step {e}, then I will read the warnings."}},{{"type":"tool_use","id":"toolu_{e}","name":"Bash","input":{{"command":"cargo build --workspace 2>&1 | tail -n 600"}}}}],"usage":{{"input_tokens":1000,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}}"#
            ),
            "",
        ));
        lines.push(line(
            n + 2,
            "user",
            &format!(r#"{{"role":"user","content":[{{"tool_use_id":"toolu_{e}","type":"tool_result","content":{log},"is_error":false}}]}}"#),
            &format!(r#""toolUseResult":{{"stdout":{log},"stderr":"","interrupted":false}},"#),
        ));
        for l in lines {
            out.write_all(l.as_bytes()).unwrap();
            out.write_all(b"\n").unwrap();
            written += l.len() as u64 + 1;
        }
        n += 3;
        exchanges += 1;
    }
    let last = line(
        n,
        "user",
        r#"{"role":"user","content":"and finally the zanzibar question"}"#,
        "",
    );
    out.write_all(last.as_bytes()).unwrap();
    out.write_all(b"\n").unwrap();
    drop(out);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > SIZE, "{size}");

    // The peak from here on (5 resets it to the current RSS, Linux ≥ 4.0).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = peak_rss_kb();
    let started = std::time::Instant::now();
    let h = home.display().to_string();
    let mut index = Index::open(&dir.path().join("sessions.db")).unwrap();
    let scan = index
        .scan(&roots(|k| (k == "HOME").then(|| h.clone())))
        .unwrap();
    let took = started.elapsed();
    let grew_mb = (peak_rss_kb() - before) / 1024;
    eprintln!(
        "{} MB, {exchanges} exchanges: read in {took:?}, peak memory +{grew_mb} MB",
        size >> 20
    );
    assert_eq!(
        (scan.files, scan.read, scan.bytes),
        (1, 1, size),
        "{scan:?}"
    );
    assert!(scan.unreadable.is_empty(), "{scan:?}");
    // Measured +20 MB (debug and release): the line buffer, up to 16 MiB before the overlong
    // line is dropped, and SQLite's pages and FTS5's pending terms (at most 32 MB by the
    // index's hashsize): never the file, nor the overlong line, whole.
    assert!(grew_mb < 100, "peak memory grew by {grew_mb} MB");

    let sessions = index.sessions().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    // A prompt and an answer per exchange, and the last prompt; the overlong line is not one.
    assert_eq!(sessions[0].id, ID);
    assert_eq!(sessions[0].messages, 2 * exchanges + 1);
    let hits = index.search("zanzibar", 5).unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].session.id, ID);
    assert!(index.search("overlongword", 5).unwrap().is_empty());
    let last = index.messages(&sessions[0], 1).unwrap();
    assert_eq!(last[0].text, "and finally the zanzibar question");
}

/// Opening an index of the current schema writes nothing: a command that only reads (the
/// browser's first frame) does not wait while another process holds the write lock (a daemon's
/// read, a first scan), and lists what the index has.
#[test]
fn opening_an_index_waits_for_no_writer() {
    let w = world();
    let mut index = w.index();
    index.scan(&w.roots()).unwrap();
    let listed = index.sessions().unwrap().len();
    drop(index);
    let writer = rusqlite::Connection::open(&w.db).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let t = std::time::Instant::now();
    let reader = Index::open(&w.db).unwrap();
    assert_eq!(reader.sessions().unwrap().len(), listed);
    // The busy timeout is 10 s: a write on opening would have waited for it.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "opening waited {:?} for the writer",
        t.elapsed()
    );
    writer.execute_batch("COMMIT").unwrap();
}
