//! Worker records, the fenced-renewal contract, and liveness.
//!
//! The store performs the renewal as one guarded `UPDATE`; when it changes no
//! row, [`explain_refusal`] turns the row as read back in the same transaction
//! into the answer, in a fixed order: existence, expectations, status, epoch.

use crate::blocker::BlockerKind;
use crate::client::normalize_client_name;
use crate::time::Timestamp;
use serde::Serialize;
use std::fmt;

/// Row status. A stopped row is history: it renews nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerStatus {
    /// Attached and renewing.
    Active,
    /// Deregistered by an orderly shutdown.
    Stopped,
}

impl WorkerStatus {
    /// The stored literal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Stopped => "stopped",
        }
    }

    /// Parse the stored literal.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "stopped" => Some(Self::Stopped),
            _ => None,
        }
    }
}

/// Who a worker is: its identity, the client and session it serves, the generation that
/// owns it, its member and its process. A [`Registration`] states it; the [`WorkerRecord`]
/// keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerIds {
    /// Opaque identity, unique per registration (a fresh one from [`worker_identity`]).
    pub worker_identity: String,
    /// Client name: stored normalised (a registration's is as presented).
    pub client_name: String,
    /// The client's instance id.
    pub client_instance_id: String,
    /// The client session this worker serves.
    pub session_id: String,
    /// The generation that currently owns the row.
    pub generation_id: String,
    /// Role (`author`, `reviewer`, …).
    pub role: String,
    /// Profile (`prgs-author`, …).
    pub profile: String,
    /// The server process, when known.
    pub pid: Option<i64>,
}

/// One worker row as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerRecord {
    /// Who it is (flattened: the JSON keeps its keys at the top level).
    #[serde(flatten)]
    pub ids: WorkerIds,
    /// Registration time.
    pub started_at: Timestamp,
    /// Last accepted renewal (equals `started_at` at registration).
    pub last_heartbeat_at: Timestamp,
    /// Lease length.
    pub heartbeat_ttl_seconds: f64,
    /// Fencing epoch; bumped by every generation claim.
    pub fencing_epoch: i64,
    /// Active or stopped.
    pub status: WorkerStatus,
    /// Accepted renewals since registration.
    pub renewal_count: i64,
}

/// What `register` is given.
#[derive(Clone, Debug, PartialEq)]
pub struct Registration {
    /// Who registers.
    pub ids: WorkerIds,
    /// Lease length in seconds (positive).
    pub heartbeat_ttl_seconds: f64,
}

/// The longest identity field (client name, session, profile, …) a registration may carry,
/// in characters: every listing and refusal quotes these, so they are bounded at the door.
pub const MAX_FIELD_CHARS: usize = 256;

/// The lease TTLs accepted, in seconds: a second to a week. Shorter renews faster than a
/// store can answer; longer keeps a dead worker's lease for days.
pub const TTL_RANGE_SECONDS: std::ops::RangeInclusive<f64> = 1.0..=604_800.0;

/// Whether `c` is invisible or changes the direction of the text around it
/// ([`crate::text::invisible`]: format characters, default-ignorable code points, separators
/// other than the space, private use). A name holding one can read as another name, or
/// reverse what follows it, in a listing.
pub fn is_invisible_or_bidi(c: char) -> bool {
    crate::text::invisible(c)
}

/// An identity field as it may be stored: at most [`MAX_FIELD_CHARS`], no control characters
/// (a newline or a terminal escape in a name would forge lines in an operator's terminal) and
/// no invisible or direction-changing character ([`is_invisible_or_bidi`]: `gitea\u{200B}-author`
/// would list as `gitea-author`, U+202E would show the rest of a line reversed).
pub fn check_field(name: &str, value: &str) -> Result<(), RegistrationError> {
    if value.chars().count() > MAX_FIELD_CHARS {
        return Err(RegistrationError::TooLong(name.to_owned()));
    }
    if value.chars().any(char::is_control) {
        return Err(RegistrationError::Control(name.to_owned()));
    }
    if let Some(c) = value.chars().find(|c| is_invisible_or_bidi(*c)) {
        return Err(RegistrationError::Invisible(name.to_owned(), c));
    }
    Ok(())
}

/// Why a registration, or one of its fields, is refused.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The field (named) is longer than [`MAX_FIELD_CHARS`].
    TooLong(String),
    /// The field holds a control character.
    Control(String),
    /// The field holds an invisible or direction-changing character.
    Invisible(String, char),
    /// The field must not be empty.
    Empty(&'static str),
    /// The TTL is outside [`TTL_RANGE_SECONDS`].
    Ttl(f64),
    /// The pid is not positive.
    Pid(i64),
}

impl std::fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong(name) => write!(f, "{name} is longer than {MAX_FIELD_CHARS} characters"),
            Self::Control(name) => write!(f, "{name} contains a control character"),
            Self::Invisible(name, c) => {
                write!(f, "{name} contains an invisible or direction-changing character (U+{:04X})", u32::from(*c))
            }
            Self::Empty(name) => write!(f, "{name} must not be empty"),
            Self::Ttl(ttl) => write!(f, "heartbeat_ttl_seconds must be 1 to 604800 seconds, got {ttl}"),
            Self::Pid(pid) => write!(f, "pid must be positive, got {pid}"),
        }
    }
}

impl std::error::Error for RegistrationError {}

/// A lease TTL in [`TTL_RANGE_SECONDS`].
pub fn check_ttl(ttl: f64) -> Result<(), RegistrationError> {
    if !TTL_RANGE_SECONDS.contains(&ttl) {
        return Err(RegistrationError::Ttl(ttl));
    }
    Ok(())
}

/// A name a peer sent (an MCP `clientInfo.name`), made storable: control, invisible and
/// direction-changing characters dropped, cut to [`MAX_FIELD_CHARS`].
pub fn bounded_field(value: &str) -> String {
    value.chars().filter(|c| !c.is_control() && !is_invisible_or_bidi(*c)).take(MAX_FIELD_CHARS).collect()
}

impl Registration {
    /// Refuse a registration that could never renew or be found again.
    pub fn validate(&self) -> Result<(), RegistrationError> {
        let fields = [
            ("worker_identity", &self.ids.worker_identity),
            ("client_name", &self.ids.client_name),
            ("session_id", &self.ids.session_id),
            ("generation_id", &self.ids.generation_id),
            ("role", &self.ids.role),
            ("profile", &self.ids.profile),
        ];
        if let Some((name, _)) = fields.iter().find(|(_, v)| v.trim().is_empty()) {
            return Err(RegistrationError::Empty(name));
        }
        let with_instance = fields.iter().copied().chain([("client_instance_id", &self.ids.client_instance_id)]);
        for (name, value) in with_instance {
            check_field(name, value)?;
        }
        check_ttl(self.heartbeat_ttl_seconds)?;
        if let Some(pid) = self.ids.pid
            && pid <= 0
        {
            return Err(RegistrationError::Pid(pid));
        }
        Ok(())
    }

    /// The row a first registration writes at `now`.
    pub fn into_record(self, now: Timestamp) -> WorkerRecord {
        WorkerRecord {
            ids: WorkerIds { client_name: normalize_client_name(&self.ids.client_name), ..self.ids },
            started_at: now,
            last_heartbeat_at: now,
            heartbeat_ttl_seconds: self.heartbeat_ttl_seconds,
            fencing_epoch: 1,
            status: WorkerStatus::Active,
            renewal_count: 0,
        }
    }
}

/// The answer to `register`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegisterOutcome {
    /// The identity registered.
    pub worker_identity: String,
    /// The epoch the caller must present when renewing.
    pub fencing_epoch: i64,
    /// The stored (normalised) client name.
    pub client_name: String,
    /// False when the identity already existed: nothing was written.
    pub created: bool,
    /// Registration time of the row.
    pub started_at: Timestamp,
    /// Lease length of the row.
    pub heartbeat_ttl_seconds: f64,
}

impl RegisterOutcome {
    /// The outcome describing an existing or new row.
    pub fn of(row: &WorkerRecord, created: bool) -> Self {
        Self {
            worker_identity: row.ids.worker_identity.clone(),
            fencing_epoch: row.fencing_epoch,
            client_name: row.ids.client_name.clone(),
            created,
            started_at: row.started_at,
            heartbeat_ttl_seconds: row.heartbeat_ttl_seconds,
        }
    }
}

/// A renewal: the epoch always, every expectation optional.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct HeartbeatRequest {
    /// Whose row.
    pub worker_identity: String,
    /// The epoch the caller holds.
    pub fencing_epoch: i64,
    /// Refuse unless the row's session is this.
    pub expected_session_id: Option<String>,
    /// Refuse unless the row's generation is this.
    pub expected_generation_id: Option<String>,
    /// Refuse unless the row's client is this (compared normalised).
    pub expected_client_name: Option<String>,
    /// Refuse unless the row's pid is this.
    pub expected_pid: Option<i64>,
}

impl HeartbeatRequest {
    /// The client expectation as the row stores it.
    pub fn normalized_expected_client(&self) -> Option<String> {
        self.expected_client_name.as_deref().map(normalize_client_name)
    }
}

/// A field the renewal presented differently from the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftField {
    /// `session_id`
    SessionId,
    /// `generation_id`
    GenerationId,
    /// `client_name`
    ClientName,
    /// `pid`
    Pid,
}

impl DriftField {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SessionId => "session_id",
            Self::GenerationId => "generation_id",
            Self::ClientName => "client_name",
            Self::Pid => "pid",
        }
    }
}

/// A recorded or presented value in a drift entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FieldValue {
    /// Text fields.
    Text(String),
    /// The pid.
    Int(i64),
    /// Nothing recorded.
    Null,
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(s) => write!(f, "{s:?}"),
            Self::Int(n) => write!(f, "{n}"),
            Self::Null => f.write_str("null"),
        }
    }
}

/// One `(field, recorded, presented)` mismatch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Drift {
    /// Which expectation.
    pub field: DriftField,
    /// What the row holds.
    pub recorded: FieldValue,
    /// What the caller presented.
    pub presented: FieldValue,
}

/// The answer to a renewal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeartbeatOutcome {
    /// True only when `last_heartbeat_at` moved to `now`.
    pub renewed: bool,
    /// Null when renewed.
    pub blocker_kind: Option<BlockerKind>,
    /// Every mismatched expectation.
    pub expectation_drift: Vec<Drift>,
    /// Human-readable reasons, one per finding.
    pub reasons: Vec<String>,
}

impl HeartbeatOutcome {
    /// An accepted renewal.
    pub fn renewed() -> Self {
        Self { renewed: true, blocker_kind: None, expectation_drift: Vec::new(), reasons: Vec::new() }
    }

    /// A refusal is terminal for a supervisor: nothing it can do later changes it.
    pub fn is_terminal_refusal(&self) -> bool {
        !self.renewed && self.blocker_kind.is_some()
    }
}

/// Explain why a guarded renewal changed no row, from the row read back in the
/// same transaction. Order: existence, expectations, status, epoch.
pub fn explain_refusal(row: Option<&WorkerRecord>, req: &HeartbeatRequest) -> HeartbeatOutcome {
    let refuse = |kind, drift, reasons| HeartbeatOutcome {
        renewed: false,
        blocker_kind: Some(kind),
        expectation_drift: drift,
        reasons,
    };
    let Some(row) = row else {
        return refuse(
            BlockerKind::SessionAttachmentMissing,
            Vec::new(),
            vec![format!("no worker is registered as {}", req.worker_identity)],
        );
    };
    let drift = expectation_drift(row, req);
    if !drift.is_empty() {
        let reasons = drift
            .iter()
            .map(|d| format!("{} drift: recorded {}, presented {}", d.field.as_str(), d.recorded, d.presented))
            .collect();
        return refuse(BlockerKind::WorkerFenced, drift, reasons);
    }
    if row.status != WorkerStatus::Active {
        return refuse(
            BlockerKind::WorkerFenced,
            Vec::new(),
            vec![format!("worker {} is {}, not active", row.ids.worker_identity, row.status.as_str())],
        );
    }
    if row.fencing_epoch != req.fencing_epoch {
        return refuse(
            BlockerKind::WorkerFenced,
            Vec::new(),
            vec![format!("fencing epoch {} presented, the row holds epoch {}", req.fencing_epoch, row.fencing_epoch)],
        );
    }
    // The guarded update matched nothing, yet the row satisfies every guard:
    // only a concurrent writer between the two statements could do that, and
    // the transaction rules it out. Refuse rather than pretend.
    refuse(
        BlockerKind::WorkerFenced,
        Vec::new(),
        vec!["the renewal matched no row although every guard holds".to_owned()],
    )
}

/// Every supplied expectation that the row does not meet.
pub fn expectation_drift(row: &WorkerRecord, req: &HeartbeatRequest) -> Vec<Drift> {
    let mut drift = Vec::new();
    let mut text = |field, recorded: &str, presented: Option<&str>| {
        if let Some(p) = presented
            && p != recorded
        {
            drift.push(Drift {
                field,
                recorded: FieldValue::Text(recorded.to_owned()),
                presented: FieldValue::Text(p.to_owned()),
            });
        }
    };
    text(DriftField::SessionId, &row.ids.session_id, req.expected_session_id.as_deref());
    text(DriftField::GenerationId, &row.ids.generation_id, req.expected_generation_id.as_deref());
    text(DriftField::ClientName, &row.ids.client_name, req.normalized_expected_client().as_deref());
    if let Some(p) = req.expected_pid
        && row.ids.pid != Some(p)
    {
        drift.push(Drift {
            field: DriftField::Pid,
            recorded: row.ids.pid.map_or(FieldValue::Null, FieldValue::Int),
            presented: FieldValue::Int(p),
        });
    }
    drift
}

/// The answer to `claim_generation`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClaimOutcome {
    /// Whose row.
    pub worker_identity: String,
    /// The epoch now fenced off.
    pub previous_epoch: i64,
    /// The epoch the new generation must present.
    pub fencing_epoch: i64,
    /// The new generation.
    pub generation_id: String,
    /// Renewals accepted before the claim took effect.
    pub renewal_count: i64,
}

/// Liveness of a row as of `now`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Liveness {
    /// Fresh and the pid is alive.
    pub live: bool,
    /// `now - last_heartbeat_at <= ttl`.
    pub heartbeat_fresh: bool,
    /// Seconds since the last accepted renewal.
    pub heartbeat_age_seconds: f64,
}

/// Fresh iff the last renewal is within the TTL; live iff fresh and the pid is
/// alive. A live pid never keeps a silent worker live.
pub fn is_live(row: &WorkerRecord, now: Timestamp, pid_alive: bool) -> Liveness {
    let age = now.seconds_since(row.last_heartbeat_at) as f64;
    let fresh = age <= row.heartbeat_ttl_seconds;
    Liveness {
        live: fresh && pid_alive && row.status == WorkerStatus::Active,
        heartbeat_fresh: fresh,
        heartbeat_age_seconds: age,
    }
}

/// A worker row with its liveness as of a moment, as `fleetgate worker show|list` shows it.
#[derive(Debug, Serialize)]
pub struct WorkerShown<'a> {
    /// The row.
    #[serde(flatten)]
    pub row: &'a WorkerRecord,
    /// Live: fresh, its pid alive, active.
    pub live: bool,
    /// Its last renewal within the TTL.
    pub heartbeat_fresh: bool,
    /// Seconds since its last renewal.
    pub heartbeat_age_seconds: f64,
    /// `alive`, `dead` or `unknown`.
    pub pid_liveness: &'static str,
}

impl<'a> WorkerShown<'a> {
    /// `row` as of `now`, its pid probed as `probe`.
    pub fn new(row: &'a WorkerRecord, now: Timestamp, probe: crate::inventory::PidProbe) -> Self {
        let l = is_live(row, now, probe.is_alive());
        let pid_liveness = match probe {
            crate::inventory::PidProbe::Alive => "alive",
            crate::inventory::PidProbe::Dead => "dead",
            crate::inventory::PidProbe::Unknown => "unknown",
        };
        Self {
            row,
            live: l.live,
            heartbeat_fresh: l.heartbeat_fresh,
            heartbeat_age_seconds: l.heartbeat_age_seconds,
            pid_liveness,
        }
    }
}

/// A fresh opaque identity. `nonce` comes from the shell's entropy source, so
/// two calls never collide even for one client, session and second.
pub fn worker_identity(client: &str, session: &str, now: Timestamp, nonce: u128) -> String {
    let client: String =
        normalize_client_name(client).chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(24).collect();
    let _ = session; // the session is recorded on the row, not leaked into the id
    format!("wrk-{client}-{}-{nonce:032x}", now.unix())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn row() -> WorkerRecord {
        row_at(Timestamp::from_unix(1_000))
    }

    /// A worker row (TTL 900 s) registered, and last heard from, at `at`.
    pub(crate) fn row_at(at: Timestamp) -> WorkerRecord {
        Registration {
            ids: WorkerIds {
                worker_identity: "w1".into(),
                client_name: "claude".into(),
                client_instance_id: "inst".into(),
                session_id: "sess-0001".into(),
                generation_id: "gen-0001".into(),
                role: "author".into(),
                profile: "prgs-author".into(),
                pid: Some(4242),
            },
            heartbeat_ttl_seconds: 900.0,
        }
        .into_record(at)
    }

    /// A worker row's JSON keeps its keys at the top level in the order they always had: who
    /// it is is one struct in Rust (shared with a registration), flattened on the wire.
    #[test]
    fn a_worker_row_serialises_flat_in_its_old_key_order() {
        let text = serde_json::to_string(&row()).unwrap();
        let keys = "worker_identity client_name client_instance_id session_id generation_id role profile pid \
                    started_at last_heartbeat_at heartbeat_ttl_seconds fencing_epoch status renewal_count";
        let at: Vec<usize> =
            keys.split_whitespace().map(|k| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX)).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(!text.contains("\"ids\""), "{text}");
    }

    #[test]
    fn registration_normalises_and_starts_at_epoch_one() {
        let r = row();
        assert_eq!(r.ids.client_name, "claude_code");
        assert_eq!(r.started_at, r.last_heartbeat_at);
        assert_eq!(r.fencing_epoch, 1);
    }

    #[test]
    fn refusal_order_is_existence_expectations_status_epoch() {
        let req = HeartbeatRequest {
            worker_identity: "w1".into(),
            fencing_epoch: 7,
            expected_pid: Some(1),
            ..Default::default()
        };
        assert_eq!(explain_refusal(None, &req).blocker_kind, Some(BlockerKind::SessionAttachmentMissing));
        let mut r = row();
        r.status = WorkerStatus::Stopped;
        let out = explain_refusal(Some(&r), &req);
        assert_eq!(out.blocker_kind, Some(BlockerKind::WorkerFenced));
        assert_eq!(out.expectation_drift.len(), 1, "expectations are reported before status");
        let req = HeartbeatRequest { expected_pid: None, ..req };
        assert!(explain_refusal(Some(&r), &req).reasons[0].contains("stopped"));
        let out = explain_refusal(Some(&row()), &req);
        assert!(out.reasons[0].contains("epoch 7"), "{:?}", out.reasons);
    }

    #[test]
    fn drift_lists_every_mismatch_with_recorded_and_presented() {
        let req = HeartbeatRequest {
            worker_identity: "w1".into(),
            fencing_epoch: 1,
            expected_session_id: Some("other".into()),
            expected_generation_id: Some("gen-0001".into()),
            expected_client_name: Some("claude_desktop".into()),
            expected_pid: Some(9999),
        };
        let drift = expectation_drift(&row(), &req);
        assert_eq!(drift.iter().map(|d| d.field).collect::<Vec<_>>(), [DriftField::SessionId, DriftField::Pid]);
        assert_eq!(drift[1].recorded, FieldValue::Int(4242));
        assert_eq!(drift[1].presented, FieldValue::Int(9999));
    }

    #[test]
    fn liveness_needs_freshness_and_a_live_pid() {
        let r = row();
        let at_ttl = r.last_heartbeat_at.plus_seconds(900);
        assert!(is_live(&r, at_ttl, true).live);
        assert!(!is_live(&r, at_ttl, false).live);
        let past = is_live(&r, at_ttl.plus_seconds(1), true);
        assert!(!past.live && !past.heartbeat_fresh);
        assert_eq!(past.heartbeat_age_seconds, 901.0);
    }

    #[test]
    fn identities_differ_by_nonce() {
        let now = Timestamp::from_unix(5);
        assert_ne!(worker_identity("claude", "s", now, 1), worker_identity("claude", "s", now, 2));
        assert!(worker_identity("Claude Code!", "s", now, 1).starts_with("wrk-claude_code-5-"));
    }

    #[test]
    fn invisible_and_direction_changing_characters_are_refused_like_control_characters() {
        for c in [
            '\u{202E}',
            '\u{2066}',
            '\u{2069}',
            '\u{200B}',
            '\u{200D}',
            '\u{200F}',
            '\u{FEFF}',
            '\u{2028}',
            '\u{E0041}',
        ] {
            let value = format!("gitea{c}-author");
            let why = check_field("client_name", &value).unwrap_err().to_string();
            assert!(why.contains("invisible or direction-changing") && why.contains("client_name"), "{why}");
            assert_eq!(bounded_field(&value), "gitea-author", "U+{:04X}", u32::from(c));
            let r = Registration {
                ids: WorkerIds {
                    worker_identity: "w1".into(),
                    client_name: "claude".into(),
                    client_instance_id: "inst".into(),
                    session_id: value,
                    generation_id: "gen-0001".into(),
                    role: "author".into(),
                    profile: "prgs-author".into(),
                    pid: Some(4242),
                },
                heartbeat_ttl_seconds: 900.0,
            };
            assert!(r.validate().is_err(), "U+{:04X}", u32::from(c));
        }
        for fine in ["gitea-author", "Zoë", "日本語", "claude code", "אב"] {
            assert_eq!(check_field("x", fine), Ok(()), "{fine}");
        }
    }
}
