//! Discovery of harness agents started anywhere: one pass over `/proc`.
//!
//! - [`parse`]: pure parsers over the bytes of `stat`, `cmdline`, `environ` (process names and
//!   arguments are hostile input; `stat` is split at the last `)`);
//! - [`scan`]: a reader with an injectable root, so tests run on fixture trees; it reads `stat` and
//!   `cmdline` of every process and `exe`/`cwd`/`environ` only of candidates; [`Scanner`] repeats
//!   scans and re-reads only new, young and candidate processes (old ones in turn);
//! - [`matcher`]: each profile's process rule (native binaries, node/bun wrappers by argv, nix
//!   `.X-unwrapped`), helpers skipped, the innermost process of a launcher chain kept.

pub mod matcher;
pub mod parse;
pub mod scan;

pub use matcher::{could_match, find_agents, Found, ProcessRule};
pub use parse::{parse_cmdline, parse_environ, parse_stat, pts_path, Stat};
pub use scan::{Proc, ProcRoot, ScanStats, Scanner, REFRESH_EVERY, YOUNG_SECS};
