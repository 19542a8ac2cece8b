//! Approval questions as the user sees them in the pane: the whole call, nothing hidden by a run
//! of spaces, a bidi override or a zero-width character. No Docker: the commands run on the
//! host through `sh -c`, in the project directory, so what was approved is seen to run.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use volee_agent::{create_session, Agent, AgentOptions, NoReporter, Shell};
use volee_ollama::{OllamaClient, OllamaConfig};
use volee_sandbox::{ExecOutput, SandboxError};
use volee_store::Store;
use volee_test_support::ollama_server::{OllamaServer, OllamaTurn};

/// `sh -c` on the host, in the project directory.
struct HostShell(PathBuf);

impl Shell for HostShell {
    async fn exec(&self, command: &str, _timeout: Duration) -> Result<ExecOutput, SandboxError> {
        let began = Instant::now();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(&self.0)
            .output()
            .unwrap();
        Ok(ExecOutput {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            exit_code: out.status.code().map(i64::from),
            timed_out: false,
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_bytes: out.stdout.len() as u64,
            stderr_bytes: out.stderr.len() as u64,
            duration: began.elapsed(),
        })
    }
    fn describe(&self) -> String {
        "sh on the host (test)".into()
    }
}

#[derive(Clone, Default)]
struct SharedOut(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOut {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn wait_for(&self, what: &str) -> String {
        self.wait_for_count(what, 1)
    }
    /// Everything shown once `what` was shown `n` times.
    fn wait_for_count(&self, what: &str, n: usize) -> String {
        let began = Instant::now();
        loop {
            let text = self.text();
            if text.matches(what).count() >= n {
                return text;
            }
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "{what:?} never shown:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[tokio::test]
async fn the_approval_question_shows_what_hides_behind_250_spaces_and_a_bidi_override() {
    let attack = format!("echo harmless{}; touch x", " ".repeat(250));
    let script = vec![
        OllamaTurn::tool("shell", json!({ "command": attack })),
        OllamaTurn::text("Done."),
        // U+202E shows what follows it reversed: "touch y" as "y hcuot".
        OllamaTurn::tool(
            "shell",
            json!({"command": "echo ok #\u{202e}\u{200b}\ntouch y"}),
        ),
        OllamaTurn::text("Not done."),
    ];
    let server = OllamaServer::start(script);
    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::new(store_dir.path().join("sessions"));
    let writer = create_session(&store, &root, "gemma4").unwrap();
    let client = OllamaClient::new(OllamaConfig {
        base_url: server.base_url(),
        num_ctx: 8192,
        ..OllamaConfig::default()
    })
    .unwrap();
    let mut agent = Agent::new(
        client,
        HostShell(root.clone()),
        store,
        writer,
        &root,
        AgentOptions::new(8192),
        Box::new(NoReporter),
    )
    .unwrap();
    let interrupts = std::sync::Arc::new(volee_agent::Interrupts::new());
    let (input, mut typing) = std::io::pipe().unwrap();
    let out = SharedOut::default();
    let mut pane = volee_agent::Pane::new(
        volee_agent::InterruptibleInput::new(input, interrupts.clone()).unwrap(),
        out.clone(),
        volee_agent::ApprovalMode::Ask,
    );
    // The user reads the question, then answers: the first call once, the second denied.
    let user = {
        let out = out.clone();
        std::thread::spawn(move || {
            typing.write_all(b"make it\n").unwrap();
            let first = out.wait_for("allow shell:");
            typing.write_all(b"o\n").unwrap();
            out.wait_for("Done.");
            typing.write_all(b"again\n").unwrap();
            let second = out.wait_for_count("allow shell:", 2);
            typing.write_all(b"d\n").unwrap();
            out.wait_for("Not done.");
            typing.write_all(b"\\exit\n").unwrap();
            (first, second)
        })
    };
    volee_agent::interactive(&mut agent, &mut pane, None, &interrupts)
        .await
        .unwrap();
    let (first, second) = user.join().unwrap();
    let second = &second[second.rfind("? the agent wants to run").unwrap()..];
    // What the user saw before answering: the end of the command, its spaces counted.
    let question = &first[first.find("? the agent wants to run").unwrap()..];
    assert!(question.contains("; touch x"), "{question}");
    assert!(
        question.contains("echo harmless␠×250; touch x"),
        "{question}"
    );
    assert!(root.join("x").exists(), "the approved command ran as shown");
    // The second question: the override and the zero-width space marked, both lines shown.
    assert!(
        second.contains("│ echo ok #⟨U+202E⟩⟨U+200B⟩\n  │ touch y\n"),
        "{second}"
    );
    assert!(!second.contains('\u{202e}') && !second.contains('\u{200b}'));
    assert!(!root.join("y").exists(), "the denied command did not run");
    server
        .check_invariants()
        .unwrap_or_else(|e| panic!("{e}\n{}", server.summary()));
}
