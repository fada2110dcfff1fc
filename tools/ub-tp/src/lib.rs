// SPDX-License-Identifier: GPL-2.0
//! TP Channels from user space: the `/dev/ub_tp` ABI for Rust users, the
//! `ub-tp` tool the selftests drive and `ubperf`.
//!
//! `uapi` mirrors `include/uapi/linux/ub.h` (checked against the C header by
//! `tests/abi.rs`), `addr` the peer addresses, `channel` the safe channel
//! (bind, send, receive, info), `error` the errnos and what they mean on a
//! channel, `message` a checksummed message format, `sizes` the message
//! size sequences of `--sizes`, `stream` the two ends of a checked stream, `verify` the receiver's exactly-once,
//! in-order, intact bookkeeping `stats` ubperf's statistics and `abicheck`
//! the errno every misuse of the device gets (`ub-tp abi-check`).

pub mod abicheck;
pub mod addr;
pub mod channel;
pub mod cli;
pub mod error;
pub mod fuzz;
pub mod message;
pub mod perf;
pub mod sizes;
pub mod stats;
pub mod stream;
pub mod uapi;
pub mod verify;

pub use addr::Addr;
pub use channel::{BindOptions, Channel, Info, Retransmit, State};
pub use error::{Error, Op, Result};
