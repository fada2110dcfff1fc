// SPDX-License-Identifier: GPL-2.0
//! TP Channel Groups (UB spec §6.5).
//!
//! A group presents several TP channels between one pair of UBPUs as one
//! entity and spreads *transactions* (never the packets of one
//! transaction) over them. A channel belongs to at most one group. Members
//! are told apart on the network by their UDP source port (IP format) or
//! LBF (CNA formats), which per-flow hashing then maps to different paths.

/// Most members of a group (as in openEuler's `UBCORE_MAX_TP_CNT_IN_GRP`).
pub const MAX_MEMBERS: u32 = 32;

/// How a group picks the member for the next transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpgPolicy {
    /// Members in turn.
    RoundRobin,
    /// The member with the least outstanding work (ties: lowest index).
    LeastLoaded,
}

/// A group of `members` channels (indices 0..members).
#[derive(Clone, Copy, Debug)]
pub struct TpGroup {
    members: u32,
    policy: TpgPolicy,
    next: u32,
}

impl TpGroup {
    /// A group of 1..=32 members.
    pub const fn new(members: u32, policy: TpgPolicy) -> Option<Self> {
        if members == 0 || members > MAX_MEMBERS {
            None
        } else {
            Some(Self {
                members,
                policy,
                next: 0,
            })
        }
    }

    /// Number of members.
    pub const fn members(&self) -> u32 {
        self.members
    }

    /// The member for the next transaction. `load(i)` reports member `i`'s
    /// outstanding work (e.g. unacknowledged bytes); `usable(i)` excludes
    /// members in error.
    pub fn select(
        &mut self,
        load: impl Fn(u32) -> u64,
        usable: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        match self.policy {
            TpgPolicy::RoundRobin => {
                for k in 0..self.members {
                    let i = (self.next + k) % self.members;
                    if usable(i) {
                        self.next = (i + 1) % self.members;
                        return Some(i);
                    }
                }
                None
            }
            TpgPolicy::LeastLoaded => (0..self.members)
                .filter(|&i| usable(i))
                .min_by_key(|&i| (load(i), i)),
        }
    }
}

/// Why a channel cannot join a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MembershipError {
    /// The channel already belongs to a group.
    AlreadyMember,
    /// No such channel.
    NoChannel,
}

/// Channel → group ownership over caller storage (one entry per channel),
/// enforcing that a channel belongs to at most one group.
#[derive(Debug)]
pub struct Membership<'a> {
    owner: &'a mut [Option<u16>],
}

impl<'a> Membership<'a> {
    /// Ownership table over `owner` (all `None` initially).
    pub fn new(owner: &'a mut [Option<u16>]) -> Self {
        owner.fill(None);
        Self { owner }
    }

    /// Puts `channel` into `group`.
    pub fn join(&mut self, channel: usize, group: u16) -> Result<(), MembershipError> {
        let o = self
            .owner
            .get_mut(channel)
            .ok_or(MembershipError::NoChannel)?;
        if o.is_some() {
            return Err(MembershipError::AlreadyMember);
        }
        *o = Some(group);
        Ok(())
    }

    /// Removes `channel` from its group.
    pub fn leave(&mut self, channel: usize) {
        if let Some(o) = self.owner.get_mut(channel) {
            *o = None;
        }
    }

    /// The group of `channel`.
    pub fn group_of(&self, channel: usize) -> Option<u16> {
        self.owner.get(channel).copied().flatten()
    }
}

/// UDP source port of member `index` of a group whose ports start at
/// `base` (wrapping within the dynamic range 49152..=65535).
pub const fn member_sport(base: u16, index: u32) -> u16 {
    let span = 16384u32;
    let b = (base as u32).saturating_sub(49152) % span;
    (49152 + (b + index % span) % span) as u16
}

/// LBF of member `index` (CNA formats).
pub const fn member_lbf(base: u8, index: u32) -> u8 {
    base.wrapping_add(index as u8)
}

/// Per-packet spraying: the UDP source port for packet number `counter`
/// of a channel whose ports are `base .. base + 2^range_log2`.
pub const fn spray_sport(base: u16, range_log2: u8, counter: u32) -> u16 {
    let r = if range_log2 > 14 { 14 } else { range_log2 };
    let off = counter & ((1u32 << r) - 1);
    member_sport(base, off)
}
