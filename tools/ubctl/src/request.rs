// SPDX-License-Identifier: GPL-2.0
//! One builder per operation of the `ub` family: what ubctl sends.

use crate::addr::{Address, Prefix};
use crate::attr::Attr;
use crate::nl::Request;
use crate::spec::{cmd, dev, echo, port, route, tp};

/// `dev-get`: one device, or all of them.
pub fn dev_get(index: Option<u32>) -> Request {
    match index {
        Some(i) => Request {
            cmd: cmd::DEV_GET,
            dump: false,
            attrs: vec![Attr::u32(dev::INDEX, i)],
        },
        None => Request {
            cmd: cmd::DEV_GET,
            dump: true,
            attrs: vec![],
        },
    }
}

/// `port-get`: one port, the ports of a device, or every port.
pub fn port_get(dev_index: Option<u32>, index: Option<u32>) -> Request {
    match (dev_index, index) {
        (Some(d), Some(p)) => Request {
            cmd: cmd::PORT_GET,
            dump: false,
            attrs: vec![Attr::u32(port::DEV_INDEX, d), Attr::u32(port::INDEX, p)],
        },
        (Some(d), None) => Request {
            cmd: cmd::PORT_GET,
            dump: true,
            attrs: vec![Attr::u32(port::DEV_INDEX, d)],
        },
        (None, _) => Request {
            cmd: cmd::PORT_GET,
            dump: true,
            attrs: vec![],
        },
    }
}

/// What `port set` changes; `None` leaves a setting alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortChanges {
    /// Administrative up (true) or down.
    pub admin_up: Option<bool>,
    /// NUM_RETRY_THRESHOLD
    pub retry_threshold: Option<u8>,
    /// NUM_PHY_REINIT_THRESHOLD
    pub reinit_threshold: Option<u8>,
    /// Credit sharing wanted.
    pub sharing: Option<bool>,
}

/// `port-set`.
pub fn port_set(dev_index: u32, index: u32, c: PortChanges) -> Request {
    let mut attrs = vec![
        Attr::u32(port::DEV_INDEX, dev_index),
        Attr::u32(port::INDEX, index),
    ];
    if let Some(up) = c.admin_up {
        attrs.push(Attr::u8(port::ADMIN_UP, u8::from(up)));
    }
    if let Some(t) = c.retry_threshold {
        attrs.push(Attr::u8(port::NUM_RETRY_THRESHOLD, t));
    }
    if let Some(t) = c.reinit_threshold {
        attrs.push(Attr::u8(port::NUM_PHY_REINIT_THRESHOLD, t));
    }
    if let Some(s) = c.sharing {
        attrs.push(Attr::u8(port::WANT_SHARING, u8::from(s)));
    }
    Request {
        cmd: cmd::PORT_SET,
        dump: false,
        attrs,
    }
}

/// `addr-add` (`add` true) or `addr-del`.
pub fn addr_change(add: bool, dev_index: u32, a: Address) -> Request {
    Request {
        cmd: if add { cmd::ADDR_ADD } else { cmd::ADDR_DEL },
        dump: false,
        attrs: vec![
            Attr::u32(dev::INDEX, dev_index),
            Attr::nest(dev::ADDR, a.attrs()),
        ],
    }
}

/// `route-add`.
pub fn route_add(
    dev_index: u32,
    dst: Prefix,
    ports: Option<u64>,
    load_balance: Option<u32>,
) -> Request {
    let mut attrs = vec![
        Attr::u32(route::DEV_INDEX, dev_index),
        Attr::nest(route::DST, dst.addr.attrs()),
        Attr::u32(route::PREFIX_LEN, dst.len),
    ];
    if let Some(p) = ports {
        attrs.push(Attr::u64(route::PORTS, p));
    }
    if let Some(lb) = load_balance {
        attrs.push(Attr::u32(route::LOAD_BALANCE, lb));
    }
    Request {
        cmd: cmd::ROUTE_ADD,
        dump: false,
        attrs,
    }
}

/// `route-del`.
pub fn route_del(dev_index: u32, dst: Prefix) -> Request {
    Request {
        cmd: cmd::ROUTE_DEL,
        dump: false,
        attrs: vec![
            Attr::u32(route::DEV_INDEX, dev_index),
            Attr::nest(route::DST, dst.addr.attrs()),
            Attr::u32(route::PREFIX_LEN, dst.len),
        ],
    }
}

/// `route-get` (a dump, of one device if given).
pub fn route_get(dev_index: Option<u32>) -> Request {
    Request {
        cmd: cmd::ROUTE_GET,
        dump: true,
        attrs: dev_index
            .map(|d| Attr::u32(route::DEV_INDEX, d))
            .into_iter()
            .collect(),
    }
}

/// `echo`: one echo request.
pub fn echo(dev_index: u32, dst: Address, id: u32, seq: u32, size: u32) -> Request {
    Request {
        cmd: cmd::ECHO,
        dump: false,
        attrs: vec![
            Attr::u32(echo::DEV_INDEX, dev_index),
            Attr::nest(echo::DST, dst.attrs()),
            Attr::u32(echo::ID, id),
            Attr::u32(echo::SEQ, seq),
            Attr::u32(echo::SIZE, size),
        ],
    }
}

/// `npi-set`: the mode and/or the NPI of a device.
pub fn npi_set(dev_index: u32, mode: Option<u32>, npi: Option<u32>) -> Request {
    let mut attrs = vec![Attr::u32(dev::INDEX, dev_index)];
    if let Some(m) = mode {
        attrs.push(Attr::u32(dev::NPI_MODE, m));
    }
    if let Some(n) = npi {
        attrs.push(Attr::u32(dev::NPI, n));
    }
    Request {
        cmd: cmd::NPI_SET,
        dump: false,
        attrs,
    }
}

/// `tp-get`: one TP Channel (device and TPN), the channels of a device, or
/// every channel.
pub fn tp_get(dev_index: Option<u32>, tpn: Option<u32>) -> Request {
    match (dev_index, tpn) {
        (Some(d), Some(t)) => Request {
            cmd: cmd::TP_GET,
            dump: false,
            attrs: vec![Attr::u32(tp::DEV_INDEX, d), Attr::u32(tp::TPN, t)],
        },
        (Some(d), None) => Request {
            cmd: cmd::TP_GET,
            dump: true,
            attrs: vec![Attr::u32(tp::DEV_INDEX, d)],
        },
        (None, _) => Request {
            cmd: cmd::TP_GET,
            dump: true,
            attrs: vec![],
        },
    }
}

/// The RTO of a channel `tp add` opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rto {
    /// A static level, µs (512, 16000, 128000 or 4000000).
    Static(u32),
    /// `base_us × 2^(n × Times)`.
    Dynamic {
        /// Base time, µs.
        base_us: u32,
        /// Coefficient N.
        n: u8,
    },
}

/// What `tp add` asks for; `None` leaves the driver's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TpConfig {
    /// `tp-transport` value (rtp when absent; ctp makes a CTP end).
    pub transport: Option<u32>,
    /// `tp-mode` value (go-back-n or selective).
    pub mode: Option<u32>,
    /// Fast retransmission.
    pub fast_retransmit: Option<bool>,
    /// OOO window, packets.
    pub ooo_window: Option<u32>,
    /// RTO.
    pub rto: Option<Rto>,
    /// Consecutive RTO expiries tolerated.
    pub retry_limit: Option<u8>,
    /// Transport MTU.
    pub mtu: Option<u32>,
    /// `tp-cc` value.
    pub cc: Option<u32>,
    /// `load-balance` value.
    pub load_balance: Option<u32>,
    /// log2 of the per-packet range.
    pub lb_range: Option<u8>,
    /// UDP source port / LBF.
    pub lb_key: Option<u16>,
    /// Send window, packets.
    pub send_window: Option<u32>,
}

/// `tp-new`: a channel to `peer` named `key` on device `dev_index` (a CTP
/// end has no key).
pub fn tp_new(dev_index: u32, peer: Address, key: Option<u32>, c: &TpConfig) -> Request {
    Request {
        cmd: cmd::TP_NEW,
        dump: false,
        attrs: channel_attrs(dev_index, peer, key, c),
    }
}

/// `tpg-new`: a group of `members` channels to `peer`, keys `key`,
/// `key + 1`, ..., each with `c`, on device `dev_index`.
pub fn tpg_new(dev_index: u32, peer: Address, key: u32, members: u32, c: &TpConfig) -> Request {
    let mut attrs = channel_attrs(dev_index, peer, Some(key), c);
    attrs.push(Attr::u32(tp::MEMBERS, members));
    Request {
        cmd: cmd::TPG_NEW,
        dump: false,
        attrs,
    }
}

/// What `tp-new` and `tpg-new` send of a channel: the device, the peer,
/// the key and the attributes `c` gives.
fn channel_attrs(dev_index: u32, peer: Address, key: Option<u32>, c: &TpConfig) -> Vec<Attr> {
    let mut attrs = vec![
        Attr::u32(tp::DEV_INDEX, dev_index),
        Attr::nest(tp::PEER, peer.attrs()),
    ];
    if let Some(k) = key {
        attrs.push(Attr::u32(tp::KEY, k));
    }
    if let Some(t) = c.transport {
        attrs.push(Attr::u32(tp::TRANSPORT, t));
    }
    if let Some(m) = c.mode {
        attrs.push(Attr::u32(tp::MODE, m));
    }
    if let Some(f) = c.fast_retransmit {
        attrs.push(Attr::u8(tp::FAST_RETRANSMIT, u8::from(f)));
    }
    if let Some(w) = c.ooo_window {
        attrs.push(Attr::u32(tp::OOO_WINDOW, w));
    }
    match c.rto {
        Some(Rto::Static(us)) => attrs.push(Attr::u32(tp::RTO_STATIC_US, us)),
        Some(Rto::Dynamic { base_us, n }) => {
            attrs.push(Attr::u32(tp::RTO_BASE_US, base_us));
            attrs.push(Attr::u8(tp::RTO_N, n));
        }
        None => {}
    }
    if let Some(r) = c.retry_limit {
        attrs.push(Attr::u8(tp::RETRY_LIMIT, r));
    }
    if let Some(m) = c.mtu {
        attrs.push(Attr::u32(tp::MTU, m));
    }
    if let Some(cc) = c.cc {
        attrs.push(Attr::u32(tp::CC, cc));
    }
    if let Some(lb) = c.load_balance {
        attrs.push(Attr::u32(tp::LOAD_BALANCE, lb));
    }
    if let Some(r) = c.lb_range {
        attrs.push(Attr::u8(tp::LB_RANGE, r));
    }
    if let Some(k) = c.lb_key {
        attrs.push(Attr::u32(tp::LB_KEY, u32::from(k)));
    }
    if let Some(w) = c.send_window {
        attrs.push(Attr::u32(tp::SEND_WINDOW, w));
    }
    attrs
}

/// `tp-set`: channel `tpn`'s state (a `tp-state` value).
pub fn tp_set_state(dev_index: u32, tpn: u32, state: u32) -> Request {
    named_tp(cmd::TP_SET, dev_index, tpn, Some(state))
}

/// `tp-del`: tears channel `tpn` down.
pub fn tp_del(dev_index: u32, tpn: u32) -> Request {
    named_tp(cmd::TP_DEL, dev_index, tpn, None)
}

/// `tpg-get`: one TP Channel Group (device and its first member's TPN),
/// the groups of a device, or every group.
pub fn tpg_get(dev_index: Option<u32>, tpn: Option<u32>) -> Request {
    let mut r = tp_get(dev_index, tpn);
    r.cmd = cmd::TPG_GET;
    r
}

/// `tpg-set`: the state (a `tp-state` value) of every member of group
/// `tpn`.
pub fn tpg_set_state(dev_index: u32, tpn: u32, state: u32) -> Request {
    named_tp(cmd::TPG_SET, dev_index, tpn, Some(state))
}

/// `tpg-del`: tears every member of group `tpn` down.
pub fn tpg_del(dev_index: u32, tpn: u32) -> Request {
    named_tp(cmd::TPG_DEL, dev_index, tpn, None)
}

/// A request of command `c` about the channel or group `tpn` of device
/// `dev_index`, with the `state` to set if given.
fn named_tp(c: u8, dev_index: u32, tpn: u32, state: Option<u32>) -> Request {
    let mut attrs = vec![Attr::u32(tp::DEV_INDEX, dev_index), Attr::u32(tp::TPN, tpn)];
    attrs.extend(state.map(|s| Attr::u32(tp::STATE, s)));
    Request {
        cmd: c,
        dump: false,
        attrs,
    }
}
