//! A world for one test: the Ollama stand-in, a project directory, a store, a sandbox whose
//! containers are removed on drop (panics included), and a pane that answers approvals from a
//! list and records everything shown.

use std::collections::VecDeque;
use std::path::PathBuf;

use serde_json::Value;
use volee_agent::{create_session, Agent, AgentOptions, Approval, NoReporter, Question, Ui};
use volee_ollama::{OllamaClient, OllamaConfig};
use volee_sandbox::{Leftovers, Sandbox, SandboxConfig};
use volee_store::Store;
use volee_test_support::ollama_server::{OllamaServer, OllamaTurn};

/// Approvals answered from a list (then "deny"); everything the pane would show, kept.
#[derive(Default)]
pub struct ScriptedUi {
    pub approvals: VecDeque<Approval>,
    /// Every approval question: (tool, the whole question as text).
    pub asked: Vec<(String, String)>,
    pub text: String,
    pub notices: Vec<String>,
    pub tools: Vec<String>,
}

impl ScriptedUi {
    pub fn answering(approvals: &[Approval]) -> ScriptedUi {
        ScriptedUi {
            approvals: approvals.iter().copied().collect(),
            ..ScriptedUi::default()
        }
    }
}

impl Ui for ScriptedUi {
    fn text(&mut self, delta: &str) {
        self.text.push_str(delta);
    }
    fn tool_started(&mut self, description: &str) {
        self.tools.push(description.to_string());
    }
    fn tool_finished(&mut self, _summary: &str) {}
    fn notice(&mut self, text: &str) {
        self.notices.push(text.to_string());
    }
    fn approve(&mut self, question: &Question) -> Approval {
        self.asked.push((question.tool.clone(), question.whole()));
        self.approvals.pop_front().unwrap_or(Approval::Deny)
    }
}

/// Removes a session's containers when dropped, from a thread with its own runtime.
pub struct ContainerGuard(pub String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let id = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(d) = volee_sandbox::connect().await {
                    let _ = volee_sandbox::remove_leftovers(&d, &Leftovers::Session(id)).await;
                }
            });
        })
        .join();
    }
}

pub struct World {
    pub server: OllamaServer,
    pub project: tempfile::TempDir,
    pub store_dir: tempfile::TempDir,
    pub guards: Vec<ContainerGuard>,
}

pub type TestAgent = Agent<OllamaClient, Sandbox>;

impl World {
    /// None (after a loud SKIPPED, or a panic under CI) without Docker.
    pub fn new(test: &str, script: Vec<OllamaTurn>) -> Option<World> {
        if !volee_test_support::require_docker(test) {
            return None;
        }
        let project = tempfile::Builder::new()
            .prefix("volee-agent-test-")
            .tempdir()
            .unwrap();
        // The sandbox runs as the project's owner, never root: give it a user's directory.
        if is_root() {
            std::os::unix::fs::chown(project.path(), Some(1000), Some(1000)).unwrap();
        }
        Some(World {
            server: OllamaServer::start(script),
            project,
            store_dir: tempfile::tempdir().unwrap(),
            guards: Vec::new(),
        })
    }

    pub fn root(&self) -> PathBuf {
        self.project.path().canonicalize().unwrap()
    }

    pub fn store(&self) -> Store {
        Store::new(self.store_dir.path().join("sessions"))
    }

    pub fn client(&self, max_context_tokens: u32) -> OllamaClient {
        OllamaClient::new(OllamaConfig {
            base_url: self.server.base_url(),
            num_ctx: max_context_tokens,
            ..OllamaConfig::default()
        })
        .unwrap()
    }

    /// A new session with a fresh sandbox.
    pub async fn agent(&mut self, max_context_tokens: u32) -> TestAgent {
        let store = self.store();
        let writer = create_session(&store, &self.root(), "gemma4").unwrap();
        self.guards.push(ContainerGuard(writer.id().to_string()));
        let docker = volee_sandbox::connect().await.unwrap();
        let sandbox = Sandbox::start(&docker, &SandboxConfig::new(self.root(), writer.id()))
            .await
            .unwrap();
        Agent::new(
            self.client(max_context_tokens),
            sandbox,
            store,
            writer,
            &self.root(),
            AgentOptions::new(u64::from(max_context_tokens)),
            Box::new(NoReporter),
        )
        .unwrap()
    }

    /// The requests' invariants, with the exchange log on failure.
    pub fn check(&self) {
        self.server
            .check_invariants()
            .unwrap_or_else(|e| panic!("{e}\n{}", self.server.summary()));
    }

    /// The messages of chat request `n`.
    pub fn request(&self, n: usize) -> Vec<Value> {
        let reqs = self.server.chat_requests();
        assert!(
            n < reqs.len(),
            "no request #{n}:\n{}",
            self.server.summary()
        );
        reqs[n].messages().to_vec()
    }
}

/// End the run: remove the sandbox (the session's lock goes with the writer).
pub async fn finish(agent: TestAgent) {
    let (_, sandbox, _) = agent.into_parts();
    sandbox.remove().await.unwrap();
}

pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// The `content` of the tool result answering call `id` in a request's messages.
pub fn tool_result(messages: &[Value], id: &str) -> String {
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result for {id} in {messages:#?}"))
        .to_string()
}

/// Ids of the tool calls the server handed out, in order.
pub fn call_ids(server: &OllamaServer) -> Vec<String> {
    server
        .chat_requests()
        .iter()
        .flat_map(|e| e.tool_call_ids.clone())
        .collect()
}
