//! The errors of the client (and of emcoctl) and the exit codes emcoctl maps them to.

use std::path::PathBuf;

use emco_core::{ErrorKind, HasKind};

/// Exit code when every request succeeded.
pub const EXIT_OK: i32 = 0;
/// Exit code when at least one request failed (an error status or an unreachable server).
pub const EXIT_REQUEST_FAILED: i32 = 1;
/// Exit code for bad input files, bad values files and bad usage; nothing was sent.
pub const EXIT_BAD_INPUT: i32 = 2;

/// Where in an input file a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The file.
    pub file: PathBuf,
    /// The document number in the file, from 1, when known.
    pub document: Option<usize>,
    /// The line in the file, from 1, when known.
    pub line: Option<usize>,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(doc) = self.document {
            write!(f, " (document {doc})")?;
        }
        Ok(())
    }
}

/// An error of the client: bad input (nothing sent) or a failed request.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// An input or values file is unreadable or invalid.
    #[error("{at}: {message}")]
    Input {
        /// Where.
        at: Position,
        /// What is wrong.
        message: String,
    },
    /// The command line or configuration is invalid.
    #[error("{0}")]
    Usage(String),
    /// A request could not be made or answered.
    #[error("{0}")]
    Request(String),
}

impl CtlError {
    /// An input error at `file`, with document and line when known.
    pub fn input(
        file: impl Into<PathBuf>,
        document: Option<usize>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self::Input {
            at: Position {
                file: file.into(),
                document,
                line,
            },
            message: message.into(),
        }
    }

    /// The output could not be written (a closed pipe, a full disk).
    pub fn write(e: std::io::Error) -> Self {
        Self::Request(format!("cannot write the output: {e}"))
    }

    /// The process exit code for this error.
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Input { .. } | Self::Usage(_) => EXIT_BAD_INPUT,
            Self::Request(_) => EXIT_REQUEST_FAILED,
        }
    }

    /// The position of an input error.
    #[must_use]
    pub fn position(&self) -> Option<&Position> {
        match self {
            Self::Input { at, .. } => Some(at),
            _ => None,
        }
    }
}

impl HasKind for CtlError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Input { .. } | Self::Usage(_) => ErrorKind::InvalidArgument,
            Self::Request(_) => ErrorKind::Unavailable,
        }
    }
}

/// The result type of the client.
pub type Result<T, E = CtlError> = std::result::Result<T, E>;
