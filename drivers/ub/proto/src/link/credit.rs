// SPDX-License-Identifier: GPL-2.0
//! Credit-based flow control per VL (UB spec §4.6).
//!
//! [`TxCredits`] is the sender's view (credits it may spend), in exclusive
//! or sharing mode; [`RxCredits`] is the receiver's view (credits granted,
//! consumed and waiting to be returned).

use super::frame::MAX_VLS;

/// A credit accounting error (both need a reset by management).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreditError {
    /// Returned credits would exceed the initial value (flow-control
    /// overflow).
    ReturnOverflow,
    /// A packet arrived without credit for it (receive-buffer overflow).
    ReceiveOverflow,
}

/// Sender-side credit counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxCredits {
    sharing: bool,
    /// Exclusive mode: credits per VL. Sharing mode: reserved credits per VL.
    credits: [u32; MAX_VLS],
    /// Sharing mode: reserved portion configured per VL.
    reserve: [u32; MAX_VLS],
    /// Sharing mode: the SHARE_CRD pool.
    shared: u32,
    /// Initial credits per VL as received (exclusive) or in total (sharing).
    initial: [u32; MAX_VLS],
    initial_total: u32,
    /// Order in which returns top up reserved pools (sharing mode).
    order: [u8; MAX_VLS],
    /// Sharing mode: cells the reserves must leave in SHARE_CRD.
    keep_shared: u32,
}

impl Default for TxCredits {
    fn default() -> Self {
        Self::new(false, 0, [0; MAX_VLS], core::array::from_fn(|i| i as u8))
    }
}

impl TxCredits {
    /// Empty counters for the VLs in `vl_enable`. `reserve` and `order`
    /// only matter in sharing mode.
    pub fn new(
        sharing: bool,
        vl_enable: u16,
        reserve: [u16; MAX_VLS],
        order: [u8; MAX_VLS],
    ) -> Self {
        let mut r = reserve.map(u32::from);
        for (vl, slot) in r.iter_mut().enumerate() {
            if vl_enable & (1 << vl) == 0 {
                *slot = 0;
            }
        }
        Self {
            sharing,
            credits: [0; MAX_VLS],
            reserve: r,
            shared: 0,
            initial: [0; MAX_VLS],
            initial_total: 0,
            order,
            keep_shared: 0,
        }
    }

    /// Sharing mode: the reserves leave at least `cells` in SHARE_CRD
    /// (as far as the total allows). With `cells` the cost of the largest
    /// DLLDP, every enabled VL can send one whenever its credits are home:
    /// its reserve plus SHARE_CRD then covers it, whatever the reserves of
    /// the other VLs.
    pub const fn keep_shared(mut self, cells: u32) -> Self {
        self.keep_shared = cells;
        self
    }

    /// `true` in sharing mode.
    pub const fn sharing(&self) -> bool {
        self.sharing
    }

    /// Adds initial credits for `vl` (from a Crd_Ack with T=1).
    pub fn add_initial(&mut self, vl: usize, cells: u32) {
        if let Some(i) = self.initial.get_mut(vl) {
            *i = i.saturating_add(cells);
        }
        self.initial_total = self.initial_total.saturating_add(cells);
    }

    /// Ends credit initialisation: exclusive mode gives each VL its
    /// initial credits; sharing mode pools everything and carves out each
    /// VL's reserved portion (in the configured order, as far as the total
    /// minus [`TxCredits::keep_shared`] allows; a reserve cut short stays
    /// that size, so returns refill it only that far); the rest is
    /// SHARE_CRD.
    pub fn finish_init(&mut self) {
        if self.sharing {
            let mut left = self.initial_total.saturating_sub(self.keep_shared);
            let mut carved = 0u32;
            self.credits = [0; MAX_VLS];
            for &vl in &self.order {
                let vl = usize::from(vl);
                if let (Some(c), Some(r)) = (self.credits.get_mut(vl), self.reserve.get_mut(vl)) {
                    let take = (*r).min(left);
                    *c = take;
                    *r = take;
                    left -= take;
                    carved = carved.saturating_add(take);
                }
            }
            self.shared = self.initial_total.saturating_sub(carved);
        } else {
            self.credits = self.initial;
        }
    }

    /// Credits available to `vl` (shared pool included).
    pub fn available(&self, vl: usize) -> u32 {
        let own = self.credits.get(vl).copied().unwrap_or(0);
        if self.sharing {
            own.saturating_add(self.shared)
        } else {
            own
        }
    }

    /// SHARE_CRD (sharing mode).
    pub const fn shared(&self) -> u32 {
        self.shared
    }

    /// Spends `cost` cells on `vl` if available: shared credits first, then
    /// the VL's own.
    pub fn try_consume(&mut self, vl: usize, cost: u32) -> bool {
        if self.available(vl) < cost {
            return false;
        }
        let mut cost = cost;
        if self.sharing {
            let from_shared = cost.min(self.shared);
            self.shared -= from_shared;
            cost -= from_shared;
        }
        if let Some(c) = self.credits.get_mut(vl) {
            *c = c.saturating_sub(cost);
        }
        true
    }

    /// Takes back `cells` returned for `vl`. Sharing mode: reserved pools
    /// are topped up first in the configured order, the rest goes to
    /// SHARE_CRD.
    pub fn on_return(&mut self, vl: usize, cells: u32) -> Result<(), CreditError> {
        if self.sharing {
            if self.total().saturating_add(cells) > self.initial_total {
                return Err(CreditError::ReturnOverflow);
            }
            let mut left = cells;
            for &v in &self.order {
                let v = usize::from(v);
                if let (Some(c), Some(&r)) = (self.credits.get_mut(v), self.reserve.get(v)) {
                    let room = r.saturating_sub(*c).min(left);
                    *c += room;
                    left -= room;
                }
            }
            self.shared += left;
            Ok(())
        } else {
            let (Some(c), Some(&i)) = (self.credits.get_mut(vl), self.initial.get(vl)) else {
                return Err(CreditError::ReturnOverflow);
            };
            if c.saturating_add(cells) > i {
                return Err(CreditError::ReturnOverflow);
            }
            *c += cells;
            Ok(())
        }
    }

    /// Credits currently held, over all VLs.
    pub fn total(&self) -> u32 {
        self.credits
            .iter()
            .fold(self.shared, |a, &c| a.saturating_add(c))
    }

    /// Initial credits, over all VLs.
    pub const fn initial_total(&self) -> u32 {
        self.initial_total
    }

    /// `true` when every credit is back (quiescence check).
    pub fn is_full(&self) -> bool {
        if self.sharing {
            self.total() == self.initial_total
        } else {
            self.credits == self.initial
        }
    }
}

/// Receiver-side credit counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCredits {
    /// Cells granted to the peer per VL.
    granted: [u32; MAX_VLS],
    /// Cells the peer holds consumed and not yet returned, per VL.
    outstanding: [u32; MAX_VLS],
    /// Cells freed and waiting to be returned, per VL.
    to_return: [u32; MAX_VLS],
    /// The peer may send in sharing mode (checked against the total).
    sharing: bool,
}

impl RxCredits {
    /// Counters for `granted` cells per VL.
    pub const fn new(granted: [u32; MAX_VLS], sharing: bool) -> Self {
        Self {
            granted,
            outstanding: [0; MAX_VLS],
            to_return: [0; MAX_VLS],
            sharing,
        }
    }

    /// Cells granted per VL.
    pub const fn granted(&self) -> &[u32; MAX_VLS] {
        &self.granted
    }

    /// Accounts a received DLLDP of `cost` cells on `vl`.
    pub fn on_receive(&mut self, vl: usize, cost: u32) -> Result<(), CreditError> {
        let over = if self.sharing {
            // Sixteen u32s cannot overflow a u64, so the sums vectorise;
            // clamping them equals the saturating u32 sum of the terms.
            let used = sum_saturated(&self.outstanding);
            let total = sum_saturated(&self.granted);
            used.saturating_add(cost) > total
        } else {
            let used = self.outstanding.get(vl).copied().unwrap_or(0);
            let granted = self.granted.get(vl).copied().unwrap_or(0);
            used.saturating_add(cost) > granted
        };
        if over {
            return Err(CreditError::ReceiveOverflow);
        }
        if let Some(o) = self.outstanding.get_mut(vl) {
            *o += cost;
        }
        Ok(())
    }

    /// The upper layer freed `cells` of `vl`'s buffer: they become due for
    /// return.
    pub fn on_free(&mut self, vl: usize, cells: u32) {
        if let Some(t) = self.to_return.get_mut(vl) {
            *t = t.saturating_add(cells);
        }
    }

    /// Cells due for return on `vl`.
    pub fn pending(&self, vl: usize) -> u32 {
        self.to_return.get(vl).copied().unwrap_or(0)
    }

    /// Marks `cells` of `vl` as returned (sent in an LPH/LBH or Crd_Ack).
    pub fn returned(&mut self, vl: usize, cells: u32) {
        if let Some(t) = self.to_return.get_mut(vl) {
            *t = t.saturating_sub(cells);
        }
        if let Some(o) = self.outstanding.get_mut(vl) {
            *o = o.saturating_sub(cells);
        }
    }

    /// `true` when nothing is outstanding (quiescence check).
    pub fn is_idle(&self) -> bool {
        self.outstanding.iter().all(|&o| o == 0) && self.to_return.iter().all(|&t| t == 0)
    }
}

/// Splits `total` cells equally over `vls` VLs (VL0 takes the remainder),
/// each rounded down to a multiple of its Crd_Ack grain. This is the
/// initial-credit allocation policy of this implementation.
pub fn split_equally(total: u32, vls: usize, grain: &[u16; MAX_VLS]) -> [u32; MAX_VLS] {
    let mut out = [0u32; MAX_VLS];
    let n = vls.clamp(1, MAX_VLS) as u32;
    let each = total / n;
    let extra = total % n;
    for (vl, slot) in out.iter_mut().enumerate().take(n as usize) {
        let g = u32::from(grain.get(vl).copied().unwrap_or(1).max(1));
        let want = if vl == 0 { each + extra } else { each };
        *slot = want / g * g;
    }
    out
}

/// The sum of `cells` saturated at `u32::MAX`, as a saturating fold of
/// non-negative terms gives, computed without a dependency per term.
fn sum_saturated(cells: &[u32; MAX_VLS]) -> u32 {
    let sum = cells
        .iter()
        .fold(0u64, |a, &c| a.wrapping_add(u64::from(c)));
    u32::try_from(sum).unwrap_or(u32::MAX)
}
