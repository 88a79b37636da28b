//! How answers are printed (emcoctl's `-o`): tables, pretty JSON and YAML.

use serde_json::Value as Json;

use crate::error::{CtlError, Result};

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// One line per document (apply, delete, update) or a table (get).
    #[default]
    Table,
    /// A JSON array of `{url, status, body}`.
    Json,
    /// The same array as YAML.
    Yaml,
}

/// `value` as pretty JSON or as YAML, ending in a newline.
///
/// # Errors
/// When the value cannot be written (it always can: it came from JSON).
pub fn render(value: &Json, output: Output) -> Result<String> {
    match output {
        Output::Yaml => {
            emco_helm::yaml::to_yaml(&emco_helm::Value::from_json(value)).map_err(CtlError::Request)
        }
        Output::Json | Output::Table => {
            let mut s = serde_json::to_string_pretty(value)
                .map_err(|e| CtlError::Request(e.to_string()))?;
            s.push('\n');
            Ok(s)
        }
    }
}

/// Rows of cells as aligned columns, two spaces apart, without trailing spaces.
#[must_use]
pub fn format_table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        s.push_str(cells.join("  ").trim_end());
        s.push('\n');
    }
    s
}
