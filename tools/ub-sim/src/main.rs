// SPDX-License-Identifier: GPL-2.0
//! `ub-sim` command line: single runs and the retransmission experiment.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};
use ub_sim::plot::{svg, Series};
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
        #[arg(long, default_value = "Documentation/ub/transport-experiment")]
        out: PathBuf,
        /// Messages per run.
        #[arg(long, default_value_t = 2000)]
        messages: usize,
        /// Message size, bytes.
        #[arg(long, default_value_t = 65536)]
        size: u32,
        /// PRNG seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Loss rates (per packet, every path and direction).
        #[arg(long, value_delimiter = ',', default_values_t = [0.0, 1e-4, 1e-3, 1e-2])]
        loss: Vec<f64>,
        /// Use the dynamic RTO with this base (µs) and N = 1 instead of the
        /// static 512 µs level.
        #[arg(long)]
        rto_base_us: Option<u32>,
    },
    /// Stress: many seeds of every combination under heavy, varied
    /// impairments (up to 30 % data and 60 % response loss, duplication,
    /// corruption, small windows, bitmaps and receive slots, both header
    /// formats, CAQM/LDCP, channel groups), with messages both ways at
    /// once; fails on any delivery error.
    Sweep {
        /// Number of seeds.
        #[arg(long, default_value_t = 50)]
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
        /// Loss rate.
        #[arg(long, default_value_t = 0.001)]
        loss: f64,
        /// Messages.
        #[arg(long, default_value_t = 200)]
        messages: usize,
        /// Message size.
        #[arg(long, default_value_t = 65536)]
        size: u32,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Dynamic RTO base (µs, N = 1) instead of the static 512 µs.
        #[arg(long)]
        rto_base_us: Option<u32>,
    },
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
    sc.max_time_ns = 60_000_000_000;
    sc
}

fn sweep(first: u64, seeds: u64) -> Result<()> {
    use ub_proto::transport::cc::{CcAlgorithm, CcConfig};
    use ub_proto::transport::hdr::{BitmapSize, CetphKind};
    let (mut runs, mut fails) = (0, 0);
    for seed in first..first.saturating_add(seeds) {
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
                sc.messages = (0..40)
                    .map(|i| 1 + ((i * 7919 + seed as u32 * 31) % 50_000))
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
                    .map(|i| 1 + ((i * 104_729 + seed as u32 * 17) % 70_000))
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
        Cmd::Sweep { seeds, first } => sweep(first, seeds)?,
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
            println!(
                "delivered {}/{} goodput {:.2} Gb/s p50 {:.1} us p99 {:.1} us data packets {} retransmitted {} timeouts {} ICRC drops {} errors {}",
                r.delivered.len(),
                messages,
                r.goodput_gbps(),
                r.latency_quantile_us(0.5),
                r.latency_quantile_us(0.99),
                r.data_packets,
                r.tx.retransmitted,
                r.tx.timeouts,
                r.icrc_drops,
                r.errors.len()
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
                for (mode, fast, name) in COMBOS {
                    let mut g = Series {
                        name: format!("{name}, {lbname}"),
                        points: vec![],
                    };
                    let mut l = Series {
                        name: g.name.clone(),
                        points: vec![],
                    };
                    for (i, &p) in loss.iter().enumerate() {
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
                        let (gp, p50, p99v) = (
                            r.goodput_gbps(),
                            r.latency_quantile_us(0.5),
                            r.latency_quantile_us(0.99),
                        );
                        println!(
                            "{name:<15} {lbname:<10} {p:>8} {gp:>14.2} {p50:>12.1} {p99v:>12.1} {:>9} {:>8}",
                            r.tx.retransmitted, r.tx.timeouts
                        );
                        let _ = writeln!(
                            csv,
                            "{},{},{lbname},{p},{gp:.3},{p50:.1},{p99v:.1},{},{},{},{},{}",
                            if mode == RetransmitMode::GoBackN {
                                "gbn"
                            } else {
                                "selective"
                            },
                            fast,
                            r.delivered.len(),
                            r.data_packets,
                            r.tx.retransmitted,
                            r.tx.timeouts,
                            r.errors.len() + usize::from(r.delivered.len() != messages)
                        );
                        g.points.push((i, gp));
                        l.points.push((i, p99v));
                    }
                    goodput.push(g);
                    p99.push(l);
                }
            }
            let xs: Vec<String> = loss.iter().map(|p| format!("{p}")).collect();
            let rto_name = match rto_base_us {
                Some(b) => format!("dynamic RTO {b} us x 2^Times"),
                None => "static RTO 512 us".to_string(),
            };
            let title = format!(
                "ub-sim: {messages} x {size} B messages, 4 paths (1-2.5 us), 100 Gb/s, {rto_name}, seed {seed}"
            );
            let image = svg(
                &title,
                &xs,
                &[
                    ("Goodput".into(), "Gb/s".into(), false, goodput),
                    (
                        "99th-percentile message latency".into(),
                        "us (log)".into(),
                        true,
                        p99,
                    ),
                ],
            );
            let csv_path = out.with_extension("csv");
            let svg_path = out.with_extension("svg");
            if let Some(dir) = csv_path.parent() {
                std::fs::create_dir_all(dir).ok();
            }
            std::fs::write(&csv_path, csv)
                .with_context(|| format!("writing {}", csv_path.display()))?;
            std::fs::write(&svg_path, image)
                .with_context(|| format!("writing {}", svg_path.display()))?;
            println!("wrote {} and {}", csv_path.display(), svg_path.display());
        }
    }
    Ok(())
}
