//! The gateway's integration tests: one binary, one module per topic, every test through
//! the `gateway_fixture` process (the real `serve` with the test control plane in
//! `tests/support/policy.rs`) and, where the topic is MCP itself, the official Python SDK
//! client and real downstream servers (`mcp-server-git`, `@modelcontextprotocol/server-everything`,
//! a minimal Python SDK server), installed by `scripts/install-peers`.

mod bounds;
mod everything;
mod frames;
mod git;
mod harness;
mod http;
mod lifecycle;
mod paging;
mod progress;
mod sharing;
