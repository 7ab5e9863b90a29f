//! The context window of a request's model, when `--window` does not say.
//!
//! A small table of current Anthropic models by name prefix; anything else gets 200k, the
//! window of every current Claude model. Sonnet 4 and 4.5 have a million tokens when the
//! client asks for it with the `context-1m-2025-08-07` beta.

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
    }
}
