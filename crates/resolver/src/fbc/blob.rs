//! Wire types: the FBC schemas as they appear in files, before indexing.
//!
//! One top-level type, [`BlobWire`], carries the fields of every schema POM interprets, so a
//! blob is decoded in a single pass whatever order its keys come in (`schema` may well be the
//! last key). Blobs of other schemas are re-read whole as `serde_json::Value` (rare).

use serde_json::value::RawValue;

use super::fields::{Str, wire_struct};

/// Schema names POM interprets.
pub(crate) const SCHEMA_PACKAGE: &str = "olm.package";
pub(crate) const SCHEMA_CHANNEL: &str = "olm.channel";
pub(crate) const SCHEMA_BUNDLE: &str = "olm.bundle";
pub(crate) const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

/// Whether POM decodes blobs of this schema (others are kept in `Catalog::others`).
pub(crate) fn is_known_schema(schema: &str) -> bool {
    matches!(
        schema,
        SCHEMA_PACKAGE | SCHEMA_CHANNEL | SCHEMA_BUNDLE | SCHEMA_DEPRECATIONS
    )
}

wire_struct! {
    /// Any catalog blob (the union of the fields of the schemas POM reads).
    pub(crate) struct BlobWire<'de> ("catalog blob (a JSON object)", check_all_keys = true) {
        schema: Str<'de> => "schema",
        package: Str<'de> => "package",
        name: Str<'de> => "name",
        default_channel: Str<'de> => "defaultChannel",
        description: Str<'de> => "description",
        image: Str<'de> => "image",
        entries: Vec<EntryWire<'de>> => "entries",
        properties: Vec<PropertyWire<'de>> => "properties",
    }
}

wire_struct! {
    /// An entry of `olm.channel` (name, edges) or of `olm.deprecations` (reference, message).
    pub(crate) struct EntryWire<'de> ("entry (an object)", check_all_keys = false) {
        name: Str<'de> => "name",
        replaces: Str<'de> => "replaces",
        skips: Vec<Str<'de>> => "skips",
        skip_range: Str<'de> => "skipRange",
        reference: ReferenceWire<'de> => "reference",
        message: Str<'de> => "message",
    }
}

wire_struct! {
    /// The `reference` of an `olm.deprecations` entry.
    pub(crate) struct ReferenceWire<'de> ("deprecation reference (an object)", check_all_keys = false) {
        schema: Str<'de> => "schema",
        name: Str<'de> => "name",
    }
}

wire_struct! {
    /// A `{type, value}` property; the value is captured as raw JSON text, and only the few
    /// POM reads are decoded, from that text.
    pub(crate) struct PropertyWire<'de> ("property (an object with `type` and `value`)", check_all_keys = false) {
        kind: Str<'de> => "type",
        value: Box<RawValue> => "value",
    }
}

wire_struct! {
    /// `olm.package` property value.
    pub(crate) struct PackagePropWire<'de> ("olm.package property value (an object)", check_all_keys = false) {
        package_name: Str<'de> => "packageName",
        version: Str<'de> => "version",
    }
}

wire_struct! {
    /// `olm.gvk` / `olm.gvk.required` property value.
    pub(crate) struct GvkWire<'de> ("group/version/kind (an object)", check_all_keys = false) {
        group: Str<'de> => "group",
        version: Str<'de> => "version",
        kind: Str<'de> => "kind",
    }
}

wire_struct! {
    /// `olm.package.required` property value.
    pub(crate) struct PackageRequiredWire<'de> ("olm.package.required value (an object)", check_all_keys = false) {
        package_name: Str<'de> => "packageName",
        version_range: Str<'de> => "versionRange",
    }
}

wire_struct! {
    /// The parts of `olm.csv.metadata` POM reads.
    pub(crate) struct CsvMetadataWire<'de> ("olm.csv.metadata value (an object)", check_all_keys = false) {
        min_kube_version: Str<'de> => "minKubeVersion",
        install_modes: Vec<InstallModeWire<'de>> => "installModes",
    }
}

wire_struct! {
    /// One CSV install mode.
    pub(crate) struct InstallModeWire<'de> ("install mode (an object with `type` and `supported`)", check_all_keys = false) {
        kind: Str<'de> => "type",
        supported: bool => "supported",
    }
}

wire_struct! {
    /// `olm.bundle.object` property value (`data` is base64; `ref` is a render-time form).
    pub(crate) struct BundleObjectWire<'de> ("olm.bundle.object value (an object)", check_all_keys = false) {
        data: Str<'de> => "data",
        reference: Str<'de> => "ref",
    }
}
