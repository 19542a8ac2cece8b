//! Embeds every built-in profile file: `profiles/*.toml`, in name order, the generic one last.
//! A new harness is a new file there; nothing in the code names it.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("profiles");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            files.push(path);
        }
    }
    files.sort_by_key(|p| (p.file_stem().is_some_and(|s| s == "generic"), p.clone()));
    let mut code = String::from(
        "/// Every built-in profile file's text (listed by build.rs).\npub const BUILT_IN: &[&str] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        code.push_str(&format!(
            "    include_str!({:?}),\n",
            f.display().to_string()
        ));
    }
    code.push_str("];\n");
    std::fs::write(
        PathBuf::from(std::env::var("OUT_DIR")?).join("built_in.rs"),
        code,
    )?;
    Ok(())
}
