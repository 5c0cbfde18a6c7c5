//! The `[supervision]` table of the roster config: the raw, deserialised
//! [`SupervisionConfig`] and the validated [`SupervisionSettings`] the policy
//! runs on.
//!
//! Two phases on purpose: serde only checks shapes, [`SupervisionConfig::validate`]
//! checks meaning (non-empty sequences, finite non-negative seconds, a budget
//! of at least one) and converts seconds to [`Duration`]s once, so nothing
//! downstream ever sees a NaN or an empty backoff sequence.

use serde::Deserialize;
use std::fmt;
use std::time::Duration;

/// The `[supervision]` table as written by the operator.
///
/// Every key is optional; an absent key takes its default. An unknown key is
/// refused (a misspelt key silently falling back to the default is the defect
/// class the project exists to prevent).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SupervisionConfig {
    /// Delays before the 1st, 2nd, … restart of a failed task; the last one
    /// repeats. Seconds, `>= 0`.
    pub backoff_seconds: Vec<f64>,
    /// Failures a task may have before it quarantines its flow. `>= 1`.
    pub failure_budget: u32,
    /// Lengths of a flow's 1st, 2nd, … consecutive quarantine; the last one
    /// repeats (the cap). Seconds, `>= 0`.
    pub quarantine_backoff_seconds: Vec<f64>,
    /// A run at least this long counts as healthy: it refills the task's
    /// budget and brings its quarantine escalation back to the first step.
    /// Seconds, `> 0`.
    pub healthy_reset_seconds: f64,
    /// Fraction by which a delay may be shortened at random, so that many
    /// supervisors crashing together do not retry together. `0 <= r < 1`; `0`
    /// disables jitter. The configured delays stay upper bounds.
    pub jitter_ratio: f64,
    /// How long a cancelled task is given to stop on its own before it is
    /// aborted. Seconds, `>= 0`.
    pub stop_grace_seconds: f64,
}

impl Default for SupervisionConfig {
    fn default() -> Self {
        Self {
            backoff_seconds: vec![0.1, 0.5, 1.0, 2.0, 5.0],
            failure_budget: 5,
            quarantine_backoff_seconds: vec![30.0, 60.0, 120.0, 300.0],
            healthy_reset_seconds: 600.0,
            jitter_ratio: 0.2,
            stop_grace_seconds: 5.0,
        }
    }
}

/// A `[supervision]` value that is well-formed TOML but means nothing usable.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("invalid supervision config: `{}`{} {kind}", .key, .index.map(|i| format!("[{i}]")).unwrap_or_default())]
pub struct ConfigError {
    /// The offending key, spelt as in the config file.
    pub key: &'static str,
    /// The position in the sequence, for sequence keys.
    pub index: Option<usize>,
    /// What is wrong with it.
    pub kind: ConfigErrorKind,
}

/// What is wrong with a supervision key.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A sequence with no entries.
    Empty,
    /// NaN or infinite.
    NotFinite(f64),
    /// Below zero.
    Negative(f64),
    /// Zero where a positive value is required.
    Zero,
    /// Larger than a [`Duration`] can hold.
    TooLarge(f64),
    /// Outside the half-open range `[low, high)`.
    OutOfRange {
        /// The value given.
        value: f64,
        /// Smallest allowed value.
        low: f64,
        /// Smallest value above the allowed range.
        high: f64,
    },
}

impl fmt::Display for ConfigErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("is empty: give at least one value"),
            Self::NotFinite(v) => write!(f, "is not a finite number ({v})"),
            Self::Negative(v) => write!(f, "is negative ({v})"),
            Self::Zero => f.write_str("must be greater than zero"),
            Self::TooLarge(v) => write!(f, "is too large ({v} seconds)"),
            Self::OutOfRange { value, low, high } => {
                write!(f, "is {value}, outside [{low}, {high})")
            }
        }
    }
}

/// Validated supervision settings: what [`crate::policy::SupervisionPolicy`]
/// and [`crate::Supervisor`] run on. Built only by
/// [`SupervisionConfig::validate`] (or [`Default`]), so its sequences are
/// never empty and its budget is never zero.
#[derive(Clone, Debug, PartialEq)]
pub struct SupervisionSettings {
    backoff: Vec<Duration>,
    failure_budget: u32,
    quarantine_backoff: Vec<Duration>,
    healthy_reset: Duration,
    jitter_ratio: f64,
    stop_grace: Duration,
}

impl Default for SupervisionSettings {
    fn default() -> Self {
        SupervisionConfig::default().validate().expect("the default supervision config is valid")
    }
}

impl SupervisionSettings {
    /// Restart delays, in order; the last repeats. Never empty.
    pub fn backoff(&self) -> &[Duration] {
        &self.backoff
    }

    /// Failures a task may have before it quarantines its flow. At least 1.
    pub fn failure_budget(&self) -> u32 {
        self.failure_budget
    }

    /// Quarantine lengths, in order of escalation; the last repeats. Never empty.
    pub fn quarantine_backoff(&self) -> &[Duration] {
        &self.quarantine_backoff
    }

    /// How long a run must last to count as healthy.
    pub fn healthy_reset(&self) -> Duration {
        self.healthy_reset
    }

    /// Fraction by which a delay may be shortened at random, in `[0, 1)`.
    pub fn jitter_ratio(&self) -> f64 {
        self.jitter_ratio
    }

    /// How long a cancelled task may take to stop before it is aborted.
    pub fn stop_grace(&self) -> Duration {
        self.stop_grace
    }
}

impl SupervisionConfig {
    /// Check every value and convert it to the settings the supervisor runs on.
    pub fn validate(&self) -> Result<SupervisionSettings, ConfigError> {
        let backoff = sequence("backoff_seconds", &self.backoff_seconds)?;
        if self.failure_budget == 0 {
            return Err(ConfigError { key: "failure_budget", index: None, kind: ConfigErrorKind::Zero });
        }
        let quarantine_backoff = sequence("quarantine_backoff_seconds", &self.quarantine_backoff_seconds)?;
        let healthy_reset = seconds("healthy_reset_seconds", None, self.healthy_reset_seconds)?;
        if healthy_reset.is_zero() {
            // Zero would call every run healthy and refill the budget on every
            // crash: the task would never be stood down.
            return Err(ConfigError { key: "healthy_reset_seconds", index: None, kind: ConfigErrorKind::Zero });
        }
        let ratio = self.jitter_ratio;
        if !(0.0..1.0).contains(&ratio) {
            return Err(ConfigError {
                key: "jitter_ratio",
                index: None,
                kind: if ratio.is_finite() {
                    ConfigErrorKind::OutOfRange { value: ratio, low: 0.0, high: 1.0 }
                } else {
                    ConfigErrorKind::NotFinite(ratio)
                },
            });
        }
        let stop_grace = seconds("stop_grace_seconds", None, self.stop_grace_seconds)?;
        Ok(SupervisionSettings {
            backoff,
            failure_budget: self.failure_budget,
            quarantine_backoff,
            healthy_reset,
            jitter_ratio: ratio,
            stop_grace,
        })
    }
}

fn sequence(key: &'static str, values: &[f64]) -> Result<Vec<Duration>, ConfigError> {
    if values.is_empty() {
        return Err(ConfigError { key, index: None, kind: ConfigErrorKind::Empty });
    }
    values.iter().enumerate().map(|(i, &v)| seconds(key, Some(i), v)).collect()
}

fn seconds(key: &'static str, index: Option<usize>, value: f64) -> Result<Duration, ConfigError> {
    let kind = if !value.is_finite() {
        ConfigErrorKind::NotFinite(value)
    } else if value < 0.0 {
        ConfigErrorKind::Negative(value)
    } else {
        match Duration::try_from_secs_f64(value) {
            Ok(d) => return Ok(d),
            Err(_) => ConfigErrorKind::TooLarge(value),
        }
    };
    Err(ConfigError { key, index, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SupervisionConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn an_empty_table_takes_the_documented_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config, SupervisionConfig::default());
        let settings = config.validate().unwrap();
        let secs: Vec<f64> = settings.backoff().iter().map(Duration::as_secs_f64).collect();
        assert_eq!(secs, [0.1, 0.5, 1.0, 2.0, 5.0]);
        assert_eq!(settings.failure_budget(), 5);
        let secs: Vec<u64> = settings.quarantine_backoff().iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [30, 60, 120, 300]);
        assert_eq!(settings.healthy_reset(), Duration::from_secs(600));
        assert_eq!(settings.jitter_ratio(), 0.2);
        assert_eq!(settings.stop_grace(), Duration::from_secs(5));
        assert_eq!(settings, SupervisionSettings::default());
    }

    #[test]
    fn the_stable_keys_are_read_by_their_names() {
        let config = parse(
            "backoff_seconds = [0, 1]\nfailure_budget = 2\nquarantine_backoff_seconds = [7]\n\
             healthy_reset_seconds = 9\njitter_ratio = 0\nstop_grace_seconds = 0.5\n",
        )
        .unwrap();
        let s = config.validate().unwrap();
        assert_eq!(s.backoff(), [Duration::ZERO, Duration::from_secs(1)]);
        assert_eq!(s.failure_budget(), 2);
        assert_eq!(s.quarantine_backoff(), [Duration::from_secs(7)]);
        assert_eq!(s.healthy_reset(), Duration::from_secs(9));
        assert_eq!(s.jitter_ratio(), 0.0);
        assert_eq!(s.stop_grace(), Duration::from_millis(500));
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let err = parse("failure_budjet = 3").unwrap_err().to_string();
        assert!(err.contains("failure_budjet"), "{err}");
    }

    fn invalid(text: &str) -> ConfigError {
        parse(text).unwrap().validate().unwrap_err()
    }

    #[test]
    fn meaningless_values_are_refused_with_the_key_named() {
        let e = invalid("backoff_seconds = []");
        assert_eq!((e.key, e.index, &e.kind), ("backoff_seconds", None, &ConfigErrorKind::Empty));
        assert_eq!(e.to_string(), "invalid supervision config: `backoff_seconds` is empty: give at least one value");

        let e = invalid("quarantine_backoff_seconds = [30, -1]");
        assert_eq!(e.key, "quarantine_backoff_seconds");
        assert_eq!(e.index, Some(1));
        assert_eq!(e.kind, ConfigErrorKind::Negative(-1.0));
        assert_eq!(e.to_string(), "invalid supervision config: `quarantine_backoff_seconds`[1] is negative (-1)");

        let e = invalid("backoff_seconds = [nan]");
        assert!(matches!(e.kind, ConfigErrorKind::NotFinite(v) if v.is_nan()));
        let e = invalid("healthy_reset_seconds = inf");
        assert!(matches!(e.kind, ConfigErrorKind::NotFinite(_)));
        assert_eq!(invalid("failure_budget = 0").kind, ConfigErrorKind::Zero);
        assert_eq!(invalid("healthy_reset_seconds = 0").kind, ConfigErrorKind::Zero);
        assert_eq!(invalid("quarantine_backoff_seconds = []").kind, ConfigErrorKind::Empty);
        assert!(matches!(invalid("jitter_ratio = 1").kind, ConfigErrorKind::OutOfRange { .. }));
        assert!(matches!(invalid("jitter_ratio = -0.1").kind, ConfigErrorKind::OutOfRange { .. }));
        assert!(matches!(invalid("stop_grace_seconds = -2").kind, ConfigErrorKind::Negative(_)));
        assert!(matches!(invalid("backoff_seconds = [1e300]").kind, ConfigErrorKind::TooLarge(_)));
    }

    #[test]
    fn a_negative_budget_does_not_deserialise() {
        assert!(parse("failure_budget = -1").is_err());
    }
}
