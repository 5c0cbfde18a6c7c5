//! The one point where something wraps every operation of a store handle: a [`Layer`]
//! (the gateway's tracing and counting, a test's fault injection) runs around each
//! operation by its name, so no wrapper lists the operations again. [`crate::Store::layered`]
//! puts one over a handle; the operations themselves are written once, over any engine.

use crate::engine::{Engine, Exec, Fail, Retry};
use crate::{StoreError, StoreErrorKind};
use fleetgate_core::Timestamp;
use std::fmt;
use std::sync::Arc;

/// What runs around every operation of a store handle ([`crate::Store::layered`]).
pub trait Layer: Send + Sync + fmt::Debug {
    /// Run the operation `op` (named as its store method: `heartbeat`,
    /// `append_audit_batch`, …) by calling `call` at most once, or answer in its stead.
    /// What `call` answers is the operation's answer; an `Err` this returns without calling
    /// it is the operation's failure, and nothing of it ran.
    fn around(&self, op: &'static str, call: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError>;

    /// What the handle answers for [`crate::Store::bounds_waits`], given what the store
    /// under it answers (`below`).
    fn bounds_waits(&self, below: bool) -> bool;
}

/// An engine with layers over it: an [`Engine`] itself, so every operation written over
/// engines runs here too, through [`Engine::around`]. One type however many layers (the
/// last one outermost), so a layered handle layered again is not a new type.
#[derive(Debug)]
pub(crate) struct Layered<E> {
    engine: Arc<E>,
    layers: Vec<Arc<dyn Layer>>,
}

/// `engine` with `layer` over it ([`Engine::layered`] of an engine without layers).
pub(crate) fn over<E: Engine + 'static>(engine: Arc<E>, layer: Arc<dyn Layer>) -> Arc<dyn crate::Store> {
    Arc::new(Layered { engine, layers: vec![layer] })
}

/// `call` through `layers`, the last one outermost.
fn through(
    layers: &[Arc<dyn Layer>],
    op: &'static str,
    call: &mut dyn FnMut() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    match layers.split_last() {
        None => call(),
        Some((outer, inner)) => outer.around(op, &mut || through(inner, op, call)),
    }
}

impl<E: Engine + 'static> Engine for Layered<E> {
    type Conn = E::Conn;

    fn around<T>(&self, op: &'static str, call: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut call = Some(call);
        let mut answer = None;
        through(&self.layers, op, &mut || {
            let call = call.take().ok_or_else(|| unanswered(op, "ran it twice"))?;
            answer = Some(self.engine.around(op, call)?);
            Ok(())
        })?;
        answer.ok_or_else(|| unanswered(op, "answered without running it"))
    }

    fn layered(self: Arc<Self>, layer: Arc<dyn Layer>) -> Arc<dyn crate::Store> {
        let mut layers = self.layers.clone();
        layers.push(layer);
        Arc::new(Self { engine: Arc::clone(&self.engine), layers })
    }

    fn bounds_waits(&self) -> bool {
        self.layers.iter().fold(self.engine.bounds_waits(), |below, layer| layer.bounds_waits(below))
    }

    fn sql(&self) -> &'static crate::sql::Sql {
        self.engine.sql()
    }

    fn label(&self) -> String {
        self.engine.label()
    }

    fn server_clock(&self) -> Result<Option<Timestamp>, StoreError> {
        self.engine.server_clock()
    }

    fn check_location(&self) -> Result<(), StoreError> {
        self.engine.check_location()
    }

    fn approval_watch(&self) -> Result<Box<dyn crate::ApprovalWatch>, StoreError> {
        self.engine.approval_watch()
    }

    fn identity(&self) -> Option<fleetgate_core::runtime::StoreIdentity> {
        self.engine.identity()
    }

    fn run<T: Send>(
        &self,
        context: &str,
        retry: Retry,
        op: impl FnMut(&mut Self::Conn) -> Result<T, Fail<<Self::Conn as Exec>::Db>> + Send,
    ) -> Result<T, StoreError> {
        self.engine.run(context, retry, op)
    }
}

/// A layer broke [`Layer::around`]'s contract: a bug in the layer, named as such.
fn unanswered(op: &str, what: &str) -> StoreError {
    StoreError::new(StoreErrorKind::Other, format!("{op}: the layer over the store {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeenTool;
    use crate::Store;
    use std::sync::Mutex;

    /// Records what it sees under its name; refuses `refuse`, or answers it without running it.
    #[derive(Debug)]
    struct Probe {
        name: &'static str,
        seen: Arc<Mutex<Vec<String>>>,
        refuse: Option<&'static str>,
        skip: bool,
        bounds: bool,
    }

    impl Layer for Probe {
        fn around(&self, op: &'static str, call: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
            self.seen.lock().unwrap().push(format!("{} {op}", self.name));
            if self.refuse == Some(op) {
                return Err(StoreError::new(StoreErrorKind::Busy, "refused by the layer"));
            }
            if self.skip { Ok(()) } else { call() }
        }

        fn bounds_waits(&self, below: bool) -> bool {
            below && self.bounds
        }
    }

    fn probe(name: &'static str, seen: &Arc<Mutex<Vec<String>>>) -> Probe {
        Probe { name, seen: Arc::clone(seen), refuse: None, skip: false, bounds: true }
    }

    fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::open(dir.path().join("s.sqlite3").to_str().unwrap()).unwrap();
        (dir, store)
    }

    #[test]
    fn layers_nest_the_last_outermost_and_share_the_store() {
        let (_dir, bare) = store();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let layered =
            Arc::clone(&bare).layered(Arc::new(probe("inner", &seen))).layered(Arc::new(probe("outer", &seen)));
        let now = Timestamp::ymd_hms(2026, 7, 30, 0, 40, 9);
        layered
            .observe_tool(
                &SeenTool { profile: "prgs-author", tool: "git_push", digest: "sha256:1", definition: "{}" },
                now,
            )
            .unwrap();
        assert_eq!(*seen.lock().unwrap(), ["outer observe_tool", "inner observe_tool"]);
        assert_eq!(bare.list_tool_pins(None).unwrap().len(), 1, "one store under every handle");
        assert_eq!(seen.lock().unwrap().len(), 2, "the bare handle has no layer");
        assert!(bare.bounds_waits(), "the engine bounds its waits");
        let unbounded = Probe { bounds: false, ..probe("x", &seen) };
        assert!(!layered.layered(Arc::new(unbounded)).bounds_waits(), "a layer may say otherwise");
    }

    #[test]
    fn a_layer_that_refuses_runs_nothing_and_one_that_skips_is_named() {
        let (_dir, bare) = store();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let now = Timestamp::ymd_hms(2026, 7, 30, 0, 40, 9);
        let refusing = Probe { refuse: Some("observe_tool"), ..probe("r", &seen) };
        let refused = Arc::clone(&bare).layered(Arc::new(refusing));
        let err = refused
            .observe_tool(
                &SeenTool { profile: "prgs-author", tool: "git_push", digest: "sha256:1", definition: "{}" },
                now,
            )
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Busy);
        assert!(bare.list_tool_pins(None).unwrap().is_empty(), "nothing of a refused operation ran");
        let skipping = Probe { skip: true, ..probe("s", &seen) };
        let err = Arc::clone(&bare).layered(Arc::new(skipping)).list_workers().unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Other);
        assert!(
            err.to_string().contains("list_workers: the layer over the store answered without running it"),
            "{err}"
        );
    }
}
