//! Reading a call's arguments the way the real server does: a required string is missing
//! when absent or empty (`"<key> is required"`), a number may come as a JSON number or a
//! numeric string, an optional value of the wrong type is ignored.

use serde_json::{Map, Value};

pub type Args = Map<String, Value>;

/// A required, non-empty string.
pub fn string(args: &Args, key: &str) -> Result<String, String> {
    match args.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s.to_owned()),
        _ => Err(format!("{key} is required")),
    }
}

/// An optional string (present and a string, empty included).
pub fn opt_string(args: &Args, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// An optional boolean.
pub fn opt_bool(args: &Args, key: &str) -> Option<bool> {
    args.get(key).and_then(Value::as_bool)
}

fn as_int(value: &Value) -> Option<i64> {
    match value {
        // JSON numbers arrive as floats in the real server; a fraction is truncated there too.
        #[allow(clippy::cast_possible_truncation)]
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A required integer (an issue, pull request, review or comment number).
pub fn index(args: &Args, key: &str) -> Result<i64, String> {
    let Some(value) = args.get(key) else { return Err(format!("{key} is required")) };
    match (as_int(value), value) {
        (Some(i), _) => Ok(i),
        (None, Value::String(s)) => Err(format!("{key} must be a valid integer (got {s:?})")),
        (None, _) => Err(format!("{key} must be a number or numeric string")),
    }
}

/// An optional integer.
pub fn opt_int(args: &Args, key: &str) -> Option<i64> {
    args.get(key).and_then(as_int)
}

/// An optional list of strings (other items skipped).
pub fn strings(args: &Args, key: &str) -> Vec<String> {
    args.get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A list of IDs, when given (`None` when absent or not a list of numbers).
pub fn ids(args: &Args, key: &str) -> Option<Vec<i64>> {
    args.get(key)?.as_array()?.iter().map(as_int).collect()
}

/// `page` and `per_page` (defaults 1 and `per_page`).
pub fn page(args: &Args, per_page: i64) -> (usize, usize) {
    let page = opt_int(args, "page").unwrap_or(1).max(1);
    let size = opt_int(args, "per_page").unwrap_or(per_page).clamp(1, 50);
    (usize::try_from(page).unwrap_or(1), usize::try_from(size).unwrap_or(30))
}

/// One page of `items`.
pub fn paged<T>(items: Vec<T>, (page, size): (usize, usize)) -> Vec<T> {
    items.into_iter().skip((page - 1).saturating_mul(size)).take(size).collect()
}
