// SPDX-License-Identifier: GPL-2.0
//! ubctl's command line: `ubctl [OPTIONS] OBJECT COMMAND [ARGS]`.
//!
//! Everything a user can get wrong is refused here, before a socket is
//! opened, with clap's usage error (exit status 2).

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::addr::{Address, Prefix};
use crate::request::{PortChanges, Rto, TpConfig};
use crate::spec::{load_balance, tp_mode, LOAD_BALANCE, TP_STATE};

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
    /// TP Channel Groups of the controllers: several channels to one peer
    /// as one.
    Tpg {
        /// What to do.
        #[command(subcommand)]
        cmd: TpgCmd,
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
    /// Open a channel, held by the device until a bind of the same peer
    /// and key claims it; prints its TPN: DEV remote ADDR key K
    /// [retransmit gbn|sr] [fast-retransmit [on|off]] [ooo-window N]
    /// [rto static 512us|16ms|128ms|4s | rto dynamic base US n N]
    /// [retry-limit N] [mtu N] [cc none|caqm|ldcp]
    /// [lb per-flow|per-packet [range LOG2]] [sport BASE] [send-window N].
    Add {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// Settings, iproute2 style.
        #[arg(num_args = 1.., required = true, value_name = "SETTING")]
        settings: Vec<String>,
    },
    /// Change a live channel: DEV TPN state suspended|rts.
    Set {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// TPN of the channel on the device.
        #[arg(value_parser = parse_tpn)]
        tpn: u32,
        /// Settings, iproute2 style.
        #[arg(num_args = 1.., required = true, value_name = "SETTING")]
        settings: Vec<String>,
    },
    /// Tear a channel down (whoever holds it; its reader gets ECONNABORTED).
    Del {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// TPN of the channel on the device.
        #[arg(value_parser = parse_tpn)]
        tpn: u32,
    },
}

/// `tpg` commands. A group is named by the TPN of its first member.
#[derive(Debug, Subcommand)]
pub enum TpgCmd {
    /// Show a TP Channel Group (by its first member's TPN), the groups of
    /// a device, or every group.
    Show {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: Option<DevArg>,
        /// TPN of the group's first member.
        #[arg(value_parser = parse_tpn)]
        tpn: Option<u32>,
    },
    /// Open a group of channels (keys K, K+1, ...), held by the device
    /// until a group bind of the same peer, key and members claims it;
    /// prints its first member's TPN: DEV remote ADDR key K members N and
    /// tp add's settings, applied to every member.
    Add {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// Settings, iproute2 style.
        #[arg(num_args = 1.., required = true, value_name = "SETTING")]
        settings: Vec<String>,
    },
    /// Change every member of a live group: DEV TPN state suspended|rts.
    Set {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// TPN of the group's first member.
        #[arg(value_parser = parse_tpn)]
        tpn: u32,
        /// Settings, iproute2 style.
        #[arg(num_args = 1.., required = true, value_name = "SETTING")]
        settings: Vec<String>,
    },
    /// Tear every member of a group down (whoever holds it; its file gets
    /// ECONNABORTED).
    Del {
        /// Device index or PCI name.
        #[arg(value_parser = parse_dev)]
        dev: DevArg,
        /// TPN of the group's first member.
        #[arg(value_parser = parse_tpn)]
        tpn: u32,
    },
}

/// Smallest and largest transport MTU (`tp.mtu` `checks`).
pub const TP_MTU_MIN: u32 = 256;
/// Largest transport MTU.
pub const TP_MTU_MAX: u32 = 4096;
/// Largest send window (`tp.send-window` `checks: max`, 8M − 1).
pub const TP_SEND_WINDOW_MAX: u32 = 8_388_607;
/// Largest per-packet range, log2 (`tp.lb-range` `checks: max`).
pub const TP_LB_RANGE_MAX: u8 = 14;
/// Dynamic RTO base range, µs (`tp.rto-base-us` `checks`).
pub const TP_RTO_BASE_MIN_US: u32 = 4;
/// Largest dynamic RTO base, µs.
pub const TP_RTO_BASE_MAX_US: u32 = 2_097_152;

/// What `tp add` was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpAdd {
    /// The peer.
    pub remote: Address,
    /// The key both ends name the channel by (none for a CTP end).
    pub key: Option<u32>,
    /// The channel's attributes.
    pub cfg: TpConfig,
}

fn number<T: std::str::FromStr>(kw: &str, v: Option<&String>, range: &str) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{kw} needs a value ({range})"))?;
    let parsed = match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok().map(|n| n.to_string()),
        None => Some(v.clone()),
    };
    parsed
        .and_then(|p| p.parse::<T>().ok())
        .ok_or_else(|| format!("{kw} '{v}' out of range ({range})"))
}

fn in_range<T: PartialOrd + std::fmt::Display>(kw: &str, v: T, lo: T, hi: T) -> Result<T, String> {
    if v < lo || v > hi {
        return Err(format!("{kw} {v} out of range ({lo}-{hi})"));
    }
    Ok(v)
}

/// Fewest members of a TP Channel Group (`tp.members` `checks: min`).
pub const TPG_MEMBERS_MIN: u32 = 2;
/// Most members of a TP Channel Group (`tp.members` `checks: max`).
pub const TPG_MEMBERS_MAX: u32 = 8;

/// What `tpg add` was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpgAdd {
    /// The peer, the key of the first member, and every member's
    /// attributes.
    pub channel: TpAdd,
    /// Number of members (member `i` is channel `key + i`).
    pub members: u32,
}

/// Parse `tp add`'s settings. Each value is checked against the spec's
/// range; the rules between values (fast retransmit with per-packet load
/// balancing, the MTU the ports carry, ...) are the kernel's, whose
/// extended ACK says which one a request breaks.
pub fn parse_tp_add(args: &[String]) -> Result<TpAdd, String> {
    parse_channel("tp add", args, None)
}

/// Parse `tpg add`'s settings: `tp add`'s, and `members N` (required).
pub fn parse_tpg_add(args: &[String]) -> Result<TpgAdd, String> {
    let mut members = None;
    let channel = parse_channel("tpg add", args, Some(&mut members))?;
    let members = members.ok_or("tpg add needs members N (2-8)")?;
    Ok(TpgAdd { channel, members })
}

/// The settings of a channel `what` opens (`tp add`, `tpg add`); `members`
/// takes `members N` where the command has it.
fn parse_channel(
    what: &str,
    args: &[String],
    mut members: Option<&mut Option<u32>>,
) -> Result<TpAdd, String> {
    let mut remote = None;
    let mut key = None;
    let mut c = TpConfig::default();
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        match a.as_str() {
            "members" if members.is_some() => {
                let range = format!("{TPG_MEMBERS_MIN}-{TPG_MEMBERS_MAX}");
                let n = number::<u32>(a, it.next(), &range)?;
                let n = in_range(a, n, TPG_MEMBERS_MIN, TPG_MEMBERS_MAX)?;
                if let Some(m) = members.as_deref_mut() {
                    *m = Some(n);
                }
            }
            "remote" => {
                let v = it.next().ok_or("remote needs an address")?;
                remote = Some(v.parse::<Address>()?);
            }
            "key" => key = Some(number::<u32>(a, it.next(), "0-4294967295")?),
            "transport" if members.is_none() => {
                let v = it.next().ok_or("transport needs rtp or ctp")?;
                c.transport = Some(
                    crate::spec::TP_TRANSPORT
                        .value_of(v)
                        .ok_or_else(|| format!("transport '{v}': expected rtp or ctp"))?,
                );
            }
            "retransmit" => {
                c.mode = Some(match it.next().map(String::as_str) {
                    Some("gbn" | "go-back-n") => tp_mode::GO_BACK_N,
                    Some("sr" | "selective") => tp_mode::SELECTIVE,
                    Some(v) => return Err(format!("retransmit '{v}': expected gbn or sr")),
                    None => return Err("retransmit needs gbn or sr".to_string()),
                })
            }
            "fast-retransmit" => {
                c.fast_retransmit = Some(match it.peek().map(|v| v.as_str()) {
                    Some("on") => {
                        it.next();
                        true
                    }
                    Some("off") => {
                        it.next();
                        false
                    }
                    _ => true,
                })
            }
            "ooo-window" => {
                let w = number::<u32>(a, it.next(), "128, 256, 512, 1024 or 2048")?;
                if !w.is_power_of_two() || !(128..=2048).contains(&w) {
                    return Err(format!(
                        "ooo-window {w}: expected 128, 256, 512, 1024 or 2048"
                    ));
                }
                c.ooo_window = Some(w);
            }
            "rto" => {
                c.rto = Some(match it.next().map(String::as_str) {
                    Some("static") => {
                        let us = match it.next().map(String::as_str) {
                            Some("512us") => 512,
                            Some("16ms") => 16_000,
                            Some("128ms") => 128_000,
                            Some("4s") => 4_000_000,
                            Some(v) => {
                                return Err(format!(
                                    "rto static '{v}': expected 512us, 16ms, 128ms or 4s"
                                ))
                            }
                            None => {
                                return Err("rto static needs 512us, 16ms, 128ms or 4s".to_string())
                            }
                        };
                        Rto::Static(us)
                    }
                    Some("dynamic") => {
                        let mut base_us = None;
                        let mut n = None;
                        while let Some(k) = it.peek().map(|v| v.as_str()) {
                            match k {
                                "base" => {
                                    it.next();
                                    let range =
                                        format!("{TP_RTO_BASE_MIN_US}-{TP_RTO_BASE_MAX_US} us");
                                    let b = number::<u32>("rto dynamic base", it.next(), &range)?;
                                    base_us = Some(in_range(
                                        "rto dynamic base",
                                        b,
                                        TP_RTO_BASE_MIN_US,
                                        TP_RTO_BASE_MAX_US,
                                    )?);
                                }
                                "n" => {
                                    it.next();
                                    n = Some(number::<u8>("rto dynamic n", it.next(), "0-255")?);
                                }
                                _ => break,
                            }
                        }
                        let base_us = base_us.ok_or("rto dynamic needs base US")?;
                        Rto::Dynamic {
                            base_us,
                            n: n.unwrap_or(1),
                        }
                    }
                    Some(v) => return Err(format!("rto '{v}': expected static or dynamic")),
                    None => return Err("rto needs static or dynamic".to_string()),
                })
            }
            "retry-limit" => c.retry_limit = Some(number::<u8>(a, it.next(), "0-255")?),
            "mtu" => {
                let range = format!("{TP_MTU_MIN}-{TP_MTU_MAX}");
                let m = number::<u32>(a, it.next(), &range)?;
                c.mtu = Some(in_range(a, m, TP_MTU_MIN, TP_MTU_MAX)?);
            }
            "cc" => {
                let v = it.next().ok_or("cc needs none, caqm or ldcp")?;
                c.cc = Some(
                    crate::spec::TP_CC
                        .value_of(v)
                        .ok_or_else(|| format!("cc '{v}': expected none, caqm or ldcp"))?,
                );
            }
            "lb" => {
                let v = it.next().ok_or("lb needs per-flow or per-packet")?;
                c.load_balance = Some(
                    LOAD_BALANCE
                        .value_of(v)
                        .ok_or_else(|| format!("lb '{v}': expected per-flow or per-packet"))?,
                );
                if it.peek().map(|v| v.as_str()) == Some("range") {
                    it.next();
                    let range = format!("0-{TP_LB_RANGE_MAX}");
                    let r = number::<u8>("lb range", it.next(), &range)?;
                    c.lb_range = Some(in_range("lb range", r, 0, TP_LB_RANGE_MAX)?);
                }
            }
            "sport" => c.lb_key = Some(number::<u16>(a, it.next(), "0-65535")?),
            "send-window" => {
                let range = format!("1-{TP_SEND_WINDOW_MAX}");
                let w = number::<u32>(a, it.next(), &range)?;
                c.send_window = Some(in_range(a, w, 1, TP_SEND_WINDOW_MAX)?);
            }
            other => {
                let group = if members.is_some() {
                    "members N, "
                } else {
                    "transport rtp|ctp, "
                };
                return Err(format!(
                    "unknown setting '{other}' (remote ADDR, key K, {group}retransmit gbn|sr, fast-retransmit [on|off], ooo-window N, rto static|dynamic ..., retry-limit N, mtu N, cc none|caqm|ldcp, lb per-flow|per-packet [range LOG2], sport BASE, send-window N)"
                ));
            }
        }
    }
    let remote = remote.ok_or_else(|| format!("{what} needs remote ADDR"))?;
    let ctp = c.transport == crate::spec::TP_TRANSPORT.value_of("ctp");
    match (ctp, key) {
        (true, Some(_)) => {
            return Err(format!(
                "{what} transport ctp takes no key (one CTP end per remote address)"
            ))
        }
        (false, None) => return Err(format!("{what} needs key K")),
        _ => {}
    }
    Ok(TpAdd {
        remote,
        key,
        cfg: c,
    })
}

/// Parse `tp set`'s settings: the `tp-state` value to set.
pub fn parse_tp_set(args: &[String]) -> Result<u32, String> {
    let mut state = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "state" => {
                state = Some(match it.next().map(String::as_str) {
                    Some(v @ ("suspended" | "rts")) => TP_STATE
                        .value_of(v)
                        .ok_or_else(|| format!("tp-state has no {v}"))?,
                    Some(v) => return Err(format!("state '{v}': expected suspended or rts")),
                    None => return Err("state needs suspended or rts".to_string()),
                })
            }
            other => return Err(format!("unknown setting '{other}' (state suspended|rts)")),
        }
    }
    state.ok_or_else(|| "nothing to change".to_string())
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

/// Lowest NUM_RETRY_THRESHOLD (`port.num-retry-threshold` `checks: min`):
/// with 1 a link retrains at every link up and never comes up
/// (`Documentation/ub/link.rst`, "Counting retries").
pub const RETRY_THRESHOLD_MIN: u8 = 2;
/// Lowest NUM_PHY_REINIT_THRESHOLD (`port.num-phy-reinit-threshold`
/// `checks: min`).
pub const REINIT_THRESHOLD_MIN: u8 = 1;

fn parse_threshold(kw: &str, v: Option<&String>, min: u8) -> Result<u8, String> {
    let v = v.ok_or_else(|| format!("{kw} needs a value ({min}-255)"))?;
    match v.parse::<u8>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!("{kw} '{v}' out of range ({min}-255)")),
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
            "retry-threshold" => {
                c.retry_threshold = Some(parse_threshold(a, it.next(), RETRY_THRESHOLD_MIN)?)
            }
            "reinit-threshold" => {
                c.reinit_threshold = Some(parse_threshold(a, it.next(), REINIT_THRESHOLD_MIN)?)
            }
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
            &["tp", "add", "0", "remote", "10.0.0.1", "key", "7"],
            &["tp", "set", "0", "3", "state", "suspended"],
            &["tp", "del", "0000:00:03.0", "3"],
            &["-j", "-s", "tpg", "show"],
            &["tpg", "show", "0", "3"],
            &[
                "-j", "tpg", "add", "0", "remote", "10.0.0.1", "key", "7", "members", "4",
            ],
            &["tpg", "set", "0", "3", "state", "rts"],
            &["tpg", "del", "0", "3"],
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
        refused(&["tp", "add", "0"], "required");
        refused(
            &["tp", "set", "0", "x", "state", "rts"],
            "TPN 'x' is not a number",
        );
        refused(&["tp", "del", "0"], "required");
        refused(&["tpg", "del", "0"], "required");
        refused(&["tpg", "show", "0", "x"], "TPN 'x' is not a number");
        let e = parse(&["bogus"]).err().map(|e| e.kind());
        assert_eq!(e, Some(ErrorKind::InvalidSubcommand));
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn tp_add_settings() {
        let a = parse_tp_add(&strings(&[
            "remote",
            "10.0.0.1",
            "key",
            "0x10",
            "retransmit",
            "sr",
            "fast-retransmit",
            "off",
            "ooo-window",
            "512",
            "rto",
            "dynamic",
            "base",
            "20",
            "n",
            "3",
            "retry-limit",
            "5",
            "mtu",
            "1024",
            "cc",
            "ldcp",
            "lb",
            "per-packet",
            "range",
            "3",
            "sport",
            "50000",
            "send-window",
            "1000",
        ]));
        assert_eq!(
            a,
            Ok(TpAdd {
                remote: "10.0.0.1".parse().unwrap(),
                key: Some(16),
                cfg: TpConfig {
                    transport: None,
                    mode: Some(tp_mode::SELECTIVE),
                    fast_retransmit: Some(false),
                    ooo_window: Some(512),
                    rto: Some(Rto::Dynamic { base_us: 20, n: 3 }),
                    retry_limit: Some(5),
                    mtu: Some(1024),
                    cc: Some(2),
                    load_balance: Some(load_balance::PER_PACKET),
                    lb_range: Some(3),
                    lb_key: Some(50_000),
                    send_window: Some(1000),
                },
            })
        );
        // A bare fast-retransmit means on; rto static levels by name.
        let a = parse_tp_add(&strings(&[
            "key",
            "1",
            "remote",
            "cna24:0x000100",
            "fast-retransmit",
            "rto",
            "static",
            "16ms",
        ]))
        .unwrap();
        assert_eq!(a.cfg.fast_retransmit, Some(true));
        assert_eq!(a.cfg.rto, Some(Rto::Static(16_000)));
        // A CTP end: no key, and none needed.
        let a = parse_tp_add(&strings(&["remote", "cna16:0x0102", "transport", "ctp"])).unwrap();
        assert_eq!((a.key, a.cfg.transport), (None, Some(1)));
        for (args, needle) in [
            (&["key", "1"][..], "needs remote"),
            (&["remote", "10.0.0.1"], "needs key"),
            (
                &["remote", "cna16:0x0102", "transport", "ctp", "key", "1"],
                "takes no key",
            ),
            (
                &["remote", "10.0.0.1", "transport", "udp"],
                "expected rtp or ctp",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "ooo-window", "300"],
                "expected 128",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "mtu", "100"],
                "out of range (256-4096)",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "rto", "static", "1s"],
                "512us",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "rto", "dynamic", "n", "2"],
                "needs base",
            ),
            (
                &[
                    "remote", "10.0.0.1", "key", "1", "rto", "dynamic", "base", "3",
                ],
                "out of range",
            ),
            (
                &[
                    "remote",
                    "10.0.0.1",
                    "key",
                    "1",
                    "lb",
                    "per-packet",
                    "range",
                    "15",
                ],
                "out of range (0-14)",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "send-window", "0"],
                "out of range",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "sport", "65536"],
                "out of range",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "retransmit", "fast"],
                "expected gbn or sr",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "cc", "bbr"],
                "expected none, caqm or ldcp",
            ),
            (
                &["remote", "10.0.0.1", "key", "1", "colour", "red"],
                "unknown setting",
            ),
        ] {
            let e = parse_tp_add(&strings(args)).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
        assert_eq!(parse_tp_set(&strings(&["state", "suspended"])), Ok(3));
        assert_eq!(parse_tp_set(&strings(&["state", "rts"])), Ok(2));
        assert!(parse_tp_set(&strings(&["state", "err"]))
            .unwrap_err()
            .contains("suspended or rts"));
        assert!(parse_tp_set(&strings(&[]))
            .unwrap_err()
            .contains("nothing to change"));
    }

    /// `tpg add` takes `tp add`'s settings and `members N` (2 to 8),
    /// which it requires; `tp add` knows no `members`.
    #[test]
    fn tpg_add_settings() {
        let g = parse_tpg_add(&strings(&[
            "remote",
            "10.0.0.2",
            "members",
            "4",
            "key",
            "140",
            "fast-retransmit",
            "off",
            "lb",
            "per-packet",
        ]))
        .unwrap();
        assert_eq!(g.members, 4);
        assert_eq!(g.channel.key, Some(140));
        assert_eq!(g.channel.cfg.fast_retransmit, Some(false));
        assert_eq!(g.channel.cfg.load_balance, Some(1));
        for (args, needle) in [
            (&["remote", "10.0.0.2", "key", "1"][..], "needs members N"),
            (
                &["remote", "10.0.0.2", "key", "1", "members", "1"],
                "out of range (2-8)",
            ),
            (
                &["remote", "10.0.0.2", "key", "1", "members", "x"],
                "members 'x' out of range (2-8)",
            ),
            (&["key", "1", "members", "2"], "tpg add needs remote"),
            (
                &["remote", "10.0.0.2", "key", "1", "members", "2", "bogus"],
                "members N, retransmit",
            ),
        ] {
            let e = parse_tpg_add(&strings(args)).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
        let e = parse_tp_add(&strings(&[
            "remote", "10.0.0.2", "key", "1", "members", "2",
        ]));
        assert!(
            e.is_err_and(|e| e.contains("unknown setting 'members'") && !e.contains("members N"))
        );
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
        assert!(parse_port_settings(&s(&["retry-threshold", "1"]))
            .unwrap_err()
            .contains("out of range (2-255)"));
        assert_eq!(
            parse_port_settings(&s(&["reinit-threshold", "1"])).map(|c| c.reinit_threshold),
            Ok(Some(1))
        );
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
