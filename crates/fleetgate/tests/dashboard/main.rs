//! `fleetgate dashboard` through the real binary: its HTTP contract, `/metrics` parsed
//! as Prometheus text, and the page in a real headless Chromium (Debian's, driven through
//! chromedriver by Selenium from `.venv`; `scripts/install-peers` installs both).
//!
//! Fleets that must look healthy live on an island — a PID namespace of their own — so
//! no gateway elsewhere on the host enters their inventory; see `support`.

mod browser;
mod contract;
mod metrics;
mod support;
