//! `pomctl adopt`'s refusals that need no cluster (the live judgement is the e2e test
//! `adopt_dry_run`).

use std::process::Command;

fn pomctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pomctl"))
        .args(args)
        // Nowhere to connect: these must fail before any API call.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap_or_else(|e| panic!("running pomctl: {e}"))
}

#[test]
fn adopting_for_real_names_the_way_the_manager_adopts() {
    let out = pomctl(&["adopt", "--dry-run=false"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--dry-run=false"), "{stderr}");
    assert!(stderr.contains("--subscription NAMESPACE/NAME"), "{stderr}");
    assert!(stderr.contains("--give-back"), "{stderr}");
}

#[test]
fn a_subscription_must_be_namespace_slash_name() {
    let out = pomctl(&["adopt", "--subscription", "just-a-name"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NAMESPACE/NAME"), "{stderr}");
}

#[test]
fn give_back_and_subscription_are_exclusive() {
    let out = pomctl(&["adopt", "--give-back", "op", "--subscription", "ns/op"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--give-back") && stderr.contains("--subscription"),
        "{stderr}"
    );
}
