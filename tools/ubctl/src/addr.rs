// SPDX-License-Identifier: GPL-2.0
//! Network addresses as ubctl's command line writes them:
//! `cna16:0x0100`, `cna24:0x000100`, an IPv4 or an IPv6 literal.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use crate::attr::Attr;
use crate::spec::{addr, addr_type};

/// A UB network address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Address {
    /// A 16-bit CNA.
    Cna16(u16),
    /// A 24-bit CNA (held in a u32, at most 0xffffff).
    Cna24(u32),
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address.
    V6(Ipv6Addr),
}

/// Largest 24-bit CNA.
pub const CNA24_MAX: u32 = 0x00ff_ffff;

impl Address {
    /// Bits in the address, the largest prefix length it takes.
    pub fn bits(self) -> u32 {
        match self {
            Address::Cna16(_) => 16,
            Address::Cna24(_) => 24,
            Address::V4(_) => 32,
            Address::V6(_) => 128,
        }
    }

    /// The members of an `addr` nest for this address.
    pub fn attrs(self) -> Vec<Attr> {
        match self {
            Address::Cna16(c) => vec![
                Attr::u32(addr::TYPE, addr_type::CNA16),
                Attr::u32(addr::CNA, u32::from(c)),
            ],
            Address::Cna24(c) => vec![
                Attr::u32(addr::TYPE, addr_type::CNA24),
                Attr::u32(addr::CNA, c),
            ],
            Address::V4(a) => vec![
                Attr::u32(addr::TYPE, addr_type::IPV4),
                Attr::bytes(addr::IPV4, &a.octets()),
            ],
            Address::V6(a) => vec![
                Attr::u32(addr::TYPE, addr_type::IPV6),
                Attr::bytes(addr::IPV6, &a.octets()),
            ],
        }
    }
}

fn parse_num(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl FromStr for Address {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(v) = s.strip_prefix("cna16:") {
            let n = parse_num(v).ok_or_else(|| format!("'{v}' is not a number (cna16:0x0100)"))?;
            let c = u16::try_from(n)
                .map_err(|_| format!("CNA {v} does not fit 16 bits (max 0xffff)"))?;
            return Ok(Address::Cna16(c));
        }
        if let Some(v) = s.strip_prefix("cna24:") {
            let n =
                parse_num(v).ok_or_else(|| format!("'{v}' is not a number (cna24:0x000100)"))?;
            if n > CNA24_MAX {
                return Err(format!("CNA {v} does not fit 24 bits (max 0xffffff)"));
            }
            return Ok(Address::Cna24(n));
        }
        match IpAddr::from_str(s) {
            Ok(IpAddr::V4(a)) => Ok(Address::V4(a)),
            Ok(IpAddr::V6(a)) => Ok(Address::V6(a)),
            Err(_) => Err(format!(
                "'{s}' is not an address (cna16:0x0100, cna24:0x000100, an IPv4 or an IPv6 address)"
            )),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Cna16(c) => write!(f, "cna16:{c:#06x}"),
            Address::Cna24(c) => write!(f, "cna24:{c:#08x}"),
            Address::V4(a) => write!(f, "{a}"),
            Address::V6(a) => write!(f, "{a}"),
        }
    }
}

/// A route's destination: `ADDR/LEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// The destination address.
    pub addr: Address,
    /// Prefix length, at most the address's bits.
    pub len: u32,
}

impl FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s
            .rsplit_once('/')
            .ok_or_else(|| format!("'{s}' is not a prefix (ADDR/LEN, e.g. 10.0.0.0/24)"))?;
        let addr: Address = a.parse()?;
        let len: u32 = l
            .parse()
            .map_err(|_| format!("prefix length '{l}' is not a number"))?;
        if len > addr.bits() {
            return Err(format!(
                "prefix length {len} is longer than the address ({} bits)",
                addr.bits()
            ));
        }
        Ok(Prefix { addr, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_form() {
        assert_eq!("cna16:0x0100".parse(), Ok(Address::Cna16(0x100)));
        assert_eq!("cna24:0x000100".parse(), Ok(Address::Cna24(0x100)));
        assert_eq!("cna24:256".parse(), Ok(Address::Cna24(256)));
        assert_eq!(
            "10.0.0.1".parse(),
            Ok(Address::V4(Ipv4Addr::new(10, 0, 0, 1)))
        );
        assert_eq!(
            "fd00::1".parse(),
            Ok(Address::V6(
                "fd00::1".parse().unwrap_or(Ipv6Addr::UNSPECIFIED)
            ))
        );
    }

    #[test]
    fn refuses_bad_addresses() {
        assert!("cna16:0x10000"
            .parse::<Address>()
            .unwrap_err()
            .contains("16 bits"));
        assert!("cna24:0x1000000"
            .parse::<Address>()
            .unwrap_err()
            .contains("24 bits"));
        assert!("cna16:zz"
            .parse::<Address>()
            .unwrap_err()
            .contains("not a number"));
        assert!("10.0.0.256"
            .parse::<Address>()
            .unwrap_err()
            .contains("not an address"));
        assert!("10.0.0.0/33"
            .parse::<Prefix>()
            .unwrap_err()
            .contains("longer"));
        assert!("cna16:1/17"
            .parse::<Prefix>()
            .unwrap_err()
            .contains("longer"));
        assert!("10.0.0.0"
            .parse::<Prefix>()
            .unwrap_err()
            .contains("ADDR/LEN"));
    }

    #[test]
    fn display_round_trips() {
        for s in ["cna16:0x0100", "cna24:0x000100", "10.0.0.1", "fd00::1"] {
            let a: Address = s.parse().unwrap_or(Address::Cna16(0));
            assert_eq!(a.to_string(), s);
        }
    }
}
