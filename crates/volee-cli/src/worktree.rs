//! `launch --worktree NAME` and `stop --remove-worktree`: volee makes the git worktree itself,
//! the same for every harness (docs/adr/0009-worktrees.md), and removes it only when nothing
//! would be lost.
//!
//! Layout: the worktrees of repository `R` live beside it in `R.worktrees/NAME`, on a new branch
//! `volee/NAME` from the current HEAD.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{self, CliError, CliResult, Exit};

/// The prefix of the branches volee creates.
pub const BRANCH_PREFIX: &str = "volee/";

/// `git -C dir ARGS`: its trimmed stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Is `name` usable as a worktree directory and in a branch name? Letters, digits, `.`, `_`,
/// `-`; no leading `.` or `-`; at most 64 characters (no `/`, so no path tricks).
pub fn check_name(name: &str) -> CliResult {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(error::bad_worktree_name(name))
    }
}

/// A worktree volee made: where it is, its branch, and where in it the agent starts (the same
/// subdirectory the caller was in).
#[derive(Debug)]
pub struct Made {
    pub path: PathBuf,
    pub branch: String,
    pub cwd: PathBuf,
}

/// `git worktree add -b volee/NAME R.worktrees/NAME HEAD` for the repository `cwd` is in.
pub fn create(cwd: &Path, name: &str) -> CliResult<Made> {
    check_name(name)?;
    let top =
        git(cwd, &["rev-parse", "--show-toplevel"]).map_err(|e| error::not_a_repository(cwd, e))?;
    let top = PathBuf::from(top);
    // From inside a linked worktree, the new one goes beside the main repository all the same.
    let common = git(
        cwd,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map(PathBuf::from)
    .map_err(|e| CliError::env(format!("git rev-parse --git-common-dir: {e}")))?;
    let main = if common.file_name().is_some_and(|n| n == ".git") {
        common
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or(top.clone())
    } else {
        top.clone()
    };
    let repo_name = main
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "repo".into());
    let parent = main.parent().unwrap_or(Path::new("/"));
    let path = parent.join(format!("{repo_name}.worktrees")).join(name);
    let branch = format!("{BRANCH_PREFIX}{name}");
    if path.exists() {
        return Err(error::worktree_path_taken(name, &path));
    }
    if git(
        &main,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok()
    {
        return Err(error::worktree_branch_taken(name, &branch));
    }
    git(
        &top,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            &branch,
            &path.display().to_string(),
            "HEAD",
        ],
    )
    .map_err(|e| CliError::env(format!("git worktree add failed: {e}")))?;
    // Start where the caller was, relative to its repository's top.
    let cwd = cwd
        .canonicalize()
        .ok()
        .zip(top.canonicalize().ok())
        .and_then(|(c, t)| c.strip_prefix(&t).ok().map(Path::to_path_buf))
        .filter(|rel| !rel.as_os_str().is_empty())
        .map(|rel| path.join(rel))
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| path.clone());
    Ok(Made { path, branch, cwd })
}

/// What removing the worktree at `path` (on `branch`, None when detached) would lose: its
/// uncommitted changes (`git status --porcelain` lines) and the commits of its branch that no
/// other local branch and no remote ref reaches (`git log --oneline` lines). Empty: nothing.
pub fn would_lose(path: &Path, branch: Option<&str>) -> CliResult<Vec<String>> {
    let mut lost = Vec::new();
    let status = git(path, &["status", "--porcelain", "--untracked-files=all"])
        .map_err(|e| CliError::env(format!("git status in {}: {e}", path.display())))?;
    lost.extend(status.lines().map(|l| format!("uncommitted: {l}")));
    let head = match branch {
        Some(b) => format!("refs/heads/{b}"),
        None => "HEAD".into(),
    };
    // Every other local branch and remote ref, by exact name (no glob: a branch name may hold
    // glob characters).
    let refs = git(
        path,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads",
            "refs/remotes",
        ],
    )
    .map_err(|e| CliError::env(format!("git for-each-ref in {}: {e}", path.display())))?;
    let mut args = vec![
        "log".to_string(),
        "--oneline".into(),
        head.clone(),
        "--not".into(),
    ];
    args.extend(refs.lines().filter(|r| *r != head).map(str::to_string));
    args.push("--".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let commits = git(path, &args)
        .map_err(|e| CliError::env(format!("git log in {}: {e}", path.display())))?;
    lost.extend(
        commits
            .lines()
            .map(|l| format!("commit on no other branch: {l}")),
    );
    Ok(lost)
}

/// Remove the worktree at `path` after [`would_lose`] found nothing, and its branch when asked.
pub fn remove(path: &Path, branch: Option<&str>, delete_branch: bool) -> CliResult<String> {
    let lost = would_lose(path, branch)?;
    if !lost.is_empty() {
        return Err(error::worktree_would_lose(path, &lost));
    }
    let common = git(
        path,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map(PathBuf::from)
    .map_err(|e| CliError::env(format!("git rev-parse: {e}")))?;
    git(
        &common,
        &["worktree", "remove", &path.display().to_string()],
    )
    .map_err(|e| CliError::env(format!("git worktree remove failed: {e}")))?;
    let mut said = format!("removed worktree {}", path.display());
    match (branch, delete_branch) {
        (Some(b), true) => {
            git(&common, &["branch", "-D", b])
                .map_err(|e| CliError::new(Exit::Environment, format!("git branch -D {b}: {e}")))?;
            said.push_str(&format!(" and branch {b}"));
        }
        (Some(b), false) => said.push_str(&format!("; branch {b} kept")),
        (None, _) => {}
    }
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_or_break_refs() {
        for good in ["fix-1", "a", "feature_x.2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "", "../x", "a/b", ".hidden", "-flag", "x.lock", "a..b", "sp ace", "é",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name(&"x".repeat(65)).is_err());
    }
}
