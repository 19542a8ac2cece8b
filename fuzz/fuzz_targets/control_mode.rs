//! Fuzz the tmux control-mode parser: `cargo +nightly fuzz run control_mode` (from `fuzz/`).
//!
//! Besides "never panics", it checks the parser's chunking promise: feeding the input in two
//! chunks yields exactly the events of feeding it at once. The first byte picks the split point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_tmux::control::ControlParser;

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let at = usize::from(split) * data.len() / 255;
    let (first, second) = data.split_at(at);

    let mut chunked = ControlParser::new();
    let mut events = chunked.feed(first);
    events.extend(chunked.feed(second));

    let whole = ControlParser::new().feed(data);
    assert_eq!(events, whole, "split at {at} changed the events");
});
