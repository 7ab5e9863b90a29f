//! `contextfold validate`: check the provider's rules, optionally repair.

use crate::args::ValidateArgs;
use crate::output;
use crate::progress::Progress;
use contextfold::core::format::{responses, Format};
use contextfold::core::stats::ProblemView;
use contextfold::core::validate::warnings;
use contextfold::core::{repair, validate, Conversation, Problem};
use contextfold::input::{self, Shown};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Serialize)]
struct Report<'a> {
    file: String,
    valid: bool,
    problems: Vec<ProblemView>,
    warnings: Vec<ProblemView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fixes: Option<Vec<String>>,
    notes: &'a [String],
}

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    if args.repair && args.files.len() > 1 {
        anyhow::bail!("--repair takes one input file (got {})", args.files.len());
    }
    let mut failed = false;
    let mut invalid = false;
    for path in &args.files {
        let shown = Shown(path.clone());
        let progress = Progress::start(&shown.to_string());
        let mut parsed = match super::load_showing(path, &args.input, Some(&progress)) {
            Ok(parsed) => parsed,
            Err(err) => {
                eprintln!("contextfold: {err}");
                failed = true;
                continue;
            }
        };
        progress.phase("validating");
        let mut problems = problems_of(parsed.format, &parsed.conversation);
        let warnings = warnings(&parsed.conversation);
        let mut fixes = None;
        if args.repair {
            let applied = repair(&mut parsed.conversation);
            problems = problems_of(parsed.format, &parsed.conversation);
            if let Some(out) = &args.output {
                input::save(out, &parsed.conversation, parsed.format.writable(), parsed.layout)?;
            }
            fixes = Some(applied.iter().map(ToString::to_string).collect::<Vec<_>>());
        }
        drop(progress);
        invalid |= !problems.is_empty();
        if args.json {
            output::json_line(&Report {
                file: shown.to_string(),
                valid: problems.is_empty(),
                problems: problems.iter().map(ProblemView::from).collect(),
                warnings: warnings.iter().map(ProblemView::from).collect(),
                fixes,
                notes: &parsed.notes,
            })?;
            continue;
        }
        // With the repaired conversation on stdout, the report goes to stderr.
        let mut report = String::new();
        for fix in fixes.iter().flatten() {
            report.push_str(&format!("{shown}: fixed: {fix}\n"));
        }
        for warning in &warnings {
            report.push_str(&format!("{shown}: warning: {warning}\n"));
        }
        if problems.is_empty() {
            report.push_str(&format!("{shown}: valid\n"));
        } else {
            report.push_str(&format!("{shown}: {} problem(s)\n", problems.len()));
            for problem in &problems {
                report.push_str(&format!("  {problem}\n"));
            }
        }
        if args.output.as_deref().is_some_and(|out| out.as_os_str() == "-") {
            eprint!("{report}");
        } else {
            output::print(&report)?;
        }
    }
    let code = if invalid { ExitCode::from(1) } else { ExitCode::SUCCESS };
    Ok(super::exit(failed, code))
}

/// The provider's rules for `format`: a Responses request also needs every call answered
/// and each reasoning item followed by its call, and its problems name the input item.
fn problems_of(format: Format, conversation: &Conversation) -> Vec<Problem> {
    match format {
        Format::Responses => responses::check(conversation),
        _ => validate(conversation),
    }
}
