"""Type stubs for the extension module; the documented API is :mod:`contextfold`."""

from os import PathLike
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str

class Error(Exception):
    """The base class of every error contextfold raises."""

class ConversationError(Error):
    """The conversation cannot be read, or breaks a rule repair cannot fix."""

    message_index: Optional[int]
    block_index: Optional[int]

class ConfigError(Error):
    """Settings that cannot work (or contradict each other)."""

class CompactionError(Error):
    """The compaction could not produce a valid conversation."""

class StoreError(Error):
    """The store failed, or could not be opened."""

class StateError(Error):
    """A middleware snapshot that cannot be restored."""

def compact(
    conversation: Any,
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
) -> Tuple[Any, Dict[str, Any], str, List[str]]: ...
def count_tokens(conversation_or_text: Any, tokenizer: str = "o200k", *, format: Optional[str] = None) -> int: ...

class Store:
    def __init__(self, path_or_url: Union[str, "PathLike[str]"]) -> None: ...
    def recall(self, reference: str) -> Union[str, List[Dict[str, Any]], None]: ...
    def search(self, query: str, *, limit: int = 10, session: Optional[str] = None) -> List[Dict[str, Any]]: ...
    def sessions(self) -> List[Dict[str, Any]]: ...
    def export(self, session: str) -> List[Dict[str, Any]]: ...
    def create_session(self, name: str) -> str: ...

class Middleware:
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
    ) -> None: ...
    @staticmethod
    def restore(
        state: Mapping[str, Any],
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
    ) -> "Middleware": ...
    def prepare(
        self, history: List[Any], pending: List[Any] = ...
    ) -> Tuple[List[Any], Optional[Dict[str, Any]], int, int, Optional[str], Optional[str]]: ...
    def observe_usage(self, input_tokens: int) -> None: ...
    def snapshot(self) -> Dict[str, Any]: ...
    @property
    def session(self) -> Optional[str]: ...
