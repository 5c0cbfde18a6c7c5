//! Supervision of background loops and child processes (SPEC §5).
