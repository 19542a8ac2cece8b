//! The CLI's part of a launch's instrumentation plan ([`volee_harness::instrument::plan`]): it
//! writes the plan's files into volee's private runtime directory, turns the plan's arguments
//! and variables into text for the launch, and checks what only a written file can tell (whether
//! the harness will read volee's system defaults). The daemon carries out the rest of the same
//! plan (`volee_daemon::instrument`).
//!
//! Only volee's own files are written, never one of the user's: each goes into the runtime
//! directory after it and its `harness` subdirectory were checked to be the user's private ones,
//! atomically and 0600 — a harness would run the hooks in a file someone else planted.

use std::path::{Path, PathBuf};

use serde_json::Value;
use volee_daemon::paths::PathError;
use volee_daemon::persist::PersistError;
use volee_daemon::Paths;
use volee_harness::instrument::{Arg, Contents, EnvValue, NotSettings, Plan, SystemDefaults};

/// What the launch gets from the plan.
#[derive(Debug, Default, PartialEq)]
pub struct Applied {
    /// Arguments right after the program.
    pub args: Vec<String>,
    /// Variables over the caller's.
    pub env: Vec<(String, String)>,
    /// The daemon is to write the plan's fallback (`LaunchRequest::hooks_extension`): the
    /// harness would skip volee's system-defaults file.
    pub hooks_extension: bool,
}

/// Why the CLI could not set up a launch's instrumentation (error.rs says what to do).
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    /// The runtime directory (or its `harness` directory) is not the user's private one.
    #[error(transparent)]
    Paths(#[from] PathError),
    #[error(transparent)]
    Write(#[from] PersistError),
    #[error(transparent)]
    NoPort(std::io::Error),
    /// The system defaults volee must keep could not be read.
    #[error("{error}")]
    ReadDefaults {
        var: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{error}")]
    DefaultsNotJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error(transparent)]
    NotSettings(#[from] NotSettings),
    /// A joined launch needs the system-defaults file the harness would skip.
    #[error("{harness} takes volee's tools only through its system-defaults file, which it reads only when root owns it and every directory above")]
    JoinLost { harness: String },
}

/// Carry out the CLI's part of `plan` for the harness called `display_name`.
pub fn apply(plan: &Plan, display_name: &str) -> Result<Applied, InstrumentError> {
    apply_in(&Paths::from_process_env(), plan, display_name)
}

fn apply_in(paths: &Paths, plan: &Plan, display_name: &str) -> Result<Applied, InstrumentError> {
    let dir = paths.runtime_dir.join("harness");
    let path_of = |name: &str| dir.join(name);
    for file in &plan.runtime_files {
        let path = path_of(&file.name);
        let json = match &file.contents {
            Contents::Json(json) => json.clone(),
            Contents::SystemDefaults(defaults) => system_defaults(defaults, &path)?,
        };
        write_private_json(paths, &dir, &path, &json)?;
    }
    let mut applied = Applied::default();
    for arg in &plan.args {
        applied.args.push(match arg {
            Arg::Text(text) => text.clone(),
            Arg::RuntimeFile { name, template } => {
                template.replace("{file}", &path_of(name).display().to_string())
            }
            Arg::FreeLoopbackPort => free_loopback_port()?.to_string(),
        });
    }
    for (var, value) in &plan.env {
        let value = match value {
            EnvValue::Text(text) => text.clone(),
            EnvValue::RuntimeFile(name) => path_of(name).display().to_string(),
        };
        applied.env.push((var.clone(), value));
    }
    if let Some(fallback) = &plan.unless_root_owned {
        let named = applied
            .env
            .iter()
            .find(|(k, _)| *k == fallback.var)
            .map(|(_, v)| PathBuf::from(v));
        // Naming a file the harness skips would drop the administrator's settings too: the
        // variable stays unset, the administrator's settings stay as they are, and volee's
        // hooks come from the fallback the daemon writes.
        if fallback.forced || !named.is_some_and(|p| root_owned_chain(&p)) {
            if fallback.join_lost {
                return Err(InstrumentError::JoinLost {
                    harness: display_name.to_string(),
                });
            }
            applied.env.retain(|(k, _)| *k != fallback.var);
            applied.hooks_extension = true;
        }
    }
    Ok(applied)
}

/// volee's copy of the system defaults the harness would read, kept whole (an administrator's
/// settings must survive in it); `ours` is where it goes (never read back as the base).
fn system_defaults(defaults: &SystemDefaults, ours: &Path) -> Result<Value, InstrumentError> {
    let base = match defaults.base(Path::is_file).filter(|p| p != ours) {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).map_err(|error| InstrumentError::ReadDefaults {
                    var: defaults.var.clone(),
                    path: path.clone(),
                    error,
                })?;
            Some(
                serde_json::from_str(&text)
                    .map_err(|error| InstrumentError::DefaultsNotJson { path, error })?,
            )
        }
        None => None,
    };
    Ok(defaults.apply(base)?)
}

/// A loopback TCP port nobody listens on right now (the harness binds it a moment later).
fn free_loopback_port() -> Result<u16, InstrumentError> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(InstrumentError::NoPort)
}

/// Is `path` owned by root and not group/other-writable, and so is every directory above it?
fn root_owned_chain(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors().all(|p| {
        p.as_os_str().is_empty()
            || std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0)
    })
}

/// Write `value` to `path` in `dir`, a directory under volee's own: those are checked first, so
/// nothing is written into a runtime dir someone else planted (a harness would run its hooks).
fn write_private_json(
    paths: &Paths,
    dir: &Path,
    path: &Path,
    value: &Value,
) -> Result<(), InstrumentError> {
    paths.ensure()?;
    volee_daemon::paths::ensure_private_dir(dir)?;
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| PersistError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(volee_daemon::persist::write_atomic(path, &bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use volee_harness::instrument::{plan, Options};

    fn paths_in(root: &Path) -> Paths {
        Paths {
            config_dir: root.join("config"),
            data_dir: root.join("data"),
            state_dir: root.join("state"),
            runtime_dir: root.join("run"),
        }
    }

    fn plan_of(harness: &str, env: &[(&str, &str)], join: bool) -> Plan {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        plan(
            &volee_harness::profile(harness).unwrap(),
            &Options {
                volee_bin: "/opt/volee",
                env: &env,
                join,
            },
        )
        .unwrap()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn claude_is_pointed_at_a_private_settings_file_of_volees() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let applied = apply_in(&paths, &plan_of("claude", &[], true), "Claude Code").unwrap();
        let settings = paths.runtime_dir.join("harness/claude-settings.json");
        let mcp = paths.runtime_dir.join("harness/volee-mcp-claude.json");
        assert_eq!(
            applied.args,
            [
                "--settings".to_string(),
                settings.display().to_string(),
                "--mcp-config".into(),
                mcp.display().to_string()
            ]
        );
        assert_eq!(applied.env, [("DISABLE_AUTOUPDATER".into(), "1".into())]);
        let text = std::fs::read_to_string(&settings).unwrap();
        assert!(text.contains("'/opt/volee' hook claude Stop"), "{text}");
        assert_eq!((mode(&settings), mode(&mcp)), (0o600, 0o600));
        assert_eq!(mode(&paths.runtime_dir.join("harness")), 0o700);
    }

    #[test]
    fn system_defaults_are_merged_into_volees_copy_and_the_original_is_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let admin = tmp.path().join("admin.json");
        let original = r#"{"general":{"vimMode":true},"hooks":{"Stop":[{"hooks":[]}]}}"#;
        std::fs::write(&admin, original).unwrap();
        let a = admin.display().to_string();
        let applied = apply_in(
            &paths,
            &plan_of("qwen", &[("QWEN_CODE_SYSTEM_DEFAULTS_PATH", &a)], false),
            "Qwen Code",
        )
        .unwrap();
        let ours = paths.runtime_dir.join("harness/qwen-system-defaults.json");
        assert!(applied.env.contains(&(
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH".into(),
            ours.display().to_string()
        )));
        assert!(!applied.hooks_extension);
        let merged: Value = serde_json::from_str(&std::fs::read_to_string(&ours).unwrap()).unwrap();
        assert_eq!(merged["general"]["vimMode"], true);
        assert_eq!(merged["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(std::fs::read_to_string(&admin).unwrap(), original);
        // A second launch does not read volee's own copy back as the administrator's.
        let ours_s = ours.display().to_string();
        apply_in(
            &paths,
            &plan_of(
                "qwen",
                &[("QWEN_CODE_SYSTEM_DEFAULTS_PATH", &ours_s)],
                false,
            ),
            "Qwen Code",
        )
        .unwrap();
        let again: Value = serde_json::from_str(&std::fs::read_to_string(&ours).unwrap()).unwrap();
        assert_eq!(again["hooks"]["Stop"].as_array().unwrap().len(), 1);

        std::fs::write(&admin, "{").unwrap();
        let bad = apply_in(
            &paths,
            &plan_of("qwen", &[("QWEN_CODE_SYSTEM_DEFAULTS_PATH", &a)], false),
            "Qwen Code",
        )
        .unwrap_err();
        assert!(
            matches!(bad, InstrumentError::DefaultsNotJson { .. }),
            "{bad:?}"
        );
        let gone = tmp.path().join("gone.json").display().to_string();
        let missing = apply_in(
            &paths,
            &plan_of("qwen", &[("QWEN_CODE_SYSTEM_DEFAULTS_PATH", &gone)], false),
            "Qwen Code",
        )
        .unwrap_err();
        assert!(
            matches!(missing, InstrumentError::ReadDefaults { .. }),
            "{missing:?}"
        );
    }

    #[test]
    fn gemini_falls_back_on_the_extension_when_its_file_would_be_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        // Asked for (as the conformance test does when run as root).
        let forced = apply_in(
            &paths,
            &plan_of("gemini", &[("VOLEE_GEMINI_HOOKS", "extension")], false),
            "Gemini CLI",
        )
        .unwrap();
        assert!(forced.hooks_extension);
        assert!(forced
            .env
            .iter()
            .all(|(k, _)| k != "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"));
        // Joined, the tools would be lost with the file: refused.
        let joined = apply_in(
            &paths,
            &plan_of("gemini", &[("VOLEE_GEMINI_HOOKS", "extension")], true),
            "Gemini CLI",
        )
        .unwrap_err();
        assert_eq!(
            joined.to_string(),
            "Gemini CLI takes volee's tools only through its system-defaults file, which it reads only when root owns it and every directory above"
        );
        // Otherwise the file's owners decide.
        let plain = apply_in(&paths, &plan_of("gemini", &[], false), "Gemini CLI").unwrap();
        let file = paths
            .runtime_dir
            .join("harness/gemini-system-defaults.json");
        assert_eq!(plain.hooks_extension, !root_owned_chain(&file));
    }

    #[test]
    fn opencode_gets_a_free_port() {
        let tmp = tempfile::tempdir().unwrap();
        let applied = apply_in(
            &paths_in(tmp.path()),
            &plan_of("opencode", &[], false),
            "OpenCode",
        )
        .unwrap();
        assert_eq!(applied.args[0], "--port");
        let port: u16 = applied.args[1].parse().unwrap();
        assert!(port > 0);
        assert_eq!(applied.args[2..], ["--hostname", "127.0.0.1"]);
    }

    #[test]
    fn no_harness_file_is_written_into_a_planted_runtime_dir() {
        if !volee_test_support::require_root("a runtime dir owned by another user") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths {
            runtime_dir: tmp.path().join("volee-0"),
            ..paths_in(tmp.path())
        };
        std::fs::create_dir(&paths.runtime_dir).unwrap();
        std::fs::set_permissions(&paths.runtime_dir, std::fs::Permissions::from_mode(0o777))
            .unwrap();
        std::os::unix::fs::chown(&paths.runtime_dir, Some(65534), Some(65534)).unwrap();
        let err = apply_in(&paths, &plan_of("claude", &[], false), "Claude Code").unwrap_err();
        let err = crate::error::CliError::from(err);
        assert_eq!(err.exit, crate::error::Exit::Environment);
        assert!(err.message.contains("owned by uid 65534"), "{err:?}");
        assert!(!err.hints.is_empty());
        assert!(
            !paths.runtime_dir.join("harness").exists(),
            "a directory was made in the planted runtime dir"
        );
    }
}
