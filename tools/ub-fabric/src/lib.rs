// SPDX-License-Identifier: GPL-2.0
//! `ub-fabric`: the user-space emulator of UB hardware.
//!
//! - [`device`]: the UB controller device model (BAR0 registers, DMA
//!   descriptor rings, MSI-X), a pure state machine over the
//!   [`mem::GuestMemory`] and [`device::Interrupts`] traits;
//! - [`phy`]: the wire model (line rate, delay, BER, FEC failures);
//! - [`switch`]: UB switches (link engine per port, NTH forwarding with RT,
//!   VL queues and arbiter, FECN/CAQM marking, fault injection);
//! - [`topology`] and [`fabric`]: the TOML topology and the whole fabric,
//!   stepped by an injected clock;
//! - [`vfio`]: the vfio-user server that serves a controller to QEMU;
//! - [`forge`]: forged RTP data packets queued towards a host port;
//! - [`control`]: the control socket (faults, forged packets, JSON
//!   counters);
//! - [`daemon`]: the daemon loop tying them together.
//!
//! The register map lives in `ub_proto::controller`, shared with the
//! kernel driver; see `Documentation/ub/controller.rst` and
//! `Documentation/ub/fabric.rst`.

pub mod control;
pub mod daemon;
pub mod device;
pub mod fabric;
pub mod forge;
pub mod mem;
pub mod phy;
pub mod rng;
pub mod switch;
pub mod topology;
pub mod vfio;
