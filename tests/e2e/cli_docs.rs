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
    "machine",
    "restore",
    "budget",
    "usage",
];
const HIDDEN: &[&str] = &["pane-exec", "launch-line", "serve"];

/// `bash -c SCRIPT bash ARGS…` with the `volee` under test first on PATH and HOME in the test's
/// directory.
fn bash(env: &TestEnv, script: &str, args: &[&str]) -> std::process::Output {
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_volee"))
        .parent()
        .unwrap()
        .to_path_buf();
    let mut path = std::ffi::OsString::from(bin_dir);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("bash")
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.home())
        .env("VOLEE_HOME", env.volee_home())
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_bash_completion_script_loads_and_completes() {
    if !require("bash", "the completion test") {
        return;
    }
    let env = env();
    // The README's way to try it: the script sourced straight from the binary.
    let out = bash(
        &env,
        "source <(volee completions bash) && complete -p volee",
        &[],
    );
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
    // What <TAB> offers: the function `complete -p` names, called as bash calls it.
    let function = said
        .split_whitespace()
        .skip_while(|w| *w != "-F")
        .nth(1)
        .unwrap_or_else(|| panic!("no -F FUNCTION in {said}"));
    let offers = |words: &[&str]| -> Vec<String> {
        // The words come in as arguments: COMP_WORDS holds them, the last is being completed.
        let script = format!(
            r#"source <(volee completions bash) || exit 1
            COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
            COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}
            {function} volee "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD - 1]}}"
            printf '%s\n' "${{COMPREPLY[@]}}""#
        );
        let out = bash(&env, &script, words);
        assert!(
            out.status.success(),
            "{words:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut offered: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        offered.sort();
        offered
    };
    assert_eq!(
        offers(&["volee", "la"]),
        ["launch"],
        "launch-line is hidden"
    );
    assert_eq!(
        offers(&["volee", "pa"]),
        Vec::<String>::new(),
        "pane-exec is hidden"
    );
    assert_eq!(offers(&["volee", "launch", "--har"]), ["--harness"]);
    let shells = offers(&["volee", "completions", ""]);
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(shells.iter().any(|s| s == shell), "{shell} in {shells:?}");
    }
    let every = offers(&["volee", ""]);
    for command in SHOWN {
        assert!(every.iter().any(|c| c == command), "{command} in {every:?}");
    }
    for command in HIDDEN {
        assert!(
            !every.iter().any(|c| c == command),
            "{command} in {every:?}"
        );
    }
}

#[test]
fn every_completion_script_names_the_commands_and_no_hidden_one() {
    let env = env();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = env.ok(["completions", shell]);
        for word in ["volee", "launch", "attach", "wait", "harness", "until"] {
            assert!(script.contains(word), "{shell}'s script names {word}");
        }
        // Whole words: `serve` is hidden, `server` is in help texts.
        let words: Vec<&str> = script
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .collect();
        for hidden in HIDDEN {
            assert!(!words.contains(hidden), "{shell}'s script offers {hidden}");
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
        // The C locale, as on a fresh machine: groff's ASCII device then warns about every
        // glyph it cannot draw.
        .env("LC_ALL", "C")
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
    assert!(
        text.contains("volee launch [--harness]"),
        "the synopsis is the command line one types: {text}"
    );
    assert!(text.contains("Examples:"), "{text}");
    // Every shown command's page renders, without a warning from man.
    for command in SHOWN {
        let page = env.run(["man", command]);
        assert!(page.status.success(), "volee man {command}");
        let text = render(&page.stdout);
        assert!(
            text.contains(&format!("volee-{command}(1)")),
            "{command}: {text}"
        );
    }
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
    // Every argument and flag of every shown command says what it is: its help is on the
    // item's line after two spaces or more, or on the next lines, indented further.
    for command in SHOWN {
        let help = env.ok([*command, "--help"]);
        let lines: Vec<&str> = help.lines().collect();
        let mut section = "";
        for (i, line) in lines.iter().enumerate() {
            if !line.starts_with(' ') && line.ends_with(':') {
                section = line;
                continue;
            }
            if section != "Arguments:" && section != "Options:" {
                continue;
            }
            let item = line.trim_start();
            if !(item.starts_with('-') || item.starts_with('<') || item.starts_with('[')) {
                continue;
            }
            let indent = line.len() - item.len();
            let same_line = item
                .split_once("  ")
                .is_some_and(|(_, help)| !help.trim().is_empty());
            let next_line = lines.get(i + 1).is_some_and(|next| {
                let text = next.trim_start();
                !text.is_empty() && next.len() - text.len() > indent
            });
            assert!(
                same_line || next_line,
                "{command}: {item:?} has no help text:\n{help}"
            );
        }
    }
}
