//! The integration tests of `contextfold`, one binary (one link) for all of them.

mod budgets;
mod common;
mod compactor;
mod corpus;
mod http_summarizers;
mod lazy_history;
mod middleware;
mod openai_apis;
mod oversized;
mod replay;
mod replay_probes;
mod store;
mod store_process;
mod system_messages;
