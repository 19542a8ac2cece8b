//! `volee setup HARNESS [--undo]`: for a harness that keeps every hook in one file of the user's
//! (Cursor's `~/.cursor/hooks.json`), volee's entries go in only when the user asks — a backup
//! first, every other entry kept — and come out again with `--undo` or `volee down`.

use std::path::{Path, PathBuf};

use volee_harness::Instrumentation;

use crate::error::{self, CliError, CliResult, Exit};
use crate::output::out;

pub fn setup(harness: &str, undo: bool) -> CliResult {
    let Some(profile) = volee_harness::profile(harness) else {
        return Err(error::unknown_harness(harness));
    };
    let Instrumentation::UserOptIn(rel) = profile.instrumentation else {
        return Err(CliError::user(format!(
            "{} needs no setup: volee gives it its hooks at each launch, without touching its settings",
            profile.display_name
        )));
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| CliError::env("HOME is not set"))?;
    let path = home.join(rel);
    if undo {
        match unsetup(harness, &path)? {
            0 => out(&format!("{} holds no hooks of volee's", path.display())),
            n => out(&format!("took volee's {n} hooks out of {}", path.display())),
        }
        return Ok(());
    }
    let existing = read_user_json(&path)?;
    let bin = std::env::current_exe()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?
        .display()
        .to_string();
    let merged = volee_harness::instrument::user_hooks_merge(harness, existing.clone(), &bin)
        .map_err(|why| {
            error::left_unchanged(format!(
                "{} is not a hooks file volee understands: {why}",
                path.display()
            ))
        })?;
    let dir = path.parent().unwrap_or(&home);
    std::fs::create_dir_all(dir).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    if existing.is_some() {
        let backup = path.with_extension("json.volee-backup");
        std::fs::copy(&path, &backup).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
        out(&format!("backup: {}", backup.display()));
    }
    write_user_json(&path, &merged)?;
    out(&format!(
        "volee's hooks are in {}; `volee setup {harness} --undo` or `volee down` takes them out",
        path.display()
    ));
    Ok(())
}

/// Take volee's entries for `harness` out of the user's hooks file at `path`; how many there
/// were.
pub fn unsetup(harness: &str, path: &Path) -> CliResult<usize> {
    let Some(file) = read_user_json(path)? else {
        return Ok(0);
    };
    let (cleaned, removed) = volee_harness::instrument::user_hooks_unmerge(harness, file);
    if removed > 0 {
        write_user_json(path, &cleaned)?;
    }
    Ok(removed)
}

/// A JSON file of the user's; None when there is none.
fn read_user_json(path: &Path) -> CliResult<Option<serde_json::Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            error::left_unchanged(format!("{} is not valid JSON: {e}", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::from_error(Exit::Environment, &e)),
    }
}

/// Write a file of the user's atomically, keeping its permissions (0600 for a new one).
fn write_user_json(path: &Path, value: &serde_json::Value) -> CliResult {
    use std::os::unix::fs::PermissionsExt;
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0o600);
    volee_daemon::persist::write_atomic(path, &bytes)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| CliError::from_error(Exit::Environment, &e))
}
