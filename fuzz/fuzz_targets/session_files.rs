//! Fuzz the session store's parsers: `cargo +nightly fuzz run session_files` (from `fuzz/`).
//! Session files are read back after crashes, power losses and whatever else left them: never
//! panic; a transcript read keeps only complete, consecutively numbered lines, and what it kept
//! reads back the same once written out whole; a tail scan never runs past the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_store::parse;

fuzz_target!(|data: &[u8]| {
    let _ = parse::session_json("fuzz", data);
    let _ = parse::meta_json("fuzz", data);
    let _ = parse::compactions_jsonl("fuzz", data);
    if let Ok(read) = parse::transcript_jsonl("fuzz", data) {
        let mut whole = Vec::new();
        for (i, line) in read.items.iter().enumerate() {
            assert_eq!(line.seq, i as u64 + 1, "lines numbered without gaps");
            if let Ok(mut bytes) = serde_json::to_vec(line) {
                bytes.push(b'\n');
                whole.extend(bytes);
            }
        }
        let again = parse::transcript_jsonl("fuzz", &whole).map(|r| (r.items.len(), r.torn_tail));
        assert_eq!(
            again.ok(),
            Some((read.items.len(), false)),
            "what was kept reads back"
        );
    }
    // A checkpoint somewhere in the data: the first byte picks where.
    let offset = data
        .first()
        .map_or(0, |b| u64::from(*b) % (data.len() as u64 + 2));
    if let Ok((good_len, last_seq)) = parse::transcript_tail("fuzz", data, offset, 7) {
        assert!(offset <= good_len && good_len <= data.len() as u64);
        assert!(last_seq >= 7);
    }
});
