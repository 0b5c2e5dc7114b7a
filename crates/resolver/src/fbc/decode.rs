//! Bytes to blobs: JSON streams and YAML multi-document files, with the line each blob starts on.
//!
//! Which format a file is in is decided by its first significant byte, as operator-registry's
//! YAML-or-JSON decoder does: `{` starts a JSON stream (objects one after another, with or
//! without newlines between them), anything else is YAML. JSON is decoded straight into the
//! borrowed wire types in one pass; YAML documents are split on `---` lines first (so each blob
//! knows its line and the YAML parser's per-document budgets apply per blob) and go through
//! `serde_json::Value`, which keeps unquoted timestamps as the strings they were written as.

use serde::Deserialize;
use serde_json::Value;

use super::assemble::Assembler;
use super::blob::{BlobWire, is_known_schema};
use super::error::FbcError;
use super::fields::fold_eq;
use super::model::Origin;

/// Decodes one document (a file, a ConfigMap key, ...) into `assembler`.
pub(crate) fn decode_document(
    label: &str,
    bytes: &[u8],
    assembler: &mut Assembler,
) -> Result<(), FbcError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => Ok(()),
        Some(b'{') => decode_json_stream(label, bytes, assembler),
        Some(_) => match std::str::from_utf8(bytes) {
            Ok(text) => decode_yaml_stream(label, text, assembler),
            Err(e) => Err(FbcError::MalformedYaml {
                origin: Origin {
                    file: label.to_owned(),
                    line: Some(line_of(bytes, e.valid_up_to())),
                },
                column: 1,
                reason: "the file is not UTF-8 text".to_owned(),
            }),
        },
    }
}

/// 1-based line number of byte `offset`.
fn line_of(bytes: &[u8], offset: usize) -> usize {
    1 + count_newlines(bytes.get(..offset).unwrap_or(bytes))
}

/// Counts `\n` bytes. Every byte of a JSON stream passes through here (blob lines are tracked
/// for origins), and the plain `filter().count()` compiles to a loop that widens each byte to a
/// 64-bit lane; summing per-chunk into a `u8` (at most 255 per chunk) lets the compiler use
/// full-width byte lanes instead, several times faster.
fn count_newlines(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|chunk| {
            let in_chunk = chunk
                .iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n')));
            usize::from(in_chunk)
        })
        .sum()
}

/// The text of a serde_json error without its " at line L column C" suffix.
pub(crate) fn json_reason(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(cut) if error.line() > 0 => text[..cut].to_owned(),
        _ => text,
    }
}

/// Position tracking over a JSON stream: where the current blob starts.
struct Cursor {
    pos: usize,
    line: usize,
    line_start: usize,
}

impl Cursor {
    /// Moves past `len` bytes starting at `pos`, counting the newlines crossed.
    fn advance(&mut self, bytes: &[u8], len: usize) {
        let end = self.pos.saturating_add(len).min(bytes.len());
        let segment = bytes.get(self.pos..end).unwrap_or_default();
        let newlines = count_newlines(segment);
        if newlines > 0 {
            self.line += newlines;
            if let Some(last) = segment.iter().rposition(|&b| b == b'\n') {
                self.line_start = self.pos + last + 1;
            }
        }
        self.pos = end;
    }

    /// Absolute line and column of a serde_json error raised while reading from `pos`.
    fn locate(&self, error: &serde_json::Error) -> (usize, usize) {
        let line = error.line().max(1);
        let column = if line == 1 {
            self.pos - self.line_start + error.column()
        } else {
            error.column()
        };
        (self.line + line - 1, column.max(1))
    }
}

fn decode_json_stream(
    label: &str,
    bytes: &[u8],
    assembler: &mut Assembler,
) -> Result<(), FbcError> {
    let mut cursor = Cursor {
        pos: 0,
        line: 1,
        line_start: 0,
    };
    loop {
        let skip = bytes
            .iter()
            .skip(cursor.pos)
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        cursor.advance(bytes, skip);
        let Some(rest) = bytes.get(cursor.pos..).filter(|rest| !rest.is_empty()) else {
            return Ok(());
        };
        let origin = Origin {
            file: label.to_owned(),
            line: Some(cursor.line),
        };
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<BlobWire<'_>>();
        let consumed = match stream.next() {
            None => return Ok(()),
            Some(Ok(blob)) => {
                let consumed = stream.byte_offset();
                match blob.schema.as_ref().map(|s| s.as_str()) {
                    None | Some("") => return Err(FbcError::MissingSchema { origin }),
                    Some(schema) if is_known_schema(schema) => assembler.add(blob, origin)?,
                    Some(_) => {
                        let text = rest.get(..consumed).unwrap_or(rest);
                        let value: Value = serde_json::from_slice(text).map_err(|e| {
                            let (line, column) = cursor.locate(&e);
                            FbcError::MalformedJson {
                                origin: Origin {
                                    file: label.to_owned(),
                                    line: Some(line),
                                },
                                column,
                                reason: json_reason(&e),
                            }
                        })?;
                        assembler.add_other(value);
                    }
                }
                consumed
            }
            Some(Err(error)) => {
                let (line, column) = cursor.locate(&error);
                let here = Origin {
                    file: label.to_owned(),
                    line: Some(line),
                };
                if !error.is_data() {
                    return Err(FbcError::MalformedJson {
                        origin: here,
                        column,
                        reason: json_reason(&error),
                    });
                }
                recover_unknown_schema(rest, origin, here, &error, assembler)?
            }
        };
        cursor.advance(bytes, consumed);
    }
}

/// A blob whose fields do not fit the wire types: fine for a schema POM does not interpret
/// (its fields may mean anything), an error otherwise. Returns the bytes consumed.
fn recover_unknown_schema(
    rest: &[u8],
    origin: Origin,
    here: Origin,
    error: &serde_json::Error,
    assembler: &mut Assembler,
) -> Result<usize, FbcError> {
    let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
    let value = match stream.next() {
        Some(Ok(value)) => value,
        _ => {
            return Err(FbcError::InvalidBlob {
                origin: here,
                what: "catalog blob".to_owned(),
                reason: json_reason(error),
            });
        }
    };
    match schema_of(&value) {
        SchemaOf::NotAnObject(kind) => Err(FbcError::InvalidBlob {
            origin,
            what: "catalog blob".to_owned(),
            reason: format!("expected a JSON object, found {kind}"),
        }),
        SchemaOf::Missing => Err(FbcError::MissingSchema { origin }),
        SchemaOf::Schema(schema) if is_known_schema(&schema) => Err(FbcError::InvalidBlob {
            origin: here,
            what: schema,
            reason: json_reason(error),
        }),
        SchemaOf::Schema(_) => {
            let consumed = stream.byte_offset();
            assembler.add_other(value);
            Ok(consumed)
        }
    }
}

enum SchemaOf {
    NotAnObject(&'static str),
    Missing,
    Schema(String),
}

/// The `schema` of a blob held as a `Value` (key matched case-insensitively).
fn schema_of(value: &Value) -> SchemaOf {
    let Value::Object(map) = value else {
        return SchemaOf::NotAnObject(match value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a list",
            Value::Object(_) => "an object",
        });
    };
    let schema = map.get("schema").or_else(|| {
        map.iter()
            .find(|(k, _)| fold_eq(k, "schema"))
            .map(|(_, v)| v)
    });
    match schema {
        Some(Value::String(s)) if !s.is_empty() => SchemaOf::Schema(s.clone()),
        _ => SchemaOf::Missing,
    }
}

/// One YAML document of a multi-document file.
struct YamlDocument<'a> {
    /// Line of the document's first byte (a `---` marker, or line 1).
    first_line: usize,
    /// Line of the document's first content line (where the blob "is").
    content_line: usize,
    text: &'a str,
}

/// Whether `line` is a document marker (`---` or `...` then end of line or blank).
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
}

/// Whether a line carries YAML content (not blank, not a comment).
fn has_content(line: &str) -> bool {
    let trimmed = line.trim_start();
    !trimmed.is_empty() && !trimmed.starts_with('#')
}

/// Splits YAML text into documents at `---` / `...` lines (markers are only valid at column 0,
/// and no scalar may contain one there, so this never cuts a document in two).
fn split_yaml_documents(text: &str) -> Vec<YamlDocument<'_>> {
    let mut documents = Vec::new();
    let mut start = 0usize;
    let mut first_line = 1usize;
    let mut content_line: Option<usize> = None;
    let mut directives = false;
    let mut offset = 0usize;
    for (index, raw_line) in text.split_inclusive('\n').enumerate() {
        let number = index + 1;
        let line = raw_line.trim_end_matches(['\n', '\r']);
        if is_marker(line, "---") {
            if let Some(content) = content_line {
                documents.push(YamlDocument {
                    first_line,
                    content_line: content,
                    text: &text[start..offset],
                });
            }
            if content_line.is_some() || !directives {
                start = offset;
                first_line = number;
            }
            content_line = has_content(&line[3..]).then_some(number);
            directives = false;
        } else if is_marker(line, "...") {
            if let Some(content) = content_line {
                documents.push(YamlDocument {
                    first_line,
                    content_line: content,
                    text: &text[start..offset],
                });
            }
            start = offset + raw_line.len();
            first_line = number + 1;
            content_line = None;
            directives = false;
        } else if content_line.is_none() && line.starts_with('%') {
            directives = true;
        } else if content_line.is_none() && has_content(line) {
            content_line = Some(number);
        }
        offset += raw_line.len();
    }
    if let Some(content) = content_line {
        documents.push(YamlDocument {
            first_line,
            content_line: content,
            text: &text[start..],
        });
    }
    documents
}

fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options
}

/// The text of a serde-saphyr error without its ", at line L, column C" style suffix.
fn yaml_reason(error: &serde_saphyr::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(cut) if error.location().is_some() => text[..cut].trim_end_matches(',').to_owned(),
        _ => text,
    }
}

fn decode_yaml_stream(label: &str, text: &str, assembler: &mut Assembler) -> Result<(), FbcError> {
    for document in split_yaml_documents(text) {
        let value: Value = serde_saphyr::from_str_with_options(document.text, yaml_options())
            .map_err(|e| {
                let (line, column) = match e.location() {
                    Some(l) => (
                        document.first_line + usize::try_from(l.line()).unwrap_or(1).max(1) - 1,
                        usize::try_from(l.column()).unwrap_or(1).max(1),
                    ),
                    None => (document.content_line, 1),
                };
                FbcError::MalformedYaml {
                    origin: Origin {
                        file: label.to_owned(),
                        line: Some(line),
                    },
                    column,
                    reason: yaml_reason(&e),
                }
            })?;
        let origin = Origin {
            file: label.to_owned(),
            line: Some(document.content_line),
        };
        match schema_of(&value) {
            SchemaOf::NotAnObject("null") => {}
            SchemaOf::NotAnObject(kind) => {
                return Err(FbcError::InvalidBlob {
                    origin,
                    what: "catalog blob".to_owned(),
                    reason: format!("expected a YAML mapping, found {kind}"),
                });
            }
            SchemaOf::Missing => return Err(FbcError::MissingSchema { origin }),
            SchemaOf::Schema(schema) if is_known_schema(&schema) => {
                let blob = BlobWire::deserialize(value).map_err(|e| FbcError::InvalidBlob {
                    origin: origin.clone(),
                    what: schema,
                    reason: e.to_string(),
                })?;
                assembler.add(blob, origin)?;
            }
            SchemaOf::Schema(_) => assembler.add_other(value),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_newlines_across_chunks() {
        let mut bytes = vec![b'\n'; 700];
        bytes.extend_from_slice(b"ab\ncd");
        assert_eq!(count_newlines(&bytes), 701);
        assert_eq!(count_newlines(b""), 0);
        assert_eq!(line_of(&bytes, 3), 4);
    }

    #[test]
    fn splits_documents_and_keeps_lines() {
        let text = "---\na: 1\n---\n# c\nb: 2\n...\n---\n---\nc: 3\n";
        let docs = split_yaml_documents(text);
        let lines: Vec<(usize, usize)> = docs
            .iter()
            .map(|d| (d.first_line, d.content_line))
            .collect();
        assert_eq!(lines, vec![(1, 2), (3, 5), (8, 9)]);
        assert_eq!(docs[1].text, "---\n# c\nb: 2\n");
    }

    #[test]
    fn directives_stay_with_their_document() {
        let docs = split_yaml_documents("%YAML 1.2\n---\na: 1\n");
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].text, "%YAML 1.2\n---\na: 1\n");
        assert_eq!(docs[0].content_line, 3);
    }
}
