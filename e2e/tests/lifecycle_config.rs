#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The admin's operator configuration (`spec.config`) and the cluster proxy, as the manager
//! applies them to a running operator (issue 23 items 3, 4), against a real control plane with
//! the test playing the operator (it writes its OperatorCondition's `spec.conditions`) and the
//! cluster network operator (it writes the `Proxy` `cluster`'s status):
//!
//! - a PO with `spec.config` (env, nodeSelector, resources) installs with them on its
//!   Deployment;
//! - a configuration change while the operator says `Upgradeable=False` is held (reason
//!   `ConfigChangeHeld`, naming the operator's message and the override): the Deployment is
//!   unchanged over a window longer than every resync; it is applied once the operator says
//!   True;
//! - the next change, held the same way, is applied by the admin's `config-change-override`
//!   annotation naming its digest;
//! - a change of the Proxy's status adds `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` to the
//!   operator's containers, next to the admin's env.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kube::{Client, CustomResourceExt as _};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_api::olm::OperatorCondition;
use pom_api::openshift::proxy::Proxy;
use pom_api::platform_operator::{AppliedConfig, OperatorConfig};
use pom_controller::context::Settings;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    WAIT, configmap_catalog, create_po, now, set_cluster, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use serde_json::{Value, json};

const PO: &str = "configured";

/// A 5 s PlatformOperator resync (catalog poll 5 s too): the quiet window lasts 10 s.
fn settings() -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![])
    }
}

/// The admin's configuration: `LOG_LEVEL`, a node selector the simulated node matches, and
/// a memory limit.
fn config(level: &str) -> Value {
    json!({
        "env": [{"name": "LOG_LEVEL", "value": level}],
        "nodeSelector": {"type": "kwok"},
        "resources": {"limits": {"memory": "256Mi"}},
    })
}

/// The digest the manager gives `config` without a proxy (what the override names).
fn digest(config: &Value) -> String {
    let config: OperatorConfig = serde_json::from_value(config.clone()).unwrap();
    AppliedConfig::of(Some(&config), None).digest
}

fn pos(client: &Client) -> Api<PlatformOperator> {
    Api::all(client.clone())
}

fn deployments(client: &Client) -> Api<Deployment> {
    Api::namespaced(client.clone(), PO)
}

/// Applies the `Proxy` CRD (POM's view of it: the upstream CRDs the harness installs do not
/// include it) and waits until it is served.
async fn install_proxy_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Proxy::crd();
    let name = crd.metadata.name.clone().unwrap();
    api.patch(
        &name,
        &PatchParams::apply("pom-e2e").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("CRD {name} not established"))
    .unwrap();
}

/// Sets the status of the `Proxy` `cluster` (creating it first), as the cluster network
/// operator does.
async fn set_proxy_status(client: &Client, http: &str, https: &str, no_proxy: &str) {
    let api: Api<Proxy> = Api::all(client.clone());
    if api.get_opt("cluster").await.unwrap().is_none() {
        let proxy: Proxy = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Proxy",
            "metadata": {"name": "cluster"}, "spec": {}
        }))
        .unwrap();
        api.create(&PostParams::default(), &proxy).await.unwrap();
    }
    api.patch_status(
        "cluster",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"httpProxy": http, "httpsProxy": https, "noProxy": no_proxy}}),
        ),
    )
    .await
    .unwrap();
}

/// Plays the operator: its OperatorCondition's `spec.conditions` says `Upgradeable`, and the
/// manager has copied it to status for the current generation.
async fn report(client: &Client, csv: &str, upgradeable: bool, message: &str) {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), PO);
    eventually(WAIT, "the OperatorCondition to exist", || async {
        api.get_opt(csv).await.ok()?
    })
    .await;
    let status = if upgradeable { "True" } else { "False" };
    let condition = json!({
        "type": "Upgradeable", "status": status,
        "reason": if upgradeable { "Ready" } else { "Migrating" },
        "message": message, "lastTransitionTime": now(),
    });
    api.patch(
        csv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"conditions": [condition]}})),
    )
    .await
    .unwrap();
    eventually(WAIT, &format!("Upgradeable={status} copied"), || async {
        let oc = api.get_opt(csv).await.ok()??;
        let copied = oc
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Upgradeable")?;
        (copied.status == status && copied.observed_generation == oc.metadata.generation)
            .then_some(())
    })
    .await;
}

/// The env of the operator's first container, by name.
fn env_of(deployment: &Deployment) -> BTreeMap<String, String> {
    deployment
        .spec
        .iter()
        .flat_map(|s| s.template.spec.iter())
        .flat_map(|p| p.containers.first())
        .flat_map(|c| c.env.iter().flatten())
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

/// Waits until the operator's Deployment has `env` (among others) in its first container.
async fn wait_env(client: &Client, name: &str, env: &[(&str, &str)]) -> Deployment {
    eventually(
        WAIT,
        &format!("Deployment {name} with env {env:?}"),
        || async {
            let deployment = deployments(client).get_opt(name).await.ok()??;
            let has = env_of(&deployment);
            env.iter()
                .all(|(k, v)| has.get(*k).map(String::as_str) == Some(*v))
                .then_some(deployment)
        },
    )
    .await
}

/// Waits until the last move (a configuration change included) settled with `config`
/// recorded as applied.
async fn wait_settled_with(client: &Client, config: &str) {
    eventually(WAIT, &format!("{PO} settled with {config}"), || async {
        let status = pos(client).get(PO).await.ok()?.status?;
        (status.active_hop?.settled && status.applied_config?.digest == config).then_some(())
    })
    .await;
}

/// Sets `spec.config`.
async fn configure(client: &Client, config: &Value) {
    pos(client)
        .patch(
            PO,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"config": config}})),
        )
        .await
        .unwrap();
}

/// Waits until the change to `config` is held, its message naming the operator's word and
/// the override.
async fn wait_config_held(client: &Client, config: &str, operator_says: &str) {
    let message =
        wait_po_condition(client, PO, "Progressing", "False", Some("ConfigChangeHeld")).await;
    for text in [
        config.to_owned(),
        operator_says.to_owned(),
        format!(
            "kubectl annotate platformoperator {PO} {}={config} --overwrite",
            labels::CONFIG_CHANGE_OVERRIDE
        ),
    ] {
        assert!(message.contains(&text), "{text:?} in {message}");
    }
}

#[tokio::test]
async fn configuration_and_proxy_reach_the_operator_one_gated_move_at_a_time() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let bundle = TestBundle::new(PO, "1.0.0");
    let (csv, deployment) = (bundle.csv(), bundle.deployment_name());
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    // Served before the manager starts: its first read of the Proxy is the one in force.
    install_proxy_crd(&client).await;
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&client, "ocs", &fbc, 0).await;
    create_po(
        &client,
        PO,
        json!({"package": {"name": PO}, "upgradeGate": "OperatorCondition", "config": config("debug")}),
    )
    .await;
    let _manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "ocs", &fbc).await;

    // Installed with the configuration: env, node selector and resources on the Deployment;
    // no proxy (the Proxy does not exist).
    let installed = wait_env(&client, &deployment, &[("LOG_LEVEL", "debug")]).await;
    let pod = installed.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.node_selector,
        Some(BTreeMap::from([("type".to_owned(), "kwok".to_owned())]))
    );
    for container in &pod.containers {
        let limits = container.resources.as_ref().and_then(|r| r.limits.as_ref());
        assert_eq!(
            limits.and_then(|l| l.get("memory")).map(|q| q.0.as_str()),
            Some("256Mi"),
            "{}",
            container.name
        );
    }
    let env = env_of(&deployments(&client).get(&deployment).await.unwrap());
    assert!(!env.contains_key("HTTP_PROXY"), "{env:?}");
    assert_eq!(env.get("OPERATOR_CONDITION_NAME"), Some(&csv));
    report(&client, &csv, true, "ready").await;
    wait_settled_with(&client, &digest(&config("debug"))).await;

    // The operator says False: a configuration change is held, and the Deployment and what
    // the status records stay as they are over a window longer than every resync.
    report(&client, &csv, false, "migrating the store").await;
    let info = digest(&config("info"));
    configure(&client, &config("info")).await;
    wait_config_held(&client, &info, "migrating the store").await;
    QuietWindow::new(&settings)
        .unchanged(
            deployments(&client),
            Objects::All,
            "the pod template",
            |d| json!(d.spec.as_ref().map(|s| &s.template)),
        )
        .unchanged(pos(&client), PO, "the applied configuration and the last move", |po| {
            let status = po.status.as_ref();
            json!({
                "appliedConfig": status.and_then(|s| s.applied_config.as_ref()).map(|c| &c.digest),
                "activeHop": status.and_then(|s| s.active_hop.as_ref()).map(|h| json!({"from": h.from, "to": h.to, "config": h.config, "started": h.started_at})),
            })
        })
        .open()
        .await
        .hold()
        .await;
    // Held, not lost: once the operator says True it is applied, as a move of its own.
    report(&client, &csv, true, "ready").await;
    wait_env(&client, &deployment, &[("LOG_LEVEL", "info")]).await;
    wait_settled_with(&client, &info).await;
    let hop = pos(&client)
        .get(PO)
        .await
        .unwrap()
        .status
        .unwrap()
        .active_hop
        .unwrap();
    assert_eq!(
        (hop.from.as_deref(), hop.to.as_str(), hop.config.as_deref()),
        (
            Some(bundle.name().as_str()),
            bundle.name().as_str(),
            Some(info.as_str())
        )
    );

    // Held again; the admin's override naming its digest applies it anyway.
    report(&client, &csv, false, "compacting").await;
    let warn = digest(&config("warn"));
    configure(&client, &config("warn")).await;
    wait_config_held(&client, &warn, "compacting").await;
    pos(&client)
        .patch(
            PO,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {labels::CONFIG_CHANGE_OVERRIDE: warn}}}),
            ),
        )
        .await
        .unwrap();
    wait_env(&client, &deployment, &[("LOG_LEVEL", "warn")]).await;
    report(&client, &csv, true, "ready").await;
    wait_settled_with(&client, &warn).await;

    // The cluster proxy reaches the operator next to the admin's env: a configuration change
    // like any other (the operator allows it now).
    set_proxy_status(
        &client,
        "http://proxy.example:3128",
        "http://proxy.example:3128",
        ".cluster.local,.svc",
    )
    .await;
    wait_env(
        &client,
        &deployment,
        &[
            ("HTTP_PROXY", "http://proxy.example:3128"),
            ("HTTPS_PROXY", "http://proxy.example:3128"),
            ("NO_PROXY", ".cluster.local,.svc"),
            ("LOG_LEVEL", "warn"),
        ],
    )
    .await;
    // The status that records the proxy is written by the reconcile that applied it, after
    // the apply: read it once it is.
    let applied = eventually(WAIT, "status.appliedConfig to record the proxy", || async {
        let applied = pos(&client).get(PO).await.ok()?.status?.applied_config?;
        (applied.proxy.as_ref().map(|p| p.http_proxy.as_str()) == Some("http://proxy.example:3128"))
            .then_some(applied)
    })
    .await;
    assert_ne!(applied.digest, warn);
}
