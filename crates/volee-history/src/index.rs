//! The index of past sessions: one SQLite database (FTS5 for the text) in volee's state dir,
//! 0600. One row per session file with where its last read stopped, so an append-only
//! transcript is read from there; a file that shrank or whose first bytes changed is read again
//! from the start. A file that holds many sessions (OpenCode's database) has a row per session
//! beside its own, each with a mark of its last change, and only changed sessions are read
//! again. Text is redacted before it is written. The index is a cache: deleted or corrupt, it
//! is rebuilt from the harnesses' files.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::read::{Message, Reader, Role, SessionInfo, Usage};
use crate::roots::Root;
use crate::time::format_ms;

/// A line longer than this is skipped (counted as unreadable), not buffered.
const LINE_MAX: usize = 16 << 20;
/// The first bytes of a file, kept to tell an appended file from a rewritten one.
const HEAD: usize = 256;
const SCHEMA_VERSION: i64 = 3;
/// Text written by one scan or refresh past which it ends by settling the text index
/// ([`Index::settle_fts`]). FTS5 writes each commit's text as a new segment on level 0, where
/// every later write's small segment lands too, and merges a level's segments once there are
/// 8 (a step at a time, as writes go on) or 16 (all at once, in the write that brings the
/// 16th: its "crisis merge"). A cold scan's large segments left low were merged so by one-line
/// writes after it: 1.8 s, then 6.6 s (1 GB). A segment of this size costs such a merge 35 ms.
const OPTIMIZE_AFTER: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("session index {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("session index: {0}")]
    Sql(#[from] rusqlite::Error),
}

/// A session as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRow {
    pub harness: String,
    pub id: String,
    pub project: Option<String>,
    pub branch: Option<String>,
    pub title: Option<String>,
    pub first_prompt: Option<String>,
    pub started: Option<String>,
    pub last: Option<String>,
    #[serde(skip)]
    pub last_ms: i64,
    pub messages: u64,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub file: PathBuf,
}

/// A file that looked like a session but could not be read, or a directory that could not be
/// walked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub harness: String,
    pub path: PathBuf,
    pub reason: String,
}

/// One search hit: the session and its best-matching message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    #[serde(flatten)]
    pub session: SessionRow,
    pub role: Role,
    /// The message around the match, the matched words in `[…]`.
    pub snippet: String,
}

/// What one scan did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scan {
    pub files: usize,
    pub read: usize,
    pub bytes: u64,
    pub unreadable: Vec<Unreadable>,
}

pub struct Index {
    db: Connection,
    /// The index's own file: private copies of a harness's database are made beside it.
    path: PathBuf,
    /// Bytes of message text stored since the current write began.
    written: Cell<u64>,
}

impl Index {
    /// Open (or create, 0600) the index at `path`. A file that is not a database, or one of
    /// another schema, is replaced: the index is only a cache.
    pub fn open(path: &Path) -> Result<Index, IndexError> {
        let open_err = |message: String| IndexError::Open {
            path: path.to_path_buf(),
            message,
        };
        private_file(path).map_err(|e| open_err(e.to_string()))?;
        match Self::connect(path) {
            Ok(index) => Ok(index),
            Err(IndexError::Sql(e)) if is_corrupt(&e) => {
                std::fs::remove_file(path).map_err(|e| open_err(e.to_string()))?;
                private_file(path).map_err(|e| open_err(e.to_string()))?;
                Self::connect(path)
            }
            Err(e) => Err(e),
        }
    }

    fn connect(path: &Path) -> Result<Index, IndexError> {
        let db = Connection::open(path)?;
        let path = path.to_path_buf();
        db.busy_timeout(std::time::Duration::from_secs(10))?;
        // A cache: write-ahead log, no sync per commit (a crash of volee loses nothing; a power
        // cut may lose the last updates, which the next scan makes again).
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "NORMAL")?;
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == SCHEMA_VERSION {
            // Nothing is written on opening an index of this schema: a reader (the browser's
            // first frame) never waits for a writer's lock, and the files stay as they were.
            return Ok(Index {
                db,
                path,
                written: Cell::new(0),
            });
        }
        // Made (or remade) in one write transaction, the version read again inside it: two
        // commands opening a new index at once make it once.
        db.execute_batch("BEGIN IMMEDIATE")?;
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == SCHEMA_VERSION {
            db.execute_batch("COMMIT")?;
            return Ok(Index {
                db,
                path,
                written: Cell::new(0),
            });
        }
        db.execute_batch(
            "DROP TABLE IF EXISTS fts; DROP TABLE IF EXISTS msgs; DROP TABLE IF EXISTS files;
             DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS subs;",
        )?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS files(
                path TEXT PRIMARY KEY, harness TEXT NOT NULL, kind TEXT NOT NULL,
                size INTEGER NOT NULL, mtime INTEGER NOT NULL, offset INTEGER NOT NULL,
                head BLOB NOT NULL, good INTEGER NOT NULL, bad INTEGER NOT NULL,
                info TEXT NOT NULL, error TEXT);
             CREATE TABLE IF NOT EXISTS subs(
                path TEXT NOT NULL, key TEXT NOT NULL, mark TEXT NOT NULL, info TEXT NOT NULL,
                PRIMARY KEY(path, key));
             CREATE TABLE IF NOT EXISTS msgs(
                id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL,
                key TEXT NOT NULL DEFAULT '', mid TEXT, role TEXT NOT NULL, at INTEGER,
                text TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS msgs_path ON msgs(path, key, id);
             CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
                text, content='msgs', content_rowid='id', tokenize='unicode61');
             CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
             INSERT OR IGNORE INTO meta(key, value) VALUES ('fts_upto', 0);",
        )?;
        // Fewer, larger segments: terms pending in memory up to 32 MB before they are written,
        // and merges of 8 segments at a time (the defaults, 1 MB and 4, spent most of a cold
        // scan merging).
        db.execute_batch(
            "INSERT INTO fts(fts, rank) VALUES ('hashsize', 33554432);
             INSERT INTO fts(fts, rank) VALUES ('automerge', 8);",
        )?;
        db.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}; COMMIT"))?;
        Ok(Index {
            db,
            path,
            written: Cell::new(0),
        })
    }

    /// Bring the index up to date with every session file under `roots`: new and grown files
    /// are read (grown ones from where the last read stopped), files gone are forgotten.
    pub fn scan(&mut self, roots: &[Root]) -> Result<Scan, IndexError> {
        self.in_transaction(|index| index.scan_in_transaction(roots))
    }

    /// `f` in one write transaction, the text index filled before it commits (and merged into
    /// one segment when `f` wrote much, see [`OPTIMIZE_AFTER`]); rolled back on an error.
    fn in_transaction<T>(
        &mut self,
        f: impl FnOnce(&mut Index) -> Result<T, IndexError>,
    ) -> Result<T, IndexError> {
        self.db.execute_batch("BEGIN IMMEDIATE")?;
        self.written.set(0);
        let result = f(self);
        match &result {
            Ok(_) => {
                self.sync_fts()?;
                let much = self.written.get() > OPTIMIZE_AFTER;
                if much {
                    self.settle_fts()?;
                }
                self.db.execute_batch("COMMIT")?;
                if much {
                    // The log of a large write (hundreds of MB after a cold scan) is emptied
                    // and cut to nothing now, not by the next small write (0.1 s there).
                    self.db
                        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
                }
            }
            Err(_) => {
                let _ = self.db.execute_batch("ROLLBACK");
            }
        }
        result
    }

    fn scan_in_transaction(&mut self, roots: &[Root]) -> Result<Scan, IndexError> {
        let mut scan = Scan::default();
        // What each file was at its last read: unchanged files are told by a `stat` alone.
        let unchanged: HashMap<String, (i64, i64)> = {
            let mut stmt = self
                .db
                .prepare("SELECT path, size, mtime FROM files WHERE error IS NULL")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut uncommitted: u64 = 0;
        let mut seen: HashSet<PathBuf> = HashSet::new();
        let mut done_roots: HashSet<PathBuf> = HashSet::new();
        for root in roots {
            if !done_roots.insert(root.path.clone()) {
                continue;
            }
            let Some(reader) = Reader::new(root.kind) else {
                continue;
            };
            let mut files = Vec::new();
            walk(
                &root.path,
                &mut Vec::new(),
                &reader,
                &mut files,
                &mut |path, reason| {
                    scan.unreadable.push(Unreadable {
                        harness: root.harness.clone(),
                        path,
                        reason,
                    })
                },
            );
            for file in files {
                scan.files += 1;
                seen.insert(file.clone());
                let same = stat_of(&reader, &file).is_some_and(|stat| {
                    unchanged.get(file.to_string_lossy().as_ref()) == Some(&stat)
                });
                if same {
                    continue;
                }
                if let Some(bytes) = self.update(&root.harness, &reader, &file)? {
                    scan.read += 1;
                    scan.bytes += bytes;
                    uncommitted += bytes;
                    // Commit as it goes, so a long first scan shows its progress to other
                    // readers and a second writer waits seconds, not minutes.
                    if uncommitted > 64 << 20 {
                        self.sync_fts()?;
                        self.db.execute_batch("COMMIT; BEGIN IMMEDIATE")?;
                        uncommitted = 0;
                    }
                }
            }
            // Files of this root that are gone: only those its walk could have found (a
            // project directory, Aider's root, may hold other roots' files deeper down).
            let prefix = format!("{}/", root.path.display());
            let kind = format!("{:?}", reader.kind);
            let known: Vec<String> = {
                let mut stmt = self.db.prepare(
                    "SELECT path FROM files WHERE substr(path, 1, ?2) = ?1 AND kind = ?3",
                )?;
                let rows = stmt
                    .query_map(params![prefix, prefix.chars().count() as i64, kind], |r| {
                        r.get::<_, String>(0)
                    })?;
                rows.collect::<Result<_, _>>()?
            };
            for path in known {
                let rel: Vec<&str> = path[prefix.len()..].split('/').collect();
                if reader.is_session_file(&rel) && !seen.contains(Path::new(&path)) {
                    self.forget(&path)?;
                }
            }
        }
        for row in self.unreadable()? {
            if seen.contains(&row.path) {
                scan.unreadable.push(row);
            }
        }
        Ok(scan)
    }

    /// Read what is new in one session file of `root` (a file a watcher saw change): the bytes
    /// read, None when it had not changed.
    pub fn refresh(&mut self, root: &Root, path: &Path) -> Result<Option<u64>, IndexError> {
        let Some(reader) = Reader::new(root.kind) else {
            return Ok(None);
        };
        self.in_transaction(|index| index.update(&root.harness, &reader, path))
    }

    /// Index the text of messages stored since the last call, in one statement: FTS5 writes its
    /// pending terms out at every statement that writes to it (a savepoint), so a row at a time
    /// (a trigger) made one segment per message and a cold scan spent its time merging them.
    fn sync_fts(&self) -> Result<(), IndexError> {
        self.db.execute_batch(
            "INSERT INTO fts(rowid, text)
                SELECT id, text FROM msgs WHERE id > (SELECT value FROM meta WHERE key = 'fts_upto')
                ORDER BY id;
             UPDATE meta SET value = (SELECT coalesce(max(id), 0) FROM msgs) WHERE key = 'fts_upto';",
        )?;
        Ok(())
    }

    /// After a large write: the text index merged into one segment (FTS5's `optimize`) on
    /// level 2 or above, so that small writes after it merge their own segments among
    /// themselves, and this one only a step at a time (steps of 15–55 ms at 1 GB), never in a
    /// crisis merge: those start from level 0 and reach level 1 (16 segments there) but, as
    /// level 1 is merged a step at a time once it has 8, not level 2. `optimize` puts its
    /// segment one level above all the others when they lie on several levels, but only on
    /// level 1 when they all lay on level 0 (a first scan under ~500 MB): then a segment of
    /// nothing is written on level 0 (row 0, which no message has, in and out) and the index
    /// optimized again.
    fn settle_fts(&self) -> Result<(), IndexError> {
        self.db
            .execute_batch("INSERT INTO fts(fts) VALUES ('optimize')")?;
        for _ in 0..2 {
            let Some(levels) = self.fts_levels()? else {
                break;
            };
            let largest = levels
                .iter()
                .enumerate()
                .flat_map(|(level, sizes)| sizes.iter().map(move |size| (*size, level)))
                .max();
            if largest.is_none_or(|(_, level)| level >= 2) {
                break;
            }
            self.db.execute_batch(
                "INSERT INTO fts(rowid, text) VALUES (0, 'volee');
                 INSERT INTO fts(fts, rowid, text) VALUES ('delete', 0, 'volee');
                 INSERT INTO fts(fts) VALUES ('optimize');",
            )?;
        }
        Ok(())
    }

    /// FTS5's segments level by level, each one's size in pages, from its structure record;
    /// None when the record is not one [`fts_structure`] reads.
    fn fts_levels(&self) -> Result<Option<Vec<Vec<u64>>>, IndexError> {
        let block: Option<Vec<u8>> = self
            .db
            .query_row("SELECT block FROM fts_data WHERE id = 10", [], |r| r.get(0))
            .optional()?;
        Ok(block.and_then(|b| fts_structure(&b)))
    }

    /// Count a message's text towards [`OPTIMIZE_AFTER`].
    fn wrote(&self, text: &str) {
        self.written.set(self.written.get() + text.len() as u64);
    }

    /// Drop a file's messages, from the text index too.
    fn drop_messages(&self, path: &str) -> Result<(), IndexError> {
        self.drop_messages_where("path = ?1", params![path])
    }

    /// Drop the messages of one session of a file that holds several.
    fn drop_session_messages(&self, path: &str, key: &str) -> Result<(), IndexError> {
        self.drop_messages_where("path = ?1 AND key = ?2", params![path, key])
    }

    /// Drop a file's messages from its message of harness id `mid` on (a rewind); every one
    /// when no message has that id.
    fn drop_messages_from(&self, path: &str, mid: &str) -> Result<(), IndexError> {
        let first: Option<i64> = self.db.query_row(
            "SELECT min(id) FROM msgs WHERE path = ?1 AND mid = ?2",
            params![path, mid],
            |r| r.get(0),
        )?;
        self.drop_messages_where(
            "path = ?1 AND id >= ?2",
            params![path, first.unwrap_or(i64::MIN)],
        )
    }

    fn drop_messages_where(
        &self,
        condition: &str,
        values: &[&dyn rusqlite::ToSql],
    ) -> Result<(), IndexError> {
        self.db.execute(
            &format!(
                "INSERT INTO fts(fts, rowid, text)
                    SELECT 'delete', id, text FROM msgs
                    WHERE {condition} AND id <= (SELECT value FROM meta WHERE key = 'fts_upto')"
            ),
            values,
        )?;
        self.db
            .execute(&format!("DELETE FROM msgs WHERE {condition}"), values)?;
        Ok(())
    }

    fn forget(&mut self, path: &str) -> Result<(), IndexError> {
        self.drop_messages(path)?;
        self.db
            .execute("DELETE FROM files WHERE path = ?1", params![path])?;
        self.db
            .execute("DELETE FROM subs WHERE path = ?1", params![path])?;
        Ok(())
    }

    /// Read what is new in one session file. Returns the bytes read, None when unchanged.
    fn update(
        &mut self,
        harness: &str,
        reader: &Reader,
        path: &Path,
    ) -> Result<Option<u64>, IndexError> {
        if reader.is_database() {
            return self.update_database(harness, reader, path);
        }
        let key = path.to_string_lossy().into_owned();
        let kind = format!("{:?}", reader.kind);
        let opened = open_regular(path);
        let (mut file, meta) = match opened {
            Ok(f) => f,
            Err(reason) => {
                self.unreadable_file(&key, harness, &kind, &reason)?;
                return Ok(None);
            }
        };
        let size = meta.len();
        let mtime = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        // A digest of the first bytes, not the bytes (they may hold a secret).
        let mut first = vec![0u8; HEAD.min(size as usize)];
        if file.read_exact(&mut first).is_err() {
            first.clear();
        }
        let head = digest(&first);
        type Known = (i64, i64, i64, Vec<u8>, i64, i64, String, String);
        let known: Option<Known> = self
            .db
            .query_row(
                "SELECT size, mtime, offset, head, good, bad, info, kind FROM files WHERE path = ?1",
                params![key],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                    ))
                },
            )
            .optional()?;
        let (offset, good, bad, info, fresh) = match known {
            Some((s, m, _, _, _, _, _, k)) if s == size as i64 && m == mtime && k == kind => {
                return Ok(None);
            }
            Some((_, _, off, old_head, g, b, info, k))
                if k == kind && size as i64 >= off && old_head == head =>
            {
                let info: SessionInfo = serde_json::from_str(&info).unwrap_or_default();
                (off as u64, g, b, info, false)
            }
            _ => (0, 0, 0, SessionInfo::default(), true),
        };
        let (mut offset, mut good, mut bad, mut info, fresh) = if reader.rereads_whole() {
            (0, 0, 0, SessionInfo::default(), true)
        } else {
            (offset, good, bad, info, fresh)
        };
        // Inside the caller's transaction (no savepoint per file: FTS5 writes its pending terms
        // out as a new segment at each one, and merging those was most of a cold scan's time).
        let tx = &self.db;
        if fresh {
            self.drop_messages(&key)?;
        }
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| sql_io(path, e))?;
        let start = offset;
        {
            let mut insert = tx.prepare(
                "INSERT INTO msgs(path, role, at, text, mid) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut lines = BufReader::with_capacity(256 * 1024, file.by_ref().take(size - offset));
            let mut line = Vec::new();
            loop {
                match read_line(&mut lines, &mut line) {
                    Ok(Line::End) => break,
                    Ok(Line::Partial) => break,
                    Ok(Line::TooLong(n)) => {
                        bad += 1;
                        offset += n;
                    }
                    Ok(Line::Whole(n)) => {
                        offset += n;
                        if line.iter().all(u8::is_ascii_whitespace) && !reader.rereads_whole() {
                            continue;
                        }
                        match reader.line(&mut info, &line) {
                            Some(messages) => {
                                good += 1;
                                for m in messages {
                                    let text = volee_store::redact(&m.text);
                                    self.wrote(&text);
                                    insert.execute(params![
                                        key,
                                        m.role.as_str(),
                                        m.at,
                                        text.as_ref(),
                                        info.line_id
                                    ])?;
                                }
                                if let Some(to) = info.rewind_to.take() {
                                    self.drop_messages_from(&key, &to)?;
                                    info.messages = tx.query_row(
                                        "SELECT count(*) FROM msgs WHERE path = ?1 AND role != 'tool'",
                                        params![key],
                                        |r| r.get::<_, i64>(0),
                                    )? as u64;
                                }
                            }
                            None => bad += 1,
                        }
                    }
                    Err(e) => return Err(sql_io(path, e)),
                }
            }
            for m in reader.finish(&mut info) {
                let text = volee_store::redact(&m.text);
                self.wrote(&text);
                insert.execute(params![
                    key,
                    m.role.as_str(),
                    m.at,
                    text.as_ref(),
                    None::<String>
                ])?;
            }
        }
        if let Some(dir) = path.parent() {
            reader.sidecars(&mut info, dir, |p| {
                let (mut f, meta) = open_regular(p).ok()?;
                let mut bytes = Vec::with_capacity(meta.len().min(1 << 20) as usize);
                f.by_ref().take(4 << 20).read_to_end(&mut bytes).ok()?;
                Some(bytes)
            });
        }
        if reader.dated_by_mtime() && info.started.is_some() {
            let ms = mtime / 1_000_000;
            info.last = Some(info.last.map_or(ms, |l| l.max(ms)));
        }
        redact_info(&mut info);
        let error = if good == 0 && bad > 0 {
            Some(reader.bad_reason(harness, bad))
        } else if good > 0 && info.id.is_none() {
            Some(reader.no_id_reason(harness))
        } else {
            // It goes on a resume command line: only a plain id, never a flag or anything else.
            info.id.as_deref().filter(|id| !is_session_id(id)).map(|id| {
                format!(
                    "its session id {:?} is not one (letters, digits, `.`, `_`, `-`; not first `-`)",
                    id.chars().take(40).collect::<String>()
                )
            })
        };
        let info_json = serde_json::to_string(&info).unwrap_or_else(|_| "{}".into());
        tx.execute(
            "INSERT INTO files(path, harness, kind, size, mtime, offset, head, good, bad, info, error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT(path) DO UPDATE SET harness = ?2, kind = ?3, size = ?4, mtime = ?5,
                offset = ?6, head = ?7, good = ?8, bad = ?9, info = ?10, error = ?11",
            params![
                key,
                harness,
                kind,
                size as i64,
                mtime,
                offset as i64,
                head,
                good,
                bad,
                info_json,
                error
            ],
        )?;
        Ok(Some(offset - start))
    }

    /// A file the index could not read: listed with the reason (its sessions are not).
    fn unreadable_file(
        &self,
        key: &str,
        harness: &str,
        kind: &str,
        reason: &str,
    ) -> Result<(), IndexError> {
        self.db.execute(
            "INSERT INTO files(path, harness, kind, size, mtime, offset, head, good, bad, info, error)
             VALUES (?1, ?2, ?3, 0, 0, 0, x'', 0, 0, '{}', ?4)
             ON CONFLICT(path) DO UPDATE SET error = ?4",
            params![key, harness, kind, reason],
        )?;
        Ok(())
    }

    /// Read what changed in a database that holds many sessions (OpenCode's): from a private
    /// copy of it and its write-ahead log, only the sessions whose mark changed. Returns the
    /// bytes copied, None when unchanged.
    fn update_database(
        &mut self,
        harness: &str,
        reader: &Reader,
        path: &Path,
    ) -> Result<Option<u64>, IndexError> {
        let key = path.to_string_lossy().into_owned();
        let kind = format!("{:?}", reader.kind);
        let stat = match stat_database(path) {
            Ok(stat) => stat,
            Err(reason) => {
                self.unreadable_file(&key, harness, &kind, &reason)?;
                return Ok(None);
            }
        };
        let known: Option<(i64, i64, String, Option<String>)> = self
            .db
            .query_row(
                "SELECT size, mtime, kind, error FROM files WHERE path = ?1",
                params![key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        if known.as_ref().is_some_and(|(size, mtime, k, error)| {
            (*size, *mtime) == stat && *k == kind && error.is_none()
        }) {
            return Ok(None);
        }
        let read = match private_copy(&self.path, path) {
            Ok(copy) => self.read_database(&key, &copy)?,
            Err(reason) => Err(reason),
        };
        let (sessions, bad) = match read {
            Ok(counts) => counts,
            Err(reason) => {
                let reason = format!("not an OpenCode database that could be read: {reason}");
                self.unreadable_file(&key, harness, &kind, &reason)?;
                return Ok(None);
            }
        };
        self.db.execute(
            "INSERT INTO files(path, harness, kind, size, mtime, offset, head, good, bad, info, error)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, x'', ?6, ?7, '{}', NULL)
             ON CONFLICT(path) DO UPDATE SET harness = ?2, kind = ?3, size = ?4, mtime = ?5,
                offset = 0, head = x'', good = ?6, bad = ?7, info = '{}', error = NULL",
            params![key, harness, kind, stat.0, stat.1, sessions, bad],
        )?;
        Ok(Some(stat.0 as u64))
    }

    /// The sessions of a private copy of OpenCode's database whose mark changed since the last
    /// read, into the index under `key`; sessions gone are dropped. Returns (sessions, sessions
    /// left out for an id that is not a plain one), or why the copy could not be read.
    fn read_database(
        &self,
        key: &str,
        copy: &PrivateCopy,
    ) -> Result<Result<(i64, i64), String>, IndexError> {
        let source = match Connection::open_with_flags(
            &copy.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ) {
            Ok(db) => db,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let marks = match crate::opencode::marks(&source) {
            Ok(marks) => marks,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let known: HashMap<String, String> = {
            let mut stmt = self
                .db
                .prepare("SELECT key, mark FROM subs WHERE path = ?1")?;
            let rows = stmt.query_map(params![key], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut bad = 0;
        let mut present = HashSet::new();
        let mut insert = self
            .db
            .prepare("INSERT INTO msgs(path, key, role, at, text) VALUES (?1, ?2, ?3, ?4, ?5)")?;
        for (id, mark) in marks {
            // It goes on a resume command line: only a plain id.
            if !is_session_id(&id) {
                bad += 1;
                continue;
            }
            present.insert(id.clone());
            if known.get(&id) == Some(&mark) {
                continue;
            }
            let (mut info, messages) = match crate::opencode::session(&source, &id) {
                Ok(Some(session)) => session,
                Ok(None) => continue,
                Err(e) => return Ok(Err(e.to_string())),
            };
            self.drop_session_messages(key, &id)?;
            for m in messages {
                let text = volee_store::redact(&m.text);
                self.wrote(&text);
                insert.execute(params![key, id, m.role.as_str(), m.at, text.as_ref()])?;
            }
            redact_info(&mut info);
            let info = serde_json::to_string(&info).unwrap_or_else(|_| "{}".into());
            self.db.execute(
                "INSERT INTO subs(path, key, mark, info) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(path, key) DO UPDATE SET mark = ?3, info = ?4",
                params![key, id, mark, info],
            )?;
        }
        for gone in known.keys().filter(|k| !present.contains(*k)) {
            self.drop_session_messages(key, gone)?;
            self.db.execute(
                "DELETE FROM subs WHERE path = ?1 AND key = ?2",
                params![key, gone],
            )?;
        }
        Ok(Ok((present.len() as i64, bad)))
    }

    /// Every readable session, newest first; a session kept in several files (Gemini starts a
    /// new file when a session is resumed, with the same id) once, as its newest file.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, IndexError> {
        let mut seen = HashSet::new();
        let mut rows: Vec<SessionRow> = self.files()?.into_iter().map(|(_, r)| r).collect();
        rows.retain(|r| seen.insert((r.harness.clone(), r.id.clone())));
        Ok(rows)
    }

    /// Every readable session file's session (each session of a file that holds several),
    /// newest first, with its key in the file (`""` for a file of one session).
    fn files(&self) -> Result<Vec<(String, SessionRow)>, IndexError> {
        let mut stmt = self.db.prepare(
            "SELECT f.path, f.harness, '', f.info FROM files f
                WHERE f.error IS NULL AND NOT EXISTS (SELECT 1 FROM subs s WHERE s.path = f.path)
             UNION ALL
             SELECT f.path, f.harness, s.key, s.info FROM files f JOIN subs s ON s.path = f.path
                WHERE f.error IS NULL",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (path, harness, key, info) = row?;
            let info: SessionInfo = serde_json::from_str(&info).unwrap_or_default();
            if let Some(row) = session_row(harness, PathBuf::from(path), info) {
                out.push((key, row));
            }
        }
        out.sort_by(|(_, a), (_, b)| b.last_ms.cmp(&a.last_ms).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Files that could not be read, with the reason.
    pub fn unreadable(&self) -> Result<Vec<Unreadable>, IndexError> {
        let mut stmt = self.db.prepare(
            "SELECT harness, path, error FROM files WHERE error IS NOT NULL ORDER BY path",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Unreadable {
                harness: r.get(0)?,
                path: PathBuf::from(r.get::<_, String>(1)?),
                reason: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Sessions whose messages match `query` (words, all of them, in any order; a word may end
    /// in `*` for a prefix), best first, one hit per session.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, IndexError> {
        let Some(query) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let sessions: HashMap<(PathBuf, String), SessionRow> = self
            .files()?
            .into_iter()
            .map(|(key, s)| ((s.file.clone(), key), s))
            .collect();
        let mut stmt = self.db.prepare(
            "SELECT m.path, m.key, m.role, snippet(fts, 0, '[', ']', '…', 12)
             FROM fts JOIN msgs m ON m.id = fts.rowid
             WHERE fts MATCH ?1 ORDER BY bm25(fts) LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![query, (limit * 20).max(200) as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out: Vec<Hit> = Vec::new();
        let mut taken = HashSet::new();
        for row in rows {
            let (path, key, role, snippet) = row?;
            let Some(session) = sessions.get(&(PathBuf::from(path), key)) else {
                continue;
            };
            if out.len() >= limit || !taken.insert((session.harness.clone(), session.id.clone())) {
                continue;
            }
            {
                out.push(Hit {
                    session: session.clone(),
                    role: Role::parse(&role).unwrap_or(Role::Tool),
                    snippet: snippet.replace(['\n', '\r'], " "),
                });
            }
        }
        Ok(out)
    }

    /// The last `n` messages of a session, oldest first.
    pub fn messages(&self, session: &SessionRow, n: usize) -> Result<Vec<Message>, IndexError> {
        // A file of one session keeps its messages under the key `""`; a file of several under
        // each session's id.
        let mut stmt = self.db.prepare(
            "SELECT role, at, text FROM msgs WHERE path = ?1 AND key IN ('', ?2)
             ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![session.file.to_string_lossy(), session.id, n as i64],
            |r| {
                Ok(Message {
                    role: Role::parse(&r.get::<_, String>(0)?).unwrap_or(Role::Tool),
                    at: r.get(1)?,
                    text: r.get(2)?,
                })
            },
        )?;
        let mut out: Vec<Message> = rows.collect::<Result<_, _>>()?;
        out.reverse();
        Ok(out)
    }
}

/// The title and first prompt, redacted like the messages.
fn redact_info(info: &mut SessionInfo) {
    for text in [&mut info.title, &mut info.first_prompt]
        .into_iter()
        .flatten()
    {
        if let std::borrow::Cow::Owned(r) = volee_store::redact(text) {
            *text = r;
        }
    }
}

/// A harness's database's write-ahead log.
fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

/// What tells a changed session file from an unchanged one by a `stat`: its size and mtime —
/// for a database, with its write-ahead log's (a write goes to the log first).
fn stat_of(reader: &Reader, file: &Path) -> Option<(i64, i64)> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    let (mut size, mut mtime) = (meta.len() as i64, mtime_ns(&meta));
    if reader.is_database() {
        if let Ok(wal) = std::fs::symlink_metadata(wal_of(file)) {
            size += wal.len() as i64;
            mtime = mtime.max(mtime_ns(&wal));
        }
    }
    Some((size, mtime))
}

/// [`stat_of`] a database, checking it and its log as [`open_regular`] does.
fn stat_database(db: &Path) -> Result<(i64, i64), String> {
    let (_, meta) = open_regular(db)?;
    let (mut size, mut mtime) = (meta.len() as i64, mtime_ns(&meta));
    match open_regular(&wal_of(db)) {
        Ok((_, wal)) => {
            size += wal.len() as i64;
            mtime = mtime.max(mtime_ns(&wal));
        }
        Err(_) if std::fs::symlink_metadata(wal_of(db)).is_err() => {}
        Err(reason) => return Err(format!("its write-ahead log: {reason}")),
    }
    Ok((size, mtime))
}

/// A private copy (0600, beside the index) of a harness's database and its write-ahead log,
/// removed when dropped. SQLite never opens the harness's own files: a reader of a WAL
/// database writes its read marks into the `-shm` file, and may create `-wal` and `-shm`
/// where there were none; and SQLite would follow a symbolic link where
/// [`open_regular`] refuses one.
struct PrivateCopy {
    db: PathBuf,
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = self.db.as_os_str().to_owned();
            name.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(name));
        }
    }
}

fn private_copy(index: &Path, source: &Path) -> Result<PrivateCopy, String> {
    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = index.as_os_str().to_owned();
    name.push(format!(".read-{}-{n}", std::process::id()));
    let copy = PrivateCopy {
        db: PathBuf::from(name),
    };
    let copy_wal = wal_of(&copy.db);
    let copy_one = |from: &Path, to: &Path| -> Result<(), String> {
        let _ = std::fs::remove_file(to);
        let (mut f, _) = open_regular(from)?;
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(to)
            .map_err(|e| format!("cannot make a private copy at {}: {e}", to.display()))?;
        std::io::copy(&mut f, &mut out).map_err(|e| e.to_string())?;
        Ok(())
    };
    // The harness may write while it is copied: copied again (up to three times) until the
    // database and its log did not change meanwhile. SQLite's recovery of the copy takes only
    // the log's whole transactions either way.
    for _ in 0..3 {
        let before = stat_database(source)?;
        copy_one(source, &copy.db)?;
        if std::fs::symlink_metadata(wal_of(source)).is_ok() {
            copy_one(&wal_of(source), &copy_wal)?;
        } else {
            let _ = std::fs::remove_file(&copy_wal);
        }
        if stat_database(source)? == before {
            break;
        }
    }
    Ok(copy)
}

fn session_row(harness: String, file: PathBuf, info: SessionInfo) -> Option<SessionRow> {
    Some(SessionRow {
        harness,
        id: info.id?,
        project: info.project,
        branch: info.branch,
        title: info.title,
        first_prompt: info.first_prompt,
        started: info.started.map(format_ms),
        last: info.last.map(format_ms),
        last_ms: info.last.unwrap_or(0),
        messages: info.messages,
        model: info.model,
        usage: info.usage,
        file,
    })
}

/// A harness's session id as volee accepts it: what the harnesses write (UUIDs, `ses_…`,
/// `T-…`), nothing a resume line could take for a flag or a path.
fn is_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with(['-', '.'])
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The user's words as an FTS5 query: each word quoted (so `-`, `:`, `"` and FTS5's own words
/// are text), a trailing `*` kept as a prefix search. None when there is no word.
fn fts_query(query: &str) -> Option<String> {
    let terms: Vec<String> = query
        .split_whitespace()
        .filter_map(|w| {
            let (word, prefix) = match w.strip_suffix('*') {
                Some(w) => (w, true),
                None => (w, false),
            };
            let word = word.replace('"', "\"\"");
            (!word.is_empty()).then(|| format!("\"{word}\"{}", if prefix { "*" } else { "" }))
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// FTS5's structure record (`fts5StructureDecode` in SQLite's `fts5_index.c`): a 4-byte
/// cookie, an optional version mark, the level and segment counts, a write counter, then per
/// level the segments being merged, their count and each one's id and first and last page
/// (and, in the mark's version, 5 more numbers). Each level's segments' sizes in pages; None
/// for anything else (another SQLite's format), read whole or not at all.
fn fts_structure(b: &[u8]) -> Option<Vec<Vec<u64>>> {
    let v2 = b.get(4..8) == Some(&[0xff, 0, 0, 1][..]);
    let mut i = if v2 { 8 } else { 4 };
    // SQLite's varint: 7 bits a byte, high bit set on all but the last; a 9th byte has 8.
    let mut varint = || -> Option<u64> {
        let mut v: u64 = 0;
        for n in 0..9 {
            let byte = *b.get(i)?;
            i += 1;
            if n == 8 {
                return Some((v << 8) | u64::from(byte));
            }
            v = (v << 7) | u64::from(byte & 0x7f);
            if byte & 0x80 == 0 {
                break;
            }
        }
        Some(v)
    };
    let levels = varint()?;
    let segments = varint()?;
    let _writes = varint()?;
    if levels > 64 || segments > 2000 {
        return None;
    }
    let mut out = Vec::new();
    let mut seen = 0;
    for _ in 0..levels {
        let _merging = varint()?;
        let n = varint()?;
        seen += n;
        if seen > segments {
            return None;
        }
        let mut sizes = Vec::new();
        for _ in 0..n {
            let (_id, first, last) = (varint()?, varint()?, varint()?);
            if v2 {
                for _ in 0..5 {
                    varint()?;
                }
            }
            sizes.push(last.checked_sub(first)? + 1);
        }
        out.push(sizes);
    }
    (seen == segments && i == b.len()).then_some(out)
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

fn sql_io(path: &Path, e: std::io::Error) -> IndexError {
    IndexError::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Create the index file 0600 if missing; refuse a symlink or anything not a regular file of
/// ours.
fn private_file(path: &Path) -> std::io::Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(std::io::Error::other("owned by another user"));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    }
    Ok(())
}

/// Open a harness's file for reading: a regular file only (not a symlink, FIFO or device:
/// opening a FIFO would wait for a writer), never blocking.
pub(crate) fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => "a symbolic link, not followed".to_owned(),
            _ => e.to_string(),
        })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".to_owned());
    }
    // A root may come from an agent's environment (`CODEX_HOME=/tmp/…`): a file someone else
    // put there is not this user's history.
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(format!("owned by another user (uid {})", meta.uid()));
    }
    Ok((file, meta))
}

enum Line {
    /// A whole line of this many bytes (newline included) is in the buffer.
    Whole(u64),
    /// A line over [`LINE_MAX`] of this many bytes was skipped.
    TooLong(u64),
    /// The rest has no newline yet (a line being written): left for the next read.
    Partial,
    End,
}

fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let mut n: u64 = 0;
    let mut too_long = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(if n == 0 { Line::End } else { Line::Partial });
        }
        let (take, done) = match memchr_nl(buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !too_long {
            if line.len() + take > LINE_MAX {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        n += take as u64;
        r.consume(take);
        if done {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            return Ok(if too_long {
                Line::TooLong(n)
            } else {
                Line::Whole(n)
            });
        }
    }
}

/// The first bytes' digest (FNV-1a 64, with their length): tells a rewritten file from a grown
/// one.
fn digest(bytes: &[u8]) -> Vec<u8> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut out = h.to_le_bytes().to_vec();
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out
}

fn memchr_nl(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// Session files under `dir` (not following symlinks; `rel` is the path so far). A directory
/// that cannot be read is reported, not fatal.
pub(crate) fn walk(
    dir: &Path,
    rel: &mut Vec<String>,
    reader: &Reader,
    out: &mut Vec<PathBuf>,
    report: &mut dyn FnMut(PathBuf, String),
) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel.is_empty() => return,
        Err(e) => {
            report(dir.to_path_buf(), format!("cannot read the directory: {e}"));
            return;
        }
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        rel.push(name);
        let path = entry.path();
        if kind.is_dir() {
            if rel.len() < reader.max_depth() {
                walk(&path, rel, reader, out, report);
            }
        } else {
            let parts: Vec<&str> = rel.iter().map(String::as_str).collect();
            if reader.is_session_file(&parts) {
                if kind.is_symlink() {
                    report(path, "a symbolic link, not followed".into());
                } else {
                    out.push(path);
                }
            }
        }
        rel.pop();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn fts5_structure_records_are_read_whole_or_not_at_all() {
        // Written by SQLite 3.40 (the first version): three segments on level 0.
        let v1 = [0, 0, 0, 0, 1, 3, 12, 0, 3, 1, 1, 10, 2, 1, 1, 3, 1, 1];
        assert_eq!(fts_structure(&v1), Some(vec![vec![10, 1, 1]]));
        assert_eq!(fts_structure(&v1[..v1.len() - 1]), None);
        assert_eq!(fts_structure(&[v1.as_slice(), &[0]].concat()), None);
        assert_eq!(fts_structure(b"not a structure record"), None);
    }

    #[test]
    fn a_settled_text_index_is_one_segment_on_level_2_or_above_and_holds_the_same_text() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("sessions.db")).unwrap();
        // Three commits: three segments, all on level 0, where `optimize` alone would leave
        // its one segment on level 1.
        for batch in 0..3 {
            for i in 0..300 {
                index
                    .db
                    .execute(
                        "INSERT INTO msgs(path, role, text) VALUES ('f', 'user', ?1)",
                        params![format!("batch{batch} message {i} of common words")],
                    )
                    .unwrap();
            }
            index.sync_fts().unwrap();
        }
        let levels = index
            .fts_levels()
            .unwrap()
            .expect("this SQLite's record read");
        assert_eq!(levels.iter().map(Vec::len).collect::<Vec<_>>(), [3]);

        index.settle_fts().unwrap();
        let levels = index.fts_levels().unwrap().unwrap();
        let held: Vec<(usize, usize)> = levels
            .iter()
            .enumerate()
            .filter(|(_, segments)| !segments.is_empty())
            .map(|(level, segments)| (level, segments.len()))
            .collect();
        assert!(
            held.len() == 1 && held[0].0 >= 2 && held[0].1 == 1,
            "{levels:?}"
        );
        let count = |q: &str| -> i64 {
            index
                .db
                .query_row("SELECT count(*) FROM fts WHERE fts MATCH ?1", [q], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        assert_eq!(
            (count("batch1"), count("common"), count("volee")),
            (300, 900, 0)
        );
        index
            .db
            .execute(
                "INSERT INTO fts(fts, rank) VALUES ('integrity-check', 1)",
                [],
            )
            .unwrap();
    }
}
