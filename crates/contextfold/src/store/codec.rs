//! How values are stored: messages and JSON as text (floats kept bit for bit), the content
//! hash of a message, and the searchable text of messages and payloads.

use super::StoreError;
use contextfold_core::hash::{canonical_json, StableHasher};
use contextfold_core::{ContentShape, Message};
use serde_json::Value;

/// The content hash of a message: its JSON (keys sorted) and its content shape.
pub fn message_hash(message: &Message) -> String {
    let shape: &[u8] = match message.shape {
        ContentShape::Blocks => b"blocks",
        ContentShape::Text => b"text",
    };
    let hash = StableHasher::default()
        .write(b"message")
        .write(shape)
        .write(canonical_json(&message.to_value()).as_bytes())
        .finish();
    format!("{hash:016x}")
}

/// The searchable text of a JSON value: its strings, one a line (object keys left out).
pub(crate) fn searchable_text(value: &Value) -> String {
    fn walk(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(map) => map.values().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

/// The searchable text of a message: the strings of its content.
pub(crate) fn message_text(message: &Message) -> String {
    let content = message.to_value().get("content").cloned().unwrap_or(Value::Null);
    searchable_text(&content)
}

/// Reads back a message stored as its JSON and content shape.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn message_from_stored(json: &str, shape: &str, sequence: usize) -> Result<Message, StoreError> {
    let value = decode_json(json, &format!("message {sequence}"))?;
    let mut message = Message::from_value(value, sequence)
        .map_err(|err| StoreError::Corrupt(format!("message {sequence}: {}", err.message)))?;
    message.shape = if shape == "text" { ContentShape::Text } else { ContentShape::Blocks };
    Ok(message)
}

/// The shape column of a message.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn shape_name(message: &Message) -> &'static str {
    match message.shape {
        ContentShape::Blocks => "blocks",
        ContentShape::Text => "text",
    }
}

/// `value` as stored text: its JSON, preceded, when it holds floating-point numbers, by a
/// line `F<bits>,<bits>,…` giving their exact bits in document order.
///
/// serde_json (without its `float_roundtrip` feature) may read a float back one unit in the
/// last place off; the bits make every stored value come back exactly.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode_json(value: &Value) -> String {
    fn floats(value: &Value, out: &mut Vec<u64>) {
        match value {
            Value::Number(number) if !number.is_i64() && !number.is_u64() => {
                out.push(number.as_f64().unwrap_or_default().to_bits())
            }
            Value::Array(items) => items.iter().for_each(|item| floats(item, out)),
            Value::Object(map) => map.values().for_each(|item| floats(item, out)),
            _ => {}
        }
    }
    let mut bits = Vec::new();
    floats(value, &mut bits);
    let json = value.to_string();
    if bits.is_empty() {
        return json;
    }
    let bits: Vec<String> = bits.iter().map(u64::to_string).collect();
    format!("F{}\n{json}", bits.join(","))
}

/// Reads text written by [`encode_json`]; `what` names it in errors.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_json(text: &str, what: &str) -> Result<Value, StoreError> {
    fn restore(value: &mut Value, bits: &mut std::slice::Iter<'_, u64>) {
        match value {
            Value::Number(number) if !number.is_i64() && !number.is_u64() => {
                if let Some(exact) = bits.next().and_then(|bits| serde_json::Number::from_f64(f64::from_bits(*bits))) {
                    *number = exact;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| restore(item, bits)),
            Value::Object(map) => map.values_mut().for_each(|item| restore(item, bits)),
            _ => {}
        }
    }
    let corrupt = |detail: String| StoreError::Corrupt(format!("{what}: {detail}"));
    let (bits, json) = match text.strip_prefix('F') {
        Some(rest) => {
            let (line, json) = rest.split_once('\n').ok_or_else(|| corrupt("no JSON after the float line".into()))?;
            let bits = line
                .split(',')
                .map(str::parse::<u64>)
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|err| corrupt(format!("bad float line: {err}")))?;
            (bits, json)
        }
        None => (Vec::new(), text),
    };
    let mut value: Value = serde_json::from_str(json).map_err(|err| corrupt(format!("not JSON: {err}")))?;
    if !bits.is_empty() {
        restore(&mut value, &mut bits.iter());
    }
    Ok(value)
}
