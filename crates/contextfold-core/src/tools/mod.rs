//! Tool presets: what a tool call does, from its name and arguments.
//!
//! Eviction and extraction need to know that `Read {file_path}` and `cat src/lib.rs` both
//! read a file, and that `sed -i … f.py` edits one. [`classify`] maps a call to an
//! [`Action`] using the tool names of the agents we know (Claude Code, Codex, OpenHands,
//! SWE-agent, mini-swe-agent) and generic names; shell commands are parsed for the common
//! read, search, edit and write idioms. Unknown tools are [`ActionKind::Other`].

mod shell;

pub use shell::{main_step, shell, shell_changes, ShellChange};

use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// Which agent family's tool names to recognise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Preset {
    /// All of the below.
    #[default]
    Auto,
    /// Claude Code: Read, Write, Edit, MultiEdit, Grep, Glob, LS, Bash, WebFetch, WebSearch, …
    ClaudeCode,
    /// Codex: shell, exec_command, apply_patch.
    Codex,
    /// OpenHands: str_replace_editor, execute_bash, browser.
    OpenHands,
    /// SWE-agent and mini-swe-agent: bash commands and SWE-agent's own commands.
    SweAgent,
    /// Generic names: read_file, write_file, edit_file, grep, ripgrep, bash, shell, fetch, ….
    Generic,
}

/// A preset name that is not one of [`Preset`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown preset `{0}` (expected auto, claude-code, codex, openhands, swe-agent or generic)")]
pub struct UnknownPreset(pub String);

impl FromStr for Preset {
    type Err = UnknownPreset;

    fn from_str(name: &str) -> Result<Preset, UnknownPreset> {
        match name {
            "auto" => Ok(Preset::Auto),
            "claude-code" => Ok(Preset::ClaudeCode),
            "codex" => Ok(Preset::Codex),
            "openhands" => Ok(Preset::OpenHands),
            "swe-agent" => Ok(Preset::SweAgent),
            "generic" => Ok(Preset::Generic),
            other => Err(UnknownPreset(other.to_owned())),
        }
    }
}

/// What a tool call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ActionKind {
    /// Reads a file (or part of one).
    FileRead,
    /// Creates or overwrites a file.
    FileWrite,
    /// Edits a file in place.
    FileEdit,
    /// Searches files or the web.
    Search,
    /// Runs a shell command.
    Shell,
    /// Fetches a URL.
    WebFetch,
    /// Anything else.
    Other,
}

impl ActionKind {
    /// The name used in reports: `file_read`, `shell`, ….
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::FileRead => "file_read",
            ActionKind::FileWrite => "file_write",
            ActionKind::FileEdit => "file_edit",
            ActionKind::Search => "search",
            ActionKind::Shell => "shell",
            ActionKind::WebFetch => "web_fetch",
            ActionKind::Other => "other",
        }
    }

    /// Whether the action changes a file.
    pub fn changes_file(self) -> bool {
        matches!(self, ActionKind::FileWrite | ActionKind::FileEdit)
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A classified tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// What it does.
    pub kind: ActionKind,
    /// The file path, search pattern, command or URL it acts on.
    pub target: Option<String>,
    /// For a partial file read, which part (e.g. `10-40`), so only an equal read supersedes it.
    pub range: Option<String>,
}

impl Action {
    fn new(kind: ActionKind, target: Option<String>) -> Action {
        Action { kind, target, range: None }
    }

    fn with_range(mut self, range: Option<String>) -> Action {
        self.range = range;
        self
    }
}

fn string(input: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|key| input.get(*key).and_then(Value::as_str)).map(str::to_string)
}

fn path(input: &Value) -> Option<String> {
    string(input, &["file_path", "path", "filename", "file", "notebook_path", "target_file"])
        .map(|path| normalize_path(&path))
}

/// A path in a canonical spelling, so `./src/a.rs` and `src/a.rs` match.
pub fn normalize_path(path: &str) -> String {
    let path = path.trim().trim_matches(|c| c == '"' || c == '\'');
    let parts: Vec<&str> = path.split('/').filter(|part| !part.is_empty() && *part != ".").collect();
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else if joined.is_empty() {
        path.to_string()
    } else {
        joined
    }
}

/// Classifies a call to tool `name` with arguments `input` under `preset`.
pub fn classify(preset: Preset, name: &str, input: &Value) -> Action {
    let families: &[fn(&str, &Value) -> Option<Action>] = match preset {
        Preset::Auto => &[claude_code, codex, openhands, swe_agent, generic],
        Preset::ClaudeCode => &[claude_code, generic],
        Preset::Codex => &[codex, generic],
        Preset::OpenHands => &[openhands, generic],
        Preset::SweAgent => &[swe_agent, generic],
        Preset::Generic => &[generic],
    };
    families.iter().find_map(|family| family(name, input)).unwrap_or_else(|| Action::new(ActionKind::Other, None))
}

fn claude_code(name: &str, input: &Value) -> Option<Action> {
    let action = match name {
        "Read" | "NotebookRead" => {
            let range = match (input.get("offset").and_then(Value::as_u64), input.get("limit").and_then(Value::as_u64))
            {
                (None, None) => None,
                (offset, limit) => {
                    Some(format!("{}+{}", offset.unwrap_or(0), limit.map_or("all".to_string(), |l| l.to_string())))
                }
            };
            Action::new(ActionKind::FileRead, path(input)).with_range(range)
        }
        "Write" => Action::new(ActionKind::FileWrite, path(input)),
        "Edit" | "MultiEdit" | "NotebookEdit" => Action::new(ActionKind::FileEdit, path(input)),
        "Grep" | "Glob" | "LS" => Action::new(ActionKind::Search, string(input, &["pattern", "path"])),
        "WebSearch" => Action::new(ActionKind::Search, string(input, &["query"])),
        "WebFetch" => Action::new(ActionKind::WebFetch, string(input, &["url"])),
        "Bash" | "BashOutput" => return Some(shell(&string(input, &["command"]).unwrap_or_default())),
        _ => return None,
    };
    Some(action)
}

fn codex(name: &str, input: &Value) -> Option<Action> {
    match name {
        "shell" | "container.exec" | "local_shell" => {
            let command = match input.get("command") {
                Some(Value::Array(parts)) => {
                    let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
                    // `["bash", "-lc", "cat x"]` runs its last argument.
                    match parts.as_slice() {
                        [shell, flag, script] if shell.ends_with("sh") && flag.starts_with('-') => script.to_string(),
                        _ => parts.join(" "),
                    }
                }
                Some(Value::String(command)) => command.clone(),
                _ => String::new(),
            };
            Some(shell(&command))
        }
        // The unified exec tool: one command line in `cmd`.
        "exec_command" => Some(shell(&string(input, &["cmd"]).unwrap_or_default())),
        "apply_patch" => {
            let patch = string(input, &["input", "patch"]).unwrap_or_default();
            let target = patch.lines().find_map(|line| {
                ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
                    .iter()
                    .find_map(|prefix| line.strip_prefix(prefix))
                    .map(normalize_path)
            });
            let kind = if patch.contains("*** Add File: ") && !patch.contains("*** Update File: ") {
                ActionKind::FileWrite
            } else {
                ActionKind::FileEdit
            };
            Some(Action::new(kind, target))
        }
        _ => None,
    }
}

fn openhands(name: &str, input: &Value) -> Option<Action> {
    match name {
        "str_replace_editor" | "edit_file" if input.get("command").is_some() => {
            let kind = match input.get("command").and_then(Value::as_str) {
                Some("view") => ActionKind::FileRead,
                Some("create") => ActionKind::FileWrite,
                _ => ActionKind::FileEdit,
            };
            let range = input.get("view_range").map(|range| range.to_string());
            Some(Action::new(kind, path(input)).with_range(range))
        }
        "execute_bash" | "execute_ipython_cell" | "cmd_run" => {
            Some(shell(&string(input, &["command", "code"]).unwrap_or_default()))
        }
        "browser" | "web_read" => Some(Action::new(ActionKind::WebFetch, string(input, &["url", "code"]))),
        _ => None,
    }
}

fn swe_agent(name: &str, input: &Value) -> Option<Action> {
    match name {
        "bash" => {
            let command = string(input, &["command"]).unwrap_or_default();
            Some(swe_command(&command).unwrap_or_else(|| shell(&command)))
        }
        "open" | "goto" | "scroll_up" | "scroll_down" => Some(Action::new(ActionKind::FileRead, path(input))),
        "create" => Some(Action::new(ActionKind::FileWrite, path(input))),
        "edit" | "insert" => Some(Action::new(ActionKind::FileEdit, path(input))),
        "find_file" | "search_dir" | "search_file" => {
            Some(Action::new(ActionKind::Search, string(input, &["file_name", "search_term", "term"])))
        }
        _ => None,
    }
}

/// SWE-agent's own commands, typed into its bash tool (`open f.py`, `edit 1:3`, …).
fn swe_command(command: &str) -> Option<Action> {
    let mut words = command.split_whitespace();
    let first = words.next()?;
    let argument = words.next().map(normalize_path);
    let kind = match first {
        "open" | "goto" | "scroll_up" | "scroll_down" => ActionKind::FileRead,
        "create" => ActionKind::FileWrite,
        "edit" | "insert" => return Some(Action::new(ActionKind::FileEdit, None)),
        "find_file" | "search_dir" | "search_file" => ActionKind::Search,
        _ => return None,
    };
    Some(Action::new(kind, argument))
}

fn generic(name: &str, input: &Value) -> Option<Action> {
    let lower = name.to_ascii_lowercase();
    let kind = match lower.as_str() {
        "read_file" | "view_file" | "open_file" | "read" | "cat" | "view" => ActionKind::FileRead,
        "write_file" | "create_file" | "write" => ActionKind::FileWrite,
        "edit_file" | "replace_in_file" | "apply_diff" | "str_replace" | "edit" | "patch" => ActionKind::FileEdit,
        "grep" | "ripgrep" | "rg" | "search" | "search_files" | "find" | "glob" | "list_dir" | "list_files" | "ls" => {
            return Some(Action::new(ActionKind::Search, string(input, &["pattern", "query", "regex", "path"])));
        }
        "bash" | "shell" | "run" | "exec" | "terminal" | "run_command" | "execute_command" | "run_terminal_cmd" => {
            return Some(shell(&string(input, &["command", "cmd"]).unwrap_or_default()));
        }
        "fetch" | "web_fetch" | "http_get" | "browse" | "read_url" => {
            return Some(Action::new(ActionKind::WebFetch, string(input, &["url"])));
        }
        _ => return None,
    };
    Some(Action::new(kind, path(input)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(name: &str, input: Value, kind: ActionKind, target: Option<&str>, range: Option<&str>) {
        let action = classify(Preset::Auto, name, &input);
        assert_eq!(
            (action.kind, action.target.as_deref(), action.range.as_deref()),
            (kind, target, range),
            "{name} {input}"
        );
    }

    #[test]
    fn preset_names_parse_and_others_are_named() {
        assert_eq!("swe-agent".parse(), Ok(Preset::SweAgent));
        assert_eq!("auto".parse(), Ok(Preset::Auto));
        let err = "claude_code".parse::<Preset>().unwrap_err();
        assert_eq!(err, UnknownPreset("claude_code".into()));
        assert!(err.to_string().starts_with("unknown preset `claude_code` (expected auto, claude-code,"), "{err}");
    }

    #[test]
    fn agent_tools() {
        use ActionKind::*;
        check("Read", json!({"file_path": "/r/src/lib.rs"}), FileRead, Some("/r/src/lib.rs"), None);
        check("Read", json!({"file_path": "a.rs", "offset": 10, "limit": 20}), FileRead, Some("a.rs"), Some("10+20"));
        check("Write", json!({"file_path": "./a.rs", "content": "x"}), FileWrite, Some("a.rs"), None);
        check("MultiEdit", json!({"file_path": "a.rs", "edits": []}), FileEdit, Some("a.rs"), None);
        check("Grep", json!({"pattern": "TODO"}), Search, Some("TODO"), None);
        check("WebFetch", json!({"url": "https://x.dev"}), WebFetch, Some("https://x.dev"), None);
        check(
            "str_replace_editor",
            json!({"command": "view", "path": "/w/a.c", "view_range": [1, 20]}),
            FileRead,
            Some("/w/a.c"),
            Some("[1,20]"),
        );
        check(
            "str_replace_editor",
            json!({"command": "str_replace", "path": "/w/a.c"}),
            FileEdit,
            Some("/w/a.c"),
            None,
        );
        check("str_replace_editor", json!({"command": "create", "path": "/w/b.c"}), FileWrite, Some("/w/b.c"), None);
        check(
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: src/a.rs\n@@"}),
            FileEdit,
            Some("src/a.rs"),
            None,
        );
        check("shell", json!({"command": ["bash", "-lc", "cat src/a.rs"]}), FileRead, Some("src/a.rs"), None);
        check("exec_command", json!({"cmd": "sed -n '1,40p' src/a.rs"}), FileRead, Some("src/a.rs"), Some("1-40"));
        check("open", json!({"path": "setup.py"}), FileRead, Some("setup.py"), None);
        check("read_file", json!({"path": "x.md"}), FileRead, Some("x.md"), None);
        check("TodoWrite", json!({"todos": []}), Other, None, None);
        check("mystery", json!({}), Other, None, None);
    }

    #[test]
    fn shell_idioms() {
        use ActionKind::*;
        let bash = |command: &str| json!({ "command": command });
        check("bash", bash("cat django/db/models/query.py"), FileRead, Some("django/db/models/query.py"), None);
        check(
            "bash",
            bash("sed -n '152,170p' django/db/models/constraints.py"),
            FileRead,
            Some("django/db/models/constraints.py"),
            Some("152-170"),
        );
        check(
            "bash",
            bash("nl -ba sympy/printing/latex.py | sed -n '155,170p'"),
            FileRead,
            Some("sympy/printing/latex.py"),
            Some("155-170"),
        );
        check("bash", bash("head -n 50 a.py"), FileRead, Some("a.py"), Some("head 50"));
        check("bash", bash("sed -i 's/a/b/' django/forms/forms.py"), FileEdit, Some("django/forms/forms.py"), None);
        check("bash", bash("cat <<'EOF' > reproduce.py\nprint(1)\nEOF"), FileWrite, Some("reproduce.py"), None);
        check("bash", bash("cat > t.py <<EOF\nx\nEOF"), FileWrite, Some("t.py"), None);
        check(
            "bash",
            bash("grep -n \"class Token\" sympy/codegen/ast.py"),
            Search,
            Some("grep -n \"class Token\" sympy/codegen/ast.py"),
            None,
        );
        check(
            "bash",
            bash("cd /testbed && python reproduce.py"),
            Shell,
            Some("cd /testbed && python reproduce.py"),
            None,
        );
        check("bash", bash("cd /repo && cat ./a/b.py"), FileRead, Some("a/b.py"), None);
        check("bash", bash("python -m pytest 2>&1 | tail -5"), Shell, Some("python -m pytest 2>&1 | tail -5"), None);
        check("bash", bash("echo hi > notes.txt"), FileWrite, Some("notes.txt"), None);
        check("bash", bash("open src/marshmallow/fields.py"), FileRead, Some("src/marshmallow/fields.py"), None);
        check("Bash", bash("git grep -n DEFAULT -- tests"), Search, Some("git grep -n DEFAULT -- tests"), None);
        check("Bash", bash("git status"), Shell, Some("git status"), None);
    }
}
