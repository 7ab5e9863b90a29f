//! Small helpers for what the commands print.

use contextfold::core::evict::is_evicted;
use contextfold::core::summary::{is_summary_message, SUMMARY_PREFIX};
use contextfold::core::{Block, Conversation};
use std::io::{self, Write};

/// `12345` as `12,345`.
pub fn thousands(n: u64) -> String {
    contextfold::core::tokens::Thousands(n).to_string()
}

/// `text` cut to its last `width` characters, an ellipsis first when cut (a file name's end
/// says the most); never splits a character.
pub fn last_chars(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let skip = count - width.saturating_sub(1);
    let start = text.char_indices().nth(skip).map_or(text.len(), |(at, _)| at);
    format!("…{}", &text[start..])
}

/// The error and its causes as one line, each said once: a cause whose text its parent
/// already holds (an error that prints its source) is left out. Every error the tool
/// prints goes through here.
pub fn one_sentence(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Prints one JSON value on its own line (JSON Lines).
pub fn json_line(value: &impl serde::Serialize) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    serde_json::to_writer(&mut stdout, value)?;
    stdout.write_all(b"\n")
}

/// Prints `text` to standard output.
pub fn print(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())
}

/// One line per message: index, role, block kinds.
pub fn shape(conversation: &Conversation) -> String {
    let mut out = String::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        let kinds: Vec<String> = message
            .content
            .iter()
            .map(|block| match block {
                Block::ToolUse(tool_use) => format!("tool_use {}", tool_use.name),
                Block::Text(text) if text.text.starts_with(SUMMARY_PREFIX) => "summary".to_string(),
                Block::ToolResult(result) if is_evicted(result) => "tool_result (offloaded)".to_string(),
                other => other.kind().to_string(),
            })
            .collect();
        let marker = if is_summary_message(message) { " ←" } else { "" };
        out.push_str(&format!("  {index:>3} {:<9} {}{marker}\n", message.role.as_str(), kinds.join(" · ")));
    }
    out
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn utc(seconds: u64) -> String {
    let (days, time) = (seconds / 86_400, seconds % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm), for dates from 1970 on.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", time / 3_600, time % 3_600 / 60, time % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn long_names_lose_their_start_by_whole_characters() {
        assert_eq!(last_chars("short.json", 60), "short.json");
        let name = "сессия-агента-с-очень-длинным-именем-файла-на-кириллице-номер-один.json";
        let shown = last_chars(name, 20);
        assert_eq!(shown.chars().count(), 20);
        assert!(shown.starts_with('…') && name.ends_with(&shown[shown.char_indices().nth(1).unwrap().0..]));
        assert_eq!(last_chars("日本語のファイル名", 4), "…イル名");
        assert_eq!(last_chars("日本語", 0), "…");
    }

    #[test]
    fn formats_utc_times() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_767_225_599), "2025-12-31 23:59:59");
    }
}
