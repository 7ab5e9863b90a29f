//! What the proxy did with a request, as its log line, its call record and the metrics name
//! it: one type the three share, so none of them needs another to say it.

/// What the proxy did with a request's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Not a request that carries a conversation: forwarded as it came.
    Forwarded,
    /// The client's body went out unchanged: nothing to compact yet.
    Unchanged,
    /// Compacted for this request.
    Compacted,
    /// An earlier compaction resent: only `messages` differs from the client's body.
    Resent,
    /// Forwarded as it came, and why (`note`): the client turned compaction off, runs its
    /// own server-side compaction, or sent something the compaction cannot read.
    Untouched,
    /// Answered by the proxy itself (bad body, no token, upstream down).
    Refused,
    /// A call of the recall tools at `/mcp`, answered by the proxy from its store.
    Mcp,
}

impl Action {
    /// The action `name` names ([`Action::name`]).
    pub fn parse(name: &str) -> Option<Action> {
        [
            Action::Forwarded,
            Action::Unchanged,
            Action::Compacted,
            Action::Resent,
            Action::Untouched,
            Action::Refused,
            Action::Mcp,
        ]
        .into_iter()
        .find(|action| action.name() == name)
    }

    /// The action as the log line and the metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            Action::Forwarded => "forwarded",
            Action::Unchanged => "unchanged",
            Action::Compacted => "compacted",
            Action::Resent => "resent",
            Action::Untouched => "untouched",
            Action::Refused => "refused",
            Action::Mcp => "mcp",
        }
    }
}
