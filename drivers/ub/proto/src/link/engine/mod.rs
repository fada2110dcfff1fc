// SPDX-License-Identifier: GPL-2.0
//! The data link engine: one end of a UB link (UB spec §4.2, §4.6, §4.7,
//! §4.8.4).
//!
//! Sans-I/O. Inputs (`handle_*` and the PHY indications): received bytes
//! ([`Link::handle_receive`]), lost flits ([`Link::receive_error`]),
//! [`Link::link_up`], [`Link::link_down`], [`Link::phy_retrained`], the
//! time ([`Link::handle_timeout`], `now` in nanoseconds) and the packets of
//! a [`TxSource`]. Outputs (`poll_*`): whole blocks to transmit
//! ([`Link::poll_transmit`]), deliveries to an [`RxSink`], [`Event`]s
//! ([`Link::poll_event`]) and the next deadline ([`Link::poll_timeout`]).
//!
//! Each state machine is a module whose enum carries its states' data and
//! whose one transition function is the only writer of the state, traced
//! `from → to` with its spec section ([`Link::set_tracer`]):
//!
//! - [`dll`]: DLL state (§4.2, §4.8.4);
//! - [`init`]: Init Block and initial-credit exchange (§4.3.3.9, §4.4, §4.6);
//! - [`retry_req`]: RETRY_REQ_SM (§4.7.4);
//! - [`retry_ack`]: RETRY_ACK_SM (§4.7.4);
//! - [`mode_change`]: Block_Mode_Chg handshake (§4.3.3.8).
//!
//! The timers are listed in one [`TimerTable`] ([`timers`]); the event
//! queue's drain contract is on [`EventRing`] ([`events`]). The data path
//! the machines share is `rx.rs` (flits in, blocks checked, deliveries)
//! and `tx.rs` (which block goes out next); this file holds the types,
//! the inputs from the PHY and management, and the timers.
//!
//! # Call order
//!
//! After [`Link::new`]: `link_up` when the PHY reports LinkUp; then, in
//! any order and as often as the driver likes, `handle_receive` for each
//! chunk of received bytes, `poll_transmit` whenever the PHY can take
//! data, and `handle_timeout` once `poll_timeout`'s deadline is reached;
//! drain `poll_event` after each of these calls.

use core::ops::DerefMut;

use super::credit::{split_equally, CreditError, RxCredits, TxCredits};
use super::ctrl::{
    negotiate, ControlBlock, CrdAck, CtrlKind, InitParams, LaneManage, Negotiated, ParamExchg,
    RetryAck, RetryReq, INIT_BLOCK_FLITS,
};
use super::frame::{
    cells_for_buffer, check_block, dlldb_payload, encode_dlldb, header_cfg, is_dlldp_cfg,
    max_payload, FrameError, Layout, Lbh, Lch, Lph, Mode, FLIT_BYTES, MAX_BLOCK_BYTES,
    MAX_BLOCK_FLITS, MAX_DLLDP_FLITS, MAX_VLS,
};
use super::retry::{RetryBuffer, RetryError, RetrySlot};

pub mod dll;
pub mod events;
pub mod init;
pub mod mode_change;
pub mod retry_ack;
pub mod retry_req;
mod rx;
pub mod timers;
pub mod trace;
mod tx;

pub use dll::DllState;
pub use events::{EventRing, EVENT_SLOTS};
pub use retry_ack::RetryAckState;
pub use retry_req::{RetryReqState, ACK_COPY_MAX_DAMAGE};
pub use timers::{Timer, TimerTable};
pub use trace::{Machine, Tracer, Transition};

use dll::Dll;
use init::{InitExchange, InitStep};
use mode_change::{ModeChange, ModeChangeSm};
use retry_ack::RetryAck as RetryAckSm;
use retry_req::{AckVerdict, Entered, RetryReq as RetryReqSm};

/// Blocks in a retry set after its Retry_Idle.
pub const RETRY_SET_BLOCKS: usize = 32;
/// Flits of a whole retry set (Retry_Idle + 32 blocks).
pub const RETRY_SET_FLITS: usize = RETRY_SET_BLOCKS + 1;
/// Smallest lock-out threshold: a block may only be sent if this many
/// flits stay free after it, so a poke (NOB) and a Crd_Ack always fit.
pub const MIN_LOCKOUT_THRESHOLD: u16 = 4;
/// Largest single output of [`Link::poll_transmit`]: `out` must hold at least
/// this many bytes for every block to fit.
pub const MIN_TX_BUFFER: usize = MAX_BLOCK_BYTES + 13 * FLIT_BYTES;

/// Protocol errors reported by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// An ACK released more retry-buffer flits than are held.
    AckOverflow,
    /// A Retry_Req pointed outside the retry buffer's held flits.
    BadRcvPtr,
    /// A DLLDP or Crd_Ack arrived before the peer's Init Block.
    NotNegotiated,
    /// A DLLDP with an invalid VL.
    BadVl,
}

/// Something the driver should know about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The DLL state changed.
    State(DllState),
    /// Init Block negotiation completed (see [`Link::negotiated`]).
    Negotiated,
    /// The PHY must retrain; answer with [`Link::phy_retrained`].
    RetrainRequest,
    /// DL Retry Rollover: the same RcvPtr failed NUM_RETRY_THRESHOLD times.
    RetryRollover,
    /// DL Retry Ack Timeout: no Retry_Ack_Set within the WAIT timeout.
    RetryAckTimeout,
    /// DL Retry Error: RETRY_REQ_SM entered ERROR (reported; the action
    /// follows as [`Event::LinkResetRequest`]).
    RetryError,
    /// DL protocol error.
    Protocol(ProtocolError),
    /// Credits returned beyond their initial value on a VL.
    CreditOverflow(u8),
    /// A DLLDP arrived on a VL without credit for it.
    ReceiveOverflow(u8),
    /// No credit returned within the credit-return timeout while stalled.
    CreditReturnTimeout,
    /// A Lane_Manage block arrived.
    LaneManage(LaneManage),
    /// A Block_Mode_Chg block arrived (`true` = ACK).
    BlockModeChg(bool),
    /// Mode switch handshake done: retrain the PHY for this encapsulation
    /// mode, then call [`Link::mode_change_done`].
    ModeChangeRetrain(Mode),
    /// The encapsulation mode is now this.
    ModeChanged(Mode),
    /// The retry buffer held a DLLDP at a mode switch (cannot be
    /// converted; the action follows as [`Event::LinkResetRequest`]).
    ModeChangeFailed,
    /// The link must be initialised again from DLL_Disabled on both ends
    /// (raised after [`Event::RetryError`] and [`Event::ModeChangeFailed`];
    /// until then this end neither sends nor receives). The driver takes
    /// the PHY down so that the peer sees LinkUp = 0 too, calls
    /// [`Link::link_down`] and [`Link::reset`], enables the PHY again and
    /// calls [`Link::link_up`] once LinkUp is back (`Documentation/ub/link.rst`,
    /// "Link reset request").
    LinkResetRequest,
}

/// Per-link counters (monotonic, wrapping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Blocks transmitted (retry sets count as 33).
    pub tx_blocks: u64,
    /// Flits transmitted.
    pub tx_flits: u64,
    /// DLLDPs transmitted (first transmission).
    pub tx_dlldps: u64,
    /// Payload bytes of DLLDPs transmitted (first transmission).
    pub tx_payload_bytes: u64,
    /// Flits retransmitted from the retry buffer.
    pub tx_retransmitted_flits: u64,
    /// NOBs sent for PACKET_MIN_INTERVAL.
    pub tx_nobs: u64,
    /// Crd_Ack blocks sent.
    pub tx_crd_acks: u64,
    /// Packets of the source rejected (bad VL, CFG or length).
    pub tx_rejected: u64,
    /// Blocks received and accepted.
    pub rx_blocks: u64,
    /// Flits received.
    pub rx_flits: u64,
    /// DLLDPs delivered completely.
    pub rx_dlldps: u64,
    /// Payload bytes delivered.
    pub rx_payload_bytes: u64,
    /// DLLDPs delivered with ERROR_FLAG.
    pub rx_poisoned: u64,
    /// DLLDPs dropped (wrong state, overflow, not negotiated).
    pub rx_dropped_dlldps: u64,
    /// Blocks failing the BCRC.
    pub rx_crc_errors: u64,
    /// FEC failures reported by the PHY.
    pub rx_fec_errors: u64,
    /// Malformed headers (bad LCH, CFG, PLENGTH, DLLCB length).
    pub rx_malformed: u64,
    /// Flits discarded while waiting for a Retry_Ack_Set or retraining.
    pub rx_discarded_flits: u64,
    /// Partial blocks abandoned because the rest never came (a corrupted
    /// header announced a longer block than the peer sent).
    pub rx_block_timeouts: u64,
    /// Retry_Req_Sets sent.
    pub retry_req_sets: u64,
    /// Retry_Ack_Sets sent.
    pub retry_ack_sets: u64,
    /// WAIT timeouts.
    pub retry_timeouts: u64,
    /// PHY retrains requested.
    pub retrains: u64,
    /// Times sending stopped for lack of credit (no VL could send).
    pub credit_stalls: u64,
    /// Per VL: times the VL's next DLLDP had to wait for credit (counted
    /// when it starts waiting, not per attempt).
    pub vl_credit_stalls: [u64; MAX_VLS],
    /// Cells this port returned to the peer (LPH/LBH and Crd_Ack).
    pub credits_returned: u64,
    /// Cells the peer returned to this port.
    pub credits_received: u64,
    /// Cells this port spent on DLLDPs.
    pub credits_spent: u64,
    /// Credit-return timeouts.
    pub credit_timeouts: u64,
    /// Times sending stopped at the lock-out threshold.
    pub lockouts: u64,
    /// Protocol and overflow errors.
    pub errors: u64,
    /// Events dropped because the event queue was full (see
    /// [`EventRing`]).
    pub events_dropped: u64,
    /// Crd_Acks forced because owed credits waited
    /// `credit_return_delay_ns`.
    pub credit_return_delays: u64,
    /// Init timeouts: in DLL_Param_Init or DLL_Credit_Init nothing came
    /// from the peer for `wait_timeout_ns`, so retransmission was
    /// requested (see [`Timer::Init`]).
    pub init_timeouts: u64,
    /// Link reset requests raised ([`Event::LinkResetRequest`]).
    pub link_reset_requests: u64,
}

/// Engine configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// Encapsulation mode.
    pub mode: Mode,
    /// Capabilities advertised in the Init Block (RETRY_BUF_DEPTH is
    /// replaced by the retry buffer's depth). The engine supports every
    /// value, the mandatory ones (§4.4) included, so a failed negotiation
    /// always has a usable fallback.
    pub caps: InitParams,
    /// Send in sharing mode if the peer allows it.
    pub want_sharing: bool,
    /// Sharing mode: cells reserved per VL.
    pub share_reserve: [u16; MAX_VLS],
    /// Sharing mode: order in which returns refill reserved pools.
    pub share_order: [u8; MAX_VLS],
    /// Receive buffer for DLLDPs in bytes; sets the initial credits.
    pub rx_buffer_bytes: u64,
    /// Pending returned cells per VL that force a Crd_Ack and back-pressure
    /// the network layer.
    pub credit_return_threshold: u32,
    /// Credit-return timeout (ns) while a packet waits for credit.
    pub credit_timeout_ns: u64,
    /// Longest time (ns) credits this port owes the peer may wait before
    /// a Crd_Ack returns them, whatever the count: the bound in time next
    /// to `credit_return_threshold`'s bound in count, so a VL whose grant
    /// is below the threshold is never starved by a busy transmitter.
    pub credit_return_delay_ns: u64,
    /// WAIT timeout (ns), 1 µs to 10 s.
    pub wait_timeout_ns: u64,
    /// NUM_RETRY_THRESHOLD, at least [`MIN_NUM_RETRY_THRESHOLD`].
    pub num_retry_threshold: u8,
    /// NUM_PHY_REINIT_THRESHOLD.
    pub num_phy_reinit_threshold: u8,
    /// Lock-out threshold (flits kept free for ACK-carrying Crd_Acks, ≥ 2).
    pub lockout_threshold: u16,
    /// Owed ACK flits that force a Crd_Ack (clamped to half the peer's
    /// retry buffer).
    pub ack_threshold: u16,
    /// Flits sent since the last ACK return after which owed ACKs force a
    /// Crd_Ack.
    pub ack_delay_flits: u32,
}

/// All capability bits for every grain, every VL enabled.
pub const FULL_CAPS: InitParams = InitParams {
    feature_id: 1,
    rxbuf_vl_share: true,
    data_ack_grain: 0xff,
    ctrl_ack_grain: 0xff,
    flow_ctrl_size: 0xff,
    vl_enable: 0xffff,
    retry_buf_depth: 0,
    packet_min_interval: 0,
    ctrl_credit_grain: [0xff; MAX_VLS],
    data_credit_grain: [0xff; MAX_VLS],
};

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Crc,
            caps: InitParams {
                data_ack_grain: 0x20,
                ctrl_ack_grain: 0x01,
                flow_ctrl_size: 0x08,
                ctrl_credit_grain: [0x01; MAX_VLS],
                data_credit_grain: [0x04; MAX_VLS],
                ..FULL_CAPS
            },
            want_sharing: false,
            share_reserve: [0; MAX_VLS],
            share_order: core::array::from_fn(|i| i as u8),
            rx_buffer_bytes: 1 << 20,
            credit_return_threshold: 256,
            credit_timeout_ns: 100_000_000,
            credit_return_delay_ns: 10_000,
            wait_timeout_ns: 10_000,
            num_retry_threshold: 15,
            num_phy_reinit_threshold: 4,
            lockout_threshold: 4,
            ack_threshold: 256,
            ack_delay_flits: 1024,
        }
    }
}

/// A packet offered for transmission.
#[derive(Clone, Copy, Debug)]
pub struct TxPacket<'a> {
    /// LPH.CFG (3, 4, 5, 6, 7 or 9).
    pub cfg: u8,
    /// LPH.RT.
    pub rt: u8,
    /// Poisoned packet (ERROR_FLAG in its last block).
    pub error_flag: bool,
    /// Bytes after the LPH (network header onwards).
    pub payload: &'a [u8],
}

/// The network layer's transmit queues, one per VL, as the engine sees
/// them. The head of a VL must stay the same until [`TxSource::pop`].
pub trait TxSource {
    /// Bit n set: VL n has a packet waiting.
    fn ready(&self) -> u16;
    /// The head packet of `vl`.
    fn head(&self, vl: u8) -> Option<TxPacket<'_>>;
    /// The head packet of `vl` has been sent completely.
    fn pop(&mut self, vl: u8);
}

/// A piece of a received DLLDP: the payload of one DLLDB.
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    /// VL of the packet.
    pub vl: u8,
    /// LPH.CFG.
    pub cfg: u8,
    /// LPH.RT.
    pub rt: u8,
    /// Total payload bytes of the DLLDP.
    pub total_len: u16,
    /// First piece of the DLLDP.
    pub first: bool,
    /// Last piece of the DLLDP.
    pub last: bool,
    /// ERROR_FLAG (only on the last piece): poisoned packet.
    pub error_flag: bool,
    /// The bytes.
    pub data: &'a [u8],
}

/// Receives what the engine delivers upward.
pub trait RxSink {
    /// A piece of a DLLDP, in order; pieces of one DLLDP are never
    /// interleaved with another's.
    fn deliver(&mut self, piece: &Delivery<'_>);
    /// A Param_Exchg block (in DLL_Normal).
    fn param_exchg(&mut self, _block: &ParamExchg) {}
}

/// An [`RxSink`] that drops everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl RxSink for NullSink {
    fn deliver(&mut self, _piece: &Delivery<'_>) {}
}

/// Why [`Link::new`] refused to build an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkSetupError {
    /// The retry buffer has fewer than [`super::retry::MIN_RETRY_DEPTH`] slots.
    RetryBufferTooSmall {
        /// Slots given.
        slots: usize,
    },
    /// NUM_RETRY_THRESHOLD below [`MIN_NUM_RETRY_THRESHOLD`]: the link
    /// could never come up (see there).
    RetryThresholdTooLow {
        /// The threshold given.
        threshold: u8,
    },
}

/// The lowest NUM_RETRY_THRESHOLD a link accepts. The link-up alignment is
/// itself an entry into RETRY_REQ, and every entry counts
/// (`link.rst`, "Counting retries"): with a threshold of 1 that first entry
/// already reaches it, so the port retrains without ever sending the
/// Retry_Req_Set that brings the link up, retrains again after the PHY
/// comes back, and ends in ERROR. The specification allows any threshold;
/// this is the one decision that keeps every accepted configuration able
/// to bring its link up.
pub const MIN_NUM_RETRY_THRESHOLD: u8 = 2;

/// Why a control request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtrlRequestError {
    /// Not in DLL_Normal.
    NotReady,
    /// A control block is already waiting.
    Busy,
}

#[derive(Clone, Copy, Debug)]
struct TxCur {
    vl: u8,
    layout: Layout,
    next: u8,
}

#[derive(Clone, Copy, Debug)]
struct RxPkt {
    vl: u8,
    cfg: u8,
    rt: u8,
    layout: Layout,
    next: u8,
    drop: bool,
    cost: u32,
}

#[derive(Clone, Copy, Debug)]
enum RxHdr {
    Ctrl,
    Data { layout: Layout, index: u8, lph: Lph },
}

/// One end of a UB link. `S` is the retry buffer's storage.
///
/// # Examples
///
/// Two engines joined back to back: bring-up, then one DLLDP.
///
/// ```
/// use ub_proto::link::{Delivery, DllState, Link, LinkConfig, RetrySlot};
/// use ub_proto::link::{RxSink, TxPacket, TxSource};
///
/// struct One(Option<Vec<u8>>);
/// impl TxSource for One {
///     fn ready(&self) -> u16 {
///         u16::from(self.0.is_some())
///     }
///     fn head(&self, _vl: u8) -> Option<TxPacket<'_>> {
///         let payload = self.0.as_deref()?;
///         Some(TxPacket { cfg: 6, rt: 0, error_flag: false, payload })
///     }
///     fn pop(&mut self, _vl: u8) {
///         self.0 = None;
///     }
/// }
/// struct Got(Vec<u8>);
/// impl RxSink for Got {
///     fn deliver(&mut self, piece: &Delivery<'_>) {
///         self.0.extend_from_slice(piece.data);
///     }
/// }
///
/// let cfg = LinkConfig::default();
/// let mut a = Link::new(cfg, vec![RetrySlot::EMPTY; 1024]).unwrap();
/// let mut b = Link::new(cfg, vec![RetrySlot::EMPTY; 1024]).unwrap();
/// let (mut src, mut idle) = (One(Some(b"hello, link".to_vec())), One(None));
/// let (mut got_a, mut got_b) = (Got(Vec::new()), Got(Vec::new()));
/// let mut wire = vec![0u8; 64 * 20];
/// a.link_up(0);
/// b.link_up(0);
/// for now in 1..100 {
///     let n = a.poll_transmit(now, &mut wire, &mut src);
///     b.handle_receive(now, &wire[..n], &mut got_b);
///     let n = b.poll_transmit(now, &mut wire, &mut idle);
///     a.handle_receive(now, &wire[..n], &mut got_a);
/// }
/// assert_eq!(a.state(), DllState::Normal);
/// assert_eq!(got_b.0, b"hello, link");
/// ```
#[derive(Clone, Debug)]
pub struct Link<S> {
    cfg: LinkConfig,
    dll: Dll,
    init: InitExchange,
    req: RetryReqSm,
    ack: RetryAckSm,
    mc: ModeChangeSm,
    retry: RetryBuffer<S>,
    neg: Option<Negotiated>,
    counters: Counters,
    events: EventRing,
    tracer: Option<Tracer>,
    // Transmit side.
    tx_credits: TxCredits,
    tx_cur: Option<TxCur>,
    /// The layout of the last DLLDP picked (see `pick_packet`).
    tx_layout: Option<Layout>,
    vl_rr: u8,
    crd_rr: u8,
    since_header: u32,
    pending_ctrl: Option<ControlBlock>,
    stalled: bool,
    /// VLs whose next DLLDP waits for credit (bit n: VL n), so that
    /// `vl_credit_stalls` counts each wait once.
    stalled_vls: u16,
    lockout_blocked: bool,
    out_full: bool,
    poke_armed: bool,
    now: u64,
    last_release: u64,
    credit_deadline: Option<u64>,
    /// When the Init exchange last heard from the peer (link up, the end
    /// of the retry alignment, an accepted retried block): the base of
    /// [`Timer::Init`].
    init_heard: u64,
    // Receive side.
    rx_partial: [u8; FLIT_BYTES],
    rx_partial_len: usize,
    rx_block: [u8; MAX_BLOCK_BYTES],
    rx_have: usize,
    rx_expect: usize,
    rx_block_deadline: u64,
    rx_hdr: RxHdr,
    rx_pkt: Option<RxPkt>,
    rx_credits: RxCredits,
    /// Since when credits returnable in a Crd_Ack are owed to the peer.
    credit_due_since: Option<u64>,
    owed_acks: u32,
    owed_pure: u32,
    since_ack: u32,
}

impl<S: DerefMut<Target = [RetrySlot]>> Link<S> {
    /// An engine in DLL_Disabled, or
    /// [`LinkSetupError::RetryBufferTooSmall`] if the retry buffer has
    /// fewer than [`super::retry::MIN_RETRY_DEPTH`] slots,
    /// [`LinkSetupError::RetryThresholdTooLow`] if NUM_RETRY_THRESHOLD is
    /// below [`MIN_NUM_RETRY_THRESHOLD`].
    pub fn new(cfg: LinkConfig, retry_storage: S) -> Result<Self, LinkSetupError> {
        if cfg.num_retry_threshold < MIN_NUM_RETRY_THRESHOLD {
            return Err(LinkSetupError::RetryThresholdTooLow {
                threshold: cfg.num_retry_threshold,
            });
        }
        let slots = retry_storage.len();
        let retry =
            RetryBuffer::new(retry_storage).ok_or(LinkSetupError::RetryBufferTooSmall { slots })?;
        let mut cfg = cfg;
        cfg.caps.retry_buf_depth = retry.depth();
        // Room for the largest block, one unacknowledged ACK-only Crd_Ack
        // and the flit that always stays free.
        let most = retry.depth().saturating_sub(MAX_BLOCK_FLITS as u16 + 3);
        cfg.lockout_threshold = cfg.lockout_threshold.clamp(MIN_LOCKOUT_THRESHOLD, most);
        cfg.num_phy_reinit_threshold = cfg.num_phy_reinit_threshold.max(1);
        cfg.wait_timeout_ns = cfg.wait_timeout_ns.clamp(1_000, 10_000_000_000);
        Ok(Self {
            cfg,
            dll: Dll::new(),
            init: InitExchange::new(),
            req: RetryReqSm::new(
                cfg.num_retry_threshold,
                cfg.num_phy_reinit_threshold,
                cfg.wait_timeout_ns,
            ),
            ack: RetryAckSm::new(),
            mc: ModeChangeSm::new(),
            retry,
            neg: None,
            counters: Counters::default(),
            events: EventRing::new(),
            tracer: None,
            tx_credits: TxCredits::default(),
            tx_cur: None,
            tx_layout: None,
            vl_rr: 0,
            crd_rr: 0,
            since_header: u32::MAX,
            pending_ctrl: None,
            stalled: false,
            stalled_vls: 0,
            lockout_blocked: false,
            out_full: false,
            poke_armed: true,
            now: 0,
            last_release: 0,
            credit_deadline: None,
            init_heard: 0,
            rx_partial: [0; FLIT_BYTES],
            rx_partial_len: 0,
            rx_block: [0; MAX_BLOCK_BYTES],
            rx_have: 0,
            rx_expect: 0,
            rx_block_deadline: 0,
            rx_hdr: RxHdr::Ctrl,
            rx_pkt: None,
            rx_credits: RxCredits::default(),
            credit_due_since: None,
            owed_acks: 0,
            owed_pure: 0,
            since_ack: 0,
        })
    }

    /// Calls `tracer` on every state transition of every machine (`None`
    /// stops tracing).
    pub fn set_tracer(&mut self, tracer: Option<Tracer>) {
        self.tracer = tracer;
    }

    // ----- Observation -------------------------------------------------

    /// The DLL state.
    pub const fn state(&self) -> DllState {
        self.dll.state()
    }
    /// `true` in DLL_Normal (DLL_Status_Up).
    pub fn is_up(&self) -> bool {
        self.dll.state() == DllState::Normal
    }
    /// The configuration in use (as clamped by [`Link::new`]).
    pub const fn config(&self) -> &LinkConfig {
        &self.cfg
    }
    /// RETRY_REQ_SM state.
    pub const fn retry_req_state(&self) -> RetryReqState {
        self.req.state()
    }
    /// RETRY_ACK_SM state.
    pub const fn retry_ack_state(&self) -> RetryAckState {
        self.ack.state()
    }
    /// The negotiated parameters, once the peer's Init Block arrived.
    pub const fn negotiated(&self) -> Option<&Negotiated> {
        self.neg.as_ref()
    }
    /// Counters.
    pub const fn counters(&self) -> &Counters {
        &self.counters
    }
    /// The retry buffer (pointers, NumFreeBuf).
    pub const fn retry_buffer(&self) -> &RetryBuffer<S> {
        &self.retry
    }
    /// Sender-side credits.
    pub const fn tx_credits(&self) -> &TxCredits {
        &self.tx_credits
    }
    /// Receiver-side credits.
    pub const fn rx_credits(&self) -> &RxCredits {
        &self.rx_credits
    }
    /// RcvPtr.
    pub const fn rcv_ptr(&self) -> u16 {
        self.req.rcv_ptr()
    }
    /// NUM_RETRY.
    pub const fn num_retry(&self) -> u8 {
        self.req.num_retry()
    }
    /// NUM_PHY_REINIT.
    pub const fn num_phy_reinit(&self) -> u8 {
        self.req.num_phy_reinit()
    }
    /// ACK flits owed to the peer.
    pub const fn owed_acks(&self) -> u32 {
        self.owed_acks
    }
    /// Of those, flits of received ACK-only Crd_Acks (never acknowledged
    /// on their own, see `Documentation/ub/link.rst`).
    pub const fn owed_pure_acks(&self) -> u32 {
        self.owed_pure
    }
    /// `true` while the network layer must hold back (a VL's pending
    /// credit return reached its threshold, or the link is not up).
    pub fn backpressured(&self) -> bool {
        self.dll.state() != DllState::Normal || self.mc.active() || self.credit_return_forced()
    }

    /// The encapsulation mode in use.
    pub const fn mode(&self) -> Mode {
        self.cfg.mode
    }

    /// Starts an encapsulation mode switch (§4.3.3.8; the PHY primary
    /// port's request): the network layer is back-pressured, the DLLDP in
    /// progress completes, Block_Mode_Chg REQ goes out. When both sides
    /// exchanged REQ, flushed their ACKs in a Crd_Ack and exchanged ACK,
    /// [`Event::ModeChangeRetrain`] asks for the PHY retrain.
    pub fn request_mode_change(&mut self) -> Result<(), CtrlRequestError> {
        if self.dll.state() != DllState::Normal {
            return Err(CtrlRequestError::NotReady);
        }
        if !self.mc.request(self.cfg.mode, self.tracer) {
            return Err(CtrlRequestError::Busy);
        }
        Ok(())
    }

    /// The PHY retrained after [`Event::ModeChangeRetrain`] (raised by
    /// either end: the retrain is link-wide, so call this on both ends):
    /// the new mode takes effect, the held control blocks are re-sealed
    /// for it, and the retry pointers are realigned with a Retry_Req_Set
    /// (an entry into REQ, counted like every other).
    /// A port that has sent its Block_Mode_Chg ACK switches even if the
    /// peer's ACK was lost: the peer only retrains after receiving ours.
    /// Ignored outside a mode switch.
    pub fn mode_change_done(&mut self, now: u64) {
        let Some(mode) = self.mc.done(self.tracer) else {
            return;
        };
        if !self.retry.reseal_control_blocks(mode) {
            self.event(Event::ModeChangeFailed);
            self.request_link_reset();
        }
        self.cfg.mode = mode;
        self.rx_partial_len = 0;
        self.rx_have = 0;
        self.now = now;
        self.event(Event::ModeChanged(mode));
        let entered = self.req.enter_req(self.tracer);
        self.entered(entered);
    }

    /// Every timer's deadline (see [`TimerTable`]).
    pub fn timers(&self) -> TimerTable {
        let mut t = TimerTable::default();
        t.set(Timer::Wait, self.req.wait_deadline());
        t.set(Timer::PartialBlock, self.partial_block_deadline());
        t.set(Timer::LockoutPoke, self.poke_deadline());
        t.set(Timer::CreditStall, self.credit_deadline);
        t.set(Timer::CreditReturn, self.credit_return_deadline());
        t.set(Timer::Init, self.init_deadline());
        t
    }

    /// The next time [`Link::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers().next_deadline()
    }

    /// When a partially received block is given up (see
    /// [`Link::handle_timeout`]).
    fn partial_block_deadline(&self) -> Option<u64> {
        (self.rx_have > 0 && self.req.state() == RetryReqState::Normal)
            .then_some(self.rx_block_deadline)
    }

    /// When the Init exchange, waiting for the peer with RETRY_REQ_SM in
    /// NORMAL, requests retransmission (see [`Timer::Init`]).
    fn init_deadline(&self) -> Option<u64> {
        (matches!(self.dll.state(), DllState::ParamInit | DllState::CreditInit)
            && self.req.state() == RetryReqState::Normal)
            .then_some(self.init_heard.saturating_add(self.cfg.wait_timeout_ns))
    }

    /// When owed credits must go out in a Crd_Ack, whatever their count.
    fn credit_return_deadline(&self) -> Option<u64> {
        self.credit_due_since
            .map(|t| t.saturating_add(self.cfg.credit_return_delay_ns))
    }

    /// When a lock-out poke becomes due (see [`Link::poll_transmit`]).
    fn poke_deadline(&self) -> Option<u64> {
        if self.lockout_blocked && self.poke_armed && self.retry.used() > 0 {
            Some(
                self.last_release
                    .saturating_add(self.cfg.wait_timeout_ns / 2),
            )
        } else {
            None
        }
    }

    /// The next event, if any. Drain after every input (see
    /// [`EventRing`]).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    fn event(&mut self, ev: Event) {
        if matches!(
            ev,
            Event::Protocol(_) | Event::CreditOverflow(_) | Event::ReceiveOverflow(_)
        ) {
            self.counters.errors = self.counters.errors.wrapping_add(1);
        }
        if self.events.push(ev) {
            self.counters.events_dropped = self.counters.events_dropped.wrapping_add(1);
        }
    }

    /// Brings the DLL state in line with the Init exchange's step (its
    /// only driver besides link down).
    fn sync_dll(&mut self) {
        let to = self.init.step().dll_state();
        if self.dll.transition(to, self.tracer) {
            self.event(Event::State(to));
        }
    }

    /// Turns an entry into REQ or RETRAIN into its events.
    fn entered(&mut self, e: Entered) {
        if e.rollover {
            self.event(Event::RetryRollover);
        }
        match e.to {
            RetryReqState::Retrain => {
                self.counters.retrains = self.counters.retrains.wrapping_add(1);
                self.event(Event::RetrainRequest);
            }
            RetryReqState::Error => {
                self.event(Event::RetryError);
                self.request_link_reset();
            }
            _ => {}
        }
    }

    /// Asks the driver to initialise the link again on both ends
    /// ([`Event::LinkResetRequest`]).
    fn request_link_reset(&mut self) {
        self.counters.link_reset_requests = self.counters.link_reset_requests.wrapping_add(1);
        self.event(Event::LinkResetRequest);
    }

    // ----- PHY and management inputs ------------------------------------

    /// PHY LinkUp = 1: leave DLL_Disabled for DLL_Param_Init and start the
    /// retry alignment (RETRY_REQ_SM enters REQ, counted: a Retry_Req_Set
    /// is sent until a Retry_Ack_Set arrives). Ignored while RETRY_REQ_SM
    /// is in ERROR.
    pub fn link_up(&mut self, now: u64) {
        self.now = now;
        if self.dll.state() != DllState::Disabled || self.req.state() == RetryReqState::Error {
            return;
        }
        self.init.start(self.tracer);
        self.init_heard = now;
        self.sync_dll();
        let entered = self.req.enter_req(self.tracer);
        self.entered(entered);
    }

    /// PHY LinkUp = 0 (§4.8.4): a partially delivered DLLDP is completed
    /// with zero bytes and ERROR_FLAG; credits cleared; retry pointers to 0
    /// and NumFreeBuf to the depth; DLL_Disabled. The network layer must
    /// discard its queued packets. RETRY_REQ_SM ERROR stays latched.
    pub fn link_down(&mut self, _now: u64, sink: &mut impl RxSink) {
        if let Some(pkt) = self.rx_pkt.take() {
            if !pkt.drop {
                let (start, _) = pkt.layout.block_payload(usize::from(pkt.next));
                let total = usize::from(pkt.layout.payload_len);
                let mut left = total.saturating_sub(start);
                let zeros = [0u8; 64];
                loop {
                    let n = left.min(zeros.len());
                    left -= n;
                    sink.deliver(&Delivery {
                        vl: pkt.vl,
                        cfg: pkt.cfg,
                        rt: pkt.rt,
                        total_len: pkt.layout.payload_len,
                        first: false,
                        last: left == 0,
                        error_flag: left == 0,
                        data: zeros.get(..n).unwrap_or(&[]),
                    });
                    if left == 0 {
                        break;
                    }
                }
                self.counters.rx_poisoned = self.counters.rx_poisoned.wrapping_add(1);
            }
        }
        self.clear(true);
        self.sync_dll();
    }

    /// Management reset (UBFM): everything back to power-on, RETRY_REQ_SM
    /// ERROR cleared, DLL_Disabled. Counters are kept.
    ///
    /// Unlike [`link_down`](Self::link_down), which closes a partially
    /// delivered DLLDP with an ERROR_FLAG piece, a reset has no sink: that
    /// DLLDP is abandoned without a last piece. So the caller either takes
    /// the link down first (the driver does, which closes it) or resets its
    /// sink with the engine (`ub-fabric` drops what it was assembling); and
    /// a sink starts a packet afresh at any piece with `first` set (both
    /// do), so no abandoned bytes reach the network layer.
    pub fn reset(&mut self) {
        self.rx_pkt = None;
        self.clear(false);
        self.sync_dll();
    }

    /// Every machine to its initial state; `keep_error` keeps RETRY_REQ_SM
    /// ERROR latched (link down).
    fn clear(&mut self, keep_error: bool) {
        let tracer = self.tracer;
        self.req.clear(keep_error, tracer);
        self.ack.clear(tracer);
        self.init.stop(tracer);
        self.mc.clear(tracer);
        self.retry.reset();
        self.neg = None;
        self.tx_credits = TxCredits::default();
        self.tx_cur = None;
        self.vl_rr = 0;
        self.crd_rr = 0;
        self.since_header = u32::MAX;
        self.pending_ctrl = None;
        self.stalled = false;
        self.stalled_vls = 0;
        self.lockout_blocked = false;
        self.poke_armed = true;
        self.credit_deadline = None;
        self.rx_partial_len = 0;
        self.rx_have = 0;
        self.rx_expect = 0;
        self.rx_pkt = None;
        self.rx_credits = RxCredits::default();
        self.credit_due_since = None;
        self.owed_acks = 0;
        self.owed_pure = 0;
        self.since_ack = 0;
    }

    /// The PHY finished a retrain requested by [`Event::RetrainRequest`]:
    /// RETRY_REQ_SM goes from RETRAIN to REQ.
    pub fn phy_retrained(&mut self, now: u64) {
        self.now = now;
        if let Some(entered) = self.req.retrained(self.tracer) {
            self.rx_partial_len = 0;
            self.rx_have = 0;
            self.entered(entered);
        }
    }

    /// The PHY started a retrain on its own: RETRY_REQ_SM → RETRAIN.
    pub fn phy_retrain_started(&mut self, _now: u64) {
        if self.dll.state() != DllState::Disabled
            && !matches!(
                self.req.state(),
                RetryReqState::Retrain | RetryReqState::Error
            )
        {
            let entered = self.req.enter_retrain(self.tracer);
            self.entered(entered);
        }
    }

    /// The PHY lost `flits` flits (FEC decode failure or lost alignment).
    /// The flit stream restarts at a flit boundary.
    pub fn receive_error(&mut self, now: u64, flits: u32) {
        self.counters.rx_fec_errors = self.counters.rx_fec_errors.wrapping_add(u64::from(flits));
        self.rx_partial_len = 0;
        if self.dll.state() != DllState::Disabled && self.req.state() == RetryReqState::Normal {
            self.block_error(now);
        }
    }

    /// Serves every expired timer of the [`TimerTable`], in the order of
    /// [`Timer::ALL`]. The partial-block timeout covers a header corrupted
    /// into announcing a longer block than the peer sent: on an idle link
    /// the rest never comes, so after the WAIT timeout the partial block
    /// is treated as a CRC failure and retried. The credit-return delay
    /// and the lock-out poke are served by the next `poll_transmit`.
    pub fn handle_timeout(&mut self, now: u64) {
        for timer in Timer::ALL {
            // Re-read: serving one timer can disarm another.
            if !self.timers().expired(timer, now) {
                continue;
            }
            match timer {
                Timer::PartialBlock => {
                    self.counters.rx_block_timeouts =
                        self.counters.rx_block_timeouts.wrapping_add(1);
                    self.block_error(now);
                }
                Timer::Wait => {
                    self.counters.retry_timeouts = self.counters.retry_timeouts.wrapping_add(1);
                    self.event(Event::RetryAckTimeout);
                    let entered = self.req.enter_req(self.tracer);
                    self.entered(entered);
                }
                Timer::Init => {
                    // The peer's Init Block or initial credits may have
                    // been lost without the PHY noticing: ask for
                    // everything after RcvPtr again. Counted like any
                    // entry into REQ, so a peer that never answers ends
                    // in RETRAIN and then ERROR (a link reset request).
                    self.counters.init_timeouts = self.counters.init_timeouts.wrapping_add(1);
                    self.block_error(now);
                }
                Timer::CreditStall => {
                    self.credit_deadline = None;
                    self.counters.credit_timeouts = self.counters.credit_timeouts.wrapping_add(1);
                    self.event(Event::CreditReturnTimeout);
                }
                Timer::CreditReturn | Timer::LockoutPoke => {}
            }
        }
    }

    /// Queues a Param_Exchg block (DLL_Normal only).
    pub fn send_param_exchg(&mut self, block: ParamExchg) -> Result<(), CtrlRequestError> {
        self.queue_ctrl(ControlBlock::ParamExchg(block))
    }

    /// Queues a Lane_Manage block (DLL_Normal only).
    pub fn send_lane_manage(&mut self, cmd: LaneManage) -> Result<(), CtrlRequestError> {
        self.queue_ctrl(ControlBlock::LaneManage(cmd))
    }

    fn queue_ctrl(&mut self, cb: ControlBlock) -> Result<(), CtrlRequestError> {
        if self.dll.state() != DllState::Normal {
            return Err(CtrlRequestError::NotReady);
        }
        if self.pending_ctrl.is_some() {
            return Err(CtrlRequestError::Busy);
        }
        self.pending_ctrl = Some(cb);
        Ok(())
    }

    // ----- Shared by the receive and transmit paths ---------------------

    /// A CRC or FEC failure: the partial block is dropped, REQ entered.
    fn block_error(&mut self, _now: u64) {
        self.rx_have = 0;
        let entered = self.req.enter_req(self.tracer);
        self.entered(entered);
    }

    fn peer_modulus(&self) -> u32 {
        self.neg
            .map_or(0x1_0000, |n| u32::from(n.peer_retry_buf_depth).max(1))
    }

    /// A retried block of `flits` was accepted: RcvPtr advances, the ACK
    /// becomes owed and the retry counters clear (progress was made).
    fn accept_retried(&mut self, flits: usize, pure_ack: bool) {
        let m = self.peer_modulus();
        self.req.accept(flits, m);
        self.init_heard = self.now;
        self.owed_acks = self.owed_acks.saturating_add(flits as u32);
        if pure_ack {
            self.owed_pure = self.owed_pure.saturating_add(flits as u32);
        }
    }

    /// Credit_Init → Normal once both SDs are exchanged.
    fn credit_init_progress(&mut self) {
        if self.init.finish(self.tracer) {
            self.tx_credits.finish_init();
        }
        self.sync_dll();
    }

    /// Credits were returned: the delay stops once nothing returnable is
    /// left.
    fn credits_returned(&mut self) {
        if self.credit_due_since.is_some() && !(0..MAX_VLS).any(|vl| self.returnable(vl)) {
            self.credit_due_since = None;
        }
    }

    /// `true` if `vl` owes at least one Crd_Ack grain.
    fn returnable(&self, vl: usize) -> bool {
        let k = self
            .neg
            .as_ref()
            .and_then(|n| n.ctrl_credit_grain.get(vl).copied())
            .unwrap_or(1);
        self.rx_credits.pending(vl) >= u32::from(k.max(1))
    }

    fn credit_return_forced(&self) -> bool {
        let t = self.cfg.credit_return_threshold.max(1);
        (0..MAX_VLS).any(|vl| self.rx_credits.pending(vl) >= t)
    }

    fn substantive_acks(&self) -> u32 {
        self.owed_acks.saturating_sub(self.owed_pure)
    }
}

fn is_retry_block(cb: &ControlBlock) -> bool {
    matches!(
        cb,
        ControlBlock::RetryIdle | ControlBlock::RetryReq(_) | ControlBlock::RetryAck(_)
    )
}

/// The largest DLLDP payload of the engine's mode.
pub fn max_dlldp_payload(mode: Mode) -> usize {
    max_payload(mode)
}

/// Flits of the Init Block this engine sends.
pub const fn init_block_flits() -> usize {
    INIT_BLOCK_FLITS
}
