//! The hook registrations volee gives a harness, in that harness's settings format (pure JSON
//! builders), and [`plan`]: everything one launch sets up, which the CLI and the daemon each
//! carry out their part of.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use crate::profile::{HookFiles, HookFormat, JoinVia, McpFormat};
// Harnesses run hook commands through the shell.
use volee_view::sh_quote;

mod plan;

pub use plan::{
    plan, Arg, Contents, EnvValue, Fallback, KeptContents, KeptFile, NotSettings, Options, Plan,
    PlanError, RuntimeFile, SystemDefaults,
};

/// How volee writes the hooks of `harness` (its profile's `[launch] hooks`).
fn hook_files(harness: &str) -> HookFiles {
    crate::profile::get(harness).map_or(
        HookFiles {
            format: HookFormat::Nested,
            file: "volee-hooks.json",
            home_env: None,
            system_defaults: None,
            extension_dir: None,
        },
        |p| p.hook_files,
    )
}

/// The registration of one event: a command `volee hook HARNESS EVENT`, in the shape of the
/// profile's hook format.
pub fn hook_entry(harness: &str, event: &str, volee_bin: &str) -> Value {
    let command = format!("{} hook {harness} {event}", sh_quote(volee_bin));
    match hook_files(harness).format {
        // A matcher and a name; this one's timeout is in milliseconds.
        HookFormat::MatcherNamedMs => json!({"matcher": "*", "hooks": [{
            "name": format!("volee-{event}"), "type": "command", "command": command, "timeout": 10000
        }]}),
        HookFormat::MatcherNamed => json!({"matcher": "", "hooks": [{
            "name": format!("volee-{event}"), "type": "command", "command": command
        }]}),
        // One flat entry per command (`bash` is the Unix command key).
        HookFormat::FlatBashV1 => json!({"type": "command", "bash": command, "timeoutSec": 10}),
        HookFormat::Nested => {
            json!({"hooks": [{"type": "command", "command": command, "timeout": 10}]})
        }
    }
}

/// Text every hook command of volee's for `harness` holds (see [`hook_entry`]): a file without
/// it is not volee's, and volee never removes it.
pub fn hook_marker(harness: &str) -> String {
    format!(" hook {harness} ")
}

/// `{"hooks": {EVENT: [entry], …}}` for every event volee reads from `harness`.
pub fn hooks_settings(harness: &str, volee_bin: &str) -> Value {
    let hooks: Map<String, Value> = crate::hooks::hook_events(harness)
        .into_iter()
        .map(|event| {
            (
                event.to_string(),
                json!([hook_entry(harness, event, volee_bin)]),
            )
        })
        .collect();
    match hook_files(harness).format {
        // Read only from files that say `"version": 1`.
        HookFormat::FlatBashV1 => json!({ "version": 1, "hooks": hooks }),
        _ => json!({ "hooks": hooks }),
    }
}

/// The hooks file of an extension directory of volee's (relative to it).
pub const EXTENSION_HOOKS_FILE: &str = "hooks/hooks.json";

/// The files of volee's own extension for a harness whose profile names an `extension_dir`
/// (Gemini: `.gemini/extensions/volee-hooks` under HOME): (path relative to it, JSON) — only
/// volee's hooks (`hooks/hooks.json`) and the manifest the harness needs to load it. Used when
/// the harness would ignore volee's system-defaults file (it reads one only when root owns it
/// and every directory above).
pub fn extension_files(harness: &str, volee_bin: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "gemini-extension.json",
            json!({
                "name": "volee-hooks",
                "version": "1.0.0",
                "description": "volee's hooks: report this session's state to volee (written by volee while it supervises a Gemini agent, removed after)"
            }),
        ),
        (EXTENSION_HOOKS_FILE, hooks_settings(harness, volee_bin)),
    ]
}

/// Is `entry` one of volee's hook entries for `harness` (its command ends in `hook HARNESS
/// EVENT` for an event volee registers)?
fn is_volees_entry(harness: &str, entry: &Value) -> bool {
    entry
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| {
            crate::hooks::hook_events(harness)
                .iter()
                .any(|e| c.ends_with(&format!(" hook {harness} {e}")))
        })
}

/// The one hooks file of the user's that a harness of instrumentation `user_opt_in` keeps (Cursor's
/// `~/.cursor/hooks.json`), with volee's entries: every entry already there is kept as it was, an
/// earlier setup's entries are replaced (running setup twice adds nothing). `existing` is the
/// file's JSON (None when there is none). Errors when it is not that shape
/// (`{"version": 1, "hooks": {EVENT: [ … ]}}`), so nothing is written over what volee does not
/// understand.
pub fn user_hooks_merge(
    harness: &str,
    existing: Option<Value>,
    volee_bin: &str,
) -> Result<Value, String> {
    let mut file = existing.unwrap_or_else(|| json!({"version": 1, "hooks": {}}));
    let root = file.as_object_mut().ok_or("it is not a JSON object")?;
    root.entry("version").or_insert(json!(1));
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("its \"hooks\" is not an object")?;
    for (event, list) in hooks.iter_mut() {
        let list = list
            .as_array_mut()
            .ok_or_else(|| format!("its hooks.{event} is not a list"))?;
        list.retain(|e| !is_volees_entry(harness, e));
    }
    for event in crate::hooks::hook_events(harness) {
        let command = format!("{} hook {harness} {event}", sh_quote(volee_bin));
        let list = hooks.entry(event.to_string()).or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.push(json!({ "command": command }));
        }
    }
    Ok(file)
}

/// A user's hooks file (see [`user_hooks_merge`]) without volee's entries for `harness` (an event
/// left with no entry is dropped); the number of entries taken out. A file volee does not
/// understand is returned as it was.
pub fn user_hooks_unmerge(harness: &str, mut file: Value) -> (Value, usize) {
    let mut removed = 0;
    if let Some(hooks) = file.get_mut("hooks").and_then(Value::as_object_mut) {
        for list in hooks.values_mut() {
            if let Some(list) = list.as_array_mut() {
                let before = list.len();
                list.retain(|e| !is_volees_entry(harness, e));
                removed += before - list.len();
            }
        }
        hooks.retain(|_, list| list.as_array().is_none_or(|l| !l.is_empty()));
    }
    (file, removed)
}

/// The name of volee's own hooks file for a harness whose profile says
/// [`crate::Instrumentation::OwnHooksFile`] (`volee-hooks.json` unless its profile names
/// another).
pub fn own_hooks_file_name(harness: &str) -> &'static str {
    hook_files(harness).file
}

/// Where volee's own hooks file goes for one launch: `dir` (the profile's, relative to HOME) and
/// [`own_hooks_file_name`], except that Copilot's `COPILOT_HOME` (its whole `~/.copilot`) moves
/// it to `$COPILOT_HOME/hooks/`. `var` reads the launch's environment. An error says why there is
/// no place (no HOME, a relative `COPILOT_HOME`).
pub fn own_hooks_path(
    harness: &str,
    dir: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let files = hook_files(harness);
    let name = files.file;
    if let Some(home_env) = files.home_env {
        if let Some(home) = var(home_env).filter(|v| !v.is_empty()) {
            let home = PathBuf::from(home);
            if !home.is_absolute() {
                return Err(format!(
                    "{home_env} is not an absolute path ({}): cannot place volee's hooks file",
                    home.display()
                ));
            }
            return Ok(home.join("hooks").join(name));
        }
    }
    let home = var("HOME")
        .filter(|v| !v.is_empty())
        .ok_or_else(|| "HOME is not set: cannot place the harness's hooks file".to_string())?;
    Ok(PathBuf::from(home).join(dir).join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_quote_the_binary_and_name_the_event() {
        let s = hooks_settings("claude", "/opt/it's/volee");
        let cmd = s["hooks"]["Stop"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert_eq!(cmd, r"'/opt/it'\''s/volee' hook claude Stop");
        let g = hook_entry("gemini", "AfterAgent", "/v");
        assert_eq!(g["hooks"][0]["timeout"], 10000);
    }

    #[test]
    fn the_gemini_extension_holds_only_volee_hooks() {
        let files = extension_files("gemini", "/v");
        assert_eq!(files[0].1["name"], "volee-hooks");
        let hooks = &files[1].1["hooks"];
        assert_eq!(
            hooks["AfterAgent"][0]["hooks"][0]["command"],
            "'/v' hook gemini AfterAgent"
        );
        assert_eq!(files[1].0, "hooks/hooks.json");
    }

    #[test]
    fn cursor_setup_keeps_the_users_hooks_and_undoes_cleanly() {
        let users = json!({"version": 1, "hooks": {
            "stop": [{"command": "./audit.sh", "timeout": 5}],
            "afterFileEdit": [{"command": "./format.sh"}]
        }});
        let merged = user_hooks_merge("cursor", Some(users.clone()), "/v").unwrap();
        assert_eq!(merged["hooks"]["stop"][0]["command"], "./audit.sh");
        assert_eq!(
            merged["hooks"]["stop"][1]["command"],
            "'/v' hook cursor stop"
        );
        assert_eq!(
            merged["hooks"]["beforeSubmitPrompt"][0]["command"],
            "'/v' hook cursor beforeSubmitPrompt"
        );
        // Only documented event names (one unknown name voids Cursor's whole file).
        let documented = [
            "sessionStart",
            "sessionEnd",
            "beforeSubmitPrompt",
            "preToolUse",
            "postToolUse",
            "postToolUseFailure",
            "beforeShellExecution",
            "afterShellExecution",
            "beforeMCPExecution",
            "afterMCPExecution",
            "beforeReadFile",
            "afterFileEdit",
            "afterAgentResponse",
            "afterAgentThought",
            "subagentStart",
            "subagentStop",
            "preCompact",
            "stop",
        ];
        for event in merged["hooks"].as_object().unwrap().keys() {
            assert!(documented.contains(&event.as_str()), "{event}");
        }
        // Twice is once; a moved binary replaces the old entries.
        let again = user_hooks_merge("cursor", Some(merged.clone()), "/v").unwrap();
        assert_eq!(again, merged);
        let moved = user_hooks_merge("cursor", Some(merged.clone()), "/opt/volee").unwrap();
        assert_eq!(moved["hooks"]["stop"].as_array().unwrap().len(), 2);
        let (back, removed) = user_hooks_unmerge("cursor", merged);
        assert_eq!(back, users);
        assert_eq!(removed, crate::hooks::hook_events("cursor").len());
        assert!(user_hooks_merge("cursor", Some(json!([1])), "/v").is_err());
        assert!(user_hooks_merge("cursor", Some(json!({"hooks": {"stop": 3}})), "/v").is_err());
        let fresh = user_hooks_merge("cursor", None, "/v").unwrap();
        assert_eq!(fresh["version"], 1);
    }

    #[test]
    fn copilot_gets_its_own_format_and_file() {
        let s = hooks_settings("copilot", "/opt/volee");
        assert_eq!(s["version"], 1);
        let entry = &s["hooks"]["notification"][0];
        assert_eq!(entry["type"], "command");
        assert_eq!(entry["bash"], "'/opt/volee' hook copilot notification");
        assert_eq!(entry["timeoutSec"], 10);
        assert!(s["hooks"]["agentStop"].is_array());
        assert!(s["hooks"].get("permissionRequest").is_none());
        // Grok keeps its Claude-style file, without a version.
        assert!(hooks_settings("grok", "/v").get("version").is_none());

        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            own_hooks_path("copilot", ".copilot/hooks", env(&[("HOME", "/h")])),
            Ok(PathBuf::from("/h/.copilot/hooks/volee.json"))
        );
        assert_eq!(
            own_hooks_path(
                "copilot",
                ".copilot/hooks",
                env(&[("HOME", "/h"), ("COPILOT_HOME", "/c")])
            ),
            Ok(PathBuf::from("/c/hooks/volee.json"))
        );
        assert!(own_hooks_path(
            "copilot",
            ".copilot/hooks",
            env(&[("HOME", "/h"), ("COPILOT_HOME", "rel")])
        )
        .is_err());
        assert_eq!(
            own_hooks_path("grok", ".grok/hooks", env(&[("HOME", "/h")])),
            Ok(PathBuf::from("/h/.grok/hooks/volee-hooks.json"))
        );
        assert!(own_hooks_path("grok", ".grok/hooks", env(&[])).is_err());
    }
}

/// How a harness is given volee's MCP server (`volee mcp`) for one launch (`volee launch
/// --join`), without touching the user's configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum Join {
    /// Arguments before the prompt; `{file}` in them is the path of a file of volee's own with
    /// this name and JSON content, written by the CLI.
    Args {
        args: Vec<String>,
        file: Option<(String, Value)>,
    },
    /// A JSON configuration in this environment variable, merged with the value the user's
    /// environment already has (OpenCode's `OPENCODE_CONFIG_CONTENT`).
    EnvJson { var: &'static str, json: Value },
    /// `mcpServers` in the system-defaults file volee already writes for the hooks (Gemini).
    SystemDefaults { json: Value },
}

/// `volee mcp` as an MCP stdio server entry: the command, and the environment that finds the
/// user's daemon (clients pass MCP servers a reduced environment).
fn mcp_server(volee_bin: &str, env: &[(String, String)]) -> (Value, Value) {
    let env: Map<String, Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    (json!(volee_bin), Value::Object(env))
}

/// volee's MCP server in the JSON shape a harness reads.
fn mcp_json(format: McpFormat, command: &Value, env: &Value) -> Value {
    match format {
        McpFormat::McpServers => json!({"mcpServers": {"volee": {
            "type": "stdio", "command": command, "args": ["mcp"], "env": env
        }}}),
        McpFormat::McpServersLocal => json!({"mcpServers": {"volee": {
            "type": "local", "command": command, "args": ["mcp"], "env": env, "tools": ["*"]
        }}}),
        McpFormat::McpServersPlain => {
            json!({"mcpServers": {"volee": {"command": command, "args": ["mcp"], "env": env}}})
        }
        McpFormat::Bare => json!({"volee": {"command": command, "args": ["mcp"], "env": env}}),
        McpFormat::McpLocalCommand => json!({"mcp": {"volee": {
            "type": "local",
            "command": [command, "mcp"],
            "environment": env,
            "enabled": true
        }}}),
    }
}

/// The join of `harness` (its profile's `[join]`), or why it has none per launch.
pub fn join(harness: &str, volee_bin: &str, env: &[(String, String)]) -> Result<Join, String> {
    let (command, env) = mcp_server(volee_bin, env);
    let Some(profile) = crate::profile::get(harness) else {
        return Err("it has no MCP support".into());
    };
    let strings = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    Ok(match profile.join_via {
        JoinVia::FileArg { args, file, format } => Join::Args {
            args: strings(args),
            file: Some((file.to_string(), mcp_json(format, &command, &env))),
        },
        JoinVia::InlineArg { args, format } => {
            let json = mcp_json(format, &command, &env).to_string();
            Join::Args {
                args: args.iter().map(|a| a.replace("{json}", &json)).collect(),
                file: None,
            }
        }
        // TOML values in `-c key=value` overrides (forces Codex's embedded mode).
        JoinVia::ConfigOverrides => {
            let toml_env: Vec<String> = env
                .as_object()
                .map(|m| m.iter().map(|(k, v)| format!("{k} = {}", v)).collect())
                .unwrap_or_default();
            Join::Args {
                args: vec![
                    "-c".into(),
                    format!("mcp_servers.volee.command={command}"),
                    "-c".into(),
                    r#"mcp_servers.volee.args=["mcp"]"#.into(),
                    "-c".into(),
                    format!("mcp_servers.volee.env={{ {} }}", toml_env.join(", ")),
                ],
                file: None,
            }
        }
        JoinVia::EnvJson { var, format } => Join::EnvJson {
            var,
            json: mcp_json(format, &command, &env),
        },
        JoinVia::SystemDefaults { format } => Join::SystemDefaults {
            json: mcp_json(format, &command, &env),
        },
        JoinVia::None { why } => return Err(why.into()),
    })
}

/// `base` with every key of `add` merged in (objects recursively; `add` wins otherwise).
pub fn merge_json(base: &mut Value, add: &Value) {
    match (base.as_object_mut(), add.as_object()) {
        (Some(b), Some(a)) => {
            for (k, v) in a {
                match b.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        merge_json(existing, v)
                    }
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *base = add.clone(),
    }
}

#[cfg(test)]
mod join_tests {
    use super::*;

    fn env() -> Vec<(String, String)> {
        vec![("VOLEE_HOME".into(), "/h/v".into())]
    }

    #[test]
    fn every_per_launch_join_runs_volee_mcp() {
        match join("claude", "/bin/volee", &env()).unwrap() {
            Join::Args { args, file } => {
                assert_eq!(args, ["--mcp-config", "{file}"]);
                let (name, json) = file.unwrap();
                assert_eq!(name, "volee-mcp-claude.json");
                assert_eq!(json["mcpServers"]["volee"]["command"], "/bin/volee");
                assert_eq!(json["mcpServers"]["volee"]["args"][0], "mcp");
                assert_eq!(json["mcpServers"]["volee"]["env"]["VOLEE_HOME"], "/h/v");
            }
            other => panic!("{other:?}"),
        }
        match join("codex", "/bin/volee", &env()).unwrap() {
            Join::Args { args, file: None } => {
                assert_eq!(args[1], r#"mcp_servers.volee.command="/bin/volee""#);
                assert_eq!(args[5], r#"mcp_servers.volee.env={ VOLEE_HOME = "/h/v" }"#);
            }
            other => panic!("{other:?}"),
        }
        match join("copilot", "/bin/volee", &[]).unwrap() {
            Join::Args {
                args,
                file: Some((_, json)),
            } => {
                assert_eq!(args, ["--additional-mcp-config", "@{file}"]);
                assert_eq!(json["mcpServers"]["volee"]["tools"][0], "*");
            }
            other => panic!("{other:?}"),
        }
        match join("opencode", "/bin/volee", &[]).unwrap() {
            Join::EnvJson { var, json } => {
                assert_eq!(var, "OPENCODE_CONFIG_CONTENT");
                assert_eq!(json["mcp"]["volee"]["command"][1], "mcp");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            join("gemini", "/v", &[]),
            Ok(Join::SystemDefaults { .. })
        ));
        assert!(matches!(join("amp", "/v", &[]), Ok(Join::Args { .. })));
        for none in ["grok", "cursor", "aider", "generic", "volee"] {
            assert!(join(none, "/v", &[]).is_err(), "{none}");
        }
    }

    #[test]
    fn merging_keeps_the_users_keys() {
        let mut user = json!({"model": "x", "mcp": {"theirs": {"type": "remote"}}});
        merge_json(&mut user, &json!({"mcp": {"volee": {"type": "local"}}}));
        assert_eq!(user["model"], "x");
        assert_eq!(user["mcp"]["theirs"]["type"], "remote");
        assert_eq!(user["mcp"]["volee"]["type"], "local");
    }
}
