//! JSON for events, read as I-JSON (RFC 7493) asks on one point serde_json lets pass: an
//! object with the same member name twice is refused, instead of the last one silently
//! winning (a sender could otherwise show one `type` to a filter written against another
//! parser and a different one to pap).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A `serde_json::Value` whose objects had no duplicate member names.
pub struct Strict(pub Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Strict::deserialize(d).map(|s| s.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let Strict(value) = access.next_value()?;
            // One lookup per member, as serde_json's own map building does.
            match map.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                serde_json::map::Entry::Occupied(taken) => {
                    return Err(de::Error::custom(format_args!(
                        "the member name {:?} appears twice in one object (I-JSON allows it once)",
                        taken.key()
                    )));
                }
            }
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_member_names_are_refused_at_any_depth() {
        let ok: Strict =
            serde_json::from_str(r#"{"a": [1, {"b": 2.5, "c": null}], "d": "x"}"#).unwrap();
        assert_eq!(
            ok.0,
            serde_json::from_str::<Value>(r#"{"a": [1, {"b": 2.5, "c": null}], "d": "x"}"#)
                .unwrap()
        );
        for bad in [
            r#"{"type": "a.b.c", "type": "x.y.z"}"#,
            r#"{"data": {"k": 1, "k": 2}}"#,
        ] {
            let err = serde_json::from_str::<Strict>(bad)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("appears twice"), "{err}");
        }
    }
}
