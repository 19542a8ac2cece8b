//! The store's parsers of its files, over bytes: what every read of `session.json`,
//! `meta.json`, `transcript.jsonl` and `compactions.jsonl` goes through, exposed for fuzzing and
//! tools. None of them panics or touches the filesystem.

use std::path::Path;

use crate::error::{Result, StoreError};
use crate::jsonl::{numbered, parse_jsonl, scan_lines, JsonlRead};
use crate::model::{CompactionRecord, SessionMeta, SessionState, TranscriptLine};
use crate::store::{parse_state, COMPACTIONS_FILE, META_FILE, SESSION_FILE, TRANSCRIPT_FILE};

/// `session.json` of session `id`: a newer schema, another id or a damaged file are errors.
pub fn session_json(id: &str, bytes: &[u8]) -> Result<SessionState> {
    parse_state(id, Path::new(SESSION_FILE), bytes)
}

/// `meta.json` (listing falls back to `session.json` when it does not parse).
pub fn meta_json(id: &str, bytes: &[u8]) -> Result<SessionMeta> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        id: id.to_string(),
        path: META_FILE.into(),
        reason: e.to_string(),
    })
}

/// `transcript.jsonl`: lines numbered 1, 2, 3, … without gaps; an incomplete or unparsable last
/// line is a torn tail (left out), a bad line before the last an error.
pub fn transcript_jsonl(id: &str, bytes: &[u8]) -> Result<JsonlRead<TranscriptLine>> {
    parse_jsonl(id, Path::new(TRANSCRIPT_FILE), bytes, numbered)
}

/// `compactions.jsonl`, as tolerant as the transcript.
pub fn compactions_jsonl(id: &str, bytes: &[u8]) -> Result<JsonlRead<CompactionRecord>> {
    parse_jsonl(id, Path::new(COMPACTIONS_FILE), bytes, |_, _| Ok(()))
}

/// What a writer finds past its checkpoint (`offset` bytes, line `checkpoint_seq`) in a
/// transcript holding `bytes`: the byte length up to the end of the last good line and that
/// line's sequence number. A file shorter than the checkpoint is an error.
pub fn transcript_tail(
    id: &str,
    bytes: &[u8],
    offset: u64,
    checkpoint_seq: u64,
) -> Result<(u64, u64)> {
    let len = bytes.len() as u64;
    if len < offset {
        return Err(StoreError::TranscriptCorrupt {
            id: id.to_string(),
            line: checkpoint_seq,
            reason: format!("the file has {len} bytes but the last checkpoint covers {offset}"),
        });
    }
    let rest = bytes.get(offset as usize..).unwrap_or_default();
    let tail = scan_lines(
        Path::new(TRANSCRIPT_FILE),
        rest,
        offset,
        len,
        checkpoint_seq,
    )?;
    Ok((tail.good_len, tail.last_seq))
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
    fn the_parsers_take_bytes_and_keep_the_file_readers_rules() {
        let two = format!("{}{}", line(1), line(2));
        let torn = format!("{two}{{\"seq\":3");
        let r = transcript_jsonl("x", torn.as_bytes()).unwrap();
        assert_eq!((r.items.len(), r.torn_tail), (2, true));
        assert!(transcript_jsonl("x", format!("{}{}", line(2), line(3)).as_bytes()).is_err());
        let head = line(1).len() as u64;
        assert_eq!(
            transcript_tail("x", torn.as_bytes(), head, 1).unwrap(),
            (two.len() as u64, 2)
        );
        assert!(transcript_tail("x", b"", 5, 1).is_err());
        assert!(session_json("x", b"{").is_err());
        assert!(meta_json("x", b"[]").is_err());
        assert!(compactions_jsonl("x", b"").unwrap().items.is_empty());
    }
}
