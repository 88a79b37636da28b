//! # emco-controller-sdk
//!
//! Write an EMCO placement or action controller as one type and one or two async functions. The
//! SDK serves it over EMCO's gRPC wire protocol (`contextupdate`, `PlacementController`) or runs
//! it in-process inside the server, gives it a typed handle on the AppContext, and gives its
//! intent types REST routes. It also holds the client side that the orchestrator uses to call
//! registered controllers in priority order.
