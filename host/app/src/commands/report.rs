//! A command's findings as a person reads them (`key: value` lines, printed
//! as they come) or, with `--json`, as one JSON object at the end.

use serde_json::{Map, Value};

/// Where `check` and `check-runner` put what they find.
pub(crate) struct Report {
    /// `Some` under `--json`: the fields so far, printed by [`Report::verdict`].
    json: Option<Map<String, Value>>,
}

impl Report {
    /// A report printed as lines, or as JSON when `json`.
    pub(crate) fn new(json: bool) -> Self {
        Self {
            json: json.then(Map::new),
        }
    }

    /// One finding: `key: text` for a person, `"key": value` in JSON.
    pub(crate) fn field(&mut self, key: &str, value: impl Into<Value>, text: &str) {
        match &mut self.json {
            Some(fields) => {
                fields.insert(key.replace(' ', "_"), value.into());
            }
            None => println!("{key}: {text}"),
        }
    }

    /// A finding for JSON only (a person's line says it already).
    pub(crate) fn json_only(&mut self, key: &str, value: impl Into<Value>) {
        if let Some(fields) = &mut self.json {
            fields.insert(key.to_owned(), value.into());
        }
    }

    /// A finding whose text is its value.
    pub(crate) fn say(&mut self, key: &str, text: &str) {
        self.field(key, text, text);
    }

    /// The last line, `usable: yes` or `usable: no: why` (in JSON,
    /// `"usable"` and `"reason"`); prints the JSON object.
    pub(crate) fn verdict(mut self, key: &str, why_not: Option<&str>) {
        match (&mut self.json, why_not) {
            (Some(fields), _) => {
                fields.insert(key.to_owned(), Value::Bool(why_not.is_none()));
                if let Some(why) = why_not {
                    fields.insert("reason".to_owned(), why.into());
                }
                println!("{}", Value::Object(std::mem::take(fields)));
            }
            (None, None) => println!("{key}: yes"),
            (None, Some(why)) => println!("{key}: no: {why}"),
        }
    }
}
