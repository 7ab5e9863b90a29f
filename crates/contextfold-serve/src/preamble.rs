//! The system prompt and tools of a Messages request, read into the model once for each
//! text: a client sends the same ones on every call, and its tools alone are often tens of
//! kilobytes, which would otherwise be parsed again on each.

use crate::known::{entry_key, EntryKey};
use contextfold_core::{Conversation, System};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How many texts of each kind are remembered. Past it the memory starts over: a client
/// whose system prompt changes on every call (Claude Code's first block is a per-request
/// billing line) only refills it.
const REMEMBERED: usize = 256;

/// A request's system prompt and tools, read.
#[derive(Debug, Clone, Default)]
pub struct Preamble {
    /// The system prompt.
    pub system: Option<Arc<System>>,
    /// The tool definitions.
    pub tools: Option<Arc<Vec<Value>>>,
}

/// The system prompts and tool lists read lately, by the key of their text.
#[derive(Default)]
pub struct Preambles {
    systems: Mutex<HashMap<EntryKey, Arc<System>>>,
    tools: Mutex<HashMap<EntryKey, Arc<Vec<Value>>>>,
}

impl Preambles {
    /// The system prompt and tools written as `system` and `tools` (raw JSON, when the body
    /// has them), read as the model reads a request's; why not, when it cannot.
    pub fn read(&self, system: Option<&str>, tools: Option<&str>) -> Result<Preamble, String> {
        let system = system.map(|raw| remembered(&self.systems, raw, |value| read_part("system", value)));
        let tools = tools.map(|raw| remembered(&self.tools, raw, |value| read_part("tools", value)));
        Ok(Preamble { system: system.transpose()?, tools: tools.transpose()? })
    }
}

/// A request that holds only `value` as its `key`, read, and that part of it.
fn read_part<T: FromPart>(key: &str, value: Value) -> Result<T, String> {
    let mut request = json!({"messages": []});
    request[key] = value;
    let read = Conversation::from_value(request).map_err(|err| err.to_string())?;
    T::from_part(read).ok_or_else(|| format!("`{key}` is empty"))
}

/// A part of a request read into the model.
trait FromPart: Sized {
    fn from_part(conversation: Conversation) -> Option<Self>;
}

impl FromPart for System {
    fn from_part(conversation: Conversation) -> Option<System> {
        conversation.system
    }
}

impl FromPart for Vec<Value> {
    fn from_part(conversation: Conversation) -> Option<Vec<Value>> {
        conversation.tools
    }
}

/// The part written as `raw`, read by `read` unless `memory` holds it.
fn remembered<T>(
    memory: &Mutex<HashMap<EntryKey, Arc<T>>>,
    raw: &str,
    read: impl FnOnce(Value) -> Result<T, String>,
) -> Result<Arc<T>, String> {
    let key = entry_key(raw);
    let lock = || memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(held) = lock().get(&key) {
        return Ok(held.clone());
    }
    let value: Value = serde_json::from_str(raw).map_err(|err| err.to_string())?;
    let read = Arc::new(read(value)?);
    let mut memory = lock();
    if memory.len() >= REMEMBERED {
        memory.clear();
    }
    memory.insert(key, read.clone());
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_read_as_the_request_reads_it_and_once() {
        let preambles = Preambles::default();
        let system = r#"[{"type":"text","text":"be careful","cache_control":{"type":"ephemeral"}}]"#;
        let tools = r#"[{"name":"Read","input_schema":{"type":"object"}}]"#;
        let request: Value =
            serde_json::from_str(&format!(r#"{{"system":{system},"tools":{tools},"messages":[]}}"#)).unwrap();
        let whole = Conversation::from_value(request).unwrap();
        let first = preambles.read(Some(system), Some(tools)).unwrap();
        assert_eq!(first.system.as_deref(), whole.system.as_ref());
        assert_eq!(first.tools.as_deref(), whole.tools.as_ref());
        let again = preambles.read(Some(system), Some(tools)).unwrap();
        assert!(Arc::ptr_eq(first.tools.as_ref().unwrap(), again.tools.as_ref().unwrap()), "read once");
        assert!(preambles.read(None, None).unwrap().system.is_none());
    }

    #[test]
    fn a_part_the_model_cannot_read_says_why_as_the_request_would() {
        let preambles = Preambles::default();
        let whole = |body: &str| Conversation::from_value(serde_json::from_str(body).unwrap()).unwrap_err().to_string();
        assert_eq!(preambles.read(Some("7"), None).unwrap_err(), whole(r#"{"system":7,"messages":[]}"#));
        assert_eq!(preambles.read(None, Some("{}")).unwrap_err(), whole(r#"{"tools":{},"messages":[]}"#));
        assert_eq!(
            preambles.read(Some(r#"[{"type":"text"}]"#), None).unwrap_err(),
            whole(r#"{"system":[{"type":"text"}],"messages":[]}"#)
        );
    }
}
