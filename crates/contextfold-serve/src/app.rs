//! What every request shares: the upstreams, how conversations are compacted and their
//! state, the store, the limits and the counts.

use crate::background::Background;
use crate::branches::Branches;
use crate::compaction::ConversationState;
use crate::compaction::Settings;
use crate::config::LogFormat;
use crate::conversations::Conversations;
use crate::forward::Upstream;
use crate::known::KnownLists;
use crate::parsed::ParsedHistory;
use crate::preamble::Preambles;
use crate::store::ProxyStore;
use crate::workers::Workers;
use crate::Stats;
use std::sync::Arc;
use std::time::Duration;

/// What every request shares.
pub struct App {
    /// Where Anthropic requests go.
    pub upstream: Upstream,
    /// Where OpenAI requests go.
    pub openai: Upstream,
    /// How conversations are compacted.
    pub settings: Settings,
    /// Each conversation's branches.
    pub conversations: Conversations<Branches<ConversationState>>,
    /// Each Messages conversation's last messages, read into the model.
    pub parsed: Conversations<ParsedHistory>,
    /// Each conversation's last list, for the split of its next request.
    pub known: KnownLists,
    /// The system prompts and tools read lately.
    pub preambles: Preambles,
    /// Where each conversation's compactions are kept, when anywhere.
    pub store: Option<ProxyStore>,
    /// The proxy token, when one is required.
    pub token: Option<String>,
    /// The largest body accepted.
    pub max_body: usize,
    /// How long a stream may stay silent.
    pub idle_timeout: Duration,
    /// How log lines are written.
    pub log_format: LogFormat,
    /// Counts, for tests and the operator.
    pub stats: Arc<Stats>,
    /// What answers write back after their requests, awaited at shutdown.
    pub background: Background,
    /// Where large requests are prepared.
    pub workers: Workers,
    /// The recall tools at `/mcp`.
    pub mcp: crate::mcp::Endpoint,
    /// The dashboard at `/ui`.
    pub ui: crate::ui::Dashboard,
}

impl App {
    /// The bytes held to read the client histories' next requests: the hashes their messages
    /// are known by, and what splits their next requests.
    pub fn bytes_held(&self) -> u64 {
        self.parsed.sum(ParsedHistory::held_bytes) + self.known.bytes_held()
    }
}
