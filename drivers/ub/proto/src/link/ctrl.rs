// SPDX-License-Identifier: GPL-2.0
//! Data link control blocks (DLLCBs, UB spec §4.3.3) and Init Block
//! auto-negotiation (§4.4).

use super::frame::{check_block, seal_block, FrameError, Lch, Mode, FLIT_BYTES, MAX_VLS};

/// Kind of a DLLCB, from its CTRL/SUB_CTRL pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtrlKind {
    /// Null Block (0000/0000): idle filler.
    Null,
    /// No_Operation Block (0000/0001): PACKET_MIN_INTERVAL padding.
    Nob,
    /// Retry_Idle Block (0001/0000): retry-set separator.
    RetryIdle,
    /// Retry_Req Block (0001/0001).
    RetryReq,
    /// Retry_Ack Block (0001/0010).
    RetryAck,
    /// Crd_Ack Block (0010/0100): credit and ACK return.
    CrdAck,
    /// Param_Exchg Block (0011/0000).
    ParamExchg,
    /// Lane_Manage Block (0100/0001).
    LaneManage,
    /// Block_Mode_Chg Block (0101/0000).
    BlockModeChg,
    /// Init Block (1100/1000).
    Init,
}

impl CtrlKind {
    /// The kind for a CTRL/SUB_CTRL pair.
    pub const fn from_codes(ctrl: u8, sub: u8) -> Option<Self> {
        Some(match (ctrl, sub) {
            (0, 0) => Self::Null,
            (0, 1) => Self::Nob,
            (1, 0) => Self::RetryIdle,
            (1, 1) => Self::RetryReq,
            (1, 2) => Self::RetryAck,
            (2, 4) => Self::CrdAck,
            (3, 0) => Self::ParamExchg,
            (4, 1) => Self::LaneManage,
            (5, 0) => Self::BlockModeChg,
            (12, 8) => Self::Init,
            _ => return None,
        })
    }

    /// CTRL and SUB_CTRL.
    pub const fn codes(self) -> (u8, u8) {
        match self {
            Self::Null => (0, 0),
            Self::Nob => (0, 1),
            Self::RetryIdle => (1, 0),
            Self::RetryReq => (1, 1),
            Self::RetryAck => (1, 2),
            Self::CrdAck => (2, 4),
            Self::ParamExchg => (3, 0),
            Self::LaneManage => (4, 1),
            Self::BlockModeChg => (5, 0),
            Self::Init => (12, 8),
        }
    }

    /// Allowed length in flits (inclusive range).
    pub const fn flit_range(self) -> (u8, u8) {
        match self {
            Self::CrdAck => (2, 2),
            Self::ParamExchg => (1, 32),
            Self::Init => (5, 32),
            _ => (1, 1),
        }
    }

    /// `true` if the block goes to the retry buffer (all but Null and the
    /// three retry blocks, §4.7.3.2.1).
    pub const fn is_retried(self) -> bool {
        !matches!(
            self,
            Self::Null | Self::RetryIdle | Self::RetryReq | Self::RetryAck
        )
    }
}

/// Retry_Req contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryReq {
    /// First flit to resend, in the peer's retry buffer.
    pub rcv_ptr: u16,
    /// Requester's NUM_PHY_REINIT.
    pub num_phy_reinit: u8,
    /// Requester's NUM_RETRY.
    pub num_retry: u8,
}

/// Retry_Ack contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryAck {
    /// NUM_RETRY of the Retry_Req being answered.
    pub num_retry: u8,
    /// Free flits in the responder's retry buffer.
    pub num_free_buf: u16,
    /// Where the retransmission starts.
    pub rd_ptr: u16,
    /// Where it ends.
    pub wr_ptr: u16,
}

/// Crd_Ack contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrdAck {
    /// T: 1 = initial credits (DLL_Credit_Init).
    pub initial: bool,
    /// SD: last initial-credit block.
    pub done: bool,
    /// Frees ACK_NUM × CTRL_ACK_GRAIN_SIZE flits of the peer's retry buffer.
    pub ack_num: u16,
    /// Per-VL counts (6 bits each) in CTRL_CREDIT_GRAIN_SIZE units.
    pub crd_num: [u8; MAX_VLS],
}

impl CrdAck {
    /// `true` if the block only returns ACKs (no credits, not initial).
    pub fn is_pure_ack(&self) -> bool {
        !self.initial && self.crd_num.iter().all(|&c| c == 0)
    }
}

/// Lane_Manage command (bytes 4–11 of the block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LaneManage {
    /// REQ_ID (0x5 in a request).
    pub req_id: u8,
    /// Power_Down request.
    pub power_down: bool,
    /// Change receive link width.
    pub change_rlw: bool,
    /// Change transmit link width.
    pub change_tlw: bool,
    /// RSP_ID (0xA in a response).
    pub rsp_id: u8,
    /// RX_Lane_Up.
    pub rx_lane_up: bool,
    /// RSP_RLW (1 = ACK).
    pub rsp_rlw: bool,
    /// RSP_TLW (1 = ACK).
    pub rsp_tlw: bool,
    /// Transmit link width, one-hot (x1 = 1, x2 = 2, x4 = 4, x8 = 8).
    pub tlw: u8,
    /// Receive link width, one-hot.
    pub rlw: u8,
}

/// Most 32-bit words in a Param_Exchg block (one per flit).
pub const PARAM_EXCHG_MAX_WORDS: usize = 32;

/// Param_Exchg contents: one 32-bit word per flit (bytes 8–11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamExchg {
    /// Number of words (= flits, 1..=32).
    pub len: u8,
    /// The words; only the first `len` are meaningful.
    pub words: [u32; PARAM_EXCHG_MAX_WORDS],
}

/// Init Block parameters (§4.3.3.9). Every grain/size field is a
/// capability bitmask: bit i set ⇔ value 2^i supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitParams {
    /// FEATURE_ID (DLL protocol version, 1 for spec 2.0).
    pub feature_id: u16,
    /// RXBUF_VL_SHARE: this port's receive buffer may be shared by VLs.
    pub rxbuf_vl_share: bool,
    /// DATA_ACK_GRAIN_SIZE mask (flits).
    pub data_ack_grain: u8,
    /// CTRL_ACK_GRAIN_SIZE mask (flits).
    pub ctrl_ack_grain: u8,
    /// FLOW_CTRL_SIZE mask (flits per cell).
    pub flow_ctrl_size: u8,
    /// VL_ENABLE (bit n = VL n).
    pub vl_enable: u16,
    /// RETRY_BUF_DEPTH in flits (adopted by the peer, not negotiated).
    pub retry_buf_depth: u16,
    /// PACKET_MIN_INTERVAL in flits (adopted by the peer).
    pub packet_min_interval: u8,
    /// CTRL_CREDIT_GRAIN_SIZE mask per VL (cells).
    pub ctrl_credit_grain: [u8; MAX_VLS],
    /// DATA_CREDIT_GRAIN_SIZE mask per VL (cells).
    pub data_credit_grain: [u8; MAX_VLS],
}

/// Flits of the Init Block this implementation sends (CLENGTH = 4).
pub const INIT_BLOCK_FLITS: usize = 5;

/// A decoded DLLCB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlBlock {
    /// Null Block.
    Null,
    /// No_Operation Block.
    Nob,
    /// Retry_Idle Block.
    RetryIdle,
    /// Retry_Req Block.
    RetryReq(RetryReq),
    /// Retry_Ack Block.
    RetryAck(RetryAck),
    /// Crd_Ack Block.
    CrdAck(CrdAck),
    /// Param_Exchg Block.
    ParamExchg(ParamExchg),
    /// Lane_Manage Block.
    LaneManage(LaneManage),
    /// Block_Mode_Chg Block: `false` = REQ, `true` = ACK.
    BlockModeChg {
        /// TYPE: `false` = REQ, `true` = ACK.
        ack: bool,
    },
    /// Init Block.
    Init(InitParams),
}

fn put(flit: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = flit.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

fn byte(block: &[u8], flit: usize, at: usize) -> u8 {
    block.get(flit * FLIT_BYTES + at).copied().unwrap_or(0)
}

fn be16(block: &[u8], flit: usize, at: usize) -> u16 {
    u16::from_be_bytes([byte(block, flit, at), byte(block, flit, at + 1)])
}

impl ControlBlock {
    /// The block's kind.
    pub const fn kind(&self) -> CtrlKind {
        match self {
            Self::Null => CtrlKind::Null,
            Self::Nob => CtrlKind::Nob,
            Self::RetryIdle => CtrlKind::RetryIdle,
            Self::RetryReq(_) => CtrlKind::RetryReq,
            Self::RetryAck(_) => CtrlKind::RetryAck,
            Self::CrdAck(_) => CtrlKind::CrdAck,
            Self::ParamExchg(_) => CtrlKind::ParamExchg,
            Self::LaneManage(_) => CtrlKind::LaneManage,
            Self::BlockModeChg { .. } => CtrlKind::BlockModeChg,
            Self::Init(_) => CtrlKind::Init,
        }
    }

    /// Length in flits.
    pub fn flits(&self) -> usize {
        match self {
            Self::CrdAck(_) => 2,
            Self::ParamExchg(p) => usize::from(p.len.clamp(1, 32)),
            Self::Init(_) => INIT_BLOCK_FLITS,
            _ => 1,
        }
    }

    /// Encodes the block (trailer included) into `out`; returns the bytes
    /// written, or `Truncated` if `out` is too short.
    pub fn encode(&self, mode: Mode, out: &mut [u8]) -> Result<usize, FrameError> {
        let flits = self.flits();
        let len = flits * FLIT_BYTES;
        let block = out.get_mut(..len).ok_or(FrameError::Truncated)?;
        block.fill(0);
        let (ctrl, sub_ctrl) = self.kind().codes();
        let mut byte3 = 0;
        match self {
            Self::Null | Self::Nob | Self::RetryIdle => {}
            Self::RetryReq(r) => {
                put(block, 8, &r.rcv_ptr.to_be_bytes());
                put(block, 10, &[r.num_phy_reinit, r.num_retry]);
            }
            Self::RetryAck(a) => {
                put(block, 9, &[a.num_retry]);
                put(block, 10, &a.num_free_buf.to_be_bytes());
                put(block, 12, &a.rd_ptr.to_be_bytes());
                put(block, 14, &a.wr_ptr.to_be_bytes());
            }
            Self::CrdAck(c) => {
                byte3 = (u8::from(c.done) << 1) | u8::from(c.initial);
                put(block, 4, &c.ack_num.to_be_bytes());
                let mut crd: u128 = 0;
                for (vl, &n) in c.crd_num.iter().enumerate() {
                    crd |= u128::from(n & 0x3f) << (6 * vl);
                }
                put(block, 6, crd.to_be_bytes().get(4..).unwrap_or(&[]));
            }
            Self::ParamExchg(p) => {
                for (i, w) in p.words.iter().take(flits).enumerate() {
                    put(block, i * FLIT_BYTES + 8, &w.to_be_bytes());
                }
            }
            Self::LaneManage(l) => {
                let b4 = (l.req_id << 4)
                    | (u8::from(l.power_down) << 2)
                    | (u8::from(l.change_rlw) << 1)
                    | u8::from(l.change_tlw);
                let b5 = (l.rsp_id << 4)
                    | (u8::from(l.rx_lane_up) << 2)
                    | (u8::from(l.rsp_rlw) << 1)
                    | u8::from(l.rsp_tlw);
                put(block, 4, &[b4, b5, l.tlw & 0x3f, l.rlw & 0x3f]);
            }
            Self::BlockModeChg { ack } => byte3 = u8::from(*ack),
            Self::Init(p) => encode_init(p, block),
        }
        let lch = Lch {
            flits: flits as u8,
            ctrl,
            sub_ctrl,
            byte3,
        };
        put(block, 0, &lch.encode());
        seal_block(mode, block, true, false);
        Ok(len)
    }

    /// Decodes a whole received DLLCB (all its flits, trailer included),
    /// checking the LCH, the length for the type and the trailer. Returns
    /// the block and its ERROR_FLAG.
    pub fn decode(mode: Mode, block: &[u8]) -> Result<(Self, bool), FrameError> {
        let lch = Lch::decode(block)?;
        let kind = CtrlKind::from_codes(lch.ctrl, lch.sub_ctrl).ok_or(FrameError::BadLch)?;
        let (lo, hi) = kind.flit_range();
        if lch.flits < lo || lch.flits > hi {
            return Err(FrameError::BadCtrlLength);
        }
        if block.len() != usize::from(lch.flits) * FLIT_BYTES {
            return Err(FrameError::Truncated);
        }
        let error_flag = check_block(mode, block, true)?;
        let cb = match kind {
            CtrlKind::Null => Self::Null,
            CtrlKind::Nob => Self::Nob,
            CtrlKind::RetryIdle => Self::RetryIdle,
            CtrlKind::RetryReq => Self::RetryReq(RetryReq {
                rcv_ptr: be16(block, 0, 8),
                num_phy_reinit: byte(block, 0, 10),
                num_retry: byte(block, 0, 11),
            }),
            CtrlKind::RetryAck => Self::RetryAck(RetryAck {
                num_retry: byte(block, 0, 9),
                num_free_buf: be16(block, 0, 10),
                rd_ptr: be16(block, 0, 12),
                wr_ptr: be16(block, 0, 14),
            }),
            CtrlKind::CrdAck => {
                let mut raw = [0u8; 16];
                for (i, b) in raw.iter_mut().skip(4).enumerate() {
                    *b = byte(block, 0, 6 + i);
                }
                let crd = u128::from_be_bytes(raw);
                let mut crd_num = [0u8; MAX_VLS];
                for (vl, n) in crd_num.iter_mut().enumerate() {
                    *n = ((crd >> (6 * vl)) & 0x3f) as u8;
                }
                Self::CrdAck(CrdAck {
                    initial: lch.byte3 & 1 != 0,
                    done: lch.byte3 & 2 != 0,
                    ack_num: be16(block, 0, 4),
                    crd_num,
                })
            }
            CtrlKind::ParamExchg => {
                let mut words = [0u32; PARAM_EXCHG_MAX_WORDS];
                for (i, w) in words.iter_mut().take(usize::from(lch.flits)).enumerate() {
                    *w = u32::from_be_bytes([
                        byte(block, i, 8),
                        byte(block, i, 9),
                        byte(block, i, 10),
                        byte(block, i, 11),
                    ]);
                }
                Self::ParamExchg(ParamExchg {
                    len: lch.flits,
                    words,
                })
            }
            CtrlKind::LaneManage => {
                let (b4, b5) = (byte(block, 0, 4), byte(block, 0, 5));
                Self::LaneManage(LaneManage {
                    req_id: b4 >> 4,
                    power_down: b4 & 4 != 0,
                    change_rlw: b4 & 2 != 0,
                    change_tlw: b4 & 1 != 0,
                    rsp_id: b5 >> 4,
                    rx_lane_up: b5 & 4 != 0,
                    rsp_rlw: b5 & 2 != 0,
                    rsp_tlw: b5 & 1 != 0,
                    tlw: byte(block, 0, 6) & 0x3f,
                    rlw: byte(block, 0, 7) & 0x3f,
                })
            }
            CtrlKind::BlockModeChg => match lch.byte3 & 0xf {
                0 => Self::BlockModeChg { ack: false },
                1 => Self::BlockModeChg { ack: true },
                _ => return Err(FrameError::BadField),
            },
            CtrlKind::Init => Self::Init(decode_init(block)),
        };
        Ok((cb, error_flag))
    }
}

fn encode_init(p: &InitParams, block: &mut [u8]) {
    put(block, 7, &p.feature_id.to_be_bytes());
    put(
        block,
        9,
        &[
            u8::from(p.rxbuf_vl_share),
            p.data_ack_grain,
            p.ctrl_ack_grain,
            p.flow_ctrl_size,
        ],
    );
    put(block, 13, &p.vl_enable.to_be_bytes());
    put(block, 16, &p.retry_buf_depth.to_be_bytes());
    // Flit 1 bytes 4..=17: CTRL_CREDIT_GRAIN VL13..VL0 (VL0 in byte 17).
    // Flit 2 bytes 4..=15: DATA_CREDIT_GRAIN VL11..VL0; 16..=17: CTRL VL15,
    // VL14. Flit 3 byte 13: PACKET_MIN_INTERVAL; 14..=17: DATA VL15..VL12.
    for vl in 0..MAX_VLS {
        let c = p.ctrl_credit_grain.get(vl).copied().unwrap_or(0);
        let d = p.data_credit_grain.get(vl).copied().unwrap_or(0);
        put(block, ctrl_grain_offset(vl), &[c]);
        put(block, data_grain_offset(vl), &[d]);
    }
    put(block, 3 * FLIT_BYTES + 13, &[p.packet_min_interval]);
}

const fn ctrl_grain_offset(vl: usize) -> usize {
    if vl < 14 {
        FLIT_BYTES + 17 - vl
    } else {
        2 * FLIT_BYTES + 16 + (15 - vl)
    }
}

const fn data_grain_offset(vl: usize) -> usize {
    if vl < 12 {
        2 * FLIT_BYTES + 15 - vl
    } else {
        3 * FLIT_BYTES + 14 + (15 - vl)
    }
}

fn decode_init(block: &[u8]) -> InitParams {
    let mut p = InitParams {
        feature_id: be16(block, 0, 7),
        rxbuf_vl_share: byte(block, 0, 9) & 1 != 0,
        data_ack_grain: byte(block, 0, 10),
        ctrl_ack_grain: byte(block, 0, 11),
        flow_ctrl_size: byte(block, 0, 12),
        vl_enable: be16(block, 0, 13),
        retry_buf_depth: be16(block, 0, 16),
        packet_min_interval: byte(block, 3, 13),
        ctrl_credit_grain: [0; MAX_VLS],
        data_credit_grain: [0; MAX_VLS],
    };
    for vl in 0..MAX_VLS {
        if let Some(c) = p.ctrl_credit_grain.get_mut(vl) {
            *c = block.get(ctrl_grain_offset(vl)).copied().unwrap_or(0);
        }
        if let Some(d) = p.data_credit_grain.get_mut(vl) {
            *d = block.get(data_grain_offset(vl)).copied().unwrap_or(0);
        }
    }
    p
}

/// Fallback masks used when negotiation of a field fails (§4.4).
pub mod fallback {
    /// DATA_CREDIT_GRAIN_SIZE: 4 cells.
    pub const DATA_CREDIT_GRAIN: u8 = 0x04;
    /// CTRL_CREDIT_GRAIN_SIZE: 1 cell.
    pub const CTRL_CREDIT_GRAIN: u8 = 0x01;
    /// DATA_ACK_GRAIN_SIZE: 32 flits.
    pub const DATA_ACK_GRAIN: u8 = 0x20;
    /// CTRL_ACK_GRAIN_SIZE: 1 flit.
    pub const CTRL_ACK_GRAIN: u8 = 0x01;
    /// FLOW_CTRL_SIZE: 8 flits per cell.
    pub const FLOW_CTRL_SIZE: u8 = 0x08;
    /// VL_ENABLE: VL0.
    pub const VL_ENABLE: u16 = 0x0001;
    /// FEATURE_ID: 1.
    pub const FEATURE_ID: u16 = 1;
}

/// The smallest value both capability masks support, or `fallback`'s value
/// when they share none.
pub const fn negotiate_mask(a: u8, b: u8, fallback: u8) -> u8 {
    let both = a & b;
    let m = if both == 0 { fallback } else { both };
    // Lowest set bit → its value 2^i (0 only for an empty fallback).
    m & m.wrapping_neg()
}

/// Result of Init Block negotiation, as this port uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Agreed FEATURE_ID (the lower version).
    pub feature_id: u16,
    /// This port sends in sharing mode (it wants to and the peer's receive
    /// buffer allows it).
    pub tx_sharing: bool,
    /// The peer may send to this port in sharing mode (this port
    /// advertised RXBUF_VL_SHARE).
    pub rx_sharing: bool,
    /// DATA_ACK_GRAIN_SIZE in flits.
    pub data_ack_grain: u16,
    /// CTRL_ACK_GRAIN_SIZE in flits.
    pub ctrl_ack_grain: u16,
    /// Flits per cell.
    pub cell_flits: u16,
    /// Enabled VLs (contiguous from VL0).
    pub vl_enable: u16,
    /// Number of enabled VLs.
    pub vls: u8,
    /// CTRL_CREDIT_GRAIN_SIZE per VL in cells.
    pub ctrl_credit_grain: [u16; MAX_VLS],
    /// DATA_CREDIT_GRAIN_SIZE per VL in cells.
    pub data_credit_grain: [u16; MAX_VLS],
    /// The peer's RETRY_BUF_DEPTH (modulus of this port's RcvPtr).
    pub peer_retry_buf_depth: u16,
    /// The peer's PACKET_MIN_INTERVAL, which this port's transmitter obeys.
    pub peer_packet_min_interval: u8,
}

/// Negotiates every field of two Init Blocks (§4.4): grain and size
/// fields take the smallest common value or their fallback, FEATURE_ID the
/// lower version, VL_ENABLE the contiguous VLs from VL0 both enable.
/// `want_sharing` is this port's wish to send in sharing mode.
pub fn negotiate(local: &InitParams, peer: &InitParams, want_sharing: bool) -> Negotiated {
    let both = local.vl_enable & peer.vl_enable;
    // Contiguous run of ones from bit 0.
    let vls = (!both).trailing_zeros();
    let (vl_enable, vls) = if vls == 0 {
        (fallback::VL_ENABLE, 1)
    } else if vls >= 16 {
        (0xffff, 16)
    } else {
        ((1u16 << vls) - 1, vls)
    };
    let mut ctrl_credit_grain = [0u16; MAX_VLS];
    let mut data_credit_grain = [0u16; MAX_VLS];
    for vl in 0..MAX_VLS {
        let pick = |a: &[u8; MAX_VLS], b: &[u8; MAX_VLS], fb: u8| {
            u16::from(negotiate_mask(
                a.get(vl).copied().unwrap_or(0),
                b.get(vl).copied().unwrap_or(0),
                fb,
            ))
        };
        if let Some(c) = ctrl_credit_grain.get_mut(vl) {
            *c = pick(
                &local.ctrl_credit_grain,
                &peer.ctrl_credit_grain,
                fallback::CTRL_CREDIT_GRAIN,
            );
        }
        if let Some(d) = data_credit_grain.get_mut(vl) {
            *d = pick(
                &local.data_credit_grain,
                &peer.data_credit_grain,
                fallback::DATA_CREDIT_GRAIN,
            );
        }
    }
    let feature_id = match local.feature_id.min(peer.feature_id) {
        0 => fallback::FEATURE_ID,
        f => f,
    };
    Negotiated {
        feature_id,
        tx_sharing: want_sharing && peer.rxbuf_vl_share,
        rx_sharing: local.rxbuf_vl_share,
        data_ack_grain: u16::from(negotiate_mask(
            local.data_ack_grain,
            peer.data_ack_grain,
            fallback::DATA_ACK_GRAIN,
        )),
        ctrl_ack_grain: u16::from(negotiate_mask(
            local.ctrl_ack_grain,
            peer.ctrl_ack_grain,
            fallback::CTRL_ACK_GRAIN,
        )),
        cell_flits: u16::from(negotiate_mask(
            local.flow_ctrl_size,
            peer.flow_ctrl_size,
            fallback::FLOW_CTRL_SIZE,
        )),
        vl_enable,
        vls: vls as u8,
        ctrl_credit_grain,
        data_credit_grain,
        peer_retry_buf_depth: peer.retry_buf_depth,
        peer_packet_min_interval: peer.packet_min_interval,
    }
}
