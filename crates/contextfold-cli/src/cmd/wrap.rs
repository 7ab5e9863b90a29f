//! `contextfold wrap`: the proxy on a free loopback port in this process, the agent pointed
//! at it with the recall tools registered for this run only (its own configuration files
//! untouched), the agent run on the terminal, and, once it exits, the proxy stopped and what
//! it did said in one line. The exit status is the agent's.

use crate::args::{Agent, WrapArgs, STORE_VARIABLE};
use anyhow::Context;
use contextfold::store::StoreLocation;
use contextfold_serve::mcp::{RECALL_TOOL, SEARCH_TOOL};
use contextfold_serve::{init_logging_to, Proxy};
use serde_json::json;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The MCP server's name in the agent's configuration: the model sees its tools as
/// `mcp__contextfold__context_recall` and `mcp__contextfold__context_search`.
const SERVER: &str = "contextfold";

pub fn run(args: WrapArgs) -> anyhow::Result<ExitCode> {
    let mut config = args.serve.config()?;
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.allow_remote = false;
    config.auth_token = None;
    if let Some(path) = &args.log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open the log file {}", path.display()))?;
        init_logging_to(args.serve.log_format, file);
    }
    // The store the MCP server reads: a file by its absolute path (the agent may start the
    // server elsewhere), a database by the variable (so its password is on no command line).
    let store = match &config.store {
        Some(StoreLocation::File(path)) => Some(McpStore::File(std::path::absolute(path)?)),
        Some(_) => Some(McpStore::Variable(args.serve.store.clone().flatten().map(PathBuf::into_os_string))),
        None => None,
    };
    let (name, agent_args) = match &args.agent {
        Agent::Claude(agent) => ("claude", &agent.args),
        Agent::Codex(agent) => ("codex", &agent.args),
    };
    let program = args.program.clone().map_or_else(|| OsString::from(name), PathBuf::into_os_string);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let proxy = Proxy::bind(config).await?;
        let addr = proxy.local_addr();
        eprintln!("contextfold wrap: the proxy listens on http://{addr}");
        let stats = proxy.stats();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(proxy.run(async {
            let _ = stopped.await;
        }));
        let mcp = match &store {
            Some(store) => Some(McpServer { program: std::env::current_exe()?, store }),
            None => {
                eprintln!("contextfold wrap: no store (--no-store), so no recall tool is registered");
                None
            }
        };
        let mut command = match &args.agent {
            Agent::Claude(_) => claude(&program, agent_args, addr, mcp.as_ref()),
            Agent::Codex(_) => codex(&program, agent_args, addr, mcp.as_ref()),
        };
        if let Some(McpStore::Variable(Some(url))) = &store {
            command.env(STORE_VARIABLE, url);
        }
        // Ctrl-C is the agent's to handle (Claude Code interrupts a turn with it); this process
        // waits for the agent to exit rather than dying under it.
        let interrupts = tokio::spawn(async { while tokio::signal::ctrl_c().await.is_ok() {} });
        let status = command
            .status()
            .await
            .with_context(|| format!("cannot run {} (give its path with --program)", Path::new(&program).display()));
        interrupts.abort();
        let _ = stop.send(());
        let served = served.await;
        let status = status?;
        served.context("the proxy stopped")??;
        eprintln!("contextfold wrap: {}", stats.savings().totals().line());
        Ok(exit_code(status))
    })
}

/// Where the MCP server finds the store.
enum McpStore {
    /// A SQLite file, by its absolute path.
    File(PathBuf),
    /// A database named by `CONTEXTFOLD_STORE_URL`: the URL given to set it to, or `None`
    /// when the variable already holds it.
    Variable(Option<OsString>),
}

/// `contextfold mcp` on the store, as the agent starts it.
struct McpServer<'a> {
    program: PathBuf,
    store: &'a McpStore,
}

impl McpServer<'_> {
    /// The server's arguments.
    fn args(&self) -> Vec<String> {
        let mut args = vec!["mcp".to_string()];
        if let McpStore::File(path) = self.store {
            args.extend(["--store".to_string(), path.to_string_lossy().into_owned()]);
        }
        args
    }

    /// The model's names of the tools, as `mcp__<server>__<tool>`.
    fn tool_names() -> [String; 2] {
        [format!("mcp__{SERVER}__{RECALL_TOOL}"), format!("mcp__{SERVER}__{SEARCH_TOOL}")]
    }
}

/// Claude Code pointed at the proxy: ANTHROPIC_BASE_URL, and after the user's arguments (so
/// none of theirs is taken for a value of these options) `--mcp-config` with the server and
/// `--allowedTools` with its two read-only tools.
fn claude(program: &OsString, args: &[OsString], addr: SocketAddr, mcp: Option<&McpServer>) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command.env("ANTHROPIC_BASE_URL", format!("http://{addr}"));
    let mut ours: Vec<OsString> = Vec::new();
    if let Some(mcp) = mcp {
        let config = json!({"mcpServers": {SERVER: {
            "type": "stdio",
            "command": mcp.program.to_string_lossy(),
            "args": mcp.args(),
        }}});
        ours.extend(["--mcp-config".into(), config.to_string().into()]);
        ours.extend(["--allowedTools".into(), McpServer::tool_names().join(",").into()]);
    }
    command.args(with_options(args, ours));
    command
}

/// Codex pointed at the proxy with `-c` overrides: `openai_base_url`, and the server as
/// `mcp_servers.contextfold`.
fn codex(program: &OsString, args: &[OsString], addr: SocketAddr, mcp: Option<&McpServer>) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    // TOML strings and arrays: JSON's are valid TOML.
    let mut overrides = vec![format!("openai_base_url={}", json!(format!("http://{addr}/v1")))];
    if let Some(mcp) = mcp {
        overrides.push(format!("mcp_servers.{SERVER}.command={}", json!(mcp.program.to_string_lossy())));
        overrides.push(format!("mcp_servers.{SERVER}.args={}", json!(mcp.args())));
        if matches!(mcp.store, McpStore::Variable(_)) {
            overrides.push(format!("mcp_servers.{SERVER}.env_vars={}", json!([STORE_VARIABLE])));
        }
    }
    for item in overrides {
        command.arg("-c").arg(item);
    }
    command.args(args);
    command
}

/// The user's `args` with `ours` after them, but before a `--` that ends the options.
fn with_options(args: &[OsString], ours: Vec<OsString>) -> Vec<OsString> {
    let end = args.iter().position(|arg| arg == "--").unwrap_or(args.len());
    let mut all = args[..end].to_vec();
    all.extend(ours);
    all.extend_from_slice(&args[end..]);
    all
}

/// The agent's exit status as this process's: its code, or 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return ExitCode::from(u8::try_from(128 + signal).unwrap_or(u8::MAX));
    }
    ExitCode::from(status.code().and_then(|code| u8::try_from(code).ok()).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_options_go_after_the_users_and_before_a_double_dash() {
        let os = |items: &[&str]| items.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(with_options(&os(&["-p", "hi"]), os(&["--x", "1"])), os(&["-p", "hi", "--x", "1"]));
        assert_eq!(with_options(&os(&["-p", "--", "-v"]), os(&["--x"])), os(&["-p", "--x", "--", "-v"]));
        assert_eq!(with_options(&[], os(&["--x"])), os(&["--x"]));
    }

    #[test]
    fn codex_gets_overrides_and_no_password() {
        let store = McpStore::Variable(None);
        let mcp = McpServer { program: PathBuf::from("/bin/contextfold"), store: &store };
        let command = codex(&"codex".into(), &["exec".into(), "go".into()], "127.0.0.1:9".parse().unwrap(), Some(&mcp));
        let args: Vec<String> = command.as_std().get_args().map(|arg| arg.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "-c",
                "openai_base_url=\"http://127.0.0.1:9/v1\"",
                "-c",
                "mcp_servers.contextfold.command=\"/bin/contextfold\"",
                "-c",
                "mcp_servers.contextfold.args=[\"mcp\"]",
                "-c",
                "mcp_servers.contextfold.env_vars=[\"CONTEXTFOLD_STORE_URL\"]",
                "exec",
                "go"
            ]
        );
    }
}
