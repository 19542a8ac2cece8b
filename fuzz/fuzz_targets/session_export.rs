//! Fuzz `volee agent --import`'s reading of an export: `cargo +nightly fuzz run session_export`
//! (from `fuzz/`). The file is whatever the user was handed: parsing and the invariant checks
//! never panic, report at most `MAX_PROBLEMS` problems each at a JSON path, and a document they
//! accept reads back the same once written out again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_store::{check_export, parse_export, ParseFailure, MAX_PROBLEMS};

fuzz_target!(|data: &[u8]| {
    match parse_export(data) {
        Ok(doc) => {
            let problems = check_export(&doc);
            assert!(problems.len() <= MAX_PROBLEMS);
            assert!(problems.iter().all(|p| p.path.starts_with('$') && !p.reason.is_empty()));
            if problems.is_empty() {
                let bytes = serde_json::to_vec(&doc).expect("a parsed document serialises");
                let again = parse_export(&bytes).expect("what was accepted reads back");
                assert_eq!(again, doc);
            }
        }
        Err(ParseFailure::Newer(found)) => assert!(found > volee_store::SCHEMA_VERSION),
        Err(ParseFailure::Problem(p)) => assert!(p.path.starts_with('$')),
    }
});
