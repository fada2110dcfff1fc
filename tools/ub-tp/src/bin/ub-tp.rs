// SPDX-License-Identifier: GPL-2.0
//! `ub-tp`: a checksummed message stream over one TP Channel, the tool the
//! selftests drive. `recv` listens and checks every message is intact, of
//! the SPEC's length, in order and exactly once; `send` connects, sends the
//! stream and waits until the peer acknowledged all of it; `echo` checks
//! each message comes back from an echo service. With `--ctp`, `send`
//! and `recv` bind CTP ends towards each other's CNA instead (`send`
//! waits until every datagram is sent, as nothing acknowledges them).
//! `abi-check`
//! checks every misuse of `/dev/ub_tp` gets its errno (`ub_tp::abicheck`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde_json::json;

use ub_tp::abicheck;
use ub_tp::channel::DEFAULT_PATH;
use ub_tp::cli::{info_text, ChannelArgs};
use ub_tp::fuzz;
use ub_tp::sizes::SizeSpec;
use ub_tp::stream;
use ub_tp::verify::Verifier;
use ub_tp::{Addr, Channel, Info};

#[derive(Parser)]
#[command(
    name = "ub-tp",
    version,
    about = "A checksummed message stream over a TP Channel"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct Stream {
    #[command(flatten)]
    channel: ChannelArgs,
    /// Messages in the stream.
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Message sizes: sizes used in turn (1,64,4K) and ranges spread
    /// log-uniformly (1-1M); both ends must give the same SPEC and seed.
    /// With --ctp, sizes above the datagram size are capped to it.
    #[arg(long, default_value = "1,64,4096,65536,1048576")]
    sizes: SizeSpec,
    /// Seed of the payloads and of the sizes ranges pick.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the channel's final counters.
    #[arg(long)]
    info: bool,
    /// One JSON object on stdout.
    #[arg(short = 'j', long)]
    json: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Listen for the channel and check the stream.
    Recv {
        #[command(flatten)]
        stream: Stream,
        /// Take the channel only from this peer (default: anyone); with
        /// --ctp, the sender's CNA (required).
        #[arg(long, required_if_eq("ctp", "true"))]
        from: Option<Addr>,
        /// Fail if no message comes for this long, in ms (0: wait forever).
        #[arg(long, default_value_t = 60_000)]
        idle_timeout_ms: u64,
    },
    /// Connect and send the stream.
    Send {
        #[command(flatten)]
        stream: Stream,
        /// The peer.
        #[arg(long)]
        to: Addr,
        /// How long to wait for the peer's acknowledgement of every message
        /// once all are written (with --ctp: for every datagram to be
        /// sent), in ms.
        #[arg(long, default_value_t = 60_000)]
        ack_timeout_ms: u64,
    },
    /// Connect to an echo service (samples/ub/ub_echo.c) and check that
    /// each message comes back whole, in turn.
    Echo {
        #[command(flatten)]
        stream: Stream,
        /// The peer.
        #[arg(long)]
        to: Addr,
        /// Fail if a reply takes longer than this, in ms (0: wait forever).
        #[arg(long, default_value_t = 60_000)]
        idle_timeout_ms: u64,
    },
    /// Check that every misuse of the device gets the errno the kernel
    /// documents and changes nothing (run as root; no peer needed).
    AbiCheck {
        /// The UB device index (ubctl dev show).
        #[arg(long)]
        dev: u32,
        /// The TP Channel device node.
        #[arg(long, default_value = DEFAULT_PATH)]
        device: PathBuf,
        /// The rows that bind CTP files instead (the device needs a 16-bit
        /// CNA and no 24-bit one).
        #[arg(long)]
        ctp: bool,
    },
    /// Drive the device from several threads at once with generated calls
    /// on shared files (ub_tp::fuzz); fails if a call gets stuck. Run as
    /// root, on the debug kernel, which reports what else went wrong.
    Fuzz {
        /// The UB device index most binds name.
        #[arg(long, default_value_t = 0)]
        dev: u32,
        /// The TP Channel device node.
        #[arg(long, default_value = DEFAULT_PATH)]
        device: PathBuf,
        /// An address binds go to (this host's, a peer's); repeat.
        #[arg(long = "addr")]
        addrs: Vec<Addr>,
        /// How long to run, in seconds.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Worker threads.
        #[arg(long, default_value_t = 4)]
        threads: u32,
        /// Seed of the workers' generators (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
    },
}

/// `ub-tp fuzz`: exit 0 passed, 1 a call got stuck, 4 no device.
fn fuzz(
    dev: u32,
    device: &std::path::Path,
    addrs: &[Addr],
    seconds: u64,
    threads: u32,
    seed: Option<u64>,
) -> ExitCode {
    if !fuzz::device_present(device) {
        println!("# ub-tp fuzz: cannot open {}, skipped", device.display());
        return ExitCode::from(4);
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!("# ub-tp fuzz: seed {seed}, {threads} threads, {seconds} s");
    let cfg = fuzz::FuzzConfig {
        path: device.to_path_buf(),
        dev_index: dev,
        addrs: addrs.to_vec(),
        duration: Duration::from_secs(seconds),
        threads,
        seed,
    };
    match fuzz::run(&cfg) {
        Ok(r) => {
            println!("# {} calls", r.calls());
            for l in r.lines() {
                println!("# {l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("# ub-tp fuzz: FAILED: {e}");
            // The stuck worker is still in the kernel: leave without
            // waiting for it.
            std::process::exit(1);
        }
    }
}

/// How a run ended: its JSON fields and whether it succeeded.
struct Outcome {
    ok: bool,
    error: Option<String>,
    fields: serde_json::Map<String, serde_json::Value>,
    info: Option<Info>,
}

/// The sizes of the stream: CTP caps them at the datagram size (the bind's
/// `max_message`, the same at both ends for one address format).
fn stream_sizes(s: &Stream, ch: &Channel) -> SizeSpec {
    if s.channel.ctp {
        s.sizes.capped(ch.max_message())
    } else {
        s.sizes.clone()
    }
}

fn check_sizes(ch: &Channel, sizes: &SizeSpec) -> anyhow::Result<()> {
    let max = ch.max_message();
    if max != 0 && sizes.max() > max {
        bail!(
            "--sizes reaches {} bytes, the channel carries at most {max}",
            sizes.max()
        );
    }
    Ok(())
}

fn recv(s: &Stream, from: Option<Addr>, idle: u64) -> anyhow::Result<Outcome> {
    let opts = s.channel.bind_options();
    let idle = (idle > 0).then(|| Duration::from_millis(idle));
    let mut ch = match (s.channel.ctp, from) {
        (true, Some(from)) => Channel::bind_ctp(s.channel.dev, from, &opts)?,
        (true, None) => bail!("--ctp needs --from, the sender's CNA"),
        (false, _) => Channel::listen(s.channel.dev, from, s.channel.key, &opts)?,
    };
    if s.channel.poll {
        ch.use_poll(idle)?;
    }
    let sizes = stream_sizes(s, &ch);
    check_sizes(&ch, &sizes)?;
    let mut v = Verifier::new(sizes, s.seed);
    let mut reported = 0;
    let start = Instant::now();
    let (sum, r) = stream::recv(&ch, &mut v, s.count, idle, |index, len, verdict| {
        if reported < 10 {
            reported += 1;
            eprintln!("ub-tp recv: message {index} ({len} bytes): {verdict:?}");
        }
    });
    let elapsed = start.elapsed();
    let info = if s.info { Some(ch.info()?) } else { None };
    let mut fields = serde_json::Map::new();
    fields.insert("count".into(), json!(s.count));
    if let serde_json::Value::Object(m) = serde_json::to_value(sum)? {
        fields.extend(m);
    }
    fields.insert("seconds".into(), json!(elapsed.as_secs_f64()));
    if s.channel.poll {
        fields.insert("poll_waits".into(), json!(ch.poll_waits()));
    }
    Ok(Outcome {
        ok: r.is_ok() && sum.ok(s.count),
        error: r.err().map(|e| e.to_string()),
        fields,
        info,
    })
}

fn send(s: &Stream, to: Addr, ack_timeout: u64) -> anyhow::Result<Outcome> {
    let opts = s.channel.bind_options();
    let mut ch = if s.channel.ctp {
        Channel::bind_ctp(s.channel.dev, to, &opts)?
    } else {
        Channel::connect(s.channel.dev, to, s.channel.key, &opts)?
    };
    if s.channel.poll {
        ch.use_poll(None)?;
    }
    let sizes = stream_sizes(s, &ch);
    check_sizes(&ch, &sizes)?;
    let start = Instant::now();
    let (sent, mut r) = stream::send(&ch, &sizes, s.seed, s.count);
    let mut info = None;
    if r.is_ok() {
        let timeout = Duration::from_millis(ack_timeout);
        let done = if s.channel.ctp {
            stream::wait_sent(&ch, s.count, timeout)
        } else {
            stream::wait_acked(&ch, s.count, timeout)
        };
        match done {
            Ok(i) => info = Some(i),
            Err(e) => r = Err(e),
        }
    }
    let elapsed = start.elapsed();
    if s.info && info.is_none() {
        info = ch.info().ok();
    }
    let mut fields = serde_json::Map::new();
    fields.insert("count".into(), json!(s.count));
    fields.insert("sent".into(), json!(sent.sent));
    fields.insert("bytes".into(), json!(sent.bytes));
    if s.channel.ctp {
        fields.insert("datagrams".into(), json!(info.map(|i| i.tx_packets)));
    } else {
        fields.insert("acked".into(), json!(info.map(|i| i.tx_acked)));
    }
    fields.insert("seconds".into(), json!(elapsed.as_secs_f64()));
    if s.channel.poll {
        fields.insert("poll_waits".into(), json!(ch.poll_waits()));
    }
    Ok(Outcome {
        ok: r.is_ok(),
        error: r.err().map(|e| e.to_string()),
        fields,
        info: if s.info { info } else { None },
    })
}

fn echo(s: &Stream, to: Addr, idle: u64) -> anyhow::Result<Outcome> {
    if s.channel.ctp {
        bail!("the echo service (samples/ub) answers RTP channels only");
    }
    let idle = (idle > 0).then(|| Duration::from_millis(idle));
    let opts = s.channel.bind_options();
    let mut ch = Channel::connect(s.channel.dev, to, s.channel.key, &opts)?;
    if s.channel.poll {
        ch.use_poll(idle)?;
    }
    check_sizes(&ch, &s.sizes)?;
    let start = Instant::now();
    let (sum, r) = stream::echo(&ch, &s.sizes, s.seed, s.count, idle, |seq, len, verdict| {
        eprintln!("ub-tp echo: reply to message {seq} ({len} bytes): {verdict:?}");
    });
    let elapsed = start.elapsed();
    let info = if s.info { Some(ch.info()?) } else { None };
    let mut fields = serde_json::Map::new();
    fields.insert("count".into(), json!(s.count));
    fields.insert("echoed".into(), json!(sum.received));
    fields.insert("bytes".into(), json!(sum.bytes));
    fields.insert("seconds".into(), json!(elapsed.as_secs_f64()));
    Ok(Outcome {
        ok: r.is_ok() && sum.ok(s.count),
        error: r.err().map(|e| e.to_string()),
        fields,
        info,
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (role, stream, r) = match &cli.cmd {
        Cmd::Recv {
            stream,
            from,
            idle_timeout_ms,
        } => (
            "recv",
            stream,
            recv(stream, *from, *idle_timeout_ms).context("ub-tp recv"),
        ),
        Cmd::Send {
            stream,
            to,
            ack_timeout_ms,
        } => (
            "send",
            stream,
            send(stream, *to, *ack_timeout_ms).context("ub-tp send"),
        ),
        Cmd::Echo {
            stream,
            to,
            idle_timeout_ms,
        } => (
            "echo",
            stream,
            echo(stream, *to, *idle_timeout_ms).context("ub-tp echo"),
        ),
        Cmd::Fuzz {
            dev,
            device,
            addrs,
            seconds,
            threads,
            seed,
        } => return fuzz(*dev, device, addrs, *seconds, *threads, *seed),
        Cmd::AbiCheck { dev, device, ctp } => {
            let cases = if *ctp {
                abicheck::CTP_CASES
            } else {
                abicheck::CASES
            };
            return if abicheck::run(device, *dev, cases, |l| println!("{l}")) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    let out = match r {
        Ok(o) => o,
        Err(e) => {
            if stream.json {
                println!(
                    "{}",
                    json!({ "role": role, "ok": false, "error": format!("{e:#}") })
                );
            } else {
                eprintln!("{e:#}");
            }
            return ExitCode::FAILURE;
        }
    };
    if stream.json {
        let mut obj = serde_json::Map::new();
        obj.insert("role".into(), json!(role));
        obj.insert("ok".into(), json!(out.ok));
        obj.insert("error".into(), json!(out.error));
        obj.extend(out.fields);
        if let Some(i) = out.info {
            obj.insert("info".into(), json!(i));
        }
        println!("{}", serde_json::Value::Object(obj));
    } else {
        let line: Vec<String> = out
            .fields
            .iter()
            .map(|(k, v)| format!("{} {v}", k.replace('_', "-")))
            .collect();
        println!("ub-tp {role}: {}", line.join(", "));
        if let Some(i) = out.info {
            print!("{}", info_text(&i));
        }
        if let Some(e) = &out.error {
            eprintln!("ub-tp {role}: {e}");
        }
    }
    if out.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
