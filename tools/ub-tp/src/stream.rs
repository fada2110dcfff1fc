// SPDX-License-Identifier: GPL-2.0
//! The two ends of a checksummed stream over a channel (what `ub-tp send`
//! and `ub-tp recv` run): the sender writes messages 0..count of the SPEC's
//! sizes, the receiver reads until it has `count` good ones, checking each
//! with a [`Verifier`].

use std::time::{Duration, Instant};

use crate::channel::{Channel, Info, State};
use crate::error::{describe, Op};
use crate::message;
use crate::sizes::SizeSpec;
use crate::verify::{Summary, Verdict, Verifier};

/// Why a stream stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A channel call failed (the channel's errno and its meaning).
    #[error("message {seq}: {source}")]
    Channel {
        /// The message being sent, or the seq the receiver expected.
        seq: u64,
        /// The failure.
        source: crate::Error,
    },
    /// The peer closed its end early.
    #[error("the peer closed the channel after {received} of {count} messages")]
    Closed {
        /// Good messages received.
        received: u64,
        /// Messages expected.
        count: u64,
    },
    /// No message within the idle timeout.
    #[error("no message for {ms} ms (expecting seq {seq})")]
    Idle {
        /// The timeout.
        ms: u128,
        /// The seq expected.
        seq: u64,
    },
    /// The echo service answered with something else than the message.
    #[error("the reply to message {seq} is not that message")]
    BadEcho {
        /// The message sent.
        seq: u64,
    },
    /// The peer did not acknowledge everything in time.
    #[error("{acked} of {count} messages acknowledged after {ms} ms")]
    NotAcked {
        /// Acknowledged.
        acked: u64,
        /// Sent.
        count: u64,
        /// The timeout.
        ms: u128,
    },
    /// The channel entered ERR before everything was acknowledged.
    #[error("the channel failed after {acked} of {count} messages were acknowledged: {reason}")]
    Failed {
        /// Acknowledged.
        acked: u64,
        /// Sent.
        count: u64,
        /// The errno's meaning.
        reason: String,
    },
}

/// The sender's progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Sent {
    /// Messages written.
    pub sent: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Writes messages `0..count`; stops at the first failure (`sent` says how
/// far it got).
pub fn send(
    ch: &Channel,
    sizes: &SizeSpec,
    seed: u64,
    count: u64,
) -> (Sent, Result<(), StreamError>) {
    let mut s = Sent::default();
    let mut buf = Vec::new();
    for seq in 0..count {
        buf.resize(sizes.size(seq, seed), 0);
        message::encode_into(seq, seed, &mut buf);
        if let Err(source) = ch.send(&buf) {
            return (s, Err(StreamError::Channel { seq, source }));
        }
        s.sent += 1;
        s.bytes += buf.len() as u64;
    }
    (s, Ok(()))
}

/// Waits until the peer acknowledged `count` messages (`tx_acked`), the
/// channel failed, or `timeout` passed.
pub fn wait_acked(ch: &Channel, count: u64, timeout: Duration) -> Result<Info, StreamError> {
    let deadline = Instant::now() + timeout;
    loop {
        let i = ch
            .info()
            .map_err(|source| StreamError::Channel { seq: count, source })?;
        if i.tx_acked >= count {
            return Ok(i);
        }
        if i.state == State::Err {
            return Err(StreamError::Failed {
                acked: i.tx_acked,
                count,
                reason: describe(Op::Send, i.error),
            });
        }
        if i.state == State::Closed {
            // The peer closed: nothing more will be acknowledged.
            return Err(StreamError::Failed {
                acked: i.tx_acked,
                count,
                reason: describe(Op::Send, libc::EPIPE),
            });
        }
        if Instant::now() >= deadline {
            return Err(StreamError::NotAcked {
                acked: i.tx_acked,
                count,
                ms: timeout.as_millis(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// CTP: waits until the endpoint sent `count` datagrams (`tx_packets`;
/// nothing acknowledges them), the end failed, or `timeout` passed.
pub fn wait_sent(ch: &Channel, count: u64, timeout: Duration) -> Result<Info, StreamError> {
    let deadline = Instant::now() + timeout;
    loop {
        let i = ch
            .info()
            .map_err(|source| StreamError::Channel { seq: count, source })?;
        if i.tx_packets >= count {
            return Ok(i);
        }
        if i.state == State::Err {
            return Err(StreamError::Failed {
                acked: i.tx_packets,
                count,
                reason: describe(Op::Send, i.error),
            });
        }
        if Instant::now() >= deadline {
            return Err(StreamError::NotAcked {
                acked: i.tx_packets,
                count,
                ms: timeout.as_millis(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads the next message into `buf`, waiting at most `idle` for it (in
/// poll mode the channel's own wait applies the limit): its errors name
/// `seq`, the message expected; the end of the stream is an error too.
fn read_next(
    ch: &Channel,
    buf: &mut Vec<u8>,
    idle: Option<Duration>,
    seq: u64,
    received: u64,
    count: u64,
) -> Result<(), StreamError> {
    if let Some(t) = idle.filter(|_| !ch.is_polled()) {
        match ch.wait_readable(t) {
            Ok(true) => {}
            Ok(false) => {
                return Err(StreamError::Idle {
                    ms: t.as_millis(),
                    seq,
                })
            }
            Err(source) => return Err(StreamError::Channel { seq, source }),
        }
    }
    match ch.recv(buf) {
        Ok(0) => Err(StreamError::Closed { received, count }),
        Ok(_) => Ok(()),
        Err(source) => Err(StreamError::Channel { seq, source }),
    }
}

/// Reads until `count` good messages arrived or the stream stops; each
/// message that is not the good next one goes to `bad` (its index among
/// the messages read, its length, the verdict).
pub fn recv(
    ch: &Channel,
    v: &mut Verifier,
    count: u64,
    idle: Option<Duration>,
    mut bad: impl FnMut(u64, usize, Verdict),
) -> (Summary, Result<(), StreamError>) {
    let mut buf = Vec::new();
    let mut index = 0u64;
    while v.summary().received < count {
        if let Err(e) = read_next(
            ch,
            &mut buf,
            idle,
            v.expected(),
            v.summary().received,
            count,
        ) {
            return (v.summary(), Err(e));
        }
        let verdict = v.accept(&buf);
        if !matches!(verdict, Verdict::Good(_)) {
            bad(index, buf.len(), verdict);
        }
        index += 1;
    }
    (v.summary(), Ok(()))
}

/// Sends messages `0..count` one at a time and reads each back from an
/// echo service at the other end (`samples/ub/ub_echo.c`): each reply must
/// be the message just sent, intact. Stops at the first failure, a reply
/// that is not the one expected, or `idle` without a reply; the summary
/// counts the replies.
pub fn echo(
    ch: &Channel,
    sizes: &SizeSpec,
    seed: u64,
    count: u64,
    idle: Option<Duration>,
    mut bad: impl FnMut(u64, usize, Verdict),
) -> (Summary, Result<(), StreamError>) {
    let mut v = Verifier::new(sizes.clone(), seed);
    let mut out = Vec::new();
    let mut back = Vec::new();
    for seq in 0..count {
        out.resize(sizes.size(seq, seed), 0);
        message::encode_into(seq, seed, &mut out);
        if let Err(source) = ch.send(&out) {
            return (v.summary(), Err(StreamError::Channel { seq, source }));
        }
        if let Err(e) = read_next(ch, &mut back, idle, seq, v.summary().received, count) {
            return (v.summary(), Err(e));
        }
        let verdict = v.accept(&back);
        if !matches!(verdict, Verdict::Good(_)) {
            bad(seq, back.len(), verdict);
            return (v.summary(), Err(StreamError::BadEcho { seq }));
        }
    }
    (v.summary(), Ok(()))
}
