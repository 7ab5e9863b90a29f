//! The arguments of `contextfold ui`: the dashboard without a proxy.

use super::StoreArgs;
use clap::Args;

pub(super) const UI_HELP: &str = "\
Open the address it prints (http://127.0.0.1:8788/ui by default) in a browser. The store is
opened read-only, as recall and search open it (--store, else CONTEXTFOLD_STORE_URL, else
.contextfold/store.db); a proxy may keep writing to it meanwhile, and the page shows what is
there when it asks. The page is compiled into the binary and fetches nothing from
elsewhere. It answers loopback addresses only: --listen takes a loopback address, and a
request must name 127.0.0.1, localhost or [::1] as its host. contextfold serve --store
serves the same dashboard at /ui.

Exit codes:
  0  stopped by Ctrl-C or SIGTERM
  2  usage error, an address that is not loopback or cannot be bound, or a store that
     cannot be opened (as for recall)";

/// `contextfold ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// The address to serve the dashboard on: a loopback address (the dashboard has no
    /// token of its own).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8788")]
    pub listen: std::net::SocketAddr,
    #[command(flatten)]
    pub store: StoreArgs,
}
