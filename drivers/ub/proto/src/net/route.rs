// SPDX-License-Identifier: GPL-2.0
//! Routing-table lookup and multipath selection (UB spec §5.3.2).
//!
//! The table structure is implementation-defined; ours is a longest-prefix
//! match over caller-provided entries (addresses held as `u128`, so CNAs,
//! IPv4 and IPv6 share one type), each entry naming a set of egress ports
//! (a bitmask of up to 64 ports) for all paths and a subset for the
//! shortest paths. [`select_port`] applies RT: per-flow picks a port from a
//! hash of the flow fields, per-packet sprays with a caller counter.

/// One route: destinations matching `prefix`/`prefix_len` leave by one of
/// the ports in `ports`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteEntry {
    /// Destination prefix, right-aligned in the address width.
    pub prefix: u128,
    /// Significant high bits of the prefix within `width` bits.
    pub prefix_len: u8,
    /// Address width in bits (16 or 24 for CNAs, 32 or 128 for IP).
    pub width: u8,
    /// Egress ports over all available paths (bit n = port n).
    pub ports: u64,
    /// Egress ports on shortest paths (a subset of `ports`).
    pub shortest: u64,
}

impl RouteEntry {
    /// Whether `addr` (in the same width) matches this entry.
    pub fn matches(&self, addr: u128, width: u8) -> bool {
        if width != self.width || self.prefix_len > self.width {
            return false;
        }
        let drop = u32::from(self.width.saturating_sub(self.prefix_len));
        addr.checked_shr(drop).unwrap_or(0) == self.prefix.checked_shr(drop).unwrap_or(0)
    }
}

/// A routing table over caller-provided entries.
#[derive(Debug)]
pub struct RouteTable<'a> {
    entries: &'a [RouteEntry],
}

impl<'a> RouteTable<'a> {
    /// A table over `entries` (any order).
    pub const fn new(entries: &'a [RouteEntry]) -> Self {
        Self { entries }
    }

    /// Longest-prefix match of `addr` (`width` bits).
    pub fn lookup(&self, addr: u128, width: u8) -> Option<&'a RouteEntry> {
        let mut best: Option<&'a RouteEntry> = None;
        for e in self.entries {
            if e.matches(addr, width) && best.is_none_or(|b| e.prefix_len > b.prefix_len) {
                best = Some(e);
            }
        }
        best
    }
}

/// The flow fields hashed for per-flow load balancing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    /// Source address (CNA or IP).
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// LBF (CNA formats) or UDP source port (IP format).
    pub lb: u16,
    /// Service level.
    pub sl: u8,
}

/// 64-bit finaliser of MurmurHash3.
const fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

impl FlowKey {
    /// A well-mixed 32-bit hash of the key, seeded so that different nodes
    /// can decorrelate their choices (avoids polarisation).
    pub const fn hash(&self, seed: u64) -> u32 {
        let mut h = fmix64(seed ^ 0x9e37_79b9_7f4a_7c15);
        h = fmix64(h ^ (self.src as u64));
        h = fmix64(h ^ ((self.src >> 64) as u64));
        h = fmix64(h ^ (self.dst as u64));
        h = fmix64(h ^ ((self.dst >> 64) as u64));
        h = fmix64(h ^ ((self.lb as u64) << 8) ^ (self.sl as u64));
        (h ^ (h >> 32)) as u32
    }
}

/// Picks an egress port of `entry` for routing type `rt`: among the
/// shortest-path ports if RT\[1\] (falling back to all ports if there are
/// none), by `flow_hash` if per-flow, by `spray` (a per-packet counter or
/// random number) if per-packet.
pub fn select_port(
    entry: &RouteEntry,
    rt: super::RoutingType,
    flow_hash: u32,
    spray: u32,
) -> Option<u8> {
    let set = if rt.shortest_only && entry.shortest != 0 {
        entry.shortest & entry.ports
    } else {
        entry.ports
    };
    let count = set.count_ones();
    if count == 0 {
        return None;
    }
    let pick = if rt.per_packet { spray } else { flow_hash } % count;
    nth_set_bit(set, pick)
}

/// Index of the `n`-th (from 0) set bit of `set`.
fn nth_set_bit(mut set: u64, n: u32) -> Option<u8> {
    let mut i = 0;
    while set != 0 {
        let bit = set.trailing_zeros();
        if i == n {
            return u8::try_from(bit).ok();
        }
        set &= set.wrapping_sub(1);
        i += 1;
    }
    None
}
