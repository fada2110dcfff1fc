// SPDX-License-Identifier: GPL-2.0
//! `ub-fabric` command line: argument parsing only.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ub_fabric::control;
use ub_fabric::daemon::{start_backend, DaemonConfig};
use ub_fabric::device::HostileCase;
use ub_fabric::fabric::Command;
use ub_fabric::topology::{Topology, BACK_TO_BACK_TOML, DEFAULT_TOML};

/// Emulated UB controllers (vfio-user, for QEMU), PHY and UB switches.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the daemon.
    Run {
        /// Topology file (TOML); default: the built-in `--builtin` one.
        #[arg(long)]
        topology: Option<PathBuf>,
        /// Built-in topology: `default` or `back-to-back`.
        #[arg(long, default_value = "default")]
        builtin: String,
        /// Override the topology's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Directory for the vfio-user sockets (`<host>.sock`).
        #[arg(long, default_value = "/tmp/ub-fabric")]
        socket_dir: PathBuf,
        /// Control socket (default: `<socket-dir>/control.sock`).
        #[arg(long)]
        control: Option<PathBuf>,
        /// Fabric step period in microseconds.
        #[arg(long, default_value_t = 20)]
        tick_us: u64,
    },
    /// Print a built-in topology.
    Topology {
        /// `default` or `back-to-back`.
        #[arg(default_value = "default")]
        name: String,
    },
    /// Print the JSON counters of a running daemon.
    Counters {
        /// Control socket.
        #[arg(long, default_value = "/tmp/ub-fabric/control.sock")]
        control: PathBuf,
    },
    /// Change a link's PHY at run time.
    Link {
        /// Control socket.
        #[arg(long, default_value = "/tmp/ub-fabric/control.sock")]
        control: PathBuf,
        /// Either end, `node.port`.
        link: String,
        /// Bit error rate.
        #[arg(long)]
        ber: Option<f64>,
        /// FEC failures per flit.
        #[arg(long)]
        fec_fail: Option<f64>,
        /// Propagation delay (ns).
        #[arg(long)]
        delay_ns: Option<u64>,
        /// Line rate (flits/s).
        #[arg(long)]
        rate_fps: Option<f64>,
        /// Port down (cable pulled).
        #[arg(long, conflicts_with = "up")]
        down: bool,
        /// Port up again.
        #[arg(long)]
        up: bool,
        /// Flap: down, then up 100 µs later.
        #[arg(long)]
        flap: bool,
        /// The NPI the switch end writes into every IP-format packet it
        /// receives from the link (25 bits, decimal or 0x hex; bit 24 is
        /// low privilege; 0 stops rewriting).
        #[arg(long, value_parser = parse_npi)]
        npi_ingress: Option<u32>,
        /// The NPI the switch end writes into every IP-format packet it
        /// sends on the link (0 stops rewriting).
        #[arg(long, value_parser = parse_npi)]
        npi_egress: Option<u32>,
    },
    /// Change a switch's injected faults at run time.
    Switch {
        /// Control socket.
        #[arg(long, default_value = "/tmp/ub-fabric/control.sock")]
        control: PathBuf,
        /// Switch name.
        name: String,
        /// Drop probability.
        #[arg(long)]
        drop: Option<f64>,
        /// Corruption probability.
        #[arg(long)]
        corrupt: Option<f64>,
        /// Reordering probability.
        #[arg(long)]
        reorder: Option<f64>,
        /// Duplication probability.
        #[arg(long)]
        duplicate: Option<f64>,
    },
    /// Make a host port's controller misbehave `count` times (see
    /// Documentation/ub/fabric.rst, "Hostile mode").
    Hostile {
        /// Control socket.
        #[arg(long, default_value = "/tmp/ub-fabric/control.sock")]
        control: PathBuf,
        /// The host port, `node.port`.
        port: String,
        /// The case, e.g. `done-len-too-long` (an unknown one is refused
        /// with the list of all).
        case: HostileCase,
        /// How many times (0 disarms the case).
        #[arg(long, default_value_t = 1)]
        count: u64,
    },
    /// Queue forged RTP data packets towards a host port, at the switch
    /// port facing it (see Documentation/ub/fabric.rst, "Forged packets").
    /// Given --src, --dst, --src-tpn and --psn, the packet is built from
    /// them and sent at once; otherwise what is left out is taken from the
    /// channel's next data packet towards the port.
    Forge {
        /// Control socket.
        #[arg(long, default_value = "/tmp/ub-fabric/control.sock")]
        control: PathBuf,
        /// The host port, `node.port`, or a host, `node`: whichever of its
        /// ports the channel's next packet takes.
        port: String,
        /// The destination TPN (the channel at that host).
        #[arg(long)]
        dst_tpn: u32,
        /// Source address: IPv4, IPv6 or cna24:0xNNNNNN.
        #[arg(long)]
        src: Option<String>,
        /// Destination address.
        #[arg(long)]
        dst: Option<String>,
        /// Source TPN.
        #[arg(long)]
        src_tpn: Option<u32>,
        /// PSN.
        #[arg(long, conflicts_with = "psn_ahead")]
        psn: Option<u32>,
        /// PSN: the observed packet's plus this (modulo 2^24).
        #[arg(long)]
        psn_ahead: Option<u32>,
        /// Resend the observed packet unchanged.
        #[arg(long, conflicts_with_all = ["src", "dst", "src_tpn", "psn", "psn_ahead", "payload_len"])]
        replay: bool,
        /// Copies.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Payload bytes (default: the observed packet's, or 64).
        #[arg(long)]
        payload_len: Option<u32>,
        /// NPI of the packets (IP format; 25 bits, decimal or 0x hex; bit
        /// 24 is low privilege).
        #[arg(long, value_parser = parse_npi)]
        npi: Option<u32>,
        /// How long to wait for the channel's traffic, in ms (default 5000).
        #[arg(long)]
        within_ms: Option<u64>,
    },
}

fn print_answer(v: &serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    if v.get("ok") == Some(&serde_json::Value::Bool(false)) {
        anyhow::bail!("the daemon refused the command");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run {
            topology,
            builtin,
            seed,
            socket_dir,
            control,
            tick_us,
        } => {
            let mut topo = match topology {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    Topology::parse(&text)?
                }
                None => Topology::builtin(&builtin)
                    .with_context(|| format!("no built-in topology {builtin:?}"))?,
            };
            if let Some(s) = seed {
                topo.seed = s;
            }
            let control = control.unwrap_or_else(|| socket_dir.join("control.sock"));
            start_backend(DaemonConfig {
                topology: topo,
                socket_dir,
                control,
                tick: std::time::Duration::from_micros(tick_us.max(1)),
            })
        }
        Cmd::Topology { name } => {
            match name.as_str() {
                "default" => print!("{DEFAULT_TOML}"),
                "back-to-back" => print!("{BACK_TO_BACK_TOML}"),
                other => anyhow::bail!("no built-in topology {other:?}"),
            }
            Ok(())
        }
        Cmd::Counters { control } => print_answer(&control::request(&control, &Command::Counters)?),
        Cmd::Link {
            control,
            link,
            ber,
            fec_fail,
            delay_ns,
            rate_fps,
            down,
            up,
            flap,
            npi_ingress,
            npi_egress,
        } => {
            let up = if down {
                Some(false)
            } else if up {
                Some(true)
            } else {
                None
            };
            let cmd = Command::Link {
                link,
                ber,
                fec_fail,
                delay_ns,
                rate_fps,
                up,
                flap,
                npi_ingress,
                npi_egress,
            };
            print_answer(&control::request(&control, &cmd)?)
        }
        Cmd::Switch {
            control,
            name,
            drop,
            corrupt,
            reorder,
            duplicate,
        } => {
            let cmd = Command::Switch {
                switch: name,
                drop,
                corrupt,
                reorder,
                duplicate,
            };
            print_answer(&control::request(&control, &cmd)?)
        }
        Cmd::Hostile {
            control,
            port,
            case,
            count,
        } => {
            let cmd = Command::Hostile {
                port,
                case,
                count: Some(count),
            };
            print_answer(&control::request(&control, &cmd)?)
        }
        Cmd::Forge {
            control,
            port,
            dst_tpn,
            src,
            dst,
            src_tpn,
            psn,
            psn_ahead,
            replay,
            count,
            payload_len,
            npi,
            within_ms,
        } => {
            let cmd = Command::Forge {
                port,
                dst_tpn,
                src,
                dst,
                src_tpn,
                psn,
                psn_ahead,
                replay,
                count: Some(count),
                payload_len,
                npi,
                within_ms,
            };
            print_answer(&control::request(&control, &cmd)?)
        }
    }
}

/// An NPI on the command line: decimal or `0x` hex, 25 bits.
fn parse_npi(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("{s:?}: a number (decimal or 0x hex)"))?;
    ub_proto::net::npi::Npi::try_from_raw(v)
        .map(|_| v)
        .ok_or_else(|| format!("{s}: an NPI is 25 bits (at most 0x1ffffff)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_arguments() {
        let cli = Cli::try_parse_from([
            "ub-fabric",
            "hostile",
            "--control",
            "/tmp/c.sock",
            "vm0.1",
            "done-len-too-long",
            "--count",
            "3",
        ])
        .expect("parses");
        let Cmd::Hostile {
            control,
            port,
            case,
            count,
        } = cli.cmd
        else {
            panic!("not the hostile subcommand: {cli:?}");
        };
        assert_eq!(control, PathBuf::from("/tmp/c.sock"));
        assert_eq!(
            (port.as_str(), case, count),
            ("vm0.1", HostileCase::DoneLenTooLong, 3)
        );
        let cli = Cli::try_parse_from(["ub-fabric", "hostile", "vm1.0", "irq-storm"]).expect("ok");
        assert!(matches!(
            cli.cmd,
            Cmd::Hostile {
                case: HostileCase::IrqStorm,
                count: 1,
                ..
            }
        ));
        for bad in [
            &["ub-fabric", "hostile", "vm0.0", "no-such-case"][..],
            &["ub-fabric", "hostile", "vm0.0"],
            &[
                "ub-fabric",
                "hostile",
                "vm0.0",
                "irq-storm",
                "--count",
                "-1",
            ],
            &[
                "ub-fabric",
                "hostile",
                "vm0.0",
                "irq-storm",
                "--count",
                "many",
            ],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
        let err = Cli::try_parse_from(["ub-fabric", "hostile", "vm0.0", "nope"])
            .expect_err("unknown case")
            .to_string();
        assert!(err.contains("garbage-flits"), "lists the cases: {err}");
    }

    #[test]
    fn forge_arguments() {
        let cli = Cli::try_parse_from([
            "ub-fabric",
            "forge",
            "vm0.0",
            "--dst-tpn",
            "7",
            "--src",
            "10.0.9.100",
            "--psn-ahead",
            "1",
            "--count",
            "3",
        ])
        .expect("parses");
        let Cmd::Forge {
            port,
            dst_tpn,
            src,
            psn,
            psn_ahead,
            replay,
            count,
            ..
        } = cli.cmd
        else {
            panic!("not the forge subcommand: {cli:?}");
        };
        assert_eq!(
            (
                port.as_str(),
                dst_tpn,
                src.as_deref(),
                psn,
                psn_ahead,
                replay,
                count
            ),
            ("vm0.0", 7, Some("10.0.9.100"), None, Some(1), false, 3)
        );
        let cli =
            Cli::try_parse_from(["ub-fabric", "forge", "vm0.0", "--dst-tpn", "1", "--replay"])
                .expect("replay");
        assert!(matches!(
            cli.cmd,
            Cmd::Forge {
                replay: true,
                count: 1,
                ..
            }
        ));
        for bad in [
            &["ub-fabric", "forge", "vm0.0"][..],
            &["ub-fabric", "forge", "vm0.0", "--dst-tpn", "-1"],
            &[
                "ub-fabric",
                "forge",
                "vm0.0",
                "--dst-tpn",
                "1",
                "--psn",
                "1",
                "--psn-ahead",
                "2",
            ],
            &[
                "ub-fabric",
                "forge",
                "vm0.0",
                "--dst-tpn",
                "1",
                "--replay",
                "--src-tpn",
                "2",
            ],
            &[
                "ub-fabric",
                "forge",
                "vm0.0",
                "--dst-tpn",
                "1",
                "--count",
                "many",
            ],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }
}
