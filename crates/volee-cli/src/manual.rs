//! `volee completions SHELL` and `volee man [COMMAND]`: the shell completion scripts and the
//! manual pages, generated from the command line's own definition (`clap_complete`,
//! `clap_mangen`), so they never drift from `--help`. Hidden commands stay hidden.

use std::io::Write;

use clap::Command;
use clap_complete::Shell;

use crate::error::{self, CliError, CliResult, Exit};

/// Print the completion script for `shell`.
pub fn completions(cli: Command, shell: Shell) -> CliResult {
    write(&completion_script(&cli, shell))
}

/// The completion script for `shell`, offering only what `--help` shows.
fn completion_script(cli: &Command, shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut shown(cli), "volee", &mut script);
    script
}

/// `command` without its hidden subcommands, at every depth. `clap_complete` offers hidden
/// subcommands like any other (unlike `--help` and `clap_mangen`), so it is given this instead.
fn shown(command: &Command) -> Command {
    if !command.get_subcommands().any(holds_hidden) {
        return command.clone();
    }
    // clap cannot remove a subcommand: the command is assembled again from its own arguments,
    // groups and settings, with only its shown subcommands.
    let mut copy = Command::new(command.get_name().to_owned())
        .args(command.get_arguments().cloned())
        .groups(command.get_groups().cloned())
        .subcommands(
            command
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(shown),
        )
        .aliases(command.get_aliases().map(str::to_owned))
        .visible_aliases(command.get_visible_aliases().map(str::to_owned))
        .propagate_version(command.is_propagate_version_set())
        .subcommand_required(command.is_subcommand_required_set())
        .arg_required_else_help(command.is_arg_required_else_help_set())
        .disable_help_flag(command.is_disable_help_flag_set())
        .disable_version_flag(command.is_disable_version_flag_set())
        .disable_help_subcommand(command.is_disable_help_subcommand_set())
        .allow_external_subcommands(command.is_allow_external_subcommands_set())
        .args_conflicts_with_subcommands(command.is_args_conflicts_with_subcommands_set())
        .subcommand_precedence_over_arg(command.is_subcommand_precedence_over_arg_set())
        .subcommand_negates_reqs(command.is_subcommand_negates_reqs_set());
    if let Some(name) = command.get_display_name() {
        copy = copy.display_name(name.to_owned());
    }
    if let Some(name) = command.get_bin_name() {
        copy = copy.bin_name(name.to_owned());
    }
    if let Some(version) = command.get_version() {
        copy = copy.version(version.to_owned());
    }
    if let Some(version) = command.get_long_version() {
        copy = copy.long_version(version.to_owned());
    }
    if let Some(about) = command.get_about() {
        copy = copy.about(about.clone());
    }
    if let Some(about) = command.get_long_about() {
        copy = copy.long_about(about.clone());
    }
    if let Some(text) = command.get_before_help() {
        copy = copy.before_help(text.clone());
    }
    if let Some(text) = command.get_before_long_help() {
        copy = copy.before_long_help(text.clone());
    }
    if let Some(text) = command.get_after_help() {
        copy = copy.after_help(text.clone());
    }
    if let Some(text) = command.get_after_long_help() {
        copy = copy.after_long_help(text.clone());
    }
    if let Some(name) = command.get_subcommand_value_name() {
        copy = copy.subcommand_value_name(name.to_owned());
    }
    if let Some(heading) = command.get_subcommand_help_heading() {
        copy = copy.subcommand_help_heading(heading.to_owned());
    }
    copy
}

/// Whether `command` is hidden or holds a hidden subcommand at any depth.
fn holds_hidden(command: &Command) -> bool {
    command.is_hide_set() || command.get_subcommands().any(holds_hidden)
}

/// Print the manual page (roff) of volee, or of one of its commands.
pub fn man(cli: Command, command: Option<&str>) -> CliResult {
    let cli = cli.name("volee");
    let page = match command {
        None => cli,
        Some(name) => {
            let found = cli
                .get_subcommands()
                .find(|c| {
                    !c.is_hide_set()
                        && (c.get_name() == name || c.get_all_aliases().any(|a| a == name))
                })
                .cloned();
            match found {
                // Its page is named volee-launch(1), as git's are; its synopsis is the command
                // line the user types: `volee launch …`.
                Some(sub) => {
                    let page = format!("volee-{}", sub.get_name());
                    let line = format!("volee {}", sub.get_name());
                    sub.bin_name(line).display_name(page)
                }
                None => {
                    let known: Vec<String> = cli
                        .get_subcommands()
                        .filter(|c| !c.is_hide_set())
                        .map(|c| c.get_name().to_string())
                        .collect();
                    return Err(error::unknown_command(name, &known));
                }
            }
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .source(format!("volee {}", env!("CARGO_PKG_VERSION")))
        .manual("volee")
        .render(&mut roff)
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    write(&ascii_safe(&roff))
}

/// roff that renders without warnings in every locale: groff's ASCII device has no glyph for an
/// ellipsis (`\[u2026]`: "can't find special character" in a C locale, seen on a fresh Debian),
/// so it becomes three dots; dashes and arrows have ASCII fallbacks of groff's own.
fn ascii_safe(roff: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(roff)
        .replace("\\[u2026]", "...")
        .replace('…', "...")
        .into_bytes()
}

fn write(bytes: &[u8]) -> CliResult {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        // `volee man | head`: the reader went away; nothing is wrong.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::from_error(Exit::Internal, &e)),
    }
}

#[cfg(test)]
mod tests {
    use clap::{Arg, CommandFactory};

    use super::*;

    const SHELLS: [Shell; 5] = [
        Shell::Bash,
        Shell::Zsh,
        Shell::Fish,
        Shell::Elvish,
        Shell::PowerShell,
    ];
    use crate::Cli;

    /// Every command `--help` shows, at every depth, with its path (`volee daemon stop`).
    fn shown_commands(command: &Command, path: &str, into: &mut Vec<(String, Command)>) {
        for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
            let path = format!("{path} {}", sub.get_name());
            into.push((path.clone(), sub.clone()));
            shown_commands(sub, &path, into);
        }
    }

    fn all_shown() -> Vec<(String, Command)> {
        let mut cli = Cli::command();
        cli.build();
        let mut commands = vec![("volee".to_string(), cli.clone())];
        shown_commands(&cli, "volee", &mut commands);
        commands
    }

    fn has_help(arg: &Arg) -> bool {
        arg.get_help()
            .is_some_and(|h| !h.to_string().trim().is_empty())
            || arg
                .get_long_help()
                .is_some_and(|h| !h.to_string().trim().is_empty())
    }

    #[test]
    fn the_manual_has_no_ellipsis_groff_cannot_draw_in_ascii() {
        assert_eq!(ascii_safe(b"a \\[u2026] b \\[u2014]"), b"a ... b \\[u2014]");
        assert_eq!(ascii_safe("x…".as_bytes()), b"x...");
    }

    #[test]
    fn every_shown_command_and_argument_says_what_it_is() {
        let mut missing = Vec::new();
        for (path, command) in all_shown() {
            if path != "volee" && command.get_about().is_none() {
                missing.push(path.clone());
            }
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                if !has_help(arg) {
                    missing.push(format!("{path}: {}", arg.get_id()));
                }
            }
        }
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    #[test]
    fn no_shown_command_has_a_hidden_argument() {
        // `shown` drops hidden subcommands only; clap_complete would offer a hidden argument.
        let hidden: Vec<String> = all_shown()
            .iter()
            .flat_map(|(path, command)| {
                command
                    .get_arguments()
                    .filter(|a| a.is_hide_set())
                    .map(move |a| format!("{path}: {}", a.get_id()))
            })
            .collect();
        assert!(hidden.is_empty(), "teach `shown` to drop these: {hidden:?}");
    }

    #[test]
    fn the_most_used_commands_show_examples() {
        let cli = Cli::command();
        for name in ["launch", "ls", "wait", "send", "attach"] {
            let command = cli
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no command {name}"));
            let help = command.get_after_help().map(|h| h.to_string());
            let help = help.unwrap_or_default();
            let examples = help
                .strip_prefix("Examples:\n")
                .unwrap_or_else(|| panic!("{name}: no Examples section: {help:?}"));
            let lines: Vec<&str> = examples.lines().collect();
            assert!(
                (2..=4).contains(&lines.len()),
                "{name}: two to four examples: {lines:?}"
            );
            for line in lines {
                let example = line.trim_start();
                assert!(
                    example.starts_with(&format!("volee {name} "))
                        || example == format!("volee {name}"),
                    "{name}: an example of itself: {line:?}"
                );
            }
        }
    }

    #[test]
    fn completions_leave_hidden_commands_out_at_every_depth() {
        let tree = Command::new("t")
            .subcommand(
                Command::new("outer")
                    .about("shown, holding a hidden one")
                    .arg(Arg::new("level").long("level").help("a flag kept"))
                    .subcommand(Command::new("deep-secret").hide(true))
                    .subcommand(Command::new("deep-shown").about("shown")),
            )
            .subcommand(Command::new("top-secret").hide(true))
            .subcommand(Command::new("top-shown").about("shown"));
        let copy = shown(&tree);
        let names = |c: &Command| -> Vec<String> {
            c.get_subcommands()
                .map(|s| s.get_name().to_string())
                .collect()
        };
        assert_eq!(names(&copy), ["outer", "top-shown"]);
        let outer = copy.find_subcommand("outer");
        assert_eq!(outer.map(names), Some(vec!["deep-shown".to_string()]));
        assert_eq!(
            outer.and_then(|c| c.get_about()).map(|s| s.to_string()),
            Some("shown, holding a hidden one".to_string())
        );
        for shell in SHELLS {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut shown(&tree), "t", &mut script);
            let script = String::from_utf8_lossy(&script);
            assert!(!script.contains("secret"), "{shell}: {script}");
            for word in ["outer", "deep-shown", "top-shown", "level"] {
                assert!(script.contains(word), "{shell} offers {word}: {script}");
            }
        }
    }

    /// Does `text` hold `word` with no letter, digit, `-` or `_` right before or after it?
    fn has_word(text: &str, word: &str) -> bool {
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
        text.match_indices(word).any(|(at, _)| {
            !part(text[..at].chars().next_back()) && !part(text[at + word.len()..].chars().next())
        })
    }

    #[test]
    fn a_word_is_not_a_part_of_one() {
        assert!(has_word("'serve:run' x", "serve"));
        assert!(!has_word("the server answers", "serve"));
        assert!(!has_word("pane-exec-x", "pane-exec"));
        assert!(has_word("(pane-exec)", "pane-exec"));
    }

    #[test]
    fn volees_completions_offer_what_help_shows_and_nothing_hidden() {
        let cli = Cli::command();
        // The copy `shown` makes of volee's command line reads exactly as the original.
        let (mut original, mut copy) = (cli.clone(), shown(&cli));
        assert_eq!(
            copy.render_long_help().to_string(),
            original.render_long_help().to_string()
        );
        assert_eq!(
            copy.render_usage().to_string(),
            original.render_usage().to_string()
        );
        assert_eq!(copy.render_long_version(), original.render_long_version());
        let hidden: Vec<&str> = cli
            .get_subcommands()
            .filter(|c| c.is_hide_set())
            .map(|c| c.get_name())
            .collect();
        assert!(!hidden.is_empty(), "volee has hidden commands to leave out");
        for shell in SHELLS {
            let script = String::from_utf8_lossy(&completion_script(&cli, shell)).into_owned();
            for name in &hidden {
                // As a word: `serve` is hidden, "server" in a help text is not it.
                assert!(!has_word(&script, name), "{shell} offers hidden {name}");
            }
            for sub in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
                assert!(
                    script.contains(sub.get_name()),
                    "{shell} offers {}",
                    sub.get_name()
                );
            }
        }
    }
}
