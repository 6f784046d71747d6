//! The one error type of the library, and the one place that maps errors to exit codes.

use std::path::PathBuf;

/// Everything that can go wrong in an orbit command. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),

    #[error("invalid goal: {0}")]
    Goal(String),

    #[error("{path}: {message}")]
    Path { path: PathBuf, message: String },

    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    Git(String),

    #[error("{0}")]
    Refused(String),
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn path(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Path {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The process exit code for this error. Usage and input errors are 2, as for a
    /// preflight failure: nothing ran, nothing was written.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Goal(_) | Error::Path { .. } | Error::Refused(_) => 2,
            Error::Parse { .. } => 4,
            Error::Io { .. } | Error::Git(_) => 2,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
