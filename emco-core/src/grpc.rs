//! The one mapping between error kinds and gRPC status codes, used at every gRPC edge (the
//! AppContext service and its client, the controller client, the etcd backend).

use tonic::Code;

use crate::ErrorKind;

/// The code an error of `kind` is answered with.
#[must_use]
pub const fn code_of(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::Conflict => Code::Aborted,
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::FailedPrecondition => Code::FailedPrecondition,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Internal => Code::Internal,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
    }
}

/// The kind of error a peer's `code` means: the inverse of [`code_of`], and for the codes it
/// never sends, the nearest kind. What may succeed on a retry (unreachable, timed out, cut
/// off) is `Unavailable`; what a retry cannot fix without a change elsewhere (state, setup,
/// a service not served) is `FailedPrecondition`.
#[must_use]
pub const fn kind_of(code: Code) -> ErrorKind {
    match code {
        Code::NotFound => ErrorKind::NotFound,
        Code::AlreadyExists => ErrorKind::AlreadyExists,
        Code::Aborted => ErrorKind::Conflict,
        Code::InvalidArgument | Code::ResourceExhausted => ErrorKind::InvalidArgument,
        Code::FailedPrecondition | Code::OutOfRange | Code::Unimplemented => {
            ErrorKind::FailedPrecondition
        }
        Code::Unauthenticated => ErrorKind::Unauthenticated,
        Code::PermissionDenied => ErrorKind::PermissionDenied,
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
            ErrorKind::Unavailable
        }
        Code::Ok | Code::Internal | Code::DataLoss => ErrorKind::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_survives_the_round_trip() {
        for kind in ErrorKind::ALL {
            assert_eq!(kind_of(code_of(kind)), kind);
            assert_eq!(ErrorKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(ErrorKind::from_name("Bogus"), None);
        assert_eq!(kind_of(Code::DeadlineExceeded), ErrorKind::Unavailable);
        assert_eq!(kind_of(Code::Unauthenticated), ErrorKind::Unauthenticated);
    }
}
