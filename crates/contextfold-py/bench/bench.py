"""In-process compaction cost: contextfold against LangChain's own, on one session, in one run.

Measures, on the largest corpus session (or the file given) and one budget:

- ``contextfold.compact`` (the whole compaction, from the caller's dicts to dicts);
- ``Middleware.prepare`` of the whole session on a fresh middleware (reads it, compacts);
- ``Middleware.prepare`` of the conversation grown by one message (the steady state of an
  agent loop: one new message a call, no compaction);
- LangChain's ``SummarizationMiddleware.before_model`` with a fake summarizer (no model
  call: what is timed is LangChain's own work) triggering at the budget;
- LangChain's ``ContextEditingMiddleware`` with ``ClearToolUsesEdit`` triggering at the
  budget, through its ``wrap_model_call`` with a handler that returns at once.

Each is run several times and the median (and the fastest) wall time reported. Build the
extension in release mode for figures worth quoting (``maturin develop --release``).

    python crates/contextfold-py/bench/bench.py [SESSION.json] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import contextfold

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus"


def timed(run: Callable[[], Any], runs: int) -> List[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def langchain_messages(session: Dict[str, Any]) -> List[Any]:
    """The session's Anthropic messages as LangChain messages (tool calls and results paired)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    def text(content: Any) -> str:
        if isinstance(content, str):
            return content
        return "\n".join(block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text")

    messages: List[Any] = []
    for message in session["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant":
            calls = [
                {"id": block["id"], "name": block["name"], "args": block.get("input") or {}}
                for block in blocks
                if block.get("type") == "tool_use"
            ]
            messages.append(AIMessage(content=text(blocks), tool_calls=calls))
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                messages.append(ToolMessage(content=text(block.get("content") or ""), tool_call_id=block["tool_use_id"]))
        words = text([block for block in blocks if block.get("type") == "text"])
        if words:
            messages.append(HumanMessage(content=words))
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("session", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    path = args.session or max(
        (p for p in CORPUS.glob("*.json") if p.name != "manifest.json"), key=lambda p: p.stat().st_size
    )
    session = json.loads(path.read_text())
    tokens = contextfold.count_tokens(session)
    budget = tokens // 3
    print(f"session: {path.name} ({path.stat().st_size:,} bytes, {len(session['messages'])} messages, "
          f"{tokens:,} tokens o200k); budget {budget:,} tokens; {args.runs} runs each")
    rows: List[tuple] = []

    for tokenizer in ("o200k", "estimate"):
        compacted = contextfold.compact(session, budget=budget, tokenizer=tokenizer)
        rows.append((f"contextfold.compact (tokenizer={tokenizer})",
                     timed(lambda: contextfold.compact(session, budget=budget, tokenizer=tokenizer), args.runs),
                     f"{compacted.tokens_after:,} tokens, {compacted.strategy_used}"))

    # A window the session overflows (its usable part 90% of the session), compacted to the budget.
    reserve = 4_000
    usable = tokens * 9 // 10
    window, target = usable + reserve, budget / usable
    system, tools, messages = session.get("system") or None, session.get("tools") or None, session["messages"]

    def fresh() -> contextfold.Prepared:
        return contextfold.Middleware(window, reserve, target=target, system=system, tools=tools).prepare(messages)

    first = fresh()
    rows.append(("Middleware.prepare, whole session", timed(fresh, args.runs),
                 f"{first.request_tokens:,} tokens sent, compacted: {first.compacted}"))

    # Grown by one message a call: a middleware that has seen all but the last k messages.
    k = 40
    grown: List[float] = []
    steady = contextfold.Middleware(window, reserve, target=target, system=system, tools=tools)
    steady.prepare(messages[: len(messages) - k])
    compactions = 0
    for end in range(len(messages) - k + 1, len(messages) + 1):
        history = messages[:end]
        start = time.perf_counter()
        prepared = steady.prepare(history)
        elapsed = time.perf_counter() - start
        if prepared.compacted:
            compactions += 1
        else:
            grown.append(elapsed)
    rows.append(("Middleware.prepare, grown by one message", grown,
                 f"{len(grown)} calls without compaction ({compactions} compacted, not counted)"))

    try:
        from langchain.agents.middleware import ContextEditingMiddleware, ModelRequest, SummarizationMiddleware
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
    except ImportError:
        print("LangChain is not installed: its rows are left out")
    else:
        lc = langchain_messages(session)
        fake = FakeListChatModel(responses=["summary"])
        summarization = SummarizationMiddleware(
            fake, trigger=("tokens", budget), keep=("tokens", budget // 2), summarizer=lambda _: "A summary."
        )
        result = summarization.before_model({"messages": lc}, None)
        kept = len(result["messages"]) - 1 if result else len(lc)
        rows.append(("LangChain SummarizationMiddleware (fake summarizer)",
                     timed(lambda: summarization.before_model({"messages": lc}, None), args.runs),
                     f"{kept} messages after"))
        request = ModelRequest(model=fake, messages=lc)
        sent: List[Any] = []

        def handler(edited: Any) -> Any:
            sent[:] = edited.messages
            return None

        # Its default clears every output but the last 3; `clear_at_least` stops once enough
        # is cleared to reach the budget (counting again after each output it clears).
        for label, edit in (
            ("LangChain ClearToolUsesEdit (default: all but 3)", ClearToolUsesEdit(trigger=budget)),
            ("LangChain ClearToolUsesEdit (clear_at_least to budget)",
             ClearToolUsesEdit(trigger=budget, clear_at_least=max(tokens - budget, 1))),
        ):
            editing = ContextEditingMiddleware(edits=[edit])
            rows.append((label, timed(lambda: editing.wrap_model_call(request, handler), args.runs),
                         f"{sum(1 for m in sent if getattr(m, 'response_metadata', {}).get('context_editing'))} outputs cleared"))

    print(f"\n| {'what':<52} | {'median ms':>10} | {'fastest ms':>10} | result")
    print(f"|{'-' * 54}|{'-' * 12}|{'-' * 12}|-------")
    for name, times, note in rows:
        print(f"| {name:<52} | {statistics.median(times) * 1e3:>10.3f} | {min(times) * 1e3:>10.3f} | {note}")


if __name__ == "__main__":
    main()
