//! Every error the CLI prints, and what it says, in one place (jj's `command_error.rs`):
//!
//! - [`CliError`]: a message, its causes, `hint:` lines, and its kind — the exit code of CLI.md
//!   ([`Exit`]); `main` prints it and exits with that code, `volee mcp` answers it as a tool
//!   error;
//! - conversions from every other crate's error (the daemon client, paths, tmux, zellij, the
//!   daemon itself, the session store, the agent loop, the instrumentation plan and its
//!   executor), each with the kind and hints that go with it;
//! - the CLI's own refusals, one constructor each, so a situation met by two commands is said
//!   one way (the tmux install hint, an unknown harness, a missing program, an unknown state).
//!
//! Hints are attached here and nowhere else; commands say which situation they met.

use std::path::Path;

use volee_daemon::persist::PersistError;
use volee_harness::Profile;
use volee_protocol::{AgentState, AgentView, ErrorKind, Response};

/// Exit codes of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A negative answer (e.g. `wait` timed out).
    Negative = 1,
    /// Usage or user error (unknown id, bad flag).
    User = 2,
    /// The environment lacks something (no tmux).
    Environment = 3,
    /// Internal error.
    Internal = 4,
    /// `wait`: the agent ended in another final state.
    Unreachable = 5,
}

/// An error the CLI prints and exits with.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> CliError {
        CliError {
            exit,
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
        }
    }

    pub fn user(message: impl Into<String>) -> CliError {
        CliError::new(Exit::User, message)
    }

    pub fn env(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Environment, message)
    }

    pub fn internal(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Internal, message)
    }

    fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    fn hints(mut self, hints: impl IntoIterator<Item = String>) -> CliError {
        self.hints.extend(hints);
        self
    }

    fn causes(mut self, causes: impl IntoIterator<Item = String>) -> CliError {
        self.causes.extend(causes);
        self
    }

    /// An error with its source chain as causes.
    pub fn from_error(exit: Exit, err: &(dyn std::error::Error + 'static)) -> CliError {
        let mut e = CliError::new(exit, err.to_string());
        let mut source = err.source();
        while let Some(s) = source {
            e.causes.push(s.to_string());
            source = s.source();
        }
        e
    }

    /// The daemon's error response (its kind is the exit code; its hints are the daemon's).
    pub fn from_response(resp: Response) -> CliError {
        match resp {
            Response::Error {
                kind,
                message,
                hints,
            } => CliError {
                exit: match kind {
                    ErrorKind::User => Exit::User,
                    ErrorKind::Environment => Exit::Environment,
                    ErrorKind::Internal => Exit::Internal,
                },
                message,
                causes: Vec::new(),
                hints,
            },
            other => CliError::internal(format!("unexpected answer from the daemon: {other:?}")),
        }
    }

    pub fn print(&self) {
        eprintln!("error: {}", self.message);
        for cause in &self.causes {
            eprintln!("  caused by: {cause}");
        }
        for hint in &self.hints {
            eprintln!("hint: {hint}");
        }
    }
}

/// What restarts the daemon.
const RESTART_DAEMON: &str = "volee daemon stop (the next command starts a new one)";

/// Where the daemon says what went wrong.
const DAEMON_LOG: &str = "check the daemon log (volee.log in the state directory)";

// ---------------------------------------------------------------------------------------------
// Other crates' errors.

impl From<volee_daemon::ClientError> for CliError {
    fn from(e: volee_daemon::ClientError) -> CliError {
        use volee_daemon::ClientError;
        match &e {
            ClientError::Dirs(p) | ClientError::Untrusted(p) if p.is_untrusted() => {
                CliError::from_error(Exit::Environment, &e).hint(untrusted_path_hint(p))
            }
            ClientError::Dirs(_) => CliError::from_error(Exit::Environment, &e),
            ClientError::ForeignDaemon { path, .. } => {
                CliError::from_error(Exit::Environment, &e).hint(format!(
                    "volee talks only to a daemon of your own: set XDG_RUNTIME_DIR to a private directory of yours, or remove {path}"
                ))
            }
            // Exit 3: the daemon volee depends on is in a state outside this command (stopped by
            // a signal or a debugger), like a missing tmux server.
            ClientError::NotAnswering { pid, .. } => {
                let err = CliError::from_error(Exit::Environment, &e);
                match pid {
                    Some(pid) => err
                        .hint(format!("if it was stopped (Ctrl-Z, SIGSTOP), resume it: kill -CONT {pid}"))
                        .hint(format!("or restart it: {RESTART_DAEMON}")),
                    None => err.hint(format!("restart it: {RESTART_DAEMON}")),
                }
            }
            _ => CliError::from_error(Exit::Internal, &e)
                .hint(format!("{DAEMON_LOG}, or restart it: {RESTART_DAEMON}")),
        }
    }
}

/// A directory or file volee will not use (exit 3, with what to do), or could not create.
impl From<volee_daemon::paths::PathError> for CliError {
    fn from(e: volee_daemon::paths::PathError) -> CliError {
        let err = CliError::from_error(Exit::Environment, &e);
        if e.is_untrusted() {
            err.hint(untrusted_path_hint(&e))
        } else {
            err
        }
    }
}

/// What to do about a directory, socket or file someone else could have planted.
fn untrusted_path_hint(e: &volee_daemon::paths::PathError) -> String {
    use volee_daemon::paths::PathError;
    let path = e.path().display();
    let what = match e {
        PathError::ForeignOwner { owner, .. } => format!("{path} (owned by uid {owner})"),
        _ => path.to_string(),
    };
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|v| !v.is_empty())
        || std::env::var_os("VOLEE_HOME").is_some_and(|v| !v.is_empty())
    {
        format!("volee uses only what you own: remove {what}, or point VOLEE_HOME / the XDG_* variables at a private directory of yours")
    } else {
        format!("set XDG_RUNTIME_DIR to a private directory of yours (e.g. /run/user/$(id -u)), or remove {what}")
    }
}

impl From<volee_daemon::daemon::DaemonError> for CliError {
    fn from(e: volee_daemon::daemon::DaemonError) -> CliError {
        use volee_daemon::daemon::DaemonError;
        match &e {
            DaemonError::AlreadyRunning { .. } => {
                CliError::from_error(Exit::User, &e).hint("stop it with: volee daemon stop")
            }
            DaemonError::Paths(p) if p.is_untrusted() => {
                CliError::from_error(Exit::Environment, &e).hint(untrusted_path_hint(p))
            }
            _ => CliError::from_error(Exit::Internal, &e),
        }
    }
}

/// `config.toml` does not parse (the user's to fix).
impl From<volee_daemon::config::ConfigError> for CliError {
    fn from(e: volee_daemon::config::ConfigError) -> CliError {
        CliError::from_error(Exit::User, &e)
    }
}

/// tmux missing (exit 3, how to install it), no server (exit 3), a command that failed (exit 4).
impl From<volee_tmux::server::TmuxError> for CliError {
    fn from(e: volee_tmux::server::TmuxError) -> CliError {
        use volee_tmux::server::TmuxError;
        let exit = match &e {
            TmuxError::Missing | TmuxError::NoServer { .. } => Exit::Environment,
            _ => Exit::Internal,
        };
        let hints = e.hint();
        CliError::from_error(exit, &e).hints(hints)
    }
}

/// The one message for a machine without tmux.
pub fn tmux_missing() -> CliError {
    volee_tmux::server::TmuxError::Missing.into()
}

impl From<volee_zellij::ZellijError> for CliError {
    fn from(e: volee_zellij::ZellijError) -> CliError {
        use volee_zellij::ZellijError;
        let exit = match &e {
            ZellijError::NotInstalled => Exit::Environment,
            ZellijError::NoSession(_) => Exit::User,
            _ => Exit::Internal,
        };
        let hints = e.hint();
        CliError::from_error(exit, &e).hints(hints)
    }
}

/// The session store of volee's own agent: what the user gave (exit 2), a newer volee's session
/// (exit 3), anything else (exit 4).
impl From<volee_store::StoreError> for CliError {
    fn from(e: volee_store::StoreError) -> CliError {
        use volee_store::StoreError;
        let exit = match &e {
            StoreError::InvalidCheckpointName { .. }
            | StoreError::CheckpointExists { .. }
            | StoreError::UnknownCheckpoint { .. }
            | StoreError::CheckpointMidTurn { .. }
            | StoreError::InvalidTag { .. } => Exit::User,
            StoreError::InvalidId { .. }
            | StoreError::UnknownId { .. }
            | StoreError::Ambiguous { .. }
            | StoreError::Locked { .. }
            | StoreError::Archived { .. }
            | StoreError::ProjectMismatch { .. }
            | StoreError::NotRegularFile { .. }
            | StoreError::ImportRefused { .. }
            | StoreError::IdTaken { .. }
            | StoreError::Unsafe { .. } => Exit::User,
            StoreError::NewerSchema { .. } | StoreError::ImportNewerSchema { .. } => {
                Exit::Environment
            }
            _ => Exit::Internal,
        };
        let err = CliError::from_error(exit, &e);
        match &e {
            StoreError::InvalidTag { .. } => {
                err.hint("a tag is a short word: a-z, 0-9, '.', '_', '-', up to 32 characters, e.g. keep")
            }
            StoreError::CheckpointExists { id, name } => err.hint(format!(
                "checkpoint names are not reused: pick another, or rewind to it: volee agent --rewind {id} {name}"
            )),
            StoreError::UnknownCheckpoint { id, .. } => {
                err.hint(format!("list them: volee agent --checkpoints {id}"))
            }
            StoreError::CheckpointMidTurn { id, .. } => err.hint(format!(
                "resume it first so the calls get their answers (volee agent --resume {id}), then checkpoint at the prompt"
            )),
            StoreError::CheckpointDamaged { id, .. } => err.hint(format!(
                "the file is left as it is; the session is unchanged. Other checkpoints: volee agent --checkpoints {id}"
            )),
            StoreError::UnknownId { .. } => {
                err.hint("list them: volee agent --list-sessions --include-archived")
            }
            StoreError::Ambiguous { .. } => err.hint("give more characters of the id"),
            StoreError::Locked { id, pid } => {
                let who = pid.map_or("another process".to_string(), |p| format!("process {p}"));
                err.hint(format!(
                    "{who} (a running `volee agent`) writes to it; end it first, or copy the session: volee agent --fork {id}"
                ))
            }
            StoreError::Archived { id } => err.hint(format!("unarchive it first: volee agent --unarchive {id}")),
            StoreError::ProjectMismatch { id, recorded, .. } => err.hint(format!(
                "run it from {}, or fork it into this directory and resume the fork: volee agent --fork {id} --project .",
                recorded.display()
            )),
            StoreError::Corrupt { id, .. } => err.hint(format!(
                "its files are kept as they are; look at them, or remove the session: volee agent --delete {id} --yes"
            )),
            StoreError::TranscriptCorrupt { id, .. } => err.hint(format!(
                "its files are kept as they are; `volee agent --info {id}` still works"
            )),
            StoreError::NewerSchema { .. } => err.hint("upgrade volee to open it; it is left untouched"),
            StoreError::ImportRefused { .. } => err.hint(
                "nothing was imported or written; the export format is docs/session-export.schema.json (what `volee agent --export` writes)",
            ),
            StoreError::ImportNewerSchema { .. } => {
                err.hint("import it with that volee or a newer one; nothing was written")
            }
            StoreError::IdTaken { id } => err.hint(format!(
                "leave out --keep-id to import it under a new id (the one here is `volee agent --info {id}`)"
            )),
            StoreError::NotRegularFile { path, .. } | StoreError::Unsafe { path, .. } => err.hint(format!(
                "volee does not make such a thing and went no further: nothing was read or written through it. Look at {} and remove it if you did not put it there",
                path.display()
            )),
            _ => err,
        }
    }
}

/// The agent loop: Ollama or Docker missing (exit 3), anything else (exit 4); the store's own.
impl From<volee_agent::AgentError> for CliError {
    fn from(e: volee_agent::AgentError) -> CliError {
        if let volee_agent::AgentError::Store(s) = e {
            return s.into();
        }
        let exit = if e.is_environment() {
            Exit::Environment
        } else {
            Exit::Internal
        };
        let hints = e.hint();
        CliError::from_error(exit, &e).hints(hints)
    }
}

impl From<volee_ollama::OllamaError> for CliError {
    fn from(e: volee_ollama::OllamaError) -> CliError {
        volee_agent::AgentError::from(e).into()
    }
}

impl From<volee_sandbox::SandboxError> for CliError {
    fn from(e: volee_sandbox::SandboxError) -> CliError {
        volee_agent::AgentError::from(e).into()
    }
}

/// A launch volee cannot plan: it is what the user asked for (exit 2).
impl From<volee_harness::instrument::PlanError> for CliError {
    fn from(e: volee_harness::instrument::PlanError) -> CliError {
        use volee_harness::instrument::PlanError;
        let err = CliError::user(e.to_string());
        match e {
            PlanError::NotJson { .. } => err.hint("volee merges its MCP server into it"),
            PlanError::NoJoin { .. } => err,
        }
    }
}

/// Carrying out the CLI's part of the plan.
impl From<crate::instrument::InstrumentError> for CliError {
    fn from(e: crate::instrument::InstrumentError) -> CliError {
        use crate::instrument::InstrumentError;
        let hint = match &e {
            InstrumentError::Paths(_) => None,
            InstrumentError::Write(_) | InstrumentError::NotSettings(_) => None,
            InstrumentError::NoPort(_) => {
                Some("volee needs a free loopback port for the harness's server".to_string())
            }
            InstrumentError::ReadDefaults { var, path, .. } => Some(format!(
                "{var} names {}, which volee must merge",
                path.display()
            )),
            InstrumentError::DefaultsNotJson { path, .. } => {
                Some(format!("{} is not valid JSON", path.display()))
            }
            InstrumentError::JoinLost { .. } => Some(
                "launch without --join, or run volee where its runtime directory is root-owned"
                    .to_string(),
            ),
        };
        let err = match e {
            InstrumentError::Paths(p) => return p.into(),
            InstrumentError::Write(PersistError::Encode { .. }) => {
                CliError::from_error(Exit::Internal, &e)
            }
            InstrumentError::JoinLost { .. } => CliError::user(e.to_string()),
            // Its own message, as before: the cause is in it.
            InstrumentError::ReadDefaults { .. }
            | InstrumentError::DefaultsNotJson { .. }
            | InstrumentError::NotSettings(_)
            | InstrumentError::NoPort(_) => CliError::env(e.to_string()),
            InstrumentError::Write(_) => CliError::from_error(Exit::Environment, &e),
        };
        err.hints(hint)
    }
}

/// JSON that could not be written out (exit 4).
impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> CliError {
        CliError::from_error(Exit::Internal, &e)
    }
}

// ---------------------------------------------------------------------------------------------
// Harnesses and agents, met by several commands.

/// No profile of that name.
pub fn unknown_harness(name: &str) -> CliError {
    let names: Vec<&str> = volee_harness::profiles().iter().map(|p| p.name).collect();
    CliError::user(format!("unknown harness {name:?}")).hint(format!(
        "known harnesses: {} (details: volee profiles)",
        names.join(", ")
    ))
}

/// `volee profiles check`: some files have problems (each printed above).
pub fn bad_profiles(bad: usize, of: usize) -> CliError {
    CliError::user(format!("{bad} of {of} profile files cannot be used"))
        .hint("the format: docs/profiles.md; the profile in effect: volee profiles show NAME")
}

/// `--budget` for a harness whose usage volee cannot read: it could not be kept.
pub fn budget_unkept(profile: &Profile, limit: volee_protocol::Amount) -> CliError {
    CliError::user(format!(
        "{} records no usage volee can read, so a budget ({limit}) could not be kept",
        profile.display_name
    ))
    .hint("docs/usage.md says what each harness records")
}

/// `--budget 5usd` for volee's own agent: Ollama's models have no price.
pub fn budget_in_money_for_ollama() -> CliError {
    CliError::user("volee's own agent runs on Ollama, whose models have no price")
        .hint("give its budget in tokens: --budget 200k")
}

/// The harness's program is not on the caller's PATH (exit 3), and where it comes from.
pub fn harness_not_installed(profile: &Profile) -> CliError {
    let e = CliError::env(format!(
        "{} is not installed (no `{}` on PATH)",
        profile.display_name, profile.program
    ));
    match (profile.package, profile.install_hint()) {
        (Some(pkg), Some(install)) => e.hint(format!("it comes from the package {pkg}: {install}")),
        _ => e,
    }
}

/// A state name that is none of the six.
pub fn unknown_state(name: &str) -> CliError {
    CliError::user(format!("unknown state {name:?}"))
        .hint("states: working, needs_you, idle, done, failed, stopped")
}

/// `--until STATE:REASON` with a reason that is not one of that state's.
pub fn unknown_reason(state: AgentState, name: &str) -> CliError {
    let reasons: Vec<&str> = volee_protocol::Reason::ALL
        .iter()
        .filter(|r| r.state() == state)
        .map(|r| r.as_str())
        .collect();
    CliError::user(format!("{name:?} is not a reason for {state}")).hint(if reasons.is_empty() {
        format!("{state} has no reasons: wait for {state} alone")
    } else {
        format!("reasons for {state}: {}", reasons.join(", "))
    })
}

/// The agent has ended, or its pane is gone (`what` says which, after "agent ID (NAME) ").
pub fn agent_ended(agent: &AgentView, what: &str) -> CliError {
    CliError::user(format!(
        "agent {} ({}) {what}: it is {}",
        agent.id, agent.name, agent.state
    ))
    .hint(format!("see what happened: volee explain {}", agent.id))
}

// ---------------------------------------------------------------------------------------------
// launch and resume.

pub fn nothing_to_launch() -> CliError {
    CliError::user("nothing to launch: give a command after --, or a --harness")
        .hint("example: volee launch -- python3 agent.py")
        .hint("or set default_harness in config.toml")
}

pub fn unknown_command(name: &str, known: &[String]) -> CliError {
    CliError::user(format!("unknown command {name:?}"))
        .hint(format!("commands: {}", known.join(", ")))
}

pub fn plugin_not_built() -> CliError {
    CliError::env("this volee was built without its zellij plugin (the wasm32-wasip1 target was missing)")
        .hint("rustup target add wasm32-wasip1, then build volee again: cargo install --locked --path crates/volee-cli")
}

pub fn plugin_mismatch(session: &str, hint: String) -> CliError {
    CliError::env(format!(
        "another version of volee's plugin runs in zellij session {session:?}"
    ))
    .hint(hint)
}

pub fn not_inside_zellij() -> CliError {
    CliError::user("not inside zellij: which session?")
        .hint("use --host zellij:SESSION (sessions: zellij list-sessions)")
}

pub fn unknown_host(host: &str) -> CliError {
    CliError::user(format!("unknown host {host:?}"))
        .hint("use --host tmux[:SESSION] or --host zellij[:SESSION]")
}

/// `--cwd` names no directory.
pub fn bad_cwd(dir: &Path, e: &std::io::Error) -> CliError {
    CliError::from_error(Exit::User, e).hint(format!("--cwd {} must be a directory", dir.display()))
}

/// A first prompt the harness cannot take on its command line.
pub fn no_first_prompt(profile: &Profile) -> CliError {
    CliError::user(format!(
        "{} takes no first prompt volee could verify on its command line",
        profile.display_name
    ))
    .hint("launch it without one, then: volee send ID TEXT")
}

pub fn still_running(agent: &AgentView) -> CliError {
    CliError::user(format!(
        "agent {} is still running ({})",
        agent.id, agent.state
    ))
    .hint(format!("go to it: volee attach {}", agent.id))
}

pub fn no_session_id(agent: &AgentView) -> CliError {
    CliError::user(format!("agent {} never reported a session id", agent.id))
        .hint("start a new one: volee launch --harness …")
}

/// `resume MACHINE:ID`: `resume` relaunches here; the machine's session is resumed there.
pub fn resume_on_machine(agent: &AgentView) -> CliError {
    let machine = agent.machine.as_deref().unwrap_or_default();
    let err = CliError::user(format!(
        "agent {} ran on machine {machine}: volee resume relaunches agents of this machine only",
        agent.address()
    ));
    match &agent.session_id {
        Some(sid) => err.hint(format!(
            "resume its session there: volee sessions resume {sid} --on {machine}"
        )),
        None => err.hint(format!(
            "launch it again there: volee launch --on {machine} …"
        )),
    }
}

pub fn worktree_gone(agent: &AgentView, path: &str) -> CliError {
    CliError::user(format!(
        "agent {} worked in worktree {path}, which is gone",
        agent.id
    ))
    .hint("start a new one: volee launch --worktree NAME …")
}

// ---------------------------------------------------------------------------------------------
// attach.

/// Not run from a terminal: volee cannot attach one; `yourself` is the command that would.
pub fn needs_terminal(yourself: &str) -> CliError {
    CliError::user("volee attach needs a terminal").hint(format!("or attach yourself: {yourself}"))
}

pub fn on_another_tmux_server(agent: &AgentView, socket: &str) -> CliError {
    CliError::user(format!(
        "agent {} runs on another tmux server ({socket})",
        agent.id
    ))
    .hint("detach from this tmux first, then run volee attach again")
}

pub fn in_another_zellij_session(
    agent: &AgentView,
    session: &str,
    this: &str,
    pane: &str,
) -> CliError {
    CliError::user(format!(
        "agent {} runs in zellij session {session:?}, this is {this:?}",
        agent.id
    ))
    .hint(format!(
        "switch to it: zellij action switch-session {session} --pane-id {pane}"
    ))
}

// ---------------------------------------------------------------------------------------------
// send, wait, stop, quiet.

/// `volee send`: the agent showed no reaction (exit 1).
pub fn did_not_react(id: &str, wait_secs: u64, state: &str) -> CliError {
    CliError::new(
        Exit::Negative,
        format!("sent to {id}, but it did not react within {wait_secs} s (still {state})"),
    )
    .hint(format!("look at it: volee peek {id}"))
}

/// `send_message`: an agent never answers another agent's prompt.
pub fn waits_for_its_user(agent: &AgentView) -> CliError {
    CliError::user(format!(
        "agent {} ({}) waits for its user's answer (needs_you): volee's tools never answer another agent's prompt",
        agent.id, agent.name
    ))
    .hint("wait_for_state until it is idle, or tell your user")
}

/// `stop --remove-worktree`: nothing is stopped when the worktree would lose work (`lost`).
pub fn stop_would_lose(agent: &AgentView, path: &str, lost: Vec<String>) -> CliError {
    CliError::user(format!(
        "agent {} not stopped: removing its worktree {path} would lose what is below",
        agent.id
    ))
    .causes(lost)
    .hint("commit and merge (or push) it first, or stop without --remove-worktree")
}

pub fn not_a_duration(text: &str) -> CliError {
    CliError::user(format!("{text:?} is not a duration")).hint("examples: 30m, 2h, 1day, or off")
}

// ---------------------------------------------------------------------------------------------
// Worktrees.

pub fn bad_worktree_name(name: &str) -> CliError {
    CliError::user(format!("bad worktree name {name:?}"))
        .hint("letters, digits, '.', '_' and '-', not starting with '.' or '-', at most 64")
}

/// `--worktree` outside a repository; `git_says` is git's own word.
pub fn not_a_repository(dir: &Path, git_says: String) -> CliError {
    CliError::user(format!(
        "{} is not in a git repository: --worktree needs one",
        dir.display()
    ))
    .hint(git_says)
}

pub fn worktree_path_taken(name: &str, path: &Path) -> CliError {
    CliError::user(format!(
        "worktree {name:?} is taken: {} exists",
        path.display()
    ))
    .hint("pick another name")
}

pub fn worktree_branch_taken(name: &str, branch: &str) -> CliError {
    CliError::user(format!(
        "worktree {name:?} is taken: branch {branch} exists"
    ))
    .hint(format!(
        "pick another name, or delete the branch: git branch -d {branch}"
    ))
}

/// A worktree kept because removing it would lose `lost` (at most 50 shown).
pub fn worktree_would_lose(path: &Path, lost: &[String]) -> CliError {
    CliError::user(format!(
        "worktree {} kept: removing it would lose {}",
        path.display(),
        if lost.len() == 1 { "this" } else { "these" }
    ))
    .causes(lost.iter().take(50).cloned())
    .hint(
        "commit and merge (or push) them first, or remove it yourself: git worktree remove --force",
    )
}

// ---------------------------------------------------------------------------------------------
// setup, pane-exec, volee's own agent.

/// A file of the user's volee will not change (`why` says what is wrong with it).
pub fn left_unchanged(why: String) -> CliError {
    CliError::user(why).hint("volee changed nothing")
}

/// The pane's environment file could not be read.
pub fn handover_unreadable(e: &std::io::Error) -> CliError {
    CliError::from_error(Exit::Internal, e)
        .hint("the volee daemon did not finish this launch; close this pane and launch again")
}

/// The daemon cancelled the launch this pane waits for.
pub fn handover_cancelled() -> CliError {
    CliError::internal("the volee daemon stopped before this launch finished")
        .hint("close this pane and launch again")
}

pub fn delete_needs_yes(id: &str) -> CliError {
    CliError::user(format!("refusing to delete session {id} without --yes")).hint(format!(
        "volee agent --delete {id} --yes (this cannot be undone; --export it first to keep a copy)"
    ))
}

/// `volee agent` outside a readable project directory.
pub fn no_project_dir(e: &std::io::Error) -> CliError {
    CliError::from_error(Exit::User, e).hint("run volee agent from the project directory")
}

/// `volee agent --prompt`: tool calls were denied (exit 1).
pub fn calls_denied(denied: u32) -> CliError {
    CliError::new(
        Exit::Negative,
        format!(
            "{denied} tool call{} needed an approval and {} denied",
            if denied == 1 { "" } else { "s" },
            if denied == 1 { "was" } else { "were" }
        ),
    )
    .hint("run again with --approve-all to let the agent run shell commands and change files, or resume the session interactively")
}

// ---------------------------------------------------------------------------------------------
// Machines (volee machine add|ls|rm).

/// The machines file could not be read or written (exit 3: the environment).
impl From<volee_daemon::machines::MachinesError> for CliError {
    fn from(e: volee_daemon::machines::MachinesError) -> CliError {
        CliError::from_error(Exit::Environment, &e)
    }
}

/// A machine name volee will not take (exit 2).
pub fn machine_name(e: volee_daemon::machines::MachineNameError) -> CliError {
    CliError::user(e.to_string()).hint(format!(
        "a machine name is a lowercase letter, then up to 31 of a-z, 0-9 and '-'; not {}",
        volee_daemon::machines::reserved_names().join(", ")
    ))
}

/// `add` of a name already saved.
pub fn machine_exists(name: &str, dest: &str) -> CliError {
    CliError::user(format!("machine {name} exists ({dest})"))
        .hint(format!("remove it first: volee machine rm {name}"))
}

/// `rm` or a lookup of a name not saved.
pub fn unknown_machine(name: &str, file: &volee_daemon::machines::MachinesFile) -> CliError {
    let known: Vec<&str> = file.machines.iter().map(|m| m.name.as_str()).collect();
    let err = CliError::user(format!("no machine named {name:?}"));
    if known.is_empty() {
        err.hint("no machines are saved (volee machine add NAME SSH-DEST)")
    } else {
        err.hint(format!("machines: {}", known.join(", ")))
    }
}

/// `attach MACHINE:ID` while the daemon has no connection to the machine (exit 3).
pub fn machine_not_connected(name: &str) -> CliError {
    CliError::env(format!("machine {name} is not connected (volee machine ls)"))
        .hint("volee keeps one ssh connection per machine and reconnects by itself; machine ls says why it is down")
}

/// No `ssh` to run (exit 3).
pub fn ssh_missing(e: &volee_daemon::machines::ssh::SshMissing) -> CliError {
    CliError::from_error(Exit::Environment, e)
        .hint("volee reaches machines with OpenSSH's client: apt-get install openssh-client")
}

/// How to put volee on a machine's PATH.
fn install_hints(m: &volee_daemon::machines::Machine) -> Vec<String> {
    vec![
        format!(
            "install volee on {} (the same version as here, {}): cargo install --locked --path crates/volee-cli in volee's source there, or copy this binary to a directory on the PATH of a non-interactive ssh command (see: ssh {} 'echo $PATH')",
            m.name,
            env!("CARGO_PKG_VERSION"),
            m.dest
        ),
        format!(
            "or copy this one there: volee machine install {}; then check it: volee machine ls",
            m.name
        ),
    ]
}

/// `machine install`: a step over ssh failed (exit 3).
pub fn install_step_failed(machine: &str, step: &str, status: &str, said: &str) -> CliError {
    let said = if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    };
    CliError::env(format!("on {machine}: `{step}` failed ({status}){said}"))
        .hint("check the machine: volee machine ls")
}

/// `machine install` to a machine this binary cannot run on (exit 3).
pub fn install_other_system(machine: &str, remote: &str, local: &str) -> CliError {
    CliError::env(format!(
        "{machine} is {remote}; this volee is built for {local}, so it cannot run there"
    ))
    .hint(format!(
        "build volee on {machine} (cargo install --locked --path crates/volee-cli in volee's source), or build it here for that target and copy it"
    ))
}

/// `machine install` without a terminal to ask on and without `--yes` (exit 2).
pub fn install_needs_yes(machine: &str) -> CliError {
    CliError::user(
        "volee machine install asks before it copies, and there is no terminal to ask on",
    )
    .hint(format!("volee machine install {machine} --yes"))
}

/// `add` found a machine it cannot use (yet); `saved`: it is kept anyway (ssh works, volee is
/// missing or speaks another protocol).
pub fn machine_check_failed(
    m: &volee_daemon::machines::Machine,
    outcome: &volee_daemon::machines::ssh::ProbeOutcome,
    accept_command: &str,
    saved: bool,
) -> CliError {
    use volee_daemon::machines::ssh::ProbeOutcome;
    let kept = if saved {
        format!("machine {} is saved, but ", m.name)
    } else {
        format!("machine {} is not added: ", m.name)
    };
    let detail = outcome.detail().map(String::from);
    let err = match outcome {
        ProbeOutcome::HostKeyUnknown { .. } => CliError::env(format!(
            "{kept}the host key of {} is not in your known_hosts, and volee never accepts one itself",
            m.dest
        ))
        .hint(format!(
            "check the key's fingerprint with the machine's owner, then accept it with: {accept_command}"
        ))
        .hint(format!("then again: volee machine add {} {}", m.name, m.dest)),
        ProbeOutcome::HostKeyChanged { .. } => CliError::env(format!(
            "{kept}the host key of {} is not the one in your known_hosts (a reinstalled machine, or someone in between)",
            m.dest
        ))
        .hint("find out why before anything else; ssh names the known_hosts line to remove (ssh-keygen -R HOST)"),
        ProbeOutcome::AuthFailed { .. } => CliError::env(format!(
            "{kept}{} refused every key ssh could offer without asking (volee runs ssh with BatchMode=yes)",
            m.dest
        ))
        .hint("load your key into ssh-agent (ssh-add), or give one: --identity FILE")
        .hint(format!("check: {accept_command}")),
        ProbeOutcome::Unreachable { .. } => {
            CliError::env(format!("{kept}ssh could not connect to {}", m.dest))
        }
        ProbeOutcome::TimedOut => {
            CliError::env(format!("{kept}{} did not answer in time", m.dest))
        }
        ProbeOutcome::NoVolee { .. } => CliError::env(format!(
            "{kept}there is no volee on its PATH (ssh {} works)",
            m.dest
        ))
        .hints(install_hints(m)),
        ProbeOutcome::Incompatible { version, protocol } => CliError::env(format!(
            "{kept}its volee {version} speaks protocol {}, this one {} (volee {})",
            protocol.map_or("none (it has no `volee serve`)".to_string(), |p| p.to_string()),
            volee_protocol::PROTOCOL_VERSION,
            env!("CARGO_PKG_VERSION")
        ))
        .hints(install_hints(m)),
        ProbeOutcome::Failed { .. } => CliError::env(format!(
            "{kept}`volee --version` on {} failed",
            m.dest
        )),
        ProbeOutcome::Ready { .. } => CliError::internal("the machine answered"),
    };
    err.causes(detail.filter(|d| !d.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmux_errors_keep_their_exit_codes_and_one_install_hint() {
        let missing = tmux_missing();
        assert_eq!(missing.exit, Exit::Environment);
        assert_eq!(missing.message, "tmux is not installed (no `tmux` on PATH)");
        assert_eq!(missing.hints, [volee_tmux::server::INSTALL_HINT]);
        let failed: CliError = volee_tmux::server::TmuxError::Failed {
            command: "x".into(),
            stderr: "y".into(),
        }
        .into();
        assert_eq!(failed.exit, Exit::Internal);
        let zellij: CliError = volee_zellij::ZellijError::NotInstalled.into();
        assert_eq!(zellij.exit, Exit::Environment);
        assert!(zellij.hints[0].contains("VOLEE_ZELLIJ"), "{zellij:?}");
    }

    #[test]
    fn the_daemons_answer_keeps_its_kind_and_hints() {
        let e = CliError::from_response(Response::Error {
            kind: ErrorKind::Environment,
            message: "m".into(),
            hints: vec!["h".into()],
        });
        assert_eq!(
            (e.exit, e.message.as_str(), e.hints.len()),
            (Exit::Environment, "m", 1)
        );
        let odd = CliError::from_response(Response::Text { text: "t".into() });
        assert_eq!(odd.exit, Exit::Internal);
    }

    #[test]
    fn an_unknown_harness_names_the_known_ones() {
        let e = unknown_harness("nope");
        assert_eq!(e.exit, Exit::User);
        assert!(
            e.hints[0].contains("claude") && e.hints[0].contains("generic"),
            "{e:?}"
        );
        let claude = volee_harness::profile("claude").unwrap();
        let e = harness_not_installed(&claude);
        assert_eq!(e.exit, Exit::Environment);
        assert!(e.hints[0].contains("@anthropic-ai/claude-code"), "{e:?}");
    }
}
