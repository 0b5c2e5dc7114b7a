//! Wire types: the FBC schemas as they appear in files, before indexing.
//!
//! One top-level type, [`BlobWire`], carries the fields of every schema POM interprets, so a
//! blob is decoded in a single pass whatever order its keys come in (`schema` may well be the
//! last key). Blobs of other schemas are re-read whole as `serde_json::Value` (rare).

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::fields::{FieldSeed, FieldValue, Key, KeySeed, Str, collision_message, wire_struct};
use super::properties::PropertyKind;

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

/// A `{type, value}` property. Its value is read according to its type when the type comes
/// first (as `opm` writes it): the small objects POM reads (`olm.package`, `olm.gvk`,
/// `olm.gvk.required`, `olm.package.required`) and `olm.csv.metadata` straight into their wire
/// types, a type POM does not read skipped without a copy. Otherwise (the type after the
/// value, the types POM decodes from text, or a blob decoded again in [`raw_properties`]
/// mode) the value is captured as its JSON text and decoded after the blob.
#[derive(Debug, Default)]
pub(crate) struct PropertyWire<'de> {
    pub(crate) kind: Option<Str<'de>>,
    pub(crate) value: Option<PropertyValue<'de>>,
}

/// A property's value, as [`PropertyWire`] read it.
#[derive(Debug)]
pub(crate) enum PropertyValue<'de> {
    /// The value's JSON text.
    Raw(Box<RawValue>),
    /// An `olm.csv.metadata` value, read in passing.
    CsvMetadata(CsvMetadataWire<'de>),
    /// An `olm.package` value, read in passing.
    Package(PackagePropWire<'de>),
    /// An `olm.gvk` value, read in passing.
    Gvk(GvkWire<'de>),
    /// An `olm.gvk.required` value, read in passing.
    GvkRequired(GvkWire<'de>),
    /// An `olm.package.required` value, read in passing.
    PackageRequired(PackageRequiredWire<'de>),
    /// A value of a type POM does not read: well-formed, and let go.
    Skipped,
}

const PROPERTY_WHAT: &str = "property (an object with `type` and `value`)";
const PROPERTY_FIELDS: &[&str] = &["type", "value"];

thread_local! {
    /// Whether property values are captured as text whatever their type (see [`raw_properties`]).
    static RAW_PROPERTIES: Cell<bool> = const { Cell::new(false) };
}

/// Runs `decode` with every property value captured as its JSON text, as POM decoded blobs
/// before values were read in passing. A blob that fails to decode is decoded again this way,
/// so that its error (a property's own error names the property; a blob's names the blob) is
/// exactly what it always was; valid blobs never pay for it.
pub(crate) fn raw_properties<T>(decode: impl FnOnce() -> T) -> T {
    let before = RAW_PROPERTIES.replace(true);
    let out = decode();
    RAW_PROPERTIES.set(before);
    out
}

impl<'de> Deserialize<'de> for PropertyWire<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PropertyVisitor;

        impl<'de> Visitor<'de> for PropertyVisitor {
            type Value = PropertyWire<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(PROPERTY_WHAT)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = PropertyWire::default();
                let mut seen = [false; 2];
                while let Some(key) = map.next_key_seed(KeySeed {
                    fields: PROPERTY_FIELDS,
                    keep_unknown: false,
                })? {
                    let index = match key {
                        Key::Field(index) => index,
                        Key::Unknown(_) => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    if seen.get(index).copied().unwrap_or(true) {
                        let field = PROPERTY_FIELDS.get(index).copied().unwrap_or_default();
                        return Err(de::Error::custom(collision_message(PROPERTY_WHAT, field)));
                    }
                    if let Some(seen) = seen.get_mut(index) {
                        *seen = true;
                    }
                    if index == 0 {
                        out.kind = map.next_value_seed(FieldSeed::<Str<'de>> {
                            field: "type",
                            marker: PhantomData,
                        })?;
                    } else {
                        out.value = Some(property_value(&mut map, out.kind.as_ref())?);
                    }
                }
                Ok(out)
            }
        }

        deserializer.deserialize_map(PropertyVisitor)
    }
}

/// The value of a property whose type is `kind` (`None`: not read yet).
fn property_value<'de, A: MapAccess<'de>>(
    map: &mut A,
    kind: Option<&Str<'de>>,
) -> Result<PropertyValue<'de>, A::Error> {
    if !RAW_PROPERTIES.get()
        && let Some(kind) = kind.map(Str::as_str)
    {
        let Some(read) = PropertyKind::of(kind) else {
            map.next_value::<IgnoredAny>()?;
            return Ok(PropertyValue::Skipped);
        };
        match read {
            PropertyKind::CsvMetadata => return in_passing(map, PropertyValue::CsvMetadata),
            PropertyKind::Package => return in_passing(map, PropertyValue::Package),
            PropertyKind::Gvk => return in_passing(map, PropertyValue::Gvk),
            PropertyKind::GvkRequired => return in_passing(map, PropertyValue::GvkRequired),
            PropertyKind::PackageRequired => {
                return in_passing(map, PropertyValue::PackageRequired);
            }
            // Decoded from their text: their values are rare (constraints, bundle objects) or
            // read as text (max OpenShift version, media type).
            PropertyKind::Constraint
            | PropertyKind::MaxOpenShiftVersion
            | PropertyKind::BundleObject
            | PropertyKind::MediaType => {}
        }
    }
    map.next_value::<Box<RawValue>>().map(PropertyValue::Raw)
}

/// Reads a property value straight into its wire type `W`. `null` is kept as its text, which
/// the property decoder refuses with the message it always gave; any other value `W` cannot
/// read fails the blob, which is then decoded again in [`raw_properties`] mode.
fn in_passing<'de, A: MapAccess<'de>, W: FieldValue<'de>>(
    map: &mut A,
    wrap: fn(W) -> PropertyValue<'de>,
) -> Result<PropertyValue<'de>, A::Error> {
    let wire = map.next_value_seed(FieldSeed::<W> {
        field: "value",
        marker: PhantomData,
    })?;
    Ok(wire.map_or_else(|| PropertyValue::Raw(RawValue::NULL.to_owned()), wrap))
}

impl<'de> FieldValue<'de> for PropertyWire<'de> {
    fn deserialize_field<D: Deserializer<'de>>(
        deserializer: D,
        _field: &'static str,
    ) -> Result<Option<Self>, D::Error> {
        <Option<Self> as Deserialize>::deserialize(deserializer)
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
