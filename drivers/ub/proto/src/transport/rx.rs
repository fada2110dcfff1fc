// SPDX-License-Identifier: GPL-2.0
//! RTP receiver (UB spec §6.4.1, §6.4.2).
//!
//! The receiver checks each data packet's PSN against EPSN and behaves as
//! the retransmission mode requires ([`RxMode`]):
//!
//! | PSN class | GBN + fast retransmit | GBN, no fast retransmit | selective |
//! | --- | --- | --- | --- |
//! | in order | accept, TPACK | accept (and advance past held packets), TPACK | accept, TPACK if no gap else TPSACK |
//! | duplicate | drop, TPACK | drop, TPACK | drop, TPACK or TPSACK |
//! | out of order, new | drop, one TPNAK until the next TPACK | hold, no response | hold, TPSACK (after `sack_threshold` OOO packets) |
//! | out of order, seen | drop, (TPNAK rule) | drop, no response | drop, TPACK/TPSACK |
//! | out of order, cannot record | — | drop, no response | drop, raise MaxRcvPSN, TPSACK |
//! | invalid | drop silently | drop silently | drop silently |
//!
//! Out-of-order packets are held in caller-provided slots ([`RxStorage`]);
//! in-order packets are never copied: [`RtpReceiver::on_data`] says
//! [`RxVerdict::Deliver`] and the caller hands the payload up, then drains
//! held packets that became in order with [`RtpReceiver::next_held`].
//!
//! Responses are coalesced: one is due after `ack_every` accepted packets,
//! after `ack_delay_ns`, or at once when the packet has A set, is a
//! duplicate, or a TPNAK/TPSACK is called for. [`RtpReceiver::poll_transmit`]
//! encodes the response from the state at that moment.

use super::super::net::cci::Cci;
use super::super::net::Error;
use super::cc::CcFeedback;
use super::hdr::RSPINFO_PSN_ERROR;
use super::hdr::{set_bitmap_bit, BitmapSize, CetphKind, Rspst, Rtph, Saetph, TpOpcode};
use super::psn::{classify, Psn, PsnClass};
use super::{RetransmitMode, MAX_OOO_WINDOW};

/// Receiver behaviour, derived from the retransmission combination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// Go-Back-N with fast retransmission: no OOO reception, TPNAK.
    GoBackNNak,
    /// Go-Back-N without fast retransmission: OOO reception, TPACK only.
    GoBackNOoo,
    /// Selective retransmission: OOO reception, TPSACK.
    Selective,
}

impl RxMode {
    /// The receiver mode for a sender combination.
    pub const fn for_combination(mode: RetransmitMode, fast_retransmit: bool) -> Self {
        match (mode, fast_retransmit) {
            (RetransmitMode::GoBackN, true) => Self::GoBackNNak,
            (RetransmitMode::GoBackN, false) => Self::GoBackNOoo,
            (RetransmitMode::Selective, _) => Self::Selective,
        }
    }
}

/// Receiver configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxConfig {
    /// Behaviour.
    pub mode: RxMode,
    /// Our TPN (checked against RTPH.DstTPN).
    pub local_tpn: u32,
    /// The peer's TPN (RTPH.DstTPN of our responses).
    pub peer_tpn: u32,
    /// First PSN expected.
    pub initial_psn: Psn,
    /// OOO window W: 128, 256, 512, 1024 or 2048.
    pub ooo_window: u32,
    /// Respond after this many accepted packets (1 = every packet).
    pub ack_every: u16,
    /// Longest delay of a coalesced response, ns.
    pub ack_delay_ns: u64,
    /// Out-of-order packets before a TPSACK is sent (≥ 1).
    pub sack_threshold: u16,
    /// Largest SAETPH bitmap.
    pub sack_max: BitmapSize,
    /// CETPH layout when congestion control is on.
    pub cc: Option<CetphKind>,
}

/// Metadata of a held packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotMeta {
    /// Payload length.
    pub len: u32,
    /// TPMSN of the packet.
    pub tpmsn: u32,
    /// Last packet of its message.
    pub last: bool,
    /// CC units of the packet.
    pub units: u32,
}

/// Caller-provided storage for out-of-order packets: `meta.len()` slots (a
/// power of two, at most the OOO window), each of `data.len() /
/// meta.len()` bytes, and a bitmap of at least `meta.len()` bits.
///
/// Each part is any `DerefMut` to a slice: borrowed slices (`&mut [u64]`)
/// or owned buffers (`Vec`, the kernel's `KVec`) allocated fallibly when
/// the channel is created, so that a receiver can be stored in a
/// driver-owned struct without borrowing caller storage.
#[derive(Debug)]
pub struct RxStorage<B, M, D> {
    /// One bit per slot: the slot holds an undelivered packet.
    pub bitmap: B,
    /// Per-slot metadata.
    pub meta: M,
    /// Payload bytes.
    pub data: D,
}

/// What to do with a received data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxVerdict {
    /// In order: deliver this payload now, then drain [`RtpReceiver::next_held`].
    Deliver,
    /// Out of order and held; it will come out of `next_held` later.
    Held,
    /// Dropped.
    Drop(DropReason),
}

/// Why a data packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// PSN already received.
    Duplicate,
    /// Out of order and this mode does not hold OOO packets.
    OutOfOrder,
    /// Out of order but no slot could record it.
    Unrecordable,
    /// PSN outside every valid range.
    InvalidPsn,
    /// Not a data packet for this channel.
    NotForUs,
}

/// Receiver counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Packets accepted in order.
    pub in_order: u64,
    /// Packets held out of order.
    pub held: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// OOO packets dropped (GBN + fast retransmit).
    pub ooo_dropped: u64,
    /// OOO packets that could not be recorded.
    pub unrecordable: u64,
    /// Packets with an invalid PSN.
    pub invalid: u64,
    /// TPACKs sent.
    pub acks: u64,
    /// TPNAKs sent.
    pub naks: u64,
    /// TPSACKs sent.
    pub sacks: u64,
}

/// A held packet handed back in order.
#[derive(Debug, PartialEq, Eq)]
pub struct HeldPacket<'b> {
    /// PSN.
    pub psn: Psn,
    /// TPMSN.
    pub tpmsn: u32,
    /// Last packet of its message.
    pub last: bool,
    /// Payload.
    pub payload: &'b [u8],
}

/// The receiving half of an RTP channel, over [`RxStorage`] parts `B`
/// (bitmap words), `M` (slot metadata) and `D` (payload bytes).
#[derive(Debug)]
pub struct RtpReceiver<B, M, D> {
    cfg: RxConfig,
    store: RxStorage<B, M, D>,
    cap: u32,
    slot_bytes: usize,
    epsn: Psn,
    head: Psn,
    max_rcv: Psn,
    nak_pending: bool,
    nak_sent: bool,
    resp_pending: bool,
    resp_now: bool,
    resp_deadline: u64,
    since_resp: u16,
    ooo_since_resp: u16,
    fb: CcFeedback,
    stats: RxStats,
}

/// Why a receiver cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxSetupError {
    /// OOO window not in {128, 256, 512, 1024, 2048}.
    Window,
    /// Slot count not a power of two, or bitmap too short for the slots.
    Storage,
}

impl<B, M, D> RtpReceiver<B, M, D>
where
    B: core::ops::DerefMut<Target = [u64]>,
    M: core::ops::DerefMut<Target = [SlotMeta]>,
    D: core::ops::DerefMut<Target = [u8]>,
{
    /// A receiver over `store`. GBN with fast retransmission needs no
    /// storage (pass empty slices).
    pub fn new(cfg: RxConfig, mut store: RxStorage<B, M, D>) -> Result<Self, RxSetupError> {
        if !cfg.ooo_window.is_power_of_two() || !(128..=MAX_OOO_WINDOW).contains(&cfg.ooo_window) {
            return Err(RxSetupError::Window);
        }
        let slots = u32::try_from(store.meta.len()).map_err(|_| RxSetupError::Storage)?;
        if slots != 0 && !slots.is_power_of_two() {
            return Err(RxSetupError::Storage);
        }
        // More slots than the window can never be used (an OOO packet lies
        // within W of EPSN): a channel whose negotiated window came out
        // smaller than the storage allocated for the proposal uses the
        // first W slots.
        let cap = core::cmp::min(slots, cfg.ooo_window);
        if store.bitmap.len().saturating_mul(64) < store.meta.len() {
            return Err(RxSetupError::Storage);
        }
        let slot_bytes = store.data.len().checked_div(store.meta.len()).unwrap_or(0);
        store.bitmap.fill(0);
        let epsn = cfg.initial_psn;
        Ok(Self {
            cfg,
            store,
            cap,
            slot_bytes,
            epsn,
            head: epsn,
            max_rcv: epsn.sub(1),
            nak_pending: false,
            nak_sent: false,
            resp_pending: false,
            resp_now: false,
            resp_deadline: 0,
            since_resp: 0,
            ooo_since_resp: 0,
            fb: CcFeedback::default(),
            stats: RxStats::default(),
        })
    }

    /// Expected PSN.
    pub const fn epsn(&self) -> Psn {
        self.epsn
    }

    /// Highest PSN ever received (MaxRcvPSN).
    pub const fn max_rcv_psn(&self) -> Psn {
        self.max_rcv
    }

    /// Counters.
    pub const fn stats(&self) -> &RxStats {
        &self.stats
    }

    fn slot_of(&self, psn: Psn) -> usize {
        // cap is a power of two dividing 2^24, so the ring is consistent
        // across PSN wrap-around.
        usize::try_from(psn.value() & self.cap.wrapping_sub(1)).unwrap_or(0)
    }

    fn held_bit(&self, psn: Psn) -> bool {
        if self.cap == 0 || psn.distance_from(self.head) >= self.cap {
            return false;
        }
        let i = self.slot_of(psn);
        self.store
            .bitmap
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    fn set_held(&mut self, psn: Psn, on: bool) {
        let i = self.slot_of(psn);
        if let Some(w) = self.store.bitmap.get_mut(i / 64) {
            if on {
                *w |= 1u64 << (i % 64);
            } else {
                *w &= !(1u64 << (i % 64));
            }
        }
    }

    fn schedule(&mut self, now: u64, immediate: bool) {
        if !self.resp_pending {
            self.resp_pending = true;
            self.resp_deadline = now.saturating_add(self.cfg.ack_delay_ns);
        }
        if immediate || self.since_resp >= self.cfg.ack_every {
            self.resp_now = true;
        }
    }

    /// Advances EPSN over held packets (they stay held until drained).
    fn advance(&mut self, cc_held: bool) {
        while self.held_bit(self.epsn) {
            if cc_held {
                let i = self.slot_of(self.epsn);
                let units = self.store.meta.get(i).map_or(0, |m| m.units);
                self.fb.on_accept(units, Cci::DEFAULT);
            }
            self.epsn = self.epsn.next();
        }
    }

    /// Processes a data packet with header `h`, payload `payload`, CC size
    /// `units` (CC units of TP header + payload + ICRC) and network CCI
    /// `cci`, received at `now`.
    pub fn handle_data(
        &mut self,
        now: u64,
        h: &Rtph,
        payload: &[u8],
        units: u32,
        cci: Cci,
    ) -> RxVerdict {
        if h.opcode != TpOpcode::Data || h.dst_tpn != self.cfg.local_tpn {
            return RxVerdict::Drop(DropReason::NotForUs);
        }
        let class = classify(h.psn, self.epsn, self.cfg.ooo_window);
        match class {
            PsnClass::InOrder if self.head != self.epsn => {
                // Held packets before this one were not drained yet: hold
                // this one too so that nothing overtakes them.
                if !self.store(h, payload, units) {
                    self.stats.unrecordable = self.stats.unrecordable.saturating_add(1);
                    return RxVerdict::Drop(DropReason::Unrecordable);
                }
                self.stats.in_order = self.stats.in_order.saturating_add(1);
                self.max_rcv = self.max_rcv.max(h.psn);
                let gbn = self.cfg.mode == RxMode::GoBackNOoo;
                if !gbn {
                    self.fb.on_accept(units, cci);
                }
                self.advance(gbn);
                self.since_resp = self.since_resp.saturating_add(1);
                self.schedule(now, h.ack_req);
                RxVerdict::Held
            }
            PsnClass::InOrder => {
                self.stats.in_order = self.stats.in_order.saturating_add(1);
                self.max_rcv = self.max_rcv.max(h.psn);
                self.fb.on_accept(units, cci);
                // The caller delivers this packet now: the head moves with EPSN.
                self.head = self.head.next();
                self.epsn = self.epsn.next();
                let gbn = self.cfg.mode == RxMode::GoBackNOoo;
                self.advance(gbn);
                self.since_resp = self.since_resp.saturating_add(1);
                self.schedule(now, h.ack_req);
                RxVerdict::Deliver
            }
            PsnClass::Duplicate => {
                self.stats.duplicates = self.stats.duplicates.saturating_add(1);
                self.schedule(now, true);
                RxVerdict::Drop(DropReason::Duplicate)
            }
            PsnClass::OutOfOrder(_) => self.on_ooo(now, h, payload, units, cci),
            PsnClass::Invalid => {
                self.stats.invalid = self.stats.invalid.saturating_add(1);
                RxVerdict::Drop(DropReason::InvalidPsn)
            }
        }
    }

    fn on_ooo(&mut self, now: u64, h: &Rtph, payload: &[u8], units: u32, cci: Cci) -> RxVerdict {
        match self.cfg.mode {
            RxMode::GoBackNNak => {
                self.stats.ooo_dropped = self.stats.ooo_dropped.saturating_add(1);
                if !self.nak_sent {
                    self.nak_pending = true;
                }
                RxVerdict::Drop(DropReason::OutOfOrder)
            }
            RxMode::GoBackNOoo | RxMode::Selective => {
                let sel = self.cfg.mode == RxMode::Selective;
                if sel {
                    // MaxRcvPSN rises even if the packet cannot be recorded.
                    self.max_rcv = self.max_rcv.max(h.psn);
                }
                if self.held_bit(h.psn) {
                    self.stats.duplicates = self.stats.duplicates.saturating_add(1);
                    if sel {
                        self.schedule(now, true);
                    }
                    return RxVerdict::Drop(DropReason::Duplicate);
                }
                if !self.store(h, payload, units) {
                    self.stats.unrecordable = self.stats.unrecordable.saturating_add(1);
                    if sel {
                        self.ooo_since_resp = self.ooo_since_resp.saturating_add(1);
                        let now_due = self.ooo_since_resp >= self.cfg.sack_threshold;
                        self.schedule(now, now_due);
                    }
                    return RxVerdict::Drop(DropReason::Unrecordable);
                }
                self.max_rcv = self.max_rcv.max(h.psn);
                self.stats.held = self.stats.held.saturating_add(1);
                if sel {
                    self.fb.on_accept(units, cci);
                    self.ooo_since_resp = self.ooo_since_resp.saturating_add(1);
                    let now_due = self.ooo_since_resp >= self.cfg.sack_threshold;
                    self.schedule(now, now_due || h.ack_req);
                }
                // GBN counts held packets for CC when they become in order.
                RxVerdict::Held
            }
        }
    }

    /// Copies a packet into its slot; false if it cannot be recorded.
    fn store(&mut self, h: &Rtph, payload: &[u8], units: u32) -> bool {
        if h.psn.distance_from(self.head) >= self.cap || payload.len() > self.slot_bytes {
            return false;
        }
        let i = self.slot_of(h.psn);
        let start = i.saturating_mul(self.slot_bytes);
        let Some(end) = start.checked_add(payload.len()) else {
            return false;
        };
        let (Some(dst), Some(m)) = (
            self.store.data.get_mut(start..end),
            self.store.meta.get_mut(i),
        ) else {
            return false;
        };
        dst.copy_from_slice(payload);
        *m = SlotMeta {
            len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
            tpmsn: h.tpmsn,
            last: h.last,
            units,
        };
        self.set_held(h.psn, true);
        true
    }

    /// The next held packet that is now in order, if any.
    pub fn next_held(&mut self) -> Option<HeldPacket<'_>> {
        if self.head == self.epsn {
            return None;
        }
        let psn = self.head;
        let i = self.slot_of(psn);
        self.set_held(psn, false);
        self.head = self.head.next();
        let m = self.store.meta.get(i).copied().unwrap_or_default();
        let start = i.saturating_mul(self.slot_bytes);
        let len = usize::try_from(m.len).unwrap_or(0);
        let payload = self
            .store
            .data
            .get(start..start.saturating_add(len))
            .unwrap_or(&[]);
        Some(HeldPacket {
            psn,
            tpmsn: m.tpmsn,
            last: m.last,
            payload,
        })
    }

    /// When a coalesced response falls due, if one is pending.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.nak_pending || (self.resp_pending && self.resp_now) {
            Some(0)
        } else if self.resp_pending {
            Some(self.resp_deadline)
        } else {
            None
        }
    }

    /// Whether the receiver has seen a packet beyond EPSN − 1.
    fn has_gap(&self) -> bool {
        self.max_rcv.diff(self.epsn) >= 0
    }

    /// Writes the due response (RTPH, CETPH, SAETPH) into `out` and returns
    /// its length, or `None` if nothing is due at `now`.
    pub fn poll_transmit(&mut self, now: u64, out: &mut [u8]) -> Result<Option<usize>, Error> {
        let due = self.resp_pending && (self.resp_now || now >= self.resp_deadline);
        if !self.nak_pending && !due {
            return Ok(None);
        }
        let last_in_order = self.epsn.sub(1);
        let (opcode, psn, rspst) = if self.nak_pending {
            self.nak_pending = false;
            self.nak_sent = true;
            self.stats.naks = self.stats.naks.saturating_add(1);
            let op = if self.cfg.cc.is_some() {
                TpOpcode::AckCc
            } else {
                TpOpcode::Ack
            };
            (op, self.epsn, Rspst::CompleterError(RSPINFO_PSN_ERROR))
        } else if self.cfg.mode == RxMode::Selective && self.has_gap() {
            self.stats.sacks = self.stats.sacks.saturating_add(1);
            let op = if self.cfg.cc.is_some() {
                TpOpcode::SackCc
            } else {
                TpOpcode::Sack
            };
            (op, last_in_order, Rspst::Ack)
        } else {
            self.nak_sent = false;
            self.stats.acks = self.stats.acks.saturating_add(1);
            let op = if self.cfg.cc.is_some() {
                TpOpcode::AckCc
            } else {
                TpOpcode::Ack
            };
            (op, last_in_order, Rspst::Ack)
        };
        if due {
            self.resp_pending = false;
            self.resp_now = false;
            self.since_resp = 0;
            self.ooo_since_resp = 0;
        }
        let h = Rtph {
            opcode,
            last: false,
            padding: 0,
            nlp: 0,
            src_tpn: self.cfg.local_tpn,
            dst_tpn: self.cfg.peer_tpn,
            ack_req: false,
            fake: false,
            psn,
            rspst,
            tpmsn: 0,
        };
        let mut off = h.write(out)?;
        if let Some(kind) = self.cfg.cc {
            let c = self.fb.take(kind);
            off = off.saturating_add(c.write(out.get_mut(off..).ok_or(Error::NoSpace)?)?);
        }
        if opcode.has_saetph() {
            let span = self.max_rcv.distance_from(last_in_order).saturating_add(1);
            let size = BitmapSize::fitting(span, self.cfg.sack_max);
            let rest = out.get_mut(off..).ok_or(Error::NoSpace)?;
            let n = Saetph::write_fixed(size, self.max_rcv, rest)?;
            let bitmap = rest.get_mut(4..n).ok_or(Error::NoSpace)?;
            set_bitmap_bit(bitmap, 0);
            let limit = core::cmp::min(size.bits(), span);
            for k in 1..limit {
                if self.held_bit(last_in_order.add(k)) {
                    set_bitmap_bit(bitmap, k);
                }
            }
            off = off.saturating_add(n);
        }
        Ok(Some(off))
    }
}
