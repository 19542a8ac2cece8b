//! What commands print on stdout.

use std::io::Write;

use crate::error::CliResult;

/// Print to stdout; a closed pipe (`volee ls | head`) ends the program quietly.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let written = if text.ends_with('\n') || text.is_empty() {
        stdout.write_all(text.as_bytes())
    } else {
        writeln!(stdout, "{text}")
    };
    if written.and_then(|()| stdout.flush()).is_err() {
        std::process::exit(0);
    }
}

/// `value` as pretty JSON on stdout.
pub fn json(value: &impl serde::Serialize) -> CliResult {
    out(&serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Seconds since the epoch, the `now` the renderings of ages take.
pub fn now_secs() -> u64 {
    volee_os::clock::now_ms() / 1000
}
