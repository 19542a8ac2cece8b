//! The session index over a large corpus in the five formats read (the shapes of the real files
//! in `tests/fixtures`, the words made up): the cold index, an incremental update of one grown
//! file (alone, and as part of a whole rescan), searches, and the listing.
//!
//! `cargo bench -p volee-history --bench index` (env: CORPUS_MB=1024, SESSIONS=10000,
//! SEARCHES=200, REFRESHES=20: how many times one file grows by a line and is read again). The
//! corpus is written to a temporary directory and removed after, or to CORPUS_DIR and kept
//! (with its index at CORPUS_DIR/volee/state/sessions.db).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use volee_history::{roots, Index, Root};

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (no dependency for a benchmark's made-up words).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: usize = 20_000;

fn word(i: usize) -> String {
    // Pronounceable made-up words, a Zipf-ish spread comes from how they are drawn.
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "be", "do", "fu", "ga", "hi", "jo", "pe",
        "su",
    ];
    let mut w = String::new();
    let mut n = i + 1;
    while n > 0 {
        w.push_str(SYL[n % 16]);
        n /= 16;
    }
    w
}

fn sentence(rng: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        // Squaring skews towards common words.
        let r = rng.below(WORDS);
        s.push_str(&word(r * r / WORDS));
    }
    s
}

fn ts(second: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_790_000_000 + second);
    humantime::format_rfc3339_millis(t).to_string()
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// One session of `harness` of about `bytes`, written where that harness keeps it.
fn write_session(home: &Path, harness: &str, n: usize, bytes: usize, rng: &mut Rng) -> PathBuf {
    let id = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        n,
        rng.next() & 0xffff_ffff_ffff
    );
    let project = format!("/home/dev/project{}", n % 40);
    let slug = project.replace('/', "-");
    let t0 = (n as u64) * 600;
    let (path, head) = match harness {
        "claude" => (
            home.join(format!(".claude/projects/{slug}/{id}.jsonl")),
            String::new(),
        ),
        "codex" => (
            home.join(format!(".codex/sessions/2026/11/{:02}/rollout-2026-11-01T00-00-00-{id}.jsonl", n % 28 + 1)),
            format!(
                "{{\"timestamp\":\"{}\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{id}\",\"cwd\":\"{project}\",\"git\":{{\"branch\":\"main\"}}}}}}\n{{\"timestamp\":\"{}\",\"type\":\"turn_context\",\"payload\":{{\"model\":\"gpt-5\"}}}}\n",
                ts(t0),
                ts(t0)
            ),
        ),
        "qwen" => (
            home.join(format!(".qwen/projects/{slug}/chats/{id}.jsonl")),
            String::new(),
        ),
        "copilot" => (
            home.join(format!(".copilot/session-state/{id}/events.jsonl")),
            format!(
                "{{\"type\":\"session.start\",\"data\":{{\"sessionId\":\"{id}\",\"selectedModel\":\"gpt-4.1\",\"context\":{{\"cwd\":\"{project}\"}}}},\"timestamp\":\"{}\"}}\n",
                ts(t0)
            ),
        ),
        _ => {
            let dir = home.join(format!(".grok/sessions/{}/{id}", project.replace('/', "%2F")));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("summary.json"),
                format!(
                    "{{\"info\":{{\"id\":\"{id}\",\"cwd\":\"{project}\"}},\"session_summary\":{},\"created_at\":\"{}\",\"updated_at\":\"{}\"}}",
                    json_str(&sentence(rng, 6)),
                    ts(t0),
                    ts(t0 + 500)
                ),
            )
            .unwrap();
            (dir.join("chat_history.jsonl"), String::new())
        }
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = head;
    let mut k = 0u64;
    while text.len() < bytes {
        let (nu, na) = (12 + rng.below(30), 40 + rng.below(120));
        let user = json_str(&sentence(rng, nu));
        let answer = json_str(&sentence(rng, na));
        let tool = json_str(&format!("grep -rn {} src/", word(rng.below(WORDS))));
        let at = ts(t0 + k);
        k += 5;
        match harness {
            "claude" => {
                writeln!(text, "{{\"type\":\"user\",\"sessionId\":\"{id}\",\"cwd\":\"{project}\",\"gitBranch\":\"main\",\"timestamp\":\"{at}\",\"message\":{{\"role\":\"user\",\"content\":{user}}}}}").unwrap();
                writeln!(text, "{{\"type\":\"assistant\",\"sessionId\":\"{id}\",\"cwd\":\"{project}\",\"gitBranch\":\"main\",\"timestamp\":\"{at}\",\"message\":{{\"id\":\"msg{k}\",\"role\":\"assistant\",\"model\":\"claude-opus\",\"content\":[{{\"type\":\"text\",\"text\":{answer}}},{{\"type\":\"tool_use\",\"name\":\"Bash\",\"input\":{{\"command\":{tool}}}}}],\"usage\":{{\"input_tokens\":1200,\"output_tokens\":80,\"cache_read_input_tokens\":9000,\"cache_creation_input_tokens\":0}}}}}}").unwrap();
            }
            "codex" => {
                writeln!(text, "{{\"timestamp\":\"{at}\",\"type\":\"response_item\",\"payload\":{{\"type\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"input_text\",\"text\":{user}}}]}}}}").unwrap();
                writeln!(text, "{{\"timestamp\":\"{at}\",\"type\":\"response_item\",\"payload\":{{\"type\":\"function_call\",\"name\":\"exec_command\",\"arguments\":{}}}}}", json_str(&format!("{{\"cmd\":{tool}}}"))).unwrap();
                writeln!(text, "{{\"timestamp\":\"{at}\",\"type\":\"response_item\",\"payload\":{{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{{\"type\":\"output_text\",\"text\":{answer}}}]}}}}").unwrap();
                writeln!(text, "{{\"timestamp\":\"{at}\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"token_count\",\"info\":{{\"total_token_usage\":{{\"input_tokens\":{},\"output_tokens\":{}}}}}}}}}", k * 100, k * 8).unwrap();
            }
            "qwen" => {
                writeln!(text, "{{\"type\":\"user\",\"sessionId\":\"{id}\",\"cwd\":\"{project}\",\"timestamp\":\"{at}\",\"message\":{{\"role\":\"user\",\"parts\":[{{\"text\":{user}}}]}}}}").unwrap();
                writeln!(text, "{{\"type\":\"assistant\",\"sessionId\":\"{id}\",\"cwd\":\"{project}\",\"timestamp\":\"{at}\",\"model\":\"qwen3\",\"message\":{{\"role\":\"model\",\"parts\":[{{\"text\":{answer}}}]}},\"usageMetadata\":{{\"promptTokenCount\":1000,\"candidatesTokenCount\":50}}}}").unwrap();
            }
            "copilot" => {
                writeln!(text, "{{\"type\":\"user.message\",\"data\":{{\"content\":{user}}},\"timestamp\":\"{at}\"}}").unwrap();
                writeln!(text, "{{\"type\":\"assistant.message\",\"data\":{{\"content\":{answer}}},\"timestamp\":\"{at}\"}}").unwrap();
                writeln!(text, "{{\"type\":\"tool.execution_start\",\"data\":{{\"toolName\":\"bash\",\"arguments\":{{\"command\":{tool}}}}},\"timestamp\":\"{at}\"}}").unwrap();
            }
            _ => {
                writeln!(
                    text,
                    "{{\"type\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":{}}}]}}",
                    json_str(&format!(
                        "<user_query>\n{}\n</user_query>",
                        serde_json::from_str::<String>(&user).unwrap()
                    ))
                )
                .unwrap();
                writeln!(
                    text,
                    "{{\"type\":\"assistant\",\"content\":{answer},\"model_id\":\"grok-4\"}}"
                )
                .unwrap();
            }
        }
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// The WAL's state from the shared-memory index: (frames in the log, frames copied back to the
/// database).
fn wal_frames(db: &Path) -> (u32, u32) {
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    let bytes = std::fs::read(PathBuf::from(shm)).unwrap_or_default();
    let at = |i: usize| {
        bytes
            .get(i..i + 4)
            .map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    (at(16), at(96))
}

/// FTS5's structure record (levels, their segments' sizes in pages, merges in progress), as
/// `L0 3×[1,1,1] L1 1×[5000] merging 8` ...: what a merge did shows in it.
fn fts_structure(db: &rusqlite::Connection) -> String {
    let block: Vec<u8> = db
        .query_row("SELECT block FROM fts_data WHERE id = 10", [], |r| r.get(0))
        .unwrap();
    let mut i = 4;
    let v2 = block[4..8] == [0xff, 0, 0, 1];
    if v2 {
        i += 4;
    }
    let mut varint = || {
        let mut v: u64 = 0;
        for n in 0..9 {
            let b = block[i];
            i += 1;
            if n == 8 {
                return (v << 8) | u64::from(b);
            }
            v = (v << 7) | u64::from(b & 0x7f);
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    };
    let levels = varint();
    let _segments = varint();
    let writes = varint();
    let mut out = format!("writes {writes}:");
    for level in 0..levels {
        let merging = varint();
        let n = varint();
        let mut sizes = Vec::new();
        for _ in 0..n {
            let _id = varint();
            let first = varint();
            let last = varint();
            if v2 {
                for _ in 0..5 {
                    varint();
                }
            }
            sizes.push(last + 1 - first);
        }
        if n > 0 || merging > 0 {
            write!(out, " L{level} {sizes:?}").unwrap();
            if merging > 0 {
                write!(out, " (merging {merging})").unwrap();
            }
        }
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let corpus_mb = env_num("CORPUS_MB", 1024);
    let sessions = env_num("SESSIONS", 10_000);
    let searches = env_num("SEARCHES", 200);
    // CORPUS_DIR: write the corpus there and keep it, with its index where volee looks for it
    // under VOLEE_HOME=CORPUS_DIR/volee (the browser's first frame is measured over it).
    let tmp = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("CORPUS_DIR").map(PathBuf::from);
    let base = kept.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let home = base.join(format!("home-{corpus_mb}mb-{sessions}"));
    let harnesses = ["claude", "codex", "qwen", "copilot", "grok"];
    let per = corpus_mb * 1024 * 1024 / sessions.max(1);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut files = Vec::new();
    let t = Instant::now();
    for n in 0..sessions {
        let harness = harnesses[n % harnesses.len()];
        // Sizes spread from a tenth to twice the mean.
        let bytes = per / 10 + rng.below(per * 19 / 10 + 1);
        files.push((harness, write_session(&home, harness, n, bytes, &mut rng)));
    }
    let total: u64 = files
        .iter()
        .map(|(_, p)| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    eprintln!(
        "corpus: {sessions} sessions, {:.0} MB, in {:.1} s",
        total as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let h = home.display().to_string();
    let roots: Vec<Root> = roots(|k| (k == "HOME").then(|| h.clone()));
    let db = match &kept {
        Some(dir) => {
            let state = dir.join("volee/state");
            std::fs::create_dir_all(&state).unwrap();
            for d in [dir.join("volee"), state.clone()] {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
            }
            state.join("sessions.db")
        }
        None => base.join("sessions.db"),
    };
    let _ = std::fs::remove_file(&db);

    // Cold index (the page cache warm: the corpus was just written or read).
    let t = Instant::now();
    let mut index = Index::open(&db).unwrap();
    let scan = index.scan(&roots).unwrap();
    let cold = t.elapsed();
    assert_eq!(scan.files, sessions, "{:?}", scan.unreadable.first());
    let db_mb = std::fs::metadata(&db).unwrap().len() as f64 / 1e6;

    // A rescan with nothing changed, then one file grown by one exchange: alone (what a
    // watcher's change does) and within a whole rescan (what a CLI run does).
    let t = Instant::now();
    let idle = index.scan(&roots).unwrap();
    let rescan_nothing = t.elapsed();
    assert_eq!(idle.read, 0);
    let (harness, grown) = files[sessions / 2].clone();
    let root = roots.iter().find(|r| r.harness == harness).unwrap().clone();
    let grow = |rng: &mut Rng| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&grown)
            .unwrap();
        let line = match harness {
            "claude" => format!("{{\"type\":\"user\",\"sessionId\":\"x\",\"timestamp\":\"{}\",\"message\":{{\"role\":\"user\",\"content\":{}}}}}\n", ts(9_999_999), json_str(&sentence(rng, 20))),
            "codex" => format!("{{\"timestamp\":\"{}\",\"type\":\"response_item\",\"payload\":{{\"type\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"input_text\",\"text\":{}}}]}}}}\n", ts(9_999_999), json_str(&sentence(rng, 20))),
            _ => format!("{{\"type\":\"user\",\"sessionId\":\"x\",\"timestamp\":\"{}\",\"message\":{{\"role\":\"user\",\"parts\":[{{\"text\":{}}}]}},\"data\":{{\"content\":{}}},\"content\":{}}}\n", ts(9_999_999), json_str("grown"), json_str("grown"), json_str("grown")),
        };
        f.write_all(line.as_bytes()).unwrap();
    };
    // Each refresh's time; a slow one is shown with what it did: a merge of FTS5's segments
    // shows in their structure, a checkpoint in the log's frames.
    let refreshes = env_num("REFRESHES", 20).max(1);
    let look =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    eprintln!(
        "after the cold scan: {}; log frames (written, copied back) {:?}",
        fts_structure(&look),
        wal_frames(&db)
    );
    let mut one = Vec::new();
    for n in 0..refreshes {
        grow(&mut rng);
        let before = (wal_frames(&db), fts_structure(&look));
        let t = Instant::now();
        let read = index.refresh(&root, &grown).unwrap();
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        one.push(ms);
        assert!(read.is_some_and(|b| b > 0));
        if ms > 10.0 {
            eprintln!(
                "refresh {n}: {ms:.1} ms; log frames {:?} -> {:?}\n  {}\n  -> {}",
                before.0,
                wal_frames(&db),
                before.1,
                fts_structure(&look)
            );
        }
    }
    eprintln!("after the refreshes: {}", fts_structure(&look));
    // BURSTS=N: N times, the file grows by BURST_KB (3900: just under the size after which a
    // write ends by merging the text index into one segment), then by a line 40 times: what a
    // write's own segment costs the small writes after it.
    for burst in 0..env_num("BURSTS", 0) {
        let mut text = String::new();
        while text.len() < env_num("BURST_KB", 3900) * 1024 {
            let content = json_str(&sentence(&mut rng, 150));
            writeln!(text, "{{\"type\":\"user\",\"sessionId\":\"x\",\"timestamp\":\"{}\",\"message\":{{\"role\":\"user\",\"content\":{content}}}}}", ts(9_999_999)).unwrap();
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&grown)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
        let t = Instant::now();
        index.refresh(&root, &grown).unwrap();
        eprintln!(
            "burst {burst}: {:.1} ms -> {}",
            t.elapsed().as_secs_f64() * 1000.0,
            fts_structure(&look)
        );
        let mut worst: f64 = 0.0;
        for _ in 0..40 {
            grow(&mut rng);
            let t = Instant::now();
            index.refresh(&root, &grown).unwrap();
            worst = worst.max(t.elapsed().as_secs_f64() * 1000.0);
        }
        eprintln!("  the 40 one-line refreshes after it: max {worst:.1} ms");
    }
    if refreshes <= 20 {
        eprintln!(
            "refresh times in order (ms): {}",
            one.iter()
                .map(|t| format!("{t:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    grow(&mut rng);
    let t = Instant::now();
    let rescan = index.scan(&roots).unwrap();
    let rescan_one = t.elapsed();
    assert_eq!(rescan.read, 1);

    // Searches: one or two words drawn as the text's words are.
    let mut times = Vec::new();
    let mut hits = 0;
    for i in 0..searches {
        let q = if i % 2 == 0 {
            word(rng.below(WORDS) * rng.below(WORDS) / WORDS)
        } else {
            format!("{} {}", word(rng.below(2000)), word(rng.below(2000)))
        };
        let t = Instant::now();
        hits += index.search(&q, 20).unwrap().len();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);

    // The listing.
    let mut list = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let all = index.sessions().unwrap();
        let json = serde_json::to_string(&all).unwrap();
        list.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(all.len(), sessions);
        assert!(!json.is_empty());
    }
    list.sort_by(f64::total_cmp);
    // What `volee sessions --json` does after its start: open, rescan (nothing changed), list.
    let mut cli = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let mut again = Index::open(&db).unwrap();
        again.scan(&roots).unwrap();
        let all = again.sessions().unwrap();
        let json = serde_json::to_string(&all).unwrap();
        cli.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(!json.is_empty());
    }
    cli.sort_by(f64::total_cmp);
    one.sort_by(f64::total_cmp);

    println!(
        "| {sessions} sessions, {:.0} MB (5 formats) | value |",
        total as f64 / 1e6
    );
    println!("|---|---|");
    println!(
        "| cold index (open + scan) | {:.1} s ({:.0} MB/s); index {db_mb:.0} MB |",
        cold.as_secs_f64(),
        total as f64 / 1e6 / cold.as_secs_f64()
    );
    println!(
        "| rescan, nothing changed (a stat per file) | {:.0} ms |",
        rescan_nothing.as_secs_f64() * 1000.0
    );
    println!(
        "| one grown file, alone (`refresh`), p50 / p99 / max of {refreshes} | {:.1} / {:.1} / {:.1} ms |",
        percentile(&one, 0.5),
        percentile(&one, 0.99),
        one[one.len() - 1]
    );
    println!(
        "| one grown file within a whole rescan | {:.0} ms |",
        rescan_one.as_secs_f64() * 1000.0
    );
    println!(
        "| search, {searches} queries: p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({hits} hits) |",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times[times.len() - 1]
    );
    println!(
        "| every session listed as JSON, p50 of 10 | {:.0} ms |",
        percentile(&list, 0.5)
    );
    println!(
        "| open + rescan (nothing changed) + list as JSON, p50 / max of 10 | {:.0} / {:.0} ms |",
        percentile(&cli, 0.5),
        cli[cli.len() - 1]
    );
    drop(tmp);
}
