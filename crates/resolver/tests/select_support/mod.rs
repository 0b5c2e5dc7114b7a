//! Hand-built catalogs for the selection tests (shared by `select_*.rs` through `mod`).
//!
//! Bundles are named `<package>.v<version>` so a test can speak in versions only.

#![allow(dead_code)]

use std::collections::BTreeMap;

use pom_resolver::fbc::model::{
    Bundle, BundleProperties, Catalog, Channel, ChannelEntry, Dependency, Deprecations,
    MaxOpenShiftVersion, Origin, Package,
};
use pom_resolver::range::SkipRange;
use semver::Version;

pub fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

pub fn name(package: &str, version: &str) -> String {
    format!("{package}.v{version}")
}

/// Builds one package; the first channel added is the default unless set otherwise.
pub struct PackageBuilder {
    package: Package,
}

impl PackageBuilder {
    pub fn new(package: &str) -> Self {
        PackageBuilder {
            package: Package {
                name: package.to_owned(),
                default_channel: None,
                description: None,
                channels: BTreeMap::new(),
                bundles: BTreeMap::new(),
                deprecations: Deprecations::default(),
            },
        }
    }

    /// Adds a bundle `<pkg>.v<version>`; `edit` tweaks its properties.
    pub fn bundle(mut self, version: &str, edit: impl FnOnce(&mut Bundle)) -> Self {
        let mut bundle = Bundle {
            name: name(&self.package.name, version),
            package: self.package.name.as_str().into(),
            image: Some(format!(
                "quay.example/{}-bundle:v{version}",
                self.package.name
            )),
            version: v(version),
            properties: BundleProperties::default(),
            origin: Origin {
                file: "test".into(),
                line: None,
            },
        };
        edit(&mut bundle);
        self.package.bundles.insert(bundle.name.clone(), bundle);
        self
    }

    /// Adds plain bundles.
    pub fn bundles(mut self, versions: &[&str]) -> Self {
        for version in versions {
            self = self.bundle(version, |_| {});
        }
        self
    }

    /// Adds a channel entry for `<pkg>.v<version>` with edges given as versions.
    pub fn entry(
        mut self,
        channel: &str,
        version: &str,
        replaces: Option<&str>,
        skips: &[&str],
        skip_range: Option<&str>,
    ) -> Self {
        let package = self.package.name.clone();
        if self.package.default_channel.is_none() {
            self.package.default_channel = Some(channel.to_owned());
        }
        let entry = ChannelEntry {
            name: name(&package, version),
            replaces: replaces.map(|r| name(&package, r)),
            skips: skips.iter().map(|s| name(&package, s)).collect(),
            skip_range: skip_range.map(|r| SkipRange::parse(r).unwrap()),
        };
        let chan = self
            .package
            .channels
            .entry(channel.to_owned())
            .or_insert_with(|| Channel {
                name: channel.to_owned(),
                entries: vec![],
            });
        chan.entries.push(entry);
        chan.entries.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }

    /// A `replaces` chain through `versions` in `channel` (the first replaces nothing).
    pub fn chain(mut self, channel: &str, versions: &[&str]) -> Self {
        let mut previous: Option<&str> = None;
        for version in versions {
            if !self
                .package
                .bundles
                .contains_key(&name(&self.package.name, version))
            {
                self = self.bundle(version, |_| {});
            }
            self = self.entry(channel, version, previous, &[], None);
            previous = Some(version);
        }
        self
    }

    pub fn default_channel(mut self, channel: Option<&str>) -> Self {
        self.package.default_channel = channel.map(str::to_owned);
        self
    }

    pub fn deprecate_bundle(mut self, version: &str, message: &str) -> Self {
        let bundle = name(&self.package.name, version);
        self.package
            .deprecations
            .bundles
            .insert(bundle, message.to_owned());
        self
    }

    pub fn deprecate_channel(mut self, channel: &str, message: &str) -> Self {
        self.package
            .deprecations
            .channels
            .insert(channel.to_owned(), message.to_owned());
        self
    }

    pub fn deprecate_package(mut self, message: &str) -> Self {
        self.package.deprecations.package = Some(message.to_owned());
        self
    }

    pub fn build(self) -> Package {
        self.package
    }

    pub fn catalog(self) -> Catalog {
        catalog(vec![self.build()])
    }
}

pub fn catalog(packages: Vec<Package>) -> Catalog {
    Catalog {
        packages: packages.into_iter().map(|p| (p.name.clone(), p)).collect(),
        others: vec![],
        invalid_packages: Default::default(),
    }
}

pub fn max_ocp(major: u64, minor: u64) -> impl FnOnce(&mut Bundle) {
    move |bundle| {
        bundle.properties.max_openshift_version = Some(MaxOpenShiftVersion::Valid { major, minor })
    }
}

pub fn invalid_max_ocp(raw: &str) -> impl FnOnce(&mut Bundle) + '_ {
    move |bundle| {
        bundle.properties.max_openshift_version = Some(MaxOpenShiftVersion::Invalid {
            raw: raw.to_owned(),
            reason: "not major.minor".to_owned(),
        })
    }
}

pub fn min_kube(raw: &str) -> impl FnOnce(&mut Bundle) + '_ {
    move |bundle| bundle.properties.min_kube_version = Some(raw.into())
}

pub fn requires_package(package: &str, range: &str) -> impl FnOnce(&mut Bundle) {
    let dependency = Dependency::Package {
        package_name: package.to_owned(),
        version_range: range.to_owned(),
    };
    move |bundle| bundle.properties.dependencies.push(dependency)
}
