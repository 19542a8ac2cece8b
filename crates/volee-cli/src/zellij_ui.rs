//! volee in zellij, in one step: inside a zellij session, `volee up` writes the plugin this
//! binary carries to volee's data dir and starts it in that session (`zellij pipe --plugin`,
//! which zellij 0.45.1 opens in a floating pane; the plugin hides its pane once its permissions
//! are granted and runs like a `load_plugins` plugin). No `config.kdl` is edited, no tmux is
//! touched, zellij's `permissions.kdl` is never written: the user answers zellij's prompt.
//! `volee down` closes it and removes the file.

use std::path::PathBuf;

use volee_daemon::Paths;
use volee_protocol::zellij::{PluginCommand, PluginEvent, BACKGROUND_KEY, PIPE_VERSION};
use volee_zellij::{ZellijCli, ZellijError};

use crate::ask::{ask, client, paths};
use crate::error::{self, CliError, CliResult, Exit};
use crate::output::out;

/// The plugin built with this binary (`build.rs`), when the wasm target was there.
#[cfg(volee_plugin)]
const WASM: Option<&[u8]> = Some(include_bytes!(concat!(
    env!("OUT_DIR"),
    "/volee_zellij_plugin.wasm"
)));
#[cfg(not(volee_plugin))]
const WASM: Option<&[u8]> = None;

/// What the plugin asks zellij for, and why (said by `volee up`).
pub const PERMISSIONS: &str = "ReadApplicationState and ReadPaneContents (see the session's panes, tabs, bells and screens), ReadCliPipes (talk with volee's daemon), ChangeApplicationState (name its pane, focus an agent's pane), OpenTerminalsOrPlugins and RunCommands (its pane runs `volee launch` and `volee sessions resume`)";

/// Does this binary carry the plugin?
pub fn embedded() -> bool {
    WASM.is_some()
}

/// The zellij session this command runs in.
pub fn caller_session() -> Option<String> {
    std::env::var("ZELLIJ_SESSION_NAME")
        .ok()
        .filter(|s| !s.is_empty())
}

/// Where `volee up` puts the plugin.
pub fn plugin_path(paths: &Paths) -> PathBuf {
    paths.data_dir.join("zellij").join("volee.wasm")
}

/// The plugin's URL and configuration as `volee up` starts it (the same pair reaches the same
/// instance: zellij tells plugins apart by both).
fn plugin_address(paths: &Paths) -> (String, String) {
    (
        format!("file:{}", plugin_path(paths).display()),
        format!("{BACKGROUND_KEY}=true"),
    )
}

/// Write the carried plugin to volee's data dir (a private file of the user's), unless the same
/// bytes are there already.
fn install(paths: &Paths) -> CliResult<PathBuf> {
    let wasm = WASM.ok_or_else(error::plugin_not_built)?;
    let path = plugin_path(paths);
    if std::fs::read(&path).is_ok_and(|old| old == wasm) {
        return Ok(path);
    }
    if let Some(dir) = path.parent() {
        volee_daemon::paths::ensure_private_dir(dir)
            .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    }
    volee_daemon::persist::write_atomic(&path, wasm)
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    Ok(path)
}

fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::from_error(Exit::Internal, &e))
}

/// `volee up` inside zellij session `session`.
pub fn up(session: &str) -> CliResult {
    client()?;
    let paths = paths();
    let path = install(&paths)?;
    let (url, configuration) = plugin_address(&paths);
    let zellij = ZellijCli::new(volee_zellij::find_binary()?, session);
    let ping = PluginCommand::Ping {
        version: PIPE_VERSION,
    };
    let answer = runtime()?.block_on(zellij.pipe_to_plugin(&url, &configuration, &ping));
    let summary = match ask(&volee_protocol::Request::List { all: true })? {
        volee_protocol::Response::Agents { agents } => {
            volee_view::status_plain(&volee_view::Counts::from_agents(&agents))
        }
        _ => String::new(),
    };
    match answer {
        Ok(line) => match serde_json::from_str::<PluginEvent>(line.trim()) {
            Ok(PluginEvent::Hello { version, .. }) if version == PIPE_VERSION => {
                out(&format!(
                    "volee is up in zellij session {session:?}: {summary}. Its plugin runs in the background ({}); no zellij config was changed.",
                    path.display()
                ));
            }
            Ok(PluginEvent::Mismatch { hint, .. }) => {
                return Err(error::plugin_mismatch(session, hint))
            }
            _ => {
                return Err(CliError::internal(format!(
                    "volee's plugin in zellij session {session:?} answered {:?}",
                    line.trim()
                )))
            }
        },
        // Waiting for the user: zellij asks for the plugin's permissions in its pane first.
        Err(ZellijError::Timeout { .. }) => out(&format!(
            "volee is up in zellij session {session:?}: {summary}. zellij now asks you, in a floating pane, to grant volee's plugin: {PERMISSIONS}. Answer y; the pane then hides and the plugin runs in the background."
        )),
        Err(e) => return Err(e.into()),
    }
    out(&format!(
        "The agents pane: zellij action launch-or-focus-plugin --floating --configuration {configuration} {url}"
    ));
    Ok(())
}

/// `volee down` inside zellij session `session`: the plugin `up` started is closed and its file
/// removed.
pub fn down(session: &str) -> CliResult {
    let paths = paths();
    let path = plugin_path(&paths);
    if path.is_file() {
        let (url, _) = plugin_address(&paths);
        if let Ok(bin) = volee_zellij::find_binary() {
            let zellij = ZellijCli::new(bin, session);
            let quit = PluginCommand::Quit {
                version: PIPE_VERSION,
            };
            let runtime = runtime()?;
            // Only a running instance is told: a pipe to a plugin that is not running starts it.
            let running = runtime
                .block_on(zellij.list_panes())
                .unwrap_or_default()
                .iter()
                .any(|p| p.plugin_url.as_deref() == Some(url.as_str()));
            if running {
                // Broadcast: only the instance `up` started closes (addressed to its URL, the
                // pipe would start it again as it ends).
                let _ = runtime.block_on(zellij.pipe_command(&quit));
            }
        }
        std::fs::remove_file(&path).map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    }
    Ok(())
}
