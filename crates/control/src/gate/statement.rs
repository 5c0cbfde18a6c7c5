//! [`Statement`]: a call parsed once and what its forge dialect states it does, established
//! once — each round of forge reads fed in once — then carried to the decision. No I/O: the
//! reads it asks for are made by whoever drives it (the gateway's loop, or
//! [`Statement::read_through`] for a forge read on the spot, as the CLI's).

use super::workflow::{ForgeErrorKind, ForgeReader};
use fleetgate_core::dialect::{Dialect, Schemas};
use fleetgate_core::effect::{Answered, Effect, Read, ReadFailed};
use fleetgate_core::forge_call::{Ambiguity, canonicalize};
use serde_json::{Map, Value};

/// At most this many rounds of forge reads establish one call's effect (each round makes
/// the reads the answers so far call for: a repository, then its open PRs page by page).
pub const MAX_READ_ROUNDS: usize = 48;

/// What the forge dialect states of a call, and the reads it could not make.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stated {
    pub(crate) effect: Effect,
    /// Reads asked for that were not made (a gateway makes them and decides again).
    pub(crate) missing: Vec<Read>,
}

/// The call as the gate judges it: under a forge profile its canonical arguments (or why the
/// server could read them otherwise), `Ok(None)` without one (judged as sent).
pub(crate) type Canonical = Result<Option<Option<Map<String, Value>>>, Ambiguity>;

/// One call's parse and its effect as far as it is established.
#[derive(Clone, Debug)]
pub struct Statement {
    pub(crate) canonical: Canonical,
    /// What the dialect states, once established (`None` without a dialect or a parse, and
    /// while reads are outstanding).
    pub(crate) stated: Option<Stated>,
    /// The reads the dialect asked for in the last round, not yet answered.
    asked: Vec<Read>,
    /// Every read answered so far.
    answered: Vec<Answered>,
    rounds: usize,
}

/// What a statement is made from: the dialect, the call's tool and its schema, and the
/// schemas its reads are built from.
#[derive(Clone, Copy)]
pub(crate) struct Stating<'a> {
    pub(crate) dialect: Option<&'a dyn Dialect>,
    pub(crate) tool: &'a str,
    pub(crate) schema: Option<&'a Map<String, Value>>,
    pub(crate) schemas: &'a dyn Schemas,
}

impl Statement {
    /// Parse `arguments` once the way the server reads them and ask the dialect what the call
    /// does, from the arguments alone.
    pub(crate) fn start(at: Stating<'_>, arguments: Option<&Map<String, Value>>) -> Self {
        let canonical = match at.dialect {
            None => Ok(None),
            Some(dialect) => canonicalize(at.schema, arguments, dialect.alias_groups(), dialect.number_keys())
                .and_then(|parsed| {
                    if let Some(args) = &parsed {
                        dialect.check_parse(at.tool, args)?;
                    }
                    Ok(Some(parsed))
                }),
        };
        let mut statement = Self { canonical, stated: None, asked: Vec::new(), answered: Vec::new(), rounds: 0 };
        if statement.stating() {
            statement.establish(at);
        }
        statement
    }

    /// Whether the dialect states this call (a forge profile and a parse).
    fn stating(&self) -> bool {
        matches!(self.canonical, Ok(Some(_)))
    }

    /// The arguments the call is judged by: the parse, else `sent`.
    pub(crate) fn arguments<'a>(&'a self, sent: Option<&'a Map<String, Value>>) -> Option<&'a Map<String, Value>> {
        match &self.canonical {
            Ok(Some(arguments)) => arguments.as_ref(),
            _ => sent,
        }
    }

    /// The reads the effect still waits for (none once it is stated).
    pub(crate) fn asked(&self) -> &[Read] {
        &self.asked
    }

    /// One round: ask the dialect with every answer so far.
    fn establish(&mut self, at: Stating<'_>) {
        let Some(dialect) = at.dialect else { return };
        let empty = Map::new();
        // The fields, not `arguments()`: the parse stays borrowed while the rest is written.
        let args = match &self.canonical {
            Ok(Some(Some(args))) => args,
            _ => &empty,
        };
        self.rounds += 1;
        self.asked.clear();
        match dialect.establish(at.tool, args, at.schema, at.schemas, &self.answered) {
            // Not established: what the arguments alone show is still judged (a forced merge
            // is one whatever its base), and the call is refused all the same.
            Ok(effect) if !effect.unestablished.is_empty() => {
                let evident = dialect.evident(at.tool, args, at.schema);
                let effect = Effect { kind: effect.kind, unestablished: effect.unestablished, ..evident };
                self.stated = Some(Stated { effect, missing: Vec::new() });
            }
            Ok(effect) => self.stated = Some(Stated { effect, missing: Vec::new() }),
            Err(_) if self.rounds >= MAX_READ_ROUNDS => {
                let why = format!("more than {MAX_READ_ROUNDS} rounds of forge reads were needed");
                self.stated = Some(Stated {
                    effect: Effect { unestablished: vec![why], ..Effect::write() },
                    missing: Vec::new(),
                });
            }
            Err(reads) => self.asked = reads,
        }
    }

    /// The answers to the reads [`asked`](Self::asked) for, fed in: the dialect is asked again
    /// once every one is answered.
    pub(crate) fn feed(&mut self, at: Stating<'_>, answers: Vec<Answered>) {
        for (read, answer) in answers {
            if self.asked.contains(&read) && !self.answered.iter().any(|(r, _)| *r == read) {
                self.answered.push((read, answer));
            }
        }
        let all = self.asked.iter().all(|r| self.answered.iter().any(|(a, _)| a == r));
        if !self.asked.is_empty() && all {
            self.establish(at);
        }
    }

    /// The same parse, its effect stated again from the arguments alone (a held call judged
    /// again once its request was answered: what the forge says may have changed).
    pub(crate) fn restart(&mut self, at: Stating<'_>) {
        self.stated = None;
        self.answered.clear();
        self.rounds = 0;
        if self.stating() {
            self.establish(at);
        }
    }

    /// Establish the effect reading through `forge` on the spot, round by round; a read it
    /// cannot make is named as missing, and its failure leaves the effect unestablished.
    pub(crate) fn read_through(&mut self, at: Stating<'_>, forge: Option<&dyn ForgeReader>) {
        let mut missing = Vec::new();
        while self.stated.is_none() && !self.asked.is_empty() {
            let answers = self
                .asked
                .iter()
                .map(|read| {
                    let answer = match forge {
                        None => {
                            missing.push(read.clone());
                            Err(ReadFailed::from("no forge to read it from"))
                        }
                        Some(forge) => forge.read(&read.tool, read.arguments.clone()).map_err(|e| {
                            if e.kind == ForgeErrorKind::NotConfigured {
                                missing.push(read.clone());
                            }
                            ReadFailed(e.message)
                        }),
                    };
                    (read.clone(), answer)
                })
                .collect();
            self.feed(at, answers);
        }
        if let Some(stated) = &mut self.stated {
            stated.missing.extend(missing);
        }
    }
}
