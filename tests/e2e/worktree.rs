//! `volee launch --worktree NAME`: volee makes the git worktree (`R.worktrees/NAME`, branch
//! `volee/NAME`) and starts the agent in it; two agents edit the same file without touching each
//! other; `volee stop --remove-worktree` refuses while anything would be lost and removes it once
//! nothing would; `volee resume` comes back in the same worktree. Real git repositories in temp
//! directories.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use volee_test_support::wait_until;

use crate::setup;

const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "volee test"),
    ("GIT_AUTHOR_EMAIL", "test@volee.invalid"),
    ("GIT_COMMITTER_NAME", "volee test"),
    ("GIT_COMMITTER_EMAIL", "test@volee.invalid"),
];

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .envs(IDENTITY)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn agents_work_in_their_own_worktrees_which_go_only_when_nothing_is_lost() {
    let Some((_guard, mut env)) = setup() else {
        return;
    };
    if !volee_test_support::require("git", "the worktree test") {
        return;
    }
    env.extra_env
        .extend(IDENTITY.map(|(k, v)| (k.to_string(), v.to_string())));
    let repo = env.root().join("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("shared.txt"), "base\n").unwrap();
    std::fs::write(repo.join("sub/keep"), "").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "base"]);
    let repo = repo.canonicalize().unwrap();
    let worktrees = env.root().canonicalize().unwrap().join("repo.worktrees");
    let launch = |name: &str, cwd: &Path, script: &str| {
        env.run([
            "launch",
            "--host",
            "tmux:main",
            "--cwd",
            cwd.to_str().unwrap(),
            "--worktree",
            name,
            "--name",
            name,
            "--",
            "sh",
            "-c",
            script,
        ])
    };

    // Not a repository; names that would escape or break refs.
    let outside = env.root().join("plain");
    std::fs::create_dir_all(&outside).unwrap();
    let no_repo = launch("x", &outside, "sleep 1");
    assert_eq!(no_repo.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_repo.stderr).contains("not in a git repository"));
    for bad in ["../x", "a/b", ".x"] {
        let r = launch(bad, &repo, "sleep 1");
        assert_eq!(r.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&r.stderr).contains("bad worktree name"),
            "{bad}"
        );
    }

    // Two agents append to the same file, each in its own worktree; the one launched from a
    // subdirectory starts in the same subdirectory of its worktree.
    let a = launch(
        "a",
        &repo,
        "echo from-a >> shared.txt; echo done-a; sleep 120",
    );
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let a = String::from_utf8_lossy(&a.stdout).trim().to_string();
    let b = launch(
        "b",
        &repo.join("sub"),
        "echo from-b >> ../shared.txt; echo done-b; sleep 120",
    );
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let b = String::from_utf8_lossy(&b.stdout).trim().to_string();
    for (id, tag) in [(&a, "done-a"), (&b, "done-b")] {
        wait_until(
            &format!("{id} printed {tag}"),
            Duration::from_secs(15),
            || env.ok(["peek", id]).contains(tag).then_some(()),
            || env.ok(["peek", id]),
        );
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(&worktrees.join("a/shared.txt")), "base\nfrom-a\n");
    assert_eq!(read(&worktrees.join("b/shared.txt")), "base\nfrom-b\n");
    assert_eq!(
        read(&repo.join("shared.txt")),
        "base\n",
        "the main checkout is untouched"
    );
    let view_a: Value = env.agent(&a);
    assert_eq!(
        view_a["worktree"]["path"],
        worktrees.join("a").display().to_string()
    );
    assert_eq!(view_a["worktree"]["branch"], "volee/a");
    assert_eq!(view_a["cwd"], worktrees.join("a").display().to_string());
    let view_b: Value = env.agent(&b);
    assert_eq!(view_b["cwd"], worktrees.join("b/sub").display().to_string());
    assert_eq!(view_b["worktree"]["branch"], "volee/b");
    let table = env.ok(["ls"]);
    assert!(
        table.contains("BRANCH") && table.contains("[volee/a]"),
        "{table}"
    );
    assert!(env.ok(["show", &a]).contains("(branch volee/a)"));

    // A name in use: the directory or the branch.
    let taken = launch("a", &repo, "sleep 1");
    assert_eq!(taken.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&taken.stderr).contains("is taken"));

    // Removal refused while anything would be lost — and then nothing is stopped.
    let dirty = env.run(["stop", &a, "--remove-worktree"]);
    assert_eq!(dirty.status.code(), Some(2));
    let said = String::from_utf8_lossy(&dirty.stderr);
    assert!(
        said.contains("not stopped") && said.contains("shared.txt"),
        "{said}"
    );
    assert_ne!(env.agent(&a)["state"], "stopped");
    git(&worktrees.join("a"), &["commit", "-qam", "from a"]);
    let unmerged = env.run(["stop", &a, "--remove-worktree"]);
    assert_eq!(unmerged.status.code(), Some(2));
    let said = String::from_utf8_lossy(&unmerged.stderr);
    assert!(
        said.contains("commit on no other branch") && said.contains("from a"),
        "{said}"
    );
    assert!(worktrees.join("a").is_dir());
    // Merged into main: nothing is lost; the worktree goes, its branch stays.
    git(&repo, &["merge", "-q", "--ff-only", "volee/a"]);
    let removed = env.ok(["stop", &a, "--remove-worktree"]);
    assert!(removed.contains("branch volee/a kept"), "{removed}");
    assert_eq!(env.agent(&a)["state"], "stopped");
    assert!(!worktrees.join("a").exists());
    assert_eq!(git(&repo, &["branch", "--list", "volee/a"]), "volee/a");

    // Resume comes back in the same worktree (and subdirectory).
    env.ok(["stop", &b]);
    let resumed = env.ok(["resume", &b]);
    let again: Value = env.agent(&resumed);
    assert_eq!(again["cwd"], worktrees.join("b/sub").display().to_string());
    wait_until(
        "the resumed agent appends again",
        Duration::from_secs(15),
        || (read(&worktrees.join("b/shared.txt")) == "base\nfrom-b\nfrom-b\n").then_some(()),
        || read(&worktrees.join("b/shared.txt")),
    );
    // Its changes undone, the worktree and (with --delete-branch) its branch go.
    git(&worktrees.join("b"), &["checkout", "--", "shared.txt"]);
    let removed = env.ok(["stop", &resumed, "--remove-worktree", "--delete-branch"]);
    assert!(removed.contains("and branch volee/b"), "{removed}");
    assert!(!worktrees.join("b").exists());
    assert_eq!(git(&repo, &["branch", "--list", "volee/b"]), "");
    // Its worktree gone, the agent cannot resume there.
    let gone = env.run(["resume", &resumed]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("which is gone"));
}
