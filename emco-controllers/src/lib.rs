//! # emco-controllers
//!
//! EMCO's built-in controllers, written only with the public API of `emco-controller-sdk`: the
//! generic action controller (gac) and the hardware-platform-aware placement and action
//! controllers (hpa).
