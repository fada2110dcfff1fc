// SPDX-License-Identifier: GPL-2.0
//! In-band connection management of TP channels (our design; the spec
//! leaves channel setup out of scope). Documented in
//! `Documentation/ub/transport.rst`.
//!
//! Messages ([`CmMsg`], 32 bytes) travel as UTP datagrams. Setup is a
//! three-way exchange: REQ (initiator's proposal, TPN and initial PSN) →
//! REP (responder's choice, TPN and initial PSN) → RTU. Teardown is
//! DREQ → DREP. REJ refuses a REQ. Every request is retried by its sender
//! until answered or `max_tries` is reached; answers are idempotent (a
//! repeated REQ gets the same REP, a repeated DREQ another DREP), so lost
//! messages in either direction only cost time.
//!
//! Channel states follow the openEuler model: RESET → RTR (receive side
//! ready, peer PSN installed) → RTS (send side ready) → SUSPENDED ↔ RTS,
//! any → ERR, ERR → RESET.

use super::super::net::Error;
use super::super::net::{
    get_u16, get_u24, get_u32, get_u8, put, put_u16, put_u24, put_u32, put_u8,
};
use super::psn::Psn;
use super::{RetransmitMode, RtoMode, StaticRto, MAX_OOO_WINDOW};

/// Length of a CM message.
pub const CM_MSG_LEN: usize = 32;
const MAGIC: u8 = 0xCB;
const VERSION: u8 = 1;

/// TP channel state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelState {
    /// Not usable.
    Reset,
    /// Ready to receive.
    Rtr,
    /// Ready to send and receive.
    Rts,
    /// Sending paused.
    Suspended,
    /// Failed; only RESET leaves it.
    Err,
}

impl ChannelState {
    /// Whether the transition `self → to` is allowed.
    pub const fn can_move_to(self, to: ChannelState) -> bool {
        matches!(
            (self, to),
            (Self::Reset, Self::Rtr)
                | (Self::Rtr, Self::Rts)
                | (Self::Rts, Self::Suspended)
                | (Self::Suspended, Self::Rts)
                | (_, Self::Err)
                | (_, Self::Reset)
        )
    }
}

/// Congestion-control algorithm codes (openEuler numbering).
pub mod cc_code {
    /// No congestion control.
    pub const NONE: u8 = 0;
    /// LDCP.
    pub const LDCP: u8 = 3;
    /// LDCP with CAQM.
    pub const CAQM: u8 = 4;
}

/// Channel parameters: a proposal (REQ) or the agreed values (REP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelParams {
    /// Retransmission algorithm (a proposal of selective means "supported").
    pub mode: RetransmitMode,
    /// Fast retransmission.
    pub fast_retransmit: bool,
    /// OOO window.
    pub ooo_window: u32,
    /// RTO policy.
    pub rto: RtoMode,
    /// Retry limit.
    pub retry_limit: u8,
    /// Transport MTU.
    pub mtu: u32,
    /// Congestion-control algorithm ([`cc_code`]).
    pub cc: u8,
}

impl ChannelParams {
    /// What the responder agrees to, given its own capabilities: the
    /// weaker retransmission mode, fast retransmission only if both want
    /// it, the smaller window, MTU and retry limit, the initiator's RTO, the
    /// same CC algorithm or none. `None` if no window or MTU is common.
    pub fn negotiate(&self, local: &ChannelParams) -> Option<ChannelParams> {
        let mode =
            if self.mode == RetransmitMode::Selective && local.mode == RetransmitMode::Selective {
                RetransmitMode::Selective
            } else {
                RetransmitMode::GoBackN
            };
        let ooo_window = core::cmp::min(self.ooo_window, local.ooo_window);
        let mtu = core::cmp::min(self.mtu, local.mtu);
        if ooo_window < 128 || mtu == 0 {
            return None;
        }
        Some(ChannelParams {
            mode,
            fast_retransmit: self.fast_retransmit && local.fast_retransmit,
            ooo_window,
            rto: self.rto,
            retry_limit: core::cmp::min(self.retry_limit, local.retry_limit),
            mtu,
            cc: if self.cc == local.cc {
                self.cc
            } else {
                cc_code::NONE
            },
        })
    }
}

/// CM message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmKind {
    /// Connection request.
    Req,
    /// Connection reply.
    Rep,
    /// Ready to use.
    Rtu,
    /// Rejection.
    Rej,
    /// Disconnection request.
    Dreq,
    /// Disconnection reply.
    Drep,
}

impl CmKind {
    const fn code(self) -> u8 {
        match self {
            Self::Req => 1,
            Self::Rep => 2,
            Self::Rtu => 3,
            Self::Rej => 4,
            Self::Dreq => 5,
            Self::Drep => 6,
        }
    }

    const fn from_code(c: u8) -> Result<Self, Error> {
        match c {
            1 => Ok(Self::Req),
            2 => Ok(Self::Rep),
            3 => Ok(Self::Rtu),
            4 => Ok(Self::Rej),
            5 => Ok(Self::Dreq),
            6 => Ok(Self::Drep),
            _ => Err(Error::Invalid("CM type")),
        }
    }
}

/// A connection-management message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmMsg {
    /// Type.
    pub kind: CmKind,
    /// Transaction ID chosen by the initiator, echoed in every message of
    /// the connection.
    pub txn: u32,
    /// Sender's TPN.
    pub src_tpn: u32,
    /// Receiver's TPN (0 in a REQ).
    pub dst_tpn: u32,
    /// Sender's initial PSN (its first data PSN; the peer's EPSN).
    pub psn: Psn,
    /// Parameters.
    pub params: ChannelParams,
}

impl CmMsg {
    /// Encodes into 32 bytes.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        if out.len() < CM_MSG_LEN {
            return Err(Error::NoSpace);
        }
        put(out, 0, &[0u8; CM_MSG_LEN])?;
        let p = &self.params;
        put_u8(out, 0, MAGIC)?;
        put_u8(out, 1, VERSION)?;
        put_u8(out, 2, self.kind.code())?;
        let flags =
            u8::from(p.mode == RetransmitMode::Selective) | (u8::from(p.fast_retransmit) << 1);
        put_u8(out, 3, flags)?;
        put_u32(out, 4, self.txn)?;
        put_u24(out, 8, self.src_tpn)?;
        put_u24(out, 12, self.dst_tpn)?;
        put_u24(out, 16, self.psn.value())?;
        put_u8(
            out,
            19,
            u8::try_from(p.ooo_window.trailing_zeros()).unwrap_or(0),
        )?;
        put_u16(
            out,
            20,
            u16::try_from(p.mtu).map_err(|_| Error::Invalid("MTU"))?,
        )?;
        let (kind, level, base) = match p.rto {
            RtoMode::Static(s) => (
                0,
                match s {
                    StaticRto::Us512 => 0,
                    StaticRto::Ms16 => 1,
                    StaticRto::Ms128 => 2,
                    StaticRto::S4 => 3,
                },
                0,
            ),
            RtoMode::Dynamic { base_us, n } => (1, n, base_us),
        };
        put_u8(out, 22, kind)?;
        put_u8(out, 23, level)?;
        put_u32(out, 24, base)?;
        put_u8(out, 28, p.retry_limit)?;
        put_u8(out, 29, p.cc)?;
        Ok(CM_MSG_LEN)
    }

    /// Decodes and validates.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        if buf.len() < CM_MSG_LEN {
            return Err(Error::Truncated);
        }
        if get_u8(buf, 0)? != MAGIC || get_u8(buf, 1)? != VERSION {
            return Err(Error::Invalid("CM magic/version"));
        }
        let kind = CmKind::from_code(get_u8(buf, 2)?)?;
        let flags = get_u8(buf, 3)?;
        let win_log = u32::from(get_u8(buf, 19)?);
        let ooo_window = 1u32.checked_shl(win_log).unwrap_or(0);
        if !(128..=MAX_OOO_WINDOW).contains(&ooo_window) {
            return Err(Error::Invalid("CM OOO window"));
        }
        let rto = match (get_u8(buf, 22)?, get_u8(buf, 23)?) {
            (0, 0) => RtoMode::Static(StaticRto::Us512),
            (0, 1) => RtoMode::Static(StaticRto::Ms16),
            (0, 2) => RtoMode::Static(StaticRto::Ms128),
            (0, 3) => RtoMode::Static(StaticRto::S4),
            (1, n) => RtoMode::Dynamic {
                base_us: get_u32(buf, 24)?,
                n,
            },
            _ => return Err(Error::Invalid("CM RTO")),
        };
        if !rto.is_valid() {
            return Err(Error::Invalid("CM RTO"));
        }
        let mtu = u32::from(get_u16(buf, 20)?);
        if mtu == 0 {
            return Err(Error::Invalid("CM MTU"));
        }
        Ok(Self {
            kind,
            txn: get_u32(buf, 4)?,
            src_tpn: get_u24(buf, 8)?,
            dst_tpn: get_u24(buf, 12)?,
            psn: Psn::new(get_u24(buf, 16)?),
            params: ChannelParams {
                mode: if flags & 1 != 0 {
                    RetransmitMode::Selective
                } else {
                    RetransmitMode::GoBackN
                },
                fast_retransmit: flags & 2 != 0,
                ooo_window,
                rto,
                retry_limit: get_u8(buf, 28)?,
                mtu,
                cc: get_u8(buf, 29)?,
            },
        })
    }
}

/// Connection-manager state of one channel end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmState {
    /// Nothing going on.
    Idle,
    /// Initiator: REQ sent, waiting for REP.
    ReqSent,
    /// Responder: REP sent, waiting for RTU (or data).
    RepSent,
    /// Set up.
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// Torn down.
    Closed,
    /// Gave up (retries exhausted or rejected).
    Failed,
}

/// Timing of CM retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmTiming {
    /// Time between retries, ns.
    pub retry_ns: u64,
    /// Transmissions of a request before giving up.
    pub max_tries: u8,
}

/// One end of a channel's connection management.
#[derive(Clone, Copy, Debug)]
pub struct CmSession {
    state: CmState,
    channel: ChannelState,
    timing: CmTiming,
    txn: u32,
    local_tpn: u32,
    peer_tpn: u32,
    local_psn: Psn,
    peer_psn: Psn,
    params: ChannelParams,
    pending: Option<CmKind>,
    tries: u8,
    deadline: Option<u64>,
    /// What a DREQ of ours carries in its PSN field: the PSN we expect
    /// next from the peer (everything before it was received), so that the
    /// peer can retire what our last acknowledgements did not reach it
    /// with. `local_psn` until [`CmSession::close_after`] sets it.
    dreq_psn: Option<Psn>,
}

impl CmSession {
    /// An initiator that will propose `proposal`, using TPN `local_tpn` and
    /// first PSN `local_psn` (random, chosen by the caller). Call
    /// [`CmSession::poll_transmit`] to get the REQ.
    pub const fn connect(
        now: u64,
        timing: CmTiming,
        txn: u32,
        local_tpn: u32,
        local_psn: Psn,
        proposal: ChannelParams,
    ) -> Self {
        Self {
            state: CmState::ReqSent,
            channel: ChannelState::Reset,
            timing,
            txn,
            local_tpn,
            peer_tpn: 0,
            local_psn,
            peer_psn: Psn::new(0),
            params: proposal,
            pending: Some(CmKind::Req),
            tries: 0,
            deadline: Some(now),
            dreq_psn: None,
        }
    }

    /// A responder answering `req` with capabilities `local`; `None` if the
    /// message is not a REQ. An incompatible REQ gives a session in
    /// `Failed` whose next message is a REJ.
    pub fn accept(
        now: u64,
        timing: CmTiming,
        req: &CmMsg,
        local_tpn: u32,
        local_psn: Psn,
        local: &ChannelParams,
    ) -> Option<Self> {
        if req.kind != CmKind::Req {
            return None;
        }
        let agreed = req.params.negotiate(local);
        let mut s = Self {
            state: CmState::RepSent,
            channel: ChannelState::Reset,
            timing,
            txn: req.txn,
            local_tpn,
            peer_tpn: req.src_tpn,
            local_psn,
            peer_psn: req.psn,
            params: agreed.unwrap_or(*local),
            pending: Some(CmKind::Rep),
            tries: 0,
            deadline: Some(now),
            dreq_psn: None,
        };
        if agreed.is_none() {
            s.state = CmState::Failed;
            s.pending = Some(CmKind::Rej);
            s.deadline = None;
        } else {
            s.channel = ChannelState::Rtr;
        }
        Some(s)
    }

    /// CM state.
    pub const fn state(&self) -> CmState {
        self.state
    }

    /// Channel state.
    pub const fn channel(&self) -> ChannelState {
        self.channel
    }

    /// Agreed (or proposed) parameters.
    pub const fn params(&self) -> &ChannelParams {
        &self.params
    }

    /// Peer TPN.
    pub const fn peer_tpn(&self) -> u32 {
        self.peer_tpn
    }

    /// Whether this end is tearing the channel down (its DREQ sent, or
    /// the peer's answered and the channel not yet freed).
    pub const fn closing(&self) -> bool {
        matches!(self.state, CmState::DreqSent | CmState::Closed)
    }

    /// Whether message `m` (not a REQ) comes from this session's peer end:
    /// from the TPN the setup told it, or, while its REQ waits for an
    /// answer, a REP or REJ (they tell the peer's TPN). A TPN and key are
    /// reused once a channel is freed: a late DREQ of the session that had
    /// them before must not close the new one.
    pub fn is_from_peer(&self, m: &CmMsg) -> bool {
        match self.state {
            CmState::ReqSent => matches!(m.kind, CmKind::Rep | CmKind::Rej),
            _ => self.peer_tpn == m.src_tpn,
        }
    }

    /// Peer's initial PSN (our EPSN).
    pub const fn peer_psn(&self) -> Psn {
        self.peer_psn
    }

    /// Our initial PSN.
    pub const fn local_psn(&self) -> Psn {
        self.local_psn
    }

    fn set_channel(&mut self, to: ChannelState) {
        if self.channel.can_move_to(to) {
            self.channel = to;
        }
    }

    /// Starts teardown; the DREQ says that every data packet before
    /// `received` (our receiver's expected PSN) arrived.
    pub fn close_after(&mut self, now: u64, received: Psn) {
        if !matches!(self.state, CmState::Closed | CmState::DreqSent) {
            self.dreq_psn = Some(received);
        }
        self.close(now);
    }

    /// Starts teardown.
    pub fn close(&mut self, now: u64) {
        if matches!(self.state, CmState::Closed | CmState::DreqSent) {
            return;
        }
        self.state = CmState::DreqSent;
        self.pending = Some(CmKind::Dreq);
        self.tries = 0;
        self.deadline = Some(now);
    }

    /// Pauses sending (RTS → SUSPENDED).
    pub fn suspend(&mut self) {
        if self.channel == ChannelState::Rts {
            self.channel = ChannelState::Suspended;
        }
    }

    /// Resumes sending (SUSPENDED → RTS).
    pub fn resume(&mut self) {
        if self.channel == ChannelState::Suspended {
            self.channel = ChannelState::Rts;
        }
    }

    /// The transport reported an error (e.g. retry limit): ERR.
    pub fn set_error(&mut self) {
        self.set_channel(ChannelState::Err);
    }

    /// The responder saw the first data packet: a lost RTU is implied.
    pub fn handle_data(&mut self) {
        if self.state == CmState::RepSent {
            self.established();
        }
    }

    fn established(&mut self) {
        self.state = CmState::Established;
        self.set_channel(ChannelState::Rtr);
        self.set_channel(ChannelState::Rts);
        self.deadline = None;
    }

    /// Processes a received CM message for this session.
    pub fn handle_msg(&mut self, now: u64, m: &CmMsg) {
        if m.txn != self.txn {
            return;
        }
        match (self.state, m.kind) {
            (CmState::ReqSent, CmKind::Rep) => {
                self.peer_tpn = m.src_tpn;
                self.peer_psn = m.psn;
                self.params = m.params;
                self.established();
                self.pending = Some(CmKind::Rtu);
            }
            (CmState::Established, CmKind::Rep) if self.peer_tpn == m.src_tpn => {
                // Our RTU was lost.
                self.pending = Some(CmKind::Rtu);
            }
            (CmState::ReqSent, CmKind::Rej) => {
                self.state = CmState::Failed;
                self.deadline = None;
                self.set_channel(ChannelState::Err);
            }
            (CmState::RepSent | CmState::Established | CmState::Failed, CmKind::Req) => {
                // Repeated REQ: answer again, identically.
                self.pending = Some(if self.state == CmState::Failed {
                    CmKind::Rej
                } else {
                    CmKind::Rep
                });
            }
            (CmState::RepSent, CmKind::Rtu) => self.established(),
            (_, CmKind::Dreq) => {
                self.state = CmState::Closed;
                self.deadline = None;
                self.set_channel(ChannelState::Reset);
                self.pending = Some(CmKind::Drep);
            }
            (CmState::DreqSent, CmKind::Drep) => {
                self.state = CmState::Closed;
                self.deadline = None;
                self.set_channel(ChannelState::Reset);
            }
            _ => {}
        }
        let _ = now;
    }

    /// The retry deadline, if any.
    pub const fn poll_timeout(&self) -> Option<u64> {
        self.deadline
    }

    /// Handles the retry timer at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        let Some(d) = self.deadline else { return };
        if now < d {
            return;
        }
        let kind = match self.state {
            CmState::ReqSent => CmKind::Req,
            CmState::RepSent => CmKind::Rep,
            CmState::DreqSent => CmKind::Dreq,
            _ => {
                self.deadline = None;
                return;
            }
        };
        if self.tries >= self.timing.max_tries {
            self.deadline = None;
            if self.state == CmState::DreqSent {
                // The peer is gone: close anyway.
                self.state = CmState::Closed;
                self.set_channel(ChannelState::Reset);
            } else {
                self.state = CmState::Failed;
                self.set_channel(ChannelState::Err);
            }
            return;
        }
        self.pending = Some(kind);
    }

    /// Writes the next CM message to send (the UTP payload) into `out`.
    pub fn poll_transmit(&mut self, now: u64, out: &mut [u8]) -> Result<Option<usize>, Error> {
        let Some(kind) = self.pending.take() else {
            return Ok(None);
        };
        if matches!(kind, CmKind::Req | CmKind::Rep | CmKind::Dreq) {
            self.tries = self.tries.saturating_add(1);
            self.deadline = Some(now.saturating_add(self.timing.retry_ns));
        }
        let m = CmMsg {
            kind,
            txn: self.txn,
            src_tpn: self.local_tpn,
            dst_tpn: self.peer_tpn,
            psn: match (kind, self.dreq_psn) {
                (CmKind::Dreq, Some(p)) => p,
                _ => self.local_psn,
            },
            params: self.params,
        };
        m.write(out).map(Some)
    }
}
