//! Session ids: 12 characters of lowercase base32 (`a-z`, `2-7`), random. Anything a user gives
//! is checked before it becomes part of a path.

use crate::error::{Result, StoreError};

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
pub(crate) const ID_LEN: usize = 12;

/// A fresh random id (unique, not secret: creation retries on a clash).
pub(crate) fn new_id() -> String {
    volee_os::random::unique_bytes(ID_LEN)
        .iter()
        .map(|b| ALPHABET[usize::from(b % 32)] as char)
        .collect()
}

/// Check an id or id prefix a user gave: it becomes a directory name, so only `[A-Za-z0-9_-]`.
pub fn check_id(id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        Some("it is empty")
    } else if id.contains('/') || id.contains('\\') {
        Some("it contains a path separator")
    } else if id.contains("..") {
        Some("it contains `..`")
    } else if id.len() > 64 {
        Some("it is longer than 64 characters")
    } else if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Some("only letters, digits, `-` and `_` are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StoreError::InvalidId {
            id: id.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn new_ids_are_valid_and_distinct() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(id.len(), ID_LEN);
            check_id(id).unwrap();
        }
    }

    #[test]
    fn path_like_ids_are_refused() {
        for bad in [
            "", "../x", "a/b", "..", "a\\b", "a b", "x\0", ".hidden", "é",
        ] {
            assert!(
                matches!(check_id(bad), Err(StoreError::InvalidId { .. })),
                "{bad:?}"
            );
        }
    }
}
