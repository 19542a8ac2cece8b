//! Harness profiles: one value per harness with the six parts of the product's design — launch,
//! resume, processes, session, states (sources best first), join — plus input rules and the
//! versions it was measured on. Facts: `docs/harnesses/<name>.md`.

use serde::{Deserialize, Serialize};

/// Versions a profile was measured on (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VersionRange {
    pub min: &'static str,
    pub max: &'static str,
}

impl VersionRange {
    /// Is `version` (dotted numbers; anything after them ignored) inside the range?
    pub fn contains(&self, version: &str) -> bool {
        match (
            parse_version(version),
            parse_version(self.min),
            parse_version(self.max),
        ) {
            (Some(v), Some(lo), Some(hi)) => lo <= v && v <= hi,
            _ => false,
        }
    }
}

/// `2.1.332 (Claude Code)` → [2, 1, 332]; the first dotted number in the text.
pub fn parse_version(text: &str) -> Option<Vec<u64>> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|w| w.contains('.'))
        .find_map(|w| {
            let parts: Option<Vec<u64>> = w
                .split('.')
                .filter(|p| !p.is_empty())
                .map(|p| p.parse().ok())
                .collect();
            parts.filter(|p| p.len() >= 2)
        })
}

/// The version line of a program's `--version` output: its first non-empty line, trimmed, when
/// that holds a version number (a program that prints something else is not the one profiled).
pub fn version_line(output: &str) -> Option<String> {
    let line = output.lines().find(|l| !l.trim().is_empty())?.trim();
    parse_version(line).map(|_| line.to_string())
}

/// How a first prompt is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "style", content = "flag")]
pub enum PromptStyle {
    /// `-- "prompt"` at the end of the command line.
    AfterDoubleDash,
    /// A positional argument at the end.
    Positional,
    /// A flag before the prompt (`-i` for Qwen: a positional prompt would run headless).
    Flag(&'static str),
    /// No flag keeps the session interactive (Aider's `--message` answers once and exits): the
    /// daemon types the prompt into the pane the first time the screen shows the harness idle.
    Typed,
    /// None volee could verify (Amp): a first prompt is refused with a hint to `volee send`.
    Unsupported,
}

/// How volee gives a harness its hooks for one launch, without editing the user's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Instrumentation {
    /// A settings file passed by this flag (Claude `--settings FILE`).
    SettingsFlag(&'static str),
    /// A system-defaults file named by this environment variable (replaces the real one: volee
    /// merges the existing file into its copy).
    SystemDefaultsEnv(&'static str),
    /// `-c hooks.…` config overrides (Codex; needs the hook-trust flag and forces embedded mode).
    ConfigOverrides,
    /// No per-launch way: one clearly named file of volee's own in this directory under HOME.
    OwnHooksFile(&'static str),
    /// All hooks live in one file of the user's (Cursor's `~/.cursor/hooks.json`, path under
    /// HOME): volee adds its entries only when the user asks (`volee setup HARNESS`), with a
    /// backup, and `volee down` takes them out again. Until then: screen states.
    UserOptIn(&'static str),
    /// The harness reports its states to the daemon itself (volee's own agent, told its agent id
    /// by `VOLEE_AGENT_ID`).
    BuiltIn,
    /// Nothing (the generic profile).
    None,
    /// No hooks: the harness serves its own state over HTTP on a loopback port volee picks per
    /// launch and passes with this flag (OpenCode `--port P --hostname 127.0.0.1`); the daemon
    /// reads its event stream as the `listing` source.
    ServerPort(&'static str),
}

/// How volee writes a harness's hook registrations (a kind: the code is volee's, in
/// `instrument.rs`), and where its files go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HookFiles {
    pub format: HookFormat,
    /// volee's own hooks file's name ([`Instrumentation::OwnHooksFile`]).
    pub file: &'static str,
    /// A variable naming the harness's whole home (`COPILOT_HOME`): when set, volee's own hooks
    /// file goes to `$VAR/hooks/` instead of the profile's directory under HOME.
    pub home_env: Option<&'static str>,
    /// The harness's own system-defaults file ([`Instrumentation::SystemDefaultsEnv`]), merged
    /// into volee's copy when the variable names none.
    pub system_defaults: Option<&'static str>,
    /// It reads a system-defaults file only when root owns it and every directory above (Gemini
    /// CLI 0.61.0): volee's hooks then go in as an extension of volee's own, in this directory
    /// under HOME.
    pub extension_dir: Option<&'static str>,
}

/// The shape of one hook registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookFormat {
    /// `{"hooks": [{"type": "command", "command": C, "timeout": 10}]}` (Claude, Codex, Grok).
    Nested,
    /// `{"matcher": "", "hooks": [{"name": …, "type": "command", "command": C}]}` (Qwen).
    MatcherNamed,
    /// The same with matcher `*` and a timeout in milliseconds (Gemini).
    MatcherNamedMs,
    /// `{"type": "command", "bash": C, "timeoutSec": 10}` per event, in a file that says
    /// `"version": 1` (Copilot).
    FlatBashV1,
}

/// How a harness takes volee's MCP server for one launch (`volee launch --join`): a kind, with
/// the flags and names its profile gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum JoinVia {
    /// A file of volee's own passed by arguments: `{file}` in them is its path.
    FileArg {
        args: &'static [&'static str],
        file: &'static str,
        format: McpFormat,
    },
    /// The JSON itself as an argument: `{json}` in the arguments.
    InlineArg {
        args: &'static [&'static str],
        format: McpFormat,
    },
    /// `-c mcp_servers.volee.…=…` TOML overrides.
    ConfigOverrides,
    /// A JSON configuration in this environment variable, merged with the user's value.
    EnvJson {
        var: &'static str,
        format: McpFormat,
    },
    /// In the system-defaults file volee already writes for the hooks.
    SystemDefaults { format: McpFormat },
    /// None per launch, and why.
    None { why: &'static str },
}

/// The JSON a harness reads its MCP servers from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpFormat {
    /// `{"mcpServers": {"volee": {"type": "stdio", "command", "args", "env"}}}`.
    McpServers,
    /// `{"mcpServers": {"volee": {"type": "local", …, "tools": ["*"]}}}`.
    McpServersLocal,
    /// `{"mcpServers": {"volee": {"command", "args", "env"}}}`.
    McpServersPlain,
    /// `{"volee": {"command", "args", "env"}}`.
    Bare,
    /// `{"mcp": {"volee": {"type": "local", "command": [C, "mcp"], "environment", "enabled"}}}`.
    McpLocalCommand,
}

/// Where a harness publishes the session id of a running process, under HOME.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SessionFile {
    /// Relative to HOME; `{pid}` is the process's pid.
    pub path: &'static str,
    /// The field holding the session id.
    pub id_field: &'static str,
    /// The file is a list of sessions: the one whose field of this name is the pid.
    pub pid_field: Option<&'static str>,
}

/// A file a harness process holds open whose path names its session (a kind: the path's shape
/// is read by volee's code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenFile {
    None,
    /// `…/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl` (Codex).
    RolloutUuid,
    /// `<home>/session-state/<uuid>/inuse.<pid>.hold`, and its `.lock` files when open files
    /// cannot be read (Copilot; the home is `$COPILOT_HOME` or `~/.copilot`, from
    /// [`HookFiles::home_env`]).
    InuseHold,
}

/// A state source, best first in [`Profile::states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Hooks,
    Listing,
    Title,
    Screen,
    Activity,
}

/// Where a harness reports its own state, read as the `listing` source. The daemon picks its
/// reader from this, never from the harness's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ListingSource {
    None,
    /// A JSON status file per process, `HOME/<dir>/<pid>.json` (`status`, `waitingFor`,
    /// `sessionId`: Claude Code's `~/.claude/sessions`).
    StatusFile {
        dir: &'static str,
    },
    /// A shared app server that lists its sessions with their states over a Unix socket:
    /// `$<home_env>/<socket>`, the home defaulting to `HOME/<home_dir>` (Codex).
    AppServer(&'static AppServer),
    /// The harness's own HTTP server on a loopback port named on its command line; its event
    /// stream is read per agent (OpenCode).
    HttpServer(&'static HttpServer),
}

/// Where an app server listens ([`ListingSource::AppServer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AppServer {
    pub home_env: &'static str,
    pub home_dir: &'static str,
    /// The socket's path under the home.
    pub socket: &'static str,
}

/// What a command line says about the harness's own HTTP server ([`ListingSource::HttpServer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HttpServer {
    /// `--port P` / `--port=P`: no port (or 0) means no server volee can know.
    pub port_flag: &'static str,
    /// `--hostname H`: the server is read only when bound to loopback (or any address).
    pub hostname_flag: &'static str,
    /// The first prompt's flag, which a resumed session ignores: volee hands it over through
    /// the server instead.
    pub prompt_flag: &'static str,
    /// Flags that resume a session with a value (`-s ID`) …
    pub session_flags: &'static [&'static str],
    /// … and without one (`-c`).
    pub continue_flags: &'static [&'static str],
    /// Every flag that takes a value: its value is skipped when looking for another flag (a
    /// prompt may read `--port 1`).
    pub value_flags: &'static [&'static str],
    /// First arguments that make a process no agent (`serve`, `mcp …`).
    pub helper_subcommands: &'static [&'static str],
    /// An environment variable every child process of the harness carries: such a process is
    /// no agent of its own.
    pub child_marker_env: &'static str,
}

/// How text must be typed into the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InputRules {
    /// Deliver text as a bracketed paste (`paste-buffer -p`) rather than keystrokes.
    pub bracketed_paste: bool,
    /// Wait this long between the text and Enter (some TUIs drop an Enter that arrives with a paste).
    pub enter_delay_ms: u64,
    /// tmux key name that submits (`Enter`, never `C-m`).
    pub submit_key: &'static str,
    /// After the delay, also wait until the pane has printed nothing for this long (at most
    /// [`SUBMIT_SETTLE_MAX_MS`]) before submitting: a TUI that completes slash commands
    /// asynchronously takes Enter for its *highlighted* suggestion while its list is stale
    /// (Gemini CLI 0.61.0 ran `/clear` for a pasted `/quit`; docs/harnesses/gemini.md). 0: none.
    pub settle_ms: u64,
    /// tmux key that interrupts the current turn without ending the agent.
    pub interrupt_key: &'static str,
}

/// One harness.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub name: &'static str,
    pub display_name: &'static str,
    /// Program on PATH.
    pub program: &'static str,
    /// Where it comes from (npm package), for `launch` errors and `doctor`.
    pub package: Option<&'static str>,
    /// Measured versions; None for the generic profile.
    pub measured: Option<VersionRange>,
    // --- launch
    pub prompt: PromptStyle,
    pub session_id_flag: Option<&'static str>,
    pub name_flag: Option<&'static str>,
    pub model_flag: Option<&'static str>,
    pub worktree_flag: Option<&'static str>,
    /// Environment set at every launch (auto-updaters off).
    pub launch_env: &'static [(&'static str, &'static str)],
    pub instrumentation: Instrumentation,
    // --- resume
    /// Arguments after the program; `{id}` is replaced by the session id.
    pub resume: &'static [&'static str],
    // --- processes
    /// `/proc/PID/comm` or argv[0] basenames that identify it (also the script a node wrapper runs).
    pub process_names: &'static [&'static str],
    /// Substrings of a node/bun wrapper's script argument that identify it.
    pub process_scripts: &'static [&'static str],
    /// Substrings of an argument that mark a helper process, never an agent.
    pub process_helpers: &'static [&'static str],
    // --- session
    /// Where the session id comes from, best first.
    pub session_sources: &'static [&'static str],
    // --- states
    pub states: &'static [Source],
    /// Where it reports its own state ([`Source::Listing`]).
    pub listing: ListingSource,
    // --- history
    /// Where its past sessions are and how to read them (the session browser).
    pub history: History,
    // --- join
    /// Where its token usage is read (`usage: unknown` when nowhere).
    pub usage: UsageSource,
    /// How the harness gets volee's MCP server for one launch (in words).
    pub join: &'static str,
    /// … and as volee does it.
    pub join_via: JoinVia,
    /// How volee writes its hooks for it.
    pub hook_files: HookFiles,
    /// Where a running process's session id is published.
    pub session_file: Option<SessionFile>,
    /// A file it holds open that names its session.
    pub open_file: OpenFile,
    pub input: InputRules,
    /// What its hook events mean, first matching row first.
    #[serde(skip)]
    pub hooks: &'static [crate::hooks::HookRule],
    /// Its screen rules, compiled.
    #[serde(skip)]
    pub rules: &'static crate::rules::RuleSet,
}

/// Where a harness keeps its past sessions, and in which format: the session browser picks its
/// reader from [`History::kind`], never from the harness's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct History {
    pub kind: HistoryKind,
    /// Where the sessions are: the first of these variables that is set (and not empty), with
    /// the directory under it — `CODEX_HOME` then `sessions`, else `HOME` then `.codex/sessions`.
    /// Empty for a harness whose sessions lie in the projects (Aider): their roots are the
    /// project directories volee has seen.
    pub homes: &'static [(&'static str, &'static str)],
}

/// A format of past sessions (`volee_history` has a reader for each but `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryKind {
    /// Not read (yet): say so in the harness's page.
    None,
    /// `<slug>/<id>.jsonl`: one JSON event per line (`type` user/assistant with `message`,
    /// `sessionId`, `cwd`, `gitBranch`, `timestamp`; `custom-title`) — Claude Code.
    ClaudeJsonl,
    /// `YYYY/MM/DD/rollout-<time>-<id>.jsonl`: `session_meta`, `response_item`, `turn_context`,
    /// `event_msg` lines — Codex CLI.
    CodexRollout,
    /// `<slug>/chats/<id>.jsonl`: `type` user/assistant/tool_result with Gemini-style `parts`,
    /// `usageMetadata` — Qwen Code.
    QwenJsonl,
    /// `<project>/chats/session-<time>-<id8>.jsonl`: a header line (`sessionId`, `startTime`),
    /// messages by `id` (`type` user/gemini, `content`, `tokens`, `model`, `toolCalls`; one
    /// written again with the same id replaces it), `$set` records, `$rewindTo` (the messages
    /// from that id on are gone) — Gemini CLI.
    GeminiChats,
    /// `<id>/events.jsonl`: `session.start`, `user.message`, `assistant.message`,
    /// `tool.execution_start`, `session.usage_record` — Copilot CLI.
    CopilotEvents,
    /// `<cwd>/<id>/chat_history.jsonl` beside `summary.json` and `usage.json` — Grok Build.
    GrokChat,
    /// `opencode.db`: one SQLite database (WAL) of every session — tables `session`, `message`,
    /// `part` (JSON `data` columns), `project` — OpenCode 1.2 and later.
    OpencodeDb,
    /// `.aider.chat.history.md` in a project's git root, appended: `# aider chat started at`,
    /// `#### ` user lines, `> ` tool output, the rest the assistant's — Aider. No session id.
    AiderMarkdown,
    /// `<id>/transcript.jsonl` beside `meta.json`: volee's own agent's store (`volee-store`).
    VoleeStore,
}

/// Where a harness's token usage is read ([`Profile::usage`]): the daemon picks its reader from
/// this, never from the harness's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// Recorded nowhere volee can read here: `usage: unknown`, never 0 (Aider's history has
    /// rounded figures only; Amp and Cursor record none here).
    Unknown,
    /// Its own server's events ([`ListingSource::HttpServer`]): OpenCode's `session.updated`
    /// tokens and `step-finish` parts, as they come.
    Server,
    /// The session's own file, read by the reader of [`History::kind`] as it grows: a record
    /// per model response (Claude, Codex, Gemini, Qwen, Copilot), Grok's `usage.json` beside
    /// its chat, volee's `meta.json` at each checkpoint.
    SessionFile,
}

/// The longest a submit waits for the pane to settle ([`InputRules::settle_ms`]).
pub const SUBMIT_SETTLE_MAX_MS: u64 = 3000;

/// Every profile: the built-in ones (`profiles/NAME.toml`, embedded), overridden or added by
/// the user's (`$CONFIG/profiles`), the generic one last.
pub fn profiles() -> Vec<Profile> {
    crate::file::all().to_vec()
}

/// The profile called `name`.
pub fn profile(name: &str) -> Option<Profile> {
    get(name).cloned()
}

/// The profile called `name`, borrowed.
pub fn get(name: &str) -> Option<&'static Profile> {
    crate::file::all().iter().find(|p| p.name == name)
}

impl Profile {
    /// How to install the measured version: `npm install -g PKG@V`, or `pipx install PKG==V` for
    /// a package marked `(PyPI)`. None without a package or a measured version.
    pub fn install_hint(&self) -> Option<String> {
        let (pkg, range) = (self.package?, self.measured?);
        Some(match pkg.strip_suffix(" (PyPI)") {
            Some(py) => format!("pipx install {py}=={}", range.max),
            None => format!("npm install -g {pkg}@{}", range.max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_real_outputs() {
        assert_eq!(
            parse_version("2.1.332 (Claude Code)"),
            Some(vec![2, 1, 332])
        );
        assert_eq!(parse_version("codex-cli 0.171.0"), Some(vec![0, 171, 0]));
        assert_eq!(
            parse_version("grok 1.0.41 (4220f3b224a6)"),
            Some(vec![1, 0, 41])
        );
        assert_eq!(parse_version("no version here"), None);
        assert_eq!(
            version_line("\n  2.1.332 (Claude Code)  \nmore\n").as_deref(),
            Some("2.1.332 (Claude Code)")
        );
        // The first line decides: a banner without a number is no version.
        assert_eq!(version_line("Welcome!\n1.2.3\n"), None);
        assert_eq!(version_line(""), None);
    }

    #[test]
    fn install_hints_name_the_registry() {
        assert_eq!(
            profile("aider").and_then(|p| p.install_hint()).as_deref(),
            Some("pipx install aider-chat==0.86.2")
        );
        assert_eq!(
            profile("grok").and_then(|p| p.install_hint()).as_deref(),
            Some("npm install -g @xai-official/grok@1.0.41")
        );
        assert_eq!(profile("cursor").and_then(|p| p.install_hint()), None);
    }

    #[test]
    fn ranges_compare_numerically() {
        let r = VersionRange {
            min: "2.1.197",
            max: "2.1.332",
        };
        assert!(r.contains("2.1.332 (Claude Code)"));
        assert!(r.contains("2.1.200"));
        assert!(!r.contains("2.1.99"));
        assert!(!r.contains("2.2.0"));
        assert!(!r.contains("garbage"));
    }

    #[test]
    fn every_harness_has_a_profile_and_hooks_table() {
        for name in ["claude", "codex", "gemini", "qwen", "grok", "copilot"] {
            let p = profile(name).expect("profile");
            assert!(p.measured.is_some(), "{name}");
            assert!(!crate::hooks::hook_events(name).is_empty(), "{name}");
        }
        let v = profile("volee").expect("volee profile");
        assert!(v
            .measured
            .is_some_and(|r| r.contains(env!("CARGO_PKG_VERSION"))));
        assert_eq!(v.resume, ["agent", "--resume", "{id}"]);
        assert!(v.process_names.is_empty());
        assert!(!crate::hooks::hook_events("volee").is_empty());
        let oc = profile("opencode").expect("opencode profile");
        assert!(oc.measured.is_some_and(|r| r.contains("1.18.33")));
        assert_eq!(oc.instrumentation, Instrumentation::ServerPort("--port"));
        assert_eq!(oc.resume, ["-s", "{id}"]);
        assert_eq!(
            profile("generic").map(|p| p.input.interrupt_key),
            Some("C-c")
        );
    }
}
