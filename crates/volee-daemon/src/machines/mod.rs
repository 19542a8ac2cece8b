//! The machines volee reaches over ssh (issue 20, docs/adr/0013): their names, and the file that
//! keeps them (`machines.toml` in the config dir, 0600, written atomically; a file that does not
//! parse is moved aside, never lost). [`ssh`] runs the system's OpenSSH client against one.

pub mod link;
pub mod ssh;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::persist::{self, Loaded, PersistError};

/// Longest machine name (`[a-z][a-z0-9-]{0,31}`).
pub const MAX_NAME_LEN: usize = 32;

/// Names a machine may not take: the multiplexers of `--host` (`tmux:S`, `zellij:S` would read as
/// a machine-qualified id) and every harness profile's name.
pub fn reserved_names() -> Vec<&'static str> {
    let mut names = vec!["tmux", "zellij"];
    names.extend(volee_harness::profiles().iter().map(|p| p.name));
    names
}

/// A machine name volee will not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineNameError {
    #[error("machine name {name:?} is not allowed: {why}")]
    Invalid { name: String, why: &'static str },
    #[error("machine name {name:?} is taken by volee (the multiplexer or harness of that name)")]
    Reserved { name: String },
}

/// Check a machine name: `[a-z][a-z0-9-]{0,31}`, not a multiplexer's or a harness's name.
pub fn check_name(name: &str) -> Result<(), MachineNameError> {
    let invalid = |why| {
        Err(MachineNameError::Invalid {
            name: name.into(),
            why,
        })
    };
    let mut chars = name.chars();
    match chars.next() {
        None => return invalid("it is empty"),
        Some(c) if !c.is_ascii_lowercase() => {
            return invalid("it must start with a lowercase letter a-z")
        }
        Some(_) => {}
    }
    if name.len() > MAX_NAME_LEN {
        return invalid("it is longer than 32 characters");
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return invalid("only lowercase letters a-z, digits and '-' may follow its first letter");
    }
    if reserved_names().contains(&name) {
        return Err(MachineNameError::Reserved { name: name.into() });
    }
    Ok(())
}

/// An ssh destination volee passes to `ssh` as one argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestError {
    #[error("ssh destination {dest:?} is not allowed: {why}")]
    Invalid { dest: String, why: &'static str },
}

/// Check an ssh destination (`host`, `user@host`, an alias of the user's ssh config, or an
/// `ssh://` URI): not empty, at most 255 bytes, no spaces or control characters, and not
/// starting with `-` (ssh would read it as an option, e.g. `-oProxyCommand=…`).
pub fn check_dest(dest: &str) -> Result<(), DestError> {
    let invalid = |why| {
        Err(DestError::Invalid {
            dest: dest.into(),
            why,
        })
    };
    if dest.is_empty() {
        return invalid("it is empty");
    }
    if dest.len() > 255 {
        return invalid("it is longer than 255 bytes");
    }
    if dest.starts_with('-') {
        return invalid("it starts with '-', which ssh reads as an option");
    }
    if dest.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return invalid("it contains spaces or control characters");
    }
    Ok(())
}

/// One machine as `volee machine add` saved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub name: String,
    /// What `ssh` is given: `host`, `user@host` or an alias of the user's ssh config.
    pub dest: String,
    /// `ssh -p`; absent: the user's ssh config decides (22 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `ssh -i`, an absolute path; absent: the user's ssh config and agent decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<PathBuf>,
    /// When it was added (RFC 3339).
    pub added: String,
}

/// `machines.toml`: `[[machine]]` tables, in the order they were added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachinesFile {
    #[serde(default, rename = "machine")]
    pub machines: Vec<Machine>,
}

impl MachinesFile {
    pub fn get(&self, name: &str) -> Option<&Machine> {
        self.machines.iter().find(|m| m.name == name)
    }

    /// Remove a machine by name; what was removed.
    pub fn remove(&mut self, name: &str) -> Option<Machine> {
        let at = self.machines.iter().position(|m| m.name == name)?;
        Some(self.machines.remove(at))
    }

    /// Why this file is not one volee wrote: a bad or repeated name, a bad destination, a
    /// relative identity path.
    fn problem(&self) -> Option<String> {
        for (i, m) in self.machines.iter().enumerate() {
            if let Err(e) = check_name(&m.name) {
                return Some(e.to_string());
            }
            if let Err(e) = check_dest(&m.dest) {
                return Some(e.to_string());
            }
            if m.identity.as_ref().is_some_and(|p| !p.is_absolute()) {
                return Some(format!(
                    "machine {:?}: its identity is not an absolute path",
                    m.name
                ));
            }
            if self.machines[..i].iter().any(|o| o.name == m.name) {
                return Some(format!("machine {:?} is there twice", m.name));
            }
        }
        None
    }
}

/// The machines file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MachinesError {
    #[error(transparent)]
    Persist(#[from] PersistError),
    #[error("could not encode {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: toml::ser::Error,
    },
}

const HEADER: &str =
    "# volee's machines: written by `volee machine add` and `volee machine rm`.\n\n";

/// Load `machines.toml`. One that does not parse, or holds what volee would not have written, is
/// renamed to `machines.toml.corrupt-EPOCHMS` and reported ([`Loaded::Corrupt`]), never deleted.
pub fn load(path: &Path, now_ms: u64) -> Result<Loaded<MachinesFile>, MachinesError> {
    let text = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(source) => {
            return Err(PersistError::Read {
                path: path.to_path_buf(),
                source,
            }
            .into())
        }
    };
    let parsed = std::str::from_utf8(&text)
        .map_err(|e| e.to_string())
        .and_then(|t| toml::from_str::<MachinesFile>(t).map_err(|e| e.to_string()))
        .and_then(|f| match f.problem() {
            Some(p) => Err(p),
            None => Ok(f),
        });
    match parsed {
        Ok(file) => Ok(Loaded::Ok(file)),
        Err(error) => Ok(Loaded::Corrupt {
            kept_as: persist::keep_aside(path, now_ms)?,
            error,
        }),
    }
}

/// Write `machines.toml` atomically (0600; the config dir is volee's 0700 one).
pub fn save(path: &Path, file: &MachinesFile) -> Result<(), MachinesError> {
    let body = toml::to_string(file).map_err(|source| MachinesError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    persist::write_atomic(path, format!("{HEADER}{body}").as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn machine_names() {
        for good in ["a", "box", "gpu-2", "a0", &format!("a{}", "b".repeat(31))] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Box",
            "1box",
            "-box",
            "box_2",
            "bo x",
            "box:1",
            "bóx",
            &format!("a{}", "b".repeat(32)),
        ] {
            assert!(
                matches!(check_name(bad), Err(MachineNameError::Invalid { .. })),
                "{bad:?}"
            );
        }
        for reserved in ["tmux", "zellij", "claude", "codex", "generic"] {
            assert_eq!(
                check_name(reserved),
                Err(MachineNameError::Reserved {
                    name: reserved.into()
                })
            );
        }
    }

    #[test]
    fn destinations() {
        for good in ["box", "me@box.lan", "me@127.0.0.1", "ssh://me@box:2222"] {
            assert_eq!(check_dest(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-oProxyCommand=touch /tmp/x",
            "me@box lan",
            "box\n",
            "a\u{1b}b",
        ] {
            assert!(check_dest(bad).is_err(), "{bad:?}");
        }
    }

    fn machine(name: &str) -> Machine {
        Machine {
            name: name.into(),
            dest: format!("me@{name}.lan"),
            port: Some(2222),
            identity: Some("/home/me/.ssh/id_ed25519".into()),
            added: "2026-12-03T10:00:00Z".into(),
        }
    }

    #[test]
    fn file_round_trips_privately() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("machines.toml");
        assert!(matches!(load(&path, 0).unwrap(), Loaded::Missing));
        let mut file = MachinesFile::default();
        file.machines.push(machine("box"));
        file.machines.push(Machine {
            port: None,
            identity: None,
            ..machine("gpu")
        });
        save(&path, &file).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# volee's machines"), "{text}");
        assert!(text.contains("[[machine]]"), "{text}");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        match load(&path, 0).unwrap() {
            Loaded::Ok(back) => assert_eq!(back, file),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            file.clone().remove("box").map(|m| m.name),
            Some("box".into())
        );
        assert_eq!(file.get("nope"), None);
    }

    #[test]
    fn corrupt_file_is_moved_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("machines.toml");
        for (i, bad) in [
            "[[machine]\nname = ",
            "[[machine]]\nname = \"Box\"\ndest = \"b\"\nadded = \"x\"\n",
            "[[machine]]\nname = \"box\"\ndest = \"-oProxyCommand=x\"\nadded = \"x\"\n",
            "[[machine]]\nname = \"box\"\ndest = \"b\"\nadded = \"x\"\n[[machine]]\nname = \"box\"\ndest = \"c\"\nadded = \"x\"\n",
            "[[machine]]\nname = \"box\"\ndest = \"b\"\nadded = \"x\"\nproxy = \"y\"\n",
        ]
        .into_iter()
        .enumerate()
        {
            fs::write(&path, bad).unwrap();
            match load(&path, i as u64).unwrap() {
                Loaded::Corrupt { kept_as, .. } => {
                    assert_eq!(fs::read_to_string(&kept_as).unwrap(), bad);
                    assert!(kept_as.ends_with(format!("machines.toml.corrupt-{i}")));
                }
                other => panic!("{bad:?}: expected corrupt, got {other:?}"),
            }
            assert!(!path.exists());
        }
    }
}
