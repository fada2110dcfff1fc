// SPDX-License-Identifier: GPL-2.0
//! RTP sender (UB spec §6.4.2, §6.6, §6.7).
//!
//! The sender segments posted messages into MTU packets (every non-last
//! packet carries exactly MTU bytes, the last 1..=MTU, all with the
//! message's TPMSN, the last with the last flag), keeps one slot per
//! unacknowledged PSN in caller-provided storage, and retransmits:
//!
//! - Go-Back-N: on a TPNAK (fast retransmission) from the NAK PSN through
//!   everything sent; on RTO from the oldest unacknowledged PSN.
//! - Selective: a TPSACK marks received packets; with fast retransmission
//!   the holes in (PSN, min(MaxRcvPSN, PSN + BitMapSize − 1)] are judged
//!   by the MarkPSN two-phase operation (§6.4.2.3.1), on three
//!   channel-wide values:
//!   - The sender alternates between a new-packet phase (only new packets
//!     leave; detected losses are queued) and a retransmission phase (only
//!     queued losses leave, in PSN order). It enters the retransmission
//!     phase when losses are queued and an acknowledgement at or beyond
//!     MarkPSN has arrived (or on RTO / RNR), and leaves it when the queue
//!     is empty, however it emptied; MarkPSN then becomes the next new PSN.
//!   - LastFirstRtx and HighRtxPSN bound the latest burst: every packet
//!     retransmitted since the phase last switched lies in
//!     [LastFirstRtx, HighRtxPSN]. A hole outside it is a first loss (or a
//!     retransmission already proven lost) and is queued at once.
//!   - A hole inside it is a retransmission that may still be on its way:
//!     HighRtxPSN stops it being sent again until an acknowledgement at or
//!     beyond MarkPSN shows that a packet sent after the burst has
//!     arrived; from then on it is a second loss and is queued again.
//!
//!   Without fast retransmission a TPSACK only updates state and the RTO
//!   resends the holes.
//!
//! Payload bytes are not copied: each slot records the message token and
//! offset, and [`RtpSender::poll_transmit`] tells the caller which bytes
//! to append to the header it wrote. The caller keeps a message's bytes
//! until [`TxEvent::MessageAcked`].
//!
//! RTO: armed by the first packet sent with nothing outstanding, re-armed
//! whenever an acknowledgement advances the oldest unacknowledged PSN,
//! stopped when everything is acknowledged. Each expiry counts a
//! consecutive timeout (reset by progress); the RTO is static or
//! `Base × 2^(N × Times)`; once the count exceeds `retry_limit` the channel
//! enters the error state and reports [`TxEvent::ChannelError`].

use super::super::net::cci::Cci;
use super::super::net::Error;
use super::cc::{CcConfig, CcState};
use super::hdr::{padding_for, Cetph, CetphKind, Rspst, Rtph, Saetph, TpOpcode, RTPH_LEN};
use super::psn::{Psn, MAX_SEND_WINDOW};
use super::{RetransmitMode, RtoMode};

/// Sender configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxConfig {
    /// Go-Back-N or selective.
    pub mode: RetransmitMode,
    /// Fast retransmission on TPNAK / TPSACK.
    pub fast_retransmit: bool,
    /// RTO policy.
    pub rto: RtoMode,
    /// Consecutive timeouts tolerated; one more puts the channel in error.
    pub retry_limit: u8,
    /// Largest number of unacknowledged packets (≤ 8M − 1 and ≤ slots).
    pub max_window: u32,
    /// Payload bytes per packet.
    pub mtu: u32,
    /// Our TPN.
    pub local_tpn: u32,
    /// The peer's TPN.
    pub peer_tpn: u32,
    /// First PSN to send.
    pub initial_psn: Psn,
    /// Bytes counted per packet for CC besides the payload (TP header and
    /// ICRC, plus any TA header the caller counts).
    pub overhead: u32,
    /// Congestion control.
    pub cc: CcConfig,
    /// CETPH layout of responses when CC is on.
    pub cetph: Option<CetphKind>,
}

/// Why a packet is retransmitted: the sender's own record, kept with each
/// queued PSN, so the layer above reads causes instead of guessing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtxCause {
    /// A response asked for it: a TPNAK or TPSACK reporting a first loss
    /// (selective + fast), or an RNR / page-fault response.
    Fast,
    /// A retransmission shown lost by an acknowledgement at or beyond
    /// MarkPSN (a second loss, §6.4.2.3.1).
    MarkPsn,
    /// The RTO expired (selective: everything outstanding is resent).
    Rto,
    /// Go-Back-N, after a TPNAK or an RTO.
    GoBackN,
}

/// Per-PSN state of an unacknowledged packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxSlot {
    token: u64,
    offset: u32,
    len: u32,
    tpmsn: u32,
    last: bool,
    sacked: bool,
    /// Queued for selective retransmission, and why.
    queued: Option<RtxCause>,
}

/// A packet to send: the header is already in the output buffer; append
/// `len` payload bytes of message `token` from `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// PSN.
    pub psn: Psn,
    /// TPMSN.
    pub tpmsn: u32,
    /// Message token given to [`RtpSender::post`].
    pub token: u64,
    /// Offset of the payload in the message.
    pub offset: u32,
    /// Payload length.
    pub len: u32,
    /// Last packet of the message.
    pub last: bool,
    /// This is a retransmission.
    pub retransmission: bool,
    /// Bytes of header written.
    pub hdr_len: usize,
    /// Zero bytes to append after the payload (RTPH.Padding).
    pub padding: u8,
    /// CCI for the network header.
    pub cci: Cci,
}

/// Something the layer above must know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxEvent {
    /// Every packet of the message was acknowledged.
    MessageAcked {
        /// Token given to [`RtpSender::post`].
        token: u64,
        /// Its TPMSN.
        tpmsn: u32,
    },
    /// The retry limit was exceeded (or the peer reported an unrecoverable
    /// error); the channel is in the error state.
    ChannelError,
}

/// Why a message cannot be posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// A message is still being segmented.
    Busy,
    /// Zero-length message (RTP packets carry at least one byte).
    Empty,
    /// The channel is in the error state.
    ChannelError,
}

/// Why a sender cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxSetupError {
    /// Window larger than 8M − 1 or than the slots, or zero.
    Window,
    /// Slot count not a power of two.
    Slots,
    /// MTU zero or RTO parameters out of range.
    Param,
}

/// Phase of the sender (the MarkPSN two-phase operation, plus the error
/// state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxPhase {
    /// Sending new packets; detected losses are queued.
    NewPackets,
    /// Sending queued retransmissions only.
    Retransmit,
    /// Retry limit exceeded or unrecoverable peer error: nothing is sent.
    Error,
}

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// New packets sent.
    pub sent: u64,
    /// Retransmissions.
    pub retransmitted: u64,
    /// Of these, by cause: first losses reported by TPNAK / TPSACK.
    pub rtx_fast: u64,
    /// Second losses (MarkPSN reached).
    pub rtx_mark_psn: u64,
    /// Selective RTO bursts.
    pub rtx_rto: u64,
    /// Go-Back-N replays.
    pub rtx_go_back_n: u64,
    /// RTO expiries.
    pub timeouts: u64,
    /// Fast retransmissions queued by TPNAK / TPSACK.
    pub fast_queued: u64,
    /// Of these, retransmitted packets queued again because an
    /// acknowledgement at or beyond MarkPSN showed the retransmission lost
    /// (second losses).
    pub markpsn_queued: u64,
    /// Largest number of unacknowledged packets observed.
    pub max_outstanding: u32,
}

#[derive(Clone, Copy, Debug)]
struct CurMsg {
    token: u64,
    len: u32,
    offset: u32,
    tpmsn: u32,
}

/// The sending half of an RTP channel, over slot storage `S` (a borrowed
/// `&mut [TxSlot]`, or an owned buffer such as `Vec` / `KVec` that the
/// caller allocated fallibly when the channel was created).
#[derive(Debug)]
pub struct RtpSender<S> {
    cfg: TxConfig,
    slots: S,
    mask: u32,
    una: Psn,
    nxt: Psn,
    free: Psn,
    cur: Option<CurMsg>,
    next_tpmsn: u32,
    gbn_rtx: Option<Psn>,
    /// Queued selective retransmissions.
    rtx_pending: u32,
    /// No PSN in [una, rtx_cursor) is queued: the retransmission phase
    /// scans forward from here, so a burst costs O(1) per packet.
    rtx_cursor: Psn,
    /// HighRtxPSN: highest PSN retransmitted in the latest burst (None once
    /// that burst is acknowledged or a new one starts afresh).
    high_rtx: Option<Psn>,
    /// MarkPSN: the first new PSN sent after the latest burst.
    mark_psn: Psn,
    /// An acknowledgement at or beyond MarkPSN has arrived.
    mark_reached: bool,
    /// LastFirstRtx: first (lowest) PSN retransmitted in the latest burst.
    last_first_rtx: Option<Psn>,
    /// Something was retransmitted since the retransmission phase began.
    burst_sent: bool,
    phase: TxPhase,
    rto_deadline: Option<u64>,
    timeouts: u32,
    hold_until: u64,
    error_reported: bool,
    cc: CcState,
    stats: TxStats,
}

impl<S: core::ops::DerefMut<Target = [TxSlot]>> RtpSender<S> {
    /// A sender over `slots` (a power of two, at least `max_window`).
    pub fn new(cfg: TxConfig, slots: S) -> Result<Self, TxSetupError> {
        let n = u32::try_from(slots.len()).map_err(|_| TxSetupError::Slots)?;
        if !n.is_power_of_two() {
            return Err(TxSetupError::Slots);
        }
        if cfg.max_window == 0 || cfg.max_window > MAX_SEND_WINDOW || cfg.max_window > n {
            return Err(TxSetupError::Window);
        }
        if cfg.mtu == 0 || !cfg.rto.is_valid() {
            return Err(TxSetupError::Param);
        }
        Ok(Self {
            cfg,
            slots,
            mask: n.wrapping_sub(1),
            una: cfg.initial_psn,
            nxt: cfg.initial_psn,
            free: cfg.initial_psn,
            cur: None,
            next_tpmsn: 0,
            gbn_rtx: None,
            rtx_pending: 0,
            rtx_cursor: cfg.initial_psn,
            high_rtx: None,
            mark_psn: cfg.initial_psn,
            mark_reached: false,
            last_first_rtx: None,
            burst_sent: false,
            phase: TxPhase::NewPackets,
            rto_deadline: None,
            timeouts: 0,
            hold_until: 0,
            error_reported: false,
            cc: CcState::new(cfg.cc),
            stats: TxStats::default(),
        })
    }

    fn idx(&self, psn: Psn) -> usize {
        usize::try_from(psn.value() & self.mask).unwrap_or(0)
    }

    fn slot(&self, psn: Psn) -> TxSlot {
        self.slots.get(self.idx(psn)).copied().unwrap_or_default()
    }

    fn slot_mut(&mut self, psn: Psn) -> Option<&mut TxSlot> {
        let i = self.idx(psn);
        self.slots.get_mut(i)
    }

    /// Oldest unacknowledged PSN.
    pub const fn una(&self) -> Psn {
        self.una
    }

    /// Next new PSN.
    pub const fn next_psn(&self) -> Psn {
        self.nxt
    }

    /// HighRtxPSN: highest PSN retransmitted in the latest burst, while
    /// some of that burst is unacknowledged.
    pub const fn high_rtx_psn(&self) -> Option<Psn> {
        self.high_rtx
    }

    /// MarkPSN: first new PSN sent after the last retransmission phase.
    pub const fn mark_psn(&self) -> Psn {
        self.mark_psn
    }

    /// Whether an acknowledgement at or beyond MarkPSN has arrived since
    /// the last retransmission phase ended.
    pub const fn mark_psn_reached(&self) -> bool {
        self.mark_reached
    }

    /// LastFirstRtx: first PSN of the latest retransmission burst, while
    /// some of that burst is unacknowledged.
    pub const fn last_first_rtx(&self) -> Option<Psn> {
        self.last_first_rtx
    }

    /// Unacknowledged packets.
    pub const fn outstanding(&self) -> u32 {
        self.nxt.distance_from(self.una)
    }

    /// Counters.
    pub const fn stats(&self) -> &TxStats {
        &self.stats
    }

    /// Congestion state.
    pub const fn cc(&self) -> &CcState {
        &self.cc
    }

    /// Whether the channel is in the error state.
    pub const fn is_error(&self) -> bool {
        matches!(self.phase, TxPhase::Error)
    }

    /// Current phase.
    pub const fn phase(&self) -> TxPhase {
        self.phase
    }

    /// Whether a new message may be posted.
    pub const fn can_post(&self) -> bool {
        self.cur.is_none() && !self.is_error()
    }

    /// Whether everything posted has been acknowledged.
    pub fn is_idle(&self) -> bool {
        self.cur.is_none() && self.una == self.nxt
    }

    /// Posts a message of `len` bytes identified by `token`; returns its
    /// TPMSN.
    pub fn post(&mut self, token: u64, len: u32) -> Result<u32, PostError> {
        if self.is_error() {
            return Err(PostError::ChannelError);
        }
        if self.cur.is_some() {
            return Err(PostError::Busy);
        }
        if len == 0 {
            return Err(PostError::Empty);
        }
        let tpmsn = self.next_tpmsn;
        self.next_tpmsn = self.next_tpmsn.wrapping_add(1) & 0xff_ffff;
        self.cur = Some(CurMsg {
            token,
            len,
            offset: 0,
            tpmsn,
        });
        Ok(tpmsn)
    }

    fn wire_size(&self, len: u32) -> u32 {
        len.saturating_add(self.cfg.overhead)
    }

    fn arm_rto(&mut self, now: u64) {
        self.rto_deadline = Some(now.saturating_add(self.cfg.rto.timeout_ns(self.timeouts)));
    }

    /// Writes the next packet's RTPH into `out` and describes it, or returns
    /// `None` if nothing may be sent now (window, congestion window, RNR
    /// hold, or nothing to send).
    pub fn poll_transmit(&mut self, now: u64, out: &mut [u8]) -> Result<Option<TxPacket>, Error> {
        if self.is_error() || now < self.hold_until {
            return Ok(None);
        }
        if out.len() < RTPH_LEN {
            return Err(Error::NoSpace);
        }
        // Go-Back-N retransmission in progress.
        if let Some(p) = self.gbn_rtx {
            if p.before(self.nxt) && !p.before(self.una) {
                let s = self.slot(p);
                if !self.cc.can_send(self.wire_size(s.len)) {
                    return Ok(None);
                }
                let next = p.next();
                self.gbn_rtx = if next == self.nxt { None } else { Some(next) };
                return self.emit(now, p, Some(RtxCause::GoBackN), out).map(Some);
            }
            self.gbn_rtx = None;
        }
        // Selective retransmission phase: only queued losses leave.
        if self.phase == TxPhase::Retransmit {
            if let Some(p) = self.next_queued() {
                let s = self.slot(p);
                if !self.cc.can_send(self.wire_size(s.len)) {
                    return Ok(None);
                }
                let cause = self.slot_mut(p).and_then(|sm| sm.queued.take());
                self.rtx_pending = self.rtx_pending.saturating_sub(1);
                self.rtx_cursor = p.next();
                let pkt = self.emit(now, p, Some(cause.unwrap_or(RtxCause::Fast)), out)?;
                self.settle_phase();
                return Ok(Some(pkt));
            }
            // Nothing queued after all: the count was stale.
            self.rtx_pending = 0;
            self.settle_phase();
        }
        // New packet (losses queued in the new-packet phase wait for an
        // acknowledgement at or beyond MarkPSN).
        let Some(cur) = self.cur else { return Ok(None) };
        let outstanding = self.nxt.distance_from(self.una);
        let used = self.nxt.distance_from(self.free);
        if outstanding >= self.cfg.max_window || used > self.mask {
            return Ok(None);
        }
        let remaining = cur.len.saturating_sub(cur.offset);
        let len = core::cmp::min(remaining, self.cfg.mtu);
        if !self.cc.can_send(self.wire_size(len)) {
            return Ok(None);
        }
        let last = len == remaining;
        let psn = self.nxt;
        if let Some(s) = self.slot_mut(psn) {
            *s = TxSlot {
                token: cur.token,
                offset: cur.offset,
                len,
                tpmsn: cur.tpmsn,
                last,
                sacked: false,
                queued: None,
            };
        }
        self.cur = if last {
            None
        } else {
            Some(CurMsg {
                offset: cur.offset.saturating_add(len),
                ..cur
            })
        };
        if self.una == self.nxt {
            self.arm_rto(now);
        }
        self.nxt = self.nxt.next();
        self.stats.sent = self.stats.sent.saturating_add(1);
        self.stats.max_outstanding = self.stats.max_outstanding.max(self.outstanding());
        self.emit(now, psn, None, out).map(Some)
    }

    /// The first queued PSN at or after the cursor (which it moves there),
    /// or `None` when nothing is queued.
    fn next_queued(&mut self) -> Option<Psn> {
        let mut p = if self.rtx_cursor.before(self.una) {
            self.una
        } else {
            self.rtx_cursor
        };
        while p.before(self.nxt) {
            if self.slot(p).queued.is_some() {
                self.rtx_cursor = p;
                return Some(p);
            }
            p = p.next();
        }
        self.rtx_cursor = self.nxt;
        None
    }

    /// Switches phase after anything that changed the queue or MarkPSN:
    /// new-packet → retransmission once losses are queued and an
    /// acknowledgement at or beyond MarkPSN has arrived; retransmission →
    /// new-packet as soon as the queue is empty (resent or acknowledged).
    fn settle_phase(&mut self) {
        match self.phase {
            TxPhase::NewPackets if self.rtx_pending > 0 && self.mark_reached => {
                self.start_burst();
            }
            TxPhase::Retransmit if self.rtx_pending == 0 => {
                self.phase = TxPhase::NewPackets;
                if self.burst_sent {
                    // Packets from here on are sent after the burst.
                    self.mark_psn = self.nxt;
                    self.mark_reached = false;
                }
            }
            _ => {}
        }
    }

    /// Enters the retransmission phase. Once MarkPSN has been reached every
    /// earlier retransmission is settled (arrived, or known lost and
    /// queued), so the burst bounds start afresh; otherwise (RNR) they
    /// widen, keeping the unsettled retransmissions inside.
    fn start_burst(&mut self) {
        if self.mark_reached {
            self.last_first_rtx = None;
            self.high_rtx = None;
        }
        self.phase = TxPhase::Retransmit;
        self.burst_sent = false;
    }

    /// Whether `p` lies in the latest burst, [LastFirstRtx, HighRtxPSN]:
    /// a hole there is a retransmission that may still arrive until an
    /// acknowledgement at or beyond MarkPSN says otherwise.
    fn in_latest_burst(&self, p: Psn) -> bool {
        match (self.last_first_rtx, self.high_rtx) {
            (Some(first), Some(high)) => !p.before(first) && !p.after(high),
            _ => false,
        }
    }

    /// Notes that the peer has received `p` (a cumulative or selective
    /// acknowledgement): at or beyond MarkPSN proves the latest burst
    /// arrived or lost. Only PSNs actually sent count.
    fn note_received(&mut self, p: Psn) {
        if !p.before(self.mark_psn) && p.before(self.nxt) {
            self.mark_reached = true;
        }
    }

    fn emit(
        &mut self,
        now: u64,
        psn: Psn,
        cause: Option<RtxCause>,
        out: &mut [u8],
    ) -> Result<TxPacket, Error> {
        let s = self.slot_mut(psn).copied().ok_or(Error::NoSpace)?;
        let rtx = cause.is_some();
        if let Some(cause) = cause {
            self.stats.retransmitted = self.stats.retransmitted.saturating_add(1);
            let by_cause = match cause {
                RtxCause::Fast => &mut self.stats.rtx_fast,
                RtxCause::MarkPsn => &mut self.stats.rtx_mark_psn,
                RtxCause::Rto => &mut self.stats.rtx_rto,
                RtxCause::GoBackN => &mut self.stats.rtx_go_back_n,
            };
            *by_cause = by_cause.saturating_add(1);
            self.burst_sent = true;
            self.high_rtx = Some(self.high_rtx.map_or(psn, |h| h.max(psn)));
            self.last_first_rtx = Some(match self.last_first_rtx {
                Some(f) if f.before(psn) => f,
                _ => psn,
            });
            if self.rto_deadline.is_none() {
                self.arm_rto(now);
            }
        }
        self.cc.on_send(self.wire_size(s.len));
        let mut h = Rtph::data(self.cfg.local_tpn, self.cfg.peer_tpn, psn, s.tpmsn, s.last);
        h.ack_req = s.last || rtx;
        h.padding = padding_for(RTPH_LEN.saturating_add(usize::try_from(s.len).unwrap_or(0)));
        let hdr_len = h.write(out)?;
        Ok(TxPacket {
            psn,
            tpmsn: s.tpmsn,
            token: s.token,
            offset: s.offset,
            len: s.len,
            last: s.last,
            retransmission: rtx,
            hdr_len,
            padding: h.padding,
            cci: self.cc.cci(),
        })
    }

    /// Retires everything up to and including `through`, if that is a
    /// sensible cumulative acknowledgement. Returns whether it advanced.
    fn ack_through(&mut self, now: u64, through: Psn) -> bool {
        let new_una = through.next();
        // Valid acknowledgements lie in [una − 1, nxt − 1].
        if new_una.distance_from(self.una) > self.nxt.distance_from(self.una) || new_una == self.una
        {
            return false;
        }
        let mut p = self.una;
        while p != new_una {
            let s = self.slot(p);
            if s.queued.is_some() {
                self.rtx_pending = self.rtx_pending.saturating_sub(1);
                if let Some(sm) = self.slot_mut(p) {
                    sm.queued = None;
                }
            }
            p = p.next();
        }
        self.una = new_una;
        if self.rtx_cursor.before(new_una) {
            self.rtx_cursor = new_una;
        }
        // The latest burst's bounds only matter while some of it is
        // unacknowledged; dropping them then keeps them from going stale
        // (a PSN compared 8M later reads as the wrong side).
        if self.high_rtx.is_some_and(|h| h.before(new_una)) {
            self.high_rtx = None;
            self.last_first_rtx = None;
        } else if self.last_first_rtx.is_some_and(|f| f.before(new_una)) {
            self.last_first_rtx = Some(new_una);
        }
        if let Some(g) = self.gbn_rtx {
            if g.before(self.una) {
                self.gbn_rtx = if self.una == self.nxt {
                    None
                } else {
                    Some(self.una)
                };
            }
        }
        self.timeouts = 0;
        if self.una == self.nxt {
            self.rto_deadline = None;
        } else {
            self.arm_rto(now);
        }
        true
    }

    /// Queues `p` for selective retransmission; returns whether it was
    /// newly queued.
    fn queue(&mut self, p: Psn, cause: RtxCause) -> bool {
        let size = self.wire_size(self.slot(p).len);
        if let Some(s) = self.slot_mut(p) {
            if s.queued.is_some() || s.sacked {
                return false;
            }
            s.queued = Some(cause);
        } else {
            return false;
        }
        if p.before(self.rtx_cursor) {
            self.rtx_cursor = p;
        }
        self.rtx_pending = self.rtx_pending.saturating_add(1);
        self.cc.on_requeue(size);
        true
    }

    /// The peer closed the channel having received every packet before
    /// `received` (the PSN its DREQ carries): retires them as a cumulative
    /// acknowledgement would, so the messages its last TPACKs did not
    /// reach us for still count as acknowledged. A PSN outside the window
    /// is ignored. Returns whether anything was retired.
    pub fn handle_peer_closed(&mut self, now: u64, received: Psn) -> bool {
        if self.is_error() {
            return false;
        }
        self.ack_through(now, received.sub(1))
    }

    /// Processes a response (TPACK, TPNAK, TPSACK, with or without CETPH):
    /// `buf` starts at the RTPH.
    pub fn handle_response(&mut self, now: u64, buf: &[u8]) -> Result<(), Error> {
        let h = Rtph::parse(buf)?;
        if h.dst_tpn != self.cfg.local_tpn {
            return Err(Error::Invalid("DstTPN"));
        }
        if !matches!(
            h.opcode,
            TpOpcode::Ack | TpOpcode::AckCc | TpOpcode::Sack | TpOpcode::SackCc
        ) {
            return Err(Error::Invalid("TPOpcode"));
        }
        let mut off = RTPH_LEN;
        let cetph = if h.opcode.has_cetph() {
            let kind = self.cfg.cetph.ok_or(Error::Invalid("CETPH"))?;
            let c = Cetph::parse(kind, buf.get(off..).ok_or(Error::Truncated)?)?;
            off = off.saturating_add(c.len());
            Some(c)
        } else {
            None
        };
        let sack = if h.opcode.has_saetph() {
            Some(Saetph::parse(buf.get(off..).ok_or(Error::Truncated)?)?.0)
        } else {
            None
        };
        if self.is_error() {
            return Ok(());
        }
        match h.rspst {
            Rspst::Ack | Rspst::TaResponse(_) => {
                self.note_received(h.psn);
                if let Some(s) = &sack {
                    self.note_received(s.max_rcv_psn);
                }
                self.ack_through(now, h.psn);
                self.cc.on_ack(cetph);
                if let Some(s) = sack {
                    self.on_sack(h.psn, &s);
                }
            }
            Rspst::CompleterError(info) if info == super::hdr::RSPINFO_PSN_ERROR => {
                self.note_received(h.psn.sub(1));
                self.ack_through(now, h.psn.sub(1));
                self.cc.on_ack(cetph);
                if self.cfg.mode == RetransmitMode::GoBackN
                    && self.cfg.fast_retransmit
                    && h.psn == self.una
                    && self.una != self.nxt
                    && self.gbn_rtx.is_none_or(|g| g.after(h.psn))
                {
                    self.gbn_rtx = Some(h.psn);
                    self.stats.fast_queued = self.stats.fast_queued.saturating_add(1);
                    self.cc.on_nak(cetph.and_then(|c| c.ack_seq()));
                }
            }
            Rspst::Rnr(t) | Rspst::PageFault(t) => {
                self.note_received(h.psn.sub(1));
                self.ack_through(now, h.psn.sub(1));
                self.hold_until = now.saturating_add(2000u64 << t);
                if h.psn == self.una && self.una != self.nxt {
                    match self.cfg.mode {
                        RetransmitMode::GoBackN => self.gbn_rtx = Some(h.psn),
                        RetransmitMode::Selective => {
                            // The peer asks for it: resend without waiting
                            // for MarkPSN.
                            self.queue(h.psn, RtxCause::Fast);
                            if self.phase == TxPhase::NewPackets {
                                self.start_burst();
                            }
                        }
                    }
                }
            }
            Rspst::CompleterError(_) => {
                self.phase = TxPhase::Error;
                self.rto_deadline = None;
            }
        }
        self.settle_phase();
        Ok(())
    }

    fn on_sack(&mut self, psn: Psn, s: &Saetph<'_>) {
        let span = s.max_rcv_psn.distance_from(psn);
        if span > s.size.bits() && s.max_rcv_psn.before(psn) {
            return;
        }
        let limit = core::cmp::min(span, s.size.bits().saturating_sub(1));
        let fast = self.cfg.fast_retransmit && self.cfg.mode == RetransmitMode::Selective;
        for k in 1..=limit {
            let p = psn.add(k);
            if p.before(self.una) || !p.before(self.nxt) {
                continue;
            }
            let slot = self.slot(p);
            if s.bit(k) {
                if !slot.sacked {
                    if slot.queued.is_some() {
                        self.rtx_pending = self.rtx_pending.saturating_sub(1);
                    }
                    if let Some(sm) = self.slot_mut(p) {
                        sm.sacked = true;
                        sm.queued = None;
                    }
                }
            } else if fast && slot.queued.is_none() {
                // Outside the latest burst: a first loss (or one already
                // proven lost). Inside it: a retransmission that may still
                // arrive, lost only once MarkPSN has been reached.
                let second_loss = self.in_latest_burst(p);
                let proven = self.phase == TxPhase::NewPackets && self.mark_reached;
                let cause = if second_loss {
                    RtxCause::MarkPsn
                } else {
                    RtxCause::Fast
                };
                if (!second_loss || proven) && self.queue(p, cause) {
                    self.stats.fast_queued = self.stats.fast_queued.saturating_add(1);
                    if second_loss {
                        self.stats.markpsn_queued = self.stats.markpsn_queued.saturating_add(1);
                    }
                }
            }
        }
    }

    /// The RTO deadline, if armed.
    pub const fn poll_timeout(&self) -> Option<u64> {
        if self.is_error() {
            None
        } else {
            self.rto_deadline
        }
    }

    /// Handles the RTO if it has expired at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        let Some(d) = self.rto_deadline else { return };
        if now < d || self.is_error() {
            return;
        }
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
        self.timeouts = self.timeouts.saturating_add(1);
        if self.timeouts > u32::from(self.cfg.retry_limit) {
            self.phase = TxPhase::Error;
            self.rto_deadline = None;
            return;
        }
        self.cc.on_timeout();
        match self.cfg.mode {
            RetransmitMode::GoBackN => {
                if self.una != self.nxt {
                    self.gbn_rtx = Some(self.una);
                }
            }
            RetransmitMode::Selective => {
                let mut p = self.una;
                while p.before(self.nxt) {
                    self.queue(p, RtxCause::Rto);
                    p = p.next();
                }
                // The timeout restarts the retransmission bookkeeping:
                // everything unacknowledged is resent in one fresh burst.
                self.cc.on_timeout();
                self.mark_reached = true;
                if self.phase == TxPhase::NewPackets {
                    self.start_burst();
                }
                self.settle_phase();
            }
        }
        self.arm_rto(now);
    }

    /// The next event for the layer above. Call it until `None` after
    /// every [`RtpSender::handle_response`] and [`RtpSender::handle_timeout`]: the
    /// slots of acknowledged packets are reused only once their events
    /// have been taken.
    pub fn poll_event(&mut self) -> Option<TxEvent> {
        while self.free != self.una {
            let s = self.slot(self.free);
            self.free = self.free.next();
            if s.last {
                return Some(TxEvent::MessageAcked {
                    token: s.token,
                    tpmsn: s.tpmsn,
                });
            }
        }
        if self.is_error() && !self.error_reported {
            self.error_reported = true;
            return Some(TxEvent::ChannelError);
        }
        None
    }
}
