//! `contextfold convert`: read one format, write another, and say what the target lost.

use crate::args::ConvertArgs;
use crate::output;
use crate::progress::Progress;
use anyhow::bail;
use contextfold::core::format::lost::{Loss, LossKind};
use contextfold::core::format::Format;
use contextfold::core::{Block, ToolUse};
use contextfold::input::{self, Shown};
use serde::Serialize;
use serde_json::Value;
use std::process::ExitCode;

/// The `--json` report.
#[derive(Serialize)]
struct Report<'a> {
    file: String,
    from: &'static str,
    to: &'static str,
    output: String,
    lost: Vec<Lost>,
    notes: &'a [String],
}

/// One kind of loss: its `kind`, how many, and the sentence printed on standard error.
#[derive(Serialize)]
struct Lost {
    kind: LossKind,
    count: usize,
    text: String,
}

pub fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    if args.json && args.output.as_os_str() == "-" {
        bail!("--json prints the report on standard output; write the conversation elsewhere with -o FILE");
    }
    let shown = Shown(args.file.clone());
    let progress = Progress::start(&shown.to_string());
    let parsed = super::load_showing(&args.file, &args.input, Some(&progress))?;
    let target = args.to.format();
    if target == Format::Anthropic {
        // An OpenAI call whose `arguments` are not JSON has no Anthropic form.
        let unwritable: Vec<&ToolUse> = parsed
            .conversation
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .filter_map(|block| match block {
                Block::ToolUse(call) if !call.input.is_object() => Some(call),
                _ => None,
            })
            .collect();
        if let Some(call) = unwritable.first() {
            let what = match &call.input {
                Value::String(text) => format!("arguments that are not JSON (`{}`)", preview(text)),
                other => format!("arguments that are JSON but not an object (`{}`)", preview(&other.to_string())),
            };
            let more = match unwritable.len() {
                1 => String::new(),
                count => format!(" ({} more calls too)", count - 1),
            };
            bail!(
                "{shown}: tool call `{}` ({}) has {what}{more}, and the Anthropic format needs a JSON object; \
                 fix the arguments, or convert to openai",
                call.id,
                call.name
            );
        }
    }
    progress.phase("writing");
    let written = input::save(&args.output, &parsed.conversation, target, parsed.layout)?;
    drop(progress);
    let lost: Vec<Loss> = parsed.lost.iter().copied().chain(written).collect();
    for loss in &lost {
        eprintln!("{shown}: lost: {loss}");
    }
    if args.json {
        output::json_line(&Report {
            file: shown.to_string(),
            from: parsed.format.name(),
            to: target.name(),
            output: args.output.display().to_string(),
            lost: lost.iter().map(|loss| Lost { kind: loss.kind, count: loss.count, text: loss.to_string() }).collect(),
            notes: &parsed.notes,
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The first 60 characters of `text`.
fn preview(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(60).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}
