// SPDX-License-Identifier: GPL-2.0
//! The receive path of the link engine: flits in, blocks parsed and
//! checked, DLLDP pieces delivered, DLLCBs acted on (§4.3, §4.6, §4.7).
//! The state machines' decisions are theirs; this is the data path that
//! feeds them.

use core::ops::DerefMut;

use super::*;

impl<S: DerefMut<Target = [RetrySlot]>> Link<S> {
    /// Feeds received bytes (any chunking; flits may span calls).
    pub fn handle_receive(&mut self, now: u64, data: &[u8], sink: &mut impl RxSink) {
        self.now = now;
        let mut data = data;
        // Complete a partial flit first.
        if self.rx_partial_len > 0 {
            let need = FLIT_BYTES - self.rx_partial_len;
            let take = need.min(data.len());
            let (head, rest) = data.split_at(take);
            if let Some(dst) = self
                .rx_partial
                .get_mut(self.rx_partial_len..self.rx_partial_len + take)
            {
                dst.copy_from_slice(head);
            }
            self.rx_partial_len += take;
            data = rest;
            if self.rx_partial_len < FLIT_BYTES {
                return;
            }
            self.rx_partial_len = 0;
            let flit = self.rx_partial;
            self.on_flit(now, &flit, sink);
        }
        while data.len() >= FLIT_BYTES {
            // Fast path: a whole block at a block boundary.
            if self.rx_have == 0 && self.req.is_receiving() && !self.mc.retraining() {
                if let Ok((flits, hdr)) = self.parse_header(data) {
                    let bytes = flits * FLIT_BYTES;
                    if let Some((block, rest)) = data.split_at_checked(bytes) {
                        self.counters.rx_flits = self.counters.rx_flits.wrapping_add(flits as u64);
                        if self.dll.state() == DllState::Disabled {
                            self.counters.rx_discarded_flits =
                                self.counters.rx_discarded_flits.wrapping_add(flits as u64);
                        } else {
                            self.process_block(now, block, hdr, sink);
                        }
                        data = rest;
                        continue;
                    }
                }
            }
            let Some((flit, rest)) = data.split_first_chunk::<FLIT_BYTES>() else {
                break;
            };
            self.on_flit(now, flit, sink);
            data = rest;
        }
        if let Some(dst) = self.rx_partial.get_mut(..data.len()) {
            dst.copy_from_slice(data);
            self.rx_partial_len = data.len();
        }
    }

    /// Position in the received flit stream, flits the PHY reported lost
    /// included: retry sets are recognised by where their 32 blocks lie.
    const fn rx_position(&self) -> u64 {
        self.counters
            .rx_flits
            .wrapping_add(self.counters.rx_fec_errors)
    }

    fn on_flit(&mut self, now: u64, flit: &[u8; FLIT_BYTES], sink: &mut impl RxSink) {
        self.counters.rx_flits = self.counters.rx_flits.wrapping_add(1);
        if self.dll.state() == DllState::Disabled || self.mc.retraining() {
            self.discard(1);
            return;
        }
        match self.req.state() {
            RetryReqState::Retrain | RetryReqState::Error => self.discard(1),
            RetryReqState::Req | RetryReqState::Wait => {
                // Discard until a Retry_Ack_Set: only single-flit retry
                // blocks are recognised, each on its own CRC.
                match ControlBlock::decode(self.cfg.mode, flit) {
                    Ok((cb, _)) if is_retry_block(&cb) => {
                        self.counters.rx_blocks = self.counters.rx_blocks.wrapping_add(1);
                        self.on_retry_block(now, &cb, flit);
                    }
                    _ => self.discard(1),
                }
            }
            RetryReqState::Normal => {
                let at = self.rx_position();
                let max_damage = match self.cfg.mode {
                    Mode::Crc => ACK_COPY_MAX_DAMAGE,
                    Mode::NonCrc => 0,
                };
                if self.rx_have == 0 && self.req.consume_ack_tail(flit, at, max_damage, self.tracer)
                {
                    self.discard(1);
                    return;
                }
                if self.rx_have == 0 {
                    match self.parse_header(flit) {
                        Ok((flits, hdr)) => {
                            self.rx_expect = flits;
                            self.rx_hdr = hdr;
                            self.rx_block_deadline = now.saturating_add(self.cfg.wait_timeout_ns);
                        }
                        Err(e) => {
                            self.count_frame_error(e);
                            self.block_error(now);
                            return;
                        }
                    }
                }
                if let Some(dst) = self
                    .rx_block
                    .get_mut(self.rx_have * FLIT_BYTES..(self.rx_have + 1) * FLIT_BYTES)
                {
                    dst.copy_from_slice(flit);
                }
                self.rx_have += 1;
                if self.rx_have >= self.rx_expect {
                    let n = self.rx_have * FLIT_BYTES;
                    self.rx_have = 0;
                    let block = self.rx_block;
                    let hdr = self.rx_hdr;
                    self.process_block(now, block.get(..n).unwrap_or(&[]), hdr, sink);
                }
            }
        }
    }

    fn discard(&mut self, flits: u64) {
        self.counters.rx_discarded_flits = self.counters.rx_discarded_flits.wrapping_add(flits);
    }

    fn count_frame_error(&mut self, e: FrameError) {
        if e == FrameError::Crc {
            self.counters.rx_crc_errors = self.counters.rx_crc_errors.wrapping_add(1);
        } else {
            self.counters.rx_malformed = self.counters.rx_malformed.wrapping_add(1);
        }
    }

    /// Length in flits and kind of the block starting with `first`.
    fn parse_header(&self, first: &[u8]) -> Result<(usize, RxHdr), FrameError> {
        let cfg = header_cfg(first).ok_or(FrameError::Truncated)?;
        if cfg == 0 {
            let lch = Lch::decode(first)?;
            let kind = CtrlKind::from_codes(lch.ctrl, lch.sub_ctrl).ok_or(FrameError::BadLch)?;
            let (lo, hi) = kind.flit_range();
            if lch.flits < lo || lch.flits > hi {
                return Err(FrameError::BadCtrlLength);
            }
            return Ok((usize::from(lch.flits), RxHdr::Ctrl));
        }
        if let Some(pkt) = self.rx_pkt {
            let lbh = Lbh::decode(first)?;
            let lph = Lph {
                base: lbh,
                rt: pkt.rt,
                plength: super::super::frame::Plength::from_raw(0),
            };
            let index = pkt.next;
            return Ok((
                pkt.layout.block_flits(usize::from(index)),
                RxHdr::Data {
                    layout: pkt.layout,
                    index,
                    lph,
                },
            ));
        }
        let lph = Lph::decode(first)?;
        let layout = lph.plength.decode(self.cfg.mode)?;
        Ok((
            layout.block_flits(0),
            RxHdr::Data {
                layout,
                index: 0,
                lph,
            },
        ))
    }

    fn process_block(&mut self, now: u64, block: &[u8], hdr: RxHdr, sink: &mut impl RxSink) {
        match hdr {
            // Matched by reference: a ControlBlock is 136 bytes, and moving
            // it out of the Result cost a memcpy per block.
            RxHdr::Ctrl => match &ControlBlock::decode(self.cfg.mode, block) {
                Ok((cb, _)) => {
                    self.counters.rx_blocks = self.counters.rx_blocks.wrapping_add(1);
                    self.on_control(now, cb, block, sink);
                }
                Err(e) => {
                    self.count_frame_error(*e);
                    self.block_error(now);
                }
            },
            RxHdr::Data { layout, index, lph } => {
                let last = usize::from(index) + 1 == usize::from(layout.blocks);
                match check_block(self.cfg.mode, block, last) {
                    Ok(error_flag) => {
                        self.counters.rx_blocks = self.counters.rx_blocks.wrapping_add(1);
                        self.on_dlldb(block, &layout, index, &lph, error_flag, sink);
                    }
                    Err(e) => {
                        self.count_frame_error(e);
                        self.block_error(now);
                    }
                }
            }
        }
    }

    fn on_dlldb(
        &mut self,
        block: &[u8],
        layout: &Layout,
        index: u8,
        lph: &Lph,
        error_flag: bool,
        sink: &mut impl RxSink,
    ) {
        self.accept_retried(block.len() / FLIT_BYTES, false);
        self.apply_piggyback(&lph.base);
        let mut pkt = if index == 0 {
            let vl = lph.base.vl;
            let mut pkt = RxPkt {
                vl,
                cfg: lph.base.cfg,
                rt: lph.rt,
                layout: *layout,
                next: 0,
                drop: false,
                cost: 0,
            };
            match self.neg {
                None => {
                    self.event(Event::Protocol(ProtocolError::NotNegotiated));
                    pkt.drop = true;
                }
                Some(neg) => {
                    pkt.cost = layout.cost(usize::from(neg.cell_flits)) as u32;
                    if neg.vl_enable & (1u16 << (vl & 0xf)) == 0 {
                        self.event(Event::Protocol(ProtocolError::BadVl));
                        pkt.drop = true;
                        pkt.cost = 0;
                    } else if self
                        .rx_credits
                        .on_receive(usize::from(vl), pkt.cost)
                        .is_err()
                    {
                        self.event(Event::ReceiveOverflow(vl));
                        pkt.drop = true;
                        pkt.cost = 0;
                    } else if self.dll.state() != DllState::Normal {
                        pkt.drop = true;
                    }
                }
            }
            pkt
        } else {
            match self.rx_pkt {
                Some(p) => p,
                None => return,
            }
        };
        let last = usize::from(index) + 1 == usize::from(layout.blocks);
        if !pkt.drop {
            let data = dlldb_payload(layout, usize::from(index), block).unwrap_or(&[]);
            self.counters.rx_payload_bytes = self
                .counters
                .rx_payload_bytes
                .wrapping_add(data.len() as u64);
            sink.deliver(&Delivery {
                vl: pkt.vl,
                cfg: pkt.cfg,
                rt: pkt.rt,
                total_len: layout.payload_len,
                first: index == 0,
                last,
                error_flag: last && error_flag,
                data,
            });
        }
        if last {
            if pkt.drop {
                self.counters.rx_dropped_dlldps = self.counters.rx_dropped_dlldps.wrapping_add(1);
            } else {
                self.counters.rx_dlldps = self.counters.rx_dlldps.wrapping_add(1);
                if error_flag {
                    self.counters.rx_poisoned = self.counters.rx_poisoned.wrapping_add(1);
                }
            }
            // The sink consumed the packet: its cells are free again.
            self.rx_credits.on_free(usize::from(pkt.vl), pkt.cost);
            self.credit_freed(usize::from(pkt.vl));
            self.rx_pkt = None;
        } else {
            pkt.next = index + 1;
            self.rx_pkt = Some(pkt);
        }
    }

    /// Applies the CRD and ACK bits of an LPH/LBH.
    fn apply_piggyback(&mut self, lbh: &Lbh) {
        if !lbh.ack && !lbh.crd {
            return;
        }
        let Some(neg) = self.neg else {
            self.event(Event::Protocol(ProtocolError::NotNegotiated));
            return;
        };
        if lbh.ack {
            self.release(u32::from(neg.data_ack_grain));
        }
        if lbh.crd {
            let vl = usize::from(lbh.crd_vl);
            let cells = neg.data_credit_grain.get(vl).copied().unwrap_or(0);
            self.credit_return(vl, u32::from(cells));
        }
    }

    fn release(&mut self, flits: u32) {
        if flits == 0 {
            return;
        }
        self.poke_armed = true;
        self.last_release = self.now;
        if let Err(RetryError::AckOverflow) = self.retry.release(flits) {
            self.event(Event::Protocol(ProtocolError::AckOverflow));
        }
    }

    fn credit_return(&mut self, vl: usize, cells: u32) {
        if cells == 0 {
            return;
        }
        self.counters.credits_received = self
            .counters
            .credits_received
            .wrapping_add(u64::from(cells));
        self.credit_deadline = None;
        if let Err(CreditError::ReturnOverflow) = self.tx_credits.on_return(vl, cells) {
            self.event(Event::CreditOverflow(vl as u8));
        }
    }

    fn on_control(&mut self, now: u64, cb: &ControlBlock, block: &[u8], sink: &mut impl RxSink) {
        let flits = block.len() / FLIT_BYTES;
        let kind = cb.kind();
        if kind.is_retried() {
            let pure = matches!(cb, ControlBlock::CrdAck(c) if c.is_pure_ack());
            if let ControlBlock::Init(p) = cb {
                // Negotiate first: the Init Block sets RcvPtr's modulus.
                self.on_init(p);
            }
            self.accept_retried(flits, pure);
        }
        match cb {
            ControlBlock::Null | ControlBlock::Nob | ControlBlock::Init(_) => {}
            ControlBlock::RetryIdle | ControlBlock::RetryReq(_) | ControlBlock::RetryAck(_) => {
                if let Some(flit) = block.first_chunk::<FLIT_BYTES>() {
                    self.on_retry_block(now, cb, flit);
                }
            }
            ControlBlock::CrdAck(c) => self.on_crd_ack(c),
            ControlBlock::ParamExchg(p) => {
                if self.dll.state() == DllState::Normal {
                    sink.param_exchg(p);
                }
            }
            ControlBlock::LaneManage(l) => self.event(Event::LaneManage(*l)),
            ControlBlock::BlockModeChg { ack } => {
                self.event(Event::BlockModeChg(*ack));
                self.on_block_mode_chg(*ack);
            }
        }
    }

    fn on_block_mode_chg(&mut self, ack: bool) {
        if self.dll.state() != DllState::Normal {
            return;
        }
        if ack {
            if let Some(mode) = self.mc.peer_ack(self.tracer) {
                self.event(Event::ModeChangeRetrain(mode));
            }
        } else {
            self.mc.peer_req(self.cfg.mode, self.tracer);
        }
    }

    fn on_retry_block(&mut self, now: u64, cb: &ControlBlock, flit: &[u8; FLIT_BYTES]) {
        let at = self.rx_position();
        match cb {
            ControlBlock::RetryIdle => self.ack.retry_idle(),
            ControlBlock::RetryReq(r) => self.on_retry_req(r, at),
            ControlBlock::RetryAck(a) => {
                match self.req.retry_ack(a.rd_ptr, flit, at, self.tracer) {
                    AckVerdict::Resumed => {
                        self.rx_have = 0;
                        self.init_heard = now;
                    }
                    // A stale set restarts the peer's retransmission behind
                    // us: realign by requesting from our RcvPtr.
                    AckVerdict::Realign => self.block_error(now),
                    AckVerdict::Ignored => self.discard(1),
                }
            }
            _ => {}
        }
    }

    fn on_retry_req(&mut self, r: &RetryReq, at: u64) {
        let key = (r.rcv_ptr, r.num_retry, r.num_phy_reinit);
        if !self.ack.new_set(key, at) {
            return; // Another block of a set already acted on.
        }
        if self.retry.start_retransmit(r.rcv_ptr).is_err() {
            self.event(Event::Protocol(ProtocolError::BadRcvPtr));
            return;
        }
        self.ack.start(r.num_retry, self.tracer);
    }

    fn on_init(&mut self, peer: &InitParams) {
        if self.neg.is_some() {
            return;
        }
        let neg = negotiate(&self.cfg.caps, peer, self.cfg.want_sharing);
        self.neg = Some(neg);
        self.event(Event::Negotiated);
        // Sharing mode keeps one largest DLLDP's cells in the shared pool
        // so that every enabled VL can always send one (link.rst,
        // "Sharing mode").
        let largest = MAX_DLLDP_FLITS.div_ceil(usize::from(neg.cell_flits.max(1))) as u32;
        self.tx_credits = TxCredits::new(
            neg.tx_sharing,
            neg.vl_enable,
            self.cfg.share_reserve,
            self.cfg.share_order,
        )
        .keep_shared(largest);
        let cells = cells_for_buffer(self.cfg.rx_buffer_bytes, u32::from(neg.cell_flits));
        let granted = split_equally(cells, usize::from(neg.vls), &neg.ctrl_credit_grain);
        self.rx_credits = RxCredits::new(granted, neg.rx_sharing);
        self.init.peer_init(granted, self.tracer);
        self.sync_dll();
    }

    fn on_crd_ack(&mut self, c: &CrdAck) {
        let Some(neg) = self.neg else {
            self.event(Event::Protocol(ProtocolError::NotNegotiated));
            return;
        };
        self.release(u32::from(c.ack_num) * u32::from(neg.ctrl_ack_grain));
        for (vl, &n) in c.crd_num.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let cells =
                u32::from(n) * u32::from(neg.ctrl_credit_grain.get(vl).copied().unwrap_or(1));
            if c.initial {
                self.tx_credits.add_initial(vl, cells);
            } else {
                self.credit_return(vl, cells);
            }
        }
        if c.initial && c.done {
            self.init.peer_sd(self.tracer);
            self.credit_init_progress();
        }
    }

    /// Credits of `vl` were freed: if they can be returned in a Crd_Ack,
    /// the credit-return delay starts (unless it runs already).
    fn credit_freed(&mut self, vl: usize) {
        if self.credit_due_since.is_none() && self.returnable(vl) {
            self.credit_due_since = Some(self.now);
        }
    }
}
