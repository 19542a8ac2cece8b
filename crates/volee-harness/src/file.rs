//! The profile file: one TOML file per harness, the same format for the built-in profiles
//! (`profiles/NAME.toml`, embedded in the binary) and for a user's (`$CONFIG/profiles/NAME.toml`,
//! overriding a built-in one by name or adding a harness). docs/profiles.md documents it.
//!
//! What can only be code — a listing client, a hook-file writer, a history reader — is named by
//! kind from a closed list (`listing.kind`, `launch.instrumentation.kind`, `history.kind`,
//! `usage`), never by the harness's name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use volee_protocol::AgentState;

use crate::hooks::{HookMeaning, HookRule, WhenTest};
use crate::profile::{
    AppServer, History, HistoryKind, HookFiles, HookFormat, HttpServer, InputRules,
    Instrumentation, JoinVia, ListingSource, McpFormat, OpenFile, Profile, PromptStyle,
    SessionFile, Source, UsageSource, VersionRange,
};
use crate::rules::{RuleSet, RuleSpec};

/// One profile file as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// The harness's name (`volee launch --harness NAME`): lower-case letters, digits, `-`.
    pub name: String,
    pub display_name: String,
    /// The program on PATH (empty only for the generic profile).
    pub program: String,
    /// Where it comes from: an npm package, or `NAME (PyPI)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The versions it was measured on; absent: never measured (its screen rules still apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// Where its token usage is read: `unknown`, `session_file` (the reader of `history.kind`)
    /// or `server` (a `http_server` listing's events).
    #[serde(default = "unknown_usage")]
    pub usage: UsageSource,
    /// How it takes volee's MCP server for one launch (`volee launch --join`).
    #[serde(default)]
    pub join: JoinFile,
    #[serde(default)]
    pub launch: Launch,
    #[serde(default)]
    pub resume: Resume,
    #[serde(default)]
    pub process: Process,
    #[serde(default)]
    pub session: Session,
    #[serde(default)]
    pub states: States,
    #[serde(default)]
    pub history: HistoryFile,
    #[serde(default)]
    pub input: Input,
    /// What its hook events mean, first matching row wins (`[[hook]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook: Vec<Hook>,
    /// Its screen rules (`[[rule]]`, the format of `rules.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule: Vec<RuleSpec>,
}

fn unknown_usage() -> UsageSource {
    UsageSource::Unknown
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    pub min: String,
    pub max: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// How a first prompt is passed: `{ style = "positional" }`, `after_double_dash`,
    /// `{ style = "flag", flag = "-i" }`, `typed` (typed once the screen shows it idle),
    /// `unsupported`.
    pub prompt: PromptFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id_flag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_flag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_flag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_flag: Option<String>,
    /// Environment set at every launch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// How it gets volee's hooks for one launch: `{ kind = "none" }`, `settings_flag`,
    /// `system_defaults_env`, `config_overrides`, `own_hooks_file`, `user_opt_in`, `built_in`,
    /// `server_port` (with `name` where the kind needs one).
    #[serde(default = "no_instrumentation")]
    pub instrumentation: InstrumentationFile,
    /// How volee writes its hook registrations, and where.
    #[serde(default)]
    pub hooks: HookFilesFile,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookFilesFile {
    /// `nested`, `matcher_named`, `matcher_named_ms`, `flat_bash_v1`.
    #[serde(default = "nested")]
    pub format: HookFormat,
    /// volee's own hooks file's name (instrumentation `own_hooks_file`).
    #[serde(default = "hooks_file_name")]
    pub file: String,
    /// A variable naming the harness's whole home: volee's hooks file goes to `$VAR/hooks/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_env: Option<String>,
    /// The harness's own system-defaults file (instrumentation `system_defaults_env`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_defaults: Option<String>,
    /// It reads a system-defaults file only when root owns it: volee's hooks then go in as an
    /// extension of volee's own, in this directory under HOME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_dir: Option<String>,
}

impl Default for HookFilesFile {
    fn default() -> HookFilesFile {
        HookFilesFile {
            format: nested(),
            file: hooks_file_name(),
            home_env: None,
            system_defaults: None,
            extension_dir: None,
        }
    }
}

fn nested() -> HookFormat {
    HookFormat::Nested
}
fn hooks_file_name() -> String {
    "volee-hooks.json".into()
}

/// `[join]`: in words (`how`), and as a kind volee carries out.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinFile {
    #[serde(default)]
    pub how: String,
    /// `file_arg`, `inline_arg`, `config_overrides`, `env_json`, `system_defaults`, `none`.
    #[serde(default = "no_join")]
    pub kind: JoinKind,
    /// `file_arg`, `inline_arg`: the arguments (`{file}`, `{json}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// `file_arg`: the file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `env_json`: the variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub var: Option<String>,
    /// The JSON: `mcp_servers`, `mcp_servers_local`, `mcp_servers_plain`, `bare`,
    /// `mcp_local_command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<McpFormat>,
    /// `none`: why (said by `launch --join`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Default for JoinFile {
    fn default() -> JoinFile {
        JoinFile {
            how: String::new(),
            kind: no_join(),
            args: Vec::new(),
            file: None,
            var: None,
            format: None,
            why: None,
        }
    }
}

fn no_join() -> JoinKind {
    JoinKind::None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinKind {
    FileArg,
    InlineArg,
    ConfigOverrides,
    EnvJson,
    SystemDefaults,
    None,
}

impl Default for Launch {
    fn default() -> Launch {
        Launch {
            prompt: PromptFile {
                style: PromptKind::Positional,
                flag: None,
            },
            session_id_flag: None,
            name_flag: None,
            model_flag: None,
            worktree_flag: None,
            env: BTreeMap::new(),
            instrumentation: no_instrumentation(),
            hooks: HookFilesFile::default(),
        }
    }
}

fn no_instrumentation() -> InstrumentationFile {
    InstrumentationFile {
        kind: InstrumentationKind::None,
        name: None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptFile {
    pub style: PromptKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flag: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptKind {
    AfterDoubleDash,
    Positional,
    Flag,
    Typed,
    Unsupported,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentationFile {
    pub kind: InstrumentationKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstrumentationKind {
    SettingsFlag,
    SystemDefaultsEnv,
    ConfigOverrides,
    OwnHooksFile,
    UserOptIn,
    BuiltIn,
    None,
    ServerPort,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resume {
    /// Arguments after the program; `{id}` is the session id. Empty: it cannot be resumed.
    #[serde(default)]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// `/proc/PID/comm` or argv[0] basenames that identify it.
    #[serde(default)]
    pub names: Vec<String>,
    /// Substrings of a node/bun wrapper's script argument that identify it.
    #[serde(default)]
    pub scripts: Vec<String>,
    /// Substrings of an argument that mark a helper process, never an agent.
    #[serde(default)]
    pub helpers: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Where its session id comes from, best first (descriptions).
    #[serde(default)]
    pub sources: Vec<String>,
    /// Where a running process's session id is published, under HOME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<SessionFileFile>,
    /// A file it holds open whose path names its session: `none`, `rollout_uuid`, `inuse_hold`.
    #[serde(default = "no_open_file")]
    pub open_file: OpenFile,
}

fn no_open_file() -> OpenFile {
    OpenFile::None
}

impl Default for Session {
    fn default() -> Session {
        Session {
            sources: Vec::new(),
            file: None,
            open_file: OpenFile::None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionFileFile {
    /// Relative to HOME; `{pid}` is the process's pid.
    pub path: String,
    pub id_field: String,
    /// The file is a list: the entry whose field of this name is the pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_field: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct States {
    /// State sources, best first: `hooks`, `listing`, `title`, `screen`, `activity`.
    pub sources: Vec<Source>,
    #[serde(default = "no_listing")]
    pub listing: ListingFile,
}

impl Default for States {
    fn default() -> States {
        States {
            sources: vec![Source::Screen, Source::Activity],
            listing: no_listing(),
        }
    }
}

fn no_listing() -> ListingFile {
    ListingFile::None
}

/// Where it reports its own state: a kind volee has a reader for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum ListingFile {
    None,
    StatusFile {
        dir: String,
    },
    AppServer {
        home_env: String,
        home_dir: String,
        socket: String,
    },
    HttpServer {
        port_flag: String,
        hostname_flag: String,
        prompt_flag: String,
        #[serde(default)]
        session_flags: Vec<String>,
        #[serde(default)]
        continue_flags: Vec<String>,
        #[serde(default)]
        value_flags: Vec<String>,
        #[serde(default)]
        helper_subcommands: Vec<String>,
        child_marker_env: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryFile {
    /// Its past sessions' format: `none`, `claude_jsonl`, `codex_rollout`, `qwen_jsonl`,
    /// `gemini_chats`, `copilot_events`, `grok_chat`, `opencode_db`, `aider_markdown`,
    /// `volee_store`.
    pub kind: HistoryKind,
    /// Where they are: `[VARIABLE, "dir under it"]`, the first variable set wins.
    #[serde(default)]
    pub homes: Vec<[String; 2]>,
}

impl Default for HistoryFile {
    fn default() -> HistoryFile {
        HistoryFile {
            kind: HistoryKind::None,
            homes: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[serde(default = "yes")]
    pub bracketed_paste: bool,
    #[serde(default = "enter_delay")]
    pub enter_delay_ms: u64,
    #[serde(default = "enter")]
    pub submit_key: String,
    #[serde(default)]
    pub settle_ms: u64,
    #[serde(default = "escape")]
    pub interrupt_key: String,
}

impl Default for Input {
    fn default() -> Input {
        Input {
            bracketed_paste: yes(),
            enter_delay_ms: enter_delay(),
            submit_key: enter(),
            settle_ms: 0,
            interrupt_key: escape(),
        }
    }
}

fn yes() -> bool {
    true
}
fn enter_delay() -> u64 {
    150
}
fn enter() -> String {
    "Enter".into()
}
fn escape() -> String {
    "Escape".into()
}

/// One hook row: an event, optionally only when a payload field has a value, and what it means.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// `working`, `needs_you`, `idle`, `failed`, or `evidence` (identity only; the exit status
    /// decides done or failed).
    pub state: HookState,
    /// Why the state (`needs_you`: permission, question, login; `failed`: api_error, auth,
    /// usage_limit, network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<volee_protocol::Reason>,
    /// The event ends the session: a process that dies after it did not die silently.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ends_session: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    pub field: String,
    /// The field has exactly this value …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// … or a value this pattern (Rust `regex`) matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookState {
    Working,
    NeedsYou,
    Idle,
    Failed,
    Evidence,
}

/// A profile file volee could not use, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file (or `built-in NAME`).
    pub origin: String,
    /// 1-based, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.origin, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

/// The placeholders a template may use.
const PLACEHOLDERS: &[&str] = &["{id}"];

/// The 1-based line of the first occurrence of `needle` in `text` at or after line `from`.
fn line_of(text: &str, needle: &str, from: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
}

/// Parse and check a profile file: every problem with its line.
pub fn parse(text: &str, origin: &str) -> Result<Profile, Vec<Problem>> {
    let problem = |line: Option<usize>, message: String| Problem {
        origin: origin.into(),
        line,
        message,
    };
    let file: ProfileFile = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        vec![problem(line, e.message().trim().to_string())]
    })?;
    let mut problems = Vec::new();
    let name_ok = !file.name.is_empty()
        && file.name.len() <= 40
        && file
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !name_ok {
        problems.push(problem(
            line_of(text, "name", 1),
            format!(
                "name {:?}: lower-case letters, digits and '-', at most 40",
                file.name
            ),
        ));
    }
    if file.program.is_empty() && file.name != "generic" {
        problems.push(problem(
            line_of(text, "program", 1),
            "program is empty".into(),
        ));
    }
    for arg in &file.resume.args {
        let mut rest = arg.as_str();
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map(|c| open + c + 1);
            let Some(close) = close else {
                problems.push(problem(
                    line_of(text, arg, 1),
                    format!("resume argument {arg:?}: an unclosed '{{'"),
                ));
                break;
            };
            let field = &rest[open..close];
            if !PLACEHOLDERS.contains(&field) {
                problems.push(problem(
                    line_of(text, arg, 1),
                    format!(
                        "resume argument {arg:?} uses {field}, which is not a field (known: {})",
                        PLACEHOLDERS.join(", ")
                    ),
                ));
            }
            rest = &rest[close..];
        }
    }
    let needs_name = |kind: InstrumentationKind| {
        matches!(
            kind,
            InstrumentationKind::SettingsFlag
                | InstrumentationKind::SystemDefaultsEnv
                | InstrumentationKind::OwnHooksFile
                | InstrumentationKind::UserOptIn
                | InstrumentationKind::ServerPort
        )
    };
    let inst = &file.launch.instrumentation;
    if needs_name(inst.kind) != inst.name.is_some() {
        problems.push(problem(
            line_of(text, "instrumentation", 1),
            format!(
                "instrumentation {:?} {} a name",
                inst.kind,
                if needs_name(inst.kind) {
                    "needs"
                } else {
                    "takes no"
                }
            ),
        ));
    }
    match (&file.launch.prompt.style, &file.launch.prompt.flag) {
        (PromptKind::Flag, None) => problems.push(problem(
            line_of(text, "prompt", 1),
            "prompt style \"flag\" needs a flag".into(),
        )),
        (s, Some(_)) if *s != PromptKind::Flag => problems.push(problem(
            line_of(text, "prompt", 1),
            format!("prompt style {s:?} takes no flag"),
        )),
        _ => {}
    }
    if file.usage == UsageSource::Server
        && !matches!(file.states.listing, ListingFile::HttpServer { .. })
    {
        problems.push(problem(
            line_of(text, "usage", 1),
            "usage \"server\" needs a listing of kind \"http_server\"".into(),
        ));
    }
    if file.usage == UsageSource::SessionFile && file.history.kind == HistoryKind::None {
        problems.push(problem(
            line_of(text, "usage", 1),
            "usage \"session_file\" needs a history kind to read it with".into(),
        ));
    }
    if file.states.sources.is_empty() {
        problems.push(problem(
            line_of(text, "[states]", 1),
            "states.sources is empty: nothing would tell its state".into(),
        ));
    }
    if !file.states.sources.contains(&Source::Hooks) && !file.hook.is_empty() {
        problems.push(problem(
            line_of(text, "[[hook]]", 1),
            "[[hook]] rows, but \"hooks\" is not among states.sources".into(),
        ));
    }
    if let Some(m) = &file.measured {
        for v in [&m.min, &m.max] {
            if crate::profile::parse_version(v).is_none() {
                problems.push(problem(
                    line_of(text, "measured", 1),
                    format!("measured version {v:?} is no dotted version number"),
                ));
            }
        }
    }
    for key in [&file.input.submit_key, &file.input.interrupt_key] {
        if !tmux_key_ok(key) {
            problems.push(problem(
                line_of(text, key, 1),
                format!("{key:?} is not a tmux key name volee sends (Enter, Escape, C-c, …)"),
            ));
        }
    }
    for h in &file.hook {
        if let Some(w) = &h.when {
            let at = line_of(text, &format!("\"{}\"", w.field), 1);
            match (&w.value, &w.matches) {
                (Some(_), None) => {}
                (None, Some(m)) => {
                    if let Err(e) = regex::Regex::new(m) {
                        problems.push(problem(
                            at,
                            format!("hook {}: when.matches does not compile: {e}", h.event),
                        ));
                    }
                }
                _ => problems.push(problem(
                    at,
                    format!(
                        "hook {}: when needs value or matches (one of them)",
                        h.event
                    ),
                )),
            }
        }
        let state = match h.state {
            HookState::NeedsYou => Some(AgentState::NeedsYou),
            HookState::Failed => Some(AgentState::Failed),
            _ => None,
        };
        if let Some(r) = h.reason.filter(|r| Some(r.state()) != state) {
            problems.push(problem(
                line_of(text, &format!("\"{}\"", h.event), 1),
                format!(
                    "hook {}: reason {r} is not one for state {:?}",
                    h.event, h.state
                ),
            ));
        }
    }
    let j = &file.join;
    let join_problem = match j.kind {
        JoinKind::FileArg if j.file.is_none() || j.format.is_none() || j.args.is_empty() => {
            Some("join kind \"file_arg\" needs args, file and format")
        }
        JoinKind::FileArg if !j.args.iter().any(|a| a.contains("{file}")) => {
            Some("join kind \"file_arg\": no argument holds {file}")
        }
        JoinKind::InlineArg
            if !j.args.iter().any(|a| a.contains("{json}")) || j.format.is_none() =>
        {
            Some("join kind \"inline_arg\" needs args holding {json}, and a format")
        }
        JoinKind::EnvJson if j.var.is_none() || j.format.is_none() => {
            Some("join kind \"env_json\" needs var and format")
        }
        JoinKind::SystemDefaults if j.format.is_none() => {
            Some("join kind \"system_defaults\" needs a format")
        }
        _ => None,
    };
    if let Some(message) = join_problem {
        problems.push(problem(line_of(text, "[join]", 1), message.into()));
    }
    if let Some(f) = &file.session.file {
        let rest = f.path.replace("{pid}", "");
        if rest.contains('{') || f.path.starts_with('/') || f.path.split('/').any(|c| c == "..") {
            problems.push(problem(
                line_of(text, &f.path, 1),
                format!(
                    "session file {:?}: a path under HOME, with {{pid}} as its only field",
                    f.path
                ),
            ));
        }
    }
    // The screen rules: each compiled, problems with the line of the rule's id.
    let rules = match RuleSet::from_specs(file.rule.clone(), origin) {
        Ok(r) => Some(r),
        Err(e) => {
            let line = e.rule_id().and_then(|id| {
                let first = line_of(text, &format!("\"{id}\""), 1)?;
                // A duplicate: the second one.
                Some(line_of(text, &format!("\"{id}\""), first + 1).unwrap_or(first))
            });
            let line = match &e {
                crate::rules::RulesError::DuplicateId { .. } => line,
                _ => e
                    .rule_id()
                    .and_then(|id| line_of(text, &format!("\"{id}\""), 1)),
            };
            problems.push(problem(line, volee_os::error::chain(&e)));
            None
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(into_profile(file, rules.unwrap_or_default()))
}

/// Key names volee may send with `send-keys`: a named key or a control/meta chord of one
/// character.
fn tmux_key_ok(key: &str) -> bool {
    const NAMED: &[&str] = &[
        "Enter", "Escape", "Tab", "BSpace", "Space", "Up", "Down", "Left", "Right",
    ];
    NAMED.contains(&key)
        || key
            .strip_prefix("C-")
            .or_else(|| key.strip_prefix("M-"))
            .is_some_and(|c| c.chars().count() == 1 && c.chars().all(|c| c.is_ascii_graphic()))
}

/// A string for the process's lifetime: profiles are read once and never freed.
fn keep(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn keep_all(v: Vec<String>) -> &'static [&'static str] {
    Box::leak(
        v.into_iter()
            .map(keep)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

fn join_via(j: JoinFile) -> JoinVia {
    let format = j.format.unwrap_or(McpFormat::McpServers);
    match j.kind {
        JoinKind::FileArg => JoinVia::FileArg {
            args: keep_all(j.args),
            file: keep(j.file.unwrap_or_default()),
            format,
        },
        JoinKind::InlineArg => JoinVia::InlineArg {
            args: keep_all(j.args),
            format,
        },
        JoinKind::ConfigOverrides => JoinVia::ConfigOverrides,
        JoinKind::EnvJson => JoinVia::EnvJson {
            var: keep(j.var.unwrap_or_default()),
            format,
        },
        JoinKind::SystemDefaults => JoinVia::SystemDefaults { format },
        JoinKind::None => JoinVia::None {
            why: keep(j.why.unwrap_or_else(|| "it has no MCP support".into())),
        },
    }
}

fn into_profile(f: ProfileFile, rules: RuleSet) -> Profile {
    let opt = |s: Option<String>| s.map(keep);
    let name_of = |i: &InstrumentationFile| keep(i.name.clone().unwrap_or_default());
    let instrumentation = match f.launch.instrumentation.kind {
        InstrumentationKind::SettingsFlag => {
            Instrumentation::SettingsFlag(name_of(&f.launch.instrumentation))
        }
        InstrumentationKind::SystemDefaultsEnv => {
            Instrumentation::SystemDefaultsEnv(name_of(&f.launch.instrumentation))
        }
        InstrumentationKind::ConfigOverrides => Instrumentation::ConfigOverrides,
        InstrumentationKind::OwnHooksFile => {
            Instrumentation::OwnHooksFile(name_of(&f.launch.instrumentation))
        }
        InstrumentationKind::UserOptIn => {
            Instrumentation::UserOptIn(name_of(&f.launch.instrumentation))
        }
        InstrumentationKind::BuiltIn => Instrumentation::BuiltIn,
        InstrumentationKind::None => Instrumentation::None,
        InstrumentationKind::ServerPort => {
            Instrumentation::ServerPort(name_of(&f.launch.instrumentation))
        }
    };
    let prompt = match (f.launch.prompt.style, f.launch.prompt.flag) {
        (PromptKind::AfterDoubleDash, _) => PromptStyle::AfterDoubleDash,
        (PromptKind::Positional, _) => PromptStyle::Positional,
        (PromptKind::Flag, flag) => PromptStyle::Flag(keep(flag.unwrap_or_default())),
        (PromptKind::Typed, _) => PromptStyle::Typed,
        (PromptKind::Unsupported, _) => PromptStyle::Unsupported,
    };
    let listing = match f.states.listing {
        ListingFile::None => ListingSource::None,
        ListingFile::StatusFile { dir } => ListingSource::StatusFile { dir: keep(dir) },
        ListingFile::AppServer {
            home_env,
            home_dir,
            socket,
        } => ListingSource::AppServer(Box::leak(Box::new(AppServer {
            home_env: keep(home_env),
            home_dir: keep(home_dir),
            socket: keep(socket),
        }))),
        ListingFile::HttpServer {
            port_flag,
            hostname_flag,
            prompt_flag,
            session_flags,
            continue_flags,
            value_flags,
            helper_subcommands,
            child_marker_env,
        } => ListingSource::HttpServer(Box::leak(Box::new(HttpServer {
            port_flag: keep(port_flag),
            hostname_flag: keep(hostname_flag),
            prompt_flag: keep(prompt_flag),
            session_flags: keep_all(session_flags),
            continue_flags: keep_all(continue_flags),
            value_flags: keep_all(value_flags),
            helper_subcommands: keep_all(helper_subcommands),
            child_marker_env: keep(child_marker_env),
        }))),
    };
    // A profile that ships with volee (its own agent) was measured on this very version.
    let measured = match (&f.measured, instrumentation) {
        (None, Instrumentation::BuiltIn) => Some(VersionRange {
            min: env!("CARGO_PKG_VERSION"),
            max: env!("CARGO_PKG_VERSION"),
        }),
        (m, _) => m.clone().map(|m| VersionRange {
            min: keep(m.min),
            max: keep(m.max),
        }),
    };
    let hooks: Vec<HookRule> = f
        .hook
        .into_iter()
        .map(|h| HookRule {
            event: keep(h.event),
            when: h.when.map(|w| {
                let test = match (w.value, w.matches) {
                    (Some(v), _) => WhenTest::Equals(keep(v)),
                    // Checked by `parse`: it compiles.
                    (None, Some(m)) => match regex::Regex::new(&m) {
                        Ok(re) => WhenTest::Matches(Box::leak(Box::new(re))),
                        Err(_) => WhenTest::Equals(keep(m)),
                    },
                    (None, None) => WhenTest::Equals(""),
                };
                (keep(w.field), test)
            }),
            reason: h.reason,
            ends_session: h.ends_session,
            meaning: match h.state {
                HookState::Working => HookMeaning::State(AgentState::Working),
                HookState::NeedsYou => HookMeaning::State(AgentState::NeedsYou),
                HookState::Idle => HookMeaning::State(AgentState::Idle),
                HookState::Failed => HookMeaning::State(AgentState::Failed),
                HookState::Evidence => HookMeaning::Evidence,
            },
        })
        .collect();
    Profile {
        name: keep(f.name),
        display_name: keep(f.display_name),
        program: keep(f.program),
        package: opt(f.package),
        measured,
        prompt,
        session_id_flag: opt(f.launch.session_id_flag),
        name_flag: opt(f.launch.name_flag),
        model_flag: opt(f.launch.model_flag),
        worktree_flag: opt(f.launch.worktree_flag),
        launch_env: Box::leak(
            f.launch
                .env
                .into_iter()
                .map(|(k, v)| (keep(k), keep(v)))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        ),
        instrumentation,
        resume: keep_all(f.resume.args),
        process_names: keep_all(f.process.names),
        process_scripts: keep_all(f.process.scripts),
        process_helpers: keep_all(f.process.helpers),
        session_sources: keep_all(f.session.sources),
        states: Box::leak(f.states.sources.into_boxed_slice()),
        listing,
        history: History {
            kind: f.history.kind,
            homes: Box::leak(
                f.history
                    .homes
                    .into_iter()
                    .map(|[var, dir]| (keep(var), keep(dir)))
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            ),
        },
        usage: f.usage,
        join: keep(f.join.how.clone()),
        join_via: join_via(f.join),
        hook_files: HookFiles {
            format: f.launch.hooks.format,
            file: keep(f.launch.hooks.file),
            home_env: f.launch.hooks.home_env.map(keep),
            system_defaults: f.launch.hooks.system_defaults.map(keep),
            extension_dir: f.launch.hooks.extension_dir.map(keep),
        },
        session_file: f.session.file.map(|s| SessionFile {
            path: keep(s.path),
            id_field: keep(s.id_field),
            pid_field: s.pid_field.map(keep),
        }),
        open_file: f.session.open_file,
        input: InputRules {
            bracketed_paste: f.input.bracketed_paste,
            enter_delay_ms: f.input.enter_delay_ms,
            submit_key: keep(f.input.submit_key),
            settle_ms: f.input.settle_ms,
            interrupt_key: keep(f.input.interrupt_key),
        },
        hooks: Box::leak(hooks.into_boxed_slice()),
        rules: Box::leak(Box::new(rules)),
    }
}

/// A profile as a file says it (`volee profiles show NAME --toml`).
pub fn to_file(p: &Profile) -> ProfileFile {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let (kind, name) = match p.instrumentation {
        Instrumentation::SettingsFlag(n) => (InstrumentationKind::SettingsFlag, Some(n)),
        Instrumentation::SystemDefaultsEnv(n) => (InstrumentationKind::SystemDefaultsEnv, Some(n)),
        Instrumentation::ConfigOverrides => (InstrumentationKind::ConfigOverrides, None),
        Instrumentation::OwnHooksFile(n) => (InstrumentationKind::OwnHooksFile, Some(n)),
        Instrumentation::UserOptIn(n) => (InstrumentationKind::UserOptIn, Some(n)),
        Instrumentation::BuiltIn => (InstrumentationKind::BuiltIn, None),
        Instrumentation::None => (InstrumentationKind::None, None),
        Instrumentation::ServerPort(n) => (InstrumentationKind::ServerPort, Some(n)),
    };
    let (style, flag) = match p.prompt {
        PromptStyle::AfterDoubleDash => (PromptKind::AfterDoubleDash, None),
        PromptStyle::Positional => (PromptKind::Positional, None),
        PromptStyle::Flag(f) => (PromptKind::Flag, Some(f.to_string())),
        PromptStyle::Typed => (PromptKind::Typed, None),
        PromptStyle::Unsupported => (PromptKind::Unsupported, None),
    };
    let listing = match p.listing {
        ListingSource::None => ListingFile::None,
        ListingSource::StatusFile { dir } => ListingFile::StatusFile { dir: dir.into() },
        ListingSource::AppServer(a) => ListingFile::AppServer {
            home_env: a.home_env.into(),
            home_dir: a.home_dir.into(),
            socket: a.socket.into(),
        },
        ListingSource::HttpServer(h) => ListingFile::HttpServer {
            port_flag: h.port_flag.into(),
            hostname_flag: h.hostname_flag.into(),
            prompt_flag: h.prompt_flag.into(),
            session_flags: s(h.session_flags),
            continue_flags: s(h.continue_flags),
            value_flags: s(h.value_flags),
            helper_subcommands: s(h.helper_subcommands),
            child_marker_env: h.child_marker_env.into(),
        },
    };
    ProfileFile {
        name: p.name.into(),
        display_name: p.display_name.into(),
        program: p.program.into(),
        package: p.package.map(Into::into),
        measured: match (p.measured, p.instrumentation) {
            // Implied by `built_in`.
            (_, Instrumentation::BuiltIn) => None,
            (m, _) => m.map(|m| Measured {
                min: m.min.into(),
                max: m.max.into(),
            }),
        },
        usage: p.usage,
        join: join_file(p),
        launch: Launch {
            prompt: PromptFile { style, flag },
            session_id_flag: p.session_id_flag.map(Into::into),
            name_flag: p.name_flag.map(Into::into),
            model_flag: p.model_flag.map(Into::into),
            worktree_flag: p.worktree_flag.map(Into::into),
            env: p
                .launch_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            instrumentation: InstrumentationFile {
                kind,
                name: name.map(Into::into),
            },
            hooks: HookFilesFile {
                format: p.hook_files.format,
                file: p.hook_files.file.into(),
                home_env: p.hook_files.home_env.map(Into::into),
                system_defaults: p.hook_files.system_defaults.map(Into::into),
                extension_dir: p.hook_files.extension_dir.map(Into::into),
            },
        },
        resume: Resume { args: s(p.resume) },
        process: Process {
            names: s(p.process_names),
            scripts: s(p.process_scripts),
            helpers: s(p.process_helpers),
        },
        session: Session {
            sources: s(p.session_sources),
            file: p.session_file.map(|f| SessionFileFile {
                path: f.path.into(),
                id_field: f.id_field.into(),
                pid_field: f.pid_field.map(Into::into),
            }),
            open_file: p.open_file,
        },
        states: States {
            sources: p.states.to_vec(),
            listing,
        },
        history: HistoryFile {
            kind: p.history.kind,
            homes: p
                .history
                .homes
                .iter()
                .map(|(v, d)| [v.to_string(), d.to_string()])
                .collect(),
        },
        input: Input {
            bracketed_paste: p.input.bracketed_paste,
            enter_delay_ms: p.input.enter_delay_ms,
            submit_key: p.input.submit_key.into(),
            settle_ms: p.input.settle_ms,
            interrupt_key: p.input.interrupt_key.into(),
        },
        hook: p
            .hooks
            .iter()
            .map(|h| Hook {
                event: h.event.into(),
                when: h.when.map(|(f, test)| When {
                    field: f.into(),
                    value: match test {
                        WhenTest::Equals(v) => Some(v.into()),
                        WhenTest::Matches(_) => None,
                    },
                    matches: match test {
                        WhenTest::Matches(re) => Some(re.as_str().into()),
                        WhenTest::Equals(_) => None,
                    },
                }),
                reason: h.reason,
                ends_session: h.ends_session,
                state: match h.meaning {
                    HookMeaning::State(AgentState::Working) => HookState::Working,
                    HookMeaning::State(AgentState::NeedsYou) => HookState::NeedsYou,
                    HookMeaning::State(AgentState::Idle) => HookState::Idle,
                    HookMeaning::State(_) => HookState::Failed,
                    HookMeaning::Evidence => HookState::Evidence,
                },
            })
            .collect(),
        rule: p.rules.specs(),
    }
}

fn join_file(p: &Profile) -> JoinFile {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut j = JoinFile {
        how: p.join.into(),
        ..JoinFile::default()
    };
    match p.join_via {
        JoinVia::FileArg { args, file, format } => {
            j.kind = JoinKind::FileArg;
            j.args = s(args);
            j.file = Some(file.into());
            j.format = Some(format);
        }
        JoinVia::InlineArg { args, format } => {
            j.kind = JoinKind::InlineArg;
            j.args = s(args);
            j.format = Some(format);
        }
        JoinVia::ConfigOverrides => j.kind = JoinKind::ConfigOverrides,
        JoinVia::EnvJson { var, format } => {
            j.kind = JoinKind::EnvJson;
            j.var = Some(var.into());
            j.format = Some(format);
        }
        JoinVia::SystemDefaults { format } => {
            j.kind = JoinKind::SystemDefaults;
            j.format = Some(format);
        }
        JoinVia::None { why } => {
            j.kind = JoinKind::None;
            j.why = Some(why.into());
        }
    }
    j
}

/// The effective profile as TOML.
pub fn to_toml(p: &Profile) -> String {
    toml::to_string(&to_file(p)).unwrap_or_default()
}

// `BUILT_IN`: the built-in profile files, embedded (every `profiles/*.toml` in name order, the
// generic one last; build.rs lists them).
include!(concat!(env!("OUT_DIR"), "/built_in.rs"));

/// The built-in profile file of `harness` (its TOML text), None when volee has none.
pub fn built_in_text(harness: &str) -> Option<&'static str> {
    let line = format!("\nname = \"{harness}\"\n");
    BUILT_IN.iter().copied().find(|text| text.contains(&line))
}

/// The user's profiles directory, set once by the program (`$CONFIG/profiles`).
static USER_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Every profile volee uses: built-in, overridden or added by the user's, generic last.
struct Loaded {
    profiles: Vec<Profile>,
    /// User files skipped, with why.
    problems: Vec<Problem>,
    /// User files in use: (name, path, overrides a built-in).
    user: Vec<(String, PathBuf, bool)>,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();

/// Use the profiles in `dir` (`$CONFIG/profiles`) besides the built-in ones. Call before the
/// first use of a profile; a later call changes nothing.
pub fn use_profiles_dir(dir: PathBuf) {
    let _ = USER_DIR.set(dir);
}

fn loaded() -> &'static Loaded {
    LOADED.get_or_init(|| {
        let mut profiles: Vec<Profile> = BUILT_IN
            .iter()
            .map(|text| {
                parse(text, "a built-in profile").unwrap_or_else(|p| {
                    // Checked by the tests: a built-in profile always parses.
                    panic!("a built-in profile: {p:?}")
                })
            })
            .collect();
        let (mut problems, mut user) = (Vec::new(), Vec::new());
        if let Some(dir) = USER_DIR.get() {
            for (path, result) in read_dir(dir) {
                match result {
                    Ok(p) => {
                        let overrides = profiles.iter().position(|b| b.name == p.name);
                        user.push((p.name.to_string(), path, overrides.is_some()));
                        match overrides {
                            Some(i) => profiles[i] = p,
                            // Before the generic profile, which stays last.
                            None => {
                                let at = profiles.len().saturating_sub(1);
                                profiles.insert(at, p);
                            }
                        }
                    }
                    Err(p) => problems.extend(p),
                }
            }
        }
        Loaded {
            profiles,
            problems,
            user,
        }
    })
}

/// The user profile files of `dir`, each parsed: `NAME.toml` must say `name = "NAME"`; only
/// regular files of the user's own, not writable by others, are read.
pub fn read_dir(dir: &Path) -> Vec<(PathBuf, Result<Profile, Vec<Problem>>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let result = read_file(&path);
            (path, result)
        })
        .collect()
}

/// Read one user profile file, with the checks of [`read_dir`].
pub fn read_file(path: &Path) -> Result<Profile, Vec<Problem>> {
    let origin = path.display().to_string();
    let refuse = |message: String| {
        vec![Problem {
            origin: origin.clone(),
            line: None,
            message,
        }]
    };
    let text = own_file_text(path).map_err(refuse)?;
    let profile = parse(&text, &origin)?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if stem != profile.name {
        return Err(vec![Problem {
            origin,
            line: line_of(&text, "name", 1),
            message: format!(
                "the file is {stem}.toml but says name = {:?}: name a profile file after its harness",
                profile.name
            ),
        }]);
    }
    Ok(profile)
}

/// A profile file's text: a regular file (no symlink, FIFO or device) of the user's own, not
/// writable by others, at most 1 MiB.
fn own_file_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file (a symlink, FIFO or directory is not read)".into());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file: not read".into());
    }
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err("owned by another user: not read".into());
    }
    if meta.mode() & 0o022 != 0 {
        return Err("writable by others (chmod go-w it): not read".into());
    }
    if meta.len() > 1 << 20 {
        return Err("larger than 1 MiB: not read".into());
    }
    let mut text = String::new();
    file.take(1 << 20)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read it as UTF-8 text: {e}"))?;
    Ok(text)
}

/// The payload fields the `[[hook]]` rows of `harness`'s profile read (`when.field`), found
/// without loading every profile: only that harness's file (the user's, else the built-in one) is
/// read, as plain TOML.
pub fn hook_when_fields(harness: &str) -> Vec<String> {
    let user = USER_DIR
        .get()
        .map(|d| d.join(format!("{harness}.toml")))
        .and_then(|p| own_file_text(&p).ok());
    let Some(text) = user.or_else(|| built_in_text(harness).map(str::to_string)) else {
        return Vec::new();
    };
    let Ok(table) = toml::from_str::<toml::Table>(&text) else {
        return Vec::new();
    };
    let mut fields: Vec<String> = table
        .get("hook")
        .and_then(|h| h.as_array())
        .into_iter()
        .flatten()
        .filter_map(|row| row.get("when")?.get("field")?.as_str())
        .map(String::from)
        .collect();
    fields.sort();
    fields.dedup();
    fields
}

/// Every profile, the generic one last.
pub fn all() -> &'static [Profile] {
    &loaded().profiles
}

/// User profile files skipped, with why (`volee doctor`, the daemon's log).
pub fn problems() -> &'static [Problem] {
    &loaded().problems
}

/// User profile files in use: (harness, file, whether it overrides a built-in profile).
pub fn user_files() -> &'static [(String, PathBuf, bool)] {
    &loaded().user
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses_and_reads_back_from_its_toml() {
        for text in BUILT_IN {
            let p = parse(text, "built-in").unwrap_or_else(|e| panic!("{e:?}"));
            let name = p.name;
            assert_eq!(built_in_text(name), Some(*text));
            // What `profiles show NAME --toml` prints is a profile file that means the same.
            let again = parse(&to_toml(&p), name).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            assert_eq!(
                serde_json::to_value(&p).unwrap(),
                serde_json::to_value(&again).unwrap(),
                "{name}"
            );
            assert_eq!(p.hooks, again.hooks, "{name}");
            assert_eq!(
                serde_json::to_value(p.rules.specs()).unwrap(),
                serde_json::to_value(again.rules.specs()).unwrap(),
                "{name}"
            );
        }
        assert_eq!(all().last().map(|p| p.name), Some("generic"));
    }

    const MINIMAL: &str = r#"name = "shout"
display_name = "Shout"
program = "shout"
measured = { min = "1.0.0", max = "1.0.0" }

[launch]
prompt = { style = "positional" }

[resume]
args = ["--resume", "{id}"]

[states]
sources = ["screen", "activity"]

[[rule]]
id = "shout.ask"
region = "last_line"
match = '''^Continue\? \[y/n\]$'''
state = "needs_you"
priority = 100
"#;

    #[test]
    fn a_minimal_profile_takes_the_defaults() {
        let p = parse(MINIMAL, "shout.toml").unwrap();
        assert_eq!(p.name, "shout");
        assert_eq!(p.usage, UsageSource::Unknown);
        assert_eq!(p.input.submit_key, "Enter");
        assert_eq!(p.input.interrupt_key, "Escape");
        assert_eq!(p.instrumentation, Instrumentation::None);
        assert_eq!(p.resume, ["--resume", "{id}"]);
        let m = p.rules.classify("working…\nContinue? [y/n]\n", "").unwrap();
        assert_eq!(
            (m.rule.as_str(), m.state),
            ("shout.ask", AgentState::NeedsYou)
        );
    }

    /// Twenty broken files, each refused with the line of its problem.
    #[test]
    fn broken_profiles_are_refused_with_their_line() {
        let with = |old: &str, new: &str| {
            assert!(MINIMAL.contains(old), "{old}");
            MINIMAL.replacen(old, new, 1)
        };
        let cases: Vec<(String, usize, &str)> = vec![
            (with("program = \"shout\"", "programme = \"shout\""), 3, "unknown field"),
            (with("[launch]", "[lunch]"), 6, "unknown field"),
            (with("style = \"positional\"", "style = \"shouted\""), 7, "unknown variant"),
            (with("args = [", "argz = ["), 10, "unknown field"),
            (with("{id}", "{session}"), 10, "{session}"),
            (with("{id}", "{id"), 10, "unclosed"),
            (with("\"screen\", ", "\"screen\", \"smell\", "), 13, "unknown variant"),
            (with("region = \"last_line\"", "region = \"middle\""), 17, "unknown variant"),
            (with("^Continue", "^(Continue"), 16, "invalid pattern"),
            (with("state = \"needs_you\"", "state = \"done\""), 16, "may only say"),
            (with("state = \"needs_you\"", "state = \"asleep\""), 19, "unknown variant"),
            (with("priority = 100", "priority = \"high\""), 20, "invalid type"),
            (with("name = \"shout\"", "name = \"Shout It\""), 1, "lower-case"),
            (with("program = \"shout\"", "program = \"\""), 3, "program is empty"),
            (with("min = \"1.0.0\"", "min = \"one\""), 4, "no dotted version"),
            (
                with("[launch]\n", "[launch]\ninstrumentation = { kind = \"settings_flag\" }\n"),
                7,
                "needs a name",
            ),
            (
                with("[launch]\n", "usage = \"server\"\n[launch]\n"),
                6,
                "usage \"server\" needs",
            ),
            (with("sources = [\"screen\", \"activity\"]", "sources = []"), 12, "is empty"),
            (
                format!("{MINIMAL}\n[[rule]]\nid = \"shout.ask\"\nregion = \"screen\"\nmatch = 'x'\nstate = \"idle\"\n"),
                23,
                "appears twice",
            ),
            (with("[launch]\n", "[launch]\nprompt = { style = \"typed\" }\n"), 8, "duplicate key"),
        ];
        assert_eq!(cases.len(), 20);
        for (text, line, says) in cases {
            let problems = parse(&text, "shout.toml").expect_err(&text);
            let p = &problems[0];
            assert_eq!(p.line, Some(line), "{p}\n---\n{text}");
            assert!(p.to_string().contains(says), "{p}, want {says:?}");
            assert!(
                p.to_string().starts_with(&format!("shout.toml:{line}: ")),
                "{p}"
            );
        }
    }

    #[test]
    fn a_user_file_overrides_a_built_in_rule_by_id_or_adds_a_harness() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A copy of the built-in Claude profile with one rule changed (by its id).
        let claude = crate::profile::get("claude").unwrap();
        let mut file = to_file(claude);
        let footer = file
            .rule
            .iter_mut()
            .find(|r| r.id == "claude.working-footer")
            .unwrap();
        footer.pattern = r"(?m)^  shouting$".into();
        let path = dir.path().join("claude.toml");
        std::fs::write(&path, toml::to_string(&file).unwrap()).unwrap();
        std::fs::write(dir.path().join("shout.toml"), MINIMAL).unwrap();
        // Not read: a symlink, a file writable by others, a file named after another harness.
        std::os::unix::fs::symlink(dir.path().join("shout.toml"), dir.path().join("link.toml"))
            .unwrap();
        let loose = dir.path().join("loose.toml");
        std::fs::write(&loose, MINIMAL.replace("\"shout\"", "\"loose\"")).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::fs::write(dir.path().join("other.toml"), MINIMAL).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a profile").unwrap();

        let read: BTreeMap<String, Result<Profile, Vec<Problem>>> = read_dir(dir.path())
            .into_iter()
            .map(|(p, r)| (p.file_name().unwrap().to_string_lossy().into_owned(), r))
            .collect();
        assert_eq!(read.len(), 5, "{:?}", read.keys());
        let mine = read["claude.toml"].as_ref().unwrap();
        let rule = mine.rules.rule("claude.working-footer").unwrap();
        assert_eq!(rule.pattern(), r"(?m)^  shouting$");
        assert_eq!(mine.rules.rules().len(), claude.rules.rules().len());
        assert!(mine
            .rules
            .classify("x\n  shouting\n", "")
            .is_some_and(|m| m.rule == "claude.working-footer"));
        assert_eq!(read["shout.toml"].as_ref().unwrap().name, "shout");
        let why = |f: &str| read[f].as_ref().unwrap_err()[0].message.clone();
        assert!(
            why("link.toml").contains("not a regular file"),
            "{}",
            why("link.toml")
        );
        assert!(
            why("loose.toml").contains("writable by others"),
            "{}",
            why("loose.toml")
        );
        assert!(why("other.toml").contains("name a profile file after its harness"));
    }
}
