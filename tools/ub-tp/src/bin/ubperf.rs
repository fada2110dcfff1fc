// SPDX-License-Identifier: GPL-2.0
//! `ubperf`: throughput and latency over TP Channels, in the spirit of
//! perftest's `ib_send_bw` / `ib_send_lat`. Start `ubperf server` on one
//! host and `ubperf client` on the other with the same --key, --mode and
//! --channels; channel i uses key K+i (K+i*N for groups of --members N),
//! one thread each.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::{Parser, Subcommand};
use serde_json::json;

use ub_tp::cli::ChannelArgs;
use ub_tp::message;
use ub_tp::perf::{self, Limit, Mode};
use ub_tp::stats::{Latency, Throughput};
use ub_tp::{Addr, BindOptions, Channel};

#[derive(Parser)]
#[command(
    name = "ubperf",
    version,
    about = "Throughput and latency over TP Channels"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct Common {
    #[command(flatten)]
    channel: ChannelArgs,
    /// bw: the client streams, the server counts; lat: ping-pong.
    #[arg(long, value_enum, default_value = "bw")]
    mode: Mode,
    /// Channels, keys K..K+N-1, one thread each.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    channels: u32,
    /// One JSON object on stdout.
    #[arg(short = 'j', long)]
    json: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Wait for a client, count (bw) or echo (lat) until it closes.
    Server {
        #[command(flatten)]
        common: Common,
        /// Take channels only from this peer (default: anyone).
        #[arg(long)]
        from: Option<Addr>,
    },
    /// Connect to a server and measure.
    Client {
        #[command(flatten)]
        common: Common,
        /// The server.
        #[arg(long)]
        to: Addr,
        /// Message size in bytes.
        #[arg(long, default_value_t = 65536)]
        size: usize,
        /// Messages (round trips for lat) per channel [default: 1000].
        #[arg(long, conflicts_with = "duration")]
        count: Option<u64>,
        /// Run this many seconds instead of a count.
        #[arg(long)]
        duration: Option<f64>,
        /// bw: how long to wait for the server's acknowledgement of the
        /// last messages, in ms.
        #[arg(long, default_value_t = 60_000)]
        ack_timeout_ms: u64,
    },
}

/// Prints a progress line to stderr once a second, from the third second
/// on (once messages flow), until `done`.
fn progress_thread(
    counter: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    size: Option<usize>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let start = Instant::now();
        let mut last = 0;
        while !done.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(100));
            let secs = start.elapsed().as_secs();
            if secs <= last {
                continue;
            }
            let now = counter.load(Ordering::Relaxed);
            // Quiet while the channels are still being set up.
            if secs >= 2 && now > 0 {
                let rate = now as f64 / start.elapsed().as_secs_f64();
                match size {
                    Some(s) => eprintln!(
                        "ubperf: {secs} s: {now} messages, {rate:.0} msg/s, {:.1} MB/s",
                        rate * s as f64 / 1e6
                    ),
                    None => eprintln!("ubperf: {secs} s: {now} messages, {rate:.0} msg/s"),
                }
            }
            last = secs;
        }
    })
}

/// Channel `i`'s key: `K + i`, or `K + i * N` for groups of `--members N`
/// (a group takes the keys of its members).
fn channel_opts(c: &Common, i: u32) -> anyhow::Result<(u32, BindOptions)> {
    if c.channel.ctp {
        bail!("ubperf measures RTP channels (--ctp has no acknowledgement to time)");
    }
    let key = i
        .checked_mul(c.channel.members.max(1))
        .and_then(|k| c.channel.key.checked_add(k))
        .ok_or_else(|| anyhow!("--key {} + {i} channels overflows", c.channel.key))?;
    Ok((key, c.channel.bind_options()))
}

fn server(c: &Common, from: Option<Addr>) -> anyhow::Result<serde_json::Value> {
    let counter = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let prog = progress_thread(counter.clone(), done.clone(), None);
    let mut handles = Vec::new();
    for i in 0..c.channels {
        let (key, opts) = channel_opts(c, i)?;
        let dev = c.channel.dev;
        let (mode, counter) = (c.mode, counter.clone());
        handles.push(thread::spawn(move || -> anyhow::Result<_> {
            let ch =
                Channel::listen(dev, from, key, &opts).with_context(|| format!("key {key}"))?;
            let (served, span, r) = perf::serve(&ch, mode, &counter);
            r.with_context(|| format!("key {key}"))?;
            Ok((served, span))
        }));
    }
    let mut results = Vec::new();
    for h in handles {
        results.push(h.join().map_err(|_| anyhow!("a channel thread panicked"))?);
    }
    done.store(true, Ordering::Relaxed);
    let _ = prog.join();
    let mut messages = 0;
    let mut bytes = 0;
    let mut span = Duration::ZERO;
    for r in results {
        let (s, d) = r?;
        messages += s.messages;
        bytes += s.bytes;
        span = span.max(d.unwrap_or_default());
    }
    let t = Throughput::new(messages, bytes, span);
    Ok(json!({ "role": "server", "mode": c.mode, "channels": c.channels, "received": t }))
}

struct ClientArgs {
    size: usize,
    limit: Limit,
    ack_timeout: Duration,
}

fn client(c: &Common, to: Addr, a: ClientArgs) -> anyhow::Result<serde_json::Value> {
    if a.size == 0 {
        bail!("--size must be at least 1 byte");
    }
    let msg = Arc::new(message::encode(0, a.size, 1));
    let counter = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(c.channels as usize));
    let mut handles = Vec::new();
    for i in 0..c.channels {
        let (key, opts) = channel_opts(c, i)?;
        let dev = c.channel.dev;
        let (mode, limit, ack_timeout) = (c.mode, a.limit, a.ack_timeout);
        let (msg, counter, barrier) = (msg.clone(), counter.clone(), barrier.clone());
        handles.push(thread::spawn(move || -> anyhow::Result<_> {
            let ch = Channel::connect(dev, to, key, &opts);
            // Every thread reaches the barrier, bound or not, so none waits
            // forever for a channel that failed.
            barrier.wait();
            let ch = ch.with_context(|| format!("key {key}"))?;
            if ch.max_message() != 0 && msg.len() > ch.max_message() {
                bail!(
                    "--size {} is above the channel's max_message {}",
                    msg.len(),
                    ch.max_message()
                );
            }
            let start = Instant::now();
            match mode {
                Mode::Bw => {
                    let sent = perf::bw_client(&ch, &msg, limit, &counter)
                        .with_context(|| format!("key {key}"))?;
                    let info = ub_tp::stream::wait_acked(&ch, sent, ack_timeout)
                        .with_context(|| format!("key {key}"))?;
                    Ok((info.tx_acked.min(sent), start.elapsed(), Vec::new()))
                }
                Mode::Lat => {
                    let rtts = perf::lat_client(&ch, &msg, limit, &counter)
                        .with_context(|| format!("key {key}"))?;
                    Ok((rtts.len() as u64, start.elapsed(), rtts))
                }
            }
        }));
    }
    let done = Arc::new(AtomicBool::new(false));
    let prog = progress_thread(counter, done.clone(), Some(a.size));
    let mut results = Vec::new();
    for h in handles {
        results.push(h.join().map_err(|_| anyhow!("a channel thread panicked"))?);
    }
    done.store(true, Ordering::Relaxed);
    let _ = prog.join();
    let mut messages = 0;
    let mut elapsed = Duration::ZERO;
    let mut rtts = Vec::new();
    for r in results {
        let (n, d, mut s) = r?;
        messages += n;
        elapsed = elapsed.max(d);
        rtts.append(&mut s);
    }
    let mut out = json!({
        "role": "client", "mode": c.mode, "channels": c.channels, "size": a.size,
    });
    match c.mode {
        Mode::Bw => {
            out["throughput"] = json!(Throughput::new(messages, messages * a.size as u64, elapsed));
        }
        Mode::Lat => out["latency"] = json!(Latency::from_round_trips(rtts)),
    }
    Ok(out)
}

fn print_text(v: &serde_json::Value) {
    let f = |p: &str| v.pointer(p).and_then(|x| x.as_f64()).unwrap_or(0.0);
    let u = |p: &str| v.pointer(p).and_then(|x| x.as_u64()).unwrap_or(0);
    if v.get("latency").is_some_and(|l| !l.is_null()) {
        println!(" #bytes  #iterations  t_min[us]  t_median[us]  t_p99[us]  t_max[us]");
        println!(
            " {:<7} {:<12} {:<10.2} {:<13.2} {:<10.2} {:.2}",
            u("/size"),
            u("/latency/samples"),
            f("/latency/min_us"),
            f("/latency/median_us"),
            f("/latency/p99_us"),
            f("/latency/max_us")
        );
        return;
    }
    let t = if v.get("throughput").is_some() {
        "/throughput"
    } else {
        "/received"
    };
    println!(" #bytes  #messages  seconds  msg/s        MB/s");
    let size = if t == "/received" {
        u("/received/bytes")
            .checked_div(u("/received/messages"))
            .unwrap_or(0)
    } else {
        u("/size")
    };
    println!(
        " {:<7} {:<10} {:<8.3} {:<12.0} {:.2}",
        size,
        u(&format!("{t}/messages")),
        f(&format!("{t}/seconds")),
        f(&format!("{t}/messages_per_sec")),
        f(&format!("{t}/mb_per_sec"))
    );
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (json_out, r) = match cli.cmd {
        Cmd::Server { common, from } => (common.json, server(&common, from)),
        Cmd::Client {
            common,
            to,
            size,
            count,
            duration,
            ack_timeout_ms,
        } => {
            let limit = match duration {
                Some(d) if d.is_finite() && d > 0.0 => {
                    Ok(Limit::Duration(Duration::from_secs_f64(d.min(1e9))))
                }
                Some(d) => Err(anyhow!(
                    "--duration {d} is not a positive number of seconds"
                )),
                None => Ok(Limit::Count(count.unwrap_or(1000))),
            };
            let args = limit.map(|limit| ClientArgs {
                size,
                limit,
                ack_timeout: Duration::from_millis(ack_timeout_ms),
            });
            (common.json, args.and_then(|a| client(&common, to, a)))
        }
    };
    match r {
        Ok(v) => {
            if json_out {
                println!("{v}");
            } else {
                print_text(&v);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json_out {
                println!("{}", json!({ "ok": false, "error": format!("{e:#}") }));
            } else {
                eprintln!("ubperf: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}
