//! One conformance suite, both engines: every story below walks one area of
//! the `Store` contract through `&dyn Store` and runs once on SQLite and once
//! on PostgreSQL, each run on a fresh database dropped afterwards.
//!
//! Run it as the README says (`scripts/test`), or alone:
//! `scripts/with-postgres cargo test -p fleetgate-store --test conformance`.
//! Without a PostgreSQL server the `postgres::` half fails, never passes.

mod approvals;
mod audit;
mod child;
mod clock;
mod engines;
mod ledger;
mod locks;
mod migrations;
mod prune;
mod race;
mod registry;
mod runtime;
mod sessions;
mod snapshot;
mod sqlite_file;
mod support;
mod tls;
mod transient;

/// One `#[test]` per story and engine: `sqlite::NAME` and `postgres::NAME`,
/// so a failure names the engine and each engine's count is visible.
macro_rules! conformance {
    ($($area:ident :: $story:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $story() { crate::engines::run(crate::engines::Kind::Sqlite, crate::$area::$story) })*
        }
        mod postgres {
            $(#[test] fn $story() { crate::engines::run(crate::engines::Kind::Postgres, crate::$area::$story) })*
            // Connection loss and a server restart have no SQLite counterpart.
            #[test] fn connection_loss_is_transient_and_heals() { crate::transient::connection_loss() }
            #[test] fn server_restart_is_transient_and_heals() { crate::transient::server_restart() }
            // TLS, against the server with ssl=on and a certificate made for this run.
            #[test] fn tls_prefer_is_the_default_and_encrypts() { crate::tls::prefer_is_the_default_and_encrypts() }
            #[test] fn tls_require_encrypts() { crate::tls::require_encrypts() }
            #[test] fn tls_verify_full_with_the_right_ca_connects() { crate::tls::verify_full_with_the_right_ca_connects() }
            #[test] fn tls_verify_full_refuses_another_ca() { crate::tls::verify_full_refuses_another_ca() }
            #[test] fn tls_verify_full_refuses_a_wrong_host_name() { crate::tls::verify_full_refuses_a_wrong_host_name() }
            #[test] fn tls_require_is_refused_by_a_server_without_tls() { crate::tls::require_is_refused_by_a_server_without_tls() }
            #[test] fn tls_disable_is_refused_by_an_ssl_only_server() { crate::tls::disable_is_refused_by_an_ssl_only_server() }
        }
    };
}

conformance! {
    registry::register_is_insert_or_nothing,
    registry::registration_is_validated,
    registry::workers_list_by_start_then_identity_bytes,
    registry::renewal_checks_every_expectation,
    registry::refusals_explain_in_spec_order_and_write_nothing,
    registry::renewal_never_moves_the_heartbeat_back,
    registry::claim_fences_the_old_epoch,
    registry::deregistered_rows_are_history,
    registry::liveness_follows_the_ttl,
    registry::calls_from_inside_an_async_runtime_answer,
    prune::pruning_deletes_old_history_and_never_a_live_row,
    prune::pruning_runtime_rows_deletes_only_old_stopped_ones,
    prune::history_older_than_the_cutoff_goes_and_nothing_still_referenced,
    runtime::runtime_rows_round_trip_and_refresh,
    sessions::sessions_are_found_by_any_replica_and_forgotten,
    sessions::old_records_of_gone_replicas_and_tasks_are_pruned,
    runtime::runtime_rows_carry_their_host,
    runtime::observations_keep_the_newest_scan_per_host,
    snapshot::the_fleet_snapshot_holds_what_the_lists_hold,
    snapshot::the_fleet_snapshot_is_one_instant,
    snapshot::the_fleet_snapshot_names_its_store,
    audit::audit_appends_in_order_and_lists_the_newest,
    audit::audit_pages_by_id_read_every_entry_once,
    clock::the_store_clock_is_the_servers_where_there_is_one,
    migrations::a_migration_killed_at_any_point_resumes,
    migrations::a_fresh_store_is_at_the_current_version,
    migrations::the_approvals_a_decision_reads_are_indexed,
    migrations::migrates_from_every_older_version,
    migrations::frozen_stores_of_every_earlier_version_migrate,
    migrations::migrations_are_idempotent,
    migrations::processes_opening_a_fresh_store_at_once_migrate_once,
    migrations::a_newer_schema_fails_closed,
    race::renewals_racing_a_claim_from_processes_never_beat_the_fence,
    ledger::leases_are_one_per_pr_and_purpose_and_expire_on_the_store_clock,
    ledger::a_plan_releases_before_it_claims,
    ledger::decisions_and_origins_are_kept_per_pr,
    ledger::tool_definitions_are_pinned_reported_and_accepted,
    ledger::threads_racing_to_claim_one_pr_leave_one_holder,
    ledger::processes_racing_to_claim_one_pr_leave_one_holder,
    locks::a_lock_is_written_with_its_decision_one_per_session_and_released_when_moot,
    approvals::an_approval_covers_one_pending_call_and_is_used_once,
    approvals::a_two_person_rule_counts_concurrent_answers_and_events_follow_every_change,
    approvals::a_notification_cursor_has_one_holder_and_advances_only_by_it,
}

/// The entry point of the suite's child processes (see `child`): does
/// nothing unless the race or migration tests started this binary as one.
#[test]
fn child_process_entry_point() {
    child::main_if_child();
}
