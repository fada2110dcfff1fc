// SPDX-License-Identifier: GPL-2.0
//! In-band echo over UTP datagrams, UB's counterpart of ICMP echo: it tests
//! the whole path (routing, network header, ICRC, the link layer of every
//! hop) before any TP channel exists. The specification defines no such
//! message; this format is the project's (`Documentation/ub/network.rst`,
//! "Echo").
//!
//! A message is one UTP datagram payload, big-endian:
//!
//! | Bytes   | Field       | Meaning                                         |
//! |---------|-------------|-------------------------------------------------|
//! | 0..4    | magic       | `"UBEC"`                                        |
//! | 4       | kind        | 1 request, 2 reply                              |
//! | 5..8    | reserved    | 0 (ignored on receipt)                          |
//! | 8..12   | id          | chosen by the requester, echoed                 |
//! | 12..16  | seq         | chosen by the requester, echoed                 |
//! | 16..24  | stamp       | requester's clock at sending (ns), echoed       |
//! | 24..    | data        | [`data_byte`] pattern, echoed                   |
//!
//! The responder copies id, seq, stamp and data; the requester checks the
//! data against the pattern, so a corrupted reply is counted, not taken.

/// Bytes before the data.
pub const ECHO_HEADER_LEN: usize = 24;
/// The magic of every echo message.
pub const ECHO_MAGIC: [u8; 4] = *b"UBEC";

/// Request or reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoKind {
    /// Asks the receiver to answer.
    Request,
    /// The answer.
    Reply,
}

impl EchoKind {
    const fn code(self) -> u8 {
        match self {
            Self::Request => 1,
            Self::Reply => 2,
        }
    }
}

/// The fixed part of an echo message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    /// Request or reply.
    pub kind: EchoKind,
    /// Requester's identifier.
    pub id: u32,
    /// Sequence number.
    pub seq: u32,
    /// Requester's send time (ns).
    pub stamp: u64,
}

/// Why bytes are not an echo message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoError {
    /// Shorter than the header, or no room for it.
    Short,
    /// Not an echo message (magic or kind).
    NotEcho,
    /// The data does not follow the pattern.
    Corrupt,
}

/// Byte `i` of the data of echo `id`/`seq`: the requester writes and
/// checks it, so the responder needs no buffer beyond the packet.
pub const fn data_byte(id: u32, seq: u32, i: usize) -> u8 {
    (id.wrapping_mul(31) ^ seq.wrapping_mul(7) ^ (i as u32).wrapping_mul(13) ^ ((i >> 8) as u32))
        as u8
}

impl Echo {
    /// Writes the header into `out` (at least [`ECHO_HEADER_LEN`] bytes).
    pub fn write_header(&self, out: &mut [u8]) -> Result<(), EchoError> {
        let h: &mut [u8; ECHO_HEADER_LEN] = out
            .get_mut(..ECHO_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(EchoError::Short)?;
        let [m0, m1, m2, m3] = ECHO_MAGIC;
        let [i0, i1, i2, i3] = self.id.to_be_bytes();
        let [s0, s1, s2, s3] = self.seq.to_be_bytes();
        let [t0, t1, t2, t3, t4, t5, t6, t7] = self.stamp.to_be_bytes();
        *h = [
            m0,
            m1,
            m2,
            m3,
            self.kind.code(),
            0,
            0,
            0,
            i0,
            i1,
            i2,
            i3,
            s0,
            s1,
            s2,
            s3,
            t0,
            t1,
            t2,
            t3,
            t4,
            t5,
            t6,
            t7,
        ];
        Ok(())
    }

    /// Writes a whole request of `data_len` data bytes into `out`; returns
    /// its length.
    pub fn write_request(&self, out: &mut [u8], data_len: usize) -> Result<usize, EchoError> {
        let total = ECHO_HEADER_LEN
            .checked_add(data_len)
            .ok_or(EchoError::Short)?;
        let msg = out.get_mut(..total).ok_or(EchoError::Short)?;
        let (header, data) = msg.split_at_mut(ECHO_HEADER_LEN);
        self.write_header(header)?;
        for (i, b) in data.iter_mut().enumerate() {
            *b = data_byte(self.id, self.seq, i);
        }
        Ok(total)
    }

    /// Parses the header of `msg`.
    pub fn parse(msg: &[u8]) -> Result<Self, EchoError> {
        let h: &[u8; ECHO_HEADER_LEN] = msg
            .get(..ECHO_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(EchoError::Short)?;
        let [m0, m1, m2, m3, kind, _, _, _, i0, i1, i2, i3, s0, s1, s2, s3, t0, t1, t2, t3, t4, t5, t6, t7] =
            *h;
        if [m0, m1, m2, m3] != ECHO_MAGIC {
            return Err(EchoError::NotEcho);
        }
        let kind = match kind {
            1 => EchoKind::Request,
            2 => EchoKind::Reply,
            _ => return Err(EchoError::NotEcho),
        };
        Ok(Self {
            kind,
            id: u32::from_be_bytes([i0, i1, i2, i3]),
            seq: u32::from_be_bytes([s0, s1, s2, s3]),
            stamp: u64::from_be_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
        })
    }

    /// Checks the data of a reply (`msg` after [`Echo::parse`]).
    pub fn check_data(&self, msg: &[u8]) -> Result<(), EchoError> {
        let data = msg.get(ECHO_HEADER_LEN..).ok_or(EchoError::Short)?;
        if data
            .iter()
            .enumerate()
            .all(|(i, &b)| b == data_byte(self.id, self.seq, i))
        {
            Ok(())
        } else {
            Err(EchoError::Corrupt)
        }
    }

    /// Turns a received request (`msg`, parsed into `self`) into its reply
    /// in place: only the kind changes.
    pub fn make_reply(msg: &mut [u8]) -> Result<(), EchoError> {
        let req = Self::parse(msg)?;
        if req.kind != EchoKind::Request {
            return Err(EchoError::NotEcho);
        }
        let kind = msg.get_mut(4).ok_or(EchoError::Short)?;
        *kind = EchoKind::Reply.code();
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]
mod tests {
    use super::*;

    #[test]
    fn request_reply_round_trip() {
        let req = Echo {
            kind: EchoKind::Request,
            id: 7,
            seq: 42,
            stamp: 0x0102_0304_0506_0708,
        };
        let mut buf = [0u8; 128];
        let n = req.write_request(&mut buf, 100).unwrap();
        assert_eq!(n, 124);
        assert_eq!(&buf[..5], b"UBEC\x01");
        assert_eq!(Echo::parse(&buf[..n]), Ok(req));
        Echo::make_reply(&mut buf[..n]).unwrap();
        let rep = Echo::parse(&buf[..n]).unwrap();
        assert_eq!(rep.kind, EchoKind::Reply);
        assert_eq!((rep.id, rep.seq, rep.stamp), (7, 42, req.stamp));
        assert_eq!(rep.check_data(&buf[..n]), Ok(()));
        // A reply is not answered again.
        assert_eq!(Echo::make_reply(&mut buf[..n]), Err(EchoError::NotEcho));
    }

    #[test]
    fn bad_messages_are_refused() {
        let req = Echo {
            kind: EchoKind::Request,
            id: 1,
            seq: 2,
            stamp: 3,
        };
        let mut buf = [0u8; 64];
        let n = req.write_request(&mut buf, 40).unwrap();
        assert_eq!(Echo::parse(&buf[..23]), Err(EchoError::Short));
        let mut other = buf;
        other[0] = b'X';
        assert_eq!(Echo::parse(&other[..n]), Err(EchoError::NotEcho));
        other = buf;
        other[4] = 9;
        assert_eq!(Echo::parse(&other[..n]), Err(EchoError::NotEcho));
        other = buf;
        other[30] ^= 1;
        assert_eq!(req.check_data(&other[..n]), Err(EchoError::Corrupt));
        assert_eq!(req.write_request(&mut buf, 41), Err(EchoError::Short));
    }
}
