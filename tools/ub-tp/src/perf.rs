// SPDX-License-Identifier: GPL-2.0
//! ubperf's loops, one channel each: the bandwidth client streams messages,
//! the latency client ping-pongs one message at a time, the server counts
//! (bandwidth) or echoes (latency) until the client closes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::channel::Channel;
use crate::error::Result;

/// What ubperf measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Throughput: the client streams, the server counts.
    Bw,
    /// Latency: ping-pong, one message in flight.
    Lat,
}

/// When a client stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// After this many messages (round trips for latency).
    Count(u64),
    /// After this long.
    Duration(Duration),
}

impl Limit {
    fn done(&self, n: u64, start: Instant) -> bool {
        match self {
            Limit::Count(c) => n >= *c,
            Limit::Duration(d) => start.elapsed() >= *d,
        }
    }
}

/// Streams `msg` until `limit`; `progress` counts the messages written.
/// Returns how many were written.
pub fn bw_client(ch: &Channel, msg: &[u8], limit: Limit, progress: &AtomicU64) -> Result<u64> {
    let start = Instant::now();
    let mut n = 0;
    while !limit.done(n, start) {
        ch.send(msg)?;
        n += 1;
        progress.fetch_add(1, Ordering::Relaxed);
    }
    Ok(n)
}

/// Sends `msg` and waits for its echo, until `limit`: the round-trip times.
/// An echo of another length is an error of the server, reported as such.
pub fn lat_client(
    ch: &Channel,
    msg: &[u8],
    limit: Limit,
    progress: &AtomicU64,
) -> std::result::Result<Vec<Duration>, LatError> {
    let start = Instant::now();
    let mut rtts = Vec::new();
    let mut buf = vec![0; msg.len().max(ch.max_message())];
    while !limit.done(rtts.len() as u64, start) {
        let t = Instant::now();
        ch.send(msg)?;
        let n = ch.recv_into(&mut buf)?;
        let rtt = t.elapsed();
        if n != msg.len() {
            return Err(LatError::Echo {
                got: n,
                sent: msg.len(),
            });
        }
        rtts.push(rtt);
        progress.fetch_add(1, Ordering::Relaxed);
    }
    Ok(rtts)
}

/// Why the latency loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum LatError {
    /// The channel failed.
    #[error(transparent)]
    Channel(#[from] crate::Error),
    /// The server answered with another length (0: it closed).
    #[error("the server echoed {got} bytes for {sent}")]
    Echo {
        /// Bytes received.
        got: usize,
        /// Bytes sent.
        sent: usize,
    },
}

/// What a server's channel carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Served {
    /// Messages received.
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Receives until the client closes, echoing each message in `Lat` mode;
/// the time runs from the first message to the last. `progress` counts
/// the messages.
pub fn serve(
    ch: &Channel,
    mode: Mode,
    progress: &AtomicU64,
) -> (Served, Option<Duration>, Result<()>) {
    let mut s = Served::default();
    let mut buf = Vec::new();
    let mut first = None;
    let mut last = None;
    let r = loop {
        match ch.recv(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                s.messages += 1;
                s.bytes += n as u64;
                progress.fetch_add(1, Ordering::Relaxed);
                if mode == Mode::Lat {
                    if let Err(e) = ch.send(&buf) {
                        break Err(e);
                    }
                }
            }
            Err(e) => break Err(e),
        }
    };
    let span = first.zip(last).map(|(f, l)| l - f);
    (s, span, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        let start = Instant::now();
        assert!(!Limit::Count(2).done(1, start));
        assert!(Limit::Count(2).done(2, start));
        assert!(Limit::Duration(Duration::ZERO).done(0, start));
        assert!(!Limit::Duration(Duration::from_secs(3600)).done(u64::MAX, start));
    }
}
