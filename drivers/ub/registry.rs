// SPDX-License-Identifier: GPL-2.0
//! Every bound controller's network layer, by device index: what the
//! netlink family reads and changes.
//!
//! Locking: one global mutex over the list, held only to find a device
//! (its `Arc` is cloned and the lock released before the device's own
//! locks are taken): lock order registry → endpoint → port.
//!
//! Device indices are handed out in bind order and never reused while the
//! module is loaded, so an index seen in a dump never names another device
//! later.

use kernel::{prelude::*, sync::Arc};

use crate::host::Addr;
use crate::link::engine::MIN_NUM_RETRY_THRESHOLD;
use crate::proto::net::npi::NpiMode;
use crate::snapshot::{
    DevSnapshot, EchoRequest, Field, PortSettings, PortSnapshot, Refusal, ReplyTo, RouteSnapshot,
    TpSnapshot, TpgSnapshot,
};
use crate::ub_net::Net;

/// The registered devices and the next index to hand out.
pub(crate) struct Devices {
    list: KVec<Arc<Net>>,
    next: u32,
}

kernel::sync::global_lock! {
    // SAFETY: `init` is called once from module init, before the PCI
    // driver (the first user) is registered.
    unsafe(uninit) static DEVICES: Mutex<Devices> = Devices { list: KVec::new(), next: 0 };
}

/// Prepares the registry.
///
/// # Safety
///
/// Called once per module load, before any other function of this module.
pub(crate) unsafe fn init() {
    // SAFETY: By the function's safety requirement.
    unsafe { DEVICES.init() };
}

/// Reserves the next device index.
pub(crate) fn next_index() -> u32 {
    let mut d = DEVICES.lock();
    let i = d.next;
    d.next = d.next.wrapping_add(1);
    i
}

/// Makes `net` visible to netlink.
/// The device of index `index`, while it is bound.
pub(crate) fn get(index: u32) -> Option<Arc<Net>> {
    DEVICES
        .lock()
        .list
        .iter()
        .find(|n| n.index() == index)
        .cloned()
}

pub(crate) fn add(net: Arc<Net>) -> Result {
    DEVICES.lock().list.push(net, GFP_KERNEL)?;
    Ok(())
}

/// Removes device `index` (unbind).
pub(crate) fn remove(index: u32) {
    let (removed, buffer) = {
        let mut d = DEVICES.lock();
        let removed = match d.list.iter().position(|n| n.index() == index) {
            Some(i) => d.list.remove(i).ok(),
            None => None,
        };
        // A static is never dropped: give the list's buffer back with the
        // last device, or every load of the module would leak it.
        let buffer = d.list.is_empty().then(|| core::mem::take(&mut d.list));
        (removed, buffer)
    };
    // The references are dropped outside the lock.
    drop(removed);
    drop(buffer);
}

fn no_dev() -> Refusal {
    Refusal {
        errno: ENODEV,
        msg: c"no UB device with this index",
        field: Some(Field::DevIndex),
    }
}

fn find(index: u32) -> Result<Arc<Net>, Refusal> {
    let d = DEVICES.lock();
    d.list
        .iter()
        .find(|n| n.index() == index)
        .cloned()
        .ok_or_else(no_dev)
}

/// Device `index`.
pub(crate) fn dev_get(index: u32) -> Result<DevSnapshot, Refusal> {
    Ok(find(index)?.snapshot())
}

/// The smallest device index at or above `from`.
pub(crate) fn dev_next(from: u32) -> Option<u32> {
    let d = DEVICES.lock();
    d.list
        .iter()
        .map(|n| n.index())
        .filter(|&i| i >= from)
        .min()
}

/// Ports of device `dev`.
pub(crate) fn port_count(dev: u32) -> Result<u32, Refusal> {
    Ok(find(dev)?.snapshot().ports)
}

fn port_of(dev: u32, port: u32) -> Result<Arc<crate::port::Port>, Refusal> {
    find(dev)?.port(port).ok_or(Refusal {
        errno: ENOENT,
        msg: c"the device has no port with this index",
        field: Some(Field::PortIndex),
    })
}

/// Port `port` of device `dev`.
pub(crate) fn port_get(dev: u32, port: u32) -> Result<PortSnapshot, Refusal> {
    port_of(dev, port)?.snapshot().map_err(|e| Refusal {
        errno: e,
        msg: c"the port is going away",
        field: None,
    })
}

/// Changes port `port` of device `dev`.
pub(crate) fn port_set(dev: u32, port: u32, set: &PortSettings) -> Result<(), Refusal> {
    let bad = |msg, field| Refusal {
        errno: EINVAL,
        msg,
        field: Some(field),
    };
    // The policy refuses these already (ub.yaml); a threshold the link
    // engine refuses would fail later, after the request was taken apart.
    if set
        .num_retry_threshold
        .is_some_and(|t| t < MIN_NUM_RETRY_THRESHOLD)
    {
        return Err(bad(
            c"NUM_RETRY_THRESHOLD must be at least 2 (the link-up alignment is a retry)",
            Field::NumRetryThreshold,
        ));
    }
    if set.num_phy_reinit_threshold == Some(0) {
        return Err(bad(
            c"NUM_PHY_REINIT_THRESHOLD must be at least 1",
            Field::NumPhyReinitThreshold,
        ));
    }
    port_of(dev, port)?.apply(set).map_err(|e| Refusal {
        errno: e,
        msg: c"the port could not apply the change",
        field: None,
    })
}

/// Adds a local address.
pub(crate) fn addr_add(dev: u32, addr: Addr) -> Result<(), Refusal> {
    find(dev)?.set_addr(addr, true)
}

/// Removes a local address.
pub(crate) fn addr_del(dev: u32, addr: Addr) -> Result<(), Refusal> {
    find(dev)?.set_addr(addr, false)
}

/// Adds a route.
pub(crate) fn route_add(r: &RouteSnapshot) -> Result<(), Refusal> {
    find(r.dev_index)?.add_route(r)
}

/// Removes a route.
pub(crate) fn route_del(dev: u32, dst: Addr, prefix_len: u8) -> Result<(), Refusal> {
    find(dev)?.del_route(dst, prefix_len)
}

/// Route `i` of device `dev`.
pub(crate) fn route_get(dev: u32, i: u32) -> Option<RouteSnapshot> {
    find(dev).ok()?.route(i)
}

fn no_memory() -> Refusal {
    Refusal::general(
        ENOMEM,
        c"no memory for a copy of the channel or group table",
    )
}

/// TP Channel `tpn` of device `dev`.
pub(crate) fn tp_get(dev: u32, tpn: u32) -> Result<TpSnapshot, Refusal> {
    let v = find(dev)?
        .tp_snapshots(tpn..=tpn)
        .map_err(|_| no_memory())?;
    v.first().copied().ok_or(Refusal::no_channel())
}

/// The TP Channels of device `dev` whose TPN is `from` or above, in TPN
/// order.
pub(crate) fn tp_list(dev: u32, from: u32) -> Result<KVec<TpSnapshot>, Refusal> {
    find(dev)?.tp_snapshots(from..).map_err(|_| no_memory())
}

/// Opens a TP Channel to `remote` named `key` with `cfg`, unclaimed
/// (`tp-new`); its TPN.
pub(crate) fn tp_new(
    dev: u32,
    remote: Addr,
    key: u32,
    cfg: crate::host::ChannelConfig,
) -> Result<u32, Refusal> {
    find(dev)?.channel_open_unclaimed(remote, key, cfg)
}

/// Makes a CTP end towards `remote`, unclaimed (`tp-new` with `transport
/// ctp`); its handle.
pub(crate) fn ctp_new(dev: u32, remote: Addr) -> Result<u32, Refusal> {
    find(dev)?.ctp_open_unclaimed(remote)
}

/// Suspends or resumes TP Channel `tpn` (`tp-set`).
pub(crate) fn tp_set(dev: u32, tpn: u32, change: crate::ub_net::TpChange) -> Result<(), Refusal> {
    find(dev)?.channel_change(tpn, change)
}

/// Tears TP Channel `tpn` down (`tp-del`).
pub(crate) fn tp_del(dev: u32, tpn: u32) -> Result<(), Refusal> {
    find(dev)?.channel_delete(tpn)
}

/// TP Channel Group `tpn` (its first member's TPN) of device `dev`.
pub(crate) fn tpg_get(dev: u32, tpn: u32) -> Result<TpgSnapshot, Refusal> {
    let v = find(dev)?
        .tpg_snapshots(tpn..=tpn)
        .map_err(|_| no_memory())?;
    v.first().copied().ok_or(Refusal::no_group())
}

/// The TP Channel Groups of device `dev` whose first member's TPN is
/// `from` or above, in that order.
pub(crate) fn tpg_list(dev: u32, from: u32) -> Result<KVec<TpgSnapshot>, Refusal> {
    find(dev)?.tpg_snapshots(from..).map_err(|_| no_memory())
}

/// Opens a TP Channel Group of `members` channels to `remote`, keys `key`
/// on, with `cfg`, unclaimed (`tpg-new`).
pub(crate) fn tpg_new(
    dev: u32,
    remote: Addr,
    key: u32,
    members: u32,
    cfg: crate::host::ChannelConfig,
) -> Result<TpgSnapshot, Refusal> {
    find(dev)?.group_open_unclaimed(remote, key, members, cfg)
}

/// Suspends or resumes every member of group `tpn` (`tpg-set`).
pub(crate) fn tpg_set(dev: u32, tpn: u32, change: crate::ub_net::TpChange) -> Result<(), Refusal> {
    find(dev)?.group_change(tpn, change)
}

/// Tears every member of group `tpn` down (`tpg-del`).
pub(crate) fn tpg_del(dev: u32, tpn: u32) -> Result<(), Refusal> {
    find(dev)?.group_delete(tpn)
}

/// Sets the NPI.
pub(crate) fn npi_set(dev: u32, mode: NpiMode, npi: u32) -> Result<(), Refusal> {
    find(dev)?.set_npi(mode, npi)
}

/// Sends an echo request.
pub(crate) fn echo(req: &EchoRequest, to: ReplyTo) -> Result<(), Refusal> {
    find(req.dev_index)?.echo(req, to)
}
