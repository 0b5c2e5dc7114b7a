//! etcd + kube-apiserver (+ optional controller-manager, scheduler, kwok) on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};

use crate::HarnessError;
use crate::certs::{self, CertFiles};
use crate::process::{Process, free_port, http_get};

/// Whether Deployments should really roll out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workloads {
    /// Only etcd and kube-apiserver: objects are stored, nothing runs (fast).
    None,
    /// Also kube-controller-manager, kube-scheduler and kwok with one simulated node named
    /// `kwok-node-0`: Deployments create Pods that become Ready, namespaces really terminate,
    /// garbage collection works.
    Simulated,
    /// [`Workloads::Simulated`], with Service addresses (ClusterIPs) taken from
    /// [`LOOPBACK_SERVICE_CIDR`]: the API server calls a webhook at its Service's ClusterIP, so
    /// a test that listens on those loopback addresses serves as the pods behind the Service.
    SimulatedServingOnLoopback,
}

impl Workloads {
    fn simulated(self) -> bool {
        matches!(self, Self::Simulated | Self::SimulatedServingOnLoopback)
    }
}

/// Where [`Workloads::SimulatedServingOnLoopback`] Services get their ClusterIPs: Linux routes
/// all of 127.0.0.0/8 to the loopback interface, so a test can listen on every one of them
/// without touching the host's network (no address to add, no namespace to create). Pod
/// addresses cannot be loopback ones: the API server refuses them in EndpointSlices.
pub const LOOPBACK_SERVICE_CIDR: &str = "127.2.0.0/24";

/// A running control plane. Dropping it stops every process and removes its directory.
pub struct ControlPlane {
    // Field order is drop order: workload processes first, then the apiserver, then etcd.
    workload_processes: Vec<Process>,
    apiserver: Process,
    etcd: Process,
    /// How the apiserver and etcd were started, so they can be restarted alike (same ports,
    /// certificates and data directory).
    restart: Restart,
    kubeconfig: Kubeconfig,
    kubeconfig_path: PathBuf,
    url: String,
    dir: tempfile::TempDir,
}

struct Restart {
    bin: PathBuf,
    etcd_args: Vec<String>,
    etcd_port: u16,
    apiserver_args: Vec<String>,
    restarts: u32,
}

const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Starts of a control plane tried when a port was taken between picking and binding it.
const PORT_RACE_ATTEMPTS: u32 = 3;

impl ControlPlane {
    /// Starts a control plane with POM's CRDs and the external CRDs installed.
    ///
    /// # Errors
    /// When a binary is missing, a process does not come up, or a CRD is refused.
    pub async fn start(workloads: Workloads) -> Result<Self, HarnessError> {
        // Ports are picked free, then bound by the processes a moment later: another process
        // (a parallel test, another suite on the machine) may take one in between. That is
        // the harness's race, not a failure of what is tested: start again on new ports.
        let mut attempt = 1;
        loop {
            match Self::start_once(workloads).await {
                Err(HarnessError::NotReady { log_tail, .. })
                    if attempt < PORT_RACE_ATTEMPTS
                        && log_tail.contains("address already in use") =>
                {
                    eprintln!(
                        "control plane: a port was taken before it was bound; starting again"
                    );
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(workloads: Workloads) -> Result<Self, HarnessError> {
        let mut needed = crate::binaries::CONTROL_PLANE.to_vec();
        if workloads.simulated() {
            needed.extend_from_slice(crate::binaries::WORKLOADS);
        }
        let bin = crate::binaries::locate(&needed)?;
        let mut dir = tempfile::Builder::new()
            .prefix("pom-e2e-")
            .tempdir()
            .map_err(HarnessError::io(
                "creating the control plane's temporary directory",
            ))?;
        if std::env::var_os("POM_E2E_KEEP").is_some() {
            eprintln!("POM_E2E_KEEP: keeping {}", dir.path().display());
            dir.disable_cleanup(true);
        }
        let root = dir.path().to_path_buf();
        let certs = certs::generate(&root)?;

        let etcd = start_etcd(&bin, &root).await?;
        let etcd_url = etcd.1;
        let (apiserver, port, apiserver_args) =
            start_apiserver(&bin, &root, &certs, &etcd_url, workloads).await?;
        let url = format!("https://127.0.0.1:{port}");
        let kubeconfig = kubeconfig(&url, &certs)?;
        let kubeconfig_path = root.join("kubeconfig");
        let yaml = serde_saphyr::to_string(&kubeconfig)
            .map_err(|e| HarnessError::Other(format!("serialising the kubeconfig: {e}")))?;
        std::fs::write(&kubeconfig_path, yaml)
            .map_err(HarnessError::io("writing the kubeconfig"))?;

        let mut plane = Self {
            workload_processes: Vec::new(),
            apiserver,
            etcd: etcd.0,
            restart: Restart {
                bin: bin.clone(),
                etcd_args: etcd.2,
                etcd_port: etcd.3,
                apiserver_args,
                restarts: 0,
            },
            kubeconfig,
            kubeconfig_path,
            url,
            dir,
        };
        plane.wait_for_apiserver().await?;
        plane.install_crds().await?;
        if workloads.simulated() {
            plane.start_workloads(&bin, &certs).await?;
        }
        Ok(plane)
    }

    /// A new client for the admin identity (`system:masters`). Build one per test runtime.
    ///
    /// # Errors
    /// When the kubeconfig cannot be turned into a client.
    pub async fn client(&self) -> Result<Client, HarnessError> {
        let config =
            Config::from_custom_kubeconfig(self.kubeconfig.clone(), &KubeConfigOptions::default())
                .await
                .map_err(|e| HarnessError::Other(format!("loading the test kubeconfig: {e}")))?;
        Client::try_from(config).map_err(HarnessError::kube("building a client"))
    }

    /// The kubeconfig file (admin identity), for processes such as the manager or `pomctl`.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The in-memory kubeconfig (admin identity).
    #[must_use]
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// The API server URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The control plane's private directory (certificates, logs, data).
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The API server's log tail, for failure messages.
    #[must_use]
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        self.apiserver.log_tail(lines)
    }

    /// Stops kube-apiserver (SIGTERM, SIGKILL after the grace period) and starts it again with
    /// the same port, certificates and etcd; returns once it is ready. Clients reconnect by
    /// themselves.
    ///
    /// # Errors
    /// When it does not come back.
    pub async fn restart_apiserver(&mut self) -> Result<(), HarnessError> {
        self.apiserver.stop();
        self.restart.restarts += 1;
        let name = format!("kube-apiserver-{}", self.restart.restarts);
        self.apiserver = Process::spawn(
            &name,
            &self.restart.bin.join("kube-apiserver"),
            &self.restart.apiserver_args,
            self.dir.path(),
        )?;
        self.wait_for_apiserver().await
    }

    /// Stops etcd (SIGTERM) and starts it again on the same ports and data directory (nothing
    /// is lost); returns once etcd is healthy and the apiserver ready again.
    ///
    /// # Errors
    /// When it does not come back.
    pub async fn restart_etcd(&mut self) -> Result<(), HarnessError> {
        self.etcd.stop();
        self.restart.restarts += 1;
        let name = format!("etcd-{}", self.restart.restarts);
        self.etcd = Process::spawn(
            &name,
            &self.restart.bin.join("etcd"),
            &self.restart.etcd_args,
            self.dir.path(),
        )?;
        wait_for_etcd(&mut self.etcd, self.restart.etcd_port).await?;
        self.wait_for_apiserver().await
    }

    async fn wait_for_apiserver(&mut self) -> Result<(), HarnessError> {
        let client = self.client().await?;
        let started = Instant::now();
        loop {
            if let Ok(resp) = client.request_text(http_request("/readyz")?).await
                && resp == "ok"
            {
                return Ok(());
            }
            if self.apiserver.has_exited() || started.elapsed() > READY_TIMEOUT {
                return Err(HarnessError::NotReady {
                    component: "kube-apiserver".into(),
                    seconds: started.elapsed().as_secs(),
                    log_tail: self.apiserver.log_tail(30),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn install_crds(&self) -> Result<(), HarnessError> {
        let client = self.client().await?;
        let mut crds = pom_api::crds();
        crds.extend(external_crds()?);
        let api: Api<CustomResourceDefinition> = Api::all(client);
        for crd in &crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(
                &name,
                &PatchParams::apply("pom-e2e").force(),
                &Patch::Apply(crd),
            )
            .await
            .map_err(HarnessError::kube(format!("applying CRD {name}")))?;
        }
        for crd in &crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            tokio::time::timeout(
                READY_TIMEOUT,
                await_condition(api.clone(), &name, conditions::is_crd_established()),
            )
            .await
            .map_err(|_| {
                HarnessError::Other(format!(
                    "CRD {name} not Established within {READY_TIMEOUT:?}"
                ))
            })?
            .map_err(|e| HarnessError::Other(format!("waiting for CRD {name}: {e}")))?;
        }
        Ok(())
    }

    async fn start_workloads(&mut self, bin: &Path, certs: &CertFiles) -> Result<(), HarnessError> {
        let root = self.dir.path().to_path_buf();
        let kc = self.kubeconfig_path.display().to_string();
        let kcm_args = vec![
            format!("--kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            format!("--service-account-private-key-file={}", certs.sa_key.display()),
            format!("--root-ca-file={}", certs.serving_ca.display()),
            "--controllers=*,-csrsigning,-csrapproving,-nodeipam,-nodelifecycle,-bootstrapsigner,-tokencleaner".into(),
            "--concurrent-deployment-syncs=10".into(),
            "--concurrent-replicaset-syncs=10".into(),
        ];
        let kcm = Process::spawn(
            "kube-controller-manager",
            &bin.join("kube-controller-manager"),
            &kcm_args,
            &root,
        )?;
        self.workload_processes.push(kcm);
        let sched_args = vec![
            format!("--kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
        ];
        let sched = Process::spawn(
            "kube-scheduler",
            &bin.join("kube-scheduler"),
            &sched_args,
            &root,
        )?;
        self.workload_processes.push(sched);
        let kwok_args = vec![
            format!("--kubeconfig={kc}"),
            "--manage-all-nodes=false".into(),
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
            "--manage-nodes-with-label-selector=".into(),
            // Pod addresses come from here: room for the benchmarks' thousands of pods.
            "--cidr=10.0.0.1/16".into(),
            "--node-ip=10.0.0.1".into(),
            format!("--server-address=127.0.0.1:{}", free_port()?),
            format!(
                "--config={}",
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tools/kwok-stages.yaml")
                    .display()
            ),
        ];
        let kwok = Process::spawn_restarting("kwok", &bin.join("kwok"), &kwok_args, &root)?;
        self.workload_processes.push(kwok);
        self.create_simulated_node().await
    }

    async fn create_simulated_node(&mut self) -> Result<(), HarnessError> {
        let client = self.client().await?;
        let nodes: Api<Node> = Api::all(client);
        let node: Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "kwok-node-0",
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "kwok-node-0"}
            },
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"}}
        }))
        .map_err(|e| HarnessError::Other(format!("building the simulated node: {e}")))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .map_err(HarnessError::kube("creating the simulated node"))?;
        let started = Instant::now();
        loop {
            let ready = nodes
                .get("kwok-node-0")
                .await
                .ok()
                .and_then(|n| n.status?.conditions)
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                // Node admission adds a not-ready taint that only the (disabled) node lifecycle
                // controller would lift; without it nothing schedules.
                nodes
                    .patch(
                        "kwok-node-0",
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({"spec": {"taints": null}})),
                    )
                    .await
                    .map_err(HarnessError::kube("removing the simulated node's taints"))?;
                return Ok(());
            }
            if let Some(p) = self
                .workload_processes
                .iter_mut()
                .find_map(|p| if p.has_exited() { Some(p) } else { None })
            {
                return Err(HarnessError::NotReady {
                    component: p.name.clone(),
                    seconds: started.elapsed().as_secs(),
                    log_tail: p.log_tail(30),
                });
            }
            if started.elapsed() > READY_TIMEOUT {
                let tails: Vec<String> = self
                    .workload_processes
                    .iter()
                    .map(|p| format!("== {}\n{}", p.name, p.log_tail(10)))
                    .collect();
                return Err(HarnessError::NotReady {
                    component: "simulated node kwok-node-0".into(),
                    seconds: started.elapsed().as_secs(),
                    log_tail: tails.join("\n"),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn http_request(path: &str) -> Result<http::Request<Vec<u8>>, HarnessError> {
    http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| HarnessError::Other(format!("building a request for {path}: {e}")))
}

/// The ClusterVersion, ClusterOperator and OperatorCondition CRDs: the upstream ones from
/// `shared/testdata/crds` when present (so every test checks our writes against the real
/// schemas), else the ones generated from our typed views.
fn external_crds() -> Result<Vec<CustomResourceDefinition>, HarnessError> {
    let Some(testdata) = crate::shared_testdata() else {
        return Ok(pom_api::external_test_crds());
    };
    let files = [
        "crds/openshift-api/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
        "crds/openshift-api/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        "crds/operator-framework-api/operators.coreos.com_operatorconditions.yaml",
    ];
    files
        .iter()
        .map(|file| {
            let path = testdata.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(HarnessError::io(format!("reading {}", path.display())))?;
            serde_saphyr::from_str(&text)
                .map_err(|e| HarnessError::Other(format!("parsing {}: {e}", path.display())))
        })
        .collect()
}

async fn start_etcd(
    bin: &Path,
    root: &Path,
) -> Result<(Process, String, Vec<String>, u16), HarnessError> {
    let client_port = free_port()?;
    let peer_port = free_port()?;
    let data = root.join("etcd-data");
    let args = vec![
        format!("--data-dir={}", data.display()),
        format!("--listen-client-urls=http://127.0.0.1:{client_port}"),
        format!("--advertise-client-urls=http://127.0.0.1:{client_port}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
        format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ];
    let mut etcd = Process::spawn("etcd", &bin.join("etcd"), &args, root)?;
    wait_for_etcd(&mut etcd, client_port).await?;
    Ok((
        etcd,
        format!("http://127.0.0.1:{client_port}"),
        args,
        client_port,
    ))
}

async fn wait_for_etcd(etcd: &mut Process, client_port: u16) -> Result<(), HarnessError> {
    let started = Instant::now();
    loop {
        if let Some((200, body)) = http_get(client_port, "/health").await
            && body.contains("true")
        {
            return Ok(());
        }
        if etcd.has_exited() || started.elapsed() > READY_TIMEOUT {
            return Err(HarnessError::NotReady {
                component: "etcd".into(),
                seconds: started.elapsed().as_secs(),
                log_tail: etcd.log_tail(30),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn start_apiserver(
    bin: &Path,
    root: &Path,
    certs: &CertFiles,
    etcd_url: &str,
    workloads: Workloads,
) -> Result<(Process, u16, Vec<String>), HarnessError> {
    let port = free_port()?;
    let args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--cert-dir={}", root.display()),
        format!("--tls-cert-file={}", certs.serving_cert.display()),
        format!("--tls-private-key-file={}", certs.serving_key.display()),
        format!("--client-ca-file={}", certs.client_ca.display()),
        format!(
            "--service-cluster-ip-range={}",
            if workloads == Workloads::SimulatedServingOnLoopback {
                LOOPBACK_SERVICE_CIDR
            } else {
                "10.0.0.0/24"
            }
        ),
        "--allow-privileged=true".into(),
        "--disable-admission-plugins=ServiceAccount".into(),
        "--authorization-mode=RBAC".into(),
        format!("--service-account-issuer=https://127.0.0.1:{port}/"),
        format!(
            "--service-account-key-file={}",
            certs.sa_public_key.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            certs.sa_key.display()
        ),
        "--profiling=false".into(),
        "--watch-cache=true".into(),
    ];
    let process = Process::spawn("kube-apiserver", &bin.join("kube-apiserver"), &args, root)?;
    Ok((process, port, args))
}

fn kubeconfig(url: &str, certs: &CertFiles) -> Result<Kubeconfig, HarnessError> {
    use base64::Engine as _;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: pom-e2e\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: pom-e2e\n  context:\n    cluster: pom-e2e\n    user: admin\ncurrent-context: pom-e2e\n",
        ca = b64(&certs.serving_ca_pem),
        cert = b64(&certs.admin_cert_pem),
        key = b64(&certs.admin_key_pem),
    );
    Kubeconfig::from_yaml(&yaml)
        .map_err(|e| HarnessError::Other(format!("building the kubeconfig: {e}")))
}
