// SPDX-License-Identifier: GPL-2.0
//! The retry buffer on its own: pointers, wrap-around, ACK release,
//! retransmission by whole blocks, Retry_Req validation, re-sealing.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::link::ctrl::ControlBlock;
use ub_proto::link::frame::{Mode, FLIT_BYTES};
use ub_proto::link::retry::{RetryBuffer, RetryError, RetrySlot, MIN_RETRY_DEPTH};

fn block(flits: usize, tag: u8) -> Vec<u8> {
    let mut v = vec![tag; flits * FLIT_BYTES];
    // Mark each flit so retransmitted data can be checked.
    for (i, f) in v.chunks_exact_mut(FLIT_BYTES).enumerate() {
        f[1] = 3; // a DLLDP CFG
        f[2] = i as u8;
    }
    v
}

#[test]
fn pointers_wrap_and_release() {
    assert!(RetryBuffer::new(vec![RetrySlot::EMPTY; MIN_RETRY_DEPTH - 1]).is_none());
    let mut rb = RetryBuffer::new(vec![RetrySlot::EMPTY; 50]).unwrap();
    assert_eq!(
        (rb.depth(), rb.num_free(), rb.wr_ptr(), rb.tail_ptr()),
        (50, 50, 0, 0)
    );
    rb.push(&block(32, 1)).unwrap();
    assert_eq!((rb.num_free(), rb.wr_ptr(), rb.rd_ptr()), (18, 32, 32));
    // One flit always stays free.
    assert!(rb.fits(17));
    assert!(!rb.fits(18));
    assert_eq!(rb.push(&block(18, 2)), Err(RetryError::Full));
    rb.release(30).unwrap();
    assert_eq!((rb.num_free(), rb.tail_ptr()), (48, 30));
    rb.push(&block(32, 3)).unwrap();
    assert_eq!(rb.wr_ptr(), 14); // wrapped
    assert_eq!(rb.used(), 34);
    assert_eq!(rb.release(35), Err(RetryError::AckOverflow));
    rb.release(34).unwrap();
    assert_eq!((rb.used(), rb.tail_ptr(), rb.wr_ptr()), (0, 14, 14));
    rb.reset();
    assert_eq!(
        (rb.num_free(), rb.wr_ptr(), rb.tail_ptr(), rb.rd_ptr()),
        (50, 0, 0, 0)
    );
}

#[test]
fn retransmission_by_whole_blocks_across_the_wrap() {
    let mut rb = RetryBuffer::new(vec![RetrySlot::EMPTY; 40]).unwrap();
    rb.push(&block(30, 9)).unwrap();
    rb.release(30).unwrap();
    let a = block(3, 1);
    let b = block(7, 2);
    let c = block(1, 3);
    for x in [&a, &b, &c] {
        rb.push(x).unwrap();
    }
    // RcvPtr outside [TailPtr, WrPtr] is refused.
    assert_eq!(rb.start_retransmit(29), Err(RetryError::BadRcvPtr));
    assert_eq!(rb.start_retransmit(40), Err(RetryError::BadRcvPtr));
    assert_eq!(rb.start_retransmit(2), Err(RetryError::BadRcvPtr));
    // From the start of block b (30 + 3 = 33).
    rb.start_retransmit(33).unwrap();
    assert!(rb.retransmitting());
    let mut out = vec![0u8; 32 * FLIT_BYTES];
    assert_eq!(rb.next_retransmit_len(), 7);
    // Too small an output: nothing is cut.
    assert_eq!(rb.retransmit(&mut out[..6 * FLIT_BYTES]), 0);
    assert_eq!(rb.retransmit(&mut out), 7 * FLIT_BYTES);
    assert_eq!(&out[..7 * FLIT_BYTES], &b[..]);
    assert_eq!(rb.retransmit(&mut out), FLIT_BYTES);
    assert_eq!(&out[..FLIT_BYTES], &c[..]);
    assert!(!rb.retransmitting());
    // Nothing held past WrPtr: a request for WrPtr resends nothing.
    rb.start_retransmit(rb.wr_ptr()).unwrap();
    assert!(!rb.retransmitting());
    // A mid-block RcvPtr (a flit-granular peer) resends flit by flit up
    // to the next block.
    rb.start_retransmit(35).unwrap();
    assert_eq!(rb.next_retransmit_len(), 1);
}

#[test]
fn reseal_converts_control_blocks_only() {
    let mut rb = RetryBuffer::new(vec![RetrySlot::EMPTY; 64]).unwrap();
    let mut buf = [0u8; 5 * FLIT_BYTES];
    for cb in [ControlBlock::Nob, ControlBlock::BlockModeChg { ack: true }] {
        let n = cb.encode(Mode::Crc, &mut buf).unwrap();
        rb.push(&buf[..n]).unwrap();
    }
    assert!(rb.reseal_control_blocks(Mode::NonCrc));
    rb.start_retransmit(rb.tail_ptr()).unwrap();
    let mut out = [0u8; 40];
    let n = rb.retransmit(&mut out);
    assert_eq!(
        ControlBlock::decode(Mode::NonCrc, &out[..n]).unwrap().0,
        ControlBlock::Nob
    );
    assert_eq!(&out[16..20], &[0, 0, 0, 0]);
    assert!(rb.reseal_control_blocks(Mode::Crc));
    // A DLLDB cannot be converted.
    rb.push(&block(2, 5)).unwrap();
    assert!(!rb.reseal_control_blocks(Mode::NonCrc));
}
