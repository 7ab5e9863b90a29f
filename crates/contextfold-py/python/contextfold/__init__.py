"""contextfold: keep long LLM-agent conversations inside their context window, in-process.

The engine is contextfold's Rust library, called with the GIL released:

- :func:`compact` compacts one conversation to a budget and reports what it did, with the
  names ``contextfold compact --json`` prints;
- :class:`Middleware` runs before each model call of one conversation, compacting only when
  it pays, so the prefix sent stays the same between compactions (and the provider's prompt
  cache holds);
- :class:`Store` keeps what compactions removed, for :meth:`Store.recall` and
  :meth:`Store.search`.

Adapters for agent frameworks live in :mod:`contextfold.langchain`,
:mod:`contextfold.pydantic_ai` and :mod:`contextfold.openai_agents`; each imports only
when its framework is installed (the extras ``contextfold[langchain]``,
``contextfold[pydantic-ai]`` and ``contextfold[openai-agents]``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native
from ._native import (
    CompactionError,
    ConfigError,
    ConversationError,
    Error,
    StateError,
    Store,
    StoreError,
)

__all__ = [
    "Compacted",
    "CompactionError",
    "ConfigError",
    "ConversationError",
    "Error",
    "Middleware",
    "Prepared",
    "StateError",
    "Store",
    "StoreError",
    "compact",
    "count_tokens",
]

__version__: str = _native.__version__

#: A conversation as its dicts: a request object (``{"system", "messages", "tools"}``, or
#: OpenAI's ``{"messages", "tools"}``, or Responses' ``{"instructions", "input"}``), or a bare
#: list of its messages.
Conversation = Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class Compacted:
    """A compacted conversation, in the format it was given, and what was done.

    The attributes after ``format`` are the report, named as ``contextfold compact --json``
    names them; ``report`` is that whole object.
    """

    conversation: Any
    """The compacted conversation, in the input's format and layout (a Claude Code log is
    written as Anthropic Messages)."""
    format: str
    """The format it was read and written in: ``anthropic``, ``openai`` or ``responses``."""
    report: Dict[str, Any]
    """The report as ``contextfold compact --json`` prints it (without ``file``)."""
    tokens_before: int
    tokens_after: int
    target_tokens: int
    strategy_used: str
    """What was done, in order: ``none``, or step names joined by ``+``
    (``evict+summarize+clip``)."""
    summary_tokens: int
    offloaded: int
    items: List[Dict[str, Any]]
    """Each evicted payload: its ref, tool, kind, target and tokens."""
    clipped: List[Dict[str, Any]]
    fallbacks: List[Dict[str, str]]
    summarizer: Optional[str]
    summarizer_calls: int
    summarizer_usage: Dict[str, int]
    cache_hit: bool
    turns_folded: int
    messages_folded: int
    missing_facts: int
    fixes: List[str]
    notes: List[str]
    valid: bool
    duration_ms: float
    secrets_redacted: int = 0


_REPORT_FIELDS = [name for name in Compacted.__dataclass_fields__ if name not in ("conversation", "format", "report")]


def compact(
    conversation: Union[Conversation, str],
    *,
    budget: Optional[int] = None,
    window: Optional[int] = None,
    reserve: Optional[int] = None,
    target_fraction: float = 0.5,
    strategy: str = "auto",
    summarizer: str = "extractive",
    format: Optional[str] = None,
    tokenizer: str = "o200k",
    keep_turns: Optional[int] = None,
    max_tail_tokens: Optional[int] = None,
    summary_tokens: int = 4000,
    max_tool_output: Optional[int] = None,
) -> Compacted:
    """Compacts ``conversation`` to a budget; the settings are ``contextfold compact``'s flags.

    ``conversation`` is the dicts you already have (Anthropic Messages, OpenAI Chat
    Completions or Responses; a request object or a bare list of messages) or their JSON
    text (a Claude Code log too). Its format is detected as the CLI detects it, unless
    ``format`` names it. The target is ``budget`` tokens, or ``target_fraction`` of
    ``window`` less ``reserve`` (default 16,000), or else half the conversation.
    ``strategy`` is ``auto`` (evict stale tool output first, summarize only if needed),
    ``evict`` or ``summarize``; ``summarizer`` is ``extractive`` (offline) or
    ``anthropic[:MODEL]`` / ``openai[:MODEL]`` (configured from the environment, as the
    CLI's). ``max_tool_output`` clips a single tool output over that many tokens (``0``:
    never clip; default 10% of the budget).

    The caller's conversation is not changed. Raises :class:`ConversationError` (naming the
    message index) for a conversation that cannot be read or compacted,
    :class:`ConfigError` for settings that cannot work and :class:`CompactionError` when the
    target is too small (its message names the smallest that works).
    """
    converted, report, written_format, notes = _native.compact(
        conversation,
        budget=budget,
        window=window,
        reserve=reserve,
        target_fraction=target_fraction,
        strategy=strategy,
        summarizer=summarizer,
        format=format,
        tokenizer=tokenizer,
        keep_turns=keep_turns,
        max_tail_tokens=max_tail_tokens,
        summary_tokens=summary_tokens,
        max_tool_output=max_tool_output,
    )
    for note in notes:
        warnings.warn(f"contextfold: {note}", stacklevel=2)
    fields = {name: report[name] for name in _REPORT_FIELDS if name in report}
    return Compacted(conversation=converted, format=written_format, report=report, **fields)


def count_tokens(conversation_or_text: Union[Conversation, str], tokenizer: str = "o200k", *, format: Optional[str] = None) -> int:
    """The tokens of a conversation (its dicts, read as :func:`compact` reads them, system
    prompt and tools included) or of a string, by ``tokenizer``: ``o200k`` or ``cl100k``
    (exact BPE), ``estimate`` (fast, calibrated) or ``chars4``."""
    return _native.count_tokens(conversation_or_text, tokenizer, format=format)


@dataclass(frozen=True)
class Prepared:
    """What to send for one model call, and what happened."""

    messages: List[Any]
    """The messages to send, in the middleware's format: the caller's own objects for what
    the engine kept as given, and the compaction's messages (the same objects on every call
    until the next compaction)."""
    compacted: bool
    """Whether this call compacted."""
    event: Optional[Dict[str, Any]]
    """The compaction's event (``trigger``, ``strategy``, ``tokens_before``,
    ``tokens_after``, ``target_tokens``, ``summary_tokens``, ``offloaded``, …), when one ran."""
    unchanged_tail: int
    """How many of the newest history messages went out as the caller gave them."""
    request_tokens: int
    """The estimated tokens of the request (system prompt and tools included)."""
    skipped: Optional[str] = None
    """Why no compaction ran, when the policy was asked and declined."""
    error: Optional[str] = None
    """What went wrong, when something did; the request is sendable all the same (after a
    failed compaction it is the history as it was)."""


class Middleware:
    """Compacts one conversation before each model call.

    Give it the model's ``window`` and the ``reserve`` kept free for the answer; it compacts
    to ``target`` of the usable window (default 20%) when its cost-aware policy says it
    pays, or when the next request would not fit. ``system`` and ``tools`` are the
    conversation's system prompt and tool definitions (counted, never changed). ``format`` is
    the messages' format: ``anthropic`` (Messages), ``openai`` (Chat Completions; leading
    system messages are the system prompt) or ``responses`` (Responses input items). With a
    ``store``, each compaction keeps what it removed there, in ``session`` (a new one when not
    given), and ``recall_tool=True`` makes the pointers name the ``context_recall`` tool.

    Use one middleware per conversation: it keeps its own working copy, never changes the
    caller's list, and sends the same prefix between compactions.
    """

    def __init__(
        self,
        window: int,
        reserve: int,
        *,
        target: float = 0.2,
        system: Union[str, Sequence[Mapping[str, Any]], None] = None,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        store: Optional[Store] = None,
        session: Optional[str] = None,
        format: str = "anthropic",
        strategy: str = "auto",
        summarizer: str = "extractive",
        tokenizer: str = "o200k",
        recall_tool: bool = False,
    ) -> None:
        self._settings: Dict[str, Any] = dict(
            target=target,
            system=system,
            tools=tools,
            store=store,
            format=format,
            strategy=strategy,
            summarizer=summarizer,
            tokenizer=tokenizer,
            recall_tool=recall_tool,
        )
        self._window, self._reserve = window, reserve
        self._native = _native.Middleware(window, reserve, session=session, **self._settings)

    @classmethod
    def restore(
        cls,
        state: Mapping[str, Any],
        window: int,
        reserve: int,
        **settings: Any,
    ) -> "Middleware":
        """A middleware that goes on from ``state``, a :meth:`snapshot` of one made with the
        same ``window``, ``reserve`` and settings: given the next history, it sends what the
        original would have sent. Raises :class:`StateError` for a snapshot it cannot use."""
        middleware = cls.__new__(cls)
        session = settings.pop("session", None)
        middleware._settings = dict(settings)
        middleware._window, middleware._reserve = window, reserve
        middleware._native = _native.Middleware.restore(state, window, reserve, session=session, **settings)
        return middleware

    def prepare(self, history: Sequence[Any], pending: Sequence[Any] = ()) -> Prepared:
        """The messages to send for the next model call: ``history`` (the conversation so
        far, never changed) and then ``pending`` (new input), compacted first when the
        policy says so or the request would not fit. A call that does not compact costs
        what is new since the last one. Raises :class:`ConversationError` (naming the message
        index) for a message that cannot be read."""
        messages, event, unchanged_tail, request_tokens, skipped, error = self._native.prepare(list(history), list(pending))
        return Prepared(
            messages=messages,
            compacted=event is not None,
            event=event,
            unchanged_tail=unchanged_tail,
            request_tokens=request_tokens,
            skipped=skipped,
            error=error,
        )

    def observe_usage(self, input_tokens: int) -> None:
        """Corrects the estimate with the provider's count of the last request's input tokens."""
        self._native.observe_usage(input_tokens)

    def snapshot(self) -> Dict[str, Any]:
        """The middleware's state as JSON-shaped dicts (for :meth:`restore`, in this process
        or another): the messages compactions made and a few counters, not the history."""
        return self._native.snapshot()

    @property
    def session(self) -> Optional[str]:
        """The store session compactions are kept in, with a store."""
        return self._native.session

    @property
    def window(self) -> int:
        """The model's context window."""
        return self._window

    @property
    def reserve(self) -> int:
        """Tokens kept free for the answer."""
        return self._reserve
