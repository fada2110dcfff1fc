// SPDX-License-Identifier: GPL-2.0
//! Guest-side probe of the emulated UB controller, for the QEMU smoke
//! test: maps BAR0 through sysfs (`resource0`), checks the
//! identification and capability registers against the values of
//! `ub_proto::controller` (repeated here: this file is built alone, with
//! plain `rustc`, as a static binary for the guest), and checks that the
//! scratch register holds what it was written.
//!
//! usage: ub-fabric-probe /sys/bus/pci/devices/DEV/resource0

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
}

const PROT_READ: i32 = 1;
const PROT_WRITE: i32 = 2;
const MAP_SHARED: i32 = 1;
const BAR0_SIZE: usize = 0x1_0000;

fn main() {
    let path = std::env::args().nth(1).expect("usage: ub-fabric-probe RESOURCE0");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open resource0");
    // SAFETY: a shared mapping of the BAR file; every access below is an
    // aligned 32-bit volatile access inside it.
    let bar = unsafe {
        mmap(
            std::ptr::null_mut(),
            BAR0_SIZE,
            PROT_READ | PROT_WRITE,
            MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert!(bar as isize != -1, "mmap failed");
    // SAFETY: `off` < BAR0_SIZE and 4-byte aligned (callers below).
    let rd = |off: usize| unsafe { std::ptr::read_volatile(bar.add(off).cast::<u32>()) };
    // SAFETY: as above.
    let wr = |off: usize, v: u32| unsafe { std::ptr::write_volatile(bar.add(off).cast::<u32>(), v) };
    let ident = rd(0x000);
    let version = rd(0x004);
    let ports = rd(0x008);
    let xfer = rd(0x010);
    let vectors = rd(0x014);
    println!("IDENT={ident:#010x} VERSION={version:#010x} PORTS={ports} CAP_XFER={xfer:#x} MSIX={vectors}");
    let mut ok = ident == u32::from_le_bytes(*b"UBC1") && version >> 16 == 1;
    ok &= (1..=8).contains(&ports) && vectors == ports + 1 && xfer & 0xffff == 2560;
    wr(0x02c, 0x5a5a_1234);
    let scratch = rd(0x02c);
    println!("SCRATCH={scratch:#010x}");
    ok &= scratch == 0x5a5a_1234;
    let phy = rd(0x1000);
    println!("PORT0 PHY_STATUS={phy:#x} FLIT_RATE={}kflit/s", rd(0x1008));
    std::process::exit(if ok { 0 } else { 1 });
}
