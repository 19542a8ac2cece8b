//! Discovery glue: the profiles' process rules, which found processes volee launched itself, and
//! which tmux pane a found process lives in.

use std::collections::{HashMap, HashSet};

use volee_procscan::{Found, Proc, ProcessRule};

/// The process rules of every harness profile.
pub fn rules() -> Vec<ProcessRule> {
    volee_harness::profiles()
        .into_iter()
        .filter(|p| !p.process_names.is_empty())
        .map(|p| ProcessRule {
            harness: p.name.to_string(),
            names: p.process_names.iter().map(|s| s.to_string()).collect(),
            script_markers: p.process_scripts.iter().map(|s| s.to_string()).collect(),
            helper_markers: p.process_helpers.iter().map(|s| s.to_string()).collect(),
        })
        .collect()
}

/// `pid` and its ancestors, innermost first (bounded against loops in a torn scan).
pub fn ancestry(pid: u32, parents: &HashMap<u32, u32>) -> Vec<u32> {
    let mut chain = vec![pid];
    let mut cur = pid;
    while let Some(&parent) = parents.get(&cur) {
        if parent == 0 || chain.contains(&parent) || chain.len() > 64 {
            break;
        }
        chain.push(parent);
        cur = parent;
    }
    chain
}

/// Is this found agent one volee launched (its process or an ancestor is a launched agent's)?
pub fn is_launched(found: &Found, parents: &HashMap<u32, u32>, launched: &HashSet<u32>) -> bool {
    ancestry(found.pid, parents)
        .iter()
        .any(|p| launched.contains(p))
}

/// Parent of every process in a scan.
pub fn parents(procs: &[Proc]) -> HashMap<u32, u32> {
    procs.iter().map(|p| (p.stat.pid, p.stat.ppid)).collect()
}

/// The command that asks a found process's program for its version: the runtime (or script
/// interpreter) and its script for wrappers (`node …/cli.js --version`), else the executable.
pub fn version_command(argv: &[String], exe: Option<&std::path::Path>) -> Vec<String> {
    let runtime = argv.first().is_some_and(|a| {
        let base = a.rsplit('/').next().unwrap_or(a);
        // Runtimes, and interpreters of scripts started by their `#!` line.
        matches!(
            base,
            "node" | "bun" | "deno" | "sh" | "bash" | "dash" | "zsh" | "python3" | "python"
        )
    });
    let mut cmd = if runtime {
        let script = argv.iter().skip(1).find(|a| !a.starts_with('-'));
        match (argv.first(), script) {
            (Some(rt), Some(script)) => vec![rt.clone(), script.clone()],
            _ => return Vec::new(),
        }
    } else {
        match exe
            .map(|e| e.display().to_string())
            .or_else(|| argv.first().cloned())
        {
            Some(program) => vec![program],
            None => return Vec::new(),
        }
    };
    cmd.push("--version".into());
    cmd
}

/// A pane of some tmux server, as `list-panes -a` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub pane: String,
    pub pid: u32,
    pub tty: String,
    pub session: String,
    pub window: String,
}

/// The pane a process lives in: the pane whose first process is it or one of its ancestors, else
/// the pane on its terminal.
pub fn pane_of<'a>(
    chain: &[u32],
    tty: Option<&str>,
    panes: &'a [PaneInfo],
) -> Option<&'a PaneInfo> {
    panes
        .iter()
        .find(|p| chain.contains(&p.pid))
        .or_else(|| tty.and_then(|t| panes.iter().find(|p| p.tty == t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launched_agents_are_recognised_through_wrappers() {
        let parents: HashMap<u32, u32> = [(301, 300), (300, 50), (50, 1)].into();
        let found = Found {
            harness: "gemini".into(),
            pid: 301,
            wrappers: vec![300],
        };
        assert!(is_launched(&found, &parents, &[300].into()));
        assert!(!is_launched(&found, &parents, &[999].into()));
        assert_eq!(ancestry(301, &parents), [301, 300, 50, 1]);
    }

    #[test]
    fn panes_by_ancestry_then_tty() {
        let panes = vec![
            PaneInfo {
                pane: "%1".into(),
                pid: 50,
                tty: "/dev/pts/3".into(),
                session: "s".into(),
                window: "@1".into(),
            },
            PaneInfo {
                pane: "%2".into(),
                pid: 60,
                tty: "/dev/pts/4".into(),
                session: "s".into(),
                window: "@2".into(),
            },
        ];
        assert_eq!(
            pane_of(&[301, 300, 50, 1], None, &panes).map(|p| p.pane.as_str()),
            Some("%1")
        );
        assert_eq!(
            pane_of(&[7, 1], Some("/dev/pts/4"), &panes).map(|p| p.pane.as_str()),
            Some("%2")
        );
        assert_eq!(pane_of(&[7, 1], Some("/dev/pts/9"), &panes), None);
    }

    #[test]
    fn version_commands_follow_the_process_shape() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            version_command(
                &v(&[
                    "/usr/bin/node",
                    "--expose-gc",
                    "/n/@qwen-code/qwen-code/cli.js",
                    "-i",
                    "x"
                ]),
                None
            ),
            v(&[
                "/usr/bin/node",
                "/n/@qwen-code/qwen-code/cli.js",
                "--version"
            ])
        );
        assert_eq!(
            version_command(
                &v(&["/n/.bin/claude", "--resume", "x"]),
                Some(std::path::Path::new("/n/claude.exe"))
            ),
            v(&["/n/claude.exe", "--version"])
        );
        assert!(version_command(&v(&["node"]), None).is_empty());
    }

    #[test]
    fn every_harness_profile_has_a_process_rule() {
        let names: Vec<String> = rules().into_iter().map(|r| r.harness).collect();
        for name in [
            "claude", "codex", "gemini", "qwen", "grok", "copilot", "opencode",
        ] {
            assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
        }
    }
}
