//! `config.toml`: the few settings volee has so far.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// volee's settings, with their defaults.
#[derive(Debug, Clone, PartialEq)]
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
    /// How the user is told when an agent needs them (`[notify]`).
    pub notify: crate::notify::NotifyConfig,
    /// Retention of volee agent's stored sessions (`[sessions]`; off by default).
    pub sessions: SessionsConfig,
    /// What `volee up` does with agents a lost tmux server left restorable (`[restore]`).
    pub restore: RestoreConfig,
    /// `[budgets]`: a budget per harness (tokens or money) for launches without `--budget`.
    pub budgets: std::collections::BTreeMap<String, volee_protocol::Amount>,
}

/// `[restore]`: what `volee up` does when agents can be restored (their tmux server went away).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreConfig {
    pub on_up: OnUp,
}

/// `[restore] on_up`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnUp {
    /// Ask on a terminal; without one (`run-shell`, a script) print how to restore them.
    #[default]
    Ask,
    /// Restore them all without asking.
    Always,
    /// Neither ask nor restore; `volee up` still says how many could be.
    Never,
}

/// `[sessions]`: retention of volee agent's stored sessions, applied by `volee agent
/// --prune-sessions` and by the daemon once a day when a duration is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsConfig {
    /// Archive a session not updated for this long; None = never.
    pub archive_after: Option<Duration>,
    /// Delete an archived session not updated for this long; None = never.
    pub delete_archived_after: Option<Duration>,
    /// Sessions with one of these tags are never archived or deleted (default `["keep"]`).
    pub keep_tagged: Vec<String>,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            archive_after: None,
            delete_archived_after: None,
            keep_tagged: vec!["keep".into()],
        }
    }
}

impl SessionsConfig {
    /// Does retention do anything?
    pub fn is_set(&self) -> bool {
        self.archive_after.is_some() || self.delete_archived_after.is_some()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            retention: Duration::from_secs(24 * 3600),
            working_window: Duration::from_secs(2),
            default_harness: None,
            log_max_bytes: 1024 * 1024,
            discovery_interval: Some(Duration::from_secs(3)),
            notify: crate::notify::NotifyConfig::default(),
            sessions: SessionsConfig::default(),
            restore: RestoreConfig::default(),
            budgets: std::collections::BTreeMap::new(),
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
    notify: Option<NotifyFile>,
    sessions: Option<SessionsFile>,
    restore: Option<RestoreFile>,
    budgets: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreFile {
    on_up: Option<OnUp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionsFile {
    archive_after: Option<String>,
    delete_archived_after: Option<String>,
    keep_tagged: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyFile {
    enabled: Option<bool>,
    tmux_message: Option<bool>,
    message_time: Option<String>,
    flash_status: Option<bool>,
    desktop: Option<bool>,
    bell: Option<bool>,
    osc9: Option<bool>,
    long_turn: Option<String>,
    on_needs_you: Option<String>,
    on_failed: Option<String>,
    on_finished: Option<String>,
    burst: Option<u32>,
    burst_window: Option<String>,
    /// An ntfy topic URL.
    push: Option<String>,
    push_token: Option<String>,
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
    #[error("{path}: budgets.{harness}: {problem}")]
    Budget {
        path: String,
        harness: String,
        problem: String,
    },
    /// `notify.push` or `notify.push_token` (the message never repeats them: secrets).
    #[error("{path}: {problem}")]
    Push {
        path: String,
        problem: crate::push::PushTargetError,
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
        let dn = d.notify.clone();
        let notify = match file.notify {
            None => dn,
            Some(n) => crate::notify::NotifyConfig {
                enabled: n.enabled.unwrap_or(dn.enabled),
                tmux_message: n.tmux_message.unwrap_or(dn.tmux_message),
                message_time: duration("notify.message_time", n.message_time, dn.message_time)?,
                flash_status: n.flash_status.unwrap_or(dn.flash_status),
                desktop: n.desktop.unwrap_or(dn.desktop),
                bell: n.bell.unwrap_or(dn.bell),
                osc9: n.osc9.unwrap_or(dn.osc9),
                long_turn: duration("notify.long_turn", n.long_turn, dn.long_turn)?,
                on_needs_you: n.on_needs_you,
                on_failed: n.on_failed,
                on_finished: n.on_finished,
                burst: n.burst.unwrap_or(dn.burst).max(1),
                burst_window: duration("notify.burst_window", n.burst_window, dn.burst_window)?,
                push: crate::push::PushTarget::from_config(
                    n.push.as_deref(),
                    n.push_token.as_deref(),
                )
                .map_err(|problem| ConfigError::Push {
                    path: origin.into(),
                    problem,
                })?,
            },
        };
        let sessions = match file.sessions {
            None => SessionsConfig::default(),
            Some(s) => {
                let opt = |key, v: Option<String>| -> Result<Option<Duration>, ConfigError> {
                    v.map(|v| duration(key, Some(v), Duration::ZERO))
                        .transpose()
                };
                SessionsConfig {
                    archive_after: opt("sessions.archive_after", s.archive_after)?,
                    delete_archived_after: opt(
                        "sessions.delete_archived_after",
                        s.delete_archived_after,
                    )?,
                    keep_tagged: s
                        .keep_tagged
                        .unwrap_or_else(|| SessionsConfig::default().keep_tagged),
                }
            }
        };
        let mut budgets = std::collections::BTreeMap::new();
        for (harness, amount) in file.budgets.unwrap_or_default() {
            let limit = volee_protocol::Amount::parse(&amount)
                .and_then(|a| match a.is_zero() {
                    true => Err("a budget of nothing would stop it before it starts".into()),
                    false => Ok(a),
                })
                .map_err(|problem| ConfigError::Budget {
                    path: origin.into(),
                    harness: harness.clone(),
                    problem,
                })?;
            budgets.insert(harness, limit);
        }
        Ok(Config {
            budgets,
            notify,
            sessions,
            restore: RestoreConfig {
                on_up: file.restore.and_then(|r| r.on_up).unwrap_or_default(),
            },
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

    #[test]
    fn budgets_per_harness_are_token_or_money_amounts() {
        use volee_protocol::Amount;
        let c = Config::parse(
            "[budgets]\nclaude = \"200k\"\ncodex = \"1.5M\"\ngemini = \"5usd\"\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(c.budgets.get("claude"), Some(&Amount::Tokens(200_000)));
        assert_eq!(c.budgets.get("codex"), Some(&Amount::Tokens(1_500_000)));
        assert_eq!(c.budgets.get("gemini"), Some(&Amount::Usd(5.0)));
        for bad in ["lots", "0", "0usd", "5eur"] {
            let e =
                Config::parse(&format!("[budgets]\nclaude = \"{bad}\"\n"), "c.toml").unwrap_err();
            assert!(e.to_string().contains("budgets.claude"), "{e}");
        }
    }

    #[test]
    fn restore_on_up_asks_by_default_and_refuses_other_words() {
        assert_eq!(
            Config::parse("", "c.toml").unwrap().restore.on_up,
            OnUp::Ask
        );
        for (text, want) in [
            ("always", OnUp::Always),
            ("never", OnUp::Never),
            ("ask", OnUp::Ask),
        ] {
            let c = Config::parse(&format!("[restore]\non_up = \"{text}\"\n"), "c.toml").unwrap();
            assert_eq!(c.restore.on_up, want);
        }
        let e = Config::parse("[restore]\non_up = \"sometimes\"\n", "c.toml").unwrap_err();
        let ConfigError::Parse { source, .. } = &e else {
            panic!("{e:?}");
        };
        assert!(source.to_string().contains("sometimes"), "{source}");
        assert!(Config::parse("[restore]\nwhen = \"up\"\n", "c.toml").is_err());
    }

    #[test]
    fn sessions_retention_is_off_by_default_and_parses() {
        let d = Config::parse("", "c.toml").unwrap().sessions;
        assert!(!d.is_set());
        assert_eq!(d.keep_tagged, ["keep"]);
        let s = Config::parse(
            "[sessions]\narchive_after = \"30d\"\ndelete_archived_after = \"180d\"\nkeep_tagged = [\"keep\", \"pin\"]\n",
            "c.toml",
        )
        .unwrap()
        .sessions;
        assert_eq!(s.archive_after, Some(Duration::from_secs(30 * 86400)));
        assert_eq!(
            s.delete_archived_after,
            Some(Duration::from_secs(180 * 86400))
        );
        assert_eq!(s.keep_tagged, ["keep", "pin"]);
        let e = Config::parse("[sessions]\narchive_after = \"soon\"\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("sessions.archive_after"), "{e}");
        assert!(Config::parse("[sessions]\nkeep = 1\n", "c.toml").is_err());
    }

    #[test]
    fn notify_settings_default_on_and_parse() {
        let d = Config::parse("", "c.toml").unwrap().notify;
        assert!(d.enabled && d.tmux_message && d.flash_status && d.desktop);
        assert!(!d.bell && !d.osc9);
        let c = Config::parse(
            "[notify]\nbell = true\nlong_turn = \"2m\"\non_needs_you = \"cat > /tmp/x\"\n",
            "c.toml",
        )
        .unwrap()
        .notify;
        assert!(c.bell);
        assert_eq!(c.long_turn, Duration::from_secs(120));
        assert_eq!(
            c.command(crate::notify::Kind::NeedsYou),
            Some("cat > /tmp/x")
        );
        assert!(Config::parse("[notify]\nlong_turn = \"soon\"\n", "c.toml").is_err());
        assert!(Config::parse("[notify]\nsound = true\n", "c.toml").is_err());
    }

    #[test]
    fn a_push_target_is_checked_and_its_secrets_are_not_repeated() {
        let c = Config::parse(
            "[notify]\npush = \"https://ntfy.sh/volee-k3f9\"\npush_token = \"tk_abc\"\n",
            "c.toml",
        )
        .unwrap()
        .notify;
        assert_eq!(c.push.map(|p| p.host()), Some("ntfy.sh".to_string()));
        assert_eq!(Config::parse("", "c.toml").unwrap().notify.push, None);
        assert_eq!(
            Config::parse("[notify]\npush = \"\"\n", "c.toml")
                .unwrap()
                .notify
                .push,
            None
        );
        let e = Config::parse("[notify]\npush = \"ntfy.sh/secret\"\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("c.toml: notify.push is not a URL"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = Config::parse(
            "[notify]\npush = \"ftp://u:hunter2@h/t\"\npush_token = \"tk_x\"\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "c.toml: notify.push is a URL of ftp:, not http: or https:"
        );
        assert!(Config::parse("[notify]\npush_token = \"tk_x\"\n", "c.toml")
            .unwrap_err()
            .to_string()
            .contains("push_token is set but notify.push is not"));
    }
}
