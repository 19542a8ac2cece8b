//! Case-insensitive search over titles and transcripts, streamed: each transcript is read in
//! 1 MiB chunks, ASCII-lowercased and scanned with `memmem` for the JSON-escaped query; only
//! candidate lines are parsed and checked against their decoded text (so a query never matches
//! JSON keys, and a query with quotes or non-ASCII letters still matches what the text says).

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::error::{io_err, Result};
use crate::files::check_real_dir;
use crate::model::{TranscriptItem, TranscriptLine};
use crate::redact::redact;
use crate::store::{Listed, Store, TRANSCRIPT_FILE};

/// Snippets kept per session.
const MAX_SNIPPETS: usize = 3;
/// Characters of context on each side of a match in a snippet.
const SNIPPET_CONTEXT: usize = 40;

/// A session that matches.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub id: String,
    pub title: String,
    pub archived: bool,
    /// The session's tags (`volee agent --tag`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub updated_at_ms: u64,
    pub title_matches: bool,
    /// Transcript lines that match.
    pub transcript_matches: u64,
    /// The first few matches, with their context.
    pub snippets: Vec<Snippet>,
}

/// Where a query matched, with the text around it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// The transcript line (0 for the title).
    pub seq: u64,
    pub text: String,
}

/// One session's outcome: its index in the listing, its hit, the bytes read.
type SessionResult = (usize, Result<Option<SearchHit>>, u64);

/// Totals of one search, for benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchStats {
    pub sessions: u64,
    pub bytes: u64,
}

impl Store {
    /// Sessions whose title or transcript contains `query` (case-insensitive), most recently
    /// updated first. Damaged sessions' transcripts are searched too.
    pub fn search(&self, query: &str, include_archived: bool) -> Result<Vec<SearchHit>> {
        self.search_with_stats(query, include_archived)
            .map(|(hits, _)| hits)
    }

    pub fn search_with_stats(
        &self,
        query: &str,
        include_archived: bool,
    ) -> Result<(Vec<SearchHit>, SearchStats)> {
        let sessions = self.list(include_archived)?;
        let matcher = Matcher::new(query);
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<SessionResult>> = Mutex::new(Vec::new());
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(sessions.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(listed) = sessions.get(i) else {
                        break;
                    };
                    let dir = self.session_dir(&listed.id);
                    // A session directory the listing reported as refused (a symlink, another
                    // user's) is not read through.
                    if !matches!(check_real_dir(&dir), Ok(true)) {
                        if let Ok(mut r) = results.lock() {
                            r.push((i, Ok(None), 0));
                        }
                        continue;
                    }
                    let path = dir.join(TRANSCRIPT_FILE);
                    let (hit, bytes) = match search_session(listed, &path, &matcher) {
                        Ok((hit, bytes)) => (Ok(hit), bytes),
                        Err(e) => (Err(e), 0),
                    };
                    if let Ok(mut r) = results.lock() {
                        r.push((i, hit, bytes));
                    }
                });
            }
        });
        let mut results = results.into_inner().unwrap_or_default();
        results.sort_by_key(|(i, _, _)| *i);
        let mut stats = SearchStats::default();
        let mut hits = Vec::new();
        for (_, hit, bytes) in results {
            stats.sessions += 1;
            stats.bytes += bytes;
            if let Some(hit) = hit? {
                hits.push(hit);
            }
        }
        Ok((hits, stats))
    }
}

fn search_session(
    listed: &Listed,
    transcript: &Path,
    matcher: &Matcher,
) -> Result<(Option<SearchHit>, u64)> {
    let title = listed
        .meta
        .as_ref()
        .map(|m| m.title.clone())
        .unwrap_or_default();
    let mut snippets = Vec::new();
    let title_matches = match matcher.find_in_text(&title) {
        Some(s) => {
            snippets.push(Snippet { seq: 0, text: s });
            true
        }
        None => false,
    };
    let (transcript_matches, bytes) = matcher.scan_file(transcript, &mut snippets)?;
    if !title_matches && transcript_matches == 0 {
        return Ok((None, bytes));
    }
    Ok((
        Some(SearchHit {
            id: listed.id.clone(),
            title,
            archived: listed.archived(),
            tags: listed
                .meta
                .as_ref()
                .map(|m| m.tags.clone())
                .unwrap_or_default(),
            updated_at_ms: listed.updated_at_ms(),
            title_matches,
            transcript_matches,
            snippets,
        }),
        bytes,
    ))
}

/// A compiled query.
pub(crate) struct Matcher {
    /// The query, Unicode-lowercased.
    lower: String,
    /// The query as it appears inside a JSON string, ASCII-lowercased (the prefilter).
    escaped: Vec<u8>,
    /// Finds `escaped` in raw JSON.
    finder: memchr::memmem::Finder<'static>,
    /// Finds `lower` in decoded, ASCII-lowercased text.
    text_finder: memchr::memmem::Finder<'static>,
}

impl Matcher {
    pub(crate) fn new(query: &str) -> Matcher {
        let lower = query.to_lowercase();
        let json = serde_json::to_string(&lower).unwrap_or_default();
        let escaped = json
            .get(1..json.len().saturating_sub(1))
            .unwrap_or_default()
            .as_bytes()
            .to_ascii_lowercase();
        let finder = memchr::memmem::Finder::new(&escaped).into_owned();
        let text_finder = memchr::memmem::Finder::new(lower.as_bytes()).into_owned();
        Matcher {
            lower,
            escaped,
            finder,
            text_finder,
        }
    }

    /// Where the query first matches in `text`: a byte offset into `text` and the match's length
    /// in bytes. ASCII queries compare ASCII case-insensitively (offsets are exact); others
    /// compare Unicode-lowercased text, mapped back by characters.
    fn locate(&self, text: &str) -> Option<(usize, usize)> {
        if self.lower.is_empty() {
            return None;
        }
        if self.lower.is_ascii() {
            let lowered = text.as_bytes().to_ascii_lowercase();
            let at = self.text_finder.find(&lowered)?;
            return Some((at, self.lower.len()));
        }
        let lowered = text.to_lowercase();
        let at = lowered.find(&self.lower)?;
        let start_char = lowered.get(..at)?.chars().count();
        let len_chars = self.lower.chars().count();
        let mut indices = text
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()));
        let start = indices.nth(start_char)?;
        let end = indices
            .nth(len_chars.saturating_sub(1))
            .unwrap_or(text.len());
        Some((start, end.max(start)))
    }

    /// A snippet of `text` around a match at `at..at+len` (bytes).
    fn snippet(text: &str, at: usize, len: usize) -> String {
        let floor = |mut i: usize| {
            while i > 0 && !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let before: Vec<(usize, char)> = text[..floor(at)]
            .char_indices()
            .rev()
            .take(SNIPPET_CONTEXT)
            .collect();
        let from = before.last().map_or(floor(at), |(i, _)| *i);
        let end = floor((at + len).min(text.len()));
        let to = text[end..]
            .char_indices()
            .nth(SNIPPET_CONTEXT)
            .map_or(text.len(), |(i, _)| end + i);
        let mut s = String::new();
        if from > 0 {
            s.push('…');
        }
        s.extend(
            text[from..to]
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c }),
        );
        if to < text.len() {
            s.push('…');
        }
        redact(&s).into_owned()
    }

    /// A snippet around the first match in `text`, if any.
    pub(crate) fn find_in_text(&self, text: &str) -> Option<String> {
        self.locate(text)
            .map(|(at, len)| Self::snippet(text, at, len))
    }

    /// Does the line match? With `want_snippet`, also the snippet of its first match.
    fn find_in_line(&self, line: &[u8], want_snippet: bool) -> Option<(u64, Option<String>)> {
        let line: TranscriptLine = serde_json::from_slice(line).ok()?;
        let check = |text: &str| {
            self.locate(text)
                .map(|(at, len)| want_snippet.then(|| Self::snippet(text, at, len)))
        };
        let found = match &line.item {
            TranscriptItem::Message { message } => check(&message.content)
                .or_else(|| message.thinking.as_deref().and_then(check))
                .or_else(|| {
                    message.tool_calls.iter().find_map(|c| {
                        check(&c.function.name).or_else(|| check(&c.function.arguments.to_string()))
                    })
                }),
            TranscriptItem::Compaction { record } => check(&record.summary),
            TranscriptItem::Event { name, detail } => {
                check(name).or_else(|| check(&detail.to_string()))
            }
            _ => None,
        };
        found.map(|s| (line.seq, s))
    }

    /// Stream a transcript; returns the number of matching lines and the bytes read. A missing
    /// file has no match; an incomplete last line is skipped.
    pub(crate) fn scan_file(&self, path: &Path, snippets: &mut Vec<Snippet>) -> Result<(u64, u64)> {
        if self.escaped.is_empty() {
            return Ok((0, 0));
        }
        let mut file = match crate::files::open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
            Err(e) => return Err(io_err("read", path)(e)),
        };
        let ascii = self.lower.is_ascii();
        let mut buf = vec![0u8; 1 << 20];
        let mut lower: Vec<u8> = Vec::with_capacity(1 << 20);
        let mut filled = 0;
        let mut total = 0u64;
        let mut matches = 0u64;
        loop {
            if filled == buf.len() {
                // A line longer than the buffer: grow it.
                buf.resize(buf.len() * 2, 0);
            }
            let n = file
                .read(&mut buf[filled..])
                .map_err(io_err("read", path))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            filled += n;
            let Some(last_nl) = memchr::memrchr(b'\n', &buf[..filled]) else {
                continue;
            };
            let region = &buf[..=last_nl];
            if ascii {
                lower.clear();
                lower.extend_from_slice(region);
                lower.make_ascii_lowercase();
                let mut pos = 0;
                while let Some(i) = self.finder.find(&lower[pos..]) {
                    let at = pos + i;
                    let start = memchr::memrchr(b'\n', &lower[..at]).map_or(0, |p| p + 1);
                    let end = memchr::memchr(b'\n', &lower[at..]).map_or(lower.len(), |p| at + p);
                    self.check_line(&region[start..end], &mut matches, snippets);
                    pos = end + 1;
                    if pos >= lower.len() {
                        break;
                    }
                }
            } else {
                for line in region.split(|b| *b == b'\n') {
                    let text = String::from_utf8_lossy(line).to_lowercase();
                    if memchr::memmem::find(text.as_bytes(), &self.escaped).is_some() {
                        self.check_line(line, &mut matches, snippets);
                    }
                }
            }
            buf.copy_within(last_nl + 1..filled, 0);
            filled -= last_nl + 1;
        }
        Ok((matches, total))
    }

    fn check_line(&self, line: &[u8], matches: &mut u64, snippets: &mut Vec<Snippet>) {
        let want = snippets.len() < MAX_SNIPPETS;
        if let Some((seq, text)) = self.find_in_line(line, want) {
            *matches += 1;
            if let Some(text) = text {
                snippets.push(Snippet { seq, text });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::Message;

    fn write_transcript(path: &Path, texts: &[&str]) {
        let mut out = String::new();
        for (i, t) in texts.iter().enumerate() {
            out.push_str(
                &serde_json::to_string(&TranscriptLine {
                    seq: i as u64 + 1,
                    at_ms: 0,
                    item: TranscriptItem::Message {
                        message: Message::user(*t),
                    },
                })
                .unwrap(),
            );
            out.push('\n');
        }
        std::fs::write(path, out).unwrap();
    }

    #[test]
    fn matches_text_not_json_keys_case_insensitively() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        write_transcript(
            &p,
            &[
                "nothing here",
                "The Cache is COLD",
                "say \"hello\" twice",
                "Été chaud",
            ],
        );
        let count = |q: &str| {
            let mut s = Vec::new();
            Matcher::new(q).scan_file(&p, &mut s).unwrap().0
        };
        assert_eq!(count("cache is cold"), 1);
        assert_eq!(count("role"), 0, "JSON keys never match");
        assert_eq!(count("content"), 0);
        assert_eq!(count("\"HELLO\""), 1, "quotes are matched as text");
        assert_eq!(count("été"), 1, "non-ASCII case folding");
        assert_eq!(count(""), 0);
        let mut s = Vec::new();
        Matcher::new("cold").scan_file(&p, &mut s).unwrap();
        assert_eq!(
            s,
            vec![Snippet {
                seq: 2,
                text: "The Cache is COLD".into()
            }]
        );
    }

    #[test]
    fn long_lines_and_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let long = format!("{}needle{}", "x".repeat(3 << 20), "y".repeat(10));
        let many: Vec<String> = (0..50_000).map(|i| format!("line {i} needle")).collect();
        let mut texts: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
        texts.push(&long);
        write_transcript(&p, &texts);
        let mut s = Vec::new();
        let (n, bytes) = Matcher::new("NEEDLE").scan_file(&p, &mut s).unwrap();
        assert_eq!(n, 50_001);
        assert_eq!(bytes, std::fs::metadata(&p).unwrap().len());
        assert_eq!(s.len(), MAX_SNIPPETS);
        assert!(s[0].text.starts_with("line 0 needle"));
    }
}
