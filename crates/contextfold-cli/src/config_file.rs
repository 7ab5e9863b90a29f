//! `serve --config FILE` (and `wrap … --config FILE`): a TOML file of serve's flags, one
//! `key = value` each, named as the flags are (`max-body`, or `max_body`).
//!
//! Precedence is file < environment < flag: the file's values become flags placed before the
//! command line's, and a value is left out when the command line gives the flag or, for the
//! flags that read one, its environment variable is set (`CONTEXTFOLD_AUTH_TOKEN`,
//! `CONTEXTFOLD_STORE_URL`). Each value is checked by the same parser as the flag, so an
//! unknown key or a bad value is refused with the file, line and column, and what the flag
//! expects.

use crate::args::{Cli, STORE_VARIABLE};
use anyhow::bail;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory};
use std::ffi::OsString;
use std::path::Path;
use toml_edit::{Item, Value};

/// The flags whose value an environment variable gives when the command line does not.
const FROM_ENVIRONMENT: &[(&str, &str)] = &[("auth_token", "CONTEXTFOLD_AUTH_TOKEN"), ("store", STORE_VARIABLE)];

/// The command line `argv` with the values of the config file it names (if it runs `serve`
/// or `wrap` with `--config`) placed before its own flags. `argv` is returned unchanged when
/// it names no file, and when it does not parse (clap says why afterwards).
pub fn with_config(argv: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    let Ok(matches) = Cli::command().try_get_matches_from(&argv) else { return Ok(argv) };
    let Some((name, serve)) = matches.subcommand().filter(|(name, _)| matches!(*name, "serve" | "wrap")) else {
        return Ok(argv);
    };
    let Some(path) = serve.get_one::<std::path::PathBuf>("config") else { return Ok(argv) };
    let text = std::fs::read_to_string(path)
        .map_err(|err| anyhow::anyhow!("cannot read the config file {}: {err}", path.display()))?;
    let flags = flags(path, &text, serve)?;
    // The file's flags go right after the subcommand's name, before the command line's own.
    let at = argv.iter().skip(1).position(|arg| arg == name).map_or(argv.len(), |index| index + 2);
    let mut merged = argv[..at].to_vec();
    merged.extend(flags);
    merged.extend_from_slice(&argv[at..]);
    Ok(merged)
}

/// The flags `text` (the file at `path`) sets that neither the command line (`given`) nor the
/// environment does.
fn flags(path: &Path, text: &str, given: &ArgMatches) -> anyhow::Result<Vec<OsString>> {
    let document = toml_edit::Document::parse(text).map_err(|err| {
        let at = err.span().map_or(String::new(), |span| position(text, span.start));
        anyhow::anyhow!("{}{at}: not TOML: {}", path.display(), err.message())
    })?;
    let command = Cli::command();
    let serve = command.find_subcommand("serve").expect("the serve command");
    let mut flags = Vec::new();
    for (key, item) in document.as_table().iter() {
        let (key_span, item_span) =
            document.as_table().get_key_value(key).map_or((None, None), |(key, item)| (key.span(), item.span()));
        let here = |span: Option<std::ops::Range<usize>>| {
            format!("{}{}", path.display(), span.map_or(String::new(), |span| position(text, span.start)))
        };
        let id = key.replace('-', "_");
        let Some(arg) = serve.get_arguments().find(|arg| arg.get_id() == id.as_str() && arg.get_long().is_some())
        else {
            bail!("{}: unknown key `{key}`; a key is one of serve's flags: {}", here(key_span), names(serve));
        };
        if id == "config" || id == "help" {
            bail!("{}: `{key}` cannot be set in a config file", here(key_span));
        }
        let long = arg.get_long().unwrap_or(key);
        let environment = FROM_ENVIRONMENT.iter().find(|(flag, _)| *flag == id).map(|(_, variable)| variable);
        let from_environment =
            environment.is_some_and(|variable| std::env::var_os(variable).is_some_and(|v| !v.is_empty()));
        if given.value_source(&id) == Some(ValueSource::CommandLine) || from_environment {
            continue;
        }
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let optional_value = arg.get_num_args().is_some_and(|range| range.min_values() == 0);
        let words: Vec<String> = match (item, switch) {
            (Item::Value(Value::Boolean(on)), true) => {
                if *on.value() {
                    vec![format!("--{long}")]
                } else {
                    vec![]
                }
            }
            (Item::Value(Value::Boolean(on)), false) if optional_value => {
                if *on.value() {
                    vec![format!("--{long}")]
                } else {
                    vec![]
                }
            }
            (Item::Value(value), false) => match scalar(value) {
                Some(text) => vec![format!("--{long}"), text],
                None => bail!(
                    "{}: `{key}` takes one value (a string or a number), not {}",
                    here(item_span),
                    value.type_name()
                ),
            },
            (Item::Value(value), true) => {
                bail!(
                    "{}: `{key}` is a switch: write `{key} = true` or `false`, not {}",
                    here(item_span),
                    value.type_name()
                )
            }
            (other, _) => bail!("{}: `{key}` takes one value, not {}", here(item_span.or(key_span)), other.type_name()),
        };
        // The flag's own parser checks the value, as on the command line.
        let mut alone: Vec<OsString> = vec!["contextfold".into(), "serve".into()];
        alone.extend(words.iter().map(OsString::from));
        if let Err(err) = Cli::command().try_get_matches_from(alone) {
            let reason = err.to_string();
            let reason = reason.lines().next().unwrap_or_default().trim_start_matches("error: ");
            bail!("{}: bad value for `{key}`: {reason}", here(item_span));
        }
        flags.extend(words.into_iter().map(OsString::from));
    }
    Ok(flags)
}

/// A string as it is, a number as written in decimal.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.value().clone()),
        Value::Integer(number) => Some(number.value().to_string()),
        Value::Float(number) => Some(number.value().to_string()),
        _ => None,
    }
}

/// `:line:column` of the byte `offset` of `text`, both from 1.
fn position(text: &str, offset: usize) -> String {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    format!(":{line}:{column}")
}

/// The keys a config file may set.
fn names(serve: &clap::Command) -> String {
    let longs: Vec<&str> = serve
        .get_arguments()
        .filter_map(clap::Arg::get_long)
        .filter(|long| !matches!(*long, "config" | "help"))
        .collect();
    longs.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(position(text, 0), ":1:1");
        assert_eq!(position(text, 6), ":2:1");
        assert_eq!(position(text, text.find('=').unwrap()), ":1:3");
        assert_eq!(position(text, text.rfind('=').unwrap()), ":2:4");
        assert_eq!(position(text, 10_000), ":3:1");
    }
}
