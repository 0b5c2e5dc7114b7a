//! The powers computation and the content policy over arbitrary objects (issue 24): the input
//! is a JSON list of Kubernetes objects as rendering would hand them over; computing what the
//! bundle's ServiceAccounts can do, and judging the objects, gives an answer, never a panic,
//! and the same answer twice.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use pom_render::content_policy::{PolicyContext, check};
use pom_render::powers;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(objects) = serde_json::from_slice::<Vec<Value>>(data) else {
        return;
    };
    let computed = powers::compute(&objects);
    assert_eq!(computed, powers::compute(&objects), "deterministic");
    let origins: Vec<String> = (0..objects.len()).map(|i| format!("object {i}")).collect();
    let consent = BTreeSet::new();
    let webhook_consent = BTreeSet::new();
    // Every admission webhook configuration of the input counts as one POM rendered, so its
    // rules go through `webhook_reach` (issue 33 item 4).
    let rendered_webhooks: BTreeSet<(String, String)> = objects
        .iter()
        .filter(|o| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("admissionregistration.k8s.io/"))
        })
        .filter_map(|o| {
            Some((
                o["kind"].as_str()?.to_owned(),
                o["metadata"]["name"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let ctx = PolicyContext {
        format: None,
        install_namespace: "fuzz-ns",
        watch_namespace: None,
        manager_namespace: Some("openshift-platform-operators"),
        manager_service_account: None,
        exceptions: &[],
        consent: &consent,
        webhook_consent: &webhook_consent,
        rendered_webhooks: &rendered_webhooks,
        // Both ways, chosen by the input: the opt-in is a power of its own (PlatformConfig).
        cluster_monitoring: data.len() % 2 == 1,
    };
    if let Ok(judgement) = check(&objects, &origins, &ctx) {
        // Nothing consented (no class, no webhook): whatever passed holds no class that needs
        // consent.
        assert!(
            judgement
                .powers
                .classes()
                .iter()
                .all(|c| !c.needs_consent()),
            "{:?}",
            judgement.powers
        );
    }
});
