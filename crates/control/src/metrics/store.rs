//! [`MeteredStore`]: the store as a gateway process uses it, each operation in a `store`
//! span (named by the operation, nested under the gate's or the heartbeat's) and every
//! transient failure (busy, unavailable) counted in
//! `fleetgate_store_transient_failures_total`. A [`Layer`] over the store's one point
//! around every operation: it names none of them.

use super::GatewayMetrics;
use fleetgate_store::{Layer, Store, StoreError};
use std::sync::Arc;

/// What traces a store's operations and counts their transient failures.
#[derive(Debug)]
pub struct MeteredStore {
    metrics: GatewayMetrics,
}

impl MeteredStore {
    /// `inner`, counted into `metrics`.
    pub fn wrap(inner: Arc<dyn Store>, metrics: GatewayMetrics) -> Arc<dyn Store> {
        inner.layered(Arc::new(Self { metrics }))
    }
}

impl Layer for MeteredStore {
    fn around(&self, op: &'static str, call: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        let _span = tracing::info_span!("store", op).entered();
        let result = call();
        if let Err(e) = &result
            && e.is_transient()
        {
            self.metrics.store_transient_failures.inc();
            tracing::debug!(op, error = %e, "transient store failure");
        }
        result
    }

    fn bounds_waits(&self, below: bool) -> bool {
        below
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::GatewayExposition;
    use fleetgate_store::StoreErrorKind;

    #[test]
    fn only_transient_failures_are_counted() {
        let exposition = GatewayExposition::default();
        let dir = tempfile::tempdir().unwrap();
        let real = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let store = MeteredStore::wrap(real, exposition.metrics().clone());
        assert!(store.list_workers().unwrap().is_empty());
        let counted = || exposition.metrics().store_transient_failures.get();
        assert_eq!(counted(), 0);
        let layer = MeteredStore { metrics: exposition.metrics().clone() };
        for (kind, after) in [(StoreErrorKind::Busy, 1), (StoreErrorKind::Unavailable, 2), (StoreErrorKind::Io, 2)] {
            let failed = layer.around("schema_version", &mut || Err(StoreError::new(kind, "failing")));
            assert!(failed.is_err());
            assert_eq!(counted(), after, "{kind:?}");
        }
    }

    /// Every operation of the wrapped store passes through the layer, named as its method.
    #[test]
    fn every_operation_is_traced_by_its_name() {
        #[derive(Debug, Default)]
        struct Seen(std::sync::Mutex<Vec<&'static str>>);
        impl Layer for Seen {
            fn around(
                &self,
                op: &'static str,
                call: &mut dyn FnMut() -> Result<(), StoreError>,
            ) -> Result<(), StoreError> {
                self.0.lock().unwrap().push(op);
                call()
            }
            fn bounds_waits(&self, below: bool) -> bool {
                below
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let real = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let seen = Arc::new(Seen::default());
        let store = MeteredStore::wrap(real, GatewayExposition::default().metrics().clone()).layered(seen.clone());
        store.list_workers().unwrap();
        store.append_audit_batch(&mut [], &mut |_| {}).unwrap();
        store.schema_version().unwrap();
        assert_eq!(*seen.0.lock().unwrap(), ["list_workers", "append_audit_batch", "schema_version"]);
    }
}
