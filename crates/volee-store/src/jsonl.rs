//! Append-only JSON-lines files (`transcript.jsonl`, `compactions.jsonl`): tolerant reading and
//! the writer's recovery of the tail past its last checkpoint.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{io_err, Result, StoreError};
use crate::files::open_read;
use crate::model::TranscriptLine;

/// What a tolerant read found.
#[derive(Debug)]
pub struct JsonlRead<T> {
    pub items: Vec<T>,
    /// The last line was incomplete or did not parse (a writer was cut off mid-line); it is left
    /// out.
    pub torn_tail: bool,
}

/// Read every complete line of `path`. A missing file is empty; an incomplete or unparsable last
/// line is a torn tail (tolerated); an unparsable line before the last is corruption.
/// `check(item, index)` may reject an item (e.g. a sequence number out of order).
pub(crate) fn read_jsonl<T: DeserializeOwned>(
    id: &str,
    path: &Path,
    check: impl FnMut(&T, u64) -> Result<(), String>,
) -> Result<JsonlRead<T>> {
    let file = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(JsonlRead {
                items: Vec::new(),
                torn_tail: false,
            })
        }
        Err(e) => return Err(io_err("read", path)(e)),
    };
    parse_jsonl(id, path, BufReader::with_capacity(1 << 16, file), check)
}

/// [`read_jsonl`] of what `reader` gives (`path` names it in errors).
pub(crate) fn parse_jsonl<T: DeserializeOwned>(
    id: &str,
    path: &Path,
    mut reader: impl BufRead,
    mut check: impl FnMut(&T, u64) -> Result<(), String>,
) -> Result<JsonlRead<T>> {
    let mut items = Vec::new();
    let mut line = Vec::new();
    // An unparsable line is an error only if another line follows it.
    let mut bad: Option<(u64, String)> = None;
    let mut n: u64 = 0;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(io_err("read", path))?;
        if read == 0 {
            break;
        }
        if let Some((at, reason)) = bad.take() {
            return Err(StoreError::TranscriptCorrupt {
                id: id.to_string(),
                line: at,
                reason,
            });
        }
        n += 1;
        if line.last() != Some(&b'\n') {
            // Incomplete last line: a writer was cut off.
            return Ok(JsonlRead {
                items,
                torn_tail: true,
            });
        }
        match serde_json::from_slice::<T>(&line) {
            Ok(item) => match check(&item, items.len() as u64) {
                Ok(()) => items.push(item),
                Err(reason) => bad = Some((n, reason)),
            },
            Err(e) => bad = Some((n, e.to_string())),
        }
    }
    Ok(JsonlRead {
        items,
        torn_tail: bad.is_some(),
    })
}

/// Read a transcript: lines numbered 1, 2, 3, … without gaps.
pub(crate) fn read_transcript(id: &str, path: &Path) -> Result<JsonlRead<TranscriptLine>> {
    read_jsonl(id, path, numbered)
}

/// A transcript line must carry the next sequence number.
pub(crate) fn numbered(line: &TranscriptLine, index: u64) -> Result<(), String> {
    if line.seq == index + 1 {
        Ok(())
    } else {
        Err(format!(
            "sequence number {} where {} was due",
            line.seq,
            index + 1
        ))
    }
}

/// The transcript past a checkpoint, as the writer finds it when it opens the session.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Byte length up to the end of the last good line.
    pub good_len: u64,
    /// The file's length (longer than `good_len` when a torn or bad tail must be cut).
    pub file_len: u64,
    /// The last good line's sequence number.
    pub last_seq: u64,
}

/// Scan the transcript from the checkpoint's byte offset (never the whole file): complete lines
/// that continue the numbering are kept; the first incomplete or bad line ends the good part.
pub(crate) fn scan_tail(id: &str, path: &Path, offset: u64, checkpoint_seq: u64) -> Result<Tail> {
    let mut file = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && offset == 0 => {
            return Ok(Tail {
                good_len: 0,
                file_len: 0,
                last_seq: checkpoint_seq,
            })
        }
        Err(e) => return Err(io_err("read", path)(e)),
    };
    let file_len = file.metadata().map_err(io_err("read", path))?.len();
    if file_len < offset {
        return Err(StoreError::TranscriptCorrupt {
            id: id.to_string(),
            line: checkpoint_seq,
            reason: format!(
                "the file has {file_len} bytes but the last checkpoint covers {offset}"
            ),
        });
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(io_err("read", path))?;
    let reader = BufReader::with_capacity(1 << 16, file);
    scan_lines(path, reader, offset, file_len, checkpoint_seq)
}

/// [`scan_tail`] of the lines `reader` gives from `offset` on, in a file of `file_len` bytes.
pub(crate) fn scan_lines(
    path: &Path,
    mut reader: impl BufRead,
    offset: u64,
    file_len: u64,
    checkpoint_seq: u64,
) -> Result<Tail> {
    let mut tail = Tail {
        good_len: offset,
        file_len,
        last_seq: checkpoint_seq,
    };
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(io_err("read", path))?;
        if read == 0 || line.last() != Some(&b'\n') {
            break;
        }
        match serde_json::from_slice::<TranscriptLine>(&line) {
            Ok(l) if l.seq == tail.last_seq + 1 => {
                tail.last_seq = l.seq;
                tail.good_len += read as u64;
            }
            _ => break,
        }
    }
    Ok(tail)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::{Message, TranscriptItem};

    fn line(seq: u64) -> String {
        let mut s = serde_json::to_string(&TranscriptLine {
            seq,
            at_ms: 0,
            item: TranscriptItem::Message {
                message: Message::user(format!("m{seq}")),
            },
        })
        .unwrap();
        s.push('\n');
        s
    }

    #[test]
    fn torn_last_line_is_tolerated_and_middle_corruption_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let full = format!("{}{}", line(1), line(2));
        std::fs::write(&p, format!("{full}{{\"seq\":3,\"at")).unwrap();
        let r = read_transcript("x", &p).unwrap();
        assert_eq!(r.items.len(), 2);
        assert!(r.torn_tail);
        // Complete but unparsable last line (zeros after a power loss): torn too.
        std::fs::write(&p, format!("{full}\0\0\0\n")).unwrap();
        assert!(read_transcript("x", &p).unwrap().torn_tail);
        // Garbage followed by a good line: corruption, with its line number.
        std::fs::write(&p, format!("{}garbage\n{}", line(1), line(2))).unwrap();
        assert!(matches!(
            read_transcript("x", &p),
            Err(StoreError::TranscriptCorrupt { line: 2, .. })
        ));
        // A gap in the numbering is corruption.
        std::fs::write(&p, format!("{}{}{}", line(1), line(3), line(4))).unwrap();
        assert!(matches!(
            read_transcript("x", &p),
            Err(StoreError::TranscriptCorrupt { line: 2, .. })
        ));
    }

    #[test]
    fn tail_scan_keeps_complete_lines_and_cuts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let head = line(1);
        let text = format!("{head}{}{}{{\"se", line(2), line(3));
        std::fs::write(&p, &text).unwrap();
        let tail = scan_tail("x", &p, head.len() as u64, 1).unwrap();
        assert_eq!(tail.last_seq, 3);
        assert_eq!(tail.good_len, (text.len() - 4) as u64);
        assert_eq!(tail.file_len, text.len() as u64);
        // Shorter than the checkpoint says: refused.
        assert!(scan_tail("x", &p, 10_000, 1).is_err());
    }
}
