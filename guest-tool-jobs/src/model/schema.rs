//! JSON Schema pieces the tools' schemas are made of: one call per
//! property, with its keys in the order the model reads them, so that
//! rustfmt can lay out every line of a schema.

use serde_json::{Value, json};

/// `{"type": kind, "description": ...}`.
pub fn typed(kind: &str, description: impl Into<String>) -> Value {
    json!({"type": kind, "description": description.into()})
}

/// `{"type": "boolean", "description": ...}`.
pub fn boolean(description: impl Into<String>) -> Value {
    typed("boolean", description)
}

/// `{"type": "string", "description": ...}`.
pub fn string(description: impl Into<String>) -> Value {
    typed("string", description)
}

/// `{"type": "string", "enum": [...], "description": ...}`.
pub fn one_of(words: &[&str], description: impl Into<String>) -> Value {
    json!({"type": "string", "enum": words, "description": description.into()})
}

/// `{"type": "integer", "minimum": ..., "maximum": ..., "description": ...}`.
pub fn integer_in(range: &std::ops::RangeInclusive<u16>, description: impl Into<String>) -> Value {
    json!({
        "type": "integer",
        "minimum": range.start(),
        "maximum": range.end(),
        "description": description.into()
    })
}

/// `{"type": "array", "items": {"type": "string"}, "maxItems": ..., "description": ...}`.
pub fn strings(max_items: usize, description: impl Into<String>) -> Value {
    json!({
        "type": "array",
        "items": {"type": "string"},
        "maxItems": max_items,
        "description": description.into()
    })
}
