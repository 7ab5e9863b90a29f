//! The offline summary: a structured handoff built from [`extract`](crate::extract) facts.
//!
//! Fixed sections (see [`SECTIONS`]), each a bullet list, empty ones left out, the whole
//! held to a token budget. A previous handoff is parsed back into its sections and merged
//! with the new facts, so repeated compactions update one summary (anchored) instead of
//! nesting summaries of summaries. Trimming drops the oldest bullets first, but never the
//! user's first request.

use crate::extract::{clip_chars, Facts, Outcome};
use crate::tokens::TokenCounter;
use std::collections::HashSet;

/// The sections of a handoff, in order.
pub const SECTIONS: [&str; 7] = [
    "Objective and user requests",
    "Files read",
    "Files changed",
    "Commands and outcomes",
    "Errors and their fixes",
    "Decisions",
    "Current work and next step",
];

/// The heading for a previous summary that is not a handoff (e.g. an LLM's prose).
pub const EARLIER_SUMMARY: &str = "Earlier summary";

/// The share of the budget each section may use before leftovers are shared out, in
/// [`SECTIONS`] order.
const SHARES: [f64; 7] = [0.30, 0.05, 0.15, 0.05, 0.30, 0.07, 0.08];

/// The index of the errors section in [`SECTIONS`].
const ERRORS: usize = 4;

/// How an error bullet ends: fixed by a later step, or not.
const FIXED: &str = "fixed later";
const UNRESOLVED: &str = "unresolved";

/// How the user's first request is marked in the requests section.
const FIRST_REQUEST: &str = "First request: ";

/// The longest one bullet may be, in characters.
const BULLET_CHARS: usize = 2_000;

/// When a section is over its share, its bullets are first shortened to this many
/// characters (the first request to [`FIRST_REQUEST_CHARS`]) before any is dropped: the gist
/// of every ask or error is worth more than the whole text of a few.
const SHORT_BULLET_CHARS: usize = 300;

/// How long the first request stays when its section is shortened.
const FIRST_REQUEST_CHARS: usize = 1_000;

/// The fewest tokens the last request left in a summary is cut to.
const MIN_REQUEST_TOKENS: u64 = 16;

/// Where the conversation's first request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirstRequest {
    /// The first user ask of the facts is the conversation's first request: mark it so
    /// trimming keeps it.
    #[default]
    InFacts,
    /// The first request is kept verbatim elsewhere (pinned); the facts start later.
    Pinned,
}

/// Writes the handoff for `facts`, merged into `previous`, in at most `budget` tokens.
pub fn handoff(
    facts: &Facts,
    previous: Option<&str>,
    first: FirstRequest,
    budget: u64,
    counter: &dyn TokenCounter,
) -> String {
    let mut sections: Vec<Vec<String>> = new_sections(facts, first);
    let mut earlier = None;
    if let Some(previous) = previous {
        match parse_sections(previous) {
            Some(old) => merge(&mut sections, old),
            None => earlier = Some(clip_chars(previous.trim(), BULLET_CHARS * 2)),
        }
    }
    fit(&mut sections, earlier.as_deref(), budget, counter)
}

fn quote(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("\"{}\"", clip_chars(&one_line, BULLET_CHARS))
}

fn new_sections(facts: &Facts, first: FirstRequest) -> Vec<Vec<String>> {
    let mut sections = vec![Vec::new(); SECTIONS.len()];
    // Newest first; the first request last, marked, so trimming can keep it.
    let mut asks: Vec<String> = facts.user_asks.iter().rev().map(|ask| quote(&ask.text)).collect();
    if let (Some(oldest), FirstRequest::InFacts) = (asks.last_mut(), first) {
        *oldest = format!("{FIRST_REQUEST}{oldest}");
    }
    sections[0] = asks;
    sections[1] = facts.files_read.iter().map(|read| read.path.clone()).collect();
    let mut changed: Vec<(String, Vec<String>)> = Vec::new();
    for change in &facts.files_changed {
        match changed.iter_mut().find(|(path, _)| *path == change.path) {
            Some((_, whats)) => whats.push(change.what.clone()),
            None => changed.push((change.path.clone(), vec![change.what.clone()])),
        }
    }
    sections[2] = changed
        .into_iter()
        .map(|(path, whats)| {
            let shown: Vec<&String> = whats.iter().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect();
            let more = whats.len().saturating_sub(3);
            let prefix = if more > 0 { format!("{more} earlier change(s); ") } else { String::new() };
            format!("{path}: {prefix}{}", shown.iter().map(|what| what.as_str()).collect::<Vec<_>>().join("; "))
        })
        .collect();
    let mut commands: Vec<String> = Vec::new();
    for command in &facts.commands {
        let outcome = match command.outcome {
            Outcome::Ok => "ok".to_string(),
            Outcome::Failed(Some(code)) => format!("failed (exit {code})"),
            Outcome::Failed(None) => "failed".to_string(),
            Outcome::Unknown => "no result".to_string(),
        };
        let line = format!("`{}` → {outcome}", clip_chars(&command.command, 160));
        if commands.last() != Some(&line) {
            commands.push(line);
        }
    }
    sections[3] = commands;
    // One bullet per distinct error (its latest status); fixed ones first, so trimming,
    // which drops from the front, drops them before the unresolved ones.
    let mut errors: Vec<(bool, String)> = Vec::new();
    for error in &facts.errors {
        let target = error.target.as_deref().map(|target| format!(" {}", clip_chars(target, 40))).unwrap_or_default();
        let line = format!("{}{target}: {}", error.tool, error.first_line);
        errors.retain(|(_, seen)| *seen != line);
        errors.push((error.fixed, line));
    }
    errors.sort_by_key(|(fixed, _)| !fixed);
    sections[ERRORS] = errors
        .into_iter()
        .map(|(fixed, line)| format!("{line} — {}", if fixed { FIXED } else { UNRESOLVED }))
        .collect();
    sections[5] = facts.decisions.clone();
    sections[6] = facts.next_step.iter().cloned().collect();
    for bullets in &mut sections {
        let mut seen = HashSet::new();
        bullets.retain(|bullet| seen.insert(bullet.clone()));
    }
    sections
}

/// Parses a handoff back into its sections' bullets; `None` when `text` is not a handoff.
pub fn parse_sections(text: &str) -> Option<Vec<Vec<String>>> {
    let mut sections = vec![Vec::new(); SECTIONS.len()];
    let mut current: Option<usize> = None;
    let mut found = false;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            current = SECTIONS.iter().position(|section| *section == heading.trim());
            found |= current.is_some();
            continue;
        }
        let Some(section) = current else { continue };
        if let Some(bullet) = line.strip_prefix("- ") {
            sections[section].push(bullet.to_string());
        } else if let (Some(last), false) = (sections[section].last_mut(), line.trim().is_empty()) {
            last.push('\n');
            last.push_str(line);
        }
    }
    found.then_some(sections)
}

fn merge(sections: &mut [Vec<String>], old: Vec<Vec<String>>) {
    for (index, old_bullets) in old.into_iter().enumerate() {
        let new = std::mem::take(&mut sections[index]);
        let merged: Vec<String> = match index {
            // Requests: new ones (newest first) before old ones; the first request stays the
            // old one, last.
            0 => {
                let is_first = |bullet: &String| bullet.starts_with(FIRST_REQUEST);
                let (old_first, old_rest): (Vec<String>, Vec<String>) = old_bullets.into_iter().partition(is_first);
                let (new_first, mut asks): (Vec<String>, Vec<String>) = new.into_iter().partition(is_first);
                let first = if old_first.is_empty() {
                    new_first
                } else {
                    // The new span's first ask is not the conversation's first: it is the
                    // oldest of the new asks.
                    asks.extend(new_first.iter().map(|bullet| bullet[FIRST_REQUEST.len()..].to_string()));
                    old_first
                };
                asks.extend(old_rest);
                asks.extend(first);
                asks
            }
            // The latest next step replaces the old one.
            6 if !new.is_empty() => new,
            _ => old_bullets.into_iter().chain(new).collect(),
        };
        let mut seen = HashSet::new();
        sections[index] = merged.into_iter().filter(|bullet| seen.insert(bullet.clone())).collect();
    }
}

fn render(sections: &[Vec<String>], earlier: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(earlier) = earlier {
        out.push_str(&format!("## {EARLIER_SUMMARY}\n{earlier}\n\n"));
    }
    for (index, bullets) in sections.iter().enumerate() {
        if bullets.is_empty() {
            continue;
        }
        out.push_str(&format!("## {}\n", SECTIONS[index]));
        for bullet in bullets {
            out.push_str(&format!("- {bullet}\n"));
        }
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// Shortens long bullets, then drops bullets until the handoff fits `budget`: oldest first,
/// each section down to its share, leftovers shared in section order; the first request goes
/// last of all.
fn fit(sections: &mut [Vec<String>], earlier: Option<&str>, budget: u64, counter: &dyn TokenCounter) -> String {
    let text = render(sections, earlier);
    if counter.count_text(&text) <= budget {
        return text;
    }
    let sizes: Vec<Vec<u64>> =
        sections.iter().map(|bullets| bullets.iter().map(|bullet| counter.count_text(bullet) + 2).collect()).collect();
    let fixed = earlier.map_or(0, |earlier| counter.count_text(earlier)) + 8 * SECTIONS.len() as u64;
    let available = budget.saturating_sub(fixed);
    let natural: Vec<u64> = sizes.iter().map(|sizes| sizes.iter().sum()).collect();
    let mut allowance: Vec<u64> = SHARES.iter().map(|share| (share * available as f64) as u64).collect();
    let mut spare: u64 =
        allowance.iter().zip(&natural).map(|(allowed, natural)| allowed.saturating_sub(*natural)).sum();
    for (allowed, natural) in allowance.iter_mut().zip(&natural) {
        let extra = natural.saturating_sub(*allowed).min(spare);
        *allowed += extra;
        spare -= extra;
    }
    for (index, bullets) in sections.iter_mut().enumerate() {
        let mut total = natural[index];
        if total > allowance[index] {
            for bullet in bullets.iter_mut() {
                let keep = if bullet.starts_with(FIRST_REQUEST) { FIRST_REQUEST_CHARS } else { SHORT_BULLET_CHARS };
                *bullet = shorten(bullet, keep);
            }
            total = bullets.iter().map(|bullet| counter.count_text(bullet) + 2).sum();
        }
        // Which bullets are oldest: the end of the requests list (but not the first request,
        // which is last), the start of every other list.
        while total > allowance[index] && !bullets.is_empty() {
            if index == 0 && bullets.len() == 1 {
                // The last request left is cut to the section's share, never dropped: a
                // summary that holds nothing would lose the head without a word.
                bullets[0] = cut_chars(&bullets[0], allowance[index].max(MIN_REQUEST_TOKENS), counter);
                break;
            }
            let removable = if index == 0 {
                let last = bullets.len() - 1;
                match bullets[last].starts_with(FIRST_REQUEST) {
                    true => last - 1,
                    false => last,
                }
            } else if index == ERRORS {
                // Errors a later step fixed go before any that are still open.
                bullets.iter().position(|bullet| bullet.ends_with(FIXED)).unwrap_or(0)
            } else {
                0
            };
            let size = counter.count_text(&bullets[removable]) + 2;
            bullets.remove(removable);
            total = total.saturating_sub(size);
        }
    }
    let text = render(sections, earlier);
    if counter.count_text(&text) <= budget {
        return text;
    }
    cut_chars(&text, budget, counter)
}

/// `bullet` cut to about `keep` characters, keeping an error's status at its end.
fn shorten(bullet: &str, keep: usize) -> String {
    for status in [FIXED, UNRESOLVED] {
        if let Some(body) = bullet.strip_suffix(status).and_then(|rest| rest.strip_suffix(" — ")) {
            return format!("{} — {status}", clip_chars(body, keep));
        }
    }
    clip_chars(bullet, keep)
}

/// The last resort: cut by characters until the text fits.
fn cut_chars(text: &str, budget: u64, counter: &dyn TokenCounter) -> String {
    let mut end = text.len();
    while end > 0 && counter.count_text(&text[..end]) > budget {
        end = text.floor_char_boundary(end * 9 / 10);
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Conversation;
    use crate::extract::extract;
    use crate::tokens::Chars4;
    use crate::tools::Preset;
    use serde_json::json;

    fn facts() -> Facts {
        let conversation = Conversation::from_value(json!([
            {"role": "user", "content": "Fix the rounding bug in billing/invoice.py. Keep the public API."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "1", "name": "Read", "input": {"file_path": "billing/invoice.py"}},
                {"type": "tool_use", "id": "2", "name": "Bash", "input": {"command": "pytest -q"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "1", "content": "code"},
                {"type": "tool_result", "tool_use_id": "2", "content": "E   AssertionError: 0.30 != 0.15", "is_error": true}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "The root cause is banker's rounding. Next I will run the tests."},
                {"type": "tool_use", "id": "3", "name": "Edit", "input": {"file_path": "billing/invoice.py", "old_string": "round(t, 2)", "new_string": "t.quantize(CENT)"}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "3", "content": "ok"}, {"type": "text", "text": "Also add a regression test."}]}
        ]))
        .unwrap();
        extract(&conversation.messages, Preset::Auto)
    }

    #[test]
    fn a_tiny_budget_keeps_the_first_request_cut_rather_than_nothing() {
        let ask = "Fix the rounding bug in billing/invoice.py and keep the public API. ".repeat(40);
        let conversation = Conversation::from_value(json!([
            {"role": "user", "content": ask},
            {"role": "assistant", "content": "Done."}
        ]))
        .unwrap();
        let facts = extract(&conversation.messages, Preset::Auto);
        for budget in [64, 128, 256] {
            let text = handoff(&facts, None, FirstRequest::InFacts, budget, &Chars4);
            assert!(text.contains("Fix the rounding bug"), "{budget}: {text}");
            assert!(Chars4.count_text(&text) <= budget, "{budget}: {text}");
        }
    }

    #[test]
    fn sections_in_order_without_empty_ones() {
        let text = handoff(&facts(), None, FirstRequest::InFacts, 10_000, &Chars4);
        assert_eq!(
            text,
            "## Objective and user requests\n\
- \"Also add a regression test.\"\n\
- First request: \"Fix the rounding bug in billing/invoice.py. Keep the public API.\"\n\n\
## Files read\n- billing/invoice.py\n\n\
## Files changed\n- billing/invoice.py: replaced `round(t, 2)` with `t.quantize(CENT)`\n\n\
## Commands and outcomes\n- `pytest -q` → failed\n\n\
## Errors and their fixes\n- Bash pytest -q: E   AssertionError: 0.30 != 0.15 — unresolved\n\n\
## Decisions\n- The root cause is banker's rounding.\n\n\
## Current work and next step\n- Next I will run the tests."
        );
    }

    #[test]
    fn a_tight_budget_shortens_asks_and_drops_fixed_errors_first() {
        use crate::extract::{Ask, ErrorSeen};
        let mut facts = Facts::default();
        for index in 0..8 {
            let text = format!("Ask number {index}: {}", "with a long pasted log line ".repeat(40));
            facts.user_asks.push(Ask { message: index, text });
        }
        let error = |index: usize| ErrorSeen {
            tool: "Bash".into(),
            target: Some(format!("make target{index}")),
            first_line: format!("error {index}: {}", "details ".repeat(30)),
            message: index,
            fixed: index.is_multiple_of(2),
        };
        // Errors of an earlier summary come first when merged: the open ones among them must
        // still outlive the fixed ones.
        let earlier = Facts { errors: (0..6).map(error).collect(), ..Facts::default() };
        let previous = handoff(&earlier, None, FirstRequest::InFacts, 100_000, &Chars4);
        facts.errors = (6..12).map(error).collect();
        let text = handoff(&facts, Some(&previous), FirstRequest::InFacts, 1_500, &Chars4);
        assert!(Chars4.count_text(&text) <= 1_500);
        let sections = parse_sections(&text).unwrap();
        // Every ask keeps its opening words rather than a few keeping all of theirs.
        for index in 0..8 {
            assert!(text.contains(&format!("Ask number {index}: with a long")), "ask {index} lost:\n{text}");
        }
        assert!(sections[0].iter().all(|ask| ask.chars().count() <= FIRST_REQUEST_CHARS + 20));
        // Open errors outlive fixed ones, and keep their status after shortening.
        let open = sections[ERRORS].iter().filter(|error| error.ends_with(UNRESOLVED)).count();
        let fixed = sections[ERRORS].iter().filter(|error| error.ends_with(FIXED)).count();
        assert_eq!(open + fixed, sections[ERRORS].len());
        assert!(open == 6 || fixed == 0, "{open} open, {fixed} fixed:\n{text}");
    }

    #[test]
    fn merges_into_a_previous_handoff() {
        let first = handoff(&facts(), None, FirstRequest::InFacts, 10_000, &Chars4);
        let mut later = Facts::default();
        later.user_asks.push(crate::extract::Ask { message: 0, text: "Now update the changelog.".into() });
        later.next_step = Some("Then open a PR.".into());
        let merged = handoff(&later, Some(&first), FirstRequest::InFacts, 10_000, &Chars4);
        let sections = parse_sections(&merged).unwrap();
        assert_eq!(sections[0][0], "\"Now update the changelog.\"");
        assert!(sections[0].last().unwrap().starts_with("First request: \"Fix the rounding bug"));
        assert_eq!(sections[6], ["Then open a PR."]);
        assert_eq!(sections[2].len(), 1, "old facts are kept");
        // Merging the same facts again changes nothing: no growth without new content.
        assert_eq!(handoff(&Facts::default(), Some(&merged), FirstRequest::InFacts, 10_000, &Chars4), merged);
    }

    #[test]
    fn fits_the_budget_and_keeps_the_first_request() {
        let mut facts = facts();
        for i in 0..200 {
            facts
                .user_asks
                .push(crate::extract::Ask { message: i, text: format!("request number {i} with some words") });
        }
        for budget in [60, 200, 500, 1_000] {
            let text = handoff(&facts, None, FirstRequest::InFacts, budget, &Chars4);
            assert!(Chars4.count_text(&text) <= budget, "{budget}");
            if budget >= 200 {
                assert!(text.contains("First request: \"Fix the rounding bug"), "{budget}: {text}");
                assert!(text.contains("request number 199"), "newest kept");
            }
        }
    }

    #[test]
    fn a_prose_summary_is_kept_as_earlier_summary() {
        let text = handoff(&facts(), Some("We fixed X and Y."), FirstRequest::InFacts, 10_000, &Chars4);
        assert!(text.starts_with("## Earlier summary\nWe fixed X and Y.\n\n## Objective"));
    }
}
