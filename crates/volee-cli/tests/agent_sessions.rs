//! `volee agent` session management through the real binary: every flag, text and `--json`,
//! bad input and a session held by another writer. No Docker, no model, no daemon.
//! Sessions are made with `volee-store` directly (the loop itself: `tests/agent_loop.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use volee_store::{Message, NewSession, Store, ToolCall, ToolFunction};

struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["home", "volee", "project"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        Env { tmp }
    }

    fn store_dir(&self) -> PathBuf {
        self.tmp.path().join("store")
    }

    fn store(&self) -> Store {
        Store::new(self.store_dir())
    }

    fn project(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    /// `volee agent ARGS --memory-dir STORE` in a cleared environment.
    fn agent(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = vec!["agent"];
        all.extend_from_slice(args);
        let dir = self.store_dir();
        all.extend_from_slice(&["--memory-dir", dir.to_str().unwrap()]);
        self.volee(&all, &[])
    }

    /// The binary with only HOME and VOLEE_HOME (plus `extra`) set.
    fn volee(&self, args: &[&str], extra: &[(&str, &Path)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_volee"));
        cmd.env_clear()
            .env("HOME", self.tmp.path().join("home"))
            .env("VOLEE_HOME", self.tmp.path().join("volee"))
            .args(args);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        within_10s(cmd)
    }

    /// A session with a title and messages (one mentioning a secret).
    fn session(&self, title: &str, texts: &[&str]) -> String {
        let mut w = self
            .store()
            .create(NewSession {
                title: title.into(),
                project_root: self.project(),
                model: "gemma4".into(),
            })
            .unwrap();
        for t in texts {
            w.push_message(Message::user(*t)).unwrap();
        }
        w.checkpoint().unwrap();
        w.id().to_string()
    }
}

/// Run `cmd` to its end, killed after 10 s (a command blocked on a FIFO fails the test
/// instead of hanging it).
fn within_10s(mut cmd: Command) -> Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} hung (killed after 10 s)\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn fails(out: &Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).unwrap()
}

#[test]
fn list_sessions_text_and_json_hide_archived_unless_asked() {
    let env = Env::new();
    assert!(ok(&env.agent(&["--list-sessions"])).starts_with("no sessions"));
    assert_eq!(
        json(&env.agent(&["--list-sessions", "--json"])),
        serde_json::json!([])
    );
    let a = env.session(
        "Cache investigation",
        &["why is the cache cold", "look at it"],
    );
    let b = env.session("Flaky test", &["the test is flaky"]);
    env.store().set_archived(&b, true).unwrap();
    let text = ok(&env.agent(&["--list-sessions"]));
    assert!(text.starts_with("ID"), "{text}");
    assert!(
        text.contains(&a) && text.contains("Cache investigation"),
        "{text}"
    );
    assert!(!text.contains(&b), "{text}");
    let text = ok(&env.agent(&["--list-sessions", "--include-archived"]));
    assert!(text.contains(&b) && text.contains("(archived)"), "{text}");
    let rows = json(&env.agent(&["--list-sessions", "--include-archived", "--json"]));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let ra = rows.iter().find(|r| r["id"] == a.as_str()).unwrap();
    assert_eq!(ra["status"], "ok");
    assert_eq!(ra["title"], "Cache investigation");
    assert_eq!(ra["message_count"], 2);
    assert_eq!(ra["archived"], false);
    assert!(ra["updated_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(ra["project_root"], env.project().to_str().unwrap());
}

#[test]
fn search_matches_titles_and_transcripts_case_insensitively() {
    let env = Env::new();
    let a = env.session(
        "Cache investigation",
        &["Why is the build SLOW on Mondays?"],
    );
    let b = env.session("Slow build", &["nothing"]);
    let _c = env.session("Other", &["unrelated"]);
    let text = ok(&env.agent(&["--search", "slow"]));
    assert!(text.contains(&a) && text.contains(&b), "{text}");
    assert!(
        text.contains("#1: Why is the build SLOW on Mondays?"),
        "{text}"
    );
    assert!(text.contains("title: Slow build"), "{text}");
    let hits = json(&env.agent(&["--search", "MONDAYS", "--json"]));
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["id"], a.as_str());
    assert_eq!(hits[0]["transcript_matches"], 1);
    assert_eq!(hits[0]["snippets"][0]["seq"], 1);
    assert!(ok(&env.agent(&["--search", "absent"])).starts_with("no session matches"));
    // Archived sessions only with --include-archived.
    env.store().set_archived(&a, true).unwrap();
    assert_eq!(
        json(&env.agent(&["--search", "mondays", "--json"])),
        serde_json::json!([])
    );
    assert_eq!(
        json(&env.agent(&["--search", "mondays", "--include-archived", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn info_by_unique_prefix() {
    let env = Env::new();
    let id = env.session("Cache investigation", &["a", "b", "c"]);
    let text = ok(&env.agent(&["--info", &id[..6]]));
    assert!(text.contains("id:") && text.contains(&id), "{text}");
    assert!(text.contains("Cache investigation"), "{text}");
    assert!(text.contains("messages:") && text.contains("3"), "{text}");
    let v = json(&env.agent(&["--info", &id, "--json"]));
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["message_count"], 3);
    assert_eq!(v["last_seq"], 3);
    assert_eq!(v["model"], "gemma4");
}

#[test]
fn rename_fork_archive_unarchive() {
    let env = Env::new();
    let id = env.session("Old", &["hello"]);
    assert_eq!(
        ok(&env.agent(&["--rename", &id, "Cache investigation"])).trim(),
        format!("renamed {id}")
    );
    assert_eq!(env.store().load(&id).unwrap().title, "Cache investigation");
    let v = json(&env.agent(&["--rename", &id, "Second", "--json"]));
    assert_eq!(v, serde_json::json!({"id": id, "title": "Second"}));

    let fork = ok(&env.agent(&["--fork", &id])).trim().to_string();
    assert_ne!(fork, id);
    let f = env.store().load(&fork).unwrap();
    assert_eq!(f.parent_id.as_deref(), Some(id.as_str()));
    assert_eq!(f.messages, env.store().load(&id).unwrap().messages);
    let v = json(&env.agent(&["--fork", &id, "--json"]));
    assert_eq!(v["parent_id"], id.as_str());
    assert_eq!(
        json(&env.agent(&["--list-sessions", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        3
    );

    assert_eq!(
        ok(&env.agent(&["--archive", &id])).trim(),
        format!("archived {id}")
    );
    assert!(env.store().load(&id).unwrap().archived);
    let v = json(&env.agent(&["--unarchive", &id, "--json"]));
    assert_eq!(v, serde_json::json!({"id": id, "archived": false}));
    assert!(!env.store().load(&id).unwrap().archived);
    assert!(json(&env.agent(&["--archive", &id, "--json"]))["archived"] == true);
    assert_eq!(
        ok(&env.agent(&["--unarchive", &id])).trim(),
        format!("unarchived {id}")
    );
}

#[test]
fn export_is_one_redacted_json_document() {
    let env = Env::new();
    let id = env.session(
        "Keys",
        &["export OPENAI_API_KEY=abcdefgh12345678 then run", "hello"],
    );
    let text = ok(&env.agent(&["--export", &id]));
    assert!(!text.contains("abcdefgh12345678"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["session"]["id"], id.as_str());
    assert_eq!(doc["session"]["messages"].as_array().unwrap().len(), 2);
    assert_eq!(doc["transcript"].as_array().unwrap().len(), 2);
    assert_eq!(doc["transcript"][0]["item"]["kind"], "message");
    assert_eq!(doc["compactions"], serde_json::json!([]));
    assert_eq!(doc["transcript_torn_tail"], false);
    assert!(doc["session"]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("OPENAI_API_KEY=[REDACTED]"));
    // --json is accepted and gives the same document.
    let again: serde_json::Value = json(&env.agent(&["--export", &id, "--json"]));
    assert_eq!(again["session"], doc["session"]);
}

#[test]
fn delete_needs_yes() {
    let env = Env::new();
    let id = env.session("Doomed", &["x"]);
    let err = fails(&env.agent(&["--delete", &id]), 2);
    assert!(
        err.contains("without --yes") && err.contains("hint:"),
        "{err}"
    );
    assert!(env.store().session_dir(&id).exists());
    assert_eq!(
        ok(&env.agent(&["--delete", &id, "--yes"])).trim(),
        format!("deleted {id}")
    );
    assert!(!env.store().session_dir(&id).exists());
    let id2 = env.session("Doomed too", &["x"]);
    let v = json(&env.agent(&["--delete", &id2, "--yes", "--json"]));
    assert_eq!(v, serde_json::json!({"id": id2, "deleted": true}));
    assert!(ok(&env.agent(&["--list-sessions"])).starts_with("no sessions"));
}

#[test]
fn a_session_held_by_a_writer_refuses_changes_but_not_reads() {
    let env = Env::new();
    let id = env.session("Busy", &["x"]);
    let store = env.store();
    let _held = store.open_writer(&id).unwrap();
    let me = std::process::id().to_string();
    for args in [
        vec!["--rename", &id, "New"],
        vec!["--archive", &id],
        vec!["--unarchive", &id],
        vec!["--delete", &id, "--yes"],
    ] {
        let err = fails(&env.agent(&args), 2);
        assert!(
            err.contains("in use") && err.contains(&me),
            "{args:?}: {err}"
        );
        assert!(err.contains("hint:"), "{err}");
    }
    ok(&env.agent(&["--list-sessions"]));
    ok(&env.agent(&["--info", &id]));
    ok(&env.agent(&["--export", &id]));
    ok(&env.agent(&["--search", "x"]));
    // Forking reads the source; the copy is free.
    let fork = ok(&env.agent(&["--fork", &id])).trim().to_string();
    ok(&env.agent(&["--rename", &fork, "Mine"]));
}

#[test]
fn bad_ids_are_clear_errors() {
    let env = Env::new();
    let a = env.session("A", &["x"]);
    for bad in ["../etc", "a/b", ".."] {
        let err = fails(&env.agent(&["--info", bad]), 2);
        assert!(err.contains("invalid session id"), "{err}");
    }
    let err = fails(&env.agent(&["--info", "zzzzzz"]), 2);
    assert!(
        err.contains("no session") && err.contains("--list-sessions"),
        "{err}"
    );
    // Two ids sharing a prefix: a session directory renamed to share a's first characters.
    let b = env.session("B", &["y"]);
    let twin = format!("{}zz", &a[..3]);
    std::fs::rename(env.store().session_dir(&b), env.store().session_dir(&twin)).unwrap();
    let err = fails(&env.agent(&["--info", &a[..3]]), 2);
    assert!(
        err.contains("ambiguous") && err.contains(&a) && err.contains(&twin),
        "{err}"
    );
}

#[test]
fn a_damaged_session_is_listed_and_hides_nothing() {
    let env = Env::new();
    let good = env.session("Good", &["x"]);
    let bad = env.session("Bad", &["x"]);
    let path = env.store().session_dir(&bad).join("session.json");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    let text = ok(&env.agent(&["--list-sessions"]));
    assert!(
        text.contains(&good) && text.contains(&bad) && text.contains("DAMAGED"),
        "{text}"
    );
    let rows = json(&env.agent(&["--list-sessions", "--json"]));
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == bad.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["status"], "damaged");
    assert!(row["reason"].as_str().unwrap().contains("does not parse"));
    let err = fails(&env.agent(&["--rename", &bad, "x"]), 4);
    assert!(err.contains("damaged") && err.contains("hint:"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        &bytes[..bytes.len() / 3],
        "never overwritten"
    );
    // A newer schema: refused with exit 3, listed as such.
    let v_path = env.store().session_dir(&good).join("session.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&v_path).unwrap()).unwrap();
    v["schema_version"] = 99.into();
    std::fs::write(&v_path, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = fails(&env.agent(&["--export", &good]), 3);
    assert!(
        err.contains("newer volee") && err.contains("upgrade"),
        "{err}"
    );
    let text = ok(&env.agent(&["--list-sessions"]));
    assert!(text.contains("NEWER SCHEMA 99"), "{text}");
    // The damaged one can be deleted.
    ok(&env.agent(&["--delete", &bad, "--yes"]));
}

#[test]
fn the_agent_loop_says_what_is_missing() {
    let env = Env::new();
    // Nothing listens on port 1: Ollama is "not running" (exit 3, with what to do).
    let err = fails(
        &env.agent(&["--prompt", "hi", "--ollama-url", "127.0.0.1:1"]),
        3,
    );
    assert!(
        err.contains("cannot reach Ollama") && err.contains("ollama serve"),
        "{err}"
    );
    // An unknown session is a user error, found before anything else is tried.
    let err = fails(&env.agent(&["--resume", "abc"]), 2);
    assert!(err.contains("no session"), "{err}");
    let err = fails(&env.agent(&["--approve-all"]), 2);
    assert!(err.contains("--approve-all goes with --prompt"), "{err}");
    // Management flags are exclusive; --yes alone is a mistake.
    fails(&env.agent(&["--list-sessions", "--info", "x"]), 2);
    let err = fails(&env.agent(&["--yes"]), 2);
    assert!(err.contains("--yes goes with --delete"), "{err}");
}

#[test]
fn default_store_is_under_volee_home_or_xdg_data_home_and_private() {
    let env = Env::new();
    // VOLEE_HOME: $VOLEE_HOME/data/sessions.
    let under_home = Store::new(env.tmp.path().join("volee/data/sessions"));
    let mut w = under_home
        .create(NewSession {
            title: "Home".into(),
            project_root: env.project(),
            model: "m".into(),
        })
        .unwrap();
    w.checkpoint().unwrap();
    let id = w.id().to_string();
    drop(w);
    let text = ok(&env.volee(&["agent", "--list-sessions"], &[]));
    assert!(text.contains(&id), "{text}");
    // Without VOLEE_HOME: $XDG_DATA_HOME/volee/sessions.
    let xdg = env.tmp.path().join("xdg");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volee"));
    let listing = cmd
        .env_clear()
        .env("HOME", env.tmp.path().join("home"))
        .env("XDG_DATA_HOME", &xdg)
        .args(["agent", "--list-sessions", "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&listing), serde_json::json!([]));
    // A store the CLI creates (the fork's new directory) is private.
    let new = ok(&env.volee(&["agent", "--fork", &id], &[]))
        .trim()
        .to_string();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&under_home.session_dir(&new)), 0o700);
    assert_eq!(
        mode(&under_home.session_dir(&new).join("session.json")),
        0o600
    );
    assert_eq!(
        mode(&under_home.session_dir(&new).join("transcript.jsonl")),
        0o600
    );
}

#[test]
fn info_shows_pending_tool_calls() {
    let env = Env::new();
    let id = env.session("Tools", &["run it"]);
    let mut w = env.store().open_writer(&id).unwrap();
    let call = ToolCall {
        id: Some("call_1".into()),
        function: ToolFunction {
            index: None,
            name: "shell".into(),
            arguments: serde_json::json!({"cmd": "make"}),
        },
    };
    let mut m = Message::assistant("");
    m.tool_calls.push(call.clone());
    w.push_message(m).unwrap();
    w.begin_tool_call(call);
    w.checkpoint().unwrap();
    drop(w);
    let text = ok(&env.agent(&["--info", &id]));
    assert!(
        text.contains("pending calls:") && text.contains("shell"),
        "{text}"
    );
    let v = json(&env.agent(&["--info", &id, "--json"]));
    assert_eq!(v["pending_tool_names"], serde_json::json!(["shell"]));
    assert_eq!(v["pending_tool_calls"], 1);
    assert_eq!(v["tool_counts"]["shell"], 1);
}

#[test]
fn a_symlinked_session_directory_is_refused_and_its_target_untouched() {
    let env = Env::new();
    let real = env.session("Real", &["x"]);
    let elsewhere = env.tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("precious"), "keep me").unwrap();
    let alias = "aliaselsewhe";
    let link = env.store_dir().join(alias);
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let err = fails(&env.agent(&["--delete", alias, "--yes"]), 2);
    assert!(
        err.contains("symbolic link") && err.contains(alias) && err.contains("hint:"),
        "{err}"
    );
    for args in [
        &["--archive", alias][..],
        &["--rename", alias, "x"],
        &["--fork", alias],
        &["--export", alias],
        &["--info", alias],
    ] {
        let err = fails(&env.agent(args), 2);
        assert!(err.contains("symbolic link"), "{args:?}: {err}");
    }
    // Nothing was written into the target or deleted from it; the link is still there.
    let names: Vec<String> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["precious"], "no lock written through the link");
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("precious")).unwrap(),
        "keep me"
    );
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    // The listing reports it and still shows the real session.
    let text = ok(&env.agent(&["--list-sessions"]));
    assert!(text.contains(&real), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(alias))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains("DAMAGED") && row.contains("symbolic link"),
        "{row}"
    );
}

#[test]
fn list_sessions_reports_a_fifo_meta_json_instead_of_hanging() {
    let env = Env::new();
    let good = env.session("Good", &["x"]);
    let bad = env.session("Bad", &["x"]);
    let meta = env.store().session_dir(&bad).join("meta.json");
    std::fs::remove_file(&meta).unwrap();
    nix::unistd::mkfifo(&meta, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let text = ok(&env.agent(&["--list-sessions"]));
    assert!(text.contains(&good), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(&bad))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("DAMAGED") && row.contains("FIFO"), "{row}");
    let rows = json(&env.agent(&["--list-sessions", "--json"]));
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == bad.as_str())
        .unwrap();
    assert_eq!(row["status"], "damaged", "{row}");
    // A FIFO session.json: a clear error, exit 2, and the FIFO left as it is.
    let session = env.store().session_dir(&good).join("session.json");
    std::fs::remove_file(&session).unwrap();
    nix::unistd::mkfifo(&session, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let err = fails(&env.agent(&["--export", &good]), 2);
    assert!(
        err.contains("session.json is a FIFO, not a regular file") && err.contains("hint:"),
        "{err}"
    );
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &session.symlink_metadata().unwrap().file_type()
    ));
}

/// An export as `--export` prints it, written to `name`.
fn export_to(env: &Env, id: &str, name: &str) -> (PathBuf, serde_json::Value) {
    let text = ok(&env.agent(&["--export", id]));
    let path = env.tmp.path().join(name);
    std::fs::write(&path, &text).unwrap();
    (path, serde_json::from_str(&text).unwrap())
}

/// An export without what an import changes: the id, the provenance, the export's time.
fn comparable(mut doc: serde_json::Value) -> serde_json::Value {
    doc["exported_at_ms"] = 0.into();
    doc["session"]["id"] = "".into();
    doc["session"]
        .as_object_mut()
        .unwrap()
        .remove("imported_from");
    doc
}

fn store_entries(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.store_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn import_export_round_trip_keep_id_and_info() {
    let env = Env::new();
    let id = env.session(
        "Portable",
        &["export OPENAI_API_KEY=abcdefgh12345678 then run", "hello"],
    );
    let (file, doc) = export_to(&env, &id, "export.json");
    let text = ok(&env.agent(&["--import", file.to_str().unwrap()]));
    assert!(text.contains("imported"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
    let new = text
        .split_whitespace()
        .skip_while(|w| *w != "as")
        .nth(1)
        .unwrap()
        .to_string();
    assert_ne!(new, id);
    let (_, again) = export_to(&env, &new, "again.json");
    assert_eq!(comparable(again.clone()), comparable(doc));
    assert_eq!(
        again["session"]["imported_from"]["original_id"],
        id.as_str()
    );
    let info = ok(&env.agent(&["--info", &new]));
    assert!(info.contains("imported from"), "{info}");
    assert!(info.contains(&id), "{info}");
    // The original id is taken here: --keep-id is refused with a hint, nothing written.
    let before = store_entries(&env);
    let err = fails(
        &env.agent(&["--import", file.to_str().unwrap(), "--keep-id"]),
        2,
    );
    assert!(err.contains("--keep-id"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(store_entries(&env), before);
    // --json, into another project directory.
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let v = json(&env.agent(&[
        "--import",
        file.to_str().unwrap(),
        "--project",
        other.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["original_id"], id.as_str());
    assert_eq!(
        v["project_root"],
        std::fs::canonicalize(&other).unwrap().to_str().unwrap()
    );
    // --keep-id goes with --import only (--project with --import or --fork).
    fails(&env.agent(&["--list-sessions", "--keep-id"]), 2);
}

#[test]
fn a_bad_import_is_refused_with_its_json_path_and_nothing_written() {
    let env = Env::new();
    let id = env.session("Source", &["one", "two"]);
    let (_, doc) = export_to(&env, &id, "export.json");
    let before = store_entries(&env);
    let write = |name: &str, v: &serde_json::Value| {
        let p = env.tmp.path().join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        p
    };
    let mut gap = doc.clone();
    gap["transcript"][1]["seq"] = 5.into();
    let p = write("gap.json", &gap);
    let err = fails(&env.agent(&["--import", p.to_str().unwrap()]), 2);
    assert!(err.contains("at $.transcript[1].seq"), "{err}");
    assert!(err.contains("hint: nothing was imported"), "{err}");
    let mut shape = doc.clone();
    shape["transcript"][0]["item"]["kind"] = "teleport".into();
    let p = write("shape.json", &shape);
    let err = fails(&env.agent(&["--import", p.to_str().unwrap()]), 2);
    assert!(err.contains("at $.transcript[0].item.kind"), "{err}");
    let mut newer = doc.clone();
    newer["schema_version"] = 2.into();
    let p = write("newer.json", &newer);
    let err = fails(&env.agent(&["--import", p.to_str().unwrap()]), 3);
    assert!(
        err.contains("version 2") && err.contains("up to 1"),
        "{err}"
    );
    let mut moved = doc.clone();
    moved["session"]["project_root"] = "/nonexistent/volee-import".into();
    let p = write("moved.json", &moved);
    let err = fails(&env.agent(&["--import", p.to_str().unwrap()]), 2);
    assert!(err.contains("--project DIR"), "{err}");
    let fifo = env.tmp.path().join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = fails(&env.agent(&["--import", fifo.to_str().unwrap()]), 2);
    assert!(err.contains("FIFO"), "{err}");
    assert_eq!(store_entries(&env), before);
}

/// Issue 21, bug 1: a first prompt's secret never shows in the title — meta.json, the listing
/// (text and JSON), search and info — as export and transcript already redact it.
#[test]
fn a_secret_in_the_title_is_redacted_everywhere_it_is_shown() {
    let env = Env::new();
    let id = env.session("deploy with OPENAI_API_KEY=sk9Xq2LmPz0a now", &["hi"]);
    let meta = std::fs::read_to_string(env.store().session_dir(&id).join("meta.json")).unwrap();
    let session =
        std::fs::read_to_string(env.store().session_dir(&id).join("session.json")).unwrap();
    for (what, text) in [
        ("meta.json", meta),
        ("session.json", session),
        ("list", ok(&env.agent(&["--list-sessions"]))),
        (
            "list --json",
            ok(&env.agent(&["--list-sessions", "--json"])),
        ),
        ("search", ok(&env.agent(&["--search", "deploy"]))),
        ("info", ok(&env.agent(&["--info", &id]))),
    ] {
        assert!(!text.contains("sk9Xq2LmPz0a"), "{what}: {text}");
        assert!(text.contains("OPENAI_API_KEY=[REDACTED]"), "{what}: {text}");
    }
    // A rename with a secret is cleaned the same way.
    ok(&env.agent(&["--rename", &id, "token=ghp_0123456789abcdefghijABCDEF"]));
    let text = ok(&env.agent(&["--info", &id]));
    assert!(text.contains("token=[REDACTED]"), "{text}");
}

/// Issue 21, bug 2: a summary's `token=alpha` stays as it is in compactions.jsonl and the
/// export; a real secret in the same summary goes.
#[test]
fn a_summary_keeps_words_after_token_but_not_secrets() {
    let env = Env::new();
    let mut w = env
        .store()
        .create(NewSession {
            title: "t".into(),
            project_root: env.project(),
            model: "gemma4".into(),
        })
        .unwrap();
    w.push_message(Message::user("hi")).unwrap();
    w.compact(
        volee_store::CompactionRecord {
            summary: "we chose token=alpha; the key was API_KEY=Xk9fQ2mLzzq1".into(),
            replaced_messages: 1,
            tokens_before: 10,
            tokens_after: 5,
            model: "gemma4".into(),
            seq: 0,
            at_ms: 0,
        },
        vec![Message::user("summary")],
    )
    .unwrap();
    w.checkpoint().unwrap();
    let id = w.id().to_string();
    drop(w);
    let lines =
        std::fs::read_to_string(env.store().session_dir(&id).join("compactions.jsonl")).unwrap();
    let export = ok(&env.agent(&["--export", &id]));
    for text in [&lines, &export] {
        assert!(text.contains("token=alpha"), "{text}");
        assert!(text.contains("API_KEY=[REDACTED]"), "{text}");
        assert!(!text.contains("Xk9fQ2mLzzq1"), "{text}");
    }
}

/// Issue 21, bugs 3 and 4: `--info --json` reports the size of session.json (a fork's too),
/// and text `--info` shows the retry counts.
#[test]
fn info_reports_session_json_bytes_and_retries() {
    let env = Env::new();
    let id = env.session("t", &["hi"]);
    {
        let mut w = env.store().open_writer(&id).unwrap();
        w.state_mut().retry_counts.insert("model".into(), 3);
        w.checkpoint().unwrap();
    }
    let fork = ok(&env.agent(&["--fork", &id])).trim().to_string();
    for sid in [&id, &fork] {
        let v = json(&env.agent(&["--info", sid, "--json"]));
        let len = std::fs::metadata(env.store().session_dir(sid).join("session.json"))
            .unwrap()
            .len();
        assert!(len > 0);
        assert_eq!(v["session_json_bytes"], len, "{v}");
        assert_eq!(v["retry_counts"]["model"], 3, "{v}");
        let text = ok(&env.agent(&["--info", sid]));
        assert!(
            text.contains("retries:") && text.contains("model 3"),
            "{text}"
        );
    }
    let other = env.session("none", &["hi"]);
    let text = ok(&env.agent(&["--info", &other]));
    assert!(text.contains("retries:") && text.contains("none"), "{text}");
}

/// Issue 21, bug 5: with Ollama down, resuming an archived session (or another project's)
/// says so, not "cannot reach Ollama": the store's checks come first.
#[test]
fn resume_refusals_of_the_store_come_before_the_model() {
    let env = Env::new();
    let id = env.session("t", &["hi"]);
    ok(&env.agent(&["--archive", &id]));
    let err = fails(
        &env.agent(&["--resume", &id, "--ollama-url", "127.0.0.1:1"]),
        2,
    );
    assert!(err.contains("archived") && !err.contains("Ollama"), "{err}");
    // The session was not written (no lock taken, nothing answered).
    ok(&env.agent(&["--unarchive", &id]));
    // Run from another directory than the session's project.
    let err = fails(
        &env.agent(&["--resume", &id, "--ollama-url", "127.0.0.1:1"]),
        2,
    );
    assert!(!err.contains("Ollama"), "{err}");
}

/// Issue 21, bug 6: the seed's `~/.agent-harness/memory` is mentioned by the listing when it
/// holds files (volee reads none of them), with the --import route; `--help` says where
/// sessions live.
#[test]
fn the_seed_store_is_mentioned_when_it_holds_files() {
    let env = Env::new();
    let quiet = env.agent(&["--list-sessions"]);
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("agent-harness"));
    let seed = env.tmp.path().join("home/.agent-harness/memory");
    std::fs::create_dir_all(&seed).unwrap();
    std::fs::write(seed.join("session-1.json"), "{}").unwrap();
    for args in [&["--list-sessions"][..], &["--list-sessions", "--json"][..]] {
        let out = env.agent(args);
        ok(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(".agent-harness/memory holds 1 file that volee does not read")
                && err.contains("volee agent --import FILE"),
            "{err}"
        );
    }
    // The JSON on stdout is untouched.
    assert_eq!(
        json(&env.agent(&["--list-sessions", "--json"])),
        serde_json::json!([])
    );
    let help = ok(&env.volee(&["agent", "--help"], &[]));
    assert!(
        help.contains("$XDG_DATA_HOME/volee/sessions") && help.contains("~/.agent-harness/memory"),
        "{help}"
    );
}

/// Issue 21, item 3: `--tag`, `--untag`, `--list-sessions --with-tag`, `--search --with-tag`,
/// shown by `--info` and the listing; bad tags refused (exit 2); refused while held.
#[test]
fn tags_are_set_listed_filtered_and_validated() {
    let env = Env::new();
    let a = env.session("Alpha work", &["cache alpha"]);
    let b = env.session("Beta work", &["cache beta"]);
    let out = ok(&env.agent(&["--tag", &a, "keep", "bug-21"]));
    assert!(out.contains("tags bug-21, keep"), "{out}");
    ok(&env.agent(&["--tag", &b, "bug-21"]));
    let v = json(&env.agent(&["--untag", &b, "bug-21", "--json"]));
    assert_eq!(v["tags"], serde_json::json!([]));
    let list = ok(&env.agent(&["--list-sessions"]));
    assert!(list.contains("Alpha work [bug-21, keep]"), "{list}");
    let only = json(&env.agent(&["--list-sessions", "--with-tag", "keep", "--json"]));
    assert_eq!(only.as_array().unwrap().len(), 1, "{only}");
    assert_eq!(only[0]["id"], a.as_str());
    assert_eq!(only[0]["tags"], serde_json::json!(["bug-21", "keep"]));
    let hits = json(&env.agent(&["--search", "cache", "--with-tag", "keep", "--json"]));
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    assert_eq!(hits[0]["id"], a.as_str());
    let none = ok(&env.agent(&["--list-sessions", "--with-tag", "nope"]));
    assert!(none.starts_with("no sessions tagged nope"), "{none}");
    let info = ok(&env.agent(&["--info", &a]));
    assert!(
        info.contains("tags:") && info.contains("bug-21, keep"),
        "{info}"
    );
    let err = fails(&env.agent(&["--tag", &a, "Not OK"]), 2);
    assert!(
        err.contains("invalid tag") && err.contains("hint:"),
        "{err}"
    );
    fails(&env.agent(&["--list-sessions", "--with-tag", "BAD"]), 2);
    let _held = env.store().open_writer(&a).unwrap();
    let err = fails(&env.agent(&["--tag", &a, "x"]), 2);
    assert!(err.contains("in use"), "{err}");
}

/// Issue 21, item 5: `--fork ID --project DIR` re-roots the fork, so the resume hint for another
/// project's session ("fork it into this directory") works; a missing DIR is refused.
#[test]
fn a_fork_into_another_project_is_re_rooted() {
    let env = Env::new();
    let id = env.session("t", &["hi"]);
    let other = env.tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let v = json(&env.agent(&[
        "--fork",
        &id,
        "--project",
        other.to_str().unwrap(),
        "--json",
    ]));
    let fork = v["id"].as_str().unwrap().to_string();
    let root = other.canonicalize().unwrap();
    assert_eq!(v["project_root"], root.to_str().unwrap());
    assert_eq!(env.store().load(&fork).unwrap().project_root, root);
    assert_eq!(env.store().load(&id).unwrap().project_root, env.project());
    // The store accepts the fork for resume there (what the agent loop checks first).
    env.store().check_resumable(&fork, &root).unwrap();
    assert!(env.store().check_resumable(&id, &root).is_err());
    let text = ok(&env.agent(&["--fork", &id, "--project", other.to_str().unwrap()]));
    assert!(text.contains("volee agent --resume"), "{text}");
    let err = fails(
        &env.agent(&["--fork", &id, "--project", "/nonexistent/dir"]),
        2,
    );
    assert!(
        err.contains("not a directory") && err.contains("hint:"),
        "{err}"
    );
    let err = fails(&env.agent(&["--list-sessions", "--project", "/tmp"]), 2);
    assert!(err.contains("--project goes with"), "{err}");
}

/// Issue 21, item 4: `--prune-sessions` applies config.toml's `[sessions]`: off by default; a
/// dry run lists exactly what the run then does; tagged-to-keep and held sessions untouched.
#[test]
fn prune_sessions_dry_run_equals_the_run() {
    let env = Env::new();
    let out = ok(&env.agent(&["--prune-sessions"]));
    assert!(out.contains("no retention policy"), "{out}");
    let old = env.session("old", &["x"]);
    let kept = env.session("kept", &["x"]);
    let gone = env.session("gone", &["x"]);
    let fresh = env.session("fresh", &["x"]);
    ok(&env.agent(&["--tag", &kept, "keep"]));
    ok(&env.agent(&["--archive", &gone]));
    // Make three of them old: their updated_at_ms 400 days back.
    for id in [&old, &kept, &gone] {
        let dir = env.store().session_dir(id);
        for f in ["session.json", "meta.json"] {
            let p = dir.join(f);
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let t = v["updated_at_ms"].as_u64().unwrap() - 400 * 86_400_000;
            v["updated_at_ms"] = t.into();
            std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        }
    }
    std::fs::create_dir_all(env.tmp.path().join("volee/config")).unwrap();
    std::fs::write(
        env.tmp.path().join("volee/config/config.toml"),
        "[sessions]\narchive_after = \"30d\"\ndelete_archived_after = \"180d\"\nkeep_tagged = [\"keep\"]\n",
    )
    .unwrap();
    let actions = |v: &serde_json::Value| {
        let mut a: Vec<(String, String)> = v["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["id"].as_str().unwrap().to_string(),
                    a["action"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        a.sort();
        a
    };
    let dry = json(&env.agent(&["--prune-sessions", "--dry-run", "--json"]));
    let mut want = vec![
        (old.clone(), "archive".to_string()),
        (gone.clone(), "delete".into()),
    ];
    want.sort();
    assert_eq!(actions(&dry), want, "{dry}");
    let text = ok(&env.agent(&["--prune-sessions", "--dry-run"]));
    assert!(text.contains(&format!("would archive {old}")), "{text}");
    assert_eq!(
        env.store().list(true).unwrap().len(),
        4,
        "a dry run changes nothing"
    );
    let run = json(&env.agent(&["--prune-sessions", "--json"]));
    assert_eq!(actions(&run), actions(&dry), "{run}");
    assert!(run["actions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["status"] == "done"));
    assert!(env.store().load(&old).unwrap().archived);
    assert!(env.store().load(&gone).is_err());
    assert!(!env.store().load(&kept).unwrap().archived);
    assert!(!env.store().load(&fresh).unwrap().archived);
    let err = fails(&env.agent(&["--list-sessions", "--dry-run"]), 2);
    assert!(err.contains("--dry-run goes with"), "{err}");
}
