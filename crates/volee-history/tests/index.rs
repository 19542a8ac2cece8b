//! The index over real session files: each fixture under `fixtures/home` was written by the real
//! harness program, driven by its conformance test against volee's scripted model server
//! (Claude Code 2.1.332, Codex CLI 0.171.0, Gemini CLI 0.61.0, Qwen Code 0.24.4, Copilot CLI
//! 1.0.102, Grok Build 1.0.41).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use volee_history::{roots, Index, Role};

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

impl World {
    fn roots(&self) -> Vec<volee_history::Root> {
        let home = self.home.display().to_string();
        roots(|k| (k == "HOME").then(|| home.clone()))
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
    assert_eq!(scan.files, 6, "{scan:?}");
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
    for h in ["claude", "codex", "copilot"] {
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
    let before = index.messages(&file, 100).unwrap().len();
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
    assert_eq!(index.messages(&file, 100).unwrap().len(), before + 1);
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
    assert_eq!(index.messages(&file, 100).unwrap().len(), 1);
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
    assert_eq!(sessions.len(), 6, "{sessions:#?}");
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
    assert_eq!(index.sessions().unwrap().len(), 6);
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
    let text: Vec<String> = index
        .messages(&file, 10)
        .unwrap()
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
