//! Every harness's past sessions, read-only: readers for each history format a profile names
//! ([`volee_harness::HistoryKind`]), the roots they are found under, and one index (SQLite with
//! FTS5, in volee's state dir) that lists, searches and shows them. A harness's files are never
//! written; the index can be deleted at any time and is rebuilt.

mod index;
mod opencode;
mod read;
mod roots;
mod tail;
mod time;

pub use index::{Hit, Index, IndexError, Scan, SessionRow, Unreadable};
pub use read::{aider_session_id, Message, Reader, Role, SessionInfo, Usage, AIDER_HISTORY};
pub use roots::{project_roots, roots, Root};
pub use tail::{find_file, is_file_of, UsageTail};

/// Tool output kept in the index per call (the rest is cut).
pub const TOOL_OUTPUT_MAX: usize = 4096;
