//! PostgreSQL's types for the shared rows: parameters bound as the types of
//! their columns, rows read back through [`Columns`], and times as
//! `timestamptz` in whole seconds.

use super::fail::detail;
use crate::engine::Fail;
use crate::rows::{Columns, Value};
use crate::{StoreError, StoreErrorKind};
use ::postgres::Row;
use ::postgres::types::{FromSql, ToSql};
use fleetgate_core::Timestamp;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(super) fn sql_time(t: Timestamp) -> Result<SystemTime, StoreError> {
    let secs = t.unix();
    let magnitude = Duration::from_secs(secs.unsigned_abs());
    if secs >= 0 { UNIX_EPOCH.checked_add(magnitude) } else { UNIX_EPOCH.checked_sub(magnitude) }
        .ok_or_else(|| StoreError::new(StoreErrorKind::Invalid, format!("timestamp {secs} is out of range")))
}

/// Whole seconds, rounded down (the server's `now()` has microseconds).
pub(super) fn from_sql_time(t: SystemTime) -> Timestamp {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => {
            let d = before.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(d.subsec_nanos() > 0)
        }
    };
    Timestamp::from_unix(secs)
}

pub(super) fn get<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T, Fail<::postgres::Error>> {
    row.try_get(idx).map_err(|e| Fail::Row(format!("column {}: {}", idx, detail(&e))))
}

// Times are `timestamptz`, read as whole seconds.
impl Columns for Row {
    type Error = Fail<::postgres::Error>;

    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error> {
        get(self, i)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error> {
        get(self, i)
    }

    fn real(&self, i: usize) -> Result<f64, Self::Error> {
        get(self, i)
    }

    fn boolean(&self, i: usize) -> Result<bool, Self::Error> {
        get(self, i)
    }

    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>, Self::Error> {
        Ok(get::<Option<SystemTime>>(self, i)?.map(from_sql_time))
    }

    fn invalid(&self, i: usize, why: String) -> Self::Error {
        Fail::Row(format!("column {i}: {why}"))
    }
}

/// A parameter as the PostgreSQL type of its column.
enum Bound<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
    Real(f64),
    Bool(bool),
    Time(Option<SystemTime>),
}

/// A statement's parameters, bound from [`Value`]s.
pub(super) struct Args<'a>(Vec<Bound<'a>>);

impl<'a> Args<'a> {
    /// Bound in order; a time out of the server's range is `Invalid`.
    pub fn of(values: &'a [Value<'_>]) -> Result<Self, StoreError> {
        let bind = |value: &'a Value<'_>| {
            Ok(match value {
                Value::Text(v) => Bound::Text(v.as_deref()),
                Value::Int(v) => Bound::Int(*v),
                Value::Real(v) => Bound::Real(*v),
                Value::Bool(v) => Bound::Bool(*v),
                Value::Time(v) => Bound::Time(v.map(sql_time).transpose()?),
            })
        };
        values.iter().map(bind).collect::<Result<_, StoreError>>().map(Self)
    }

    /// The parameters as the client library takes them.
    pub fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|bound| -> &(dyn ToSql + Sync) {
                match bound {
                    Bound::Text(v) => v,
                    Bound::Int(v) => v,
                    Bound::Real(v) => v,
                    Bound::Bool(v) => v,
                    Bound::Time(v) => v,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_system_time() {
        for secs in [0, 1, 1_785_372_009, -1, -86_401] {
            let t = Timestamp::from_unix(secs);
            assert_eq!(from_sql_time(sql_time(t).unwrap()), t);
        }
        // Sub-second server times round down, before and after the epoch.
        assert_eq!(from_sql_time(UNIX_EPOCH + Duration::from_millis(1_999)), Timestamp::from_unix(1));
        assert_eq!(from_sql_time(UNIX_EPOCH - Duration::from_millis(1_001)), Timestamp::from_unix(-2));
    }
}
