//! `contextfold replay`: strategies side by side on recorded sessions.

use super::compact::{compactor, inputs};
use crate::args::{CorpusPart, ReplayArgs};
use crate::output::{self, thousands};
use anyhow::{bail, Context};
use contextfold::compactor::Target;
use contextfold::core::format::{self, Format, Layout};
use contextfold::core::tokens::TokenCounter;
use contextfold::core::Conversation;
use contextfold::redact::Redactor;
use contextfold::replay::held_back::Part;
use contextfold::replay::{probe_kinds, relate_to_none, replay_with, CallRecord, Price, ReplayConfig, StrategyResult};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One file's results at one window.
struct FileResult {
    file: String,
    window: u64,
    results: Vec<StrategyResult>,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    window: u64,
    files: usize,
    #[serde(flatten)]
    result: &'a StrategyResult,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let price = Price::parse(&args.price)?;
    // A window of 0, or a reserve that leaves nothing of one, is a usage error.
    for &window in &args.window {
        Target::Window { window, reserve: args.reserve, fraction: args.target_fraction }.check()?;
    }
    let mut files = inputs(&args.files)?;
    if files.is_empty() {
        bail!("no session files found");
    }
    if let Some(part) = args.part {
        let part = match part {
            CorpusPart::Tuning => Part::Tuning,
            CorpusPart::Checking => Part::Checking,
        };
        let all = files.len();
        files.retain(|file| Part::of(file) == part);
        eprintln!("replaying the {} part: {} of {all} session file(s)", part.name(), files.len());
        if files.is_empty() {
            bail!("no session file is in the {} part", part.name());
        }
    }
    let strategies: Vec<String> = match &args.strategies {
        Some(names) => names.clone(),
        None => contextfold::replay::strategies::STRATEGIES.iter().map(|name| name.to_string()).collect(),
    };
    for name in &strategies {
        if !contextfold::replay::strategies::STRATEGIES.contains(&name.as_str()) {
            bail!(
                "unknown strategy `{name}` (expected one of {})",
                contextfold::replay::strategies::STRATEGIES.join(", ")
            );
        }
    }
    let compactor = match compactor(&args.llm) {
        Ok(compactor) => compactor,
        Err(err) => return Err(err.context("cannot set up the summarizer")),
    };
    // Replay counts the same outputs many times over; remember their counts.
    let counter: Arc<dyn TokenCounter> = Arc::new(args.counting.tokenizer.memoized());
    let redact = compactor.summarizer().is_some() && !args.no_redact;
    let mut compactor = compactor.with_counter(Arc::clone(&counter));
    if redact {
        compactor = compactor.with_redactor(Redactor::default());
    }
    let jobs: Vec<(PathBuf, u64)> =
        files.iter().flat_map(|file| args.window.iter().map(move |window| (file.clone(), *window))).collect();
    let progress = std::io::stderr().is_terminal().then(|| Arc::new(Progress::new()));
    let next = Mutex::new(0usize);
    let done: Mutex<Vec<(usize, anyhow::Result<FileResult>)>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        done.lock().unwrap_or_else(|e| e.into_inner()).push((usize::MAX, Err(err.into())));
                        return;
                    }
                };
                loop {
                    let index = {
                        let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                        let index = *next;
                        *next += 1;
                        index
                    };
                    let Some((file, window)) = jobs.get(index) else { break };
                    let config = ReplayConfig {
                        window: *window,
                        reserve: args.reserve,
                        strategies: strategies.clone(),
                        price,
                        cache: !args.no_cache,
                        counter: Arc::clone(&counter),
                        compactor: compactor.clone(),
                        trigger: args.trigger,
                        target: args.target_fraction,
                        progress: progress
                            .clone()
                            .map(|progress| Arc::new(move || progress.tick()) as Arc<dyn Fn() + Send + Sync>),
                    };
                    let outcome = replay_file(file, &config, &args, &runtime, progress.as_deref());
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((index, outcome));
                }
            });
        }
    });
    if let Some(progress) = progress {
        progress.bar.finish_and_clear();
    }
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(index, _)| *index);
    let mut failed = false;
    let mut per_file = Vec::new();
    for (_, outcome) in done {
        match outcome {
            Ok(result) => per_file.push(result),
            Err(err) => {
                eprintln!("contextfold: {}", output::one_sentence(&err));
                failed = true;
            }
        }
    }
    if let Some(path) = &args.csv {
        write_csv(path, &per_file)?;
    }
    let mut out = String::new();
    let mut rows = Vec::new();
    let mut plotted = Vec::new();
    for window in &args.window {
        let mut totals: Vec<StrategyResult> = strategies
            .iter()
            .map(|name| StrategyResult { strategy: name.clone(), ..StrategyResult::default() })
            .collect();
        let mut count = 0;
        for file in per_file.iter().filter(|file| file.window == *window) {
            count += 1;
            for result in &file.results {
                if let Some(total) = totals.iter_mut().find(|total| total.strategy == result.strategy) {
                    total.add(result);
                }
            }
        }
        relate_to_none(&mut totals);
        if args.plot.is_some() {
            plotted.push((*window, count, totals.clone()));
        }
        if args.json {
            rows.extend(totals.into_iter().map(|result| (*window, count, result)));
        } else {
            out.push_str(&table(*window, count, &totals));
        }
    }
    if let Some(path) = &args.plot {
        write_plot(path, &per_file, &plotted, args.reserve)?;
    }
    if args.json {
        let json: Vec<JsonRow> =
            rows.iter().map(|(window, files, result)| JsonRow { window: *window, files: *files, result }).collect();
        output::print(&format!("{}\n", serde_json::to_string_pretty(&json)?))?;
    } else {
        output::print(&out)?;
    }
    Ok(super::exit(failed, ExitCode::SUCCESS))
}

/// A progress bar of calls replayed, drawn on standard error once a replay has run for a
/// second (a short one shows nothing).
struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: AtomicBool,
}

impl Progress {
    fn new() -> Progress {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} calls replayed {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress { bar, start: Instant::now(), shown: AtomicBool::new(false) }
    }

    fn tick(&self) {
        if self.start.elapsed() > Duration::from_secs(1) && !self.shown.swap(true, Ordering::Relaxed) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        self.bar.inc(1);
    }
}

fn replay_file(
    file: &Path,
    config: &ReplayConfig,
    args: &ReplayArgs,
    runtime: &tokio::runtime::Runtime,
    progress: Option<&Progress>,
) -> anyhow::Result<FileResult> {
    let parsed = contextfold::input::load_with(file, args.input.format, &super::read_options(&args.input))?;
    let shown = contextfold::input::Shown(file.to_path_buf()).to_string();
    if let Some(progress) = progress {
        let calls =
            parsed.conversation.messages.iter().skip(1).filter(|m| m.role == contextfold::core::Role::Assistant);
        progress.bar.inc_length((calls.count() * config.strategies.len()) as u64);
        progress.bar.set_message(file.file_name().map_or(shown.clone(), |name| name.to_string_lossy().into_owned()));
    }
    let mut dump = match &args.dump_requests {
        Some(dir) => Some(Dump::new(dir, config.window, file, &parsed)?),
        None => None,
    };
    let results = runtime
        .block_on(replay_with(&parsed.conversation, config, &mut |call| match &mut dump {
            Some(dump) => dump.call(call).map_err(Into::into),
            None => Ok(()),
        }))
        .with_context(|| shown.clone())?;
    if let Some(dump) = dump {
        dump.finish()?;
    }
    Ok(FileResult { file: shown, window: config.window, results })
}

/// `--dump-requests DIR`: every call of one file at one window, one JSON line each, in
/// `DIR/<window>/<strategy>/<stem>.jsonl`.
struct Dump {
    dir: PathBuf,
    stem: String,
    template: Conversation,
    format: Format,
    layout: Layout,
    files: HashMap<String, (PathBuf, BufWriter<std::fs::File>)>,
}

/// One line of a dump; the field names are a contract.
#[derive(Serialize)]
struct DumpLine {
    i: usize,
    messages: serde_json::Value,
    compacted: bool,
    summarizer_calls: usize,
    summarizer_input_tokens: u64,
    summarizer_output_tokens: u64,
}

impl Dump {
    fn new(dir: &Path, window: u64, file: &Path, parsed: &format::Parsed) -> anyhow::Result<Dump> {
        let template = Conversation {
            system: parsed.conversation.system.clone(),
            tools: parsed.conversation.tools.clone(),
            ..Conversation::default()
        };
        Ok(Dump {
            dir: dir.join(window.to_string()),
            stem: dump_stem(file),
            template,
            format: parsed.format.writable(),
            layout: parsed.layout,
            files: HashMap::new(),
        })
    }

    fn call(&mut self, call: &CallRecord) -> anyhow::Result<()> {
        let mut request = self.template.clone();
        request.messages = call.messages.to_vec();
        let value = format::to_value(&request, self.format, self.layout)?;
        let messages = match value {
            serde_json::Value::Array(messages) => serde_json::Value::Array(messages),
            mut object => object.get_mut("messages").map(serde_json::Value::take).unwrap_or_default(),
        };
        let line = DumpLine {
            i: call.i,
            messages,
            compacted: call.compacted,
            summarizer_calls: call.summarizer_calls,
            summarizer_input_tokens: call.summarizer_input_tokens,
            summarizer_output_tokens: call.summarizer_output_tokens,
        };
        let (path, out) = match self.files.entry(call.strategy.to_string()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let dir = self.dir.join(call.strategy);
                let path = dir.join(format!("{}.jsonl", self.stem));
                let file = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::File::create(&path))
                    .with_context(|| format!("{}: cannot write the request dump", path.display()))?;
                entry.insert((path, BufWriter::new(file)))
            }
        };
        let text = serde_json::to_string(&line)?;
        writeln!(out, "{text}").with_context(|| format!("{}: cannot write the request dump", path.display()))
    }

    fn finish(self) -> anyhow::Result<()> {
        for (path, mut out) in self.files.into_values() {
            out.flush().with_context(|| format!("{}: cannot write the request dump", path.display()))?;
        }
        Ok(())
    }
}

/// The file name without `.json`, `.json.gz`, `.jsonl` or `.jsonl.gz`.
fn dump_stem(file: &Path) -> String {
    let name = file.file_name().map_or_else(|| "stdin".to_string(), |name| name.to_string_lossy().into_owned());
    for suffix in [".json.gz", ".jsonl.gz", ".json", ".jsonl"] {
        if let Some(stem) = name.strip_suffix(suffix).filter(|stem| !stem.is_empty()) {
            return stem.to_string();
        }
    }
    name
}

/// The plot: the first file's series and the totals over all files, per window.
fn write_plot(
    path: &Path,
    files: &[FileResult],
    totals: &[(u64, usize, Vec<StrategyResult>)],
    reserve: u64,
) -> anyhow::Result<()> {
    let first = files.first().map_or("", |file| file.file.as_str());
    let windows: Vec<crate::plot::WindowPlot> = totals
        .iter()
        .map(|(window, count, totals)| crate::plot::WindowPlot {
            window: *window,
            series: files
                .iter()
                .find(|file| file.file == first && file.window == *window)
                .map_or(&[][..], |file| file.results.as_slice()),
            totals,
            files: *count,
        })
        .collect();
    crate::plot::write(path, first, reserve, &windows)
}

fn percent(checked: usize, share: f64) -> String {
    if checked == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", share * 100.0)
    }
}

fn table(window: u64, files: usize, results: &[StrategyResult]) -> String {
    let mut out = format!("window {} tokens, {files} session(s)\n", thousands(window));
    out.push_str(&format!(
        "  {:<22} {:>10} {:>8} {:>10} {:>9} {:>11} {:>11} {:>10} {:>8} {:>8} {:>7}\n",
        "strategy",
        "cost $",
        "vs none",
        "peak",
        "overflow",
        "unavoidable",
        "compactions",
        "summarizer",
        "recall",
        "extract",
        "rereads"
    ));
    for result in results {
        out.push_str(&format!(
            "  {:<22} {:>10.4} {:>8} {:>10} {:>9} {:>11} {:>11} {:>10} {:>8} {:>8} {:>7}\n",
            result.strategy,
            result.cost_usd,
            if result.cost_vs_none.is_nan() { "-".to_string() } else { format!("{:.3}", result.cost_vs_none) },
            thousands(result.peak_request_tokens),
            result.overflow_steps,
            result.unavoidable_overflow_steps,
            result.compactions,
            result.summarizer_calls,
            percent(result.probes, result.probe_recall),
            percent(result.extract_probes, result.extract_recall),
            result.rereads_after_evict,
        ));
    }
    // Recall by kind of the independent probes.
    out.push_str(&format!("  {:<22}", "recall by kind"));
    for kind in probe_kinds() {
        out.push_str(&format!(" {kind:>16}"));
    }
    out.push('\n');
    for result in results.iter().filter(|result| result.probes > 0) {
        out.push_str(&format!("  {:<22}", result.strategy));
        for kind in probe_kinds() {
            let (checked, recalled) = result.recall_by_kind.get(kind).copied().unwrap_or_default();
            let share = if checked == 0 { 1.0 } else { recalled as f64 / checked as f64 };
            out.push_str(&format!(" {:>16}", format!("{} of {}", percent(checked, share), checked)));
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

fn write_csv(path: &PathBuf, files: &[FileResult]) -> anyhow::Result<()> {
    let mut out = String::from(
        "file,window,strategy,steps,overflow_steps,peak_request_tokens,input_tokens,cache_read_tokens,cache_write_tokens,output_tokens,summarizer_calls,summarizer_input_tokens,summarizer_output_tokens,cost_usd,cost_vs_none,probes,probes_recalled,probe_recall,compactions,unavoidable_overflow_steps,extract_probes,extract_probes_recalled,extract_recall,rereads_after_evict,nested_summary_steps\n",
    );
    for file in files {
        for result in &file.results {
            let name = file.file.replace('"', "\"\"");
            out.push_str(&format!(
                "\"{name}\",{},{},{},{},{},{},{},{},{},{},{},{},{:.6},{:.4},{},{},{:.4},{},{},{},{},{:.4},{},{}\n",
                file.window,
                result.strategy,
                result.steps,
                result.overflow_steps,
                result.peak_request_tokens,
                result.input_tokens,
                result.cache_read_tokens,
                result.cache_write_tokens,
                result.output_tokens,
                result.summarizer_calls,
                result.summarizer_input_tokens,
                result.summarizer_output_tokens,
                result.cost_usd,
                result.cost_vs_none,
                result.probes,
                result.probes_recalled,
                result.probe_recall,
                result.compactions,
                result.unavoidable_overflow_steps,
                result.extract_probes,
                result.extract_probes_recalled,
                result.extract_recall,
                result.rereads_after_evict,
                result.nested_summary_steps
            ));
        }
    }
    std::fs::write(path, out).with_context(|| format!("{}: cannot write the CSV", path.display()))
}
