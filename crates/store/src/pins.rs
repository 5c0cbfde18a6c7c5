//! The pinned tool definitions' operations ([`Pins`]); their table and statements live with
//! the ledger's (schema v6).

use crate::StoreError;
use crate::engine::Engine;
use crate::ledger;
use crate::workflow::ToolPin;
use fleetgate_core::Timestamp;

/// The downstream tools' pinned definitions.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Pins {
    /// Record the definition of `profile`'s downstream tool as seen at `now`: pinned the
    /// first time, else kept as the last seen when its digest differs. The pin as it stands.
    fn observe_tool(
        &self,
        profile: &str,
        tool: &str,
        digest: &str,
        definition: &str,
        now: Timestamp,
    ) -> Result<ToolPin, StoreError>;

    /// One tool's pin.
    fn tool_pin(&self, profile: &str, tool: &str) -> Result<Option<ToolPin>, StoreError>;

    /// Every pin (of `profile`), by profile and tool.
    fn list_tool_pins(&self, profile: Option<&str>) -> Result<Vec<ToolPin>, StoreError>;

    /// Make the definition last seen (`digest`) the pinned one. False when the tool's last
    /// seen definition is not `digest`, or is pinned already.
    fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> Result<bool, StoreError>;
}

impl<E: Engine> Pins for E {
    fn observe_tool(
        &self,
        profile: &str,
        tool: &str,
        digest: &str,
        definition: &str,
        now: Timestamp,
    ) -> Result<ToolPin, StoreError> {
        self.around("observe_tool", || ledger::observe(self, profile, tool, digest, definition, now))
    }

    fn tool_pin(&self, profile: &str, tool: &str) -> Result<Option<ToolPin>, StoreError> {
        self.around("tool_pin", || ledger::pin(self, profile, tool))
    }

    fn list_tool_pins(&self, profile: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
        self.around("list_tool_pins", || ledger::pins(self, profile))
    }

    fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.around("accept_tool", || ledger::accept(self, profile, tool, digest, now))
    }
}
