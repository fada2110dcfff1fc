// SPDX-License-Identifier: GPL-2.0
//! The "ub" generic netlink family (`Documentation/netlink/specs/ub.yaml`,
//! `Documentation/ub/netlink.rst`).
//!
//! The family, its policies and its split ops are C generated from the spec
//! (`ub_nl_gen.c`, by `scripts/ynl-regen`); the handlers those ops name
//! (`ub_nl_*_doit`, `ub_nl_*_dumpit`) are here. They parse the request
//! (already validated against the op's policy: types, ranges, lengths,
//! unknown attributes), check what the policy cannot (required attributes,
//! cross-attribute rules), ask [`crate::registry`] and answer. A handler
//! changes nothing before everything is validated, and every error carries
//! an extended ACK message and, when one attribute is at fault, that
//! attribute. `ub_nl_shim.c` holds the C helpers (static inlines and
//! macros of the netlink headers) called here.
//!
//! Outgoing: [`notify_port`] and [`notify_tp`] (multicast to "monitor")
//! and [`echo_reply`] (unicast), called by the driver core.

use crate::host::Addr;
use crate::host::ChannelCounters;
use crate::host::{ChannelConfig, LoadBalance, RtoConfig};
use crate::link::engine::{DllState, RetryReqState};
use crate::net::npi::{Npi, NpiMode};
use crate::registry;
use crate::snapshot::{
    CtpCounters, DevSnapshot, EchoReply, EchoRequest, Field, PortEvent, PortSettings, PortSnapshot,
    Refusal, ReplyTo, RouteSnapshot, TpEvent, TpSnapshot, TpgEvent, TpgMember, TpgSnapshot,
};
use crate::transport::cc::{CcAlgorithm, CcConfig};
use crate::transport::cm::{cc_code, ChannelState};
use crate::transport::{RetransmitMode, RtoMode};
use crate::ub_net::TpChange;
use core::ffi::{c_char, c_int, c_void};
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};

/// Attribute, command, group and enum values, generated from the spec
/// (bindgen over `include/uapi/linux/ub_netlink.h`).
#[path = "ub_nl_uapi.rs"]
#[allow(
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    unreachable_pub
)]
mod uapi;

// The C helpers of `ub_nl_shim.c`. Each is one call of a static inline or
// macro of <net/netlink.h>/<net/genetlink.h>; each call site says why its
// pointers are valid. Only pointers cross: the structs behind them are
// never passed by value, so their bindgen layout (sk_buff holds an empty
// `its_array`, which trips improper_ctypes) does not matter here.
#[allow(improper_ctypes)]
extern "C" {
    fn ub_nl_register() -> c_int;
    fn ub_nl_unregister();
    fn ub_nl_dump_attrs(cb: *mut bindings::netlink_callback) -> *mut *mut bindings::nlattr;
    fn ub_nl_dump_maxattr(cb: *mut bindings::netlink_callback) -> u32;
    fn ub_nl_dump_extack(cb: *mut bindings::netlink_callback) -> *mut bindings::netlink_ext_ack;
    fn ub_nl_dump_cursor(cb: *mut bindings::netlink_callback) -> *mut u32;
    fn ub_nl_info_in_init_net(info: *const bindings::genl_info) -> bool;
    fn ub_nl_get_u8(nla: *const bindings::nlattr) -> u8;
    fn ub_nl_get_u32(nla: *const bindings::nlattr) -> u32;
    fn ub_nl_get_u64(nla: *const bindings::nlattr) -> u64;
    fn ub_nl_data(nla: *const bindings::nlattr) -> *const c_void;
    fn ub_nl_len(nla: *const bindings::nlattr) -> c_int;
    fn ub_nl_parse_addr(
        tb: *mut *mut bindings::nlattr,
        nest: *const bindings::nlattr,
        extack: *mut bindings::netlink_ext_ack,
    ) -> c_int;
    fn ub_nl_set_err(
        extack: *mut bindings::netlink_ext_ack,
        msg: *const c_char,
        bad_attr: *const bindings::nlattr,
    );
    fn ub_nl_set_missing(
        extack: *mut bindings::netlink_ext_ack,
        nest: *const bindings::nlattr,
        ty: u32,
    );
    fn ub_nl_msg_new(gfp: bindings::gfp_t) -> *mut bindings::sk_buff;
    fn ub_nl_msg_new_small(payload: usize, gfp: bindings::gfp_t) -> *mut bindings::sk_buff;
    fn ub_nl_msg_free(skb: *mut bindings::sk_buff);
    fn ub_nl_put_reply(
        skb: *mut bindings::sk_buff,
        info: *mut bindings::genl_info,
        cmd: u8,
    ) -> *mut c_void;
    fn ub_nl_put_dump(
        skb: *mut bindings::sk_buff,
        cb: *mut bindings::netlink_callback,
        cmd: u8,
    ) -> *mut c_void;
    fn ub_nl_put_event(skb: *mut bindings::sk_buff, cmd: u8) -> *mut c_void;
    fn ub_nl_msg_end(skb: *mut bindings::sk_buff, hdr: *mut c_void);
    fn ub_nl_msg_cancel(skb: *mut bindings::sk_buff, hdr: *mut c_void);
    fn ub_nl_reply(skb: *mut bindings::sk_buff, info: *mut bindings::genl_info) -> c_int;
    fn ub_nl_multicast_monitor(skb: *mut bindings::sk_buff, gfp: bindings::gfp_t) -> c_int;
    fn ub_nl_unicast_init_net(skb: *mut bindings::sk_buff, portid: u32) -> c_int;
    fn ub_nl_monitor_has_listeners() -> bool;
    fn ub_nl_put_u8(skb: *mut bindings::sk_buff, ty: c_int, value: u8) -> c_int;
    fn ub_nl_put_u32(skb: *mut bindings::sk_buff, ty: c_int, value: u32) -> c_int;
    fn ub_nl_put_u64(skb: *mut bindings::sk_buff, ty: c_int, value: u64, pad: c_int) -> c_int;
    fn ub_nl_put_bytes(
        skb: *mut bindings::sk_buff,
        ty: c_int,
        data: *const c_void,
        len: c_int,
    ) -> c_int;
    fn ub_nl_nest_start(skb: *mut bindings::sk_buff, ty: c_int) -> *mut bindings::nlattr;
    fn ub_nl_nest_end(skb: *mut bindings::sk_buff, nest: *mut bindings::nlattr);
    fn ub_nl_nest_cancel(skb: *mut bindings::sk_buff, nest: *mut bindings::nlattr);
}

// Commands fit the genetlink header's u8.
const _: () = assert!(uapi::UB_CMD_MAX <= u8::MAX as u32);

/// The `.maxattr` of each op's request policy in `ub_nl_gen.c` (the highest
/// attribute of the op's request list in the spec): the length, minus one,
/// of the attribute table genetlink hands a `doit`. `scripts/ynl-regen
/// --check` fails if one differs from the generated tables. (Dumps read
/// theirs from the op itself.)
mod maxattr {
    use super::uapi;
    pub(super) const DEV_GET_DO: u32 = uapi::UB_A_DEV_INDEX;
    pub(super) const PORT_GET_DO: u32 = uapi::UB_A_PORT_INDEX;
    pub(super) const PORT_SET_DO: u32 = uapi::UB_A_PORT_WANT_SHARING;
    pub(super) const ADDR_ADD_DO: u32 = uapi::UB_A_DEV_ADDR;
    pub(super) const ADDR_DEL_DO: u32 = uapi::UB_A_DEV_ADDR;
    pub(super) const ROUTE_ADD_DO: u32 = uapi::UB_A_ROUTE_LOAD_BALANCE;
    pub(super) const ROUTE_DEL_DO: u32 = uapi::UB_A_ROUTE_PREFIX_LEN;
    pub(super) const NPI_SET_DO: u32 = uapi::UB_A_DEV_NPI;
    pub(super) const ECHO_DO: u32 = uapi::UB_A_ECHO_SIZE;
    pub(super) const TP_GET_DO: u32 = uapi::UB_A_TP_TPN;
    pub(super) const TP_NEW_DO: u32 = uapi::UB_A_TP_SEND_WINDOW;
    pub(super) const TP_SET_DO: u32 = uapi::UB_A_TP_SEND_WINDOW;
    pub(super) const TP_DEL_DO: u32 = uapi::UB_A_TP_TPN;
    pub(super) const TPG_GET_DO: u32 = uapi::UB_A_TP_TPN;
    pub(super) const TPG_NEW_DO: u32 = uapi::UB_A_TP_MEMBERS;
    pub(super) const TPG_SET_DO: u32 = uapi::UB_A_TP_SEND_WINDOW;
    pub(super) const TPG_DEL_DO: u32 = uapi::UB_A_TP_TPN;
}

/// The attribute set of an operation's requests.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum AttrSet {
    Dev,
    Port,
    Route,
    Echo,
    Tp,
}

/// The attribute of `set` that carries `field`, if the set has one.
fn field_attr(set: AttrSet, field: Field) -> Option<u32> {
    use Field as F;
    Some(match (set, field) {
        (AttrSet::Dev, F::DevIndex) => uapi::UB_A_DEV_INDEX,
        (AttrSet::Dev, F::Addr) => uapi::UB_A_DEV_ADDR,
        (AttrSet::Dev, F::NpiMode) => uapi::UB_A_DEV_NPI_MODE,
        (AttrSet::Dev, F::Npi) => uapi::UB_A_DEV_NPI,
        (AttrSet::Port, F::DevIndex) => uapi::UB_A_PORT_DEV_INDEX,
        (AttrSet::Port, F::PortIndex) => uapi::UB_A_PORT_INDEX,
        (AttrSet::Port, F::AdminUp) => uapi::UB_A_PORT_ADMIN_UP,
        (AttrSet::Port, F::NumRetryThreshold) => uapi::UB_A_PORT_NUM_RETRY_THRESHOLD,
        (AttrSet::Port, F::NumPhyReinitThreshold) => uapi::UB_A_PORT_NUM_PHY_REINIT_THRESHOLD,
        (AttrSet::Port, F::WantSharing) => uapi::UB_A_PORT_WANT_SHARING,
        (AttrSet::Route, F::DevIndex) => uapi::UB_A_ROUTE_DEV_INDEX,
        (AttrSet::Route, F::Dst) => uapi::UB_A_ROUTE_DST,
        (AttrSet::Route, F::PrefixLen) => uapi::UB_A_ROUTE_PREFIX_LEN,
        (AttrSet::Route, F::Ports) => uapi::UB_A_ROUTE_PORTS,
        (AttrSet::Route, F::LoadBalance) => uapi::UB_A_ROUTE_LOAD_BALANCE,
        (AttrSet::Echo, F::DevIndex) => uapi::UB_A_ECHO_DEV_INDEX,
        (AttrSet::Echo, F::Dst) => uapi::UB_A_ECHO_DST,
        (AttrSet::Echo, F::Size) => uapi::UB_A_ECHO_SIZE,
        (AttrSet::Tp, F::DevIndex) => uapi::UB_A_TP_DEV_INDEX,
        (AttrSet::Tp, F::Tpn) => uapi::UB_A_TP_TPN,
        (AttrSet::Tp, F::Peer) => uapi::UB_A_TP_PEER,
        (AttrSet::Tp, F::Key) => uapi::UB_A_TP_KEY,
        (AttrSet::Tp, F::State) => uapi::UB_A_TP_STATE,
        (AttrSet::Tp, F::Transport) => uapi::UB_A_TP_TRANSPORT,
        (AttrSet::Tp, F::Mode) => uapi::UB_A_TP_MODE,
        (AttrSet::Tp, F::FastRetransmit) => uapi::UB_A_TP_FAST_RETRANSMIT,
        (AttrSet::Tp, F::Mtu) => uapi::UB_A_TP_MTU,
        (AttrSet::Tp, F::OooWindow) => uapi::UB_A_TP_OOO_WINDOW,
        (AttrSet::Tp, F::RtoStatic) => uapi::UB_A_TP_RTO_STATIC_US,
        (AttrSet::Tp, F::RtoBase) => uapi::UB_A_TP_RTO_BASE_US,
        (AttrSet::Tp, F::RtoN) => uapi::UB_A_TP_RTO_N,
        (AttrSet::Tp, F::RetryLimit) => uapi::UB_A_TP_RETRY_LIMIT,
        (AttrSet::Tp, F::Cc) => uapi::UB_A_TP_CC,
        (AttrSet::Tp, F::LoadBalance) => uapi::UB_A_TP_LOAD_BALANCE,
        (AttrSet::Tp, F::LbRange) => uapi::UB_A_TP_LB_RANGE,
        (AttrSet::Tp, F::LbKey) => uapi::UB_A_TP_LB_KEY,
        (AttrSet::Tp, F::SendWindow) => uapi::UB_A_TP_SEND_WINDOW,
        (AttrSet::Tp, F::Members) => uapi::UB_A_TP_MEMBERS,
        _ => return None,
    })
}

/// One attribute of a validated request.
///
/// # Invariants
///
/// Points to an attribute that genetlink validated against the op's
/// policy, inside a request that lives for `'a`.
#[derive(Clone, Copy)]
struct Attr<'a> {
    nla: NonNull<bindings::nlattr>,
    _request: PhantomData<&'a bindings::nlattr>,
}

impl<'a> Attr<'a> {
    fn as_ptr(self) -> *const bindings::nlattr {
        self.nla.as_ptr()
    }

    /// The value of a `u8` attribute (the policy checked its length).
    fn u8(self) -> u8 {
        // SAFETY: A valid attribute (type invariant) whose policy type is
        // NLA_U8, so it holds at least one byte of payload.
        unsafe { ub_nl_get_u8(self.as_ptr()) }
    }

    /// The value of a `u32` attribute (the policy checked its length).
    fn u32(self) -> u32 {
        // SAFETY: As in `u8`, for NLA_U32 (four bytes).
        unsafe { ub_nl_get_u32(self.as_ptr()) }
    }

    /// The value of a `u64` attribute (the policy checked its length).
    fn u64(self) -> u64 {
        // SAFETY: As in `u8`, for NLA_U64 (eight bytes).
        unsafe { ub_nl_get_u64(self.as_ptr()) }
    }

    /// The payload of a binary attribute.
    fn bytes(self) -> &'a [u8] {
        // SAFETY: A valid attribute (type invariant): its header is
        // readable.
        let len = unsafe { ub_nl_len(self.as_ptr()) };
        let len = usize::try_from(len).unwrap_or(0);
        // SAFETY: netlink validated that the attribute's payload of `len`
        // bytes lies inside the request, which lives for `'a`.
        unsafe { core::slice::from_raw_parts(ub_nl_data(self.as_ptr()).cast::<u8>(), len) }
    }
}

/// The attributes of a validated request, and where its errors go.
struct Request<'a> {
    /// `attrs[t]` is attribute `t` or null; `t <= maxattr` of the op.
    attrs: &'a [*mut bindings::nlattr],
    extack: *mut bindings::netlink_ext_ack,
    set: AttrSet,
}

impl<'a> Request<'a> {
    /// # Safety
    ///
    /// `attrs` is null or points to `maxattr + 1` attribute pointers that
    /// genetlink parsed with a policy of `maxattr` for this request, valid
    /// for `'a`; `extack` is null or valid for `'a`.
    unsafe fn new(
        attrs: *mut *mut bindings::nlattr,
        maxattr: u32,
        extack: *mut bindings::netlink_ext_ack,
        set: AttrSet,
    ) -> Self {
        let attrs = if attrs.is_null() {
            &[][..]
        } else {
            let len = usize::try_from(maxattr).unwrap_or(0).saturating_add(1);
            // SAFETY: `attrs` has `maxattr + 1` entries valid for `'a`
            // (the caller's contract).
            unsafe { core::slice::from_raw_parts(attrs, len) }
        };
        Self { attrs, extack, set }
    }

    /// Attribute `ty` of the request, if present.
    fn get(&self, ty: u32) -> Option<Attr<'a>> {
        let nla = *self.attrs.get(usize::try_from(ty).ok()?)?;
        NonNull::new(nla).map(|nla| Attr {
            nla,
            _request: PhantomData,
        })
    }

    /// The attribute that carries `field`, if present.
    fn field(&self, field: Field) -> Option<Attr<'a>> {
        self.get(field_attr(self.set, field)?)
    }

    /// Attribute `ty`, or an extended ACK saying it is missing.
    fn require(&self, ty: u32) -> Result<Attr<'a>, Error> {
        self.get(ty).ok_or_else(|| {
            // SAFETY: `extack` is null or valid (`new`'s contract); the
            // macro behind the helper accepts a null extack.
            unsafe { ub_nl_set_missing(self.extack, core::ptr::null(), ty) };
            EINVAL
        })
    }

    /// Reports `refusal` in the extended ACK; returns its error.
    fn refuse(&self, refusal: &Refusal) -> Error {
        let bad = refusal
            .field
            .and_then(|f| self.field(f))
            .map_or(core::ptr::null(), Attr::as_ptr);
        // SAFETY: `extack` is null or valid; the message is static, as
        // netlink keeps the pointer; `bad` is null or an attribute of this
        // request.
        unsafe { ub_nl_set_err(self.extack, refusal.msg.as_ptr().cast(), bad) };
        refusal.errno
    }

    /// The value of the `u32` attribute `ty`, required.
    fn require_u32(&self, ty: u32) -> Result<u32, Error> {
        Ok(self.require(ty)?.u32())
    }
}

/// The parts of an address nest (`addr` set), before they are checked.
#[derive(Clone, Copy, Default)]
struct AddrParts<'a> {
    ty: Option<u32>,
    cna: Option<u32>,
    ipv4: Option<&'a [u8]>,
    ipv6: Option<&'a [u8]>,
}

/// The address an `addr` nest describes; `field` is the nest's attribute
/// (for the refusal).
fn addr_from_parts(parts: &AddrParts<'_>, field: Field) -> Result<Addr, Refusal> {
    let bad = |msg| Refusal::of(field, EINVAL, msg);
    let ty = parts.ty.ok_or(bad(c"address without its type attribute"))?;
    let values = usize::from(parts.cna.is_some())
        + usize::from(parts.ipv4.is_some())
        + usize::from(parts.ipv6.is_some());
    if values > 1 {
        return Err(bad(c"address with values of several types"));
    }
    match ty {
        uapi::UB_ADDR_TYPE_CNA16 => {
            let cna = parts
                .cna
                .ok_or(bad(c"CNA address without its cna attribute"))?;
            u16::try_from(cna)
                .map(Addr::Cna16)
                .map_err(|_| bad(c"16-bit CNA above 0xffff"))
        }
        uapi::UB_ADDR_TYPE_CNA24 => {
            let cna = parts
                .cna
                .ok_or(bad(c"CNA address without its cna attribute"))?;
            if cna > 0xff_ffff {
                return Err(bad(c"24-bit CNA above 0xffffff"));
            }
            Ok(Addr::Cna24(cna))
        }
        uapi::UB_ADDR_TYPE_IPV4 => {
            let ip = parts
                .ipv4
                .ok_or(bad(c"IPv4 address without its ipv4 attribute"))?;
            <[u8; 4]>::try_from(ip)
                .map(Addr::Ipv4)
                .map_err(|_| bad(c"IPv4 address not 4 bytes"))
        }
        uapi::UB_ADDR_TYPE_IPV6 => {
            let ip = parts
                .ipv6
                .ok_or(bad(c"IPv6 address without its ipv6 attribute"))?;
            <[u8; 16]>::try_from(ip)
                .map(Addr::Ipv6)
                .map_err(|_| bad(c"IPv6 address not 16 bytes"))
        }
        _ => Err(bad(c"unknown address type")),
    }
}

/// Checks a route prefix: its length within the address width, no bits
/// set past it.
fn check_prefix(dst: &Addr, prefix_len: u32) -> Result<u8, Refusal> {
    let (value, width) = dst.key();
    let prefix = u8::try_from(prefix_len)
        .ok()
        .filter(|p| *p <= width)
        .ok_or(Refusal::of(
            Field::PrefixLen,
            EINVAL,
            c"prefix length above the address width",
        ))?;
    let host_bits = u32::from(width - prefix);
    let host_mask = 1u128
        .checked_shl(host_bits)
        .map_or(u128::MAX, |m| m.wrapping_sub(1));
    if value & host_mask != 0 {
        return Err(Refusal::of(
            Field::Dst,
            EINVAL,
            c"destination has bits set past the prefix length",
        ));
    }
    Ok(prefix)
}

/// Checks an NPI mode and value from `npi-set`.
fn npi_from(mode: u32, npi: u32) -> Result<NpiMode, Refusal> {
    let value = Npi::try_from_raw(npi)
        .ok_or_else(|| Refusal::of(Field::Npi, EINVAL, c"NPI wider than 25 bits"))?;
    if !value.is_valid() {
        return Err(Refusal::of(
            Field::Npi,
            EINVAL,
            c"NPI with partition ID 0 (invalid)",
        ));
    }
    match mode {
        uapi::UB_NPI_MODE_STRICT => Ok(NpiMode::Strict(value)),
        uapi::UB_NPI_MODE_LOOSE => Ok(NpiMode::Loose),
        _ => Err(Refusal::of(Field::NpiMode, EINVAL, c"unknown NPI mode")),
    }
}

/// The `addr` nest `nest` of `req` as an address.
fn parse_addr(req: &Request<'_>, nest: Attr<'_>, field: Field) -> Result<Addr, Error> {
    let mut tb = [core::ptr::null_mut::<bindings::nlattr>(); uapi::UB_A_ADDR_MAX as usize + 1];
    // SAFETY: `tb` has UB_A_ADDR_MAX + 1 entries, as the helper writes;
    // `nest` is a validated attribute of the request; `extack` is null or
    // valid.
    to_result(unsafe { ub_nl_parse_addr(tb.as_mut_ptr(), nest.as_ptr(), req.extack) })?;
    // SAFETY: `tb` was filled by nla_parse_nested with the addr policy
    // (maxattr UB_A_ADDR_MAX) from the request, which outlives `inner`.
    let inner = unsafe { Request::new(tb.as_mut_ptr(), uapi::UB_A_ADDR_MAX, req.extack, req.set) };
    let parts = AddrParts {
        ty: inner.get(uapi::UB_A_ADDR_TYPE).map(Attr::u32),
        cna: inner.get(uapi::UB_A_ADDR_CNA).map(Attr::u32),
        ipv4: inner.get(uapi::UB_A_ADDR_IPV4).map(Attr::bytes),
        ipv6: inner.get(uapi::UB_A_ADDR_IPV6).map(Attr::bytes),
    };
    addr_from_parts(&parts, field).map_err(|r| req.refuse(&r))
}

/// A message being written into an skb.
///
/// # Invariants
///
/// `skb` is a valid sk_buff that this writer may append to.
struct Writer {
    skb: NonNull<bindings::sk_buff>,
}

impl Writer {
    fn put_u8(&mut self, ty: u32, v: u8) -> Result {
        // SAFETY: `skb` is valid (type invariant).
        to_result(unsafe { ub_nl_put_u8(self.skb.as_ptr(), ty as c_int, v) })
    }

    fn put_bool(&mut self, ty: u32, v: bool) -> Result {
        self.put_u8(ty, u8::from(v))
    }

    fn put_u32(&mut self, ty: u32, v: u32) -> Result {
        // SAFETY: `skb` is valid (type invariant).
        to_result(unsafe { ub_nl_put_u32(self.skb.as_ptr(), ty as c_int, v) })
    }

    /// A u64, padded with the set's `pad` attribute where alignment needs it.
    fn put_u64(&mut self, ty: u32, v: u64, pad: u32) -> Result {
        // SAFETY: `skb` is valid (type invariant).
        to_result(unsafe { ub_nl_put_u64(self.skb.as_ptr(), ty as c_int, v, pad as c_int) })
    }

    fn put_bytes(&mut self, ty: u32, v: &[u8]) -> Result {
        let len = c_int::try_from(v.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: `skb` is valid (type invariant); `v` is readable for
        // `len` bytes.
        to_result(unsafe {
            ub_nl_put_bytes(self.skb.as_ptr(), ty as c_int, v.as_ptr().cast(), len)
        })
    }

    /// A NUL-terminated string of `v` (which holds no NUL).
    fn put_str(&mut self, ty: u32, v: &[u8]) -> Result {
        let mut buf = [0u8; crate::snapshot::NAME_LEN + 1];
        let dst = buf.get_mut(..v.len()).ok_or(EINVAL)?;
        dst.copy_from_slice(v);
        self.put_bytes(ty, buf.get(..=v.len()).ok_or(EINVAL)?)
    }

    /// A nest of type `ty` holding what `fill` writes.
    fn nest(&mut self, ty: u32, fill: impl FnOnce(&mut Self) -> Result) -> Result {
        // SAFETY: `skb` is valid (type invariant).
        let nest = unsafe { ub_nl_nest_start(self.skb.as_ptr(), ty as c_int) };
        if nest.is_null() {
            return Err(EMSGSIZE);
        }
        match fill(self) {
            Ok(()) => {
                // SAFETY: `nest` was started in this skb just above.
                unsafe { ub_nl_nest_end(self.skb.as_ptr(), nest) };
                Ok(())
            }
            Err(e) => {
                // SAFETY: As above.
                unsafe { ub_nl_nest_cancel(self.skb.as_ptr(), nest) };
                Err(e)
            }
        }
    }

    /// Writes one message whose header `hdr` was just put into the skb:
    /// ends it if `fill` succeeds, removes it otherwise.
    fn message(&mut self, hdr: *mut c_void, fill: impl FnOnce(&mut Self) -> Result) -> Result {
        if hdr.is_null() {
            return Err(EMSGSIZE);
        }
        match fill(self) {
            Ok(()) => {
                // SAFETY: `hdr` is the header just put into this skb.
                unsafe { ub_nl_msg_end(self.skb.as_ptr(), hdr) };
                Ok(())
            }
            Err(e) => {
                // SAFETY: As above.
                unsafe { ub_nl_msg_cancel(self.skb.as_ptr(), hdr) };
                Err(e)
            }
        }
    }
}

/// An sk_buff this code allocated and owns until it is sent.
struct OwnedSkb(NonNull<bindings::sk_buff>);

impl OwnedSkb {
    fn new() -> Result<Self> {
        // SAFETY: Allocates a fresh skb; GFP_KERNEL: callers may sleep
        // (handlers, and the core's work items).
        let skb = unsafe { ub_nl_msg_new(bindings::GFP_KERNEL) };
        NonNull::new(skb).map(Self).ok_or(ENOMEM)
    }

    /// A message with room for `payload` bytes of attributes only: an
    /// event sent at a high rate (one per echo reply) takes its true size
    /// of the reader's receive buffer, and a page-sized one would overrun
    /// it after a few dozen.
    fn small(payload: usize) -> Result<Self> {
        // SAFETY: Allocates a fresh skb; GFP_KERNEL: the caller may sleep.
        let skb = unsafe { ub_nl_msg_new_small(payload, bindings::GFP_KERNEL) };
        NonNull::new(skb).map(Self).ok_or(ENOMEM)
    }

    fn writer(&self) -> Writer {
        // INVARIANT: We own the skb.
        Writer { skb: self.0 }
    }

    /// Gives up ownership to a sending helper (which consumes the skb).
    fn into_raw(self) -> *mut bindings::sk_buff {
        let skb = self.0.as_ptr();
        core::mem::forget(self);
        skb
    }
}

impl Drop for OwnedSkb {
    fn drop(&mut self) {
        // SAFETY: We own the skb and nothing else refers to it.
        unsafe { ub_nl_msg_free(self.0.as_ptr()) };
    }
}

// ---- Replies ----

const fn dll_state(s: DllState) -> u32 {
    match s {
        DllState::Disabled => uapi::UB_DLL_STATE_DISABLED,
        DllState::ParamInit => uapi::UB_DLL_STATE_PARAM_INIT,
        DllState::CreditInit => uapi::UB_DLL_STATE_CREDIT_INIT,
        DllState::Normal => uapi::UB_DLL_STATE_NORMAL,
    }
}

const fn retry_state(s: RetryReqState) -> u32 {
    match s {
        RetryReqState::Normal => uapi::UB_RETRY_REQ_STATE_NORMAL,
        RetryReqState::Req => uapi::UB_RETRY_REQ_STATE_REQ,
        RetryReqState::Wait => uapi::UB_RETRY_REQ_STATE_WAIT,
        RetryReqState::Retrain => uapi::UB_RETRY_REQ_STATE_RETRAIN,
        RetryReqState::Error => uapi::UB_RETRY_REQ_STATE_ERROR,
    }
}

const fn port_event(e: PortEvent) -> u32 {
    match e {
        PortEvent::LinkUp => uapi::UB_PORT_EVENT_LINK_UP,
        PortEvent::LinkDown => uapi::UB_PORT_EVENT_LINK_DOWN,
        PortEvent::Retrain => uapi::UB_PORT_EVENT_RETRAIN,
        PortEvent::Stopped => uapi::UB_PORT_EVENT_STOPPED,
        PortEvent::Recovered => uapi::UB_PORT_EVENT_RECOVERED,
        PortEvent::DeviceError => uapi::UB_PORT_EVENT_DEVICE_ERROR,
    }
}

/// An `addr` nest of type `ty`.
fn put_addr(w: &mut Writer, ty: u32, addr: &Addr) -> Result {
    w.nest(ty, |w| match *addr {
        Addr::Cna16(a) => {
            w.put_u32(uapi::UB_A_ADDR_TYPE, uapi::UB_ADDR_TYPE_CNA16)?;
            w.put_u32(uapi::UB_A_ADDR_CNA, u32::from(a))
        }
        Addr::Cna24(a) => {
            w.put_u32(uapi::UB_A_ADDR_TYPE, uapi::UB_ADDR_TYPE_CNA24)?;
            w.put_u32(uapi::UB_A_ADDR_CNA, a & 0xff_ffff)
        }
        Addr::Ipv4(a) => {
            w.put_u32(uapi::UB_A_ADDR_TYPE, uapi::UB_ADDR_TYPE_IPV4)?;
            w.put_bytes(uapi::UB_A_ADDR_IPV4, &a)
        }
        Addr::Ipv6(a) => {
            w.put_u32(uapi::UB_A_ADDR_TYPE, uapi::UB_ADDR_TYPE_IPV6)?;
            w.put_bytes(uapi::UB_A_ADDR_IPV6, &a)
        }
    })
}

fn fill_dev(w: &mut Writer, d: &DevSnapshot) -> Result {
    w.put_u32(uapi::UB_A_DEV_INDEX, d.index)?;
    w.put_str(uapi::UB_A_DEV_NAME, d.name())?;
    w.put_u32(uapi::UB_A_DEV_PORTS, d.ports)?;
    w.put_u32(uapi::UB_A_DEV_VERSION, d.version)?;
    for a in d.addrs.iter().flatten() {
        put_addr(w, uapi::UB_A_DEV_ADDR, a)?;
    }
    let mode = match d.npi_mode {
        NpiMode::Strict(_) => uapi::UB_NPI_MODE_STRICT,
        NpiMode::Loose => uapi::UB_NPI_MODE_LOOSE,
    };
    w.put_u32(uapi::UB_A_DEV_NPI_MODE, mode)?;
    w.put_u32(uapi::UB_A_DEV_NPI, d.npi)?;
    w.nest(uapi::UB_A_DEV_NET_STATS, |w| {
        const PAD: u32 = uapi::UB_A_NET_STATS_PAD;
        let n = &d.net;
        w.put_u64(uapi::UB_A_NET_STATS_RX_PACKETS, n.rx_packets, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_TX_PACKETS, n.tx_packets, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_ICRC_DROPS, n.icrc_drops, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_NPI_DROPS, n.npi_drops, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_NO_ROUTE_DROPS, n.no_route_drops, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_MALFORMED, n.malformed, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_NOT_FOR_US, n.not_for_us, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_UNKNOWN_CHANNEL, n.unknown_channel, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_WRONG_PEER, n.wrong_peer, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_ECHO_REQUESTS, d.echo_requests, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_ECHO_REPLIES, d.echo_replies, PAD)?;
        w.put_u64(uapi::UB_A_NET_STATS_ECHO_DROPPED, d.echo_dropped, PAD)
    })
}

fn fill_port(w: &mut Writer, p: &PortSnapshot, event: Option<PortEvent>) -> Result {
    w.put_u32(uapi::UB_A_PORT_DEV_INDEX, p.dev_index)?;
    w.put_u32(uapi::UB_A_PORT_INDEX, p.index)?;
    w.put_bool(uapi::UB_A_PORT_ADMIN_UP, p.admin_up)?;
    w.put_bool(uapi::UB_A_PORT_PHY_UP, p.phy_up)?;
    w.put_u32(uapi::UB_A_PORT_LANES, p.lanes)?;
    w.put_u32(uapi::UB_A_PORT_LANE_RATE_MBPS, p.lane_rate_mbps)?;
    w.put_u32(uapi::UB_A_PORT_DLL_STATE, dll_state(p.dll))?;
    w.put_u32(uapi::UB_A_PORT_RETRY_STATE, retry_state(p.retry))?;
    w.put_u32(uapi::UB_A_PORT_NUM_RETRY, u32::from(p.num_retry))?;
    w.put_u8(uapi::UB_A_PORT_NUM_RETRY_THRESHOLD, p.num_retry_threshold)?;
    w.put_u8(
        uapi::UB_A_PORT_NUM_PHY_REINIT_THRESHOLD,
        p.num_phy_reinit_threshold,
    )?;
    w.put_bool(uapi::UB_A_PORT_WANT_SHARING, p.want_sharing)?;
    if let Some(n) = &p.negotiated {
        w.put_u32(uapi::UB_A_PORT_FEATURE_ID, u32::from(n.feature_id))?;
        w.put_bool(uapi::UB_A_PORT_TX_SHARING, n.tx_sharing)?;
        w.put_bool(uapi::UB_A_PORT_RX_SHARING, n.rx_sharing)?;
        w.put_u32(uapi::UB_A_PORT_CELL_FLITS, u32::from(n.cell_flits))?;
        w.put_u32(uapi::UB_A_PORT_DATA_ACK_GRAIN, u32::from(n.data_ack_grain))?;
        w.put_u32(uapi::UB_A_PORT_CTRL_ACK_GRAIN, u32::from(n.ctrl_ack_grain))?;
        w.put_u32(uapi::UB_A_PORT_VL_ENABLE, u32::from(n.vl_enable))?;
        w.put_u32(
            uapi::UB_A_PORT_PEER_RETRY_BUF_DEPTH,
            u32::from(n.peer_retry_buf_depth),
        )?;
    }
    w.put_u32(uapi::UB_A_PORT_RETRY_BUF_DEPTH, p.retry_buf_depth)?;
    for (vl, c) in (0u32..).zip(p.vls()) {
        w.nest(uapi::UB_A_PORT_VL, |w| {
            w.put_u32(uapi::UB_A_VL_INDEX, vl)?;
            w.put_u32(uapi::UB_A_VL_TX_CREDITS, c.tx_credits)?;
            w.put_u32(uapi::UB_A_VL_RX_OWED, c.rx_owed)?;
            w.put_u32(uapi::UB_A_VL_INITIAL, c.initial)?;
            w.put_u64(
                uapi::UB_A_VL_CREDIT_STALLS,
                c.credit_stalls,
                uapi::UB_A_VL_PAD,
            )
        })?;
    }
    w.nest(uapi::UB_A_PORT_LINK_STATS, |w| {
        const PAD: u32 = uapi::UB_A_LINK_STATS_PAD;
        let l = &p.link;
        for (ty, v) in [
            (uapi::UB_A_LINK_STATS_TX_BLOCKS, l.tx_blocks),
            (uapi::UB_A_LINK_STATS_TX_FLITS, l.tx_flits),
            (uapi::UB_A_LINK_STATS_TX_DLLDPS, l.tx_dlldps),
            (
                uapi::UB_A_LINK_STATS_TX_RETRANSMITTED_FLITS,
                l.tx_retransmitted_flits,
            ),
            (uapi::UB_A_LINK_STATS_TX_CRD_ACKS, l.tx_crd_acks),
            (uapi::UB_A_LINK_STATS_RX_BLOCKS, l.rx_blocks),
            (uapi::UB_A_LINK_STATS_RX_FLITS, l.rx_flits),
            (uapi::UB_A_LINK_STATS_RX_DLLDPS, l.rx_dlldps),
            (uapi::UB_A_LINK_STATS_RX_CRC_ERRORS, l.rx_crc_errors),
            (uapi::UB_A_LINK_STATS_RX_FEC_ERRORS, l.rx_fec_errors),
            (uapi::UB_A_LINK_STATS_RX_MALFORMED, l.rx_malformed),
            (
                uapi::UB_A_LINK_STATS_RX_DISCARDED_FLITS,
                l.rx_discarded_flits,
            ),
            (uapi::UB_A_LINK_STATS_RETRY_REQ_SETS, l.retry_req_sets),
            (uapi::UB_A_LINK_STATS_RETRY_ACK_SETS, l.retry_ack_sets),
            (uapi::UB_A_LINK_STATS_RETRY_TIMEOUTS, l.retry_timeouts),
            (uapi::UB_A_LINK_STATS_RETRAINS, l.retrains),
            (uapi::UB_A_LINK_STATS_CREDIT_STALLS, l.credit_stalls),
            (uapi::UB_A_LINK_STATS_LINK_DOWNS, p.link_downs),
        ] {
            w.put_u64(ty, v, PAD)?;
        }
        Ok(())
    })?;
    w.nest(uapi::UB_A_PORT_DEV_STATS, |w| {
        const PAD: u32 = uapi::UB_A_DEV_STATS_PAD;
        let d = &p.dev;
        for (ty, v) in [
            (uapi::UB_A_DEV_STATS_BAD_HEAD, d.bad_head),
            (uapi::UB_A_DEV_STATS_BAD_LEN, d.bad_len),
            (uapi::UB_A_DEV_STATS_BAD_STATUS, d.bad_status),
            (uapi::UB_A_DEV_STATS_DOUBLE_COMPLETION, d.double_completion),
            (uapi::UB_A_DEV_STATS_IRQ_STORM, d.irq_storm),
            (uapi::UB_A_DEV_STATS_GARBAGE_FLITS, d.garbage_flits),
            (uapi::UB_A_DEV_STATS_TX_DESC_ERRORS, d.tx_desc_errors),
            (uapi::UB_A_DEV_STATS_RX_DESC_ERRORS, d.rx_desc_errors),
            (uapi::UB_A_DEV_STATS_RX_LOST_FLITS, d.rx_lost_flits),
            (uapi::UB_A_DEV_STATS_RING_RESETS, d.ring_resets),
            (uapi::UB_A_DEV_STATS_INTERRUPTS, d.interrupts),
        ] {
            w.put_u64(ty, v, PAD)?;
        }
        Ok(())
    })?;
    if let Some(e) = event {
        w.put_u32(uapi::UB_A_PORT_EVENT, port_event(e))?;
    }
    Ok(())
}

fn fill_route(w: &mut Writer, r: &RouteSnapshot) -> Result {
    w.put_u32(uapi::UB_A_ROUTE_DEV_INDEX, r.dev_index)?;
    put_addr(w, uapi::UB_A_ROUTE_DST, &r.dst)?;
    w.put_u32(uapi::UB_A_ROUTE_PREFIX_LEN, u32::from(r.prefix_len))?;
    w.put_u64(uapi::UB_A_ROUTE_PORTS, r.ports, uapi::UB_A_ROUTE_PAD)?;
    let lb = if r.per_packet {
        uapi::UB_LOAD_BALANCE_PER_PACKET
    } else {
        uapi::UB_LOAD_BALANCE_PER_FLOW
    };
    w.put_u32(uapi::UB_A_ROUTE_LOAD_BALANCE, lb)
}

fn fill_echo_reply(w: &mut Writer, r: &EchoReply) -> Result {
    w.put_u32(uapi::UB_A_ECHO_DEV_INDEX, r.dev_index)?;
    w.put_u32(uapi::UB_A_ECHO_ID, r.id)?;
    w.put_u32(uapi::UB_A_ECHO_SEQ, r.seq)?;
    w.put_u32(uapi::UB_A_ECHO_SIZE, r.size)?;
    w.put_u64(uapi::UB_A_ECHO_RTT_NS, r.rtt_ns, uapi::UB_A_ECHO_PAD)?;
    put_addr(w, uapi::UB_A_ECHO_SRC, &r.src)?;
    w.put_u32(uapi::UB_A_ECHO_PORT, r.port)
}

const fn tp_state(s: ChannelState, closed: bool) -> u32 {
    if closed {
        return uapi::UB_TP_STATE_CLOSED;
    }
    match s {
        ChannelState::Reset => uapi::UB_TP_STATE_RESET,
        ChannelState::Rtr => uapi::UB_TP_STATE_RTR,
        ChannelState::Rts => uapi::UB_TP_STATE_RTS,
        ChannelState::Suspended => uapi::UB_TP_STATE_SUSPENDED,
        ChannelState::Err => uapi::UB_TP_STATE_ERR,
    }
}

const fn tp_mode(m: RetransmitMode) -> u32 {
    match m {
        RetransmitMode::GoBackN => uapi::UB_TP_MODE_GO_BACK_N,
        RetransmitMode::Selective => uapi::UB_TP_MODE_SELECTIVE,
    }
}

/// What a `tp-change-ntf` carries, and the head of a `tp-get` reply.
/// A CTP end has no key: its `tpn` is its handle.
fn fill_tp_event(w: &mut Writer, dev_index: u32, e: &TpEvent) -> Result {
    w.put_u32(uapi::UB_A_TP_DEV_INDEX, dev_index)?;
    w.put_u32(uapi::UB_A_TP_TPN, e.tpn)?;
    put_addr(w, uapi::UB_A_TP_PEER, &e.peer)?;
    if !e.ctp {
        w.put_u32(uapi::UB_A_TP_KEY, e.key)?;
    }
    w.put_u32(uapi::UB_A_TP_STATE, tp_state(e.state, e.closed))?;
    w.put_u32(uapi::UB_A_TP_ERROR, e.error)?;
    let transport = if e.ctp {
        uapi::UB_TP_TRANSPORT_CTP
    } else {
        uapi::UB_TP_TRANSPORT_RTP
    };
    w.put_u32(uapi::UB_A_TP_TRANSPORT, transport)
}

fn fill_tp(w: &mut Writer, t: &TpSnapshot) -> Result {
    fill_tp_event(w, t.dev_index, &t.id)?;
    w.put_u32(uapi::UB_A_TP_PEER_TPN, t.peer_tpn)?;
    if let Some(p) = &t.params {
        w.put_u32(uapi::UB_A_TP_MODE, tp_mode(p.mode))?;
        w.put_bool(uapi::UB_A_TP_FAST_RETRANSMIT, p.fast_retransmit)?;
        w.put_u32(uapi::UB_A_TP_MTU, p.mtu)?;
        w.put_u32(uapi::UB_A_TP_OOO_WINDOW, p.ooo_window)?;
        match p.rto {
            RtoMode::Static(level) => {
                let us = u32::try_from(level.ns() / 1000).unwrap_or(u32::MAX);
                w.put_u32(uapi::UB_A_TP_RTO_STATIC_US, us)?;
            }
            RtoMode::Dynamic { base_us, n } => {
                w.put_u32(uapi::UB_A_TP_RTO_BASE_US, base_us)?;
                w.put_u8(uapi::UB_A_TP_RTO_N, n)?;
            }
        }
        w.put_u8(uapi::UB_A_TP_RETRY_LIMIT, p.retry_limit)?;
        let cc = match p.cc {
            cc_code::CAQM => uapi::UB_TP_CC_CAQM,
            cc_code::LDCP => uapi::UB_TP_CC_LDCP,
            _ => uapi::UB_TP_CC_NONE,
        };
        w.put_u32(uapi::UB_A_TP_CC, cc)?;
    }
    w.put_bool(uapi::UB_A_TP_CLAIMED, t.claimed)?;
    w.put_u32(uapi::UB_A_TP_RX_QUEUED, t.rx_queued)?;
    if let Some(k) = &t.ctp {
        return fill_ctp_stats(w, k, t.tx_messages, t.rx_messages);
    }
    let messages = [t.tx_messages, t.tx_acked, t.rx_messages];
    fill_tp_stats(w, t.counters.as_ref(), messages)
}

/// The `stats` nest of a CTP end: datagrams sent, received and dropped,
/// and those the user wrote and those queued for it (nothing is
/// acknowledged, so no `tx-acked`).
fn fill_ctp_stats(w: &mut Writer, k: &CtpCounters, tx_messages: u64, rx_messages: u64) -> Result {
    w.nest(uapi::UB_A_TP_STATS, |w| {
        const PAD: u32 = uapi::UB_A_TP_STATS_PAD;
        for (ty, v) in [
            (uapi::UB_A_TP_STATS_TX_PACKETS, k.tx_packets),
            (uapi::UB_A_TP_STATS_RX_PACKETS, k.rx_packets),
            (uapi::UB_A_TP_STATS_RX_DROPPED, k.rx_dropped),
            (uapi::UB_A_TP_STATS_TX_MESSAGES, tx_messages),
            (uapi::UB_A_TP_STATS_RX_MESSAGES, rx_messages),
        ] {
            w.put_u64(ty, v, PAD)?;
        }
        Ok(())
    })
}

/// The `stats` nest of a channel (or of a group, its members' summed):
/// the transport's counters if the endpoint has them, and the message
/// counters `[tx-messages, tx-acked, rx-messages]`.
fn fill_tp_stats(w: &mut Writer, counters: Option<&ChannelCounters>, messages: [u64; 3]) -> Result {
    w.nest(uapi::UB_A_TP_STATS, |w| {
        const PAD: u32 = uapi::UB_A_TP_STATS_PAD;
        if let Some(k) = counters {
            for (ty, v) in [
                (uapi::UB_A_TP_STATS_TX_PACKETS, k.tx_packets),
                (uapi::UB_A_TP_STATS_TX_BYTES, k.tx_bytes),
                (uapi::UB_A_TP_STATS_RX_PACKETS, k.rx_packets),
                (uapi::UB_A_TP_STATS_RX_BYTES, k.rx_bytes),
                (uapi::UB_A_TP_STATS_MESSAGES_ACKED, k.messages_acked),
                (uapi::UB_A_TP_STATS_MESSAGES_DELIVERED, k.messages_delivered),
                (uapi::UB_A_TP_STATS_RTX_FAST, k.rtx_fast),
                (uapi::UB_A_TP_STATS_RTX_RTO, k.rtx_rto),
                (uapi::UB_A_TP_STATS_RTX_MARK_PSN, k.rtx_mark_psn),
                (uapi::UB_A_TP_STATS_RTX_GO_BACK_N, k.rtx_go_back_n),
                (uapi::UB_A_TP_STATS_TPACK_SENT, k.tpack_sent),
                (uapi::UB_A_TP_STATS_TPNAK_SENT, k.tpnak_sent),
                (uapi::UB_A_TP_STATS_TPSACK_SENT, k.tpsack_sent),
                (uapi::UB_A_TP_STATS_TPACK_RCVD, k.tpack_rcvd),
                (uapi::UB_A_TP_STATS_TPNAK_RCVD, k.tpnak_rcvd),
                (uapi::UB_A_TP_STATS_TPSACK_RCVD, k.tpsack_rcvd),
                (uapi::UB_A_TP_STATS_RTO_EXPIRIES, k.rto_expiries),
                (uapi::UB_A_TP_STATS_SRTT_NS, k.srtt_ns),
                (uapi::UB_A_TP_STATS_RX_DUPLICATES, k.rx_duplicates),
                (uapi::UB_A_TP_STATS_RX_INVALID_PSN, k.rx_invalid_psn),
            ] {
                w.put_u64(ty, v, PAD)?;
            }
            w.put_u32(uapi::UB_A_TP_STATS_CW, k.cw)?;
            w.put_u32(uapi::UB_A_TP_STATS_INFLIGHT, k.inflight)?;
            w.put_u32(uapi::UB_A_TP_STATS_OUTSTANDING, k.outstanding)?;
            w.put_u32(uapi::UB_A_TP_STATS_MAX_OUTSTANDING, k.max_outstanding)?;
        }
        let [tx_messages, tx_acked, rx_messages] = messages;
        w.put_u64(uapi::UB_A_TP_STATS_TX_MESSAGES, tx_messages, PAD)?;
        w.put_u64(uapi::UB_A_TP_STATS_TX_ACKED, tx_acked, PAD)?;
        w.put_u64(uapi::UB_A_TP_STATS_RX_MESSAGES, rx_messages, PAD)
    })
}

/// What a `tpg-change-ntf` carries, and the head of a `tpg-get` reply: the
/// group as a channel (its first member's TPN, its key, the group's state
/// and first error), and the number of members.
fn fill_tpg_event(w: &mut Writer, dev_index: u32, e: &TpgEvent) -> Result {
    fill_tp_event(w, dev_index, &e.head)?;
    w.put_u32(uapi::UB_A_TP_MEMBERS, e.members)
}

/// The `member` nests of a group, in key order.
fn fill_tpg_members(w: &mut Writer, members: &[TpgMember]) -> Result {
    for m in members {
        w.nest(uapi::UB_A_TP_MEMBER, |w| {
            w.put_u32(uapi::UB_A_TPG_MEMBER_TPN, m.id.tpn)?;
            w.put_u32(uapi::UB_A_TPG_MEMBER_PEER_TPN, m.peer_tpn)?;
            w.put_u32(uapi::UB_A_TPG_MEMBER_KEY, m.id.key)?;
            w.put_u32(
                uapi::UB_A_TPG_MEMBER_STATE,
                tp_state(m.id.state, m.id.closed),
            )?;
            w.put_u32(uapi::UB_A_TPG_MEMBER_ERROR, m.id.error)
        })?;
    }
    Ok(())
}

fn fill_tpg(w: &mut Writer, g: &TpgSnapshot) -> Result {
    fill_tpg_event(w, g.dev_index, &g.id)?;
    w.put_bool(uapi::UB_A_TP_CLAIMED, g.claimed)?;
    w.put_u32(uapi::UB_A_TP_RX_QUEUED, g.rx_queued)?;
    let messages = [g.tx_messages, g.tx_acked, g.rx_messages];
    fill_tp_stats(w, Some(&g.counters), messages)?;
    fill_tpg_members(w, g.members())
}

// ---- Handlers ----

/// The errno C expects from a handler.
fn errno_of(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// A `doit` request: the validated attributes of `info`.
///
/// # Safety
///
/// `info` is the genl_info genetlink passed to a doit of the op whose
/// request policy has `maxattr`; the result lives no longer than the call.
unsafe fn do_request<'a>(
    info: *mut bindings::genl_info,
    maxattr: u32,
    set: AttrSet,
) -> Request<'a> {
    // SAFETY: `info` is valid for the doit call (caller's contract);
    // genetlink parsed `attrs` with the op's policy of `maxattr`.
    unsafe { Request::new((*info).attrs, maxattr, (*info).extack, set) }
}

/// Sends a reply to `info`'s request with command `cmd`, written by `fill`.
///
/// # Safety
///
/// `info` is the genl_info of the doit being handled.
unsafe fn reply(
    info: *mut bindings::genl_info,
    cmd: u32,
    fill: impl FnOnce(&mut Writer) -> Result,
) -> Result {
    let build = || -> Result<OwnedSkb> {
        let skb = OwnedSkb::new()?;
        let mut w = skb.writer();
        // SAFETY: `skb` is ours; `info` is valid (caller's contract).
        let hdr = unsafe { ub_nl_put_reply(skb.0.as_ptr(), info, cmd as u8) };
        w.message(hdr, fill)?;
        Ok(skb)
    };
    let skb = build().inspect_err(|_| {
        // SAFETY: `info` is valid; its extack is null or valid; the
        // message is static.
        unsafe {
            ub_nl_set_err(
                (*info).extack,
                c"no memory for the reply".as_ptr().cast(),
                core::ptr::null(),
            )
        }
    })?;
    // SAFETY: The helper consumes the skb; `info` is valid.
    to_result(unsafe { ub_nl_reply(skb.into_raw(), info) })
}

/// `dev-get` do: one device.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_dev_get_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the dev-get doit.
    let req = unsafe { do_request(info, maxattr::DEV_GET_DO, AttrSet::Dev) };
    errno_of((|| {
        let index = req.require_u32(uapi::UB_A_DEV_INDEX)?;
        let dev = registry::dev_get(index).map_err(|r| req.refuse(&r))?;
        // SAFETY: `info` is the doit's.
        unsafe { reply(info, uapi::UB_CMD_DEV_GET, |w| fill_dev(w, &dev)) }
    })())
}

/// `port-get` do: one port.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_port_get_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the port-get doit.
    let req = unsafe { do_request(info, maxattr::PORT_GET_DO, AttrSet::Port) };
    errno_of((|| {
        let dev = req.require_u32(uapi::UB_A_PORT_DEV_INDEX)?;
        let index = req.require_u32(uapi::UB_A_PORT_INDEX)?;
        let port = registry::port_get(dev, index).map_err(|r| req.refuse(&r))?;
        // SAFETY: `info` is the doit's.
        unsafe { reply(info, uapi::UB_CMD_PORT_GET, |w| fill_port(w, &port, None)) }
    })())
}

/// The settings of a `port-set` request.
fn port_settings(req: &Request<'_>) -> Result<PortSettings, Error> {
    let s = PortSettings {
        admin_up: req.get(uapi::UB_A_PORT_ADMIN_UP).map(|a| a.u8() != 0),
        num_retry_threshold: req.get(uapi::UB_A_PORT_NUM_RETRY_THRESHOLD).map(Attr::u8),
        num_phy_reinit_threshold: req
            .get(uapi::UB_A_PORT_NUM_PHY_REINIT_THRESHOLD)
            .map(Attr::u8),
        want_sharing: req.get(uapi::UB_A_PORT_WANT_SHARING).map(|a| a.u8() != 0),
    };
    if s.is_empty() {
        return Err(req.refuse(&Refusal::general(
            EINVAL,
            c"port-set without any setting to change",
        )));
    }
    Ok(s)
}

/// `port-set` do.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_port_set_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the port-set doit.
    let req = unsafe { do_request(info, maxattr::PORT_SET_DO, AttrSet::Port) };
    errno_of((|| {
        let dev = req.require_u32(uapi::UB_A_PORT_DEV_INDEX)?;
        let index = req.require_u32(uapi::UB_A_PORT_INDEX)?;
        let settings = port_settings(&req)?;
        registry::port_set(dev, index, &settings).map_err(|r| req.refuse(&r))
    })())
}

/// The device index and address of `addr-add`/`addr-del`.
fn addr_request(req: &Request<'_>) -> Result<(u32, Addr), Error> {
    let dev = req.require_u32(uapi::UB_A_DEV_INDEX)?;
    let nest = req.require(uapi::UB_A_DEV_ADDR)?;
    Ok((dev, parse_addr(req, nest, Field::Addr)?))
}

/// `addr-add` do.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_addr_add_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the addr-add doit.
    let req = unsafe { do_request(info, maxattr::ADDR_ADD_DO, AttrSet::Dev) };
    errno_of((|| {
        let (dev, addr) = addr_request(&req)?;
        registry::addr_add(dev, addr).map_err(|r| req.refuse(&r))
    })())
}

/// `addr-del` do.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_addr_del_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the addr-del doit.
    let req = unsafe { do_request(info, maxattr::ADDR_DEL_DO, AttrSet::Dev) };
    errno_of((|| {
        let (dev, addr) = addr_request(&req)?;
        registry::addr_del(dev, addr).map_err(|r| req.refuse(&r))
    })())
}

/// The device, destination and prefix length of `route-add`/`route-del`.
fn route_key(req: &Request<'_>) -> Result<(u32, Addr, u8), Error> {
    let dev = req.require_u32(uapi::UB_A_ROUTE_DEV_INDEX)?;
    let nest = req.require(uapi::UB_A_ROUTE_DST)?;
    let prefix_len = req.require_u32(uapi::UB_A_ROUTE_PREFIX_LEN)?;
    let dst = parse_addr(req, nest, Field::Dst)?;
    let prefix_len = check_prefix(&dst, prefix_len).map_err(|r| req.refuse(&r))?;
    Ok((dev, dst, prefix_len))
}

/// `route-add` do.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_route_add_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the route-add doit.
    let req = unsafe { do_request(info, maxattr::ROUTE_ADD_DO, AttrSet::Route) };
    errno_of((|| {
        let (dev_index, dst, prefix_len) = route_key(&req)?;
        let ports = req.require(uapi::UB_A_ROUTE_PORTS)?.u64();
        if ports == 0 {
            return Err(req.refuse(&Refusal::of(
                Field::Ports,
                EINVAL,
                c"a route needs at least one port",
            )));
        }
        // The policy limits load-balance to the enum's values.
        let per_packet = req
            .get(uapi::UB_A_ROUTE_LOAD_BALANCE)
            .is_some_and(|a| a.u32() == uapi::UB_LOAD_BALANCE_PER_PACKET);
        let route = RouteSnapshot {
            dev_index,
            dst,
            prefix_len,
            ports,
            per_packet,
        };
        registry::route_add(&route).map_err(|r| req.refuse(&r))
    })())
}

/// `route-del` do.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_route_del_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the route-del doit.
    let req = unsafe { do_request(info, maxattr::ROUTE_DEL_DO, AttrSet::Route) };
    errno_of((|| {
        let (dev, dst, prefix_len) = route_key(&req)?;
        registry::route_del(dev, dst, prefix_len).map_err(|r| req.refuse(&r))
    })())
}

/// `npi-set` do.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_npi_set_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the npi-set doit.
    let req = unsafe { do_request(info, maxattr::NPI_SET_DO, AttrSet::Dev) };
    errno_of((|| {
        let dev = req.require_u32(uapi::UB_A_DEV_INDEX)?;
        let mode = req.require_u32(uapi::UB_A_DEV_NPI_MODE)?;
        let npi = req.require_u32(uapi::UB_A_DEV_NPI)?;
        let mode = npi_from(mode, npi).map_err(|r| req.refuse(&r))?;
        registry::npi_set(dev, mode, npi).map_err(|r| req.refuse(&r))
    })())
}

/// `echo` do: sends one request; the reply comes later as `echo-reply`.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_echo_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the echo doit.
    let req = unsafe { do_request(info, maxattr::ECHO_DO, AttrSet::Echo) };
    errno_of((|| {
        // SAFETY: `info` is valid for the call.
        if !unsafe { ub_nl_info_in_init_net(info) } {
            return Err(req.refuse(&Refusal::general(
                EOPNOTSUPP,
                c"echo is served in the initial network namespace only",
            )));
        }
        let dev_index = req.require_u32(uapi::UB_A_ECHO_DEV_INDEX)?;
        let nest = req.require(uapi::UB_A_ECHO_DST)?;
        let id = req.require_u32(uapi::UB_A_ECHO_ID)?;
        let seq = req.require_u32(uapi::UB_A_ECHO_SEQ)?;
        let size = req.get(uapi::UB_A_ECHO_SIZE).map_or(0, Attr::u32);
        let dst = parse_addr(&req, nest, Field::Dst)?;
        if !matches!(dst, Addr::Ipv4(_) | Addr::Ipv6(_)) {
            return Err(req.refuse(&Refusal::of(
                Field::Dst,
                EINVAL,
                c"echo needs an IP destination (it rides on UTP)",
            )));
        }
        let echo = EchoRequest {
            dev_index,
            dst,
            id,
            seq,
            size,
        };
        // SAFETY: `info` is valid for the call.
        let reply_to = ReplyTo {
            portid: unsafe { (*info).snd_portid },
        };
        registry::echo(&echo, reply_to).map_err(|r| req.refuse(&r))
    })())
}

/// The channel (or group) a `tp-*` (`tpg-*`) request names: its device
/// and TPN, both required.
fn named_request(req: &Request<'_>) -> Result<(u32, u32), Error> {
    let dev = req.require_u32(uapi::UB_A_TP_DEV_INDEX)?;
    Ok((dev, req.require_u32(uapi::UB_A_TP_TPN)?))
}

/// The device, peer and key of a `tp-new` or `tpg-new` request, required.
fn new_request(req: &Request<'_>) -> Result<(u32, Addr, u32), Error> {
    let dev = req.require_u32(uapi::UB_A_TP_DEV_INDEX)?;
    let nest = req.require(uapi::UB_A_TP_PEER)?;
    let key = req.require_u32(uapi::UB_A_TP_KEY)?;
    Ok((dev, parse_addr(req, nest, Field::Peer)?, key))
}

/// The device and peer of a `tp-new` of a CTP end, which takes no key and
/// none of the RTP channel attributes (CTP has no setup, PSN, window,
/// retransmission or load balancing of its own).
fn ctp_new_request(req: &Request<'_>) -> Result<(u32, Addr), Error> {
    let dev = req.require_u32(uapi::UB_A_TP_DEV_INDEX)?;
    let nest = req.require(uapi::UB_A_TP_PEER)?;
    let remote = parse_addr(req, nest, Field::Peer)?;
    let rtp_only = TpAttrs {
        transport: None,
        ..TpAttrs::of(req)
    }
    .first_fixed();
    let refused = if req.get(uapi::UB_A_TP_KEY).is_some() {
        Some(Refusal::of(
            Field::Key,
            EINVAL,
            c"a CTP end has no key: there is one per peer address",
        ))
    } else {
        rtp_only.map(|f| {
            Refusal::of(
                f,
                EINVAL,
                c"an RTP channel attribute: CTP has no setup, PSN, window or retransmission (UB spec 7)",
            )
        })
    };
    match refused {
        Some(r) => Err(req.refuse(&r)),
        None => Ok((dev, remote)),
    }
}

/// The channel configuration of a `tp-new` request (of each member of a
/// `tpg-new`): its attributes over the driver's defaults.
fn new_config(req: &Request<'_>) -> Result<ChannelConfig, Error> {
    channel_config(&TpAttrs::of(req), crate::ub_net::tp_config()).map_err(|r| req.refuse(&r))
}

/// The change a `tp-set` or `tpg-set` request (with its `messages`) asks
/// for.
fn set_request(req: &Request<'_>, messages: &SetMessages) -> Result<TpChange, Error> {
    let state = req.get(uapi::UB_A_TP_STATE).map(Attr::u32);
    tp_change(&TpAttrs::of(req), state, messages).map_err(|r| req.refuse(&r))
}

/// `tp-get` do: one TP Channel.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tp_get_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tp-get doit.
    let req = unsafe { do_request(info, maxattr::TP_GET_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, tpn) = named_request(&req)?;
        let tp = registry::tp_get(dev, tpn).map_err(|r| req.refuse(&r))?;
        // SAFETY: `info` is the doit's.
        unsafe { reply(info, uapi::UB_CMD_TP_GET, |w| fill_tp(w, &tp)) }
    })())
}

/// The channel attributes of a `tp-new` (or `tp-set`) request, each
/// already within its policy's range.
#[derive(Clone, Copy, Default, Debug)]
struct TpAttrs {
    transport: Option<u32>,
    mode: Option<u32>,
    fast_retransmit: Option<bool>,
    mtu: Option<u32>,
    ooo_window: Option<u32>,
    rto_static_us: Option<u32>,
    rto_base_us: Option<u32>,
    rto_n: Option<u8>,
    retry_limit: Option<u8>,
    cc: Option<u32>,
    load_balance: Option<u32>,
    lb_range: Option<u8>,
    lb_key: Option<u32>,
    send_window: Option<u32>,
}

impl TpAttrs {
    fn of(req: &Request<'_>) -> Self {
        let u32_of = |t| req.get(t).map(Attr::u32);
        let u8_of = |t| req.get(t).map(Attr::u8);
        Self {
            transport: u32_of(uapi::UB_A_TP_TRANSPORT),
            mode: u32_of(uapi::UB_A_TP_MODE),
            fast_retransmit: u8_of(uapi::UB_A_TP_FAST_RETRANSMIT).map(|v| v != 0),
            mtu: u32_of(uapi::UB_A_TP_MTU),
            ooo_window: u32_of(uapi::UB_A_TP_OOO_WINDOW),
            rto_static_us: u32_of(uapi::UB_A_TP_RTO_STATIC_US),
            rto_base_us: u32_of(uapi::UB_A_TP_RTO_BASE_US),
            rto_n: u8_of(uapi::UB_A_TP_RTO_N),
            retry_limit: u8_of(uapi::UB_A_TP_RETRY_LIMIT),
            cc: u32_of(uapi::UB_A_TP_CC),
            load_balance: u32_of(uapi::UB_A_TP_LOAD_BALANCE),
            lb_range: u8_of(uapi::UB_A_TP_LB_RANGE),
            lb_key: u32_of(uapi::UB_A_TP_LB_KEY),
            send_window: u32_of(uapi::UB_A_TP_SEND_WINDOW),
        }
    }

    /// The first attribute present that a live channel cannot change.
    fn first_fixed(&self) -> Option<Field> {
        use Field as F;
        [
            (self.transport.is_some(), F::Transport),
            (self.mode.is_some(), F::Mode),
            (self.fast_retransmit.is_some(), F::FastRetransmit),
            (self.mtu.is_some(), F::Mtu),
            (self.ooo_window.is_some(), F::OooWindow),
            (self.rto_static_us.is_some(), F::RtoStatic),
            (self.rto_base_us.is_some(), F::RtoBase),
            (self.rto_n.is_some(), F::RtoN),
            (self.retry_limit.is_some(), F::RetryLimit),
            (self.cc.is_some(), F::Cc),
            (self.load_balance.is_some(), F::LoadBalance),
            (self.lb_range.is_some(), F::LbRange),
            (self.lb_key.is_some(), F::LbKey),
            (self.send_window.is_some(), F::SendWindow),
        ]
        .into_iter()
        .find_map(|(present, f)| present.then_some(f))
    }
}

/// Congestion window limits of CAQM and LDCP channels made by `tp-new`
/// (the values the simulator runs them with), bytes.
const CC_INITIAL_CW: u32 = 65_536;
const CC_MAX_CW: u32 = 1 << 20;
/// CAQM's bytes per Hint unit.
const CAQM_HINT_UNIT: u32 = 32;

/// The configuration `a` asks for over `base` (the driver's defaults), or
/// the rule between attributes it breaks. The rules of each value (the
/// spec's) are the endpoint's, checked when it opens the channel.
fn channel_config(a: &TpAttrs, base: ChannelConfig) -> Result<ChannelConfig, Refusal> {
    let mut cfg = base;
    if a.transport == Some(uapi::UB_TP_TRANSPORT_CTP) {
        // tp-new makes CTP ends before it asks for a configuration: this
        // is tpg-new's.
        return Err(Refusal::of(
            Field::Transport,
            EINVAL,
            c"a TP Channel Group's members are RTP channels (tp-new makes CTP ends, one per peer)",
        ));
    }
    if let Some(m) = a.mode {
        cfg.mode = if m == uapi::UB_TP_MODE_GO_BACK_N {
            RetransmitMode::GoBackN
        } else {
            RetransmitMode::Selective
        };
    }
    if let Some(f) = a.fast_retransmit {
        cfg.fast_retransmit = f;
    }
    if let Some(w) = a.ooo_window {
        cfg.ooo_window = w;
    }
    // Out-of-order packets are held in a slot per packet of the window,
    // except by Go-Back-N with fast retransmission, which holds none.
    cfg.rx_slots = if cfg.mode == RetransmitMode::GoBackN && cfg.fast_retransmit {
        0
    } else {
        cfg.ooo_window
    };
    match (a.rto_static_us, a.rto_base_us, a.rto_n) {
        (Some(_), Some(_), _) => {
            return Err(Refusal::of(
                Field::RtoBase,
                EINVAL,
                c"a static RTO (rto-static-us) and a dynamic one (rto-base-us) exclude each other",
            ))
        }
        (Some(_), None, Some(_)) | (None, None, Some(_)) => {
            return Err(Refusal::of(
                Field::RtoN,
                EINVAL,
                c"rto-n is the coefficient of a dynamic RTO: it needs rto-base-us",
            ))
        }
        (Some(timeout_us), None, None) => cfg.rto = RtoConfig::Static { timeout_us },
        (None, Some(base_us), n) => {
            let n = match (n, base.rto) {
                (Some(n), _) => n,
                (None, RtoConfig::Dynamic { n, .. }) => n,
                (None, RtoConfig::Static { .. }) => 1,
            };
            cfg.rto = RtoConfig::Dynamic { base_us, n };
        }
        (None, None, None) => {}
    }
    if let Some(r) = a.retry_limit {
        cfg.retry_limit = r;
    }
    if let Some(m) = a.mtu {
        cfg.mtu = m;
    }
    if let Some(c) = a.cc {
        let alg = match c {
            uapi::UB_TP_CC_CAQM => CcAlgorithm::Caqm {
                hint_unit: CAQM_HINT_UNIT,
            },
            uapi::UB_TP_CC_LDCP => CcAlgorithm::Ldcp,
            _ => CcAlgorithm::None,
        };
        cfg.cc = match alg {
            CcAlgorithm::None => CcConfig::NONE,
            alg => CcConfig {
                alg,
                initial_cw: CC_INITIAL_CW,
                max_cw: CC_MAX_CW,
                mtu: cfg.mtu,
                path_wide_permille: 0,
            },
        };
    }
    cfg.cc.mtu = cfg.mtu;
    let per_packet = a.load_balance == Some(uapi::UB_LOAD_BALANCE_PER_PACKET);
    match (per_packet, a.lb_range) {
        (false, Some(_)) => return Err(Refusal::of(
            Field::LbRange,
            EINVAL,
            c"lb-range is the range of per-packet load balancing: it needs load-balance per-packet",
        )),
        // 16 source ports (or LBFs) unless told: enough for the switches
        // to spread the channel over every path.
        (true, range) => {
            cfg.lb = LoadBalance::PerPacket {
                range_log2: range.unwrap_or(4),
            }
        }
        (false, None) => {
            if a.load_balance.is_some() {
                cfg.lb = LoadBalance::PerFlow;
            }
        }
    }
    if cfg.fast_retransmit && per_packet {
        // The endpoint refuses it too; here the extended ACK can point at
        // the attribute the request gave (fast retransmission is on by
        // default).
        let field = if a.fast_retransmit == Some(true) {
            Field::FastRetransmit
        } else {
            Field::LoadBalance
        };
        return Err(Refusal::of(
            field,
            EINVAL,
            c"fast retransmit cannot be combined with per-packet load balancing (UB spec table 6-7; fast retransmit is on unless turned off)",
        ));
    }
    if let Some(k) = a.lb_key {
        // The policy bounds it to 16 bits.
        cfg.lb_key = u16::try_from(k).unwrap_or(u16::MAX);
    }
    if let Some(w) = a.send_window {
        cfg.send_window = w;
    }
    Ok(cfg)
}

/// `tp-new` do: opens a TP Channel, unclaimed; replies with its TPN.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tp_new_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tp-new doit.
    let req = unsafe { do_request(info, maxattr::TP_NEW_DO, AttrSet::Tp) };
    errno_of((|| {
        // A CTP end replies with its handle in place of a TPN.
        let (dev, tpn) = if TpAttrs::of(&req).transport == Some(uapi::UB_TP_TRANSPORT_CTP) {
            let (dev, remote) = ctp_new_request(&req)?;
            (
                dev,
                registry::ctp_new(dev, remote).map_err(|r| req.refuse(&r))?,
            )
        } else {
            let (dev, remote, key) = new_request(&req)?;
            let cfg = new_config(&req)?;
            (
                dev,
                registry::tp_new(dev, remote, key, cfg).map_err(|r| req.refuse(&r))?,
            )
        };
        // SAFETY: `info` is the doit's.
        unsafe {
            reply(info, uapi::UB_CMD_TP_NEW, |w| {
                w.put_u32(uapi::UB_A_TP_DEV_INDEX, dev)?;
                w.put_u32(uapi::UB_A_TP_TPN, tpn)
            })
        }
    })())
}

/// What a `tp-set` or `tpg-set` refusal says, per operation.
struct SetMessages {
    fixed: &'static CStr,
    nothing: &'static CStr,
    state: &'static CStr,
}

const TP_SET_MESSAGES: SetMessages = SetMessages {
    fixed: c"fixed when the channel is set up: tp-set changes only the state",
    nothing: c"tp-set without any setting to change",
    state: c"a channel's state can be set to suspended or rts only",
};

const TPG_SET_MESSAGES: SetMessages = SetMessages {
    fixed: c"fixed when the channel is set up: tpg-set changes only the state of every member",
    nothing: c"tpg-set without any setting to change",
    state: c"a group's state can be set to suspended or rts only",
};

/// The change a `tp-set` (or `tpg-set`, with its `messages`) request asks
/// for.
fn tp_change(a: &TpAttrs, state: Option<u32>, messages: &SetMessages) -> Result<TpChange, Refusal> {
    if let Some(f) = a.first_fixed() {
        return Err(Refusal::of(f, EOPNOTSUPP, messages.fixed));
    }
    match state {
        None => Err(Refusal::general(EINVAL, messages.nothing)),
        Some(uapi::UB_TP_STATE_SUSPENDED) => Ok(TpChange::Suspend),
        Some(uapi::UB_TP_STATE_RTS) => Ok(TpChange::Resume),
        Some(_) => Err(Refusal::of(Field::State, EINVAL, messages.state)),
    }
}

/// `tp-set` do: suspends or resumes a TP Channel.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tp_set_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tp-set doit.
    let req = unsafe { do_request(info, maxattr::TP_SET_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, tpn) = named_request(&req)?;
        let change = set_request(&req, &TP_SET_MESSAGES)?;
        registry::tp_set(dev, tpn, change).map_err(|r| req.refuse(&r))
    })())
}

/// `tp-del` do: tears a TP Channel down.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tp_del_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tp-del doit.
    let req = unsafe { do_request(info, maxattr::TP_DEL_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, tpn) = named_request(&req)?;
        registry::tp_del(dev, tpn).map_err(|r| req.refuse(&r))
    })())
}

/// `tpg-get` do: one TP Channel Group, named by its first member's TPN.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tpg_get_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tpg-get doit.
    let req = unsafe { do_request(info, maxattr::TPG_GET_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, tpn) = named_request(&req)?;
        let g = registry::tpg_get(dev, tpn).map_err(|r| req.refuse(&r))?;
        // SAFETY: `info` is the doit's.
        unsafe { reply(info, uapi::UB_CMD_TPG_GET, |w| fill_tpg(w, &g)) }
    })())
}

/// `tpg-new` do: opens a TP Channel Group, unclaimed; replies with its
/// name (the first member's TPN), key and members.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tpg_new_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tpg-new doit.
    let req = unsafe { do_request(info, maxattr::TPG_NEW_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, remote, key) = new_request(&req)?;
        // The policy holds it to 2..=8.
        let members = req.require_u32(uapi::UB_A_TP_MEMBERS)?;
        let cfg = new_config(&req)?;
        let g = registry::tpg_new(dev, remote, key, members, cfg).map_err(|r| req.refuse(&r))?;
        // SAFETY: `info` is the doit's.
        unsafe {
            reply(info, uapi::UB_CMD_TPG_NEW, |w| {
                w.put_u32(uapi::UB_A_TP_DEV_INDEX, g.dev_index)?;
                w.put_u32(uapi::UB_A_TP_TPN, g.id.head.tpn)?;
                w.put_u32(uapi::UB_A_TP_KEY, g.id.head.key)?;
                w.put_u32(uapi::UB_A_TP_MEMBERS, g.id.members)?;
                fill_tpg_members(w, g.members())
            })
        }
    })())
}

/// `tpg-set` do: suspends or resumes every member of a group.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tpg_set_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tpg-set doit.
    let req = unsafe { do_request(info, maxattr::TPG_SET_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, tpn) = named_request(&req)?;
        let change = set_request(&req, &TPG_SET_MESSAGES)?;
        registry::tpg_set(dev, tpn, change).map_err(|r| req.refuse(&r))
    })())
}

/// `tpg-del` do: tears every member of a group down.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `info`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tpg_del_doit(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: Called by genetlink for the tpg-del doit.
    let req = unsafe { do_request(info, maxattr::TPG_DEL_DO, AttrSet::Tp) };
    errno_of((|| {
        let (dev, tpn) = named_request(&req)?;
        registry::tpg_del(dev, tpn).map_err(|r| req.refuse(&r))
    })())
}

// ---- Dumps ----

/// What a dump finds at one (device, item) position.
enum Step<T> {
    /// An entry to put into the dump.
    Put(T),
    /// Nothing here (e.g. gone since it was counted): go on.
    Skip,
    /// Nothing from here up to this item, the next one there is: go on
    /// from it (items with gaps, such as TPNs).
    Next(u32),
    /// Past the device's last item.
    End,
}

/// Walks the devices (the `filter`'s one, or each from `dev_next`) and
/// their items from `cursor` (`[device, item]`), handing each entry to
/// `put`. When `put` fails (the skb is full), returns its error with the
/// cursor on that entry, so the next call of the dump starts with it.
fn walk<T>(
    cursor: &mut [u32; 2],
    filter: Option<u32>,
    dev_next: impl Fn(u32) -> Option<u32>,
    mut get: impl FnMut(u32, u32) -> Step<T>,
    mut put: impl FnMut(&T) -> Result,
) -> Result {
    loop {
        let dev = match filter {
            Some(f) if cursor[0] <= f => f,
            Some(_) => return Ok(()),
            None => match dev_next(cursor[0]) {
                Some(dev) => dev,
                None => return Ok(()),
            },
        };
        if dev != cursor[0] {
            *cursor = [dev, 0];
        }
        loop {
            match get(dev, cursor[1]) {
                Step::Put(entry) => put(&entry)?,
                Step::Skip => {}
                Step::Next(item) if item > cursor[1] => {
                    cursor[1] = item;
                    continue;
                }
                Step::Next(_) => {}
                Step::End => break,
            }
            match cursor[1].checked_add(1) {
                Some(next) => cursor[1] = next,
                None => break,
            }
        }
        match dev.checked_add(1) {
            Some(next) => *cursor = [next, 0],
            None => return Ok(()),
        }
    }
}

/// A dump call: its request, its cursor and the skb to fill.
struct Dump<'a> {
    req: Request<'a>,
    /// `[device, item]` to resume from, kept in `cb->ctx` across calls.
    cursor: &'a mut [u32; 2],
    skb: Writer,
    cb: *mut bindings::netlink_callback,
}

impl<'a> Dump<'a> {
    /// # Safety
    ///
    /// `skb` and `cb` are the arguments of a dumpit call of this family;
    /// the result lives no longer than the call.
    unsafe fn new(
        skb: *mut bindings::sk_buff,
        cb: *mut bindings::netlink_callback,
        set: AttrSet,
    ) -> Option<Self> {
        // SAFETY: `cb` is a valid dump callback of a genetlink op: its
        // dumpit info holds the attributes parsed with the op's policy
        // (maxattr from the same op), its extack is valid for this call.
        let req = unsafe {
            Request::new(
                ub_nl_dump_attrs(cb),
                ub_nl_dump_maxattr(cb),
                ub_nl_dump_extack(cb),
                set,
            )
        };
        // SAFETY: The cursor is two u32 in cb->ctx, which only this dump
        // uses and which lives as long as the dump.
        let cursor = unsafe { &mut *ub_nl_dump_cursor(cb).cast::<[u32; 2]>() };
        Some(Self {
            req,
            cursor,
            // INVARIANT: netlink gives the dump its skb to append to.
            skb: Writer {
                skb: NonNull::new(skb)?,
            },
            cb,
        })
    }

    /// The `dev-index` filter of the request, checked to exist.
    fn dev_filter(&self, ty: u32) -> Result<Option<u32>, Error> {
        match self.req.get(ty) {
            None => Ok(None),
            Some(a) => {
                let dev = a.u32();
                registry::dev_get(dev).map_err(|r| self.req.refuse(&r))?;
                Ok(Some(dev))
            }
        }
    }

    /// Walks the devices and their items from the cursor (see [`walk`]),
    /// putting one message of command `cmd` per entry, written by `fill`.
    fn run<T>(
        &mut self,
        cmd: u32,
        filter: Option<u32>,
        get: impl FnMut(u32, u32) -> Step<T>,
        fill: impl Fn(&mut Writer, &T) -> Result,
    ) -> Result {
        let (skb, cb) = (&mut self.skb, self.cb);
        walk(self.cursor, filter, registry::dev_next, get, |entry| {
            // SAFETY: `skb` and `cb` are this dump call's.
            let hdr = unsafe { ub_nl_put_dump(skb.skb.as_ptr(), cb, cmd as u8) };
            skb.message(hdr, |w| fill(w, entry))
        })
    }
}

/// The result C expects from a dumpit: 0 at the end, `-EMSGSIZE` when the
/// skb is full (netlink calls again), another error otherwise.
///
/// `-EMSGSIZE` reaches user space only if one entry does not fit an empty
/// skb: the message says so then (netlink drops a call's extended ACK when
/// it continues the dump).
fn dump_result(d: &Dump<'_>, r: Result) -> c_int {
    if let Err(e) = r {
        if e.to_errno() == EMSGSIZE.to_errno() {
            d.req.refuse(&Refusal::general(
                EMSGSIZE,
                c"a dump entry does not fit the receive buffer",
            ));
        }
    }
    errno_of(r)
}

/// `dev-get` dump: every device.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `cb`.
#[no_mangle]
unsafe extern "C" fn ub_nl_dev_get_dumpit(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: Called by genetlink for the dev-get dump.
    let Some(mut d) = (unsafe { Dump::new(skb, cb, AttrSet::Dev) }) else {
        return EINVAL.to_errno();
    };
    // One entry per device; one that went away since dev_next is skipped.
    let get = |dev, i| match (i, registry::dev_get(dev)) {
        (0, Ok(snap)) => Step::Put(snap),
        (0, Err(_)) => Step::Skip,
        _ => Step::End,
    };
    let r = d.run(uapi::UB_CMD_DEV_GET, None, get, fill_dev);
    dump_result(&d, r)
}

/// `port-get` dump: the ports of every device, or of `dev-index`.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `cb`.
#[no_mangle]
unsafe extern "C" fn ub_nl_port_get_dumpit(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: Called by genetlink for the port-get dump.
    let Some(mut d) = (unsafe { Dump::new(skb, cb, AttrSet::Port) }) else {
        return EINVAL.to_errno();
    };
    let r = d.dev_filter(uapi::UB_A_PORT_DEV_INDEX).and_then(|filter| {
        let get = |dev, port| {
            if port >= registry::port_count(dev).unwrap_or(0) {
                Step::End
            } else {
                registry::port_get(dev, port).map_or(Step::Skip, Step::Put)
            }
        };
        d.run(uapi::UB_CMD_PORT_GET, filter, get, |w, p| {
            fill_port(w, p, None)
        })
    });
    dump_result(&d, r)
}

/// `route-get` dump: the routes of every device, or of `dev-index`.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `cb`.
#[no_mangle]
unsafe extern "C" fn ub_nl_route_get_dumpit(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: Called by genetlink for the route-get dump.
    let Some(mut d) = (unsafe { Dump::new(skb, cb, AttrSet::Route) }) else {
        return EINVAL.to_errno();
    };
    let r = d.dev_filter(uapi::UB_A_ROUTE_DEV_INDEX).and_then(|filter| {
        let get = |dev, i| registry::route_get(dev, i).map_or(Step::End, Step::Put);
        d.run(uapi::UB_CMD_ROUTE_GET, filter, get, fill_route)
    });
    dump_result(&d, r)
}

/// The dump's step at `tpn` over `items` (one device's channels or
/// groups in the order of `tpn_of`): the item `tpn`, or where the next one
/// is.
fn tp_at<T: Copy>(items: &[T], tpn: u32, tpn_of: impl Fn(&T) -> u32) -> Step<T> {
    match items.iter().find(|c| tpn_of(c) >= tpn) {
        Some(c) if tpn_of(c) == tpn => Step::Put(*c),
        Some(c) => Step::Next(tpn_of(c)),
        None => Step::End,
    }
}

impl Dump<'_> {
    /// Walks the devices and their items named by TPN (`tp-get`'s
    /// channels, `tpg-get`'s groups by their first member's), putting one
    /// message of command `cmd` per item: per call, one copy of a
    /// device's items from the cursor's TPN on (`list`), taken when the
    /// walk reaches the device, resumed at the TPN that did not fit.
    fn run_by_tpn<T: Copy>(
        &mut self,
        cmd: u32,
        filter: Option<u32>,
        list: impl Fn(u32, u32) -> Result<KVec<T>, Refusal>,
        tpn_of: impl Fn(&T) -> u32 + Copy,
        fill: impl Fn(&mut Writer, &T) -> Result,
    ) -> Result {
        let mut copy: Option<(u32, KVec<T>)> = None;
        let mut failed = None;
        let get = |dev, tpn| {
            if copy.as_ref().is_none_or(|(d, _)| *d != dev) {
                copy = match list(dev, tpn) {
                    Ok(v) => Some((dev, v)),
                    Err(r) => {
                        // A device that went away has nothing left;
                        // anything else fails the dump.
                        if r.errno.to_errno() != ENODEV.to_errno() {
                            failed = Some(r);
                        }
                        None
                    }
                };
            }
            match &copy {
                Some((_, items)) => tp_at(items, tpn, tpn_of),
                None => Step::End,
            }
        };
        let r = self.run(cmd, filter, get, fill);
        match failed {
            Some(f) => Err(self.req.refuse(&f)),
            None => r,
        }
    }
}

/// `tp-get` dump: the TP Channels of every device, or of `dev-index`, in
/// TPN order; a call resumes at the TPN the previous one could not fit.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `cb`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tp_get_dumpit(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: Called by genetlink for the tp-get dump.
    let Some(mut d) = (unsafe { Dump::new(skb, cb, AttrSet::Tp) }) else {
        return EINVAL.to_errno();
    };
    let r = d.dev_filter(uapi::UB_A_TP_DEV_INDEX).and_then(|filter| {
        let tpn_of = |t: &TpSnapshot| t.id.tpn;
        d.run_by_tpn(
            uapi::UB_CMD_TP_GET,
            filter,
            registry::tp_list,
            tpn_of,
            fill_tp,
        )
    });
    dump_result(&d, r)
}

/// `tpg-get` dump: the TP Channel Groups of every device, or of
/// `dev-index`, in the order of their first member's TPN, as `tp-get`'s.
///
/// # Safety
///
/// Called by genetlink only, with its valid `skb` and `cb`.
#[no_mangle]
unsafe extern "C" fn ub_nl_tpg_get_dumpit(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: Called by genetlink for the tpg-get dump.
    let Some(mut d) = (unsafe { Dump::new(skb, cb, AttrSet::Tp) }) else {
        return EINVAL.to_errno();
    };
    let r = d.dev_filter(uapi::UB_A_TP_DEV_INDEX).and_then(|filter| {
        let tpn_of = |g: &TpgSnapshot| g.id.head.tpn;
        d.run_by_tpn(
            uapi::UB_CMD_TPG_GET,
            filter,
            registry::tpg_list,
            tpn_of,
            fill_tpg,
        )
    });
    dump_result(&d, r)
}

// ---- Registration and outgoing messages ----

/// Whether the family is registered: [`notify_port`] and [`echo_reply`]
/// send only then.
static LIVE: Atomic<bool> = Atomic::new(false);

/// The registration of the "ub" family; unregisters it when dropped.
///
/// Lifetime rule: the module registers the family before the PCI driver
/// and unregisters it after (`ub_main.rs`), so the driver core, whose work
/// items are the only callers of [`notify_port`] and [`echo_reply`] besides
/// the handlers, never calls them on an unregistered family. `LIVE` makes
/// them no-ops outside the registration besides.
pub(crate) struct Registration(());

impl Registration {
    /// Registers the family (its ops, policies and the "monitor" group).
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: Registers the static generated family once (module init);
        // `Drop` unregisters it.
        to_result(unsafe { ub_nl_register() })?;
        LIVE.store(true, Release);
        Ok(Self(()))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        LIVE.store(false, Release);
        // SAFETY: The family was registered by `new`; genetlink waits for
        // running handlers and dumps before it returns.
        unsafe { ub_nl_unregister() };
    }
}

/// Sends a `port-change-ntf` for `port` to the "monitor" group.
///
/// Process context (it allocates with GFP_KERNEL). Does nothing when no one
/// listens or the family is not registered; a message that cannot be built
/// or sent is dropped (a monitor may miss events under memory pressure, as
/// with rtnetlink).
pub(crate) fn notify_port(port: &PortSnapshot, event: PortEvent) {
    notify_monitor(uapi::UB_CMD_PORT_CHANGE_NTF, |w| {
        fill_port(w, port, Some(event))
    });
}

/// Sends a `tp-change-ntf` for channel `e` of device `dev_index` to the
/// "monitor" group.
///
/// Process context, called with no driver lock held; as [`notify_port`]:
/// nothing when no one listens, a message that cannot be built or sent is
/// dropped.
pub(crate) fn notify_tp(dev_index: u32, e: &TpEvent) {
    notify_monitor(uapi::UB_CMD_TP_CHANGE_NTF, |w| {
        fill_tp_event(w, dev_index, e)
    });
}

/// Sends a `tpg-change-ntf` for group `e` of device `dev_index` to the
/// "monitor" group, as [`notify_tp`].
pub(crate) fn notify_tpg(dev_index: u32, e: &TpgEvent) {
    notify_monitor(uapi::UB_CMD_TPG_CHANGE_NTF, |w| {
        fill_tpg_event(w, dev_index, e)
    });
}

/// Sends a notification of command `cmd`, written by `fill`, to the
/// "monitor" group: nothing when no one listens or the family is not
/// registered; a message that cannot be built or sent is dropped.
fn notify_monitor(cmd: u32, fill: impl FnOnce(&mut Writer) -> Result) {
    // SAFETY: The helper only reads the family's group state.
    if !LIVE.load(Acquire) || !unsafe { ub_nl_monitor_has_listeners() } {
        return;
    }
    let Ok(skb) = OwnedSkb::new() else { return };
    let mut w = skb.writer();
    // SAFETY: `skb` is ours.
    let hdr = unsafe { ub_nl_put_event(skb.0.as_ptr(), cmd as u8) };
    if w.message(hdr, fill).is_ok() {
        // SAFETY: The helper consumes the skb. Its error (no listener left)
        // needs no action.
        let _ = unsafe { ub_nl_multicast_monitor(skb.into_raw(), bindings::GFP_KERNEL) };
    }
}

/// Sends `reply` as an `echo-reply` to the socket in `to`.
///
/// Process context. Does nothing when the family is not registered; a reply
/// whose socket has gone is dropped.
/// Attribute bytes of an echo reply, with room to spare: five u32 (8 bytes
/// each), the RTT (a u64 with its pad, 16) and the source (an IPv6 address
/// nest, 28); a reply that did not fit would be lost (a KUnit case checks).
const ECHO_REPLY_PAYLOAD: usize = 256;

pub(crate) fn echo_reply(to: &ReplyTo, reply: &EchoReply) {
    if !LIVE.load(Acquire) {
        return;
    }
    let Ok(skb) = OwnedSkb::small(ECHO_REPLY_PAYLOAD) else {
        return;
    };
    let mut w = skb.writer();
    // SAFETY: `skb` is ours.
    let hdr = unsafe { ub_nl_put_event(skb.0.as_ptr(), uapi::UB_CMD_ECHO_REPLY as u8) };
    if w.message(hdr, |w| fill_echo_reply(w, reply)).is_ok() {
        // SAFETY: The helper consumes the skb. An error means the socket is
        // gone or full: the reply is lost, like a lost echo.
        let _ = unsafe { ub_nl_unicast_init_net(skb.into_raw(), to.portid) };
    }
}

#[cfg(CONFIG_UB_KUNIT_TEST)]
#[kunit_tests(ub_netlink)]
mod tests {
    use super::*;

    const ALL_FIELDS: [Field; 32] = [
        Field::DevIndex,
        Field::PortIndex,
        Field::AdminUp,
        Field::NumRetryThreshold,
        Field::NumPhyReinitThreshold,
        Field::WantSharing,
        Field::Addr,
        Field::Dst,
        Field::PrefixLen,
        Field::Ports,
        Field::LoadBalance,
        Field::NpiMode,
        Field::Npi,
        Field::Size,
        Field::Tpn,
        Field::Peer,
        Field::Key,
        Field::State,
        Field::Transport,
        Field::Mode,
        Field::FastRetransmit,
        Field::Mtu,
        Field::OooWindow,
        Field::RtoStatic,
        Field::RtoBase,
        Field::RtoN,
        Field::RetryLimit,
        Field::Cc,
        Field::LbRange,
        Field::LbKey,
        Field::SendWindow,
        Field::Members,
    ];

    /// Each field maps into the request attributes of its set's ops (so
    /// the extended ACK can point at it), to distinct attributes.
    #[test]
    fn field_attrs_are_request_attrs() {
        for (set, max) in [
            (AttrSet::Dev, maxattr::NPI_SET_DO.max(maxattr::ADDR_ADD_DO)),
            (AttrSet::Port, maxattr::PORT_SET_DO),
            (AttrSet::Route, maxattr::ROUTE_ADD_DO),
            (AttrSet::Echo, maxattr::ECHO_DO),
            (AttrSet::Tp, maxattr::TPG_NEW_DO),
        ] {
            let mut seen = 0u64;
            for f in ALL_FIELDS {
                if let Some(a) = field_attr(set, f) {
                    assert!(a >= 1 && a <= max);
                    assert_eq!(seen & (1 << a), 0);
                    seen |= 1 << a;
                }
            }
        }
        assert_eq!(
            field_attr(AttrSet::Port, Field::DevIndex),
            Some(uapi::UB_A_PORT_DEV_INDEX)
        );
        assert_eq!(
            field_attr(AttrSet::Route, Field::Dst),
            Some(uapi::UB_A_ROUTE_DST)
        );
        assert_eq!(
            field_attr(AttrSet::Echo, Field::Size),
            Some(uapi::UB_A_ECHO_SIZE)
        );
        assert_eq!(field_attr(AttrSet::Dev, Field::Ports), None);
        assert_eq!(field_attr(AttrSet::Echo, Field::PortIndex), None);
    }

    /// Every field the stub registry refuses with exists in the set of the
    /// op that can get that refusal.
    #[test]
    fn registry_refusals_point_at_request_attrs() {
        for (r, set) in [
            (Refusal::no_device(), AttrSet::Port),
            (Refusal::no_port(), AttrSet::Port),
            (Refusal::no_device(), AttrSet::Dev),
            (Refusal::no_device(), AttrSet::Route),
            (Refusal::no_device(), AttrSet::Echo),
            (Refusal::no_device(), AttrSet::Tp),
        ] {
            assert!(r.field.and_then(|f| field_attr(set, f)).is_some());
            assert_eq!(r.errno.to_errno(), ENODEV.to_errno());
            assert!(!r.msg.to_bytes().is_empty());
        }
        let r = Refusal::no_channel();
        assert_eq!(
            r.field.and_then(|f| field_attr(AttrSet::Tp, f)),
            Some(uapi::UB_A_TP_TPN)
        );
        assert_eq!(r.errno.to_errno(), ENOENT.to_errno());
    }

    fn parts(ty: u32) -> AddrParts<'static> {
        AddrParts {
            ty: Some(ty),
            ..AddrParts::default()
        }
    }

    #[test]
    fn addr_parts() {
        let ok = |p: AddrParts<'static>| addr_from_parts(&p, Field::Dst).ok();
        assert_eq!(
            ok(AddrParts {
                cna: Some(0x1234),
                ..parts(uapi::UB_ADDR_TYPE_CNA16)
            }),
            Some(Addr::Cna16(0x1234))
        );
        assert_eq!(
            ok(AddrParts {
                ipv4: Some(&[10, 0, 0, 1]),
                ..parts(uapi::UB_ADDR_TYPE_IPV4)
            }),
            Some(Addr::Ipv4([10, 0, 0, 1]))
        );
        // Refused, each pointing at the nest and with its own message.
        for (p, msg) in [
            (AddrParts::default(), c"address without its type attribute"),
            (
                AddrParts {
                    cna: Some(0x1_0000),
                    ..parts(uapi::UB_ADDR_TYPE_CNA16)
                },
                c"16-bit CNA above 0xffff",
            ),
            (
                parts(uapi::UB_ADDR_TYPE_IPV6),
                c"IPv6 address without its ipv6 attribute",
            ),
            (
                AddrParts {
                    cna: Some(1),
                    ipv4: Some(&[10, 0, 0, 1]),
                    ..parts(uapi::UB_ADDR_TYPE_IPV4)
                },
                c"address with values of several types",
            ),
            (
                AddrParts {
                    ipv4: Some(&[10, 0, 0]),
                    ..parts(uapi::UB_ADDR_TYPE_IPV4)
                },
                c"IPv4 address not 4 bytes",
            ),
            (parts(7), c"unknown address type"),
        ] {
            let r = addr_from_parts(&p, Field::Addr).err();
            assert_eq!(r.map(|r| r.field), Some(Some(Field::Addr)));
            assert_eq!(r.map(|r| r.msg), Some(msg));
            assert_eq!(r.map(|r| r.errno.to_errno()), Some(EINVAL.to_errno()));
        }
    }

    #[test]
    fn prefixes() {
        let v4 = Addr::Ipv4([10, 1, 0, 0]);
        assert_eq!(check_prefix(&v4, 16).ok(), Some(16));
        assert_eq!(check_prefix(&Addr::Ipv4([0; 4]), 0).ok(), Some(0));
        assert_eq!(check_prefix(&Addr::Ipv6([0; 16]), 0).ok(), Some(0));
        assert_eq!(check_prefix(&Addr::Ipv6([0xff; 16]), 128).ok(), Some(128));
        let field = |a: &Addr, len| check_prefix(a, len).err().and_then(|r| r.field);
        assert_eq!(field(&v4, 8), Some(Field::Dst));
        assert_eq!(field(&v4, 33), Some(Field::PrefixLen));
        assert_eq!(field(&Addr::Cna16(1), 17), Some(Field::PrefixLen));
        assert_eq!(field(&Addr::Ipv6([0; 16]), 129), Some(Field::PrefixLen));
    }

    #[test]
    fn npi_modes() {
        assert_eq!(
            npi_from(uapi::UB_NPI_MODE_STRICT, 5).ok(),
            Some(NpiMode::Strict(Npi::from_raw(5)))
        );
        assert_eq!(
            npi_from(uapi::UB_NPI_MODE_LOOSE, Npi::LOW_PRIVILEGE | 2).ok(),
            Some(NpiMode::Loose)
        );
        for (mode, npi, field) in [
            (uapi::UB_NPI_MODE_STRICT, 0, Field::Npi),
            (uapi::UB_NPI_MODE_STRICT, Npi::LOW_PRIVILEGE, Field::Npi),
            (uapi::UB_NPI_MODE_STRICT, 1 << 25, Field::Npi),
            (9, 1, Field::NpiMode),
        ] {
            assert_eq!(npi_from(mode, npi).err().and_then(|r| r.field), Some(field));
        }
    }

    /// A dump over devices 0 (3 items, the middle one gone), 4 (2 items)
    /// and 9 (none), in calls whose skb holds `room` entries: resumed
    /// from the cursor, it visits every entry once, in order.
    /// `None` if it does not end within 20 calls.
    fn dump_in_calls(room: usize, filter: Option<u32>) -> Option<KVec<(u32, u32)>> {
        let devs = [(0u32, 3u32), (4, 2), (9, 0)];
        let dev_next = |from: u32| devs.iter().map(|d| d.0).find(|d| *d >= from);
        let mut seen = KVec::new();
        let mut cursor = [0u32; 2];
        for _call in 0..20 {
            let mut left = room;
            let get = |dev: u32, i: u32| {
                let count = devs.iter().find(|d| d.0 == dev).map_or(0, |d| d.1);
                match i {
                    i if i >= count => Step::End,
                    1 if dev == 0 => Step::Skip,
                    i => Step::Put((dev, i)),
                }
            };
            let r = walk(&mut cursor, filter, dev_next, get, |e| {
                if left == 0 {
                    return Err(EMSGSIZE);
                }
                left -= 1;
                seen.push(*e, GFP_KERNEL).map_err(|_| ENOMEM)
            });
            match r {
                Ok(()) => return Some(seen),
                Err(e) => assert_eq!(e.to_errno(), EMSGSIZE.to_errno()),
            }
        }
        None
    }

    /// The largest echo reply (an IPv6 source, every counter at its
    /// maximum) fits the small message `echo_reply` allocates.
    #[test]
    fn the_largest_echo_reply_fits_its_message() {
        let reply = EchoReply {
            dev_index: u32::MAX,
            id: u32::MAX,
            seq: u32::MAX,
            size: u32::MAX,
            rtt_ns: u64::MAX,
            src: Addr::Ipv6([0xff; 16]),
            port: u32::MAX,
        };
        let skb = OwnedSkb::small(ECHO_REPLY_PAYLOAD);
        assert!(skb.is_ok());
        if let Ok(skb) = skb {
            let mut w = skb.writer();
            // SAFETY: `skb` is ours.
            let hdr = unsafe { ub_nl_put_event(skb.0.as_ptr(), uapi::UB_CMD_ECHO_REPLY as u8) };
            assert!(!hdr.is_null());
            assert!(w.message(hdr, |w| fill_echo_reply(w, &reply)).is_ok());
        }
    }

    #[test]
    fn dumps_resume_where_the_skb_filled() {
        let all = [(0, 0), (0, 2), (4, 0), (4, 1)];
        for room in 1..=5 {
            assert_eq!(dump_in_calls(room, None).as_deref(), Some(&all[..]));
        }
        assert_eq!(
            dump_in_calls(1, Some(4)).as_deref(),
            Some(&[(4, 0), (4, 1)][..])
        );
        assert_eq!(dump_in_calls(2, Some(9)).as_deref(), Some(&[][..]));
    }

    fn tp(dev_index: u32, tpn: u32) -> TpSnapshot {
        TpSnapshot {
            dev_index,
            id: TpEvent {
                tpn,
                peer: Addr::Ipv4([10, 0, 2, 100]),
                key: 7,
                ctp: false,
                state: ChannelState::Rts,
                closed: false,
                error: 0,
            },
            peer_tpn: 1,
            params: None,
            claimed: true,
            rx_queued: 0,
            counters: None,
            ctp: None,
            tx_messages: 0,
            tx_acked: 0,
            rx_messages: 0,
        }
    }

    /// The `tp-get` dump over sparse TPNs (2, 5, 9 of device 0, 1 of
    /// device 3), in calls whose skb holds `room` entries, each call taking
    /// a fresh copy of a device's channels from the cursor's TPN on as the
    /// dumpit does: each channel once, in order, resumed at the TPN that
    /// did not fit, unused TPNs jumped over.
    #[test]
    fn tp_dumps_resume_at_the_tpn_that_did_not_fit() {
        let items = [(0u32, 2u32), (0, 5), (0, 9), (3, 1)];
        let dev_next = |from: u32| items.iter().map(|i| i.0).find(|d| *d >= from);
        // registry::tp_list over `items`.
        let list = |dev: u32, from: u32| -> KVec<TpSnapshot> {
            let mut v = KVec::new();
            for &(d, t) in items.iter() {
                if d == dev && t >= from && v.push(tp(d, t), GFP_KERNEL).is_err() {
                    break;
                }
            }
            v
        };
        for room in 1..=5 {
            let mut seen = KVec::new();
            let mut cursor = [0u32; 2];
            let mut gets = 0u32;
            let mut done = false;
            for _call in 0..20 {
                let mut left = room;
                let mut copy: Option<(u32, KVec<TpSnapshot>)> = None;
                let get = |dev: u32, tpn: u32| {
                    gets += 1;
                    if copy.as_ref().is_none_or(|(d, _)| *d != dev) {
                        copy = Some((dev, list(dev, tpn)));
                    }
                    match &copy {
                        Some((_, chans)) => tp_at(chans, tpn, |t: &TpSnapshot| t.id.tpn),
                        None => Step::End,
                    }
                };
                let r = walk(&mut cursor, None, dev_next, get, |e: &TpSnapshot| {
                    if left == 0 {
                        return Err(EMSGSIZE);
                    }
                    left -= 1;
                    seen.push((e.dev_index, e.id.tpn), GFP_KERNEL)
                        .map_err(|_| ENOMEM)
                });
                if r.is_ok() {
                    done = true;
                    break;
                }
            }
            assert!(done);
            assert_eq!(&seen[..], &items[..]);
            // Jumps, not one step per TPN in between.
            assert!(gets < 40);
        }
    }

    /// The attributes of `tp-new` over the driver's defaults, and the
    /// rules between them, each refusal naming its attribute.
    #[test]
    fn tp_new_configs() {
        let base = crate::ub_net::tp_config();
        let cfg = |a: TpAttrs| channel_config(&a, base);
        // Nothing given: the driver's configuration as it is.
        assert_eq!(cfg(TpAttrs::default()).ok(), Some(base));
        let c = cfg(TpAttrs {
            mode: Some(uapi::UB_TP_MODE_GO_BACK_N),
            ooo_window: Some(512),
            rto_base_us: Some(20_000),
            mtu: Some(1024),
            cc: Some(uapi::UB_TP_CC_LDCP),
            lb_key: Some(50_000),
            ..TpAttrs::default()
        })
        .ok();
        assert_eq!(c.map(|c| c.mode), Some(RetransmitMode::GoBackN));
        // Go-Back-N with fast retransmission holds nothing out of order.
        assert_eq!(c.map(|c| c.rx_slots), Some(0));
        assert_eq!(c.map(|c| c.ooo_window), Some(512));
        assert_eq!(
            c.map(|c| c.rto),
            Some(RtoConfig::Dynamic {
                base_us: 20_000,
                n: 1
            })
        );
        assert_eq!(c.map(|c| (c.mtu, c.cc.mtu)), Some((1024, 1024)));
        assert_eq!(c.map(|c| c.cc.alg), Some(CcAlgorithm::Ldcp));
        assert_eq!(c.map(|c| c.lb_key), Some(50_000));
        let sprayed = cfg(TpAttrs {
            fast_retransmit: Some(false),
            load_balance: Some(uapi::UB_LOAD_BALANCE_PER_PACKET),
            ..TpAttrs::default()
        })
        .ok();
        assert_eq!(
            sprayed.map(|c| c.lb),
            Some(LoadBalance::PerPacket { range_log2: 4 })
        );
        assert_eq!(sprayed.map(|c| c.rx_slots), Some(256));
        for (a, field, errno) in [
            (
                TpAttrs {
                    transport: Some(uapi::UB_TP_TRANSPORT_CTP),
                    ..TpAttrs::default()
                },
                Field::Transport,
                EINVAL,
            ),
            (
                TpAttrs {
                    rto_static_us: Some(512),
                    rto_base_us: Some(100),
                    ..TpAttrs::default()
                },
                Field::RtoBase,
                EINVAL,
            ),
            (
                TpAttrs {
                    rto_n: Some(2),
                    ..TpAttrs::default()
                },
                Field::RtoN,
                EINVAL,
            ),
            (
                TpAttrs {
                    lb_range: Some(2),
                    ..TpAttrs::default()
                },
                Field::LbRange,
                EINVAL,
            ),
            // Fast retransmission is on by default: the refusal points at
            // the attribute given.
            (
                TpAttrs {
                    load_balance: Some(uapi::UB_LOAD_BALANCE_PER_PACKET),
                    ..TpAttrs::default()
                },
                Field::LoadBalance,
                EINVAL,
            ),
            (
                TpAttrs {
                    fast_retransmit: Some(true),
                    load_balance: Some(uapi::UB_LOAD_BALANCE_PER_PACKET),
                    ..TpAttrs::default()
                },
                Field::FastRetransmit,
                EINVAL,
            ),
        ] {
            let r = cfg(a).err();
            assert_eq!(r.and_then(|r| r.field), Some(field));
            assert_eq!(r.map(|r| r.errno.to_errno()), Some(errno.to_errno()));
        }
    }

    /// `tp-set` and `tpg-set` change the state only, to suspended or rts,
    /// each refusal in the words of its operation.
    #[test]
    fn tp_set_changes() {
        for m in [&TP_SET_MESSAGES, &TPG_SET_MESSAGES] {
            let none = TpAttrs::default();
            assert_eq!(
                tp_change(&none, Some(uapi::UB_TP_STATE_SUSPENDED), m).ok(),
                Some(TpChange::Suspend)
            );
            assert_eq!(
                tp_change(&none, Some(uapi::UB_TP_STATE_RTS), m).ok(),
                Some(TpChange::Resume)
            );
            let r = tp_change(&none, Some(uapi::UB_TP_STATE_ERR), m).err();
            assert_eq!(r.and_then(|r| r.field), Some(Field::State));
            assert_eq!(r.map(|r| r.msg), Some(m.state));
            let r = tp_change(&none, None, m).err();
            assert!(r.is_some_and(|r| r.field.is_none()));
            assert_eq!(r.map(|r| r.msg), Some(m.nothing));
            let mtu = TpAttrs {
                mtu: Some(1024),
                ..TpAttrs::default()
            };
            let r = tp_change(&mtu, Some(uapi::UB_TP_STATE_RTS), m).err();
            assert_eq!(r.and_then(|r| r.field), Some(Field::Mtu));
            assert_eq!(r.map(|r| r.errno.to_errno()), Some(EOPNOTSUPP.to_errno()));
            assert_eq!(r.map(|r| r.msg), Some(m.fixed));
        }
    }

    /// The members `tpg-new` opens are configured as a connecting group
    /// bind's: source ports (LBFs) 16 apart, or a per-packet range apart
    /// when it is wider, and one channel's send window shared (at least 32
    /// packets each, never more than the whole).
    #[test]
    fn tpg_member_configs() {
        use crate::group::member_config;
        let base = crate::ub_net::tp_config();
        let keys = |c: ChannelConfig, n: u32| {
            let mut v = [0u16; 8];
            for (i, k) in (0..n).zip(v.iter_mut()) {
                *k = member_config(c, i, n).lb_key.wrapping_sub(c.lb_key);
            }
            v
        };
        assert_eq!(keys(base, 4), [0, 16, 32, 48, 0, 0, 0, 0]);
        let wide = channel_config(
            &TpAttrs {
                fast_retransmit: Some(false),
                load_balance: Some(uapi::UB_LOAD_BALANCE_PER_PACKET),
                lb_range: Some(6),
                ..TpAttrs::default()
            },
            base,
        );
        assert!(wide.is_ok());
        let Ok(wide) = wide else { return };
        assert_eq!(keys(wide, 3), [0, 64, 128, 0, 0, 0, 0, 0]);
        let window = |w: u32, n: u32| {
            let mut c = base;
            c.send_window = w;
            member_config(c, 1, n).send_window
        };
        assert_eq!(window(256, 4), 64);
        assert_eq!(window(256, 8), 32);
        assert_eq!(window(40, 4), 32);
        assert_eq!(window(20, 4), 20);
        // Nothing else differs from the group's configuration.
        let m = member_config(base, 2, 4);
        assert_eq!(
            ChannelConfig {
                lb_key: base.lb_key,
                send_window: base.send_window,
                ..m
            },
            base
        );
    }

    /// A group is RTS once every member is, ERR once one failed, the least
    /// advanced member's state otherwise.
    #[test]
    fn tpg_states() {
        use crate::group::group_state;
        use ChannelState as S;
        for (states, want) in [
            (&[S::Rts, S::Rts, S::Rts][..], S::Rts),
            (&[S::Rts, S::Err, S::Rts][..], S::Err),
            (&[S::Reset, S::Err][..], S::Err),
            (&[S::Rts, S::Suspended][..], S::Suspended),
            (&[S::Rts, S::Rtr, S::Suspended][..], S::Rtr),
            (&[S::Rtr, S::Reset, S::Rts][..], S::Reset),
        ] {
            assert_eq!(group_state(states.iter().copied()), want);
        }
    }

    /// What `tpg-new`, the binds, `tpg-get`, `tpg-set` and `tpg-del` ask of
    /// a device's core, on a device of this test (no ports: its channels
    /// never reach the peer, and stay in setup). A group is made whole,
    /// keys `key..key + n`, unclaimed; every refusal changes nothing and
    /// names an attribute of `tpg-new`'s request; a single bind takes no
    /// member, a group bind of the same peer, key and size takes them all.
    #[test]
    fn tpg_ops_on_a_device() {
        use crate::ub_net::{tp_config, Net};
        let net = Net::new(u32::MAX - 1, c"kunit", 2, 0);
        assert!(net.is_ok());
        let Ok(net) = net else { return };
        let peer = Addr::Ipv4([10, 9, 0, 2]);
        assert!(net.set_addr(Addr::Ipv4([10, 9, 0, 1]), true).is_ok());
        let cfg = tp_config();
        let channels = |net: &Net| net.tp_snapshots(..).map_or(usize::MAX, |v| v.len());
        let refusal = |r: Result<TpgSnapshot, Refusal>| {
            r.err().map(|r| {
                (
                    r.errno.to_errno(),
                    r.field.and_then(|f| field_attr(AttrSet::Tp, f)),
                )
            })
        };
        let made = net.group_open_unclaimed(peer, 100, 4, cfg);
        assert!(made.is_ok());
        let Ok(g) = made else { return };
        assert_eq!(g.id.members, 4);
        assert_eq!(g.members().len(), 4);
        assert!(!g.claimed);
        assert_eq!(g.members().first().map(|m| m.id.tpn), Some(g.id.head.tpn));
        for (i, m) in (0u32..).zip(g.members()) {
            assert_eq!((m.id.key, m.id.peer), (100 + i, peer));
        }
        assert_eq!(channels(&net), 4);
        // Each refused, pointing at its attribute; nothing made.
        let mut wide = cfg;
        wide.send_window = 65_537;
        for (to, key, n, c, want) in [
            (peer, 103, 4, cfg, (EEXIST, uapi::UB_A_TP_KEY)),
            (peer, 99, 2, cfg, (EEXIST, uapi::UB_A_TP_KEY)),
            (peer, 200, 9, cfg, (EINVAL, uapi::UB_A_TP_MEMBERS)),
            (peer, 200, 1, cfg, (EINVAL, uapi::UB_A_TP_MEMBERS)),
            (Addr::Cna16(2), 200, 2, cfg, (EINVAL, uapi::UB_A_TP_PEER)),
            (peer, 200, 2, wide, (EINVAL, uapi::UB_A_TP_SEND_WINDOW)),
        ] {
            let r = refusal(net.group_open_unclaimed(to, key, n, c));
            assert_eq!(r, Some((want.0.to_errno(), Some(want.1))));
            assert!(want.1 <= maxattr::TPG_NEW_DO);
        }
        assert_eq!(channels(&net), 4);
        // 16 unclaimed channels at most: three more groups of 4 fit, then
        // none.
        for key in [200, 300, 400] {
            assert!(net.group_open_unclaimed(peer, key, 4, cfg).is_ok());
        }
        let r = refusal(net.group_open_unclaimed(peer, 500, 2, cfg));
        assert_eq!(r, Some((ENOSPC.to_errno(), Some(uapi::UB_A_TP_MEMBERS))));
        assert_eq!(channels(&net), 16);
        // `tpg-get` names the group by its first member's TPN only.
        let got = net.tpg_snapshots(g.id.head.tpn..=g.id.head.tpn);
        assert_eq!(got.map(|v| v.first().map(|s| s.id)).ok(), Some(Some(g.id)));
        assert_eq!(net.tpg_snapshots(..).map(|v| v.len()).ok(), Some(4));
        let second = g.members().get(1).map_or(0, |m| m.id.tpn);
        assert!(net
            .tpg_snapshots(second..=second)
            .is_ok_and(|v| v.is_empty()));
        // A single bind does not take a member; a group bind of another
        // size or peer does not take the group.
        let single = net.channel_connect(peer, 101, cfg, 0).err();
        assert_eq!(single.map(|e| e.to_errno()), Some(EADDRINUSE.to_errno()));
        let listen = net.channel_listen(Some(peer), 100, 0, true).err();
        assert_eq!(listen.map(|e| e.to_errno()), Some(EAGAIN.to_errno()));
        assert!(net
            .claim_group(Some(peer), 100, 3)
            .is_ok_and(|m| m.is_none()));
        let other = Addr::Ipv4([10, 9, 0, 3]);
        assert!(net
            .claim_group(Some(other), 100, 4)
            .is_ok_and(|m| m.is_none()));
        // One of the same peer, key and size takes every member, in key
        // order, and the file's group is the one tpg-new formed.
        let claimed = net.claim_group(None, 100, 4);
        assert!(matches!(claimed, Ok(Some(_))));
        let Ok(Some(members)) = claimed else { return };
        for (c, m) in members.iter().zip(g.members()) {
            assert_eq!(c.tpn, m.id.tpn);
            assert!(c.inner.lock().claimed);
        }
        let gid = net.group_create(&members);
        assert!(gid.is_ok());
        assert_eq!(net.group_create(&members).ok(), gid.ok());
        assert!(net.claim_group(None, 100, 4).is_ok_and(|m| m.is_none()));
        let got = net.tpg_snapshots(g.id.head.tpn..=g.id.head.tpn);
        assert!(got.is_ok_and(|v| v.first().is_some_and(|s| s.claimed)));
        // `tpg-set`: the members are still in setup; a member's TPN names
        // no group.
        let change = |tpn| {
            net.group_change(tpn, TpChange::Suspend)
                .err()
                .map(|r| (r.errno.to_errno(), r.field))
        };
        assert_eq!(
            change(g.id.head.tpn),
            Some((EBUSY.to_errno(), Some(Field::State)))
        );
        assert_eq!(change(second), Some((ENOENT.to_errno(), Some(Field::Tpn))));
        let del = net.group_delete(second).err().map(|r| r.errno.to_errno());
        assert_eq!(del, Some(ENOENT.to_errno()));
        // `tpg-del`: every member fails with ECONNABORTED, and the group
        // reports it.
        assert!(net.group_delete(g.id.head.tpn).is_ok());
        for c in members.iter() {
            let e = c.inner.lock().error.map(|e| e.to_errno());
            assert_eq!(e, Some(ECONNABORTED.to_errno()));
        }
        let got = net.tpg_snapshots(g.id.head.tpn..=g.id.head.tpn);
        let state = got.map(|v| v.first().map(|s| (s.id.head.state, s.id.head.error)));
        let aborted = ECONNABORTED.to_errno().unsigned_abs();
        assert_eq!(state.ok(), Some(Some((ChannelState::Err, aborted))));
        drop(net.shutdown());
    }

    /// CTP ends through `tp-new` (transport ctp), `tp-get`, `tp-set`,
    /// `tp-del` and the CTP bind, on a device of this test: an end made
    /// unclaimed is listed under its handle (2^23 and above) with the CTP
    /// transport, every refusal names its attribute and makes nothing, a
    /// bind of its peer claims that very end, `tp-del` fails it with
    /// `ECONNABORTED` and frees the peer address at once.
    #[test]
    fn ctp_ends_on_a_device() {
        use crate::ctp::CTP_HANDLE_BASE;
        use crate::ub_net::{Net, TpChange};
        let net = Net::new(u32::MAX - 2, c"kunit", 1, 0);
        assert!(net.is_ok());
        let Ok(net) = net else { return };
        assert!(net.set_addr(Addr::Cna16(0x0101), true).is_ok());
        let peer = Addr::Cna16(0x0102);
        let listed = |net: &Net| net.tp_snapshots(..).map_or(usize::MAX, |v| v.len());
        let refusal = |r: Result<u32, Refusal>| {
            r.err().map(|r| {
                (
                    r.errno.to_errno(),
                    r.field.and_then(|f| field_attr(AttrSet::Tp, f)),
                )
            })
        };
        let h = net.ctp_open_unclaimed(peer);
        assert_eq!(h.as_ref().ok(), Some(&CTP_HANDLE_BASE));
        let Ok(h) = h else { return };
        let got = net.tp_snapshots(h..=h);
        let snap = got.as_ref().ok().and_then(|v| v.first().copied());
        assert!(snap.is_some_and(|s| s.id.ctp
            && s.id.peer == peer
            && s.id.state == ChannelState::Rts
            && !s.claimed
            && s.ctp.is_some()
            && s.params.is_none()));
        for (to, want) in [
            (peer, (EEXIST.to_errno(), Some(uapi::UB_A_TP_PEER))),
            (
                Addr::Ipv4([10, 9, 0, 2]),
                (EINVAL.to_errno(), Some(uapi::UB_A_TP_PEER)),
            ),
            (
                Addr::Cna24(0x0102),
                (EADDRNOTAVAIL.to_errno(), Some(uapi::UB_A_TP_PEER)),
            ),
        ] {
            assert_eq!(refusal(net.ctp_open_unclaimed(to)), Some(want));
            assert_eq!(listed(&net), 1);
        }
        let set = net.channel_change(h, TpChange::Suspend).err();
        assert_eq!(
            set.map(|r| (r.errno.to_errno(), r.field)),
            Some((EOPNOTSUPP.to_errno(), Some(Field::State)))
        );
        // The bind of its peer claims this very end; a second is refused.
        let bound = net.ctp_bind(peer);
        assert!(bound.as_ref().is_ok_and(|(e, _)| e.handle == h));
        assert_eq!(
            net.ctp_bind(peer).err().map(|e| e.to_errno()),
            Some(EADDRINUSE.to_errno())
        );
        let claimed = net.tp_snapshots(h..=h);
        assert!(claimed.is_ok_and(|v| v.first().is_some_and(|s| s.claimed)));
        // tp-del: the file's end fails, the peer is free at once.
        assert!(net.channel_delete(h).is_ok());
        assert!(bound
            .as_ref()
            .is_ok_and(|(e, _)| e.inner.lock().error == Some(ECONNABORTED)));
        assert_eq!(listed(&net), 0);
        assert!(net.channel_delete(h).is_err());
        let again = net.ctp_bind(peer);
        assert!(again
            .as_ref()
            .is_ok_and(|(e, _)| e.handle == h && e.inner.lock().claimed));
        if let (Ok((old, _)), Ok((new, _))) = (&bound, &again) {
            // The deleted end's close changes nothing of the new one.
            net.ctp_close(old);
            assert_eq!(listed(&net), 1);
            net.ctp_close(new);
        }
        assert_eq!(listed(&net), 0);
        drop(net.shutdown());
    }

    /// Every refusal of a channel the endpoint will not open points at an
    /// attribute of `tp-new`'s request, if at any.
    #[test]
    fn open_refusals_point_at_tp_new_attrs() {
        use crate::host::{ConfigError as C, OpenError as O};
        for e in [
            O::Config(C::OooWindow(384)),
            O::Config(C::SendWindow(0)),
            O::Config(C::RtoBase(1)),
            O::Config(C::StaticRtoLevel(1000)),
            O::Config(C::FastRetransmitWithPerPacketLb),
            O::Config(C::Mtu {
                mtu: 9000,
                max: 4096,
            }),
            O::Config(C::SprayRange(15)),
            O::Config(C::RtpFormat),
            O::Config(C::NoLocalAddress),
            O::Config(C::Zero),
            O::TableFull,
            O::Alloc,
            O::Exists,
            O::Closing,
        ] {
            let r = crate::ub_net::open_refusal(e);
            if let Some(f) = r.field {
                let a = field_attr(AttrSet::Tp, f);
                assert!(a.is_some_and(|a| a <= maxattr::TP_NEW_DO));
            }
            assert!(!r.msg.to_bytes().is_empty());
        }
    }

    #[test]
    fn tp_enums() {
        let states = [
            ChannelState::Reset,
            ChannelState::Rtr,
            ChannelState::Rts,
            ChannelState::Suspended,
            ChannelState::Err,
        ];
        for (i, s) in (0u32..).zip(states) {
            assert_eq!(tp_state(s, false), i);
            assert_eq!(tp_state(s, true), uapi::UB_TP_STATE_CLOSED);
        }
        assert_eq!(tp_mode(RetransmitMode::GoBackN), uapi::UB_TP_MODE_GO_BACK_N);
        assert_eq!(
            tp_mode(RetransmitMode::Selective),
            uapi::UB_TP_MODE_SELECTIVE
        );
    }

    /// The uapi enums follow the protocol core's states one to one.
    #[test]
    fn enum_values_are_distinct() {
        let dll = [
            DllState::Disabled,
            DllState::ParamInit,
            DllState::CreditInit,
            DllState::Normal,
        ];
        for (i, s) in (0u32..).zip(dll) {
            assert_eq!(dll_state(s), i);
        }
        let retry = [
            RetryReqState::Normal,
            RetryReqState::Req,
            RetryReqState::Wait,
            RetryReqState::Retrain,
            RetryReqState::Error,
        ];
        for (i, s) in (0u32..).zip(retry) {
            assert_eq!(retry_state(s), i);
        }
    }
}
