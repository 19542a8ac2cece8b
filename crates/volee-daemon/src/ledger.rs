//! The usage ledger (issue 23): every change of an agent's usage the daemon saw, as the tokens
//! (and cost) it added, one JSON line each in `usage.jsonl` in the state directory (0600, this
//! user's, appended) — kept across restarts and agents' ends, summed by `volee usage`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};
use volee_protocol::AgentUsage;

/// The ledger's file name in the state directory.
pub const FILE: &str = "usage.jsonl";

/// What one change of an agent's usage added.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Epoch milliseconds.
    pub at: u64,
    pub agent: String,
    pub name: String,
    pub harness: String,
    #[serde(default)]
    pub model: Option<String>,
    /// The agent's working directory.
    pub project: String,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub requests: u64,
    /// None: unknown (no price for it).
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// What `now` added to `before` (None: nothing). A usage that went down is a new count (its
/// session's file was replaced): all of it is new.
pub fn added(before: Option<&AgentUsage>, now: &AgentUsage) -> Option<AddedUsage> {
    let fresh = before.is_none_or(|b| {
        now.input < b.input
            || now.output < b.output
            || now.cache_read < b.cache_read
            || now.cache_write < b.cache_write
    });
    let zero = AgentUsage::default();
    let b = if fresh {
        &zero
    } else {
        before.unwrap_or(&zero)
    };
    let add = AddedUsage {
        input: now.input - b.input,
        output: now.output - b.output,
        cache_read: now.cache_read - b.cache_read,
        cache_write: now.cache_write - b.cache_write,
        requests: now
            .requests
            .unwrap_or(0)
            .saturating_sub(b.requests.unwrap_or(0)),
        cost_usd: match (now.cost_usd, b.cost_usd, fresh) {
            (Some(n), _, true) => Some(n),
            (Some(n), Some(b), false) => Some((n - b).max(0.0)),
            (Some(n), None, false) if *b == zero => Some(n),
            _ => None,
        },
    };
    (add.input + add.output + add.cache_read + add.cache_write + add.requests > 0).then_some(add)
}

/// Tokens (and cost) added by one change.
#[derive(Debug, Clone, PartialEq)]
pub struct AddedUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub requests: u64,
    pub cost_usd: Option<f64>,
}

/// Append one entry (the file made 0600 when new; a symlink or another user's file refused).
pub fn append(state_dir: &Path, entry: &Entry) -> std::io::Result<()> {
    let path = state_dir.join(FILE);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(&path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() || meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(std::io::Error::other(format!(
            "{} is not a file of this user's",
            path.display()
        )));
    }
    let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    line.push(b'\n');
    file.write_all(&line)
}

/// Every entry since `since_ms` (lines volee cannot read are counted, not fatal). No file: none.
pub fn read(state_dir: &Path, since_ms: u64) -> std::io::Result<(Vec<Entry>, usize)> {
    let path = state_dir.join(FILE);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() || meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(std::io::Error::other(format!(
            "{} is not a file of this user's",
            path.display()
        )));
    }
    let (mut entries, mut bad) = (Vec::new(), 0);
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line?;
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Entry>(&line) {
            Ok(e) if e.at >= since_ms => entries.push(e),
            Ok(_) => {}
            Err(_) => bad += 1,
        }
    }
    Ok((entries, bad))
}

/// One group's sums.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sum {
    pub key: String,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub requests: u64,
    /// The known costs, summed.
    pub cost_usd: f64,
    /// Tokens (input + output + cache) whose cost is unknown: `cost_usd` leaves them out.
    pub unpriced_tokens: u64,
}

/// Entries summed by `by` (`agent`, `harness`, `model` or `project`), largest first.
pub fn sum(entries: &[Entry], by: &str) -> Vec<Sum> {
    let mut groups: BTreeMap<String, Sum> = BTreeMap::new();
    for e in entries {
        let key = match by {
            "agent" => format!("{} ({})", e.agent, e.name),
            "harness" => e.harness.clone(),
            "model" => e.model.clone().unwrap_or_else(|| "unknown".into()),
            _ => e.project.clone(),
        };
        let s = groups.entry(key.clone()).or_insert_with(|| Sum {
            key,
            ..Sum::default()
        });
        s.input += e.input;
        s.output += e.output;
        s.cache_read += e.cache_read;
        s.cache_write += e.cache_write;
        s.requests += e.requests;
        match e.cost_usd {
            Some(c) => s.cost_usd += c,
            None => s.unpriced_tokens += e.input + e.output + e.cache_read + e.cache_write,
        }
    }
    let mut out: Vec<Sum> = groups.into_values().collect();
    out.sort_by(|a, b| {
        (b.input + b.output + b.cache_write)
            .cmp(&(a.input + a.output + a.cache_write))
            .then(a.key.cmp(&b.key))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cost: Option<f64>) -> AgentUsage {
        AgentUsage {
            input,
            output,
            requests: Some(input / 100),
            cost_usd: cost,
            ..AgentUsage::default()
        }
    }

    #[test]
    fn what_a_change_added_and_a_new_count_whole() {
        let a = added(None, &usage(100, 10, Some(0.5))).unwrap();
        assert_eq!(
            (a.input, a.output, a.requests, a.cost_usd),
            (100, 10, 1, Some(0.5))
        );
        let a = added(Some(&usage(100, 10, Some(0.5))), &usage(300, 30, Some(1.5))).unwrap();
        assert_eq!(
            (a.input, a.output, a.requests, a.cost_usd),
            (200, 20, 2, Some(1.0))
        );
        assert_eq!(
            added(Some(&usage(100, 10, None)), &usage(100, 10, None)),
            None
        );
        // Went down: a new count.
        let a = added(Some(&usage(300, 30, None)), &usage(50, 5, None)).unwrap();
        assert_eq!((a.input, a.output, a.cost_usd), (50, 5, None));
    }

    #[test]
    fn the_ledger_is_private_kept_and_summed_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |agent: &str, harness: &str, at: u64, input: u64, cost: Option<f64>| Entry {
            at,
            agent: agent.into(),
            name: format!("n-{agent}"),
            harness: harness.into(),
            model: Some("m".into()),
            project: "/p".into(),
            input,
            output: 1,
            requests: 1,
            cost_usd: cost,
            ..Entry::default()
        };
        append(dir.path(), &entry("a1", "claude", 10, 100, Some(0.25))).unwrap();
        append(dir.path(), &entry("a1", "claude", 20, 200, Some(0.5))).unwrap();
        append(dir.path(), &entry("b2", "codex", 30, 50, None)).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap()
            .write_all(b"not json\n")
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (all, bad) = read(dir.path(), 0).unwrap();
        assert_eq!((all.len(), bad), (3, 1));
        let by = sum(&all, "harness");
        assert_eq!(by[0].key, "claude");
        assert_eq!((by[0].input, by[0].requests), (300, 2));
        assert!((by[0].cost_usd - 0.75).abs() < 1e-9);
        assert_eq!((by[1].key.as_str(), by[1].unpriced_tokens), ("codex", 51));
        let (recent, _) = read(dir.path(), 20).unwrap();
        assert_eq!(recent.len(), 2);
        assert_eq!(sum(&recent, "agent")[0].key, "a1 (n-a1)");
        // A symlink in its place is refused.
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path().join(FILE), other.path().join(FILE)).unwrap();
        assert!(read(other.path(), 0).is_err());
        assert!(append(other.path(), &entry("c", "x", 1, 1, None)).is_err());
    }
}
