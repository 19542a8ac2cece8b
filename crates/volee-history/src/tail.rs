//! One live session's usage, read from its file as the harness appends to it (issue 23): only
//! the whole lines written since the last read, with the format's [`Reader`]; the files beside
//! it that hold usage (Grok's `usage.json`, volee's `meta.json`) read whole, they are small.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use volee_harness::HistoryKind;

use crate::index::{open_regular, walk};
use crate::read::{Reader, SessionInfo, Usage};

/// Bytes read at a time.
const CHUNK: usize = 1 << 20;
/// A line longer than this is skipped (a pasted file in a prompt), as the index does.
const LINE_MAX: usize = 16 << 20;

/// The usage of one session file, kept between reads.
#[derive(Debug, Clone)]
pub struct UsageTail {
    reader: Reader,
    path: PathBuf,
    /// Bytes read so far (whole lines only).
    offset: u64,
    /// Inside a line over [`LINE_MAX`]: skip to its end.
    skipping: bool,
    info: SessionInfo,
}

impl UsageTail {
    pub fn new(reader: Reader, path: PathBuf) -> UsageTail {
        UsageTail {
            reader,
            path,
            offset: 0,
            skipping: false,
            info: SessionInfo::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Does a write to `changed` concern this session (its file, or a file beside it)?
    pub fn concerns(&self, changed: &Path) -> bool {
        changed == self.path || changed.parent() == self.path.parent()
    }

    /// The session's usage so far (None: its file recorded none yet).
    pub fn usage(&self) -> Option<Usage> {
        self.info.usage
    }

    /// The model of its last response.
    pub fn model(&self) -> Option<&str> {
        self.info.model.as_deref()
    }

    /// Read what was written since the last read; true when the usage or the model changed. A
    /// file now shorter than what was read was rewritten: read again from its start.
    pub fn read(&mut self) -> Result<bool, String> {
        let before = (self.info.usage, self.info.model.clone());
        let (mut file, meta) = open_regular(&self.path)?;
        if meta.len() < self.offset {
            *self = UsageTail::new(self.reader, self.path.clone());
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| e.to_string())?;
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; CHUNK];
        loop {
            let n = file.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            pending.extend_from_slice(&chunk[..n]);
            let mut start = 0;
            while let Some(nl) = pending[start..].iter().position(|b| *b == b'\n') {
                let line = &pending[start..start + nl];
                if !self.skipping && !line.is_empty() {
                    self.reader.line(&mut self.info, line);
                }
                self.skipping = false;
                start += nl + 1;
            }
            self.offset += start as u64;
            pending.drain(..start);
            if pending.len() > LINE_MAX {
                // Past the bound: the rest of this line is not read.
                self.offset += pending.len() as u64;
                pending.clear();
                self.skipping = true;
            }
        }
        if let Some(dir) = self.path.parent() {
            self.reader.sidecars(&mut self.info, dir, |p| {
                let (f, meta) = open_regular(p).ok()?;
                let mut bytes = Vec::with_capacity(meta.len().min(1 << 20) as usize);
                f.take(4 << 20).read_to_end(&mut bytes).ok()?;
                Some(bytes)
            });
        }
        Ok((self.info.usage, self.info.model.clone()) != before)
    }
}

/// Is `rel` (a path under a root of `reader`'s format, `/`-separated) session `id`'s file? Each
/// format's file or directory name holds the session id (Gemini's its first 8 characters).
pub fn is_file_of(reader: &Reader, rel: &[&str], id: &str) -> bool {
    if id.len() < 8 || !reader.is_session_file(rel) {
        return false;
    }
    if rel.iter().any(|part| part.contains(id)) {
        return true;
    }
    let Some(short) = id.get(..8) else {
        return false;
    };
    reader.kind == HistoryKind::GeminiChats
        && rel
            .last()
            .is_some_and(|name| name.contains(&format!("-{short}")))
}

/// Session `id`'s file under `root` (a sessions directory of `reader`'s format), newest
/// first when several match (a session resumed into a new file).
pub fn find_file(root: &Path, reader: &Reader, id: &str) -> Option<PathBuf> {
    let mut files = Vec::new();
    walk(root, &mut Vec::new(), reader, &mut files, &mut |_, _| {});
    files
        .into_iter()
        .filter(|f| {
            let rel: Vec<String> = f
                .strip_prefix(root)
                .unwrap_or(f)
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            let rel: Vec<&str> = rel.iter().map(String::as_str).collect();
            is_file_of(reader, &rel, id)
        })
        .max_by_key(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::io::Write;

    fn claude_line(id: &str, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","sessionId":"s","message":{{"id":"{id}","model":"m1","usage":{{"input_tokens":100,"output_tokens":{output},"cache_read_input_tokens":7,"cache_creation_input_tokens":3}},"content":[]}}}}"#
        ) + "\n"
    }

    #[test]
    fn appended_lines_are_read_once_and_a_partial_line_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0123456789.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        let reader = Reader::new(HistoryKind::ClaudeJsonl).unwrap();
        let mut tail = UsageTail::new(reader, path.clone());
        // Two lines of one response (an early partial output count), then half a line.
        f.write_all(claude_line("msg_1", 2).as_bytes()).unwrap();
        f.write_all(claude_line("msg_1", 40).as_bytes()).unwrap();
        let next = claude_line("msg_2", 5);
        f.write_all(&next.as_bytes()[..30]).unwrap();
        assert!(tail.read().unwrap());
        let u = tail.usage().unwrap();
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (100, 40, 7, 3)
        );
        assert_eq!(u.requests, 1);
        assert_eq!(tail.model(), Some("m1"));
        assert!(!tail.read().unwrap(), "nothing new");
        f.write_all(&next.as_bytes()[30..]).unwrap();
        assert!(tail.read().unwrap());
        let u = tail.usage().unwrap();
        assert_eq!((u.input, u.output, u.requests), (200, 45, 2));
        // Rewritten shorter: read from the start.
        std::fs::write(&path, claude_line("msg_9", 1)).unwrap();
        assert!(tail.read().unwrap());
        assert_eq!(tail.usage().unwrap().output, 1);
    }

    #[test]
    fn a_sessions_file_is_found_by_its_id_and_a_symlink_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let id = "d4a8abe5-742d-4002-a1ab-379c1b005cb4";
        let project = dir.path().join("-tmp-work");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join(format!("{id}.jsonl")), claude_line("m", 1)).unwrap();
        std::fs::write(project.join("other.jsonl"), claude_line("m", 1)).unwrap();
        let reader = Reader::new(HistoryKind::ClaudeJsonl).unwrap();
        let found = find_file(dir.path(), &reader, id).unwrap();
        assert_eq!(found, project.join(format!("{id}.jsonl")));
        assert_eq!(find_file(dir.path(), &reader, "ffffffff-0000"), None);
        let gemini = Reader::new(HistoryKind::GeminiChats).unwrap();
        assert!(is_file_of(
            &gemini,
            &["work", "chats", "session-2026-12-04T09-25-25db2aef.jsonl"],
            "25db2aef-1111-2222-3333-444455556666"
        ));
        // A symlink where the file is expected is not followed.
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(project.join(format!("{id}.jsonl")), &link).unwrap();
        let mut tail = UsageTail::new(reader, link);
        assert!(tail.read().unwrap_err().contains("symbolic link"));
    }
}
