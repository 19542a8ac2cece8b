//! Profiles as data: a harness volee has no built-in profile for, added by one file in the
//! config dir's `profiles/`, is launched with its launch line, read by its screen rules and
//! resumed by its resume template; a broken profile file is skipped with its reason and never
//! stops volee; `volee profiles check` names the line.

use std::os::unix::fs::PermissionsExt;

use volee_test_support::wait_until;

use crate::setup;

/// A harness of a few lines of shell: `--version`, a first prompt as its argument, a question it
/// waits at, and `--resume ID`.
const SHOUT: &str = r#"#!/bin/sh
case "$1" in
  --version) echo "shout 1.2.0"; exit 0 ;;
  --resume) echo "resumed $2"; printf 'shout> '; read -r line; echo "bye"; exit 0 ;;
esac
echo "thinking about: $1"
i=0
while [ $i -lt 8 ]; do echo "working $i"; i=$((i+1)); sleep 0.2; done
printf 'Continue? [y/n] '
read -r answer
echo "answered $answer"
printf 'shout> '
read -r line
echo "bye"
exit 0
"#;

const PROFILE: &str = r#"# shout: the e2e tests' harness.
name = "shout"
display_name = "Shout"
program = "shout"
measured = { min = "1.2.0", max = "1.2.0" }

[launch]
prompt = { style = "positional" }

[resume]
args = ["--resume", "{id}"]

[states]
sources = ["screen", "activity"]

[input]
bracketed_paste = false
enter_delay_ms = 0
interrupt_key = "C-c"

[[rule]]
id = "shout.ask"
region = "last_line"
match = '''^Continue\? \[y/n\]$'''
state = "needs_you"
priority = 100

[[rule]]
id = "shout.prompt"
region = "last_line"
match = '''^shout>$'''
state = "idle"
priority = 20
"#;

#[test]
fn a_harness_added_by_one_profile_file_is_launched_and_read_by_its_rules() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let bin = env.root().join("shout-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("shout");
    std::fs::write(&program, SHOUT).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let profiles = env.volee_home().join("config/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(profiles.join("shout.toml"), PROFILE).unwrap();
    // A broken file beside it: skipped with its reason, never in the way.
    std::fs::write(
        profiles.join("broken.toml"),
        "name = \"broken\"\ndisplay_name = \"B\"\nprogram = \"b\"\nprompt = 3\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let volee = |args: &[&str]| {
        let out = env.volee(args).env("PATH", &path).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            env.log_tail()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };

    let listed = volee(&["profiles"]);
    assert!(
        listed.contains("shout") && listed.contains("(adds a harness)"),
        "{listed}"
    );
    assert!(
        listed.contains("skipped: ") && listed.contains("broken.toml:4: unknown field `prompt`"),
        "{listed}"
    );
    let check = env.run([
        "profiles",
        "check",
        &profiles.join("broken.toml").display().to_string(),
    ]);
    assert_eq!(check.status.code(), Some(2));
    let said = String::from_utf8_lossy(&check.stderr);
    assert!(
        said.contains("broken.toml:4: unknown field `prompt`"),
        "{said}"
    );
    let shown = volee(&["profiles", "show", "shout", "--toml"]);
    assert!(shown.contains("id = \"shout.ask\""), "{shown}");

    let id = volee(&[
        "launch",
        "--harness",
        "shout",
        "--host",
        "tmux:main",
        "--name",
        "loud",
        "hello there",
    ]);
    let a = env.agent(&id);
    assert_eq!(a["harness"], "shout", "{a}");
    assert_eq!(a["profile_fit"], "measured", "{a}");
    assert_eq!(env.wait_state(&id, "working", 10), "working");
    let asked = wait_until(
        "needs_you from its own rule",
        std::time::Duration::from_secs(15),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || format!("{}\n{}", env.ok(["explain", &id]), env.ok(["peek", &id])),
    );
    assert_eq!(asked["state_source"], "screen", "{asked}");
    let explain = env.ok(["explain", &id]);
    assert!(explain.contains("shout.ask"), "{explain}");
    volee(&["send", &id, "y"]);
    assert_eq!(env.wait_state(&id, "idle", 15), "idle");
    assert!(env.ok(["explain", &id]).contains("shout.prompt"));
    volee(&["send", &id, "quit"]);
    assert_eq!(env.wait_state(&id, "done", 15), "done");
}

/// `volee probe --new`: a program volee has no profile for, run in a private tmux, drafts a
/// profile file that checks (its version, the flags in its --help, its process, a rule from its
/// first screen) and its first screen as a fixture the drafted rule reads.
#[test]
fn probe_new_drafts_a_profile_that_checks_from_a_first_run() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let bin = env.root().join("probe-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("shout");
    // A --help that lists --model and --resume; an idle prompt on its first screen.
    let script = SHOUT.replace(
        "  --version)",
        "  --help) echo 'usage: shout [--model M] [--resume ID] [PROMPT]'; exit 0 ;;\n  --version)",
    );
    let script = script.replace(
        "echo \"thinking about: $1\"",
        "[ -z \"$1\" ] && { printf 'shout> '; read -r line; exit 0; }\necho \"thinking about: $1\"",
    );
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = env.root().join("drafts");
    let said = env.ok([
        "probe",
        "shout",
        "--new",
        &program.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert!(said.contains("shout.toml"), "{said}");
    let draft = std::fs::read_to_string(out.join("shout.toml")).unwrap();
    for line in [
        "name = \"shout\"",
        "program = \"shout\"",
        "measured = { min = \"1.2.0\", max = \"1.2.0\" }",
        "model_flag = \"--model\"",
        "args = [\"--resume\", \"{id}\"]",
        "id = \"shout.idle-start\"",
    ] {
        assert!(draft.contains(line), "{line} not in\n{draft}");
    }
    let checked = env.ok([
        "profiles",
        "check",
        &out.join("shout.toml").display().to_string(),
    ]);
    assert!(checked.contains("ok"), "{checked}");
    let capture = std::fs::read_to_string(out.join("shout-01-start.txt")).unwrap();
    assert!(capture.starts_with("source: volee probe --new shout shout (shout 1.2.0)\ntitle: "));
    let screen = capture.split_once("\n---\n").unwrap().1;
    let profile = volee_harness::file::parse(&draft, "shout.toml").unwrap();
    let m = profile
        .rules
        .classify(screen, "")
        .expect("the drafted rule reads the capture");
    assert_eq!(m.rule, "shout.idle-start");
    // Nothing is written over what is there.
    let again = env.run([
        "probe",
        "shout",
        "--new",
        &program.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
}
