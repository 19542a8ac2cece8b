//! Redaction of obvious secrets before text leaves the session's context: transcript lines,
//! compaction records, titles and exports. Deliberately simple: env-like assignments of keys,
//! tokens, secrets and passwords whose value looks like a secret ([`looks_like_secret`]);
//! `Authorization: Bearer …`; well-known token shapes (`sk-…`, `ghp_…`, `github_pat_…`,
//! `xox?-…`, `AKIA…`).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// How a rule decides what a match becomes.
enum With {
    /// An assignment: group 1 is kept, group 3 (the value) replaced when it is a secret for
    /// the name in group 2.
    Assignment,
    /// `Bearer VALUE`: group 1 is kept; the value replaced when it looks like a secret, always
    /// after `Authorization:` (group 2).
    Bearer,
    /// The whole match is a secret.
    Whole,
}

struct Rule {
    re: Regex,
    with: With,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rules: [(&str, With); 3] = [
        // NAME_API_KEY=value, TOKEN: value, "client_secret": "value", PASSWORD='value'
        (
            r#"(?i)\b([A-Z0-9_.-]*?(API_?KEY|ACCESS_?KEY|SECRET(?:_?KEY)?|TOKEN|PASSWORD|PASSWD)["']?\s*[:=]\s*["']?)([^\s"',;]{4,})"#,
            With::Assignment,
        ),
        // Authorization: Bearer abc / Authorization: Basic abc / plain "Bearer abc"
        (
            r"(?i)\b((authorization\s*[:=]\s*(?:bearer|basic|token)\s+)|bearer\s+)([A-Za-z0-9._~+/=-]{8,})",
            With::Bearer,
        ),
        // Token shapes that are secrets wherever they appear.
        (
            r"\b(sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})",
            With::Whole,
        ),
    ];
    rules
        .into_iter()
        .filter_map(|(re, with)| Regex::new(re).ok().map(|re| Rule { re, with }))
        .collect()
});

/// Does the value of an assignment or a `Bearer` look like a secret rather than a word? Not a
/// variable reference (`$TOKEN`, `${TOKEN}`), a placeholder of one repeated character (`****`,
/// `xxxx`) or [`REDACTED`] itself; then at least 8 characters that mix at least two kinds
/// (lower case, upper case, digits, other) — `hunter22`, `s3cr3tvalue`, `eyJhbGciOi.xyz` — or
/// at least 20 of one kind (a passphrase, a long hex string). `alpha`, `4096`, `tokenization`
/// and `authentication` do not.
pub fn looks_like_secret(value: &str) -> bool {
    if !is_value(value) {
        return false;
    }
    let len = value.chars().count();
    let kinds = [
        value.chars().any(|c| c.is_lowercase()),
        value.chars().any(|c| c.is_uppercase()),
        value.chars().any(|c| c.is_ascii_digit()),
        value.chars().any(|c| !c.is_alphanumeric()),
    ]
    .iter()
    .filter(|k| **k)
    .count();
    (len >= 8 && kinds >= 2) || len >= 20
}

/// A value at all: not a reference to a variable, a placeholder or an earlier redaction.
fn is_value(value: &str) -> bool {
    let mut chars = value.chars();
    let first = chars.next();
    !(value.starts_with('$')
        || value.starts_with(REDACTED)
        || value.starts_with('<')
        || first.is_some_and(|f| chars.all(|c| c == f)))
}

/// The name of an assignment says its value is secret whatever it looks like (a password is
/// often a plain word); `TOKEN` and `KEY` are also words of ordinary prose and settings
/// (`token=alpha`, a token budget), so their value must look like a secret.
fn name_says_secret(kind: &str) -> bool {
    let kind = kind.to_ascii_uppercase();
    kind.starts_with("SECRET") || kind.starts_with("PASSW")
}

fn replace(with: &With, caps: &Captures<'_>) -> String {
    let whole = caps.get(0).map_or("", |m| m.as_str());
    let group = |i| caps.get(i).map_or("", |m| m.as_str());
    match with {
        With::Whole => REDACTED.to_string(),
        With::Assignment => {
            let value = group(3);
            let secret = if name_says_secret(group(2)) {
                is_value(value)
            } else {
                looks_like_secret(value)
            };
            if secret {
                format!("{}{REDACTED}", group(1))
            } else {
                whole.to_string()
            }
        }
        With::Bearer => {
            let value = group(3);
            let header = caps.get(2).is_some();
            if (header && is_value(value)) || looks_like_secret(value) {
                format!("{}{REDACTED}", group(1))
            } else {
                whole.to_string()
            }
        }
    }
}

/// `text` with obvious secrets replaced by [`REDACTED`]; borrowed when there is none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for rule in RULES.iter() {
        let replaced = rule
            .re
            .replace_all(&out, |caps: &Captures<'_>| replace(&rule.with, caps));
        if let Cow::Owned(s) = replaced {
            if s != out {
                out = Cow::Owned(s);
            }
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
        let mut v = serde_json::json!({"cmd": "OPENAI_API_KEY=abcd3fgh run", "n": 1, "a": ["Bearer abcdefgh1jk"]});
        redact_value(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"cmd": "OPENAI_API_KEY=[REDACTED] run", "n": 1, "a": ["Bearer [REDACTED]"]})
        );
    }

    /// Issue 21: a summary's `token=alpha` stays as it is; a value that looks like a secret
    /// after the same name goes.
    #[test]
    fn only_values_that_look_like_secrets_are_redacted() {
        for text in [
            "token=alpha",
            "the session used token=alpha and TOKEN: beta",
            "API_KEY=changeme",
            "GITHUB_TOKEN=$GITHUB_TOKEN",
            "export API_TOKEN=${API_TOKEN}",
            "token: <your token>",
            "password=****",
            "max_token=4096",
            "we use bearer authentication here",
            "access_key: [REDACTED]",
        ] {
            assert_eq!(redact(text), text, "over-redacted: {text}");
        }
        for (text, want) in [
            ("token=a1b2c3d4e5", "token=[REDACTED]"),
            ("TOKEN: Xk9fQ2mL", "TOKEN: [REDACTED]"),
            ("api_key=correcthorsebatterystaple", "api_key=[REDACTED]"),
            ("Bearer eyJhbGciOi.xyz123", "Bearer [REDACTED]"),
            // The header says it is a credential whatever it looks like.
            (
                "Authorization: Bearer abcdefghijk",
                "Authorization: Bearer [REDACTED]",
            ),
            // A password or a secret is often a plain word: its name is enough.
            ("db_password=hunter", "db_password=[REDACTED]"),
            ("client_secret: alpha", "client_secret: [REDACTED]"),
        ] {
            assert_eq!(redact(text), want, "{text}");
        }
        // Redacting twice changes nothing more.
        let once = redact("TOKEN=Xk9fQ2mLzz PASSWORD=hunter").into_owned();
        assert_eq!(redact(&once), once);
        assert!(looks_like_secret("s3cr3tvalue") && !looks_like_secret("alpha"));
        assert!(looks_like_secret("0123456789abcdef0123") && !looks_like_secret("tokenization"));
    }
}
