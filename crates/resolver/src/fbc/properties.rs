//! Bundle properties: the ones POM acts on, decoded; the others are checked to be properties
//! (`{type, value}`) and let go.
//!
//! Values arrive as raw JSON text and the ones POM interprets are decoded from that text with
//! the same case-insensitive field matching as blobs. Unknown property types are not errors:
//! operator-registry accepts them too.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::blob::{
    BundleObjectWire, CsvMetadataWire, GvkWire, PackagePropWire, PackageRequiredWire,
    PropertyValue, PropertyWire,
};
use super::decode::json_reason;
use super::error::FbcError;
use super::fields::Str;
use super::max_ocp;
use super::model::{BundleProperties, Dependency, Gvk, Interner, Origin};

/// The property types POM reads; every other type is checked to be a value and let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PropertyKind {
    Package,
    Gvk,
    GvkRequired,
    PackageRequired,
    Constraint,
    MaxOpenShiftVersion,
    CsvMetadata,
    BundleObject,
    MediaType,
}

impl PropertyKind {
    /// The one table of property type names POM reads (`None`: a type it lets go).
    pub(crate) fn of(kind: &str) -> Option<Self> {
        Some(match kind {
            "olm.package" => Self::Package,
            "olm.gvk" => Self::Gvk,
            "olm.gvk.required" => Self::GvkRequired,
            "olm.package.required" => Self::PackageRequired,
            "olm.constraint" => Self::Constraint,
            "olm.maxOpenShiftVersion" => Self::MaxOpenShiftVersion,
            "olm.csv.metadata" => Self::CsvMetadata,
            "olm.bundle.object" => Self::BundleObject,
            "olm.bundle.mediatype" => Self::MediaType,
            _ => return None,
        })
    }
}

/// The `olm.package` property: which package the bundle claims and its version text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PackageProperty {
    pub(crate) package_name: String,
    pub(crate) version: String,
}

/// A bundle's properties after decoding, plus every `olm.package` property found (the caller
/// requires exactly one).
#[derive(Debug, Default)]
pub(crate) struct DecodedProperties {
    pub(crate) properties: BundleProperties,
    pub(crate) packages: Vec<PackageProperty>,
}

/// Decodes the properties of bundle `bundle` (read at `origin`).
///
/// Each value arrives as raw JSON text; only the property types POM acts on are decoded,
/// straight from that text into borrowed wire types, so a large `olm.csv.metadata` costs one
/// transient copy of its text instead of a tree of small maps.
pub(crate) fn decode(
    wires: Vec<PropertyWire<'_>>,
    bundle: &str,
    origin: &Origin,
    interner: &mut Interner,
) -> Result<DecodedProperties, FbcError> {
    let mut out = DecodedProperties::default();
    let mut max_ocp_raws: Vec<String> = Vec::new();
    for wire in wires {
        let kind = wire.kind.as_ref().map_or("", Str::as_str);
        let props = &mut out.properties;
        let value = match wire.value {
            Some(PropertyValue::Skipped) => continue,
            Some(PropertyValue::CsvMetadata(metadata)) => {
                csv_metadata(props, metadata, interner);
                continue;
            }
            Some(PropertyValue::Package(wire)) => {
                out.packages.push(package_property(wire));
                continue;
            }
            Some(PropertyValue::Gvk(wire)) => {
                props.provided_gvks.push(gvk_of(wire, interner));
                continue;
            }
            Some(PropertyValue::GvkRequired(wire)) => {
                props
                    .dependencies
                    .push(Dependency::Gvk(gvk_of(wire, interner)));
                continue;
            }
            Some(PropertyValue::PackageRequired(wire)) => {
                props.dependencies.push(package_required(wire));
                continue;
            }
            Some(PropertyValue::Raw(value)) => value,
            None => RawValue::NULL.to_owned(),
        };
        let invalid = |reason: String| FbcError::InvalidProperty {
            origin: origin.clone(),
            bundle: bundle.to_owned(),
            property: kind.to_owned(),
            reason,
        };
        let Some(read) = PropertyKind::of(kind) else {
            continue;
        };
        match read {
            PropertyKind::Package => out.packages.push(package_property(
                typed::<PackagePropWire<'_>>(&value).map_err(invalid)?,
            )),
            PropertyKind::Gvk => props
                .provided_gvks
                .push(gvk(&value, interner).map_err(invalid)?),
            PropertyKind::GvkRequired => props
                .dependencies
                .push(Dependency::Gvk(gvk(&value, interner).map_err(invalid)?)),
            PropertyKind::PackageRequired => props.dependencies.push(package_required(
                typed::<PackageRequiredWire<'_>>(&value).map_err(invalid)?,
            )),
            PropertyKind::Constraint => props
                .dependencies
                .push(Dependency::Constraint(typed(&value).map_err(invalid)?)),
            PropertyKind::MaxOpenShiftVersion => max_ocp_raws.push(max_ocp::raw_text(&value)),
            PropertyKind::CsvMetadata => {
                csv_metadata(props, typed(&value).map_err(invalid)?, interner);
            }
            PropertyKind::BundleObject => {
                props.objects.push(bundle_object(&value).map_err(invalid)?)
            }
            PropertyKind::MediaType => match serde_json::from_str::<String>(value.get()) {
                Ok(media_type) => props.media_type = Some(media_type),
                Err(_) => {
                    return Err(invalid(format!(
                        "expected a string such as \"registry+v1\", found {value}"
                    )));
                }
            },
        }
    }
    out.properties.max_openshift_version = max_ocp::decode(&max_ocp_raws);
    // Kept for the catalog's life: no spare capacity (a push leaves room for four).
    let props = &mut out.properties;
    props.supported_install_modes.shrink_to_fit();
    props.provided_gvks.shrink_to_fit();
    props.dependencies.shrink_to_fit();
    props.objects.shrink_to_fit();
    Ok(out)
}

/// What POM reads of `olm.csv.metadata`: `minKubeVersion` and the supported install modes.
fn csv_metadata(props: &mut BundleProperties, wire: CsvMetadataWire<'_>, interner: &mut Interner) {
    if let Some(min_kube) = wire.min_kube_version.filter(|s| !s.as_str().is_empty()) {
        props.min_kube_version = Some(interner.intern(min_kube.as_str()));
    }
    props.supported_install_modes.extend(
        wire.install_modes
            .unwrap_or_default()
            .into_iter()
            .filter(|mode| mode.supported == Some(true))
            .filter_map(|mode| mode.kind.map(|k| interner.intern(k.as_str()))),
    );
}

/// Decodes a property value from its raw text. The reason drops serde_json's position, which
/// counts from the start of the value and would contradict the blob's file line in the message.
fn typed<'a, T: Deserialize<'a>>(value: &'a RawValue) -> Result<T, String> {
    serde_json::from_str(value.get()).map_err(|e| json_reason(&e))
}

fn gvk(value: &RawValue, interner: &mut Interner) -> Result<Gvk, String> {
    typed::<GvkWire<'_>>(value).map(|wire| gvk_of(wire, interner))
}

fn gvk_of(wire: GvkWire<'_>, interner: &mut Interner) -> Gvk {
    let mut field =
        |value: Option<Str<'_>>| interner.intern(value.as_ref().map_or("", Str::as_str));
    Gvk {
        group: field(wire.group),
        version: field(wire.version),
        kind: field(wire.kind),
    }
}

fn package_property(wire: PackagePropWire<'_>) -> PackageProperty {
    PackageProperty {
        package_name: wire
            .package_name
            .map(|s| s.into_string())
            .unwrap_or_default(),
        version: wire.version.map(|s| s.into_string()).unwrap_or_default(),
    }
}

fn package_required(wire: PackageRequiredWire<'_>) -> Dependency {
    Dependency::Package {
        package_name: wire
            .package_name
            .map(|s| s.into_string())
            .unwrap_or_default(),
        version_range: wire
            .version_range
            .map(|s| s.into_string())
            .unwrap_or_default(),
    }
}

/// `olm.bundle.object`: `data` is a base64 manifest (Go's `[]byte` JSON form, which tolerates
/// line breaks). The `ref` form only exists in render templates, before `opm render` inlines it.
fn bundle_object(value: &RawValue) -> Result<String, String> {
    let wire: BundleObjectWire<'_> = typed(value)?;
    let Some(data) = wire.data else {
        return Err(if wire.reference.is_some() {
            "`ref` is a render-template form; render the catalog (opm render) so the manifest is \
             inlined as base64 `data`"
                .to_owned()
        } else {
            "missing field `data` (a base64-encoded manifest)".to_owned()
        });
    };
    let engine = &base64::engine::general_purpose::STANDARD;
    let data = data.as_str();
    // Manifests are large and rarely wrapped: copy out line breaks only when there are some.
    let decoded = if data.contains(['\n', '\r']) {
        let compact: Vec<u8> = data
            .bytes()
            .filter(|b| !matches!(b, b'\n' | b'\r'))
            .collect();
        engine.decode(&compact)
    } else {
        engine.decode(data)
    };
    let bytes = decoded.map_err(|e| format!("field `data` is not valid base64 ({e})"))?;
    String::from_utf8(bytes).map_err(|_| "field `data` does not decode to UTF-8 text".to_owned())
}
