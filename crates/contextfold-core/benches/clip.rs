//! Benchmarks of clipping one huge tool output: a 10 MB line-oriented log and a 10 MB
//! single-line minified JSON array and 10 MB of one line of words, clipped to 2,000 tokens with the calibrated estimator
//! (the default counter) and, for comparison, exact o200k.

use contextfold_core::clip::{clip_text, ClipConfig};
use contextfold_core::tokens::{Estimate, TokenCounter};
use contextfold_core::tools::ActionKind;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

const SIZE: usize = 10_000_000;

/// About 10 MB of build-log lines.
fn log() -> String {
    let mut text = String::with_capacity(SIZE + 200);
    let mut line = 0u64;
    while text.len() < SIZE {
        text.push_str(&format!(
            "2024-05-01T12:{:02}:{:02}Z INFO  compiling crate_{line} v0.{}.{} (/src/crates/crate_{line}) in {}ms\n",
            line / 60 % 60,
            line % 60,
            line % 7,
            line % 13,
            line * 37 % 1000
        ));
        line += 1;
    }
    text
}

/// About 10 MB of one-line JSON: an array of small objects.
fn minified_json() -> String {
    let mut text = String::with_capacity(SIZE + 200);
    text.push('[');
    let mut id = 0u64;
    while text.len() < SIZE {
        if id > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            r#"{{"id":{id},"name":"item {id}","tags":["a","b"],"price":{}.{:02},"active":{}}}"#,
            id % 1000,
            id % 100,
            id.is_multiple_of(2)
        ));
        id += 1;
    }
    text.push(']');
    text
}

/// About 10 MB of one line of words, no newline.
fn giant_line() -> String {
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
    let mut text = String::with_capacity(SIZE + 16);
    let mut index = 0;
    while text.len() < SIZE {
        text.push_str(words[index % words.len()]);
        text.push(' ');
        index += 3;
    }
    text
}

fn benches(c: &mut Criterion) {
    let config = ClipConfig::new(2_000);
    let inputs = [("log_10mb", log()), ("minified_json_10mb", minified_json()), ("one_line_10mb", giant_line())];
    let mut counters: Vec<&'static dyn TokenCounter> = vec![&Estimate];
    #[cfg(feature = "bpe")]
    counters.push(contextfold_core::tokens::Tokenizer::O200k.counter());
    let mut group = c.benchmark_group("clip_text_to_2000");
    group.sample_size(10);
    for counter in counters {
        // Build BPE vocabularies outside the measurement.
        counter.count_text("warm up");
        for (name, text) in &inputs {
            let out = clip_text(text, &config, ActionKind::Shell, "cf-000000000000", counter).expect("clipped");
            assert!(counter.count_text(&out) <= 2_000);
            group.bench_function(format!("{name}/{}", counter.name()), |b| {
                b.iter(|| clip_text(black_box(text), &config, ActionKind::Shell, "cf-000000000000", counter))
            });
        }
    }
    group.finish();
}

criterion_group!(clip_benches, benches);
criterion_main!(clip_benches);
