//! The price table (issue 23): USD per million tokens per model, shipped as
//! `data/prices.toml` (only prices read on the provider's own page, each with that page and the
//! day it was read) and overridden or extended by `prices.toml` in volee's config directory.
//! A model without an entry, or with no price for a class of tokens it used, costs `unknown`.

use std::path::Path;

use serde::Deserialize;
use volee_protocol::AgentUsage;

/// The table volee ships.
pub const SHIPPED: &str = include_str!("../data/prices.toml");

/// One model's prices (USD per million tokens), with where they were read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub id: String,
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
    /// The day the prices were read (YYYY-MM-DD).
    pub date: String,
    /// The page they were read on.
    pub source: String,
    /// What the figures leave out (a tier).
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    model: Vec<Price>,
}

/// A price table volee cannot use.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    #[error("{origin} is not a valid price table")]
    Parse {
        origin: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("{origin}: model {id:?}: {problem}")]
    Entry {
        origin: String,
        id: String,
        problem: String,
    },
}

/// The prices volee knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    models: Vec<Price>,
}

impl Prices {
    /// Parse a table; every entry needs a model id, a date (YYYY-MM-DD), an http(s) source and
    /// prices that are finite and not negative.
    pub fn parse(text: &str, origin: &str) -> Result<Prices, PricesError> {
        let file: File = toml::from_str(text).map_err(|source| PricesError::Parse {
            origin: origin.into(),
            source,
        })?;
        for p in &file.model {
            let bad = |problem: &str| PricesError::Entry {
                origin: origin.into(),
                id: p.id.clone(),
                problem: problem.into(),
            };
            if p.id.trim().is_empty() {
                return Err(bad("no model id"));
            }
            if !is_date(&p.date) {
                return Err(bad("its date is not YYYY-MM-DD"));
            }
            if !(p.source.starts_with("https://") || p.source.starts_with("http://"))
                || p.source.len() < 12
            {
                return Err(bad("its source is not the page's http(s) address"));
            }
            let prices = [Some(p.input), Some(p.output), p.cache_read, p.cache_write];
            if prices.iter().flatten().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(bad("a price is negative or not a number"));
            }
        }
        Ok(Prices { models: file.model })
    }

    /// The shipped table, with the user's `prices.toml` over it (by model id) when there is
    /// one; a user table volee cannot use is reported and left out.
    pub fn load(config_dir: &Path) -> (Prices, Option<PricesError>) {
        let mut prices = match Prices::parse(SHIPPED, "volee's price table") {
            Ok(p) => p,
            Err(e) => return (Prices::default(), Some(e)),
        };
        let path = config_dir.join("prices.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(_) => return (prices, None),
        };
        match Prices::parse(&text, &path.display().to_string()) {
            Ok(user) => {
                for p in user.models {
                    prices.models.retain(|m| m.id != p.id);
                    prices.models.push(p);
                }
                (prices, None)
            }
            Err(e) => (prices, Some(e)),
        }
    }

    /// The entry for `model`: its id, or its id followed by `-` and a date (`…-20261001`).
    pub fn of(&self, model: &str) -> Option<&Price> {
        self.models
            .iter()
            .filter(|p| {
                model == p.id
                    || model
                        .strip_prefix(p.id.as_str())
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|date| {
                            date.len() >= 8 && date.bytes().all(|b| b.is_ascii_digit())
                        })
            })
            .max_by_key(|p| p.id.len())
    }

    /// What `usage` cost (USD), or None when its model has no entry or a class it used has no
    /// price.
    pub fn cost(&self, usage: &AgentUsage) -> Option<f64> {
        let p = self.of(usage.model.as_deref()?)?;
        let class = |tokens: u64, price: Option<f64>| -> Option<f64> {
            match (tokens, price) {
                (0, _) => Some(0.0),
                (n, Some(price)) => Some(n as f64 * price),
                (_, None) => None,
            }
        };
        let total = class(usage.input, Some(p.input))?
            + class(usage.output, Some(p.output))?
            + class(usage.cache_read, p.cache_read)?
            + class(usage.cache_write, p.cache_write)?;
        // Micro-dollars, whole.
        Some(total.round() / 1e6)
    }
}

/// `YYYY-MM-DD`, a month 01–12 and a day 01–31.
fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let num = |s: &str, len: usize| {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    num(y, 4).is_some()
        && num(m, 2).is_some_and(|m| (1..=12).contains(&m))
        && num(d, 2).is_some_and(|d| (1..=31).contains(&d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_entry_has_a_date_and_a_source() {
        let prices = Prices::parse(SHIPPED, "shipped").unwrap();
        assert!(!prices.models.is_empty());
        for p in &prices.models {
            assert!(p.source.starts_with("https://"), "{p:?}");
            assert_eq!(p.date.len(), 10, "{p:?}");
        }
        // An entry without either is refused.
        let no_source = "[[model]]\nid = \"m\"\ninput = 1.0\noutput = 2.0\ndate = \"2026-12-04\"\n";
        assert!(Prices::parse(no_source, "t").is_err());
        let no_date = "[[model]]\nid = \"m\"\ninput = 1.0\noutput = 2.0\nsource = \"https://example.com/p\"\n";
        assert!(Prices::parse(no_date, "t").is_err());
        let bad_date = format!("{no_source}source = \"https://example.com/p\"\n")
            .replace("2026-12-04", "last week");
        assert!(Prices::parse(&bad_date, "t")
            .unwrap_err()
            .to_string()
            .contains("YYYY-MM-DD"));
        let not_a_page =
            no_date.replace("https://example.com/p", "memory") + "date = \"2026-12-04\"\n";
        assert!(Prices::parse(&not_a_page, "t").is_err());
    }

    #[test]
    fn cost_is_tokens_times_prices_and_unknown_without_a_price() {
        let prices = Prices::parse(SHIPPED, "shipped").unwrap();
        let usage = |model: &str, cache_read: u64| AgentUsage {
            input: 1_000_000,
            output: 100_000,
            cache_read,
            cache_write: 0,
            requests: Some(3),
            model: Some(model.into()),
            source: String::new(),
            cost_usd: None,
        };
        // claude-opus-5-5: $4 in, $20 out, $0.20 cache read.
        assert_eq!(prices.cost(&usage("claude-opus-5-5", 500_000)), Some(6.1));
        // A dated id is the same model; another model is not.
        assert_eq!(
            prices.cost(&usage("claude-opus-5-5-20261001", 0)),
            Some(6.0)
        );
        assert_eq!(prices.cost(&usage("claude-opus-5-50", 0)), None);
        assert_eq!(prices.cost(&usage("volee-test-model", 0)), None);
        // Sonnet 5.5's cache reads have no price: unknown when used, known when not.
        assert_eq!(prices.cost(&usage("claude-sonnet-5-5", 1)), None);
        assert_eq!(prices.cost(&usage("claude-sonnet-5-5", 0)), Some(3.0));
        let no_model = AgentUsage {
            model: None,
            ..usage("x", 0)
        };
        assert_eq!(prices.cost(&no_model), None);
    }

    #[test]
    fn the_users_table_overrides_by_model_and_a_bad_one_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("prices.toml"),
            "[[model]]\nid = \"claude-opus-5-5\"\ninput = 1.0\noutput = 1.0\ncache_read = 0.0\ncache_write = 0.0\ndate = \"2026-12-05\"\nsource = \"https://example.com/my-contract\"\n",
        )
        .unwrap();
        let (prices, problem) = Prices::load(dir.path());
        assert!(problem.is_none());
        assert_eq!(prices.of("claude-opus-5-5").unwrap().input, 1.0);
        assert!(prices.of("gpt-6.2-sol").is_some());
        std::fs::write(dir.path().join("prices.toml"), "[[model]]\nid = 3\n").unwrap();
        let (prices, problem) = Prices::load(dir.path());
        assert!(problem.is_some());
        assert_eq!(prices.of("claude-opus-5-5").unwrap().input, 4.0);
    }
}
