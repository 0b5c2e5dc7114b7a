//! Bytes to blobs: JSON streams and YAML multi-document files, with the line each blob starts on.
//!
//! Which format a file is in is decided by its first significant byte, as operator-registry's
//! YAML-or-JSON decoder does: `{` starts a JSON stream (objects one after another, with or
//! without newlines between them), anything else is YAML. JSON is decoded straight into the
//! borrowed wire types in one pass; YAML documents are split on `---` lines first (so each blob
//! knows its line and the YAML parser's per-document budgets apply per blob) and go through
//! `serde_json::Value`, which keeps unquoted timestamps as the strings they were written as.
//! A document is built straight from the parser's events ([`super::yaml_events`], twice as
//! fast) unless it uses YAML that module leaves to serde-saphyr, which then decodes it.

use std::cell::Cell;
use std::io::Read as _;
use std::ops::Range;
use std::rc::Rc;

use serde::Deserialize;
use serde_json::Value;

use super::assemble::Assembler;
use super::blob::{BlobWire, is_known_schema, raw_properties};
use super::error::FbcError;
use super::fields::fold_eq;
use super::index::{BlobAt, BlobSpan};
use super::model::{Origin, SharedStr};
use super::yaml_events::{self, Declined};

/// The two encodings of catalog files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlobFormat {
    /// A stream of JSON objects.
    Json,
    /// YAML documents.
    Yaml,
}

/// YAML alias-replayed events one catalog may expand in total, across all its files and
/// documents. The parser already bounds each document (1,000,000 replayed events); without a
/// catalog-wide budget, a catalog of many small documents, each with one alias bomb, multiplies
/// that bound by its document count. `opm` never writes anchors or aliases, and none of the
/// real catalogs in the test data uses one, so four documents' worth is generous.
pub const MAX_CATALOG_ALIAS_EVENTS: usize = 4_000_000;

/// The parser's own per-document cap on alias-replayed events (its default, kept explicit).
const MAX_DOCUMENT_ALIAS_EVENTS: usize = 1_000_000;

/// What is left of one catalog's alias budget while its documents are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AliasBudget {
    limit: usize,
    left: usize,
}

impl AliasBudget {
    /// A fresh budget of `limit` replayed events.
    pub(crate) const fn new(limit: usize) -> Self {
        Self { limit, left: limit }
    }

    /// The replay cap of the next document: its own cap or what the catalog has left.
    fn document_cap(self) -> usize {
        self.left.min(MAX_DOCUMENT_ALIAS_EVENTS)
    }

    /// Charges a document that used aliases. Replayed events are not reported by the parser,
    /// so the charge is an upper bound: each value node came from at most two events (a
    /// collection's start and end).
    fn charge(&mut self, value: &Value) {
        self.left = self
            .left
            .saturating_sub(node_count(value).saturating_mul(2));
    }
}

impl Default for AliasBudget {
    fn default() -> Self {
        Self::new(MAX_CATALOG_ALIAS_EVENTS)
    }
}

/// Nodes of a decoded value (scalars, sequences and mappings; mapping keys are not nodes of
/// their own here, their values are).
fn node_count(value: &Value) -> usize {
    let mut count = 0usize;
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        count += 1;
        match node {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                count += map.len();
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    count
}

/// Decodes one document (a file, a ConfigMap key, ...) into `assembler`, charging YAML alias
/// expansion to the catalog's `aliases` budget.
pub(crate) fn decode_document(
    label: &str,
    bytes: &[u8],
    assembler: &mut Assembler,
    aliases: &mut AliasBudget,
) -> Result<(), FbcError> {
    let (bytes, at) = match bytes.strip_prefix(BYTE_ORDER_MARK) {
        // Spans count bytes from the file's start, the mark included.
        Some(body) => (body, FileOffset { lines: 0, bytes: 3 }),
        None => (bytes, FileOffset::START),
    };
    match first_significant(bytes) {
        None => Ok(()),
        Some(b'{') => decode_json_stream(label, bytes, 0, at, assembler),
        Some(_) => match std::str::from_utf8(bytes) {
            Ok(text) => decode_yaml_stream(label, text, at, assembler, aliases),
            Err(e) => Err(FbcError::MalformedYaml {
                origin: Origin {
                    file: label.into(),
                    line: Some(line_of(bytes, e.valid_up_to())),
                },
                column: 1,
                reason: "the file is not UTF-8 text".to_owned(),
            }),
        },
    }
}

const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// The first byte that is not white space.
fn first_significant(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// Whether [`decode_document`] reads `bytes` as a JSON stream (its first significant byte,
/// after any byte-order mark, is `{`) rather than as YAML.
pub(crate) fn is_json(bytes: &[u8]) -> bool {
    let body = bytes.strip_prefix(BYTE_ORDER_MARK).unwrap_or(bytes);
    first_significant(body) == Some(b'{')
}

/// Decodes the blobs of one index span again (see [`super::index`]): `bytes` are the span's
/// bytes, read from its file at its offset.
pub(crate) fn decode_blob_span(
    span: &BlobSpan,
    bytes: &[u8],
    assembler: &mut Assembler,
    aliases: &mut AliasBudget,
) -> Result<(), FbcError> {
    let at = FileOffset {
        lines: span.first_line.saturating_sub(1),
        bytes: span.offset,
    };
    match span.format {
        BlobFormat::Json => decode_json_stream(&span.file, bytes, 0, at, assembler),
        BlobFormat::Yaml => match std::str::from_utf8(bytes) {
            Ok(text) => decode_yaml_stream(&span.file, text, at, assembler, aliases),
            Err(e) => Err(FbcError::MalformedYaml {
                origin: Origin {
                    file: span.file.as_ref().into(),
                    line: Some(at.lines + line_of(bytes, e.valid_up_to())),
                },
                column: 1,
                reason: "the file is not UTF-8 text".to_owned(),
            }),
        },
    }
}

/// Where a slice being decoded starts in its file: lines before it and its byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileOffset {
    lines: usize,
    bytes: u64,
}

impl FileOffset {
    /// The start of a file.
    pub(crate) const START: Self = Self { lines: 0, bytes: 0 };
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

/// Decodes the JSON stream `bytes[start..]`; `bytes` starts at `at` in its file (origins count
/// lines, and spans bytes, from the file's start).
fn decode_json_stream(
    label: &str,
    bytes: &[u8],
    start: usize,
    at: FileOffset,
    assembler: &mut Assembler,
) -> Result<(), FbcError> {
    // One copy of the label for every blob of these bytes.
    let file = SharedStr::from(label);
    let mut cursor = Cursor {
        pos: start,
        line: 1 + at.lines + count_newlines(bytes.get(..start).unwrap_or_default()),
        line_start: start,
    };
    loop {
        let gap_start = cursor.pos;
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
            file: file.clone(),
            line: Some(cursor.line),
        };
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<BlobWire<'_>>();
        let (next, consumed) = match stream.next() {
            Some(Err(_)) => {
                // Decoded again with property values as text, for the error (or the property
                // error) it has always given; see `blob::raw_properties`.
                let mut again =
                    serde_json::Deserializer::from_slice(rest).into_iter::<BlobWire<'_>>();
                let next = raw_properties(|| again.next());
                (next, again.byte_offset())
            }
            next => (next, stream.byte_offset()),
        };
        let consumed = match next {
            None => return Ok(()),
            Some(Ok(blob)) => {
                match blob.schema.as_ref().map(|s| s.as_str()) {
                    None | Some("") => return Err(FbcError::MissingSchema { origin }),
                    Some(schema) if is_known_schema(schema) => {
                        let blob_at = BlobAt {
                            label,
                            offset: at.bytes + cursor.pos as u64,
                            gap_start: at.bytes + gap_start as u64,
                            first_line: cursor.line,
                            format: BlobFormat::Json,
                            bytes: rest.get(..consumed).unwrap_or(rest),
                        };
                        assembler.add(blob, origin, &blob_at)?;
                    }
                    Some(_) => {
                        let text = rest.get(..consumed).unwrap_or(rest);
                        let value: Value = serde_json::from_slice(text).map_err(|e| {
                            let (line, column) = cursor.locate(&e);
                            FbcError::MalformedJson {
                                origin: Origin {
                                    file: label.into(),
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
                    file: label.into(),
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
    /// Byte offset of `text` in the text that was split.
    start: usize,
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
                    start,
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
                    start,
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
            start,
            first_line,
            content_line: content,
            text: &text[start..],
        });
    }
    documents
}

/// Parser options for one document: no error snippets (errors carry file and line already),
/// alias replay capped by what the catalog's budget has left, and a report of the aliases the
/// document used written to `aliases_seen`.
fn yaml_options(replay_cap: usize, aliases_seen: &Rc<Cell<usize>>) -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.alias_limits.max_total_replayed_events = replay_cap;
    let seen = Rc::clone(aliases_seen);
    options.with_budget_report(move |report| seen.set(report.aliases))
}

/// Whether the parser stopped because alias replay reached its cap (the error may be wrapped
/// with the alias's locations or a snippet).
fn is_alias_replay_limit(mut error: &serde_saphyr::Error) -> bool {
    use serde_saphyr::Error as E;
    while let E::AliasError { error: inner, .. } | E::WithSnippet { error: inner, .. } = error {
        error = inner;
    }
    matches!(error, E::AliasReplayLimitExceeded { .. })
}

/// The text of a serde-saphyr error without its ", at line L, column C" style suffix.
fn yaml_reason(error: &serde_saphyr::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(cut) if error.location().is_some() => text[..cut].trim_end_matches(',').to_owned(),
        _ => text,
    }
}

/// What [`yaml_fast_path_differential`] found in a YAML text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastPathTally {
    /// Documents the event front end built, each equal to serde-saphyr's value.
    pub built: usize,
    /// Documents it declined (serde-saphyr decodes those), by reason.
    pub declined: std::collections::BTreeMap<Declined, usize>,
}

impl FastPathTally {
    /// Documents declined, whatever the reason.
    #[must_use]
    pub fn declined(&self) -> usize {
        self.declined.values().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn absorb(&mut self, other: Self) {
        self.built += other.built;
        for (reason, count) in other.declined {
            *self.declined.entry(reason).or_default() += count;
        }
    }
}

/// Test and fuzz hook: every document of `text` through the event front end and through
/// serde-saphyr. A document the front end builds must be one serde-saphyr accepts, with the
/// same value.
///
/// # Errors
/// The first document where the two differ, with both results.
#[doc(hidden)]
pub fn yaml_fast_path_differential(text: &str) -> Result<FastPathTally, String> {
    let mut tally = FastPathTally::default();
    for document in split_yaml_documents(text) {
        let fast = match yaml_events::document_value(document.text) {
            Ok(value) => value,
            Err(reason) => {
                *tally.declined.entry(reason).or_default() += 1;
                continue;
            }
        };
        let aliases_seen = Rc::new(Cell::new(0usize));
        let options = yaml_options(MAX_DOCUMENT_ALIAS_EVENTS, &aliases_seen);
        match serde_saphyr::from_str_with_options::<Value>(document.text, options) {
            Ok(value) if value == fast => tally.built += 1,
            other => {
                return Err(format!(
                    "the document at line {} differs: events built {fast:?}, serde-saphyr gave \
                     {other:?}",
                    document.first_line
                ));
            }
        }
    }
    Ok(tally)
}

/// Decodes YAML documents; `text` starts at `at` in its file.
fn decode_yaml_stream(
    label: &str,
    text: &str,
    at: FileOffset,
    assembler: &mut Assembler,
    aliases: &mut AliasBudget,
) -> Result<(), FbcError> {
    for mut document in split_yaml_documents(text) {
        document.first_line += at.lines;
        document.content_line += at.lines;
        let aliases_seen = Rc::new(Cell::new(0usize));
        let cap = aliases.document_cap();
        let value: Value = match yaml_events::document_value(document.text) {
            Ok(value) => Ok(value),
            Err(_declined) => {
                serde_saphyr::from_str_with_options(document.text, yaml_options(cap, &aliases_seen))
            }
        }
        .map_err(|e| {
            if cap < MAX_DOCUMENT_ALIAS_EVENTS && is_alias_replay_limit(&e) {
                return FbcError::AliasBudgetExceeded {
                    origin: Origin {
                        file: label.into(),
                        line: Some(document.content_line),
                    },
                    limit: aliases.limit,
                };
            }
            let (line, column) = match e.location() {
                Some(l) => (
                    document.first_line + usize::try_from(l.line()).unwrap_or(1).max(1) - 1,
                    usize::try_from(l.column()).unwrap_or(1).max(1),
                ),
                None => (document.content_line, 1),
            };
            FbcError::MalformedYaml {
                origin: Origin {
                    file: label.into(),
                    line: Some(line),
                },
                column,
                reason: yaml_reason(&e),
            }
        })?;
        if aliases_seen.get() > 0 {
            aliases.charge(&value);
        }
        let origin = Origin {
            file: label.into(),
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
                let blob = BlobWire::deserialize(&value)
                    .or_else(|_| raw_properties(|| BlobWire::deserialize(&value)))
                    .map_err(|e| FbcError::InvalidBlob {
                        origin: origin.clone(),
                        what: schema,
                        reason: e.to_string(),
                    })?;
                let offset = at.bytes + document.start as u64;
                let blob_at = BlobAt {
                    label,
                    offset,
                    gap_start: offset,
                    first_line: document.first_line,
                    format: BlobFormat::Yaml,
                    bytes: document.text.as_bytes(),
                };
                assembler.add(blob, origin, &blob_at)?;
            }
            SchemaOf::Schema(_) => assembler.add_other(value),
        }
    }
    Ok(())
}

/// Cuts one document into at most `pieces` byte ranges that decode on their own, in order and
/// covering it: a JSON stream before a `{` that starts a line, YAML before a `---` line (a
/// document marker at column 0 always starts a document). A JSON cut may still fall inside a
/// pretty-printed blob; the piece before it then fails to decode, and the caller decodes the
/// whole document again in one piece ([`super::parallel`]). YAML with directives (`%YAML`) and
/// text that is not UTF-8 are not cut.
pub(crate) fn cut(bytes: &[u8], pieces: usize) -> Vec<Range<usize>> {
    let whole: Vec<Range<usize>> = std::iter::once(0..bytes.len()).collect();
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let Some(first) = body.iter().find(|b| !b.is_ascii_whitespace()) else {
        return whole;
    };
    let json = *first == b'{';
    if !json
        && (std::str::from_utf8(bytes).is_err()
            || body.first() == Some(&b'%')
            || bytes.windows(2).any(|w| w == b"\n%"))
    {
        return whole;
    }
    let is_cut = |at: usize| -> bool {
        let rest = bytes.get(at..).unwrap_or_default();
        if json {
            rest.first() == Some(&b'{')
        } else {
            rest.starts_with(b"---")
                && matches!(rest.get(3), None | Some(b'\n' | b'\r' | b' ' | b'\t'))
        }
    };
    let mut starts = vec![0usize];
    for k in 1..pieces {
        let previous = starts.last().copied().unwrap_or(0);
        let target = (bytes.len() / pieces * k).max(previous + 1);
        let found = bytes
            .get(target..)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| target + i + 1)
            .find(|&at| is_cut(at));
        match found {
            Some(at) if at < bytes.len() => starts.push(at),
            _ => break,
        }
    }
    let mut ranges: Vec<Range<usize>> = starts.windows(2).map(|w| w[0]..w[1]).collect();
    ranges.push(starts.last().copied().unwrap_or(0)..bytes.len());
    ranges
}

/// Decodes one range from [`cut`] of a document. The first range is decoded as the document
/// itself (byte-order mark, format detection); the others continue its format, with origins
/// counting lines from the document's start.
pub(crate) fn decode_piece(
    label: &str,
    bytes: &[u8],
    range: Range<usize>,
    assembler: &mut Assembler,
    aliases: &mut AliasBudget,
) -> Result<(), FbcError> {
    let upto = bytes.get(..range.end).unwrap_or(bytes);
    if range.start == 0 {
        return decode_document(label, upto, assembler, aliases);
    }
    if upto.get(range.start) == Some(&b'{') {
        return decode_json_stream(label, upto, range.start, FileOffset::START, assembler);
    }
    let piece = upto.get(range.start..).unwrap_or_default();
    let at = FileOffset {
        lines: count_newlines(upto.get(..range.start).unwrap_or_default()),
        bytes: range.start as u64,
    };
    match std::str::from_utf8(piece) {
        Ok(text) => decode_yaml_stream(label, text, at, assembler, aliases),
        // `cut` only cuts UTF-8 text.
        Err(e) => Err(FbcError::MalformedYaml {
            origin: Origin {
                file: label.into(),
                line: Some(line_of(upto, range.start + e.valid_up_to())),
            },
            column: 1,
            reason: "the file is not UTF-8 text".to_owned(),
        }),
    }
}

/// Bytes read at a time when a large file is decoded in pieces.
pub(crate) const STREAM_WINDOW_BYTES: usize = 4 << 20;

/// Whether `rest` (the bytes after a newline, not the file's end) starts a blob of a `json` or
/// YAML stream: a `{` at column 0, or a `---` document marker. A `---` whose next byte has not
/// been read yet is not one: `---x: 1` is a key.
fn starts_blob(rest: &[u8], json: bool) -> bool {
    if json {
        rest.first() == Some(&b'{')
    } else {
        rest.starts_with(b"---") && matches!(rest.get(3), Some(b'\n' | b'\r' | b' ' | b'\t'))
    }
}

/// The last offset in `bytes` (after its first byte) where a blob starts at a line start.
fn last_blob_start(bytes: &[u8], json: bool) -> Option<usize> {
    let mut end = bytes.len();
    while let Some(newline) = bytes
        .get(..end)
        .and_then(|b| b.iter().rposition(|&c| c == b'\n'))
    {
        let at = newline + 1;
        if at < bytes.len() && starts_blob(bytes.get(at..).unwrap_or_default(), json) {
            return Some(at);
        }
        end = newline;
    }
    None
}

/// One piece of a file being read in windows: its bytes (whole blobs), where it starts, and the
/// file's format.
pub(crate) struct Window {
    pub(crate) bytes: Vec<u8>,
    pub(crate) at: FileOffset,
    pub(crate) json: bool,
}

impl Window {
    /// Decodes this piece into `assembler`; `false` when it failed, or must not be decoded in
    /// pieces (YAML with directives, text that is not UTF-8): the caller then decodes the
    /// whole file in one pass, which reports the file's true error.
    pub(crate) fn decode(
        &self,
        label: &str,
        assembler: &mut Assembler,
        aliases: &mut AliasBudget,
    ) -> bool {
        let piece = self.bytes.as_slice();
        if !self.json && (piece.first() == Some(&b'%') || piece.windows(2).any(|w| w == b"\n%")) {
            return false;
        }
        let decoded = if self.at.bytes == 0 {
            // The first piece, as a document: byte-order mark, format detection.
            decode_document(label, piece, assembler, aliases)
        } else if self.json {
            decode_json_stream(label, piece, 0, self.at, assembler)
        } else {
            match std::str::from_utf8(piece) {
                Ok(text) => decode_yaml_stream(label, text, self.at, assembler, aliases),
                Err(_) => return false,
            }
        };
        decoded.is_ok()
    }
}

/// A file whose blobs do not start lines (no `{` at column 0, no `---`) for this many windows
/// (and at least [`MIN_BYTES_WITHOUT_A_CUT`]) is left to the whole-file pass: the window would
/// only grow and be searched again.
const MAX_WINDOWS_WITHOUT_A_CUT: usize = 4;

/// See [`MAX_WINDOWS_WITHOUT_A_CUT`]: large blobs in small windows are not a reason to give up.
const MIN_BYTES_WITHOUT_A_CUT: usize = 1 << 20;

/// Reads one file `window` bytes at a time and hands `emit` its pieces in order, each cut
/// before a blob that starts a line (as [`cut`] cuts), so the file is never in memory whole.
/// Buffers come from `spare` when it has one (pieces already decoded), so a load allocates a
/// few windows, not one per piece. `Ok(true)` when every piece was emitted; `Ok(false)` when
/// `emit` stopped it, or the file has no cut for [`MAX_WINDOWS_WITHOUT_A_CUT`] windows.
pub(crate) fn read_in_windows(
    mut reader: impl std::io::Read,
    window: usize,
    mut spare: impl FnMut() -> Option<Vec<u8>>,
    mut emit: impl FnMut(Window) -> bool,
) -> std::io::Result<bool> {
    let mut buffer: Vec<u8> = Vec::with_capacity(window);
    let mut at = FileOffset::START;
    let mut format: Option<bool> = None;
    let mut eof = false;
    while !eof || !buffer.is_empty() {
        if !eof {
            let before = buffer.len();
            let read = (&mut reader).take(window as u64).read_to_end(&mut buffer)?;
            eof = read == 0 || buffer.len() - before < window;
        }
        let json = match format {
            Some(json) => json,
            None => {
                const BOM: &[u8] = b"\xEF\xBB\xBF";
                if !eof && buffer.len() < BOM.len() && BOM.starts_with(&buffer) {
                    continue;
                }
                let body = buffer.strip_prefix(BOM).unwrap_or(&buffer);
                match body.iter().find(|b| !b.is_ascii_whitespace()) {
                    Some(first) => *format.insert(*first == b'{'),
                    None if eof => return Ok(true),
                    None => continue,
                }
            }
        };
        let end = if eof {
            buffer.len()
        } else {
            match last_blob_start(&buffer, json) {
                Some(cut) => cut,
                None if buffer.len()
                    >= window
                        .saturating_mul(MAX_WINDOWS_WITHOUT_A_CUT)
                        .max(MIN_BYTES_WITHOUT_A_CUT) =>
                {
                    return Ok(false);
                }
                None => continue,
            }
        };
        let mut next_buffer = spare().unwrap_or_default();
        next_buffer.clear();
        next_buffer.reserve_exact(window.saturating_add(buffer.len().saturating_sub(end)));
        next_buffer.extend_from_slice(buffer.get(end..).unwrap_or_default());
        buffer.truncate(end);
        let bytes = std::mem::replace(&mut buffer, next_buffer);
        let next = FileOffset {
            lines: at.lines + count_newlines(&bytes),
            bytes: at.bytes + end as u64,
        };
        if !emit(Window { bytes, at, json }) {
            return Ok(false);
        }
        at = next;
    }
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A custom-schema document whose alias `*x` replays `[1, 2, 3]` (5 events).
    const SMALL_BOMB: &str = "schema: test.alias\na: &x [1, 2, 3]\nb: *x\n";

    /// Decodes `documents` (one file) against a budget of `limit` replayed events.
    fn decode_with_budget(documents: &[&str], limit: usize) -> (Result<(), FbcError>, AliasBudget) {
        let text = documents.join("---\n");
        let mut assembler = Assembler::default();
        let mut budget = AliasBudget::new(limit);
        let result = decode_document("c.yaml", text.as_bytes(), &mut assembler, &mut budget);
        (result, budget)
    }

    #[test]
    fn alias_charge_is_two_events_per_value_node() {
        let (result, budget) = decode_with_budget(&[SMALL_BOMB], 1_000);
        result.unwrap();
        // {schema, a: [1,2,3], b: [1,2,3]}: 1 map + 3 keys + 2 lists + 1 + 6 scalars = 13.
        assert_eq!(budget.limit - budget.left, 26);
        // A document without aliases costs nothing.
        let (result, budget) = decode_with_budget(&["schema: test.plain\na: [1, 2, 3]\n"], 1);
        result.unwrap();
        assert_eq!(budget.left, 1);
    }

    #[test]
    fn the_catalog_budget_spans_documents_and_refuses_at_the_limit() {
        // Three documents charge 26 each; the fourth needs 5 replayed events.
        let documents = [SMALL_BOMB; 4];
        let (at_limit, _) = decode_with_budget(&documents, 3 * 26 + 5);
        at_limit.unwrap();
        let (over, _) = decode_with_budget(&documents, 3 * 26 + 4);
        match over.unwrap_err() {
            FbcError::AliasBudgetExceeded { origin, limit } => {
                assert_eq!(limit, 3 * 26 + 4);
                assert_eq!(
                    origin.line,
                    Some(13),
                    "the fourth document starts on line 13"
                );
            }
            other => panic!("expected AliasBudgetExceeded, got {other}"),
        }
        // Three documents fit in any budget that covers their charges.
        let (three, _) = decode_with_budget(&documents[..3], 3 * 26);
        three.unwrap();
    }

    /// A document whose alias expands to about `2^depth` scalars (a "billion laughs" chain).
    fn laughs(depth: usize) -> String {
        let mut text = String::from("schema: test.laughs\nl0: &l0 [x, x]\n");
        for level in 1..=depth {
            let previous = level - 1;
            text.push_str(&format!(
                "l{level}: &l{level} [*l{previous}, *l{previous}]\n"
            ));
        }
        text.push_str(&format!("top: *l{depth}\n"));
        text
    }

    #[test]
    fn many_alias_bombs_under_the_document_cap_are_refused_by_the_catalog_budget() {
        // One document expands to about 2^16 value nodes: under the parser's per-document caps
        // (250,000 nodes, 1,000,000 replayed events), so each one alone parses; twelve of them
        // exceed MAX_CATALOG_ALIAS_EVENTS.
        let bomb = laughs(14);
        let (one, budget) = decode_with_budget(&[&bomb], MAX_CATALOG_ALIAS_EVENTS);
        one.unwrap();
        let per_document = MAX_CATALOG_ALIAS_EVENTS - budget.left;
        assert!(
            per_document > MAX_CATALOG_ALIAS_EVENTS / 12,
            "{per_document}"
        );
        let documents = vec![bomb.as_str(); 12];
        let (many, _) = decode_with_budget(&documents, MAX_CATALOG_ALIAS_EVENTS);
        let error = many.unwrap_err();
        assert!(
            matches!(error, FbcError::AliasBudgetExceeded { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("MAX_CATALOG_ALIAS_EVENTS"),
            "{error}"
        );
    }

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
