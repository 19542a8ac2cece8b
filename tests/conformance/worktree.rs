//! A real harness in a worktree volee made: `volee launch --harness claude --worktree wt1` starts
//! Claude Code inside `R.worktrees/wt1` (branch `volee/wt1`), the tool the model runs writes
//! there and not into the main checkout, and Claude's own hook payloads name that directory.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

use crate::claude::seed_home;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "volee test")
        .env("GIT_AUTHOR_EMAIL", "test@volee.invalid")
        .env("GIT_COMMITTER_NAME", "volee test")
        .env("GIT_COMMITTER_EMAIL", "test@volee.invalid")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git {args:?}");
}

#[test]
fn claude_code_works_in_the_worktree_volee_made() {
    let _serial = crate::serial();
    if !require("tmux", "the worktree conformance test")
        || !require("git", "the worktree conformance test")
    {
        return;
    }
    let pinned = crate::pinned("claude");
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };
    let mut env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    env.start_tmux();
    let repo = env.work().canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "repo\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-qm", "start"]);
    let worktree = repo.parent().unwrap().join(format!(
        "{}.worktrees/wt1",
        repo.file_name().unwrap().to_string_lossy()
    ));
    let hook_log = env.root().join("hook-payloads");
    let claude_tmp = env.root().join("claude-tmp");
    std::fs::create_dir_all(&hook_log).unwrap();
    std::fs::create_dir_all(&claude_tmp).unwrap();
    // The user trusts the folder the agent will run in (Claude asks once per folder).
    seed_home(&env.home(), &worktree, &hook_log);

    let server = ModelServer::start(vec![
        Turn::bash("touch made-in-worktree", "Create the marker file"),
        Turn::text("done"),
    ]);
    crate::claude::claude_env(&mut env, &bin_dir, &server, &claude_tmp);
    let id = env.ok([
        "launch",
        "--harness",
        "claude",
        "--worktree",
        "wt1",
        "--host",
        "tmux:main",
        "--cwd",
        repo.to_str().unwrap(),
        "Create the marker file.",
    ]);
    let view = env.agent(&id);
    assert_eq!(view["cwd"], worktree.display().to_string(), "{view}");
    assert_eq!(view["worktree"]["branch"], "volee/wt1", "{view}");
    let command: Vec<String> = serde_json::from_value(view["command"].clone()).unwrap();
    assert!(
        !command.iter().any(|a| a == "-w" || a == "--worktree"),
        "no harness flag: {command:?}"
    );

    assert_eq!(env.wait_state(&id, "needs_you", 60), "needs_you");
    env.ok(["send", &id, "1"]);
    assert_eq!(env.wait_state(&id, "idle", 60), "idle");
    assert!(
        worktree.join("made-in-worktree").exists(),
        "the tool ran in the worktree"
    );
    assert!(
        !repo.join("made-in-worktree").exists(),
        "the main checkout is untouched"
    );
    // Claude's own view of where it runs: the hook payloads' cwd.
    let cwd_seen = wait_until(
        "a hook payload with a cwd",
        Duration::from_secs(10),
        || {
            std::fs::read_dir(&hook_log)
                .ok()?
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
                .find_map(|p| p["cwd"].as_str().map(String::from))
        },
        String::new,
    );
    assert_eq!(cwd_seen, worktree.display().to_string());
    // The process itself runs there too.
    let pid = env.agent(&id)["pid"].as_i64().unwrap();
    let proc_cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(proc_cwd, worktree);
    env.ok(["send", &id, "/exit"]);
    assert_eq!(env.wait_state(&id, "done", 30), "done");
    // The marker is untracked: removal is refused until it is dealt with.
    let refused = env.run(["stop", &id, "--remove-worktree"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("made-in-worktree"));
    std::fs::remove_file(worktree.join("made-in-worktree")).unwrap();
    let removed = env.ok(["stop", &id, "--remove-worktree", "--delete-branch"]);
    assert!(removed.contains("removed worktree"), "{removed}");
    assert!(!worktree.exists());
}
