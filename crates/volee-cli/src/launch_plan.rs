//! The one launch planner: what `launch`, `resume` and the tmux launch prompt send the daemon.
//!
//! [`line`] builds the command line — a command as it is, or a profile's launch line: its
//! program found on the caller's PATH and its version read, the instrumentation plan carried out
//! ([`crate::instrument`]), the resume line or a preset session id, then the name, model, extra
//! arguments and first prompt the profile takes. [`request`] puts it with where it goes and the
//! caller's environment into the daemon's `Launch` request.

use volee_harness::instrument::Options;
use volee_harness::{Instrumentation, Profile, PromptStyle};
use volee_protocol::{LaunchRequest, ProfileFit};

use crate::error::{self, CliError, CliResult, Exit};

/// What to run.
pub enum What<'a> {
    /// A command as it is (the generic profile: no version, no instrumentation).
    Command(Vec<String>),
    /// The profile's launch line.
    Harness(&'a Profile, HarnessOptions<'a>),
}

/// Options of a launch that a profile turns into flags. A worktree is volee's own, for every
/// harness (docs/adr/0009): never the harness's flag.
#[derive(Default)]
pub struct HarnessOptions<'a> {
    pub name: Option<&'a str>,
    pub model: Option<&'a str>,
    pub prompt: Option<&'a str>,
    /// Extra arguments after `--`, passed to the harness before the prompt.
    pub extra: &'a [String],
    /// Resume this harness session instead of starting one (`""`: a resume line without one).
    pub resume: Option<&'a str>,
    /// Give the harness volee's MCP server (`volee mcp`), the profile's way.
    pub join: bool,
}

/// A planned command line and what the daemon must know about it.
#[derive(Debug)]
pub struct Line {
    pub command: Vec<String>,
    /// Environment the launch needs over the caller's (instrumentation, auto-updaters off).
    pub env: Vec<(String, String)>,
    pub version: Option<String>,
    pub fit: ProfileFit,
    pub session_id: Option<String>,
    /// The daemon writes the plan's fallback files (volee's Gemini extension).
    pub hooks_extension: bool,
    /// A first prompt the daemon types once the harness is ready ([`PromptStyle::Typed`]).
    pub typed_prompt: Option<String>,
}

/// Where a launch goes and under what name.
pub struct Place {
    pub cwd: String,
    pub name: Option<String>,
    pub tmux_socket: String,
    pub tmux_session: Option<String>,
    pub caller_pane: Option<String>,
    pub zellij_session: Option<String>,
}

/// Build the command line of `what`.
pub fn line(what: What) -> CliResult<Line> {
    match what {
        What::Command(command) => Ok(Line {
            command,
            env: Vec::new(),
            version: None,
            fit: ProfileFit::Generic,
            session_id: None,
            hooks_extension: false,
            typed_prompt: None,
        }),
        What::Harness(profile, opts) => harness_line(profile, &opts),
    }
}

/// The `Launch` request of `line` for `harness` at `place`: `env` (the caller's) with the
/// line's variables over it.
pub fn request(
    harness: String,
    line: Line,
    place: Place,
    mut env: Vec<(String, String)>,
) -> LaunchRequest {
    for (k, v) in line.env {
        env.retain(|(key, _)| key != &k);
        env.push((k, v));
    }
    LaunchRequest {
        harness,
        command: line.command,
        harness_version: line.version,
        profile_fit: line.fit,
        session_id: line.session_id,
        hooks_extension: line.hooks_extension,
        typed_prompt: line.typed_prompt,
        restore: None,
        window: None,
        budget: None,
        budget_usd: None,
        cwd: place.cwd,
        name: place.name,
        env,
        tmux_socket: place.tmux_socket,
        tmux_session: place.tmux_session,
        caller_pane: place.caller_pane,
        zellij_session: place.zellij_session,
    }
}

/// A profile's launch line: check its version, carry out its instrumentation, add the flags.
fn harness_line(profile: &Profile, opts: &HarnessOptions) -> CliResult<Line> {
    let program = crate::program::locate(profile)?;
    let version = crate::program::read_version(&program, None);
    let fit = match (&version, profile.measured) {
        (Some(v), Some(range)) if range.contains(v) => ProfileFit::Measured,
        (Some(_), Some(_)) => ProfileFit::OtherVersion,
        _ => ProfileFit::Generic,
    };
    if let (ProfileFit::OtherVersion, Some(v), Some(range)) = (fit, &version, profile.measured) {
        eprintln!(
            "warning: {} {v} is outside the measured range {}–{}: hooks are used, screen states fall back to the generic rules",
            profile.display_name, range.min, range.max
        );
    }
    let mut command = vec![program.display().to_string()];
    if profile.instrumentation == Instrumentation::BuiltIn && opts.resume.is_none() {
        command.push("agent".into());
    }
    let bin = std::env::current_exe()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?
        .display()
        .to_string();
    let env = crate::caller::env();
    let plan = volee_harness::instrument::plan(
        profile,
        &Options {
            volee_bin: &bin,
            env: &env,
            join: opts.join,
        },
    )?;
    let applied = crate::instrument::apply(&plan, profile.display_name)?;
    command.extend(applied.args);
    let session_id = match (opts.resume, profile.session_id_flag) {
        (Some(id), _) => {
            if profile.resume.is_empty() {
                return Err(CliError::user(format!(
                    "{} has no resume line",
                    profile.display_name
                )));
            }
            command.extend(profile.resume.iter().map(|a| a.replace("{id}", id)));
            Some(id.to_string()).filter(|id| !id.is_empty())
        }
        (None, Some(flag)) => {
            let id = volee_os::random::uuid_v4()
                .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
            command.extend([flag.to_string(), id.clone()]);
            Some(id)
        }
        (None, None) => None,
    };
    // A name is volee's own; the harness gets it too when it has a flag for it.
    if let (Some(n), Some(f)) = (opts.name, profile.name_flag) {
        command.extend([f.to_string(), n.to_string()]);
    }
    if let Some(model) = opts.model {
        let Some(flag) = profile.model_flag else {
            return Err(CliError::user(format!(
                "{} takes no --model",
                profile.display_name
            )));
        };
        command.extend([flag.to_string(), model.to_string()]);
    }
    command.extend(opts.extra.iter().cloned());
    let mut typed_prompt = None;
    if let Some(prompt) = opts.prompt {
        match profile.prompt {
            PromptStyle::AfterDoubleDash => command.extend(["--".to_string(), prompt.to_string()]),
            PromptStyle::Positional => command.push(prompt.to_string()),
            PromptStyle::Flag(f) => command.extend([f.to_string(), prompt.to_string()]),
            // The daemon types it once the screen shows the harness ready.
            PromptStyle::Typed => typed_prompt = Some(prompt.to_string()),
            PromptStyle::Unsupported => return Err(error::no_first_prompt(profile)),
        }
    }
    Ok(Line {
        command,
        env: applied.env,
        version,
        fit,
        session_id,
        hooks_extension: applied.hooks_extension,
        typed_prompt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_environment_goes_with_the_lines_variables_over_it() {
        let line = line(What::Command(vec!["sh".into(), "-c".into(), "x".into()])).unwrap();
        assert_eq!(line.fit, ProfileFit::Generic);
        let mut line = line;
        line.env = vec![("A".into(), "planned".into()), ("C".into(), "3".into())];
        let req = request(
            "generic".into(),
            line,
            Place {
                cwd: "/w".into(),
                name: Some("n".into()),
                tmux_socket: "/s".into(),
                tmux_session: None,
                caller_pane: Some("%1".into()),
                zellij_session: None,
            },
            vec![("A".into(), "caller".into()), ("B".into(), "2".into())],
        );
        assert_eq!(req.command, ["sh", "-c", "x"]);
        assert_eq!(
            req.env,
            [
                ("B".to_string(), "2".to_string()),
                ("A".into(), "planned".into()),
                ("C".into(), "3".into())
            ]
        );
        assert_eq!(
            (req.cwd.as_str(), req.caller_pane.as_deref()),
            ("/w", Some("%1"))
        );
    }

    #[test]
    fn volees_own_agent_is_this_binary_with_its_subcommand() {
        let own = volee_harness::profile("volee").unwrap();
        let exe = std::env::current_exe().unwrap().display().to_string();
        let launched = harness_line(&own, &HarnessOptions::default()).unwrap();
        assert_eq!(launched.command, [exe.clone(), "agent".into()]);
        let resumed = harness_line(
            &own,
            &HarnessOptions {
                resume: Some("abc"),
                ..HarnessOptions::default()
            },
        )
        .unwrap();
        assert_eq!(resumed.command[0], exe);
        assert!(
            resumed.command[1..].iter().any(|a| a == "abc"),
            "{resumed:?}"
        );
        assert!(harness_line(
            &own,
            &HarnessOptions {
                model: Some("m"),
                join: true,
                ..HarnessOptions::default()
            }
        )
        .is_err());
    }
}
