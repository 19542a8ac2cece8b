//! `volee completions SHELL` and `volee man [COMMAND]`: the shell completion scripts and the
//! manual pages, generated from the command line's own definition (`clap_complete`,
//! `clap_mangen`), so they never drift from `--help`. Hidden commands stay hidden.

use std::io::Write;

use clap::Command;
use clap_complete::Shell;

use crate::error::{self, CliError, CliResult, Exit};

/// Print the completion script for `shell`.
pub fn completions(mut cli: Command, shell: Shell) -> CliResult {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "volee", &mut script);
    write(&script)
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
                // Its page is named after the whole command line: volee-launch(1).
                Some(sub) => {
                    let full = format!("volee-{}", sub.get_name());
                    sub.bin_name(full.clone()).display_name(full)
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
    write(&roff)
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
