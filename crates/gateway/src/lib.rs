//! The MCP gateway (SPEC §7).
