// SPDX-License-Identifier: GPL-2.0
//! Descriptor rings in coherent DMA memory.
//!
//! A [`DmaRing`] is one TX or RX ring of a port: `size` 16-byte descriptors
//! and one [`BUF_BYTES`] buffer per slot, both in `dma::Coherent` memory the
//! device reads and writes directly.
//!
//! Who owns which slot is [`RingCursor`]'s bookkeeping (`ub_proto`, tested
//! on the host): the driver owns the slots from the tail up to the oldest
//! uncompleted one, the device the slots in flight. The driver writes a
//! slot's descriptor and buffer only while it owns the slot, and reads a
//! slot's write-back and buffer only after the device's head passed it;
//! every value read from the device is checked before use
//! ([`Desc::check_completion`]). A hostile device may still write anywhere
//! in this memory at any time: the driver copies what it reads out with
//! volatile accesses and never forms a reference into device-written memory,
//! so at worst it reads garbage, which the checks and the protocol layers
//! refuse.
//!
//! Locking: none here; a ring belongs to its port's state, under the port's
//! lock.

use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    prelude::*,
};

use crate::controller::ring::{Completion, DescFault, RingCursor};
use crate::controller::{Desc, DESC_BYTES, MAX_XFER_BYTES};

/// Bytes of one slot's buffer: the largest transfer a descriptor may carry.
pub(crate) const BUF_BYTES: usize = MAX_XFER_BYTES as usize;

/// One descriptor ring and its buffers (see the module documentation).
pub(crate) struct DmaRing {
    descs: Coherent<[u8]>,
    bufs: Coherent<[u8]>,
    cursor: RingCursor,
    /// The length the driver posted in each slot's descriptor: the bound a
    /// completion's `done_len` is checked against.
    posted: KVec<u16>,
}

impl DmaRing {
    /// Allocates a ring of `size` slots (a size the controller accepts).
    pub(crate) fn new(dev: &Device<Bound>, size: u32) -> Result<Self> {
        let cursor = RingCursor::new(size).ok_or(EINVAL)?;
        let n = usize::try_from(size)?;
        let descs = Coherent::<u8>::zeroed_slice(
            dev,
            n.checked_mul(DESC_BYTES).ok_or(ENOMEM)?,
            GFP_KERNEL,
        )?;
        let bufs =
            Coherent::<u8>::zeroed_slice(dev, n.checked_mul(BUF_BYTES).ok_or(ENOMEM)?, GFP_KERNEL)?;
        let mut posted = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            posted.push(0, GFP_KERNEL)?;
        }
        Ok(Self {
            descs,
            bufs,
            cursor,
            posted,
        })
    }

    /// The slot bookkeeping.
    pub(crate) fn cursor(&self) -> &RingCursor {
        &self.cursor
    }

    /// Bus address of descriptor 0 (the value of `RING_BASE_LO/HI`).
    pub(crate) fn base(&self) -> u64 {
        self.descs.dma_address()
    }

    /// Bus address of slot `slot`'s buffer.
    fn buf_addr(&self, slot: u32) -> Result<u64> {
        let off = u64::from(slot)
            .checked_mul(BUF_BYTES as u64)
            .ok_or(EINVAL)?;
        self.bufs.dma_address().checked_add(off).ok_or(EINVAL)
    }

    /// Byte range of `len` bytes at `off` in `region`, checked.
    fn span(region: &Coherent<[u8]>, off: usize, len: usize) -> Result<*mut u8> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if end > region.size() {
            return Err(EINVAL);
        }
        // SAFETY: `off + len <= size`, so the offset stays inside the
        // allocation `as_mut_ptr` points to.
        Ok(unsafe { region.as_mut_ptr().cast::<u8>().add(off) })
    }

    /// Reads descriptor `slot` (device-written: validate before use).
    pub(crate) fn read_desc(&self, slot: u32) -> Result<Desc> {
        let off = usize::try_from(slot)?
            .checked_mul(DESC_BYTES)
            .ok_or(EINVAL)?;
        let p = Self::span(&self.descs, off, DESC_BYTES)?;
        let mut raw = [0u8; DESC_BYTES];
        for (i, b) in raw.iter_mut().enumerate() {
            // SAFETY: `p .. p + DESC_BYTES` is inside the coherent
            // allocation (checked by `span`); a volatile byte read of DMA
            // memory the device may write concurrently is sound (any value
            // is a valid `u8`) and is never turned into a reference.
            *b = unsafe { core::ptr::read_volatile(p.add(i)) };
        }
        Ok(Desc::decode(&raw))
    }

    /// Writes descriptor `slot` (only while the driver owns the slot).
    fn write_desc(&self, slot: u32, desc: &Desc) -> Result {
        let off = usize::try_from(slot)?
            .checked_mul(DESC_BYTES)
            .ok_or(EINVAL)?;
        let p = Self::span(&self.descs, off, DESC_BYTES)?;
        for (i, b) in desc.encode().iter().enumerate() {
            // SAFETY: In bounds (checked by `span`); the slot belongs to the
            // driver, and a volatile write keeps the compiler from merging
            // or reordering it with the doorbell.
            unsafe { core::ptr::write_volatile(p.add(i), *b) };
        }
        Ok(())
    }

    /// Copies `len` bytes of slot `slot`'s buffer into `out` (after the
    /// device completed the slot; `len` was checked against what was
    /// posted).
    pub(crate) fn read_buf(&self, slot: u32, out: &mut [u8]) -> Result {
        if out.len() > BUF_BYTES {
            return Err(EINVAL);
        }
        let off = usize::try_from(slot)?
            .checked_mul(BUF_BYTES)
            .ok_or(EINVAL)?;
        let p = Self::span(&self.bufs, off, out.len())?;
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: In bounds (checked by `span`); see `read_desc`.
            *b = unsafe { core::ptr::read_volatile(p.add(i)) };
        }
        Ok(())
    }

    /// Fills the next free slot with `data` (TX) or posts an empty buffer
    /// of capacity `BUF_BYTES` (RX, `data` empty and `rx` set) and hands it
    /// to the device. Returns the new tail for the doorbell, or `EBUSY` if
    /// the ring is full.
    pub(crate) fn post(&mut self, data: &[u8], rx: bool) -> Result<u32> {
        if self.cursor.free() == 0 {
            return Err(EBUSY);
        }
        let len = if rx { BUF_BYTES } else { data.len() };
        let len16 = u16::try_from(len).map_err(|_| EINVAL)?;
        if len > BUF_BYTES {
            return Err(EINVAL);
        }
        let slot = self.cursor.tail();
        if !rx {
            let off = usize::try_from(slot)?
                .checked_mul(BUF_BYTES)
                .ok_or(EINVAL)?;
            let p = Self::span(&self.bufs, off, data.len())?;
            // SAFETY: In bounds (checked by `span`); the slot belongs to the
            // driver until the doorbell, and `data` is ordinary kernel
            // memory that cannot overlap the coherent allocation.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        }
        let desc = Desc {
            addr: self.buf_addr(slot)?,
            len: len16,
            ..Desc::default()
        };
        self.write_desc(slot, &desc)?;
        if let Some(p) = self.posted.get_mut(usize::try_from(slot)?) {
            *p = len16;
        }
        self.cursor.produce().ok_or(EBUSY)?;
        // The descriptor must be visible before the doorbell's MMIO write
        // (on x86 stores are not reordered with later stores; the fence
        // keeps the compiler from doing it).
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
        Ok(self.cursor.tail())
    }

    /// How many slots a device head of `head` completes (checked, nothing
    /// moves).
    pub(crate) fn completed(
        &self,
        head: u32,
    ) -> core::result::Result<u32, crate::controller::ring::RingFault> {
        self.cursor.completed(head)
    }

    /// Reclaims the oldest in-flight slot and checks its completion.
    /// Returns the slot and the check's verdict.
    pub(crate) fn reclaim(&mut self) -> Option<(u32, core::result::Result<Completion, DescFault>)> {
        let slot = self.cursor.clean();
        let desc = self.read_desc(slot).ok()?;
        let posted = self
            .posted
            .get(usize::try_from(slot).ok()?)
            .copied()
            .unwrap_or(0);
        self.cursor.reclaim()?;
        Some((slot, desc.check_completion(posted)))
    }

    /// Forgets every slot after the ring was disabled (its indices restart
    /// at 0) and clears the descriptors.
    pub(crate) fn reset(&mut self) {
        self.cursor.reset();
        let empty = Desc::default();
        for slot in 0..self.cursor.size() {
            let _ = self.write_desc(slot, &empty);
        }
    }
}
