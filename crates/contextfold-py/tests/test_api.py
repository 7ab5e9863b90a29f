"""The Python API against the CLI: the same input and settings give the same result and
report, on the example session and every corpus session."""

from __future__ import annotations

import copy
import http.server
import json
import re
import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest

import contextfold
from conftest import run_cli

# The report fields that are the same from run to run (the wall time is not).
def stable(report: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value for key, value in report.items() if key not in ("duration_ms", "file", "output")}


def cli_compact(cli: str, path: Path, out: Path, *flags: str) -> Dict[str, Any]:
    run = run_cli(cli, "compact", str(path), "-o", str(out), "--json", *flags)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def check_against_cli(cli: str, tmp_path: Path, path: Path, flags: List[str], **settings: Any) -> contextfold.Compacted:
    conversation = json.loads(path.read_text())
    before = copy.deepcopy(conversation)
    compacted = contextfold.compact(conversation, **settings)
    assert conversation == before, "the caller's conversation was changed"
    out = tmp_path / f"cli-{path.name}"
    report = cli_compact(cli, path, out, *flags)
    assert stable(compacted.report) == stable(report)
    assert compacted.conversation == json.loads(out.read_text())
    mine = tmp_path / f"py-{path.name}"
    mine.write_text(json.dumps(compacted.conversation))
    valid = run_cli(cli, "validate", str(mine))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert compacted.valid
    return compacted


def test_example_matches_the_cli(cli: str, tmp_path: Path, example: Dict[str, Any]) -> None:
    from conftest import ROOT

    compacted = check_against_cli(cli, tmp_path, ROOT / "examples" / "session.json", ["--budget", "3000"], budget=3000)
    assert compacted.tokens_after <= 3000 < compacted.tokens_before
    assert compacted.strategy_used != "none"
    assert compacted.target_tokens == 3000
    assert contextfold.count_tokens(compacted.conversation) == compacted.tokens_after


def test_example_by_window_and_default_target_match_the_cli(cli: str, tmp_path: Path) -> None:
    from conftest import ROOT

    path = ROOT / "examples" / "session.json"
    check_against_cli(cli, tmp_path, path, [])
    compacted = check_against_cli(
        cli, tmp_path, path, ["--window", "12000", "--reserve", "2000", "--strategy", "evict"],
        window=12000, reserve=2000, strategy="evict",
    )
    assert compacted.strategy_used in ("evict", "evict+clip", "none")


def test_corpus_matches_the_cli_under_budget(cli: str, tmp_path: Path, corpus: List[Path]) -> None:
    under = 0
    for path in corpus:
        conversation = json.loads(path.read_text())
        tokens = contextfold.count_tokens(conversation)
        budget = max(tokens // 3, 4000)
        try:
            compacted = check_against_cli(cli, tmp_path, path, ["--budget", str(budget)], budget=budget)
        except contextfold.CompactionError as err:
            # A budget below what the newest turn needs: the CLI refuses it the same way.
            run = run_cli(cli, "compact", str(path), "--budget", str(budget), "--json", "--dry-run")
            assert run.returncode != 0 and str(err) in run.stderr, (path.name, str(err), run.stderr)
            continue
        # At or under the budget, unless what cannot be cut (the system prompt, the tools, the
        # newest turn) is bigger, which the report says.
        if compacted.tokens_after <= budget:
            under += 1
        else:
            assert any("kept whole" in note for note in compacted.notes), (path.name, compacted.notes)
    assert under >= len(corpus) * 3 // 4, f"{under} of {len(corpus)} sessions at or under their budget"


def test_json_text_and_openai_dicts_round_trip_in_their_format(example: Dict[str, Any]) -> None:
    compacted = contextfold.compact(json.dumps(example), budget=3000)
    assert compacted.format == "anthropic"
    openai = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\n" * 2000},
        {"role": "assistant", "content": "There are many files."},
        {"role": "user", "content": "thanks"},
    ]
    compacted = contextfold.compact(openai, budget=800)
    assert compacted.format == "openai"
    assert isinstance(compacted.conversation, list)
    assert compacted.conversation[0] == {"role": "system", "content": "You are terse."}
    assert compacted.tokens_after <= 800
    assert contextfold.count_tokens(openai, "chars4") > contextfold.count_tokens("a.py\n", "chars4")


@pytest.mark.parametrize(
    "messages, index",
    [
        ([{"role": "user", "content": "hi"}, {"content": "no role"}], 1),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, {"role": "robot", "content": "x"}], 2),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": 42}], 1),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": "not an object"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "done"}]},
            ],
            1,
        ),
    ],
)
def test_a_malformed_conversation_names_the_message(messages: List[Dict[str, Any]], index: int) -> None:
    with pytest.raises(contextfold.ConversationError) as raised:
        contextfold.compact({"messages": messages}, budget=1000)
    assert isinstance(raised.value, contextfold.Error)
    assert raised.value.message_index == index
    assert f"message {index}" in str(raised.value)
    if index == 1 and "tool_use" in json.dumps(messages):
        return  # readable: the rule it breaks is the compactor's to find
    with pytest.raises(contextfold.ConversationError) as raised:
        contextfold.Middleware(100_000, 10_000).prepare(messages)
    assert raised.value.message_index == index
    assert f"message {index}" in str(raised.value)


def test_bad_settings_are_config_errors(example: Dict[str, Any]) -> None:
    for settings in (
        {"budget": 0},
        {"budget": 100, "window": 1000},
        {"window": 1000, "reserve": 1000},
        {"strategy": "fold"},
        {"tokenizer": "gpt2"},
        {"summarizer": "magic"},
        {"format": "xml"},
    ):
        with pytest.raises(contextfold.ConfigError):
            contextfold.compact(example, **settings)
    with pytest.raises(contextfold.ConfigError):
        contextfold.Middleware(1000, 2000)
    with pytest.raises(contextfold.ConversationError):
        contextfold.compact("{not json", budget=100)
    with pytest.raises(contextfold.CompactionError, match="smallest workable target"):
        contextfold.compact(example, budget=50)


class Summarizer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible summarizer on 127.0.0.1, answering in Python."""

    calls = 0

    def do_POST(self) -> None:  # noqa: N802 - the handler's name
        length = int(self.headers["content-length"])
        json.loads(self.rfile.read(length))
        type(self).calls += 1
        body = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": "## Goal\nFix the billing rounding bug."}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_gil_is_released_while_compacting(example: Dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # The summarizer is a Python server in this process: the compaction completes only if
    # Python code runs while it is in progress.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Summarizer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        compacted = contextfold.compact(example, budget=3000, strategy="summarize", summarizer="openai:test-model")
    finally:
        server.shutdown()
    assert Summarizer.calls >= 1
    assert compacted.summarizer and compacted.summarizer.startswith("openai:test-model")
    assert compacted.fallbacks == []


def test_middleware_keeps_the_prefix_between_compactions(example: Dict[str, Any]) -> None:
    messages = example["messages"]
    middleware = contextfold.Middleware(6000, 1000, system=example["system"], tools=example["tools"])
    sent: List[List[Any]] = []
    compactions = 0
    for end in range(1, len(messages) + 1):
        history = messages[:end]
        before = copy.deepcopy(history)
        prepared = middleware.prepare(history)
        assert history == before
        assert prepared.request_tokens <= 6000 - 1000 or prepared.error
        compactions += prepared.compacted
        if sent and not prepared.compacted:
            previous = sent[-1]
            assert prepared.messages[: len(previous)] == previous
            assert all(a is b for a, b in zip(prepared.messages, previous))
        sent.append(prepared.messages)
    assert compactions >= 1
    # A snapshot restored elsewhere sends what the original sends.
    state = json.loads(json.dumps(middleware.snapshot()))
    restored = contextfold.Middleware.restore(state, 6000, 1000, system=example["system"], tools=example["tools"])
    grown = messages + [{"role": "user", "content": "and the tests?"}]
    assert restored.prepare(grown).messages == middleware.prepare(grown).messages


def test_store_recalls_and_searches_what_a_compaction_removed(tmp_path: Path, example: Dict[str, Any]) -> None:
    store = contextfold.Store(tmp_path / "store.db")
    middleware = contextfold.Middleware(6000, 1000, system=example["system"], tools=example["tools"], store=store)
    shown = set()
    for end in range(1, len(example["messages"]) + 1):
        prepared = middleware.prepare(example["messages"][:end])
        if prepared.event:
            assert prepared.error is None
        shown.update(re.findall(r"cf-[0-9a-f]{8,}", json.dumps(prepared.messages)))
    sessions = store.sessions()
    assert [session["id"] for session in sessions] == [middleware.session]
    assert sessions[0]["payloads"] > 0
    assert shown, "the model was shown pointers"
    for ref in shown:
        assert store.recall(ref) is not None, ref
    assert store.recall("cf-0000000000000000") is None
    hits = store.search("invoice", limit=5)
    assert hits and all("snippet" in hit and hit["session"] == middleware.session for hit in hits)
    # The history as of the last compaction is stored, as the caller gave it.
    exported = store.export(middleware.session)
    assert exported and exported == example["messages"][: len(exported)]
    with pytest.raises(contextfold.StoreError):
        contextfold.Store(tmp_path)
