# The official OpenAI clients for the proxy's real-client tests, at the versions pinned in
# tests/clients/openai/: the `openai` Python SDK in a virtualenv, and `openai` for Node with
# the Codex CLI (`@openai/codex`) from npm.
#
# Exports CONTEXTFOLD_OPENAI_PYTHON (the virtualenv's python), CONTEXTFOLD_OPENAI_NODE_MODULES
# (a node_modules holding `openai`) and CONTEXTFOLD_CODEX (the `codex` binary). Each is
# installed once under ~/.cache/contextfold/openai-clients/, in a folder named after the hash
# of the pinned manifests, so a version change installs afresh; a variable already set is
# kept as it is.

OPENAI_CLIENTS_SRC="$PWD/tests/clients/openai"
OPENAI_CLIENTS_KEY="$(cat "$OPENAI_CLIENTS_SRC/requirements.txt" "$OPENAI_CLIENTS_SRC/package-lock.json" | sha256sum | cut -c1-16)"
OPENAI_CLIENTS_DIR="${HOME}/.cache/contextfold/openai-clients/$OPENAI_CLIENTS_KEY"
mkdir -p "$OPENAI_CLIENTS_DIR"

if [ -z "${CONTEXTFOLD_OPENAI_PYTHON:-}" ]; then
  if ! "$OPENAI_CLIENTS_DIR/venv/bin/python" -c "import openai" >/dev/null 2>&1; then
    echo "installing the openai Python SDK"
    rm -rf "$OPENAI_CLIENTS_DIR/venv"
    python3 -m venv "$OPENAI_CLIENTS_DIR/venv"
    "$OPENAI_CLIENTS_DIR/venv/bin/pip" install --quiet --disable-pip-version-check \
      -r "$OPENAI_CLIENTS_SRC/requirements.txt"
  fi
  export CONTEXTFOLD_OPENAI_PYTHON="$OPENAI_CLIENTS_DIR/venv/bin/python"
fi

if [ -z "${CONTEXTFOLD_OPENAI_NODE_MODULES:-}" ] || [ -z "${CONTEXTFOLD_CODEX:-}" ]; then
  if [ ! -x "$OPENAI_CLIENTS_DIR/node/node_modules/.bin/codex" ] \
    || [ ! -f "$OPENAI_CLIENTS_DIR/node/node_modules/openai/package.json" ]; then
    echo "installing openai for Node and the Codex CLI"
    rm -rf "$OPENAI_CLIENTS_DIR/node"
    mkdir -p "$OPENAI_CLIENTS_DIR/node"
    cp "$OPENAI_CLIENTS_SRC/package.json" "$OPENAI_CLIENTS_SRC/package-lock.json" "$OPENAI_CLIENTS_DIR/node/"
    (cd "$OPENAI_CLIENTS_DIR/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  export CONTEXTFOLD_OPENAI_NODE_MODULES="${CONTEXTFOLD_OPENAI_NODE_MODULES:-$OPENAI_CLIENTS_DIR/node/node_modules}"
  export CONTEXTFOLD_CODEX="${CONTEXTFOLD_CODEX:-$OPENAI_CLIENTS_DIR/node/node_modules/.bin/codex}"
fi
