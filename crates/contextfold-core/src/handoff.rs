//! The offline summary: a structured handoff built from [`extract`](crate::extract) facts.
//!
//! Fixed sections (see [`SECTIONS`]), each a bullet list, empty ones left out, the whole
//! held to a token budget. A previous handoff is parsed back into its sections and merged
//! with the new facts, so repeated compactions update one summary (anchored) instead of
//! nesting summaries of summaries. Trimming drops the oldest bullets first, but never the
//! user's first request.

use crate::extract::Facts;
use crate::harness::harness_family;
use crate::summary::SUMMARY_PREFIX;
use crate::text::{clip_chars, strip_list_marker, Outcome};
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

/// The order sections get what other sections leave of their share: the user's words and
/// what went wrong first, then what the assistant is doing and what changed; the list of
/// commands (whose failures the errors already name) and of files read last.
const SPARE_ORDER: [usize; 7] = [0, ERRORS, CURRENT, 2, 5, 3, 1];

/// The index of the errors section in [`SECTIONS`].
const ERRORS: usize = 4;

/// The index of the commands section in [`SECTIONS`].
const COMMANDS: usize = 3;

/// How many of the newest commands the summary lists. An older command is read on every
/// later call for little: its failure is in the errors section, the files it changed in the
/// changed section.
const RECENT_COMMANDS: usize = 8;

/// The index of the current work section in [`SECTIONS`].
const CURRENT: usize = 6;

/// How long an error's bullet gets before any error is dropped (fixed ones first): its
/// telling line's opening, then as much of the command as is left.
const SHORT_ERROR_CHARS: usize = 120;

/// How the count of fixed errors left out for room ends; a count is made afresh at each
/// fit, never merged.
const NOT_SHOWN: &str = "fixed later, not shown";

/// How long the current work's bullets get before the next step is dropped.
const SHORT_CURRENT_CHARS: usize = 120;

/// How the next step is marked after the opening of the last assistant text.
const NEXT: &str = "Next: ";

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
    let commands = &mut sections[COMMANDS];
    commands.drain(..commands.len().saturating_sub(RECENT_COMMANDS));
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
    // Per file: its distinct changes with how often each was made, and whether the latest
    // deleted it.
    let mut changed: Vec<ChangedFile> = Vec::new();
    for change in &facts.files_changed {
        let at = match changed.iter().position(|(path, _, _)| *path == change.path) {
            Some(at) => at,
            None => {
                changed.push((change.path.clone(), Vec::new(), false));
                changed.len() - 1
            }
        };
        let (_, whats, deleted) = &mut changed[at];
        *deleted = change.deleted;
        match whats.iter().position(|(what, _)| *what == change.what) {
            Some(seen) => {
                let (what, count) = whats.remove(seen);
                whats.push((what, count + 1));
            }
            None => whats.push((change.what.clone(), 1)),
        }
    }
    sections[2] = changed
        .into_iter()
        .map(|(path, whats, deleted)| {
            let shown: Vec<String> = whats
                .iter()
                .rev()
                .take(3)
                .rev()
                .map(|(what, count)| if *count > 1 { format!("{what} ({count} times)") } else { what.clone() })
                .collect();
            let more = whats.len().saturating_sub(3);
            let prefix = if more > 0 { format!("{more} earlier change(s); ") } else { String::new() };
            let status = if deleted { " (deleted)" } else { "" };
            format!("{path}{status}: {prefix}{}", shown.join("; "))
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
    sections[COMMANDS] = commands;
    // One bullet per distinct failure: its telling line first (shortening keeps it), then the
    // command or target of its latest occurrence, then its latest status; unresolved first.
    let mut errors: Vec<(bool, String, String)> = Vec::new();
    for error in &facts.errors {
        let target = error.target.as_deref().map(|target| format!(" {}", clip_chars(target, 60))).unwrap_or_default();
        errors.retain(|(_, _, line)| *line != error.first_line);
        errors.push((error.fixed, format!("{}{target}", error.tool), error.first_line.clone()));
    }
    sections[ERRORS] = errors
        .into_iter()
        .map(|(fixed, source, line)| format!("{line} ← `{source}` — {}", if fixed { FIXED } else { UNRESOLVED }))
        .collect();
    sort_errors(&mut sections[ERRORS]);
    sections[5] = facts.decisions.clone();
    // What the assistant last said, from its opening words, then its stated next step.
    if let Some(text) = &facts.last_assistant_text {
        sections[CURRENT].push(text.clone());
    }
    if let Some(step) = &facts.next_step {
        let folded = step.split_whitespace().collect::<Vec<_>>().join(" ");
        if !sections[CURRENT].iter().any(|bullet| bullet.contains(&folded)) {
            sections[CURRENT].push(format!("{NEXT}{step}"));
        }
    }
    for bullets in &mut sections {
        let mut seen = HashSet::new();
        bullets.retain(|bullet| !bullet.trim().is_empty() && seen.insert(bullet.clone()));
    }
    sections
}

/// A file in the changed section: its path, its distinct changes with how often each was
/// made, and whether the latest deleted it.
type ChangedFile = (String, Vec<(String, usize)>, bool);

/// Unresolved errors before fixed ones, each group in its order.
fn sort_errors(bullets: &mut [String]) {
    bullets.sort_by_key(|bullet| bullet.ends_with(FIXED));
}

/// Whether a bullet of an earlier summary is a copy of a summary or of harness text (what
/// older summaries could quote as a request), or a count of errors left out: such bullets
/// are dropped when merging.
fn is_stale_copy(bullet: &str) -> bool {
    let unquoted = bullet.trim_start_matches(FIRST_REQUEST).trim_matches('"');
    bullet.contains(SUMMARY_PREFIX) || harness_family(unquoted).is_some() || bullet.ends_with(NOT_SHOWN)
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
    for (index, mut old_bullets) in old.into_iter().enumerate() {
        old_bullets.retain(|bullet| !is_stale_copy(bullet));
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
            // The latest current work replaces the old one.
            CURRENT if !new.is_empty() => new,
            // One bullet per file: a file changed again adds its new changes to its old ones.
            2 => merge_files(old_bullets, new),
            _ => old_bullets.into_iter().chain(new).collect(),
        };
        let mut seen = HashSet::new();
        sections[index] = merged.into_iter().filter(|bullet| seen.insert(bullet.clone())).collect();
        if index == ERRORS {
            sort_errors(&mut sections[index]);
        }
    }
}

/// The changed files of an earlier summary and of the new span, one bullet per file.
fn merge_files(old: Vec<String>, new: Vec<String>) -> Vec<String> {
    let path_of = |bullet: &str| bullet.split(": ").next().unwrap_or("").trim_end_matches(" (deleted)").to_string();
    let mut merged = old;
    for bullet in new {
        let path = path_of(&bullet);
        match merged.iter().position(|old| path_of(old) == path) {
            Some(at) => {
                let old = merged.remove(at);
                let old_whats = old.split_once(": ").map_or("", |(_, whats)| whats);
                let (head, whats) = bullet.split_once(": ").unwrap_or((bullet.as_str(), ""));
                // Each change once, at its latest place; the last few.
                let mut all: Vec<&str> = Vec::new();
                for what in old_whats.split("; ").chain(whats.split("; ")).filter(|what| !what.is_empty()) {
                    all.retain(|seen| *seen != what);
                    all.push(what);
                }
                let shown = &all[all.len().saturating_sub(4)..];
                merged.push(format!("{head}: {}", shown.join("; ")));
            }
            None => merged.push(bullet),
        }
    }
    merged
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
            // A bullet that opens like a list item is quoted, never doubled, and kept verbatim.
            if strip_list_marker(bullet).len() != bullet.trim_start().len() {
                out.push_str(&format!("- \"{bullet}\"\n"));
            } else {
                out.push_str(&format!("- {bullet}\n"));
            }
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
    for index in SPARE_ORDER {
        let extra = natural[index].saturating_sub(allowance[index]).min(spare);
        // Room that would hold none of a section's bullets, even shortened, goes on to the
        // next section: a tiny budget keeps a short bullet rather than nothing.
        if allowance[index] + extra < shortest_bullet(index, &sections[index], counter) {
            continue;
        }
        allowance[index] += extra;
        spare -= extra;
    }
    let mut dropped_fixed = 0;
    for (index, bullets) in sections.iter_mut().enumerate() {
        let mut total = natural[index];
        if index == ERRORS {
            // Fixed errors are shortened before anything else is, then open ones: one short
            // line per failure before any failure is dropped.
            for fixed in [true, false] {
                if total <= allowance[index] {
                    break;
                }
                for bullet in bullets.iter_mut().filter(|bullet| bullet.ends_with(FIXED) == fixed) {
                    *bullet = shorten(bullet, SHORT_ERROR_CHARS);
                }
                total = bullets.iter().map(|bullet| counter.count_text(bullet) + 2).sum();
            }
        }
        if total > allowance[index] {
            for bullet in bullets.iter_mut() {
                let keep = if bullet.starts_with(FIRST_REQUEST) { FIRST_REQUEST_CHARS } else { SHORT_BULLET_CHARS };
                *bullet = shorten(bullet, keep);
            }
            total = bullets.iter().map(|bullet| counter.count_text(bullet) + 2).sum();
        }
        if index == CURRENT && total > allowance[index] {
            // The opening of the last assistant text and the next step are both shortened
            // before the next step goes: together they say where the work stands.
            for bullet in bullets.iter_mut() {
                *bullet = shorten(bullet, SHORT_CURRENT_CHARS);
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
                // Errors a later step fixed go before any that are still open, and are
                // counted, not dropped silently.
                bullets.iter().position(|bullet| bullet.ends_with(FIXED)).unwrap_or(0)
            } else if index == CURRENT {
                // The opening of the last assistant text goes last.
                bullets.len() - 1
            } else {
                0
            };
            let size = counter.count_text(&bullets[removable]) + 2;
            let removed = bullets.remove(removable);
            total = total.saturating_sub(size);
            if index == ERRORS && removed.ends_with(FIXED) {
                dropped_fixed += 1;
            }
        }
        if index == ERRORS && dropped_fixed > 0 {
            bullets.push(format!("{dropped_fixed} earlier error(s) {NOT_SHOWN}"));
        }
    }
    let text = render(sections, earlier);
    if counter.count_text(&text) <= budget {
        return text;
    }
    cut_chars(&text, budget, counter)
}

/// The tokens of the shortest bullet of section `index` once shortened as [`fit`] shortens
/// them; 0 for an empty section.
fn shortest_bullet(index: usize, bullets: &[String], counter: &dyn TokenCounter) -> u64 {
    let keep = match index {
        ERRORS => SHORT_ERROR_CHARS,
        _ => SHORT_BULLET_CHARS,
    };
    bullets.iter().map(|bullet| counter.count_text(&shorten(bullet, keep)) + 2).min().unwrap_or(0)
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
## Errors and their fixes\n- E   AssertionError: 0.30 != 0.15 ← `Bash pytest -q` — unresolved\n\n\
## Decisions\n- The root cause is banker's rounding.\n\n\
## Current work and next step\n- The root cause is banker's rounding. Next I will run the tests."
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
        let counted = sections[ERRORS].iter().filter(|error| error.ends_with("fixed later, not shown")).count();
        assert_eq!(open + fixed + counted, sections[ERRORS].len());
        assert!(open == 6 || fixed == 0, "{open} open, {fixed} fixed:\n{text}");
        // Unresolved errors come first; fixed ones dropped for room are counted.
        assert!(sections[ERRORS].iter().take(open).all(|error| error.ends_with(UNRESOLVED)), "{text}");
        assert!(fixed + counted > 0 || open == sections[ERRORS].len());
    }

    #[test]
    fn errors_get_the_room_other_sections_leave_before_the_list_of_commands() {
        use crate::extract::{CommandRun, ErrorSeen};
        let mut facts = Facts::default();
        for index in 0..RECENT_COMMANDS {
            let command = format!("make target{index} {}", "--with-a-long-flag ".repeat(7));
            facts.commands.push(CommandRun { command, outcome: Outcome::Ok, message: index });
        }
        for index in 0..20 {
            facts.errors.push(ErrorSeen {
                tool: "Bash".into(),
                target: Some(format!("cc -c unit{index}.c")),
                first_line: format!("unit{index}.c:{index}: error: expected ';' before '}}' token"),
                message: index,
                fixed: false,
            });
        }
        let text = handoff(&facts, None, FirstRequest::InFacts, 700, &Chars4);
        assert!(Chars4.count_text(&text) <= 700);
        for index in 0..20 {
            assert!(
                text.contains(&format!("unit{index}.c:{index}: error: expected ';'")),
                "error {index} lost:\n{text}"
            );
        }
        assert!(parse_sections(&text).unwrap()[COMMANDS].len() < RECENT_COMMANDS, "the commands gave way:\n{text}");
    }

    #[test]
    fn open_errors_are_shortened_to_one_short_line_each_before_any_is_dropped() {
        use crate::extract::ErrorSeen;
        let facts = Facts {
            errors: (0..24)
                .map(|index| ErrorSeen {
                    tool: "Bash".into(),
                    target: Some(format!("ssh host{index} 'systemctl restart blocky && journalctl -u blocky -n 50'")),
                    first_line: format!(
                        "0 [main] bash ({index}) child_copy: cygheap read copy failed, 0x0..0x800020ef0, done 0, windows pid {index}, Win32 error 299"
                    ),
                    message: index,
                    fixed: false,
                })
                .collect(),
            ..Facts::default()
        };
        let text = handoff(&facts, None, FirstRequest::InFacts, 1_100, &Chars4);
        assert!(Chars4.count_text(&text) <= 1_100);
        let errors = &parse_sections(&text).unwrap()[ERRORS];
        assert_eq!(errors.len(), 24, "{text}");
        for (index, bullet) in errors.iter().enumerate() {
            assert!(bullet.starts_with(&format!("0 [main] bash ({index}) child_copy: cygheap read copy failed")));
            assert!(bullet.ends_with(" — unresolved") && bullet.chars().count() <= SHORT_ERROR_CHARS + 20, "{bullet}");
        }
    }

    #[test]
    fn only_the_newest_commands_are_listed_across_merges() {
        use crate::extract::CommandRun;
        let run =
            |index: usize| CommandRun { command: format!("make step{index}"), outcome: Outcome::Ok, message: index };
        let earlier = Facts { commands: (0..5).map(run).collect(), ..Facts::default() };
        let previous = handoff(&earlier, None, FirstRequest::InFacts, 10_000, &Chars4);
        assert_eq!(parse_sections(&previous).unwrap()[COMMANDS].len(), 5, "{previous}");
        let later = Facts { commands: (5..12).map(run).collect(), ..Facts::default() };
        let text = handoff(&later, Some(&previous), FirstRequest::InFacts, 10_000, &Chars4);
        let commands = &parse_sections(&text).unwrap()[COMMANDS];
        let expected: Vec<String> =
            (12 - RECENT_COMMANDS..12).map(|index| format!("`make step{index}` → ok")).collect();
        assert_eq!(commands, &expected, "{text}");
    }

    #[test]
    fn a_tight_budget_shortens_the_current_work_before_dropping_the_next_step() {
        let facts = Facts {
            last_assistant_text: Some(format!("The failing test reads a stale cache. {}", "More detail. ".repeat(45))),
            next_step: Some(format!("Next I will clear the cache in conftest.py. {}", "Then rerun. ".repeat(30))),
            ..Facts::default()
        };
        let whole = handoff(&facts, None, FirstRequest::InFacts, 10_000, &Chars4);
        let budget = 140;
        assert!(Chars4.count_text(&whole) > budget + 100, "{whole}");
        let text = handoff(&facts, None, FirstRequest::InFacts, budget, &Chars4);
        assert!(Chars4.count_text(&text) <= budget, "{text}");
        let current = &parse_sections(&text).unwrap()[CURRENT];
        assert!(current[0].starts_with("The failing test reads a stale cache."), "{text}");
        assert!(current.iter().any(|bullet| bullet.starts_with("Next: Next I will clear the cache")), "{text}");
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
        assert_eq!(sections[6], ["Next: Then open a PR."]);
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
