//! Sessions moving between two stores (`volee agent --sync MACHINE`; docs/store.md, "Sync"):
//! a session's digest, its bundle (the files that make it, as they are on disk up to its last
//! checkpoint) and the receiving side's checks.
//!
//! - The **digest** is SHA-256 over `session.json`'s bytes, the transcript's checkpointed bytes
//!   (`0..transcript_bytes`) and the checkpointed lines of `compactions.jsonl` (those whose
//!   `seq` the checkpoint covers), each prefixed by its length as a little-endian `u64`. Two
//!   stores holding the same digest for an id hold the same session; `meta.json` and `lock` are
//!   not part of it (meta is rebuilt from `session.json` on arrival).
//! - A **bundle** is those three parts as UTF-8 text, with the id and the digest. Whatever
//!   arrives is checked before anything is written ([`Store::import_bundle`]): a valid id, the
//!   digest recomputed, `session.json` parsed and naming the same id, the transcript exactly as
//!   long as the checkpoint says, every line complete and numbered 1, 2, 3, … up to `last_seq`,
//!   every compaction parsed and covered.
//! - A **replacement** is written whole beside the session (`.sync-ID-PID/`, every file fsync'd),
//!   then swapped in with one `renameat2(RENAME_EXCHANGE)` while holding the old session's
//!   writer lock (and the new one's), after checking — under that lock — that the session's
//!   digest still is the one the sender saw (compare-and-swap). A crash leaves the old session or
//!   the new one under the id, never a mix.
//! - A session that changed on both sides arrives as a **fork** ([`Store::fork_from_bundle`]):
//!   a new id whose `parent_id` is the original, with a [`SyncNote`] and a `synced` transcript
//!   line saying why; the original is not touched.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{io_err, Result, StoreError};
use crate::files::{
    check_real_dir, ensure_private_dir, fsync_dir, open_read, read_regular, replace_all,
};
use crate::ids::{check_id, new_id};
use crate::lock::{self, WriterLock};
use crate::model::{
    CompactionRecord, SessionMeta, SessionState, SyncNote, TranscriptItem, TranscriptLine,
};
use crate::store::{
    encode_line, error_text, now_ms, parse_state, Health, Store, COMPACTIONS_FILE, META_FILE,
    SESSION_FILE, TRANSCRIPT_FILE,
};

/// The longest line of the sync protocol either side reads (a bundle is one line): a longer
/// one is refused, never buffered.
pub const MAX_BUNDLE_LINE: usize = 256 << 20;

/// How often a session is read again when a checkpoint landed while it was being read.
const READ_TRIES: u32 = 5;

/// The digest of a session made of these three parts (hex SHA-256, 64 characters).
pub fn digest_of(session_json: &[u8], transcript: &[u8], compactions: &[u8]) -> String {
    let mut hash = Sha256::new();
    for part in [session_json, transcript, compactions] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    format!("{:x}", hash.finalize())
}

/// Whether `text` has the shape of a digest (64 lowercase hex digits): what arrives from the
/// other side is checked before it is compared or recorded.
pub fn is_digest(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One session in a store's manifest (what `--sync` compares).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub id: String,
    /// Absent when the session cannot be read (`problem` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// A writer holds its lock (a running agent, or a management command).
    #[serde(default)]
    pub held: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_pid: Option<u32>,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub updated_at_ms: u64,
    /// Why the session cannot be synced (damaged, written by a newer volee).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// A session as it travels: its three files up to its last checkpoint, as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    pub id: String,
    /// `session.json`, byte for byte.
    pub session_json: String,
    /// `transcript.jsonl` up to the checkpoint (`0..transcript_bytes`).
    pub transcript: String,
    /// The lines of `compactions.jsonl` the checkpoint covers.
    pub compactions: String,
    /// [`digest_of`] the three.
    pub digest: String,
}

/// A session's parts read from disk, consistent with each other.
struct Parts {
    session_json: Vec<u8>,
    transcript: Vec<u8>,
    compactions: Vec<u8>,
}

impl Parts {
    fn digest(&self) -> String {
        digest_of(&self.session_json, &self.transcript, &self.compactions)
    }
}

impl Store {
    /// Every session with its digest, whether a writer holds it, and what stops a damaged one
    /// from being synced; sorted by id. Reads without any lock and writes nothing.
    pub fn sync_manifest(&self) -> Result<Vec<ManifestEntry>> {
        let mut out = Vec::new();
        for listed in self.list(true)? {
            let mut entry = ManifestEntry {
                id: listed.id.clone(),
                digest: None,
                held: false,
                holder_pid: None,
                title: listed
                    .meta
                    .as_ref()
                    .map(|m| m.title.clone())
                    .unwrap_or_default(),
                updated_at_ms: listed.updated_at_ms(),
                problem: None,
            };
            match &listed.health {
                Health::Ok => {}
                Health::Damaged { reason } => {
                    entry.problem = Some(format!("damaged: {reason}"));
                    out.push(entry);
                    continue;
                }
                Health::NewerSchema { schema_version } => {
                    entry.problem = Some(format!(
                        "written by a newer volee (schema version {schema_version})"
                    ));
                    out.push(entry);
                    continue;
                }
            }
            match lock::holder(&self.session_dir(&listed.id)) {
                Ok(Some(pid)) => {
                    entry.held = true;
                    entry.holder_pid = pid;
                }
                Ok(None) => {}
                Err(e) => entry.problem = Some(error_text(&e)),
            }
            match self.read_parts(&listed.id) {
                Ok(parts) => entry.digest = Some(parts.digest()),
                Err(e) => entry.problem = Some(error_text(&e)),
            }
            out.push(entry);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// The digest of session `id` (an exact id) as it is on disk now.
    pub fn session_digest(&self, id: &str) -> Result<String> {
        Ok(self.read_parts(id)?.digest())
    }

    /// Session `id` (an exact id) as a bundle, checked the way a receiver checks it (a damaged
    /// session is refused here, before it goes anywhere). Reads without the lock.
    pub fn export_bundle(&self, id: &str) -> Result<Bundle> {
        let parts = self.read_parts(id)?;
        let dir = self.session_dir(id);
        let digest = parts.digest();
        let text = |bytes: Vec<u8>, name: &str| {
            String::from_utf8(bytes).map_err(|_| StoreError::Corrupt {
                id: id.to_string(),
                path: dir.join(name),
                reason: "it is not UTF-8".into(),
            })
        };
        let bundle = Bundle {
            id: id.to_string(),
            session_json: text(parts.session_json, SESSION_FILE)?,
            transcript: text(parts.transcript, TRANSCRIPT_FILE)?,
            compactions: text(parts.compactions, COMPACTIONS_FILE)?,
            digest,
        };
        verify(&bundle).map_err(|e| match e {
            StoreError::BadBundle { id, reason } => StoreError::Corrupt {
                id,
                path: dir.clone(),
                reason,
            },
            other => other,
        })?;
        Ok(bundle)
    }

    /// Put `bundle` in place of session `bundle.id`, compare-and-swap: `expect` is the digest the
    /// sender saw here (`None`: the session must not exist here). The bundle is checked first;
    /// the replacement is written beside, then swapped in while holding the session's writer
    /// lock, after checking under it that the session is still at `expect` (else
    /// [`StoreError::SyncConflict`], nothing replaced). A session held by a writer is refused
    /// ([`StoreError::Locked`]). Returns the digest the session now has; a session already equal
    /// to the bundle is left as it is.
    pub fn import_bundle(&self, bundle: &Bundle, expect: Option<&str>) -> Result<String> {
        let state = verify(bundle)?;
        let id = bundle.id.as_str();
        ensure_private_dir(self.root())?;
        let dir = self.session_dir(id);
        // Refuse a symlink or another user's directory before anything is written beside it.
        let exists = check_real_dir(&dir)?;
        let tmp = self
            .root()
            .join(format!(".sync-{id}-{}", std::process::id()));
        remove_stale(&tmp)?;
        let written = write_session_dir(&tmp, bundle, &state)
            .and_then(|()| WriterLock::acquire(id, &tmp))
            .and_then(|lock| fsync_dir(&tmp).map(|()| lock));
        let new_lock = match written {
            Ok(lock) => lock,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let result = if exists {
            self.swap_in(id, &dir, &tmp, &bundle.digest, expect)
        } else if expect.is_some() {
            Err(StoreError::SyncConflict {
                id: id.to_string(),
                reason: "it was deleted here since the other side looked".into(),
            })
        } else {
            rename_noreplace(&tmp, &dir)
                .map_err(|e| match e.raw_os_error() {
                    Some(nix::libc::EEXIST | nix::libc::ENOTEMPTY) => StoreError::SyncConflict {
                        id: id.to_string(),
                        reason: "a session with this id appeared here meanwhile".into(),
                    },
                    _ => io_err("create", &dir)(e),
                })
                .and_then(|()| fsync_dir(self.root()))
        };
        drop(new_lock);
        // After a swap `tmp` holds the old session; after a refusal, the unused copy.
        if check_real_dir(&tmp).unwrap_or(false) {
            let _ = fs::remove_dir_all(&tmp);
        }
        result.map(|()| bundle.digest.clone())
    }

    /// Under the writer lock of the session at `dir`: check its digest is `expect`, then
    /// exchange it with the new copy at `tmp` (which then holds the old one).
    fn swap_in(
        &self,
        id: &str,
        dir: &Path,
        tmp: &Path,
        new_digest: &str,
        expect: Option<&str>,
    ) -> Result<()> {
        let _old_lock = WriterLock::acquire(id, dir)?;
        let current = self.session_digest(id)?;
        if current == new_digest {
            return Ok(());
        }
        if Some(current.as_str()) != expect {
            return Err(StoreError::SyncConflict {
                id: id.to_string(),
                reason: match expect {
                    None => "a session with this id exists here".into(),
                    Some(_) => {
                        "it changed here since the other side looked (a writer came in between)"
                            .into()
                    }
                },
            });
        }
        exchange(tmp, dir).map_err(io_err("replace", dir))?;
        fsync_dir(self.root())
    }

    /// Make `bundle` (another machine's version of session `bundle.id`) a new session here: a new
    /// id, `parent_id` = `bundle.id`, `forked_at_seq` = its last line, a [`SyncNote`] naming
    /// `machine` and `note`, and `forked` and `synced` lines after the copied transcript. The
    /// session `bundle.id` here, if any, is not touched. Returns the new id.
    pub fn fork_from_bundle(&self, bundle: &Bundle, machine: &str, note: &str) -> Result<String> {
        let src = verify(bundle)?;
        ensure_private_dir(self.root())?;
        let id = new_id();
        let tmp = self
            .root()
            .join(format!(".new-{id}-{}", std::process::id()));
        remove_stale(&tmp)?;
        let result = (|| {
            let now = now_ms();
            let path = tmp.join(TRANSCRIPT_FILE);
            let mut transcript = bundle.transcript.as_bytes().to_vec();
            transcript.extend(encode_line(
                &path,
                &TranscriptLine {
                    seq: src.last_seq + 1,
                    at_ms: now,
                    item: TranscriptItem::Forked {
                        parent_id: bundle.id.clone(),
                        parent_seq: src.last_seq,
                    },
                },
            )?);
            transcript.extend(encode_line(
                &path,
                &TranscriptLine {
                    seq: src.last_seq + 2,
                    at_ms: now,
                    item: TranscriptItem::Event {
                        name: "synced".into(),
                        detail: serde_json::json!({
                            "machine": machine,
                            "original_id": bundle.id,
                            "note": note,
                        }),
                    },
                },
            )?);
            let state = SessionState {
                id: id.clone(),
                title: if src.title.is_empty() {
                    String::new()
                } else {
                    format!("{} (from {machine})", src.title)
                },
                parent_id: Some(bundle.id.clone()),
                forked_at_seq: Some(src.last_seq),
                created_at_ms: now,
                updated_at_ms: now,
                archived: false,
                last_seq: src.last_seq + 2,
                transcript_bytes: transcript.len() as u64,
                synced_from: Some(SyncNote {
                    machine: machine.to_string(),
                    original_id: bundle.id.clone(),
                    note: note.to_string(),
                    at_ms: now,
                }),
                ..src.clone()
            };
            let session_json =
                serde_json::to_string(&state).map_err(|source| StoreError::Encode {
                    path: tmp.join(SESSION_FILE),
                    source,
                })?;
            let fork = Bundle {
                id: id.clone(),
                digest: digest_of(
                    session_json.as_bytes(),
                    &transcript,
                    bundle.compactions.as_bytes(),
                ),
                session_json,
                // Built from checked UTF-8 and serde_json's output.
                transcript: String::from_utf8(transcript).map_err(|_| StoreError::Corrupt {
                    id: id.clone(),
                    path: path.clone(),
                    reason: "it is not UTF-8".into(),
                })?,
                compactions: bundle.compactions.clone(),
            };
            write_session_dir(&tmp, &fork, &state)?;
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(tmp.join("lock"))
                .map_err(io_err("create", tmp.join("lock")))?;
            fsync_dir(&tmp)?;
            let dir = self.session_dir(&id);
            rename_noreplace(&tmp, &dir).map_err(io_err("create", &dir))?;
            fsync_dir(self.root())
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        result.map(|()| id)
    }

    /// The three parts of session `id` (an exact id), read without the lock and consistent: the
    /// transcript and compactions are cut at the checkpoint of the `session.json` read, and that
    /// `session.json` is read again at the end (a checkpoint in between: read again).
    fn read_parts(&self, id: &str) -> Result<Parts> {
        let dir = self.checked_session_dir(id)?;
        let session_path = dir.join(SESSION_FILE);
        for _ in 0..READ_TRIES {
            let session_json = read_session_json(id, &session_path)?;
            let read = parse_state(id, &session_path, &session_json).and_then(|state| {
                let transcript = read_prefix(id, &dir.join(TRANSCRIPT_FILE), &state)?;
                let compactions =
                    covered_compactions(id, &dir.join(COMPACTIONS_FILE), state.last_seq)?;
                Ok((transcript, compactions))
            });
            let again = read_session_json(id, &session_path)?;
            if again != session_json {
                continue;
            }
            let (transcript, compactions) = read?;
            return Ok(Parts {
                session_json,
                transcript,
                compactions,
            });
        }
        Err(StoreError::SyncConflict {
            id: id.to_string(),
            reason: "it kept changing while it was read (a writer is at work)".into(),
        })
    }
}

/// Check a bundle that came from elsewhere; its parsed `session.json`.
fn verify(bundle: &Bundle) -> Result<SessionState> {
    check_id(&bundle.id)?;
    let bad = |reason: String| StoreError::BadBundle {
        id: bundle.id.clone(),
        reason,
    };
    if !is_digest(&bundle.digest) {
        return Err(bad("its digest is not a SHA-256 in hex".into()));
    }
    let (session_json, transcript, compactions) = (
        bundle.session_json.as_bytes(),
        bundle.transcript.as_bytes(),
        bundle.compactions.as_bytes(),
    );
    if digest_of(session_json, transcript, compactions) != bundle.digest {
        return Err(bad(
            "its contents do not match its digest (damaged on the way)".into(),
        ));
    }
    let state =
        parse_state(&bundle.id, Path::new(SESSION_FILE), session_json).map_err(|e| match e {
            StoreError::NewerSchema { .. } => e,
            other => bad(error_text(&other)),
        })?;
    if transcript.len() as u64 != state.transcript_bytes {
        return Err(bad(format!(
            "its transcript has {} bytes but its session.json says the checkpoint covers {}",
            transcript.len(),
            state.transcript_bytes
        )));
    }
    let mut lines = 0u64;
    for line in transcript.split_inclusive(|&b| b == b'\n') {
        lines += 1;
        if line.last() != Some(&b'\n') {
            return Err(bad(format!("its transcript line {lines} is incomplete")));
        }
        match serde_json::from_slice::<TranscriptLine>(line) {
            Ok(l) if l.seq == lines => {}
            Ok(l) => {
                return Err(bad(format!(
                    "its transcript line {lines} has sequence number {}",
                    l.seq
                )))
            }
            Err(e) => {
                return Err(bad(format!(
                    "its transcript line {lines} does not parse: {e}"
                )))
            }
        }
    }
    if lines != state.last_seq {
        return Err(bad(format!(
            "its transcript has {lines} lines but its session.json says {}",
            state.last_seq
        )));
    }
    for (n, line) in compactions.split_inclusive(|&b| b == b'\n').enumerate() {
        if line.last() != Some(&b'\n') {
            return Err(bad(format!("its compaction line {} is incomplete", n + 1)));
        }
        match serde_json::from_slice::<CompactionRecord>(line) {
            Ok(r) if r.seq <= state.last_seq => {}
            Ok(r) => {
                return Err(bad(format!(
                    "its compaction line {} is of transcript line {}, after the checkpoint",
                    n + 1,
                    r.seq
                )))
            }
            Err(e) => {
                return Err(bad(format!(
                    "its compaction line {} does not parse: {e}",
                    n + 1
                )))
            }
        }
    }
    Ok(state)
}

fn read_session_json(id: &str, path: &Path) -> Result<Vec<u8>> {
    read_regular(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StoreError::Corrupt {
            id: id.to_string(),
            path: path.to_path_buf(),
            reason: "the file is missing".into(),
        },
        _ => io_err("read", path)(e),
    })
}

/// The transcript's bytes up to the checkpoint (lines written after it are not part of the
/// session yet).
fn read_prefix(id: &str, path: &Path, state: &SessionState) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if state.transcript_bytes == 0 {
        return Ok(bytes);
    }
    let file = open_read(path).map_err(io_err("read", path))?;
    file.take(state.transcript_bytes)
        .read_to_end(&mut bytes)
        .map_err(io_err("read", path))?;
    if bytes.len() as u64 != state.transcript_bytes {
        return Err(StoreError::TranscriptCorrupt {
            id: id.to_string(),
            line: state.last_seq,
            reason: format!(
                "the file has {} bytes but the last checkpoint covers {}",
                bytes.len(),
                state.transcript_bytes
            ),
        });
    }
    Ok(bytes)
}

/// The complete lines of `compactions.jsonl` the checkpoint covers, byte for byte (a record
/// appended by a checkpoint that did not finish is left out, as a fork leaves it out). An
/// unparsable last line is a torn tail; an unparsable line before it is damage.
fn covered_compactions(id: &str, path: &Path, last_seq: u64) -> Result<Vec<u8>> {
    let bytes = match read_regular(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("read", path)(e)),
    };
    let lines: Vec<&[u8]> = bytes
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| l.last() == Some(&b'\n'))
        .collect();
    let mut kept = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        match serde_json::from_slice::<CompactionRecord>(line) {
            Ok(r) if r.seq <= last_seq => kept.extend_from_slice(line),
            Ok(_) => {}
            Err(_) if n + 1 == lines.len() => {}
            Err(e) => {
                return Err(StoreError::Corrupt {
                    id: id.to_string(),
                    path: path.to_path_buf(),
                    reason: format!("line {}: {e}", n + 1),
                })
            }
        }
    }
    Ok(kept)
}

/// Write a whole session directory at `dir` (created 0700): `session.json` as the bundle has
/// it, `meta.json` rebuilt from it, the transcript and compactions; every file fsync'd, then
/// the directory.
fn write_session_dir(dir: &Path, bundle: &Bundle, state: &SessionState) -> Result<()> {
    ensure_private_dir(dir)?;
    let meta_path = dir.join(META_FILE);
    let meta = serde_json::to_vec(&SessionMeta {
        session_json_bytes: bundle.session_json.len() as u64,
        ..state.meta()
    })
    .map_err(|source| StoreError::Encode {
        path: meta_path.clone(),
        source,
    })?;
    let paths: [PathBuf; 3] = [
        dir.join(SESSION_FILE),
        dir.join(TRANSCRIPT_FILE),
        dir.join(COMPACTIONS_FILE),
    ];
    replace_all(
        dir,
        &[
            (&paths[0], bundle.session_json.as_bytes()),
            (&meta_path, &meta),
            (&paths[1], bundle.transcript.as_bytes()),
            (&paths[2], bundle.compactions.as_bytes()),
        ],
    )
}

/// Remove a directory a killed run of this pid left at `path` (never through a symlink).
fn remove_stale(path: &Path) -> Result<()> {
    if check_real_dir(path)? {
        fs::remove_dir_all(path).map_err(io_err("remove", path))?;
    }
    Ok(())
}

/// Swap two directories in one step (`renameat2(RENAME_EXCHANGE)`), so the id never goes
/// missing; where the kernel or filesystem cannot, three renames (the id is missing for an
/// instant between them).
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::errno::Errno;
        use nix::fcntl::{renameat2, RenameFlags};
        match renameat2(None, a, None, b, RenameFlags::RENAME_EXCHANGE) {
            Ok(()) => return Ok(()),
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let aside = a.with_file_name(format!(
        "{}.old",
        a.file_name().and_then(|n| n.to_str()).unwrap_or("swap")
    ));
    fs::rename(b, &aside)?;
    if let Err(e) = fs::rename(a, b) {
        let _ = fs::rename(&aside, b);
        return Err(e);
    }
    fs::rename(&aside, a)
}

/// Rename `from` to `to` unless `to` exists (`EEXIST`); a plain rename where `renameat2` is not
/// there (it would replace an empty directory).
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::errno::Errno;
        use nix::fcntl::{renameat2, RenameFlags};
        match renameat2(None, from, None, to, RenameFlags::RENAME_NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if fs::symlink_metadata(to).is_ok() {
        return Err(std::io::Error::from_raw_os_error(nix::libc::EEXIST));
    }
    fs::rename(from, to)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::Message;
    use crate::store::NewSession;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("sessions"));
        (dir, store)
    }

    /// A checkpointed session with `n` user messages; its id.
    fn session(store: &Store, title: &str, n: usize) -> String {
        let mut w = store
            .create(NewSession {
                title: title.into(),
                project_root: "/work".into(),
                model: "gemma4".into(),
            })
            .unwrap();
        for i in 0..n {
            w.push_message(Message::user(format!("message {i}")))
                .unwrap();
        }
        w.checkpoint().unwrap();
        w.id().to_string()
    }

    fn add_message(store: &Store, id: &str, text: &str) {
        let mut w = store.open_writer(id).unwrap();
        w.push_message(Message::user(text)).unwrap();
        w.checkpoint().unwrap();
    }

    fn leftovers(store: &Store) -> Vec<String> {
        fs::read_dir(store.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with('.'))
            .collect()
    }

    /// A bundle whose digest is recomputed after `change`, so only the deeper checks catch it.
    fn resealed(mut bundle: Bundle, change: impl FnOnce(&mut Bundle)) -> Bundle {
        change(&mut bundle);
        bundle.digest = digest_of(
            bundle.session_json.as_bytes(),
            bundle.transcript.as_bytes(),
            bundle.compactions.as_bytes(),
        );
        bundle
    }

    #[test]
    fn the_digest_is_stable_length_prefixed_and_covers_only_the_checkpoint() {
        // The format is recorded in sync records on both machines: it must never change.
        // (Computed independently: sha256 of each part's u64 LE length then its bytes.)
        assert_eq!(
            digest_of(b"{}", b"", b""),
            "8b2d9edbed1cc8a4f93bfc20f3083e17dfb2a3b0e94b0bf026c6d7d963cc751c"
        );
        assert_eq!(
            digest_of(b"a", b"bc", b""),
            "4bba87d4404fb83649a19d4ee7df22a3405c514ad8d0638797e4988e0b7cd541"
        );
        assert_ne!(digest_of(b"ab", b"", b""), digest_of(b"a", b"b", b""));
        assert!(is_digest(&digest_of(b"", b"", b"")));
        assert!(!is_digest("ABC"));

        let (_d, store) = store();
        let id = session(&store, "t", 3);
        let first = store.session_digest(&id).unwrap();
        assert_eq!(
            store.session_digest(&id).unwrap(),
            first,
            "reading changes nothing"
        );
        let bundle = store.export_bundle(&id).unwrap();
        assert_eq!(bundle.digest, first);
        // Lines past the checkpoint (a writer killed before its session.json) are not part of it.
        let t = store.session_dir(&id).join(TRANSCRIPT_FILE);
        let mut f = fs::OpenOptions::new().append(true).open(&t).unwrap();
        std::io::Write::write_all(
            &mut f,
            b"{\"seq\":4,\"at_ms\":1,\"item\":{\"kind\":\"event\",\"name\":\"x\"}}\n{\"se",
        )
        .unwrap();
        assert_eq!(store.session_digest(&id).unwrap(), first);
        // meta.json is not part of it either (rebuilt on arrival).
        fs::remove_file(store.session_dir(&id).join(META_FILE)).unwrap();
        assert_eq!(store.session_digest(&id).unwrap(), first);
        add_message(&store, &id, "more");
        assert_ne!(store.session_digest(&id).unwrap(), first);
    }

    #[test]
    fn a_bundle_round_trips_into_another_store_with_the_same_digest() {
        let (_a, here) = store();
        let (_b, there) = store();
        let id = session(&here, "travels", 4);
        let bundle = here.export_bundle(&id).unwrap();
        // Over the wire as JSON.
        let wire: Bundle = serde_json::from_str(&serde_json::to_string(&bundle).unwrap()).unwrap();
        assert_eq!(there.import_bundle(&wire, None).unwrap(), bundle.digest);
        assert_eq!(there.session_digest(&id).unwrap(), bundle.digest);
        assert_eq!(there.load(&id).unwrap(), here.load(&id).unwrap());
        let listed = there.list(true).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].health, Health::Ok);
        assert_eq!(listed[0].meta.as_ref().unwrap().message_count, 4);
        // It can be resumed and written there.
        add_message(&there, &id, "continued there");
        assert_eq!(crate::read_transcript(&there, &id).unwrap().items.len(), 5);
        // Again with the same bundle: already equal, nothing to do.
        let again = there.export_bundle(&id).unwrap();
        assert_eq!(
            there
                .import_bundle(&again, Some("0".repeat(64).as_str()))
                .unwrap(),
            again.digest
        );
        assert!(leftovers(&there).is_empty(), "{:?}", leftovers(&there));
    }

    #[test]
    fn an_update_is_compare_and_swap() {
        let (_a, here) = store();
        let (_b, there) = store();
        let id = session(&here, "cas", 2);
        let old = here.export_bundle(&id).unwrap();
        there.import_bundle(&old, None).unwrap();
        add_message(&here, &id, "changed here");
        let new = here.export_bundle(&id).unwrap();

        // A writer came in there after the sender looked: refused, nothing replaced.
        add_message(&there, &id, "changed there meanwhile");
        let there_now = there.session_digest(&id).unwrap();
        match there.import_bundle(&new, Some(&old.digest)) {
            Err(StoreError::SyncConflict { id: got, .. }) => assert_eq!(got, id),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(there.session_digest(&id).unwrap(), there_now);
        // "Must not exist" while it exists: refused too.
        assert!(matches!(
            there.import_bundle(&new, None),
            Err(StoreError::SyncConflict { .. })
        ));
        // With what is there now as the expectation: replaced.
        there.import_bundle(&new, Some(&there_now)).unwrap();
        assert_eq!(there.session_digest(&id).unwrap(), new.digest);
        // Expecting a session that is not there: refused.
        let other = session(&here, "other", 1);
        let b = here.export_bundle(&other).unwrap();
        assert!(matches!(
            there.import_bundle(&b, Some(&b.digest)),
            Err(StoreError::SyncConflict { .. })
        ));
        assert!(there.resolve(&other).is_err());
        assert!(leftovers(&there).is_empty(), "{:?}", leftovers(&there));
    }

    #[test]
    fn a_held_session_is_refused_and_shown_held() {
        let (_a, here) = store();
        let (_b, there) = store();
        let id = session(&here, "held", 1);
        there
            .import_bundle(&here.export_bundle(&id).unwrap(), None)
            .unwrap();
        let before = there.session_digest(&id).unwrap();
        add_message(&here, &id, "new");
        let new = here.export_bundle(&id).unwrap();
        let writer = there.open_writer(&id).unwrap();
        let manifest = there.sync_manifest().unwrap();
        assert!(manifest[0].held, "{manifest:?}");
        assert_eq!(manifest[0].holder_pid, Some(std::process::id()));
        assert_eq!(manifest[0].digest.as_deref(), Some(before.as_str()));
        assert!(matches!(
            there.import_bundle(&new, Some(&before)),
            Err(StoreError::Locked { .. })
        ));
        assert_eq!(there.session_digest(&id).unwrap(), before);
        drop(writer);
        assert!(!there.sync_manifest().unwrap()[0].held);
        there.import_bundle(&new, Some(&before)).unwrap();
        assert!(leftovers(&there).is_empty(), "{:?}", leftovers(&there));
    }

    #[test]
    fn a_fork_from_a_bundle_names_its_parent_and_why_and_leaves_the_original() {
        let (_a, here) = store();
        let (_b, there) = store();
        let id = session(&here, "both", 2);
        there
            .import_bundle(&here.export_bundle(&id).unwrap(), None)
            .unwrap();
        add_message(&here, &id, "here's change");
        add_message(&there, &id, "there's change");
        let here_before = here.session_digest(&id).unwrap();
        let theirs = there.export_bundle(&id).unwrap();
        let note = "synced from box: changed on both sides since the last sync";
        let fork = here.fork_from_bundle(&theirs, "box", note).unwrap();
        assert_ne!(fork, id);
        assert_eq!(
            here.session_digest(&id).unwrap(),
            here_before,
            "original untouched"
        );
        let state = here.load(&fork).unwrap();
        assert_eq!(state.parent_id.as_deref(), Some(id.as_str()));
        assert_eq!(state.forked_at_seq, Some(3));
        assert_eq!(state.title, "both (from box)");
        let synced = state.synced_from.clone().unwrap();
        assert_eq!(
            (synced.machine.as_str(), synced.original_id.as_str()),
            ("box", id.as_str())
        );
        assert_eq!(synced.note, note);
        assert_eq!(here.info(&fork).unwrap().synced_from, Some(synced));
        let lines = crate::read_transcript(&here, &fork).unwrap().items;
        assert_eq!(lines.len(), 5);
        assert!(
            matches!(&lines[2].item, TranscriptItem::Message { message } if message.content == "there's change")
        );
        assert!(
            matches!(&lines[3].item, TranscriptItem::Forked { parent_id, parent_seq: 3 } if parent_id == &id)
        );
        assert!(
            matches!(&lines[4].item, TranscriptItem::Event { name, detail } if name == "synced" && detail["note"] == note)
        );
        // The fork is a whole session: it exports, travels and resumes.
        let b = here.export_bundle(&fork).unwrap();
        there.import_bundle(&b, None).unwrap();
        add_message(&here, &fork, "go on");
        // An older volee's reader ignores the note: session.json parses without it.
        let raw = fs::read_to_string(here.session_dir(&fork).join(SESSION_FILE)).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&raw).unwrap();
        v.as_object_mut().unwrap().remove("synced_from");
        let _: SessionState = serde_json::from_value(v).unwrap();
    }

    #[test]
    fn a_damaged_bundle_is_refused_and_nothing_is_replaced() {
        let (_a, here) = store();
        let (_b, there) = store();
        let id = session(&here, "damaged", 3);
        there
            .import_bundle(&here.export_bundle(&id).unwrap(), None)
            .unwrap();
        let before = there.session_digest(&id).unwrap();
        add_message(&here, &id, "new");
        let good = here.export_bundle(&id).unwrap();

        let truncated_raw = {
            let mut b = good.clone();
            b.transcript.truncate(b.transcript.len() - 10);
            b
        };
        let truncated = resealed(good.clone(), |b| {
            b.transcript.truncate(b.transcript.len() - 10)
        });
        // Same length, one line garbled in the middle.
        let garbled = resealed(good.clone(), |b| {
            b.transcript = b.transcript.replacen("\"seq\":2", "\"seq\":9", 1)
        });
        let wrong_id = resealed(good.clone(), |b| {
            b.session_json = b.session_json.replacen(&id, "aaaaaaaaaaaa", 1)
        });
        let not_an_id = resealed(good.clone(), |b| b.id = "../x".into());
        let bad_compaction = resealed(good.clone(), |b| {
            b.compactions = "{\"summary\":\"s\",\"replaced_messages\":1,\"seq\":99}\n".into()
        });
        for (what, bundle) in [
            ("digest mismatch", truncated_raw),
            ("truncated", truncated),
            ("garbled", garbled),
            ("another id", wrong_id),
            ("not an id", not_an_id),
            ("compaction past the checkpoint", bad_compaction),
        ] {
            let got = there.import_bundle(&bundle, Some(&before));
            assert!(
                matches!(
                    got,
                    Err(StoreError::BadBundle { .. } | StoreError::InvalidId { .. })
                ),
                "{what}: {got:?}"
            );
            assert!(
                there.fork_from_bundle(&bundle, "box", "n").is_err(),
                "{what}"
            );
            assert_eq!(there.session_digest(&id).unwrap(), before, "{what}");
        }
        assert_eq!(there.list(true).unwrap().len(), 1);
        assert!(leftovers(&there).is_empty(), "{:?}", leftovers(&there));
        there.import_bundle(&good, Some(&before)).unwrap();
    }

    #[test]
    fn the_manifest_reports_damaged_sessions_without_a_digest() {
        let (_a, store) = store();
        let ok = session(&store, "fine", 1);
        let bad = session(&store, "broken", 1);
        fs::write(store.session_dir(&bad).join(SESSION_FILE), b"{ nope").unwrap();
        let m = store.sync_manifest().unwrap();
        let row = |id: &str| m.iter().find(|e| e.id == id).unwrap().clone();
        assert!(row(&ok).digest.is_some());
        assert!(row(&bad).digest.is_none());
        assert!(row(&bad).problem.unwrap().contains("damaged"));
        assert!(store.export_bundle(&bad).is_err());
    }
}
