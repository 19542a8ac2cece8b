//! volee as a TPM plugin, the way TPM loads one: the repository cloned into
//! `~/.tmux/plugins/volee/`, then every `*.tmux` file at its root run as an executable, from
//! inside tmux (tmux-plugins/tpm `scripts/source_plugins.sh`: `local plugin_tmux_files=
//! "$plugin_path*.tmux"` … `$tmux_file >/dev/null 2>&1`, the plugin path ending in `/`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use volee_test_support::{require, wait_until, TestEnv};

use crate::setup;
use crate::tmux_front::Viewer;

/// Clone the repository this test was built from (its committed files: what TPM's `git clone`
/// gets) into the test's `~/.tmux/plugins/volee`.
fn clone_plugin(env: &TestEnv) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let plugins = env.home().join(".tmux/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let dest = plugins.join("volee");
    let out = Command::new("git")
        .args(["clone", "--quiet", "--depth", "1"])
        .arg(format!(
            "file://{}",
            std::fs::canonicalize(&repo).unwrap().display()
        ))
        .arg(&dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git clone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dest
}

/// Run the plugin's root `*.tmux` files as TPM does, inside the private tmux server
/// (`run-shell`), with `path` as the shell's PATH.
fn source_like_tpm(env: &TestEnv, plugin: &Path, path: &str) {
    let script = format!(
        "PATH='{path}'; plugin_path='{}/'; for tmux_file in $plugin_path*.tmux; do [ -f \"$tmux_file\" ] || continue; $tmux_file >/dev/null 2>&1; done",
        plugin.display()
    );
    env.tmux(&["run-shell", &script]);
}

#[test]
fn tpm_loads_volee_from_the_plugins_root() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !require("git", "the TPM test") {
        return;
    }
    let plugin = clone_plugin(&env);
    assert!(
        plugin.join("volee.tmux").is_file(),
        "a *.tmux file at the root"
    );
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_volee")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    source_like_tpm(&env, &plugin, &path);
    // What `volee tmux-init` installs: the status option, the picker key.
    let keys = || env.tmux(&["list-keys", "-T", "prefix", "a"]);
    wait_until(
        "volee's picker key is bound",
        Duration::from_secs(10),
        || keys().contains("volee").then_some(()),
        keys,
    );
    let status = env.tmux(&["show-option", "-gv", "status-right"]);
    assert!(status.contains("@volee-status"), "{status}");
    // The daemon it started pushes the summary into the status line's option.
    let pushed = || env.tmux(&["show-option", "-gqv", "@volee-status"]);
    wait_until(
        "the daemon pushes @volee-status",
        Duration::from_secs(10),
        || (!pushed().trim().is_empty()).then_some(()),
        pushed,
    );
}

#[test]
fn without_the_binary_tpm_says_how_to_get_it() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !require("git", "the TPM test") {
        return;
    }
    let plugin = clone_plugin(&env);
    let viewer = Viewer::start(&env);
    // No volee on PATH, none in ~/.cargo/bin or the plugin's target/; no cargo either, so no
    // build is offered: the message is what the user sees.
    source_like_tpm(&env, &plugin, "/usr/bin:/bin");
    let messages = || env.tmux(&["show-messages"]);
    let said = wait_until(
        "the plugin says the binary is missing",
        Duration::from_secs(10),
        || {
            let m = messages();
            m.contains("volee binary is not installed").then_some(m)
        },
        || format!("{}\n{}", messages(), viewer.capture()),
    );
    assert!(
        said.contains("cargo install --locked --path") && said.contains("crates/volee-cli"),
        "{said}"
    );
    let keys = env.tmux(&["list-keys", "-T", "prefix"]);
    assert!(
        !keys.contains("volee"),
        "nothing of volee's was installed: {keys}"
    );
}
