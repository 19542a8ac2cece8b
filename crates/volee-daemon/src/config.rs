//! `config.toml`: the few settings volee has so far.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// volee's settings, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// How long ended agents are kept before `prune` (and the daemon) forget them.
    pub retention: Duration,
    /// Output within this window means `working`.
    pub working_window: Duration,
    /// Harness used by `volee launch` without `--harness` or a command.
    pub default_harness: Option<String>,
    /// Rotate `volee.log` past this size.
    pub log_max_bytes: u64,
    /// How often `/proc` is scanned for agents started outside volee; None = never.
    pub discovery_interval: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            retention: Duration::from_secs(24 * 3600),
            working_window: Duration::from_secs(2),
            default_harness: None,
            log_max_bytes: 1024 * 1024,
            discovery_interval: Some(Duration::from_secs(3)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    retention: Option<String>,
    working_window: Option<String>,
    default_harness: Option<String>,
    log_max_bytes: Option<u64>,
    /// A duration, or "off".
    discovery_interval: Option<String>,
}

/// A config file volee cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid")]
    Parse {
        path: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("{path}: {key} = {value:?} is not a duration (examples: \"90s\", \"2h\", \"7days\")")]
    Duration {
        path: String,
        key: &'static str,
        value: String,
    },
}

impl Config {
    /// Read the file; a missing file means defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        Config::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: origin.into(),
            source,
        })?;
        let duration = |key: &'static str, value: Option<String>, default: Duration| match value {
            None => Ok(default),
            Some(v) => humantime::parse_duration(&v).map_err(|_| ConfigError::Duration {
                path: origin.into(),
                key,
                value: v,
            }),
        };
        let d = Config::default();
        Ok(Config {
            retention: duration("retention", file.retention, d.retention)?,
            working_window: duration("working_window", file.working_window, d.working_window)?,
            default_harness: file.default_harness,
            log_max_bytes: file.log_max_bytes.unwrap_or(d.log_max_bytes),
            discovery_interval: match file.discovery_interval.as_deref() {
                Some("off") => None,
                other => Some(duration(
                    "discovery_interval",
                    other.map(String::from),
                    Duration::from_secs(3),
                )?),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations_and_defaults() {
        let c = Config::parse("retention = \"2h\"\n", "c.toml").unwrap();
        assert_eq!(c.retention, Duration::from_secs(7200));
        assert_eq!(c.working_window, Duration::from_secs(2));
        assert!(Config::parse("retention = \"soon\"", "c.toml")
            .unwrap_err()
            .to_string()
            .contains("not a duration"));
        assert!(Config::parse("colour = 1", "c.toml").is_err());
    }
}
