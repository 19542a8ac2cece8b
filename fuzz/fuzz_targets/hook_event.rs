//! Fuzz the hook payload parsing of `volee hook`: `cargo +nightly fuzz run hook_event` (from
//! `fuzz/`). The payload is whatever a harness (or anything else) writes to the hook's stdin:
//! never panic, keep only short fields, and say why a payload was not used.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_harness::hooks::{read_hook_payload, MAX_HOOK_BYTES};
use volee_protocol::HookEvent;

fuzz_target!(|data: &[u8]| {
    let base = HookEvent {
        agent: "a1".into(),
        token: None,
        event_id: None,
        harness: "claude".into(),
        event: "Stop".into(),
        at_ms: 0,
        session_id: None,
        fields: Vec::new(),
        error: None,
    };
    let ev = read_hook_payload(base, data);
    assert!(ev.fields.iter().all(|(_, v)| v.len() <= 200));
    assert!(ev.session_id.as_ref().is_none_or(|s| s.len() <= 200));
    if data.len() > MAX_HOOK_BYTES {
        assert!(ev.error.is_some());
    }
    // What the CLI would send or spool always reads back.
    let line = serde_json::to_vec(&ev).unwrap();
    assert_eq!(serde_json::from_slice::<HookEvent>(&line).unwrap(), ev);
});
