// SPDX-License-Identifier: GPL-2.0
//! The message service for the layer above (UB spec §6.7): reassembly of
//! RTP messages, CTP and UTP framing, and whole-packet assembly (network
//! header + transport + ICRC).
//!
//! RTP: the sender ([`super::tx`]) cuts a message into MTU packets that
//! share a TPMSN, the last one flagged. The receiver delivers packets in
//! PSN order, so a message is complete exactly when its last-flagged packet
//! comes out of the receiver: by then every earlier packet of that TPMSN
//! has. [`Reassembler`] checks TPMSN continuity and finds the boundaries.
//!
//! CTP: one transaction operation per packet (TPOpcode 0, payload 0..MTU),
//! handed up immediately; no acknowledgement, no retransmission (the link
//! layer is lossless). UTP: datagrams, never retransmitted.

use super::super::crc::Crc32Update;
use super::super::net::icrc;
use super::super::net::nth::{NetHeader, ICRC_LEN};
use super::super::net::Error;
use super::hdr::{padding_for, CtpOpcode, Ctph, Utph, CTPH_LEN, RTPH_LEN};

/// Number of packets a message of `len` bytes needs at MTU `mtu`.
pub const fn packets_for(len: u32, mtu: u32) -> u32 {
    if mtu == 0 {
        0
    } else {
        len.div_ceil(mtu)
    }
}

/// A packet handed over in order that does not fit the message stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReassemblyError {
    /// A packet of a new TPMSN arrived before the previous message's last
    /// packet, or a TPMSN was skipped.
    TpmsnMismatch {
        /// TPMSN expected.
        expected: u32,
        /// TPMSN received.
        got: u32,
    },
    /// A non-last packet was not exactly one MTU long, or a last packet was
    /// empty.
    BadLength,
    /// The message exceeds the largest length the caller accepts.
    TooLong,
}

/// Outcome of one in-order packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    /// Part of a message; `offset` is where its payload goes.
    Partial {
        /// TPMSN.
        tpmsn: u32,
        /// Offset of this payload in the message.
        offset: u32,
    },
    /// The message is complete with this packet.
    Complete {
        /// TPMSN.
        tpmsn: u32,
        /// Offset of this payload in the message.
        offset: u32,
        /// Total message length.
        len: u32,
    },
}

/// Tracks message boundaries of one RTP channel's in-order packet stream.
#[derive(Clone, Copy, Debug)]
pub struct Reassembler {
    mtu: u32,
    max_len: u32,
    expect: u32,
    offset: u32,
}

impl Reassembler {
    /// A reassembler expecting TPMSN `first_tpmsn`, packets of `mtu`, and
    /// messages of at most `max_len` bytes.
    pub const fn new(first_tpmsn: u32, mtu: u32, max_len: u32) -> Self {
        Self {
            mtu,
            max_len,
            expect: first_tpmsn,
            offset: 0,
        }
    }

    /// TPMSN of the message being assembled (or the next one).
    pub const fn expected_tpmsn(&self) -> u32 {
        self.expect
    }

    /// Accounts the next in-order packet.
    pub fn on_packet(
        &mut self,
        tpmsn: u32,
        last: bool,
        len: u32,
    ) -> Result<Segment, ReassemblyError> {
        if tpmsn != self.expect {
            return Err(ReassemblyError::TpmsnMismatch {
                expected: self.expect,
                got: tpmsn,
            });
        }
        if (!last && len != self.mtu) || (last && (len == 0 || len > self.mtu)) {
            return Err(ReassemblyError::BadLength);
        }
        let offset = self.offset;
        let end = offset.checked_add(len).ok_or(ReassemblyError::TooLong)?;
        if end > self.max_len {
            return Err(ReassemblyError::TooLong);
        }
        if last {
            self.expect = self.expect.wrapping_add(1) & 0xff_ffff;
            self.offset = 0;
            Ok(Segment::Complete {
                tpmsn,
                offset,
                len: end,
            })
        } else {
            self.offset = end;
            Ok(Segment::Partial { tpmsn, offset })
        }
    }
}

/// Writes a CTP data packet's transport part (CTPH, payload, padding) into
/// `out`; returns its length.
pub fn write_ctp(out: &mut [u8], nlp: u8, payload: &[u8]) -> Result<usize, Error> {
    let padding = padding_for(CTPH_LEN.saturating_add(payload.len()));
    let h = Ctph {
        opcode: CtpOpcode::Data,
        padding,
        nlp,
    };
    write_with_payload(out, payload, padding, |o| h.write(o))
}

/// Writes a UTP packet's transport part (UTPH, payload, padding).
pub fn write_utp(out: &mut [u8], nlp: u8, payload: &[u8]) -> Result<usize, Error> {
    let padding = padding_for(RTPH_LEN.saturating_add(payload.len()));
    let h = Utph { padding, nlp };
    write_with_payload(out, payload, padding, |o| h.write(o))
}

fn write_with_payload(
    out: &mut [u8],
    payload: &[u8],
    padding: u8,
    hdr: impl FnOnce(&mut [u8]) -> Result<usize, Error>,
) -> Result<usize, Error> {
    let h = hdr(out)?;
    let end = h.checked_add(payload.len()).ok_or(Error::NoSpace)?;
    out.get_mut(h..end)
        .ok_or(Error::NoSpace)?
        .copy_from_slice(payload);
    let total = end
        .checked_add(usize::from(padding))
        .ok_or(Error::NoSpace)?;
    out.get_mut(end..total).ok_or(Error::NoSpace)?.fill(0);
    Ok(total)
}

/// The payload of a transport part whose header is `hdr_len` bytes and
/// whose padding is `padding` bytes.
pub fn strip(tp: &[u8], hdr_len: usize, padding: u8) -> Result<&[u8], Error> {
    let end = tp
        .len()
        .checked_sub(usize::from(padding))
        .ok_or(Error::Truncated)?;
    tp.get(hdr_len..end).ok_or(Error::Truncated)
}

/// Parses a CTP packet's transport part: header and payload.
pub fn parse_ctp(tp: &[u8]) -> Result<(Ctph, &[u8]), Error> {
    let h = Ctph::parse(tp)?;
    Ok((h, strip(tp, CTPH_LEN, h.padding)?))
}

/// Parses a UTP packet's transport part.
pub fn parse_utp(tp: &[u8]) -> Result<(Utph, &[u8]), Error> {
    let h = Utph::parse(tp)?;
    Ok((h, strip(tp, RTPH_LEN, h.padding)?))
}

/// Completes a packet in `out` whose transport part (`tp_len` bytes) is
/// already at offset `net.len()`: writes the network header in front and
/// the ICRC behind (if the class has one), computed by `crc32`. Returns the
/// packet length (everything after the LPH).
pub fn finish_packet(
    crc32: Crc32Update,
    net: &NetHeader,
    out: &mut [u8],
    tp_len: usize,
) -> Result<usize, Error> {
    let hlen = net.write(out, tp_len)?;
    let body = hlen.checked_add(tp_len).ok_or(Error::NoSpace)?;
    let class = net.class();
    if !class.has_icrc() {
        return Ok(body);
    }
    let total = body.checked_add(ICRC_LEN).ok_or(Error::NoSpace)?;
    let pkt = out.get_mut(..total).ok_or(Error::NoSpace)?;
    icrc::seal(crc32, class, pkt)?;
    Ok(total)
}

/// Checks a received packet (network header, and ICRC with `crc32`) and
/// returns the header and the transport part.
pub fn open_packet(
    crc32: Crc32Update,
    class: super::super::net::PacketClass,
    pkt: &[u8],
) -> Result<(NetHeader, &[u8]), Error> {
    let (net, hlen) = NetHeader::parse(class, pkt)?;
    let end = if class.has_icrc() {
        icrc::verify(crc32, class, pkt)?;
        pkt.len().checked_sub(ICRC_LEN).ok_or(Error::Truncated)?
    } else {
        pkt.len()
    };
    Ok((net, pkt.get(hlen..end).ok_or(Error::Truncated)?))
}
