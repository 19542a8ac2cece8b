//! Which linked git worktree a directory is in, from git's own files (no `git` process): a
//! linked worktree's top directory holds a `.git` *file* `gitdir: <common>/worktrees/<id>`, whose
//! `HEAD` names the branch (`ref: refs/heads/<branch>`) or a commit (detached).

use std::path::{Path, PathBuf};

use volee_protocol::Worktree;

/// Largest `.git` or `HEAD` file read.
const MAX_READ: u64 = 4096;

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_READ)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The linked worktree `dir` is in (its top directory and branch); None in a main working tree,
/// outside any repository, or when git's files cannot be read.
pub fn linked_worktree(dir: &Path) -> Option<Worktree> {
    let mut cur: Option<&Path> = Some(dir);
    while let Some(d) = cur {
        let dot_git = d.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(m) if m.is_dir() => return None,
            Ok(m) if m.is_file() => {
                let text = read_small(&dot_git)?;
                let gitdir = text.lines().next()?.strip_prefix("gitdir:")?.trim();
                let gitdir = if Path::new(gitdir).is_absolute() {
                    PathBuf::from(gitdir)
                } else {
                    d.join(gitdir)
                };
                // A submodule's `.git` file points into `modules/`, not `worktrees/`.
                if gitdir.parent()?.file_name()? != "worktrees" {
                    return None;
                }
                let head = read_small(&gitdir.join("HEAD"))?;
                let branch = head
                    .trim()
                    .strip_prefix("ref: refs/heads/")
                    .map(str::to_string);
                return Some(Worktree {
                    path: d.display().to_string(),
                    branch,
                });
            }
            _ => cur = d.parent(),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_worktree_is_found_from_any_subdirectory() {
        let root = tempfile::tempdir().unwrap();
        let main = root.path().join("repo");
        let common = main.join(".git");
        std::fs::create_dir_all(common.join("worktrees/wt1")).unwrap();
        std::fs::write(
            common.join("worktrees/wt1/HEAD"),
            "ref: refs/heads/volee/wt1\n",
        )
        .unwrap();
        let wt = root.path().join("repo.worktrees/wt1");
        std::fs::create_dir_all(wt.join("src/deep")).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", common.join("worktrees/wt1").display()),
        )
        .unwrap();
        let found = linked_worktree(&wt.join("src/deep")).unwrap();
        assert_eq!(found.path, wt.display().to_string());
        assert_eq!(found.branch.as_deref(), Some("volee/wt1"));
        // The main working tree is not a linked worktree.
        std::fs::create_dir_all(main.join("src")).unwrap();
        assert_eq!(linked_worktree(&main.join("src")), None);
        // Detached HEAD: no branch.
        std::fs::write(common.join("worktrees/wt1/HEAD"), "0123abcd\n").unwrap();
        assert_eq!(linked_worktree(&wt).unwrap().branch, None);
        // A submodule's .git file is no worktree; nor is a hostile one.
        let sub = root.path().join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(".git"), "gitdir: ../repo/.git/modules/sub\n").unwrap();
        assert_eq!(linked_worktree(&sub), None);
        std::fs::write(sub.join(".git"), "garbage").unwrap();
        assert_eq!(linked_worktree(&sub), None);
        assert_eq!(linked_worktree(Path::new("/nonexistent/dir")), None);
    }
}
