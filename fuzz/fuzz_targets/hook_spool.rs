//! Fuzz the hook spool's replay parser: `cargo +nightly fuzz run hook_spool` (from `fuzz/`). The
//! spool may be torn by a full disk or hold bytes that are not UTF-8: never panic, and every line
//! is either an event or a reported bad line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_harness::hooks::parse_hook_spool;

fuzz_target!(|data: &[u8]| {
    let (events, bad) = parse_hook_spool(data);
    let lines = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count();
    assert_eq!(events.len() + bad.len(), lines);
    assert!(bad.windows(2).all(|w| w[0].0 < w[1].0));
});
