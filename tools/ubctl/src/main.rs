// SPDX-License-Identifier: GPL-2.0
//! `ubctl`: configure and inspect ub.ko over the `ub` generic netlink
//! family. Parses the command line (`ubctl::cli`), runs one command, prints
//! text or JSON. Exit status: 0 ok, 1 the kernel or the operation failed,
//! 2 usage error.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use serde::Serialize;
use serde_json::Value as Json;

use ubctl::attr::{addr_text, decode_set, Obj, Val};
use ubctl::cli::{
    self, AddrCmd, Cli, DevArg, DevCmd, NpiCmd, Object, PingArgs, PortCmd, RouteCmd, TpCmd, TpgCmd,
};
use ubctl::nl::{Conn, Error as NlError, Incoming, INTERRUPTED};
use ubctl::ping::{Pinger, Reply};
use ubctl::reply::{self, decode_all, filter_stats};
use ubctl::request;
use ubctl::spec::{self, cmd};

struct Out {
    json: bool,
    pretty: bool,
    stats: bool,
}

impl Out {
    fn json<T: Serialize>(&self, v: &T) -> Result<()> {
        let s = if self.pretty {
            serde_json::to_string_pretty(v)?
        } else {
            serde_json::to_string(v)?
        };
        let mut o = std::io::stdout().lock();
        writeln!(o, "{s}")?;
        o.flush()?;
        Ok(())
    }
}

fn usage_error(msg: String) -> ! {
    Cli::command().error(ErrorKind::InvalidValue, msg).exit()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ubctl: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let out = Out {
        json: cli.json,
        pretty: cli.pretty,
        stats: cli.stats,
    };
    if let Object::Completion { shell } = cli.object {
        clap_complete::generate(shell, &mut Cli::command(), "ubctl", &mut std::io::stdout());
        return Ok(ExitCode::SUCCESS);
    }
    // Refuse bad keyword arguments before touching the kernel.
    let port_changes = match &cli.object {
        Object::Port {
            cmd: PortCmd::Set { settings, .. },
        } => Some(cli::parse_port_settings(settings).unwrap_or_else(|e| usage_error(e))),
        _ => None,
    };
    let route_opts = match &cli.object {
        Object::Route {
            cmd: RouteCmd::Add { options, .. },
        } => Some(cli::parse_route_options(options).unwrap_or_else(|e| usage_error(e))),
        _ => None,
    };
    let npi_opts = match &cli.object {
        Object::Npi {
            cmd: NpiCmd::Set { settings, .. },
        } => Some(cli::parse_npi_settings(settings).unwrap_or_else(|e| usage_error(e))),
        _ => None,
    };
    let tp_add = match &cli.object {
        Object::Tp {
            cmd: TpCmd::Add { settings, .. },
        } => Some(cli::parse_tp_add(settings).unwrap_or_else(|e| usage_error(e))),
        _ => None,
    };
    let tpg_add = match &cli.object {
        Object::Tpg {
            cmd: TpgCmd::Add { settings, .. },
        } => Some(cli::parse_tpg_add(settings).unwrap_or_else(|e| usage_error(e))),
        _ => None,
    };
    let tp_state = match &cli.object {
        Object::Tp {
            cmd: TpCmd::Set { settings, .. },
        }
        | Object::Tpg {
            cmd: TpgCmd::Set { settings, .. },
        } => Some(cli::parse_tp_set(settings).unwrap_or_else(|e| usage_error(e))),
        _ => None,
    };
    let mut c = Conn::open()?;
    match cli.object {
        Object::Completion { .. } => Ok(ExitCode::SUCCESS),
        Object::Dev {
            cmd: DevCmd::Show { dev },
        } => {
            let devs = devices(&mut c, dev.as_ref())?;
            let devs: Vec<Obj> = devs.iter().map(|d| filter_stats(d, out.stats)).collect();
            if out.json {
                out.json(&devs)?;
            } else {
                for d in &devs {
                    println!("{}", reply::dev_text(d));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Object::Port {
            cmd: PortCmd::Show { port },
        } => {
            let req = match &port {
                None => request::port_get(None, None),
                Some(p) => request::port_get(Some(dev_index(&mut c, &p.dev)?), p.port),
            };
            let ports = decode_all(&spec::PORT, &c.transact(&req)?)?;
            let ports: Vec<Obj> = ports.iter().map(|p| filter_stats(p, out.stats)).collect();
            if out.json {
                out.json(&ports)?;
            } else {
                for p in &ports {
                    println!("{}", reply::port_text(p));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Object::Tp {
            cmd: TpCmd::Show { dev, tpn },
        } => {
            let d = dev.as_ref().map(|d| dev_index(&mut c, d)).transpose()?;
            show_tp(&mut c, request::tp_get(d, tpn), reply::tp_text, &out)
        }
        Object::Tpg {
            cmd: TpgCmd::Show { dev, tpn },
        } => {
            let d = dev.as_ref().map(|d| dev_index(&mut c, d)).transpose()?;
            show_tp(&mut c, request::tpg_get(d, tpn), reply::tpg_text, &out)
        }
        Object::Tp {
            cmd: TpCmd::Add { dev, .. },
        } => {
            let d = dev_index(&mut c, &dev)?;
            let a = tp_add.ok_or_else(|| anyhow!("no settings"))?;
            let req = request::tp_new(d, a.remote, a.key, &a.cfg);
            add_tp(
                &mut c,
                &req,
                "tp-new answered without the channel's TPN",
                &out,
            )
        }
        Object::Tpg {
            cmd: TpgCmd::Add { dev, .. },
        } => {
            let d = dev_index(&mut c, &dev)?;
            let g = tpg_add.ok_or_else(|| anyhow!("no settings"))?;
            let a = g.channel;
            let key = a.key.ok_or_else(|| anyhow!("tpg add needs key K"))?;
            let req = request::tpg_new(d, a.remote, key, g.members, &a.cfg);
            add_tp(
                &mut c,
                &req,
                "tpg-new answered without the group's TPN",
                &out,
            )
        }
        Object::Tp {
            cmd: TpCmd::Set { dev, tpn, .. },
        } => {
            let d = dev_index(&mut c, &dev)?;
            let state = tp_state.ok_or_else(|| anyhow!("no settings"))?;
            c.transact(&request::tp_set_state(d, tpn, state))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Tp {
            cmd: TpCmd::Del { dev, tpn },
        } => {
            let d = dev_index(&mut c, &dev)?;
            c.transact(&request::tp_del(d, tpn))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Tpg {
            cmd: TpgCmd::Set { dev, tpn, .. },
        } => {
            let d = dev_index(&mut c, &dev)?;
            let state = tp_state.ok_or_else(|| anyhow!("no settings"))?;
            c.transact(&request::tpg_set_state(d, tpn, state))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Tpg {
            cmd: TpgCmd::Del { dev, tpn },
        } => {
            let d = dev_index(&mut c, &dev)?;
            c.transact(&request::tpg_del(d, tpn))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Port {
            cmd: PortCmd::Set { port, .. },
        } => {
            let d = dev_index(&mut c, &port.dev)?;
            let p = port.port.ok_or_else(|| anyhow!("no port given"))?;
            let changes = port_changes.ok_or_else(|| anyhow!("no settings"))?;
            c.transact(&request::port_set(d, p, changes))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Addr {
            cmd: AddrCmd::Add { dev, addr },
        } => {
            let d = dev_index(&mut c, &dev)?;
            c.transact(&request::addr_change(true, d, addr))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Addr {
            cmd: AddrCmd::Del { dev, addr },
        } => {
            let d = dev_index(&mut c, &dev)?;
            c.transact(&request::addr_change(false, d, addr))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Addr {
            cmd: AddrCmd::Show { dev },
        } => {
            let devs = devices(&mut c, dev.as_ref())?;
            let shown: Vec<Obj> = devs
                .iter()
                .map(|d| d.only(&["index", "name", "addr"]))
                .collect();
            if out.json {
                out.json(&shown)?;
            } else {
                for d in &shown {
                    let addrs = match d.get("addr") {
                        Some(Val::List(l)) => l.iter().map(addr_text).collect::<Vec<_>>().join(" "),
                        _ => String::new(),
                    };
                    println!(
                        "{}: {} {addrs}",
                        d.uint("index").unwrap_or_default(),
                        d.str("name").unwrap_or("?")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Object::Route {
            cmd: RouteCmd::Add { dev, prefix, .. },
        } => {
            let d = dev_index(&mut c, &dev)?;
            let (ports, lb) = route_opts.unwrap_or((None, None));
            c.transact(&request::route_add(d, prefix, ports, lb))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Route {
            cmd: RouteCmd::Del { dev, prefix },
        } => {
            let d = dev_index(&mut c, &dev)?;
            c.transact(&request::route_del(d, prefix))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Route {
            cmd: RouteCmd::Show { dev },
        } => {
            let d = match &dev {
                Some(d) => Some(dev_index(&mut c, d)?),
                None => None,
            };
            let routes = decode_all(&spec::ROUTE, &c.transact(&request::route_get(d))?)?;
            if out.json {
                out.json(&routes)?;
            } else {
                for r in &routes {
                    println!("{}", reply::route_text(r));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Object::Npi {
            cmd: NpiCmd::Set { dev, .. },
        } => {
            let d = dev_index(&mut c, &dev)?;
            let (mut mode, mut npi) = npi_opts.unwrap_or((None, None));
            // npi-set takes both; keep the current value of the one not given.
            if mode.is_none() || npi.is_none() {
                let cur = devices(&mut c, Some(&DevArg::Index(d)))?;
                let cur = cur.first().ok_or_else(|| anyhow!("device {d} not found"))?;
                let get = |k| cur.uint(k).and_then(|v| u32::try_from(v).ok());
                mode = mode.or_else(|| get("npi-mode"));
                npi = npi.or_else(|| get("npi"));
            }
            c.transact(&request::npi_set(d, mode, npi))?;
            Ok(ExitCode::SUCCESS)
        }
        Object::Stats { dev } => stats(&mut c, dev.as_ref(), &out),
        Object::Monitor { count } => monitor(&mut c, count, &out),
        Object::Ping(args) => ping(&mut c, &args, &out),
    }
}

/// `tp show` and `tpg show`: the channels or groups `req` gets, each as
/// `text` lays it out, or JSON.
fn show_tp(
    c: &mut Conn,
    req: ubctl::nl::Request,
    text: fn(&Obj) -> String,
    out: &Out,
) -> Result<ExitCode> {
    let all = decode_all(&spec::TP, &c.transact(&req)?)?;
    let all: Vec<Obj> = all.iter().map(|t| filter_stats(t, out.stats)).collect();
    if out.json {
        out.json(&all)?;
    } else {
        for t in &all {
            println!("{}", text(t));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `tp add` and `tpg add`: sends `req` and prints the TPN it answers (a
/// group's is its first member's), or with `-j` the whole answer.
fn add_tp(
    c: &mut Conn,
    req: &ubctl::nl::Request,
    no_tpn: &'static str,
    out: &Out,
) -> Result<ExitCode> {
    let made = decode_all(&spec::TP, &c.transact(req)?)?;
    let made = made.first().ok_or_else(|| anyhow!(no_tpn))?;
    if out.json {
        out.json(made)?;
    } else {
        println!("{}", made.uint("tpn").ok_or_else(|| anyhow!(no_tpn))?);
    }
    Ok(ExitCode::SUCCESS)
}

/// The devices, one (by index or name) or all.
fn devices(c: &mut Conn, dev: Option<&DevArg>) -> Result<Vec<Obj>> {
    let req = match dev {
        Some(DevArg::Index(i)) => request::dev_get(Some(*i)),
        _ => request::dev_get(None),
    };
    let devs = decode_all(&spec::DEV, &c.transact(&req)?)?;
    match dev {
        Some(DevArg::Name(n)) => {
            let found: Vec<Obj> = devs
                .into_iter()
                .filter(|d| d.str("name") == Some(n))
                .collect();
            if found.is_empty() {
                bail!("no ub device named {n}");
            }
            Ok(found)
        }
        _ => Ok(devs),
    }
}

/// The index of `dev` (a name is looked up in the device dump).
fn dev_index(c: &mut Conn, dev: &DevArg) -> Result<u32> {
    match dev {
        DevArg::Index(i) => Ok(*i),
        DevArg::Name(_) => {
            let d = devices(c, Some(dev))?;
            let i = d
                .first()
                .map(|o| o.need_uint(&spec::DEV, "index"))
                .transpose()?
                .ok_or_else(|| anyhow!("device has no index"))?;
            u32::try_from(i).context("device index out of range")
        }
    }
}

fn stats(c: &mut Conn, dev: Option<&DevArg>, out: &Out) -> Result<ExitCode> {
    let devs = devices(c, dev)?;
    let mut all = Vec::new();
    for d in &devs {
        let idx = u32::try_from(d.need_uint(&spec::DEV, "index")?).context("device index")?;
        let ports = decode_all(
            &spec::PORT,
            &c.transact(&request::port_get(Some(idx), None))?,
        )?;
        if out.json {
            let mut j = serde_json::to_value(d.only(&["index", "name", "net-stats"]))?;
            let p: Vec<Obj> = ports
                .iter()
                .map(|p| p.only(&["index", "link-stats", "dev-stats"]))
                .collect();
            if let Json::Object(m) = &mut j {
                m.insert("ports".to_string(), serde_json::to_value(p)?);
            }
            all.push(j);
        } else {
            println!(
                "{}",
                reply::dev_text(&d.only(&["index", "name", "net-stats"]))
            );
            for p in &ports {
                println!("{}", reply::port_counters_text(p));
            }
        }
    }
    if out.json {
        out.json(&all)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn monitor(c: &mut Conn, count: Option<u64>, out: &Out) -> Result<ExitCode> {
    c.join_monitor()?;
    ubctl::nl::catch_sigint();
    let mut seen = 0u64;
    while count.is_none_or(|n| seen < n) {
        let msgs = match c.recv(None) {
            Ok(m) => m,
            Err(NlError::Interrupted) => break,
            // The socket's buffer overflowed: events were lost, but the
            // group still delivers; say so and go on.
            Err(NlError::Io(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                eprintln!("ubctl: monitor: events lost (socket buffer full)");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        for m in msgs {
            match m {
                Incoming::Genl { cmd: c_, attrs, .. }
                    if c_ == cmd::PORT_CHANGE_NTF
                        || c_ == cmd::TP_CHANGE_NTF
                        || c_ == cmd::TPG_CHANGE_NTF =>
                {
                    let (kind, ev, text) = if c_ == cmd::PORT_CHANGE_NTF {
                        let ev = filter_stats(&decode_set(&spec::PORT, &attrs)?, out.stats);
                        let text = reply::event_text(&ev);
                        ("port", ev, text)
                    } else if c_ == cmd::TP_CHANGE_NTF {
                        let ev = decode_set(&spec::TP, &attrs)?;
                        let text = reply::tp_event_text(&ev);
                        ("tp", ev, text)
                    } else {
                        let ev = decode_set(&spec::TP, &attrs)?;
                        let text = reply::tpg_event_text(&ev);
                        ("tpg", ev, text)
                    };
                    let mut o = std::io::stdout().lock();
                    if out.json {
                        // One object per line, even with -p, so a reader can
                        // split events by line; the object says its kind.
                        writeln!(o, "{}", reply::event_json(kind, &ev)?)?;
                    } else {
                        writeln!(o, "{text}")?;
                    }
                    o.flush()?;
                    seen = seen.saturating_add(1);
                }
                Incoming::Overrun => {
                    eprintln!("ubctl: monitor: the kernel dropped events (overrun)")
                }
                _ => {}
            }
            if count.is_some_and(|n| seen >= n) {
                break;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Receive buffer of `ubctl ping` (bytes).
const PING_RCVBUF: i32 = 4 << 20;

fn ping(c: &mut Conn, a: &PingArgs, out: &Out) -> Result<ExitCode> {
    let dev = match &a.dev {
        Some(d) => dev_index(c, d)?,
        None => {
            let devs = devices(c, None)?;
            let first = devs.first().ok_or_else(|| anyhow!("no ub device"))?;
            u32::try_from(first.need_uint(&spec::DEV, "index")?).context("device index")?
        }
    };
    // A reader that falls behind (a loaded guest) must not lose replies
    // the kernel sent: room for thousands of them and their ACKs.
    c.grow_rcvbuf(PING_RCVBUF)?;
    ubctl::nl::catch_sigint();
    let mut p = Pinger::new(std::process::id());
    let start = Instant::now();
    let dst = a.dst.to_string();
    if !out.json {
        println!("PING {dst} via dev {dev}: {} data bytes", a.size);
    }
    let mut replies: Vec<Json> = Vec::new();
    // netlink sequence -> echo sequence, to match the kernel's ACK/error.
    let mut by_nlseq = std::collections::HashMap::new();
    let mut seq: u32 = 0;
    let mut next_send = Instant::now();
    let mut drained = true;
    let stop = |sent: u32| a.count.is_some_and(|n| u64::from(sent) >= n);
    loop {
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let now = Instant::now();
        if !stop(seq) && now >= next_send {
            seq = seq.wrapping_add(1);
            let nlseq = c.send(&request::echo(dev, a.dst, p.id, seq, a.size))?;
            by_nlseq.insert(nlseq, seq);
            p.sent(seq, now);
            next_send = now + a.interval;
        }
        // Only with the socket drained: a reply waiting there arrived in
        // time, however late this process (on a loaded host) reads it.
        if drained {
            p.expire(Instant::now(), a.timeout);
        }
        if stop(seq) && !p.waiting() {
            break;
        }
        let wait = if stop(seq) {
            a.timeout.min(Duration::from_millis(100))
        } else {
            next_send.saturating_duration_since(Instant::now())
        };
        let msgs = match c.recv(Some(wait)) {
            Ok(m) => m,
            Err(NlError::Interrupted) => break,
            // The socket's buffer overflowed: replies were lost (they
            // count as lost when their wait runs out); say so, go on.
            Err(NlError::Io(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                eprintln!("ubctl: replies lost (socket buffer full)");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        drained = msgs.is_empty();
        for m in msgs {
            match m {
                Incoming::Err { seq: nls, err } => {
                    if let Some(s) = by_nlseq.remove(&nls) {
                        p.failed(s);
                        let req = request::echo(dev, a.dst, p.id, s, a.size);
                        eprintln!("ubctl: seq {s}: {}", NlError::kernel(&req, err));
                    }
                }
                Incoming::Ack { seq: nls } => {
                    by_nlseq.remove(&nls);
                }
                Incoming::Genl { cmd: c_, attrs, .. } if c_ == cmd::ECHO_REPLY => {
                    let r = decode_set(&spec::ECHO, &attrs)?;
                    let (Some(id), Some(rs)) = (r.uint("id"), r.uint("seq")) else {
                        continue;
                    };
                    let (Ok(id), Ok(rs)) = (u32::try_from(id), u32::try_from(rs)) else {
                        continue;
                    };
                    let krtt = r.uint("rtt-ns").map(Duration::from_nanos);
                    if let Reply::New(rtt) = p.reply(id, rs, Instant::now(), krtt) {
                        let from = match r.get("src") {
                            Some(Val::Obj(o)) => addr_text(o),
                            _ => dst.clone(),
                        };
                        let ms = rtt.as_secs_f64() * 1e3;
                        if out.json {
                            let mut j = serde_json::to_value(&r)?;
                            if let Json::Object(m) = &mut j {
                                m.insert("time-ms".to_string(), serde_json::json!(ms));
                            }
                            replies.push(j);
                        } else {
                            let port = r
                                .uint("port")
                                .map_or_else(String::new, |p| format!(" port={p}"));
                            println!(
                                "{} bytes from {from}: seq={rs}{port} time={ms:.3} ms",
                                r.uint("size").unwrap_or(u64::from(a.size))
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let sum = p.stats().summary();
    if out.json {
        let mut j = serde_json::to_value(&sum)?;
        if let Json::Object(m) = &mut j {
            m.insert("dst".to_string(), Json::String(dst.clone()));
            m.insert("replies".to_string(), Json::Array(replies));
        }
        out.json(&j)?;
    } else {
        print!("\n{}", sum.text(&dst, start.elapsed()));
    }
    Ok(if sum.received == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
