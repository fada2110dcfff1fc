// SPDX-License-Identifier: GPL-2.0
//! The stream code end to end without the device: a `SOCK_SEQPACKET`
//! socket pair keeps message boundaries as a TP Channel does, so the sender
//! and the receiver of `ub-tp` run against each other, and a raw write on
//! the sender's side plays a broken transport.

use std::os::fd::AsRawFd;
use std::thread;
use std::time::Duration;

use ub_tp::message::encode;
use ub_tp::sizes::SizeSpec;
use ub_tp::stream::{self, StreamError};
use ub_tp::verify::{Verdict, Verifier};

mod common;
use common::pair;

fn spec(s: &str) -> SizeSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn a_stream_arrives_whole_in_order_once() {
    let (tx, rx) = pair();
    let sizes = spec("1,15,16,17,4096,1-65536");
    let s2 = sizes.clone();
    let sender = thread::spawn(move || stream::send(&tx, &s2, 7, 300));
    let mut v = Verifier::new(sizes, 7);
    let mut bad = Vec::new();
    let (sum, r) = stream::recv(
        &rx,
        &mut v,
        300,
        Some(Duration::from_secs(10)),
        |i, _, verdict| bad.push((i, verdict)),
    );
    let (sent, sr) = sender.join().unwrap_or_else(|_| panic!("sender panicked"));
    assert!(sr.is_ok(), "{sr:?}");
    assert!(r.is_ok(), "{r:?}");
    assert!(bad.is_empty(), "{bad:?}");
    assert!(sum.ok(300), "{sum:?}");
    assert_eq!((sent.sent, sent.bytes), (300, sum.bytes));
}

#[test]
fn damage_duplicates_and_an_early_close_are_reported() {
    let (tx, rx) = pair();
    let seed = 3;
    let raw = |m: &[u8]| {
        // SAFETY: `m` is valid for reads of its length.
        let n = unsafe { libc::write(tx.as_raw_fd(), m.as_ptr().cast(), m.len()) };
        assert_eq!(n, m.len() as isize);
    };
    raw(&encode(0, 100, seed));
    raw(&encode(0, 100, seed)); // a duplicate
    let mut m = encode(1, 100, seed);
    m[60] ^= 1; // a flipped bit
    raw(&m);
    raw(&encode(1, 100, seed));
    raw(&encode(3, 100, seed)); // 2 skipped
    drop(tx);
    let mut v = Verifier::new(spec("100"), seed);
    let mut bad = Vec::new();
    let (sum, r) = stream::recv(&rx, &mut v, 10, None, |i, _, verdict| {
        bad.push((i, verdict))
    });
    assert!(
        matches!(
            r,
            Err(StreamError::Closed {
                received: 2,
                count: 10
            })
        ),
        "{r:?}"
    );
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert_eq!(bad[0], (1, Verdict::Duplicate(0)));
    assert!(matches!(bad[1], (2, Verdict::Corrupt(_))));
    assert_eq!(
        bad[2],
        (
            4,
            Verdict::OutOfOrder {
                seq: 3,
                expected: 2
            }
        )
    );
    assert_eq!(
        (sum.received, sum.duplicates, sum.corrupt, sum.out_of_order),
        (2, 1, 1, 1)
    );
}

#[test]
fn an_idle_peer_times_the_receiver_out() {
    let (_tx, rx) = pair();
    let mut v = Verifier::new(spec("8"), 1);
    let (sum, r) = stream::recv(
        &rx,
        &mut v,
        1,
        Some(Duration::from_millis(50)),
        |_, _, _| {},
    );
    assert!(matches!(r, Err(StreamError::Idle { seq: 0, .. })), "{r:?}");
    assert_eq!(sum.received, 0);
}

#[test]
fn a_send_error_names_the_message_and_its_errno() {
    let (tx, rx) = pair();
    drop(rx);
    // SAFETY: ignoring SIGPIPE so the write fails with EPIPE instead.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let (sent, r) = stream::send(&tx, &spec("10"), 1, 5);
    assert_eq!(sent.sent, 0);
    match r {
        Err(StreamError::Channel { seq: 0, source }) => {
            assert_eq!(source.errno(), Some(libc::EPIPE));
            assert!(source.to_string().contains("the peer closed"), "{source}");
        }
        other => panic!("{other:?}"),
    }
}

/// Poll mode on both ends: the descriptors are O_NONBLOCK and every call
/// that would block waits in poll() instead; the stream is unchanged. The
/// receiver starts late, so the sender fills the socket and must wait for
/// POLLOUT.
#[test]
fn poll_mode_waits_in_poll_and_loses_nothing() {
    let (mut tx, mut rx) = pair();
    // A send buffer of a few messages: the sender must wait however fast
    // it encodes.
    let small: libc::c_int = 64 << 10;
    // SAFETY: `small` is a live c_int of the length passed.
    let r = unsafe {
        libc::setsockopt(
            tx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    tx.use_poll(None).unwrap();
    rx.use_poll(Some(Duration::from_secs(10))).unwrap();
    let sizes = spec("1-16384");
    let s2 = sizes.clone();
    let sender = thread::spawn(move || {
        let r = stream::send(&tx, &s2, 11, 400);
        (r, tx.poll_waits())
    });
    thread::sleep(Duration::from_millis(200));
    let mut v = Verifier::new(sizes, 11);
    let (sum, r) = stream::recv(&rx, &mut v, 400, None, |i, _, verdict| {
        panic!("message {i}: {verdict:?}")
    });
    let ((sent, sr), tx_waits) = sender.join().unwrap_or_else(|_| panic!("sender panicked"));
    assert!(sr.is_ok(), "{sr:?}");
    assert!(r.is_ok(), "{r:?}");
    assert!(sum.ok(400), "{sum:?}");
    assert_eq!(sent.sent, 400);
    assert!(tx_waits > 0, "the sender never waited for POLLOUT");
}

/// Poll mode's reader: nothing queued means a wait in poll(), bounded by
/// the limit given to `use_poll`; a message arriving during the wait is
/// read (the stream test above cannot force the reader to wait: it may
/// always find the sender ahead).
#[test]
fn poll_mode_reader_waits_and_times_out() {
    let (tx, mut rx) = pair();
    rx.use_poll(Some(Duration::from_millis(100))).unwrap();
    let mut buf = Vec::new();
    let r = rx.recv(&mut buf);
    assert!(matches!(r, Err(ub_tp::Error::PollTimeout { .. })), "{r:?}");
    assert_eq!(rx.poll_waits(), 1);
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        tx.send(b"late").unwrap();
        tx
    });
    rx.use_poll(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(rx.recv(&mut buf).unwrap(), 4);
    assert_eq!(buf, b"late");
    assert_eq!(rx.poll_waits(), 2);
    drop(writer.join());
}

/// `echo` against an echo service on the other end of the pair (what
/// samples/ub/ub_echo.c does in the kernel): every reply checked; a service
/// that answers something else is caught.
#[test]
fn echo_checks_every_reply() {
    let (tx, rx) = pair();
    let server = thread::spawn(move || {
        let mut buf = Vec::new();
        let mut n = 0u64;
        while let Ok(len) = rx.recv(&mut buf) {
            if len == 0 {
                break;
            }
            n += 1;
            if n == 30 {
                // A broken service: one flipped byte.
                buf[len / 2] ^= 1;
            }
            if rx.send(&buf).is_err() {
                break;
            }
        }
    });
    let sizes = spec("1-65536");
    let mut bad = Vec::new();
    let (sum, r) = stream::echo(
        &tx,
        &sizes,
        5,
        100,
        Some(Duration::from_secs(10)),
        |i, _, v| bad.push((i, v)),
    );
    drop(tx);
    server.join().unwrap_or_else(|_| panic!("server panicked"));
    assert_eq!(sum.received, 29, "{sum:?}");
    assert!(matches!(r, Err(StreamError::BadEcho { seq: 29 })), "{r:?}");
    assert!(matches!(bad[..], [(29, Verdict::Corrupt(_))]), "{bad:?}");
}
