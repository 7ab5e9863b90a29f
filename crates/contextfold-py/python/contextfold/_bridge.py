"""One conversation's :class:`~contextfold.Middleware` behind an agent framework's messages.

An adapter says how one framework message becomes message dicts of the middleware's format
(``to_entries``) and how dicts the compaction made become framework messages
(``from_entries``). The bridge keeps both conversions by identity: a message seen before
gives the same dicts (so the middleware reads only what is new), dicts a compaction made
give the same framework messages on every call until the next compaction (so the prefix sent
is stable and the provider's prompt cache holds), and what the middleware kept as the
caller gave it goes out as the caller's own message objects.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import Middleware, Prepared

ToEntries = Callable[[Any], List[Dict[str, Any]]]
FromEntries = Callable[[List[Dict[str, Any]]], List[Any]]


class Bridge:
    """A middleware fed a framework's message list, giving back one."""

    def __init__(self, middleware: Middleware, to_entries: ToEntries, from_entries: FromEntries) -> None:
        self.middleware = middleware
        self._to_entries = to_entries
        self._from_entries = from_entries
        self._seen: List[Tuple[Any, List[Dict[str, Any]]]] = []
        self._made: Dict[Tuple[int, ...], Tuple[List[Dict[str, Any]], List[Any]]] = {}
        self._system: Tuple[Any, List[Dict[str, Any]]] = (None, [])
        self.last: Optional[Prepared] = None
        """What the last call prepared."""

    def prepare(self, messages: Sequence[Any], system: Any = None) -> List[Any]:
        """The framework messages to send for ``messages``; ``system``, a system prompt the
        framework keeps apart (converted by ``to_entries``), goes first to the middleware and
        is not given back."""
        if system is None:
            leading: List[Dict[str, Any]] = []
        elif self._system[0] is system:
            leading = self._system[1]
        else:
            leading = self._to_entries(system)
            self._system = (system, leading)
        seen: List[Tuple[Any, List[Dict[str, Any]]]] = []
        entries: List[Dict[str, Any]] = list(leading)
        owners: Dict[int, int] = {id(entry): -1 for entry in leading}
        for index, message in enumerate(messages):
            if index < len(self._seen) and self._seen[index][0] is message:
                converted = self._seen[index][1]
            else:
                converted = self._to_entries(message)
            seen.append((message, converted))
            for entry in converted:
                owners[id(entry)] = index
            entries.extend(converted)
        self._seen = seen
        prepared = self.middleware.prepare(entries)
        self.last = prepared
        return self._framework(prepared.messages, messages, owners)

    def _framework(self, sent: List[Dict[str, Any]], messages: Sequence[Any], owners: Dict[int, int]) -> List[Any]:
        """``sent`` as framework messages: the caller's own where all of one message's
        dicts went out as it gave them, converted (and kept) elsewhere."""
        out: List[Any] = []
        made: Dict[Tuple[int, ...], Tuple[List[Dict[str, Any]], List[Any]]] = {}
        run: List[Dict[str, Any]] = []

        def flush() -> None:
            if not run:
                return
            key = tuple(id(entry) for entry in run)
            converted = self._made.get(key) or made.get(key) or (list(run), self._from_entries(list(run)))
            made[key] = converted
            out.extend(converted[1])
            run.clear()

        position = 0
        while position < len(sent):
            entry = sent[position]
            owner = owners.get(id(entry))
            if owner == -1:
                position += 1
                continue
            if owner is not None:
                own = self._seen[owner][1]
                if [id(item) for item in sent[position : position + len(own)]] == [id(item) for item in own]:
                    flush()
                    out.append(messages[owner])
                    position += len(own)
                    continue
            run.append(entry)
            position += 1
        flush()
        self._made = made
        return out
