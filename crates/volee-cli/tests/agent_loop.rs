//! `volee agent` (the loop) through the real binary, against the Ollama stand-in of
//! `volee-test-support` and a real Docker engine: `--prompt` with and without `--approve-all`,
//! a SIGKILL while a shell call runs and the resume that follows, credentials and secrets, the
//! interactive pane's commands, and the states reported to the daemon.
//!
//! Without Docker these tests print SKIPPED, and fail when `CI` is set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use volee_protocol::Request;
use volee_store::Store;
use volee_test_support::ollama_server::{FakeModel, OllamaServer, OllamaTurn};

struct Env {
    tmp: tempfile::TempDir,
    server: OllamaServer,
}

impl Env {
    /// None without Docker (a loud SKIPPED; a panic under CI).
    fn new(test: &str, script: Vec<OllamaTurn>) -> Option<Env> {
        if !volee_test_support::require_docker(test) {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        for d in ["home", "volee", "project"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        // The sandbox runs as the project's owner, never root.
        if is_root() {
            std::os::unix::fs::chown(tmp.path().join("project"), Some(1000), Some(1000)).unwrap();
        }
        Some(Env {
            tmp,
            server: OllamaServer::start(script),
        })
    }

    /// The same without Docker (for what fails before the sandbox).
    fn without_docker(script: Vec<OllamaTurn>) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["home", "volee", "project"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        Env {
            tmp,
            server: OllamaServer::start_with_models(
                script,
                vec![FakeModel::gemma4(), FakeModel::gemma3()],
            ),
        }
    }

    fn project(&self) -> PathBuf {
        self.tmp.path().join("project").canonicalize().unwrap()
    }

    fn store_dir(&self) -> PathBuf {
        self.tmp.path().join("store")
    }

    fn store(&self) -> Store {
        Store::new(self.store_dir())
    }

    fn volee_home(&self) -> PathBuf {
        self.tmp.path().join("volee")
    }

    /// `volee agent ARGS --memory-dir STORE` in the project, in a cleared environment.
    fn command(&self, args: &[&str], extra: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_volee"));
        cmd.env_clear()
            .env("HOME", self.tmp.path().join("home"))
            .env("VOLEE_HOME", self.volee_home())
            .env("OLLAMA_HOST", self.server.base_url())
            .current_dir(self.project())
            .arg("agent")
            .args(args)
            .arg("--memory-dir")
            .arg(self.store_dir());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, args: &[&str], extra: &[(&str, &str)], stdin: &str) -> Output {
        let mut child = self
            .command(args, extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn check(&self) {
        self.server
            .check_invariants()
            .unwrap_or_else(|e| panic!("{e}\n{}", self.server.summary()));
    }

    fn only_session(&self) -> String {
        let list = self.store().list(true).unwrap();
        assert_eq!(list.len(), 1, "{list:?}");
        list[0].id.clone()
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Containers of a session still there (any state).
fn containers_of(session: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=dev.volee.session={session}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// Every file under `dir`, read as bytes.
fn all_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(all_files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

#[test]
fn prompt_denies_what_needs_approval_unless_approve_all() {
    let script = vec![
        OllamaTurn::tool("shell", json!({"command": "touch ran.txt"})),
        OllamaTurn::text("I could not run it."),
        OllamaTurn::tool("shell", json!({"command": "echo yes > ran.txt"})),
        OllamaTurn::text("Ran it."),
    ];
    let Some(env) = Env::new("prompt_approve_all", script) else {
        return;
    };
    // An agent id with no daemon listening: the agent goes on silently.
    let no_daemon = [("VOLEE_AGENT_ID", "k3f9")];
    let out = env.run(&["--prompt", "touch a file"], &no_daemon, "");
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 1, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stdout.contains("not approved") && stdout.contains("I could not run it."),
        "{stdout}"
    );
    assert!(stderr.contains("--approve-all"), "{stderr}");
    assert!(!env.project().join("ran.txt").exists());

    let out = env.run(&["--prompt", "now do it", "--approve-all"], &no_daemon, "");
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("Ran it."), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(env.project().join("ran.txt")).unwrap(),
        "yes\n"
    );
    assert_eq!(env.store().list(true).unwrap().len(), 2);
    env.check();
    // Every sandbox was removed at the end of its run.
    for l in env.store().list(true).unwrap() {
        assert!(containers_of(&l.id).is_empty(), "left behind for {}", l.id);
    }
}

#[test]
fn a_crash_mid_tool_is_resumed_with_outcome_unknown_never_rerun() {
    let script = vec![
        OllamaTurn::tool(
            "shell",
            json!({"command": "echo run >> runs.txt; sleep 30; echo finished >> runs.txt"}),
        ),
        OllamaTurn::text("The last command's outcome is unknown; I will check runs.txt."),
    ];
    let Some(env) = Env::new("crash_resume", script) else {
        return;
    };
    let mut child: Child = env
        .command(&["--prompt", "sleep a while", "--approve-all"], &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the call is recorded as pending and runs in the sandbox.
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        assert!(Instant::now() < deadline, "the shell call never started");
        let pending = env.store().list(true).ok().and_then(|l| {
            l.into_iter()
                .find(|s| s.meta.as_ref().is_some_and(|m| m.pending_tool_calls == 1))
        });
        if let Some(s) = pending {
            if std::fs::read_to_string(env.project().join("runs.txt")).is_ok() {
                break s.id;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert_eq!(
        containers_of(&id).len(),
        1,
        "the killed run's sandbox is left"
    );

    // Resume interactively: the interrupted call gets "outcome unknown" and is not re-run.
    let out = env.run(
        &["--resume", &id],
        &[],
        "what happened to the last command?\n\\exit\n",
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("outcome is unknown"), "{stdout}");
    let reqs = env.server.chat_requests();
    assert_eq!(reqs.len(), 2, "{}", env.server.summary());
    let call_id = &reqs[0].tool_call_ids[0];
    let result = reqs[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id.as_str())
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    assert!(result.starts_with("outcome unknown"), "{result}");
    assert_eq!(
        std::fs::read_to_string(env.project().join("runs.txt")).unwrap(),
        "run\n",
        "the call ran again, or ran on"
    );
    env.check();
    let info = env.store().load(&id).unwrap();
    assert!(info.pending_tool_calls.is_empty());
    // The crashed run's container was removed by the next start.
    assert!(containers_of(&id).is_empty());
}

#[test]
fn sigterm_ends_the_agent_and_removes_its_sandbox() {
    let script = vec![OllamaTurn::tool(
        "shell",
        json!({"command": "echo run >> runs.txt; sleep 30"}),
    )];
    let Some(env) = Env::new("sigterm", script) else {
        return;
    };
    let child = env
        .command(&["--prompt", "sleep", "--approve-all"], &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(env.project().join("runs.txt")).is_err() {
        assert!(Instant::now() < deadline, "the shell call never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let id = env.only_session();
    assert_eq!(containers_of(&id).len(), 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("ended by signal 15"), "{stderr}");
    assert!(containers_of(&id).is_empty(), "the sandbox was left behind");
    // The running call stays pending: a resume answers it "outcome unknown".
    assert_eq!(env.store().load(&id).unwrap().pending_tool_calls.len(), 1);
}

#[test]
fn credentials_and_secrets_stay_out_of_session_files_and_exports() {
    let key = "sk-voleetestcredential0123456789";
    let script = vec![
        OllamaTurn::tool("shell", json!({"command": "env"})),
        OllamaTurn::text("Noted."),
    ];
    let Some(env) = Env::new("secrets", script) else {
        return;
    };
    let out = env.run(
        &[
            "--prompt",
            "deploy with API_KEY=hunter2hunter2 please",
            "--approve-all",
        ],
        &[("OLLAMA_API_KEY", key)],
        "",
    );
    assert_eq!(code(&out), 0, "{:?}", text(&out));
    // The credential went to Ollama with every request…
    for e in env.server.exchanges() {
        let auth = e
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.as_str());
        assert_eq!(auth, Some(format!("Bearer {key}").as_str()), "{}", e.path);
    }
    // …but not into the sandbox…
    let reqs = env.server.chat_requests();
    let env_output = reqs[1].messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(env_output.contains("PATH="), "{env_output}");
    assert!(!env_output.contains(key), "{env_output}");
    // …nor into any file of the session, nor the export.
    let id = env.only_session();
    for (path, bytes) in all_files(&env.store().session_dir(&id)) {
        let content = String::from_utf8_lossy(&bytes);
        assert!(
            !content.contains(key),
            "{} holds the credential",
            path.display()
        );
    }
    let export = env.run(&["--export", &id], &[], "");
    let export = String::from_utf8_lossy(&export.stdout).into_owned();
    assert!(
        export.contains("deploy with API_KEY=[REDACTED]"),
        "{export}"
    );
    assert!(!export.contains(key) && !export.contains("hunter2hunter2"));
    // The transcript is redacted too; the context in session.json is kept as the model saw it
    // (docs/store.md).
    let transcript =
        std::fs::read_to_string(env.store().session_dir(&id).join("transcript.jsonl")).unwrap();
    assert!(!transcript.contains("hunter2hunter2"), "{transcript}");
}

#[test]
fn the_pane_answers_its_commands_and_asks_approvals() {
    let script = vec![
        OllamaTurn::text("Hi there."),
        OllamaTurn::tool("shell", json!({"command": "touch x"})),
        OllamaTurn::text("Denied, fine."),
        OllamaTurn::text("SUMMARY"),
    ];
    let Some(env) = Env::new("pane", script) else {
        return;
    };
    let input = "\\help\nhello\nrun something\nmaybe\nd\n\\title My title\n\\info\n\\fork\n\\sessions\n\\compact\n\\bogus\n\\exit\n";
    let out = env.run(&[], &[], input);
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "stdout: {stdout}\nstderr: {stderr}");
    for expected in [
        "\\fork",
        "Hi there.",
        "? the agent wants to run shell:\n  command, 7 characters:\n  │ touch x\n",
        "answer o, a or d",
        "denied: shell: touch x",
        "Denied, fine.",
        "title: My title",
        "sandbox      Docker container volee-sbx-",
        "forked into ",
        "unknown command \\bogus",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(!env.project().join("x").exists());
    let list = env.store().list(true).unwrap();
    assert_eq!(list.len(), 2, "the session and its fork");
    let fork = list
        .iter()
        .find(|l| l.meta.as_ref().is_some_and(|m| m.parent_id.is_some()))
        .unwrap();
    assert!(stdout.contains(&format!("volee agent --resume {}", fork.id)));
    let original = list.iter().find(|l| l.id != fork.id).unwrap();
    assert_eq!(original.meta.as_ref().unwrap().title, "My title");
    assert!(stderr.contains(&format!("volee agent --resume {}", original.id)));
    env.check();
}

#[test]
fn states_are_reported_to_the_daemon_as_volee_hook_events() {
    let script = vec![
        OllamaTurn::tool("shell", json!({"command": "true"})),
        OllamaTurn::text("done"),
        OllamaTurn::in_stream_error("", "model runner has unexpectedly stopped"),
    ];
    let Some(env) = Env::new("states", script) else {
        return;
    };
    // A stand-in daemon: records every request on its socket.
    let socket = env.volee_home().join("run/daemon.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_ok() {
                if let Ok(r) = serde_json::from_str::<Request>(&line) {
                    record.lock().unwrap().push(r);
                }
            }
        }
    });
    let out = env.run(&[], &[("VOLEE_AGENT_ID", "k3f9")], "go\no\nagain\n\\exit\n");
    assert_eq!(code(&out), 0, "{:?}", text(&out));
    let id = env.only_session();
    let events: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| match r {
            Request::Hook(h) => {
                assert_eq!((h.agent.as_str(), h.harness.as_str()), ("k3f9", "volee"));
                assert_eq!(h.session_id.as_deref(), Some(id.as_str()));
                h.event.clone()
            }
            other => panic!("unexpected request {other:?}"),
        })
        .collect();
    assert_eq!(
        events,
        [
            "SessionStart",
            "TurnEnd",
            "TurnStart",
            "ApprovalAsked",
            "ApprovalAnswered",
            "TurnEnd",
            "TurnStart",
            // A failed turn stays failed while the pane waits (a new turn clears it).
            "TurnFailed"
        ]
    );
    // What the daemon makes of them (the volee profile's hook table).
    let state = |e: &str| volee_harness::hook_meaning("volee", e, &json!({}));
    assert_eq!(
        state("ApprovalAsked"),
        Some(volee_harness::HookMeaning::State(
            volee_protocol::AgentState::NeedsYou
        ))
    );
    env.check();
}

#[test]
fn a_missing_model_tool_support_or_docker_is_a_clear_environment_error() {
    let env = Env::without_docker(Vec::new());
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 3] = [
        (
            &["--prompt", "x", "--model", "nosuch"],
            &[],
            &["model \"nosuch\" is not installed", "ollama pull nosuch"],
        ),
        (
            &["--prompt", "x", "--model", "gemma3:4b"],
            &[],
            &["does not support tool calling", "tools"],
        ),
        (
            &["--prompt", "x"],
            &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
            &["Docker is not running", "start Docker"],
        ),
    ];
    for (args, extra, expected) in cases {
        let out = env.run(args, extra, "");
        let (_, stderr) = text(&out);
        assert_eq!(code(&out), 3, "{args:?}: {stderr}");
        for e in expected {
            assert!(stderr.contains(e), "{args:?}: missing {e:?} in {stderr}");
        }
    }
    // Nothing was created for runs that could not start.
    assert!(env.store().list(true).unwrap().is_empty());
    assert!(env.server.chat_requests().is_empty());
}

#[test]
fn a_missing_image_is_named() {
    let Some(env) = Env::new("missing_image", Vec::new()) else {
        return;
    };
    let out = env.run(
        &["--prompt", "x", "--image", "volee-test/no-such-image:1"],
        &[],
        "",
    );
    let (_, stderr) = text(&out);
    assert_eq!(code(&out), 3, "{stderr}");
    assert!(
        stderr.contains("\"volee-test/no-such-image:1\" is not available")
            && stderr.contains("leave out --image"),
        "{stderr}"
    );
    assert!(env.store().list(true).unwrap().is_empty());
}

/// Issue 21, item 1: checkpoint → two turns → rewind through the binary (the context equals the
/// checkpoint's, the transcript grew by the two turns plus the event, files are not undone and
/// the write is listed), refused while a writer holds the session, into a fork, resumed after,
/// and the pane's `\checkpoint` / `\rewind`.
#[test]
fn checkpoint_two_turns_then_rewind_through_the_cli_and_the_pane() {
    let script = vec![
        OllamaTurn::text("One."),
        OllamaTurn::tool("write_file", json!({"path": "a.txt", "content": "x\n"})),
        OllamaTurn::text("Wrote it."),
        OllamaTurn::text("Three."),
        OllamaTurn::text("After the rewind."),
        OllamaTurn::text("Hello from the pane."),
    ];
    let Some(env) = Env::new("checkpoint_rewind", script) else {
        return;
    };
    let ok = |out: &Output| {
        let (stdout, stderr) = text(out);
        assert_eq!(code(out), 0, "stdout: {stdout}\nstderr: {stderr}");
        stdout
    };
    ok(&env.run(&["--prompt", "first", "--approve-all"], &[], ""));
    let id = env.only_session();
    let stdout = ok(&env.run(&["--checkpoint", &id, "cp1"], &[], ""));
    assert!(
        stdout.contains(&format!("volee agent --rewind {id} cp1")),
        "{stdout}"
    );
    let dup = env.run(&["--checkpoint", &id, "cp1"], &[], "");
    assert_eq!(code(&dup), 2);
    assert!(text(&dup).1.contains("already"), "{}", text(&dup).1);
    let at_cp = env.store().load(&id).unwrap();

    ok(&env.run(
        &["--resume", &id, "--prompt", "second", "--approve-all"],
        &[],
        "",
    ));
    ok(&env.run(&["--resume", &id, "--prompt", "third"], &[], ""));
    assert!(env.project().join("a.txt").exists());
    let before = env.store().load(&id).unwrap();
    let lines_before = volee_store::read_transcript(&env.store(), &id)
        .unwrap()
        .items;
    // Two turns: user, assistant (call), tool result, assistant; user, assistant (and the
    // approval's event).
    let turn_messages = lines_before[at_cp.last_seq as usize..]
        .iter()
        .filter(|l| matches!(l.item, volee_store::TranscriptItem::Message { .. }))
        .count();
    assert_eq!(turn_messages, 6);
    let lines_before = lines_before.len() as u64;

    let list = ok(&env.run(&["--checkpoints", &id, "--json"], &[], ""));
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["name"], "cp1");
    assert_eq!(list[0]["seq"], at_cp.last_seq);
    assert_eq!(list[0]["messages"], at_cp.messages.len());

    // Refused while a writer holds it, naming the holder; nothing changes.
    {
        let _held = env.store().open_writer(&id).unwrap();
        let out = env.run(&["--rewind", &id, "cp1"], &[], "");
        let (_, stderr) = text(&out);
        assert_eq!(code(&out), 2, "{stderr}");
        assert!(
            stderr.contains(&format!("held by pid {}", std::process::id())),
            "{stderr}"
        );
    }
    assert_eq!(env.store().load(&id).unwrap().messages, before.messages);

    let stdout = ok(&env.run(&["--rewind", &id, "cp1"], &[], ""));
    assert!(stdout.contains("NOT undone"), "{stdout}");
    assert!(stdout.contains("write_file a.txt"), "{stdout}");
    let after = env.store().load(&id).unwrap();
    assert_eq!(after.messages, at_cp.messages);
    assert_eq!(after.usage, before.usage, "usage stays cumulative");
    let lines = volee_store::read_transcript(&env.store(), &id)
        .unwrap()
        .items;
    assert_eq!(lines.len() as u64, lines_before + 1);
    let event = volee_store::RewindRecord::from_item(&lines.last().unwrap().item).unwrap();
    assert_eq!(event.checkpoint_seq, at_cp.last_seq);
    // The file stays: only the conversation went back.
    assert!(env.project().join("a.txt").exists());

    // Into a fork: the session is left as it is.
    let out = ok(&env.run(&["--rewind", &id, "cp1", "--into-fork", "--json"], &[], ""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let fork = v["id"].as_str().unwrap().to_string();
    assert_ne!(fork, id);
    assert_eq!(env.store().load(&id).unwrap(), after);
    assert_eq!(env.store().load(&fork).unwrap().messages, at_cp.messages);

    // The rewound session resumes from the checkpoint's context.
    ok(&env.run(&["--resume", &id, "--prompt", "again"], &[], ""));
    let last = env
        .server
        .chat_requests()
        .last()
        .unwrap()
        .messages()
        .to_vec();
    assert_eq!(last.len(), at_cp.messages.len() + 1, "{last:?}");

    // The pane.
    let input = "\\checkpoint p1\nhello\n\\checkpoints\n\\rewind p1\n\\rewind nope\n\\exit\n";
    let stdout = ok(&env.run(&["--resume", &id], &[], input));
    for expected in [
        "checkpoint p1 at transcript line",
        "Hello from the pane.",
        "cp1  line",
        "rewound ",
        "no write_file, edit_file or shell call ran since the checkpoint",
        "has no checkpoint \"nope\"",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    env.check();
}
