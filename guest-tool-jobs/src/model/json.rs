//! A result's value as JSON text, written once where the result is made.
//!
//! The component hands a value to its host as text, so building a
//! `serde_json::Value` first (a map of owned keys, each hashed) only to write
//! it out again was most of a read's own work.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// Compact JSON text of a result's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json(String);

impl Json {
    /// `value` written as compact JSON.
    pub fn of(value: &impl Serialize) -> Json {
        // The values written here are the guest's own types and `Value`s, whose
        // keys are all strings: writing them cannot fail. Written straight
        // into bytes: `Value`'s `Display` goes a fragment at a time through a
        // formatter.
        Json(serde_json::to_string(value).unwrap_or_default())
    }

    /// The JSON text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// An object of two members, `{a.0: a.1, b.0: b.1}`, in that order, written
/// without building a map (a member's name may be chosen at run time, as a
/// surface's value key is).
pub struct Pair<'a, A, B>(pub (&'a str, A), pub (&'a str, B));

impl<A: Serialize, B: Serialize> Serialize for Pair<'_, A, B> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry(self.0.0, &self.0.1)?;
        map.serialize_entry(self.1.0, &self.1.1)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_the_object_json_would_write() {
        let pair = Pair(("text", "a \"quoted\"\nline"), ("job", [1, 2]));
        let built = serde_json::json!({"text": "a \"quoted\"\nline", "job": [1, 2]});
        assert_eq!(
            Json::of(&pair).into_string(),
            serde_json::to_string(&built).unwrap()
        );
        assert_eq!(
            Json::of(&pair).into_string(),
            r#"{"text":"a \"quoted\"\nline","job":[1,2]}"#
        );
    }
}
