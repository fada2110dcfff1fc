// SPDX-License-Identifier: GPL-2.0
//! Data link layer targets: block framing, every DLLCB, the Init Block and
//! its negotiation, and the link engine fed arbitrary flits.

use std::cell::RefCell;
use std::collections::VecDeque;

use ub_proto::link::ctrl::{
    negotiate, ControlBlock, CtrlKind, InitParams, LaneManage, Negotiated, ParamExchg,
    INIT_BLOCK_FLITS, PARAM_EXCHG_MAX_WORDS,
};
use ub_proto::link::engine::{
    Delivery, DllState, Event, Link, LinkConfig, RxSink, TxPacket, TxSource, FULL_CAPS,
};
use ub_proto::link::frame::{
    check_block, dlldb_payload, encode_dlldb, is_dlldp_cfg, max_payload, seal_block, Lbh, Lch, Lph,
    Mode, Plength, FLIT_BYTES, MAX_BLOCK_BYTES, MAX_BLOCK_FLITS, MAX_VLS,
};
use ub_proto::link::retry::RetrySlot;

use crate::input::{Input, Output};

/// LBH byte 0, bit 1 and byte 1, bit 4 are reserved: `Lbh::decode`
/// ignores them and `Lbh::encode` writes zero there.
const LBH_RESERVED: [u8; 2] = [0x02, 0x10];

fn mode_of(flags: u8) -> Mode {
    if flags & 1 == 0 {
        Mode::Crc
    } else {
        Mode::NonCrc
    }
}

/// LPH, LBH, LCH, PLENGTH and a whole DLLDP (block split, trailers,
/// payload extraction).
///
/// Input: a flags byte (bit 0: non-CRC mode; bit 1: seal every block's
/// trailer first, so the payload path is reached; bit 2: ERROR_FLAG when
/// sealing), then the blocks.
///
/// Asserts: LCH re-encodes to the same four bytes (it has no reserved
/// bits: decode checks the fixed ones); LBH and LPH re-encode to the same
/// bytes with the reserved bits cleared; a decoded PLENGTH describes at
/// most [`max_payload`] bytes and the canonical PLENGTH of that payload
/// length decodes to the same length in no more flits; a sealed block
/// passes its trailer check with the flag it was sealed with; a DLLDP
/// whose blocks all check re-encodes (`encode_dlldb`) to blocks that
/// decode to the same headers and payload. The padding after a block's
/// payload is not checked by a receiver, so re-encoding compares values,
/// not bytes.
pub fn link_frame(data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let mode = mode_of(flags);
    let seal = flags & 2 != 0;
    let error_flag = flags & 4 != 0;
    let mut bytes = inp.rest().to_vec();

    if let Ok(lch) = Lch::decode(&bytes) {
        assert!((1..=32).contains(&lch.flits));
        assert_eq!(lch.encode()[..], bytes[..4], "LCH re-encoding");
    }
    if let Ok(lbh) = Lbh::decode(&bytes) {
        assert!(is_dlldp_cfg(lbh.cfg) && lbh.vl < 16 && lbh.crd_vl < 16);
        let want = [bytes[0] & !LBH_RESERVED[0], bytes[1] & !LBH_RESERVED[1]];
        assert_eq!(lbh.encode(), want, "LBH re-encoding");
    }
    let Ok(lph) = Lph::decode(&bytes) else {
        return;
    };
    let want = [
        bytes[0] & !LBH_RESERVED[0],
        bytes[1] & !LBH_RESERVED[1],
        bytes[2],
        bytes[3],
    ];
    assert_eq!(lph.encode(), want, "LPH re-encoding");
    let Ok(layout) = lph.plength.decode(mode) else {
        return;
    };
    assert_eq!(layout.flits(), lph.plength.flits());
    assert_eq!(usize::from(layout.blocks), lph.plength.blocks());
    let len = usize::from(layout.payload_len);
    assert!(len <= max_payload(mode), "PLENGTH beyond the largest DLLDP");
    let canon = Plength::encode(mode, len);
    assert!(canon.is_ok(), "no PLENGTH for a decoded length: {layout:?}");
    if let Ok((pl, canon)) = canon {
        assert_eq!(usize::from(canon.payload_len), len);
        assert_eq!(pl.decode(mode), Ok(canon), "canonical PLENGTH round trip");
        assert!(canon.flits() <= layout.flits(), "{canon:?} vs {layout:?}");
    }

    // The whole DLLDP, block by block.
    let flits = layout.flits();
    if bytes.len() < flits * FLIT_BYTES {
        return;
    }
    bytes.truncate(flits * FLIT_BYTES);
    let mut payload = Vec::with_capacity(len);
    let mut lbhs = Vec::with_capacity(usize::from(layout.blocks));
    let mut last_flag = false;
    let mut at = 0;
    for index in 0..usize::from(layout.blocks) {
        let last = index + 1 == usize::from(layout.blocks);
        let n = layout.block_flits(index) * FLIT_BYTES;
        let block = &mut bytes[at..at + n];
        at += n;
        let lbh = if index == 0 {
            lph.base
        } else {
            match Lbh::decode(block) {
                Ok(l) => l,
                Err(_) => return,
            }
        };
        if seal {
            seal_block(mode, block, last, error_flag && last);
        }
        let Ok(flag) = check_block(mode, block, last) else {
            assert!(!seal, "a sealed block failed its check");
            return;
        };
        if seal {
            assert_eq!(flag, error_flag && last, "ERROR_FLAG after sealing");
        }
        last_flag = flag;
        let piece = dlldb_payload(&layout, index, block);
        assert!(piece.is_some(), "block {index} shorter than its payload");
        payload.extend_from_slice(piece.unwrap_or(&[]));
        lbhs.push(lbh);
    }
    assert_eq!(payload.len(), len, "payload pieces do not add up");

    let mut out = [0u8; MAX_BLOCK_BYTES];
    for (index, &lbh) in lbhs.iter().enumerate() {
        let last = index + 1 == usize::from(layout.blocks);
        let n = encode_dlldb(&layout, index, lbh, lph.rt, &payload, last_flag, &mut out);
        assert_eq!(n, Ok(layout.block_flits(index) * FLIT_BYTES));
        let block = &out[..layout.block_flits(index) * FLIT_BYTES];
        if index == 0 {
            assert_eq!(Lph::decode(block), Ok(lph), "LPH after re-encoding");
        } else {
            assert_eq!(Lbh::decode(block), Ok(lbh), "LBH after re-encoding");
        }
        assert_eq!(check_block(mode, block, last), Ok(last_flag && last));
        let (start, plen) = layout.block_payload(index);
        assert_eq!(
            dlldb_payload(&layout, index, block),
            Some(&payload[start..start + plen])
        );
    }
}

/// Every DLLCB (Null, NOB, Retry_Idle/Req/Ack, Crd_Ack, Param_Exchg,
/// Lane_Manage, Block_Mode_Chg, Init).
///
/// Input: a flags byte (as [`link_frame`]: mode, seal, ERROR_FLAG), then
/// the block.
///
/// Asserts: a block that decodes has an LCH of its kind and exactly the
/// length the LCH announces; it re-encodes, in the same mode, to a block
/// of [`ControlBlock::flits`] flits (the length it came with, except an
/// Init Block, which this implementation always sends in 5 flits) that
/// decodes to the same value with ERROR_FLAG clear. Reserved bytes are
/// ignored on decode and zero on encode, so the comparison is by value.
pub fn link_ctrl(data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let mode = mode_of(flags);
    let mut block = inp.rest().to_vec();
    if flags & 2 != 0 {
        seal_block(mode, &mut block, true, flags & 4 != 0);
    }
    let Ok((cb, flag)) = ControlBlock::decode(mode, &block) else {
        return;
    };
    if flags & 2 != 0 {
        assert_eq!(flag, flags & 4 != 0, "ERROR_FLAG after sealing");
    }
    let lch = Lch::decode(&block);
    assert!(lch.is_ok());
    if let Ok(lch) = lch {
        assert_eq!(
            CtrlKind::from_codes(lch.ctrl, lch.sub_ctrl),
            Some(cb.kind())
        );
        assert_eq!(block.len(), usize::from(lch.flits) * FLIT_BYTES);
    }
    let mut out = [0u8; MAX_BLOCK_BYTES];
    let n = cb.encode(mode, &mut out);
    assert_eq!(n, Ok(cb.flits() * FLIT_BYTES));
    if cb.kind() != CtrlKind::Init {
        assert_eq!(cb.flits() * FLIT_BYTES, block.len());
    }
    let again = ControlBlock::decode(mode, &out[..cb.flits() * FLIT_BYTES]);
    assert_eq!(again, Ok((cb, false)), "DLLCB re-encoding");
}

/// The Init Block (§4.3.3.9) and its negotiation (§4.4).
///
/// Input: the Init Block's body (everything after the LCH, up to its 5
/// flits); the LCH and trailer are made valid so that every input is an
/// Init Block.
///
/// Asserts: the block decodes as an Init Block and re-encodes to the same
/// parameters; negotiating it against several local capability sets, in
/// both directions, yields the same agreed values either way, every grain
/// and size a power of two, VL_ENABLE the contiguous VLs from VL0, the
/// lower FEATURE_ID (or the fallback 1); and two engines advertising the
/// two sets come up to DLL_Normal and carry a packet each way intact (the
/// engine supports every value it may negotiate).
pub fn link_init(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut block = [0u8; INIT_BLOCK_FLITS * FLIT_BYTES];
    let body = inp.bytes(block.len() - 4);
    block[4..4 + body.len()].copy_from_slice(body);
    let (ctrl, sub_ctrl) = CtrlKind::Init.codes();
    let lch = Lch {
        flits: INIT_BLOCK_FLITS as u8,
        ctrl,
        sub_ctrl,
        byte3: 0,
    };
    block[..4].copy_from_slice(&lch.encode());
    seal_block(Mode::Crc, &mut block, true, false);
    let decoded = ControlBlock::decode(Mode::Crc, &block);
    let Ok((ControlBlock::Init(peer), false)) = decoded else {
        panic!("a valid Init Block did not decode: {decoded:?}");
    };
    let mut out = [0u8; INIT_BLOCK_FLITS * FLIT_BYTES];
    assert!(ControlBlock::Init(peer).encode(Mode::Crc, &mut out).is_ok());
    assert_eq!(
        ControlBlock::decode(Mode::Crc, &out),
        Ok((ControlBlock::Init(peer), false))
    );

    let mandatory = InitParams {
        feature_id: 1,
        rxbuf_vl_share: false,
        data_ack_grain: 0x20,
        ctrl_ack_grain: 0x01,
        flow_ctrl_size: 0x08,
        vl_enable: 0x0001,
        retry_buf_depth: 0,
        packet_min_interval: 0,
        ctrl_credit_grain: [0x01; MAX_VLS],
        data_credit_grain: [0x04; MAX_VLS],
    };
    let locals = [LinkConfig::default().caps, FULL_CAPS, mandatory, peer];
    for local in &locals {
        for want_sharing in [false, true] {
            let a = negotiate(local, &peer, want_sharing);
            let b = negotiate(&peer, local, want_sharing);
            check_negotiated(&a, local, &peer);
            check_negotiated(&b, &peer, local);
            assert_eq!(
                (
                    a.feature_id,
                    a.data_ack_grain,
                    a.ctrl_ack_grain,
                    a.cell_flits,
                    a.vl_enable,
                    a.vls,
                    a.ctrl_credit_grain,
                    a.data_credit_grain
                ),
                (
                    b.feature_id,
                    b.data_ack_grain,
                    b.ctrl_ack_grain,
                    b.cell_flits,
                    b.vl_enable,
                    b.vls,
                    b.ctrl_credit_grain,
                    b.data_credit_grain
                ),
                "negotiation is not symmetric"
            );
            assert_eq!(a.tx_sharing, want_sharing && peer.rxbuf_vl_share);
            assert_eq!(a.rx_sharing, local.rxbuf_vl_share);
            assert_eq!(a.peer_retry_buf_depth, peer.retry_buf_depth);
            assert_eq!(a.peer_packet_min_interval, peer.packet_min_interval);
        }
    }

    // End to end: the default engine against one advertising `peer`.
    // PACKET_MIN_INTERVAL pads with NOBs and slows the bring-up; capped so
    // an input cannot make a run take seconds.
    let caps = InitParams {
        packet_min_interval: peer.packet_min_interval.min(8),
        ..peer
    };
    let cfg_b = LinkConfig {
        caps,
        want_sharing: inp.u8() & 1 != 0,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(LinkConfig::default(), cfg_b);
    assert!(
        pair.bring_up(20_000),
        "no DLL_Normal with the peer's caps {caps:?}: {:?} / {:?}",
        pair.a.state(),
        pair.b.state()
    );
    let pa = Pkt {
        vl: 0,
        cfg: 7,
        payload: (0..700u32).map(|i| i as u8).collect(),
    };
    let pb = Pkt {
        vl: 0,
        cfg: 3,
        payload: (0..300u32).map(|i| (i * 7) as u8).collect(),
    };
    pair.qa.q.push_back(pa.clone());
    pair.qb.q.push_back(pb.clone());
    for _ in 0..20_000 {
        if !pair.sa.got.is_empty() && !pair.sb.got.is_empty() {
            break;
        }
        pair.step();
    }
    assert_eq!(pair.sb.got, vec![pa.payload], "a -> b with {caps:?}");
    assert_eq!(pair.sa.got, vec![pb.payload], "b -> a with {caps:?}");
}

fn check_negotiated(n: &Negotiated, local: &InitParams, peer: &InitParams) {
    let pow2 = |v: u16| v.is_power_of_two() && v <= 128;
    assert!(pow2(n.data_ack_grain) && pow2(n.ctrl_ack_grain) && pow2(n.cell_flits));
    assert!((1..=16).contains(&n.vls));
    assert_eq!(u32::from(n.vl_enable), (1u32 << n.vls) - 1);
    assert!(n.ctrl_credit_grain.iter().all(|&g| pow2(g)));
    assert!(n.data_credit_grain.iter().all(|&g| pow2(g)));
    let lower = local.feature_id.min(peer.feature_id);
    assert_eq!(n.feature_id, if lower == 0 { 1 } else { lower });
}

// ----- a pair of engines ---------------------------------------------------

type TestLink = Link<Vec<RetrySlot>>;

/// A packet queued for, or delivered by, an engine.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pkt {
    vl: u8,
    cfg: u8,
    payload: Vec<u8>,
}

/// The network layer's queue: one FIFO, each packet on its own VL.
#[derive(Clone, Debug, Default)]
struct Queue {
    q: VecDeque<Pkt>,
}

impl TxSource for Queue {
    fn ready(&self) -> u16 {
        self.q.front().map_or(0, |p| 1 << (p.vl & 0xf))
    }
    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        self.q.front().filter(|p| p.vl == vl).map(|p| TxPacket {
            cfg: p.cfg,
            rt: 0,
            error_flag: false,
            payload: &p.payload,
        })
    }
    fn pop(&mut self, _vl: u8) {
        self.q.pop_front();
    }
}

/// An [`RxSink`] that checks the delivery contract as pieces arrive.
///
/// Pieces of one DLLDP come in order and never interleave with another's
/// (`RxSink::deliver`); the first piece opens a DLLDP, the last closes it
/// with exactly `total_len` bytes; only the last piece carries
/// ERROR_FLAG.
#[derive(Clone, Debug, Default)]
struct CheckSink {
    /// The DLLDP being delivered: VL, CFG, total length, bytes so far.
    open: Option<(u8, u8, u16, usize)>,
    /// Payload bytes delivered by `handle_receive` (not `link_down`'s
    /// zero fill, which the engine does not count as received).
    rx_bytes: u64,
    /// DLLDPs completed by `handle_receive`.
    rx_dlldps: u64,
    /// DLLDPs completed with ERROR_FLAG (`link_down` included).
    poisoned: u64,
    /// Set around `link_down`.
    in_link_down: bool,
    /// Complete payloads, when `keep` is set.
    got: Vec<Vec<u8>>,
    cur: Vec<u8>,
    keep: bool,
}

impl RxSink for CheckSink {
    fn deliver(&mut self, d: &Delivery<'_>) {
        assert!(is_dlldp_cfg(d.cfg) && d.vl < 16, "{d:?}");
        if d.first {
            assert!(self.open.is_none(), "a DLLDP began inside another");
            self.open = Some((d.vl, d.cfg, d.total_len, 0));
            self.cur.clear();
        }
        let Some((vl, cfg, total, got)) = self.open.as_mut() else {
            panic!("a piece without a first piece: {d:?}");
        };
        assert_eq!((d.vl, d.cfg, d.total_len), (*vl, *cfg, *total));
        *got += d.data.len();
        assert!(*got <= usize::from(*total), "more bytes than total_len");
        assert!(!d.error_flag || d.last, "ERROR_FLAG before the last piece");
        if !self.in_link_down {
            self.rx_bytes += d.data.len() as u64;
        }
        if self.keep {
            self.cur.extend_from_slice(d.data);
        }
        if d.last {
            assert_eq!(*got, usize::from(*total), "fewer bytes than total_len");
            self.open = None;
            if !self.in_link_down {
                self.rx_dlldps += 1;
            }
            if d.error_flag {
                self.poisoned += 1;
            }
            if self.keep {
                self.got.push(std::mem::take(&mut self.cur));
            }
        }
    }
}

/// Two engines wired back to back (no delay, no errors).
struct Pair {
    a: TestLink,
    b: TestLink,
    qa: Queue,
    qb: Queue,
    sa: CheckSink,
    sb: CheckSink,
    now: u64,
    retrain: [bool; 2],
    mode_change: bool,
    buf: Vec<u8>,
    /// What `a` sent, kept when `record` is set (seeds).
    sent_by_a: Vec<u8>,
    record: bool,
}

fn new_link(cfg: LinkConfig) -> TestLink {
    match Link::new(cfg, vec![RetrySlot::EMPTY; 512]) {
        Ok(link) => link,
        Err(e) => panic!("engine refused {cfg:?}: {e:?}"),
    }
}

impl Pair {
    fn new(a: LinkConfig, b: LinkConfig) -> Self {
        Self {
            a: new_link(a),
            b: new_link(b),
            qa: Queue::default(),
            qb: Queue::default(),
            sa: CheckSink {
                keep: true,
                ..CheckSink::default()
            },
            sb: CheckSink {
                keep: true,
                ..CheckSink::default()
            },
            now: 0,
            retrain: [false; 2],
            mode_change: false,
            buf: vec![0; 64 * FLIT_BYTES],
            sent_by_a: Vec::new(),
            record: false,
        }
    }

    fn step(&mut self) {
        self.now += 100;
        let now = self.now;
        if self.mode_change {
            self.mode_change = false;
            self.a.mode_change_done(now);
            self.b.mode_change_done(now);
        }
        for (link, retrain) in [(&mut self.a, 0), (&mut self.b, 1)] {
            if link.poll_timeout().is_some_and(|d| d <= now) {
                link.handle_timeout(now);
            }
            if self.retrain[retrain] {
                self.retrain[retrain] = false;
                link.phy_retrained(now);
            }
        }
        let n = self.a.poll_transmit(now, &mut self.buf, &mut self.qa);
        if self.record {
            self.sent_by_a.extend_from_slice(&self.buf[..n]);
        }
        self.b.handle_receive(now, &self.buf[..n], &mut self.sb);
        let n = self.b.poll_transmit(now, &mut self.buf, &mut self.qb);
        self.a.handle_receive(now, &self.buf[..n], &mut self.sa);
        for (link, retrain) in [(&mut self.a, 0), (&mut self.b, 1)] {
            while let Some(e) = link.poll_event() {
                match e {
                    Event::RetrainRequest => self.retrain[retrain] = true,
                    Event::ModeChangeRetrain(_) => self.mode_change = true,
                    _ => {}
                }
            }
        }
    }

    fn bring_up(&mut self, max: usize) -> bool {
        self.a.link_up(self.now);
        self.b.link_up(self.now);
        for _ in 0..max {
            self.step();
            if self.a.state() == DllState::Normal && self.b.state() == DllState::Normal {
                // Let the initial credits and ACKs settle.
                for _ in 0..50 {
                    self.step();
                }
                return true;
            }
        }
        false
    }
}

// ----- the engine target ---------------------------------------------------

/// An engine to start from and what its sink has seen so far.
#[derive(Clone)]
struct Template {
    link: TestLink,
    sink: CheckSink,
}

/// Per mode: disabled; waiting in DLL_Param_Init; up; up with a DLLDP
/// half received. Built once per thread (the engines are `Clone`).
fn templates() -> Vec<Template> {
    let mut v = Vec::new();
    for mode in [Mode::Crc, Mode::NonCrc] {
        let cfg = LinkConfig {
            mode,
            ..LinkConfig::default()
        };
        let fresh = new_link(cfg);
        v.push(Template {
            link: fresh.clone(),
            sink: CheckSink::default(),
        });
        let mut waiting = fresh;
        waiting.link_up(0);
        let _ = waiting.poll_transmit(0, &mut [0u8; 4096], &mut Queue::default());
        v.push(Template {
            link: waiting,
            sink: CheckSink::default(),
        });
        let mut pair = Pair::new(cfg, cfg);
        assert!(pair.bring_up(20_000), "templates: no bring-up");
        let sink = fresh_counts(&pair.sb);
        v.push(Template {
            link: pair.b.clone(),
            sink,
        });
        pair.qa.q.push_back(Pkt {
            vl: 0,
            cfg: 7,
            payload: vec![0x5a; 5000],
        });
        let before = pair.sb.rx_bytes;
        while pair.sb.rx_bytes == before {
            pair.step();
        }
        let sink = fresh_counts(&pair.sb);
        assert!(sink.open.is_some(), "templates: the DLLDP arrived whole");
        v.push(Template {
            link: pair.b.clone(),
            sink,
        });
    }
    v
}

/// The sink of a template: the DLLDP it has open, if any, and counts
/// from zero (the engine's counters are taken as the base).
fn fresh_counts(sink: &CheckSink) -> CheckSink {
    CheckSink {
        open: sink.open,
        ..CheckSink::default()
    }
}

thread_local! {
    static TEMPLATES: RefCell<Option<Vec<Template>>> = const { RefCell::new(None) };
}

fn template(i: u8) -> Template {
    TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        let v = t.get_or_insert_with(templates);
        v[usize::from(i) % v.len()].clone()
    })
}

/// Operations of [`link_engine`]'s input.
mod op {
    pub(super) const RAW: u8 = 0;
    pub(super) const SEALED: u8 = 1;
    pub(super) const FEC_LOSS: u8 = 2;
    pub(super) const TIME: u8 = 3;
    pub(super) const DEADLINE: u8 = 4;
    pub(super) const TRANSMIT: u8 = 5;
    pub(super) const RETRAINED: u8 = 6;
    pub(super) const RETRAIN_STARTED: u8 = 7;
    pub(super) const DOWN_UP: u8 = 8;
    pub(super) const RESET: u8 = 9;
    pub(super) const MODE_CHANGE: u8 = 10;
    pub(super) const CTRL_REQUEST: u8 = 11;
    pub(super) const COUNT: u8 = 12;
}

/// The CTRL/SUB_CTRL byte of each DLLCB kind, for sealed blocks.
const CTRL_CODES: [u8; 10] = [0x00, 0x01, 0x10, 0x11, 0x12, 0x24, 0x30, 0x41, 0x50, 0xc8];

/// The link engine (`link::Link`) fed arbitrary flits and PHY events.
///
/// Input: a template byte (engine state and mode: disabled, waiting for
/// the peer's Init Block, up, up with a DLLDP half received; CRC or
/// non-CRC), then operations: raw bytes in any chunking, whole blocks
/// with a valid header shape and trailer (so the decoders behind the CRC
/// are reached), FEC losses, time passing and timers, transmission,
/// retrains, link down/up, reset, mode changes, Param_Exchg and
/// Lane_Manage requests.
///
/// Asserts, after every operation: the delivery contract ([`RxSink`]:
/// pieces in order, never interleaved, lengths adding up to `total_len`,
/// ERROR_FLAG only on the last piece); the counters agree with what was
/// fed and delivered (`rx_flits` never exceeds the whole flits fed,
/// `rx_payload_bytes`, `rx_dlldps` and `rx_poisoned` equal what the sink
/// got, blocks and DLLDPs never exceed flits); transmission writes whole
/// flits, within the buffer, counted in `tx_flits`.
pub fn link_engine(data: &[u8]) {
    let mut inp = Input::new(data);
    let Template { mut link, mut sink } = template(inp.u8());
    let base = *link.counters();
    let mut now: u64 = 1_000_000;
    let mut fed: u64 = 0;
    let mut queue = Queue::default();
    let mut out = vec![0u8; 96 * FLIT_BYTES];
    let mut steps = 0;
    while !inp.is_empty() && steps < 256 {
        steps += 1;
        match inp.u8() % op::COUNT {
            op::RAW => {
                let n = usize::from(inp.u16() % 2048);
                let bytes = inp.bytes(n);
                fed += bytes.len() as u64;
                link.handle_receive(now, bytes, &mut sink);
            }
            op::SEALED => {
                let flits = usize::from(inp.u8()) % MAX_BLOCK_FLITS + 1;
                let shape = inp.u8();
                let mut block = vec![0u8; flits * FLIT_BYTES];
                let body = inp.bytes(block.len());
                block[..body.len()].copy_from_slice(body);
                match shape & 3 {
                    0 => {
                        let code = CTRL_CODES[usize::from(shape >> 2) % CTRL_CODES.len()];
                        block[0] = (((flits - 1) as u8) << 2) | 0b10;
                        block[1] = 0;
                        block[2] = code;
                    }
                    1 => {
                        let end = u16::from(block[3] & 0x1f);
                        block[1] =
                            (block[1] & 0xf0) | [3, 4, 5, 6, 7, 9][usize::from(shape >> 2) % 6];
                        let pl = Plength::from_raw((((flits - 1) as u16) << 5) | end);
                        if let Ok(lph) = Lph::decode(&block) {
                            block[..4].copy_from_slice(&Lph { plength: pl, ..lph }.encode());
                        }
                    }
                    2 => {
                        block[1] =
                            (block[1] & 0xf0) | [3, 4, 5, 6, 7, 9][usize::from(shape >> 2) % 6]
                    }
                    _ => {}
                }
                seal_block(link.mode(), &mut block, true, shape & 0x80 != 0);
                fed += block.len() as u64;
                link.handle_receive(now, &block, &mut sink);
            }
            op::FEC_LOSS => link.receive_error(now, u32::from(inp.u8() % 40)),
            op::TIME => {
                now += u64::from(inp.u16()) * 64;
                link.handle_timeout(now);
            }
            op::DEADLINE => {
                if let Some(d) = link.poll_timeout() {
                    now = now.max(d);
                    link.handle_timeout(now);
                }
            }
            op::TRANSMIT => {
                let vl = inp.u8() & 0xf;
                let len = usize::from(inp.u16()) % 5000 + 1;
                let cfg = [3, 4, 5, 6, 7, 9, 0, 15][usize::from(inp.u8() & 7)];
                queue.q.push_back(Pkt {
                    vl,
                    cfg,
                    payload: vec![0xa5; len],
                });
                let limit = usize::from(inp.u8()) % out.len() + 1;
                let before = link.counters().tx_flits;
                let n = link.poll_transmit(now, &mut out[..limit], &mut queue);
                assert!(n <= limit && n % FLIT_BYTES == 0, "wrote {n} of {limit}");
                assert_eq!(
                    link.counters().tx_flits.wrapping_sub(before),
                    (n / FLIT_BYTES) as u64
                );
            }
            op::RETRAINED => link.phy_retrained(now),
            op::RETRAIN_STARTED => link.phy_retrain_started(now),
            op::DOWN_UP => {
                sink.in_link_down = true;
                link.link_down(now, &mut sink);
                sink.in_link_down = false;
                assert!(sink.open.is_none(), "link_down left a DLLDP open");
                link.link_up(now);
            }
            op::RESET => {
                // A management reset abandons a DLLDP half delivered
                // without completing it (unlike link_down): the port
                // drops what it collected.
                link.reset();
                sink.open = None;
                link.link_up(now);
            }
            op::MODE_CHANGE => {
                if inp.u8() & 1 == 0 {
                    let _ = link.request_mode_change();
                } else {
                    link.mode_change_done(now);
                }
            }
            _ => {
                let w = inp.u32();
                if w & 1 == 0 {
                    let len = (w >> 1) as u8 % PARAM_EXCHG_MAX_WORDS as u8 + 1;
                    let _ = link.send_param_exchg(ParamExchg {
                        len,
                        words: [w; PARAM_EXCHG_MAX_WORDS],
                    });
                } else {
                    let _ = link.send_lane_manage(LaneManage {
                        req_id: 5,
                        change_rlw: true,
                        tlw: (w >> 8) as u8,
                        rlw: (w >> 16) as u8,
                        ..LaneManage::default()
                    });
                }
            }
        }
        while link.poll_event().is_some() {}
        check_counters(&link, &base, &sink, fed);
    }
}

fn check_counters(link: &TestLink, base: &ub_proto::link::Counters, sink: &CheckSink, fed: u64) {
    let c = link.counters();
    let d = |now: u64, then: u64| now.wrapping_sub(then);
    let flits = d(c.rx_flits, base.rx_flits);
    assert!(
        flits <= fed / FLIT_BYTES as u64,
        "{flits} flits from {fed} bytes"
    );
    assert_eq!(d(c.rx_payload_bytes, base.rx_payload_bytes), sink.rx_bytes);
    assert_eq!(d(c.rx_dlldps, base.rx_dlldps), sink.rx_dlldps);
    assert_eq!(d(c.rx_poisoned, base.rx_poisoned), sink.poisoned);
    assert!(c.rx_blocks <= c.rx_flits, "{c:?}");
    assert!(
        c.rx_dlldps.wrapping_add(c.rx_dropped_dlldps) <= c.rx_blocks,
        "{c:?}"
    );
    assert!(c.tx_blocks <= c.tx_flits, "{c:?}");
}

// ----- seeds ---------------------------------------------------------------

/// Real blocks: what an engine sends while it brings a link up and
/// carries three packets.
fn real_traffic(mode: Mode) -> (Vec<u8>, Vec<u8>) {
    let cfg = LinkConfig {
        mode,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(cfg, cfg);
    pair.record = true;
    let up = pair.bring_up(20_000);
    assert!(up);
    let bring_up = std::mem::take(&mut pair.sent_by_a);
    for (i, len) in [40usize, 700, 3000].into_iter().enumerate() {
        pair.qa.q.push_back(Pkt {
            vl: 0,
            cfg: [7, 3, 4][i],
            payload: (0..len).map(|b| b as u8).collect(),
        });
    }
    for _ in 0..200 {
        pair.step();
    }
    (bring_up, std::mem::take(&mut pair.sent_by_a))
}

pub(crate) fn seeds_frame() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for mode in [Mode::Crc, Mode::NonCrc] {
        let flags = if mode == Mode::Crc { 0 } else { 1 };
        for (len, cfg) in [(0usize, 7u8), (16, 3), (620, 4), (700, 6), (3000, 9)] {
            let Ok((_, layout)) = Plength::encode(mode, len) else {
                continue;
            };
            let payload: Vec<u8> = (0..len).map(|b| (b * 3) as u8).collect();
            let mut o = Output::default();
            o.u8(flags);
            let mut block = [0u8; MAX_BLOCK_BYTES];
            for index in 0..usize::from(layout.blocks) {
                let lbh = Lbh {
                    crd: index == 0,
                    ack: false,
                    crd_vl: 1,
                    vl: 2,
                    cfg,
                };
                if let Ok(n) = encode_dlldb(&layout, index, lbh, 1, &payload, false, &mut block) {
                    o.raw(&block[..n]);
                }
            }
            v.push(o.done());
        }
    }
    v
}

pub(crate) fn seeds_ctrl() -> Vec<Vec<u8>> {
    let mut blocks = vec![
        ControlBlock::Null,
        ControlBlock::Nob,
        ControlBlock::RetryIdle,
        ControlBlock::RetryReq(ub_proto::link::ctrl::RetryReq {
            rcv_ptr: 300,
            num_phy_reinit: 1,
            num_retry: 2,
        }),
        ControlBlock::RetryAck(ub_proto::link::ctrl::RetryAck {
            num_retry: 2,
            num_free_buf: 100,
            rd_ptr: 10,
            wr_ptr: 50,
        }),
        ControlBlock::CrdAck(ub_proto::link::ctrl::CrdAck {
            initial: true,
            done: false,
            ack_num: 3,
            crd_num: core::array::from_fn(|i| i as u8 * 3),
        }),
        ControlBlock::ParamExchg(ParamExchg {
            len: 3,
            words: core::array::from_fn(|i| i as u32 * 0x0101_0101),
        }),
        ControlBlock::LaneManage(LaneManage {
            req_id: 5,
            change_tlw: true,
            tlw: 4,
            rlw: 4,
            ..LaneManage::default()
        }),
        ControlBlock::BlockModeChg { ack: true },
    ];
    blocks.push(ControlBlock::Init(LinkConfig::default().caps));
    let mut v = Vec::new();
    for (flags, mode) in [(0u8, Mode::Crc), (1, Mode::NonCrc)] {
        for cb in &blocks {
            let mut out = [0u8; MAX_BLOCK_BYTES];
            if let Ok(n) = cb.encode(mode, &mut out) {
                let mut o = Output::default();
                v.push(o.u8(flags).raw(&out[..n]).done());
            }
        }
    }
    v
}

pub(crate) fn seeds_init() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for caps in [LinkConfig::default().caps, FULL_CAPS] {
        let mut out = [0u8; INIT_BLOCK_FLITS * FLIT_BYTES];
        if ControlBlock::Init(caps).encode(Mode::Crc, &mut out).is_ok() {
            v.push(out[4..].to_vec());
        }
    }
    v
}

pub(crate) fn seeds_engine() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (mode_index, mode) in [Mode::Crc, Mode::NonCrc].into_iter().enumerate() {
        let (bring_up, traffic) = real_traffic(mode);
        let t = (mode_index * 4) as u8;
        // The peer's bring-up into a waiting engine, then its traffic into
        // an engine that is up, then a packet's tail into the half-way one.
        for (template, bytes) in [(t + 1, &bring_up), (t + 2, &traffic), (t + 3, &traffic)] {
            let mut o = Output::default();
            o.u8(template);
            for chunk in bytes.chunks(2000).take(8) {
                o.u8(op::RAW).u16(chunk.len() as u16).raw(chunk);
                o.u8(op::DEADLINE);
            }
            o.u8(op::TRANSMIT).u8(0).u16(900).u8(4).u8(255);
            v.push(o.done());
        }
        // Everything else once.
        let mut o = Output::default();
        o.u8(t + 2);
        o.u8(op::SEALED).u8(1).u8(5 << 2).raw(&[0; 40]);
        o.u8(op::FEC_LOSS).u8(3);
        o.u8(op::TIME).u16(500);
        o.u8(op::RETRAIN_STARTED).u8(op::RETRAINED);
        o.u8(op::MODE_CHANGE)
            .u8(0)
            .u8(op::DEADLINE)
            .u8(op::MODE_CHANGE)
            .u8(1);
        o.u8(op::CTRL_REQUEST).u32(6);
        o.u8(op::DOWN_UP).u8(op::RESET);
        v.push(o.done());
    }
    v
}
