//! What `volee serve --stdio` says first on a machine reached over ssh (docs/adr/0013).
//!
//! The local side reads one line, `{"protocol": N, "version": "…"}`, before anything else: a
//! different `N` is refused with both numbers (the two volee speak different socket protocols),
//! and `version` is the remote binary's version, shown in `volee machine ls`. Then newline JSON
//! both ways: [`RemoteRequest`] down, [`RemoteFrame`] up (answers by id, and agent lists pushed
//! when the machine's registry changes).

use serde::{Deserialize, Serialize};

/// The first line `volee serve --stdio` writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteHello {
    /// The remote's [`crate::PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The remote volee's version (`CARGO_PKG_VERSION`).
    pub version: String,
}

/// The longest hello line the local side reads (the remote is not trusted: its output is bounded).
pub const MAX_HELLO_BYTES: usize = 4096;

/// The longest line either side reads after the hello (a machine's whole agent list is one).
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// A request the local daemon sends down the connection: `id` comes back on its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteRequest {
    pub id: u64,
    pub request: crate::Request,
}

/// A line `volee serve --stdio` writes after its hello: the answer to request `id`, or with no
/// `id` the machine's agents (`Response::Agents`, every agent, ended ones too) after a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteFrame {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub response: crate::Response,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_is_one_json_line_of_two_fields() {
        let hello = RemoteHello {
            protocol: 5,
            version: "0.1.0".into(),
        };
        let line = serde_json::to_string(&hello).unwrap();
        assert_eq!(line, r#"{"protocol":5,"version":"0.1.0"}"#);
        assert_eq!(serde_json::from_str::<RemoteHello>(&line).unwrap(), hello);
    }
}
