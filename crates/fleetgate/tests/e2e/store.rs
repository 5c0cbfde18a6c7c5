//! The store deleted or replaced under a real `fleetgate serve` (issue 18 item 6): the
//! gateway refuses every mutating call `store_replaced` and says so on its runtime
//! context, until the file it opened is back. Driven over raw stdio JSON-RPC lines.

use crate::stdiokit::StdioGateway as Raw;
use crate::support::{FleetDir, roster, serial};
use serde_json::json;

#[test]
fn a_store_deleted_or_replaced_under_a_serving_gateway_refuses_mutations() {
    let _serial = serial();
    let f = FleetDir::new(&roster("store-replaced", &["author"], ""));
    let mut g = Raw::start(&f.serve_argv("prgs-author", "c", &[]));
    let gate = |g: &mut Raw| g.control("gitea_resolve_task_capability", json!({"tool": "git_add"}));
    let health = |g: &mut Raw| g.control("gitea_get_runtime_context", json!({}))["store_health"].clone();
    assert_eq!(health(&mut g)["ok"], true);
    assert_ne!(gate(&mut g)["blocker_kind"], "store_replaced");

    // `rm` of the store: the next CLI call would make a fresh one at the path.
    let aside = f.dir.path().join("aside.sqlite3");
    std::fs::rename(f.store(), &aside).unwrap();
    let verdict = gate(&mut g);
    assert_eq!((verdict["allowed"].clone(), verdict["blocker_kind"].clone()), (json!(false), json!("store_replaced")));
    assert!(verdict["blocked_reasons"].to_string().contains("it was deleted"), "{verdict}");
    let h = health(&mut g);
    assert_eq!((h["ok"].clone(), h["blocker_kind"].clone()), (json!(false), json!("store_replaced")), "{h}");

    // Another file at the path.
    std::fs::copy(&aside, f.store()).unwrap();
    assert!(gate(&mut g)["blocked_reasons"].to_string().contains("replaced by another file"));

    // The file it opened, back: decided as before.
    std::fs::rename(&aside, f.store()).unwrap();
    assert_ne!(gate(&mut g)["blocker_kind"], "store_replaced");
    assert_eq!(health(&mut g)["ok"], true);
}
