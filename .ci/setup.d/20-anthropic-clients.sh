# The official Anthropic clients for the proxy's real-client tests, at the versions pinned in
# tests/clients/anthropic/: the `anthropic` Python SDK in a virtualenv, and
# `@anthropic-ai/sdk` for Node with the Claude Code CLI (`@anthropic-ai/claude-code`, whose
# native binary comes in an optional dependency, `@anthropic-ai/claude-code-linux-x64` here).
#
# Exports CONTEXTFOLD_ANTHROPIC_PYTHON (the virtualenv's python), CONTEXTFOLD_ANTHROPIC_NODE_MODULES
# (a node_modules holding `@anthropic-ai/sdk`) and CONTEXTFOLD_CLAUDE (the native `claude`
# binary). Each is installed once under ~/.cache/contextfold/anthropic-clients/, in a folder
# named after the hash of the pinned manifests, so a version change installs afresh; a
# variable already set is kept as it is. npm runs no install script: the binary is used
# where the platform package put it.

ANTHROPIC_CLIENTS_SRC="$PWD/tests/clients/anthropic"
ANTHROPIC_CLIENTS_KEY="$(cat "$ANTHROPIC_CLIENTS_SRC/requirements.txt" "$ANTHROPIC_CLIENTS_SRC/package-lock.json" | sha256sum | cut -c1-16)"
ANTHROPIC_CLIENTS_DIR="${HOME}/.cache/contextfold/anthropic-clients/$ANTHROPIC_CLIENTS_KEY"
mkdir -p "$ANTHROPIC_CLIENTS_DIR"

if [ -z "${CONTEXTFOLD_ANTHROPIC_PYTHON:-}" ]; then
  if ! "$ANTHROPIC_CLIENTS_DIR/venv/bin/python" -c "import anthropic" >/dev/null 2>&1; then
    echo "installing the anthropic Python SDK"
    rm -rf "$ANTHROPIC_CLIENTS_DIR/venv"
    python3 -m venv "$ANTHROPIC_CLIENTS_DIR/venv"
    "$ANTHROPIC_CLIENTS_DIR/venv/bin/pip" install --quiet --disable-pip-version-check \
      -r "$ANTHROPIC_CLIENTS_SRC/requirements.txt"
  fi
  export CONTEXTFOLD_ANTHROPIC_PYTHON="$ANTHROPIC_CLIENTS_DIR/venv/bin/python"
fi

case "$(uname -m)" in aarch64 | arm64) ANTHROPIC_CLIENTS_ARCH=arm64 ;; *) ANTHROPIC_CLIENTS_ARCH=x64 ;; esac
ANTHROPIC_CLIENTS_CLAUDE="$ANTHROPIC_CLIENTS_DIR/node/node_modules/@anthropic-ai/claude-code-linux-$ANTHROPIC_CLIENTS_ARCH/claude"
if [ -z "${CONTEXTFOLD_ANTHROPIC_NODE_MODULES:-}" ] || [ -z "${CONTEXTFOLD_CLAUDE:-}" ]; then
  if ! "$ANTHROPIC_CLIENTS_CLAUDE" --version >/dev/null 2>&1 \
    || [ ! -f "$ANTHROPIC_CLIENTS_DIR/node/node_modules/@anthropic-ai/sdk/package.json" ]; then
    echo "installing @anthropic-ai/sdk for Node and the Claude Code CLI"
    rm -rf "$ANTHROPIC_CLIENTS_DIR/node"
    mkdir -p "$ANTHROPIC_CLIENTS_DIR/node"
    cp "$ANTHROPIC_CLIENTS_SRC/package.json" "$ANTHROPIC_CLIENTS_SRC/package-lock.json" "$ANTHROPIC_CLIENTS_DIR/node/"
    (cd "$ANTHROPIC_CLIENTS_DIR/node" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  export CONTEXTFOLD_ANTHROPIC_NODE_MODULES="${CONTEXTFOLD_ANTHROPIC_NODE_MODULES:-$ANTHROPIC_CLIENTS_DIR/node/node_modules}"
  export CONTEXTFOLD_CLAUDE="${CONTEXTFOLD_CLAUDE:-$ANTHROPIC_CLIENTS_CLAUDE}"
fi
