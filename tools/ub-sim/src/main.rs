// SPDX-License-Identifier: GPL-2.0
//! `ub-sim` command line: single runs and the retransmission experiment.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto, RTO_BASE_MAX_US, RTO_BASE_MIN_US};
use ub_sim::plot::{loss_chart, Panel, Series};
use ub_sim::{four_paths, run, Lb, Scenario};

#[derive(Parser)]
#[command(
    version,
    about = "Deterministic multipath simulator for the ub-proto transport"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Gbn,
    Selective,
}

#[derive(Clone, Copy, ValueEnum)]
enum LbArg {
    PerFlow,
    PerPacket,
}

#[derive(Subcommand)]
enum Cmd {
    /// Goodput and p99 message latency against loss rate for the four
    /// retransmission combinations under per-flow and per-packet load
    /// balancing; prints a table and writes CSV and SVG.
    Experiment {
        /// Output prefix: writes PREFIX.csv and PREFIX.svg.
        #[arg(long, default_value = "Documentation/ub/transport-experiment", value_parser = out_prefix)]
        out: PathBuf,
        /// Messages per run (1 to 1000000).
        #[arg(long, default_value_t = 2000, value_parser = message_count)]
        messages: usize,
        /// Message size, bytes (at least 1).
        #[arg(long, default_value_t = 65536, value_parser = message_size)]
        size: u32,
        /// PRNG seed (any value, 0 included).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Loss rates, comma-separated, each in [0, 1) and listed once (per
        /// packet, every path and direction).
        #[arg(long, value_delimiter = ',', num_args = 1.., value_parser = loss_rate,
              allow_negative_numbers = true,
              default_values_t = [0.0, 1e-4, 1e-3, 1e-2])]
        loss: Vec<f64>,
        /// Use the dynamic RTO with this base (µs, 4 to 2097152) and N = 1
        /// instead of the static 512 µs level.
        #[arg(long, value_parser = rto_base)]
        rto_base_us: Option<u32>,
    },
    /// Stress: many seeds of every combination under heavy, varied
    /// impairments (up to 30 % data and 60 % response loss, duplication,
    /// corruption, small windows, bitmaps and receive slots, both header
    /// formats, CAQM/LDCP, channel groups), with messages both ways at
    /// once; fails on any delivery error.
    Sweep {
        /// Number of seeds (1 to 1000000).
        #[arg(long, default_value_t = 50, value_parser = seed_count)]
        seeds: u64,
        /// First seed.
        #[arg(long, default_value_t = 0)]
        first: u64,
    },
    /// One run, printed.
    Run {
        /// Retransmission mode.
        #[arg(long, value_enum, default_value = "selective")]
        mode: ModeArg,
        /// Fast retransmission.
        #[arg(long)]
        fast: bool,
        /// Load balancing.
        #[arg(long, value_enum, default_value = "per-flow")]
        lb: LbArg,
        /// Loss rate per packet, every path and direction, in [0, 1).
        #[arg(long, default_value_t = 0.001, value_parser = loss_rate, allow_negative_numbers = true)]
        loss: f64,
        /// Messages (1 to 1000000).
        #[arg(long, default_value_t = 200, value_parser = message_count)]
        messages: usize,
        /// Message size, bytes (at least 1).
        #[arg(long, default_value_t = 65536, value_parser = message_size)]
        size: u32,
        /// PRNG seed (any value, 0 included).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Dynamic RTO base (µs, 4 to 2097152; N = 1) instead of the static
        /// 512 µs.
        #[arg(long, value_parser = rto_base)]
        rto_base_us: Option<u32>,
    },
}

// Argument parsers: each refuses, with the reason, a value that cannot be
// simulated. Seeds need none: SplitMix64 is well defined from any seed.

/// Most messages in one run (the report keeps a latency per message).
const MAX_MESSAGES: usize = 1_000_000;
/// Most seeds in one sweep (eight runs each).
const MAX_SEEDS: u64 = 1_000_000;
/// Simulated-time limit of one `run` or `experiment` run.
const MAX_TIME_NS: u64 = 60_000_000_000;
/// Line rate of the simulated NIC and paths, Gb/s (bits per ns).
const LINE_RATE_GBPS: u64 = 100;
/// Most payload one run can carry before [`MAX_TIME_NS`] (750 GB).
const MAX_BYTES: u64 = MAX_TIME_NS / 8 * LINE_RATE_GBPS;

fn loss_rate(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if p == 1.0 {
        return Err("at a loss rate of 1 every packet is lost: nothing can be delivered".into());
    }
    if !(0.0..1.0).contains(&p) {
        return Err(format!(
            "`{s}` is not a loss rate: it is a probability per packet, at least 0 and below 1"
        ));
    }
    // -0 parses as a negative zero; print it as 0.
    Ok(p + 0.0)
}

fn message_count(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a message count"))?;
    match n {
        0 => Err("a run needs at least one message".into()),
        n if n > MAX_MESSAGES => Err(format!("at most {MAX_MESSAGES} messages per run")),
        n => Ok(n),
    }
}

fn message_size(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a message size in bytes (1 to {})", u32::MAX))?;
    if n == 0 {
        return Err("a message carries at least 1 byte".into());
    }
    Ok(n)
}

fn rto_base(s: &str) -> Result<u32, String> {
    let range = RTO_BASE_MIN_US..=RTO_BASE_MAX_US;
    let refuse = || {
        format!(
            "`{s}` is not a dynamic RTO base: the specification allows {} to {} µs",
            range.start(),
            range.end()
        )
    };
    let b: u32 = s.trim().parse().map_err(|_| refuse())?;
    if range.contains(&b) {
        Ok(b)
    } else {
        Err(refuse())
    }
}

fn seed_count(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seeds"))?;
    match n {
        0 => Err("a sweep needs at least one seed".into()),
        n if n > MAX_SEEDS => Err(format!("at most {MAX_SEEDS} seeds per sweep")),
        n => Ok(n),
    }
}

fn out_prefix(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.file_name().is_none() || s.ends_with('/') {
        return Err(format!(
            "`{s}` names no file: give a prefix such as results/experiment"
        ));
    }
    Ok(p)
}

/// Refuses, like a bad argument of `subcommand` (exit status 2), what only
/// a combination of arguments makes impossible.
fn refuse(subcommand: &str, msg: String) -> ! {
    let mut cli = Cli::command();
    cli.build();
    let kind = clap::error::ErrorKind::ValueValidation;
    match cli.find_subcommand_mut(subcommand) {
        Some(sub) => sub.error(kind, msg).exit(),
        None => cli.error(kind, msg).exit(),
    }
}

/// A run stops at [`MAX_TIME_NS`] of simulated time: more bytes than the
/// line rate carries in that time can never all be delivered.
fn check_volume(subcommand: &str, messages: usize, size: u32) {
    let bytes = (messages as u64).saturating_mul(u64::from(size));
    if bytes > MAX_BYTES {
        refuse(
            subcommand,
            format!(
            "{messages} messages of {size} bytes ({bytes} bytes) cannot be carried within a run's {} s of simulated time at {LINE_RATE_GBPS} Gb/s ({MAX_BYTES} bytes)",
            MAX_TIME_NS / 1_000_000_000
        ),
        );
    }
}

/// `v` if it is a number to print (a run that delivered nothing has no
/// latency quantile).
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// A latency cell of the table: µs, or `n/a` when nothing was delivered.
fn latency_cell(v: f64) -> String {
    finite(v).map_or_else(|| "n/a".into(), |v| format!("{v:.1}"))
}

const COMBOS: [(RetransmitMode, bool, &str); 4] = [
    (RetransmitMode::GoBackN, true, "GBN+fast"),
    (RetransmitMode::GoBackN, false, "GBN"),
    (RetransmitMode::Selective, true, "selective+fast"),
    (RetransmitMode::Selective, false, "selective"),
];

fn rto(base: Option<u32>) -> RtoMode {
    match base {
        Some(base_us) => RtoMode::Dynamic { base_us, n: 1 },
        None => RtoMode::Static(StaticRto::Us512),
    }
}

#[allow(clippy::too_many_arguments, reason = "one scenario per command")]
fn scenario(
    mode: RetransmitMode,
    fast: bool,
    lb: Lb,
    loss: f64,
    messages: usize,
    size: u32,
    seed: u64,
    rto: RtoMode,
) -> Scenario {
    let mut sc = Scenario::new(mode, fast, lb, four_paths(loss, 0.0, 0.0));
    sc.seed = seed;
    sc.messages = vec![size; messages];
    sc.rto = rto;
    sc.max_time_ns = MAX_TIME_NS;
    sc
}

/// Runs seeds `first..=last`.
fn sweep(first: u64, last: u64) -> Result<()> {
    use ub_proto::transport::cc::{CcAlgorithm, CcConfig};
    use ub_proto::transport::hdr::{BitmapSize, CetphKind};
    let (mut runs, mut fails) = (0, 0);
    for seed in first..=last {
        for (mode, fast, name) in COMBOS {
            for lb in [Lb::PerFlow, Lb::PerPacket] {
                let pick = |n: u64, div: u64| ((seed / div) % n) as usize;
                let loss = [0.0, 0.02, 0.1, 0.3][pick(4, 1)];
                let mut sc = Scenario::new(mode, fast, lb, four_paths(loss, 0.03, 0.02));
                sc.seed = seed;
                sc.ack_loss = loss;
                sc.window = [16, 64, 256][pick(3, 1)];
                sc.rx_slots = [16, 64, 128][pick(3, 3)];
                sc.mtu = [4096, 1024, 256][pick(3, 2)];
                sc.ooo_window = [128, 256, 2048][pick(3, 9)];
                sc.ack_every = [1, 2, 3, 4][pick(4, 1)];
                sc.sack_threshold = [1, 2, 3][pick(3, 1)];
                sc.sack_max = [BitmapSize::B64, BitmapSize::B256, BitmapSize::B1024][pick(3, 1)];
                sc.rto = RtoMode::Dynamic { base_us: 16, n: 1 };
                sc.retry_limit = 40;
                sc.initial_psn = (seed as u32).wrapping_mul(2_654_435_761) & 0xff_ffff;
                // Sizes 1..=50000, varied by seed; wrapping, since a seed
                // can be any u64.
                let salt = (seed as u32).wrapping_mul(31);
                sc.messages = (0..40u32)
                    .map(|i| 1 + ((i * 7919).wrapping_add(salt) % 50_000))
                    .collect();
                // The dynamic RTO doubles per consecutive timeout: let it.
                sc.max_time_ns = u64::MAX / 2;
                if seed % 2 == 1 {
                    sc.format = ub_sim::Format::Cna24;
                }
                let cc = match seed % 5 {
                    0 => Some((CcAlgorithm::Caqm { hint_unit: 32 }, CetphKind::Caqm)),
                    1 => Some((CcAlgorithm::Ldcp, CetphKind::Ldcp)),
                    _ => None,
                };
                if let Some((alg, kind)) = cc {
                    sc.cc = CcConfig {
                        alg,
                        initial_cw: 65_536,
                        max_cw: 1 << 20,
                        mtu: sc.mtu,
                        path_wide_permille: 0,
                    };
                    sc.cetph = Some(kind);
                    sc.nic_rate = 50.0;
                    for p in &mut sc.paths {
                        p.mark_threshold = Some(20_000);
                    }
                }
                let group = seed % 7 == 0;
                if group {
                    sc.channels = 3;
                }
                // Traffic both ways at once over the same channels.
                sc.reverse_messages = (0..20)
                    .map(|i| {
                        1 + (i * 104_729u32).wrapping_add((seed as u32).wrapping_mul(17)) % 70_000
                    })
                    .collect();
                let n = sc.messages.len() as u64;
                let m = sc.reverse_messages.len() as u64;
                let r = run(sc);
                runs += 1;
                let mut ids: Vec<u64> = r.delivered.iter().map(|d| d.0).collect();
                let mut rids: Vec<u64> = r.reverse_delivered.iter().map(|d| d.0).collect();
                if group {
                    // A group orders messages per channel only.
                    ids.sort_unstable();
                    rids.sort_unstable();
                }
                if !r.errors.is_empty()
                    || r.channel_error
                    || ids != (0..n).collect::<Vec<_>>()
                    || r.acked != n
                    || rids != (0..m).collect::<Vec<_>>()
                    || r.reverse_acked != m
                {
                    fails += 1;
                    println!(
                        "FAIL seed {seed} {name} {lb:?} loss {loss}: delivered {} acked {} (reverse {} {}) channel error {} first error {:?} timeouts {} last delivery {} ns stalled {} stopped at {} ns",
                        ids.len(),
                        r.acked,
                        rids.len(),
                        r.reverse_acked,
                        r.channel_error,
                        r.errors.first(),
                        r.tx.timeouts,
                        r.end_ns,
                        r.stalled,
                        r.stop_ns
                    );
                }
            }
        }
    }
    println!("{runs} runs, {fails} failures");
    anyhow::ensure!(fails == 0, "{fails} failing runs");
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Sweep { seeds, first } => {
            // seed_count() made `seeds` at least 1.
            let Some(last) = first.checked_add(seeds.saturating_sub(1)) else {
                refuse(
                    "sweep",
                    format!(
                        "{seeds} seeds from {first} run past the largest seed, {}",
                        u64::MAX
                    ),
                );
            };
            sweep(first, last)?;
        }
        Cmd::Run {
            mode,
            fast,
            lb,
            loss,
            messages,
            size,
            seed,
            rto_base_us,
        } => {
            check_volume("run", messages, size);
            let mode = match mode {
                ModeArg::Gbn => RetransmitMode::GoBackN,
                ModeArg::Selective => RetransmitMode::Selective,
            };
            let lb = match lb {
                LbArg::PerFlow => Lb::PerFlow,
                LbArg::PerPacket => Lb::PerPacket,
            };
            let r = run(scenario(
                mode,
                fast,
                lb,
                loss,
                messages,
                size,
                seed,
                rto(rto_base_us),
            ));
            let latency = match (
                finite(r.latency_quantile_us(0.5)),
                finite(r.latency_quantile_us(0.99)),
            ) {
                (Some(p50), Some(p99)) => format!("p50 {p50:.1} us p99 {p99:.1} us"),
                _ => "no message delivered, so no latency".into(),
            };
            println!(
                "delivered {}/{} goodput {:.2} Gb/s {latency} data packets {} retransmitted {} timeouts {} ICRC drops {} errors {}{}",
                r.delivered.len(),
                messages,
                finite(r.goodput_gbps()).unwrap_or(0.0),
                r.data_packets,
                r.tx.retransmitted,
                r.tx.timeouts,
                r.icrc_drops,
                r.errors.len(),
                if r.channel_error {
                    " (the channel went to the error state)"
                } else {
                    ""
                }
            );
        }
        Cmd::Experiment {
            out,
            messages,
            size,
            seed,
            loss,
            rto_base_us,
        } => {
            check_volume("experiment", messages, size);
            for (i, p) in loss.iter().enumerate() {
                if loss[..i].contains(p) {
                    refuse("experiment", format!("loss rate {p} is listed twice"));
                }
            }
            experiment(&out, messages, size, seed, &loss, rto_base_us)?;
        }
    }
    Ok(())
}

/// Runs every combination at every loss rate; prints the table and writes
/// `out`.csv and `out`.svg.
fn experiment(
    out: &Path,
    messages: usize,
    size: u32,
    seed: u64,
    loss: &[f64],
    rto_base_us: Option<u32>,
) -> Result<()> {
    // Fail on an unwritable destination before the runs, not after.
    let csv_path = out.with_extension("csv");
    let svg_path = out.with_extension("svg");
    if let Some(dir) = csv_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut csv = String::from(
        "mode,fast_retransmit,lb,loss,goodput_gbps,p50_latency_us,p99_latency_us,messages_delivered,data_packets,retransmitted,timeouts,errors\n",
    );
    println!(
        "{:<15} {:<10} {:>8} {:>14} {:>12} {:>12} {:>9} {:>8}",
        "combination", "lb", "loss", "goodput Gb/s", "p50 us", "p99 us", "rtx", "RTOs"
    );
    let mut goodput: Vec<Series> = Vec::new();
    let mut p99: Vec<Series> = Vec::new();
    for lb in [Lb::PerFlow, Lb::PerPacket] {
        let lbname = if lb == Lb::PerFlow {
            "per-flow"
        } else {
            "per-packet"
        };
        for (colour, (mode, fast, name)) in COMBOS.into_iter().enumerate() {
            let mut g = Series {
                name: format!("{name}, {lbname}"),
                colour,
                dashed: lb == Lb::PerPacket,
                points: vec![],
            };
            let mut l = Series {
                name: g.name.clone(),
                points: vec![],
                ..g
            };
            for &p in loss {
                let r = run(scenario(
                    mode,
                    fast,
                    lb,
                    p,
                    messages,
                    size,
                    seed,
                    rto(rto_base_us),
                ));
                let gp = finite(r.goodput_gbps()).unwrap_or(0.0);
                let (p50v, p99v) = (r.latency_quantile_us(0.5), r.latency_quantile_us(0.99));
                println!(
                    "{name:<15} {lbname:<10} {p:>8} {gp:>14.2} {:>12} {:>12} {:>9} {:>8}",
                    latency_cell(p50v),
                    latency_cell(p99v),
                    r.tx.retransmitted,
                    r.tx.timeouts
                );
                // An empty CSV field, not NaN, when nothing was delivered.
                let csv_cell = |v: f64| finite(v).map_or_else(String::new, |v| format!("{v:.1}"));
                let _ = writeln!(
                    csv,
                    "{},{},{lbname},{p},{gp:.3},{},{},{},{},{},{},{}",
                    if mode == RetransmitMode::GoBackN {
                        "gbn"
                    } else {
                        "selective"
                    },
                    fast,
                    csv_cell(p50v),
                    csv_cell(p99v),
                    r.delivered.len(),
                    r.data_packets,
                    r.tx.retransmitted,
                    r.tx.timeouts,
                    r.errors.len() + usize::from(r.delivered.len() != messages)
                );
                g.points.push((p, gp));
                l.points.push((p, p99v));
            }
            goodput.push(g);
            p99.push(l);
        }
    }
    let rto_name = match rto_base_us {
        Some(b) => format!("dynamic RTO {b} µs × 2^Times"),
        None => "static RTO 512 µs".to_string(),
    };
    let title = format!(
        "ub-sim: {messages} × {size} B messages, 4 paths (1–2.5 µs), {LINE_RATE_GBPS} Gb/s, {rto_name}, seed {seed}"
    );
    let image = loss_chart(
        &title,
        &[
            Panel {
                title: "Goodput".into(),
                y_label: "goodput (Gb/s)".into(),
                series: goodput,
            },
            Panel {
                title: "99th-percentile message latency".into(),
                y_label: "p99 latency (µs)".into(),
                series: p99,
            },
        ],
    )?;
    std::fs::write(&csv_path, csv).with_context(|| format!("writing {}", csv_path.display()))?;
    std::fs::write(&svg_path, image).with_context(|| format!("writing {}", svg_path.display()))?;
    println!("wrote {} and {}", csv_path.display(), svg_path.display());
    Ok(())
}
