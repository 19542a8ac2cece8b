//! What one launch sets up so the harness reports to volee (docs/adr/0005), as data.
//!
//! [`plan`] is pure: given a profile, the `volee` binary and the launch's environment it says
//! which arguments, variables and files the launch needs. Two processes carry it out, each its
//! own part and never by harness: the CLI (which has the caller's PATH and environment) writes
//! the [`Plan::runtime_files`] into volee's private runtime directory and puts
//! [`Plan::args`] and [`Plan::env`] on the launch; the daemon writes the [`Plan::kept_files`] when
//! it records the agent, because it alone knows when no live agent of that harness needs them
//! any more and removes them then.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{extension_files, hooks_settings, join, merge_json, own_hooks_path, Join};
use crate::{Instrumentation, Profile};

/// What [`plan`] needs besides the profile.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The `volee` binary the hooks and `volee mcp` run (this very CLI's).
    pub volee_bin: &'a str,
    /// The launch's environment (the caller's): the user's own values of what volee merges
    /// into, and where HOME is.
    pub env: &'a [(String, String)],
    /// Give the harness volee's MCP server (`launch --join`, docs/adr/0008).
    pub join: bool,
}

impl Options<'_> {
    fn var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The variables `volee mcp` needs to find the caller's daemon, passed in its MCP server entry
/// (harnesses start MCP servers with a reduced environment).
const MCP_ENV: &[&str] = &[
    "VOLEE_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_STATE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "HOME",
];

/// What one launch sets up. Values are data; [`Arg`], [`EnvValue`] and [`Contents`] name what
/// only the executor can know (a free port, the path of a file it writes, a file it reads).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Arguments right after the program (before the resume line, name, model and prompt).
    pub args: Vec<Arg>,
    /// Variables set in the agent's environment, over the caller's value.
    pub env: Vec<(String, EnvValue)>,
    /// Files of volee's own in its private runtime directory (`harness/NAME`, 0600): the CLI
    /// writes them before the launch; each launch rewrites them, nothing removes them.
    pub runtime_files: Vec<RuntimeFile>,
    /// Files of volee's own under the user's home that the harness finds by their place: the
    /// daemon writes them when it records the agent and removes them once no live agent of
    /// the harness needs them.
    pub kept_files: Vec<KeptFile>,
    /// Set when the harness reads the system-defaults file named in [`Plan::env`] only if root
    /// owns it and every directory above it — and otherwise runs with no system defaults at all,
    /// the administrator's included. The CLI checks the file it wrote; when that does not hold
    /// (or [`Fallback::forced`]), the variable stays unset and the daemon writes the fallback's
    /// files instead.
    pub unless_root_owned: Option<Fallback>,
}

/// One command-line argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// As it is.
    Text(String),
    /// The path of the runtime file `name`, put in `template` at `{file}` (Copilot takes
    /// `@PATH`).
    RuntimeFile { name: String, template: String },
    /// A loopback TCP port nobody listens on right now (the harness binds it a moment later).
    FreeLoopbackPort,
}

/// The value of one variable.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    Text(String),
    /// The path of the runtime file of this name.
    RuntimeFile(String),
}

/// A file in volee's private runtime directory.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeFile {
    /// Its name in the `harness` directory.
    pub name: String,
    pub contents: Contents,
}

/// What a runtime file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Contents {
    Json(Value),
    /// A harness's system defaults with volee's additions (see [`SystemDefaults`]).
    SystemDefaults(SystemDefaults),
}

/// volee's copy of a harness's system defaults: the variable *replaces* the file the harness
/// would read, so that file (the one `var` names, else `default` when it exists) is read and
/// kept, volee's hook entries appended to each event's list and `merge` merged in.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemDefaults {
    /// The variable that names the system defaults (and will name volee's copy).
    pub var: String,
    /// The file the caller's `var` names.
    pub named: Option<PathBuf>,
    /// The harness's own default place, read when it exists and `var` names nothing.
    pub default: Option<PathBuf>,
    /// volee's hook entries: (event, entry) appended to `hooks.EVENT`.
    pub hooks: Vec<(String, Value)>,
    /// Merged in after (volee's MCP server for a joined launch).
    pub merge: Option<Value>,
}

/// The system defaults are not a JSON object with an object `"hooks"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the system defaults named by {var} are not a JSON object with an object \"hooks\"")]
pub struct NotSettings {
    pub var: String,
}

impl SystemDefaults {
    /// The file the harness would read without volee, when there is one.
    pub fn base(&self, exists: impl Fn(&std::path::Path) -> bool) -> Option<PathBuf> {
        self.named
            .clone()
            .or_else(|| self.default.clone().filter(|p| exists(p)))
    }

    /// volee's copy made from `base` (the file's JSON; None when there is no file).
    pub fn apply(&self, base: Option<Value>) -> Result<Value, NotSettings> {
        let mut settings = base.unwrap_or_else(|| json!({}));
        let not_settings = || NotSettings {
            var: self.var.clone(),
        };
        let hooks = settings
            .as_object_mut()
            .ok_or_else(not_settings)?
            .entry("hooks")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(not_settings)?;
        for (event, entry) in &self.hooks {
            let list = hooks.entry(event.clone()).or_insert_with(|| json!([]));
            if let Some(list) = list.as_array_mut() {
                list.push(entry.clone());
            }
        }
        if let Some(extra) = &self.merge {
            merge_json(&mut settings, extra);
        }
        Ok(settings)
    }
}

/// A file or directory of volee's own under the user's home, kept while agents need it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptFile {
    /// Where it goes; why there is no place when the launch's environment gives none (no HOME,
    /// a relative `COPILOT_HOME`) — the daemon refuses the launch with that.
    pub place: Result<PathBuf, String>,
    /// Its JSON: the file itself, or the files of the directory.
    pub contents: KeptContents,
}

#[derive(Debug, Clone, PartialEq)]
pub enum KeptContents {
    /// `place` is one file holding only volee's hooks.
    File(Value),
    /// `place` is a directory of volee's own (an extension): files relative to it. Its hooks
    /// file is [`super::EXTENSION_HOOKS_FILE`].
    Dir(Vec<(&'static str, Value)>),
}

/// What a harness that trusts only root-owned system defaults gets instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// The variable of [`Plan::env`] that is then not set.
    pub var: String,
    /// The launch's environment asks for the fallback anyway (`VOLEE_GEMINI_HOOKS=extension`).
    pub forced: bool,
    /// Written by the daemon instead.
    pub kept_files: Vec<KeptFile>,
    /// The launch joins, and volee's MCP server is only in the system-defaults file: with the
    /// fallback the launch cannot go ahead.
    pub join_lost: bool,
}

/// Why a launch cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{harness} cannot be given volee's tools per launch: {why}")]
    NoJoin { harness: String, why: String },
    /// The caller's value of a JSON variable volee merges its MCP server into does not parse.
    #[error("${var} is not valid JSON: {reason}")]
    NotJson { var: String, reason: String },
}

/// What launching `profile` with `opts` sets up (docs/adr/0005): the profile's instrumentation,
/// its join when asked, and its launch variables (auto-updaters off).
pub fn plan(profile: &Profile, opts: &Options) -> Result<Plan, PlanError> {
    let harness = profile.name;
    let bin = opts.volee_bin;
    let mut plan = Plan {
        args: Vec::new(),
        env: Vec::new(),
        runtime_files: Vec::new(),
        kept_files: Vec::new(),
        unless_root_owned: None,
    };
    let joined = if opts.join {
        let env: Vec<(String, String)> = MCP_ENV
            .iter()
            .filter_map(|k| {
                opts.var(k)
                    .filter(|v| !v.is_empty())
                    .map(|v| (k.to_string(), v.to_string()))
            })
            .collect();
        Some(join(harness, bin, &env).map_err(|why| PlanError::NoJoin {
            harness: profile.display_name.to_string(),
            why,
        })?)
    } else {
        None
    };
    match profile.instrumentation {
        Instrumentation::SettingsFlag(flag) => {
            // One file for all of the harness's agents (each is named by `VOLEE_AGENT_ID`).
            let name = format!("{harness}-settings.json");
            plan.runtime_files.push(RuntimeFile {
                name: name.clone(),
                contents: Contents::Json(hooks_settings(harness, bin)),
            });
            plan.args.push(Arg::Text(flag.to_string()));
            plan.args.push(Arg::RuntimeFile {
                name,
                template: "{file}".into(),
            });
        }
        Instrumentation::SystemDefaultsEnv(var) => {
            let merge = match &joined {
                Some(Join::SystemDefaults { json }) => Some(json.clone()),
                _ => None,
            };
            // A joined launch gets its own file: the other launches' must not name volee's
            // MCP server.
            let name = match merge {
                Some(_) => format!("{harness}-system-defaults-join.json"),
                None => format!("{harness}-system-defaults.json"),
            };
            let hooks = crate::hooks::hook_events(harness)
                .into_iter()
                .map(|event| (event.to_string(), super::hook_entry(harness, event, bin)))
                .collect();
            plan.runtime_files.push(RuntimeFile {
                name: name.clone(),
                contents: Contents::SystemDefaults(SystemDefaults {
                    var: var.to_string(),
                    named: opts.var(var).map(PathBuf::from),
                    // The harness's own file, read when the variable names none.
                    default: profile.hook_files.system_defaults.map(PathBuf::from),
                    hooks,
                    merge: merge.clone(),
                }),
            });
            plan.env
                .push((var.to_string(), EnvValue::RuntimeFile(name)));
            // A harness that reads a system-defaults file only when root owns it and every
            // directory above (Gemini CLI 0.61.0) gets volee's hooks as an extension when
            // volee's file is not such a file.
            if let Some(dir) = profile.hook_files.extension_dir {
                let extension = home_path(opts, dir).ok_or_else(|| {
                    format!(
                        "HOME is not set: cannot place volee's {} extension",
                        profile.display_name
                    )
                });
                plan.unless_root_owned = Some(Fallback {
                    var: var.to_string(),
                    forced: opts.var("VOLEE_GEMINI_HOOKS") == Some("extension"),
                    kept_files: vec![KeptFile {
                        place: extension,
                        contents: KeptContents::Dir(extension_files(harness, bin)),
                    }],
                    join_lost: merge.is_some(),
                });
            }
        }
        Instrumentation::OwnHooksFile(dir) => {
            let var = |k: &str| opts.var(k).map(String::from);
            plan.kept_files.push(KeptFile {
                place: own_hooks_path(harness, dir, var),
                contents: KeptContents::File(hooks_settings(harness, bin)),
            });
        }
        // Its own HTTP server on a free loopback port, read by the daemon (the port is on the
        // recorded command line).
        Instrumentation::ServerPort(flag) => {
            plan.args.extend([
                Arg::Text(flag.to_string()),
                Arg::FreeLoopbackPort,
                Arg::Text("--hostname".into()),
                Arg::Text("127.0.0.1".into()),
            ]);
        }
        // Only after `volee setup HARNESS`; the entries then serve every launch.
        Instrumentation::UserOptIn(_) => {}
        // Codex: `-c hooks.*` needs --dangerously-bypass-hook-trust (which would also run an
        // untrusted repository's hooks) and forces embedded mode; see docs/adr/0005.
        Instrumentation::ConfigOverrides | Instrumentation::None => {}
        // It reports its states itself, to the agent id the daemon puts in its environment.
        Instrumentation::BuiltIn => {}
    }
    match joined {
        Some(Join::Args { args, file }) => {
            let file_name = file.map(|(name, json)| {
                plan.runtime_files.push(RuntimeFile {
                    name: name.clone(),
                    contents: Contents::Json(json),
                });
                name
            });
            plan.args.extend(args.into_iter().map(|a| match &file_name {
                Some(name) if a.contains("{file}") => Arg::RuntimeFile {
                    name: name.clone(),
                    template: a,
                },
                _ => Arg::Text(a),
            }));
        }
        Some(Join::EnvJson { var, json }) => {
            let mut merged = match opts.var(var) {
                Some(text) if !text.trim().is_empty() => {
                    serde_json::from_str(text).map_err(|e| PlanError::NotJson {
                        var: var.to_string(),
                        reason: e.to_string(),
                    })?
                }
                _ => json!({}),
            };
            merge_json(&mut merged, &json);
            plan.env
                .push((var.to_string(), EnvValue::Text(merged.to_string())));
        }
        // Already in the system-defaults file.
        Some(Join::SystemDefaults { .. }) | None => {}
    }
    for (k, v) in profile.launch_env {
        plan.env
            .push((k.to_string(), EnvValue::Text(v.to_string())));
    }
    Ok(plan)
}

/// `rel` under the launch's HOME.
fn home_path(opts: &Options, rel: &str) -> Option<PathBuf> {
    opts.var("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn plan_of(harness: &str, env: &[(String, String)], join: bool) -> Result<Plan, PlanError> {
        let profile = crate::profile(harness).unwrap();
        plan(
            &profile,
            &Options {
                volee_bin: "/opt/volee",
                env,
                join,
            },
        )
    }

    #[test]
    fn claude_gets_a_settings_file_of_volees_on_its_command_line() {
        let p = plan_of("claude", &env(&[("HOME", "/h")]), false).unwrap();
        assert_eq!(
            p.args,
            [
                Arg::Text("--settings".into()),
                Arg::RuntimeFile {
                    name: "claude-settings.json".into(),
                    template: "{file}".into()
                }
            ]
        );
        let Contents::Json(settings) = &p.runtime_files[0].contents else {
            panic!("{p:?}");
        };
        assert_eq!(
            settings["hooks"]["Stop"][0]["hooks"][0]["command"],
            "'/opt/volee' hook claude Stop"
        );
        // The auto-updater is off; nothing is kept under HOME.
        assert!(p
            .env
            .contains(&("DISABLE_AUTOUPDATER".into(), EnvValue::Text("1".into()))));
        assert!(p.kept_files.is_empty() && p.unless_root_owned.is_none());
    }

    #[test]
    fn claude_joined_names_its_mcp_file_after_the_settings() {
        let p = plan_of(
            "claude",
            &env(&[("VOLEE_HOME", "/v"), ("PATH", "/bin")]),
            true,
        )
        .unwrap();
        assert_eq!(
            p.args[2..],
            [
                Arg::Text("--mcp-config".into()),
                Arg::RuntimeFile {
                    name: "volee-mcp-claude.json".into(),
                    template: "{file}".into()
                }
            ]
        );
        let Contents::Json(mcp) = &p.runtime_files[1].contents else {
            panic!("{p:?}");
        };
        // Only the variables that find the daemon go to the MCP server.
        assert_eq!(
            mcp["mcpServers"]["volee"]["env"],
            json!({"VOLEE_HOME": "/v"})
        );
    }

    #[test]
    fn gemini_keeps_the_administrators_defaults_and_falls_back_on_its_extension() {
        let e = env(&[
            ("HOME", "/h"),
            ("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", "/etc/admin.json"),
        ]);
        let p = plan_of("gemini", &e, false).unwrap();
        assert!(p.args.is_empty());
        assert_eq!(
            p.env[0],
            (
                "GEMINI_CLI_SYSTEM_DEFAULTS_PATH".into(),
                EnvValue::RuntimeFile("gemini-system-defaults.json".into())
            )
        );
        let Contents::SystemDefaults(sd) = &p.runtime_files[0].contents else {
            panic!("{p:?}");
        };
        assert_eq!(sd.base(|_| true), Some(PathBuf::from("/etc/admin.json")));
        let admin = json!({"general": {"x": 1}, "hooks": {"AfterAgent": [{"hooks": []}]}});
        let merged = sd.apply(Some(admin)).unwrap();
        assert_eq!(merged["general"]["x"], 1);
        assert_eq!(merged["hooks"]["AfterAgent"].as_array().unwrap().len(), 2);
        assert_eq!(
            merged["hooks"]["AfterAgent"][1]["hooks"][0]["command"],
            "'/opt/volee' hook gemini AfterAgent"
        );
        assert!(sd.apply(Some(json!([1]))).is_err());
        assert!(sd.apply(Some(json!({"hooks": 3}))).is_err());
        let fallback = p.unless_root_owned.unwrap();
        assert!(!fallback.forced && !fallback.join_lost);
        assert_eq!(
            fallback.kept_files[0].place,
            Ok(PathBuf::from("/h/.gemini/extensions/volee-hooks"))
        );
        assert!(matches!(
            &fallback.kept_files[0].contents,
            KeptContents::Dir(files) if files[1].0 == crate::instrument::EXTENSION_HOOKS_FILE
        ));

        // Without the variable: the harness's own default, when it exists.
        let p = plan_of("gemini", &env(&[("VOLEE_GEMINI_HOOKS", "extension")]), true).unwrap();
        let Contents::SystemDefaults(sd) = &p.runtime_files[0].contents else {
            panic!("{p:?}");
        };
        assert_eq!(p.runtime_files[0].name, "gemini-system-defaults-join.json");
        assert_eq!(sd.base(|_| false), None);
        assert_eq!(
            sd.base(|_| true),
            Some(PathBuf::from("/etc/gemini-cli/system-defaults.json"))
        );
        assert!(sd.apply(None).unwrap()["mcpServers"]["volee"].is_object());
        let fallback = p.unless_root_owned.unwrap();
        assert!(fallback.forced && fallback.join_lost);
        assert!(fallback.kept_files[0].place.is_err());
    }

    #[test]
    fn qwen_reads_any_system_defaults_file() {
        let p = plan_of("qwen", &env(&[]), false).unwrap();
        assert_eq!(p.env[0].0, "QWEN_CODE_SYSTEM_DEFAULTS_PATH");
        assert!(p.unless_root_owned.is_none());
        let Contents::SystemDefaults(sd) = &p.runtime_files[0].contents else {
            panic!("{p:?}");
        };
        assert_eq!(
            sd.default,
            Some(PathBuf::from("/etc/qwen-code/system-defaults.json"))
        );
    }

    #[test]
    fn own_hooks_files_are_kept_under_the_launchs_home() {
        let p = plan_of("grok", &env(&[("HOME", "/h")]), false).unwrap();
        assert_eq!(
            p.kept_files[0].place,
            Ok(PathBuf::from("/h/.grok/hooks/volee-hooks.json"))
        );
        assert!(p.runtime_files.is_empty() && p.args.is_empty());
        let p = plan_of(
            "copilot",
            &env(&[("HOME", "/h"), ("COPILOT_HOME", "/c")]),
            true,
        )
        .unwrap();
        assert_eq!(
            p.kept_files[0].place,
            Ok(PathBuf::from("/c/hooks/volee.json"))
        );
        assert_eq!(
            p.args,
            [
                Arg::Text("--additional-mcp-config".into()),
                Arg::RuntimeFile {
                    name: "volee-mcp-copilot.json".into(),
                    template: "@{file}".into()
                }
            ]
        );
        assert!(plan_of("grok", &env(&[]), false).unwrap().kept_files[0]
            .place
            .is_err());
    }

    #[test]
    fn opencode_gets_a_port_and_its_join_merged_into_the_users_config() {
        let mine = r#"{"model": "x", "mcp": {"theirs": {"type": "remote"}}}"#;
        let p = plan_of("opencode", &env(&[("OPENCODE_CONFIG_CONTENT", mine)]), true).unwrap();
        assert_eq!(p.args[1], Arg::FreeLoopbackPort);
        let (var, EnvValue::Text(value)) = &p.env[0] else {
            panic!("{p:?}");
        };
        assert_eq!(var, "OPENCODE_CONFIG_CONTENT");
        let merged: Value = serde_json::from_str(value).unwrap();
        assert_eq!(merged["model"], "x");
        assert_eq!(merged["mcp"]["theirs"]["type"], "remote");
        assert_eq!(merged["mcp"]["volee"]["command"][1], "mcp");
        assert!(matches!(
            plan_of("opencode", &env(&[("OPENCODE_CONFIG_CONTENT", "{")]), true),
            Err(PlanError::NotJson { .. })
        ));
        // Unjoined, the user's value is left alone.
        let p = plan_of("opencode", &env(&[("OPENCODE_CONFIG_CONTENT", "{")]), false).unwrap();
        assert!(p.env.iter().all(|(k, _)| k != "OPENCODE_CONFIG_CONTENT"));
    }

    #[test]
    fn a_harness_without_a_per_launch_join_is_refused_only_when_joining() {
        assert_eq!(
            plan_of("grok", &env(&[("HOME", "/h")]), true),
            Err(PlanError::NoJoin {
                harness: "Grok Build".into(),
                why: join("grok", "/opt/volee", &[]).unwrap_err()
            })
        );
        for nothing in ["generic", "cursor", "codex", "volee", "aider"] {
            let p = plan_of(nothing, &env(&[("HOME", "/h")]), false).unwrap();
            assert!(
                p.args.is_empty() && p.runtime_files.is_empty() && p.kept_files.is_empty(),
                "{nothing}: {p:?}"
            );
        }
    }
}
