//! `volee profiles [--json]`: the harness profiles and the versions they were measured on.

use volee_harness::Instrumentation;

use crate::error::CliResult;
use crate::output::{json, out};

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
    out(&text);
    Ok(())
}
