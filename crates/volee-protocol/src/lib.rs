//! Types shared by everything that talks to the volee daemon: the CLI, key bindings, the zellij
//! plugin and users' scripts reading `--json`.
//!
//! This crate is serde-only and wasm-safe: no I/O, no async runtime. The socket protocol is
//! newline-delimited JSON: one [`Request`] per line from the client, one [`Response`] per line from
//! the daemon (a [`Request::Watch`] keeps the connection open and gets one line per change).
//! While a request is pending and on a watch stream the daemon also sends [`Response::KeepAlive`]
//! every [`KEEPALIVE_SECS`], so a client tells a slow daemon from a stopped one.

use serde::{Deserialize, Serialize};

pub mod remote;
pub mod zellij;

/// Bumped whenever a request or response changes shape; a CLI that sees another version restarts
/// the daemon (the registry survives, see `docs/ARCHITECTURE.md`). 4: keep-alives (a client that
/// expects them must not take an older daemon's silence for a stopped daemon). 6: machines
/// (`machine`, `reachable` on agents; `WatchAll`, `Machines`, `RunOn`). 7: restore
/// (`restorable`, `placement` on agents; `restore`, `window` on launches).
pub const PROTOCOL_VERSION: u32 = 7;

/// How often the daemon sends [`Response::KeepAlive`] on a connection that waits.
pub const KEEPALIVE_SECS: u64 = 2;

/// What an agent is doing, as defined in ARCHITECTURE.md section 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Producing output or running a turn.
    Working,
    /// Waiting on the user for something it cannot go on without (positive evidence only).
    NeedsYou,
    /// Alive, turn finished, waiting for a new prompt.
    Idle,
    /// Exited with status 0 on its own.
    Done,
    /// Exited non-zero, killed by a signal volee did not send, or its last turn reported a failure.
    Failed,
    /// Ended by the user through volee or by killing its pane or window.
    Stopped,
}

impl AgentState {
    pub const ALL: [AgentState; 6] = [
        AgentState::Working,
        AgentState::NeedsYou,
        AgentState::Idle,
        AgentState::Done,
        AgentState::Failed,
        AgentState::Stopped,
    ];

    /// The name used on the command line and in JSON (`needs_you`).
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Working => "working",
            AgentState::NeedsYou => "needs_you",
            AgentState::Idle => "idle",
            AgentState::Done => "done",
            AgentState::Failed => "failed",
            AgentState::Stopped => "stopped",
        }
    }

    /// Parses `working`, `needs_you` (also `needs-you`), … as typed by a user.
    pub fn parse(text: &str) -> Option<AgentState> {
        let norm = text.trim().to_ascii_lowercase().replace('-', "_");
        AgentState::ALL.into_iter().find(|s| s.as_str() == norm)
    }

    /// Ended states never change again (a `failed` turn of a live process is not final, but an
    /// agent whose process is gone is).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            AgentState::Done | AgentState::Failed | AgentState::Stopped
        )
    }
}

impl std::fmt::Display for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an agent is `failed` or `needs_you`, for a script to act on (the evidence says it in
/// words). Set only for those two states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    // --- failed
    /// Its process exited with a non-zero status.
    ExitNonzero,
    /// A signal volee did not send ended it, after its harness said it was ending.
    Killed,
    /// Its model's API answered with an error.
    ApiError,
    /// It is not logged in, or its key was refused (401, 403).
    Auth,
    /// A usage or rate limit (429, "usage limit reached").
    UsageLimit,
    /// Its model could not be reached.
    Network,
    /// Its process is gone and no final hook came (killed, crashed).
    CrashedSilently,
    // --- needs_you
    /// It asks to run a tool or touch a file.
    Permission,
    /// It asks a question (a prompt, a dialog).
    Question,
    /// It wants a login.
    Login,
    /// It reached its budget (`volee budget`).
    Budget,
    /// The pane rang the bell.
    Bell,
}

impl Reason {
    pub const ALL: [Reason; 12] = [
        Reason::ExitNonzero,
        Reason::Killed,
        Reason::ApiError,
        Reason::Auth,
        Reason::UsageLimit,
        Reason::Network,
        Reason::CrashedSilently,
        Reason::Permission,
        Reason::Question,
        Reason::Login,
        Reason::Budget,
        Reason::Bell,
    ];

    /// The name in JSON and on the command line (`usage_limit`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ExitNonzero => "exit_nonzero",
            Reason::Killed => "killed",
            Reason::ApiError => "api_error",
            Reason::Auth => "auth",
            Reason::UsageLimit => "usage_limit",
            Reason::Network => "network",
            Reason::CrashedSilently => "crashed_silently",
            Reason::Permission => "permission",
            Reason::Question => "question",
            Reason::Login => "login",
            Reason::Budget => "budget",
            Reason::Bell => "bell",
        }
    }

    /// A few letters for a table column (`volee ls`).
    pub fn short(self) -> &'static str {
        match self {
            Reason::ExitNonzero => "exit",
            Reason::Killed => "killed",
            Reason::ApiError => "api",
            Reason::Auth => "auth",
            Reason::UsageLimit => "limit",
            Reason::Network => "net",
            Reason::CrashedSilently => "crash",
            Reason::Permission => "perm",
            Reason::Question => "ask",
            Reason::Login => "login",
            Reason::Budget => "budget",
            Reason::Bell => "bell",
        }
    }

    /// Parses `usage_limit` (also `usage-limit`).
    pub fn parse(text: &str) -> Option<Reason> {
        let norm = text.trim().to_ascii_lowercase().replace('-', "_");
        Reason::ALL.into_iter().find(|r| r.as_str() == norm)
    }

    /// The state it explains.
    pub fn state(self) -> AgentState {
        match self {
            Reason::Permission
            | Reason::Question
            | Reason::Login
            | Reason::Budget
            | Reason::Bell => AgentState::NeedsYou,
            _ => AgentState::Failed,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an observation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateSource {
    Hooks,
    Listing,
    Screen,
    Multiplexer,
    Process,
}

impl StateSource {
    pub fn as_str(self) -> &'static str {
        match self {
            StateSource::Hooks => "hooks",
            StateSource::Listing => "listing",
            StateSource::Screen => "screen",
            StateSource::Multiplexer => "multiplexer",
            StateSource::Process => "process",
        }
    }
}

impl std::fmt::Display for StateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How well the agent's harness profile fits the installed program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileFit {
    Measured,
    OtherVersion,
    Generic,
}

/// Whether volee started the agent or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Launched,
    Discovered,
}

/// Where an agent lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Host {
    Tmux {
        /// Path of the tmux server socket.
        socket: String,
        /// Session name.
        session: String,
        /// Window id (`@3`).
        window: String,
        /// Pane id (`%7`).
        pane: String,
    },
    Zellij {
        session: String,
        tab: u32,
        pane: String,
    },
    Tty {
        tty: String,
    },
    None,
}

/// One agent as every front end sees it (`volee ls --json` is an array of these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentView {
    pub id: String,
    pub name: String,
    pub harness: String,
    pub harness_version: Option<String>,
    pub profile_fit: ProfileFit,
    pub origin: Origin,
    pub state: AgentState,
    pub state_source: StateSource,
    /// RFC 3339, UTC, seconds.
    pub state_since: String,
    pub evidence: String,
    /// Why it is `failed` or `needs_you` (null in other states, and when volee cannot tell).
    #[serde(default)]
    pub reason: Option<Reason>,
    pub exit_status: Option<i32>,
    pub pid: Option<u32>,
    pub cwd: String,
    pub session_id: Option<String>,
    pub host: Host,
    /// The pane title the agent set (agent-controlled text: escape before display).
    #[serde(default)]
    pub title: Option<String>,
    /// The command line it was started with.
    #[serde(default)]
    pub command: Vec<String>,
    /// RFC 3339 time it was launched or discovered.
    #[serde(default)]
    pub created_at: String,
    /// RFC 3339 time it ended, when it has.
    #[serde(default)]
    pub ended_at: Option<String>,
    /// RFC 3339 time (milliseconds) of its last output — not counting the echo of text volee
    /// typed into it.
    #[serde(default)]
    pub last_output: Option<String>,
    /// The linked git worktree its working directory is in (`launch --worktree`, or found).
    #[serde(default)]
    pub worktree: Option<Worktree>,
    /// The machine it runs on (`volee machine add`), addressed as `MACHINE:ID`; null when local.
    #[serde(default)]
    pub machine: Option<String>,
    /// False while its machine cannot be reached: `state` is the last one known, never guessed.
    #[serde(default = "reachable_default")]
    pub reachable: bool,
    /// RFC 3339 time its machine stopped answering (while `reachable` is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<String>,
    /// Stopped because its host went away (a tmux server gone, a reboot) and resumable: `volee
    /// restore` brings it back into its place with its conversation and this id.
    #[serde(default)]
    pub restorable: bool,
    /// Where it sat in tmux, as last seen: what `volee restore` rebuilds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// RFC 3339 times it was restored by `volee restore`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<String>,
    /// The tokens its harness recorded for its session, and where volee read them; null when
    /// unknown (the harness records none where volee can read it, or nothing was read yet) —
    /// never zeros standing for "unknown".
    #[serde(default)]
    pub usage: Option<AgentUsage>,
    /// Its token budget, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

/// An agent's budget, in tokens or in money: at 80 % the user is told; at 100 % volee
/// interrupts its turn and holds it (`needs_you`, evidence "budget reached: N of M") until it is
/// raised or taken off. Tokens counted: input + output + cache writes
/// ([`AgentUsage::counted`]); money: the cost of all of it at the price table's prices.
/// Exactly one of `tokens` and `usd` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// In US dollars (`--budget 5usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// The 80 % notice was given (for this limit).
    #[serde(default)]
    pub warned: bool,
    /// It reached the limit: held until raised.
    #[serde(default)]
    pub reached: bool,
}

impl Budget {
    pub fn new(limit: Amount) -> Budget {
        let (tokens, usd) = match limit {
            Amount::Tokens(n) => (Some(n), None),
            Amount::Usd(c) => (None, Some(c)),
        };
        Budget {
            tokens,
            usd,
            warned: false,
            reached: false,
        }
    }

    pub fn limit(&self) -> Amount {
        match (self.tokens, self.usd) {
            (Some(n), _) => Amount::Tokens(n),
            (None, Some(c)) => Amount::Usd(c),
            (None, None) => Amount::Tokens(0),
        }
    }

    /// What `usage` used of it, in its unit: None when that cannot be counted — a budget in
    /// money for a model the price table does not know.
    pub fn used(&self, usage: &AgentUsage) -> Option<Amount> {
        match self.limit() {
            Amount::Tokens(_) => Some(Amount::Tokens(usage.counted())),
            Amount::Usd(_) => usage.cost_usd.map(Amount::Usd),
        }
    }
}

/// An amount of tokens or money, as users write it: `12000`, `200k`, `1.5M`, `5usd`, `$2.50`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    Tokens(u64),
    Usd(f64),
}

impl Amount {
    pub fn parse(text: &str) -> Result<Amount, String> {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        let money = lower
            .strip_suffix("usd")
            .or_else(|| lower.strip_prefix('$'))
            .map(str::trim);
        match money {
            Some(number) => {
                let c: f64 = number.parse().map_err(|_| {
                    format!("{text:?} is not an amount of money (examples: 5usd, $2.50)")
                })?;
                if !(0.0..=1e9).contains(&c) {
                    return Err(format!("{text:?} is not an amount of money"));
                }
                Ok(Amount::Usd(c))
            }
            None => parse_tokens(t).map(Amount::Tokens),
        }
    }

    /// How much of `limit` this is (0.0–, 1.0 = all), both in one unit; None across units.
    pub fn share_of(&self, limit: &Amount) -> Option<f64> {
        match (self, limit) {
            (Amount::Tokens(n), Amount::Tokens(m)) => Some(*n as f64 / (*m).max(1) as f64),
            (Amount::Usd(c), Amount::Usd(l)) if *l > 0.0 => Some(c / l),
            (Amount::Usd(_), Amount::Usd(_)) => Some(f64::INFINITY),
            _ => None,
        }
    }

    /// As `parse` reads it back: `12000`, `5usd`.
    pub fn as_arg(&self) -> String {
        match self {
            Amount::Tokens(n) => n.to_string(),
            Amount::Usd(c) => format!("{c}usd"),
        }
    }

    pub fn is_zero(&self) -> bool {
        match self {
            Amount::Tokens(n) => *n == 0,
            Amount::Usd(c) => *c <= 0.0,
        }
    }
}

impl std::fmt::Display for Amount {
    /// `12000 tokens`, `$5.00`, `$0.0123`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Tokens(n) => write!(f, "{n} tokens"),
            Amount::Usd(c) if *c != 0.0 && *c < 1.0 => write!(f, "${c:.4}"),
            Amount::Usd(c) => write!(f, "${c:.2}"),
        }
    }
}

/// A token amount as users write it: `12000`, `200k`, `1.5M` (k = 1000, M = 1,000,000).
pub fn parse_tokens(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, scale) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        _ => (t, 1.0),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a number of tokens (examples: 12000, 200k, 1.5M)"))?;
    if !n.is_finite() || n < 0.0 || n * scale > 1e15 {
        return Err(format!("{text:?} is not a number of tokens"));
    }
    Ok((n * scale).round() as u64)
}

/// `volee budget ID …`: what to do with an agent's budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetChange {
    /// Raise (or set, when it has none) by this many tokens.
    Add(u64),
    /// Set to exactly this many tokens.
    Set(u64),
    /// Raise by this much money (a budget in tokens becomes one in money: what it cost so far
    /// and this much more).
    AddUsd(f64),
    /// Set to exactly this much money.
    SetUsd(f64),
    /// No budget any more.
    Off,
}

/// Tokens a harness recorded for an agent's session (cumulative, as the harness counts them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    /// Input not read from a cache.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Model responses counted; null when the source does not say.
    pub requests: Option<u64>,
    /// The model of the last response, as the harness names it.
    pub model: Option<String>,
    /// Where it was read: the session file's path.
    pub source: String,
    /// What it cost in USD at volee's price table (`prices.toml`); null when the model has no
    /// entry there (`cost: unknown`).
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

impl AgentUsage {
    /// The tokens a budget counts: input + output + cache writes (cache reads are shown, not
    /// counted).
    pub fn counted(&self) -> u64 {
        self.input + self.output + self.cache_write
    }
}

/// An agent's place in tmux beyond its ids (which a new server does not keep): the window's
/// name, index and layout, and the pane's index in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub window_name: String,
    pub window_index: u32,
    /// `#{window_layout}`, for `select-layout` once every pane of the window is back.
    pub window_layout: String,
    pub pane_index: u32,
    /// Its tmux server: its pid and when it started (`#{pid}`, `#{start_time}` in epoch
    /// seconds; 0: not known). A pane missing from another server at the same socket was lost
    /// with the old server, not closed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub server_pid: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub server_started: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Placement {
    /// The server it was placed on (None: not known).
    pub fn server(&self) -> Option<(u64, u64)> {
        (self.server_pid != 0 && self.server_started != 0)
            .then_some((self.server_pid, self.server_started))
    }
}

fn reachable_default() -> bool {
    true
}

impl AgentView {
    /// How the user addresses it: `ID` when local, `MACHINE:ID` when remote.
    pub fn address(&self) -> String {
        match &self.machine {
            Some(m) => format!("{m}:{}", self.id),
            None => self.id.clone(),
        }
    }
}

/// A linked git worktree: its top directory and the branch checked out there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    pub path: String,
    /// None on a detached HEAD.
    pub branch: Option<String>,
}

/// One source's latest observation, as `volee explain` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationView {
    pub source: StateSource,
    /// What was observed: `output`, `bell`, `prompt`, `title`, `exit`, `stop`, `pane_gone`.
    pub kind: String,
    /// RFC 3339 with milliseconds.
    pub at: String,
    pub evidence: String,
}

/// Why an agent is in its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub agent: AgentView,
    pub observations: Vec<ObservationView>,
    /// The rule that decided, in one sentence.
    pub decision: String,
    /// Where its screen is read from, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenSource>,
}

/// Where the screen rules read an agent's screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenSource {
    /// `model` (tmux: kept from the pane's output, checked against `capture-pane` on a sample),
    /// `capture` (tmux, asked each time: not modelled yet), `plugin` (zellij: the screens its
    /// plugin or `zellij subscribe` pushes).
    pub kind: String,
    /// Checks of the model against tmux's own screen so far, and how many found a difference
    /// (each a defect, logged).
    #[serde(default)]
    pub checks: u64,
    #[serde(default)]
    pub differences: u64,
}

/// A request to run a command in a new pane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// `None` means generic (a command was given) — the CLI resolves defaults before sending.
    pub harness: String,
    pub command: Vec<String>,
    pub cwd: String,
    pub name: Option<String>,
    /// The caller's environment, passed to the agent as if started from the caller's shell.
    pub env: Vec<(String, String)>,
    /// Which tmux server and session; `None` fields are filled from the caller's `TMUX`.
    pub tmux_socket: String,
    pub tmux_session: Option<String>,
    /// The caller's own pane when it runs inside tmux (`TMUX_PANE`), to pick its session.
    pub caller_pane: Option<String>,
    /// The installed harness version the CLI read (`claude --version`).
    #[serde(default)]
    pub harness_version: Option<String>,
    #[serde(default = "generic_fit")]
    pub profile_fit: ProfileFit,
    /// A session id preset on the command line (`--session-id`).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Give the harness volee's hooks through volee's own extension directory (Gemini, when
    /// its system-defaults file cannot be used); the daemon writes it and removes it when no
    /// agent of the harness needs it.
    #[serde(default)]
    pub hooks_extension: bool,
    /// Launch into this zellij session (a new tab) instead of tmux.
    #[serde(default)]
    pub zellij_session: Option<String>,
    /// A first prompt to type into the pane once the harness shows it is ready (the screen says
    /// idle), for a harness with no flag that keeps its session interactive (Aider).
    #[serde(default)]
    pub typed_prompt: Option<String>,
    /// `volee restore`: the restorable agent this launch brings back (it keeps that id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
    /// `volee restore`: the tmux window to open the pane in — split into the window of that
    /// name in the session when there is one, else a new window of that name at that index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowPlace>,
    /// `--budget`: its token budget (input + output + cache writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// `--budget 5usd`: its budget in money (US dollars), instead of `budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

/// Where `volee restore` opens a pane: in the window named `name` (split into it when it exists
/// in the session, else a new window of that name, at `index` when that index is free).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowPlace {
    pub name: String,
    pub index: Option<u32>,
    /// A pane (`%N`) to run the agent in instead of opening one: the shell tmux-resurrect
    /// restored in the agent's place (`volee restore --into-resurrect`); whatever runs in it is
    /// replaced (`respawn-pane -k`). Ignored when that pane is gone or in another session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
}

fn generic_fit() -> ProfileFit {
    ProfileFit::Generic
}

/// The per-launch secret an agent's hooks present (`VOLEE_AGENT_TOKEN` in its pane's
/// environment), so that a process that only knows an agent's id cannot speak for it. `Debug`
/// never shows it, and it is never part of an [`AgentView`] or [`Explanation`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HookToken(pub String);

impl std::fmt::Debug for HookToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookToken(…)")
    }
}

impl HookToken {
    /// Is `presented` this token? In constant time for tokens of the same length, so the
    /// answer's timing tells nothing about how much of a guess was right.
    pub fn matches(&self, presented: Option<&HookToken>) -> bool {
        let Some(presented) = presented else {
            return false;
        };
        let (a, b) = (self.0.as_bytes(), presented.0.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// One harness hook event, as `volee hook HARNESS EVENT` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookEvent {
    /// `VOLEE_AGENT_ID` of the hook's environment (empty when unset).
    pub agent: String,
    /// `VOLEE_AGENT_TOKEN` of the hook's environment; an agent launched with a token ignores
    /// events without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<HookToken>,
    /// A random id of this event, so one delivered and then spooled too (its answer came late)
    /// counts once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    pub harness: String,
    pub event: String,
    /// Epoch milliseconds when the hook ran (kept when spooled and replayed).
    pub at_ms: u64,
    /// The harness's session id from the payload.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Selected short string fields of the payload (`notification_type`, `error`, `reason`, …).
    #[serde(default)]
    pub fields: Vec<(String, String)>,
    /// Why the payload could not be used (malformed or oversized JSON).
    #[serde(default)]
    pub error: Option<String>,
}

/// What the CLI may ask of the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Hello {
        version: u32,
    },
    List {
        all: bool,
    },
    Show {
        id: String,
    },
    Explain {
        id: String,
    },
    Launch(Box<LaunchRequest>),
    Hook(HookEvent),
    Stop {
        id: String,
    },
    Interrupt {
        id: String,
    },
    /// `volee budget ID +N|N|off`: an agent's token budget raised, set or taken off.
    Budget {
        id: String,
        change: BudgetChange,
    },
    /// Type text into the agent the way its profile says, then submit it.
    Send {
        id: String,
        text: String,
        /// Type the text as it is, controls and line breaks included (`volee send --raw`);
        /// otherwise it is made inert first (`volee_harness::sanitize_input`) and submitted once.
        #[serde(default)]
        raw: bool,
    },
    Peek {
        id: String,
        lines: u32,
    },
    Remove {
        id: String,
    },
    Prune,
    /// Scan /proc for harness agents started outside volee now.
    Rescan,
    /// Keep the connection open: the agent's view now and after every change.
    Watch {
        id: String,
    },
    /// Install (or refresh) volee's options, bindings and status push on a tmux server.
    TmuxInit {
        socket: String,
        volee_bin: String,
        /// The server's `@volee-status-cost` is `on`: its status line shows the day's spend.
        #[serde(default)]
        status_cost: bool,
    },
    /// Remove everything `TmuxInit` added on that server.
    TmuxDown {
        socket: String,
    },
    Shutdown,
    /// No notifications until this time (epoch ms); None: notify again now. Answers with a
    /// `Text` saying until when.
    Quiet {
        until_ms: Option<u64>,
    },
    /// Until when notifications are held back (`volee status`). Answers with `Quiet`.
    QuietState,
    /// The zellij sessions the daemon watches and whether volee's plugin runs in each
    /// (`volee doctor`). Answers with `ZellijSessions`.
    ZellijSessions,
    /// Bring the past-sessions index up to date over these roots now (the daemon's index thread
    /// reads the roots it saw change, and those it does not watch), then answer
    /// `SessionsIndexed`. What `volee sessions` and `volee browse` ask before they read the index.
    IndexSessions {
        roots: Vec<SessionRoot>,
    },
    /// Keep the connection open: every agent (ended ones too) now, and again after every change,
    /// as `Agents`. What `volee serve --stdio` streams to the machine that connected.
    WatchAll,
    /// The machines the daemon keeps a connection to (`volee machine ls`). Answers `Machines`.
    Machines {
        /// Time a round trip on each connected machine's kept connection.
        #[serde(default)]
        ping: bool,
    },
    /// `machines.toml` changed (`volee machine add|rm`): connect to new machines, drop removed
    /// ones. Answers `Ok`.
    MachinesChanged,
    /// Run `volee ARGS` on a machine (through its kept connection), with the remote's own login
    /// environment; only the commands of [`REMOTE_COMMANDS`]. Answers `Ran`.
    RunOn {
        machine: String,
        args: Vec<String>,
    },
}

/// The volee commands `RunOn` may run on a machine (`launch --on`, `sessions … --on`).
pub const REMOTE_COMMANDS: &[&str] = &["launch", "sessions"];

/// What the daemon knows of a machine's connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineLink {
    pub name: String,
    /// `connecting`, `connected`, `unreachable`, `incompatible`.
    pub status: String,
    /// The remote volee's version, once it said hello.
    #[serde(default)]
    pub version: Option<String>,
    /// The remote's protocol, once it said hello.
    #[serde(default)]
    pub protocol: Option<u32>,
    /// A round trip on the kept connection (asked with `ping`), in milliseconds.
    #[serde(default)]
    pub rtt_ms: Option<u64>,
    /// RFC 3339: connected since, or unreachable since.
    #[serde(default)]
    pub since: Option<String>,
    /// Why it is not connected (ssh's words, control characters removed, bounded).
    #[serde(default)]
    pub error: Option<String>,
    /// Its agents that have not ended, by state (`working`, `needs_you`, …).
    #[serde(default)]
    pub agents: std::collections::BTreeMap<String, u32>,
    /// The ssh process of the connection (one per machine).
    #[serde(default)]
    pub ssh_pid: Option<u32>,
}

/// A harness's sessions directory (or a project directory, for a harness that keeps its history
/// there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRoot {
    pub harness: String,
    pub path: String,
    /// Where the path came from: `HOME`, a home variable, an agent's.
    pub from: String,
}

/// A file that looked like a session but could not be read, or a directory that could not be
/// walked, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableFile {
    pub harness: String,
    pub path: String,
    pub reason: String,
}

/// How a request failed; the CLI maps kinds to exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Unknown or ambiguous id, bad argument, an agent in the wrong state: exit 2.
    User,
    /// Something the machine lacks (tmux missing, server gone): exit 3.
    Environment,
    /// A bug or an unexpected failure: exit 4.
    Internal,
}

/// What the daemon answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Hello {
        version: u32,
        pid: u32,
    },
    Agents {
        agents: Vec<AgentView>,
    },
    Agent {
        agent: AgentView,
    },
    Explanation {
        explanation: Explanation,
    },
    Text {
        text: String,
    },
    /// `volee quiet` holds notifications back until this time (epoch ms); None: it is off.
    Quiet {
        until_ms: Option<u64>,
    },
    ZellijSessions {
        sessions: Vec<ZellijSession>,
    },
    /// The index is up to date over the roots asked for; what under them could not be read.
    SessionsIndexed {
        unreadable: Vec<UnreadableFile>,
    },
    Machines {
        machines: Vec<MachineLink>,
    },
    /// What `RunOn` ran printed, and its exit code.
    Ran {
        code: i32,
        stdout: String,
        stderr: String,
    },
    Ok,
    /// Not an answer: the daemon is alive and the answer (or the next change) is still to come.
    KeepAlive,
    Error {
        kind: ErrorKind,
        message: String,
        hints: Vec<String>,
    },
}

/// A zellij session the daemon watches (it holds live agents), and volee's plugin there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZellijSession {
    pub name: String,
    pub plugin: PluginState,
}

/// Whether volee's zellij plugin answers in a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PluginState {
    /// It said hello on the daemon's stream.
    Running,
    /// None answers (the session is watched without it: no hidden-tab bells, no agents pane).
    Missing,
    /// One answered with another protocol version.
    Mismatch { plugin_version: u32, hint: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_tokens_or_money_as_users_write_them() {
        assert_eq!(Amount::parse("200k"), Ok(Amount::Tokens(200_000)));
        assert_eq!(Amount::parse("1.5M"), Ok(Amount::Tokens(1_500_000)));
        assert_eq!(Amount::parse("5usd"), Ok(Amount::Usd(5.0)));
        assert_eq!(Amount::parse(" 2.50 USD"), Ok(Amount::Usd(2.5)));
        assert_eq!(Amount::parse("$0.75"), Ok(Amount::Usd(0.75)));
        for bad in [
            "", "usd", "$", "-1usd", "NaNusd", "infusd", "5eur", "lots", "$1e12",
        ] {
            assert!(Amount::parse(bad).is_err(), "{bad:?} was taken");
        }
        assert_eq!(Amount::Usd(5.0).to_string(), "$5.00");
        assert_eq!(Amount::Usd(0.0123).to_string(), "$0.0123");
        assert_eq!(Amount::Tokens(300).to_string(), "300 tokens");
        assert_eq!(Amount::Usd(4.0).share_of(&Amount::Usd(5.0)), Some(0.8));
        assert_eq!(Amount::Tokens(4).share_of(&Amount::Usd(5.0)), None);
    }

    #[test]
    fn a_budget_in_tokens_keeps_its_json_and_one_in_money_counts_the_cost() {
        let tokens = Budget::new(Amount::Tokens(300));
        let json = serde_json::to_value(&tokens).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"tokens": 300, "warned": false, "reached": false})
        );
        // What a daemon of the token-only kind saved reads back.
        let old: Budget =
            serde_json::from_str(r#"{"tokens":300,"warned":true,"reached":false}"#).unwrap();
        assert_eq!(old.limit(), Amount::Tokens(300));
        let money = Budget::new(Amount::Usd(5.0));
        assert_eq!(serde_json::to_value(&money).unwrap_or_default()["usd"], 5.0);
        let mut usage = AgentUsage {
            input: 100,
            output: 20,
            cache_read: 1000,
            cache_write: 5,
            ..AgentUsage::default()
        };
        assert_eq!(tokens.used(&usage), Some(Amount::Tokens(125)));
        // No price for its model: a budget in money cannot be counted.
        assert_eq!(money.used(&usage), None);
        usage.cost_usd = Some(1.25);
        assert_eq!(money.used(&usage), Some(Amount::Usd(1.25)));
    }

    #[test]
    fn state_names_round_trip() {
        for s in AgentState::ALL {
            assert_eq!(AgentState::parse(s.as_str()), Some(s));
            let json = serde_json::to_string(&s).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
        assert_eq!(AgentState::parse("needs-you"), Some(AgentState::NeedsYou));
        assert_eq!(AgentState::parse("sleeping"), None);
    }

    #[test]
    fn host_json_has_kind_tag() {
        let host = Host::Tmux {
            socket: "/tmp/tmux-1000/default".into(),
            session: "work".into(),
            window: "@3".into(),
            pane: "%7".into(),
        };
        let value = serde_json::to_value(&host).unwrap_or_default();
        assert_eq!(value["kind"], "tmux");
        assert_eq!(value["pane"], "%7");
        assert_eq!(
            serde_json::to_value(Host::None).unwrap_or_default()["kind"],
            "none"
        );
    }

    #[test]
    fn requests_are_tagged_lines() {
        let req = Request::Show { id: "k3f9".into() };
        let line = serde_json::to_string(&req).unwrap_or_default();
        assert_eq!(line, r#"{"type":"show","id":"k3f9"}"#);
        let back: Request = serde_json::from_str(&line).unwrap_or(Request::Prune);
        assert_eq!(back, req);
    }
}
