// SPDX-License-Identifier: GPL-2.0
//! ubperf's loops against each other over a socket pair.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use ub_tp::perf::{self, Limit, Mode};

mod common;
use common::pair;

#[test]
fn bandwidth_client_and_server_agree_on_the_count() {
    let (tx, rx) = pair();
    let server = thread::spawn(move || {
        let p = AtomicU64::new(0);
        let (s, span, r) = perf::serve(&rx, Mode::Bw, &p);
        assert!(r.is_ok(), "{r:?}");
        assert!(span.is_some());
        (s, p.load(Ordering::Relaxed))
    });
    let p = AtomicU64::new(0);
    let msg = vec![7u8; 4096];
    let sent = perf::bw_client(&tx, &msg, Limit::Count(200), &p);
    assert_eq!(sent.ok(), Some(200));
    assert_eq!(p.load(Ordering::Relaxed), 200);
    drop(tx); // the server reads end of stream
    let (s, counted) = server.join().unwrap_or_else(|_| panic!("server panicked"));
    assert_eq!((s.messages, s.bytes, counted), (200, 200 * 4096, 200));
}

#[test]
fn latency_client_gets_every_echo() {
    let (tx, rx) = pair();
    let server = thread::spawn(move || {
        let p = AtomicU64::new(0);
        let (s, _, r) = perf::serve(&rx, Mode::Lat, &p);
        assert!(r.is_ok(), "{r:?}");
        s
    });
    let p = AtomicU64::new(0);
    let rtts = perf::lat_client(&tx, &[1, 2, 3], Limit::Count(50), &p);
    let rtts = rtts.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rtts.len(), 50);
    drop(tx);
    let s = server.join().unwrap_or_else(|_| panic!("server panicked"));
    assert_eq!((s.messages, s.bytes), (50, 150));
}

#[test]
fn a_server_that_does_not_echo_is_reported() {
    let (tx, rx) = pair();
    // The peer closes instead of echoing: the echo reads as 0 bytes.
    drop(rx);
    let p = AtomicU64::new(0);
    // SAFETY: ignoring SIGPIPE so the write fails with EPIPE instead.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let r = perf::lat_client(&tx, &[1; 8], Limit::Count(1), &p);
    assert!(r.is_err());
}
