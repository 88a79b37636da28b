//! YAML as Helm reads and writes it, over the workspace's Go YAML module ([`emco_go::yaml`]):
//! reading is that module's (`sigs.k8s.io/yaml` over go-yaml v2) with every number then a
//! float64, as Helm's JSON step leaves it; writing turns template values into the module's
//! [`Node`] tree for its go-yaml v2 emitter.

use emco_go::yaml::Node;

use crate::value::Value;

/// Parses the first document of `text` as Helm parses values files and `fromYaml` input: the
/// workspace's Go YAML reader, then every number a float64 as Helm's JSON step leaves it. An
/// empty document is `Nil`.
///
/// # Errors
/// `error converting YAML to JSON: yaml: line N: ...` for malformed YAML or a value JSON
/// cannot hold.
pub fn parse_values_document(text: &str) -> Result<Value, String> {
    emco_go::yaml::parse(text)
        .map(|json| Value::from_json(&json))
        .map_err(|e| format!("error converting YAML to JSON: {e}"))
}

/// `sigs.k8s.io/yaml.Marshal`: the YAML text, ending in a newline.
///
/// # Errors
/// `json: unsupported value: NaN` and the like, as the JSON step of the round trip reports them.
pub fn to_yaml(v: &Value) -> Result<String, String> {
    Ok(emco_go::yaml::emit(&node(v, 0)?))
}

/// A value after the JSON round trip, as go-yaml v2 sees it.
fn node(v: &Value, depth: usize) -> Result<Node, String> {
    if depth > crate::value::MAX_NESTING {
        return Err(format!(
            "json: unsupported value: encountered a cycle via {}",
            v.type_name()
        ));
    }
    Ok(match v {
        Value::Nil => Node::Null,
        Value::Bool(b) => Node::Bool(*b),
        Value::Int(i) | Value::Int64(i) => Node::Number(i.to_string()),
        Value::Float(f) => Node::float(*f).map_err(|e| e.to_string())?,
        Value::String(s) => Node::Str(s.clone()),
        Value::Object(o) => match o.struct_fields() {
            Some(fields) => node(&Value::map(fields.into_iter().collect()), depth + 1)?,
            None => Node::Str(o.json_text().unwrap_or_else(|| o.display())),
        },
        Value::List(l) => Node::Seq(
            l.iter()
                .map(|e| node(e, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(m) => Node::map(
            m.snapshot()
                .iter()
                .map(|(k, v)| Ok((k.clone(), node(v, depth + 1)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests;
