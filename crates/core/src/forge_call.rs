//! One canonical call: a forge call's arguments parsed once, the way the server
//! will read them, before any rule or workflow judgement — and what is forwarded is that
//! parse, serialized by the gate, never the client's bytes.
//!
//! The server (gitea-mcp) reads each argument by one key and converts it by the type its
//! tool schema declares: a number key takes a JSON number (a fraction truncated: `12.9` is
//! PR 12) or a numeric string; a string key takes a string and treats anything else as
//! absent; a boolean key takes a boolean and treats anything else as `false`. A gate that
//! reads the same arguments differently (another key, a rounded number, a string "true")
//! judges one call and forwards another. So a call the two could read differently is
//! refused (`ambiguous_arguments`, naming the key and why) rather than guessed at:
//!
//! * a key the tool's schema does not declare (an alias such as `index` beside
//!   `pull_number`, a misspelling) — the server ignores it, the gate might not;
//! * two keys of one alias group (`pull_number` and `index`, `issue_number` and `index`),
//!   when no schema says which one the server reads;
//! * a number key whose value is a fraction, beyond ±2^53 (where JSON numbers stop being
//!   exact), or a string that is not a whole number;
//! * a string key with a non-string, a boolean key with a non-boolean, an array or object
//!   key with anything else, and `null` wherever the schema does not declare it (absent and
//!   null read alike on one side only). Where it does (`"type": ["string", "null"]`, or a
//!   `{"type": "null"}` branch of `anyOf`/`oneOf`, as GitHub's `issue_write` `type` — "pass null
//!   to remove the current type"), the server reads `null` as a value of its own, and so is it
//!   forwarded.
//!
//! A whole number written as `12.0` or `"12"` is canonicalized to `12`.

use serde_json::{Map, Number, Value};

/// Why a call's arguments are ambiguous: the key and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ambiguity {
    /// The argument.
    pub key: String,
    /// Why the server and the gate could read it differently.
    pub why: String,
}

impl Ambiguity {
    /// `key` is ambiguous because of `why`.
    pub fn new(key: &str, why: impl Into<String>) -> Self {
        Self { key: key.to_owned(), why: why.into() }
    }

    /// The refusal's reason line.
    pub fn reason(&self, tool: &str) -> String {
        format!("argument `{}` of `{tool}`: {}", self.key, self.why)
    }
}

pub use crate::blocker::AMBIGUOUS_ACTION;

/// The largest integer a JSON number carries exactly.
const EXACT: u64 = 1 << 53;

/// The canonical arguments of a call: `schema` is the tool's `inputSchema` as the
/// downstream lists it (absent: the tool's schema is not known, and only the dialect's alias
/// groups — keys that name one thing across the server's releases, at most one of which may
/// be sent — and the values' own shapes are checked; its `number_keys` are read as integers).
/// `None` arguments stay `None`.
pub fn canonicalize(
    schema: Option<&Map<String, Value>>,
    arguments: Option<&Map<String, Value>>,
    alias_groups: &[&[&str]],
    number_keys: &[&str],
) -> Result<Option<Map<String, Value>>, Ambiguity> {
    let Some(arguments) = arguments else { return Ok(None) };
    let properties = schema.and_then(|s| s.get("properties")).and_then(Value::as_object);
    if properties.is_none() {
        for group in alias_groups {
            let sent: Vec<&str> = group.iter().copied().filter(|k| arguments.contains_key(*k)).collect();
            if let [first, second, ..] = sent.as_slice() {
                return Err(Ambiguity::new(
                    second,
                    format!("`{first}` and `{second}` name one thing; the server reads only one of them"),
                ));
            }
        }
    }
    let mut canonical = Map::new();
    for (key, value) in arguments {
        let declared = match properties {
            Some(props) => Some(props.get(key).ok_or_else(|| {
                Ambiguity::new(key, "the tool's schema does not declare it, so the server ignores it")
            })?),
            None => None,
        };
        if value.is_null() && declared.is_some_and(nullable) {
            canonical.insert(key.clone(), Value::Null);
            continue;
        }
        let kind =
            declared.and_then(declared_type).or_else(|| number_keys.contains(&key.as_str()).then_some("integer"));
        canonical.insert(key.clone(), canonical_value(key, value, kind)?);
    }
    Ok(Some(canonical))
}

/// Every JSON type a property declares: its `type` (one or a list) and the `type` of each
/// `anyOf` / `oneOf` branch.
fn declared_types(property: &Value) -> Vec<&str> {
    fn own(p: &Value) -> Vec<&str> {
        match p.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
    let mut types = own(property);
    for branches in ["anyOf", "oneOf"] {
        for branch in property.get(branches).and_then(Value::as_array).into_iter().flatten() {
            types.extend(own(branch));
        }
    }
    types
}

/// The property declares `null` among its types: the server reads a `null` as a value.
fn nullable(property: &Value) -> bool {
    declared_types(property).contains(&"null")
}

/// The single JSON type a property declares besides `null`, when it declares exactly one.
fn declared_type(property: &Value) -> Option<&str> {
    let mut types = declared_types(property);
    types.retain(|t| *t != "null");
    types.dedup();
    if let [one] = types.as_slice() { Some(one) } else { None }
}

fn canonical_value(key: &str, value: &Value, kind: Option<&str>) -> Result<Value, Ambiguity> {
    let wrong =
        |want: &str| Ambiguity::new(key, format!("the schema declares {want}, the call sends {}", shape(value)));
    if value.is_null() {
        return Err(Ambiguity::new(key, "null: send the argument or leave it out"));
    }
    match kind {
        Some("integer" | "number") => whole(value).map(Value::from).map_err(|why| Ambiguity::new(key, why.to_string())),
        Some("string") => value.is_string().then(|| value.clone()).ok_or_else(|| wrong("a string")),
        Some("boolean") => value.is_boolean().then(|| value.clone()).ok_or_else(|| wrong("a boolean")),
        Some("array") => value.is_array().then(|| value.clone()).ok_or_else(|| wrong("an array")),
        Some("object") => value.is_object().then(|| value.clone()).ok_or_else(|| wrong("an object")),
        // Undeclared type (or no schema): a number must still be whole, since every number
        // the server reads is an integer (a number, an ID, a page).
        _ => match value {
            Value::Number(_) => whole(value).map(Value::from).map_err(|why| Ambiguity::new(key, why.to_string())),
            _ => Ok(value.clone()),
        },
    }
}

fn shape(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a value is not a whole number the server and the gate read alike.
#[derive(Debug)]
enum NotWhole {
    /// Beyond ±2^53 (the number as written).
    Inexact(String),
    /// A string that is not a whole number's own text.
    Text(String),
    /// A float with a fraction (or none finite): the server truncates it.
    Fraction(String),
    /// Not a number at all (its JSON shape).
    Shape(&'static str),
}

impl std::fmt::Display for NotWhole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inexact(n) => write!(f, "{n} is beyond ±2^53, where JSON numbers are exact"),
            Self::Text(s) => write!(f, "{s:?} is not a whole number"),
            Self::Fraction(n) => write!(f, "{n} is not a whole number: the server truncates it, the gate would not"),
            Self::Shape(shape) => write!(f, "the server reads a number here, the call sends {shape}"),
        }
    }
}

/// A whole number the server and the gate read alike: a JSON integer or a whole float
/// within ±2^53, or a string holding one.
fn whole(value: &Value) -> Result<i64, NotWhole> {
    let exact = |n: i64| if n.unsigned_abs() <= EXACT { Ok(n) } else { Err(NotWhole::Inexact(n.to_string())) };
    match value {
        Value::Number(n) => number(n).and_then(exact),
        Value::String(s) => match s.parse::<i64>() {
            Ok(n) if s == &n.to_string() => exact(n),
            _ => Err(NotWhole::Text(s.clone())),
        },
        other => Err(NotWhole::Shape(shape(other))),
    }
}

fn number(n: &Number) -> Result<i64, NotWhole> {
    if let Some(i) = n.as_i64() {
        return Ok(i);
    }
    if n.as_u64().is_some() {
        return Err(NotWhole::Inexact(n.to_string()));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() != 0.0 || !f.is_finite() {
        return Err(NotWhole::Fraction(n.to_string()));
    }
    #[allow(clippy::cast_precision_loss)]
    if f.abs() > EXACT as f64 {
        return Err(NotWhole::Inexact(n.to_string()));
    }
    #[allow(clippy::cast_possible_truncation)]
    Ok(f as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::gitea::{ALIAS_GROUPS, NUMBER_KEYS};

    /// As the gate parses a gitea-mcp call.
    fn canonicalize(
        schema: Option<&Map<String, Value>>,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Option<Map<String, Value>>, Ambiguity> {
        super::canonicalize(schema, arguments, ALIAS_GROUPS, NUMBER_KEYS)
    }
    use proptest::prelude::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn schema() -> Map<String, Value> {
        obj(json!({"type": "object", "properties": {
            "method": {"type": "string"}, "owner": {"type": "string"}, "repo": {"type": "string"},
            "pull_number": {"type": "number"}, "force_merge": {"type": "boolean"},
            "labels": {"type": "array"}, "any": {}
        }}))
    }

    #[test]
    fn whole_numbers_are_canonicalized_and_fractions_refused() {
        let s = schema();
        let c = canonicalize(Some(&s), Some(&obj(json!({"pull_number": 12.0, "owner": "o"})))).unwrap().unwrap();
        assert_eq!(c.get("pull_number"), Some(&json!(12)));
        let c = canonicalize(Some(&s), Some(&obj(json!({"pull_number": "12"})))).unwrap().unwrap();
        assert_eq!(c.get("pull_number"), Some(&json!(12)));
        for bad in
            [json!(12.5), json!("12.5"), json!(" 12"), json!("012"), json!(9_007_199_254_740_993_u64), json!(true)]
        {
            let e = canonicalize(Some(&s), Some(&obj(json!({"pull_number": bad.clone()})))).unwrap_err();
            assert_eq!(e.key, "pull_number", "{bad}");
        }
    }

    #[test]
    fn undeclared_keys_aliases_wrong_types_and_null_are_refused() {
        let s = schema();
        let e = canonicalize(Some(&s), Some(&obj(json!({"pull_number": 12, "index": 99})))).unwrap_err();
        assert_eq!(e.key, "index");
        assert!(e.why.contains("does not declare"), "{}", e.why);
        let e = canonicalize(None, Some(&obj(json!({"pull_number": 12, "index": 99})))).unwrap_err();
        assert!(e.why.contains("name one thing"), "{}", e.why);
        assert_eq!(canonicalize(Some(&s), Some(&obj(json!({"force_merge": "true"})))).unwrap_err().key, "force_merge");
        assert_eq!(canonicalize(Some(&s), Some(&obj(json!({"owner": 5})))).unwrap_err().key, "owner");
        assert_eq!(canonicalize(Some(&s), Some(&obj(json!({"owner": null})))).unwrap_err().key, "owner");
        assert_eq!(canonicalize(Some(&s), Some(&obj(json!({"labels": "1,2"})))).unwrap_err().key, "labels");
        assert_eq!(canonicalize(None, Some(&obj(json!({"n": 1.5})))).unwrap_err().key, "n");
        let c = canonicalize(Some(&s), Some(&obj(json!({"any": {"x": 1}, "labels": [1]})))).unwrap().unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(canonicalize(Some(&s), None).unwrap(), None);
    }

    /// GitHub's `issue_write` `type`: "pass null to remove the current type". A declared null
    /// is a value the server reads (forwarded as null); an undeclared one is still refused,
    /// and the non-null branch keeps its type.
    #[test]
    fn a_null_the_schema_declares_is_forwarded_as_null() {
        let s = obj(json!({ "properties": {
            "type": { "anyOf": [{ "type": "string", "minLength": 1 }, { "type": "null" }] },
            "milestone": { "type": ["number", "null"] },
            "title": { "type": "string" },
        } }));
        let c = canonicalize(Some(&s), Some(&obj(json!({ "type": null, "milestone": null })))).unwrap();
        assert_eq!(c, Some(obj(json!({ "type": null, "milestone": null }))));
        assert_eq!(canonicalize(Some(&s), Some(&obj(json!({ "title": null })))).unwrap_err().key, "title");
        assert_eq!(canonicalize(Some(&s), Some(&obj(json!({ "type": 5 })))).unwrap_err().key, "type");
        let c = canonicalize(Some(&s), Some(&obj(json!({ "milestone": "3" })))).unwrap();
        assert_eq!(c, Some(obj(json!({ "milestone": 3 }))), "the non-null branch's type still canonicalizes");
    }

    /// The server's own reading of a number argument: a JSON number truncated, or a numeric
    /// string; anything else is absent.
    fn server_int(value: Option<&Value>) -> Option<i64> {
        match value? {
            #[allow(clippy::cast_possible_truncation)]
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }

    fn server_str(value: Option<&Value>) -> Option<&str> {
        value?.as_str()
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i32>().prop_map(Value::from),
            (any::<i32>(), 0..4u8).prop_map(|(n, d)| json!(f64::from(n) + f64::from(d) * 0.25)),
            any::<i32>().prop_map(|n| Value::from(n.to_string())),
            "[a-z0-9 .]{0,6}".prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ]
    }

    proptest! {
        /// Whatever the gate allows, the server reads the forwarded arguments as naming the
        /// same method, PR and owner/repo the gate judged (from the canonical arguments).
        #[test]
        fn the_server_reads_what_the_gate_judged(
            keys in proptest::collection::btree_map(
                prop_oneof![Just("method"), Just("owner"), Just("repo"), Just("pull_number"), Just("index"),
                            Just("force_merge")],
                arb_value(), 0..6),
            with_schema in any::<bool>(),
        ) {
            let args: Map<String, Value> = keys.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            let s = schema();
            if let Ok(Some(forwarded)) = canonicalize(with_schema.then_some(&s), Some(&args)) {
                // The gate judges the canonical arguments; the server parses the forwarded ones.
                let gate_pr = forwarded.get("pull_number").or_else(|| forwarded.get("index")).and_then(Value::as_i64);
                let server_pr = server_int(forwarded.get("pull_number")).or_else(|| server_int(forwarded.get("index")));
                prop_assert_eq!(gate_pr, server_pr);
                prop_assert!(!(forwarded.contains_key("pull_number") && forwarded.contains_key("index")));
                for key in ["method", "owner", "repo"] {
                    prop_assert_eq!(forwarded.get(key).and_then(Value::as_str), server_str(forwarded.get(key)));
                }
                if with_schema {
                    prop_assert!(forwarded.get("force_merge").is_none_or(Value::is_boolean));
                    prop_assert!(!forwarded.contains_key("index"));
                    for key in ["method", "owner", "repo"] {
                        prop_assert!(forwarded.get(key).is_none_or(Value::is_string));
                    }
                }
            }
        }
    }
}
