//! Synthetic file-based catalogs for benchmarks.
//!
//! Real catalogs are too small to measure throughput (the biggest one in the test data is under
//! 1 MB), and the operatorhub-sized catalogs POM must cope with are not redistributable. This
//! generator writes a catalog shaped like an `opm render` output: per package one `olm.package`,
//! two `olm.channel`s (a long `replaces` chain with `skips` and `skipRange`s, and a short one whose
//! tail dangles) and bundles carrying the properties real bundles carry (`olm.package`, `olm.gvk`,
//! `olm.csv.metadata` with annotations and install modes, sometimes `olm.maxOpenShiftVersion`
//! and a dependency), plus some `olm.deprecations`. Entries are shuffled deterministically so
//! nothing relies on input order. The output is a JSON stream (one compact blob per line, as
//! catalogd serves it), identical for identical arguments; [`for_each_synthetic_blob`] hands the
//! same blobs to other renderings (`common/inputs.rs`: YAML documents, one file per package).
//!
//! Resolution benchmarks include this file with `#[path = "common/mod.rs"] mod common;`.

#![allow(dead_code)]

use serde_json::{Value, json};

/// Package name for index `p`, so benchmarks can name a package without parsing.
pub fn package_name(p: usize) -> String {
    format!("synthetic-operator-{p:04}")
}

/// Bundle name for bundle `b` of package `p` (version `1.b.0`, see [`bundle_version`]).
pub fn bundle_name(p: usize, b: usize) -> String {
    format!("{}.v{}", package_name(p), bundle_version(b))
}

/// Version of bundle `b`: `1.b.0`, so versions grow with `b` and the last bundle is the head.
pub fn bundle_version(b: usize) -> String {
    format!("1.{b}.0")
}

/// A JSON stream of `packages` packages with `bundles` bundles each (about 2.2 KB per bundle).
pub fn synthetic_catalog_json(packages: usize, bundles: usize) -> String {
    let mut out = String::with_capacity(packages * bundles * 2_400 + packages * 4_000);
    for_each_synthetic_blob(packages, bundles, |_, blob| {
        out.push_str(&blob.to_string());
        out.push('\n');
    });
    out
}

/// Calls `each(package index, blob)` for every blob of the catalog [`synthetic_catalog_json`]
/// writes, in its order (a package's blobs are contiguous and start with its `olm.package`), so
/// other renderings (YAML, one file per package) hold the same catalog.
pub fn for_each_synthetic_blob(
    packages: usize,
    bundles: usize,
    mut each: impl FnMut(usize, &Value),
) {
    let mut rng = SplitMix64(0x5eed_cafe_f00d_beef);
    for p in 0..packages {
        each(p, &package_blob(p));
        let mut order: Vec<usize> = (0..bundles).collect();
        rng.shuffle(&mut order);
        for &b in &order {
            each(p, &bundle_blob(p, b, &mut rng));
        }
        each(p, &stable_channel(p, bundles, &mut rng));
        if bundles > 0 {
            each(p, &fast_channel(p, bundles));
        }
        if p % 10 == 3 && bundles > 1 {
            each(p, &deprecations(p));
        }
    }
}

fn package_blob(p: usize) -> Value {
    json!({
        "schema": "olm.package",
        "name": package_name(p),
        "defaultChannel": "stable",
        "description": format!("Synthetic operator number {p}, generated for benchmarks. It manages an imaginary service and exists so that parsing and resolution can be measured at catalog scale."),
        "icon": {"base64data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "mediatype": "image/png"}
    })
}

fn stable_channel(p: usize, bundles: usize, rng: &mut SplitMix64) -> Value {
    let mut entries: Vec<Value> = (0..bundles)
        .map(|b| {
            let mut entry = json!({ "name": bundle_name(p, b) });
            // The tail replaces a bundle that was pruned from the catalog (dangling edge).
            // Every tenth bundle skips the two before its predecessor, which replaces past them
            // (1.9 skips 1.7 and 1.6; 1.8 replaces 1.5), so the replaces chain from the head
            // reaches every bundle that is not skipped: operator-registry's ConvertToModel
            // refuses a channel whose chain stops at a skipped bundle ("stranded bundles").
            entry["replaces"] = if b == 0 {
                json!(format!("{}.v0.9.0", package_name(p)))
            } else if b % 10 == 8 && b + 1 < bundles {
                json!(bundle_name(p, b - 3))
            } else {
                json!(bundle_name(p, b - 1))
            };
            if b % 5 == 4 {
                entry["skipRange"] = json!(format!(">=1.{}.0 <1.{b}.0", b.saturating_sub(4)));
            }
            if b % 10 == 9 {
                entry["skips"] = json!([bundle_name(p, b - 2), bundle_name(p, b - 3)]);
            }
            entry
        })
        .collect();
    rng.shuffle(&mut entries);
    json!({ "schema": "olm.channel", "package": package_name(p), "name": "stable", "entries": entries })
}

fn fast_channel(p: usize, bundles: usize) -> Value {
    let first = bundles.saturating_sub(10);
    let entries: Vec<Value> = (first..bundles)
        .rev()
        .map(|b| {
            let replaces = if b == 0 { format!("{}.v0.9.0", package_name(p)) } else { bundle_name(p, b - 1) };
            json!({ "name": bundle_name(p, b), "replaces": replaces, "skipRange": format!("<{}", bundle_version(b)) })
        })
        .collect();
    json!({ "name": "fast", "package": package_name(p), "schema": "olm.channel", "entries": entries })
}

fn deprecations(p: usize) -> Value {
    json!({
        "schema": "olm.deprecations",
        "package": package_name(p),
        "entries": [
            { "reference": { "schema": "olm.bundle", "name": bundle_name(p, 0) }, "message": "1.0.0 has a known data-loss bug; move to a later release." },
            { "reference": { "schema": "olm.channel", "name": "fast" }, "message": "The fast channel is no longer maintained; use stable." }
        ]
    })
}

fn bundle_blob(p: usize, b: usize, rng: &mut SplitMix64) -> Value {
    let pkg = package_name(p);
    let version = bundle_version(b);
    let digest = rng.digest();
    let operator_digest = rng.digest();
    let group = format!("{pkg}.example.com");
    let mut properties = vec![
        json!({ "type": "olm.gvk", "value": { "group": group, "kind": "Widget", "version": "v1" } }),
        json!({ "type": "olm.gvk", "value": { "group": group, "kind": "WidgetPool", "version": "v1beta1" } }),
        json!({ "type": "olm.package", "value": { "packageName": pkg, "version": version } }),
    ];
    if b.is_multiple_of(3) {
        properties.push(
            json!({ "type": "olm.maxOpenShiftVersion", "value": format!("4.{}", 14 + (b % 8)) }),
        );
    }
    if p % 7 == 5 {
        properties.push(json!({ "type": "olm.package.required", "value": { "packageName": package_name(p + 1), "versionRange": ">=1.0.0" } }));
    }
    properties.push(json!({ "type": "olm.csv.metadata", "value": csv_metadata(&pkg, &version, &operator_digest, b) }));
    json!({
        "schema": "olm.bundle",
        "name": bundle_name(p, b),
        "package": pkg,
        "image": format!("quay.io/synthetic/{pkg}-bundle@sha256:{digest}"),
        "properties": properties,
        "relatedImages": [
            { "name": "", "image": format!("quay.io/synthetic/{pkg}-bundle@sha256:{digest}") },
            { "name": "manager", "image": format!("quay.io/synthetic/{pkg}@sha256:{operator_digest}") }
        ]
    })
}

fn csv_metadata(pkg: &str, version: &str, operator_digest: &str, b: usize) -> Value {
    let alm_examples = format!(
        "[\n  {{\n    \"apiVersion\": \"{pkg}.example.com/v1\",\n    \"kind\": \"Widget\",\n    \"metadata\": {{\n      \"name\": \"example\"\n    }},\n    \"spec\": {{\n      \"replicas\": 3,\n      \"storage\": \"10Gi\"\n    }}\n  }}\n]\n"
    );
    json!({
        "annotations": {
            "alm-examples": alm_examples,
            "capabilities": "Seamless Upgrades",
            "categories": "Database, Storage",
            "containerImage": format!("quay.io/synthetic/{pkg}@sha256:{operator_digest}"),
            "createdAt": format!("2025-{:02}-{:02}T10:00:00Z", 1 + b % 12, 1 + b % 28),
            "description": "Runs widgets at scale.",
            "features.operators.openshift.io/disconnected": "true",
            "features.operators.openshift.io/fips-compliant": "false",
            "olm.skipRange": format!("<{version}"),
            "operators.openshift.io/valid-subscription": "[\"OpenShift Container Platform\"]",
            "repository": format!("https://github.com/synthetic/{pkg}"),
            "support": "Synthetic Inc."
        },
        "crdDescriptions": { "owned": [
            { "name": format!("widgets.{pkg}.example.com"), "version": "v1", "kind": "Widget", "displayName": "Widget", "description": "A widget managed by the operator." },
            { "name": format!("widgetpools.{pkg}.example.com"), "version": "v1beta1", "kind": "WidgetPool", "displayName": "Widget Pool", "description": "A pool of widgets." }
        ]},
        "description": "The synthetic operator deploys and manages widgets. It exists to give benchmarks a realistic amount of text: CSV descriptions are usually a few paragraphs of Markdown explaining installation, configuration and support.\n\n## Features\n\n* Automated upgrades\n* Backups\n* Monitoring\n",
        "displayName": format!("Synthetic Operator {pkg}"),
        "installModes": [
            { "type": "OwnNamespace", "supported": true },
            { "type": "SingleNamespace", "supported": true },
            { "type": "MultiNamespace", "supported": false },
            { "type": "AllNamespaces", "supported": b % 4 != 1 }
        ],
        "keywords": ["widgets", "synthetic", "benchmark"],
        "links": [{ "name": "Documentation", "url": format!("https://example.com/{pkg}/docs") }],
        "maintainers": [{ "name": "Synthetic Team", "email": "team@example.com" }],
        "maturity": "stable",
        "minKubeVersion": format!("1.{}.0", 24 + (b % 8)),
        "provider": { "name": "Synthetic Inc." }
    })
}

/// A tiny deterministic generator (SplitMix64), so the catalog needs no `rand` dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn digest(&mut self) -> String {
        (0..4).map(|_| format!("{:016x}", self.next())).collect()
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = usize::try_from(self.next() % (i as u64 + 1)).unwrap_or(0);
            items.swap(i, j);
        }
    }
}
