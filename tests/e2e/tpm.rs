//! volee as a TPM plugin, loaded the way tmux-plugins/tpm loads one. TPM clones the repository
//! into its plugin path (`scripts/install_plugins.sh`: `git clone --single-branch --recursive`,
//! into `$(tpm_path)`, default `~/.tmux/plugins/`), then runs every `*.tmux` file at the clone's
//! root as an executable, from inside tmux (`scripts/source_plugins.sh`:
//! `local plugin_tmux_files="$plugin_path*.tmux"`, `for tmux_file in $plugin_tmux_files`,
//! `[ -f "$tmux_file" ] || continue`, `$tmux_file >/dev/null 2>&1`, the plugin path ending in
//! `/`). tmux.conf's `run '~/.tmux/plugins/tpm/tpm'` does that when tmux starts, and `prefix I`
//! does it by sourcing tmux.conf again after the clone (`bindings/install_plugins`:
//! `tmux source-file` of the user's tmux.conf).
//!
//! Here the clone is of the repository this test was built from (its committed files: what TPM's
//! `git clone` gets), `tpm` is a stand-in that sources the plugins its tmux.conf names the way
//! TPM does, and the private tmux server is started from a terminal with that tmux.conf (tmux's
//! start) or made to source it again (`prefix I`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use volee_test_support::{require, wait_until, TestEnv};

use crate::tmux_front::Viewer;
use crate::{output_within, setup, setup_without_server};

/// TPM's `tpm` as far as it sources installed plugins: the plugins named by tmux.conf's
/// `set -g @plugin` lines, each under the plugin path (tmux's global `TMUX_PLUGIN_MANAGER_PATH`,
/// which TPM sets to `~/.tmux/plugins/` when tmux.conf does not), every root `*.tmux` file run
/// as an executable with its output discarded.
const TPM_STAND_IN: &str = r#"#!/usr/bin/env bash
tmux show-environment -g TMUX_PLUGIN_MANAGER_PATH >/dev/null 2>&1 ||
  tmux set-environment -g TMUX_PLUGIN_MANAGER_PATH "$HOME/.tmux/plugins/"
tpm_path="$(tmux show-environment -g TMUX_PLUGIN_MANAGER_PATH | cut -f2 -d=)/"
for plugin in $(sed -n "s/^[[:space:]]*set -g @plugin ['\"]\([^'\"]*\)['\"].*/\1/p" "$HOME/.tmux.conf"); do
  name="${plugin##*/}"
  plugin_path="$tpm_path${name%.git}/"
  [ -d "$plugin_path" ] || continue
  for tmux_file in $plugin_path*.tmux; do
    [ -f "$tmux_file" ] || continue
    $tmux_file >/dev/null 2>&1
  done
done
"#;

/// What the prompt asks when the binary is missing and cargo is there.
const OFFER: &str = "volee is not installed: build it now in a new window";

/// The README's TPM set-up in the test's HOME: `~/.tmux.conf` naming volee, TPM's stand-in, and
/// volee cloned into the plugin path (`manager_path`, else TPM's default). The clone's path.
fn install_like_tpm(env: &TestEnv, manager_path: Option<&Path>) -> PathBuf {
    let home = env.home();
    let tpm = home.join(".tmux/plugins/tpm/tpm");
    std::fs::create_dir_all(tpm.parent().unwrap()).unwrap();
    std::fs::write(&tpm, TPM_STAND_IN).unwrap();
    make_executable(&tpm);
    let manager_line = manager_path
        .map(|p| {
            format!(
                "set-environment -g TMUX_PLUGIN_MANAGER_PATH '{}'\n",
                p.display()
            )
        })
        .unwrap_or_default();
    std::fs::write(
        home.join(".tmux.conf"),
        format!(
            "set -g @plugin 'tmux-plugins/tpm'\nset -g @plugin 'volee-dev/volee'\n{manager_line}run '~/.tmux/plugins/tpm/tpm'\n"
        ),
    )
    .unwrap();

    let plugins = manager_path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| home.join(".tmux/plugins"));
    std::fs::create_dir_all(&plugins).unwrap();
    let repo = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap();
    let out = Command::new("git")
        .args(["clone", "--quiet", "--single-branch", "--recursive"])
        .arg(format!("file://{}", repo.display()))
        .arg("volee")
        .current_dir(&plugins)
        .env("HOME", &home)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git clone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plugin = std::fs::canonicalize(plugins.join("volee")).unwrap();
    assert!(
        plugin.join("volee.tmux").is_file(),
        "a *.tmux file at the repository's root (committed?)"
    );
    plugin
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The binary under test at `dest` (a hard link, else a copy), as `cargo install` or a build in
/// the plugin would leave it.
fn place_binary(dest: &Path) {
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let bin = env!("CARGO_BIN_EXE_volee");
    if std::fs::hard_link(bin, dest).is_err() {
        std::fs::copy(bin, dest).unwrap();
    }
}

/// The user's PATH: `first`, then the test's PATH without the directories that hold a `volee`
/// or a `cargo` (tmux, bash and the tools the plugin uses stay).
fn user_path(first: &[&Path]) -> String {
    let test_path = std::env::var_os("PATH").unwrap_or_default();
    let rest = std::env::split_paths(&test_path)
        .filter(|dir| !dir.join("volee").exists() && !dir.join("cargo").exists());
    let all: Vec<PathBuf> = first.iter().map(|p| p.to_path_buf()).chain(rest).collect();
    std::env::join_paths(all)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// `prefix I` once the clone is there: TPM sources tmux.conf again, from the running server,
/// whose environment has `path` as PATH. Loading never waits for the user (TPM goes on to the
/// next plugin): a plugin that asks a question answers it in the background.
fn prefix_i(env: &TestEnv, path: &str) {
    env.tmux(&["set-environment", "-g", "PATH", path]);
    let conf = env.home().join(".tmux.conf");
    let mut source = env.tmux_command();
    source.arg("source-file").arg(&conf);
    let out = output_within(source, Duration::from_secs(20));
    assert!(
        out.status.success(),
        "source-file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// tmux started by the user from a terminal, with `path` as PATH: the server loads
/// `~/.tmux.conf` (so TPM) before its first client is attached. The terminal, once the client is.
fn start_tmux_with_conf(env: &TestEnv, path: &str) -> Viewer {
    let vars = [
        ("HOME", env.home()),
        ("PATH", PathBuf::from(path)),
        ("VOLEE_HOME", env.volee_home()),
        ("TMUX_TMPDIR", env.tmux_tmpdir()),
        ("LANG", PathBuf::from("C.UTF-8")),
        ("VOLEE_LOG", PathBuf::from("debug")),
    ];
    let vars: Vec<String> = vars
        .iter()
        .map(|(k, v)| format!("{k}='{}'", v.display()))
        .collect();
    let command = format!(
        "env -i TERM=\"$TERM\" {} tmux -S '{}' -f '{}' new-session -s main",
        vars.join(" "),
        env.tmux_socket().display(),
        env.home().join(".tmux.conf").display()
    );
    let viewer = Viewer::run(env, &command);
    let clients = || {
        env.tmux_command()
            .args(["list-clients", "-F", "#{client_name}"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    wait_until(
        "tmux started with ~/.tmux.conf and its client is attached",
        Duration::from_secs(10),
        || (!clients().is_empty()).then_some(()),
        || viewer.capture(),
    );
    viewer
}

fn option(env: &TestEnv, name: &str) -> String {
    env.tmux(&["show-option", "-gqv", name]).trim().to_string()
}

/// What `volee tmux-init` run by the plugin leaves, with `bin` the binary it found: the
/// options, the picker key, the status line, and the daemon it started, which pushes the summary
/// into `@volee-status` and answers `volee ls`.
fn assert_loaded(env: &TestEnv, bin: &Path) {
    let bin = bin.display().to_string();
    wait_until(
        &format!("the plugin ran {bin} tmux-init"),
        Duration::from_secs(15),
        || (option(env, "@volee-bin") == bin).then_some(()),
        || {
            format!(
                "@volee-bin = {:?}\nmessages:\n{}",
                option(env, "@volee-bin"),
                env.tmux(&["show-messages"])
            )
        },
    );
    let picker = env.tmux(&["list-keys", "-T", "prefix", "a"]);
    assert!(
        // tmux ≥ 3.2 here: the browser in a popup.
        picker.contains(&bin) && picker.contains(" browse --popup "),
        "{picker}"
    );
    let status = option(env, "status-right");
    assert!(status.contains("#{@volee-status}"), "{status}");
    // No volee command of the test's has run: the daemon is the one tmux-init started.
    let pid = wait_until(
        "tmux-init started the daemon",
        Duration::from_secs(10),
        || env.daemon_pid(),
        || env.log_tail(),
    );
    wait_until(
        "the daemon pushes the summary into @volee-status",
        Duration::from_secs(10),
        || {
            option(env, "@volee-status")
                .contains("no agents")
                .then_some(())
        },
        || option(env, "@volee-status"),
    );
    let ls: serde_json::Value = serde_json::from_str(&env.ok(["ls", "--json"])).unwrap();
    assert_eq!(ls, serde_json::json!([]));
    assert_eq!(env.daemon_pid(), Some(pid), "the same daemon answered");
}

/// Nothing of volee's is on the server: no key, no option, no daemon.
fn assert_not_loaded(env: &TestEnv) {
    let keys = env.tmux(&["list-keys", "-T", "prefix"]);
    assert!(!keys.contains("volee"), "{keys}");
    assert_eq!(option(env, "@volee-bin"), "");
    assert_eq!(env.daemon_pid(), None);
}

/// A stand-in `cargo` in a directory of its own: `cargo install --locked --path
/// PLUGIN/crates/volee-cli` puts the binary under test into `~/.cargo/bin` as cargo would, and
/// leaves `~/cargo-ran`. The directory.
fn fake_cargo(env: &TestEnv, plugin: &Path) -> PathBuf {
    let dir = env.root().join("cargo-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        r#"#!/bin/sh
: > "$HOME/cargo-ran"
[ "$*" = "install --locked --path {plugin}/crates/volee-cli" ] || {{ echo "unexpected: cargo $*"; exit 2; }}
mkdir -p "$HOME/.cargo/bin"
ln -f '{bin}' "$HOME/.cargo/bin/volee" 2>/dev/null || cp '{bin}' "$HOME/.cargo/bin/volee"
echo "    Installed package volee-cli (executable volee)"
"#,
        plugin = plugin.display(),
        bin = env!("CARGO_BIN_EXE_volee"),
    );
    std::fs::write(dir.join("cargo"), script).unwrap();
    make_executable(&dir.join("cargo"));
    dir
}

/// Waits for the message naming the command that installs volee from `plugin`; the message log.
fn wait_for_install_message(env: &TestEnv, viewer: &Viewer, plugin: &Path) -> String {
    let install = format!(
        "volee is not installed. Get it with: cargo install --locked --path {}/crates/volee-cli",
        plugin.display()
    );
    let messages = || env.tmux(&["show-messages"]);
    wait_until(
        "the plugin says how to get the binary",
        Duration::from_secs(10),
        || {
            let m = messages();
            m.contains(&install).then_some(m)
        },
        || format!("{}\n{}", messages(), viewer.capture()),
    )
}

#[test]
fn prefix_i_loads_volee_found_on_path() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !require("git", "the TPM tests") {
        return;
    }
    install_like_tpm(&env, None);
    let bin = Path::new(env!("CARGO_BIN_EXE_volee"));
    prefix_i(&env, &user_path(&[bin.parent().unwrap()]));
    assert_loaded(&env, bin);
}

#[test]
fn prefix_i_loads_the_plugins_own_build() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !require("git", "the TPM tests") {
        return;
    }
    let plugin = install_like_tpm(&env, None);
    let built = plugin.join("target/release/volee");
    place_binary(&built);
    prefix_i(&env, &user_path(&[]));
    assert_loaded(&env, &built);
}

#[test]
fn tmux_start_loads_volee_from_cargos_bin() {
    let Some((_serial, env)) = setup_without_server() else {
        return;
    };
    if !require("git", "the TPM tests") {
        return;
    }
    install_like_tpm(&env, None);
    let installed = env.home().join(".cargo/bin/volee");
    place_binary(&installed);
    let _terminal = start_tmux_with_conf(&env, &user_path(&[]));
    assert_loaded(&env, &installed);
}

#[test]
fn without_the_binary_or_cargo_it_says_how_to_get_it() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !require("git", "the TPM tests") {
        return;
    }
    // A plugin path with the characters tmux expands in a message (TPM takes it from
    // TMUX_PLUGIN_MANAGER_PATH): the message shows it as it is.
    let manager = env.home().join("plugins#1%H");
    let plugin = install_like_tpm(&env, Some(&manager));
    let viewer = Viewer::start(&env);
    prefix_i(&env, &user_path(&[]));
    wait_for_install_message(&env, &viewer, &plugin);
    // On the client's status line too, the path as it is.
    let shown = viewer.capture();
    assert!(
        shown.contains("plugins#1%H/volee/crates/volee-cli"),
        "{shown}"
    );
    assert!(!shown.contains(OFFER), "no build offered without cargo");
    assert_not_loaded(&env);
}

#[test]
fn declining_the_build_says_how_to_get_it() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !require("git", "the TPM tests") {
        return;
    }
    let plugin = install_like_tpm(&env, None);
    let cargo = fake_cargo(&env, &plugin);
    let viewer = Viewer::start(&env);
    prefix_i(&env, &user_path(&[&cargo]));
    wait_until(
        "the plugin offers to build volee",
        Duration::from_secs(10),
        || viewer.capture().contains(OFFER).then_some(()),
        || viewer.capture(),
    );
    viewer.keys(&["n"]);
    wait_for_install_message(&env, &viewer, &plugin);
    assert!(!env.home().join("cargo-ran").exists(), "cargo did not run");
    assert_not_loaded(&env);
}

#[test]
fn at_tmux_start_it_offers_the_build_and_loads_what_it_built() {
    let Some((_serial, env)) = setup_without_server() else {
        return;
    };
    if !require("git", "the TPM tests") {
        return;
    }
    let plugin = install_like_tpm(&env, None);
    let cargo = fake_cargo(&env, &plugin);
    // tmux runs TPM before its first client is attached: the question waits for the client.
    let terminal = start_tmux_with_conf(&env, &user_path(&[&cargo]));
    wait_until(
        "the plugin offers to build volee once the client is attached",
        Duration::from_secs(10),
        || terminal.capture().contains(OFFER).then_some(()),
        || format!("{}\n{}", terminal.capture(), env.tmux(&["show-messages"])),
    );
    terminal.keys(&["y"]);
    wait_until(
        "the build window says volee is built and loaded",
        Duration::from_secs(15),
        || {
            terminal
                .capture()
                .contains("volee is built and loaded")
                .then_some(())
        },
        || terminal.capture(),
    );
    let windows = env.tmux(&["list-windows", "-F", "#{window_name}"]);
    assert!(windows.lines().any(|w| w == "volee-build"), "{windows}");
    assert_loaded(&env, &env.home().join(".cargo/bin/volee"));
    terminal.keys(&["Enter"]);
    let windows = || env.tmux(&["list-windows", "-F", "#{window_name}"]);
    wait_until(
        "Enter closes the build window",
        Duration::from_secs(5),
        || (!windows().lines().any(|w| w == "volee-build")).then_some(()),
        windows,
    );
}
