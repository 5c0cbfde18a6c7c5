//! Prometheus metrics: one [`MetricsRegistry`] per process — owned by
//! whoever serves `/metrics`, never global — and the metric families, grouped by the
//! process that records them.
//!
//! * [`GatewayMetrics`]: what a gateway records on its own paths — gate decisions,
//!   heartbeat renewals and refusals, transient store failures, downstream restarts
//!   and quarantine, HTTP sessions, the forwarded-call and gate-time histograms.
//!   Declared here so the gateway wiring only has to record into it.
//! * [`FleetMetrics`]: what anyone who looks at the store can measure — members by
//!   health, workers by state, the fleet gate — plus the dashboard's own refreshes.
//!
//! A process registers only the groups it records, so `/metrics` never shows a
//! family that stays at zero because nothing in that process could move it.
//! Every name carries the `fleetgate_` prefix; counters end in `_total`.

mod store;

pub use store::MeteredStore;

use fleetgate_gateway::{Exposition, GatewayObserver};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

/// `Content-Type` of the Prometheus text format (0.0.4), the default answer.
pub const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// `Content-Type` of OpenMetrics text, answered when the scraper asks for it.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry behind one `/metrics` endpoint.
#[derive(Debug)]
pub struct MetricsRegistry(Registry);

impl Default for MetricsRegistry {
    fn default() -> Self {
        Self(Registry::with_prefix("fleetgate"))
    }
}

impl MetricsRegistry {
    /// Encode every registered family. `openmetrics` selects OpenMetrics text
    /// (ends in `# EOF`); otherwise the Prometheus text format 0.0.4.
    pub fn encode(&self, openmetrics: bool) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.0)?;
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.0)?;
        }
        Ok(out)
    }

    /// Whether an `Accept` header asks for OpenMetrics (Prometheus itself does).
    pub fn wants_openmetrics(accept: Option<&str>) -> bool {
        accept.is_some_and(|a| a.contains("application/openmetrics-text"))
    }
}

/// Labels of a gate decision. Literals and a shared profile name: counting a decision
/// allocates nothing once its series exists.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `read_only` or `mutating`.
    pub tool_class: &'static str,
    /// The blocker literal, or `none` for an allowed call.
    pub blocker: &'static str,
    /// The deciding gateway's profile.
    pub profile: Arc<str>,
}

/// Labels of a refused renewal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BlockerLabels {
    /// The blocker literal (`worker_fenced`, `session_attachment_missing`).
    pub blocker: &'static str,
}

/// What a gateway records. Cloning shares the same series.
#[derive(Clone, Debug)]
pub struct GatewayMetrics {
    /// `fleetgate_gate_decisions_total{tool_class, blocker, profile}`.
    pub gate_decisions: Family<DecisionLabels, Counter>,
    /// `fleetgate_heartbeat_renewals_total`: renewals the store accepted.
    pub renewals: Counter,
    /// `fleetgate_heartbeat_refusals_total{blocker}`: renewals the store refused.
    pub refusals: Family<BlockerLabels, Counter>,
    /// `fleetgate_store_transient_failures_total`: busy or unavailable store answers.
    pub store_transient_failures: Counter,
    /// `fleetgate_downstream_restarts_total`.
    pub downstream_restarts: Counter,
    /// `fleetgate_downstream_quarantined`: downstreams whose flow is quarantined now (each
    /// client attachment has its own downstream: over stdio 0 or 1).
    pub downstream_quarantined: Gauge,
    /// `fleetgate_http_sessions_open`: Streamable HTTP attachments (sessions and
    /// stateless clients) open.
    pub http_sessions_open: Gauge,
    /// `fleetgate_forwarded_call_duration_seconds`: a forwarded `tools/call`, gate excluded.
    pub forwarded_call_seconds: Histogram,
    /// `fleetgate_gate_duration_seconds`: the gate's own time per decision.
    pub gate_seconds: Histogram,
    /// `fleetgate_notifications_dropped_total{direction}`: notifications dropped because
    /// their receiver stopped reading and the channel's queue was full.
    pub notifications_dropped: Family<DirectionLabels, Counter>,
    /// What its approval notifier records.
    pub notify: NotifyMetrics,
    /// `fleetgate_shadow_flips_total{from, to, rule, tool}`: live decisions the shadow
    /// candidate would have made otherwise.
    pub shadow_flips: Family<ShadowLabels, Counter>,
}

/// What an approval notifier (`[[approvals.notify]]`) records, in whichever process runs
/// one: a gateway or the dashboard.
#[derive(Clone, Debug, Default)]
pub struct NotifyMetrics {
    /// `fleetgate_notify_deliveries_total{target, outcome}`: approval events sent to a
    /// target (`delivered`, `retried`, `failed`: dropped after its last retry).
    pub deliveries: Family<NotifyLabels, Counter>,
    /// `fleetgate_notify_owed_events{target}`: the events a target still owes (its
    /// receiver down, the notifier retrying).
    pub owed: Family<TargetLabels, Gauge>,
}

impl NotifyMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "notify_deliveries",
            "Approval events sent to a notification target, by target and outcome (delivered, retried, failed)",
            self.deliveries.clone(),
        );
        r.register(
            "notify_owed_events",
            "Approval events a notification target still owes, by target (its receiver down, retried)",
            self.owed.clone(),
        );
    }
}

/// Labels of a notification delivery.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotifyLabels {
    /// The target's name.
    pub target: String,
    /// `delivered`, `retried`, `failed`.
    pub outcome: &'static str,
}

/// Labels of a notification target.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    /// The target's name.
    pub target: String,
}

/// Labels of a shadow flip.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// The running rules' outcome (`allowed`, `refused`).
    pub from: &'static str,
    /// The candidate's.
    pub to: &'static str,
    /// The candidate rule (or invariant) that decided.
    pub rule: String,
    /// The tool.
    pub tool: String,
}

/// Labels of a dropped notification.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `to_client` or `to_downstream`.
    pub direction: &'static str,
}

impl GatewayMetrics {
    /// Register the gateway's families.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let m = Self {
            gate_decisions: Family::default(),
            renewals: Counter::default(),
            refusals: Family::default(),
            store_transient_failures: Counter::default(),
            downstream_restarts: Counter::default(),
            downstream_quarantined: Gauge::default(),
            http_sessions_open: Gauge::default(),
            // 0.5 ms … 16 s: a forwarded call is a downstream round trip.
            forwarded_call_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            // 50 µs … 1.6 s: the gate is a store read and a pure decision.
            gate_seconds: Histogram::new(exponential_buckets(0.00005, 2.0, 16)),
            notifications_dropped: Family::default(),
            notify: NotifyMetrics::default(),
            shadow_flips: Family::default(),
        };
        let r = &mut registry.0;
        r.register(
            "gate_decisions",
            "Mutation-gate decisions by tool class, blocker and profile",
            m.gate_decisions.clone(),
        );
        r.register("heartbeat_renewals", "Worker lease renewals the store accepted", m.renewals.clone());
        r.register("heartbeat_refusals", "Worker lease renewals the store refused, by blocker", m.refusals.clone());
        r.register(
            "store_transient_failures",
            "Store operations that failed transiently (busy, unavailable)",
            m.store_transient_failures.clone(),
        );
        r.register(
            "downstream_restarts",
            "Restarts of the supervised downstream MCP server",
            m.downstream_restarts.clone(),
        );
        r.register(
            "downstream_quarantined",
            "Downstream servers whose flow is quarantined now (one per client attachment)",
            m.downstream_quarantined.clone(),
        );
        r.register(
            "http_sessions_open",
            "Streamable HTTP attachments open (sessions and stateless clients)",
            m.http_sessions_open.clone(),
        );
        r.register(
            "forwarded_call_duration_seconds",
            "Time of a forwarded tools/call at the downstream, in seconds",
            m.forwarded_call_seconds.clone(),
        );
        r.register(
            "gate_duration_seconds",
            "The mutation gate's own time per decision, in seconds",
            m.gate_seconds.clone(),
        );
        r.register(
            "notifications_dropped",
            "Notifications dropped because the receiving side stopped reading and the queue was full, by direction",
            m.notifications_dropped.clone(),
        );
        m.notify.register(r);
        r.register(
            "shadow_flips",
            "Live decisions the shadow candidate would have made otherwise, by outcome, candidate rule and tool",
            m.shadow_flips.clone(),
        );
        m
    }

    /// Count one gate decision.
    pub fn decided(&self, tool_class: &'static str, blocker: Option<&'static str>, profile: &Arc<str>) {
        let labels = DecisionLabels { tool_class, blocker: blocker.unwrap_or("none"), profile: profile.clone() };
        self.gate_decisions.get_or_create(&labels).inc();
    }

    /// Count one refused renewal.
    pub fn refused(&self, blocker: &'static str) {
        self.refusals.get_or_create(&BlockerLabels { blocker }).inc();
    }
}

/// A gateway process's `/metrics`: its registry with the [`GatewayMetrics`] families, and
/// the [`GatewayObserver`] the gateway engine reports forwarded calls, downstream restarts
/// and quarantines and HTTP sessions to.
#[derive(Debug)]
pub struct GatewayExposition {
    registry: MetricsRegistry,
    metrics: GatewayMetrics,
}

impl Default for GatewayExposition {
    fn default() -> Self {
        let mut registry = MetricsRegistry::default();
        let metrics = GatewayMetrics::register(&mut registry);
        Self { registry, metrics }
    }
}

impl GatewayExposition {
    /// The families, to record into (cloning shares the series).
    pub fn metrics(&self) -> &GatewayMetrics {
        &self.metrics
    }

    /// The registry, encoded.
    pub fn encode(&self, openmetrics: bool) -> Result<String, std::fmt::Error> {
        self.registry.encode(openmetrics)
    }
}

impl GatewayObserver for GatewayExposition {
    fn forwarded_call(&self, elapsed: Duration) {
        self.metrics.forwarded_call_seconds.observe(elapsed.as_secs_f64());
    }

    fn downstream_restarted(&self) {
        self.metrics.downstream_restarts.inc();
    }

    fn downstream_quarantined(&self, quarantined: bool) {
        if quarantined {
            self.metrics.downstream_quarantined.inc();
        } else {
            self.metrics.downstream_quarantined.dec();
        }
    }

    fn notification_dropped(&self, direction: &'static str) {
        self.metrics.notifications_dropped.get_or_create(&DirectionLabels { direction }).inc();
    }

    fn http_sessions_open(&self, open: usize) {
        self.metrics.http_sessions_open.set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    fn exposition(&self, accept: Option<&str>) -> Option<Exposition> {
        let openmetrics = MetricsRegistry::wants_openmetrics(accept);
        let content_type = if openmetrics { OPENMETRICS_TEXT } else { PROMETHEUS_TEXT };
        match self.encode(openmetrics) {
            Ok(body) => Some(Exposition { content_type, body }),
            Err(e) => {
                tracing::warn!(error = %e, "the metrics could not be encoded");
                None
            }
        }
    }
}

/// Labels of a member count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthLabels {
    /// `running`, `missing`, `stale`, `unexpected`, `unknown`.
    pub health: String,
}

/// Labels of a worker count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerStateLabels {
    /// `live`, `expired` (active row, not live) or `stopped`.
    pub state: String,
}

/// The fleet as numbers, as one look at the store and the host sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetGauges {
    /// Roster members.
    pub configured_members: i64,
    /// Rows and placeholders by health, every health named (zeros included).
    pub members_by_health: Vec<(&'static str, i64)>,
    /// Workers by state, every state named (zeros included).
    pub workers_by_state: Vec<(&'static str, i64)>,
    /// The fleet-wide mutation gate is open.
    pub gate_open: bool,
    /// Observed fleet processes no running row claims.
    pub unregistered_processes: i64,
    /// Profiles with more than one running instance.
    pub duplicate_profiles: i64,
    /// Hard runtime diagnostics.
    pub hard_diagnostics: i64,
    /// Refusals in the audit window.
    pub recent_refusals: i64,
}

/// What the dashboard measures: the fleet gauges and its own refreshes.
#[derive(Clone, Debug)]
pub struct FleetMetrics {
    configured: Gauge,
    members: Family<HealthLabels, Gauge>,
    workers: Family<WorkerStateLabels, Gauge>,
    gate_open: Gauge,
    unregistered: Gauge,
    duplicates: Gauge,
    hard_diagnostics: Gauge,
    recent_refusals: Gauge,
    /// `fleetgate_dashboard_refreshes_total`: looks at the store and host.
    pub refreshes: Counter,
    /// `fleetgate_dashboard_updates_total`: refreshes that changed the page.
    pub updates: Counter,
    /// `fleetgate_dashboard_refresh_duration_seconds`.
    pub refresh_seconds: Histogram,
    /// `fleetgate_dashboard_event_streams_open`: connected `/events` clients.
    pub event_streams: Gauge,
    /// What its approval notifier records, as the gateway's.
    pub notify: NotifyMetrics,
}

impl FleetMetrics {
    /// Register the fleet and dashboard families.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let m = Self {
            configured: Gauge::default(),
            members: Family::default(),
            workers: Family::default(),
            gate_open: Gauge::default(),
            unregistered: Gauge::default(),
            duplicates: Gauge::default(),
            hard_diagnostics: Gauge::default(),
            recent_refusals: Gauge::default(),
            notify: NotifyMetrics::default(),
            refreshes: Counter::default(),
            updates: Counter::default(),
            // 1 ms … 4 s: a /proc scan, signal-0 probes and three store reads.
            refresh_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 13)),
            event_streams: Gauge::default(),
        };
        let r = &mut registry.0;
        r.register("fleet_configured_members", "Members in the roster", m.configured.clone());
        m.notify.register(r);
        r.register("fleet_members", "Roster members and runtime rows by health", m.members.clone());
        r.register("fleet_workers", "Worker rows by state (live, expired, stopped)", m.workers.clone());
        r.register("fleet_gate_open", "1 when the fleet-wide mutation gate is open, else 0", m.gate_open.clone());
        r.register(
            "fleet_unregistered_processes",
            "Observed fleet processes that no running row claims",
            m.unregistered.clone(),
        );
        r.register(
            "fleet_duplicate_profiles",
            "Profiles with more running instances than the member declares replicas (one unless declared)",
            m.duplicates.clone(),
        );
        r.register(
            "fleet_hard_diagnostics",
            "Hard runtime diagnostics (each refuses mutations)",
            m.hard_diagnostics.clone(),
        );
        r.register(
            "fleet_recent_refusals",
            "Gate refusals among the audit entries the dashboard reads",
            m.recent_refusals.clone(),
        );
        r.register("dashboard_refreshes", "Looks at the store and the host", m.refreshes.clone());
        r.register("dashboard_updates", "Refreshes that changed what the page shows", m.updates.clone());
        r.register(
            "dashboard_refresh_duration_seconds",
            "Time of one look at the store and the host, in seconds",
            m.refresh_seconds.clone(),
        );
        r.register("dashboard_event_streams_open", "Connected /events clients", m.event_streams.clone());
        m
    }

    /// Set every fleet gauge from one look.
    pub fn set(&self, g: &FleetGauges) {
        self.configured.set(g.configured_members);
        for (health, n) in &g.members_by_health {
            self.members.get_or_create(&HealthLabels { health: (*health).to_owned() }).set(*n);
        }
        for (state, n) in &g.workers_by_state {
            self.workers.get_or_create(&WorkerStateLabels { state: (*state).to_owned() }).set(*n);
        }
        self.gate_open.set(i64::from(g.gate_open));
        self.unregistered.set(g.unregistered_processes);
        self.duplicates.set(g.duplicate_profiles);
        self.hard_diagnostics.set(g.hard_diagnostics);
        self.recent_refusals.set(g.recent_refusals);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(registry: &MetricsRegistry) -> prometheus_parse::Scrape {
        let text = registry.encode(false).unwrap();
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
    }

    fn value(scrape: &prometheus_parse::Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("no sample {name} {label:?}"));
        match sample.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn gateway_families_record_and_parse() {
        let exposition = GatewayExposition::default();
        let m = exposition.metrics();
        let profile: Arc<str> = "prgs-author".into();
        m.decided("mutating", Some("fleet_inventory_blocked"), &profile);
        m.decided("mutating", Some("fleet_inventory_blocked"), &profile);
        m.decided("read_only", None, &profile);
        m.renewals.inc();
        m.refused("worker_fenced");
        m.gate_seconds.observe(0.0002);
        let observer: &dyn GatewayObserver = &exposition;
        observer.http_sessions_open(3);
        observer.forwarded_call(Duration::from_millis(4));
        observer.downstream_restarted();
        observer.downstream_quarantined(true);
        observer.downstream_quarantined(true);
        observer.downstream_quarantined(false);
        observer.notification_dropped("to_client");
        observer.notification_dropped("to_client");
        observer.notification_dropped("to_downstream");
        let answer = observer.exposition(Some("text/plain")).unwrap();
        assert_eq!(answer.content_type, PROMETHEUS_TEXT);
        let s = prometheus_parse::Scrape::parse(answer.body.lines().map(|l| Ok(l.to_owned()))).unwrap();
        let blocked = ("blocker", "fleet_inventory_blocked");
        assert_eq!(value(&s, "fleetgate_gate_decisions_total", Some(blocked)), 2.0);
        assert_eq!(value(&s, "fleetgate_gate_decisions_total", Some(("blocker", "none"))), 1.0);
        assert_eq!(value(&s, "fleetgate_heartbeat_renewals_total", None), 1.0);
        assert_eq!(value(&s, "fleetgate_heartbeat_refusals_total", Some(("blocker", "worker_fenced"))), 1.0);
        assert_eq!(value(&s, "fleetgate_http_sessions_open", None), 3.0);
        assert_eq!(value(&s, "fleetgate_downstream_restarts_total", None), 1.0);
        assert_eq!(value(&s, "fleetgate_downstream_quarantined", None), 1.0);
        assert_eq!(value(&s, "fleetgate_forwarded_call_duration_seconds_count", None), 1.0);
        assert_eq!(value(&s, "fleetgate_notifications_dropped_total", Some(("direction", "to_client"))), 2.0);
        assert_eq!(value(&s, "fleetgate_notifications_dropped_total", Some(("direction", "to_downstream"))), 1.0);
        assert!(s.samples.iter().any(|x| x.metric.starts_with("fleetgate_gate_duration_seconds")));
        let openmetrics = observer.exposition(Some("application/openmetrics-text; version=1.0.0")).unwrap();
        assert_eq!(openmetrics.content_type, OPENMETRICS_TEXT);
    }

    #[test]
    fn fleet_gauges_replace_and_zeros_stay_named() {
        let mut registry = MetricsRegistry::default();
        let m = FleetMetrics::register(&mut registry);
        let mut g = FleetGauges {
            configured_members: 2,
            members_by_health: vec![("running", 2), ("stale", 0)],
            workers_by_state: vec![("live", 1), ("expired", 0)],
            gate_open: true,
            ..FleetGauges::default()
        };
        m.set(&g);
        g.members_by_health = vec![("running", 1), ("stale", 1)];
        g.gate_open = false;
        m.set(&g);
        let s = scrape(&registry);
        assert_eq!(value(&s, "fleetgate_fleet_members", Some(("health", "running"))), 1.0);
        assert_eq!(value(&s, "fleetgate_fleet_members", Some(("health", "stale"))), 1.0);
        assert_eq!(value(&s, "fleetgate_fleet_workers", Some(("state", "expired"))), 0.0);
        assert_eq!(value(&s, "fleetgate_fleet_gate_open", None), 0.0);
        assert!(registry.encode(true).unwrap().ends_with("# EOF\n"), "OpenMetrics ends in # EOF");
        assert!(MetricsRegistry::wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
        )));
        assert!(!MetricsRegistry::wants_openmetrics(Some("text/plain")));
    }
}
