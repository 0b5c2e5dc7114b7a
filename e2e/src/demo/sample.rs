//! The demo's sample content: two packages whose bundles are pushed as real registry+v1
//! bundle images, and a catalog image pointing at them by digest, published in two stages.
//!
//! The versions tell a story the CVO contract makes visible:
//! - `demo-metrics 2.3.0` supports OpenShift up to 4.16, so on 4.16.3 it blocks the minor
//!   update to 4.17 (`IncompatibleOperatorsInstalled`) but not a patch update;
//! - stage 2 ships z-stream fixes (`demo-logging 1.0.1`, `demo-metrics 2.3.1`, still up to
//!   4.16): the patch update 4.16.3 → 4.16.4 moves both POs within their minor, and the block
//!   stays;
//! - stage 3 ships `demo-metrics 2.4.0` (up to 4.17) and `2.5.0`, `demo-logging 1.1.0` (up to
//!   4.18): when the admin asks for 4.17.0 the CVO refuses, POM offers the pre-update hop
//!   2.3.1 → 2.4.0 (a bundle that runs on both 4.16 and 4.17), the admin approves it, the
//!   cluster stays at 4.16.4 until it settled, and the CVO's own retry then starts 4.17.0,
//!   under which both POs move within their major (metrics to 2.5.0, logging to 1.1.0).
//!
//! Each stage is pushed to the same tag, as a publisher would, and the manager follows the
//! tag at its next poll. Stage 1 holds only the first bundle of each package, so that the
//! first install picks it (an install takes the highest bundle available).

use crate::HarnessError;
use crate::fixtures::{TestBundle, catalog_json};
use crate::oci_publish::{push_bundle_dir, push_catalog};

/// The repository (and tag) of the demo catalog in the loopback registry.
pub const CATALOG_REPOSITORY: &str = "pom-demo/catalog";
pub const CATALOG_TAG: &str = "latest";

/// The PlatformOperators the demo creates, each named after its package.
pub const PACKAGES: [&str; 2] = ["demo-logging", "demo-metrics"];

/// Every bundle of the demo, with the catalog stage that first holds it.
#[must_use]
pub fn bundles() -> Vec<(TestBundle, u8)> {
    vec![
        (TestBundle::new("demo-logging", "1.0.0").max_ocp("4.17"), 1),
        (
            TestBundle::new("demo-logging", "1.0.1")
                .replaces("1.0.0")
                .max_ocp("4.17"),
            2,
        ),
        (
            TestBundle::new("demo-logging", "1.1.0")
                .replaces("1.0.1")
                .max_ocp("4.18"),
            3,
        ),
        (TestBundle::new("demo-metrics", "2.3.0").max_ocp("4.16"), 1),
        (
            TestBundle::new("demo-metrics", "2.3.1")
                .replaces("2.3.0")
                .max_ocp("4.16"),
            2,
        ),
        (
            TestBundle::new("demo-metrics", "2.4.0")
                .replaces("2.3.1")
                .max_ocp("4.17"),
            3,
        ),
        (
            TestBundle::new("demo-metrics", "2.5.0")
                .replaces("2.4.0")
                .max_ocp("4.18"),
            3,
        ),
    ]
}

/// The bundle images, pushed: `(bundle name, by-digest reference)`.
pub type BundleImages = Vec<(String, String)>;

/// Pushes every bundle image; returns their by-digest references.
///
/// # Errors
/// When a bundle folder cannot be written or the registry refuses a push.
pub async fn push_bundles(host: &str) -> Result<BundleImages, HarnessError> {
    let mut images = Vec::new();
    for (bundle, _) in bundles() {
        let reference = push_bundle_image(host, &bundle).await?;
        images.push((bundle.name(), reference));
    }
    Ok(images)
}

/// Pushes the catalog at `stage` (every bundle whose stage is at most `stage`, see
/// [`bundles`]) to the demo tag; returns the by-digest reference.
///
/// # Errors
/// When the registry refuses the push.
pub async fn push_catalog_stage(
    host: &str,
    images: &BundleImages,
    stage: u8,
) -> Result<String, HarnessError> {
    let chosen: Vec<TestBundle> = bundles()
        .into_iter()
        .filter(|(_, first_stage)| *first_stage <= stage)
        .map(|(b, _)| b)
        .collect();
    push_catalog(
        host,
        CATALOG_REPOSITORY,
        CATALOG_TAG,
        &catalog_json(&chosen, images),
    )
    .await
}

/// Writes `bundle` in the registry+v1 image layout (`manifests/`, `metadata/annotations.yaml`)
/// to a temporary folder and pushes it as `<host>/pom-demo/<package>-bundle:v<version>`;
/// returns the by-digest reference.
///
/// # Errors
/// When the folder cannot be written or the registry refuses the push.
pub async fn push_bundle_image(host: &str, bundle: &TestBundle) -> Result<String, HarnessError> {
    let dir = tempfile::Builder::new()
        .prefix("pom-demo-bundle-")
        .tempdir()
        .map_err(HarnessError::io("creating a bundle folder"))?;
    write_bundle_dir(dir.path(), bundle)?;
    let repository = format!("pom-demo/{}-bundle", bundle.package);
    push_bundle_dir(
        host,
        &repository,
        &format!("v{}", bundle.version),
        dir.path(),
    )
    .await
}

/// The registry+v1 layout of `bundle` under `dir`. Manifests are JSON, which is YAML too.
///
/// # Errors
/// When a file cannot be written.
pub fn write_bundle_dir(dir: &std::path::Path, bundle: &TestBundle) -> Result<(), HarnessError> {
    let manifests = dir.join("manifests");
    let metadata = dir.join("metadata");
    for folder in [&manifests, &metadata] {
        std::fs::create_dir_all(folder)
            .map_err(HarnessError::io(format!("creating {}", folder.display())))?;
    }
    let names = [
        format!("{}.clusterserviceversion.yaml", bundle.package),
        format!("{}.crd.yaml", bundle.crd_name()),
    ];
    for (name, text) in names.iter().zip(bundle.manifests()) {
        let path = manifests.join(name);
        std::fs::write(&path, text)
            .map_err(HarnessError::io(format!("writing {}", path.display())))?;
    }
    let annotations = format!(
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n  operators.operatorframework.io.bundle.package.v1: {}\n  operators.operatorframework.io.bundle.channels.v1: stable\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n",
        bundle.package
    );
    let path = metadata.join("annotations.yaml");
    std::fs::write(&path, annotations)
        .map_err(HarnessError::io(format!("writing {}", path.display())))
}
