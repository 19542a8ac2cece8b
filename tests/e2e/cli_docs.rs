//! The command line documents itself: completion scripts that shells load, manual pages that
//! `man` renders, and `--help` with every command and examples for the five most used. All are
//! generated from the one command-line definition, so these check the real output.

use std::io::Write;
use std::process::{Command, Stdio};

use volee_test_support::{require, TestEnv};

fn env() -> TestEnv {
    TestEnv::new(env!("CARGO_BIN_EXE_volee"))
}

/// The commands `--help` must list, and the hidden ones it must not.
const SHOWN: &[&str] = &[
    "up",
    "down",
    "launch",
    "agent",
    "ls",
    "show",
    "explain",
    "wait",
    "resume",
    "attach",
    "stop",
    "interrupt",
    "send",
    "doctor",
    "probe",
    "profiles",
    "setup",
    "quiet",
    "mcp",
    "peek",
    "rm",
    "prune",
    "status",
    "daemon",
    "tmux-init",
    "pick",
    "next",
    "completions",
    "man",
];
const HIDDEN: &[&str] = &["pane-exec", "launch-line"];

#[test]
fn the_bash_completion_script_loads_and_others_name_the_commands() {
    if !require("bash", "the completion test") {
        return;
    }
    let env = env();
    let script = env.ok(["completions", "bash"]);
    let dir = env.root().join("completions");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("volee.bash");
    std::fs::write(&file, &script).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source '{}' && complete -p volee", file.display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.starts_with("complete ") && said.trim_end().ends_with(" volee"),
        "{said}"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = env.ok(["completions", shell]);
        for word in ["volee", "launch", "attach", "--harness"] {
            assert!(script.contains(word), "{shell}'s script names {word}");
        }
    }
    let bad = env.run(["completions", "tcsh"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

/// `man -l -` renders what volee prints (plain text, no pager).
fn render(roff: &[u8]) -> String {
    let mut man = Command::new("man")
        .args(["-l", "-"])
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    man.stdin.take().unwrap().write_all(roff).unwrap();
    let out = man.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "man -l - failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn manual_pages_render_with_man() {
    if !require("man", "the manual page test (Debian: man-db)") {
        return;
    }
    let env = env();
    let main = env.run(["man"]);
    assert!(main.status.success());
    let text = render(&main.stdout);
    assert!(text.contains("volee(1)"), "{text}");
    assert!(text.contains("Supervise AI coding agents"), "{text}");
    for command in ["launch", "wait", "send"] {
        assert!(
            text.contains(command),
            "the main page lists {command}: {text}"
        );
    }
    let launch = env.run(["man", "launch"]);
    assert!(launch.status.success());
    let text = render(&launch.stdout);
    assert!(text.contains("volee-launch(1)"), "{text}");
    assert!(
        text.contains("--harness") && text.contains("--worktree"),
        "{text}"
    );
    assert!(text.contains("Examples:"), "{text}");
    let unknown = env.run(["man", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains("unknown command \"nope\"") && said.contains("launch"),
        "{said}"
    );
    assert_eq!(
        env.run(["man", "pane-exec"]).status.code(),
        Some(2),
        "hidden"
    );
}

#[test]
fn help_lists_every_command_and_the_most_used_show_examples() {
    let env = env();
    let help = env.ok(["--help"]);
    let listed: Vec<&str> = help
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for command in SHOWN {
        assert!(listed.contains(command), "--help lists {command}: {help}");
    }
    for command in HIDDEN {
        assert!(!listed.contains(command), "--help hides {command}: {help}");
    }
    for command in ["launch", "ls", "wait", "send", "attach"] {
        let help = env.ok([command, "--help"]);
        let examples = help
            .split("Examples:")
            .nth(1)
            .unwrap_or_else(|| panic!("{command} --help has examples: {help}"));
        let lines = examples
            .lines()
            .filter(|l| l.trim_start().starts_with("volee "))
            .count();
        assert!(lines >= 2, "{command}: at least two examples: {help}");
    }
    // Every argument and flag of every shown command says what it is.
    for command in SHOWN {
        let help = env.ok([*command, "--help"]);
        let mut section = "";
        for line in help.lines() {
            if !line.starts_with(' ') && line.ends_with(':') {
                section = line;
                continue;
            }
            if section == "Arguments:" || section == "Options:" {
                let item = line.trim_start();
                if item.starts_with('-') || item.starts_with('<') || item.starts_with('[') {
                    let words: Vec<&str> =
                        item.split("  ").filter(|w| !w.trim().is_empty()).collect();
                    assert!(
                        words.len() >= 2 || help.lines().any(|l| l.starts_with("          ")),
                        "{command}: {item:?} has no help text:\n{help}"
                    );
                }
            }
        }
    }
}
