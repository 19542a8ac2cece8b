//! Which processes are harness agents: each profile's process rule, helpers skipped, the innermost
//! process of a launcher chain kept. Only the user's own processes count: another user's process
//! named `claude` is their business, and nothing about it is trusted.

use std::collections::HashMap;

use crate::scan::Proc;

/// Is the process run by `uid`, with `uid`'s rights (real and effective uid)? A process whose
/// owner could not be read is nobody's.
pub fn owned_by(p: &Proc, uid: u32) -> bool {
    p.owner.is_some_and(|o| o.real == uid && o.effective == uid)
}

/// How to recognise one harness's processes (built from its profile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRule {
    pub harness: String,
    /// Program names: native binaries' `comm`/argv0 basename, and the script name a node/bun
    /// wrapper runs (`.bin/gemini`).
    pub names: Vec<String>,
    /// Substrings of an argument that mark the harness's own script (`@qwen-code/qwen-code/`).
    pub script_markers: Vec<String>,
    /// Substrings of an argument that mark a helper of the harness, never an agent
    /// (`app-server` for Codex's daemon).
    pub helper_markers: Vec<String>,
}

/// A harness agent found in a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub harness: String,
    /// The innermost process of the agent (where its session runs).
    pub pid: u32,
    /// Its launcher chain, outermost first (wrappers that matched the same harness).
    pub wrappers: Vec<u32>,
}

/// `/nix/store/…/bin/.claude-unwrapped` → `claude`; `claude.exe` → `claude`.
fn program_name(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.strip_prefix('.').unwrap_or(base);
    let base = base.strip_suffix("-unwrapped").unwrap_or(base);
    base.strip_suffix(".exe").unwrap_or(base)
}

/// Runtimes that run a harness written in JavaScript; `comm` of node's threads may be
/// `node-MainThread` or `MainThread`, so argv decides, not `comm`.
/// Cursor Agent's bundled node runs under the name of the symlink that started it (`agent`, a
/// name other programs use too): its script argument decides, as for any runtime.
const RUNTIMES: &[&str] = &[
    "node",
    "bun",
    "deno",
    "node-MainThread",
    "MainThread",
    "agent",
];

/// Does `p` look like `rule`'s harness (whoever runs it; see [`owned_by`])?
pub fn matches(rule: &ProcessRule, p: &Proc) -> bool {
    if p.stat.state == 'Z' {
        return false;
    }
    if p.argv
        .iter()
        .any(|a| rule.helper_markers.iter().any(|h| a.contains(h.as_str())))
    {
        return false;
    }
    let name_is = |s: &str| rule.names.iter().any(|n| n == s);
    let argv0 = p.argv.first().map(|a| program_name(a)).unwrap_or("");
    // comm is cut at 15 bytes: ".claude-unwrapped" arrives as ".claude-unwrapp".
    let comm = program_name(&p.stat.comm);
    if name_is(argv0)
        || name_is(comm)
        || rule
            .names
            .iter()
            .any(|n| p.stat.comm.starts_with(&format!(".{n}-unwr")))
    {
        return true;
    }
    let runtime = RUNTIMES.contains(&argv0) || RUNTIMES.contains(&p.stat.comm.as_str());
    runtime
        && p.argv
            .iter()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .take(1)
            .any(|script| {
                name_is(program_name(script))
                    || rule
                        .script_markers
                        .iter()
                        .any(|m| script.contains(m.as_str()))
            })
}

/// Could a process with this `comm` match any rule? (A cheap pre-filter: only these need their
/// `cmdline` read.) Runtimes and nix-wrapped names count; so does any rule's name.
pub fn could_match(rules: &[ProcessRule], comm: &str) -> bool {
    RUNTIMES.contains(&comm)
        || comm.starts_with('.')
        || rules
            .iter()
            .any(|r| r.names.iter().any(|n| comm == n || program_name(comm) == n))
}

/// The agents of user `uid` among `procs`: every matching process of theirs, reduced to the
/// innermost of each chain of matching parent → child processes of the same harness. Other
/// users' processes are never agents, nor links of a chain.
pub fn find_agents(procs: &[Proc], rules: &[ProcessRule], uid: u32) -> Vec<Found> {
    let by_pid: HashMap<u32, &Proc> = procs.iter().map(|p| (p.stat.pid, p)).collect();
    let mut matched: HashMap<u32, &str> = HashMap::new();
    for p in procs.iter().filter(|p| owned_by(p, uid)) {
        if let Some(rule) = rules.iter().find(|r| matches(r, p)) {
            matched.insert(p.stat.pid, rule.harness.as_str());
        }
    }
    let mut found: Vec<Found> = matched
        .iter()
        // Innermost: no matching child of the same harness.
        .filter(|(pid, harness)| {
            !procs
                .iter()
                .any(|c| c.stat.ppid == **pid && matched.get(&c.stat.pid) == Some(*harness))
        })
        .map(|(&pid, &harness)| {
            let mut wrappers = Vec::new();
            let mut cur = by_pid.get(&pid).map(|p| p.stat.ppid);
            while let Some(parent) = cur {
                if matched.get(&parent) != Some(&harness) || wrappers.contains(&parent) {
                    break;
                }
                wrappers.push(parent);
                cur = by_pid.get(&parent).map(|p| p.stat.ppid);
            }
            wrappers.reverse();
            Found {
                harness: harness.to_string(),
                pid,
                wrappers,
            }
        })
        .collect();
    found.sort_by_key(|f| f.pid);
    found
}
