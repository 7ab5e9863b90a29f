//! `contextfold ui`: the dashboard `contextfold serve` has at `/ui`, served for a store with
//! no proxy running. The store is opened read-only, as `recall` and `search` open it.

use crate::args::UiArgs;
use anyhow::bail;
use contextfold_serve::shutdown_signal;
use contextfold_serve::ui::{serve, Dashboard};
use std::io::Write;
use std::process::ExitCode;

pub fn run(args: UiArgs) -> anyhow::Result<ExitCode> {
    // The dashboard has no token of its own: beyond loopback anyone could read the store.
    if !args.listen.ip().is_loopback() {
        bail!(
            "contextfold ui listens on loopback addresses only (got {}); to share the dashboard, run contextfold serve \
             --allow-remote --auth-token, whose /ui needs the token",
            args.listen
        );
    }
    let (location, store) = args.store.open_read_only()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(listener) => listener,
            Err(err) => bail!("cannot listen on {}: {err}; choose another --listen address", args.listen),
        };
        let addr = listener.local_addr()?;
        let stop = shutdown_signal();
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "contextfold ui: the dashboard of the store {location} is at http://{addr}/ui")?;
        stdout.flush()?;
        drop(stdout);
        serve(listener, Dashboard::new(store), stop).await;
        Ok(ExitCode::SUCCESS)
    })
}
