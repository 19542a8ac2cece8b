//! `volee profiles [--json]`: the harness profiles and the versions they were measured on;
//! `volee profiles check FILE…` and `volee profiles show NAME [--toml|--json]`.

use std::path::PathBuf;

use volee_harness::Instrumentation;

use crate::error::{self, CliResult};
use crate::output::{json, out};

/// `volee profiles check FILE…`: each file parsed and checked as a user profile; every problem
/// on its own line (`FILE:LINE: problem`).
pub fn check(files: &[PathBuf]) -> CliResult {
    let mut bad = 0;
    let mut text = String::new();
    for path in files {
        match volee_harness::file::read_file(path) {
            Ok(p) => {
                let over = if volee_harness::file::built_in_text(p.name).is_some() {
                    "overrides the built-in profile"
                } else {
                    "a new harness"
                };
                text.push_str(&format!(
                    "{}: ok — {} ({over}): {} hook rows, {} screen rules\n",
                    path.display(),
                    p.name,
                    p.hooks.len(),
                    p.rules.rules().len()
                ));
            }
            Err(problems) => {
                bad += 1;
                for problem in problems {
                    eprintln!("{problem}");
                }
            }
        }
    }
    out(&text);
    match bad {
        0 => Ok(()),
        n => Err(error::bad_profiles(n, files.len())),
    }
}

/// `volee profiles import-herdr FILE`: herdr's manifest as volee screen rules (a rules file on
/// standard output), what did not map on standard error too.
pub fn import_herdr(path: &std::path::Path) -> CliResult {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::error::CliError::user(format!("{origin}: {e}")))?;
    let converted =
        volee_harness::herdr::convert(&text, &origin).map_err(crate::error::CliError::user)?;
    for line in &converted.report {
        eprintln!("{origin}: {line}");
    }
    out(&volee_harness::herdr::to_rules_file(&converted, &origin));
    Ok(())
}

/// `volee profiles show NAME`: the profile in effect, as a profile file (or JSON).
pub fn show(name: &str, as_json: bool) -> CliResult {
    let Some(p) = volee_harness::get(name) else {
        return Err(error::unknown_harness(name));
    };
    if as_json {
        return json(&volee_harness::file::to_file(p));
    }
    let from = match volee_harness::file::user_files()
        .iter()
        .find(|(n, _, _)| n == name)
    {
        Some((_, path, _)) => format!("# from {}\n", path.display()),
        None => format!("# built in (profiles/{name}.toml)\n"),
    };
    out(&format!("{from}{}", volee_harness::file::to_toml(p)));
    Ok(())
}

pub fn profiles(as_json: bool) -> CliResult {
    let all = volee_harness::profiles();
    if as_json {
        return json(&all);
    }
    let mut text = format!(
        "{:<8}  {:<18}  {:<16}  {:<46}  {}\n",
        "NAME", "HARNESS", "MEASURED", "HOOKS PER LAUNCH", "STATES (best first)"
    );
    for p in &all {
        let measured = p
            .measured
            .map(|r| {
                if r.min == r.max {
                    r.min.to_string()
                } else {
                    format!("{}–{}", r.min, r.max)
                }
            })
            .unwrap_or_else(|| "-".into());
        let hooks = match p.instrumentation {
            Instrumentation::SettingsFlag(f) => format!("{f} FILE"),
            Instrumentation::SystemDefaultsEnv(v) => format!("${v}"),
            Instrumentation::ConfigOverrides => "none (title and screen)".into(),
            Instrumentation::OwnHooksFile(d) => {
                format!(
                    "~/{d}/{}",
                    volee_harness::instrument::own_hooks_file_name(p.name)
                )
            }
            Instrumentation::BuiltIn => "built in (reports to the daemon)".into(),
            Instrumentation::UserOptIn(f) => format!("~/{f} after volee setup {}", p.name),
            Instrumentation::ServerPort(f) => format!("none; its server ({f} P)"),
            Instrumentation::None => "-".into(),
        };
        let states: Vec<String> = p
            .states
            .iter()
            .map(|s| format!("{s:?}").to_lowercase())
            .collect();
        text.push_str(&format!(
            "{:<8}  {:<18}  {:<16}  {:<46}  {}\n",
            p.name,
            p.display_name,
            measured,
            hooks,
            states.join(", ")
        ));
    }
    for (name, path, overrides) in volee_harness::file::user_files() {
        let how = if *overrides {
            "overrides the built-in one"
        } else {
            "adds a harness"
        };
        text.push_str(&format!("\n{name}: {} ({how})", path.display()));
    }
    for problem in volee_harness::file::problems() {
        text.push_str(&format!("\nskipped: {problem}"));
    }
    out(&text);
    Ok(())
}
