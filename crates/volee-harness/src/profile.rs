//! Harness profiles: one value per harness with the six parts of the product's design — launch,
//! resume, processes, session, states (sources best first), join — plus input rules and the
//! versions it was measured on. Facts: `docs/harnesses/<name>.md`.

use serde::Serialize;

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
    /// Nothing (the generic profile).
    None,
}

/// A state source, best first in [`Profile::states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Hooks,
    Listing,
    Title,
    Screen,
    Activity,
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
    // --- join
    /// How the harness gets volee's MCP server for one launch.
    pub join: &'static str,
    pub input: InputRules,
}

const TUI_INPUT: InputRules = InputRules {
    bracketed_paste: true,
    enter_delay_ms: 150,
    submit_key: "Enter",
    interrupt_key: "Escape",
};

/// Every profile, the generic one last.
pub fn profiles() -> Vec<Profile> {
    vec![
        Profile {
            name: "claude",
            display_name: "Claude Code",
            program: "claude",
            package: Some("@anthropic-ai/claude-code"),
            measured: Some(VersionRange {
                min: "2.1.197",
                max: "2.1.332",
            }),
            prompt: PromptStyle::AfterDoubleDash,
            session_id_flag: Some("--session-id"),
            name_flag: Some("-n"),
            model_flag: Some("--model"),
            worktree_flag: Some("-w"),
            launch_env: &[("DISABLE_AUTOUPDATER", "1")],
            instrumentation: Instrumentation::SettingsFlag("--settings"),
            resume: &["--resume", "{id}"],
            process_names: &["claude"],
            process_scripts: &["@anthropic-ai/claude-code/"],
            process_helpers: &[],
            session_sources: &[
                "preset --session-id",
                "hook session_id",
                "~/.claude/sessions/<pid>.json",
                "claude agents --json",
            ],
            states: &[
                Source::Hooks,
                Source::Listing,
                Source::Screen,
                Source::Activity,
            ],
            join: "--mcp-config FILE (variadic: the prompt goes after --)",
            input: TUI_INPUT,
        },
        Profile {
            name: "codex",
            display_name: "Codex CLI",
            program: "codex",
            package: Some("@openai/codex"),
            measured: Some(VersionRange {
                min: "0.171.0",
                max: "0.171.0",
            }),
            prompt: PromptStyle::Positional,
            session_id_flag: None,
            name_flag: None,
            model_flag: Some("--model"),
            worktree_flag: Some("--worktree"),
            launch_env: &[],
            instrumentation: Instrumentation::ConfigOverrides,
            resume: &["resume", "{id}"],
            process_names: &["codex"],
            process_scripts: &["@openai/codex/"],
            // The shared app-server daemon outlives the TUIs and is not an agent.
            process_helpers: &["app-server"],
            session_sources: &["hook session_id", "rollout file", "app-server thread/list"],
            states: &[
                Source::Hooks,
                Source::Title,
                Source::Screen,
                Source::Activity,
            ],
            join: "-c mcp_servers.volee.command=…",
            input: InputRules {
                enter_delay_ms: 400,
                ..TUI_INPUT
            },
        },
        Profile {
            name: "gemini",
            display_name: "Gemini CLI",
            program: "gemini",
            package: Some("@google/gemini-cli"),
            measured: Some(VersionRange {
                min: "0.61.0",
                max: "0.61.0",
            }),
            prompt: PromptStyle::Positional,
            session_id_flag: Some("--session-id"),
            name_flag: None,
            model_flag: Some("--model"),
            worktree_flag: Some("-w"),
            launch_env: &[],
            instrumentation: Instrumentation::SystemDefaultsEnv("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"),
            resume: &["--resume", "{id}"],
            process_names: &["gemini"],
            process_scripts: &["@google/gemini-cli/"],
            process_helpers: &[],
            session_sources: &[
                "preset --session-id",
                "hook session_id",
                "GEMINI_SESSION_ID",
            ],
            states: &[
                Source::Hooks,
                Source::Title,
                Source::Screen,
                Source::Activity,
            ],
            join: "mcpServers in the same system-defaults file",
            input: TUI_INPUT,
        },
        Profile {
            name: "qwen",
            display_name: "Qwen Code",
            program: "qwen",
            package: Some("@qwen-code/qwen-code"),
            measured: Some(VersionRange {
                min: "0.24.4",
                max: "0.24.4",
            }),
            prompt: PromptStyle::Flag("-i"),
            session_id_flag: Some("--session-id"),
            name_flag: None,
            model_flag: Some("--model"),
            worktree_flag: Some("--worktree"),
            launch_env: &[],
            instrumentation: Instrumentation::SystemDefaultsEnv("QWEN_CODE_SYSTEM_DEFAULTS_PATH"),
            resume: &["--resume", "{id}"],
            process_names: &["qwen"],
            process_scripts: &["@qwen-code/qwen-code/"],
            process_helpers: &[],
            session_sources: &[
                "preset --session-id",
                "hook session_id",
                "~/.qwen/sessions/<pid>.json",
            ],
            states: &[
                Source::Hooks,
                Source::Listing,
                Source::Title,
                Source::Screen,
                Source::Activity,
            ],
            join: "--mcp-config FILE",
            input: TUI_INPUT,
        },
        Profile {
            name: "grok",
            display_name: "Grok Build",
            program: "grok",
            package: Some("@xai-official/grok"),
            measured: Some(VersionRange {
                min: "1.0.41",
                max: "1.0.41",
            }),
            prompt: PromptStyle::Positional,
            session_id_flag: Some("--session-id"),
            name_flag: None,
            model_flag: Some("--model"),
            worktree_flag: Some("-w"),
            launch_env: &[],
            instrumentation: Instrumentation::OwnHooksFile(".grok/hooks"),
            resume: &["--resume", "{id}"],
            process_names: &["grok"],
            process_scripts: &["@xai-official/grok/"],
            process_helpers: &[],
            session_sources: &[
                "preset --session-id",
                "hook sessionId",
                "~/.grok/active_sessions.json",
            ],
            states: &[
                Source::Hooks,
                Source::Listing,
                Source::Title,
                Source::Screen,
                Source::Activity,
            ],
            join: "no per-launch flag (config.toml)",
            // Grok's guide: Esc never cancels a running turn, Ctrl+C does.
            input: InputRules {
                interrupt_key: "C-c",
                ..TUI_INPUT
            },
        },
        Profile {
            name: "generic",
            display_name: "any command line",
            program: "",
            package: None,
            measured: None,
            prompt: PromptStyle::Positional,
            session_id_flag: None,
            name_flag: None,
            model_flag: None,
            worktree_flag: None,
            launch_env: &[],
            instrumentation: Instrumentation::None,
            resume: &[],
            process_names: &[],
            process_scripts: &[],
            process_helpers: &[],
            session_sources: &[],
            states: &[Source::Screen, Source::Activity],
            join: "none",
            input: InputRules {
                bracketed_paste: false,
                enter_delay_ms: 0,
                submit_key: "Enter",
                interrupt_key: "C-c",
            },
        },
    ]
}

/// The profile called `name`.
pub fn profile(name: &str) -> Option<Profile> {
    profiles().into_iter().find(|p| p.name == name)
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
        for name in ["claude", "codex", "gemini", "qwen", "grok"] {
            let p = profile(name).expect("profile");
            assert!(p.measured.is_some(), "{name}");
            assert!(!crate::hooks::hook_events(name).is_empty(), "{name}");
        }
        assert_eq!(
            profile("generic").map(|p| p.input.interrupt_key),
            Some("C-c")
        );
    }
}
