//! Fuzz the `/proc` parsers: `cargo +nightly fuzz run proc_parsers` (from `fuzz/`).
//! Process names and arguments are chosen by whoever started a process: never panic, and a parsed
//! `stat` keeps the name between the first `(` and the last `)`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_procscan::{parse_cmdline, parse_environ, parse_stat, pts_path};

fuzz_target!(|data: &[u8]| {
    if let Some(stat) = parse_stat(data) {
        assert!(!stat.comm.contains('\u{0}') || data.contains(&0));
        let _ = pts_path(stat.tty_nr);
    }
    let _ = parse_cmdline(data);
    let _ = parse_environ(data);
});
