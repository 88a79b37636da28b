//! # emco-proto
//!
//! The generated messages, clients and servers of EMCO's gRPC services, shared by the crates that
//! serve or call them (emco-rsync, emco-controller-sdk, emco-orchestrator). A crate of its own so
//! that rsync and the controller SDK do not depend on each other just for wire types.
//!
//! The `.proto` files declare no package, exactly like EMCO's, so the request paths are
//! `/<service>/<Method>` (for example `/installapp/InstallApp`) and a Go EMCO component talks to
//! ours and the other way round. Field numbers and types follow EMCO; message names are ours.
//!
//! ```
//! use emco_proto::InstallAppRequest;
//! let req = InstallAppRequest { app_context: "1234".into() };
//! assert_eq!(req.app_context, "1234");
//! ```

#![allow(missing_docs)] // generated code
#![allow(clippy::all, clippy::pedantic, missing_debug_implementations)]

// prost names the module of an unnamed package `_`.
include!(concat!(env!("OUT_DIR"), "/_.rs"));
