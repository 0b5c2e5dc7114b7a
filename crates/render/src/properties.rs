//! Bundle properties: the CSV's `olm.properties` annotation plus `metadata/properties.yaml`.
//!
//! The controller keeps them with the installed bundle so it can judge a bundle it did not
//! resolve itself (`olm.maxOpenShiftVersion`, §8.3), as OLM v1 does with its copy of the same
//! annotation.

use serde_json::Value;

use super::bundle::parse_documents;
use super::error::RenderError;
use super::objects::str_at;

/// The CSV annotation that carries properties as a JSON list.
pub const PROPERTIES_ANNOTATION: &str = "olm.properties";

/// Properties from the CSV annotation (when there is a CSV) and then from the properties file
/// (when present), in that order, exact duplicates dropped.
pub fn collect(
    csv: Option<(&str, &Value)>,
    properties_file: Option<(&str, &[u8])>,
) -> Result<Vec<(String, Value)>, RenderError> {
    let mut properties = Vec::new();
    if let Some((csv_file, csv)) = csv
        && let Some(text) = str_at(csv, &["metadata", "annotations", PROPERTIES_ANNOTATION])
    {
        let source_name = format!("{csv_file} (annotation {PROPERTIES_ANNOTATION})");
        let list: Value =
            serde_json::from_str(text).map_err(|err| RenderError::MalformedProperties {
                source_name: source_name.clone(),
                problem: format!("not JSON: {err}"),
            })?;
        push_list(&mut properties, &source_name, &list)?;
    }
    if let Some((file, bytes)) = properties_file {
        for doc in parse_documents(file, bytes)? {
            let source_name = format!("{file} (document {})", doc.index);
            let list = doc.value.get("properties").cloned().unwrap_or(Value::Null);
            if list.is_null() {
                continue;
            }
            push_list(&mut properties, &source_name, &list)?;
        }
    }
    Ok(properties)
}

fn push_list(
    properties: &mut Vec<(String, Value)>,
    source_name: &str,
    list: &Value,
) -> Result<(), RenderError> {
    let malformed = |problem: String| RenderError::MalformedProperties {
        source_name: source_name.to_owned(),
        problem,
    };
    let items = list
        .as_array()
        .ok_or_else(|| malformed("the properties are not a list".to_owned()))?;
    for (index, item) in items.iter().enumerate() {
        let kind = str_at(item, &["type"])
            .filter(|t| !t.is_empty())
            .ok_or_else(|| malformed(format!("entry {index} has no string `type`")))?;
        let value = item.get("value").cloned().unwrap_or(Value::Null);
        let property = (kind.to_owned(), value);
        if !properties.contains(&property) {
            properties.push(property);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_annotation_and_file() {
        let csv = json!({"metadata": {"annotations": {
            "olm.properties": r#"[{"type": "olm.maxOpenShiftVersion", "value": "4.17"}]"#}}});
        let file = b"properties:\n- type: olm.maxOpenShiftVersion\n  value: \"4.17\"\n- type: x\n  value: 1\n";
        let got = collect(
            Some(("csv.yaml", &csv)),
            Some(("metadata/properties.yaml", file)),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                ("olm.maxOpenShiftVersion".to_owned(), json!("4.17")),
                ("x".to_owned(), json!(1))
            ]
        );
    }

    #[test]
    fn malformed_annotation_is_named() {
        let csv = json!({"metadata": {"annotations": {"olm.properties": "[{"}}});
        let err = collect(Some(("m/csv.yaml", &csv)), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("m/csv.yaml") && err.contains("olm.properties"),
            "{err}"
        );
    }
}
