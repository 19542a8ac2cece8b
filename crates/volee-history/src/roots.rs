//! Where past sessions are looked for: each profile's sessions directory under its home — the
//! home its variable names (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, …) when set, else `HOME/<dir>`.

use std::path::PathBuf;

use serde::Serialize;
use volee_harness::{profiles, HistoryKind};

/// One harness's sessions directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Root {
    pub harness: String,
    #[serde(skip)]
    pub kind: HistoryKind,
    pub path: PathBuf,
    /// Where the path came from: `HOME` or the variable's name.
    pub from: String,
}

/// The roots under one environment (`get` reads a variable); an environment with neither
/// `HOME` nor the harness's variable gives none for it.
pub fn roots(get: impl Fn(&str) -> Option<String>) -> Vec<Root> {
    let non_empty = |k: &str| get(k).filter(|v| !v.is_empty());
    let mut out = Vec::new();
    for p in profiles() {
        let h = p.history;
        if h.kind == HistoryKind::None {
            continue;
        }
        let home = (!h.home_env.is_empty())
            .then(|| {
                non_empty(h.home_env).map(|v| {
                    let v = PathBuf::from(v);
                    let home = if h.env_is_home { v.join(h.home_dir) } else { v };
                    (home, h.home_env.to_owned())
                })
            })
            .flatten()
            .or_else(|| {
                non_empty("HOME").map(|home| (PathBuf::from(home).join(h.home_dir), "HOME".into()))
            });
        if let Some((home, from)) = home {
            out.push(Root {
                harness: p.name.to_owned(),
                kind: h.kind,
                path: home.join(h.sessions),
                from,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_variable_moves_only_its_harness() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "CODEX_HOME" => Some("/srv/codex".to_owned()),
            "CLAUDE_CONFIG_DIR" => Some(String::new()),
            _ => None,
        };
        let roots = roots(env);
        let of = |h: &str| {
            roots
                .iter()
                .find(|r| r.harness == h)
                .map(|r| r.path.clone())
        };
        assert_eq!(of("codex"), Some(PathBuf::from("/srv/codex/sessions")));
        // An empty variable is unset.
        assert_eq!(
            of("claude"),
            Some(PathBuf::from("/home/u/.claude/projects"))
        );
        assert_eq!(of("qwen"), Some(PathBuf::from("/home/u/.qwen/projects")));
        assert_eq!(
            of("copilot"),
            Some(PathBuf::from("/home/u/.copilot/session-state"))
        );
        assert_eq!(of("grok"), Some(PathBuf::from("/home/u/.grok/sessions")));
        assert_eq!(of("gemini"), Some(PathBuf::from("/home/u/.gemini/tmp")));
        assert_eq!(of("aider"), None);
        // GEMINI_CLI_HOME stands for HOME.
        let moved = super::roots(|k| match k {
            "HOME" => Some("/home/u".to_owned()),
            "GEMINI_CLI_HOME" => Some("/srv/g".to_owned()),
            _ => None,
        });
        let gemini = moved
            .iter()
            .find(|r| r.harness == "gemini")
            .map(|r| r.path.clone());
        assert_eq!(gemini, Some(PathBuf::from("/srv/g/.gemini/tmp")));
    }
}
