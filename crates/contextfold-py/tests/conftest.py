"""Shared fixtures: the repository's example session, the shared corpus, the CLI binary.

What a test needs from outside (the corpus beside the repository, the built `contextfold`
binary) is skipped with a notice when absent, and fails instead when `CI` is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus"


def missing(what: str) -> None:
    """Skips the test with a visible notice, or fails it under CI."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {what}")
    sys.stderr.write(f"notice: skipped: {what}\n")
    pytest.skip(what)


@pytest.fixture(scope="session")
def example() -> Dict[str, Any]:
    """The repository's example session (an Anthropic Messages request)."""
    return json.loads((ROOT / "examples" / "session.json").read_text())


def corpus_files() -> List[Path]:
    """The corpus sessions, or none when the corpus is absent."""
    if not CORPUS.is_dir():
        return []
    return sorted(path for path in CORPUS.glob("*.json") if path.name != "manifest.json")


@pytest.fixture(scope="session")
def corpus() -> List[Path]:
    files = corpus_files()
    if not files:
        missing(f"the shared corpus is absent at {CORPUS}")
    return files


@pytest.fixture(scope="session")
def largest(corpus: List[Path]) -> Dict[str, Any]:
    """The largest corpus session."""
    return json.loads(max(corpus, key=lambda path: path.stat().st_size).read_text())


@pytest.fixture(scope="session")
def cli() -> str:
    """The `contextfold` binary: $CONTEXTFOLD_BIN, else the workspace's debug build, else PATH."""
    for candidate in (
        os.environ.get("CONTEXTFOLD_BIN"),
        str(ROOT / "target" / "debug" / "contextfold"),
        os.path.join(os.environ.get("CARGO_TARGET_DIR", ""), "debug", "contextfold"),
        shutil.which("contextfold"),
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    missing("the contextfold binary is not built (set CONTEXTFOLD_BIN)")
    raise AssertionError("unreachable")


def run_cli(cli: str, *args: str) -> subprocess.CompletedProcess:
    """Runs the CLI without the provider variables (no summarizer finds a key or server)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.pop("CONTEXTFOLD_STORE_URL", None)
    return subprocess.run([cli, *args], capture_output=True, text=True, env=env, check=False)


@pytest.fixture(scope="session", autouse=True)
def package_from_this_checkout() -> None:
    """Under CI, the package tested is this checkout's, not an older installed copy."""
    import contextfold

    if os.environ.get("CI") and not Path(contextfold.__file__).resolve().is_relative_to(ROOT):
        pytest.fail(f"contextfold is imported from {contextfold.__file__}, not from {ROOT}")
