//! The pinned tool definitions' operations ([`Pins`]); their table and statements live with
//! the ledger's (schema v6).

use crate::StoreError;
use crate::engine::{Engine, Exec, Retry};
use crate::ledger::time;
use crate::rows::{opt_text, text};
use crate::workflow::ToolPin;
use fleetgate_core::Timestamp;

/// A downstream tool's definition as a gateway saw it: named, so that neither of its two
/// digests can be passed where the other is meant.
#[derive(Debug, Clone, Copy)]
pub struct SeenTool<'a> {
    /// The member whose downstream lists the tool.
    pub profile: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// The digest of `definition`.
    pub digest: &'a str,
    /// The definition as listed, canonical JSON.
    pub definition: &'a str,
}

/// The downstream tools' pinned definitions.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Pins {
    /// Record the definition of `profile`'s downstream tool as seen at `now`: pinned the
    /// first time, else kept as the last seen when its digest differs. The pin as it stands.
    fn observe_tool(&self, seen: &SeenTool<'_>, now: Timestamp) -> Result<ToolPin, StoreError>;

    /// One tool's pin.
    fn tool_pin(&self, profile: &str, tool: &str) -> Result<Option<ToolPin>, StoreError>;

    /// Every pin (of `profile`), by profile and tool.
    fn list_tool_pins(&self, profile: Option<&str>) -> Result<Vec<ToolPin>, StoreError>;

    /// Make the definition last seen (`digest`) the pinned one. False when the tool's last
    /// seen definition is not `digest`, or is pinned already.
    fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> Result<bool, StoreError>;
}

impl<E: Engine> Pins for E {
    fn observe_tool(&self, seen: &SeenTool<'_>, now: Timestamp) -> Result<ToolPin, StoreError> {
        let SeenTool { profile, tool, digest, definition } = *seen;
        let sql = &self.sql().ledger;
        let args = [text(profile), text(tool), text(digest), time(now), text(definition)];
        self.around("observe_tool", || {
            self.write("cannot pin the tool definition", Retry::Idempotent, |c| {
                c.execute(&sql.observe_pin, &args)?;
                c.query_one(&sql.select_pin, &[text(profile), text(tool)])
            })
        })
    }

    fn tool_pin(&self, profile: &str, tool: &str) -> Result<Option<ToolPin>, StoreError> {
        self.around("tool_pin", || {
            self.run("cannot read the pinned definition", Retry::Read, |c| {
                c.query_opt(&self.sql().ledger.select_pin, &[text(profile), text(tool)])
            })
        })
    }

    fn list_tool_pins(&self, profile: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
        self.around("list_tool_pins", || {
            self.run("cannot list the pinned definitions", Retry::Read, |c| {
                c.query(&self.sql().ledger.list_pins, &[opt_text(profile)])
            })
        })
    }

    fn accept_tool(&self, profile: &str, tool: &str, digest: &str, now: Timestamp) -> Result<bool, StoreError> {
        let args = [text(profile), text(tool), text(digest), time(now)];
        self.around("accept_tool", || {
            self.run("cannot accept the tool definition", Retry::Idempotent, |c| {
                Ok(c.execute(&self.sql().ledger.accept_pin, &args)? == 1)
            })
        })
    }
}
