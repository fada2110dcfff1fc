// SPDX-License-Identifier: GPL-2.0
//! Flit and block framing (UB spec §4.3): LPH, LBH, LCH, BCRC, END and
//! PLENGTH, and the layout of a DLLDP in DLLDBs.
//!
//! Every header is a typed value with a checked `decode` and a total
//! `encode`; the engine never touches raw bit offsets.

use super::super::crc::Crc30;

/// Bytes in a flit.
pub const FLIT_BYTES: usize = 20;
/// One flit.
pub type Flit = [u8; FLIT_BYTES];
/// Most flits in one block (DLLDB or DLLCB).
pub const MAX_BLOCK_FLITS: usize = 32;
/// Most bytes in one block.
pub const MAX_BLOCK_BYTES: usize = MAX_BLOCK_FLITS * FLIT_BYTES;
/// Most DLLDBs in one DLLDP.
pub const MAX_DLLDP_BLOCKS: usize = 16;
/// Most flits in one DLLDP.
pub const MAX_DLLDP_FLITS: usize = MAX_BLOCK_FLITS * MAX_DLLDP_BLOCKS;
/// Bytes of the link packet header (first flit of a DLLDP).
pub const LPH_BYTES: usize = 4;
/// Bytes of the link block header (first flit of a later DLLDB).
pub const LBH_BYTES: usize = 2;
/// Bytes of the link control header (first flit of a DLLCB).
pub const LCH_BYTES: usize = 4;
/// Bytes of the block CRC trailer (CRC mode).
pub const BCRC_BYTES: usize = 4;
/// Number of virtual lanes a link can carry.
pub const MAX_VLS: usize = 16;

/// ERROR_FLAG bit in the BCRC's first byte and in END.
const ERROR_FLAG_BIT: u8 = 0x40;

/// Block encapsulation mode (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every block ends with a BCRC (ERROR_FLAG + CRC30).
    Crc,
    /// No block CRC; a one-byte END closes each DLLDP and DLLCB; the PHY's
    /// FEC detects errors.
    NonCrc,
}

/// Why a header or block was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Input shorter than the structure.
    Truncated,
    /// A PLENGTH whose end code is reserved in this mode or inconsistent
    /// with the block count and length.
    BadPlength,
    /// A payload too long for one DLLDP (or too short, for a multi-block
    /// one).
    BadLength,
    /// A DLLDP CFG value that is reserved (valid: 3, 4, 5, 6, 7, 9).
    BadCfg,
    /// A field out of its range (VL, RT, ...).
    BadField,
    /// An LCH whose fixed bits are wrong, or an unknown CTRL/SUB_CTRL.
    BadLch,
    /// A DLLCB whose length does not fit its type.
    BadCtrlLength,
    /// The block CRC did not match.
    Crc,
}

/// `true` for the CFG values a DLLDP may carry (§4.3.2: 3, 4, 5, 6, 7, 9).
pub const fn is_dlldp_cfg(cfg: u8) -> bool {
    matches!(cfg, 3..=7 | 9)
}

/// The CFG nibble of a block's first flit: 0 for a DLLCB, otherwise a DLLDP
/// (LPH or LBH).
pub fn header_cfg(flit: &[u8]) -> Option<u8> {
    flit.get(1).map(|b| b & 0x0f)
}

/// PLENGTH, the 14-bit DLLDP length field of the LPH.
///
/// Bits 13:10: DLLDBs − 1; bits 9:5: flits in the last DLLDB − 1; bits 4:0:
/// where the payload ends (see [`Plength::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plength(u16);

/// A DLLDP's shape, decoded from PLENGTH or computed for a payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Encapsulation mode the layout was computed for.
    pub mode: Mode,
    /// Number of DLLDBs (1..=16).
    pub blocks: u8,
    /// Flits in the last DLLDB (1..=32); all other DLLDBs have 32.
    pub last_flits: u8,
    /// Payload bytes (everything after the LPH, without LBHs, trailers and
    /// padding).
    pub payload_len: u16,
    /// PLENGTH[4:0].
    pub end_code: u8,
}

/// Payload bytes of a full (32-flit) non-last DLLDB with a header of `hdr`
/// bytes.
const fn full_capacity(mode: Mode, hdr: usize) -> usize {
    match mode {
        Mode::Crc => MAX_BLOCK_BYTES - hdr - BCRC_BYTES,
        Mode::NonCrc => MAX_BLOCK_BYTES - hdr,
    }
}

/// Payload bytes the last DLLDB of a DLLDP can hold with a header of `hdr`.
const fn last_capacity(mode: Mode, hdr: usize) -> usize {
    match mode {
        // Ends at byte 15 of flit 31 at the latest.
        Mode::Crc => (MAX_BLOCK_FLITS - 1) * FLIT_BYTES + 16 - hdr,
        // Ends at byte 18 of flit 31 at the latest (END in byte 19).
        Mode::NonCrc => (MAX_BLOCK_FLITS - 1) * FLIT_BYTES + 19 - hdr,
    }
}

/// Largest DLLDP payload in `mode`.
pub const fn max_payload(mode: Mode) -> usize {
    full_capacity(mode, LPH_BYTES)
        + (MAX_DLLDP_BLOCKS - 2) * full_capacity(mode, LBH_BYTES)
        + last_capacity(mode, LBH_BYTES)
}

impl Plength {
    /// PLENGTH from its 14-bit raw value (higher bits ignored).
    pub const fn from_raw(raw: u16) -> Self {
        Self(raw & 0x3fff)
    }

    /// The 14-bit raw value.
    pub const fn raw(self) -> u16 {
        self.0
    }

    /// DLLDBs in the DLLDP (1..=16).
    pub const fn blocks(self) -> usize {
        ((self.0 >> 10) & 0xf) as usize + 1
    }

    /// Flits in the last DLLDB (1..=32).
    pub const fn last_flits(self) -> usize {
        ((self.0 >> 5) & 0x1f) as usize + 1
    }

    /// PLENGTH[4:0].
    pub const fn end_code(self) -> u8 {
        (self.0 & 0x1f) as u8
    }

    /// Total flits of the DLLDP.
    pub const fn flits(self) -> usize {
        (self.blocks() - 1) * MAX_BLOCK_FLITS + self.last_flits()
    }

    /// The canonical PLENGTH (and layout) of a DLLDP carrying `payload_len`
    /// bytes after its LPH.
    pub fn encode(mode: Mode, payload_len: usize) -> Result<(Self, Layout), FrameError> {
        if payload_len > max_payload(mode) {
            return Err(FrameError::BadLength);
        }
        let mut rest = payload_len;
        let mut hdr = LPH_BYTES;
        let mut blocks = 1usize;
        while rest > last_capacity(mode, hdr) {
            rest -= full_capacity(mode, hdr);
            hdr = LBH_BYTES;
            blocks += 1;
        }
        // `x` is the offset of the last byte (header included) in the last
        // block; a header-only DLLDP ends with its LPH.
        let x = hdr + rest - 1;
        let (flit, end) = (x / FLIT_BYTES, x % FLIT_BYTES);
        let (last_flits, code) = match mode {
            Mode::Crc if end <= 15 => (flit + 1, end),
            Mode::Crc => (flit + 2, end),
            Mode::NonCrc if end <= 15 => (flit + 1, end),
            Mode::NonCrc if end <= 18 => (flit + 1, end + 12),
            Mode::NonCrc => (flit + 2, end),
        };
        let raw = (((blocks - 1) << 10) | ((last_flits - 1) << 5) | code) as u16;
        let layout = Layout {
            mode,
            blocks: blocks as u8,
            last_flits: last_flits as u8,
            payload_len: payload_len as u16,
            end_code: code as u8,
        };
        Ok((Self(raw), layout))
    }

    /// Decodes PLENGTH in `mode`, rejecting reserved end codes and shapes
    /// that cannot exist.
    ///
    /// End codes (offset of the last payload byte in its flit, headers
    /// included): CRC mode 0–15 last flit; 16–19 second-to-last flit at that
    /// offset; 24–27 second-to-last flit at offset −12. Non-CRC mode 0–15
    /// last flit; 28–30 last flit at offset −12; 17, 19 second-to-last flit;
    /// 27 second-to-last flit at offset 15.
    pub fn decode(self, mode: Mode) -> Result<Layout, FrameError> {
        let v = usize::from(self.end_code());
        let (from_end, offset) = match (mode, v) {
            (Mode::Crc, 0..=15) | (Mode::NonCrc, 0..=15) => (1, v),
            (Mode::Crc, 16..=19) | (Mode::NonCrc, 17 | 19) => (2, v),
            (Mode::Crc, 24..=27) | (Mode::NonCrc, 27) => (2, v - 12),
            (Mode::NonCrc, 28..=30) => (1, v - 12),
            _ => return Err(FrameError::BadPlength),
        };
        let blocks = self.blocks();
        let last_flits = self.last_flits();
        let Some(flit) = last_flits.checked_sub(from_end) else {
            return Err(FrameError::BadPlength);
        };
        let hdr = if blocks == 1 { LPH_BYTES } else { LBH_BYTES };
        let x = flit * FLIT_BYTES + offset;
        // The last block ends at its header at the earliest. (An empty last
        // DLLDB only happens in non-CRC mode, where a full non-last block
        // holds one byte more than a last block can.)
        if x + 1 < hdr {
            return Err(FrameError::BadPlength);
        }
        let rest = x + 1 - hdr;
        let full = if blocks == 1 {
            0
        } else {
            full_capacity(mode, LPH_BYTES) + (blocks - 2) * full_capacity(mode, LBH_BYTES)
        };
        Ok(Layout {
            mode,
            blocks: blocks as u8,
            last_flits: last_flits as u8,
            payload_len: (full + rest) as u16,
            end_code: v as u8,
        })
    }
}

impl Layout {
    /// Total flits.
    pub const fn flits(&self) -> usize {
        (self.blocks as usize).saturating_sub(1) * MAX_BLOCK_FLITS + self.last_flits as usize
    }

    /// Flits of DLLDB `index`.
    pub const fn block_flits(&self, index: usize) -> usize {
        if index + 1 >= self.blocks as usize {
            self.last_flits as usize
        } else {
            MAX_BLOCK_FLITS
        }
    }

    /// Header bytes of DLLDB `index` (LPH or LBH).
    pub const fn header_bytes(index: usize) -> usize {
        if index == 0 {
            LPH_BYTES
        } else {
            LBH_BYTES
        }
    }

    /// Offset into the payload and payload bytes carried by DLLDB `index`.
    pub fn block_payload(&self, index: usize) -> (usize, usize) {
        let first = full_capacity(self.mode, LPH_BYTES);
        let mid = full_capacity(self.mode, LBH_BYTES);
        let start = if index == 0 {
            0
        } else {
            first + (index - 1) * mid
        };
        let cap = if index == 0 { first } else { mid };
        let total = usize::from(self.payload_len);
        let len = total.saturating_sub(start).min(cap);
        (start, len)
    }

    /// Cost in cells of `cell_flits` flits each (`ceil(flits / n)`).
    #[inline]
    pub fn cost(&self, cell_flits: usize) -> usize {
        let n = cell_flits.max(1);
        // Both ends compute this per packet; cell sizes are powers of two
        // in practice, and a shift is far cheaper than a 64-bit division.
        if n.is_power_of_two() {
            let flits = self.flits();
            (flits >> n.trailing_zeros()) + usize::from(flits & (n - 1) != 0)
        } else {
            self.flits().div_ceil(n)
        }
    }
}

/// Link packet header: the first four bytes of a DLLDP (Table 4-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lph {
    /// Common part shared with the LBH.
    pub base: Lbh,
    /// Routing type RT[1:0] from the network layer.
    pub rt: u8,
    /// Length of the DLLDP.
    pub plength: Plength,
}

/// Link block header: the first two bytes of a middle or last DLLDB
/// (Table 4-2); also bytes 0–1 of an LPH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lbh {
    /// Returns one DATA_CREDIT_GRAIN_SIZE of cells to VL `crd_vl`.
    pub crd: bool,
    /// Frees one DATA_ACK_GRAIN_SIZE of flits in the peer's retry buffer.
    pub ack: bool,
    /// VL the returned credit belongs to (0..=15).
    pub crd_vl: u8,
    /// VL of the packet (0..=15).
    pub vl: u8,
    /// Packet type (3, 4, 5, 6, 7 or 9).
    pub cfg: u8,
}

impl Lbh {
    /// Encodes the two bytes. Fields are masked to their widths.
    pub const fn encode(&self) -> [u8; 2] {
        let b0 = ((self.crd as u8) << 7)
            | ((self.ack as u8) << 6)
            | ((self.crd_vl & 0xf) << 2)
            | ((self.vl >> 3) & 1);
        let b1 = ((self.vl & 0x7) << 5) | (self.cfg & 0xf);
        [b0, b1]
    }

    /// Decodes two bytes; reserved bits are ignored, a reserved CFG is an
    /// error.
    pub fn decode(bytes: &[u8]) -> Result<Self, FrameError> {
        let (&b0, &b1) = match bytes {
            [b0, b1, ..] => (b0, b1),
            _ => return Err(FrameError::Truncated),
        };
        let cfg = b1 & 0xf;
        if !is_dlldp_cfg(cfg) {
            return Err(FrameError::BadCfg);
        }
        Ok(Self {
            crd: b0 & 0x80 != 0,
            ack: b0 & 0x40 != 0,
            crd_vl: (b0 >> 2) & 0xf,
            vl: ((b0 & 1) << 3) | (b1 >> 5),
            cfg,
        })
    }
}

impl Lph {
    /// Encodes the four bytes.
    pub const fn encode(&self) -> [u8; 4] {
        let [b0, b1] = self.base.encode();
        let pl = self.plength.raw();
        let b2 = ((self.rt & 0x3) << 6) | ((pl >> 8) as u8 & 0x3f);
        [b0, b1, b2, pl as u8]
    }

    /// Decodes four bytes (PLENGTH is checked separately with
    /// [`Plength::decode`], which needs the mode).
    pub fn decode(bytes: &[u8]) -> Result<Self, FrameError> {
        let base = Lbh::decode(bytes)?;
        let (&b2, &b3) = match bytes {
            [_, _, b2, b3, ..] => (b2, b3),
            _ => return Err(FrameError::Truncated),
        };
        Ok(Self {
            base,
            rt: b2 >> 6,
            plength: Plength::from_raw((u16::from(b2 & 0x3f) << 8) | u16::from(b3)),
        })
    }
}

/// Link control header: the first four bytes of a DLLCB (§4.3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lch {
    /// Flits in the block (1..=32).
    pub flits: u8,
    /// CTRL (4 bits).
    pub ctrl: u8,
    /// SUB_CTRL (4 bits).
    pub sub_ctrl: u8,
    /// Type-specific byte 3.
    pub byte3: u8,
}

impl Lch {
    /// Encodes the four bytes (`flits` is clamped to 1..=32).
    pub fn encode(&self) -> [u8; 4] {
        let clength = self.flits.clamp(1, 32) - 1;
        [
            (clength << 2) | 0b10,
            0,
            ((self.ctrl & 0xf) << 4) | (self.sub_ctrl & 0xf),
            self.byte3,
        ]
    }

    /// Decodes four bytes, checking the fixed bits (B0[7] = 0,
    /// B0[1:0] = 10, B1 = 0).
    pub fn decode(bytes: &[u8]) -> Result<Self, FrameError> {
        let (&b0, &b1, &b2, &b3) = match bytes {
            [b0, b1, b2, b3, ..] => (b0, b1, b2, b3),
            _ => return Err(FrameError::Truncated),
        };
        if b0 & 0x83 != 0b10 || b1 != 0 {
            return Err(FrameError::BadLch);
        }
        Ok(Self {
            flits: ((b0 >> 2) & 0x1f) + 1,
            ctrl: b2 >> 4,
            sub_ctrl: b2 & 0xf,
            byte3: b3,
        })
    }
}

/// Writes the trailer of a block whose bytes are `block` (whole flits).
///
/// CRC mode: BCRC with `error_flag` over every preceding bit. Non-CRC mode:
/// END with `error_flag` when `end` (last block of a DLLDP, or a DLLCB),
/// nothing otherwise.
pub fn seal_block(mode: Mode, block: &mut [u8], end: bool, error_flag: bool) {
    let len = block.len();
    match mode {
        Mode::Crc => {
            let Some(at) = len.checked_sub(BCRC_BYTES) else {
                return;
            };
            let (body, tail) = block.split_at_mut(at);
            let flag = if error_flag { ERROR_FLAG_BIT } else { 0 };
            let mut crc = Crc30::new();
            crc.update(body);
            crc.update_bits(flag, 2);
            let value = crc.finish();
            let bytes = value.to_be_bytes();
            if let [t0, t1, t2, t3] = tail {
                *t0 = flag | (bytes[0] & 0x3f);
                *t1 = bytes[1];
                *t2 = bytes[2];
                *t3 = bytes[3];
            }
        }
        Mode::NonCrc => {
            if end {
                if let Some(last) = block.last_mut() {
                    *last = if error_flag { ERROR_FLAG_BIT } else { 0 };
                }
            }
        }
    }
}

/// Checks the trailer of a received block; returns its ERROR_FLAG.
///
/// CRC mode: verifies the BCRC. Non-CRC mode: reads END when `end`
/// (there is nothing to verify; the PHY's FEC reports errors).
pub fn check_block(mode: Mode, block: &[u8], end: bool) -> Result<bool, FrameError> {
    let len = block.len();
    match mode {
        Mode::Crc => {
            let Some(at) = len.checked_sub(BCRC_BYTES) else {
                return Err(FrameError::Truncated);
            };
            let (body, tail) = block.split_at(at);
            let [t0, t1, t2, t3] = tail else {
                return Err(FrameError::Truncated);
            };
            let flag = t0 & 0xc0;
            let mut crc = Crc30::new();
            crc.update(body);
            crc.update_bits(flag, 2);
            let got = u32::from_be_bytes([t0 & 0x3f, *t1, *t2, *t3]);
            if crc.finish() != got {
                return Err(FrameError::Crc);
            }
            Ok(flag & ERROR_FLAG_BIT != 0)
        }
        Mode::NonCrc => {
            if end {
                block
                    .last()
                    .map(|b| b & ERROR_FLAG_BIT != 0)
                    .ok_or(FrameError::Truncated)
            } else {
                Ok(false)
            }
        }
    }
}

/// Encodes DLLDB `index` of a DLLDP into `out` and returns the bytes
/// written (`layout.block_flits(index) * 20`).
///
/// `lbh` gives the CRD/ACK/VL/CFG bits of this block's header; `rt` and
/// the PLENGTH from `layout` complete the LPH of block 0. `out` must hold
/// the block; `payload` is the whole DLLDP payload.
pub fn encode_dlldb(
    layout: &Layout,
    index: usize,
    lbh: Lbh,
    rt: u8,
    payload: &[u8],
    error_flag: bool,
    out: &mut [u8],
) -> Result<usize, FrameError> {
    let flits = layout.block_flits(index);
    let bytes = flits * FLIT_BYTES;
    let block = out.get_mut(..bytes).ok_or(FrameError::Truncated)?;
    let (start, len) = layout.block_payload(index);
    let data = payload
        .get(start..start + len)
        .ok_or(FrameError::Truncated)?;
    let hdr = Layout::header_bytes(index);
    let (head, rest) = block.split_at_mut(hdr);
    if index == 0 {
        let plength = Plength::from_raw(
            (u16::from(layout.blocks.saturating_sub(1)) << 10)
                | (u16::from(layout.last_flits.saturating_sub(1)) << 5)
                | u16::from(layout.end_code),
        );
        head.copy_from_slice(
            &Lph {
                base: lbh,
                rt,
                plength,
            }
            .encode(),
        );
    } else {
        head.copy_from_slice(&lbh.encode());
    }
    let (body, pad) = rest.split_at_mut(len);
    body.copy_from_slice(data);
    pad.fill(0);
    let last = index + 1 == usize::from(layout.blocks);
    seal_block(layout.mode, block, last, error_flag && last);
    Ok(bytes)
}

/// The payload bytes of a received DLLDB `index` (header and trailer
/// removed).
pub fn dlldb_payload<'a>(layout: &Layout, index: usize, block: &'a [u8]) -> Option<&'a [u8]> {
    let (_, len) = layout.block_payload(index);
    let hdr = Layout::header_bytes(index);
    block.get(hdr..hdr + len)
}

/// Cells covering `buffer_bytes` of receive buffer with cells of
/// `cell_flits` flits, rounded down and capped at the 65 535 a link can
/// announce (§4.6.1: 1 MB / (8 × 20 B) = 6553).
pub fn cells_for_buffer(buffer_bytes: u64, cell_flits: u32) -> u32 {
    let cell_bytes = u64::from(cell_flits.max(1)) * FLIT_BYTES as u64;
    let cells = buffer_bytes / cell_bytes;
    if cells > 65_535 {
        65_535
    } else {
        cells as u32
    }
}
