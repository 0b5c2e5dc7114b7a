//! What `pomctl --version` prints: the version and what it was tested against.
//!
//! The Kubernetes version is the one the e2e suite builds its control plane from
//! (`e2e/tools/versions.env`); a test reads that file and fails when the two differ, so this
//! text cannot drift from what is actually tested. There is no real OpenShift cluster in the
//! tests: OpenShift is the upstream ClusterVersion/ClusterOperator CRDs (a pinned commit, checked
//! against `../shared/testdata/crds/SOURCES.md` by a test) driven by the e2e CVO simulator
//! through the updates named below; the text says so rather than overclaim.

// Each value is written once, as a macro, because `concat!` (needed for a `&'static str` clap
// can take) accepts only literals and macros expanding to them.
macro_rules! kubernetes {
    () => {
        "1.36.3"
    };
}
macro_rules! openshift_api_commit {
    () => {
        "2a3d73913b5a7caec4c57d5c3d04f51106ec4da3"
    };
}
macro_rules! openshift_updates {
    () => {
        "4.16.z updates and rollbacks, 4.16 -> 4.17 minor updates, and the CVO refusing larger jumps"
    };
}

/// `pomctl --version`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ntested against:\n  Kubernetes ",
    kubernetes!(),
    " (a real kube-apiserver, kube-controller-manager and etcd in the e2e suite)\n  OpenShift  ",
    openshift_updates!(),
    " (simulated: the e2e CVO simulator on the ClusterVersion and ClusterOperator CRDs of \
     openshift/api ",
    openshift_api_commit!(),
    "; no real OpenShift cluster)"
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::LONG_VERSION;

    /// `KUBERNETES_VERSION` of `e2e/tools/versions.env`.
    const TESTED_KUBERNETES: &str = kubernetes!();

    /// The openshift/api commit the ClusterVersion and ClusterOperator CRDs come from.
    const TESTED_OPENSHIFT_API_COMMIT: &str = openshift_api_commit!();

    /// The OpenShift updates the e2e CVO simulator takes clusters through.
    const TESTED_OPENSHIFT_UPDATES: &str = openshift_updates!();

    #[test]
    fn kubernetes_version_is_the_one_the_e2e_suite_builds() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../e2e/tools/versions.env");
        let text = std::fs::read_to_string(path).unwrap();
        let pinned = text
            .lines()
            .find_map(|line| line.trim().strip_prefix("KUBERNETES_VERSION="))
            .expect("versions.env has KUBERNETES_VERSION");
        assert_eq!(
            pinned.trim(),
            TESTED_KUBERNETES,
            "update version.rs when versions.env moves"
        );
    }

    #[test]
    fn openshift_api_commit_is_the_one_the_crds_were_copied_from() {
        let Some(crds) = crate::shared_support::shared_dir("crds") else {
            return;
        };
        let sources = std::fs::read_to_string(crds.join("SOURCES.md")).unwrap();
        let section = sources
            .split("\n## ")
            .find(|s| s.starts_with("openshift/api"))
            .expect("SOURCES.md has an openshift/api section");
        assert!(
            section.contains(&format!("commit: `{TESTED_OPENSHIFT_API_COMMIT}`")),
            "update version.rs when the openshift/api CRDs move"
        );
    }

    #[test]
    fn the_long_version_names_both() {
        assert!(LONG_VERSION.starts_with(env!("CARGO_PKG_VERSION")));
        assert!(LONG_VERSION.contains(&format!("Kubernetes {TESTED_KUBERNETES}")));
        assert!(LONG_VERSION.contains(TESTED_OPENSHIFT_API_COMMIT));
        assert!(LONG_VERSION.contains(TESTED_OPENSHIFT_UPDATES));
    }
}
