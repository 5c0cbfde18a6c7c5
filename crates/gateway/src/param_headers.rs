//! SEP-2243 parameter headers: a tool argument whose input schema says `x-mcp-header: H` is
//! mirrored by the client in the HTTP header `Mcp-Param-H`, so that an intermediary can route
//! on it without reading the body. A header and a body that say different things are a parser
//! differential at the HTTP layer: whoever reads the header sees one call, the gate and the
//! downstream another. Such a request is refused before the gate; the gate judges the body,
//! which is what is forwarded.
//!
//! Semantics, as the specification's transport page states them: an annotation sits on a
//! property reached from the schema root through `properties` only; the argument's value is
//! compared as text (a string as is, a number or boolean as its JSON text); a header value
//! wrapped as `=?base64?…?=` is standard Base64 (padding required) of UTF-8 text, and any other
//! value is literal; a value in the body with no header, a header with no (or a `null`) value
//! in the body, and a header given twice are all refused.
//!
//! Two places check it: rmcp's HTTP service, before the request is dispatched (HTTP 400,
//! JSON-RPC `-32020`), with the definitions the hub last learned ([`Hub::headed_tool`]); and
//! the gateway's `tools/call`, with the definition the call is judged against, for a tool no
//! listing had shown when the request arrived (a `-32020` error answer).
//!
//! [`Hub::headed_tool`]: crate::hub::Hub::headed_tool

use axum::http::HeaderMap;
use rmcp::model::JsonObject;
use serde_json::Value;

const PREFIX: &str = "Mcp-Param-";
const BASE64_OPEN: &str = "=?base64?";
const BASE64_CLOSE: &str = "?=";

/// Every `x-mcp-header` annotation of `schema`: the property path and the header's suffix.
fn annotations(schema: &JsonObject) -> Vec<(Vec<&str>, &str)> {
    let mut found = Vec::new();
    walk(schema, &mut Vec::new(), &mut found);
    found
}

fn walk<'a>(schema: &'a JsonObject, path: &mut Vec<&'a str>, found: &mut Vec<(Vec<&'a str>, &'a str)>) {
    let Some(Value::Object(properties)) = schema.get("properties") else { return };
    for (name, property) in properties {
        let Value::Object(property) = property else { continue };
        path.push(name);
        if let Some(Value::String(header)) = property.get("x-mcp-header") {
            found.push((path.clone(), header.as_str()));
        }
        walk(property, path, found);
        path.pop();
    }
}

/// The argument at `path` as header text; `None` when absent, `null` or not a primitive.
fn body_text(arguments: Option<&JsonObject>, path: &[&str]) -> Option<String> {
    let (first, rest) = path.split_first()?;
    let mut value = arguments?.get(*first)?;
    for key in rest {
        value = value.as_object()?.get(*key)?;
    }
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A header's text: Base64-decoded when wrapped, literal otherwise; `None` when the wrapped
/// part is not standard, padded Base64 of UTF-8 text.
fn decoded(raw: &str) -> Option<String> {
    use base64::Engine as _;
    let raw = raw.trim_matches([' ', '\t']);
    match raw.strip_prefix(BASE64_OPEN).and_then(|inner| inner.strip_suffix(BASE64_CLOSE)) {
        Some(inner) => String::from_utf8(base64::engine::general_purpose::STANDARD.decode(inner).ok()?).ok(),
        None => Some(raw.to_owned()),
    }
}

/// Why a request's `Mcp-Param-*` headers and its body disagree: the header (its full name)
/// and the argument (its dotted path).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Mismatch {
    #[error("{0} is given more than once")]
    Twice(String),
    #[error("{0} holds characters a header may not")]
    NotText(String),
    #[error("{name} is given but the argument `{property}` is absent or null")]
    NoArgument { name: String, property: String },
    #[error("the argument `{property}` is given without its {name} header")]
    NoHeader { name: String, property: String },
    #[error("{0} is not valid Base64 of UTF-8 text")]
    NotBase64(String),
    #[error(
        "{name} says {header:?} but the argument `{property}` is {body:?}: a header and a body that disagree are refused"
    )]
    Disagree { name: String, header: String, property: String, body: String },
}

/// Check the `Mcp-Param-*` headers of a `tools/call` against its arguments and the tool's
/// input schema: `Err` says which header and why.
pub(crate) fn check(headers: &HeaderMap, schema: &JsonObject, arguments: Option<&JsonObject>) -> Result<(), Mismatch> {
    for (path, suffix) in annotations(schema) {
        let name = format!("{PREFIX}{suffix}");
        let property = path.join(".");
        let mut values = headers.get_all(name.as_str()).iter();
        let header = match (values.next(), values.next()) {
            (None, _) => None,
            (Some(_), Some(_)) => return Err(Mismatch::Twice(name)),
            (Some(v), None) => match v.to_str() {
                Ok(v) => Some(v),
                Err(_) => return Err(Mismatch::NotText(name)),
            },
        };
        match (header, body_text(arguments, &path)) {
            (None, None) => {}
            (Some(_), None) => return Err(Mismatch::NoArgument { name, property }),
            (None, Some(_)) => return Err(Mismatch::NoHeader { name, property }),
            (Some(raw), Some(body)) => {
                let Some(header) = decoded(raw) else { return Err(Mismatch::NotBase64(name)) };
                if header != body {
                    return Err(Mismatch::Disagree { name, header, property, body });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    fn schema() -> JsonObject {
        json!({
            "type": "object",
            "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" },
                "count": { "type": "integer", "x-mcp-header": "Count" },
                "nested": { "type": "object", "properties": { "flag": { "type": "boolean", "x-mcp-header": "Flag" } } },
                "plain": { "type": "string" }
            }
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn args(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_header_that_mirrors_its_argument_passes_and_one_that_does_not_is_refused() {
        let s = schema();
        assert_eq!(annotations(&s).len(), 3);
        let body = args(json!({ "region": "Hello", "count": 3, "nested": { "flag": true }, "plain": "x" }));
        let all = [("Mcp-Param-Region", "Hello"), ("mcp-param-count", "3"), ("MCP-PARAM-FLAG", "true")];
        assert_eq!(check(&headers(&all), &s, Some(&body)), Ok(()));
        let wrapped =
            [("Mcp-Param-Region", "=?base64?SGVsbG8=?="), ("Mcp-Param-Count", "3"), ("Mcp-Param-Flag", "true")];
        assert_eq!(check(&headers(&wrapped), &s, Some(&body)), Ok(()), "Base64 is decoded");
        let refused = [
            ([("Mcp-Param-Region", "Other"), ("Mcp-Param-Count", "3"), ("Mcp-Param-Flag", "true")], "says \"Other\""),
            (
                [("Mcp-Param-Region", "=?base64?SGVsbG8?="), ("Mcp-Param-Count", "3"), ("Mcp-Param-Flag", "true")],
                "Base64",
            ),
            (
                [("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?="), ("Mcp-Param-Count", "3"), ("Mcp-Param-Flag", "true")],
                "Base64",
            ),
            ([("Mcp-Param-Region", "Hello"), ("Mcp-Param-Count", "3.0"), ("Mcp-Param-Flag", "true")], "`count`"),
        ];
        for (given, why) in refused {
            let e = check(&headers(&given), &s, Some(&body)).unwrap_err();
            assert!(e.to_string().contains(why), "{given:?}: {e}");
        }
    }

    #[test]
    fn a_missing_header_a_header_without_its_argument_and_a_repeated_one_are_refused() {
        let s = schema();
        let e = check(&headers(&[]), &s, Some(&args(json!({ "region": "Hello" })))).unwrap_err();
        assert!(e.to_string().contains("without its Mcp-Param-Region header"), "{e}");
        let e = check(&headers(&[("Mcp-Param-Region", "x")]), &s, Some(&args(json!({ "region": null })))).unwrap_err();
        assert!(e.to_string().contains("absent or null"), "{e}");
        let twice = [("Mcp-Param-Region", "Hello"), ("Mcp-Param-Region", "Hello")];
        let e = check(&headers(&twice), &s, Some(&args(json!({ "region": "Hello" })))).unwrap_err();
        assert!(e.to_string().contains("more than once"), "{e}");
        assert_eq!(check(&headers(&[]), &s, None), Ok(()), "nothing in the body, nothing in the headers");
        // A value without the whole wrapper is literal text.
        let literal = "=?base64?SGVsbG8=";
        let body = args(json!({ "region": literal }));
        assert_eq!(check(&headers(&[("Mcp-Param-Region", literal)]), &s, Some(&body)), Ok(()));
    }
}
