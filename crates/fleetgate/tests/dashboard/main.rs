//! `fleetgate dashboard` through the real binary: its HTTP contract, `/metrics` parsed
//! as Prometheus text, and the page in a real headless Chromium (Debian's, driven through
//! chromedriver by Selenium from `.venv`; `scripts/install-peers` installs both).
//!
//! Fleets that must look healthy live on an island — a PID namespace of their own — so
//! no gateway elsewhere on the host enters their inventory; see `fixture`.

mod browser;
mod contract;
mod fixture;
mod metrics;
mod people;
mod signin;
mod support;
