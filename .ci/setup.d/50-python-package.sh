# The Python package's test environment (crates/contextfold-py): a virtualenv with maturin,
# pytest and the agent frameworks pinned in crates/contextfold-py/tests/requirements.txt
# (LangChain, Pydantic AI, the OpenAI Agents SDK).
#
# Exports CONTEXTFOLD_PY_PYTHON (the virtualenv's python). The virtualenv is made once under
# ~/.cache/contextfold/python-package/, in a folder named after the hash of the requirements,
# so a version change installs afresh; a variable already set is kept.
#
# The package itself is not built here: `cargo test --workspace` builds its extension with
# the rest of the workspace (the dev profile, the workspace's features and target directory),
# and the crate's own test that runs pytest (`crates/contextfold-py/tests/pytest.rs`) puts that extension beside
# the package's Python sources, which Python finds through PYTHONPATH. A `maturin develop`
# here would build most of the dependency tree a second time, under the features of the one
# crate alone.

if [ -z "${CONTEXTFOLD_PY_PYTHON:-}" ]; then
  PY_PACKAGE_REQUIREMENTS="$PWD/crates/contextfold-py/tests/requirements.txt"
  PY_PACKAGE_KEY="$(sha256sum "$PY_PACKAGE_REQUIREMENTS" | cut -c1-16)"
  PY_PACKAGE_DIR="${HOME}/.cache/contextfold/python-package/$PY_PACKAGE_KEY"
  if ! "$PY_PACKAGE_DIR/venv/bin/python" -c "import langchain, pydantic_ai, agents, pytest" >/dev/null 2>&1 \
    || [ ! -x "$PY_PACKAGE_DIR/venv/bin/maturin" ]; then
    echo "installing maturin, pytest and the agent frameworks for the Python package's tests"
    rm -rf "$PY_PACKAGE_DIR/venv"
    mkdir -p "$PY_PACKAGE_DIR"
    python3 -m venv "$PY_PACKAGE_DIR/venv"
    "$PY_PACKAGE_DIR/venv/bin/pip" install --quiet --disable-pip-version-check -r "$PY_PACKAGE_REQUIREMENTS"
  fi
  export CONTEXTFOLD_PY_PYTHON="$PY_PACKAGE_DIR/venv/bin/python"
fi
