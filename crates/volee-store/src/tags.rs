//! Tags: short words a user puts on sessions (`volee agent --tag SID TAG…`, `--untag`,
//! `--list-sessions --with-tag TAG`), kept sorted in `session.json` and `meta.json`. Retention
//! keeps sessions with a tag of `keep_tagged`.

use crate::error::{Result, StoreError};
use crate::store::Store;

/// Longest tag, in bytes.
const TAG_MAX: usize = 32;

/// Tags a session may have.
pub const MAX_TAGS: usize = 32;

/// A tag is a short word: `[a-z0-9][a-z0-9._-]{0,31}` (lower case, so `Keep` and `keep` are
/// not two tags; no spaces or commas, so a listing can show them joined).
pub fn check_tag(tag: &str) -> Result<()> {
    let bad = |reason| {
        Err(StoreError::InvalidTag {
            tag: tag.to_string(),
            reason,
        })
    };
    let Some(first) = tag.bytes().next() else {
        return bad("it is empty");
    };
    if tag.len() > TAG_MAX {
        return bad("it is longer than 32 characters");
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return bad("it must start with a lower-case letter or a digit");
    }
    if !tag
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("only a-z, 0-9, '.', '_' and '-' are allowed");
    }
    Ok(())
}

impl Store {
    /// Add `tags` to a session (takes the writer lock: refused while an agent holds it); every
    /// tag is checked before anything changes. Returns the id and the session's tags after.
    pub fn tag(&self, id_or_prefix: &str, tags: &[String]) -> Result<(String, Vec<String>)> {
        self.change_tags(id_or_prefix, tags, true)
    }

    /// Remove `tags` from a session (a tag it does not have is no error).
    pub fn untag(&self, id_or_prefix: &str, tags: &[String]) -> Result<(String, Vec<String>)> {
        self.change_tags(id_or_prefix, tags, false)
    }

    fn change_tags(
        &self,
        id_or_prefix: &str,
        tags: &[String],
        add: bool,
    ) -> Result<(String, Vec<String>)> {
        for t in tags {
            check_tag(t)?;
        }
        let mut w = self.open_writer(id_or_prefix)?;
        let mut now = w.state().tags.clone();
        if add {
            now.extend(tags.iter().cloned());
        } else {
            now.retain(|t| !tags.contains(t));
        }
        now.sort();
        now.dedup();
        if now.len() > MAX_TAGS {
            return Err(StoreError::InvalidTag {
                tag: tags.join(" "),
                reason: "a session has at most 32 tags",
            });
        }
        if now != w.state().tags {
            w.state_mut().tags = now.clone();
            w.checkpoint()?;
        }
        Ok((w.id().to_string(), now))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::store::NewSession;

    #[test]
    fn tags_are_short_lower_case_words() {
        for good in ["keep", "a", "v1.2", "bug_21", "x-y", &"a".repeat(32)] {
            check_tag(good).unwrap();
        }
        for bad in ["", "Keep", "-x", ".x", "a b", "a,b", "é", &"a".repeat(33)] {
            assert!(check_tag(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tag_and_untag_keep_them_sorted_once_in_session_and_meta() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        let w = store
            .create(NewSession {
                title: "t".into(),
                project_root: dir.path().into(),
                model: "m".into(),
            })
            .unwrap();
        let id = w.id().to_string();
        drop(w);
        let (_, tags) = store
            .tag(&id, &["keep".into(), "bug".into(), "keep".into()])
            .unwrap();
        assert_eq!(tags, ["bug", "keep"]);
        assert_eq!(store.load(&id).unwrap().tags, ["bug", "keep"]);
        let listed = store.list(false).unwrap();
        assert_eq!(listed[0].meta.as_ref().unwrap().tags, ["bug", "keep"]);
        assert!(store.tag(&id, &["Bad tag".into()]).is_err());
        let (_, tags) = store.untag(&id, &["bug".into(), "nope".into()]).unwrap();
        assert_eq!(tags, ["keep"]);
        // Held by a writer: refused.
        let _held = store.open_writer(&id).unwrap();
        assert!(matches!(
            store.tag(&id, &["x".into()]),
            Err(StoreError::Locked { .. })
        ));
    }
}
