//! Where past sessions are looked for: each profile's sessions directory — under the first of
//! its home variables that is set (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_DATA_HOME`, …, then
//! `HOME`) — and, for a harness that keeps its history in the project (Aider), the project
//! directories volee has seen.

use std::path::{Path, PathBuf};

use serde::Serialize;
use volee_harness::{profiles, HistoryKind};

/// One harness's sessions directory (or, for Aider, one project directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Root {
    pub harness: String,
    #[serde(skip)]
    pub kind: HistoryKind,
    pub path: PathBuf,
    /// Where the path came from: the variable's name (`HOME`, `CODEX_HOME`, …), or the project
    /// directory's origin.
    pub from: String,
}

/// The roots under one environment (`get` reads a variable); an environment with none of a
/// harness's variables gives none for it.
pub fn roots(get: impl Fn(&str) -> Option<String>) -> Vec<Root> {
    let non_empty = |k: &str| get(k).filter(|v| !v.is_empty());
    let mut out = Vec::new();
    for p in profiles() {
        let h = p.history;
        if h.kind == HistoryKind::None {
            continue;
        }
        let found = h
            .homes
            .iter()
            .find_map(|(var, under)| non_empty(var).map(|v| (PathBuf::from(v).join(under), var)));
        if let Some((path, var)) = found {
            out.push(Root {
                harness: p.name.to_owned(),
                kind: h.kind,
                path,
                from: (*var).to_owned(),
            });
        }
    }
    out
}

/// The roots of harnesses that keep their history in the project (Aider's
/// `.aider.chat.history.md` in the git root): for each directory (an agent's working
/// directory, with where it came from), the directory and the git root above it. Relative
/// paths and directories already in `have` are left out.
pub fn project_roots(dirs: &[(PathBuf, String)], have: &[Root]) -> Vec<Root> {
    let mut places: Vec<(PathBuf, String)> = Vec::new();
    for (dir, from) in dirs {
        if !dir.is_absolute() {
            continue;
        }
        // The path Aider itself works with (a directory gone is left out).
        let Ok(dir) = std::fs::canonicalize(dir) else {
            continue;
        };
        let git = git_root(&dir);
        for place in std::iter::once(dir).chain(git) {
            if !places.iter().any(|(p, _)| *p == place) {
                places.push((place, from.clone()));
            }
        }
    }
    let mut out: Vec<Root> = Vec::new();
    for p in profiles() {
        let h = p.history;
        if h.kind == HistoryKind::None || !h.homes.is_empty() {
            continue;
        }
        for (dir, from) in &places {
            if have
                .iter()
                .chain(&out)
                .any(|r| r.path == *dir && r.kind == h.kind)
            {
                continue;
            }
            out.push(Root {
                harness: p.name.to_owned(),
                kind: h.kind,
                path: dir.clone(),
                from: from.clone(),
            });
        }
    }
    out
}

/// The nearest directory at or above `dir` that holds `.git` (a directory, or a worktree's
/// file), when it is not `dir` itself.
fn git_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .filter(|d| *d != dir)
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn of(roots: &[Root], h: &str) -> Option<PathBuf> {
        roots
            .iter()
            .find(|r| r.harness == h)
            .map(|r| r.path.clone())
    }

    #[test]
    fn a_home_variable_moves_only_its_harness() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "CODEX_HOME" => Some("/srv/codex".to_owned()),
            "CLAUDE_CONFIG_DIR" => Some(String::new()),
            _ => None,
        };
        let roots = roots(env);
        assert_eq!(
            of(&roots, "codex"),
            Some(PathBuf::from("/srv/codex/sessions"))
        );
        // An empty variable is unset.
        assert_eq!(
            of(&roots, "claude"),
            Some(PathBuf::from("/home/u/.claude/projects"))
        );
        assert_eq!(
            of(&roots, "qwen"),
            Some(PathBuf::from("/home/u/.qwen/projects"))
        );
        assert_eq!(
            of(&roots, "copilot"),
            Some(PathBuf::from("/home/u/.copilot/session-state"))
        );
        assert_eq!(
            of(&roots, "grok"),
            Some(PathBuf::from("/home/u/.grok/sessions"))
        );
        assert_eq!(
            of(&roots, "gemini"),
            Some(PathBuf::from("/home/u/.gemini/tmp"))
        );
        assert_eq!(
            of(&roots, "opencode"),
            Some(PathBuf::from("/home/u/.local/share/opencode"))
        );
        assert_eq!(
            of(&roots, "volee"),
            Some(PathBuf::from("/home/u/.local/share/volee/sessions"))
        );
        // Aider's history is in the projects, not under a home.
        assert_eq!(of(&roots, "aider"), None);
        // GEMINI_CLI_HOME stands for HOME; XDG_DATA_HOME moves OpenCode's and volee's data;
        // VOLEE_HOME moves volee's before XDG does.
        let moved = super::roots(|k| match k {
            "HOME" => Some("/home/u".to_owned()),
            "GEMINI_CLI_HOME" => Some("/srv/g".to_owned()),
            "XDG_DATA_HOME" => Some("/srv/data".to_owned()),
            _ => None,
        });
        assert_eq!(
            of(&moved, "gemini"),
            Some(PathBuf::from("/srv/g/.gemini/tmp"))
        );
        assert_eq!(
            of(&moved, "opencode"),
            Some(PathBuf::from("/srv/data/opencode"))
        );
        assert_eq!(
            of(&moved, "volee"),
            Some(PathBuf::from("/srv/data/volee/sessions"))
        );
        let volee_home = super::roots(|k| match k {
            "XDG_DATA_HOME" => Some("/srv/data".to_owned()),
            "VOLEE_HOME" => Some("/srv/v".to_owned()),
            _ => None,
        });
        assert_eq!(
            of(&volee_home, "volee"),
            Some(PathBuf::from("/srv/v/data/sessions"))
        );
        assert_eq!(of(&volee_home, "claude"), None);
    }

    #[test]
    fn an_agents_directory_gives_it_and_its_git_root_to_aider() {
        let dir = std::env::temp_dir().join(format!("volee-roots-{}", std::process::id()));
        let sub = dir.join("repo/src");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(dir.join("repo/.git")).unwrap();
        let repo = std::fs::canonicalize(dir.join("repo")).unwrap();
        let sub = std::fs::canonicalize(&sub).unwrap();
        let dirs = vec![
            (sub.clone(), "cwd of agent a".to_owned()),
            (repo.clone(), "cwd of agent b".to_owned()),
            (PathBuf::from("relative/dir"), "cwd of agent c".to_owned()),
            (dir.join("gone"), "cwd of agent d".to_owned()),
        ];
        let roots = project_roots(&dirs, &[]);
        let paths: Vec<&Path> = roots.iter().map(|r| r.path.as_path()).collect();
        assert_eq!(paths, [sub.as_path(), repo.as_path()], "{roots:#?}");
        assert!(roots.iter().all(|r| r.harness == "aider"));
        assert_eq!(roots[0].from, "cwd of agent a");
        // Known already: none again.
        assert!(project_roots(&dirs, &roots).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
