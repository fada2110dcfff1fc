// SPDX-License-Identifier: GPL-2.0
//! Data link layer (UB spec chapter 4).
//!
//! - [`frame`]: flits, LPH/LBH/LCH, PLENGTH, BCRC and END, the DLLDP →
//!   DLLDB split, in CRC and non-CRC mode.
//! - [`ctrl`]: every DLLCB, the Init Block and its negotiation.
//! - [`credit`]: credit flow control per VL (exclusive and sharing modes).
//! - [`retry`]: the retry buffer and its pointers.
//! - [`engine`]: [`Link`], one end of a link, and its state machines, one
//!   module each: DLL state, Init exchange, RETRY_REQ_SM, RETRY_ACK_SM,
//!   Block_Mode_Chg; credit and ACK returns, timers, counters.
//!
//! Design notes and every choice the specification leaves open are in
//! `Documentation/ub/link.rst`.
//!
//! Paths inside this module are relative (`super::`) because the kernel
//! compiles the crate as a module of `ub.ko`, where `crate::` is the driver.

pub mod credit;
pub mod ctrl;
pub mod engine;
pub mod frame;
pub mod retry;

pub use ctrl::{ControlBlock, InitParams, Negotiated};
pub use engine::{
    Counters, Delivery, DllState, Event, Link, LinkConfig, LinkSetupError, RetryAckState,
    RetryReqState, RxSink, TxPacket, TxSource, MIN_NUM_RETRY_THRESHOLD,
};
pub use frame::{Flit, Mode, FLIT_BYTES};
pub use retry::RetrySlot;
