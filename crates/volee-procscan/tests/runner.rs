//! Discovery on fixture `/proc` trees shaped like the real probes of the harnesses
//! (`../shared/reference/screens/*-mock-done.txt`, "process tree" sections; paths sanitised).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use volee_procscan::{find_agents, Found, ProcRoot, ProcessRule};

/// The user whose agents the fixture tests look for.
const ME: u32 = 1000;
/// Another user of the machine.
const OTHER: u32 = 1001;

/// Write one process of [`ME`] into a fixture tree.
fn proc(root: &Path, pid: u32, ppid: u32, comm: &str, state: char, argv: &[&str]) {
    proc_as(root, pid, ppid, comm, state, argv, (ME, ME));
}

/// Write one process run by `(real, effective)` uids into a fixture tree.
fn proc_as(
    root: &Path,
    pid: u32,
    ppid: u32,
    comm: &str,
    state: char,
    argv: &[&str],
    (real, effective): (u32, u32),
) {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    // The 52 fields a kernel since 3.5 writes (the parser needs at least the first 37).
    let stat = format!(
        "{pid} ({comm}) {state} {ppid} {pid} {ppid} 34818 {pid} 4194560 1 0 0 0 5 2 0 0 20 0 12 0 {} 100000 200 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0",
        1000 + pid
    );
    std::fs::write(dir.join("stat"), stat).unwrap();
    let mut cmdline = argv.join("\0").into_bytes();
    cmdline.push(0);
    std::fs::write(dir.join("cmdline"), cmdline).unwrap();
    let status = format!(
        "Name:\t{comm}\nState:\t{state}\nPPid:\t{ppid}\nUid:\t{real}\t{effective}\t{effective}\t{effective}\nGid:\t{real}\t{real}\t{real}\t{real}\n"
    );
    std::fs::write(dir.join("status"), status).unwrap();
}

fn rule(harness: &str, names: &[&str], scripts: &[&str], helpers: &[&str]) -> ProcessRule {
    let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
    ProcessRule {
        harness: harness.into(),
        names: v(names),
        script_markers: v(scripts),
        helper_markers: v(helpers),
    }
}

fn rules() -> Vec<ProcessRule> {
    vec![
        rule("claude", &["claude"], &["@anthropic-ai/claude-code/"], &[]),
        rule("codex", &["codex"], &["@openai/codex/"], &["app-server"]),
        rule("gemini", &["gemini"], &["@google/gemini-cli/"], &[]),
        rule("qwen", &["qwen"], &["@qwen-code/qwen-code/"], &[]),
        rule("grok", &["grok"], &["@xai-official/grok/"], &[]),
    ]
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // Unrelated: init, a shell, tmux.
    proc(r, 1, 0, "systemd", 'S', &["/sbin/init"]);
    proc(
        r,
        100,
        1,
        "tmux: server",
        'S',
        &["tmux", "-L", "probe", "new-session"],
    );
    proc(r, 101, 100, "bash", 'S', &["-bash"]);
    // Claude Code 2.1.332: one native process (argv0 the .bin link, exe claude.exe).
    proc(
        r,
        200,
        101,
        "claude",
        'S',
        &[
            "/opt/p/node_modules/.bin/claude",
            "--session-id",
            "1111",
            "--",
            "run it",
        ],
    );
    proc(
        r,
        201,
        200,
        "python3",
        'S',
        &["/usr/bin/python3", "/opt/p/bin/mini-mcp.py", "claude"],
    );
    // Gemini 0.61.0: node relaunches itself; the inner node is the agent.
    proc(
        r,
        300,
        101,
        "node",
        'S',
        &[
            "node",
            "/opt/p/node_modules/.bin/gemini",
            "-m",
            "gemini-2.5-pro",
        ],
    );
    proc(
        r,
        301,
        300,
        "node",
        'S',
        &[
            "/usr/bin/node",
            "--max-old-space-size=12052",
            "/opt/p/node_modules/.bin/gemini",
            "-m",
            "gemini-2.5-pro",
        ],
    );
    proc(
        r,
        302,
        301,
        "python3",
        'S',
        &["/usr/bin/python3", "/opt/p/bin/mini-mcp.py", "gemini"],
    );
    // Qwen 0.24.4: three node processes.
    proc(
        r,
        400,
        101,
        "node",
        'S',
        &["node", "/opt/p/node_modules/.bin/qwen", "-i", "run it"],
    );
    proc(
        r,
        401,
        400,
        "node",
        'S',
        &[
            "/usr/bin/node",
            "--expose-gc",
            "/opt/p/node_modules/@qwen-code/qwen-code/cli.js",
            "-i",
            "run it",
        ],
    );
    proc(
        r,
        402,
        401,
        "MainThread",
        'S',
        &[
            "/usr/bin/node",
            "--expose-gc",
            "/opt/p/node_modules/@qwen-code/qwen-code/cli.js",
            "-i",
            "run it",
        ],
    );
    // Codex 0.171.0: node wrapper → native codex; its app-server daemon is a helper, reparented.
    proc(
        r,
        500,
        101,
        "node",
        'S',
        &["node", "/opt/p/node_modules/.bin/codex", "run it"],
    );
    proc(r, 501, 500, "codex", 'S', &["/opt/p/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex", "run it"]);
    proc(
        r,
        502,
        1,
        "codex",
        'S',
        &[
            "/root/.codex/packages/app-server-daemon/releases/0.171.0/bin/codex",
            "app-server",
            "--listen",
            "unix://",
        ],
    );
    // Grok Build 1.0.41: native (comm grok, exe grok-native).
    proc(
        r,
        600,
        101,
        "grok",
        'S',
        &["/opt/p/node_modules/.bin/grok", "-m", "mock", "run it"],
    );
    // nix: .claude-unwrapped, comm cut at 15 bytes.
    proc(
        r,
        700,
        101,
        ".claude-unwrapp",
        'S',
        &["/nix/store/abc-claude/bin/.claude-unwrapped"],
    );
    // A zombie claude is not an agent; a hostile name is just a name.
    proc(r, 800, 101, "claude", 'Z', &[]);
    proc(r, 801, 101, "a) b (c", 'S', &["a) b (c"]);
    // A user's script that merely mentions a harness in an argument is not it.
    proc(r, 802, 101, "bash", 'S', &["bash", "-c", "echo claude"]);
    // Hook commands and volee itself are not agents.
    proc(
        r,
        803,
        200,
        "volee",
        'S',
        &["/usr/bin/volee", "hook", "claude", "Stop"],
    );
    dir
}

#[test]
fn finds_each_harness_once_at_its_innermost_process() {
    let dir = fixture();
    let procs = ProcRoot::new(dir.path()).scan();
    assert_eq!(procs.len(), 20);
    let found = find_agents(&procs, &rules(), ME);
    let summary: Vec<(String, u32, Vec<u32>)> = found
        .iter()
        .map(
            |Found {
                 harness,
                 pid,
                 wrappers,
             }| (harness.clone(), *pid, wrappers.clone()),
        )
        .collect();
    assert_eq!(
        summary,
        vec![
            ("claude".to_string(), 200, vec![]),
            ("gemini".to_string(), 301, vec![300]),
            ("qwen".to_string(), 402, vec![400, 401]),
            ("codex".to_string(), 501, vec![500]),
            ("grok".to_string(), 600, vec![]),
            ("claude".to_string(), 700, vec![]),
        ]
    );
}

#[test]
fn hostile_names_parse_and_broken_entries_are_skipped() {
    let dir = fixture();
    let r = dir.path();
    std::fs::create_dir_all(r.join("900")).unwrap();
    std::fs::write(r.join("900/stat"), b"garbage").unwrap();
    std::fs::create_dir_all(r.join("notapid")).unwrap();
    let procs = ProcRoot::new(r).scan();
    let hostile = procs.iter().find(|p| p.stat.pid == 801).unwrap();
    assert_eq!(hostile.stat.comm, "a) b (c");
    assert_eq!(hostile.stat.ppid, 101);
    assert!(procs.iter().all(|p| p.stat.pid != 900));
}

#[test]
fn the_real_proc_has_this_process() {
    let me = std::process::id();
    let procs = ProcRoot::default().scan();
    let mine = procs
        .iter()
        .find(|p| p.stat.pid == me)
        .expect("own process in /proc");
    assert!(!mine.argv.is_empty());
    assert!(ProcRoot::default().cwd(me).is_some());
    assert!(ProcRoot::default()
        .environ(me)
        .is_some_and(|e| e.iter().any(|(k, _)| k == "PATH")));
}

#[test]
fn repeated_scans_reread_only_what_may_have_changed_and_miss_nothing() {
    use volee_procscan::{Scanner, REFRESH_EVERY};
    let dir = fixture();
    let r = dir.path();
    let rules = rules();
    let wants = |s: &volee_procscan::Stat| volee_procscan::could_match(&rules, &s.comm);
    // Without `uptime` (a fixture tree) every process counts as young: full scans.
    let mut scanner = Scanner::new(ProcRoot::new(r));
    let full = ProcRoot::new(r).scan_filtered(wants);
    assert_eq!(scanner.scan(wants), full);
    assert_eq!(scanner.scan(wants), full);
    assert_eq!(scanner.last_stats().read, full.len());

    // Every process is old now (start times are ~1,000 ticks, uptime 10,000 s).
    std::fs::write(r.join("uptime"), "10000.00 5000.00\n").unwrap();
    let first = scanner.scan(wants);
    assert_eq!(first, full);
    let candidates = full.iter().filter(|p| wants(&p.stat)).count();
    let mut reads = Vec::new();
    for _ in 0..REFRESH_EVERY {
        assert_eq!(
            scanner.scan(wants),
            full,
            "a cached scan differs from a full one"
        );
        reads.push(scanner.last_stats().read);
    }
    // Each scan reads the candidates and about a tenth of the rest; over a round, all of them.
    assert!(
        reads.iter().all(|&n| n >= candidates && n < full.len()),
        "{reads:?}"
    );
    assert_eq!(
        reads.iter().map(|n| n - candidates).sum::<usize>(),
        full.len() - candidates
    );

    // A new process is seen at the next scan, a vanished one is gone at the next scan.
    proc(r, 950, 101, "claude", 'S', &["claude"]);
    std::fs::remove_dir_all(r.join("101")).unwrap();
    let procs = scanner.scan(wants);
    assert!(procs
        .iter()
        .any(|p| p.stat.pid == 950 && p.argv == ["claude"]));
    assert!(procs.iter().all(|p| p.stat.pid != 101));
    assert!(find_agents(&procs, &rules, ME).iter().any(|f| f.pid == 950));

    // An old shell that execs into an agent (same pid) is seen within one refresh round.
    proc(r, 1, 0, "claude", 'S', &["claude", "--resume", "x"]);
    let mut seen_at = None;
    for i in 0..REFRESH_EVERY {
        let procs = scanner.scan(wants);
        if find_agents(&procs, &rules, ME).iter().any(|f| f.pid == 1) {
            seen_at = Some(i);
            break;
        }
    }
    assert!(seen_at.is_some(), "exec in an old process never seen");
    // A candidate is read at every scan: its state is always fresh.
    proc(r, 950, 101, "claude", 'Z', &[]);
    let procs = scanner.scan(wants);
    assert!(!find_agents(&procs, &rules, ME).iter().any(|f| f.pid == 950));
}

/// GitHub Copilot CLI 1.0.102 as measured in a tmux pane: `node …/.bin/copilot` (the npm loader,
/// the pane's process) runs the native binary (`comm` `MainThread`, argv0 its path), whose
/// children are helpers: a hook command, an MCP server, the bundled ripgrep from the unpacked
/// package, a bash-tool command. The agent is the native process, the loader its wrapper.
#[test]
fn copilot_is_found_at_its_native_process_never_its_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    proc(r, 1, 0, "systemd", 'S', &["/sbin/init"]);
    proc(r, 101, 1, "bash", 'S', &["-bash"]);
    let bin = "/opt/p/node_modules/.bin/copilot";
    let native = "/opt/p/node_modules/@github/copilot-linux-x64/copilot";
    let args = [
        "-i",
        "create probe.txt",
        "--session-id",
        "11111111-2222-4333-8444-555555555555",
    ];
    let loader: Vec<&str> = ["node", bin].into_iter().chain(args).collect();
    proc(r, 950, 101, "node", 'S', &loader);
    let inner: Vec<&str> = [native].into_iter().chain(args).collect();
    proc(r, 951, 950, "MainThread", 'S', &inner);
    proc(
        r,
        952,
        951,
        "bash",
        'S',
        &["bash", "-c", "'/usr/bin/volee' hook copilot preToolUse"],
    );
    proc(
        r,
        953,
        952,
        "volee",
        'S',
        &["/usr/bin/volee", "hook", "copilot", "preToolUse"],
    );
    proc(
        r,
        954,
        951,
        "python3",
        'S',
        &["python3", "/opt/p/bin/mini-mcp.py", "copilot"],
    );
    proc(
        r,
        955,
        951,
        "rg",
        'S',
        &[
            "/h/.cache/copilot/pkg/linux-x64/1.0.102/ripgrep/bin/linux-x64/rg",
            "--files",
        ],
    );
    proc(
        r,
        956,
        951,
        "bash",
        'S',
        &["/bin/bash", "-c", "echo copilot > probe.txt"],
    );
    // The native binary's version check of itself, a few ms long at start.
    proc(
        r,
        957,
        951,
        "MainThread",
        'S',
        &[native, "--binary-version"],
    );
    let mut rules = rules();
    rules.push(rule(
        "copilot",
        &["copilot"],
        &["@github/copilot/"],
        &["--binary-version"],
    ));
    let found = find_agents(&ProcRoot::new(r).scan(), &rules, ME);
    assert_eq!(
        found,
        vec![Found {
            harness: "copilot".into(),
            pid: 951,
            wrappers: vec![950],
        }]
    );
    // The loader run as `node …/@github/copilot/npm-loader.js` is recognised by its package too.
    proc(
        r,
        950,
        101,
        "node",
        'S',
        &["node", "/opt/p/node_modules/@github/copilot/npm-loader.js"],
    );
    let found = find_agents(&ProcRoot::new(r).scan(), &rules, ME);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].pid, found[0].wrappers.clone()), (951, vec![950]));
}

/// Another user's processes are never agents: not a `claude` of theirs, not a process of ours
/// run with their rights (setuid), not one whose owner cannot be read; and a chain is never
/// followed through their processes.
#[test]
fn another_users_processes_are_never_agents() {
    let dir = fixture();
    let r = dir.path();
    // Another user's native claude, and their qwen launcher chain.
    proc_as(
        r,
        1100,
        1,
        "claude",
        'S',
        &["/home/o/bin/claude"],
        (OTHER, OTHER),
    );
    proc_as(
        r,
        1200,
        1,
        "node",
        'S',
        &["node", "/home/o/.bin/qwen", "-i", "x"],
        (OTHER, OTHER),
    );
    proc_as(
        r,
        1201,
        1200,
        "node",
        'S',
        &["node", "/home/o/n/@qwen-code/qwen-code/cli.js"],
        (OTHER, OTHER),
    );
    // Started by us, running with another user's rights.
    proc_as(r, 1300, 101, "grok", 'S', &["grok"], (ME, OTHER));
    // Started by another user, with our rights.
    proc_as(r, 1301, 101, "grok", 'S', &["grok"], (OTHER, ME));
    // No readable owner.
    proc(r, 1400, 101, "claude", 'S', &["claude"]);
    std::fs::remove_file(r.join("1400/status")).unwrap();
    // Our gemini wrapper whose child is another user's: the wrapper is the agent, not their child.
    proc(
        r,
        1500,
        101,
        "node",
        'S',
        &["node", "/opt/p/node_modules/.bin/gemini"],
    );
    proc_as(
        r,
        1501,
        1500,
        "node",
        'S',
        &["node", "/opt/p/node_modules/.bin/gemini"],
        (OTHER, OTHER),
    );

    let procs = ProcRoot::new(r).scan();
    let found = find_agents(&procs, &rules(), ME);
    let pids: Vec<u32> = found.iter().map(|f| f.pid).collect();
    assert_eq!(pids, [200, 301, 402, 501, 600, 700, 1500], "{found:?}");
    // The same processes are the other user's agents, seen from their side.
    let theirs: Vec<(u32, Vec<u32>)> = find_agents(&procs, &rules(), OTHER)
        .into_iter()
        .map(|f| (f.pid, f.wrappers))
        .collect();
    assert_eq!(theirs, [(1100, vec![]), (1201, vec![1200]), (1501, vec![])]);
    // The owner is read with the arguments, for candidates; a fresh read of one pid has it too.
    let claude = procs.iter().find(|p| p.stat.pid == 1100).unwrap();
    assert_eq!(claude.owner.map(|o| o.real), Some(OTHER));
    assert_eq!(
        ProcRoot::new(r).read(1300).and_then(|p| p.owner),
        Some(volee_procscan::Owner {
            real: ME,
            effective: OTHER
        })
    );
    assert_eq!(ProcRoot::new(r).read(1400).and_then(|p| p.owner), None);
}
