//! Flags that mean one thing: each new spelling does what its old one (a hidden alias) did,
//! the help shows only the new ones, and conflicting or malformed values are usage errors.

use crate::common::*;
use serde_json::Value;

const SESSION: &str = "examples/session.json";

/// The JSON report of a successful run, without its timing.
fn report(args: &[&str]) -> Value {
    let mut value = json(args);
    if let Some(object) = value.as_object_mut() {
        object.remove("duration_ms");
    }
    value
}

/// Runs `base` with `old` and with `new` appended; both must print the same report.
fn same_report(base: &[&str], old: &[&str], new: &[&str]) {
    let with = |extra: &[&str]| report(&[base, extra].concat());
    let (before, after) = (with(old), with(new));
    assert_eq!(before, after, "{old:?} and {new:?} differ");
}

#[test]
fn old_and_new_spellings_do_the_same() {
    let session = fixture(SESSION);
    let compact = ["compact", &session, "--tokenizer", "estimate", "--dry-run", "--json"];
    same_report(
        &compact,
        &["--window", "20k", "--reserve", "4k", "--target", "0.25"],
        &["--window", "20k", "--reserve", "4k", "--target-fraction", "0.25"],
    );
    same_report(&compact, &["--keep-tokens", "600"], &["--max-tail-tokens", "600"]);
    same_report(&compact, &["--budget", "900", "--max-tool-output", "0"], &["--budget", "900", "--no-clip"]);
    let evict = ["evict", &session, "--tokenizer", "estimate", "--json"];
    same_report(&evict, &["--target", "4000"], &["--target-tokens", "4000"]);
    same_report(&evict, &["--keep", "1"], &["--keep-tool-results", "1"]);
    same_report(
        &evict,
        &["--keep", "0", "--keep-tokens", "900"],
        &["--keep-tool-results", "0", "--keep-tool-tokens", "900"],
    );
    let plan = ["plan", &session, "--tokenizer", "estimate", "--json"];
    same_report(&plan, &["--keep-tokens", "700"], &["--max-tail-tokens", "700"]);
    same_report(
        &plan,
        &["--window", "9k", "--reserve", "1k", "--target", "0.4"],
        &["--window", "9k", "--reserve", "1k", "--target-fraction", "0.4"],
    );
}

#[test]
fn the_new_spellings_change_what_they_say() {
    let session = fixture(SESSION);
    // A different value gives a different result, so the comparisons above compare something.
    let fraction = |value: &str| {
        report(&[
            "compact",
            &session,
            "--tokenizer",
            "estimate",
            "--dry-run",
            "--json",
            "--window",
            "20k",
            "--target-fraction",
            value,
        ])
    };
    assert_ne!(fraction("0.2")["target_tokens"], fraction("0.4")["target_tokens"]);
    let evict =
        |keep: &str| report(&["evict", &session, "--tokenizer", "estimate", "--json", "--keep-tool-results", keep]);
    assert_ne!(evict("0")["offloaded"], evict("20")["offloaded"]);
    let clipped = |extra: &[&str]| {
        report(
            &[
                &[
                    "compact",
                    &session,
                    "--tokenizer",
                    "estimate",
                    "--dry-run",
                    "--json",
                    "--budget",
                    "900",
                    "--strategy",
                    "evict",
                ][..],
                extra,
            ]
            .concat(),
        )
    };
    assert_ne!(clipped(&[])["clipped"], Value::Array(Vec::new()), "a small budget clips by default");
    assert_eq!(clipped(&["--no-clip"])["clipped"], Value::Array(Vec::new()));
    // evict clips nothing by default; 0 is the old spelling of that, as in compact.
    let evicted =
        |extra: &[&str]| report(&[&["evict", &session, "--tokenizer", "estimate", "--json"][..], extra].concat());
    assert_eq!(evicted(&["--max-tool-output", "0"]), evicted(&[]));
    assert_ne!(evicted(&["--max-tool-output", "100"])["clipped"], Value::Array(Vec::new()));
}

#[test]
fn help_shows_the_new_spellings_only() {
    for (command, new, old) in [
        ("compact", &["--target-fraction", "--max-tail-tokens", "--no-clip"][..], &["--target ", "--keep-tokens"][..]),
        (
            "plan",
            &["--target-fraction", "--max-tail-tokens", "--budget", "--min-progress"],
            &["--target ", "--keep-tokens"],
        ),
        (
            "evict",
            &["--target-tokens", "--keep-tool-results", "--keep-tool-tokens"],
            &["--target ", "--keep ", "--keep-tokens"],
        ),
        ("replay", &["--target-fraction"], &["--target "]),
    ] {
        let help = contextfold(&[command, "--help"]);
        assert_eq!(help.code, 0, "{}", help.stderr);
        for flag in new {
            assert!(help.stdout.contains(flag), "{command} --help lacks {flag}");
        }
        for flag in old {
            assert!(!help.stdout.contains(flag), "{command} --help shows the old {flag}");
        }
    }
}

#[test]
fn conflicting_or_malformed_flags_are_usage_errors() {
    let session = fixture(SESSION);
    for args in [
        &["compact", &session, "--no-clip", "--max-tool-output", "500"][..],
        &["compact", &session, "--budget", "900", "--target-fraction", "0.3"],
        &["compact", &session, "--target-fraction", "0.3"],
        &["compact", &session, "--window", "20k", "--target-fraction", "1.5"],
        &["compact", &session, "--max-tail-tokens", "many"],
        &["plan", &session, "--budget", "-5"],
        &["plan", &session, "--keep-tokens", "1.5k"],
        &["evict", &session, "--target-tokens", "12q"],
        &["evict", &session, "--target", "4000", "--target-tokens", "4000"],
        &["evict", &session, "--keep-tool-results", "-1"],
        &["replay", &session, "--window", "16k", "--target-fraction", "2"],
    ] {
        let run = contextfold(args);
        assert_eq!(run.code, 2, "{args:?} must be refused: {}", run.stdout);
        assert!(run.stderr.contains("error:"), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn token_flags_take_k_and_m() {
    let session = fixture(SESSION);
    let evict =
        |target: &str| report(&["evict", &session, "--tokenizer", "estimate", "--json", "--target-tokens", target]);
    assert_eq!(evict("4k"), evict("4000"));
    let plan = json(&["plan", &session, "--tokenizer", "estimate", "--json", "--budget", "3k"]);
    assert_eq!(plan["target_tokens"], 3_000);
}
