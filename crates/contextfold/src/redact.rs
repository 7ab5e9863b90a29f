//! Redaction: secrets that match well-known patterns are masked before anything is kept.
//!
//! A [`Redactor`] finds secrets with a fixed set of patterns, compiled once per process, and
//! replaces only the secret value with `[REDACTED:<kind>]`; every other byte of the text is
//! kept. The patterns favour precision over recall: a value must look like a literal, so code
//! that merely *handles* a secret (`password = input()`, `api_key = os.environ["X"]`) is left
//! alone.
//!
//! What is caught ([`Kind`]):
//!
//! - cloud keys: AWS access key ids (`AKIA…`, `ASIA…`) and `aws_secret_access_key` values,
//!   GCP service-account `"private_key"` values, Azure `AccountKey=`/`SharedAccessKey=`;
//! - API tokens: Anthropic `sk-ant-…`, OpenAI `sk-…`/`sk-proj-…`, GitHub `ghp_`/`gho_`/`ghu_`/
//!   `ghs_`/`ghr_`/`github_pat_`, Slack `xox[abprs]-…`, Stripe `sk_live_`/`rk_live_` (and
//!   `_test_`), Google `AIza…`, JWTs `eyJ….eyJ….…`;
//! - PEM private key blocks: the body between `-----BEGIN … PRIVATE KEY-----` and its `END`
//!   line (or, for a truncated block, its base64 lines);
//! - `Authorization: Bearer …`/`Basic …`/`Token …` headers (also as JSON or `-H` arguments);
//! - assignments to a name ending in `_KEY`, `_SECRET`, `_TOKEN`, `PASSWORD` or `PASSWD` (any
//!   case): a quoted value (`KEY="v"`, `"KEY": "v"`, `key = 'v'`) anywhere, a bare value only
//!   as a whole `.env` or shell line (`KEY=v`, `export KEY=v`) or a YAML line (`KEY: v`).
//!
//! What is not: values shorter than 8 characters; values with whitespace, `$`, `{`, `(`, `[`,
//! `<` or a quote (expressions, templates, variables); dotted or bare identifiers on a YAML
//! line (`secret_key: SecretStr`); placeholders (`your-…`, `xxxxxxxx`, `changeme`); names
//! whose values are not secrets (`primary_key`, `sort_key`, `next_token`, …); secrets in
//! other shapes (a password in prose, a key with no telling prefix or name). Object keys of
//! JSON values are not searched; image data is skipped.

use contextfold_core::{Block, Message, ToolResultContent};
use regex::Regex;
use serde_json::Value;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

/// What kind of secret a [`Finding`] is; its name appears in the mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kind {
    /// A private key block's body (PEM).
    PrivateKey,
    /// A GCP service-account `private_key` value.
    GcpPrivateKey,
    /// An Anthropic API key (`sk-ant-…`).
    AnthropicKey,
    /// An OpenAI API key (`sk-…`, `sk-proj-…`).
    OpenAiKey,
    /// A GitHub token (`ghp_…`, `github_pat_…`, …).
    GithubToken,
    /// A Slack token (`xoxb-…`, …).
    SlackToken,
    /// A Stripe secret or restricted key (`sk_live_…`, `rk_live_…`).
    StripeKey,
    /// A Google API key (`AIza…`).
    GoogleApiKey,
    /// An AWS access key id (`AKIA…`, `ASIA…`).
    AwsAccessKeyId,
    /// An AWS secret access key assignment's value.
    AwsSecretKey,
    /// An Azure storage or service-bus account key.
    AzureKey,
    /// A JSON Web Token.
    Jwt,
    /// The credentials of an `Authorization` header.
    Authorization,
    /// The value assigned to a name that says it is a secret.
    Assignment,
}

impl Kind {
    /// The name used in the mask `[REDACTED:<name>]`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::PrivateKey => "private-key",
            Kind::GcpPrivateKey => "gcp-private-key",
            Kind::AnthropicKey => "anthropic-key",
            Kind::OpenAiKey => "openai-key",
            Kind::GithubToken => "github-token",
            Kind::SlackToken => "slack-token",
            Kind::StripeKey => "stripe-key",
            Kind::GoogleApiKey => "google-api-key",
            Kind::AwsAccessKeyId => "aws-access-key-id",
            Kind::AwsSecretKey => "aws-secret-key",
            Kind::AzureKey => "azure-key",
            Kind::Jwt => "jwt",
            Kind::Authorization => "authorization",
            Kind::Assignment => "secret",
        }
    }
}

/// One secret found in a text: its kind and the byte range of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is.
    pub kind: Kind,
    /// Where its value is, in bytes.
    pub range: Range<usize>,
}

/// A pattern: the capture group holding the secret value, and a check of the value that
/// regular expressions without look-around cannot express.
struct Pattern {
    kind: Kind,
    regex: Regex,
    group: usize,
    accept: fn(&str) -> bool,
}

/// The start of every mask, used to leave masked values alone.
const MASK_PREFIX: &str = "[REDACTED:";

/// Names ending like a secret's whose values are not secrets.
const NOT_SECRET_NAMES: &[&str] = &[
    "primary_key",
    "foreign_key",
    "sort_key",
    "partition_key",
    "cache_key",
    "hash_key",
    "range_key",
    "row_key",
    "lookup_key",
    "dict_key",
    "map_key",
    "idempotency_key",
    "public_key",
    "next_token",
    "page_token",
    "pagination_token",
    "continuation_token",
    "cancellation_token",
];

fn any(_: &str) -> bool {
    true
}

/// A token with at least one digit and one letter: random, not a word or a slug.
fn mixed(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_digit()) && value.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Whether `value` is a placeholder rather than a real secret.
fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let first = value.chars().next();
    ["your", "placeholder", "changeme", "example_", "<", "$", "{", "..."].iter().any(|word| lower.contains(word))
        || value.chars().all(|c| Some(c) == first || c == '-' || c == '_')
}

/// A literal value of an assignment or header: long enough, and not a placeholder.
fn literal(value: &str) -> bool {
    value.chars().count() >= 8 && !placeholder(value)
}

/// A bare value on a YAML line: a literal that is not an identifier, a type or a dotted path.
fn bare_literal(value: &str) -> bool {
    let identifier = value.split('.').all(|part| {
        part.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    literal(value) && !identifier
}

/// The name part of the secret-assignment patterns: any name ending in a telling suffix.
const NAME: &str = r"[A-Za-z0-9_.\-]*(?i:_key|_secret|_token|password|passwd)";
/// A value character of a bare assignment: no whitespace, quotes, variables or brackets.
const BARE: &str = r#"[^\s'"`$(){}\[\]<>;,]"#;

fn pattern(kind: Kind, regex: &str, group: usize, accept: fn(&str) -> bool) -> Pattern {
    // The patterns are constants; a bad one is a bug caught by every test.
    let regex = Regex::new(regex).unwrap_or_else(|err| panic!("redaction pattern {}: {err}", kind.name()));
    Pattern { kind, regex, group, accept }
}

/// The patterns, in priority order: when findings overlap, the earlier start wins, then the
/// earlier pattern.
static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        pattern(
            Kind::PrivateKey,
            r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(.+?)-----END[A-Z0-9 ]*PRIVATE KEY-----",
            1,
            any,
        ),
        pattern(Kind::PrivateKey, r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----((?:\\[nr]|[A-Za-z0-9+/=\s])+)", 1, any),
        pattern(Kind::GcpPrivateKey, r#""private_key"\s*:\s*"([^"]{16,})""#, 1, any),
        pattern(Kind::AnthropicKey, r"\b(sk-ant-[A-Za-z0-9_\-]{20,})", 1, any),
        pattern(Kind::OpenAiKey, r"\b(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})", 1, mixed),
        pattern(
            Kind::GithubToken,
            r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
            1,
            any,
        ),
        pattern(Kind::SlackToken, r"\b(xox[abprs]-[A-Za-z0-9\-]{10,})", 1, mixed),
        pattern(Kind::StripeKey, r"\b((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})", 1, any),
        pattern(Kind::GoogleApiKey, r"\b(AIza[0-9A-Za-z_\-]{35})", 1, any),
        pattern(Kind::AwsAccessKeyId, r"\b((?:AKIA|ASIA)[0-9A-Z]{16})\b", 1, any),
        pattern(
            Kind::AwsSecretKey,
            r#"(?i:aws_?secret_?access_?key|aws_?secret_?key)["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})\b"#,
            1,
            any,
        ),
        pattern(Kind::AzureKey, r"(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,}={0,2})", 1, any),
        pattern(Kind::Jwt, r"\b(eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})", 1, any),
        pattern(
            Kind::Authorization,
            r#"(?i:authorization)["']?\s*[:=]\s*["']?(?i:bearer|basic|token)\s+([A-Za-z0-9._~+/=\-]+)"#,
            1,
            literal,
        ),
        // A quoted value anywhere: `KEY="v"`, `"KEY": "v"`, `key = 'v'`.
        pattern(Kind::Assignment, &format!(r#"({NAME})["']?\s*[:=]\s*(?:"([^\s"'\\]+)"|'([^\s"'\\]+)')"#), 2, literal),
        // A bare value as a whole `.env` or shell line.
        pattern(Kind::Assignment, &format!(r"(?m)^[ \t]*(?:export[ \t]+)?({NAME})=({BARE}+)[ \t]*\r?$"), 2, literal),
        // A bare value as a whole YAML line.
        pattern(
            Kind::Assignment,
            &format!(r"(?m)^[ \t]*(?:-[ \t]+)?({NAME}):[ \t]+({BARE}+)[ \t]*\r?$"),
            2,
            bare_literal,
        ),
    ]
});

/// Finds and masks secrets. The default looks for every kind.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    _private: (),
}

impl Redactor {
    /// A redactor with every pattern.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// The secrets in `text`, in order, none overlapping.
    pub fn find(&self, text: &str) -> Vec<Finding> {
        let mut found: Vec<(usize, Finding)> = Vec::new();
        for (priority, pattern) in PATTERNS.iter().enumerate() {
            for captures in pattern.regex.captures_iter(text) {
                // A pattern with alternative value groups uses the first that matched.
                let Some(value) = (pattern.group..captures.len()).find_map(|group| captures.get(group)) else {
                    continue;
                };
                let secret = value.as_str();
                if secret.contains(MASK_PREFIX) || !(pattern.accept)(secret) {
                    continue;
                }
                if pattern.kind == Kind::Assignment && !secret_name(captures.get(1).map_or("", |name| name.as_str())) {
                    continue;
                }
                found.push((priority, Finding { kind: pattern.kind, range: value.range() }));
            }
        }
        found.sort_by_key(|(priority, finding)| (finding.range.start, *priority));
        // Overlapping findings merge into one, named by the first.
        let mut merged: Vec<Finding> = Vec::with_capacity(found.len());
        for (_, finding) in found {
            match merged.last_mut() {
                Some(last) if finding.range.start < last.range.end => {
                    last.range.end = last.range.end.max(finding.range.end);
                }
                _ => merged.push(finding),
            }
        }
        merged
    }

    /// `text` with every secret replaced by `[REDACTED:<kind>]`; borrowed when it has none.
    pub fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_counted(text).0
    }

    /// Masks the secrets of every string in `value` (object keys left as they are); returns
    /// how many were masked.
    pub fn redact_value(&self, value: &mut Value) -> usize {
        match value {
            Value::String(text) => self.redact_string(text),
            Value::Array(items) => items.iter_mut().map(|item| self.redact_value(item)).sum(),
            Value::Object(map) => map.values_mut().map(|item| self.redact_value(item)).sum(),
            _ => 0,
        }
    }

    /// Masks the secrets of a message: its text, tool inputs and results, thinking and other
    /// fields; returns how many were masked.
    ///
    /// A signed thinking block whose text changes no longer matches its signature; redacted
    /// messages are for keeping, not for sending back to the provider.
    pub fn redact_message(&self, message: &mut Message) -> usize {
        let blocks: usize = message.content.iter_mut().map(|block| self.redact_block(block)).sum();
        blocks + message.extra.values_mut().map(|value| self.redact_value(value)).sum::<usize>()
    }

    fn redact_block(&self, block: &mut Block) -> usize {
        let (text, extra) = match block {
            Block::Text(text) => (self.redact_string(&mut text.text), &mut text.extra),
            Block::ToolUse(call) => (self.redact_value(&mut call.input), &mut call.extra),
            Block::ToolResult(result) => {
                let content = match &mut result.content {
                    Some(ToolResultContent::Text(text)) => self.redact_string(text),
                    Some(ToolResultContent::Blocks(blocks)) => {
                        blocks.iter_mut().map(|block| self.redact_block(block)).sum()
                    }
                    None => 0,
                };
                (content, &mut result.extra)
            }
            Block::Thinking(thinking) => (self.redact_string(&mut thinking.thinking), &mut thinking.extra),
            Block::RedactedThinking(redacted) => (0, &mut redacted.extra),
            Block::Image(media) | Block::Document(media) => {
                // Base64 data is not text; searching it only finds noise.
                let binary = media.source.get("type").and_then(Value::as_str) == Some("base64");
                (if binary { 0 } else { self.redact_value(&mut media.source) }, &mut media.extra)
            }
            Block::Other(value) => return self.redact_value(value),
            _ => return 0,
        };
        text + extra.values_mut().map(|value| self.redact_value(value)).sum::<usize>()
    }

    /// Masks the secrets of `text` in place; returns how many were masked.
    pub fn redact_string(&self, text: &mut String) -> usize {
        let (redacted, count) = self.redact_counted(text);
        if let Cow::Owned(redacted) = redacted {
            *text = redacted;
        }
        count
    }

    fn redact_counted<'a>(&self, text: &'a str) -> (Cow<'a, str>, usize) {
        let findings = self.find(text);
        if findings.is_empty() {
            return (Cow::Borrowed(text), 0);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for finding in &findings {
            out.push_str(&text[at..finding.range.start]);
            out.push_str(MASK_PREFIX);
            out.push_str(finding.kind.name());
            out.push(']');
            at = finding.range.end;
        }
        out.push_str(&text[at..]);
        (Cow::Owned(out), findings.len())
    }
}

/// Whether an assignment's name says its value is a secret.
fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let last = lower.rsplit(['.', '-']).next().unwrap_or(&lower);
    !NOT_SECRET_NAMES.iter().any(|not| last.ends_with(not))
}

#[cfg(test)]
mod tests;
