//! The proxy for OpenAI clients: Chat Completions and the Responses API, against a scripted
//! mock OpenAI upstream on 127.0.0.1.

pub mod agents;
pub mod canned;
mod chat;
mod clients;
mod responses;
mod routing;

use crate::common::config;
use crate::mock::Mock;
use contextfold_serve::ServeConfig;

/// A proxy configuration whose OpenAI upstream is `mock` (at `/v1`, as OpenAI's base URL
/// is) and whose Anthropic upstream is the same mock under `/anthropic`, so a request sent to
/// the wrong API shows in its path.
pub fn openai_config(mock: &Mock) -> ServeConfig {
    ServeConfig { upstream_openai: format!("{}/v1", mock.url()), ..config(&format!("{}/anthropic", mock.url())) }
}
