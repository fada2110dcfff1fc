// SPDX-License-Identifier: GPL-2.0
//! Numbering of the `ub` generic netlink family.
//!
//! Mirrors `Documentation/netlink/specs/ub.yaml` under YNL's genetlink
//! defaults: the attributes of each set are numbered from 1 in the order
//! listed, enum entries from 0, commands from 1 in the order of
//! `operations`. Every table here lists the spec's names beside the numbers;
//! the `spec_tables_match_the_yaml` test recomputes the numbering from the
//! YAML and fails on any difference (a rename, a reorder, a type change, an
//! attribute ubctl does not know), so a spec change cannot silently break
//! ubctl.

/// Name of the generic netlink family.
pub const FAMILY_NAME: &str = "ub";
/// Version sent in the generic netlink header (YNL's default).
pub const FAMILY_VERSION: u8 = 1;
/// Name of the multicast group carrying port and TP Channel notifications.
pub const MCGRP_MONITOR: &str = "monitor";

/// Wire type of an attribute, as the spec's `type:` names it.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// `u8`
    U8,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// `binary`
    Binary,
    /// `string` (NUL-terminated)
    String,
    /// `pad`: alignment filler for u64s (`nla_put_u64_64bit`), never a value
    Pad,
    /// `u32` with `enum:` naming its values
    Enum(&'static EnumDef),
    /// `binary` with `display-hint: ipv4` and `exact-len: 4`
    Ipv4,
    /// `binary` with `display-hint: ipv6` and `exact-len: 16`
    Ipv6,
    /// `nest` of the named attribute set
    Nest(&'static Set),
    /// `nest` with `multi-attr: true`: the attribute may repeat
    MultiNest(&'static Set),
}

impl Ty {
    /// The spec's name of the type.
    pub fn spec_name(self) -> &'static str {
        match self {
            Ty::U8 => "u8",
            Ty::U32 | Ty::Enum(_) => "u32",
            Ty::U64 => "u64",
            Ty::Binary | Ty::Ipv4 | Ty::Ipv6 => "binary",
            Ty::String => "string",
            Ty::Pad => "pad",
            Ty::Nest(_) | Ty::MultiNest(_) => "nest",
        }
    }
}

/// One attribute of a set.
#[derive(Debug)]
pub struct AttrDef {
    /// The spec's name (also the JSON key ubctl prints).
    pub name: &'static str,
    /// Attribute type number.
    pub id: u16,
    /// Wire type.
    pub ty: Ty,
}

/// An attribute set.
#[derive(Debug)]
pub struct Set {
    /// The spec's name of the set.
    pub name: &'static str,
    /// Its attributes in spec order.
    pub attrs: &'static [AttrDef],
}

impl Set {
    /// The definition of attribute `id`, if the set has one.
    pub fn get(&self, id: u16) -> Option<&'static AttrDef> {
        self.attrs.iter().find(|a| a.id == id)
    }
}

macro_rules! attr_set {
    ($(#[$m:meta])* $static:ident, $module:ident, $spec:literal {
        $($c:ident = $v:literal, $n:literal, $t:expr;)*
    }) => {
        $(#[$m])*
        pub mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[doc = concat!("`", $n, "`")]
                pub const $c: u16 = $v;
            )*
        }
        $(#[$m])*
        pub static $static: Set = Set {
            name: $spec,
            attrs: &[$(AttrDef { name: $n, id: $v, ty: $t }),*],
        };
    };
}

attr_set!(
    /// Set `addr`: a network address.
    ADDR, addr, "addr" {
        TYPE = 1, "type", Ty::Enum(&ADDR_TYPE);
        CNA = 2, "cna", Ty::U32;
        IPV4 = 3, "ipv4", Ty::Ipv4;
        IPV6 = 4, "ipv6", Ty::Ipv6;
    }
);

attr_set!(
    /// Set `vl`: the credits of one virtual lane.
    VL, vl, "vl" {
        INDEX = 1, "index", Ty::U32;
        TX_CREDITS = 2, "tx-credits", Ty::U32;
        RX_OWED = 3, "rx-owed", Ty::U32;
        INITIAL = 4, "initial", Ty::U32;
        CREDIT_STALLS = 5, "credit-stalls", Ty::U64;
        PAD = 6, "pad", Ty::Pad;
    }
);

attr_set!(
    /// Set `link-stats`: data link layer counters of a port.
    LINK_STATS, link_stats, "link-stats" {
        TX_BLOCKS = 1, "tx-blocks", Ty::U64;
        TX_FLITS = 2, "tx-flits", Ty::U64;
        TX_DLLDPS = 3, "tx-dlldps", Ty::U64;
        TX_RETRANSMITTED_FLITS = 4, "tx-retransmitted-flits", Ty::U64;
        TX_CRD_ACKS = 5, "tx-crd-acks", Ty::U64;
        RX_BLOCKS = 6, "rx-blocks", Ty::U64;
        RX_FLITS = 7, "rx-flits", Ty::U64;
        RX_DLLDPS = 8, "rx-dlldps", Ty::U64;
        RX_CRC_ERRORS = 9, "rx-crc-errors", Ty::U64;
        RX_FEC_ERRORS = 10, "rx-fec-errors", Ty::U64;
        RX_MALFORMED = 11, "rx-malformed", Ty::U64;
        RX_DISCARDED_FLITS = 12, "rx-discarded-flits", Ty::U64;
        RETRY_REQ_SETS = 13, "retry-req-sets", Ty::U64;
        RETRY_ACK_SETS = 14, "retry-ack-sets", Ty::U64;
        RETRY_TIMEOUTS = 15, "retry-timeouts", Ty::U64;
        RETRAINS = 16, "retrains", Ty::U64;
        CREDIT_STALLS = 17, "credit-stalls", Ty::U64;
        LINK_DOWNS = 18, "link-downs", Ty::U64;
        PAD = 19, "pad", Ty::Pad;
    }
);

attr_set!(
    /// Set `dev-stats`: what the driver refused from the device on a port.
    DEV_STATS, dev_stats, "dev-stats" {
        BAD_HEAD = 1, "bad-head", Ty::U64;
        BAD_LEN = 2, "bad-len", Ty::U64;
        BAD_STATUS = 3, "bad-status", Ty::U64;
        DOUBLE_COMPLETION = 4, "double-completion", Ty::U64;
        IRQ_STORM = 5, "irq-storm", Ty::U64;
        GARBAGE_FLITS = 6, "garbage-flits", Ty::U64;
        TX_DESC_ERRORS = 7, "tx-desc-errors", Ty::U64;
        RX_DESC_ERRORS = 8, "rx-desc-errors", Ty::U64;
        RX_LOST_FLITS = 9, "rx-lost-flits", Ty::U64;
        RING_RESETS = 10, "ring-resets", Ty::U64;
        INTERRUPTS = 11, "interrupts", Ty::U64;
        PAD = 12, "pad", Ty::Pad;
    }
);

attr_set!(
    /// Set `net-stats`: network layer counters of a device.
    NET_STATS, net_stats, "net-stats" {
        RX_PACKETS = 1, "rx-packets", Ty::U64;
        TX_PACKETS = 2, "tx-packets", Ty::U64;
        ICRC_DROPS = 3, "icrc-drops", Ty::U64;
        NPI_DROPS = 4, "npi-drops", Ty::U64;
        NO_ROUTE_DROPS = 5, "no-route-drops", Ty::U64;
        MALFORMED = 6, "malformed", Ty::U64;
        NOT_FOR_US = 7, "not-for-us", Ty::U64;
        UNKNOWN_CHANNEL = 8, "unknown-channel", Ty::U64;
        ECHO_REQUESTS = 9, "echo-requests", Ty::U64;
        ECHO_REPLIES = 10, "echo-replies", Ty::U64;
        PAD = 11, "pad", Ty::Pad;
        WRONG_PEER = 12, "wrong-peer", Ty::U64;
        ECHO_DROPPED = 13, "echo-dropped", Ty::U64;
    }
);

attr_set!(
    /// Set `dev`: a device, its addresses and NPI.
    DEV, dev, "dev" {
        INDEX = 1, "index", Ty::U32;
        NAME = 2, "name", Ty::String;
        PORTS = 3, "ports", Ty::U32;
        VERSION = 4, "version", Ty::U32;
        ADDR = 5, "addr", Ty::MultiNest(&ADDR);
        NPI_MODE = 6, "npi-mode", Ty::Enum(&NPI_MODE);
        NPI = 7, "npi", Ty::U32;
        NET_STATS = 8, "net-stats", Ty::Nest(&NET_STATS);
    }
);

attr_set!(
    /// Set `port`: one port of a device.
    PORT, port, "port" {
        DEV_INDEX = 1, "dev-index", Ty::U32;
        INDEX = 2, "index", Ty::U32;
        ADMIN_UP = 3, "admin-up", Ty::U8;
        PHY_UP = 4, "phy-up", Ty::U8;
        LANES = 5, "lanes", Ty::U32;
        LANE_RATE_MBPS = 6, "lane-rate-mbps", Ty::U32;
        DLL_STATE = 7, "dll-state", Ty::Enum(&DLL_STATE);
        RETRY_STATE = 8, "retry-state", Ty::Enum(&RETRY_REQ_STATE);
        NUM_RETRY = 9, "num-retry", Ty::U32;
        NUM_RETRY_THRESHOLD = 10, "num-retry-threshold", Ty::U8;
        NUM_PHY_REINIT_THRESHOLD = 11, "num-phy-reinit-threshold", Ty::U8;
        WANT_SHARING = 12, "want-sharing", Ty::U8;
        FEATURE_ID = 13, "feature-id", Ty::U32;
        TX_SHARING = 14, "tx-sharing", Ty::U8;
        RX_SHARING = 15, "rx-sharing", Ty::U8;
        CELL_FLITS = 16, "cell-flits", Ty::U32;
        DATA_ACK_GRAIN = 17, "data-ack-grain", Ty::U32;
        CTRL_ACK_GRAIN = 18, "ctrl-ack-grain", Ty::U32;
        VL_ENABLE = 19, "vl-enable", Ty::U32;
        PEER_RETRY_BUF_DEPTH = 20, "peer-retry-buf-depth", Ty::U32;
        RETRY_BUF_DEPTH = 21, "retry-buf-depth", Ty::U32;
        VL = 22, "vl", Ty::MultiNest(&VL);
        LINK_STATS = 23, "link-stats", Ty::Nest(&LINK_STATS);
        DEV_STATS = 24, "dev-stats", Ty::Nest(&DEV_STATS);
        EVENT = 25, "event", Ty::Enum(&PORT_EVENT);
    }
);

attr_set!(
    /// Set `route`: a route over a set of a device's ports.
    ROUTE, route, "route" {
        DEV_INDEX = 1, "dev-index", Ty::U32;
        DST = 2, "dst", Ty::Nest(&ADDR);
        PREFIX_LEN = 3, "prefix-len", Ty::U32;
        PORTS = 4, "ports", Ty::U64;
        LOAD_BALANCE = 5, "load-balance", Ty::Enum(&LOAD_BALANCE);
        PAD = 6, "pad", Ty::Pad;
    }
);

attr_set!(
    /// Set `echo`: an echo request or reply.
    ECHO, echo, "echo" {
        DEV_INDEX = 1, "dev-index", Ty::U32;
        DST = 2, "dst", Ty::Nest(&ADDR);
        ID = 3, "id", Ty::U32;
        SEQ = 4, "seq", Ty::U32;
        SIZE = 5, "size", Ty::U32;
        RTT_NS = 6, "rtt-ns", Ty::U64;
        SRC = 7, "src", Ty::Nest(&ADDR);
        PORT = 8, "port", Ty::U32;
        PAD = 9, "pad", Ty::Pad;
    }
);

attr_set!(
    /// Set `tp-stats`: the counters of one TP Channel.
    TP_STATS, tp_stats, "tp-stats" {
        TX_PACKETS = 1, "tx-packets", Ty::U64;
        TX_BYTES = 2, "tx-bytes", Ty::U64;
        RX_PACKETS = 3, "rx-packets", Ty::U64;
        RX_BYTES = 4, "rx-bytes", Ty::U64;
        MESSAGES_ACKED = 5, "messages-acked", Ty::U64;
        MESSAGES_DELIVERED = 6, "messages-delivered", Ty::U64;
        RTX_FAST = 7, "rtx-fast", Ty::U64;
        RTX_RTO = 8, "rtx-rto", Ty::U64;
        RTX_MARK_PSN = 9, "rtx-mark-psn", Ty::U64;
        RTX_GO_BACK_N = 10, "rtx-go-back-n", Ty::U64;
        TPACK_SENT = 11, "tpack-sent", Ty::U64;
        TPNAK_SENT = 12, "tpnak-sent", Ty::U64;
        TPSACK_SENT = 13, "tpsack-sent", Ty::U64;
        TPACK_RCVD = 14, "tpack-rcvd", Ty::U64;
        TPNAK_RCVD = 15, "tpnak-rcvd", Ty::U64;
        TPSACK_RCVD = 16, "tpsack-rcvd", Ty::U64;
        RTO_EXPIRIES = 17, "rto-expiries", Ty::U64;
        CW = 18, "cw", Ty::U32;
        INFLIGHT = 19, "inflight", Ty::U32;
        OUTSTANDING = 20, "outstanding", Ty::U32;
        MAX_OUTSTANDING = 21, "max-outstanding", Ty::U32;
        SRTT_NS = 22, "srtt-ns", Ty::U64;
        RX_DUPLICATES = 23, "rx-duplicates", Ty::U64;
        RX_INVALID_PSN = 24, "rx-invalid-psn", Ty::U64;
        TX_MESSAGES = 25, "tx-messages", Ty::U64;
        TX_ACKED = 26, "tx-acked", Ty::U64;
        RX_MESSAGES = 27, "rx-messages", Ty::U64;
        PAD = 28, "pad", Ty::Pad;
        RX_DROPPED = 29, "rx-dropped", Ty::U64;
    }
);

attr_set!(
    /// Set `tp`: one TP Channel of a device.
    TP, tp, "tp" {
        DEV_INDEX = 1, "dev-index", Ty::U32;
        TPN = 2, "tpn", Ty::U32;
        PEER_TPN = 3, "peer-tpn", Ty::U32;
        PEER = 4, "peer", Ty::Nest(&ADDR);
        KEY = 5, "key", Ty::U32;
        STATE = 6, "state", Ty::Enum(&TP_STATE);
        ERROR = 7, "error", Ty::U32;
        MODE = 8, "mode", Ty::Enum(&TP_MODE);
        FAST_RETRANSMIT = 9, "fast-retransmit", Ty::U8;
        MTU = 10, "mtu", Ty::U32;
        CLAIMED = 11, "claimed", Ty::U8;
        RX_QUEUED = 12, "rx-queued", Ty::U32;
        STATS = 13, "stats", Ty::Nest(&TP_STATS);
        TRANSPORT = 14, "transport", Ty::Enum(&TP_TRANSPORT);
        OOO_WINDOW = 15, "ooo-window", Ty::U32;
        RTO_STATIC_US = 16, "rto-static-us", Ty::U32;
        RTO_BASE_US = 17, "rto-base-us", Ty::U32;
        RTO_N = 18, "rto-n", Ty::U8;
        RETRY_LIMIT = 19, "retry-limit", Ty::U8;
        CC = 20, "cc", Ty::Enum(&TP_CC);
        LOAD_BALANCE = 21, "load-balance", Ty::Enum(&LOAD_BALANCE);
        LB_RANGE = 22, "lb-range", Ty::U8;
        LB_KEY = 23, "lb-key", Ty::U32;
        SEND_WINDOW = 24, "send-window", Ty::U32;
        MEMBERS = 25, "members", Ty::U32;
        MEMBER = 26, "member", Ty::MultiNest(&TPG_MEMBER);
    }
);

attr_set!(
    /// Set `tpg-member`: one member channel of a TP Channel Group.
    TPG_MEMBER, tpg_member, "tpg-member" {
        TPN = 1, "tpn", Ty::U32;
        PEER_TPN = 2, "peer-tpn", Ty::U32;
        KEY = 3, "key", Ty::U32;
        STATE = 4, "state", Ty::Enum(&TP_STATE);
        ERROR = 5, "error", Ty::U32;
    }
);

/// Every attribute set ubctl knows, for the spec test and for naming the
/// attribute an extended ACK points at.
pub static SETS: &[&Set] = &[
    &ADDR,
    &VL,
    &LINK_STATS,
    &DEV_STATS,
    &NET_STATS,
    &DEV,
    &PORT,
    &ROUTE,
    &ECHO,
    &TP_STATS,
    &TP,
    &TPG_MEMBER,
];

/// An enum definition: its spec name and its entries from 0.
#[derive(Debug)]
pub struct EnumDef {
    /// The spec's name.
    pub name: &'static str,
    /// Entry names; entry `i` has value `i`.
    pub entries: &'static [&'static str],
}

impl EnumDef {
    /// The name of `value`, or `None` for a value this ubctl does not know.
    pub fn name_of(&self, value: u32) -> Option<&'static str> {
        usize::try_from(value)
            .ok()
            .and_then(|i| self.entries.get(i))
            .copied()
    }

    /// The value of entry `name`.
    pub fn value_of(&self, name: &str) -> Option<u32> {
        self.entries
            .iter()
            .position(|e| *e == name)
            .and_then(|i| u32::try_from(i).ok())
    }
}

/// `dll-state`
pub static DLL_STATE: EnumDef = EnumDef {
    name: "dll-state",
    entries: &["disabled", "param-init", "credit-init", "normal"],
};
/// `retry-req-state`
pub static RETRY_REQ_STATE: EnumDef = EnumDef {
    name: "retry-req-state",
    entries: &["normal", "req", "wait", "retrain", "error"],
};
/// `addr-type`
pub static ADDR_TYPE: EnumDef = EnumDef {
    name: "addr-type",
    entries: &["cna16", "cna24", "ipv4", "ipv6"],
};
/// `npi-mode`
pub static NPI_MODE: EnumDef = EnumDef {
    name: "npi-mode",
    entries: &["strict", "loose"],
};
/// `load-balance`
pub static LOAD_BALANCE: EnumDef = EnumDef {
    name: "load-balance",
    entries: &["per-flow", "per-packet"],
};
/// `port-event`
pub static PORT_EVENT: EnumDef = EnumDef {
    name: "port-event",
    entries: &[
        "link-up",
        "link-down",
        "retrain",
        "stopped",
        "recovered",
        "device-error",
    ],
};

/// `tp-state`
pub static TP_STATE: EnumDef = EnumDef {
    name: "tp-state",
    entries: &["reset", "rtr", "rts", "suspended", "err", "closed"],
};
/// `tp-mode`
pub static TP_MODE: EnumDef = EnumDef {
    name: "tp-mode",
    entries: &["go-back-n", "selective"],
};
/// `tp-transport`
pub static TP_TRANSPORT: EnumDef = EnumDef {
    name: "tp-transport",
    entries: &["rtp", "ctp"],
};
/// `tp-cc`
pub static TP_CC: EnumDef = EnumDef {
    name: "tp-cc",
    entries: &["none", "caqm", "ldcp"],
};

/// Every enum, for the spec test.
pub static ENUMS: &[&EnumDef] = &[
    &DLL_STATE,
    &RETRY_REQ_STATE,
    &ADDR_TYPE,
    &NPI_MODE,
    &LOAD_BALANCE,
    &PORT_EVENT,
    &TP_STATE,
    &TP_MODE,
    &TP_TRANSPORT,
    &TP_CC,
];

/// Values of `addr-type` ubctl encodes.
pub mod addr_type {
    /// `cna16`
    pub const CNA16: u32 = 0;
    /// `cna24`
    pub const CNA24: u32 = 1;
    /// `ipv4`
    pub const IPV4: u32 = 2;
    /// `ipv6`
    pub const IPV6: u32 = 3;
}

/// Values of `load-balance` ubctl encodes.
pub mod load_balance {
    /// `per-flow`
    pub const PER_FLOW: u32 = 0;
    /// `per-packet`
    pub const PER_PACKET: u32 = 1;
}

/// Values of `tp-mode` ubctl encodes.
pub mod tp_mode {
    /// `go-back-n`
    pub const GO_BACK_N: u32 = 0;
    /// `selective`
    pub const SELECTIVE: u32 = 1;
}

/// One operation: its spec name, command number and attribute set.
#[derive(Debug)]
pub struct OpDef {
    /// The spec's name.
    pub name: &'static str,
    /// Command number.
    pub cmd: u8,
    /// The attribute set of its messages.
    pub set: &'static Set,
}

macro_rules! ops {
    ($($c:ident = $v:literal, $n:literal, $set:ident;)*) => {
        /// Command numbers.
        pub mod cmd {
            $(
                #[doc = concat!("`", $n, "`")]
                pub const $c: u8 = $v;
            )*
        }
        /// Every operation in spec order.
        pub static OPS: &[OpDef] = &[$(OpDef { name: $n, cmd: $v, set: &$set }),*];
    };
}

ops! {
    DEV_GET = 1, "dev-get", DEV;
    PORT_GET = 2, "port-get", PORT;
    PORT_SET = 3, "port-set", PORT;
    PORT_CHANGE_NTF = 4, "port-change-ntf", PORT;
    ADDR_ADD = 5, "addr-add", DEV;
    ADDR_DEL = 6, "addr-del", DEV;
    ROUTE_ADD = 7, "route-add", ROUTE;
    ROUTE_DEL = 8, "route-del", ROUTE;
    ROUTE_GET = 9, "route-get", ROUTE;
    NPI_SET = 10, "npi-set", DEV;
    ECHO = 11, "echo", ECHO;
    ECHO_REPLY = 12, "echo-reply", ECHO;
    TP_GET = 13, "tp-get", TP;
    TP_CHANGE_NTF = 14, "tp-change-ntf", TP;
    TP_NEW = 15, "tp-new", TP;
    TP_SET = 16, "tp-set", TP;
    TP_DEL = 17, "tp-del", TP;
    TPG_GET = 18, "tpg-get", TP;
    TPG_CHANGE_NTF = 19, "tpg-change-ntf", TP;
    TPG_NEW = 20, "tpg-new", TP;
    TPG_SET = 21, "tpg-set", TP;
    TPG_DEL = 22, "tpg-del", TP;
}

/// The operation with command number `cmd`.
pub fn op(cmd: u8) -> Option<&'static OpDef> {
    OPS.iter().find(|o| o.cmd == cmd)
}
