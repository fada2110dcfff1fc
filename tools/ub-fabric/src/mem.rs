// SPDX-License-Identifier: GPL-2.0
//! Guest memory as the device model sees it: a trait with a fake for tests
//! and the vfio-user mapping for the daemon.
//!
//! Every access is checked: an address range that is not entirely inside
//! one mapped region is an error, never a crash.

use std::fs::File;
use std::sync::{Arc, Mutex};

use thiserror::Error;

/// A DMA access that could not be done.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum DmaError {
    /// The range is not inside guest memory.
    #[error("DMA to {addr:#x}+{len} is outside guest memory")]
    OutOfRange {
        /// Start address.
        addr: u64,
        /// Length in bytes.
        len: usize,
    },
}

/// Guest-physical memory the device reads and writes.
pub trait GuestMemory: Send {
    /// Reads `buf.len()` bytes at `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError>;
    /// Whether `addr..addr+len` lies in guest memory as a whole (in one
    /// region), so that a buffer can be checked before any of it is used.
    fn contains(&self, addr: u64, len: usize) -> bool;
}

/// A flat fake memory: `size` bytes starting at guest address `base`.
#[derive(Debug, Clone)]
pub struct FakeMemory {
    base: u64,
    bytes: Vec<u8>,
}

impl FakeMemory {
    /// Zeroed memory of `size` bytes at `base`.
    pub fn new(base: u64, size: usize) -> Self {
        Self {
            base,
            bytes: vec![0; size],
        }
    }

    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, DmaError> {
        let err = DmaError::OutOfRange { addr, len };
        let off = addr.checked_sub(self.base).ok_or(err)?;
        let off = usize::try_from(off).map_err(|_| err)?;
        let end = off.checked_add(len).ok_or(err)?;
        if end > self.bytes.len() {
            return Err(err);
        }
        Ok(off..end)
    }
}

impl GuestMemory for FakeMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }

    fn contains(&self, addr: u64, len: usize) -> bool {
        self.range(addr, len).is_ok()
    }
}

/// One `mmap` of a file QEMU passed with `dma_map`, unmapped when the
/// last region using it goes.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is private to `MappedMemory` (unmapped on drop); the
// pointer is only dereferenced under the `Mutex` holding the regions.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared references never touch the memory without the
// regions' lock.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned in `map`.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// A guest range the device may reach: `len` bytes at guest address
/// `gpa`, backed by `map` from byte `off` (`off + len <= map.len`). A
/// partial `dma_unmap` leaves up to two regions of one mapping.
struct Region {
    gpa: u64,
    len: u64,
    map: Arc<Mapping>,
    off: usize,
}

impl Region {
    fn end(&self) -> u64 {
        self.gpa.saturating_add(self.len)
    }

    /// What remains of this region once `start..end` is taken away: the
    /// region itself if they do not overlap, else the parts below and
    /// above the cut.
    fn cut(self, start: u64, end: u64) -> [Option<Region>; 2] {
        if end <= self.gpa || start >= self.end() {
            return [Some(self), None];
        }
        let below = (self.gpa < start).then(|| Region {
            gpa: self.gpa,
            len: start - self.gpa,
            map: Arc::clone(&self.map),
            off: self.off,
        });
        let above = (end < self.end()).then(|| Region {
            gpa: end,
            len: self.end() - end,
            map: Arc::clone(&self.map),
            // end - gpa < len <= map.len - off: fits in usize.
            off: self.off + (end - self.gpa) as usize,
        });
        [below, above]
    }
}

/// Takes `start..end` out of `regions`.
fn take_away(regions: &mut Vec<Region>, start: u64, end: u64) {
    let old = std::mem::take(regions);
    regions.extend(old.into_iter().flat_map(|r| r.cut(start, end)).flatten());
}

/// Guest memory mapped from the file descriptors QEMU passes with
/// `dma_map` (shared with the vfio-user backend, which adds and removes
/// regions; the device model reads and writes through it).
#[derive(Clone, Default)]
pub struct MappedMemory {
    regions: Arc<Mutex<Vec<Region>>>,
}

impl std::fmt::Debug for MappedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.regions.lock().map(|r| r.len()).unwrap_or(0);
        f.debug_struct("MappedMemory").field("regions", &n).finish()
    }
}

impl MappedMemory {
    /// Maps `len` bytes of `fd` at file offset `offset` as guest range
    /// `gpa..gpa+len`.
    pub fn map(&self, fd: &File, offset: u64, gpa: u64, len: u64) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let size = usize::try_from(len).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let off = libc::off_t::try_from(offset).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        if size == 0 || gpa.checked_add(len).is_none() {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: a fresh shared mapping of a file QEMU gave us; the kernel
        // validates fd, offset and size. We never hand out references into
        // it, only copy in and out under the lock.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let map = Arc::new(Mapping {
            ptr: ptr.cast(),
            len: size,
        });
        let mut regions = self.regions.lock().map_err(|_| std::io::ErrorKind::Other)?;
        // A new mapping replaces whatever covered its range before.
        take_away(&mut regions, gpa, gpa + len);
        regions.push(Region {
            gpa,
            len,
            map,
            off: 0,
        });
        Ok(())
    }

    /// Takes `gpa..gpa+len` away from the device (everything if `all` is
    /// set): a range that covers only part of a mapping removes that part
    /// and leaves the rest reachable, so the device never reaches memory
    /// the guest took back.
    pub fn unmap(&self, gpa: u64, len: u64, all: bool) {
        if let Ok(mut regions) = self.regions.lock() {
            if all {
                regions.clear();
            } else {
                take_away(&mut regions, gpa, gpa.saturating_add(len));
            }
        }
    }

    /// Drops every mapping (guest disconnected).
    pub fn clear(&self) {
        self.unmap(0, 0, true);
    }

    fn with_range<T>(
        &self,
        addr: u64,
        len: usize,
        f: impl FnOnce(*mut u8) -> T,
    ) -> Result<T, DmaError> {
        let err = DmaError::OutOfRange { addr, len };
        let regions = self.regions.lock().map_err(|_| err)?;
        let end = addr.checked_add(len as u64).ok_or(err)?;
        for r in regions.iter() {
            if addr >= r.gpa && end <= r.end() {
                let off = r.off + (addr - r.gpa) as usize;
                // SAFETY: `addr - gpa + len <= r.len` (checked just above)
                // and `r.off + r.len <= map.len` (Region's invariant), so
                // the pointer and the access stay inside the mapping.
                return Ok(f(unsafe { r.map.ptr.add(off) }));
            }
        }
        Err(err)
    }
}

impl GuestMemory for MappedMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let len = buf.len();
        self.with_range(addr, len, |p| {
            // SAFETY: `p..p+len` is inside a live mapping (with_range); the
            // guest may change it concurrently, which only affects the
            // value read (plain bytes), like real DMA.
            unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), len) }
        })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.with_range(addr, data.len(), |p| {
            // SAFETY: as in `read`; the destination is inside the mapping.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) }
        })
    }

    fn contains(&self, addr: u64, len: usize) -> bool {
        self.with_range(addr, len, |_| ()).is_ok()
    }
}
