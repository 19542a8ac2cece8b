//! Builds volee's zellij plugin (`zellij-plugin/`, for `wasm32-wasip1`) so the `volee` binary
//! carries it: inside zellij, `volee up` writes it out and loads it, with no build step of the
//! user's. Without the wasm target the binary is built without the plugin (a warning says so, and
//! `volee doctor` says how to get it); a plugin that does not compile fails the build.
//! `VOLEE_NO_PLUGIN=1` builds without it on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip1";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(volee_plugin)");
    println!("cargo:rerun-if-env-changed=VOLEE_NO_PLUGIN");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("../..");
    let plugin = root.join("zellij-plugin");
    for watched in [
        plugin.join("src"),
        plugin.join("Cargo.toml"),
        plugin.join("Cargo.lock"),
        root.join("crates/volee-protocol/src"),
        root.join("crates/volee-protocol/Cargo.toml"),
        root.join("crates/volee-view/src"),
        root.join("crates/volee-view/Cargo.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    if std::env::var_os("VOLEE_NO_PLUGIN").is_some_and(|v| v == "1") || !plugin.is_dir() {
        return;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    if !has_target(Path::new(&rustc)) {
        println!(
            "cargo:warning=volee is built without its zellij plugin: the {TARGET} target is missing (rustup target add {TARGET}, then build again)"
        );
        return;
    }
    // One plugin build for every profile of the outer build, in its own target directory (the
    // outer build holds the lock of its own).
    let outer = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target_dir = outer.join("zellij-plugin");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--release", "--locked", "--target", TARGET])
        .arg("--manifest-path")
        .arg(plugin.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    // What the outer build set for its own compiler (clippy's driver, flags for the host) is
    // not for the plugin's.
    for var in [
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
    ] {
        build.env_remove(var);
    }
    let status = build.status();
    if !status.is_ok_and(|s| s.success()) {
        panic!("the zellij plugin did not build: cargo build --release --manifest-path zellij-plugin/Cargo.toml --target {TARGET}");
    }
    let wasm = target_dir.join(format!("{TARGET}/release/volee_zellij_plugin.wasm"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::copy(&wasm, out.join("volee_zellij_plugin.wasm")) {
        panic!(
            "the zellij plugin was built but {} cannot be read: {e}",
            wasm.display()
        );
    }
    println!("cargo:rustc-cfg=volee_plugin");
}

/// Does this compiler have the standard library for [`TARGET`]?
fn has_target(rustc: &Path) -> bool {
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&sysroot)
        .join(format!("lib/rustlib/{TARGET}/lib"))
        .is_dir()
}
