//! Discovery of harness agents started anywhere: one pass over `/proc`.
//!
//! - [`parse`]: pure parsers over the bytes of `stat`, `status`, `cmdline`, `environ` (process
//!   names and arguments are hostile input; `stat` is split at the last `)` by `procfs-core`'s
//!   parser, the others are ours where `procfs` does not serve, each with the measured reason);
//! - [`scan`]: a reader with an injectable root, so tests run on fixture trees; it reads `stat` of
//!   every process, `cmdline` and `status` (the owner) of candidates, and `exe`/`cwd`/`environ`
//!   only of found agents; [`Scanner`] repeats scans and re-reads only new, young and candidate
//!   processes (old ones in turn);
//! - [`matcher`]: each profile's process rule (native binaries, node/bun wrappers by argv, nix
//!   `.X-unwrapped`), only the user's own processes (real and effective uid), helpers skipped,
//!   the innermost process of a launcher chain kept.

pub mod matcher;
pub mod parse;
pub mod scan;

pub use matcher::{could_match, find_agents, matches, owned_by, Found, ProcessRule};
pub use parse::{
    parse_cmdline, parse_environ, parse_stat, parse_status_owner, pts_path, Owner, Stat,
};
pub use scan::{Proc, ProcRoot, ScanStats, Scanner, REFRESH_EVERY, YOUNG_SECS};
