//! volee's pure domain, no I/O: the agent registry model ([`registry`]) and the state arbiter
//! ([`arbiter`]) that turns observations from every source into one state with its evidence.
//!
//! The daemon owns the clock and the files; everything here takes `now` as an argument so tests
//! and `volee explain` see exactly the decision the daemon made.

pub mod arbiter;
pub mod observation;
pub mod registry;

pub use arbiter::{ArbiterConfig, Decision, ExitFact, HookSignal, Millis, PromptMatch, Signals};
pub use observation::Observation;
pub use registry::{
    AgentRecord, NameError, NewAgent, Registry, RegistryFile, ResolveError, Transition,
};
