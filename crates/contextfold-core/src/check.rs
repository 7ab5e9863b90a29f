//! The artifact check: did the facts that must survive a summary survive it?
//!
//! Facts that must survive are the files changed (their paths), the errors still unresolved
//! (their telling line) and the user's explicit constraints (sentences with "don't",
//! "must", "keep", …). A fact is present when its normalized text occurs in the normalized
//! summary: lowercase, markdown quoting and punctuation runs folded to single spaces. Missing
//! facts are appended in a short "Preserved facts" section, so an LLM summary that dropped
//! them cannot lose them.

use crate::extract::Facts;
use crate::text::clip_chars;
use serde::Serialize;

/// The heading of the section that carries facts an LLM summary left out.
pub const PRESERVED_FACTS: &str = "Preserved facts";

/// What kind of fact must survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FactKind {
    /// A file created or modified: its path.
    FileChanged,
    /// An error no later step fixed: its telling line.
    UnresolvedError,
    /// A constraint the user stated.
    Constraint,
}

/// A fact that must survive a summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequiredFact {
    /// Its kind.
    pub kind: FactKind,
    /// The text that must be present.
    pub text: String,
}

/// Words that mark a user's sentence as a constraint.
const CONSTRAINT_CUES: [&str; 12] = [
    "don't",
    "do not",
    "never",
    "must",
    "always",
    "keep ",
    "make sure",
    "only ",
    "avoid",
    "without",
    "insist",
    "should not",
];

/// The facts of `facts` that must survive a summary.
pub fn required_facts(facts: &Facts) -> Vec<RequiredFact> {
    let mut required = Vec::new();
    let mut push = |kind, text: String| {
        if !text.trim().is_empty() && !required.iter().any(|fact: &RequiredFact| fact.text == text) {
            required.push(RequiredFact { kind, text });
        }
    };
    for change in &facts.files_changed {
        push(FactKind::FileChanged, change.path.clone());
    }
    for error in facts.errors.iter().filter(|error| !error.fixed) {
        push(FactKind::UnresolvedError, clip_chars(&error.first_line, 100).trim_end_matches('…').to_string());
    }
    for ask in &facts.user_asks {
        for sentence in ask.text.split_inclusive(['.', '!', '?', '\n']) {
            let lower = sentence.to_lowercase();
            if CONSTRAINT_CUES.iter().any(|cue| lower.contains(cue)) && sentence.trim().len() > 8 {
                push(FactKind::Constraint, clip_chars(sentence.trim(), 200).trim_end_matches('…').to_string());
            }
        }
    }
    required
}

/// `text` lowercased, runs of whitespace folded to one space, and double quotes, backticks
/// and markdown asterisks dropped, so formatting differences do not hide a fact.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if matches!(c, '`' | '"' | '*' | '“' | '”') {
            continue;
        }
        if c.is_whitespace() {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        // The ASCII path is the common one and much cheaper than full Unicode lowercasing.
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Whether `needle` occurs in `haystack` once both are normalized (`haystack` already is).
pub fn is_present(normalized_haystack: &str, needle: &str) -> bool {
    let needle = normalize(needle);
    !needle.is_empty() && normalized_haystack.contains(&needle)
}

/// The required facts missing from `summary`.
pub fn missing_facts<'a>(summary: &str, required: &'a [RequiredFact]) -> Vec<&'a RequiredFact> {
    let haystack = normalize(summary);
    required.iter().filter(|fact| !is_present(&haystack, &fact.text)).collect()
}

/// `summary` with a "Preserved facts" section listing `missing`.
pub fn preserve(summary: &str, missing: &[&RequiredFact]) -> String {
    if missing.is_empty() {
        return summary.to_string();
    }
    let mut out = summary.trim_end().to_string();
    out.push_str(&format!("\n\n## {PRESERVED_FACTS}\n"));
    for fact in missing {
        let label = match fact.kind {
            FactKind::FileChanged => "File changed",
            FactKind::UnresolvedError => "Unresolved error",
            FactKind::Constraint => "User constraint",
        };
        out.push_str(&format!("- {label}: {}\n", fact.text));
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{Ask, ErrorSeen, FileChange};
    use crate::tools::ActionKind;

    fn facts() -> Facts {
        Facts {
            user_asks: vec![Ask { message: 0, text: "Fix the bug. Don't touch the public API! Thanks.".into() }],
            files_changed: vec![FileChange {
                path: "src/billing/invoice.py".into(),
                tool: "Edit".into(),
                kind: ActionKind::FileEdit,
                what: "x".into(),
                message: 1,
                deleted: false,
            }],
            errors: vec![
                ErrorSeen {
                    tool: "Bash".into(),
                    target: None,
                    first_line: "E   AssertionError: 0.30 != 0.15".into(),
                    message: 2,
                    fixed: false,
                },
                ErrorSeen {
                    tool: "Bash".into(),
                    target: None,
                    first_line: "old error".into(),
                    message: 2,
                    fixed: true,
                },
            ],
            ..Facts::default()
        }
    }

    #[test]
    fn finds_what_must_survive() {
        let required = required_facts(&facts());
        let texts: Vec<(FactKind, &str)> = required.iter().map(|fact| (fact.kind, fact.text.as_str())).collect();
        assert_eq!(
            texts,
            [
                (FactKind::FileChanged, "src/billing/invoice.py"),
                (FactKind::UnresolvedError, "E   AssertionError: 0.30 != 0.15"),
                (FactKind::Constraint, "Don't touch the public API!"),
            ]
        );
    }

    #[test]
    fn presence_ignores_formatting_and_missing_facts_are_appended() {
        let required = required_facts(&facts());
        let summary = "We edited `src/billing/invoice.py`. The user said: **don't touch the public API!**";
        let missing = missing_facts(summary, &required);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].kind, FactKind::UnresolvedError);
        let preserved = preserve(summary, &missing);
        assert!(preserved.ends_with("## Preserved facts\n- Unresolved error: E   AssertionError: 0.30 != 0.15"));
        assert!(missing_facts(&preserved, &required).is_empty());
    }
}
