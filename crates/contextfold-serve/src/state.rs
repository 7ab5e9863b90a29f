//! A conversation's state as the store keeps it, so that a restarted proxy or another
//! replica goes on with the conversation exactly where this one left it: the middleware's
//! snapshot, with what configured it (the window, and the system prompt and tools its first
//! request had), and the store session its compactions go to. Serialized as JSON, sealed
//! ([`crate::secrets`]): the record's secrets are masked and only their places kept.

use crate::secrets::{self, Hole, Secrets};
use contextfold::middleware::MiddlewareState;
use contextfold::store::SessionId;
use contextfold_core::{Conversation, System};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key of a conversation's state.
pub fn key(conversation: u64) -> String {
    format!("serve:{conversation:016x}")
}

/// What the store keeps of one conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The store session its compactions are kept in.
    pub session: Option<SessionId>,
    /// The window it is compacted in.
    pub window: u64,
    /// Its system prompt and tools, as a conversation without messages.
    pub frame: Value,
    /// The middleware's state.
    pub middleware: MiddlewareState,
}

impl Record {
    /// The frame of `system` and `tools`.
    pub fn frame(system: Option<&System>, tools: Option<&[Value]>) -> Value {
        secrets::frame(system, tools)
    }

    /// The system prompt and tools of the frame.
    pub fn system_and_tools(&self) -> Result<(Option<System>, Option<Vec<Value>>), String> {
        let mut frame = self.frame.clone();
        if let Some(map) = frame.as_object_mut() {
            map.entry("messages").or_insert_with(|| Value::Array(Vec::new()));
        }
        let conversation = Conversation::from_value(frame).map_err(|err| err.to_string())?;
        Ok((conversation.system, conversation.tools))
    }

    /// Its bytes in the store: sealed, with where in `request` (or a request `secrets` saw
    /// before) each secret is.
    pub fn to_bytes(&self, secrets: &mut Secrets, request: Option<secrets::Sources<'_>>) -> Result<Vec<u8>, String> {
        let mut record = serde_json::to_value(self).map_err(|err| err.to_string())?;
        let holes = secrets.seal(&mut record, request);
        serde_json::to_vec(&Sealed { record, secrets: holes }).map_err(|err| err.to_string())
    }

    /// Reads bytes written by [`Record::to_bytes`], each secret taken from `request`.
    pub fn from_bytes(bytes: &[u8], secrets: &mut Secrets, request: secrets::Sources<'_>) -> Result<Record, String> {
        let Sealed { mut record, secrets: holes } = serde_json::from_slice(bytes).map_err(|err| err.to_string())?;
        secrets.unseal(&mut record, &holes, request);
        serde_json::from_value(record).map_err(|err| err.to_string())
    }
}

/// A record as stored: masked, and where its secrets are.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    record: Value,
    secrets: Vec<Hole>,
}
