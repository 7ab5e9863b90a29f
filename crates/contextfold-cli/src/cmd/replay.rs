//! `contextfold replay`: strategies side by side on recorded sessions.

use super::compact::{compactor, inputs};
use crate::args::ReplayArgs;
use crate::output::{self, thousands};
use anyhow::{bail, Context};
use contextfold::redact::Redactor;
use contextfold::replay::{relate_to_none, replay, Price, ReplayConfig, StrategyResult};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

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
    let price = Price::parse(&args.price).map_err(anyhow::Error::msg)?;
    let files = inputs(&args.files)?;
    if files.is_empty() {
        bail!("no session files found");
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
    let counter = args.counting.tokenizer.memoized();
    let redact = compactor.summarizer().is_some() && !args.no_redact;
    let mut compactor = compactor.with_counter(Arc::new(counter));
    if redact {
        compactor = compactor.with_redactor(Redactor::default());
    }
    let jobs: Vec<(PathBuf, u64)> =
        files.iter().flat_map(|file| args.window.iter().map(move |window| (file.clone(), *window))).collect();
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(jobs.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
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
                    if let Some(bar) = &progress {
                        bar.set_message(file.display().to_string());
                    }
                    let config = ReplayConfig {
                        window: *window,
                        reserve: args.reserve,
                        strategies: strategies.clone(),
                        price,
                        cache: !args.no_cache,
                        counter,
                        compactor: compactor.clone(),
                        trigger: args.trigger,
                        target: args.target_fraction,
                    };
                    let outcome = replay_file(file, &config, &args, &runtime);
                    if let Some(bar) = &progress {
                        bar.inc(1);
                    }
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((index, outcome));
                }
            });
        }
    });
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(index, _)| *index);
    let mut failed = false;
    let mut per_file = Vec::new();
    for (_, outcome) in done {
        match outcome {
            Ok(result) => per_file.push(result),
            Err(err) => {
                eprintln!("contextfold: {err:#}");
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

fn replay_file(
    file: &Path,
    config: &ReplayConfig,
    args: &ReplayArgs,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<FileResult> {
    let parsed = contextfold::input::load(file, args.input.format)?;
    let shown = contextfold::input::Shown(file.to_path_buf()).to_string();
    let results = runtime
        .block_on(replay(&parsed.conversation, config))
        .map_err(anyhow::Error::msg)
        .with_context(|| shown.clone())?;
    Ok(FileResult { file: shown, window: config.window, results })
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

fn table(window: u64, files: usize, results: &[StrategyResult]) -> String {
    let mut out = format!("window {} tokens, {files} session(s)\n", thousands(window));
    out.push_str(&format!(
        "  {:<22} {:>10} {:>8} {:>10} {:>9} {:>11} {:>11} {:>10} {:>8}\n",
        "strategy", "cost $", "vs none", "peak", "overflow", "unavoidable", "compactions", "summarizer", "recall"
    ));
    for result in results {
        let recall = if result.probes == 0 { "-".to_string() } else { format!("{:.1}%", result.probe_recall * 100.0) };
        out.push_str(&format!(
            "  {:<22} {:>10.4} {:>8} {:>10} {:>9} {:>11} {:>11} {:>10} {:>8}\n",
            result.strategy,
            result.cost_usd,
            if result.cost_vs_none.is_nan() { "-".to_string() } else { format!("{:.3}", result.cost_vs_none) },
            thousands(result.peak_request_tokens),
            result.overflow_steps,
            result.unavoidable_overflow_steps,
            result.compactions,
            result.summarizer_calls,
            recall
        ));
    }
    out.push('\n');
    out
}

fn write_csv(path: &PathBuf, files: &[FileResult]) -> anyhow::Result<()> {
    let mut out = String::from(
        "file,window,strategy,steps,overflow_steps,peak_request_tokens,input_tokens,cache_read_tokens,cache_write_tokens,output_tokens,summarizer_calls,summarizer_input_tokens,summarizer_output_tokens,cost_usd,cost_vs_none,probes,probes_recalled,probe_recall,compactions,unavoidable_overflow_steps\n",
    );
    for file in files {
        for result in &file.results {
            let name = file.file.replace('"', "\"\"");
            out.push_str(&format!(
                "\"{name}\",{},{},{},{},{},{},{},{},{},{},{},{},{:.6},{:.4},{},{},{:.4},{},{}\n",
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
                result.unavoidable_overflow_steps
            ));
        }
    }
    std::fs::write(path, out).with_context(|| format!("{}: cannot write the CSV", path.display()))
}
