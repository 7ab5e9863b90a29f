//! `contextfold serve`: the flags into a [`ServeConfig`], then the proxy until a signal.

use super::compact::compactor;
use crate::args::ServeArgs;
use anyhow::Context;
use contextfold::redact::Redactor;
use contextfold_serve::{init_logging, shutdown_signal, Proxy, ServeConfig};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Where a token comes from when `--auth-token` is not given.
const TOKEN_VARIABLE: &str = "CONTEXTFOLD_AUTH_TOKEN";

impl ServeArgs {
    pub(super) fn config(&self) -> anyhow::Result<ServeConfig> {
        let compactor = compactor(&self.llm).context("cannot set up the summarizer")?;
        let store = match &self.store {
            _ if self.no_store => None,
            Some(given) => Some(super::store::location(given.as_deref())?),
            None => Some(super::store::location(None)?),
        };
        let redact = (compactor.summarizer().is_some() || store.is_some()) && !self.no_redact;
        let mut compactor = compactor.with_counter(Arc::new(self.counting.tokenizer.memoized()));
        if redact {
            compactor = compactor.with_redactor(Redactor::default());
        }
        let auth_token = self.auth_token.clone().or_else(|| std::env::var(TOKEN_VARIABLE).ok());
        Ok(ServeConfig {
            listen: self.listen,
            upstream: self.upstream.clone(),
            upstream_openai: self.upstream_openai.clone(),
            allow_remote: self.allow_remote,
            auth_token,
            window: self.window,
            reserve: self.reserve,
            target: self.target,
            strategy: self.strategy,
            compactor,
            max_body: usize::try_from(self.max_body).unwrap_or(usize::MAX),
            upstream_timeout: Duration::from_secs(self.upstream_timeout),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            max_sessions: usize::try_from(self.max_sessions).unwrap_or(usize::MAX),
            header_timeout: Duration::from_secs(self.header_timeout),
            max_connections: self
                .max_connections
                .map_or_else(|| ServeConfig::default().max_connections, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            store,
            log_format: self.log_format,
            retain: self.retain,
        })
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        init_logging(args.log_format);
        let proxy = Proxy::bind(config.clone()).await?;
        let addr = proxy.local_addr();
        let stop = shutdown_signal();
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "contextfold serve: listening on http://{addr}, forwarding to {} (OpenAI clients: {})",
            proxy.upstream(),
            proxy.upstream_openai()
        )?;
        writeln!(stdout, "export ANTHROPIC_BASE_URL=http://{addr}")?;
        writeln!(stdout, "export OPENAI_BASE_URL=http://{addr}/v1")?;
        stdout.flush()?;
        drop(stdout);
        match proxy.store() {
            Some(store) => eprintln!("contextfold serve: keeping conversations in the store {store}"),
            None => eprintln!("contextfold serve: keeping conversations in memory only (--no-store)"),
        }
        let stats = proxy.stats();
        proxy.run(stop).await?;
        eprintln!("contextfold serve: stopped; {}", stats.savings().totals().line());
        Ok(ExitCode::SUCCESS)
    })
}
