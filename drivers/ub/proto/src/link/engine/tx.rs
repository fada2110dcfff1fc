// SPDX-License-Identifier: GPL-2.0
//! The transmit path of the link engine: which block goes out next
//! (retry sets, retransmission, control blocks, Crd_Acks, DLLDBs, NOBs)
//! and its encoding (§4.3, §4.6, §4.7, §4.3.3.8).

use core::ops::DerefMut;

use super::*;

impl<S: DerefMut<Target = [RetrySlot]>> Link<S> {
    /// Writes whole blocks into `out` (never a partial block) and returns
    /// the bytes written; 0 when there is nothing to send (the PHY then
    /// sends idle). `out` should hold at least [`MIN_TX_BUFFER`] bytes.
    pub fn poll_transmit(&mut self, now: u64, out: &mut [u8], src: &mut impl TxSource) -> usize {
        self.now = now;
        let mut done = 0;
        while let Some(rest) = out.get_mut(done..) {
            let n = self.next_block(now, rest, src);
            if n == 0 {
                break;
            }
            let flits = (n / FLIT_BYTES) as u32;
            self.counters.tx_flits = self.counters.tx_flits.wrapping_add(u64::from(flits));
            self.since_header = self.since_header.saturating_add(flits);
            self.since_ack = self.since_ack.saturating_add(flits);
            done += n;
        }
        done
    }

    fn count_tx_block(&mut self) {
        self.counters.tx_blocks = self.counters.tx_blocks.wrapping_add(1);
    }

    fn next_block(&mut self, now: u64, out: &mut [u8], src: &mut impl TxSource) -> usize {
        let req = self.req.state();
        if self.dll.state() == DllState::Disabled
            || self.mc.retraining()
            || matches!(req, RetryReqState::Retrain | RetryReqState::Error)
        {
            return 0;
        }
        if let Some(num_retry) = self.ack.set_owed() {
            let ack = ControlBlock::RetryAck(RetryAck {
                num_retry,
                num_free_buf: self.retry.num_free(),
                rd_ptr: self.retry.rd_ptr(),
                wr_ptr: self.retry.wr_ptr(),
            });
            let n = self.retry_set(&ack, out);
            if n > 0 {
                self.counters.retry_ack_sets = self.counters.retry_ack_sets.wrapping_add(1);
                self.ack.set_sent(self.retry.retransmitting(), self.tracer);
            }
            return n;
        }
        if req == RetryReqState::Req {
            let req = ControlBlock::RetryReq(RetryReq {
                rcv_ptr: self.req.rcv_ptr(),
                num_phy_reinit: self.req.num_phy_reinit(),
                num_retry: self.req.num_retry(),
            });
            let n = self.retry_set(&req, out);
            if n > 0 {
                self.req.set_sent(now, self.tracer);
                self.counters.retry_req_sets = self.counters.retry_req_sets.wrapping_add(1);
            }
            return n;
        }
        if self.retry.retransmitting() {
            let n = self.retry.retransmit(out);
            if n > 0 {
                self.count_tx_block();
                self.counters.tx_retransmitted_flits = self
                    .counters
                    .tx_retransmitted_flits
                    .wrapping_add((n / FLIT_BYTES) as u64);
                if !self.retry.retransmitting() {
                    self.ack.resent(self.tracer);
                }
            }
            return n;
        }
        self.ack.resent(self.tracer);
        self.lockout_blocked = false;
        self.out_full = false;
        // The Init Block goes out once the retry alignment is done.
        if matches!(self.init.step(), InitStep::Params { sent: false })
            && req == RetryReqState::Normal
        {
            return self.send_init(out);
        }
        let Some(neg) = self.neg else {
            return 0;
        };
        if self.mc.active() {
            return self.mode_change_tx(now, &neg, out, src);
        }
        if self.init.credit_init_done() && self.crd_ack_forced(&neg) {
            return self.send_crd_ack(&neg, out, false);
        }
        if let Some(cb) = self.pending_ctrl {
            let n = self.send_retried_ctrl(&cb, out);
            if n > 0 {
                self.pending_ctrl = None;
                return n;
            }
        }
        match self.dll.state() {
            DllState::ParamInit | DllState::Disabled => 0,
            DllState::CreditInit if !self.init.credit_init_done() => {
                self.send_crd_ack(&neg, out, true)
            }
            DllState::CreditInit => self.idle_crd_ack(&neg, out),
            DllState::Normal => {
                let n = self.send_data(now, &neg, out, src);
                if n > 0 || self.out_full {
                    // A block waits for room in `out`: that is not idle.
                    return n;
                }
                let n = self.idle_crd_ack(&neg, out);
                if n > 0 {
                    return n;
                }
                self.poke(out)
            }
        }
    }

    fn send_init(&mut self, out: &mut [u8]) -> usize {
        let n = self.send_retried_ctrl(&ControlBlock::Init(self.cfg.caps), out);
        if n > 0 {
            let granted = self.neg.map(|_| *self.rx_credits.granted());
            self.init.init_sent(granted, self.tracer);
            self.sync_dll();
        }
        n
    }

    /// Transmit side of the mode switch: finish the DLLDP in progress,
    /// send REQ, then only Crd_Acks; once the peer's REQ is in, flush the
    /// ACKs in a Crd_Ack, send ACK and stop.
    fn mode_change_tx(
        &mut self,
        now: u64,
        neg: &Negotiated,
        out: &mut [u8],
        src: &mut impl TxSource,
    ) -> usize {
        if self.tx_cur.is_some() {
            let n = self.send_data(now, neg, out, src);
            if n > 0 || self.out_full {
                return n;
            }
        } else {
            match self.mc.step() {
                ModeChange::Requesting { .. } => {
                    let n = self.send_retried_ctrl(&ControlBlock::BlockModeChg { ack: false }, out);
                    if n > 0 {
                        self.mc.req_sent(self.tracer);
                        return n;
                    }
                }
                ModeChange::AwaitingAck { .. } | ModeChange::Retraining { .. } => return 0,
                ModeChange::Flushing { .. } => {
                    // Everything owed, pure ACKs included, so the peer holds
                    // no DLLDP when the mode changes.
                    let n = self.send_crd_ack(neg, out, false);
                    if n > 0 {
                        self.mc.flushed(self.tracer);
                    }
                    return n;
                }
                ModeChange::SendingAck { .. } => {
                    let cb = ControlBlock::BlockModeChg { ack: true };
                    if !self.retry.fits(1) {
                        return 0;
                    }
                    let Ok(n) = cb.encode(self.cfg.mode, out) else {
                        return 0;
                    };
                    let _ = self.retry.push(out.get(..n).unwrap_or(&[]));
                    self.count_tx_block();
                    if let Some(mode) = self.mc.ack_sent(self.tracer) {
                        self.event(Event::ModeChangeRetrain(mode));
                    }
                    return n;
                }
                ModeChange::AwaitingReq { .. } | ModeChange::Idle => {}
            }
        }
        // Blocked (or waiting for the peer's REQ): only Crd_Acks, and the
        // lock-out poke so that a full retry buffer cannot stall the
        // handshake.
        if self.init.credit_init_done() && self.crd_ack_forced(neg) {
            return self.send_crd_ack(neg, out, false);
        }
        let n = self.idle_crd_ack(neg, out);
        if n > 0 {
            return n;
        }
        self.poke(out)
    }

    fn retry_set(&mut self, cb: &ControlBlock, out: &mut [u8]) -> usize {
        let Some(set) = out.get_mut(..RETRY_SET_FLITS * FLIT_BYTES) else {
            return 0;
        };
        let mut chunks = set.chunks_exact_mut(FLIT_BYTES);
        if let Some(first) = chunks.next() {
            let _ = ControlBlock::RetryIdle.encode(self.cfg.mode, first);
        }
        let mut one = [0u8; FLIT_BYTES];
        let _ = cb.encode(self.cfg.mode, &mut one);
        for c in chunks {
            c.copy_from_slice(&one);
        }
        self.counters.tx_blocks = self.counters.tx_blocks.wrapping_add(RETRY_SET_FLITS as u64);
        RETRY_SET_FLITS * FLIT_BYTES
    }

    /// Lock-out avoidance, second half: blocked at the threshold with
    /// nothing the peer would acknowledge on its own (the peer never
    /// acknowledges ACK-only Crd_Acks by themselves) and no ACK for half
    /// the WAIT timeout (longer than a round trip), send one NOB from the
    /// reserve. The peer then owes a real ACK and answers with a Crd_Ack
    /// that frees everything. At most one poke per ACK received.
    fn poke(&mut self, out: &mut [u8]) -> usize {
        let due = self.poke_deadline().is_some_and(|d| self.now >= d);
        if !due || !self.retry.fits(3) {
            return 0;
        }
        let Ok(n) = ControlBlock::Nob.encode(self.cfg.mode, out) else {
            return 0;
        };
        let _ = self.retry.push(out.get(..n).unwrap_or(&[]));
        self.poke_armed = false;
        self.count_tx_block();
        self.counters.tx_nobs = self.counters.tx_nobs.wrapping_add(1);
        n
    }

    /// Sends a retried DLLCB if it fits above the lock-out reserve.
    fn send_retried_ctrl(&mut self, cb: &ControlBlock, out: &mut [u8]) -> usize {
        let flits = cb.flits();
        if !self
            .retry
            .fits(flits + usize::from(self.cfg.lockout_threshold))
        {
            self.lockout_blocked = true;
            self.counters.lockouts = self.counters.lockouts.wrapping_add(1);
            return 0;
        }
        let Ok(n) = cb.encode(self.cfg.mode, out) else {
            return 0;
        };
        let _ = self.retry.push(out.get(..n).unwrap_or(&[]));
        self.count_tx_block();
        if matches!(cb, ControlBlock::Nob) {
            self.counters.tx_nobs = self.counters.tx_nobs.wrapping_add(1);
        }
        n
    }

    fn crd_ack_forced(&mut self, neg: &Negotiated) -> bool {
        if self.credit_return_forced() {
            return true;
        }
        if self.credit_return_deadline().is_some_and(|d| self.now >= d) {
            self.counters.credit_return_delays = self.counters.credit_return_delays.wrapping_add(1);
            return true;
        }
        if self.substantive_acks() == 0 || self.owed_acks < u32::from(neg.ctrl_ack_grain) {
            return false;
        }
        let threshold = u32::from(self.cfg.ack_threshold)
            .min(u32::from(neg.peer_retry_buf_depth) / 2)
            .max(1);
        self.owed_acks >= threshold || self.since_ack >= self.cfg.ack_delay_flits
    }

    fn idle_crd_ack(&mut self, neg: &Negotiated, out: &mut [u8]) -> usize {
        let credits = (0..MAX_VLS).any(|vl| {
            let k = u32::from(neg.ctrl_credit_grain.get(vl).copied().unwrap_or(1));
            self.rx_credits.pending(vl) >= k.max(1)
        });
        let acks = self.substantive_acks() > 0 && self.owed_acks >= u32::from(neg.ctrl_ack_grain);
        if credits || acks {
            self.send_crd_ack(neg, out, false)
        } else {
            0
        }
    }

    /// Sends a Crd_Ack returning every owed ACK and as many credits as fit;
    /// `initial` sends the next initial-credit block instead.
    fn send_crd_ack(&mut self, neg: &Negotiated, out: &mut [u8], initial: bool) -> usize {
        let reserve = if initial {
            usize::from(self.cfg.lockout_threshold)
        } else {
            0
        };
        if !self.retry.fits(2 + reserve) || out.len() < 2 * FLIT_BYTES {
            return 0;
        }
        let grain = u32::from(neg.ctrl_ack_grain.max(1));
        let ack_num = (self.owed_acks / grain).min(u32::from(u16::MAX));
        let mut crd_num = [0u8; MAX_VLS];
        let mut done = false;
        if initial {
            let Some((counts, last)) = self.init.take_initial(&neg.ctrl_credit_grain, self.tracer)
            else {
                return 0;
            };
            crd_num = counts;
            done = last;
        } else {
            let mut still_due = false;
            for (vl, slot) in crd_num.iter_mut().enumerate() {
                let k = u32::from(neg.ctrl_credit_grain.get(vl).copied().unwrap_or(1).max(1));
                let pending = self.rx_credits.pending(vl);
                // Most VLs owe less than a grain: no division for them.
                let n = if pending < k {
                    0
                } else {
                    (pending / k).min(63)
                };
                self.rx_credits.returned(vl, n * k);
                self.counters.credits_returned = self
                    .counters
                    .credits_returned
                    .wrapping_add(u64::from(n * k));
                *slot = n as u8;
                still_due |= pending - n * k >= k;
            }
            if !still_due {
                // Nothing returnable is left: the credit-return delay stops.
                self.credit_due_since = None;
            }
        }
        let cb = ControlBlock::CrdAck(CrdAck {
            initial,
            done,
            ack_num: ack_num as u16,
            crd_num,
        });
        let Ok(n) = cb.encode(self.cfg.mode, out) else {
            return 0;
        };
        let _ = self.retry.push(out.get(..n).unwrap_or(&[]));
        self.returned_acks(ack_num * grain);
        self.count_tx_block();
        self.counters.tx_crd_acks = self.counters.tx_crd_acks.wrapping_add(1);
        if done {
            self.credit_init_progress();
        }
        n
    }

    fn returned_acks(&mut self, flits: u32) {
        if flits == 0 {
            return;
        }
        self.owed_acks = self.owed_acks.saturating_sub(flits);
        self.owed_pure = self.owed_pure.min(self.owed_acks);
        self.since_ack = 0;
    }

    /// Picks the VL of the next DLLDP (round robin over ready VLs with
    /// credit) and consumes its credit; or continues the current DLLDP.
    fn send_data(
        &mut self,
        now: u64,
        neg: &Negotiated,
        out: &mut [u8],
        src: &mut impl TxSource,
    ) -> usize {
        // `cur` stays in registers: reading it back from `self.tx_cur`
        // right after storing it stalls on store forwarding.
        let mut cur = match self.tx_cur {
            Some(cur) => cur,
            None => {
                let ready = src.ready() & neg.vl_enable;
                if ready == 0 {
                    self.stalled = false;
                    self.stalled_vls = 0;
                    self.credit_deadline = None;
                    return 0;
                }
                let interval = u32::from(neg.peer_packet_min_interval);
                if self.since_header < interval {
                    return self.send_retried_ctrl(&ControlBlock::Nob, out);
                }
                let Some(cur) = self.pick_packet(now, neg, ready, src) else {
                    return 0;
                };
                self.tx_cur = Some(cur);
                cur
            }
        };
        let index = usize::from(cur.next);
        let flits = cur.layout.block_flits(index);
        if !self
            .retry
            .fits(flits + usize::from(self.cfg.lockout_threshold))
        {
            self.lockout_blocked = true;
            self.counters.lockouts = self.counters.lockouts.wrapping_add(1);
            return 0;
        }
        if out.len() < flits * FLIT_BYTES {
            self.out_full = true;
            return 0;
        }
        let Some(pkt) = src.head(cur.vl) else {
            // The source withdrew the packet: nothing more can be sent of
            // it (only possible with a misbehaving source).
            self.tx_cur = None;
            return 0;
        };
        let ack = self.owed_acks >= u32::from(neg.data_ack_grain.max(1));
        let (crd, crd_vl) = self.pick_credit_return(neg);
        let lbh = Lbh {
            crd,
            ack,
            crd_vl,
            vl: cur.vl,
            cfg: pkt.cfg,
        };
        let Ok(n) = encode_dlldb(
            &cur.layout,
            index,
            lbh,
            pkt.rt,
            pkt.payload,
            pkt.error_flag,
            out,
        ) else {
            return 0;
        };
        if ack {
            self.returned_acks(u32::from(neg.data_ack_grain));
        }
        if crd {
            let g = neg.data_credit_grain.get(usize::from(crd_vl)).copied();
            let cells = u32::from(g.unwrap_or(0));
            self.rx_credits.returned(usize::from(crd_vl), cells);
            self.counters.credits_returned = self
                .counters
                .credits_returned
                .wrapping_add(u64::from(cells));
            self.credits_returned();
        }
        let _ = self.retry.push(out.get(..n).unwrap_or(&[]));
        self.count_tx_block();
        if index == 0 {
            self.since_header = 0;
            self.counters.tx_dlldps = self.counters.tx_dlldps.wrapping_add(1);
            self.counters.tx_payload_bytes = self
                .counters
                .tx_payload_bytes
                .wrapping_add(u64::from(cur.layout.payload_len));
        }
        cur.next += 1;
        if cur.next >= cur.layout.blocks {
            self.tx_cur = None;
            src.pop(cur.vl);
        } else {
            self.tx_cur = Some(cur);
        }
        n
    }

    fn pick_packet(
        &mut self,
        now: u64,
        neg: &Negotiated,
        ready: u16,
        src: &mut impl TxSource,
    ) -> Option<TxCur> {
        let mut starved = false;
        // The ready VLs in round-robin order from `vl_rr`: bit i of
        // `order` is VL (vl_rr + i) mod 16. Visiting only the set bits
        // skips the idle VLs instead of testing all sixteen per packet.
        let rr = self.vl_rr % MAX_VLS as u8;
        let mut order = ready.rotate_right(u32::from(rr));
        while order != 0 {
            let i = order.trailing_zeros() as u8;
            order &= order - 1;
            let vl = rr.wrapping_add(i) % MAX_VLS as u8;
            let Some(pkt) = src.head(vl) else {
                continue;
            };
            let len = pkt.payload.len();
            // A layout is a function of (mode, length) only, and packets
            // of one length often follow each other: reuse the last one.
            let layout = match self.tx_layout {
                Some(l) if l.mode == self.cfg.mode && usize::from(l.payload_len) == len => Ok(l),
                _ => super::super::frame::Plength::encode(self.cfg.mode, len).map(|(_, l)| l),
            };
            let layout = match layout {
                Ok(l) if is_dlldp_cfg(pkt.cfg) && pkt.rt < 4 => {
                    self.tx_layout = Some(l);
                    l
                }
                _ => {
                    self.counters.tx_rejected = self.counters.tx_rejected.wrapping_add(1);
                    src.pop(vl);
                    continue;
                }
            };
            let cost = layout.cost(usize::from(neg.cell_flits)) as u32;
            if !self.tx_credits.try_consume(usize::from(vl), cost) {
                starved = true;
                let bit = 1u16 << (vl % MAX_VLS as u8);
                if self.stalled_vls & bit == 0 {
                    self.stalled_vls |= bit;
                    if let Some(c) = self.counters.vl_credit_stalls.get_mut(usize::from(vl)) {
                        *c = c.wrapping_add(1);
                    }
                }
                continue;
            }
            self.stalled_vls &= !(1u16 << (vl % MAX_VLS as u8));
            self.counters.credits_spent = self.counters.credits_spent.wrapping_add(u64::from(cost));
            self.vl_rr = (vl + 1) % MAX_VLS as u8;
            self.stalled = false;
            self.credit_deadline = None;
            return Some(TxCur {
                vl,
                layout,
                next: 0,
            });
        }
        if starved {
            if !self.stalled {
                self.stalled = true;
                self.counters.credit_stalls = self.counters.credit_stalls.wrapping_add(1);
            }
            if self.credit_deadline.is_none() {
                self.credit_deadline = Some(now.saturating_add(self.cfg.credit_timeout_ns));
            }
        }
        None
    }

    fn pick_credit_return(&mut self, neg: &Negotiated) -> (bool, u8) {
        for i in 0..MAX_VLS as u8 {
            let vl = (self.crd_rr + i) % MAX_VLS as u8;
            let m = u32::from(
                neg.data_credit_grain
                    .get(usize::from(vl))
                    .copied()
                    .unwrap_or(0),
            );
            if m > 0 && self.rx_credits.pending(usize::from(vl)) >= m {
                self.crd_rr = (vl + 1) % MAX_VLS as u8;
                return (true, vl);
            }
        }
        (false, 0)
    }
}
