// SPDX-License-Identifier: GPL-2.0
//! ubctl's command line: `ubctl [OPTIONS] OBJECT COMMAND [ARGS]`.
//!
//! Everything a user can get wrong is refused here, before a socket is
//! opened, with clap's usage error (exit status 2).

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::addr::{Address, Prefix};
use crate::request::PortChanges;
use crate::spec::load_balance;

/// Highest port number the spec allows (`port.index` `checks: max`).
pub const PORT_MAX: u32 = 63;
/// Largest echo payload (`echo.size` `checks: max`).
pub const ECHO_SIZE_MAX: u32 = 4096;
/// Largest NPI (`dev.npi` `checks: max`: 24-bit partition, bit 24 low
/// privilege).
pub const NPI_MAX: u32 = 0x01ff_ffff;

/// Configure and inspect UnifiedBus controllers driven by ub.ko.
#[derive(Debug, Parser)]
#[command(name = "ubctl", version, about, long_about = None)]
pub struct Cli {
    /// Print JSON (keys are the netlink spec's attribute names).
    #[arg(short = 'j', long)]
    pub json: bool,
    /// Indent JSON for people.
    #[arg(short = 'p', long)]
    pub pretty: bool,
    /// Include the counters in `show` output.
    #[arg(short = 's', long)]
    pub stats: bool,
    /// The object to act on.
    #[command(subcommand)]
    pub object: Object,
}

/// A device: its index or its PCI name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DevArg {
    /// Device index.
    Index(u32),
    /// PCI device name (`0000:00:03.0`).
    Name(String),
}

/// Parse `DEV`.
pub fn parse_dev(s: &str) -> Result<DevArg, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(DevArg::Index)
            .map_err(|_| format!("device index {s} is too large"));
    }
    // Any other word is a device name as the kernel reports it (the PCI
    // name of a controller, 0000:00:03.0); an unknown one is reported by
    // the lookup, not here.
    if s.is_empty() || s.contains('/') || s.chars().any(char::is_whitespace) {
        return Err(format!(
            "'{s}' is not a device index or a device name (0000:00:03.0)"
        ));
    }
    Ok(DevArg::Name(s.to_string()))
}

fn parse_port_num(s: &str) -> Result<u32, String> {
    let p: u32 = s
        .parse()
        .map_err(|_| format!("port '{s}' is not a number"))?;
    if p > PORT_MAX {
        return Err(format!("port {p} out of range (0-{PORT_MAX})"));
    }
    Ok(p)
}

/// `DEV[/PORT]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSel {
    /// The device.
    pub dev: DevArg,
    /// The port, if given.
    pub port: Option<u32>,
}

/// Parse `DEV[/PORT]`.
pub fn parse_port_sel(s: &str) -> Result<PortSel, String> {
    match s.rsplit_once('/') {
        Some((d, p)) => Ok(PortSel {
            dev: parse_dev(d)?,
            port: Some(parse_port_num(p)?),
        }),
        None => Ok(PortSel {
            dev: parse_dev(s)?,
            port: None,
        }),
    }
}

/// Parse `DEV/PORT` (the port is required).
pub fn parse_port_id(s: &str) -> Result<PortSel, String> {
    let p = parse_port_sel(s)?;
    if p.port.is_none() {
        return Err(format!("'{s}' names no port (DEV/PORT, e.g. 0/1)"));
    }
    Ok(p)
}

fn parse_ip_dst(s: &str) -> Result<Address, String> {
    match s.parse::<Address>()? {
        a @ (Address::V4(_) | Address::V6(_)) => Ok(a),
        _ => Err(format!(
            "'{s}': echo rides on UTP, its destination is an IPv4 or IPv6 address"
        )),
    }
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !v.is_finite() || !(0.0..=3600.0).contains(&v) {
        return Err(format!("{s} seconds is out of range (0-3600)"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Objects.
#[derive(Debug, Subcommand)]
pub enum Object {
    /// UB controllers.
    Dev {
        /// What to do.
        #[command(subcommand)]
        cmd: DevCmd,
    },
    /// Ports of the controllers (link layer).
    Port {
        /// What to do.
        #[command(subcommand)]
        cmd: PortCmd,
    },
    /// Local network addresses.
    Addr {
        /// What to do.
        #[command(subcommand)]
        cmd: AddrCmd,
    },
    /// Routes over the ports.
    Route {
        /// What to do.
        #[command(subcommand)]
        cmd: RouteCmd,
    },
    /// Partition enforcement (NPI) of a device.
    Npi {
        /// What to do.
        #[command(subcommand)]
        cmd: NpiCmd,
    },
    /// TP Channels of the controllers (transport layer).
    Tp {
        /// What to do.
        #[command(subcommand)]
        cmd: TpCmd,
    },
    /// Send echo requests over UTP and summarise the replies.
    Ping(PingArgs),
    /// Print port events (link up/down, retrain, errors) and TP Channel
    /// events (state changes, errors, closes) as they happen.
    Monitor {
        /// Stop after this many events.
        #[arg(short = 'c', long)]
        count: Option<u64>,
    },
    /// Print the counters of devices and their ports.
    Stats {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: Option<DevArg>,
    },
    /// Print a shell completion script.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// `dev` commands.
#[derive(Debug, Subcommand)]
pub enum DevCmd {
    /// Show one device or all.
    Show {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: Option<DevArg>,
    },
}

/// `port` commands.
#[derive(Debug, Subcommand)]
pub enum PortCmd {
    /// Show a port, the ports of a device, or every port.
    Show {
        /// DEV or DEV/PORT.
        #[arg(value_parser = parse_port_sel)]
        port: Option<PortSel>,
    },
    /// Change a port: [up|down] [retry-threshold N] [reinit-threshold N] [sharing on|off].
    Set {
        /// DEV/PORT.
        #[arg(value_parser = parse_port_id)]
        port: PortSel,
        /// Settings, iproute2 style.
        #[arg(num_args = 1.., required = true, value_name = "SETTING")]
        settings: Vec<String>,
    },
}

/// `tp` commands.
#[derive(Debug, Subcommand)]
pub enum TpCmd {
    /// Show a TP Channel, the channels of a device, or every channel.
    Show {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: Option<DevArg>,
        /// TPN of the channel on the device.
        #[arg(value_parser = parse_tpn)]
        tpn: Option<u32>,
    },
}

/// Parse `TPN` (the kernel says whether the device has it).
pub fn parse_tpn(s: &str) -> Result<u32, String> {
    s.parse()
        .map_err(|_| format!("TPN '{s}' is not a number (0-{})", u32::MAX))
}

/// `addr` commands.
#[derive(Debug, Subcommand)]
pub enum AddrCmd {
    /// Add a local address.
    Add {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// cna16:0x0100, cna24:0x000100, an IPv4 or an IPv6 address.
        addr: Address,
    },
    /// Remove a local address.
    Del {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// The address.
        addr: Address,
    },
    /// Show the addresses of one device or all.
    Show {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: Option<DevArg>,
    },
}

/// `route` commands.
#[derive(Debug, Subcommand)]
pub enum RouteCmd {
    /// Add a route: DEV PREFIX/LEN [ports 0,1] [per-packet|per-flow].
    Add {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// Destination, ADDR/LEN.
        prefix: Prefix,
        /// [ports LIST] [per-packet|per-flow]
        #[arg(value_name = "OPTION")]
        options: Vec<String>,
    },
    /// Remove a route.
    Del {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// Destination, ADDR/LEN.
        prefix: Prefix,
    },
    /// Show the routes of one device or all.
    Show {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: Option<DevArg>,
    },
}

/// `npi` commands.
#[derive(Debug, Subcommand)]
pub enum NpiCmd {
    /// Set a device's NPI mode and NPI: DEV [mode strict|loose] [npi N]
    /// (a value not given keeps its current setting).
    Set {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// Settings, iproute2 style.
        #[arg(num_args = 1.., required = true, value_name = "SETTING")]
        settings: Vec<String>,
    },
}

/// `ping` options.
#[derive(Debug, Args)]
pub struct PingArgs {
    /// Stop after COUNT replies or losses (default: until interrupted).
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Payload bytes.
    #[arg(short = 's', long, default_value_t = 56,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(ECHO_SIZE_MAX)))]
    pub size: u32,
    /// Seconds between requests.
    #[arg(short = 'i', long, default_value = "1", value_parser = parse_secs)]
    pub interval: Duration,
    /// Seconds to wait for a reply.
    #[arg(short = 'W', long, default_value = "2", value_parser = parse_secs)]
    pub timeout: Duration,
    /// Send from this device (default: the first).
    #[arg(short = 'I', long, value_parser = parse_dev)]
    pub dev: Option<DevArg>,
    /// Destination: an IPv4 or IPv6 address (echo rides on UTP).
    #[arg(value_parser = parse_ip_dst)]
    pub dst: Address,
}

fn parse_threshold(kw: &str, v: Option<&String>) -> Result<u8, String> {
    let v = v.ok_or_else(|| format!("{kw} needs a value (1-255)"))?;
    match v.parse::<u8>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{kw} '{v}' out of range (1-255)")),
    }
}

/// Parse `port set`'s settings.
pub fn parse_port_settings(args: &[String]) -> Result<PortChanges, String> {
    let mut c = PortChanges::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "up" => c.admin_up = Some(true),
            "down" => c.admin_up = Some(false),
            "retry-threshold" => c.retry_threshold = Some(parse_threshold(a, it.next())?),
            "reinit-threshold" => c.reinit_threshold = Some(parse_threshold(a, it.next())?),
            "sharing" => {
                c.sharing = Some(match it.next().map(String::as_str) {
                    Some("on") => true,
                    Some("off") => false,
                    Some(v) => return Err(format!("sharing '{v}': expected on or off")),
                    None => return Err("sharing needs on or off".to_string()),
                })
            }
            other => {
                return Err(format!(
                    "unknown setting '{other}' (up, down, retry-threshold N, reinit-threshold N, sharing on|off)"
                ))
            }
        }
    }
    if c == PortChanges::default() {
        return Err("nothing to change".to_string());
    }
    Ok(c)
}

/// `npi set`'s settings: the mode (`npi-mode` value) and the NPI.
pub fn parse_npi_settings(args: &[String]) -> Result<(Option<u32>, Option<u32>), String> {
    let mut mode = None;
    let mut npi = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "mode" => {
                let m = it.next().ok_or("mode needs strict or loose")?;
                mode = Some(
                    crate::spec::NPI_MODE
                        .value_of(m)
                        .ok_or_else(|| format!("mode '{m}': expected strict or loose"))?,
                );
            }
            "npi" => {
                let v = it.next().ok_or("npi needs a value")?;
                let n = match v.strip_prefix("0x") {
                    Some(h) => u32::from_str_radix(h, 16).ok(),
                    None => v.parse().ok(),
                };
                match n {
                    Some(n) if n <= NPI_MAX => npi = Some(n),
                    _ => return Err(format!("npi '{v}' out of range (0-{NPI_MAX:#x})")),
                }
            }
            other => {
                return Err(format!(
                    "unknown setting '{other}' (mode strict|loose, npi N)"
                ))
            }
        }
    }
    if mode.is_none() && npi.is_none() {
        return Err("nothing to change".to_string());
    }
    Ok((mode, npi))
}

/// `route add`'s options: the port mask and the load balancing.
pub fn parse_route_options(args: &[String]) -> Result<(Option<u64>, Option<u32>), String> {
    let mut ports = None;
    let mut lb = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "ports" => {
                let list = it.next().ok_or("ports needs a list (0,1)")?;
                let mut mask = 0u64;
                for p in list.split(',') {
                    mask |= 1u64 << parse_port_num(p)?;
                }
                ports = Some(mask);
            }
            "per-packet" => lb = Some(load_balance::PER_PACKET),
            "per-flow" => lb = Some(load_balance::PER_FLOW),
            other => {
                return Err(format!(
                    "unknown route option '{other}' (ports LIST, per-packet, per-flow)"
                ))
            }
        }
    }
    Ok((ports, lb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ubctl").chain(args.iter().copied()))
    }

    fn refused(args: &[&str], needle: &str) {
        match parse(args) {
            Ok(c) => panic!("{args:?} accepted: {c:?}"),
            Err(e) => {
                assert_eq!(e.exit_code(), 2, "{args:?}");
                let msg = e.to_string();
                assert!(msg.contains(needle), "{args:?}: {msg}");
            }
        }
    }

    #[test]
    fn accepts_the_documented_forms() {
        for a in [
            &["dev", "show"][..],
            &["-j", "-p", "dev", "show", "0000:00:03.0"],
            &["-s", "port", "show", "0/1"],
            &["port", "show", "1"],
            &[
                "port",
                "set",
                "0/1",
                "down",
                "retry-threshold",
                "4",
                "sharing",
                "on",
            ],
            &["addr", "add", "0", "cna16:0x0100"],
            &["addr", "del", "0", "fd00::1"],
            &[
                "route",
                "add",
                "0",
                "10.0.0.0/24",
                "ports",
                "0,1",
                "per-packet",
            ],
            &["route", "del", "0", "cna24:0x000100/24"],
            &[
                "ping", "-c", "3", "-s", "100", "-i", "0.2", "-W", "1", "-I", "0", "10.0.0.2",
            ],
            &["monitor", "-c", "1"],
            &["tp", "show"],
            &["-j", "-s", "tp", "show", "0"],
            &["tp", "show", "0000:00:03.0", "3"],
            &["stats", "0"],
            &["npi", "set", "0", "mode", "loose", "npi", "0x10"],
            &["completion", "bash"],
        ] {
            if let Err(e) = parse(a) {
                panic!("{a:?}: {e}");
            }
        }
    }

    #[test]
    fn refuses_bad_input_with_usage_errors() {
        refused(&["addr", "add", "0", "cna16:0x10000"], "16 bits");
        refused(&["addr", "add", "0", "10.0.0"], "not an address");
        refused(&["port", "show", "0/64"], "out of range (0-63)");
        refused(&["port", "set", "0", "up"], "names no port");
        refused(&["port", "set", "0/1"], "required");
        refused(&["dev", "show", ""], "not a device index");
        refused(&["port", "show", "0/1/2"], "not a device index");
        refused(&["route", "add", "0", "10.0.0.0/33"], "longer");
        refused(&["ping", "-s", "4097", "10.0.0.2"], "4097");
        refused(&["ping", "-i", "-1", "10.0.0.2"], "");
        refused(&["ping", "cna16:0x0100"], "IPv4 or IPv6");
        refused(&["frobnicate"], "unrecognized subcommand");
        refused(&["tp", "show", "0", "x"], "TPN 'x' is not a number");
        refused(&["tp", "show", "0", "4294967296"], "not a number");
        refused(&["tp", "show", "0", "1", "2"], "unexpected argument");
        refused(&["completion", "tcsh"], "invalid value");
        let e = parse(&["bogus"]).err().map(|e| e.kind());
        assert_eq!(e, Some(ErrorKind::InvalidSubcommand));
    }

    #[test]
    fn port_settings_keywords() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_port_settings(&s(&["up", "reinit-threshold", "3", "sharing", "off"])),
            Ok(PortChanges {
                admin_up: Some(true),
                retry_threshold: None,
                reinit_threshold: Some(3),
                sharing: Some(false)
            })
        );
        assert!(parse_port_settings(&s(&["retry-threshold", "0"]))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_port_settings(&s(&["retry-threshold", "256"]))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_port_settings(&s(&["retry-threshold"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse_port_settings(&s(&["sharing", "maybe"]))
            .unwrap_err()
            .contains("on or off"));
        assert!(parse_port_settings(&s(&["sideways"]))
            .unwrap_err()
            .contains("unknown setting"));
        assert_eq!(
            parse_route_options(&s(&["ports", "0,3"])),
            Ok((Some(0b1001), None))
        );
        assert!(parse_route_options(&s(&["ports", "64"]))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_route_options(&s(&["ecmp"]))
            .unwrap_err()
            .contains("unknown route option"));
    }
}
