//! `volee doctor`: what this machine has for volee, one line each, with what to do.

use std::process::{Command, Stdio};
use std::time::Duration;

use volee_protocol::ProfileFit;

use crate::ask::paths;
use crate::error::{CliError, CliResult};
use crate::output::out;

enum Level {
    Ok,
    Warn,
    Missing,
}

struct Check {
    level: Level,
    what: String,
    detail: String,
    fix: Option<String>,
}

/// The first line `program args` prints, when it succeeds (`docker version`'s one answer).
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// `GET /api/version` of the Ollama server `OLLAMA_HOST` names (its base URL, and the version or
/// why not), with short timeouts and no retry.
fn ollama_version() -> (String, Result<String, String>) {
    let config = volee_ollama::OllamaConfig {
        connect_timeout: Duration::from_millis(500),
        first_byte_timeout: Duration::from_secs(2),
        retry: volee_ollama::RetryPolicy {
            max_retries: 0,
            ..volee_ollama::RetryPolicy::default()
        },
        ..volee_ollama::OllamaConfig::from_env()
    };
    let base = config.base_url.clone();
    let asked = volee_ollama::OllamaClient::new(config)
        .map_err(|e| e.to_string())
        .and_then(|client| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(client.version())
                .map_err(|e| e.to_string())
        });
    (base, asked)
}

fn checks() -> Vec<Check> {
    let mut checks = Vec::new();
    let check = |level, what: &str, detail: String, fix: Option<String>| Check {
        level,
        what: what.into(),
        detail,
        fix,
    };
    checks.push(match volee_tmux::server::version() {
        Ok(v) => {
            let ok = volee_harness::profile::parse_version(&v)
                .is_some_and(|n| (n[0], n.get(1).copied().unwrap_or(0)) >= (3, 3));
            if ok {
                check(Level::Ok, "tmux", v, None)
            } else {
                check(
                    Level::Warn,
                    "tmux",
                    format!("{v} (volee is measured on 3.3a+)"),
                    Some("install tmux 3.3a or newer".into()),
                )
            }
        }
        Err(e) => check(Level::Missing, "tmux", "not installed".into(), e.hint()),
    });
    // The user's profile files: those in use, and those skipped with why.
    for (name, path, overrides) in volee_harness::file::user_files() {
        let how = if *overrides {
            "overrides the built-in one"
        } else {
            "adds a harness"
        };
        checks.push(check(
            Level::Ok,
            "profile",
            format!("{name}: {} ({how})", path.display()),
            None,
        ));
    }
    for problem in volee_harness::file::problems() {
        checks.push(check(
            Level::Warn,
            "profile",
            format!("skipped: {problem}"),
            Some(format!(
                "volee profiles check {}",
                volee_view::sh_quote(&problem.origin)
            )),
        ));
    }
    // tmux-resurrect (and tmux-continuum, which runs its restore): in the caller's tmux server
    // when one runs, else where TPM installs plugins.
    let socket = crate::caller::tmux_socket(None);
    let server = volee_tmux::server::TmuxServer::new(&socket);
    let running = volee_tmux::server::version().is_ok() && server.is_running();
    let (fine, detail, fix) = crate::resurrect::doctor_line(running.then_some(&server));
    checks.push(check(
        if fine { Level::Ok } else { Level::Warn },
        "resurrect",
        detail,
        fix,
    ));
    let zellij = volee_zellij::find_binary()
        .ok()
        .and_then(|bin| crate::program::read_version(&bin, None));
    checks.push(match zellij {
        Some(v) => check(Level::Ok, "zellij", v, None),
        None => check(
            Level::Warn,
            "zellij",
            "not installed (optional: the zellij front end)".into(),
            volee_zellij::ZellijError::NotInstalled.hint(),
        ),
    });
    checks.push(if crate::zellij_ui::embedded() {
        check(
            Level::Ok,
            "zellij plugin",
            "carried by this binary (`volee up` inside zellij loads it)".into(),
            None,
        )
    } else {
        check(
            Level::Warn,
            "zellij plugin",
            "not built into this binary (the wasm32-wasip1 target was missing)".into(),
            Some("rustup target add wasm32-wasip1, then build volee again: cargo install --locked --path crates/volee-cli".into()),
        )
    });
    checks.push(
        match first_line("docker", &["version", "--format", "{{.Server.Version}}"]) {
            Some(v) => check(Level::Ok, "docker", format!("engine {v}"), None),
            None => check(
                Level::Warn,
                "docker",
                "no engine answers (needed by volee's own agent sandbox)".into(),
                Some("sudo apt-get install docker.io && sudo systemctl start docker".into()),
            ),
        },
    );
    let (ollama, version) = ollama_version();
    checks.push(match version {
        Ok(v) => check(Level::Ok, "ollama", format!("{v} at {ollama}"), None),
        Err(e) => check(
            Level::Warn,
            "ollama",
            format!("not reachable at {ollama} ({e}); needed by volee's own agent"),
            Some("install Ollama and run `ollama serve`, or set OLLAMA_HOST".into()),
        ),
    });
    // Desktop notifications go through the session bus; without one volee tells in tmux only.
    let notify = volee_daemon::config::Config::load(&paths().config_file())
        .map(|c| c.notify)
        .unwrap_or_default();
    checks.push(
        match (notify.desktop, volee_daemon::daemon::desktop_available()) {
            (false, _) => check(
                Level::Ok,
                "notifications",
                "desktop notifications off in config.toml; tmux messages and the status line".into(),
                None,
            ),
            (true, true) => check(
                Level::Ok,
                "notifications",
                "desktop (session bus), tmux messages and the status line".into(),
                None,
            ),
            (true, false) => check(
                Level::Warn,
                "notifications",
                "no session bus (DBUS_SESSION_BUS_ADDRESS): no desktop notifications, tmux messages and the status line only".into(),
                Some("start volee from your desktop session, or set [notify] desktop = false".into()),
            ),
        },
    );
    let paths = paths();
    checks.push(match volee_daemon::Client::connect(&paths) {
        Ok(_) => check(
            Level::Ok,
            "daemon",
            format!(
                "running (pid {})",
                volee_daemon::client::read_pid(&paths)
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "?".into())
            ),
            None,
        ),
        Err(_) => check(
            Level::Ok,
            "daemon",
            "not running (any volee command starts it)".into(),
            None,
        ),
    });
    // volee's plugin in each zellij session that holds agents (only a running daemon knows).
    let sessions = volee_daemon::Client::connect(&paths)
        .ok()
        .and_then(|mut c| c.request(&volee_protocol::Request::ZellijSessions).ok());
    if let Some(volee_protocol::Response::ZellijSessions { sessions }) = sessions {
        for s in sessions {
            let what = format!("zellij session {:?}", s.name);
            checks.push(match s.plugin {
                volee_protocol::PluginState::Running => check(
                    Level::Ok,
                    "plugin",
                    format!("{what}: volee's plugin runs"),
                    None,
                ),
                volee_protocol::PluginState::Missing => check(
                    Level::Warn,
                    "plugin",
                    format!("{what}: no volee plugin (no bells from hidden tabs, no agents pane)"),
                    Some("run `volee up` inside that session".to_string()),
                ),
                volee_protocol::PluginState::Mismatch {
                    plugin_version,
                    hint,
                } => check(
                    Level::Warn,
                    "plugin",
                    format!(
                        "{what}: its volee plugin speaks protocol {plugin_version}, this volee {}",
                        volee_protocol::zellij::PIPE_VERSION
                    ),
                    Some(hint),
                ),
            });
        }
    }
    for profile in volee_harness::profiles()
        .iter()
        // volee's own agent is this binary: nothing to find on PATH.
        .filter(|p| {
            !p.program.is_empty() && p.instrumentation != volee_harness::Instrumentation::BuiltIn
        })
    {
        let Some(range) = profile.measured else {
            continue;
        };
        let measured = if range.min == range.max {
            range.min.to_string()
        } else {
            format!("{}–{}", range.min, range.max)
        };
        let install = profile.install_hint();
        let version = volee_os::program::find(profile.program)
            .and_then(|p| crate::program::read_version(&p, None));
        checks.push(match version {
            None => check(Level::Warn, profile.name, format!("{} not installed (measured: {measured})", profile.display_name), install),
            Some(v) => {
                let fit = if range.contains(&v) { ProfileFit::Measured } else { ProfileFit::OtherVersion };
                match fit {
                    ProfileFit::Measured => check(Level::Ok, profile.name, format!("{v} (measured)"), None),
                    _ => check(Level::Warn, profile.name, format!("{v}: outside the measured {measured}; hooks used, screen states generic"), install),
                }
            }
        });
    }
    checks
}

pub fn doctor() -> CliResult {
    let checks = checks();
    let mut text = String::new();
    for c in &checks {
        let mark = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Missing => "FAIL",
        };
        text.push_str(&format!("{mark}  {:<8} {}\n", c.what, c.detail));
        if let Some(fix) = &c.fix {
            text.push_str(&format!("      {:<8} fix: {fix}\n", ""));
        }
    }
    out(&text);
    if checks.iter().any(|c| matches!(c.level, Level::Missing)) {
        return Err(CliError::env(
            "volee cannot run here yet: see the FAIL lines above",
        ));
    }
    Ok(())
}
