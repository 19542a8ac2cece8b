//! The supervising commands: each asks the daemon and prints its answer.

use std::time::{Duration, Instant};

use volee_daemon::{Client, Config};
use volee_protocol::{AgentState, AgentView, Amount, Request, Response};

use crate::ask::{agent_of, agents_of, ask, client, paths, text_of};
use crate::error::{self, CliError, CliResult, Exit};
use crate::output::{json, now_secs, out};

/// `volee ls`; `on`: only the agents of that machine (one of `machines.toml`).
pub fn ls(all: bool, as_json: bool, rescan: bool, on: Option<&str>, wide: bool) -> CliResult {
    if let Some(machine) = on {
        crate::machine_cmd::saved(machine)?;
    }
    if rescan {
        ask(&Request::Rescan)?;
    }
    let mut agents = agents_of(ask(&Request::List { all })?)?;
    if let Some(machine) = on {
        agents.retain(|a| a.machine.as_deref() == Some(machine));
    }
    if as_json {
        json(&agents)
    } else {
        if wide {
            out(&volee_view::agents_table_wide(&agents, now_secs()));
        } else {
            out(&volee_view::agents_table(&agents, now_secs()));
        }
        Ok(())
    }
}

pub fn show(id: &str, as_json: bool) -> CliResult {
    let agent = agent_of(ask(&Request::Show { id: id.into() })?)?;
    if as_json {
        json(&agent)
    } else {
        out(&volee_view::agent_detail(&agent, now_secs()));
        Ok(())
    }
}

pub fn explain(id: &str, as_json: bool) -> CliResult {
    match ask(&Request::Explain { id: id.into() })? {
        Response::Explanation { explanation } if as_json => json(&explanation),
        Response::Explanation { explanation } => {
            out(&volee_view::explanation_text(&explanation, now_secs()));
            Ok(())
        }
        other => Err(CliError::from_response(other)),
    }
}

/// What `volee wait --until` waits for: a state, perhaps with its reason (`failed:usage_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub state: AgentState,
    pub reason: Option<volee_protocol::Reason>,
}

impl Target {
    /// `needs_you`, `failed:usage_limit`.
    pub fn parse(text: &str) -> CliResult<Target> {
        let (state, reason) = match text.split_once(':') {
            Some((s, r)) => (s, Some(r)),
            None => (text, None),
        };
        let state = AgentState::parse(state).ok_or_else(|| error::unknown_state(state))?;
        let reason = match reason {
            None => None,
            Some(r) => match volee_protocol::Reason::parse(r) {
                Some(r) if r.state() == state => Some(r),
                _ => return Err(error::unknown_reason(state, r)),
            },
        };
        Ok(Target { state, reason })
    }

    fn reached_by(&self, agent: &AgentView) -> bool {
        agent.state == self.state && self.reason.is_none_or(|r| agent.reason == Some(r))
    }
}

fn parse_states(text: &str) -> CliResult<Vec<Target>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| Target::parse(s.trim()))
        .collect::<CliResult<Vec<_>>>()
        .and_then(|v| {
            if v.is_empty() {
                Err(CliError::user("--until needs at least one state"))
            } else {
                Ok(v)
            }
        })
}

/// Follow an agent (`ID` or `MACHINE:ID`) until `done` says stop; returns the view it stopped
/// on (None on timeout) and the last one before.
fn follow(
    id: &str,
    timeout: Option<Duration>,
    mut done: impl FnMut(&AgentView) -> bool,
) -> CliResult<(Option<AgentView>, Option<AgentView>)> {
    let mut client = client()?;
    client.send(&Request::Watch { id: id.into() })?;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut last = None;
    loop {
        let resp = match deadline {
            None => Some(client.next_response()?),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    None
                } else {
                    client.next_response_within(left)?
                }
            }
        };
        match resp {
            None => return Ok((None, last)),
            Some(Response::Agent { agent }) => {
                if done(&agent) {
                    return Ok((Some(agent), last));
                }
                last = Some(agent);
            }
            Some(other) => return Err(CliError::from_response(other)),
        }
    }
}

pub fn wait(id: &str, until: &str, timeout: Option<f64>) -> CliResult {
    let states = parse_states(until)?;
    let timeout = match timeout {
        Some(t) if !(t.is_finite() && t >= 0.0) => {
            return Err(CliError::user(
                "--timeout must be a non-negative number of seconds",
            ))
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let (state, result) = wait_for(id, until, &states, timeout)?;
    out(&state);
    result
}

/// Follow agent `id` until it is in one of `states` (`until` names them for messages): the state
/// it ends in, and Ok, or the error `volee wait` exits with (ended elsewhere, timed out). While
/// its machine cannot be reached its state is the last one known, not a new one: it is waited
/// through, never taken as reached or ended.
pub fn wait_for(
    id: &str,
    until: &str,
    states: &[Target],
    timeout: Option<Duration>,
) -> CliResult<(String, CliResult)> {
    let reached = |a: &AgentView| states.iter().any(|t| t.reached_by(a));
    // Failed for another reason than the one waited for: that failure is the answer (a turn
    // that failed does not go on failing differently by itself).
    let failed_otherwise = |a: &AgentView| {
        a.state == AgentState::Failed
            && states
                .iter()
                .any(|t| t.state == AgentState::Failed && t.reason.is_some())
    };
    let (hit, last) = follow(id, timeout, |a| {
        a.reachable && (reached(a) || a.state.is_final() || failed_otherwise(a))
    })?;
    let said = |a: &AgentView| match a.reason {
        Some(r) if matches!(a.state, AgentState::Failed | AgentState::NeedsYou) => {
            format!("{}:{r}", a.state)
        }
        _ => a.state.to_string(),
    };
    Ok(match (hit, last) {
        // The state alone is printed (scripts compare it); the reason is in messages and JSON.
        (Some(agent), _) if reached(&agent) => (agent.state.to_string(), Ok(())),
        (Some(agent), _) => (
            agent.state.to_string(),
            Err(CliError::new(
                Exit::Unreachable,
                if agent.state.is_final() {
                    format!(
                        "agent {} ended as {} and can no longer reach {until}",
                        volee_view::address_text(&agent, 64),
                        said(&agent)
                    )
                } else {
                    format!(
                        "agent {} is {}, not {until}",
                        volee_view::address_text(&agent, 64),
                        said(&agent)
                    )
                },
            )),
        ),
        (None, last) => {
            let unreachable = last.as_ref().is_some_and(|a| !a.reachable);
            let state = last.map(|a| a.state.to_string()).unwrap_or_default();
            let err = CliError::new(
                Exit::Negative,
                if unreachable {
                    format!("timed out waiting for {id} to reach {until} (its machine cannot be reached; it was {state})")
                } else {
                    format!("timed out waiting for {id} to reach {until} (it is {state})")
                },
            );
            (state, Err(err))
        }
    })
}

/// `volee stop ID [--remove-worktree [--delete-branch]]`: the worktree goes only when nothing
/// would be lost — checked before the agent is stopped (then nothing is stopped) and again after.
pub fn stop_and_remove(id: &str, remove_worktree: bool, delete_branch: bool) -> CliResult {
    if !remove_worktree {
        if delete_branch {
            return Err(CliError::user(
                "--delete-branch goes with --remove-worktree",
            ));
        }
        return stop(id);
    }
    let agent = crate::ask::show(id)?;
    if let Some(machine) = &agent.machine {
        return Err(CliError::user(format!(
            "agent {} works on machine {machine}: --remove-worktree removes worktrees here only",
            agent.address()
        )));
    }
    let Some(wt) = agent.worktree.clone() else {
        return Err(CliError::user(format!(
            "agent {} ({}) works in no linked worktree",
            agent.id, agent.name
        )));
    };
    let path = std::path::PathBuf::from(&wt.path);
    let lost = crate::worktree::would_lose(&path, wt.branch.as_deref())?;
    if !lost.is_empty() {
        return Err(error::stop_would_lose(&agent, &wt.path, lost));
    }
    if !agent.state.is_final() {
        stop(&agent.id)?;
    }
    out(&crate::worktree::remove(
        &path,
        wt.branch.as_deref(),
        delete_branch,
    )?);
    Ok(())
}

pub fn stop(id: &str) -> CliResult {
    let agent = agent_of(ask(&Request::Stop { id: id.into() })?)?;
    let address = agent.address();
    let (hit, last) = follow(&address, Some(Duration::from_secs(10)), |a| {
        a.state.is_final()
    })?;
    match hit {
        Some(a) => {
            out(&format!("{} {}", volee_view::address_text(&a, 64), a.state));
            Ok(())
        }
        None => Err(CliError::internal(format!(
            "agent {} did not end within 10 s (it is {})",
            volee_view::address_text(&agent, 64),
            last.map(|a| a.state.to_string()).unwrap_or_default()
        ))),
    }
}

pub fn interrupt(id: &str) -> CliResult {
    ask(&Request::Interrupt { id: id.into() }).map(|_| ())
}

/// `volee usage [--since DURATION] [--by KEY] [--json]`: the daemon's ledger, read here (no
/// daemon needed).
pub fn usage(since: Option<&str>, by: &str, as_json: bool) -> CliResult {
    let since_ms = match since {
        None => 0,
        Some(text) => {
            let d = humantime::parse_duration(text).map_err(|_| {
                CliError::user(format!(
                    "--since {text:?} is not a duration (examples: 90m, 1d, 7days)"
                ))
            })?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_millis() as u64);
            now.saturating_sub(d.as_millis() as u64)
        }
    };
    let state = paths().state_dir;
    let (entries, bad) = volee_daemon::ledger::read(&state, since_ms)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    if bad > 0 {
        eprintln!(
            "warning: {bad} lines of {} could not be read (left out)",
            state.join(volee_daemon::ledger::FILE).display()
        );
    }
    let sums = volee_daemon::ledger::sum(&entries, by);
    if as_json {
        return json(&sums);
    }
    if sums.is_empty() {
        out("no usage recorded (volee records the tokens of agents whose harness writes them: docs/usage.md)");
        return Ok(());
    }
    let mut rows = vec![[
        by.to_uppercase(),
        "TOKENS".into(),
        "INPUT".into(),
        "OUTPUT".into(),
        "CACHE READ".into(),
        "CACHE WRITE".into(),
        "REQUESTS".into(),
        "COST".into(),
    ]];
    for s in &sums {
        let cost = match (s.cost_usd, s.unpriced_tokens) {
            (c, 0) => volee_view::cost_text(Some(c)),
            (c, _) if c > 0.0 => format!("{} + ?", volee_view::cost_text(Some(c))),
            _ => "?".into(),
        };
        rows.push([
            volee_view::text::plain_text(&s.key, 60),
            volee_view::tokens_short(s.input + s.output + s.cache_write),
            s.input.to_string(),
            s.output.to_string(),
            s.cache_read.to_string(),
            s.cache_write.to_string(),
            s.requests.to_string(),
            cost,
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let text: Vec<String> = rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect();
    out(&text.join("\n"));
    Ok(())
}

/// `volee budget ID +N|N|off`.
pub fn budget(id: &str, amount: &str, as_json: bool) -> CliResult {
    use volee_protocol::BudgetChange;
    let change = match amount.trim() {
        "off" => BudgetChange::Off,
        a => {
            let (add, amount) = match a.strip_prefix('+') {
                Some(n) => (true, n),
                None => (false, a),
            };
            match (add, Amount::parse(amount).map_err(CliError::user)?) {
                (true, Amount::Tokens(n)) => BudgetChange::Add(n),
                (false, Amount::Tokens(n)) => BudgetChange::Set(n),
                (true, Amount::Usd(c)) => BudgetChange::AddUsd(c),
                (false, Amount::Usd(c)) => BudgetChange::SetUsd(c),
            }
        }
    };
    let agent = agent_of(ask(&Request::Budget {
        id: id.into(),
        change,
    })?)?;
    if as_json {
        return json(&agent);
    }
    let tokens = agent
        .usage
        .as_ref()
        .map_or_else(|| "unknown".to_string(), |u| u.counted().to_string());
    out(&match &agent.budget {
        None => format!(
            "{} ({}): no budget; used {tokens} tokens",
            agent.id, agent.name
        ),
        Some(b) => {
            let used = match agent.usage.as_ref().map(|u| b.used(u)) {
                None => "unknown".to_string(),
                Some(None) => "unknown (no price for its model)".to_string(),
                Some(Some(Amount::Tokens(n))) => n.to_string(),
                Some(Some(used)) => used.to_string(),
            };
            format!(
                "{} ({}): budget {}, used {used}{}",
                agent.id,
                agent.name,
                b.limit(),
                if b.reached { " — reached: held" } else { "" }
            )
        }
    });
    Ok(())
}

pub fn peek(id: &str, lines: u32) -> CliResult {
    out(&text_of(ask(&Request::Peek {
        id: id.into(),
        lines,
    })?)?);
    Ok(())
}

/// `volee quiet [DURATION|off]`.
pub fn quiet(duration: Option<&str>) -> CliResult {
    let until_ms = match duration {
        Some("off") => None,
        other => {
            let d = match other {
                None => Duration::from_secs(3600),
                Some(text) => humantime_duration(text)?,
            };
            Some(volee_os::clock::now_ms() + d.as_millis() as u64)
        }
    };
    out(&text_of(ask(&Request::Quiet { until_ms })?)?);
    Ok(())
}

fn humantime_duration(text: &str) -> CliResult<Duration> {
    volee_daemon::config::Config::parse(&format!("retention = {text:?}"), "DURATION")
        .map(|c| c.retention)
        .map_err(|_| error::not_a_duration(text))
}

pub fn rm(id: &str) -> CliResult {
    ask(&Request::Remove { id: id.into() }).map(|_| ())
}

pub fn prune() -> CliResult {
    out(&text_of(ask(&Request::Prune)?)?);
    Ok(())
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum StatusFormat {
    Tmux,
    Plain,
    Json,
}

pub fn status(format: StatusFormat) -> CliResult {
    let agents = agents_of(ask(&Request::List { all: true })?)?;
    let counts = volee_view::Counts::from_agents(&agents);
    // Whether `volee quiet` holds notifications back (an older daemon cannot say: not shown).
    let quiet_until = match ask(&Request::QuietState) {
        Ok(Response::Quiet { until_ms }) => until_ms,
        _ => None,
    };
    let until = quiet_until.map(volee_store::rfc3339);
    match format {
        StatusFormat::Tmux => {
            let mark = if until.is_some() {
                volee_view::QUIET_TMUX
            } else {
                ""
            };
            out(&format!("{}{mark}", volee_view::status_tmux(&counts)));
        }
        StatusFormat::Plain => match &until {
            Some(u) => out(&format!(
                "{}; quiet until {u}",
                volee_view::status_plain(&counts)
            )),
            None => out(&volee_view::status_plain(&counts)),
        },
        StatusFormat::Json => {
            let mut v = volee_view::status_json(&counts);
            v["quiet_until"] = until.map_or(serde_json::Value::Null, Into::into);
            return json(&v);
        }
    }
    Ok(())
}

pub fn daemon(foreground: bool) -> CliResult {
    let paths = paths();
    paths.ensure()?;
    let config = Config::load(&paths.config_file())?;
    let log = volee_daemon::logging::RotatingLog::open(paths.log_file(), config.log_max_bytes)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("VOLEE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if foreground {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let _ = tracing_subscriber::registry()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(log)
                    .with_ansi(false),
            )
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .try_init();
    } else {
        // Leave the caller's session so a closing terminal or tmux job does not take us down.
        let _ = nix::unistd::setsid();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(log)
            .with_ansi(false)
            .try_init();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    tracing::info!("daemon starting (pid {})", std::process::id());
    Ok(runtime.block_on(volee_daemon::daemon::run(paths, config))?)
}

pub fn daemon_stop() -> CliResult {
    let paths = paths();
    match Client::connect(&paths) {
        Ok(mut client) => {
            volee_daemon::client::stop_daemon(&paths, &mut client, None);
            out("daemon stopped");
        }
        Err(
            e @ (volee_daemon::ClientError::Untrusted(_)
            | volee_daemon::ClientError::ForeignDaemon { .. }),
        ) => return Err(e.into()),
        Err(_) => out("no daemon running"),
    }
    Ok(())
}
