//! volee's own agent (issue 6): the loop's own cost per turn, model and tool time excluded, and
//! the sandbox's create + exec round trip against the real Docker engine.
//!
//! - loop overhead: an instant in-process model and an instant shell behind the `Model`/`Shell`
//!   traits, a real store on disk (`BENCH_DIR`, default the temp dir): what remains is the
//!   loop — context conversion, token estimates, approvals, tool dispatch, transcript lines and
//!   checkpoints (fsync'd). A text turn is one request; a tool turn is a batch of three calls
//!   (todo, scratchpad, shell) and a second request.
//! - sandbox: `Sandbox::start` (create + start a locked-down container), `exec` of `true`
//!   (create exec, attach, inspect), `remove`. Needs Docker (SKIPPED without).
//!
//! `cargo bench -p volee-agent --bench agent` (`BENCH_ONLY=loop|sandbox` runs one part).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use volee_agent::{create_session, Agent, AgentOptions, Approval, Model, NoReporter, Shell, Ui};
use volee_ollama::{
    ChatResponse, Message, OllamaError, Role, StreamEvent, Tool, ToolCall, ToolCallFunction, Usage,
};
use volee_sandbox::{ExecOutput, ExecRequest, Sandbox, SandboxConfig, SandboxError};
use volee_store::Store;

/// min/p50/p99/max of samples in milliseconds.
fn stats(v: Vec<f64>) -> String {
    volee_test_support::bench::summary(v, 3)
}

/// Answers at once: tool calls after a user message (when `tools`), text otherwise.
struct InstantModel {
    tools: bool,
}

impl Model for InstantModel {
    fn name(&self) -> &str {
        "instant"
    }
    fn num_ctx(&self) -> u32 {
        1 << 20
    }
    async fn chat(
        &self,
        messages: &[Message],
        _tools: &[Tool],
        on_event: &mut dyn FnMut(&StreamEvent),
    ) -> Result<ChatResponse, OllamaError> {
        let last_is_user = messages.last().is_some_and(|m| m.role == Role::User);
        let mut message = Message::assistant("");
        if self.tools && last_is_user {
            let call = |i: u32, name: &str, args: serde_json::Value| ToolCall {
                id: Some(format!("call_{}_{i}", messages.len())),
                function: ToolCallFunction {
                    index: Some(i),
                    name: name.into(),
                    arguments: args,
                },
            };
            message.tool_calls = vec![
                call(
                    0,
                    "todo",
                    json!({"action": "add", "text": "measure the loop"}),
                ),
                call(
                    1,
                    "scratchpad",
                    json!({"action": "append", "text": "a note"}),
                ),
                call(2, "shell", json!({"command": "cargo test -p volee-agent"})),
            ];
        } else {
            let text = "Done. The loop's own cost is what this measures; the model and the tools answer at once.";
            for piece in text.split_inclusive(' ') {
                on_event(&StreamEvent::Content(piece.into()));
            }
            message.content = text.into();
        }
        Ok(ChatResponse {
            message,
            done_reason: Some("stop".into()),
            usage: Usage::new(Some(1000), Some(20), 0, 0),
            retries: 0,
            raw_tool_call_text: false,
            total_duration: None,
            load_duration: None,
        })
    }
}

/// Runs nothing, at once.
struct InstantShell;

impl Shell for InstantShell {
    async fn exec(&self, _command: &str, _timeout: Duration) -> Result<ExecOutput, SandboxError> {
        Ok(ExecOutput {
            stdout: "test result: ok. 8 passed\n".into(),
            stderr: String::new(),
            exit_code: Some(0),
            timed_out: false,
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_bytes: 26,
            stderr_bytes: 0,
            duration: Duration::ZERO,
        })
    }
    fn describe(&self) -> String {
        "instant".into()
    }
}

/// Approves everything, shows nothing.
struct QuietUi;

impl Ui for QuietUi {
    fn text(&mut self, _delta: &str) {}
    fn tool_started(&mut self, _description: &str) {}
    fn tool_finished(&mut self, _summary: &str) {}
    fn notice(&mut self, _text: &str) {}
    fn approve(&mut self, _question: &volee_agent::Question) -> Approval {
        Approval::Once
    }
}

async fn loop_overhead(dir: &std::path::Path) {
    for (label, tools) in [
        ("text turn (1 request)", false),
        ("tool turn (3 calls, 2 requests)", true),
    ] {
        let store = Store::new(dir.join(format!("store-{tools}")));
        let root = dir.canonicalize().unwrap();
        let writer = create_session(&store, &root, "instant").unwrap();
        let mut agent = Agent::new(
            InstantModel { tools },
            InstantShell,
            store,
            writer,
            &root,
            AgentOptions::new(1 << 20),
            Box::new(NoReporter),
        )
        .unwrap();
        let mut ui = QuietUi;
        let mut first = Vec::new();
        let mut later = Vec::new();
        for i in 0..150 {
            let started = Instant::now();
            agent
                .turn("Measure the loop's own cost per turn, please.", &mut ui)
                .await
                .unwrap();
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            if i < 50 {
                first.push(ms);
            } else if i >= 100 {
                later.push(ms);
            }
        }
        println!(
            "loop overhead, {label}, context of 2–{} messages: {}",
            2 + 50 * if tools { 6 } else { 2 },
            stats(first)
        );
        println!(
            "loop overhead, {label}, context of {}–{} messages: {}",
            2 + 100 * if tools { 6 } else { 2 },
            2 + 150 * if tools { 6 } else { 2 },
            stats(later)
        );
    }
}

async fn sandbox_round_trip(dir: &std::path::Path) {
    let docker = match volee_sandbox::connect().await {
        Ok(d) => d,
        Err(e) => {
            println!("SKIPPED sandbox: {e}");
            return;
        }
    };
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    volee_sandbox::ensure_image(&docker, volee_sandbox::BUSYBOX_IMAGE)
        .await
        .unwrap();
    let mut create = Vec::new();
    let mut remove = Vec::new();
    let mut exec = Vec::new();
    let mut first_exec = Vec::new();
    for i in 0..10 {
        let config = SandboxConfig::new(&project, &format!("bench-{}-{i}", std::process::id()));
        let started = Instant::now();
        let sb = Sandbox::start(&docker, &config).await.unwrap();
        create.push(started.elapsed().as_secs_f64() * 1000.0);
        for j in 0..10 {
            let started = Instant::now();
            let out = sb.exec(&ExecRequest::new("true")).await.unwrap();
            assert!(out.success());
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            if j == 0 {
                first_exec.push(ms);
            } else {
                exec.push(ms);
            }
        }
        let started = Instant::now();
        sb.remove().await.unwrap();
        remove.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    println!("sandbox create + start: {}", stats(create));
    println!(
        "sandbox first exec `true` round trip: {}",
        stats(first_exec)
    );
    println!("sandbox exec `true` round trip: {}", stats(exec));
    println!("sandbox remove: {}", stats(remove));
}

fn main() {
    let base = std::env::var_os("BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::Builder::new()
        .prefix("volee-agent-bench-")
        .tempdir_in(base)
        .unwrap();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if only.is_empty() || only == "loop" {
            loop_overhead(dir.path()).await;
        }
        if only.is_empty() || only == "sandbox" {
            sandbox_round_trip(dir.path()).await;
        }
    });
}
