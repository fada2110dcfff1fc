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
}

/// One region QEMU mapped with `dma_map`: guest range and our mapping.
struct Region {
    gpa: u64,
    len: u64,
    ptr: *mut u8,
}

// SAFETY: the region is a private mapping owned by `Region` (unmapped on
// drop); the pointer is only dereferenced under the `Mutex` that holds it.
unsafe impl Send for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned in `map`.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len as usize);
        }
    }
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
        let mut regions = self.regions.lock().map_err(|_| std::io::ErrorKind::Other)?;
        regions.retain(|r| r.gpa.saturating_add(r.len) <= gpa || r.gpa >= gpa + len);
        regions.push(Region {
            gpa,
            len,
            ptr: ptr.cast(),
        });
        Ok(())
    }

    /// Removes the regions inside `gpa..gpa+len` (all if `len` is 0 and
    /// `all` is set).
    pub fn unmap(&self, gpa: u64, len: u64, all: bool) {
        if let Ok(mut regions) = self.regions.lock() {
            if all {
                regions.clear();
            } else {
                let end = gpa.saturating_add(len);
                regions.retain(|r| !(r.gpa >= gpa && r.gpa.saturating_add(r.len) <= end));
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
            if addr >= r.gpa && end <= r.gpa.saturating_add(r.len) {
                let off = (addr - r.gpa) as usize;
                // SAFETY: `off + len <= r.len`, checked just above, so the
                // pointer stays inside the mapping.
                return Ok(f(unsafe { r.ptr.add(off) }));
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
}
