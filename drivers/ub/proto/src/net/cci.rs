// SPDX-License-Identifier: GPL-2.0
//! The 16-bit congestion control indicator (CCI) of every NTH (UB spec
//! §5.3.5).
//!
//! CCI\[15:13\] is the mode; the other 13 bits depend on it:
//!
//! | Mode | Bits 12..0 |
//! | --- | --- |
//! | `000` CAQM | LoC, reserved, Enable, C, I, Hint\[7:0\] |
//! | `100` FECN | LoC, reserved\[9:0\], FECN\[1:0\] |
//! | `010` FECN_RTT | LoC, Timestamp\[9:0\], FECN\[1:0\] |

/// The FECN marking of a packet (2 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fecn {
    /// `00`: switches must not mark this packet.
    Unmarkable,
    /// `10`: markable, no congestion seen so far.
    NoCongestion,
    /// `01`: markable, light congestion.
    Light,
    /// `11`: markable, severe congestion.
    Severe,
}

impl Fecn {
    /// Decodes the low two bits.
    pub const fn from_bits(v: u16) -> Self {
        match v & 3 {
            0 => Self::Unmarkable,
            1 => Self::Light,
            2 => Self::NoCongestion,
            _ => Self::Severe,
        }
    }

    /// The 2-bit encoding.
    pub const fn bits(self) -> u16 {
        match self {
            Self::Unmarkable => 0,
            Self::Light => 1,
            Self::NoCongestion => 2,
            Self::Severe => 3,
        }
    }

    /// Whether the packet carries a congestion mark.
    pub const fn is_congested(self) -> bool {
        matches!(self, Self::Light | Self::Severe)
    }

    /// What a switch writes when its egress sees `local` congestion: a
    /// switch re-marks only if its congestion is worse than what the packet
    /// carries (so the worst point on the path reaches the receiver) and
    /// never marks an unmarkable packet. Returns `None` to leave the packet
    /// alone.
    pub fn remark(self, local: Fecn) -> Option<Fecn> {
        if self == Self::Unmarkable || local == Self::Unmarkable || local <= self {
            None
        } else {
            Some(local)
        }
    }
}

/// Decoded CCI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cci {
    /// Mode `000`: congestion-aware quota management.
    Caqm {
        /// LoC: set by the last-hop switch toward the receiver.
        loc: bool,
        /// CAQM enabled for this packet.
        enable: bool,
        /// C: some switch on the path is congested.
        c: bool,
        /// I: the increase request is (still) granted.
        i: bool,
        /// Requested increment, in units agreed between controller and
        /// switches.
        hint: u8,
    },
    /// Mode `100`: forward explicit congestion notification.
    Fecn {
        /// LoC: the mark was written by the last hop.
        loc: bool,
        /// The marking.
        fecn: Fecn,
    },
    /// Mode `010`: FECN with a sender timestamp echoed back in CNPs.
    FecnRtt {
        /// LoC: the mark was written by the last hop.
        loc: bool,
        /// Sender timestamp (10 bits, sender-defined precision).
        timestamp: u16,
        /// The marking.
        fecn: Fecn,
    },
    /// A reserved mode, kept verbatim so that forwarding does not alter it.
    Reserved(u16),
}

const MODE_CAQM: u16 = 0b000;
const MODE_FECN: u16 = 0b100;
const MODE_FECN_RTT: u16 = 0b010;

impl Cci {
    /// The CCI a sender writes when it does not use in-network congestion
    /// signalling: FECN mode, markable, no congestion.
    pub const DEFAULT: Cci = Cci::Fecn {
        loc: false,
        fecn: Fecn::NoCongestion,
    };

    /// Decodes a CCI value.
    pub const fn from_u16(v: u16) -> Self {
        let loc = v & (1 << 12) != 0;
        match v >> 13 {
            MODE_CAQM => Self::Caqm {
                loc,
                enable: v & (1 << 10) != 0,
                c: v & (1 << 9) != 0,
                i: v & (1 << 8) != 0,
                hint: (v & 0xff) as u8,
            },
            MODE_FECN => Self::Fecn {
                loc,
                fecn: Fecn::from_bits(v),
            },
            MODE_FECN_RTT => Self::FecnRtt {
                loc,
                timestamp: (v >> 2) & 0x3ff,
                fecn: Fecn::from_bits(v),
            },
            _ => Self::Reserved(v),
        }
    }

    /// Encodes the CCI (reserved bits zero).
    pub const fn to_u16(self) -> u16 {
        match self {
            Self::Caqm {
                loc,
                enable,
                c,
                i,
                hint,
            } => {
                (MODE_CAQM << 13)
                    | ((loc as u16) << 12)
                    | ((enable as u16) << 10)
                    | ((c as u16) << 9)
                    | ((i as u16) << 8)
                    | hint as u16
            }
            Self::Fecn { loc, fecn } => (MODE_FECN << 13) | ((loc as u16) << 12) | fecn.bits(),
            Self::FecnRtt {
                loc,
                timestamp,
                fecn,
            } => {
                (MODE_FECN_RTT << 13)
                    | ((loc as u16) << 12)
                    | ((timestamp & 0x3ff) << 2)
                    | fecn.bits()
            }
            Self::Reserved(v) => v,
        }
    }

    /// Whether the packet arrived with a congestion indication (FECN light
    /// or severe, or CAQM C set).
    pub const fn congested(self) -> bool {
        match self {
            Self::Caqm { c, .. } => c,
            Self::Fecn { fecn, .. } | Self::FecnRtt { fecn, .. } => fecn.is_congested(),
            Self::Reserved(_) => false,
        }
    }

    /// What a switch egress does to the CCI when it sees congestion level
    /// `local` (`Unmarkable` meaning none): FECN modes are re-marked per
    /// [`Fecn::remark`]; CAQM sets C and clears I on congestion. `last_hop`
    /// sets LoC.
    pub fn mark(self, local: Fecn, last_hop: bool) -> Self {
        match self {
            Self::Caqm {
                loc,
                enable,
                c,
                i,
                hint,
            } => {
                if enable && local.is_congested() {
                    Self::Caqm {
                        loc: last_hop,
                        enable,
                        c: true,
                        i: false,
                        hint,
                    }
                } else {
                    Self::Caqm {
                        loc,
                        enable,
                        c,
                        i,
                        hint,
                    }
                }
            }
            Self::Fecn { loc, fecn } => match fecn.remark(local) {
                Some(f) => Self::Fecn {
                    loc: last_hop,
                    fecn: f,
                },
                None => Self::Fecn { loc, fecn },
            },
            Self::FecnRtt {
                loc,
                timestamp,
                fecn,
            } => match fecn.remark(local) {
                Some(f) => Self::FecnRtt {
                    loc: last_hop,
                    timestamp,
                    fecn: f,
                },
                None => Self::FecnRtt {
                    loc,
                    timestamp,
                    fecn,
                },
            },
            Self::Reserved(v) => Self::Reserved(v),
        }
    }
}
