//! What the demo prints: a table of PlatformOperators, the aggregated ClusterOperator's
//! conditions, and one line per move as it starts and settles (read from `status.activeHop`,
//! so it shows what the manager really did, hop by hop).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use pom_api::PlatformOperator;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};

/// The PlatformOperators, sorted by name (empty on a read error: the next tick retries).
pub async fn platform_operators(client: &Client) -> Vec<PlatformOperator> {
    let mut pos = Api::<PlatformOperator>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    pos.sort_by_key(ResourceExt::name_any);
    pos
}

/// The aggregated ClusterOperator, if it exists yet.
pub async fn cluster_operator(client: &Client) -> Option<ClusterOperator> {
    Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .ok()
        .flatten()
}

/// `(status, reason, message)` of a PO condition for its current generation.
#[must_use]
pub fn po_condition(po: &PlatformOperator, type_: &str) -> Option<(String, String, String)> {
    let status = po.status.as_ref()?;
    if status.observed_generation != po.metadata.generation {
        return None;
    }
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// `(status, reason, message)` of a ClusterOperator condition.
#[must_use]
pub fn co_condition(co: &ClusterOperator, type_: &str) -> Option<(String, String, String)> {
    co.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// The `operator` version the ClusterOperator reports.
#[must_use]
pub fn co_version(co: &ClusterOperator) -> Option<String> {
    co.status
        .as_ref()?
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.clone())
}

/// The PO table and the ClusterOperator block, as one text.
#[must_use]
pub fn render(pos: &[PlatformOperator], co: Option<&ClusterOperator>) -> String {
    let cell = |po: &PlatformOperator, t: &str| {
        po_condition(po, t).map_or_else(|| "-".to_owned(), |c| c.0)
    };
    let mut rows = vec![
        [
            "NAME",
            "INSTALLED",
            "PIN",
            "Installed",
            "Progressing",
            "Upgradeable",
            "MESSAGE",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for po in pos {
        let status = po.status.clone().unwrap_or_default();
        let mut version = status
            .installed_bundle
            .as_ref()
            .map_or_else(|| "-".to_owned(), |b| b.version.clone());
        if let Some(desired) = &status.desired_bundle {
            let _ = write!(version, " -> {}", desired.version);
        }
        let pin = status
            .pin
            .as_ref()
            .map_or_else(|| "-".to_owned(), |p| format!("{} ({})", p.range, p.reason));
        let message = ["Installed", "Progressing", "Upgradeable"]
            .iter()
            .filter_map(|t| po_condition(po, t))
            .find(|(s, r, _)| s != "True" || r != "InstallSucceeded")
            .or_else(|| po_condition(po, "Installed"))
            .map(|(_, r, m)| first_line(&format!("{r}: {m}"), 90))
            .unwrap_or_default();
        rows.push(vec![
            po.name_any(),
            version,
            pin,
            cell(po, "Installed"),
            cell(po, "Progressing"),
            cell(po, "Upgradeable"),
            message,
        ]);
    }
    let mut out = table(&rows);
    match co {
        None => out.push_str(&format!(
            "ClusterOperator {AGGREGATED_CLUSTER_OPERATOR}: not created yet\n"
        )),
        Some(co) => {
            let version = co_version(co).unwrap_or_else(|| "not reported".into());
            let _ = writeln!(
                out,
                "ClusterOperator {AGGREGATED_CLUSTER_OPERATOR} (versions.operator: {version})"
            );
            let mut rows = Vec::new();
            for t in ["Available", "Progressing", "Degraded", "Upgradeable"] {
                let (s, r, m) = co_condition(co, t)
                    .unwrap_or_else(|| ("(missing)".into(), String::new(), String::new()));
                let mut lines = m.lines();
                rows.push(vec![
                    format!("  {t}"),
                    s,
                    r,
                    first_line(lines.next().unwrap_or_default(), 110),
                ]);
                for line in lines {
                    rows.push(vec![
                        String::new(),
                        String::new(),
                        String::new(),
                        first_line(line, 110),
                    ]);
                }
            }
            out.push_str(&table(&rows));
        }
    }
    out
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || text.lines().nth(1).is_some() {
        out.push_str(" …");
    }
    out
}

fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// What was last seen of a PO: its printed pin and its last move (target, settled).
type Seen = (Option<String>, Option<(String, bool)>);

/// Prints a line whenever a PO's move starts or settles, or its pin changes.
pub struct HopLog {
    started: Instant,
    seen: BTreeMap<String, Seen>,
    /// Every move seen, as `(po, from, to)`, for the summary.
    pub moves: Vec<(String, Option<String>, String)>,
}

impl HopLog {
    #[must_use]
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            seen: BTreeMap::new(),
            moves: Vec::new(),
        }
    }

    /// Compares with what was last seen and prints the differences.
    pub fn observe(&mut self, pos: &[PlatformOperator]) {
        for po in pos {
            let name = po.name_any();
            let status = po.status.clone().unwrap_or_default();
            let pin = status
                .pin
                .as_ref()
                .map(|p| format!("{} ({})", p.range, p.reason));
            let hop = status
                .active_hop
                .as_ref()
                .map(|h| (h.to.clone(), h.settled));
            let entry = self.seen.entry(name.clone()).or_insert((None, None));
            let at = self.started.elapsed().as_secs_f32();
            if pin != entry.0
                && let Some(pin) = &pin
            {
                println!("[{at:6.1}s] {name}: pin {pin}");
            }
            if hop != entry.1
                && let Some(h) = status.active_hop.as_ref()
            {
                let from = h.from.clone();
                let moved = entry.1.as_ref().is_none_or(|(to, _)| *to != h.to);
                if moved {
                    self.moves.push((name.clone(), from.clone(), h.to.clone()));
                    let from = from.unwrap_or_else(|| "nothing".into());
                    println!("[{at:6.1}s] {name}: move {from} -> {} started", h.to);
                }
                if h.settled {
                    println!("[{at:6.1}s] {name}: move to {} settled", h.to);
                } else if let Some(waiting) = &h.waiting_for
                    && !moved
                {
                    println!("[{at:6.1}s] {name}: waiting for {waiting}");
                }
            }
            *entry = (pin, hop);
        }
    }
}
