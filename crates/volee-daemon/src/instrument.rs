//! The daemon's part of a launch's instrumentation ([`volee_harness::instrument::plan`]): the
//! files of volee's own under the user's home that a harness finds by their place (Grok's and
//! Copilot's hooks file, volee's Gemini extension). The daemon writes them when it records the
//! agent and removes them once no live agent of that harness needs them, because only it sees
//! every agent come and go. The CLI carries out the rest of the same plan.
//!
//! Only ever volee's own: each file holds volee's hooks alone, is written atomically (0600,
//! through a temporary file that is never followed as a link), and is removed only when its
//! text shows volee wrote it.

use std::path::{Path, PathBuf};

use volee_harness::instrument::{self, KeptContents, KeptFile, Options, PlanError};
use volee_protocol::LaunchRequest;

use crate::persist;

/// Why the daemon could not give a launch its kept files (the launch is refused with it).
#[derive(Debug, thiserror::Error)]
pub enum KeptFileError {
    /// The launch's environment gives no place for it (no HOME, a relative `COPILOT_HOME`).
    #[error("{0}")]
    NoPlace(String),
    #[error("could not write {}: {reason}", path.display())]
    Write { path: PathBuf, reason: String },
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Write the files `req`'s plan keeps under the user's home (the fallback's too when the CLI
/// found the harness would skip volee's system-defaults file: `hooks_extension`); the paths
/// written, for [`remove_kept_file`] once no agent needs them.
pub fn write_kept_files(
    req: &LaunchRequest,
    volee_bin: &Path,
) -> Result<Vec<PathBuf>, KeptFileError> {
    write_kept_files_with_home(req, volee_bin, std::env::var("HOME").ok())
}

/// [`write_kept_files`], with `home` standing in when the launch's environment has no HOME
/// (the daemon's own).
fn write_kept_files_with_home(
    req: &LaunchRequest,
    volee_bin: &Path,
    home: Option<String>,
) -> Result<Vec<PathBuf>, KeptFileError> {
    let Some(profile) = volee_harness::profile(&req.harness) else {
        return Ok(Vec::new());
    };
    let mut env = req.env.clone();
    if !env.iter().any(|(k, _)| k == "HOME") {
        env.extend(home.map(|h| ("HOME".to_string(), h)));
    }
    let bin = volee_bin.display().to_string();
    // The join is the CLI's part; what is kept does not depend on it.
    let plan = instrument::plan(
        &profile,
        &Options {
            volee_bin: &bin,
            env: &env,
            join: false,
        },
    )?;
    let mut files = plan.kept_files;
    if req.hooks_extension {
        files.extend(
            plan.unless_root_owned
                .into_iter()
                .flat_map(|f| f.kept_files),
        );
    }
    files.iter().map(write_kept_file).collect()
}

fn write_kept_file(file: &KeptFile) -> Result<PathBuf, KeptFileError> {
    let place = file.place.clone().map_err(KeptFileError::NoPlace)?;
    let write = |path: &Path, json: &serde_json::Value| -> Result<(), String> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        persist::save_json(path, json).map_err(|e| e.to_string())
    };
    let written = match &file.contents {
        KeptContents::File(json) => write(&place, json),
        KeptContents::Dir(files) => files
            .iter()
            .try_for_each(|(name, json)| write(&place.join(name), json)),
    };
    written.map_err(|reason| KeptFileError::Write {
        path: place.clone(),
        reason,
    })?;
    Ok(place)
}

/// Remove a file (or extension directory) [`write_kept_files`] wrote for `harness`: only when
/// its hooks file calls `volee hook HARNESS`, so a file of the user's that took its place is
/// left alone. Whether it was removed.
pub fn remove_kept_file(path: &Path, harness: &str) -> std::io::Result<bool> {
    let is_dir = path.is_dir();
    let hooks = if is_dir {
        path.join(instrument::EXTENSION_HOOKS_FILE)
    } else {
        path.to_path_buf()
    };
    let marker = instrument::hook_marker(harness);
    if !std::fs::read_to_string(&hooks).is_ok_and(|t| t.contains(&marker)) {
        return Ok(false);
    }
    if is_dir {
        std::fs::remove_dir_all(path)?;
    } else {
        std::fs::remove_file(path)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn request(harness: &str, env: &[(&str, &str)], hooks_extension: bool) -> LaunchRequest {
        LaunchRequest {
            harness: harness.into(),
            command: vec![harness.into()],
            cwd: "/".into(),
            name: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            tmux_socket: String::new(),
            tmux_session: None,
            caller_pane: None,
            harness_version: None,
            profile_fit: volee_protocol::ProfileFit::Generic,
            session_id: None,
            hooks_extension,
            zellij_session: None,
            typed_prompt: None,
            restore: None,
            window: None,
            budget: None,
            budget_usd: None,
        }
    }

    #[test]
    fn an_own_hooks_file_is_written_private_and_removed_only_while_it_is_volees() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().display().to_string();
        let req = request("grok", &[("HOME", &h)], false);
        let written = write_kept_files_with_home(&req, Path::new("/opt/volee"), None).unwrap();
        let file = home.path().join(".grok/hooks/volee-hooks.json");
        assert_eq!(written, std::slice::from_ref(&file));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("'/opt/volee' hook grok "), "{text}");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Another harness's marker is not this one's; a file the user put there is not volee's.
        assert!(!remove_kept_file(&file, "copilot").unwrap());
        assert!(remove_kept_file(&file, "grok").unwrap());
        assert!(!file.exists());
        std::fs::write(&file, r#"{"hooks": {}}"#).unwrap();
        assert!(!remove_kept_file(&file, "grok").unwrap());
        assert!(file.exists());
        assert!(!remove_kept_file(&home.path().join("gone"), "grok").unwrap());
    }

    #[test]
    fn the_gemini_extension_comes_only_when_the_cli_asked_for_it() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().display().to_string();
        let bin = Path::new("/opt/volee");
        let unasked = request("gemini", &[("HOME", &h)], false);
        assert!(write_kept_files_with_home(&unasked, bin, None)
            .unwrap()
            .is_empty());
        let asked = request("gemini", &[], true);
        // No HOME in the launch: the daemon's stands in.
        let written = write_kept_files_with_home(&asked, bin, Some(h.clone())).unwrap();
        let dir = home.path().join(".gemini/extensions/volee-hooks");
        assert_eq!(written, std::slice::from_ref(&dir));
        assert!(dir.join("gemini-extension.json").is_file());
        assert!(remove_kept_file(&dir, "gemini").unwrap());
        assert!(!dir.exists());
        // Nowhere to put it: the launch is refused with why.
        let err = write_kept_files_with_home(&asked, bin, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "HOME is not set: cannot place volee's Gemini CLI extension"
        );
        let err = write_kept_files_with_home(
            &request("copilot", &[("COPILOT_HOME", "rel")], false),
            bin,
            None,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("COPILOT_HOME is not an absolute path"),
            "{err}"
        );
        // Harnesses that keep nothing.
        for none in ["claude", "qwen", "codex", "generic", "no-such-harness"] {
            assert!(
                write_kept_files_with_home(&request(none, &[("HOME", &h)], false), bin, None)
                    .unwrap()
                    .is_empty()
            );
        }
    }
}
