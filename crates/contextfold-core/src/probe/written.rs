//! The paths a tool call wrote, read from its arguments alone: the probes' own reading, kept
//! apart from [`crate::tools`] so the summary's parser is not also its judge.
//!
//! Editor tools name their file (`file_path`, `path`; a patch names its files in `*** Add
//! File:`/`*** Update File:` and `+++ b/` lines). A shell command is split at unquoted `&&`,
//! `||`, `;`, `|` and line ends (here-document bodies skipped), and every step is read for
//! `>`/`>>` redirections, `tee`, `sed -i`, `touch`, `cp`/`mv` destinations, `patch`ed files,
//! and `open(…, 'w')` or `.write_text(` in Python code run by the command.

use crate::tools::normalize_path;
use serde_json::Value;

/// The tools that write the file named by their path argument, by name (any case).
const WRITING_TOOLS: [&str; 13] = [
    "write",
    "edit",
    "multiedit",
    "notebookedit",
    "create",
    "insert",
    "write_file",
    "create_file",
    "edit_file",
    "replace_in_file",
    "str_replace",
    "apply_diff",
    "patch",
];

/// The string keys that hold a shell command.
const COMMAND_KEYS: [&str; 3] = ["command", "cmd", "code"];

/// Every path the call of tool `name` with `input` created or modified, in order, each once.
pub fn written_paths(name: &str, input: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    let lower = name.to_ascii_lowercase();
    let path_argument = ["file_path", "path", "notebook_path", "filename", "target_file"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str));
    let editor_command = input.get("command").and_then(Value::as_str).filter(|_| lower.contains("editor"));
    if let Some(command) = editor_command {
        if command != "view" {
            paths.extend(path_argument.map(str::to_string));
        }
    } else if WRITING_TOOLS.contains(&lower.as_str()) {
        paths.extend(path_argument.map(str::to_string));
    }
    for value in input.as_object().into_iter().flat_map(|fields| fields.values()) {
        if let Some(text) = value.as_str() {
            paths.extend(patch_paths(text));
        }
    }
    if editor_command.is_none() {
        for key in COMMAND_KEYS {
            match input.get(key) {
                Some(Value::String(command)) => paths.extend(shell_paths(command)),
                Some(Value::Array(parts)) => {
                    let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
                    let script = match parts.as_slice() {
                        [shell, flag, script] if shell.ends_with("sh") && flag.starts_with('-') => script.to_string(),
                        _ => parts.join(" "),
                    };
                    paths.extend(shell_paths(&script));
                }
                _ => {}
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    paths
        .into_iter()
        .map(|path| normalize_path(&path))
        .filter(|path| plausible(path) && seen.insert(path.clone()))
        .collect()
}

/// Whether `path` names one file: no variables, globs or devices.
fn plausible(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with("/dev/")
        && !path.starts_with('&')
        && !path.starts_with('-')
        && !path.chars().any(|c| matches!(c, '$' | '*' | '?' | '{' | '}' | '(' | ')' | '<' | '>' | '`' | '\\'))
}

/// Files named by the headers of a patch in `text`.
fn patch_paths(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            ["*** Add File: ", "*** Update File: ", "+++ b/"]
                .iter()
                .find_map(|prefix| line.strip_prefix(prefix))
                .map(|path| path.trim().to_string())
        })
        .collect()
}

/// Every path a shell command writes.
pub fn shell_paths(command: &str) -> Vec<String> {
    let (steps, bodies) = split_steps(command);
    let mut paths = Vec::new();
    for step in &steps {
        paths.extend(step_paths(step));
    }
    for body in bodies.iter().chain(std::iter::once(&command.to_string())) {
        paths.extend(python_writes(body));
    }
    paths
}

/// One step's words, as the shell would see them (quotes removed), with each unquoted
/// redirection's target.
#[derive(Default)]
struct Step {
    words: Vec<String>,
    redirects: Vec<String>,
}

/// The steps of `command` and the bodies of its here-documents.
fn split_steps(command: &str) -> (Vec<Step>, Vec<String>) {
    let mut steps = Vec::new();
    let mut bodies = Vec::new();
    let mut lines = command.lines();
    let mut step = Step::default();
    while let Some(line) = lines.next() {
        let (line_steps, delimiters) = split_line(line, &mut step);
        steps.extend(line_steps);
        for delimiter in delimiters {
            let mut body = String::new();
            for body_line in lines.by_ref() {
                if body_line.trim() == delimiter {
                    break;
                }
                body.push_str(body_line);
                body.push('\n');
            }
            bodies.push(body);
        }
        steps.push(std::mem::take(&mut step));
    }
    steps.push(step);
    (steps.into_iter().filter(|step| !step.words.is_empty() || !step.redirects.is_empty()).collect(), bodies)
}

/// Splits one line into finished steps (the last one stays open in `step`), and returns the
/// delimiters of here-documents it opens.
fn split_line(line: &str, step: &mut Step) -> (Vec<Step>, Vec<String>) {
    let mut done = Vec::new();
    let mut delimiters = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut pending: Option<Pending> = None;
    let mut chars = line.chars().peekable();
    let finish_word =
        |word: &mut String, step: &mut Step, pending: &mut Option<Pending>, delimiters: &mut Vec<String>| {
            if word.is_empty() {
                return;
            }
            let text = std::mem::take(word);
            match pending.take() {
                Some(Pending::Redirect) => step.redirects.push(text),
                Some(Pending::HereDoc) => delimiters.push(text),
                None => step.words.push(text),
            }
        };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, ' ' | '\t') => finish_word(&mut word, step, &mut pending, &mut delimiters),
            (None, ';') => {
                finish_word(&mut word, step, &mut pending, &mut delimiters);
                done.push(std::mem::take(step));
            }
            (None, '&' | '|') => {
                finish_word(&mut word, step, &mut pending, &mut delimiters);
                if c == '&' && chars.peek() == Some(&'>') {
                    // `&>` redirects both streams to a file.
                    continue;
                }
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                done.push(std::mem::take(step));
            }
            (None, '<') => {
                finish_word(&mut word, step, &mut pending, &mut delimiters);
                if chars.peek() == Some(&'<') {
                    chars.next();
                    if chars.peek() == Some(&'-') {
                        chars.next();
                    }
                    pending = Some(Pending::HereDoc);
                }
            }
            (None, '>') => {
                // In `2> f` the `2` names a stream, not a word; `>&2` writes to a stream.
                if word == "2" || word == "1" {
                    word.clear();
                }
                finish_word(&mut word, step, &mut pending, &mut delimiters);
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                if chars.peek() == Some(&'&') {
                    chars.next();
                    while chars.peek().is_some_and(char::is_ascii_digit) {
                        chars.next();
                    }
                    continue;
                }
                pending = Some(Pending::Redirect);
            }
            (None, c) => word.push(c),
        }
    }
    finish_word(&mut word, step, &mut pending, &mut delimiters);
    (done, delimiters)
}

enum Pending {
    Redirect,
    HereDoc,
}

/// The paths one step writes: its redirections and the operands of writing programs.
fn step_paths(step: &Step) -> Vec<String> {
    let mut paths = step.redirects.clone();
    // `sudo`, `env` and the like run the next word.
    let words: Vec<&str> = step
        .words
        .iter()
        .map(String::as_str)
        .skip_while(|word| matches!(*word, "sudo" | "env" | "time" | "nohup" | "command") || word.contains('='))
        .collect();
    let Some((program, arguments)) = words.split_first() else { return paths };
    let operands: Vec<&str> = arguments.iter().copied().filter(|word| !word.starts_with('-')).collect();
    let program = program.rsplit('/').next().unwrap_or(program);
    match program {
        "tee" | "touch" => paths.extend(operands.iter().map(|word| word.to_string())),
        "sed" if arguments.iter().any(|word| word.starts_with("-i") || *word == "--in-place") => {
            // The script is the first operand unless given with -e.
            let scripted = arguments.contains(&"-e");
            paths.extend(operands.iter().skip(usize::from(!scripted)).map(|word| word.to_string()));
        }
        "cp" | "mv" | "install" | "ln" if operands.len() >= 2 => {
            paths.extend(operands.last().map(|word| word.to_string()));
        }
        "patch" => {
            // `patch FILE < diff` names the file; otherwise the diff's headers do.
            paths.extend(operands.first().map(|word| word.to_string()));
        }
        _ => {}
    }
    paths
}

/// Files that Python code in `text` opens for writing or writes with `write_text`.
fn python_writes(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (at, _) in text.match_indices("open(") {
        let rest = &text[at + "open(".len()..];
        let Some((path, after)) = quoted(rest) else { continue };
        let mode = after.trim_start().strip_prefix(',').map(str::trim_start).and_then(quoted);
        if let Some((mode, _)) = mode {
            if mode.contains('w') || mode.contains('a') || mode.contains('x') {
                paths.push(path.to_string());
            }
        }
    }
    for (at, _) in text.match_indices(".write_text(").chain(text.match_indices(".write_bytes(")) {
        let before = &text[..at];
        if let Some(open) = before.rfind("Path(") {
            if let Some((path, _)) = quoted(&before[open + "Path(".len()..]) {
                paths.push(path.to_string());
            }
        }
    }
    paths
}

/// The string literal `text` starts with, and what follows it.
fn quoted(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &text[1..];
    let end = body.find(quote)?;
    Some((&body[..end], &body[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(command: &str) -> Vec<String> {
        written_paths("bash", &json!({ "command": command }))
    }

    #[test]
    fn shell_writes_anywhere_in_a_command() {
        assert_eq!(bash("git init && echo \"# Title\" > README.md"), ["README.md"]);
        assert_eq!(
            bash("cd /repo; printf 'x' >> notes.txt | tee -a log.txt out.txt"),
            ["notes.txt", "log.txt", "out.txt"]
        );
        assert_eq!(bash("sed -i 's/a > b/c/' src/a.py src/b.py"), ["src/a.py", "src/b.py"]);
        assert_eq!(bash("touch ./new.py && cp a.py backup/a.py"), ["new.py", "backup/a.py"]);
        assert_eq!(bash("cat <<'EOF' > repro.py\nprint('a > b')\nEOF\npython repro.py"), ["repro.py"]);
        assert_eq!(bash("python -c \"open('out.txt', 'w').write('x')\""), ["out.txt"]);
        assert_eq!(bash("python - <<EOF\nfrom pathlib import Path\nPath('cfg.ini').write_text('x')\nEOF"), ["cfg.ini"]);
        assert_eq!(bash("pytest -q 2>&1 | tail -5"), Vec::<String>::new());
        assert_eq!(bash("make > /dev/null 2> err.log"), ["err.log"]);
        assert_eq!(bash("echo \"$X\" > \"$OUT\""), Vec::<String>::new());
        assert_eq!(bash("grep -n 'a >' b.py"), Vec::<String>::new());
    }

    #[test]
    fn editor_tools_and_patches() {
        assert_eq!(written_paths("Write", &json!({"file_path": "./a.rs", "content": "x"})), ["a.rs"]);
        assert_eq!(written_paths("Read", &json!({"file_path": "a.rs"})), Vec::<String>::new());
        assert_eq!(
            written_paths("str_replace_editor", &json!({"command": "view", "path": "/w/a.c"})),
            Vec::<String>::new()
        );
        assert_eq!(written_paths("str_replace_editor", &json!({"command": "create", "path": "/w/b.c"})), ["/w/b.c"]);
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n*** Add File: src/b.rs\n+x";
        assert_eq!(written_paths("apply_patch", &json!({ "input": patch })), ["src/a.rs", "src/b.rs"]);
        assert_eq!(bash("git apply <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@\nEOF"), ["x.py"]);
    }
}
