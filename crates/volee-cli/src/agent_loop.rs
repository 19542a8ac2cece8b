//! `volee agent` (interactive), `volee agent --resume ID` and `volee agent --prompt TEXT`: checks
//! Ollama and Docker, opens the session, starts the sandbox, runs the loop of `volee-agent` in
//! the pane, removes the sandbox. Under volee (`VOLEE_AGENT_ID` set by the daemon at launch) it
//! reports its states to the daemon as hook events of the `volee` harness.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use volee_agent::{
    create_session, interactive, Agent, AgentEvent, AgentOptions, ApprovalMode, Pane, Shell,
    StateReporter,
};
use volee_ollama::{OllamaClient, OllamaConfig, DEFAULT_MODEL, DEFAULT_NUM_CTX};
use volee_protocol::{HookEvent, Request};
use volee_sandbox::{Leftovers, Sandbox, SandboxConfig, BUSYBOX_IMAGE};
use volee_store::Store;

use crate::ask::paths;
use crate::error::{self, CliError, CliResult, Exit};

/// A line on stderr; a closed stderr (the pane is gone) is ignored rather than a panic.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// What the loop was asked to do.
pub struct LoopArgs {
    pub store: Store,
    pub model: Option<String>,
    pub max_context_tokens: Option<u64>,
    /// `--budget`: the session's tokens (prompt + completion) past which no request is made.
    pub budget: Option<u64>,
    pub ollama_url: Option<String>,
    pub image: Option<String>,
    pub resume: Option<String>,
    pub prompt: Option<String>,
    pub first_prompt: Option<String>,
    pub approve_all: bool,
}

/// Tells volee's daemon the agent's state: one `Hook` request per event, given up after a
/// moment; nothing at all when the daemon does not answer (the agent goes on).
struct DaemonReporter {
    agent_id: String,
}

impl StateReporter for DaemonReporter {
    fn report(&self, event: AgentEvent, session_id: &str) {
        let at_ms = volee_os::clock::now_ms();
        let ev = HookEvent {
            agent: self.agent_id.clone(),
            token: std::env::var("VOLEE_AGENT_TOKEN")
                .ok()
                .filter(|t| !t.is_empty())
                .map(volee_protocol::HookToken),
            event_id: None,
            harness: "volee".into(),
            event: event.name().into(),
            at_ms,
            session_id: Some(session_id.to_string()),
            fields: Vec::new(),
            error: None,
        };
        if let Ok(mut c) = volee_daemon::Client::connect(&paths()) {
            if c.send(&Request::Hook(ev)).is_ok() {
                let _ = c.next_response_within(Duration::from_millis(300));
            }
        }
    }
}

fn reporter() -> Box<dyn StateReporter> {
    match std::env::var("VOLEE_AGENT_ID") {
        Ok(id) if !id.is_empty() => Box::new(DaemonReporter { agent_id: id }),
        _ => Box::new(volee_agent::NoReporter),
    }
}

/// Run the loop; returns the exit code of a `--prompt` turn.
pub fn run(args: LoopArgs) -> CliResult {
    // Two threads: the pane blocks one on its input while the other can still act on a signal.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    rt.block_on(run_async(args))
}

async fn run_async(args: LoopArgs) -> CliResult {
    let root = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| error::no_project_dir(&e))?;
    let store = args.store;
    // The store's reasons (unknown, archived, another project, damaged) before the model's.
    let resume_id = match &args.resume {
        Some(id) => Some(store.check_resumable(id, &root)?),
        None => None,
    };
    let recorded_model = match &resume_id {
        Some(id) => Some(store.load(id)?.model).filter(|m| !m.is_empty()),
        None => None,
    };
    let model = args
        .model
        .or(recorded_model)
        .unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let base_url = match &args.ollama_url {
        Some(u) => volee_ollama::parse_ollama_host(u),
        None => volee_ollama::base_url_from_env(),
    };
    let asked_ctx = args
        .max_context_tokens
        .unwrap_or(u64::from(DEFAULT_NUM_CTX));
    if asked_ctx < 256 {
        return Err(CliError::user(format!(
            "--max-context-tokens {asked_ctx} is too small (at least 256)"
        )));
    }
    let asked_ctx = u32::try_from(asked_ctx).unwrap_or(u32::MAX);
    let config = OllamaConfig {
        base_url,
        model: model.clone(),
        num_ctx: asked_ctx,
        ..OllamaConfig::default()
    };
    // Ollama first: it answers, the model is there and can call tools.
    let probe = OllamaClient::new(config.clone())?;
    let info = probe.ensure_ready(true).await?;
    let num_ctx = info.fit_num_ctx(asked_ctx);
    if num_ctx < asked_ctx {
        note!(
            "warning: {model} was trained for {num_ctx} tokens of context; using {num_ctx}, not {asked_ctx}"
        );
    }
    let client = OllamaClient::new(OllamaConfig { num_ctx, ..config })?;
    // Then Docker, and what crashed runs left behind.
    let docker = volee_sandbox::connect().await?;
    if let Err(e) = volee_sandbox::remove_leftovers(&docker, &Leftovers::Orphaned).await {
        tracing::warn!("removing sandboxes of crashed runs: {e}");
    }
    let image = args.image.unwrap_or_else(|| BUSYBOX_IMAGE.to_string());
    if image != BUSYBOX_IMAGE && !volee_sandbox::image_exists(&docker, &image).await? {
        return Err(volee_sandbox::SandboxError::ImageMissing { image }.into());
    }
    let writer = match &resume_id {
        Some(id) => store.open_for_resume(id, &root)?,
        None => create_session(&store, &root, &model)?,
    };
    let session_id = writer.id().to_string();
    let mut sandbox_config = SandboxConfig::new(&root, &session_id);
    sandbox_config.image = image;
    let sandbox = Sandbox::start(&docker, &sandbox_config).await?;
    let stopping = Arc::new(AtomicBool::new(false));
    // Interactive: Ctrl-C stops the turn, not the agent. `--prompt`: it ends the run.
    let interrupts = args
        .prompt
        .is_none()
        .then(|| Arc::new(volee_agent::Interrupts::new()));
    // On a terminal: pastes marked, so text of several lines is one prompt.
    let tty = interrupts.as_ref().and_then(|_| PasteMode::on());
    // The pane's input, read by a thread of its own so Ctrl-C at an approval question ends the
    // turn (interactive only).
    let input = match &interrupts {
        Some(i) => Some(
            volee_agent::InterruptibleInput::new(std::io::stdin(), i.clone())
                .map_err(|e| CliError::from_error(Exit::Internal, &e))?,
        ),
        None => None,
    };
    on_signal_remove_sandbox(
        docker.clone(),
        session_id.clone(),
        stopping.clone(),
        interrupts.clone(),
        tty.clone(),
    );
    let sandbox = RunSandbox {
        inner: sandbox,
        stopping,
    };
    let agent = Agent::new(
        client,
        sandbox,
        store,
        writer,
        &root,
        AgentOptions {
            budget: args.budget,
            ..AgentOptions::new(u64::from(num_ctx))
        },
        reporter(),
    );
    let mut agent = match agent {
        Ok(a) => a,
        Err(e) => return Err(CliError::from(e)),
    };
    let result = match (args.prompt, input) {
        (Some(prompt), _) => one_turn(&mut agent, &prompt, args.approve_all).await,
        (None, None) => Err(CliError::internal("interactive without its input")),
        (None, Some(input)) => {
            let interrupts = interrupts.unwrap_or_default();
            let mut pane = Pane::new(input, std::io::stdout(), ApprovalMode::Ask);
            let r = interactive(&mut agent, &mut pane, args.first_prompt, &interrupts).await;
            if let Some(tty) = &tty {
                tty.restore();
            }
            note!("session {session_id} saved; resume it with: volee agent --resume {session_id}");
            r.map_err(CliError::from)
        }
    };
    let (_, sandbox, writer) = agent.into_parts();
    if let Err(e) = sandbox.inner.remove().await {
        note!("warning: could not remove the sandbox container: {e}");
    }
    drop(writer);
    result
}

/// The pane's terminal while `volee agent` runs interactively: bracketed-paste mode on (a
/// pasted text of several lines, or one sent by `volee send`, is one prompt) and control
/// characters echoed as they are rather than as `^[` (the paste markers would show). Undone by
/// [`PasteMode::restore`] at the end, also when a signal ends the agent.
pub struct PasteMode {
    saved: std::sync::Mutex<Option<nix::sys::termios::Termios>>,
}

impl PasteMode {
    /// None when stdin or stdout is not a terminal.
    fn on() -> Option<Arc<PasteMode>> {
        use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            return None;
        }
        let saved = tcgetattr(std::io::stdin()).ok()?;
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHOCTL);
        tcsetattr(std::io::stdin(), SetArg::TCSANOW, &quiet).ok()?;
        write_now(volee_agent::PASTE_ON);
        Some(Arc::new(PasteMode {
            saved: std::sync::Mutex::new(Some(saved)),
        }))
    }

    /// The terminal as it was (once).
    fn restore(&self) {
        let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(saved) = saved {
            write_now(volee_agent::PASTE_OFF);
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                &saved,
            );
        }
    }
}

impl Drop for PasteMode {
    fn drop(&mut self) {
        self.restore();
    }
}

fn write_now(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// The run's sandbox. Once a signal ends the agent, a command's outcome is never reported (its
/// container is being removed under it): the call stays pending, and resume says "outcome
/// unknown" instead of recording the removal as the command's failure.
pub struct RunSandbox {
    inner: Sandbox,
    stopping: Arc<AtomicBool>,
}

impl Shell for RunSandbox {
    async fn exec(
        &self,
        command: &str,
        timeout: Duration,
    ) -> Result<volee_sandbox::ExecOutput, volee_sandbox::SandboxError> {
        let result = Shell::exec(&self.inner, command, timeout).await;
        if self.stopping.load(Ordering::SeqCst) {
            // The signal handler exits the process.
            std::future::pending::<()>().await;
        }
        result
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn interrupt(&self) {
        Shell::interrupt(&self.inner).await;
    }
}

/// SIGTERM (`volee stop`), SIGHUP (the pane closed) or SIGINT (Ctrl-C) end the agent: the
/// sandbox is removed and the process exits with 128 + the signal. The session is as its last
/// checkpoint left it: a call that was running is answered "outcome unknown" on resume.
/// Interactive (`interrupts`), SIGINT first stops the running turn; at the prompt it takes a
/// second one within 2 s to end the agent.
fn on_signal_remove_sandbox(
    docker: volee_sandbox::Docker,
    session_id: String,
    stopping: Arc<AtomicBool>,
    interrupts: Option<Arc<volee_agent::Interrupts>>,
    tty: Option<Arc<PasteMode>>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let kinds = [
        (SignalKind::terminate(), 15),
        (SignalKind::hangup(), 1),
        (SignalKind::interrupt(), 2),
    ];
    let mut streams = Vec::new();
    for (kind, number) in kinds {
        match signal(kind) {
            Ok(s) => streams.push((s, number)),
            Err(e) => tracing::warn!("cannot watch signal {number}: {e}"),
        }
    }
    tokio::spawn(async move {
        let (mut a, mut b, mut c) = match <[_; 3]>::try_from(streams) {
            Ok([a, b, c]) => (a, b, c),
            Err(_) => return,
        };
        let mut last_at_prompt: Option<std::time::Instant> = None;
        let number = loop {
            let number = tokio::select! {
                _ = a.0.recv() => a.1,
                _ = b.0.recv() => b.1,
                _ = c.0.recv() => c.1,
            };
            let Some(interrupts) = interrupts.as_ref().filter(|_| number == 2) else {
                break number;
            };
            if interrupts.interrupt() {
                last_at_prompt = None;
                continue;
            }
            if last_at_prompt.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
                break number;
            }
            last_at_prompt = Some(std::time::Instant::now());
            // The pane is waiting for a line: this goes below its prompt.
            {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = write!(
                    out,
                    "\n(Ctrl-C again within 2 s ends volee agent; \\exit does too)\n> "
                );
                let _ = out.flush();
            }
        };
        stopping.store(true, Ordering::SeqCst);
        if let Some(tty) = &tty {
            tty.restore();
        }
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            volee_sandbox::remove_leftovers(&docker, &Leftovers::Session(session_id.clone())),
        )
        .await;
        note!("volee agent: ended by signal {number}; session {session_id} is saved (volee agent --resume {session_id})");
        std::process::exit(128 + number);
    });
}

/// `--prompt`: one turn; exit 0 when it ended with an answer and nothing was denied, 1 when
/// calls were denied (no `--approve-all`), an error otherwise.
async fn one_turn(
    agent: &mut Agent<OllamaClient, RunSandbox>,
    prompt: &str,
    approve_all: bool,
) -> CliResult {
    let mode = if approve_all {
        ApprovalMode::ApproveAll
    } else {
        ApprovalMode::DenyAll
    };
    let stdin = std::io::stdin();
    let mut pane = Pane::new(stdin.lock(), std::io::stdout(), mode);
    let outcome = agent.turn(prompt, &mut pane).await?;
    let id = agent.session_id().to_string();
    note!(
        "session {id}: {} tool call{} run, {} denied; resume it with: volee agent --resume {id}",
        outcome.tool_calls,
        if outcome.tool_calls == 1 { "" } else { "s" },
        outcome.denied
    );
    if outcome.denied > 0 {
        return Err(error::calls_denied(outcome.denied));
    }
    Ok(())
}
