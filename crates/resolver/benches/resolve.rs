//! Resolution speed (criterion): goals are ≤ 50 µs for one resolution on a package of 200
//! bundles and ≤ 50 ms for 1,000 resolutions (one per package) on the large generated catalog
//! (1,000 packages × 50 bundles, the `fbc_parse` default). Parsing is done once, outside the
//! measurement: the controller caches the parsed catalog per digest.
//!
//! Run: `cargo bench -p pom-resolver --bench resolve`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::model::Catalog;
use pom_resolver::fbc::parse::parse_documents;
use pom_resolver::select::{InstalledBundle, PinPolicy, ResolveRequest, resolve};
use semver::Version;

fn catalog(packages: usize, bundles: usize) -> Catalog {
    let json = common::synthetic_catalog_json(packages, bundles);
    parse_documents([("synthetic.json".to_owned(), json.into_bytes())])
        .expect("synthetic catalog parses")
}

fn request<'a>(
    catalogs: &'a [(&'a str, i32, &'a Catalog)],
    package: &'a str,
    installed: usize,
) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs,
        package,
        channel: None,
        installed: Some(InstalledBundle {
            name: common::bundle_name(0, installed).replace(&common::package_name(0), package),
            version: Version::parse(&common::bundle_version(installed)).unwrap(),
        }),
        version_range: None,
        steady_state_range: None,
        cluster: Some(ClusterPhase {
            kind: PhaseKind::MinorUpgrade,
            current: Version::new(4, 16, 3),
            target: Version::new(4, 17, 0),
        }),
        kube_version: Some(Version::new(1, 30, 0)),
        pin_policy: PinPolicy::FollowCluster,
    }
}

fn bench_resolve(c: &mut Criterion) {
    let small = catalog(1, 200);
    let small_cats = [("synthetic", 0, &small)];
    let package = common::package_name(0);
    let req = request(&small_cats, &package, 100);
    // The answer must be a real move, not an early error, or the figure means nothing.
    let answer = resolve(&req);
    eprintln!(
        "200-bundle package, installed 1.100.0: {:?}",
        answer.as_ref().map(|r| r.bundle.version.to_string())
    );
    c.bench_function("resolve/one package of 200 bundles", |b| {
        b.iter(|| resolve(black_box(&req)))
    });

    let large = catalog(1_000, 50);
    let large_cats = [("synthetic", 0, &large)];
    let names: Vec<String> = (0..1_000).map(common::package_name).collect();
    let requests: Vec<ResolveRequest<'_>> = names
        .iter()
        .map(|name| request(&large_cats, name, 25))
        .collect();
    let ok = requests.iter().filter(|req| resolve(req).is_ok()).count();
    eprintln!(
        "large catalog: {ok} of {} resolutions choose a bundle",
        requests.len()
    );
    let mut group = c.benchmark_group("resolve");
    group.sample_size(20);
    group.bench_function("1000 resolutions on 1000 packages x 50 bundles", |b| {
        b.iter(|| {
            for req in &requests {
                let _ = black_box(resolve(black_box(req)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench_resolve);
criterion_main!(benches);
