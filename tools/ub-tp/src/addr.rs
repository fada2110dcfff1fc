// SPDX-License-Identifier: GPL-2.0
//! Peer addresses, written as ubctl writes them (`tools/ubctl/src/addr.rs`):
//! `cna16:0x0100`, `cna24:0x010203`, an IPv4 or an IPv6 literal.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use crate::uapi::{UbAddr, UB_ADDR_CNA16, UB_ADDR_CNA24, UB_ADDR_IPV4, UB_ADDR_IPV6, UB_ADDR_NONE};

/// A UB network address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// A 16-bit CNA.
    Cna16(u16),
    /// A 24-bit CNA (held in a u32, at most [`CNA24_MAX`]).
    Cna24(u32),
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address.
    V6(Ipv6Addr),
}

/// Largest 24-bit CNA.
pub const CNA24_MAX: u32 = 0x00ff_ffff;

/// Why an address did not parse or decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// The CNA part is not a number.
    #[error("'{0}' is not a number (cna16:0x0100, cna24:0x010203)")]
    NotANumber(String),
    /// The CNA is larger than its type holds.
    #[error("CNA {value} does not fit {bits} bits")]
    TooBig {
        /// As written.
        value: String,
        /// 16 or 24.
        bits: u32,
    },
    /// None of the forms.
    #[error("'{0}' is not an address (cna16:0x0100, cna24:0x010203, an IPv4 or an IPv6 address)")]
    Syntax(String),
    /// A `struct ub_addr` with an unknown type or non-zero padding.
    #[error("struct ub_addr of type {0} is not a valid address")]
    BadRaw(u8),
}

fn parse_num(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl FromStr for Addr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Self, AddrError> {
        if let Some(v) = s.strip_prefix("cna16:") {
            let n = parse_num(v).ok_or_else(|| AddrError::NotANumber(v.to_owned()))?;
            let c = u16::try_from(n).map_err(|_| AddrError::TooBig {
                value: v.to_owned(),
                bits: 16,
            })?;
            return Ok(Addr::Cna16(c));
        }
        if let Some(v) = s.strip_prefix("cna24:") {
            let n = parse_num(v).ok_or_else(|| AddrError::NotANumber(v.to_owned()))?;
            if n > CNA24_MAX {
                return Err(AddrError::TooBig {
                    value: v.to_owned(),
                    bits: 24,
                });
            }
            return Ok(Addr::Cna24(n));
        }
        match IpAddr::from_str(s) {
            Ok(IpAddr::V4(a)) => Ok(Addr::V4(a)),
            Ok(IpAddr::V6(a)) => Ok(Addr::V6(a)),
            Err(_) => Err(AddrError::Syntax(s.to_owned())),
        }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Cna16(c) => write!(f, "cna16:{c:#06x}"),
            Addr::Cna24(c) => write!(f, "cna24:{c:#08x}"),
            Addr::V4(a) => write!(f, "{a}"),
            Addr::V6(a) => write!(f, "{a}"),
        }
    }
}

impl Addr {
    /// The ABI form: the bytes in network order at the start, the rest zero.
    pub fn to_raw(self) -> UbAddr {
        let mut raw = UbAddr::default();
        let (ty, bytes): (u8, &[u8]) = match &self {
            Addr::Cna16(c) => (UB_ADDR_CNA16, &c.to_be_bytes()[..]),
            Addr::Cna24(c) => (UB_ADDR_CNA24, &c.to_be_bytes()[1..]),
            Addr::V4(a) => (UB_ADDR_IPV4, &a.octets()[..]),
            Addr::V6(a) => (UB_ADDR_IPV6, &a.octets()[..]),
        };
        raw.type_ = ty;
        for (dst, src) in raw.addr.iter_mut().zip(bytes) {
            *dst = *src;
        }
        raw
    }

    /// `Addr` from the ABI form: `Ok(None)` for `UB_ADDR_NONE`; an unknown
    /// type, non-zero reserved bytes or bytes past the address are refused.
    pub fn from_raw(raw: &UbAddr) -> Result<Option<Addr>, AddrError> {
        let bad = AddrError::BadRaw(raw.type_);
        let used = match raw.type_ {
            UB_ADDR_NONE => 0,
            UB_ADDR_CNA16 => 2,
            UB_ADDR_CNA24 => 3,
            UB_ADDR_IPV4 => 4,
            UB_ADDR_IPV6 => 16,
            _ => return Err(bad),
        };
        let (bytes, rest) = raw.addr.split_at(used);
        if raw.reserved != [0; 3] || rest.iter().any(|&b| b != 0) {
            return Err(bad);
        }
        Ok(match (raw.type_, bytes) {
            (UB_ADDR_CNA16, &[a, b]) => Some(Addr::Cna16(u16::from_be_bytes([a, b]))),
            (UB_ADDR_CNA24, &[a, b, c]) => Some(Addr::Cna24(u32::from_be_bytes([0, a, b, c]))),
            (UB_ADDR_IPV4, &[a, b, c, d]) => Some(Addr::V4(Ipv4Addr::new(a, b, c, d))),
            (UB_ADDR_IPV6, _) => {
                let mut o = [0u8; 16];
                o.copy_from_slice(bytes);
                Some(Addr::V6(Ipv6Addr::from(o)))
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Addr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_each_form() {
        assert_eq!(p("cna16:0x0100"), Addr::Cna16(0x100));
        assert_eq!(p("cna24:0x010203"), Addr::Cna24(0x010203));
        assert_eq!(p("cna24:256"), Addr::Cna24(256));
        assert_eq!(p("10.0.1.100"), Addr::V4(Ipv4Addr::new(10, 0, 1, 100)));
        assert_eq!(
            p("fe80::1"),
            Addr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1))
        );
    }

    #[test]
    fn refuses_bad_addresses() {
        assert!(matches!(
            "cna16:0x10000".parse::<Addr>(),
            Err(AddrError::TooBig { bits: 16, .. })
        ));
        assert!(matches!(
            "cna24:0x1000000".parse::<Addr>(),
            Err(AddrError::TooBig { bits: 24, .. })
        ));
        assert!(matches!(
            "cna16:zz".parse::<Addr>(),
            Err(AddrError::NotANumber(_))
        ));
        assert!(matches!(
            "10.0.0.256".parse::<Addr>(),
            Err(AddrError::Syntax(_))
        ));
        assert!(matches!("".parse::<Addr>(), Err(AddrError::Syntax(_))));
    }

    #[test]
    fn raw_form_is_network_order_then_zero() {
        let r = p("cna24:0x010203").to_raw();
        assert_eq!(r.type_, UB_ADDR_CNA24);
        assert_eq!(&r.addr[..4], &[1, 2, 3, 0]);
        let r = p("cna16:0x0102").to_raw();
        assert_eq!(&r.addr[..3], &[1, 2, 0]);
        let r = p("10.0.1.100").to_raw();
        assert_eq!(r.type_, UB_ADDR_IPV4);
        assert_eq!(&r.addr[..5], &[10, 0, 1, 100, 0]);
        let r = p("fe80::1").to_raw();
        assert_eq!(r.type_, UB_ADDR_IPV6);
        assert_eq!(r.addr[0], 0xfe);
        assert_eq!(r.addr[15], 1);
    }

    #[test]
    fn raw_round_trips_and_refuses_garbage() {
        for s in ["cna16:0x0100", "cna24:0x010203", "10.0.1.100", "fe80::1"] {
            let a = p(s);
            assert_eq!(a.to_string(), s);
            assert_eq!(Addr::from_raw(&a.to_raw()), Ok(Some(a)));
        }
        assert_eq!(Addr::from_raw(&UbAddr::default()), Ok(None));
        let mut r = p("cna16:0x0100").to_raw();
        r.addr[2] = 1;
        assert_eq!(Addr::from_raw(&r), Err(AddrError::BadRaw(UB_ADDR_CNA16)));
        let mut r = p("10.0.0.1").to_raw();
        r.reserved[1] = 1;
        assert!(Addr::from_raw(&r).is_err());
        r = UbAddr {
            type_: 9,
            ..UbAddr::default()
        };
        assert_eq!(Addr::from_raw(&r), Err(AddrError::BadRaw(9)));
    }
}
