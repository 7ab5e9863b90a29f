//! What the commands tell a person: one total for a conversation everywhere, parts labelled
//! as parts, thousands separators, `plan` agreeing with `compact`, `evict` on a terminal,
//! file names of any script, and a README that states the defaults it relies on.

use crate::common::*;
use serde_json::Value;

/// The repository's conversations, in every format it reads.
const FILES: [&str; 4] = [
    "examples/session.json",
    "tests/fixtures/swe-style.json",
    "tests/fixtures/openai-small.json",
    "tests/fixtures/claude-code-small.jsonl",
];

fn number(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no number at {pointer} in {value}"))
}

#[test]
fn totals_agree_between_stats_count_plan_and_compact() {
    for file in FILES {
        let path = fixture(file);
        for tokenizer in ["o200k", "estimate", "chars4"] {
            let at = |command: &[&str]| json(&[command, &[&path, "--tokenizer", tokenizer]].concat());
            let stats = at(&["stats", "--json"]);
            let plan = at(&["plan", "--json"]);
            let compact = at(&["compact", "--json", "--dry-run"]);
            let count = contextfold(&["count", &path, "--tokenizer", tokenizer]);
            assert_eq!(count.code, 0, "{}", count.stderr);
            let total = number(&stats, "/tokens/total");
            let by_role: u64 =
                stats["tokens"]["by_role"].as_object().expect("by_role").values().filter_map(Value::as_u64).sum();
            let (system, tools) = (number(&stats, "/tokens/system"), number(&stats, "/tokens/tools"));
            let what = format!("{file} with {tokenizer}");
            assert_eq!(count.stdout.trim().parse::<u64>().ok(), Some(total), "{what}: count");
            assert_eq!(number(&plan, "/total_tokens"), total, "{what}: plan");
            assert_eq!(number(&compact, "/tokens_before"), total, "{what}: compact");
            // The parts add up to the total, and the commands agree on them too.
            assert_eq!(system + tools + by_role, total, "{what}: stats' parts");
            assert_eq!(number(&plan, "/system_tokens"), system, "{what}");
            assert_eq!(number(&plan, "/tools_tokens"), tools, "{what}");
            assert_eq!(number(&plan, "/message_tokens"), by_role, "{what}");
        }
    }
}

#[test]
fn figures_a_person_reads_have_thousands_separators() {
    let path = fixture("examples/session.json");
    // No run of four digits or more outside a file name or ref.
    let raw_figure = |text: &str| {
        text.split(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '.' && c != '/')
            .any(|word| word.len() >= 4 && word.chars().all(|c| c.is_ascii_digit()))
    };
    for args in [
        &["stats", &path][..],
        &["plan", &path],
        &["plan", &path, "--budget", "1m"],
        &["plan", &path, "--max-tail-tokens", "1", "--min-progress", "0"],
        &["evict", &path, "-o", "/dev/null", "--clear-at-least", "1000000"],
        &["compact", &path, "--dry-run"],
    ] {
        let run = contextfold(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        // Indented four spaces: the quoted first lines of tool results, not figures.
        for line in run.stdout.lines().chain(run.stderr.lines()).filter(|line| !line.starts_with("    ")) {
            assert!(!raw_figure(line), "{args:?}: a figure without separators: {line}");
        }
    }
    let plan = contextfold(&["plan", &path, "--budget", "1m"]);
    assert!(plan.stdout.contains("within the budget of 1,000,000"), "{}", plan.stdout);
    let stats = contextfold(&["stats", &path]);
    assert!(stats.stdout.contains("message content by block: "), "the part is labelled: {}", stats.stdout);
}

#[test]
fn plan_cuts_where_compact_folds() {
    let fixtures: Vec<String> = FILES.iter().map(|file| fixture(file)).collect();
    let (compared, refused) = plan_against_compact(&fixtures);
    assert!(compared >= 3, "only {compared} cuts of the fixtures compared ({refused} budgets refused as too small)");
    let Some(corpus) = corpus_dir() else { return };
    let mut sessions: Vec<String> = std::fs::read_dir(corpus)
        .expect("the corpus lists")
        .filter_map(|entry| entry.ok().map(|entry| arg(&entry.path())))
        .filter(|name| name.ends_with(".json") && !name.ends_with("manifest.json"))
        .collect();
    sessions.sort();
    let (compared, refused) = plan_against_compact(&sessions);
    assert!(
        compared >= sessions.len(),
        "only {compared} cuts of {} sessions compared ({refused} budgets refused as too small)",
        sessions.len()
    );
}

/// Plans and compacts (dry) each of `files` at three budgets and checks that `plan`'s cut
/// is where `compact` folds; returns how many cuts were compared and how many budgets
/// `compact` refused as below the newest turn.
fn plan_against_compact(files: &[String]) -> (usize, usize) {
    let (mut compared, mut refused) = (0, 0);
    for path in files {
        for budget in [None, Some("4000"), Some("12k")] {
            let limit: Vec<&str> = budget.map(|budget| vec!["--budget", budget]).unwrap_or_default();
            let run = |command: &[&str]| json(&[command, &[path.as_str(), "--tokenizer", "estimate"], &limit].concat());
            let plan = run(&["plan", "--json", "--min-progress", "0"]);
            let compact = [&["compact", "--json", "--dry-run", "--strategy", "summarize", path.as_str()][..], &limit];
            let compact = contextfold(&[&compact.concat()[..], &["--tokenizer", "estimate"]].concat());
            if budget.is_some() && compact.code == 2 && compact.stderr.contains("too small to fold") {
                // A budget below the newest turn: compact refuses it, naming the smallest.
                refused += 1;
                continue;
            }
            assert_eq!(compact.code, 0, "{path} at {budget:?}: {}", compact.stderr);
            let compact: Value = serde_json::from_str(compact.stdout.trim()).expect("one JSON report");
            let folded = number(&compact, "/messages_folded");
            let what = format!("{path} at {budget:?}: {plan} / {compact}");
            if plan["cut"].is_null() {
                assert_eq!(folded, 0, "plan says no cut where compact folds: {what}");
            } else {
                assert_eq!(number(&plan, "/head_messages"), folded, "{what}");
                compared += 1;
            }
        }
    }
    (compared, refused)
}

#[test]
fn evict_on_a_terminal_shows_a_report_like_compact() {
    let path = fixture("examples/session.json");
    let Some(run) = contextfold_on_terminal(&["evict", &path, "--tokenizer", "estimate"]) else { return };
    assert_eq!(run.code, 0, "{}", run.stdout);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(first.contains(": evicted 10 payload(s): 6,"), "{}", run.stdout);
    assert!(run.stdout.contains("tool_result (offloaded)"), "the shape of the result: {}", run.stdout);
    assert!(run.stdout.contains("(write the conversation with -o FILE, or redirect standard output)"));
    assert!(!run.stdout.contains("\"messages\""), "no JSON on a terminal: {}", run.stdout);
    // Redirected, the conversation itself is written, as before.
    let piped = contextfold(&["evict", &path, "--tokenizer", "estimate"]);
    assert!(serde_json::from_str::<Value>(&piped.stdout).is_ok_and(|value| value["messages"].is_array()));
    assert!(piped.stderr.contains(": evicted 10 payload(s)"), "{}", piped.stderr);
}

#[test]
fn compact_table_survives_long_non_ascii_file_names() {
    let dir = scratch("figures", "names");
    let names = [
        "сессия-агента-с-очень-длинным-именем-файла-на-кириллице-номер-один.json",
        "エージェントの会話ログ・とても長いファイル名・二番目のセッション記録です.json",
        "ok-🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀🦀.json",
    ];
    let example = std::fs::read(fixture("examples/session.json")).expect("the example reads");
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).expect("input directory");
    for name in names {
        assert!(name.len() > 60, "{name} is {} bytes", name.len());
        std::fs::write(inputs.join(name), &example).expect("a copy of the example");
    }
    let out = dir.join("out");
    let run = contextfold(&["compact", &arg(&inputs), "--out-dir", &arg(&out), "--tokenizer", "estimate"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("3 files"), "{}", run.stdout);
    let rows: Vec<&str> = run.stdout.lines().skip(1).take(3).collect();
    assert!(rows.iter().all(|row| row.starts_with('…')), "long names lose their start: {}", run.stdout);
    // The columns line up: every row's first figure (the same in each) is at the same character.
    let column = |row: &str| row.find(" 6,").map(|at| row[..at].chars().count());
    assert!(
        rows.windows(2).all(|pair| column(pair[0]).is_some() && column(pair[0]) == column(pair[1])),
        "{}",
        run.stdout
    );
    for name in names {
        assert!(out.join(name).exists(), "{name} is written under its own name");
        let single = contextfold(&["compact", &arg(&inputs.join(name)), "--dry-run", "--tokenizer", "estimate"]);
        assert_eq!(single.code, 0, "{}", single.stderr);
        for command in [&["stats"][..], &["plan"], &["evict", "-o", "/dev/null"]] {
            let run = contextfold(&[command, &[arg(&inputs.join(name)).as_str()]].concat());
            assert_eq!(run.code, 0, "{command:?} {name}: {}", run.stderr);
        }
    }
    let store = arg(&dir.join("s.db"));
    let kept = contextfold(&["evict", &arg(&inputs.join(names[1])), "-o", "/dev/null", "--store", &store]);
    assert_eq!(kept.code, 0, "{}", kept.stderr);
    let sessions = contextfold(&["sessions", "--store", &store]);
    assert!(sessions.stdout.contains(names[1]), "the session is named after the file: {}", sessions.stdout);
}

#[test]
fn readme_states_the_defaults_and_fields_it_relies_on() {
    // The README and the user guide it leads to.
    let mut readme = std::fs::read_to_string(root().join("README.md")).expect("the README reads");
    let mut pages: Vec<_> = std::fs::read_dir(root().join("docs/guide"))
        .expect("the guide lists")
        .map(|entry| entry.expect("a guide page").path())
        .collect();
    pages.sort();
    for page in pages {
        readme.push_str(&std::fs::read_to_string(&page).expect("a guide page reads"));
    }
    // Sentences wrap across lines.
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        // What the quickstart's target is, and where results land.
        "an aim and a ceiling",
        "6,416 → 2,092",
        // The reserves' defaults.
        "`--reserve`, default 16,000",
        "`--reserve R` (default 4,000)",
        // plan's defaults and fields.
        "`--min-progress F` (default 0.1)",
        "`max_tail_tokens`",
        "`message_tokens`",
        // compact's report.
        "`output` (where the conversation was written",
        // evict on a terminal.
        "on a terminal without `-o`, a report and the shape of the result",
    ] {
        assert!(readme.contains(needle), "the README does not say {needle:?}");
    }
    // The README's quickstart figures are what compact does today.
    let run = json(&["compact", &fixture("examples/session.json"), "--json", "--dry-run"]);
    assert_eq!((number(&run, "/tokens_before"), number(&run, "/tokens_after")), (6_416, 2_092), "update the README");
}
