//! The full parser's read of a body: every byte checked by serde_json, the top-level
//! fields kept as raw text and the list's entries split out as it goes. It reads whatever
//! the split by structure cannot, and says where a body is wrong.

use super::BodyError;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;

/// A body as the parser read it.
pub(super) struct Parsed<'a> {
    /// Every top-level field but the list, as raw text.
    pub fields: Vec<(String, &'a RawValue)>,
    /// The list's entries.
    pub messages: Vec<&'a str>,
    /// Where the list lies in the body.
    pub span: (usize, usize),
}

/// The top-level fields of `text` but `list`, the list's entries and its span; an error when
/// `text` is not a JSON object with exactly one `list` array.
pub(super) fn read<'a>(text: &'a str, list: &'static str) -> Result<Parsed<'a>, BodyError> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        // Still report malformed JSON as such.
        serde_json::from_str::<IgnoredAny>(text).map_err(|err| BodyError::json(&err))?;
        return Err(BodyError::NotAnObject(list));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let Fields { fields, mut lists } =
        FieldsSeed { list: Some(list) }.deserialize(&mut deserializer).map_err(|err| BodyError::json(&err))?;
    deserializer.end().map_err(|err| BodyError::json(&err))?;
    let messages = match (lists.pop(), lists.is_empty()) {
        (Some(Some(messages)), true) => messages,
        (None, _) => return Err(BodyError::List(list, "is missing")),
        (Some(_), false) => return Err(BodyError::List(list, "appears twice")),
        (Some(None), true) => return Err(BodyError::List(list, "must be an array")),
    };
    let messages: Vec<&str> = messages.into_iter().map(RawValue::get).collect();
    let span = span(text, &messages).unwrap_or_else(|| empty_span(text, list));
    Ok(Parsed { fields, messages, span })
}

/// Where a list with these entries lies in `text`: from the `[` before the first to the `]`
/// after the last (entries are slices of `text`, so their offsets are the distances between
/// the pointers). `None` for an empty list.
fn span(text: &str, entries: &[&str]) -> Option<(usize, usize)> {
    let offset = |raw: &str| raw.as_ptr() as usize - text.as_ptr() as usize;
    let (first, last) = (entries.first()?, entries.last()?);
    let start = text[..offset(first)].trim_end().len().checked_sub(1)?;
    let after = offset(last) + last.len();
    let end = text.len() - text[after..].trim_start().len() + 1;
    (text.as_bytes().get(start) == Some(&b'[') && text.as_bytes().get(end - 1) == Some(&b']')).then_some((start, end))
}

/// Where an empty list lies in `text` (read again, every field raw, which costs little:
/// nothing else holds an empty conversation's body up).
fn empty_span(text: &str, list: &str) -> (usize, usize) {
    let all = FieldsSeed { list: None }.deserialize(&mut serde_json::Deserializer::from_str(text));
    let raw = all.ok().and_then(|all| all.fields.into_iter().find(|(key, _)| key == list).map(|(_, raw)| raw.get()));
    raw.map_or((0, 0), |raw| {
        let start = raw.as_ptr() as usize - text.as_ptr() as usize;
        (start, start + raw.len())
    })
}

/// The top-level fields of an object but `list`, in order, each as its raw text, and each
/// occurrence of `list`: its entries, or `None` when it is not an array. Without a `list`,
/// every field is raw.
struct Fields<'a> {
    fields: Vec<(String, &'a RawValue)>,
    lists: Vec<Option<Vec<&'a RawValue>>>,
}

struct FieldsSeed {
    list: Option<&'static str>,
}

impl<'de> DeserializeSeed<'de> for FieldsSeed {
    type Value = Fields<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Fields<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldsSeed {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Fields<'de>, M::Error> {
        let (mut fields, mut lists) = (Vec::new(), Vec::new());
        while let Some(key) = map.next_key::<String>()? {
            if Some(key.as_str()) == self.list {
                lists.push(map.next_value::<Entries<'de>>()?.0);
            } else {
                fields.push((key, map.next_value::<&'de RawValue>()?));
            }
        }
        Ok(Fields { fields, lists })
    }
}

/// An array's entries as raw text, or `None` for any other value.
struct Entries<'a>(Option<Vec<&'a RawValue>>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Entries<'de>, S::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<&'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Entries(Some(entries)))
            }

            // Any other value is read whole (the body must be valid JSON) and is not a list.
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Entries<'de>, M::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Entries(None))
            }

            fn visit_bool<E>(self, _: bool) -> Result<Entries<'de>, E> {
                Ok(Entries(None))
            }

            fn visit_i64<E>(self, _: i64) -> Result<Entries<'de>, E> {
                Ok(Entries(None))
            }

            fn visit_u64<E>(self, _: u64) -> Result<Entries<'de>, E> {
                Ok(Entries(None))
            }

            fn visit_f64<E>(self, _: f64) -> Result<Entries<'de>, E> {
                Ok(Entries(None))
            }

            fn visit_str<E>(self, _: &str) -> Result<Entries<'de>, E> {
                Ok(Entries(None))
            }

            fn visit_unit<E>(self) -> Result<Entries<'de>, E> {
                Ok(Entries(None))
            }
        }
        deserializer.deserialize_any(EntriesVisitor)
    }
}
