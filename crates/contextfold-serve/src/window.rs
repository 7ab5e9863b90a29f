//! The context window of a request's model, when `--window` does not say.
//!
//! A small table of current Anthropic and OpenAI models by name prefix; anything else gets
//! 200k, the window of every current Claude model (a local model served behind an
//! OpenAI-compatible API needs `--window`). Sonnet 4 and 4.5 have a million tokens when the
//! client asks for it with the `context-1m-2025-08-07` beta. For OpenAI's GPT-5 family the
//! window is its input limit, 272k of the 400k it shares with the output.

/// The window assumed for a model the table does not know.
pub const DEFAULT_WINDOW: u64 = 200_000;

/// The beta that gives Sonnet 4 and 4.5 a window of a million tokens.
pub const CONTEXT_1M_BETA: &str = "context-1m-2025-08-07";

/// Model name prefixes and their windows; the first match wins.
const MODELS: &[(&str, u64)] = &[
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3-7-sonnet", 200_000),
    ("claude-3-5-sonnet", 200_000),
    ("claude-3-5-haiku", 200_000),
    ("claude-3-opus", 200_000),
    ("claude-3-haiku", 200_000),
    ("gpt-5", 272_000),
    ("codex-", 272_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
];

/// Models that take the one-million-token beta.
const MILLION: &[&str] = &["claude-sonnet-4"];

/// The window of `model` (the request's `model` field) given the request's `anthropic-beta`
/// header values.
pub fn model_window(model: Option<&str>, betas: &str) -> u64 {
    let Some(model) = model else { return DEFAULT_WINDOW };
    let million = betas.split(',').any(|beta| beta.trim() == CONTEXT_1M_BETA);
    if million && MILLION.iter().any(|prefix| model.starts_with(prefix)) {
        return 1_000_000;
    }
    MODELS.iter().find(|(prefix, _)| model.starts_with(prefix)).map_or(DEFAULT_WINDOW, |(_, window)| *window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_by_model() {
        assert_eq!(model_window(Some("claude-sonnet-4-5-20250929"), ""), 200_000);
        assert_eq!(model_window(Some("claude-sonnet-4-5-20250929"), "a, context-1m-2025-08-07"), 1_000_000);
        assert_eq!(model_window(Some("claude-opus-4-1"), CONTEXT_1M_BETA), 200_000);
        assert_eq!(model_window(Some("some-local-model"), ""), DEFAULT_WINDOW);
        assert_eq!(model_window(None, CONTEXT_1M_BETA), DEFAULT_WINDOW);
        assert_eq!(model_window(Some("gpt-5-codex"), ""), 272_000);
        assert_eq!(model_window(Some("gpt-4.1-mini"), ""), 1_047_576);
        assert_eq!(model_window(Some("gpt-4o-2024-08-06"), ""), 128_000);
    }
}
