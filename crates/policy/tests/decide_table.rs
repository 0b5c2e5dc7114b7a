//! `decide` as pure data: one row per situation a reconcile can meet (§4, §5, §7, §8.3).
//!
//! Each row describes a snapshot in words the spec uses (what is installed, the last hop, the
//! cluster phase, the catalog view, the operator's gate) and states the whole decision expected
//! of it: the action, the pin, the held move and why, this PO's verdict, the problem and whether
//! it degrades, and the deadline. Every field of every row is compared, so a decision that grows
//! an unexpected pin, hold or problem fails as surely as one that moves to the wrong bundle.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture {
    //! A small catalog and the snapshot builder the rows are written with.

    use std::sync::LazyLock;
    use std::time::Duration;

    use k8s_openapi::jiff::Timestamp;
    use pom_api::PlatformOperatorSpec;
    use pom_api::platform_operator::{
        AppliedConfig, ClusterProxyEnv, InstalledBundle, OperatorConfig, PackageSpec,
        PreUpdateHops, UpgradeApproval, UpgradeGate,
    };
    use pom_policy::snapshot::{
        CatalogContent, CatalogView, ClusterView, ConfigView, GateReading, GuardState, Hop,
        Installed, OperatorGate, PoSnapshot, UnsettledMoveAction,
    };
    use pom_policy::{PoRequest, RequestError};
    use pom_resolver::cluster::{ClusterPhase, PhaseKind};
    use pom_resolver::fbc::{Catalog, parse_documents};
    use semver::Version;

    pub const PACKAGE: &str = "demo";
    pub const CATALOG: &str = "redhat";

    /// Channel `stable` of package `demo`:
    ///
    /// ```text
    /// 1.0.0 (max 4.16)
    /// 1.1.0 (max 4.17)  replaces 1.0.0
    /// 1.1.1 (max 4.17)  replaces 1.1.0, minKubeVersion 1.29.6 (checked in rows that set one)
    /// 1.2.0 (no max)    replaces 1.1.1, skipRange >=1.0.0 <1.2.0
    /// 2.0.0 (no max)    replaces 1.2.0, skipRange >=1.0.0 <2.0.0
    /// ```
    ///
    /// 2.0.0 is a direct successor of every 1.x bundle, so only the pin keeps a PO off it.
    const FBC: &str = r#"
{"schema":"olm.package","name":"demo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"demo","name":"stable","entries":[
  {"name":"demo.v1.0.0"},
  {"name":"demo.v1.1.0","replaces":"demo.v1.0.0"},
  {"name":"demo.v1.1.1","replaces":"demo.v1.1.0"},
  {"name":"demo.v1.2.0","replaces":"demo.v1.1.1","skipRange":">=1.0.0 <1.2.0"},
  {"name":"demo.v2.0.0","replaces":"demo.v1.2.0","skipRange":">=1.0.0 <2.0.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"quay.example/demo-bundle:v1.0.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.1.0","image":"quay.example/demo-bundle:v1.1.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.1.0"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.1.1","image":"quay.example/demo-bundle:v1.1.1","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.1.1"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.17"},
  {"type":"olm.csv.metadata","value":{"minKubeVersion":"1.29.6"}}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.2.0","image":"quay.example/demo-bundle:v1.2.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.2.0"}}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v2.0.0","image":"quay.example/demo-bundle:v2.0.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"2.0.0"}}]}
"#;

    static DEMO: LazyLock<Catalog> = LazyLock::new(|| {
        parse_documents([("demo.json".to_owned(), FBC.as_bytes().to_vec())]).unwrap()
    });

    pub fn demo() -> &'static Catalog {
        &DEMO
    }

    pub fn bundle_name(version: &str) -> String {
        format!("{PACKAGE}.v{version}")
    }

    /// 2024-06-01T12:00:00Z: every row's `now`.
    pub fn now() -> Timestamp {
        Timestamp::from_second(1_717_243_200).unwrap()
    }

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    /// The cluster, in the phases of §4.1.
    #[derive(Debug, Clone, Copy)]
    pub enum Cluster {
        /// OpenShift 4.16.3, no update in flight.
        Steady,
        /// OpenShift 4.16.3 → 4.16.4.
        Patch,
        /// OpenShift 4.16.4 → 4.17.0.
        Minor,
        /// OpenShift 4.16.4 → 4.16.3.
        Rollback,
        /// Plain Kubernetes (no `config.openshift.io`).
        Kubernetes,
        /// OpenShift whose ClusterVersion cannot be judged.
        Unjudgeable,
    }

    impl Cluster {
        fn view(self) -> ClusterView {
            let phase = |kind, current: &str, target: &str| {
                ClusterView::OpenShift(Ok(ClusterPhase {
                    kind,
                    current: v(current),
                    target: v(target),
                }))
            };
            match self {
                Self::Steady => phase(PhaseKind::Steady, "4.16.3", "4.16.3"),
                Self::Patch => phase(PhaseKind::PatchUpgrade, "4.16.3", "4.16.4"),
                Self::Minor => phase(PhaseKind::MinorUpgrade, "4.16.4", "4.17.0"),
                Self::Rollback => phase(PhaseKind::Rollback, "4.16.4", "4.16.3"),
                Self::Kubernetes => ClusterView::Kubernetes,
                Self::Unjudgeable => ClusterView::OpenShift(Err(
                    "ClusterVersion status.desired.version is empty".to_owned(),
                )),
            }
        }
    }

    /// The catalogs the PO resolves from.
    #[derive(Debug, Clone, Copy)]
    pub enum Catalogs {
        /// `redhat` serves the demo catalog.
        Ready,
        /// `redhat` serves it, but Catalog `community` (which may offer the package) is down.
        ReadyPartly,
        /// No usable content at all.
        Unavailable,
        /// `redhat` has not been read since the manager started.
        Loading,
    }

    /// What the installed operator's OperatorCondition says.
    #[derive(Debug, Clone, Copy)]
    pub enum Gate {
        /// No OperatorCondition, never reported.
        Absent,
        /// Reported before; no OperatorCondition now.
        AbsentAfterReporting,
        /// Upgradeable=True for the current generation.
        Allows,
        /// Upgradeable=False for the current generation.
        Forbids,
        /// No Upgradeable for the current generation; `reported` before or not.
        Pending { reported: bool },
    }

    impl Gate {
        fn reading(self) -> OperatorGate {
            let (reported, reading) = match self {
                Self::Absent => (false, GateReading::Absent),
                Self::AbsentAfterReporting => (true, GateReading::Absent),
                Self::Allows => (
                    true,
                    GateReading::Says {
                        upgradeable: true,
                        message: "ready".to_owned(),
                        overridden: false,
                    },
                ),
                Self::Forbids => (
                    true,
                    GateReading::Says {
                        upgradeable: false,
                        message: "migrating the database to schema 12".to_owned(),
                        overridden: false,
                    },
                ),
                Self::Pending { reported } => (
                    reported,
                    GateReading::Pending {
                        message: "Upgradeable observed for generation 3, current is 4".to_owned(),
                    },
                ),
            };
            OperatorGate {
                reported,
                reading,
                object: None,
            }
        }
    }

    /// The last move, relative to what is installed.
    #[derive(Debug, Clone, Copy)]
    pub enum LastHop {
        None,
        /// Settled, started (and settled) `age` seconds ago.
        Settled {
            age: i64,
        },
        /// Not settled, started `age` seconds ago (by the status times), watched by this
        /// manager since it started.
        Unsettled {
            age: i64,
        },
        /// Not settled, started `age` seconds ago by the clock of the replica that recorded
        /// it, first read by this manager `seen` seconds ago (issue 34 item 7: another
        /// replica's clock, a manager that took over).
        UnsettledSeen {
            age: i64,
            seen: u64,
        },
        /// Settled `age` seconds ago by the clock of the replica that recorded it, first read by
        /// this manager `seen` seconds ago (review M2: the soak under another replica's clock).
        SettledSeen {
            age: i64,
            seen: u64,
        },
        /// A move from what is installed to `to` recorded as intent 30 s ago and not applied
        /// yet (the manager died, or the apply keeps failing).
        Recorded {
            to: &'static str,
        },
        /// Applied, not settled, 20 minutes old, from bundle version `from`.
        UnsettledFrom {
            from: &'static str,
        },
        /// A first install (from nothing) that applied and has not settled, 60 s old.
        UnsettledFirstInstall,
    }

    /// Another PlatformOperator the manager knows.
    #[derive(Debug, Clone, Copy)]
    pub struct Other {
        pub name: &'static str,
        /// `spec.installNamespace`.
        pub spec: Option<&'static str>,
        /// `status.installNamespace`.
        pub status: Option<&'static str>,
        /// `spec.watchNamespace`.
        pub watch: Option<&'static str>,
        /// Seconds after this PO it was created (negative: before, so older).
        pub created_after: i64,
    }

    /// A row's snapshot, in the spec's words.
    #[derive(Debug, Clone)]
    pub struct World {
        pub installed: Option<Installed>,
        pub hop: LastHop,
        pub cluster: Cluster,
        pub catalogs: Catalogs,
        pub gate: Gate,
        pub spec: PlatformOperatorSpec,
        pub duplicate_of: Option<String>,
        /// The other PlatformOperators the manager knows: (name, `spec.installNamespace`,
        /// `status.installNamespace`).
        /// Other PlatformOperators: (name, asked install namespace, recorded install
        /// namespace, watch namespace, created `n` seconds after this PO, negative: before).
        pub others: Vec<Other>,
        /// The owner label of the Namespace this PO watches, as the gather reads it.
        pub watched_owner: Option<&'static str>,
        pub found_bundle_label: Option<String>,
        /// The `unsettled-move` annotation's value.
        pub unsettled_move: Option<String>,
        pub guard: GuardState,
        /// The cluster proxy as listed.
        pub proxy: Option<ClusterProxyEnv>,
        /// `status.appliedConfig`.
        pub recorded_config: Option<AppliedConfig>,
        /// The `config-change-override` annotation's value (`DESIRED`: the digest asked for).
        pub config_override: Option<&'static str>,
        /// The API server's version (`None`: unknown, `minKubeVersion` unchecked).
        pub kube_version: Option<&'static str>,
        /// The minor update the admin requested and the CVO has not started
        /// (`PoSnapshot::requested_update`).
        pub requested_update: Option<&'static str>,
    }

    /// In `config_override`: the digest of the configuration asked for.
    pub const DESIRED: &str = "<desired>";

    /// An admin's `spec.config`: one env var, a node selector and resources.
    pub fn operator_config(level: &str) -> OperatorConfig {
        serde_json::from_value(serde_json::json!({
            "env": [{"name": "LOG_LEVEL", "value": level}],
            "nodeSelector": {"node-role.kubernetes.io/infra": ""},
            "resources": {"limits": {"memory": "256Mi"}},
        }))
        .unwrap()
    }

    /// A cluster proxy.
    pub fn cluster_proxy(http: &str) -> ClusterProxyEnv {
        ClusterProxyEnv {
            http_proxy: http.to_owned(),
            https_proxy: http.to_owned(),
            no_proxy: ".cluster.local".to_owned(),
        }
    }

    /// Nothing installed, OpenShift steady, the catalog ready, no gate.
    pub fn world() -> World {
        World {
            installed: None,
            hop: LastHop::None,
            cluster: Cluster::Steady,
            catalogs: Catalogs::Ready,
            gate: Gate::Absent,
            spec: PlatformOperatorSpec {
                package: PackageSpec {
                    name: PACKAGE.to_owned(),
                    ..PackageSpec::default()
                },
                steady_state_version_range: None,
                install_namespace: None,
                upgrade_gate: UpgradeGate::Auto,
                progress_deadline: "10m".to_owned(),
                soak: None,
                content_exceptions: Vec::new(),
                omit_objects: Vec::new(),
                consent: Default::default(),
                watch_namespace: None,
                upgrade_approval: UpgradeApproval::Automatic,
                pre_update_hops: Default::default(),
                approved_bundle: None,
                paused: false,
                config: None,
                adopt_from: None,
            },
            duplicate_of: None,
            others: Vec::new(),
            watched_owner: None,
            found_bundle_label: None,
            requested_update: None,
            unsettled_move: None,
            guard: GuardState::Intact,
            proxy: None,
            recorded_config: None,
            config_override: None,
            kube_version: None,
        }
    }

    impl World {
        /// The catalog's bundle `version` runs, its settled move 20 minutes old, its
        /// `maxOpenShiftVersion` recorded from the catalog.
        pub fn installed(mut self, version: &str) -> Self {
            let name = bundle_name(version);
            let max = demo().packages[PACKAGE].bundles[&name]
                .properties
                .max_openshift_version
                .as_ref()
                .map(ToString::to_string);
            self.installed = Some(Installed::from_status(
                &InstalledBundle {
                    name,
                    version: version.to_owned(),
                    image: Some(format!("quay.example/demo-bundle:v{version}")),
                    objects_digest: None,
                },
                max.as_deref(),
            ));
            self.hop = LastHop::Settled { age: 1200 };
            self
        }

        /// A bundle that is not (or no longer) in the catalog, as its status records it.
        pub fn installed_as(mut self, name: &str, version: &str, max: Option<&str>) -> Self {
            self.installed = Some(Installed::from_status(
                &InstalledBundle {
                    name: name.to_owned(),
                    version: version.to_owned(),
                    image: None,
                    objects_digest: None,
                },
                max,
            ));
            self.hop = LastHop::Settled { age: 1200 };
            self
        }

        /// The status records nothing, but objects labelled for this PO and bundle `version`
        /// are on the cluster (a PO restored without its status).
        pub fn status_lost_with_objects_of(self, version: &str) -> Self {
            self.status_lost_with_label(&bundle_name(version))
        }

        /// As the gather step describes what it found (several bundles: `a and b`).
        pub fn status_lost_with_label(mut self, label: &str) -> Self {
            self.installed = None;
            self.hop = LastHop::None;
            self.found_bundle_label = Some(label.to_owned());
            self
        }

        /// The admin's `platform.openshift.io/unsettled-move` annotation.
        pub fn unsettled_move(mut self, value: &str) -> Self {
            self.unsettled_move = Some(value.to_owned());
            self
        }

        pub fn hop(mut self, hop: LastHop) -> Self {
            self.hop = hop;
            self
        }

        pub fn cluster(mut self, cluster: Cluster) -> Self {
            self.cluster = cluster;
            self
        }

        pub fn catalogs(mut self, catalogs: Catalogs) -> Self {
            self.catalogs = catalogs;
            self
        }

        pub fn gate(mut self, gate: Gate) -> Self {
            self.gate = gate;
            self
        }

        pub fn upgrade_gate(mut self, gate: UpgradeGate) -> Self {
            self.spec.upgrade_gate = gate;
            self
        }

        pub fn version_range(mut self, range: &str) -> Self {
            self.spec.package.version_range = Some(range.to_owned());
            self
        }

        pub fn steady_state_range(mut self, range: &str) -> Self {
            self.spec.steady_state_version_range = Some(range.to_owned());
            self
        }

        pub fn guard(mut self, guard: GuardState) -> Self {
            self.guard = guard;
            self
        }

        pub fn channel(mut self, channel: &str) -> Self {
            self.spec.package.channel = Some(channel.to_owned());
            self
        }

        pub fn soak(mut self, soak: &str) -> Self {
            self.spec.soak = Some(soak.to_owned());
            self
        }

        pub fn progress_deadline(mut self, deadline: &str) -> Self {
            self.spec.progress_deadline = deadline.to_owned();
            self
        }

        /// `spec.upgradeApproval: Manual`.
        pub fn manual(mut self) -> Self {
            self.spec.upgrade_approval = UpgradeApproval::Manual;
            self
        }

        /// `spec.approvedBundle: <bundle of version>`.
        pub fn approved(mut self, version: &str) -> Self {
            self.spec.approved_bundle = Some(bundle_name(version));
            self
        }

        /// The admin requested a minor update to `version` that the CVO has not started.
        pub fn requested(mut self, version: &'static str) -> Self {
            self.requested_update = Some(version);
            self
        }

        /// `spec.preUpdateHops: Take`.
        pub fn take_pre_update_hops(mut self) -> Self {
            self.spec.pre_update_hops = PreUpdateHops::Take;
            self
        }

        /// `spec.paused: true`.
        pub fn paused(mut self) -> Self {
            self.spec.paused = true;
            self
        }

        /// `spec.config` (what runs is not changed: see [`World::config_applied`]).
        pub fn config(mut self, config: OperatorConfig) -> Self {
            self.spec.config = Some(config);
            self
        }

        /// The cluster proxy as listed.
        pub fn proxy(mut self, proxy: ClusterProxyEnv) -> Self {
            self.proxy = Some(proxy);
            self
        }

        /// What runs was applied with `config` and `proxy` (`status.appliedConfig`).
        pub fn config_applied(
            mut self,
            config: Option<OperatorConfig>,
            proxy: Option<ClusterProxyEnv>,
        ) -> Self {
            self.recorded_config = Some(AppliedConfig::of(config.as_ref(), proxy.as_ref()));
            self
        }

        /// The API server's version.
        pub fn kube(mut self, version: &'static str) -> Self {
            self.kube_version = Some(version);
            self
        }

        /// The admin's `config-change-override` annotation.
        pub fn config_override(mut self, value: &'static str) -> Self {
            self.config_override = Some(value);
            self
        }

        /// The configuration asked for.
        pub fn desired_config(&self) -> AppliedConfig {
            AppliedConfig::of(self.spec.config.as_ref(), self.proxy.as_ref())
        }

        pub fn duplicate_of(mut self, winner: &str) -> Self {
            self.duplicate_of = Some(winner.to_owned());
            self
        }

        /// `spec.watchNamespace`.
        pub fn watching(mut self, namespace: &str) -> Self {
            self.spec.watch_namespace = Some(namespace.to_owned());
            self
        }

        /// Another, older PlatformOperator, installing into `spec` (asked) or `status`
        /// (recorded).
        pub fn other(
            self,
            name: &'static str,
            spec: Option<&'static str>,
            status: Option<&'static str>,
        ) -> Self {
            self.other_po(Other {
                name,
                spec,
                status,
                watch: None,
                created_after: -60,
            })
        }

        /// Another PlatformOperator, as described.
        pub fn other_po(mut self, other: Other) -> Self {
            self.others.push(other);
            self
        }

        /// This PO asks to install into `namespace` (`spec.installNamespace`).
        pub fn install_namespace(mut self, namespace: &str) -> Self {
            self.spec.install_namespace = Some(namespace.to_owned());
            self
        }

        /// The Namespace this PO watches carries `owner`'s owner label.
        pub fn watched_owned_by(mut self, owner: &'static str) -> Self {
            self.watched_owner = Some(owner);
            self
        }

        /// What the manager's gather step finds: this PO's namespaces against the others', by
        /// the pure function it calls.
        pub fn namespace_clash(&self) -> Option<pom_policy::namespace_clash::NamespaceClash> {
            let po =
                |name: &str, spec: PlatformOperatorSpec, status: Option<&str>, created: i64| {
                    let mut po = pom_api::PlatformOperator::new(name, spec);
                    po.metadata.creation_timestamp =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            Timestamp::from_second(now().as_second() - 3600 + created).unwrap(),
                        ));
                    po.status =
                        status.map(|ns| pom_api::platform_operator::PlatformOperatorStatus {
                            install_namespace: Some(ns.to_owned()),
                            ..Default::default()
                        });
                    po
                };
            let mut this = po("demo", self.spec.clone(), None, 0);
            if let Some(installed) = &self.installed {
                this.status.get_or_insert_default().installed_bundle =
                    Some(installed.bundle.clone());
            }
            let others: Vec<_> = self
                .others
                .iter()
                .map(|other| {
                    let spec = PlatformOperatorSpec {
                        install_namespace: other.spec.map(str::to_owned),
                        watch_namespace: other.watch.map(str::to_owned),
                        ..self.spec.clone()
                    };
                    po(other.name, spec, other.status, other.created_after)
                })
                .chain([this.clone()])
                .collect();
            pom_policy::namespace_clash::namespace_clash(&this, &others, self.watched_owner)
        }

        pub fn request(&self) -> Result<PoRequest, RequestError> {
            PoRequest::from_spec("demo", &self.spec)
        }

        pub fn snapshot(&self) -> PoSnapshot<'static> {
            let ready = || {
                vec![CatalogContent {
                    name: CATALOG.to_owned(),
                    priority: 0,
                    content: demo(),
                }]
            };
            let catalogs = match self.catalogs {
                Catalogs::Ready => CatalogView::Ready {
                    catalogs: ready(),
                    unavailable: vec![],
                },
                Catalogs::ReadyPartly => CatalogView::Ready {
                    catalogs: ready(),
                    unavailable: vec!["Catalog community: registry unreachable".to_owned()],
                },
                Catalogs::Unavailable => CatalogView::Unavailable(
                    "Catalog redhat: image quay.example/redhat-index:v4.16 not found".to_owned(),
                ),
                Catalogs::Loading => CatalogView::Loading {
                    catalog: CATALOG.to_owned(),
                },
            };
            let hop = |age: i64, settled: bool, seen: u64| {
                let started_at = Timestamp::from_second(now().as_second() - age).unwrap();
                self.installed.as_ref().map(|i| Hop {
                    from: Some(bundle_name("0.9.0")),
                    to: i.bundle.name.clone(),
                    started_at,
                    settled,
                    settled_at: settled.then_some(started_at),
                    started_seen_for: std::time::Duration::from_secs(seen),
                    settled_seen_for: std::time::Duration::from_secs(if settled {
                        seen
                    } else {
                        0
                    }),
                    failed_attempts: 0,
                    applied_unsettled: false,
                    replaced: None,
                })
            };
            let watched = |age: i64| u64::try_from(age).unwrap_or(0);
            PoSnapshot {
                name: "demo".to_owned(),
                request: self.request(),
                duplicate_of: self.duplicate_of.clone(),
                namespace_clash: self.namespace_clash(),
                requested_update: self.requested_update.map(v),
                // As the manager's gather step builds it: a lost status recovered from the
                // objects' bundle label when a catalog lists the bundle.
                installed: self.installed.clone().or_else(|| {
                    let label = self.found_bundle_label.as_deref()?;
                    match &catalogs {
                        CatalogView::Ready { catalogs, .. } => {
                            pom_policy::snapshot::recover_installed(catalogs, PACKAGE, label)
                        }
                        _ => None,
                    }
                }),
                hop: match self.hop {
                    LastHop::None => None,
                    LastHop::Settled { age } => hop(age, true, watched(age)),
                    LastHop::Unsettled { age } => hop(age, false, watched(age)),
                    LastHop::UnsettledSeen { age, seen } => hop(age, false, seen),
                    LastHop::SettledSeen { age, seen } => hop(age, true, seen),
                    LastHop::UnsettledFrom { from } => self.installed.as_ref().map(|i| Hop {
                        from: Some(bundle_name(from)),
                        to: i.bundle.name.clone(),
                        started_at: Timestamp::from_second(now().as_second() - 1200).unwrap(),
                        settled: false,
                        settled_at: None,
                        started_seen_for: std::time::Duration::from_secs(1200),
                        settled_seen_for: std::time::Duration::ZERO,
                        failed_attempts: 0,
                        applied_unsettled: false,
                        replaced: None,
                    }),
                    LastHop::UnsettledFirstInstall => self.installed.as_ref().map(|i| Hop {
                        from: None,
                        to: i.bundle.name.clone(),
                        started_at: Timestamp::from_second(now().as_second() - 60).unwrap(),
                        settled: false,
                        settled_at: None,
                        started_seen_for: std::time::Duration::from_secs(60),
                        settled_seen_for: std::time::Duration::ZERO,
                        failed_attempts: 0,
                        applied_unsettled: false,
                        replaced: None,
                    }),
                    LastHop::Recorded { to } => self.installed.as_ref().map(|i| Hop {
                        from: Some(i.bundle.name.clone()),
                        to: bundle_name(to),
                        started_at: Timestamp::from_second(now().as_second() - 30).unwrap(),
                        settled: false,
                        settled_at: None,
                        started_seen_for: std::time::Duration::from_secs(30),
                        settled_seen_for: std::time::Duration::ZERO,
                        failed_attempts: 0,
                        applied_unsettled: false,
                        replaced: None,
                    }),
                },
                cluster: self.cluster.view(),
                kube_version: self.kube_version.map(v),
                catalogs,
                gate: self.gate.reading(),
                now: now(),
                found_bundle_label: self.found_bundle_label.clone(),
                unsettled_move: self
                    .unsettled_move
                    .clone()
                    .map(|a| UnsettledMoveAction::parse(&a)),
                guard: self.guard.clone(),
                paused: self.spec.paused,
                config: ConfigView {
                    desired: self.desired_config(),
                    recorded: self.recorded_config.clone(),
                    override_digest: self.config_override.map(|value| {
                        if value == DESIRED {
                            self.desired_config().digest
                        } else {
                            value.to_owned()
                        }
                    }),
                    unapplied: None,
                },
            }
        }
    }

    /// A request spec that cannot be used is still a request the table can carry.
    pub fn deadline_of(world: &World) -> Option<Duration> {
        world.request().ok().map(|r| r.progress_deadline)
    }
}

use fixture::{
    Catalogs, Cluster, DESIRED, Gate, LastHop, Other, World, bundle_name, cluster_proxy,
    operator_config, world,
};
use pom_api::conditions::{ConditionStatus, Reason};
use pom_api::platform_operator::{PinReason, UpgradeGate};
use pom_policy::snapshot::GuardState;
use pom_policy::{Action, HoldReason, PoDecision, decide};

/// What the action should be. `Move` names the target's version and the pin stated once the
/// move is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Act {
    Nothing,
    WaitForCatalog(&'static str),
    Keep,
    Move {
        to: String,
        pin_after: (PinReason, String),
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    MoveNotSettled,
    OperatorNotUpgradeable,
    OperatorConditionPending,
    ClusterVersionUnknown,
    AwaitingApproval,
    Paused,
    Soaking,
    PreUpdateOffered,
}

/// Everything a row pins down.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    action: Act,
    pin: Option<(PinReason, String)>,
    held: Option<(String, Why)>,
    verdict: (ConditionStatus, Reason),
    problem: Option<(Reason, bool)>,
    deadline_exceeded: bool,
    /// `spec.paused` withheld every write.
    paused: bool,
    /// The namespace whose recorded objects the PO withdraws (a refused watcher's).
    withdraws: Option<String>,
}

impl Outcome {
    fn of(decision: &PoDecision) -> Self {
        Self {
            action: match &decision.action {
                Action::Nothing => Act::Nothing,
                Action::WaitForCatalog { catalog } => {
                    Act::WaitForCatalog(if catalog == fixture::CATALOG {
                        fixture::CATALOG
                    } else {
                        "<another catalog>"
                    })
                }
                Action::Keep => Act::Keep,
                Action::Move(target) => {
                    assert_eq!(
                        target.name,
                        bundle_name(&target.version.to_string()),
                        "a move's name and version must agree"
                    );
                    Act::Move {
                        to: target.version.to_string(),
                        pin_after: (target.pin_after.reason, target.pin_after.range.clone()),
                    }
                }
            },
            pin: decision.pin.as_ref().map(|p| (p.reason, p.range.clone())),
            held: decision
                .held
                .as_ref()
                .map(|h| (h.to.version.clone(), why_of(&h.why))),
            verdict: (decision.verdict.status, decision.verdict.reason),
            problem: decision.problem.as_ref().map(|p| (p.reason, p.degrades)),
            deadline_exceeded: decision.deadline_exceeded,
            paused: decision.paused.is_some(),
            withdraws: decision.withdraw_from.clone(),
        }
    }
}

fn why_of(why: &HoldReason) -> Why {
    match why {
        HoldReason::MoveNotSettled => Why::MoveNotSettled,
        HoldReason::OperatorNotUpgradeable { .. } => Why::OperatorNotUpgradeable,
        HoldReason::OperatorConditionPending { .. } => Why::OperatorConditionPending,
        HoldReason::ClusterVersionUnknown { .. } => Why::ClusterVersionUnknown,
        HoldReason::AwaitingApproval { .. } => Why::AwaitingApproval,
        HoldReason::Paused { .. } => Why::Paused,
        HoldReason::Soaking { .. } => Why::Soaking,
        HoldReason::PreUpdateOffered { .. } => Why::PreUpdateOffered,
    }
}

/// Which configuration the action renders the Deployments with (issue 23 item 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renders {
    /// What `spec.config` and the proxy ask for now.
    Desired,
    /// What runs (`status.appliedConfig`).
    Applied,
}

/// The expected outcome, built field by field; anything not set is expected absent (no pin,
/// no hold, no problem, deadline not exceeded, verdict True/AsExpected).
#[derive(Debug, Clone)]
struct Expect {
    outcome: Outcome,
    /// Texts the verdict's message must contain.
    verdict_says: Vec<&'static str>,
    /// Texts the problem's message must contain.
    problem_says: Vec<&'static str>,
    /// Texts the held move's reason must contain.
    held_says: Vec<&'static str>,
    /// Texts the pause message must contain.
    paused_says: Vec<&'static str>,
    /// Texts no message may contain.
    never_says: Vec<&'static str>,
    /// A configuration change: `Some(None)` starts, `Some(Some(why))` is held. Unset: none.
    config_change: Option<Option<Why>>,
    /// The configuration rendered, when a row sets it; unset: what is asked for (rows that
    /// change no configuration, where it is also what runs), or none without a write.
    renders: Option<Renders>,
    /// Texts the configuration change's message must contain.
    config_says: Vec<&'static str>,
}

fn expect(action: Act) -> Expect {
    Expect {
        outcome: Outcome {
            action,
            pin: None,
            held: None,
            verdict: (ConditionStatus::True, Reason::AsExpected),
            problem: None,
            deadline_exceeded: false,
            paused: false,
            withdraws: None,
        },
        verdict_says: vec![],
        problem_says: vec![],
        held_says: vec![],
        paused_says: vec![],
        never_says: vec![],
        config_change: None,
        renders: None,
        config_says: vec![],
    }
}

fn keep() -> Expect {
    expect(Act::Keep)
}

fn nothing() -> Expect {
    expect(Act::Nothing)
}

fn move_to(version: &str, reason: PinReason, range: &str) -> Expect {
    expect(Act::Move {
        to: version.to_owned(),
        pin_after: (reason, range.to_owned()),
    })
}

impl Expect {
    fn pin(mut self, reason: PinReason, range: &str) -> Self {
        self.outcome.pin = Some((reason, range.to_owned()));
        self
    }

    fn held(mut self, version: &str, why: Why) -> Self {
        self.outcome.held = Some((version.to_owned(), why));
        self
    }

    fn verdict(mut self, status: ConditionStatus, reason: Reason) -> Self {
        self.outcome.verdict = (status, reason);
        self
    }

    fn unknown(self) -> Self {
        self.verdict(ConditionStatus::Unknown, Reason::UpgradeabilityUnknown)
    }

    fn problem(mut self, reason: Reason, degrades: bool) -> Self {
        self.outcome.problem = Some((reason, degrades));
        self
    }

    fn deadline_exceeded(mut self) -> Self {
        self.outcome.deadline_exceeded = true;
        self
    }

    fn verdict_says(mut self, text: &'static str) -> Self {
        self.verdict_says.push(text);
        self
    }

    /// A refused watcher withdraws what it recorded in `namespace`.
    fn withdraws(mut self, namespace: &str) -> Self {
        self.outcome.withdraws = Some(namespace.to_owned());
        self
    }

    fn problem_says(mut self, text: &'static str) -> Self {
        self.problem_says.push(text);
        self
    }

    /// Everything is withheld by `spec.paused`: not Upgradeable (reason `Paused`) when
    /// something is installed.
    fn paused(mut self) -> Self {
        self.outcome.paused = true;
        self
    }

    fn held_says(mut self, text: &'static str) -> Self {
        self.held_says.push(text);
        self
    }

    fn paused_says(mut self, text: &'static str) -> Self {
        self.paused_says.push(text);
        self
    }

    /// A configuration change starts (rendered with what is asked for).
    fn reconfigures(mut self) -> Self {
        self.config_change = Some(None);
        self.renders = Some(Renders::Desired);
        self
    }

    /// A configuration change is held for `why` (what runs is rendered as it runs).
    fn config_held(mut self, why: Why) -> Self {
        self.config_change = Some(Some(why));
        self.renders = Some(Renders::Applied);
        self
    }

    fn renders(mut self, renders: Renders) -> Self {
        self.renders = Some(renders);
        self
    }

    fn config_says(mut self, text: &'static str) -> Self {
        self.config_says.push(text);
        self
    }

    fn never_says(mut self, text: &'static str) -> Self {
        self.never_says.push(text);
        self
    }
}

struct Row {
    name: &'static str,
    given: World,
    expect: Expect,
}

fn row(name: &'static str, given: World, expect: Expect) -> Row {
    Row {
        name,
        given,
        expect,
    }
}

use ConditionStatus::False;
use PinReason::{Install, MinorUpgrade, Override, PatchUpgrade, Rollback, Steady};

fn rows() -> Vec<Row> {
    vec![
        // First installs: no pin, the highest bundle allowed; the pin once applied follows the phase.
        row(
            "first install on a steady cluster takes the highest bundle",
            world(),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "first install honours versionRange",
            world().version_range("<2.0.0"),
            move_to("1.2.0", Steady, "=1.2.0").pin(Install, "*"),
        ),
        row(
            "first install during a minor update: pin once applied is the minor window",
            world().cluster(Cluster::Minor),
            move_to("2.0.0", MinorUpgrade, ">=2.0.0 <3.0.0-0").pin(Install, "*"),
        ),
        row(
            "first install during a minor update skips bundles the target cannot run",
            world().cluster(Cluster::Minor).version_range("<1.1.0"),
            nothing()
                .problem(Reason::ResolutionFailed, true)
                .problem_says("demo.v1.0.0"),
        ),
        // Steady.
        row(
            "steady cluster keeps the installed bundle",
            world().installed("1.1.0"),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "steady cluster keeps even though successors exist and the operator allows",
            world().installed("1.1.0").gate(Gate::Allows),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "steadyStateVersionRange moves across a major by hand",
            world().installed("1.2.0").steady_state_range(">=2.0.0"),
            move_to("2.0.0", Override, ">=2.0.0").pin(Override, ">=2.0.0"),
        ),
        // Patch update: within the minor only.
        row(
            "patch update moves within the minor, not to the skipRange successor 1.2.0",
            world().installed("1.1.0").cluster(Cluster::Patch),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "patch update at the top of the minor keeps",
            world().installed("1.1.1").cluster(Cluster::Patch),
            keep().pin(PatchUpgrade, ">=1.1.1 <1.2.0-0"),
        ),
        // Minor update: within the major, never to 2.0.0.
        row(
            "minor update moves within the major (to 1.2.0 by skipRange)",
            world().installed("1.1.0").cluster(Cluster::Minor),
            // Mid-update the verdict answers for the update after it (4.17 → 4.18, the CVO
            // counts from `status.desired.version`): 1.1.0 stops at 4.17, so the aggregated
            // Upgradeable is not a stale True the moment the update completes.
            move_to("1.2.0", MinorUpgrade, ">=1.2.0 <2.0.0-0")
                .pin(MinorUpgrade, ">=1.1.0 <2.0.0-0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .verdict_says("cannot be updated to 4.18"),
        ),
        row(
            "minor update never moves to 2.0.0, a direct successor",
            world().installed("1.2.0").cluster(Cluster::Minor),
            keep().pin(MinorUpgrade, ">=1.2.0 <2.0.0-0"),
        ),
        row(
            "minor update moves an incompatible bundle while the verdict still blocks",
            world().installed("1.0.0").cluster(Cluster::Minor),
            move_to("1.2.0", MinorUpgrade, ">=1.2.0 <2.0.0-0")
                .pin(MinorUpgrade, ">=1.0.0 <2.0.0-0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        // Rollback.
        row(
            "rollback holds the installed version",
            world().installed("1.1.1").cluster(Cluster::Rollback),
            keep().pin(Rollback, "=1.1.1"),
        ),
        // Issue 34 item 4: what runs is judged on the cluster rolled back to by every check
        // of §5 (1.1.1 needs Kubernetes 1.29.6; maxOpenShiftVersion never excludes a lower
        // OpenShift).
        row(
            "rollback keeps the installed bundle while the API server still runs it",
            world()
                .installed("1.1.1")
                .cluster(Cluster::Rollback)
                .kube("1.29.7"),
            keep().pin(Rollback, "=1.1.1"),
        ),
        row(
            "rollback below the installed bundle's minKubeVersion steps down one move to a bundle that runs",
            world()
                .installed("1.1.1")
                .cluster(Cluster::Rollback)
                .kube("1.29.5"),
            move_to("1.1.0", Rollback, "=1.1.0").pin(Rollback, ">=1.0.0 <1.1.1"),
        ),
        row(
            "rollback below minKubeVersion with no lower bundle allowed keeps it and says so",
            world()
                .installed("1.1.1")
                .cluster(Cluster::Rollback)
                .kube("1.29.5")
                .version_range(">=1.1.1"),
            keep()
                .pin(Rollback, "=1.1.1")
                .problem(Reason::ResolutionFailed, false)
                .problem_says("does not run on the cluster being rolled back to")
                .problem_says("minKubeVersion"),
        ),
        // Held moves (§7).
        // Soak (issue 35 item 4): the next hop waits until the last move has been settled
        // for spec.soak, then starts; without a soak it starts at once.
        row(
            "a soaking move holds the next hop",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .soak("10m")
                .hop(LastHop::Settled { age: 599 }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::Soaking)
                .held_says("soaks until")
                .held_says("spec.soak"),
        ),
        row(
            "a soak that ended lets the next hop start",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .soak("10m")
                .hop(LastHop::Settled { age: 600 }),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0").pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "a move settled by a replica 5 min behind (11 min by the status, 6 min watched here) still soaks",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .soak("10m")
                .hop(LastHop::SettledSeen {
                    age: 11 * 60,
                    seen: 6 * 60,
                }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::Soaking),
        ),
        row(
            "a soak taken over just now ends once the status is past it by the skew allowance",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .soak("10m")
                .hop(LastHop::SettledSeen {
                    age: 20 * 60,
                    seen: 0,
                }),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0").pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "an unsettled move is what holds a soaking PO's next hop",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .soak("10m")
                .hop(LastHop::Unsettled { age: 60 }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::MoveNotSettled),
        ),
        row(
            "an unsettled hop holds the next move",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Unsettled { age: 60 }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::MoveNotSettled),
        ),
        // A move recorded as intent (issue 25 item 3): resumed while its target still
        // qualifies, even when the phase moved on (a crash between the intent and the apply
        // must not lose or undo it); abandoned for what runs when the admin or the cluster
        // ruled it out.
        row(
            "a recorded move is resumed",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Recorded { to: "1.1.1" }),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "a recorded move is resumed after the update that chose it completed",
            world()
                .installed("1.1.0")
                .hop(LastHop::Recorded { to: "1.1.1" }),
            move_to("1.1.1", Steady, "=1.1.1").pin(Steady, "=1.1.0"),
        ),
        row(
            "a recorded move the admin's versionRange now excludes is abandoned",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .version_range("<1.1.1")
                .hop(LastHop::Recorded { to: "1.1.1" }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .problem(Reason::MoveAbandoned, false)
                .problem_says("demo.v1.1.1")
                .problem_says("versionRange"),
        ),
        row(
            "a recorded move the admin's versionRange excludes is abandoned after its phase ended too",
            world()
                .installed("1.1.0")
                .version_range("<1.1.1")
                .hop(LastHop::Recorded { to: "1.1.1" }),
            keep()
                .pin(Steady, "=1.1.0")
                .problem(Reason::MoveAbandoned, false)
                .problem_says("versionRange"),
        ),
        row(
            "a recorded move the channel no longer lists is abandoned",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .channel("fast")
                .hop(LastHop::Recorded { to: "1.1.1" }),
            // The channel itself is gone: that is the problem to fix, and it says so; the
            // abandoned move is said too.
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .problem(Reason::ResolutionFailed, false)
                .problem_says("abandoned")
                .problem_says("not in the channel"),
        ),
        // A PO restored without its status (issue 25 item 4): what runs is recovered from the
        // objects' bundle label, never installed over (the channel head would be 2.0.0).
        row(
            "status lost with objects of 1.1.0 on the cluster: 1.1.0 is kept",
            world().status_lost_with_objects_of("1.1.0"),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "status lost during a cluster update: what runs is re-applied first, no move yet",
            world()
                .status_lost_with_objects_of("1.1.0")
                .cluster(Cluster::Patch),
            keep().pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "status lost mid-move, objects of two bundles: nothing is installed over them",
            world().status_lost_with_label("demo.v1.1.0 and demo.v1.1.1"),
            nothing()
                .unknown()
                .problem(Reason::AdoptionRefused, true)
                .problem_says("demo.v1.1.0 and demo.v1.1.1"),
        ),
        row(
            "status lost with objects of a bundle no catalog lists: nothing is installed over them",
            world().status_lost_with_objects_of("9.9.9"),
            nothing()
                .unknown()
                .problem(Reason::AdoptionRefused, true)
                .problem_says("demo.v9.9.9")
                .problem_says("will not install over them"),
        ),
        // The admin's way out of a move that does not settle (issue 25 item 2).
        row(
            "skip: names the unsettled move, the next move starts",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Unsettled { age: 60 })
                .unsettled_move("skip:demo.v1.1.0"),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "skip: naming another move is inert, the hold stays",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Unsettled { age: 60 })
                .unsettled_move("skip:demo.v1.0.0"),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::MoveNotSettled),
        ),
        row(
            "abandon: names the unsettled move, back to what ran before",
            world()
                .installed("1.1.1")
                .hop(LastHop::UnsettledFrom { from: "1.1.0" })
                .unsettled_move("abandon:demo.v1.1.1"),
            // It never settled in 20 minutes: the deadline says so, and the admin acts.
            move_to("1.1.0", Steady, "=1.1.0")
                .pin(Steady, "=1.1.1")
                .deadline_exceeded(),
        ),
        row(
            "abandon: once back, the abandoned bundle is not chosen again while the annotation names it",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .unsettled_move("abandon:demo.v1.1.1"),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .problem(Reason::MoveAbandoned, false)
                .problem_says("not started again"),
        ),
        row(
            "abandon: on a settled move is inert",
            world()
                .installed("1.1.1")
                .unsettled_move("abandon:demo.v1.1.1"),
            keep().pin(Steady, "=1.1.1"),
        ),
        row(
            "abandon: when what ran before is in no catalog, it says so and keeps what runs",
            world()
                .installed("1.1.1")
                .hop(LastHop::Unsettled { age: 60 })
                .unsettled_move("abandon:demo.v1.1.1"),
            keep()
                .pin(Steady, "=1.1.1")
                .problem(Reason::InvalidUnsettledMoveAction, false)
                .problem_says("demo.v0.9.0"),
        ),
        row(
            "an unreadable unsettled-move annotation says what to write",
            world().installed("1.1.0").unsettled_move("please"),
            keep()
                .pin(Steady, "=1.1.0")
                .problem(Reason::InvalidUnsettledMoveAction, false)
                .problem_says("skip:<bundle> or abandon:<bundle>"),
        ),
        row(
            "an unsettled hop with nothing further to do holds nothing",
            world()
                .installed("1.1.0")
                .hop(LastHop::Unsettled { age: 60 }),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "operator Upgradeable=False holds the move and blocks",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::Forbids),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::OperatorNotUpgradeable)
                .verdict(False, Reason::OperatorNotUpgradeable)
                .verdict_says("migrating the database to schema 12"),
        ),
        // Review of session 22 (finding 2): the replacement of an unsettled first install the
        // admin excluded is a move of what runs; the operator's gate judges it as it judges
        // `abandon:`, `skip:` and hops.
        row(
            "an unsettled first install the range excludes is replaced",
            world()
                .installed("1.1.0")
                .hop(LastHop::UnsettledFirstInstall)
                .version_range(">=1.2.0"),
            move_to("2.0.0", Steady, "=2.0.0")
                .pin(Install, "*")
                .problem(Reason::MoveAbandoned, false),
        ),
        row(
            "operator Upgradeable=False holds the replacement of an unsettled first install",
            world()
                .installed("1.1.0")
                .hop(LastHop::UnsettledFirstInstall)
                .version_range(">=1.2.0")
                .gate(Gate::Forbids),
            keep()
                .pin(Install, "*")
                .held("2.0.0", Why::OperatorNotUpgradeable)
                .verdict(False, Reason::OperatorNotUpgradeable)
                .problem(Reason::MoveAbandoned, false),
        ),
        row(
            "operator Upgradeable=False on a steady cluster blocks, nothing to hold",
            world().installed("1.1.0").gate(Gate::Forbids),
            keep()
                .pin(Steady, "=1.1.0")
                .verdict(False, Reason::OperatorNotUpgradeable)
                .verdict_says("migrating the database to schema 12"),
        ),
        row(
            "operator Upgradeable=False blocks on plain Kubernetes too",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Kubernetes)
                .gate(Gate::Forbids),
            keep()
                .pin(Steady, "=1.1.0")
                .verdict(False, Reason::OperatorNotUpgradeable),
        ),
        row(
            "a reporting operator with a pending gate holds the move, verdict Unknown",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::Pending { reported: true }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::OperatorConditionPending)
                .unknown()
                .verdict_says("generation 3"),
        ),
        row(
            "a reporting operator with a pending gate on a steady cluster: Unknown",
            world()
                .installed("1.1.0")
                .gate(Gate::Pending { reported: true }),
            keep().pin(Steady, "=1.1.0").unknown(),
        ),
        row(
            "a reporting operator whose OperatorCondition is gone holds, verdict Unknown",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::AbsentAfterReporting),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::OperatorConditionPending)
                .unknown(),
        ),
        row(
            "upgradeGate OperatorCondition: a pending gate holds even if never reported",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .upgrade_gate(UpgradeGate::OperatorCondition)
                .gate(Gate::Pending { reported: false }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::OperatorConditionPending)
                .unknown(),
        ),
        row(
            "upgradeGate Rollout: a stale OperatorCondition of an operator that reported does not hold",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .upgrade_gate(UpgradeGate::Rollout)
                .gate(Gate::Pending { reported: true }),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "upgradeGate Auto, operator never reported: a pending gate does not hold",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::Pending { reported: false }),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "operator Upgradeable=True lets the move go",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::Allows),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        // The installed bundle left the catalog.
        row(
            "installed bundle absent from the catalog keeps running, not degraded",
            world().installed_as("demo.v1.0.5", "1.0.5", None),
            keep()
                .pin(Steady, "=1.0.5")
                .problem(Reason::ResolutionFailed, false)
                .problem_says("demo.v1.0.5 keeps running"),
        ),
        row(
            "installed bundle absent from the catalog moves on by skipRange in a minor update",
            world()
                .installed_as("demo.v1.0.5", "1.0.5", None)
                .cluster(Cluster::Minor),
            move_to("1.2.0", MinorUpgrade, ">=1.2.0 <2.0.0-0")
                .pin(MinorUpgrade, ">=1.0.5 <2.0.0-0"),
        ),
        // Catalogs.
        row(
            "catalog unavailable with something installed: keep, Unknown, not degraded",
            world().installed("1.1.0").catalogs(Catalogs::Unavailable),
            keep()
                .unknown()
                .problem(Reason::SourceFailed, false)
                .verdict_says("not found")
                .problem_says("not found"),
        ),
        row(
            "catalog unavailable with nothing installed: nothing, SourceFailed degrades",
            world().catalogs(Catalogs::Unavailable),
            nothing()
                .unknown()
                .problem(Reason::SourceFailed, true)
                .problem_says("quay.example/redhat-index:v4.16"),
        ),
        row(
            "catalog not read since the start: wait, judge nothing",
            world().installed("1.1.0").catalogs(Catalogs::Loading),
            expect(Act::WaitForCatalog(fixture::CATALOG)).unknown(),
        ),
        row(
            "catalog not read since the start, nothing installed: wait",
            world().catalogs(Catalogs::Loading),
            expect(Act::WaitForCatalog(fixture::CATALOG)).unknown(),
        ),
        row(
            "another catalog unavailable: the move uses what is served, no verdict",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .catalogs(Catalogs::ReadyPartly),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .unknown()
                .verdict_says("Catalog community"),
        ),
        row(
            "unknown channel with something installed: keep, report, not degraded",
            world().installed("1.1.0").channel("Stable"),
            keep()
                .pin(Steady, "=1.1.0")
                .problem(Reason::ResolutionFailed, false)
                .problem_says("did you mean \"stable\""),
        ),
        row(
            "unknown channel with nothing installed: ResolutionFailed degrades",
            world().channel("Stable"),
            nothing().problem(Reason::ResolutionFailed, true),
        ),
        // The cluster.
        row(
            "OpenShift with an unjudgeable ClusterVersion, installed: keep, Unknown",
            world().installed("1.1.0").cluster(Cluster::Unjudgeable),
            keep()
                .pin(Steady, "=1.1.0")
                .unknown()
                .verdict_says("status.desired.version is empty"),
        ),
        row(
            "OpenShift with an unjudgeable ClusterVersion and an operator that allows: no move",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Unjudgeable)
                .gate(Gate::Allows),
            keep().pin(Steady, "=1.1.0").unknown(),
        ),
        // Issue 22 item 2: without the admission guard nothing is written, not even a re-apply.
        row(
            "admission guard missing, installed: nothing, Unknown, AdmissionGuardMissing degrades",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Minor)
                .gate(Gate::Allows)
                .guard(GuardState::Missing {
                    object: "ValidatingAdmissionPolicyBinding platform-operators-manager-guard"
                        .to_owned(),
                }),
            nothing()
                .unknown()
                .problem(Reason::AdmissionGuardMissing, true)
                .verdict_says("ValidatingAdmissionPolicyBinding platform-operators-manager-guard does not exist"),
        ),
        row(
            "admission guard changed, nothing installed: no install",
            world().guard(GuardState::Changed {
                object: "ValidatingAdmissionPolicy platform-operators-manager-guard".to_owned(),
                detail: "spec.validations differs".to_owned(),
            }),
            nothing()
                .unknown()
                .problem(Reason::AdmissionGuardMissing, true),
        ),
        // Issue 25 item 10: without a cluster version no maxOpenShiftVersion can be checked:
        // a bundle that declares one is held, one that declares none has nothing to check.
        row(
            "OpenShift with an unjudgeable ClusterVersion, nothing installed: a bundle without maxOpenShiftVersion installs",
            world().cluster(Cluster::Unjudgeable),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "OpenShift with an unjudgeable ClusterVersion, nothing installed: a bundle with maxOpenShiftVersion is held",
            world()
                .version_range("<1.2.0")
                .cluster(Cluster::Unjudgeable),
            nothing()
                .pin(Install, "*")
                .held("1.1.1", Why::ClusterVersionUnknown),
        ),
        row(
            "OpenShift with an unjudgeable ClusterVersion: the override's move to a bundle with maxOpenShiftVersion is held",
            world()
                .installed("1.0.0")
                .steady_state_range(">=1.1.0 <1.2.0")
                .cluster(Cluster::Unjudgeable),
            keep()
                .pin(Override, ">=1.1.0 <1.2.0")
                .held("1.1.0", Why::ClusterVersionUnknown)
                .unknown(),
        ),
        row(
            "plain Kubernetes: no OpenShift judgement, verdict True",
            world()
                .installed("1.0.0")
                .cluster(Cluster::Kubernetes)
                .catalogs(Catalogs::ReadyPartly),
            keep().pin(Steady, "=1.0.0"),
        ),
        row(
            "incompatible maxOpenShiftVersion names the bundle that lifts the block",
            world().installed("1.0.0"),
            keep()
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .verdict_says("4.17")
                .verdict_says("demo.v1.1.0")
                .verdict_says("spec.steadyStateVersionRange to \"=1.1.0\""),
        ),
        // Hops before the cluster moves (issue 35 item 1): 1.0.0 (max 4.16) blocks a
        // requested 4.17; 1.2.0 (skipRange) is one hop away and runs on both.
        row(
            "a requested update the bundle cannot run on: the pre-update hop is offered",
            world().installed("1.0.0").requested("4.17.0"),
            keep()
                .pin(Steady, "=1.0.0")
                .held("1.2.0", Why::PreUpdateOffered)
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .verdict_says("POM offers the hops demo.v1.2.0 (spec.preUpdateHops: Offer)")
                .held_says("pomctl approve demo --bundle demo.v1.2.0")
                // One way forward, not the verdict's own steadyStateVersionRange advice too.
                .never_says("steadyStateVersionRange"),
        ),
        row(
            "a pre-update hop the admin abandoned is not started again while the annotation names it",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops()
                .unsettled_move("abandon:demo.v1.2.0"),
            keep()
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .problem(Reason::MoveAbandoned, false),
        ),
        row(
            "skip: names the unsettled move, the pre-update hop starts",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops()
                .hop(LastHop::Unsettled { age: 60 })
                .unsettled_move("skip:demo.v1.0.0"),
            move_to("1.2.0", Steady, "=1.2.0")
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        row(
            "an offered pre-update hop the admin approved starts",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .approved("1.2.0"),
            move_to("1.2.0", Steady, "=1.2.0")
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        row(
            "under preUpdateHops: Take the pre-update hop starts",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops(),
            move_to("1.2.0", Steady, "=1.2.0")
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .verdict_says("POM takes the hops demo.v1.2.0"),
        ),
        row(
            "no pre-update hop starts against the operator's own Upgradeable=False",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops()
                .gate(Gate::Forbids),
            keep()
                .pin(Steady, "=1.0.0")
                .held("1.2.0", Why::OperatorNotUpgradeable)
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        row(
            "a pre-update hop waits for the move in flight to settle",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops()
                .hop(LastHop::Unsettled { age: 60 }),
            keep()
                .pin(Steady, "=1.0.0")
                .held("1.2.0", Why::MoveNotSettled)
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        row(
            "Take under upgradeApproval: Manual still waits for the approval",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops()
                .manual(),
            keep()
                .pin(Steady, "=1.0.0")
                .held("1.2.0", Why::AwaitingApproval)
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        row(
            "no pre-update hop when what runs runs on the requested version",
            world()
                .installed("1.1.0")
                .requested("4.17.0")
                .take_pre_update_hops(),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "no pre-update path: the nearest bundle is named",
            world()
                .installed("1.0.0")
                .requested("4.17.0")
                .take_pre_update_hops()
                .version_range("<1.1.0"),
            keep()
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .verdict_says("before the requested update to 4.17.0: no catalog path"),
        ),
        row(
            "incompatible recorded maxOpenShiftVersion of a bundle gone from the catalog",
            world().installed_as("demo.v1.0.5", "1.0.5", Some("4.16")),
            keep()
                .pin(Steady, "=1.0.5")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .problem(Reason::ResolutionFailed, false)
                .verdict_says("demo.v1.2.0"),
        ),
        row(
            "incompatible bundle whose operator also says False: the incompatibility is reported",
            world().installed("1.0.0").gate(Gate::Forbids),
            keep()
                .pin(Steady, "=1.0.0")
                .verdict(False, Reason::IncompatibleOperatorsInstalled)
                .verdict_says("demo.v1.1.0"),
        ),
        row(
            "invalid recorded maxOpenShiftVersion: Unknown (fail closed)",
            world().installed_as("demo.v1.1.0", "1.1.0", Some("4.17.1")),
            keep()
                .pin(Steady, "=1.1.0")
                .unknown()
                .verdict_says("4.17.1"),
        ),
        // Unusable input.
        row(
            "unparsable installed version: ResolutionFailed degrades, Unknown, never 0.0.0",
            world().installed_as("demo.v1.1.0", "one.one", Some("4.17")),
            keep()
                .unknown()
                .problem(Reason::ResolutionFailed, true)
                .verdict_says("\"one.one\"")
                .problem_says("\"one.one\"")
                .never_says("0.0.0"),
        ),
        row(
            "bad progressDeadline: request error degrades, what runs is kept",
            world().installed("1.1.0").progress_deadline("ten minutes"),
            keep()
                .unknown()
                .problem(Reason::ResolutionFailed, true)
                .problem_says("spec.progressDeadline \"ten minutes\""),
        ),
        row(
            "bad progressDeadline with nothing installed: nothing, degrades",
            world().progress_deadline("ten minutes"),
            nothing().unknown().problem(Reason::ResolutionFailed, true),
        ),
        row(
            "bad versionRange (past an older schema): request error names the field",
            world().installed("1.1.0").version_range(">=1.0 <<2"),
            keep()
                .unknown()
                .problem(Reason::ResolutionFailed, true)
                .problem_says("spec.package.versionRange"),
        ),
        row(
            "duplicate package: nothing, DuplicatePackage degrades",
            world().duplicate_of("demo-older"),
            nothing()
                .problem(Reason::DuplicatePackage, true)
                .problem_says("demo-older"),
        ),
        // Issue 33 item 5: a watchNamespace is never another PO's install namespace, recorded
        // in its status or asked in its spec; its own install namespace (OwnNamespace) and a
        // namespace no PO installs into are watched.
        row(
            "watchNamespace is another PO's recorded install namespace: nothing, named",
            world().watching("team-b").other("b", None, Some("team-b")),
            nothing()
                .problem(Reason::InstallModeUnsupported, true)
                .problem_says("spec.watchNamespace \"team-b\"")
                .problem_says("PlatformOperator b")
                .withdraws("team-b"),
        ),
        row(
            "watchNamespace is another PO's asked install namespace: nothing, what runs unjudged",
            world()
                .installed("1.1.0")
                .watching("team-b")
                .other("b", Some("team-b"), None),
            nothing()
                .unknown()
                .problem(Reason::InstallModeUnsupported, true)
                .problem_says("PlatformOperator b")
                .withdraws("team-b"),
        ),
        row(
            "watchNamespace is a younger PO's recorded install namespace: the older watcher wins, installs",
            world().watching("team-b").other_po(Other {
                name: "b",
                spec: None,
                status: Some("team-b"),
                watch: None,
                created_after: 60,
            }),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "watchNamespace labelled as a younger PO's Namespace: refused all the same (the label decides), withdrawn",
            world()
                .installed("1.1.0")
                .watching("team-b")
                .watched_owned_by("b")
                .other_po(Other {
                    name: "b",
                    spec: None,
                    status: Some("team-b"),
                    watch: None,
                    created_after: 60,
                }),
            nothing()
                .unknown()
                .problem(Reason::InstallModeUnsupported, true)
                .problem_says("carries the owner label of PlatformOperator b")
                .withdraws("team-b"),
        ),
        row(
            "watchNamespace labelled as another PO's while the owner-label guard is down: refused, but nothing withdrawn on the label's word",
            world()
                .installed("1.1.0")
                .watching("team-b")
                .watched_owned_by("b")
                .guard(GuardState::OwnerLabelGuardDown {
                    object: "ValidatingAdmissionPolicy platform-operators-owner-label-guard".into(),
                    detail: "does not exist".into(),
                })
                .other_po(Other {
                    name: "b",
                    spec: None,
                    status: Some("team-b"),
                    watch: None,
                    created_after: 60,
                }),
            nothing()
                .unknown()
                .problem(Reason::InstallModeUnsupported, true)
                .problem_says("carries the owner label of PlatformOperator b"),
        ),
        row(
            "watchNamespace of an older PO's defaulted install namespace (installed before POM recorded it: its name)",
            world().watching("b").other_po(Other {
                name: "b",
                spec: None,
                status: None,
                watch: None,
                created_after: -60,
            }),
            // Not installed (status None): its default is not decided, judged when chosen.
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "installing into an older PO's watchNamespace: nothing written, named",
            world().install_namespace("team-a").other_po(Other {
                name: "a",
                spec: Some("a"),
                status: Some("a"),
                watch: Some("team-a"),
                created_after: -60,
            }),
            nothing()
                .problem(Reason::InstallModeUnsupported, true)
                .problem_says("install namespace \"team-a\" is the spec.watchNamespace of PlatformOperator a")
                .problem_says("set spec.installNamespace"),
        ),
        row(
            "installing into a younger PO's watchNamespace: the older installer wins, installs",
            world().install_namespace("team-a").other_po(Other {
                name: "a",
                spec: Some("a"),
                status: Some("a"),
                watch: Some("team-a"),
                created_after: 60,
            }),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "installed into what an older PO watches: the namespace is this PO's by its label, kept",
            world()
                .installed("1.1.0")
                .install_namespace("team-a")
                .other_po(Other {
                    name: "a",
                    spec: Some("a"),
                    status: Some("a"),
                    watch: Some("team-a"),
                    created_after: -60,
                }),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "watchNamespace no other PO installs into: installs",
            world()
                .watching("team-a")
                .other("b", Some("team-b"), Some("team-b")),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        // Issue 23 item 5: `spec.upgradeApproval: Manual` holds every move (the first install
        // included, as OLM v0's Manual InstallPlan) until `spec.approvedBundle` names exactly
        // its bundle; the approval is asked once nothing else holds the move.
        row(
            "Manual: the first install waits for the approval of the bundle chosen",
            world().manual(),
            nothing()
                .pin(Install, "*")
                .held("2.0.0", Why::AwaitingApproval)
                .held_says("pomctl approve demo --bundle demo.v2.0.0")
                .held_says(r#"kubectl patch platformoperator demo --type merge -p '{"spec":{"approvedBundle":"demo.v2.0.0"}}'"#),
        ),
        row(
            "Manual: the approved first install starts",
            world().manual().approved("2.0.0"),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "Manual: a patch hop waits for approval, what runs is kept and repaired",
            world().installed("1.1.0").cluster(Cluster::Patch).manual(),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::AwaitingApproval)
                .held_says("demo.v1.1.1 is not approved"),
        ),
        row(
            "Manual: an approval of another bundle does not release the hop, and is named",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .manual()
                .approved("1.2.0"),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::AwaitingApproval)
                .held_says("spec.approvedBundle names demo.v1.2.0"),
        ),
        row(
            "Manual: the approved hop moves",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .manual()
                .approved("1.1.1"),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "Manual: the approval of the last hop does not carry to the next",
            world()
                .installed("1.1.1")
                .cluster(Cluster::Minor)
                .manual()
                .approved("1.1.1"),
            keep()
                .pin(MinorUpgrade, ">=1.1.1 <2.0.0-0")
                .held("1.2.0", Why::AwaitingApproval)
                .verdict(False, Reason::IncompatibleOperatorsInstalled),
        ),
        row(
            "Manual: an unsettled move holds first, approved or not",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Unsettled { age: 60 })
                .manual()
                .approved("1.1.1"),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::MoveNotSettled),
        ),
        row(
            "Manual: the operator's Upgradeable=False holds first",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::Forbids)
                .manual(),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::OperatorNotUpgradeable)
                .verdict(False, Reason::OperatorNotUpgradeable),
        ),
        row(
            "Manual: a move recorded as intent (approved when it started) is resumed",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Recorded { to: "1.1.1" })
                .manual(),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        ),
        row(
            "Manual: abandon names the bundle to leave, which is the approval to move back",
            world()
                .installed("1.1.1")
                .hop(LastHop::UnsettledFrom { from: "1.1.0" })
                .unsettled_move("abandon:demo.v1.1.1")
                .manual(),
            move_to("1.1.0", Steady, "=1.1.0")
                .pin(Steady, "=1.1.1")
                .deadline_exceeded(),
        ),
        row(
            "Manual: a steady cluster at its pin waits for nothing",
            world().installed("1.1.0").manual(),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "Manual: the override's move waits for approval too",
            world()
                .installed("1.2.0")
                .steady_state_range(">=2.0.0")
                .manual(),
            keep()
                .pin(Override, ">=2.0.0")
                .held("2.0.0", Why::AwaitingApproval),
        ),
        // Issue 23 item 5: `spec.paused` withholds every write; what runs is not vouched for.
        row(
            "paused, nothing installed: the install is held, nothing to vouch for",
            world().paused(),
            nothing()
                .pin(Install, "*")
                .held("2.0.0", Why::Paused)
                .paused()
                .paused_says("the install of demo.v2.0.0 waits")
                .paused_says(r#"kubectl patch platformoperator demo --type merge -p '{"spec":{"paused":false}}'"#),
        ),
        row(
            "paused at its pin: no drift repair, not Upgradeable",
            world().installed("1.1.0").paused(),
            nothing()
                .pin(Steady, "=1.1.0")
                .paused()
                .verdict(False, Reason::Paused)
                .verdict_says("demo.v1.1.0")
                .verdict_says("before updating the cluster"),
        ),
        row(
            "paused during a patch update: the hop is held",
            world().installed("1.1.0").cluster(Cluster::Patch).paused(),
            nothing()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::Paused)
                .paused()
                .verdict(False, Reason::Paused)
                .verdict_says("the move to demo.v1.1.1 waits")
                .paused_says("the move to demo.v1.1.1 waits"),
        ),
        row(
            "paused and Manual: the approval hold stays, nothing is written",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .manual()
                .paused(),
            nothing()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::AwaitingApproval)
                .paused()
                .verdict(False, Reason::Paused),
        ),
        row(
            "paused and approved: the hop is still held",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .manual()
                .approved("1.1.1")
                .paused(),
            nothing()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::Paused)
                .paused()
                .verdict(False, Reason::Paused),
        ),
        row(
            "paused with a move recorded as intent: not resumed",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Recorded { to: "1.1.1" })
                .paused(),
            nothing()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::Paused)
                .paused()
                .verdict(False, Reason::Paused),
        ),
        row(
            "paused: an unsettled move past its deadline is not Degraded (POM moves nothing)",
            world()
                .installed("1.1.0")
                .hop(LastHop::Unsettled { age: 11 * 60 })
                .paused(),
            nothing()
                .pin(Steady, "=1.1.0")
                .paused()
                .verdict(False, Reason::Paused),
        ),
        row(
            "paused: the admin's skip of an unsettled move is not carried out",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .hop(LastHop::Unsettled { age: 60 })
                .unsettled_move("skip:demo.v1.1.0")
                .paused(),
            nothing()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::Paused)
                .paused()
                .verdict(False, Reason::Paused),
        ),
        row(
            "paused with a spec that cannot be used: nothing is re-applied",
            world()
                .installed("1.1.0")
                .progress_deadline("ten minutes")
                .paused(),
            nothing()
                .paused()
                .verdict(False, Reason::Paused)
                .problem(Reason::ResolutionFailed, true)
                .verdict_says("also: cannot judge"),
        ),
        row(
            "paused with an incompatible bundle: Paused, and the incompatibility is said",
            world().installed("1.0.0").paused(),
            nothing()
                .pin(Steady, "=1.0.0")
                .paused()
                .verdict(False, Reason::Paused)
                .verdict_says("spec.steadyStateVersionRange to \"=1.1.0\""),
        ),
        row(
            "paused, catalog not read since the start: wait, judge nothing",
            world().installed("1.1.0").catalogs(Catalogs::Loading).paused(),
            expect(Act::WaitForCatalog(fixture::CATALOG))
                .paused()
                .verdict(False, Reason::Paused),
        ),
        row(
            "paused without the admission guard: the guard's fault is still the problem",
            world()
                .installed("1.1.0")
                .paused()
                .guard(GuardState::Missing {
                    object: "ValidatingAdmissionPolicy platform-operators-manager-guard"
                        .to_owned(),
                }),
            nothing()
                .paused()
                .verdict(False, Reason::Paused)
                .problem(Reason::AdmissionGuardMissing, true),
        ),
        // Progress deadline.
        row(
            "unsettled hop older than progressDeadline: deadline exceeded",
            world()
                .installed("1.1.0")
                .hop(LastHop::Unsettled { age: 11 * 60 }),
            keep().pin(Steady, "=1.1.0").deadline_exceeded(),
        ),
        row(
            "a hop recorded by a replica 5 min behind (11 min by the status, 6 min watched here): not exceeded",
            world()
                .installed("1.1.0")
                .hop(LastHop::UnsettledSeen {
                    age: 11 * 60,
                    seen: 6 * 60,
                }),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "a hop just taken over: exceeded once the status is past the deadline by the skew allowance",
            world()
                .installed("1.1.0")
                .hop(LastHop::UnsettledSeen {
                    age: 20 * 60 + 1,
                    seen: 0,
                }),
            keep().pin(Steady, "=1.1.0").deadline_exceeded(),
        ),
        row(
            "a hop started in the future (a replica ahead), watched here past the deadline: exceeded",
            world()
                .installed("1.1.0")
                .hop(LastHop::UnsettledSeen {
                    age: -5 * 60,
                    seen: 10 * 60 + 1,
                }),
            keep().pin(Steady, "=1.1.0").deadline_exceeded(),
        ),
        row(
            "unsettled hop younger than progressDeadline: not exceeded",
            world()
                .installed("1.1.0")
                .hop(LastHop::Unsettled { age: 9 * 60 }),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "unsettled hop older than a custom progressDeadline of 90s",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .progress_deadline("1m30s")
                .hop(LastHop::Unsettled { age: 91 }),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::MoveNotSettled)
                .deadline_exceeded(),
        ),
        row(
            "settled hop older than progressDeadline: not exceeded",
            world()
                .installed("1.1.0")
                .hop(LastHop::Settled { age: 3600 }),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "bad progressDeadline never reads as exceeded",
            world()
                .installed("1.1.0")
                .progress_deadline("soon")
                .hop(LastHop::Unsettled { age: 3600 }),
            keep().unknown().problem(Reason::ResolutionFailed, true),
        ),
        // Issue 23 items 3, 4: a change of the configuration (spec.config or the cluster
        // proxy) restarts the operator, so it is a move of its own kind.
        row(
            "config: a first install carries the configuration",
            world().config(operator_config("debug")),
            move_to("2.0.0", Steady, "=2.0.0").pin(Install, "*"),
        ),
        row(
            "config: what runs has the configuration asked for: no change",
            world()
                .installed("1.1.0")
                .config(operator_config("debug"))
                .config_applied(Some(operator_config("debug")), None),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "config: a change on a settled operator starts",
            world()
                .installed("1.1.0")
                .config(operator_config("info"))
                .config_applied(Some(operator_config("debug")), None),
            keep()
                .pin(Steady, "=1.1.0")
                .reconfigures()
                .config_says("restarts the operator; it is applied now"),
        ),
        row(
            "config: spec.config removed: the change starts",
            world()
                .installed("1.1.0")
                .config_applied(Some(operator_config("debug")), None),
            keep().pin(Steady, "=1.1.0").reconfigures(),
        ),
        row(
            "config: a PO recorded before configuration existed, nothing asked: no change",
            world().installed("1.1.0"),
            keep().pin(Steady, "=1.1.0"),
        ),
        row(
            "config: the operator says Upgradeable=False: held, with its message and the override",
            world()
                .installed("1.1.0")
                .gate(Gate::Forbids)
                .config(operator_config("debug")),
            keep()
                .pin(Steady, "=1.1.0")
                .verdict(False, Reason::OperatorNotUpgradeable)
                .config_held(Why::OperatorNotUpgradeable)
                .config_says("migrating the database to schema 12")
                .config_says("kubectl annotate platformoperator demo platform.openshift.io/config-change-override=sha256:"),
        ),
        row(
            "config: the override naming the change's digest applies it anyway",
            world()
                .installed("1.1.0")
                .gate(Gate::Forbids)
                .config(operator_config("debug"))
                .config_override(DESIRED),
            keep()
                .pin(Steady, "=1.1.0")
                .verdict(False, Reason::OperatorNotUpgradeable)
                .reconfigures(),
        ),
        row(
            "config: an override naming another digest is inert",
            world()
                .installed("1.1.0")
                .gate(Gate::Forbids)
                .config(operator_config("debug"))
                .config_override("sha256:0000"),
            keep()
                .pin(Steady, "=1.1.0")
                .verdict(False, Reason::OperatorNotUpgradeable)
                .config_held(Why::OperatorNotUpgradeable),
        ),
        row(
            "config: an operator that reported has no Upgradeable for its generation: held",
            world()
                .installed("1.1.0")
                .gate(Gate::Pending { reported: true })
                .config(operator_config("debug")),
            keep()
                .pin(Steady, "=1.1.0")
                .unknown()
                .config_held(Why::OperatorConditionPending),
        ),
        row(
            "config: an operator that never reported (gate Auto) does not hold it",
            world()
                .installed("1.1.0")
                .gate(Gate::Pending { reported: false })
                .config(operator_config("debug")),
            keep().pin(Steady, "=1.1.0").reconfigures(),
        ),
        // Review of session 22 (finding 1): a newer configuration that replaced the one of a hop
        // rolling out fine, refused by the cluster, kept that hop unsettled for good.
        row(
            "config: a move in flight: the change waits for it to settle, not for the override",
            world()
                .installed("1.1.0")
                .hop(LastHop::Unsettled { age: 60 })
                .config(operator_config("debug"))
                .config_override(DESIRED),
            keep()
                .pin(Steady, "=1.1.0")
                .config_held(Why::MoveNotSettled)
                .config_says("it is applied once that has settled, or once it is past spec.progressDeadline"),
        ),
        // Issue 34: a hop whose configuration never becomes Available named no way out (the
        // change waited for the hop, `abandon:` goes back with the same configuration); a newer
        // configuration replaces the one an applied hop past its deadline runs with.
        row(
            "config: a hop past its deadline that applied: a newer configuration replaces the one it runs with",
            world()
                .installed("1.1.0")
                .progress_deadline("1m30s")
                .hop(LastHop::Unsettled { age: 91 })
                .config(operator_config("debug"))
                .config_override(DESIRED),
            keep()
                .pin(Steady, "=1.1.0")
                .reconfigures()
                .deadline_exceeded(),
        ),
        row(
            "config: a hop carries the configuration asked for (no change of its own)",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .config(operator_config("debug")),
            move_to("1.1.1", PatchUpgrade, ">=1.1.1 <1.2.0-0")
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .renders(Renders::Desired),
        ),
        row(
            "config: a held hop and a configuration change held by the same gate",
            world()
                .installed("1.1.0")
                .cluster(Cluster::Patch)
                .gate(Gate::Forbids)
                .config(operator_config("debug")),
            keep()
                .pin(PatchUpgrade, ">=1.1.0 <1.2.0-0")
                .held("1.1.1", Why::OperatorNotUpgradeable)
                .verdict(False, Reason::OperatorNotUpgradeable)
                .config_held(Why::OperatorNotUpgradeable),
        ),
        row(
            "config: a cluster proxy change is a configuration change",
            world().installed("1.1.0").proxy(cluster_proxy("http://proxy:3128")),
            keep().pin(Steady, "=1.1.0").reconfigures(),
        ),
        row(
            "config: a cluster proxy change is held by Upgradeable=False too",
            world()
                .installed("1.1.0")
                .gate(Gate::Forbids)
                .proxy(cluster_proxy("http://proxy:3128"))
                .config_applied(None, Some(cluster_proxy("http://old:3128"))),
            keep()
                .pin(Steady, "=1.1.0")
                .verdict(False, Reason::OperatorNotUpgradeable)
                .config_held(Why::OperatorNotUpgradeable),
        ),
        row(
            "config: paused holds the change, nothing is rendered",
            world()
                .installed("1.1.0")
                .config(operator_config("debug"))
                .paused(),
            nothing()
                .pin(Steady, "=1.1.0")
                .paused()
                .verdict(False, Reason::Paused)
                .config_held(Why::Paused),
        ),
        row(
            "config: a spec that cannot be read starts no change",
            world()
                .installed("1.1.0")
                .progress_deadline("soon")
                .config(operator_config("debug")),
            keep()
                .unknown()
                .problem(Reason::ResolutionFailed, true)
                .renders(Renders::Applied),
        ),
    ]
}

#[test]
fn decide_table() {
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        let decision = decide(&row.given.snapshot());
        let got = Outcome::of(&decision);
        if got != row.expect.outcome {
            failures.push(format!(
                "{}\n  expected {:?}\n  got      {:?}\n  verdict: {}\n  problem: {:?}",
                row.name,
                row.expect.outcome,
                got,
                decision.verdict.message,
                decision.problem.as_ref().map(|p| &p.message)
            ));
            continue;
        }
        let problem = decision
            .problem
            .as_ref()
            .map(|p| p.message.as_str())
            .unwrap_or_default();
        for text in &row.expect.verdict_says {
            if !decision.verdict.message.contains(text) {
                failures.push(format!(
                    "{}: verdict message lacks {text:?}: {}",
                    row.name, decision.verdict.message
                ));
            }
        }
        for text in &row.expect.problem_says {
            if !problem.contains(text) {
                failures.push(format!(
                    "{}: problem message lacks {text:?}: {problem}",
                    row.name
                ));
            }
        }
        let held = decision
            .held
            .as_ref()
            .map(|h| h.why.to_string())
            .unwrap_or_default();
        for text in &row.expect.held_says {
            if !held.contains(text) {
                failures.push(format!("{}: held reason lacks {text:?}: {held}", row.name));
            }
        }
        let paused = decision.paused.as_deref().unwrap_or_default();
        for text in &row.expect.paused_says {
            if !paused.contains(text) {
                failures.push(format!(
                    "{}: pause message lacks {text:?}: {paused}",
                    row.name
                ));
            }
        }
        check_config(row, &decision, &mut failures);
        for text in &row.expect.never_says {
            if decision.verdict.message.contains(text) || problem.contains(text) {
                failures.push(format!(
                    "{}: a message says {text:?}: {} / {problem}",
                    row.name, decision.verdict.message
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// The configuration part of a row (issue 23 items 3, 4): the change, and what is rendered.
fn check_config(row: &Row, decision: &PoDecision, failures: &mut Vec<String>) {
    let change = decision
        .config_change
        .as_ref()
        .map(|c| c.held.as_ref().map(why_of));
    if change != row.expect.config_change {
        failures.push(format!(
            "{}: configuration change expected {:?}, got {change:?}",
            row.name, row.expect.config_change
        ));
    }
    let desired = row.given.desired_config();
    let applied = row
        .given
        .recorded_config
        .clone()
        .unwrap_or_else(pom_api::platform_operator::AppliedConfig::none);
    let writes = matches!(decision.action, Action::Keep | Action::Move(_));
    let expected = match (writes, row.expect.renders) {
        (false, _) => None,
        (true, Some(Renders::Applied)) => Some(applied),
        (true, Some(Renders::Desired) | None) => Some(desired),
    };
    if decision.config != expected {
        failures.push(format!(
            "{}: renders {:?}, expected {:?}",
            row.name,
            decision.config.as_ref().map(|c| &c.digest),
            expected.as_ref().map(|c| &c.digest)
        ));
    }
    let said = decision
        .config_change
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    for text in &row.expect.config_says {
        if !said.contains(text) {
            failures.push(format!(
                "{}: configuration change message lacks {text:?}: {said}",
                row.name
            ));
        }
    }
}

/// Row names are unique, so a failure names one row.
#[test]
fn row_names_are_unique() {
    let rows = rows();
    let mut names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rows.len());
}

/// The same snapshot always gives the same decision (a pure function of its snapshot).
#[test]
fn decide_is_deterministic_over_the_table() {
    for row in rows() {
        let snapshot = row.given.snapshot();
        assert_eq!(decide(&snapshot), decide(&snapshot), "{}", row.name);
    }
}

/// The table's deadlines are the spec's (10m default); guards the deadline rows' premise.
#[test]
fn the_default_deadline_is_ten_minutes() {
    assert_eq!(
        fixture::deadline_of(&world()),
        Some(std::time::Duration::from_secs(600))
    );
    assert_eq!(
        fixture::deadline_of(&world().progress_deadline("soon")),
        None
    );
}
