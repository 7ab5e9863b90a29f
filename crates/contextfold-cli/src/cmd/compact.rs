//! `contextfold compact`: compact files to a budget, with a report.

use super::store::Persist;
use crate::args::{CompactArgs, CutArgs, LlmArgs, TargetArgs};
use crate::output::{self, thousands};
use anyhow::{bail, Context};
use contextfold::compactor::{
    ClipLimit, CompactConfig, CompactError, CompactionReport, Compactor, ConfigError, Strategy, Target, Undersized,
};
use contextfold::core::evict::EvictConfig;
use contextfold::core::plan::PlanConfig;
use contextfold::core::prompt::Instructions;
use contextfold::input::{self, Shown};
use contextfold::store::Origin;
use contextfold::summarize::Summarizer;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

impl TargetArgs {
    /// The target these arguments ask for: `--budget`, a share of `--window`, or half the input.
    pub fn target(&self) -> Target {
        match (self.budget, self.window) {
            (Some(budget), _) => Target::Budget(budget),
            (None, Some(window)) => Target::Window { window, reserve: self.reserve, fraction: self.target_fraction },
            (None, None) => Target::Shrink(0.5),
        }
    }
}

impl CutArgs {
    /// The compaction configuration for `target` with these tail and summary limits.
    pub fn config(&self, target: &TargetArgs) -> CompactConfig {
        let defaults = CompactConfig::default();
        CompactConfig {
            target: target.target(),
            plan: PlanConfig {
                keep_turns: self.keep_turns,
                max_tail_tokens: self.max_tail_tokens,
                ..defaults.plan.clone()
            },
            summary_tokens: self.summary_tokens,
            // A size the user asked for that no summary fits is an error naming the smallest
            // that works; the default (half the input) is raised to it instead, with a note.
            undersized: match target.target() {
                Target::Shrink(_) => Undersized::Raise,
                _ => Undersized::Fail,
            },
            ..defaults
        }
    }
}

impl CompactArgs {
    /// The library configuration these arguments ask for; a usage error when they
    /// contradict each other (a budget or window of 0, a reserve not below the window).
    fn config(&self) -> Result<CompactConfig, ConfigError> {
        let base = self.cut.config(&self.target);
        let config = CompactConfig {
            strategy: self.strategy,
            instructions: Instructions { language: self.language.clone(), focus: self.focus.clone() },
            evict: EvictConfig { recall_tool: self.persist.recall_tool_name(), ..base.evict.clone() },
            max_tool_output: match self.max_tool_output {
                _ if self.no_clip => ClipLimit::Off,
                None => ClipLimit::Auto,
                // The old spelling of --no-clip.
                Some(0) => ClipLimit::Off,
                Some(tokens) => ClipLimit::Tokens(tokens),
            },
            ..base
        };
        config.check()?;
        Ok(config)
    }
}

/// A compactor with the summarizer `llm.summarizer` names (`extractive`, `anthropic[:MODEL]`,
/// `openai[:MODEL]`).
pub fn compactor(llm: &LlmArgs) -> anyhow::Result<Compactor> {
    let (name, model) = match llm.summarizer.split_once(':') {
        Some((name, model)) => (name, Some(model)),
        None => (llm.summarizer.as_str(), None),
    };
    // The two builders share their setters; a macro applies the flags to either.
    macro_rules! configure {
        ($builder:expr) => {{
            let mut builder = $builder;
            if let Some(model) = model {
                builder = builder.model(model);
            }
            if let Some(url) = &llm.base_url {
                builder = builder.base_url(url.as_str());
            }
            if let Some(retries) = llm.max_retries {
                builder = builder.max_retries(retries);
            }
            if let Some(seconds) = llm.timeout {
                builder = builder.timeout(std::time::Duration::from_secs(seconds));
            }
            let model: Arc<dyn Summarizer> = Arc::new(builder.build()?);
            Compactor::new(model)
        }};
    }
    Ok(match name {
        "extractive" => Compactor::default(),
        "anthropic" => configure!(contextfold::summarize::http::Anthropic::from_env()),
        "openai" => configure!(contextfold::summarize::http::OpenAiCompatible::from_env()),
        other => bail!("unknown summarizer `{other}` (expected extractive, anthropic[:MODEL] or openai[:MODEL])"),
    })
}

/// The input files: files as given, directories expanded to their conversation files.
pub fn inputs(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("{}: cannot list the directory", path.display()))?
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|file| {
                    let name = file.file_name().and_then(|name| name.to_str()).unwrap_or("");
                    file.is_file()
                        && [".json", ".json.gz", ".jsonl", ".jsonl.gz"].iter().any(|ext| name.ends_with(ext))
                        && name != "manifest.json"
                })
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

#[derive(Serialize)]
struct JsonReport<'a> {
    file: String,
    #[serde(flatten)]
    report: &'a CompactionReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    /// The stored session, with `--store`.
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
}

pub fn run(args: CompactArgs) -> anyhow::Result<ExitCode> {
    let files = inputs(&args.files)?;
    if files.is_empty() {
        bail!(
            "no conversation files found in {}",
            args.files.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    // A directory is a batch however many files it holds: a table of reports, outputs in
    // --out-dir.
    let batch = !files_is_single(&args);
    let count = if files.len() == 1 { "1 file".to_string() } else { format!("{} files", files.len()) };
    if args.output.is_some() && batch {
        bail!("-o takes one input file (got {count}); use --out-dir DIR for several or a directory");
    }
    if batch && args.out_dir.is_none() && !args.dry_run && !args.json {
        bail!("compacting {count} needs --out-dir DIR (or --dry-run, or --json for reports only)");
    }
    if args.dry_run && args.persist.store.is_some() {
        bail!("--dry-run writes nothing; it cannot be used with --store");
    }
    let config = args.config()?;
    let persist = args.persist.open(files.len())?;
    let mut notes = Vec::new();
    let known = ["extractive", "anthropic", "openai"];
    let name = args.llm.summarizer.split(':').next().unwrap_or("");
    if !known.contains(&name) {
        bail!(
            "unknown summarizer `{}` (expected extractive, anthropic[:MODEL] or openai[:MODEL])",
            args.llm.summarizer
        );
    }
    let compactor = match compactor(&args.llm) {
        Ok(compactor) => compactor,
        Err(err) if args.strategy == Strategy::Auto && name != "extractive" => {
            let note = format!("{}; using the extractive summarizer instead", output::one_sentence(&err));
            eprintln!("contextfold: warning: {note}");
            notes.push(note);
            Compactor::default()
        }
        Err(err) => return Err(err.context("cannot set up the summarizer")),
    };
    let redactor = args.persist.redactor(compactor.summarizer().is_some());
    let mut compactor = compactor.with_counter(args.counting.tokenizer.shared());
    if let Some(redactor) = redactor {
        compactor = compactor.with_redactor(redactor);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let progress = (batch && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(files.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let mut rows = Vec::new();
    let mut failed = false;
    for file in &files {
        if let Some(bar) = &progress {
            bar.set_message(file.display().to_string());
        }
        match compact_one(file, &args, &compactor, &config, &runtime, &notes, persist.as_ref()) {
            Ok(row) => rows.push(row),
            Err(err) => {
                let message = format!("contextfold: {}", output::one_sentence(&err));
                match &progress {
                    Some(bar) => bar.println(message),
                    None => eprintln!("{message}"),
                }
                failed = true;
            }
        }
        if let Some(bar) = &progress {
            bar.inc(1);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if batch && !args.json {
        output::print(&table(&rows))?;
    }
    Ok(super::exit(failed, ExitCode::SUCCESS))
}

/// One line of the final table.
struct Row {
    file: String,
    report: CompactionReport,
}

fn compact_one(
    file: &Path,
    args: &CompactArgs,
    compactor: &Compactor,
    config: &CompactConfig,
    runtime: &tokio::runtime::Runtime,
    notes: &[String],
    persist: Option<&Persist>,
) -> anyhow::Result<Row> {
    let parsed = super::load(file, &args.input)?;
    let shown = Shown(file.to_path_buf()).to_string();
    // With a store, the compactor keeps the compaction, with the input's origin, in the
    // file's session.
    let recording = persist.map(|persist| persist.session_for(file)).transpose()?;
    let compactor = match (persist, &recording) {
        (Some(persist), Some(recording)) => compactor
            .clone()
            .with_store(persist.store(), recording.session.clone())
            .with_origin(Origin::new(&parsed.conversation, parsed.format, parsed.layout)),
        _ => compactor.clone(),
    };
    let compacted = match (runtime.block_on(compactor.compact(&parsed.conversation, config)), persist, &recording) {
        (Ok(compacted), _, _) => compacted,
        (Err(CompactError::Store { source, .. }), Some(persist), Some(recording)) => {
            return Err(persist.failed(recording, source).context(shown));
        }
        (Err(err), persist, recording) => {
            if let (Some(persist), Some(recording)) = (persist, recording) {
                persist.forget(recording);
            }
            return Err(anyhow::Error::new(err).context(shown));
        }
    };
    let mut report = compacted.report;
    report.notes.extend(notes.iter().cloned());
    if args.strategy == Strategy::Summarize {
        if let Some(fallback) = report.summarizer_fell_back() {
            if let (Some(persist), Some(recording)) = (persist, &recording) {
                persist.forget(recording);
            }
            bail!("{shown}: the {} summarizer failed: {}", fallback.from(), fallback.reason());
        }
    }
    let session = recording.map(|recording| recording.session);
    let destination: Option<PathBuf> = match (&args.output, &args.out_dir) {
        _ if args.dry_run => None,
        (Some(path), _) => Some(path.clone()),
        (None, Some(dir)) => {
            std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create the directory", dir.display()))?;
            Some(dir.join(file.file_name().unwrap_or(file.as_os_str())))
        }
        (None, None) if args.json || std::io::stdout().is_terminal() => None,
        (None, None) => Some(PathBuf::from("-")),
    };
    if let Some(path) = &destination {
        input::save(path, &compacted.conversation, parsed.format.writable(), parsed.layout)?;
    }
    if args.json {
        output::json_line(&JsonReport {
            file: shown.clone(),
            report: &report,
            output: destination.as_ref().map(|path| Shown(path.clone()).to_string()),
            session,
        })?;
    } else if files_is_single(args) {
        let mut line = summary_line(&shown, &report);
        if let Some(session) = &session {
            line.push_str(&format!("\n  stored as session {session}"));
        }
        if destination.as_deref().is_some_and(|path| path.as_os_str() == "-") {
            eprintln!("{line}");
        } else {
            let mut out = format!("{line}\n");
            if destination.is_none() && !args.dry_run {
                out.push_str(&output::shape(&compacted.conversation));
                out.push_str("(write the conversation with -o FILE, or redirect standard output)\n");
            }
            output::print(&out)?;
        }
    }
    Ok(Row { file: shown, report })
}

fn files_is_single(args: &CompactArgs) -> bool {
    args.files.len() == 1 && !args.files[0].is_dir()
}

fn summary_line(file: &str, report: &CompactionReport) -> String {
    let mut parts = vec![format!(
        "{file}: {} → {} tokens (target {}; {})",
        thousands(report.tokens_before),
        thousands(report.tokens_after),
        thousands(report.target_tokens),
        report.strategy_used
    )];
    if report.offloaded > 0 {
        parts.push(format!("{} tool outputs offloaded", report.offloaded));
    }
    if report.messages_folded > 0 {
        parts.push(format!(
            "{} messages folded into a {}-token summary{}",
            report.messages_folded,
            thousands(report.summary_tokens),
            if report.cache_hit { " (cached)" } else { "" }
        ));
    }
    if !report.clipped.is_empty() {
        parts.push(format!("{} outputs clipped", report.clipped.len()));
    }
    let mut line = parts.join("; ");
    for fallback in &report.fallbacks {
        line.push_str(&format!("\n  fallback: {} → {}: {}", fallback.from(), fallback.to(), fallback.reason()));
    }
    for note in &report.notes {
        line.push_str(&format!("\n  note: {note}"));
    }
    line
}

fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|row| row.file.chars().count()).max().unwrap_or(4).clamp(4, 60);
    let mut out = format!(
        "{:<width$}  {:>10}  {:>10}  {:>10}  {:<24}  {:>9}  {:>6}\n",
        "file", "before", "after", "target", "strategy", "offloaded", "folded"
    );
    let (mut before, mut after) = (0, 0);
    for row in rows {
        let report = &row.report;
        let file = output::last_chars(&row.file, width);
        out.push_str(&format!(
            "{file:<width$}  {:>10}  {:>10}  {:>10}  {:<24}  {:>9}  {:>6}\n",
            thousands(report.tokens_before),
            thousands(report.tokens_after),
            thousands(report.target_tokens),
            report.strategy_used,
            report.offloaded,
            report.messages_folded
        ));
        before += report.tokens_before;
        after += report.tokens_after;
    }
    out.push_str(&format!(
        "{:<width$}  {:>10}  {:>10}\n",
        if rows.len() == 1 { "1 file".to_string() } else { format!("{} files", rows.len()) },
        thousands(before),
        thousands(after)
    ));
    out
}
