//! [`RunError`]: why a long-running process (the gateway, the dashboard) could not start
//! or stopped failing — what it was doing, and the cause beneath as the error's source,
//! so `{:#}` (the binary's error line) reads "what: cause".

use std::error::Error;
use std::fmt;

/// What failed, and the cause beneath it.
#[derive(Debug)]
pub struct RunError {
    what: String,
    cause: Option<Box<dyn Error + Send + Sync>>,
}

impl RunError {
    /// A failure with nothing beneath it.
    pub fn msg(what: impl Into<String>) -> Self {
        Self { what: what.into(), cause: None }
    }

    /// `what` failed because of `cause`.
    pub fn new(what: impl Into<String>, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self { what: what.into(), cause: Some(cause.into()) }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl Error for RunError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

/// `.context(…)` for any error: the [`RunError`] it becomes.
pub trait Context<T> {
    /// On error, say what was being done.
    fn context(self, what: impl Into<String>) -> Result<T, RunError>;
    /// On error, say what was being done (computed only on error).
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, RunError>;
}

impl<T, E: Into<Box<dyn Error + Send + Sync>>> Context<T> for Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T, RunError> {
        self.map_err(|e| RunError::new(what, e))
    }
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, RunError> {
        self.map_err(|e| RunError::new(what(), e))
    }
}

/// A loop's blocking task (a renewal, a refresh) ended without an answer: it panicked or
/// was cancelled. The loop ends with it, and its supervisor restarts it.
#[derive(Debug, thiserror::Error)]
#[error("the {what} task failed: {source}")]
pub struct TaskFailed {
    what: &'static str,
    source: tokio::task::JoinError,
}

impl TaskFailed {
    /// The `what` task ended with `source`.
    pub fn new(what: &'static str, source: tokio::task::JoinError) -> Self {
        Self { what, source }
    }
}
