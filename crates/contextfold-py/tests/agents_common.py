"""What the adapter tests share: a tool whose outputs fill the window, and the checks on
what a fake model received."""

from __future__ import annotations

from typing import Any, Callable, List, Sequence

#: The model's window and reserve in the adapter tests: 40 file reads of ~1,500 tokens do
#: not fit without compaction.
WINDOW, RESERVE, STEPS = 24_000, 2_000, 40
FINAL = "Every module is read; the rounding bug is in module 7."


def read_file_text(path: str) -> str:
    """The text a file read returns: distinct lines, so that no two outputs are alike."""
    return "\n".join(f"{path}:{line}: value_{line} = compute({line}, '{path}')  # checked" for line in range(120))


def prefixes_hold(calls: Sequence[Sequence[Any]], compacted: Sequence[bool], same: Callable[[Any, Any], bool]) -> int:
    """Checks that every call after a compaction, up to the next one, begins with what the
    compacting call sent; returns how many calls were checked."""
    checked = 0
    for index in range(1, len(calls)):
        if compacted[index] or not any(compacted[:index]):
            continue
        last = max(i for i in range(index) if compacted[i])
        first = calls[last]
        assert len(calls[index]) >= len(first)
        for sent, before in zip(calls[index], first):
            assert same(sent, before), (index, last)
        checked += 1
    return checked
