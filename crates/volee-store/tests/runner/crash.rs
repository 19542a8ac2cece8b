//! SIGKILL a writer at random points across thousands of checkpoints; after every kill each
//! session must load to (at least) its last reported checkpoint, with a transcript that is a
//! prefix of what the writer wrote and a context that is a suffix of that transcript.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use volee_store::{read_transcript, Message, Role, Store, TranscriptItem, OUTCOME_UNKNOWN};

use crate::child::{call_id, result_text, user_text, CONTEXT};
use crate::{child_command, session_with};

const SESSIONS: usize = 4;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Check one session on disk against what the writer could have written.
fn verify(store: &Store, j: usize, id: &str, reported: u64, final_check: bool) -> u64 {
    let state = store.load(id).unwrap();
    let t = read_transcript(store, id).unwrap();
    let lines = t.items;
    assert!(
        state.last_seq >= reported,
        "session {j}: checkpoint {} on disk, {reported} was reported complete",
        state.last_seq
    );
    assert!(
        lines.len() as u64 >= state.last_seq,
        "session {j}: transcript has {} lines, checkpoint covers {}",
        lines.len(),
        state.last_seq
    );
    // Lines a killed writer wrote after its last checkpoint are in the transcript only; the next
    // writer marks them with a `recovered` line.
    let lost: Vec<(u64, u64)> = lines
        .iter()
        .filter_map(|l| match l.item {
            TranscriptItem::Recovered {
                checkpoint_seq,
                last_seq,
            } => Some((checkpoint_seq, last_seq)),
            _ => None,
        })
        .collect();
    let in_lost = |seq: u64| lost.iter().any(|(from, to)| seq > *from && seq <= *to);
    // Every line is what the writer writes at that seq; every call of the history (the lost
    // lines aside) is answered at most once.
    let mut calls: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut messages: Vec<(u64, &Message)> = Vec::new();
    for l in &lines {
        let effective = !in_lost(l.seq);
        match &l.item {
            TranscriptItem::Message { message } => {
                if effective {
                    messages.push((l.seq, message));
                }
                match message.role {
                    Role::User => assert_eq!(message.content, user_text(j, l.seq)),
                    Role::Assistant => {
                        let id = message.tool_calls[0].id.clone().unwrap();
                        assert_eq!(id, call_id(j, l.seq));
                        if effective {
                            calls.insert(id);
                        }
                    }
                    Role::Tool => {
                        let id = message.tool_call_id.clone().unwrap();
                        assert!(
                            message.content == result_text(&id)
                                || message.content == OUTCOME_UNKNOWN
                        );
                        if effective {
                            assert!(calls.contains(&id), "session {j}: answer to unknown {id}");
                            assert!(
                                answered.insert(id.clone()),
                                "session {j}: {id} answered twice"
                            );
                        }
                    }
                    Role::System => panic!("unexpected system message"),
                }
            }
            TranscriptItem::Interrupted { .. }
            | TranscriptItem::Recovered { .. }
            | TranscriptItem::Forked { .. } => {}
            other => panic!("unexpected line {other:?}"),
        }
    }
    // The context is a suffix of the checkpointed messages, at least CONTEXT long when possible.
    let upto: Vec<&Message> = messages
        .iter()
        .filter(|(seq, _)| *seq <= state.last_seq)
        .map(|(_, m)| *m)
        .collect();
    let ctx: Vec<&Message> = state.messages.iter().collect();
    assert!(ctx.len() <= upto.len());
    assert!(ctx.len() >= CONTEXT.min(upto.len()));
    assert_eq!(&upto[upto.len() - ctx.len()..], &ctx[..], "session {j}");
    // Pending calls were made and not answered by the checkpoint.
    for p in &state.pending_tool_calls {
        let id = p.call.id.clone().unwrap();
        assert!(calls.contains(&id));
    }
    // Every call of the history is answered, except those still pending.
    let pending: HashSet<String> = state
        .pending_tool_calls
        .iter()
        .filter_map(|p| p.call.id.clone())
        .collect();
    for id in &calls {
        assert!(
            answered.contains(id)
                || pending.contains(id)
                || !checkpointed_call(&lines, id, state.last_seq),
            "session {j}: {id} neither answered nor pending"
        );
    }
    if final_check {
        assert!(pending.is_empty());
        assert_eq!(
            calls, answered,
            "session {j}: every call answered exactly once"
        );
    }
    state.last_seq
}

/// Was the call made in a checkpointed line?
fn checkpointed_call(lines: &[volee_store::TranscriptLine], id: &str, last_seq: u64) -> bool {
    lines.iter().any(|l| {
        l.seq <= last_seq
            && matches!(&l.item, TranscriptItem::Message { message } if message.tool_calls.iter().any(|c| c.id.as_deref() == Some(id)))
    })
}

#[test]
fn sigkill_at_random_points_never_loses_a_checkpoint() {
    // A SIGKILL leaves the page cache intact, so fsync plays no part in what this test checks:
    // tmpfs (when there is one) makes thousands of checkpoints fit in seconds. Power loss is
    // covered by the order of writes and fsyncs, which this test cannot observe.
    let shm = std::path::Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap_or_else(|_| tempfile::tempdir().unwrap())
    } else {
        tempfile::tempdir().unwrap()
    };
    let store = Store::new(tmp.path().join("sessions"));
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let ids: Vec<String> = (0..SESSIONS)
        .map(|_| session_with(&store, &project, 0))
        .collect();
    let seed = std::env::var("VOLEE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| volee_store::now_ms() | 1);
    eprintln!("crash test seed {seed} (VOLEE_CRASH_SEED to repeat)");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut checkpoints = 0u64;
    let mut rounds = 0u64;
    let mut reported = [0u64; SESSIONS];
    while (checkpoints < 5000 || rounds < 100) && started.elapsed() < Duration::from_secs(14) {
        rounds += 1;
        let mut child = child_command("crash")
            .env("VOLEE_STORE_DIR", store.root())
            .env("VOLEE_STORE_PROJECT", &project)
            .env("VOLEE_STORE_IDS", ids.join(","))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let spawned = Instant::now();
        let last: Arc<Mutex<HashMap<usize, (u64, u64)>>> = Arc::default();
        let stdout = child.stdout.take().unwrap();
        let (first_tx, first_rx) = std::sync::mpsc::channel::<()>();
        let reader = {
            let last = last.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let mut words = line.split_whitespace();
                    if words.next() != Some("ckpt") {
                        continue;
                    }
                    let j: usize = words.next().unwrap().parse().unwrap();
                    let seq: u64 = words.next().unwrap().parse().unwrap();
                    if std::env::var_os("VOLEE_CRASH_DEBUG").is_some() {
                        eprintln!("{:?} ckpt {j} {seq}", spawned.elapsed());
                    }
                    let _ = first_tx.send(());
                    let mut l = last.lock().unwrap();
                    let e = l.entry(j).or_insert((0, 0));
                    e.0 = seq;
                    e.1 += 1;
                }
            })
        };
        // One round in four is killed at a random point of its start (opening and resuming the
        // sessions, ≈25 ms in a debug build); the others checkpoint for a random while first.
        if rounds % 4 != 0 {
            let _ = first_rx.recv_timeout(Duration::from_secs(5));
        }
        std::thread::sleep(Duration::from_micros(rng.next() % 40_000));
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        for (j, (seq, n)) in last.lock().unwrap().iter() {
            reported[*j] = reported[*j].max(*seq);
            checkpoints += n;
        }
        for (j, id) in ids.iter().enumerate() {
            verify(&store, j, id, reported[j], false);
        }
    }
    eprintln!(
        "{rounds} kills, {checkpoints} checkpoints in {:.1} s under {}",
        started.elapsed().as_secs_f64(),
        tmp.path().display()
    );
    assert!(checkpoints >= 1000, "only {checkpoints} checkpoints");
    // Resuming answers every interrupted call exactly once; the sessions stay valid.
    for (j, id) in ids.iter().enumerate() {
        let w = store.open_for_resume(id, &project).unwrap();
        assert!(w.state().pending_tool_calls.is_empty());
        drop(w);
        verify(&store, j, id, reported[j], true);
    }
}
