//! Shell commands: what a command line does to files, read from its text.
//!
//! [`shell`] classifies a command by its main step (the last of a `&&`/`;` chain that is
//! not a `cd`), for eviction; [`shell_changes`] lists every file any step writes, edits or
//! deletes, for the summary, whatever the command's length.

use super::{normalize_path, Action, ActionKind};

/// Classifies a shell command by its main step, e.g. `cd repo && sed -n '1,20p' a.py`
/// reads `a.py` (lines 1–20).
pub fn shell(command: &str) -> Action {
    let fallback = Action::new(ActionKind::Shell, Some(first_line(command)));
    let body = command.lines().next().unwrap_or("").trim();
    // A here-document writing a file: `cat <<'EOF' > f.py` or `cat > f.py <<EOF`.
    if body.contains("<<") {
        if let Some(target) = redirect_target(body) {
            return Action::new(ActionKind::FileWrite, Some(target));
        }
        return fallback;
    }
    let step = main_step(body);
    let first_stage = step.split('|').next().unwrap_or(step).trim();
    let words: Vec<&str> = first_stage.split_whitespace().collect();
    let Some(program) = words.first() else { return fallback };
    let operands: Vec<&str> = words[1..].iter().copied().filter(|word| !word.starts_with('-')).collect();
    match *program {
        "cat" | "nl" | "head" | "tail" | "less" | "more" => {
            if let Some(target) = redirect_target(step) {
                return Action::new(ActionKind::FileWrite, Some(target));
            }
            let range = step.split('|').nth(1).and_then(sed_print_range).or_else(|| head_tail_range(&words));
            match operands.last() {
                Some(file) if !file.contains('>') => {
                    Action::new(ActionKind::FileRead, Some(normalize_path(file))).with_range(range)
                }
                _ => fallback,
            }
        }
        "sed" => {
            if words.iter().any(|word| word.starts_with("-i")) {
                return match operands.last() {
                    Some(file) => Action::new(ActionKind::FileEdit, Some(normalize_path(file))),
                    None => fallback,
                };
            }
            match (sed_print_range(step), operands.last()) {
                (Some(range), Some(file)) if operands.len() >= 2 => {
                    Action::new(ActionKind::FileRead, Some(normalize_path(file))).with_range(Some(range))
                }
                _ => fallback,
            }
        }
        "grep" | "rg" | "ag" | "find" | "ls" | "fd" | "tree" | "git" if is_search(program, &words) => {
            Action::new(ActionKind::Search, Some(first_line(step)))
        }
        "echo" | "printf" | "tee" => match redirect_target(step)
            .or_else(|| (*program == "tee").then(|| operands.last().map(|f| normalize_path(f))).flatten())
        {
            Some(target) => Action::new(ActionKind::FileWrite, Some(target)),
            None => fallback,
        },
        "curl" | "wget" => Action::new(
            ActionKind::WebFetch,
            operands.iter().find(|word| word.starts_with("http")).map(|url| url.to_string()),
        ),
        _ => fallback,
    }
}

/// The step of a one-line shell command that decides what it does: the last step of a
/// `&&`/`;` chain that is not a `cd` (pipes are left in place, read left to right).
pub fn main_step(command: &str) -> &str {
    command
        .split("&&")
        .flat_map(|part| part.split(';'))
        .map(str::trim)
        .filter(|part| !part.is_empty() && !part.starts_with("cd "))
        .last()
        .unwrap_or(command)
}

fn is_search(program: &str, words: &[&str]) -> bool {
    program != "git" || matches!(words.get(1), Some(&"grep" | &"ls-files" | &"log"))
}

fn first_line(command: &str) -> String {
    crate::text::clip_chars(command.lines().next().unwrap_or("").trim(), 200)
}

/// The file a `>` or `>>` redirect writes to.
fn redirect_target(command: &str) -> Option<String> {
    let at = command.rfind('>')?;
    if command[..at].ends_with('2') || command[..at].ends_with('&') {
        return None;
    }
    let target = command[at + 1..].split_whitespace().next()?;
    (!target.is_empty() && !target.starts_with('&') && target != "/dev/null").then(|| normalize_path(target))
}

/// `sed -n '10,40p'` → `10-40`.
fn sed_print_range(command: &str) -> Option<String> {
    let command = command.trim();
    if !command.starts_with("sed") || !command.contains("-n") {
        return None;
    }
    let quoted = command.split(['\'', '"']).nth(1)?;
    let range = quoted.trim_end_matches('p').replace(',', "-");
    range.chars().all(|c| c.is_ascii_digit() || c == '-' || c == ';' || c == 'p').then_some(range)
}

fn head_tail_range(words: &[&str]) -> Option<String> {
    let program = words.first()?;
    if !matches!(*program, "head" | "tail") {
        return None;
    }
    let count = words
        .iter()
        .find_map(|word| word.strip_prefix('-').filter(|n| n.chars().all(|c| c.is_ascii_digit())))
        .or_else(|| words.iter().position(|word| *word == "-n").and_then(|at| words.get(at + 1).copied()))
        .unwrap_or("10");
    Some(format!("{program} {count}"))
}

/// A file a shell command changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellChange {
    /// The file.
    pub path: String,
    /// Written whole ([`ActionKind::FileWrite`]) or edited in place ([`ActionKind::FileEdit`]).
    pub kind: ActionKind,
    /// Whether the command deleted it.
    pub deleted: bool,
    /// The step that changed it, e.g. `cat <<'EOF' > x.py`.
    pub step: String,
}

/// Every file `command` writes, edits or deletes, in order: `>`/`>>` redirections, `tee`,
/// `touch`, `sed -i`, `cp`/`mv` targets, `rm`, and Python `open(…, 'w')` in the command or
/// its here-documents, in every step (`&&`, `||`, `;`, `|`, line ends).
pub fn shell_changes(command: &str) -> Vec<ShellChange> {
    let mut changes: Vec<ShellChange> = Vec::new();
    let mut add = |path: &str, kind, deleted, step: &str| {
        let path = normalize_path(path);
        let literal = !path.is_empty()
            && !path.starts_with("/dev/")
            && !path.starts_with('-')
            && !path.contains(['$', '*', '?', '{', '(', '<', '>', '&', '`']);
        if literal {
            let step = crate::text::clip_chars(step.trim(), 60);
            changes.push(ShellChange { path, kind, deleted, step });
        }
    };
    let mut body_end: Option<String> = None;
    for line in command.lines() {
        if let Some(end) = &body_end {
            if line.trim() == end {
                body_end = None;
            }
            for path in python_opened(line) {
                add(&path, ActionKind::FileWrite, false, line);
            }
            continue;
        }
        if let Some(at) = line.find("<<") {
            let word = line[at + 2..].trim_start_matches('-').split_whitespace().next().unwrap_or("");
            let word = word.trim_matches(|c| c == '\'' || c == '"');
            if !word.is_empty() {
                body_end = Some(word.to_string());
            }
        }
        for path in python_opened(line) {
            add(&path, ActionKind::FileWrite, false, line);
        }
        for step in unquoted_steps(line) {
            let words = raw_words(&step);
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            for (index, word) in words.iter().enumerate() {
                let target = match word.trim_start_matches(['1', '2', '&']) {
                    ">" | ">>" => words.get(index + 1).copied(),
                    other => {
                        other.strip_prefix(">>").or_else(|| other.strip_prefix('>')).filter(|rest| !rest.is_empty())
                    }
                };
                if let Some(target) = target.filter(|target| !target.starts_with('&')) {
                    add(unquote(target), ActionKind::FileWrite, false, &step);
                }
            }
            let program =
                words.iter().position(|word| !matches!(*word, "sudo" | "env" | "time") && !word.contains('='));
            let Some(program) = program else { continue };
            let operands: Vec<&str> = words[program + 1..]
                .iter()
                .copied()
                .take_while(|word| !word.starts_with('>') && !word.starts_with("2>"))
                .filter(|word| !word.starts_with('-'))
                .map(unquote)
                .collect();
            match words[program] {
                "tee" | "touch" => operands.iter().for_each(|path| add(path, ActionKind::FileWrite, false, &step)),
                "sed" if words.iter().any(|word| word.starts_with("-i")) => {
                    operands.iter().skip(1).for_each(|path| add(path, ActionKind::FileEdit, false, &step))
                }
                "cp" | "mv" if operands.len() >= 2 => {
                    add(operands[operands.len() - 1], ActionKind::FileWrite, false, &step)
                }
                "rm" => operands.iter().for_each(|path| add(path, ActionKind::FileEdit, true, &step)),
                _ => {}
            }
        }
    }
    changes
}

/// The words of a step, split at white space outside quotes, quotes kept.
fn raw_words(step: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    let mut quote = None;
    for c in step.chars() {
        match quote {
            Some(open) if c == open => quote = None,
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c.is_whitespace() => {
                words.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(word) = words.last_mut() {
            word.push(c);
        }
    }
    words.retain(|word| !word.is_empty());
    words
}

fn unquote(word: &str) -> &str {
    word.trim_matches(|c| c == '\'' || c == '"')
}

/// The steps of one line, split at `&&`, `||`, `;` and `|` outside quotes.
fn unquoted_steps(line: &str) -> Vec<String> {
    let mut steps = vec![String::new()];
    let mut quote = None;
    let mut previous = ' ';
    for c in line.chars() {
        match quote {
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == ';' || (c == '|' && previous != '>') || (c == '&' && previous == '&') => {
                let current = steps.last_mut().map(std::mem::take).unwrap_or_default();
                let current = current.trim_end_matches('&').to_string();
                steps.pop();
                steps.push(current);
                steps.push(String::new());
                previous = c;
                continue;
            }
            None => {}
        }
        if let Some(step) = steps.last_mut() {
            step.push(c);
        }
        previous = c;
    }
    steps.into_iter().map(|step| step.trim().to_string()).filter(|step| !step.is_empty()).collect()
}

/// Paths that Python code on `line` opens for writing: `open("x", "w")`.
fn python_opened(line: &str) -> Vec<String> {
    line.split("open(")
        .skip(1)
        .filter_map(|rest| {
            let rest = rest.trim_start();
            let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
            let (path, after) = rest[1..].split_once(quote)?;
            let mode = after.trim_start().strip_prefix(',')?.trim_start();
            let writes = mode.len() > 1 && mode[1..].starts_with(['w', 'a', 'x']);
            writes.then(|| path.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(command: &str) -> Vec<(String, bool)> {
        shell_changes(command).into_iter().map(|change| (change.path, change.deleted)).collect()
    }

    #[test]
    fn every_step_of_a_command() {
        let written = |paths: &[&str]| paths.iter().map(|path| (path.to_string(), false)).collect::<Vec<_>>();
        assert_eq!(changed("git init && echo \"# T\" > README.md"), written(&["README.md"]));
        assert_eq!(changed("cat <<'EOF' > x.py\nprint('a > b')\nEOF"), written(&["x.py"]));
        assert_eq!(changed("python -c \"open('o.txt', 'w').write('x')\""), written(&["o.txt"]));
        assert_eq!(changed("ls | tee -a log.txt; touch a.py"), written(&["log.txt", "a.py"]));
        assert_eq!(changed("sed -i 's/;/,/' src/a.py"), [("src/a.py".to_string(), false)]);
        assert_eq!(
            changed("cd /r && rm -f old.py tmp.py"),
            [("old.py".to_string(), true), ("tmp.py".to_string(), true)]
        );
        assert_eq!(changed("pytest 2>&1 | tail -3 > /dev/null"), []);
        assert_eq!(changed("grep -n 'x > 1' a.py"), []);
    }
}
