// SPDX-License-Identifier: GPL-2.0
//! The driver's bookkeeping of one descriptor ring, and the checks of what
//! the device reports about it.
//!
//! Ownership of the slots (`Documentation/ub/controller.rst`, "Descriptor
//! rings"): the driver owns the slots from `tail` up to (not including)
//! `clean`, the device the slots from `clean` up to `tail` (the in-flight
//! window). The driver fills a slot and moves `tail` past it (the doorbell);
//! the device consumes slots and moves its `RING_HEAD` past them; the driver
//! then reclaims the completed slots, moving `clean` up to that head. A ring
//! is empty when `clean == tail` and full when `tail + 1 == clean`.
//!
//! Everything the device writes is untrusted: a head outside the ring, a
//! head that moves backwards (which would complete slots twice), a
//! descriptor without DONE, unknown status bits or a length above what was
//! posted are each a typed [`RingFault`] or [`DescFault`], and the cursor
//! does not move. The driver counts them and resets the ring.

use super::{ring_next, ring_pending, ring_size_ok, Desc, DESC_STATUS, FLIT_BYTES};

/// A device-reported head the driver refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingFault {
    /// The head is not an index of the ring.
    HeadOutOfRange(u32),
    /// The head lies in the slots the driver owns, nearer the oldest
    /// in-flight slot: it moved backwards over slots already completed,
    /// which would complete them twice.
    HeadMovedBack(u32),
    /// The head lies in the slots the driver owns, nearer the tail: past
    /// the last slot the driver gave the device.
    HeadBeyondTail(u32),
}

/// A completed descriptor the driver refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescFault {
    /// The head passed it but DONE is clear.
    NotDone,
    /// Status bits the interface does not define (the raw status).
    UnknownStatus(u16),
    /// More bytes than the driver posted, or not whole flits.
    BadLength {
        /// What the device wrote in `done_len`.
        done_len: u16,
        /// What the driver posted in `len`.
        posted: u16,
    },
}

/// What a good completion says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Bytes sent (TX) or written (RX): whole flits, at most the posted
    /// length.
    pub len: u16,
    /// The device failed the descriptor with this `ERR_STATUS` bit.
    pub error: Option<u8>,
    /// RX: flits lost on the wire or for want of buffers just before this
    /// buffer's data.
    pub lost: u16,
}

/// Every status bit the interface defines.
const KNOWN_STATUS: u32 = DESC_STATUS::ZERO.code().mask()
    | DESC_STATUS::ZERO.lost().mask()
    | DESC_STATUS::ZERO.err().mask()
    | DESC_STATUS::ZERO.done().mask();

impl Desc {
    /// Checks a descriptor the device completed against the length the
    /// driver posted in it.
    pub fn check_completion(&self, posted: u16) -> Result<Completion, DescFault> {
        if u32::from(self.status) & !KNOWN_STATUS != 0 {
            return Err(DescFault::UnknownStatus(self.status));
        }
        let st = self.state();
        if !st.done().is_set() {
            return Err(DescFault::NotDone);
        }
        let error = self.error_code();
        // A failed descriptor moved nothing; its length is not used.
        if error.is_none() && (self.done_len > posted || u32::from(self.done_len) % FLIT_BYTES != 0)
        {
            return Err(DescFault::BadLength {
                done_len: self.done_len,
                posted,
            });
        }
        Ok(Completion {
            len: if error.is_some() { 0 } else { self.done_len },
            error,
            lost: if st.lost().is_set() { self.lost } else { 0 },
        })
    }
}

/// The driver's two indices of one ring (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingCursor {
    size: u32,
    clean: u32,
    tail: u32,
}

impl RingCursor {
    /// An empty ring of `size` slots, or `None` if the size is not one the
    /// controller accepts.
    pub const fn new(size: u32) -> Option<Self> {
        if !ring_size_ok(size) {
            return None;
        }
        Some(Self {
            size,
            clean: 0,
            tail: 0,
        })
    }

    /// Slots in the ring.
    pub const fn size(&self) -> u32 {
        self.size
    }

    /// The next slot the driver fills (the value written to `RING_TAIL`).
    pub const fn tail(&self) -> u32 {
        self.tail
    }

    /// The oldest slot the device owns (the next one to reclaim).
    pub const fn clean(&self) -> u32 {
        self.clean
    }

    /// Slots the device owns.
    pub const fn in_flight(&self) -> u32 {
        ring_pending(self.clean, self.tail, self.size)
    }

    /// Slots the driver may still fill.
    pub const fn free(&self) -> u32 {
        self.size - 1 - self.in_flight()
    }

    /// Hands the slot at the tail to the device and returns its index, or
    /// `None` if the ring is full. The driver writes the descriptor first,
    /// then rings the doorbell with the new [`RingCursor::tail`].
    pub fn produce(&mut self) -> Option<u32> {
        if self.free() == 0 {
            return None;
        }
        let slot = self.tail;
        self.tail = ring_next(self.tail, self.size);
        Some(slot)
    }

    /// How many slots a device head of `head` completes, from
    /// [`RingCursor::clean`] on. Nothing moves: reclaim them one by one
    /// with [`RingCursor::reclaim`].
    pub fn completed(&self, head: u32) -> Result<u32, RingFault> {
        if head >= self.size {
            return Err(RingFault::HeadOutOfRange(head));
        }
        let done = ring_pending(self.clean, head, self.size);
        if done > self.in_flight() {
            // Which end of the driver's slots it is nearer says what the
            // device did.
            let back = ring_pending(head, self.clean, self.size);
            let past = ring_pending(self.tail, head, self.size);
            return Err(if back <= past {
                RingFault::HeadMovedBack(head)
            } else {
                RingFault::HeadBeyondTail(head)
            });
        }
        Ok(done)
    }

    /// Takes back the slot at [`RingCursor::clean`] (completed, as
    /// [`RingCursor::completed`] said) and returns its index, or `None` if
    /// the device owns no slot.
    pub fn reclaim(&mut self) -> Option<u32> {
        if self.in_flight() == 0 {
            return None;
        }
        let slot = self.clean;
        self.clean = ring_next(self.clean, self.size);
        Some(slot)
    }

    /// Forgets every slot (after the driver disabled and re-enabled the
    /// ring, whose indices restart at 0).
    pub fn reset(&mut self) {
        self.clean = 0;
        self.tail = 0;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]
mod tests {
    use super::*;

    fn desc(done_len: u16, status: u16, lost: u16) -> Desc {
        Desc {
            addr: 0x1000,
            len: 2560,
            done_len,
            status,
            lost,
        }
    }

    #[test]
    fn cursor_fills_and_reclaims_in_order() {
        let mut r = RingCursor::new(8).unwrap();
        assert_eq!(r.free(), 7);
        for i in 0..7 {
            assert_eq!(r.produce(), Some(i));
        }
        assert_eq!(r.produce(), None, "a full ring keeps one slot free");
        assert_eq!(r.completed(3), Ok(3));
        for i in 0..3 {
            assert_eq!(r.reclaim(), Some(i));
        }
        assert_eq!(r.free(), 3);
        assert_eq!(r.produce(), Some(7));
        assert_eq!(r.produce(), Some(0), "indices wrap");
        assert_eq!(r.completed(1), Ok(6), "head wrapped past the end");
    }

    #[test]
    fn hostile_heads_are_refused_and_change_nothing() {
        let mut r = RingCursor::new(8).unwrap();
        for _ in 0..4 {
            r.produce();
        }
        r.completed(2).unwrap();
        r.reclaim();
        r.reclaim();
        let before = r;
        assert_eq!(r.completed(8), Err(RingFault::HeadOutOfRange(8)));
        assert_eq!(
            r.completed(u32::MAX),
            Err(RingFault::HeadOutOfRange(u32::MAX))
        );
        // Beyond the tail (4): slots the device was never given.
        assert_eq!(r.completed(5), Err(RingFault::HeadBeyondTail(5)));
        // Backwards (clean is 2): slot 1 would complete twice.
        assert_eq!(r.completed(1), Err(RingFault::HeadMovedBack(1)));
        assert_eq!(r, before);
        assert_eq!(r.completed(2), Ok(0), "no progress is not a fault");
        assert_eq!(r.completed(4), Ok(2));
    }

    #[test]
    fn completions_are_checked() {
        let ok = DESC_STATUS::ok().into_raw();
        assert_eq!(
            desc(40, ok, 0).check_completion(2560),
            Ok(Completion {
                len: 40,
                error: None,
                lost: 0
            })
        );
        assert_eq!(
            desc(40, 0, 0).check_completion(2560),
            Err(DescFault::NotDone)
        );
        assert_eq!(
            desc(40, ok | 0x10, 0).check_completion(2560),
            Err(DescFault::UnknownStatus(ok | 0x10))
        );
        assert_eq!(
            desc(2580, ok, 0).check_completion(2560),
            Err(DescFault::BadLength {
                done_len: 2580,
                posted: 2560
            })
        );
        assert_eq!(
            desc(41, ok, 0).check_completion(2560),
            Err(DescFault::BadLength {
                done_len: 41,
                posted: 2560
            })
        );
        let lost = DESC_STATUS::ok().lost().set(true).into_raw();
        assert_eq!(
            desc(20, lost, 3).check_completion(2560).map(|c| c.lost),
            Ok(3)
        );
        // `lost` without the LOST bit is ignored.
        assert_eq!(
            desc(20, ok, 3).check_completion(2560).map(|c| c.lost),
            Ok(0)
        );
        let failed = DESC_STATUS::failed(super::super::ERR_STATUS::ZERO.tx_desc()).into_raw();
        assert_eq!(
            desc(9999, failed, 0).check_completion(20),
            Ok(Completion {
                len: 0,
                error: Some(0),
                lost: 0
            })
        );
    }
}
