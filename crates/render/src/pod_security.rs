//! The Pod Security Standards' `baseline` level, judged on the pod templates a bundle ships.
//!
//! POM labels every install namespace `pod-security.kubernetes.io/enforce=baseline` unless the
//! admin consented to privileged workloads (`privileged` then). Judging the templates here, with
//! the same rules the API server's pod-security admission applies, turns "pods that never start"
//! into a refusal before anything is applied, naming the container and field. The checks are
//! the baseline profile of <https://kubernetes.io/docs/concepts/security/pod-security-standards/>
//! (host namespaces, privileged containers, capabilities beyond the default set, hostPath
//! volumes, host ports, procMount, seccomp `Unconfined`, unsafe sysctls, SELinux types and
//! Windows host processes).

use serde_json::Value;

use super::objects::{ObjectKey, at, str_at};

/// Capabilities a baseline container may add (the container runtime's default set).
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Sysctls the baseline level allows (namespaced and isolated from the host).
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// SELinux types a baseline pod may ask for ("" = the runtime's default).
const BASELINE_SELINUX_TYPES: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];

/// The Pod Security labels of an install namespace POM owns: enforce `baseline` (warn and audit
/// `restricted`, which many real operators do not meet yet), or `privileged` when the admin
/// consented to privileged workloads. OpenShift's label syncer is turned off for the namespace,
/// so it does not replace them from SCCs.
pub fn namespace_labels(privileged: bool) -> [(&'static str, &'static str); 4] {
    [
        (
            "pod-security.kubernetes.io/enforce",
            if privileged { "privileged" } else { "baseline" },
        ),
        ("pod-security.kubernetes.io/warn", "restricted"),
        ("pod-security.kubernetes.io/audit", "restricted"),
        ("security.openshift.io/scc.podSecurityLabelSync", "false"),
    ]
}

/// Where the pod spec of a workload kind lives, if the kind carries one.
pub fn pod_spec_path(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    match (group, kind) {
        ("", "Pod") => Some(&["spec"]),
        ("apps", "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet")
        | ("batch", "Job")
        | ("", "ReplicationController") => Some(&["spec", "template", "spec"]),
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

/// Every way the object's pod template breaks the baseline level, as `field: what` sentences
/// (empty for objects without a pod template, and for templates that meet it).
pub fn baseline_violations(object: &Value) -> Vec<String> {
    let key = ObjectKey::of(object);
    let Some(path) = pod_spec_path(&key.group, &key.kind) else {
        return Vec::new();
    };
    let Some(pod) = at(object, path) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    if let Some(annotations) = pod_metadata_path(path)
        .and_then(|metadata| at(object, &metadata))
        .and_then(|metadata| metadata.get("annotations"))
        .and_then(Value::as_object)
    {
        for (key, value) in annotations {
            let Some(container) = key.strip_prefix(APPARMOR_ANNOTATION_PREFIX) else {
                continue;
            };
            let profile = value.as_str().unwrap_or_default();
            if !apparmor_annotation_allowed(profile) {
                found.push(format!(
                    "container {container:?} runs with AppArmor profile {profile:?} (annotation {key})"
                ));
            }
        }
    }
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod.get(field).and_then(Value::as_bool) == Some(true) {
            found.push(format!("spec.{field}: true shares the node's namespaces"));
        }
    }
    for volume in list(pod, "volumes") {
        if volume.get("hostPath").is_some_and(|h| !h.is_null()) {
            let name = str_at(volume, &["name"]).unwrap_or("?");
            let host = str_at(volume, &["hostPath", "path"]).unwrap_or("?");
            found.push(format!(
                "volume {name:?} mounts the node's {host:?} (hostPath)"
            ));
        }
    }
    if let Some(context) = pod.get("securityContext") {
        judge_security_context(context, "the pod", &mut found);
        for sysctl in list(context, "sysctls") {
            let name = str_at(sysctl, &["name"]).unwrap_or("?");
            if !SAFE_SYSCTLS.contains(&name) {
                found.push(format!(
                    "the pod sets sysctl {name:?}, not one of baseline's safe sysctls"
                ));
            }
        }
    }
    for group in ["initContainers", "containers", "ephemeralContainers"] {
        for container in list(pod, group) {
            let name = str_at(container, &["name"]).unwrap_or("?");
            let who = format!("container {name:?}");
            if let Some(context) = container.get("securityContext") {
                judge_container_context(context, &who, &mut found);
            }
            for port in list(container, "ports") {
                if port
                    .get("hostPort")
                    .and_then(Value::as_i64)
                    .is_some_and(|p| p != 0)
                {
                    found.push(format!("{who} binds a hostPort"));
                }
            }
        }
    }
    found
}

/// The pod template annotation that sets a container's AppArmor profile (before
/// `securityContext.appArmorProfile`, Kubernetes 1.30; still honoured).
const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Baseline allows the runtime's default AppArmor profile and profiles loaded on the node
/// (`localhost/...`), never `unconfined` (nor anything else).
fn apparmor_annotation_allowed(profile: &str) -> bool {
    profile.is_empty() || profile == "runtime/default" || profile.starts_with("localhost/")
}

/// Where the pod metadata sits next to the pod spec at `spec_path` (`.../template/spec` →
/// `.../template/metadata`; a Pod's own `metadata`).
fn pod_metadata_path(spec_path: &[&'static str]) -> Option<Vec<&'static str>> {
    let (_, parent) = spec_path.split_last()?;
    let mut path = parent.to_vec();
    path.push("metadata");
    Some(path)
}

fn judge_container_context(context: &Value, who: &str, found: &mut Vec<String>) {
    if context.get("privileged").and_then(Value::as_bool) == Some(true) {
        found.push(format!("{who} is privileged"));
    }
    let added: Vec<&str> = at(context, &["capabilities", "add"])
        .and_then(Value::as_array)
        .map(|caps| caps.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let beyond: Vec<&str> = added
        .into_iter()
        .filter(|cap| !BASELINE_CAPABILITIES.contains(&cap.trim_start_matches("CAP_")))
        .collect();
    if !beyond.is_empty() {
        found.push(format!(
            "{who} adds capabilities {} beyond the default set",
            beyond.join(", ")
        ));
    }
    if str_at(context, &["procMount"]).is_some_and(|m| m != "Default") {
        found.push(format!("{who} sets procMount other than Default"));
    }
    judge_security_context(context, who, found);
}

/// The checks a pod-level and a container-level securityContext share.
fn judge_security_context(context: &Value, who: &str, found: &mut Vec<String>) {
    if str_at(context, &["seccompProfile", "type"]) == Some("Unconfined") {
        found.push(format!("{who} runs with seccomp Unconfined"));
    }
    if let Some(kind) = str_at(context, &["appArmorProfile", "type"])
        && !matches!(kind, "RuntimeDefault" | "Localhost")
    {
        found.push(format!("{who} runs with AppArmor {kind}"));
    }
    if at(context, &["windowsOptions", "hostProcess"]).and_then(Value::as_bool) == Some(true) {
        found.push(format!("{who} is a Windows host process"));
    }
    if let Some(selinux) = context.get("seLinuxOptions") {
        let kind = str_at(selinux, &["type"]).unwrap_or("");
        if !BASELINE_SELINUX_TYPES.contains(&kind) {
            found.push(format!("{who} asks for SELinux type {kind:?}"));
        }
        for field in ["user", "role"] {
            if str_at(selinux, &[field]).is_some_and(|v| !v.is_empty()) {
                found.push(format!("{who} sets seLinuxOptions.{field}"));
            }
        }
    }
}

fn list<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value
        .get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn deployment(pod: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"template": {"spec": pod}}})
    }

    #[test]
    fn a_plain_operator_pod_meets_baseline() {
        let pod = json!({"containers": [{"name": "manager", "image": "x",
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "ports": [{"containerPort": 8443}]}],
            "securityContext": {"runAsNonRoot": true}});
        assert_eq!(baseline_violations(&deployment(pod)), Vec::<String>::new());
    }

    #[test]
    fn each_baseline_break_is_named() {
        let cases = [
            (
                json!({"hostNetwork": true, "containers": []}),
                "spec.hostNetwork",
            ),
            (json!({"hostPID": true, "containers": []}), "spec.hostPID"),
            (
                json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}], "containers": []}),
                "\"/\" (hostPath)",
            ),
            (
                json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]}),
                "container \"c\" is privileged",
            ),
            (
                json!({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}),
                "SYS_ADMIN",
            ),
            (
                json!({"initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 80}]}], "containers": []}),
                "hostPort",
            ),
            (
                json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}, "containers": []}),
                "kernel.msgmax",
            ),
            (
                json!({"containers": [{"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}),
                "seccomp Unconfined",
            ),
            (
                json!({"containers": [{"name": "c", "securityContext": {"seLinuxOptions": {"type": "spc_t"}}}]}),
                "spc_t",
            ),
            (
                json!({"containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}),
                "procMount",
            ),
            (
                json!({"containers": [{"name": "c", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}),
                "AppArmor Unconfined",
            ),
            (
                json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": []}),
                "the pod runs with AppArmor Unconfined",
            ),
        ];
        for (pod, expected) in cases {
            let found = baseline_violations(&deployment(pod.clone()));
            assert!(
                found.iter().any(|f| f.contains(expected)),
                "{pod}: {found:?}"
            );
        }
    }

    /// Issue 33 item 5: the AppArmor annotation lowers confinement as the field does.
    #[test]
    fn apparmor_annotations_beyond_the_default_are_named() {
        let with = |annotation: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"template": {
                       "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/manager": annotation}},
                       "spec": {"containers": [{"name": "manager", "image": "i"}]}}}})
        };
        let found = baseline_violations(&with("unconfined"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("container \"manager\"") && found[0].contains("unconfined"));
        for allowed in ["runtime/default", "localhost/my-profile", ""] {
            assert_eq!(
                baseline_violations(&with(allowed)),
                Vec::<String>::new(),
                "{allowed}"
            );
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
            "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(baseline_violations(&pod).len(), 1);
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"spec": {"template": {
                "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
                "spec": {"containers": [{"name": "c"}]}}}}}});
        assert_eq!(baseline_violations(&cron).len(), 1);
        for allowed in ["RuntimeDefault", "Localhost"] {
            let object = deployment(
                json!({"containers": [{"name": "c", "securityContext": {"appArmorProfile": {"type": allowed}}}]}),
            );
            assert!(baseline_violations(&object).is_empty(), "{allowed}");
        }
    }

    #[test]
    fn every_workload_kind_is_judged_and_other_kinds_are_not() {
        let privileged =
            json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]});
        for (api_version, kind, path) in [
            ("v1", "Pod", vec!["spec"]),
            ("apps/v1", "DaemonSet", vec!["spec", "template", "spec"]),
            (
                "batch/v1",
                "CronJob",
                vec!["spec", "jobTemplate", "spec", "template", "spec"],
            ),
        ] {
            let mut object =
                json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}});
            let mut slot = &mut object;
            for field in path {
                slot = &mut slot[field];
            }
            *slot = privileged.clone();
            assert_eq!(baseline_violations(&object).len(), 1, "{kind}");
        }
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                            "spec": {"template": {"spec": privileged}}});
        assert!(baseline_violations(&config).is_empty());
    }
}
