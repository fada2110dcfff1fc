// SPDX-License-Identifier: GPL-2.0
//! The sender's retry buffer (UB spec §4.7.3): a ring of flits in caller
//! storage with NumFreeBuf, WrPtr, TailPtr and RdPtr.

use core::ops::DerefMut;

use super::frame::{header_cfg, seal_block, Flit, Mode, FLIT_BYTES, MAX_BLOCK_BYTES};

/// One flit of the retry buffer, with the length of the block it starts
/// (0 for a flit inside a block) so retransmission keeps block boundaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrySlot {
    flit: Flit,
    block_flits: u8,
}

impl RetrySlot {
    /// An empty slot, to initialise caller storage.
    pub const EMPTY: Self = Self {
        flit: [0; FLIT_BYTES],
        block_flits: 0,
    };
}

impl Default for RetrySlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// Smallest usable retry buffer: the largest block, the smallest lock-out
/// reserve (room for a NOB and a Crd_Ack), one ACK-only Crd_Ack the peer
/// has not acknowledged, and the flit that always stays free.
pub const MIN_RETRY_DEPTH: usize = 39;

/// Most flits a retry buffer can have (RETRY_BUF_DEPTH is 16 bits).
pub const MAX_RETRY_DEPTH: usize = 0xffff;

/// Retry buffer errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryError {
    /// An ACK released more flits than are held (DL protocol error).
    AckOverflow,
    /// A Retry_Req pointed outside the held flits.
    BadRcvPtr,
    /// Not enough room for a block.
    Full,
}

/// Retry buffer over caller storage `S` (a slice, `Vec`, `KVec`, ...).
#[derive(Clone)]
pub struct RetryBuffer<S> {
    slots: S,
    depth: u16,
    num_free: u16,
    wr: u16,
    tail: u16,
    rd: u16,
}

impl<S> core::fmt::Debug for RetryBuffer<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RetryBuffer")
            .field("depth", &self.depth)
            .field("num_free", &self.num_free)
            .field("wr", &self.wr)
            .field("tail", &self.tail)
            .field("rd", &self.rd)
            .finish()
    }
}

impl<S: DerefMut<Target = [RetrySlot]>> RetryBuffer<S> {
    /// A retry buffer using `slots` (at most [`MAX_RETRY_DEPTH`] are used).
    /// Returns `None` below [`MIN_RETRY_DEPTH`].
    pub fn new(slots: S) -> Option<Self> {
        let len = slots.len().min(MAX_RETRY_DEPTH);
        if len < MIN_RETRY_DEPTH {
            return None;
        }
        let depth = len as u16;
        Some(Self {
            slots,
            depth,
            num_free: depth,
            wr: 0,
            tail: 0,
            rd: 0,
        })
    }

    /// RETRY_BUF_DEPTH.
    pub const fn depth(&self) -> u16 {
        self.depth
    }
    /// NumFreeBuf.
    pub const fn num_free(&self) -> u16 {
        self.num_free
    }
    /// WrPtr.
    pub const fn wr_ptr(&self) -> u16 {
        self.wr
    }
    /// TailPtr.
    pub const fn tail_ptr(&self) -> u16 {
        self.tail
    }
    /// RdPtr.
    pub const fn rd_ptr(&self) -> u16 {
        self.rd
    }
    /// Flits held (sent, not yet ACKed).
    pub const fn used(&self) -> u16 {
        self.depth - self.num_free
    }
    /// `true` while a retransmission is in progress.
    pub const fn retransmitting(&self) -> bool {
        self.rd != self.wr
    }

    /// Empties the buffer; every pointer to 0 (§4.8.4).
    pub fn reset(&mut self) {
        self.num_free = self.depth;
        self.wr = 0;
        self.tail = 0;
        self.rd = 0;
    }

    /// `s` modulo the depth. Pointers stay below the depth, so `s` is
    /// almost always below twice the depth: one compare instead of a
    /// division per flit on the transmit path.
    const fn wrap(&self, s: u32) -> u16 {
        let d = self.depth as u32;
        if s < d {
            s as u16
        } else if s - d < d {
            (s - d) as u16
        } else {
            // `d` is never 0 for a buffer in use; `checked_rem` keeps a
            // division-by-zero panic out of the kernel build.
            match s.checked_rem(d) {
                Some(r) => r as u16,
                None => 0,
            }
        }
    }

    const fn add(&self, p: u16, n: u16) -> u16 {
        self.wrap(p as u32 + n as u32)
    }

    /// Modular distance from `a` forward to `b`.
    const fn dist(&self, a: u16, b: u16) -> u16 {
        self.wrap(b as u32 + self.depth as u32 - a as u32)
    }

    /// `true` if a block of `flits` fits. One flit always stays free, so
    /// that WrPtr = TailPtr only ever means "empty".
    pub const fn fits(&self, flits: usize) -> bool {
        flits < self.num_free as usize
    }

    /// Backs up a block just sent (`block` holds whole flits); advances
    /// WrPtr (and RdPtr, which follows WrPtr outside retransmission).
    pub fn push(&mut self, block: &[u8]) -> Result<(), RetryError> {
        let flits = block.len() / FLIT_BYTES;
        if flits == 0 || !self.fits(flits) {
            return Err(RetryError::Full);
        }
        let mut wr = self.wr;
        for (i, chunk) in block.chunks_exact(FLIT_BYTES).enumerate() {
            if let Some(slot) = self.slots.get_mut(usize::from(wr)) {
                slot.flit.copy_from_slice(chunk);
                slot.block_flits = if i == 0 { flits as u8 } else { 0 };
            }
            wr = self.add(wr, 1);
        }
        let was_caught_up = self.rd == self.wr;
        self.wr = wr;
        if was_caught_up {
            self.rd = wr;
        }
        self.num_free -= flits as u16;
        Ok(())
    }

    /// Releases `flits` ACKed flits from the tail.
    pub fn release(&mut self, flits: u32) -> Result<(), RetryError> {
        if flits > u32::from(self.used()) {
            return Err(RetryError::AckOverflow);
        }
        let n = flits as u16;
        // A retransmission may not restart before the tail.
        let rd_behind = self.dist(self.tail, self.rd) < n;
        self.tail = self.add(self.tail, n);
        if rd_behind {
            self.rd = self.tail;
        }
        self.num_free += n;
        Ok(())
    }

    /// Starts a retransmission from `rcv_ptr` (RdPtr := RcvPtr). The
    /// buffer never fills completely (see [`RetryBuffer::push`]), so every
    /// pointer between TailPtr and WrPtr is unambiguous.
    pub fn start_retransmit(&mut self, rcv_ptr: u16) -> Result<(), RetryError> {
        if rcv_ptr >= self.depth || self.dist(self.tail, rcv_ptr) > self.used() {
            return Err(RetryError::BadRcvPtr);
        }
        self.rd = rcv_ptr;
        Ok(())
    }

    /// Re-seals every held block for `mode` (after an encapsulation mode
    /// switch). Only DLLCBs can be converted: their last flit's bytes
    /// 16–19 are trailer only. Returns `false` (leaving the rest untouched)
    /// if a held block is a DLLDB or the block structure is broken.
    pub fn reseal_control_blocks(&mut self, mode: Mode) -> bool {
        let mut at = self.tail;
        let mut left = usize::from(self.used());
        while left > 0 {
            let n = self
                .slots
                .get(usize::from(at))
                .map_or(0, |s| usize::from(s.block_flits));
            if n == 0 || n > left {
                return false;
            }
            let mut block = [0u8; MAX_BLOCK_BYTES];
            let bytes = n * FLIT_BYTES;
            let Some(buf) = block.get_mut(..bytes) else {
                return false;
            };
            let mut p = at;
            for chunk in buf.chunks_exact_mut(FLIT_BYTES) {
                if let Some(slot) = self.slots.get(usize::from(p)) {
                    chunk.copy_from_slice(&slot.flit);
                }
                p = self.add(p, 1);
            }
            if header_cfg(buf) != Some(0) {
                return false;
            }
            if let Some(trailer) = buf.get_mut(bytes - 4..) {
                trailer.fill(0);
            }
            seal_block(mode, buf, true, false);
            let mut p = at;
            for chunk in buf.chunks_exact(FLIT_BYTES) {
                if let Some(slot) = self.slots.get_mut(usize::from(p)) {
                    slot.flit.copy_from_slice(chunk);
                }
                p = self.add(p, 1);
            }
            at = p;
            left -= n;
        }
        true
    }

    /// Length of the next block to retransmit (0 when done).
    pub fn next_retransmit_len(&self) -> usize {
        if !self.retransmitting() {
            return 0;
        }
        let b = self
            .slots
            .get(usize::from(self.rd))
            .map_or(0, |s| usize::from(s.block_flits));
        let left = usize::from(self.dist(self.rd, self.wr));
        if b == 0 || b > left {
            1
        } else {
            b
        }
    }

    /// Copies the next block to retransmit into `out` and advances RdPtr;
    /// returns the bytes written (0 when done or `out` is too short).
    pub fn retransmit(&mut self, out: &mut [u8]) -> usize {
        let n = self.next_retransmit_len();
        let Some(dst) = out.get_mut(..n * FLIT_BYTES) else {
            return 0;
        };
        let mut rd = self.rd;
        for chunk in dst.chunks_exact_mut(FLIT_BYTES) {
            if let Some(slot) = self.slots.get(usize::from(rd)) {
                chunk.copy_from_slice(&slot.flit);
            }
            rd = self.add(rd, 1);
        }
        self.rd = rd;
        n * FLIT_BYTES
    }
}
