// SPDX-License-Identifier: GPL-2.0
//! The driver core as netlink sees it: look-ups and changes by device and
//! port index, returning [`crate::snapshot`] copies.
//!
//! STUB. The bodies below serve one fake device so that the netlink family
//! can be tested end to end before the data path lands; the driver core
//! replaces them at merge and keeps the signatures. The contract every
//! implementation keeps:
//!
//! - called from process context (netlink handlers and dumps), may sleep;
//! - a function that returns a [`Refusal`] has changed nothing;
//! - a device is visible here only once it is fully set up, and gone before
//!   it is torn down, so a dump never sees half a device;
//! - no function calls back into [`crate::netlink`] with a lock held that
//!   netlink could need, except [`echo`], which may call
//!   [`crate::netlink::echo_reply`] (the stub does, at once).
//!
//! The stub device: index 0, name "stub", 2 ports, link up and negotiated;
//! addresses, routes, NPI and port settings kept under one mutex so that a
//! set followed by a get round-trips.

use crate::host::{Addr, NetCounters};
use crate::link::ctrl::Negotiated;
use crate::link::engine::{Counters, DllState, RetryReqState};
use crate::net::npi::{Npi, NpiMode};
use crate::snapshot::{
    DevCounters, DevSnapshot, EchoReply, EchoRequest, Field, PortEvent, PortSettings, PortSnapshot,
    Refusal, ReplyTo, RouteSnapshot, VlSnapshot, MAX_ADDRS, MAX_VLS, NAME_LEN,
};
use kernel::prelude::*;
use kernel::sync::global_lock;

/// Ports of the stub device.
const STUB_PORTS: u32 = 2;
/// Routes the stub keeps.
const STUB_MAX_ROUTES: usize = 8;

/// Settings of one stub port.
#[derive(Clone, Copy)]
struct StubPort {
    admin_up: bool,
    num_retry_threshold: u8,
    num_phy_reinit_threshold: u8,
    want_sharing: bool,
}

impl StubPort {
    const INITIAL: Self = Self {
        admin_up: true,
        num_retry_threshold: 4,
        num_phy_reinit_threshold: 3,
        want_sharing: false,
    };
}

/// Mutable state of the stub device.
struct StubState {
    addrs: [Option<Addr>; MAX_ADDRS],
    routes: [Option<RouteSnapshot>; STUB_MAX_ROUTES],
    npi_mode: NpiMode,
    npi: u32,
    ports: [StubPort; STUB_PORTS as usize],
    echo_requests: u64,
}

impl StubState {
    const fn new() -> Self {
        Self {
            addrs: [None; MAX_ADDRS],
            routes: [None; STUB_MAX_ROUTES],
            npi_mode: NpiMode::Strict(Npi::DEFAULT),
            npi: Npi::DEFAULT.raw(),
            ports: [StubPort::INITIAL; STUB_PORTS as usize],
            echo_requests: 0,
        }
    }
}

global_lock! {
    // SAFETY: `init()` runs at module init, before the netlink family (the
    // only user) is registered.
    unsafe(uninit) static STUB: Mutex<StubState> = StubState::new();
}

/// Sets the registry up. Called once at module init, before the netlink
/// family is registered.
///
/// # Safety
///
/// Must be called exactly once, before any other function of this module.
pub(crate) unsafe fn init() {
    // SAFETY: Called once, before any other use (the caller's contract).
    unsafe { STUB.init() };
}

/// Slot index of an address format: one address per format.
const fn addr_slot(addr: &Addr) -> usize {
    match addr {
        Addr::Cna16(_) => 0,
        Addr::Cna24(_) => 1,
        Addr::Ipv4(_) => 2,
        Addr::Ipv6(_) => 3,
    }
}

/// Checks that `dev` exists.
fn check_dev(dev: u32) -> Result<(), Refusal> {
    if dev == 0 {
        Ok(())
    } else {
        Err(Refusal::no_device())
    }
}

/// The device with index `index`.
pub(crate) fn dev_get(index: u32) -> Result<DevSnapshot, Refusal> {
    check_dev(index)?;
    let state = STUB.lock();
    let mut name = [0u8; NAME_LEN];
    let stub_name = b"stub";
    if let Some(dst) = name.get_mut(..stub_name.len()) {
        dst.copy_from_slice(stub_name);
    }
    Ok(DevSnapshot {
        index,
        name,
        name_len: stub_name.len(),
        ports: STUB_PORTS,
        version: 1 << 16,
        addrs: state.addrs,
        npi_mode: state.npi_mode,
        npi: state.npi,
        net: NetCounters {
            rx_packets: 10,
            tx_packets: 12,
            ..NetCounters::default()
        },
        echo_requests: state.echo_requests,
        echo_replies: state.echo_requests,
    })
}

/// The smallest existing device index `>= from`, or `None` past the last:
/// dumps resume from it, so devices may come and go between two calls.
pub(crate) fn dev_next(from: u32) -> Option<u32> {
    if from == 0 {
        Some(0)
    } else {
        None
    }
}

/// Port `port` of device `dev`.
pub(crate) fn port_get(dev: u32, port: u32) -> Result<PortSnapshot, Refusal> {
    check_dev(dev)?;
    let settings = *STUB
        .lock()
        .ports
        .get(port as usize)
        .ok_or(Refusal::no_port())?;
    let mut vls = [VlSnapshot::default(); MAX_VLS];
    vls[0] = VlSnapshot {
        tx_credits: 3000,
        rx_owed: 0,
        initial: 3277,
    };
    vls[1] = VlSnapshot {
        tx_credits: 3276,
        rx_owed: 2,
        initial: 3276,
    };
    let up = settings.admin_up;
    Ok(PortSnapshot {
        dev_index: dev,
        index: port,
        admin_up: up,
        phy_up: up,
        lanes: 4,
        lane_rate_mbps: 25_000,
        dll: if up {
            DllState::Normal
        } else {
            DllState::Disabled
        },
        retry: RetryReqState::Normal,
        num_retry: 0,
        num_retry_threshold: settings.num_retry_threshold,
        num_phy_reinit_threshold: settings.num_phy_reinit_threshold,
        want_sharing: settings.want_sharing,
        negotiated: up.then_some(Negotiated {
            feature_id: 1,
            tx_sharing: false,
            rx_sharing: false,
            data_ack_grain: 8,
            ctrl_ack_grain: 8,
            cell_flits: 8,
            vl_enable: 0b11,
            vls: 2,
            ctrl_credit_grain: [1; MAX_VLS],
            data_credit_grain: [1; MAX_VLS],
            peer_retry_buf_depth: 512,
            peer_packet_min_interval: 0,
        }),
        retry_buf_depth: 512,
        vls,
        vl_count: 2,
        link: Counters {
            tx_blocks: 100,
            rx_blocks: 99,
            ..Counters::default()
        },
        link_downs: 0,
        dev: DevCounters {
            interrupts: 42,
            ..DevCounters::default()
        },
    })
}

/// Number of ports of device `dev` (port indexes are `0..count`).
pub(crate) fn port_count(dev: u32) -> Result<u32, Refusal> {
    check_dev(dev)?;
    Ok(STUB_PORTS)
}

/// Applies the `Some` settings of `settings` to port `port` of `dev`, all
/// or none. (The stub announces an administrative state change on the
/// "monitor" group as the core does when the link follows.)
pub(crate) fn port_set(dev: u32, port: u32, settings: &PortSettings) -> Result<(), Refusal> {
    check_dev(dev)?;
    let was_up = {
        let mut state = STUB.lock();
        let p = state
            .ports
            .get_mut(port as usize)
            .ok_or(Refusal::no_port())?;
        let was_up = p.admin_up;
        if let Some(v) = settings.admin_up {
            p.admin_up = v;
        }
        if let Some(v) = settings.num_retry_threshold {
            p.num_retry_threshold = v;
        }
        if let Some(v) = settings.num_phy_reinit_threshold {
            p.num_phy_reinit_threshold = v;
        }
        if let Some(v) = settings.want_sharing {
            p.want_sharing = v;
        }
        was_up
    };
    // Outside the lock: netlink takes its own.
    match settings.admin_up {
        Some(up) if up != was_up => {
            if let Ok(snap) = port_get(dev, port) {
                let event = if up {
                    PortEvent::LinkUp
                } else {
                    PortEvent::LinkDown
                };
                crate::netlink::notify_port(&snap, event);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Adds local address `addr` to `dev` (one per format: `EEXIST` if the
/// device has one of that format).
pub(crate) fn addr_add(dev: u32, addr: Addr) -> Result<(), Refusal> {
    check_dev(dev)?;
    let mut state = STUB.lock();
    let slot = state
        .addrs
        .get_mut(addr_slot(&addr))
        .ok_or(Refusal::general(EINVAL, c"unsupported address type"))?;
    if slot.is_some() {
        return Err(Refusal::of(
            Field::Addr,
            EEXIST,
            c"the device already has an address of this type",
        ));
    }
    *slot = Some(addr);
    Ok(())
}

/// Removes local address `addr` from `dev` (`ENOENT` if it has not it).
pub(crate) fn addr_del(dev: u32, addr: Addr) -> Result<(), Refusal> {
    check_dev(dev)?;
    let mut state = STUB.lock();
    match state.addrs.get_mut(addr_slot(&addr)) {
        Some(slot) if *slot == Some(addr) => {
            *slot = None;
            Ok(())
        }
        _ => Err(Refusal::of(
            Field::Addr,
            ENOENT,
            c"the device has no such address",
        )),
    }
}

/// Adds `route` to its device (`EEXIST` for the same prefix twice).
pub(crate) fn route_add(route: &RouteSnapshot) -> Result<(), Refusal> {
    check_dev(route.dev_index)?;
    if route.ports >> STUB_PORTS != 0 {
        return Err(Refusal::of(
            Field::Ports,
            EINVAL,
            c"the route names a port the device does not have",
        ));
    }
    let mut state = STUB.lock();
    if state.routes.iter().flatten().any(|r| {
        r.dev_index == route.dev_index && r.dst == route.dst && r.prefix_len == route.prefix_len
    }) {
        return Err(Refusal::of(
            Field::Dst,
            EEXIST,
            c"a route to this prefix exists",
        ));
    }
    let slot = state
        .routes
        .iter_mut()
        .find(|r| r.is_none())
        .ok_or(Refusal::general(ENOSPC, c"the routing table is full"))?;
    *slot = Some(*route);
    Ok(())
}

/// Removes the route of `dev` to `dst`/`prefix_len` (`ENOENT` if none).
pub(crate) fn route_del(dev: u32, dst: Addr, prefix_len: u8) -> Result<(), Refusal> {
    check_dev(dev)?;
    let mut state = STUB.lock();
    let slot = state
        .routes
        .iter_mut()
        .find(|r| matches!(r, Some(r) if r.dst == dst && r.prefix_len == prefix_len))
        .ok_or(Refusal::of(Field::Dst, ENOENT, c"no route to this prefix"))?;
    *slot = None;
    Ok(())
}

/// The `i`-th route of `dev` (in a stable order while the table does not
/// change), or `None` past the last: dumps resume from `i`.
pub(crate) fn route_get(dev: u32, i: u32) -> Option<RouteSnapshot> {
    check_dev(dev).ok()?;
    let state = STUB.lock();
    let found = state.routes.iter().flatten().nth(i as usize).copied();
    found
}

/// Sets the partition enforcement of `dev`: `mode`, and `npi` (the 25-bit
/// wire value; in strict mode the same NPI as `mode` carries).
pub(crate) fn npi_set(dev: u32, mode: NpiMode, npi: u32) -> Result<(), Refusal> {
    check_dev(dev)?;
    let mut state = STUB.lock();
    state.npi_mode = mode;
    state.npi = npi;
    Ok(())
}

/// Sends echo request `req`; its reply goes to `reply_to` through
/// [`crate::netlink::echo_reply`], later, from any context that may sleep
/// (the core's work item). The stub answers at once, from itself.
pub(crate) fn echo(req: &EchoRequest, reply_to: ReplyTo) -> Result<(), Refusal> {
    check_dev(req.dev_index)?;
    {
        let mut state = STUB.lock();
        state.echo_requests = state.echo_requests.wrapping_add(1);
    }
    crate::netlink::echo_reply(
        &reply_to,
        &EchoReply {
            dev_index: req.dev_index,
            id: req.id,
            seq: req.seq,
            size: req.size,
            rtt_ns: 1000,
            src: req.dst,
            port: 0,
        },
    );
    Ok(())
}
