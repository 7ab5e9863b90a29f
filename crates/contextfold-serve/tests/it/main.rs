//! The integration tests of `contextfold-serve`, one binary for all of them. Every server
//! they talk to is a local one: the proxy and a scripted mock upstream, on 127.0.0.1.

mod cache;
mod claude_code;
mod claude_code_long;
mod clients;
mod common;
mod connections;
mod corpus;
mod faults;
mod identity;
mod isolation;
mod large;
mod logs;
mod mcp;
mod metrics;
mod mock;
mod openai;
mod replay_cost;
mod sdk;
mod security;
mod sessions;
mod soak;
mod stored;
mod streaming;
mod ui;
