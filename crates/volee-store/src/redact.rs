//! Redaction of obvious secrets before text leaves the session's context: transcript lines and
//! exports. Deliberately simple: env-like assignments of keys, tokens, secrets and passwords;
//! `Authorization: Bearer …`; well-known token shapes (`sk-…`, `ghp_…`, `github_pat_…`, `xox?-…`,
//! `AKIA…`).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

struct Rule {
    re: Regex,
    /// Replacement (may reference capture groups).
    with: &'static str,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rules: [(&str, &'static str); 3] = [
        // NAME_API_KEY=value, TOKEN: value, "client_secret": "value", PASSWORD='value'
        (
            r#"(?i)\b([A-Z0-9_.-]*(?:API_?KEY|ACCESS_?KEY|SECRET(?:_?KEY)?|TOKEN|PASSWORD|PASSWD)["']?\s*[:=]\s*["']?)([^\s"',;]{4,})"#,
            "${1}[REDACTED]",
        ),
        // Authorization: Bearer abc / Authorization: Basic abc / plain "Bearer abc"
        (
            r"(?i)\b((?:authorization\s*[:=]\s*(?:bearer|basic|token)|bearer)\s+)([A-Za-z0-9._~+/=-]{8,})",
            "${1}[REDACTED]",
        ),
        // Token shapes that are secrets wherever they appear.
        (
            r"\b(sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})",
            "[REDACTED]",
        ),
    ];
    rules
        .iter()
        .filter_map(|(re, with)| Regex::new(re).ok().map(|re| Rule { re, with }))
        .collect()
});

/// `text` with obvious secrets replaced by [`REDACTED`]; borrowed when there is none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if let Cow::Owned(s) = rule.re.replace_all(&out, rule.with) {
            out = Cow::Owned(s);
        }
    }
    out
}

/// Redact every string in a JSON value, in place.
pub fn redact_value(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_value),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_value),
        _ => {}
    }
}

/// Redact a serializable value: through JSON, every string redacted, back.
pub(crate) fn redacted<T>(value: &T) -> Result<T, serde_json::Error>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut v = serde_json::to_value(value)?;
    redact_value(&mut v);
    serde_json::from_value(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_rule_compiles() {
        assert_eq!(RULES.len(), 3);
    }

    #[test]
    fn env_like_assignments() {
        assert_eq!(
            redact("export OPENAI_API_KEY=abcd1234efgh; ls"),
            "export OPENAI_API_KEY=[REDACTED]; ls"
        );
        assert_eq!(
            redact("GITHUB_TOKEN: 'ghx12345678'"),
            "GITHUB_TOKEN: '[REDACTED]'"
        );
        assert_eq!(
            redact(r#"{"client_secret": "s3cr3tvalue"}"#),
            r#"{"client_secret": "[REDACTED]"}"#
        );
        assert_eq!(redact("db_password=hunter22"), "db_password=[REDACTED]");
    }

    #[test]
    fn bearer_and_token_shapes() {
        assert_eq!(
            redact("curl -H 'Authorization: Bearer eyJhbGciOi.xyz123'"),
            "curl -H 'Authorization: Bearer [REDACTED]'"
        );
        assert_eq!(
            redact("key is sk-proj-AAAAbbbbCCCCdddd1234 ok"),
            "key is [REDACTED] ok"
        );
        assert_eq!(
            redact("ghp_0123456789abcdefghijABCDEF and AKIAABCDEFGHIJKLMNOP"),
            "[REDACTED] and [REDACTED]"
        );
    }

    #[test]
    fn ordinary_text_is_borrowed() {
        for text in [
            "cargo test -p volee-store",
            "the token budget is 20k",
            "a basic understanding of tokenization",
            "max_tokens: 4096",
            "skip the tokenizer",
            "let key = map.get(k);",
            "",
        ] {
            assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn json_values_are_walked() {
        let mut v = serde_json::json!({"cmd": "OPENAI_API_KEY=abcdefgh run", "n": 1, "a": ["Bearer abcdefghijk"]});
        redact_value(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"cmd": "OPENAI_API_KEY=[REDACTED] run", "n": 1, "a": ["Bearer [REDACTED]"]})
        );
    }
}
