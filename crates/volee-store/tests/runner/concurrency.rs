//! Several processes fight for one session while this process reads it: exactly one writer at a
//! time (blocks never interleave, numbering never breaks), refusals name a live contender, and
//! readers never fail or block.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use volee_store::{read_transcript, Role, Store, TranscriptItem};

use crate::{child_command, session_with};

const FIGHTERS: usize = 5;
const BLOCK: u64 = 4;

#[test]
fn processes_fighting_for_one_session_take_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::new(tmp.path().join("sessions"));
    let project = tmp.path().to_path_buf();
    let id = session_with(&store, &project, 1);
    let children: Vec<_> = (0..FIGHTERS)
        .map(|_| {
            child_command("fight")
                .env("VOLEE_STORE_DIR", store.root())
                .env("VOLEE_STORE_PROJECT", &project)
                .env("VOLEE_STORE_IDS", &id)
                .env("VOLEE_STORE_BLOCK", BLOCK.to_string())
                .env("VOLEE_STORE_MS", "2000")
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: HashSet<u32> = children.iter().map(|c| c.id()).collect();
    // Meanwhile, readers: never an error, never a half-written file.
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0u64;
            let deadline = Instant::now() + Duration::from_secs(30);
            while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
                let listed = store.list(false).unwrap();
                assert_eq!(listed.len(), 1);
                assert_eq!(listed[0].health, volee_store::Health::Ok);
                let doc = store.export(&id).unwrap();
                assert!(doc.transcript.len() as u64 >= doc.session.last_seq);
                store.search("h1 n0", false).unwrap();
                reads += 1;
            }
            reads
        });
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    });
    let mut appended = 0;
    let mut holds = 0;
    let mut refusals = 0;
    for pid in &pids {
        let r: serde_json::Value = serde_json::from_slice(
            &std::fs::read(store.root().join(format!("result-{pid}.json"))).unwrap(),
        )
        .unwrap();
        appended += r["appended"].as_u64().unwrap();
        holds += r["holds"].as_u64().unwrap();
        for holder in r["refused_by"].as_array().unwrap() {
            refusals += 1;
            let holder = holder.as_u64().unwrap() as u32;
            assert!(
                pids.contains(&holder),
                "refused by {holder}, not a contender"
            );
            assert_ne!(holder, *pid, "refused by itself");
        }
    }
    eprintln!("{holds} holds, {appended} messages, {refusals} refusals, {reads} reads");
    assert!(holds >= 2 && refusals > 0, "no real contention");
    assert_eq!(appended, holds * BLOCK);
    // The transcript: numbering intact, every hold's block contiguous and complete.
    let t = read_transcript(&store, &id).unwrap();
    assert!(!t.torn_tail);
    let texts: Vec<String> = t
        .items
        .iter()
        .filter_map(|l| match &l.item {
            TranscriptItem::Message { message } if message.role == Role::User => {
                Some(message.content.clone())
            }
            _ => None,
        })
        .skip(1)
        .collect();
    assert_eq!(texts.len() as u64, appended);
    for block in texts.chunks(BLOCK as usize) {
        let owner = block[0].rsplit_once(' ').unwrap().0;
        for (n, text) in block.iter().enumerate() {
            assert_eq!(text, &format!("{owner} n{n}"), "interleaved writers");
        }
    }
    let state = store.load(&id).unwrap();
    assert_eq!(state.messages.len() as u64, appended + 1);
}
