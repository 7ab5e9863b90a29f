//! Command-line arguments ("low args"): clap structs that only validate what was typed.
//!
//! Each flag's doc comment is its `--help` text. The subcommands' arguments sit in a module
//! each, named after the command; this one holds the command line, the argument groups
//! several commands share, and the value parsers.

use clap::{Args, Parser, Subcommand};
use contextfold::compactor::Strategy;
use contextfold::core::format::Format;
use contextfold::core::tokens::Tokenizer;
use contextfold::core::tools::Preset;
use std::path::PathBuf;

mod compact;
mod convert;
mod count;
mod evict;
mod mcp;
mod plan;
mod recall;
mod render;
mod replay;
mod report;
mod search;
mod serve;
mod sessions;
mod stats;
mod ui;
mod validate;
mod wrap;

pub use compact::CompactArgs;
use compact::COMPACT_HELP;
pub use convert::ConvertArgs;
pub use count::CountArgs;
pub use evict::EvictArgs;
pub use mcp::McpArgs;
use mcp::MCP_HELP;
pub use plan::PlanArgs;
pub use recall::RecallArgs;
pub use render::RenderArgs;
use replay::REPLAY_HELP;
pub use replay::{CorpusPart, ReplayArgs};
pub use report::ReportArgs;
use report::REPORT_HELP;
pub use search::SearchArgs;
pub use serve::ServeArgs;
use serve::SERVE_HELP;
pub use sessions::{SessionsAction, SessionsArgs};
pub use stats::StatsArgs;
pub use ui::UiArgs;
use ui::UI_HELP;
pub use validate::ValidateArgs;
use wrap::WRAP_HELP;
pub use wrap::{Agent, WrapArgs};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a conversation parses but breaks a provider rule (validate)
  2  usage or input error: unreadable file, an input over --max-input-bytes, malformed
     JSON (with line and column), unknown format, a message with an unknown role, a block
     missing a required field";

/// Keep long LLM-agent conversations inside their context window.
#[derive(Debug, Parser)]
#[command(name = "contextfold", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show messages, turns, tool calls, where the tokens go, the largest tool results and
    /// validation problems.
    #[command(after_help = EXIT_CODES)]
    Stats(StatsArgs),
    /// Check conversations against the provider's rules; optionally repair them.
    #[command(after_help = EXIT_CODES)]
    Validate(ValidateArgs),
    /// Convert a conversation between the Anthropic, OpenAI Chat and OpenAI Responses formats.
    #[command(after_help = EXIT_CODES)]
    Convert(ConvertArgs),
    /// Count the tokens of a conversation, or of raw text with --text.
    #[command(after_help = EXIT_CODES)]
    Count(CountArgs),
    /// Dry run: show where a conversation would be cut into a head to fold and a tail to
    /// keep, and what an eviction pass would free.
    #[command(after_help = EXIT_CODES)]
    Plan(PlanArgs),
    /// Replace stale tool output with pointers that say how to get it back.
    #[command(after_help = EXIT_CODES)]
    Evict(EvictArgs),
    /// Print the conversation as the plain transcript a summarizer reads.
    #[command(after_help = EXIT_CODES)]
    Render(RenderArgs),
    /// Compact conversations to a token budget: evict stale tool output, summarize the
    /// older turns, clip what no budget can hold. Works offline by default.
    #[command(after_help = COMPACT_HELP)]
    Compact(CompactArgs),
    /// Replay recorded sessions call by call under several context strategies; report cost
    /// with prompt caching, peak context, overflows and fact recall.
    #[command(after_help = REPLAY_HELP)]
    Replay(ReplayArgs),
    /// Print a payload that compaction removed, exactly as it was, by its ref.
    #[command(after_help = STORE_HELP)]
    Recall(RecallArgs),
    /// Search the stored history and payloads; prints snippets with where they are.
    #[command(after_help = STORE_HELP)]
    Search(SearchArgs),
    /// List stored sessions; export one's original conversation, or delete it.
    #[command(after_help = STORE_HELP)]
    Sessions(SessionsArgs),
    /// What the proxy saved, per session and in total, from the calls `serve --store`
    /// recorded: calls, compactions, tokens received and sent, estimated input cost.
    #[command(after_help = REPORT_HELP)]
    Report(ReportArgs),
    /// Run a proxy for the Anthropic Messages API that compacts long conversations: point a
    /// client's ANTHROPIC_BASE_URL at it.
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Serve the store to an agent as MCP tools over standard input and output:
    /// context_recall (a removed output by its ref, whole or by lines) and context_search.
    #[command(after_help = MCP_HELP)]
    Mcp(McpArgs),
    /// Run Claude Code or Codex through a proxy started for this run, with the recall tools
    /// registered for this run only; print what the proxy did when the agent exits.
    #[command(after_help = WRAP_HELP, subcommand_value_name = "AGENT", subcommand_help_heading = "Agents")]
    Wrap(WrapArgs),
    /// Serve the dashboard for a store with no proxy running: sessions, each conversation's
    /// tokens per call and compactions, removed payloads by ref, search.
    #[command(after_help = UI_HELP)]
    Ui(UiArgs),
}

/// Where the store is when no path is given: under the working directory.
pub const DEFAULT_STORE: &str = ".contextfold/store.db";

/// The variable naming the store (a path or a `postgres://` URL) when `--store` names none.
pub const STORE_VARIABLE: &str = "CONTEXTFOLD_STORE_URL";

const STORE_HELP: &str = "\
The store is a SQLite file or a PostgreSQL database (--store postgres://user@host/db),
written by compact --store and evict --store; without --store it is the one
CONTEXTFOLD_STORE_URL names, else .contextfold/store.db. These commands only read it,
read-only and never migrating it (sessions rm deletes, sessions upgrade brings an older
store up to date); they never create one. Messages show a URL without its password.

Exit codes:
  0  success
  2  usage or input error: no store at the path or in the database, a directory or a file
     that is not a contextfold store, a damaged store, a store that needs an upgrade, an
     unknown ref or session, a store locked by another process past the timeout, a
     PostgreSQL server that cannot be reached or refuses the login";

/// Which summarizer, and how to reach an LLM one.
#[derive(Debug, Args)]
pub struct LlmArgs {
    /// extractive, anthropic[:MODEL] or openai[:MODEL].
    #[arg(long, default_value = "extractive", value_name = "NAME")]
    pub summarizer: String,
    /// The LLM server's base URL (overrides ANTHROPIC_BASE_URL / OPENAI_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Retries of a failed LLM request (429, 5xx, 529, timeouts, unreachable) [default: 4].
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// Seconds one LLM request may take [default: 120].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
}

/// How to count tokens.
#[derive(Debug, Args)]
pub struct CountingArgs {
    /// Token counter: o200k or cl100k (exact BPE), estimate (fast, calibrated), chars4.
    #[arg(long, default_value = "o200k", value_parser = parse_tokenizer)]
    pub tokenizer: Tokenizer,
}

/// How to read input files.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// Read input as this format instead of detecting it.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<Format>,
    /// Refuse an input (file, gzip once decompressed, or standard input) of more than this
    /// many bytes; takes 1000000, 500k, 256m or 2g.
    #[arg(long, value_name = "BYTES", default_value = "256m", value_parser = parse_bytes)]
    pub max_input_bytes: u64,
}

fn parse_format(name: &str) -> Result<Format, String> {
    name.parse().map_err(|err| format!("{err}"))
}

fn parse_preset(name: &str) -> Result<Preset, String> {
    name.parse().map_err(|err| format!("{err}"))
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("`{text}` is not a fraction between 0 and 1")),
    }
}

/// A token count: digits, optionally with a `k` (thousand) or `m` (million) suffix, e.g.
/// `16k`, `200k`, `1m`.
fn parse_tokens(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, scale) = match lower.strip_suffix('k') {
        Some(digits) => (digits, 1_000),
        None => lower.strip_suffix('m').map_or((lower.as_str(), 1), |digits| (digits, 1_000_000)),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|count| count.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a token count (e.g. 16000, 16k, 1m)"))
}

/// A byte count: digits, optionally with `k`, `m` or `g` (thousand, million, billion), at
/// least 1.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, scale) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1_000),
        Some('m') => (&lower[..lower.len() - 1], 1_000_000),
        Some('g') => (&lower[..lower.len() - 1], 1_000_000_000),
        _ => (lower.as_str(), 1),
    };
    match digits.parse::<u64>().ok().and_then(|count| count.checked_mul(scale)) {
        Some(0) => Err("the input limit must be at least 1 byte".into()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("`{text}` is not a byte count (e.g. 1000000, 500k, 256m, 2g)")),
    }
}

fn parse_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1 (0 would show nothing)".into()),
        Ok(limit) => Ok(limit),
        Err(_) => Err(format!("`{text}` is not a number of hits")),
    }
}

fn parse_tokenizer(name: &str) -> Result<Tokenizer, String> {
    name.parse().map_err(|err| format!("{err}"))
}

/// The budget a compaction aims for (`compact`, and `plan` to show where it would cut).
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Token budget for the result: an aim and a ceiling; folding whole turns often lands
    /// under it [default: half of the input's tokens].
    #[arg(long, value_name = "T", conflicts_with_all = ["window", "target_fraction"], value_parser = parse_tokens)]
    pub budget: Option<u64>,
    /// The model's context window; the budget is --target-fraction of the window less --reserve.
    #[arg(long, value_name = "W", value_parser = parse_tokens)]
    pub window: Option<u64>,
    /// Tokens of the window kept free for the answer.
    #[arg(long, value_name = "R", default_value = "16000", requires = "window", value_parser = parse_tokens)]
    pub reserve: u64,
    /// The share of the usable window (--window less --reserve) to aim for.
    #[arg(long = "target-fraction", alias = "target", value_name = "F", default_value = "0.5",
          value_parser = parse_fraction, requires = "window")]
    pub target_fraction: f64,
}

/// What a compaction keeps verbatim and how big its summary may be (`compact`, `plan`).
#[derive(Debug, Args)]
pub struct CutArgs {
    /// Keep at least the last N user turns verbatim.
    #[arg(long, value_name = "N")]
    pub keep_turns: Option<usize>,
    /// Keep a verbatim tail of at most K tokens [default: what the budget leaves after the
    /// system prompt, tools, summary and first request].
    #[arg(long = "max-tail-tokens", alias = "keep-tokens", value_name = "K", value_parser = parse_tokens)]
    pub max_tail_tokens: Option<u64>,
    /// The most tokens the summary may hold (and at most half the budget).
    #[arg(long, value_name = "N", default_value = "4000", value_parser = parse_tokens)]
    pub summary_tokens: u64,
}

/// Keeping what a command removes in a store.
#[derive(Debug, Args)]
pub struct PersistArgs {
    /// Keep the original history and every removed payload, summary and report in this store
    /// (a SQLite file, or a PostgreSQL database as postgres://user@host/db), so they can be
    /// recalled, searched and exported [default: $CONTEXTFOLD_STORE_URL, else
    /// .contextfold/store.db].
    #[arg(long, value_name = "PATH|URL", num_args = 0..=1)]
    pub store: Option<Option<PathBuf>>,
    /// Append to this stored session instead of creating one (one input file).
    #[arg(long, value_name = "ID", requires = "store")]
    pub session: Option<String>,
    /// Send and store secrets as they are. By default keys, tokens and passwords are masked
    /// in the store and in what an LLM summarizer (anthropic, openai) is sent, and any left in
    /// a summary are masked; the rest of the written conversation is never changed.
    #[arg(long)]
    pub no_redact: bool,
    /// Tell the model it can get removed content back: pointers, clip markers and the summary
    /// name the `context_recall` tool (answer its calls from the store).
    #[arg(long, requires = "store")]
    pub recall_tool: bool,
}

/// The store a reading command opens.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The store: a SQLite file, or a PostgreSQL database as postgres://user@host/db
    /// [default: $CONTEXTFOLD_STORE_URL, else .contextfold/store.db].
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub store: Option<PathBuf>,
}

/// A duration as people write one (`30d`, `12h`, `1h 30m`): at least a second.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|err| format!("{err} (write it like 30d, 12h or 90m)"))?;
    if duration.as_secs() == 0 {
        return Err("it must be at least a second".into());
    }
    Ok(duration)
}

fn parse_strategy(name: &str) -> Result<Strategy, String> {
    name.parse().map_err(|err| format!("{err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn arguments_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn token_counts_take_k_and_m() {
        assert_eq!(parse_tokens("16000"), Ok(16_000));
        assert_eq!(parse_tokens("16k"), Ok(16_000));
        assert_eq!(parse_tokens("200K"), Ok(200_000));
        assert_eq!(parse_tokens("1m"), Ok(1_000_000));
        for bad in ["", "k", "16kb", "-1", "1.5k", "99999999999999999999m"] {
            assert!(parse_tokens(bad).is_err(), "{bad}");
        }
        let windows = match Cli::try_parse_from(["contextfold", "replay", "a.json", "--window", "16k,32000"]) {
            Ok(Cli { command: Command::Replay(replay), .. }) => replay.window,
            other => panic!("{other:?}"),
        };
        assert_eq!(windows, [16_000, 32_000]);
    }

    #[test]
    fn byte_counts_take_k_m_and_g() {
        assert_eq!(parse_bytes("1000"), Ok(1_000));
        assert_eq!(parse_bytes("500k"), Ok(500_000));
        assert_eq!(parse_bytes("256M"), Ok(256_000_000));
        assert_eq!(parse_bytes("2g"), Ok(2_000_000_000));
        for bad in ["", "0", "0k", "m", "1.5m", "-1", "5 mb", "99999999999999999999g"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wrap_takes_the_proxy_flags_before_the_agent_and_passes_the_rest() {
        let parsed = |args: &[&str]| match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(Command::Wrap(wrap)) => wrap,
            other => panic!("{other:?}"),
        };
        let wrap =
            parsed(&["contextfold", "wrap", "--window", "100k", "--no-store", "claude", "-p", "hi", "--window", "x"]);
        assert_eq!((wrap.serve.window, wrap.serve.no_store), (Some(100_000), true));
        let Agent::Claude(agent) = wrap.agent else { panic!("claude") };
        assert_eq!(agent.args, ["-p", "hi", "--window", "x"]);
        let wrap = parsed(&["contextfold", "wrap", "--store", "s.db", "codex", "exec", "--json", "go"]);
        assert_eq!(wrap.serve.store, Some(Some(PathBuf::from("s.db"))));
        assert!(matches!(wrap.agent, Agent::Codex(agent) if agent.args == ["exec", "--json", "go"]));
        assert!(
            matches!(parsed(&["contextfold", "wrap", "claude"]).agent, Agent::Claude(agent) if agent.args.is_empty())
        );
        assert!(Cli::try_parse_from(["contextfold", "wrap"]).is_err(), "an agent is required");
        assert!(Cli::try_parse_from(["contextfold", "wrap", "vim"]).is_err(), "only the known agents");
    }

    #[test]
    fn repair_needs_an_output() {
        let err = Cli::try_parse_from(["contextfold", "validate", "a.json", "--repair"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn store_defaults_when_given_without_a_path() {
        let parsed = |args: &[&str]| match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(Command::Compact(compact)) => compact.persist,
            other => panic!("{other:?}"),
        };
        let bare = parsed(&["contextfold", "compact", "a.json", "--store"]);
        assert_eq!(bare.store, Some(None), "the default store");
        assert!(!bare.no_redact);
        let given = parsed(&["contextfold", "compact", "a.json", "--store", "s.db", "--no-redact"]);
        assert_eq!(given.store, Some(Some(PathBuf::from("s.db"))));
        let url = parsed(&["contextfold", "compact", "a.json", "--store=postgres://ada@db/agents"]);
        assert_eq!(url.store, Some(Some(PathBuf::from("postgres://ada@db/agents"))));
        assert!(given.no_redact);
        assert_eq!(parsed(&["contextfold", "compact", "a.json"]).store, None);
        // Without a store there is nothing to append to or recall from; --no-redact also
        // concerns LLM summarizers.
        assert!(Cli::try_parse_from(["contextfold", "evict", "a.json", "--session", "s1"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "compact", "a.json", "--recall-tool"]).is_err());
        assert!(parsed(&["contextfold", "compact", "a.json", "--no-redact"]).no_redact);
        assert!(parsed(&["contextfold", "compact", "a.json", "--store", "--recall-tool"]).recall_tool);
    }

    #[test]
    fn sessions_takes_the_store_before_or_after_its_action() {
        for args in [
            ["contextfold", "sessions", "--store", "s.db", "rm", "x"],
            ["contextfold", "sessions", "rm", "x", "--store", "s.db"],
        ] {
            match Cli::try_parse_from(args).map(|cli| cli.command) {
                Ok(Command::Sessions(sessions)) => assert_eq!(sessions.store.store, Some(PathBuf::from("s.db"))),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn serve_has_the_documented_defaults() {
        let serve = match Cli::try_parse_from(["contextfold", "serve"]).map(|cli| cli.command) {
            Ok(Command::Serve(serve)) => serve,
            other => panic!("{other:?}"),
        };
        assert_eq!(serve.listen, "127.0.0.1:8787".parse().unwrap());
        assert_eq!(serve.upstream, "https://api.anthropic.com");
        assert_eq!(serve.upstream_openai, "https://api.openai.com/v1");
        assert_eq!((serve.window, serve.reserve, serve.target), (None, 16_000, 0.2));
        assert_eq!(serve.max_body, 512 * 1024 * 1024);
        assert_eq!((serve.idle_timeout, serve.upstream_timeout, serve.max_sessions), (300, 600, 1_000));
        assert_eq!(serve.log_format, contextfold_serve::LogFormat::Text);
        assert!(serve.store.is_none() && !serve.no_store && !serve.allow_remote);
        let given = Cli::try_parse_from(["contextfold", "serve", "--window", "1m", "--log-format", "json", "--store"]);
        match given.map(|cli| cli.command) {
            Ok(Command::Serve(serve)) => {
                assert_eq!(serve.window, Some(1_000_000));
                assert_eq!(serve.log_format, contextfold_serve::LogFormat::Json);
                assert_eq!(serve.store, Some(None), "the default store");
            }
            other => panic!("{other:?}"),
        }
        let url = Cli::try_parse_from(["contextfold", "serve", "--store=postgres://ada@db/agents"]);
        match url.map(|cli| cli.command) {
            Ok(Command::Serve(serve)) => {
                assert_eq!(serve.store, Some(Some(std::path::PathBuf::from("postgres://ada@db/agents"))));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            &["contextfold", "serve", "--log-format", "xml"][..],
            &["contextfold", "serve", "--store", "--no-store"],
            &["contextfold", "serve", "--max-sessions", "0"],
            &["contextfold", "serve", "--listen", "localhost"],
            &["contextfold", "serve", "--target", "2"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_tokenizers_and_formats_are_rejected() {
        assert!(Cli::try_parse_from(["contextfold", "count", "--tokenizer", "gpt2"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "stats", "a", "--format", "xml"]).is_err());
        assert!(Cli::try_parse_from(["contextfold", "convert", "a", "--to", "claude-code"]).is_err());
    }
}
