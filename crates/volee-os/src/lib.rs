//! What every volee process asks the operating system, written once (the daemon, the CLI, the
//! session store and the model client each had their own copy):
//!
//! - [`clock`]: milliseconds since the epoch, the unit of every `*_ms` field volee records;
//! - [`random`]: the kernel's random bytes (hook tokens, event ids, session ids) and ids that
//!   only need to be unique;
//! - [`program`]: a program on a `PATH`, found the way volee has always looked (the first
//!   directory holding a regular file of that name);
//! - [`error`]: an error and its sources as one line.
//!
//! No volee crate is below this one; it depends on nothing of volee's.

pub mod clock;
pub mod error;
pub mod program;
pub mod random;
