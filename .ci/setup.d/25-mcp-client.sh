# The official MCP Python SDK (`mcp`), the client of the MCP tests (`contextfold mcp` over
# stdio and the proxy's /mcp over streamable HTTP), at the versions pinned in
# tests/clients/mcp/requirements.txt, in a virtualenv.
#
# Exports CONTEXTFOLD_MCP_PYTHON (the virtualenv's python). Installed once under
# ~/.cache/contextfold/mcp-client/, in a folder named after the hash of the pinned list, so a
# version change installs afresh; a variable already set is kept as it is.

MCP_CLIENT_SRC="$PWD/tests/clients/mcp"
MCP_CLIENT_KEY="$(sha256sum <"$MCP_CLIENT_SRC/requirements.txt" | cut -c1-16)"
MCP_CLIENT_DIR="${HOME}/.cache/contextfold/mcp-client/$MCP_CLIENT_KEY"

if [ -z "${CONTEXTFOLD_MCP_PYTHON:-}" ]; then
  if ! "$MCP_CLIENT_DIR/venv/bin/python" -c "import mcp" >/dev/null 2>&1; then
    echo "installing the MCP Python SDK"
    rm -rf "$MCP_CLIENT_DIR/venv"
    mkdir -p "$MCP_CLIENT_DIR"
    python3 -m venv "$MCP_CLIENT_DIR/venv"
    "$MCP_CLIENT_DIR/venv/bin/pip" install --quiet --disable-pip-version-check \
      -r "$MCP_CLIENT_SRC/requirements.txt"
  fi
  export CONTEXTFOLD_MCP_PYTHON="$MCP_CLIENT_DIR/venv/bin/python"
fi
