// SPDX-License-Identifier: GPL-2.0
//! Forged RTP data packets: what another host on the fabric could send
//! towards a TP Channel whose TPN it guessed (`ub-fabric forge`,
//! `Documentation/ub/fabric.rst`, "Forged packets").
//!
//! A forged packet is well formed and sealed at every layer: the network
//! header the endpoint expects for the address format (IPv4 or IPv6 with
//! UDP 4792, or a 24-bit CNA NTH), written by `ub_proto::net::nth`; an
//! RTPH written by `ub_proto::transport::hdr`; a valid ICRC
//! (`ub_proto::net::icrc`). The fabric queues it at the switch port
//! facing the host, so the port's data link engine frames it (BCRC,
//! credits, link retry) like any packet it forwards. Only the transport's
//! own checks can refuse it: the peer check (source address and source
//! TPN) and the PSN window.
//!
//! A [`ForgeSpec`] naming the source and destination addresses, the source
//! TPN and the PSN is built at once ([`ForgeSpec::build`]). Any field left
//! out is taken from the channel's genuine traffic, as a forger that can
//! watch the fabric would: the spec is armed ([`Forger::arm`]) and fires on
//! the next RTP data packet carrying its destination TPN that a switch
//! queues at the port facing the host ([`Forger::observe`]); the forged
//! packets are queued right behind it.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;
use serde_json::{json, Value};
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::Addr;
use ub_proto::net::cci::Cci;
use ub_proto::net::icrc;
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, Nth24, ICRC_LEN, NLP24_RTPH};
use ub_proto::net::PacketClass;
use ub_proto::transport::hdr::{padding_for, Rtph, TpOpcode, RTPH_LEN};
use ub_proto::transport::psn::Psn;

use crate::switch::Packet;

/// Most packets one command forges.
pub const MAX_COUNT: u32 = 1000;
/// Largest payload of a forged packet (the largest MTU).
pub const MAX_PAYLOAD: u32 = 4096;
/// Payload of a packet built from its fields alone, unless told.
pub const DEFAULT_PAYLOAD: u32 = 64;
/// How long an armed spec waits for the channel's traffic, unless told.
pub const DEFAULT_WITHIN_MS: u64 = 5_000;
/// Longest wait of an armed spec.
pub const MAX_WITHIN_MS: u64 = 60_000;
/// Specs armed at once.
pub const MAX_ARMED: usize = 16;
/// UDP source port of a packet built from its fields alone (the
/// endpoint does not check it).
const FORGED_SPORT: u16 = 0xc000;
/// TPNs and PSNs are 24 bits.
const MAX_24: u32 = 0xff_ffff;

/// Why a spec is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ForgeError {
    /// A field out of its range or contradicting another.
    #[error("{0}")]
    Invalid(String),
}

fn invalid(s: impl Into<String>) -> ForgeError {
    ForgeError::Invalid(s.into())
}

/// Parses an address as ubctl writes it: an IPv4 or IPv6 literal, or
/// `cna24:0xNNNNNN`. 16-bit CNAs carry no RTP and are refused.
pub fn parse_addr(s: &str) -> Result<Addr, ForgeError> {
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        return Ok(Addr::Ipv4(a.octets()));
    }
    if let Ok(a) = s.parse::<Ipv6Addr>() {
        return Ok(Addr::Ipv6(a.octets()));
    }
    if let Some(hex) = s.strip_prefix("cna24:") {
        let v = u32::from_str_radix(hex.trim_start_matches("0x"), 16)
            .ok()
            .filter(|&v| v <= MAX_24)
            .ok_or_else(|| {
                invalid(format!(
                    "address {s:?}: a 24-bit CNA is cna24:0x000000 to cna24:0xffffff"
                ))
            })?;
        return Ok(Addr::Cna24(v));
    }
    if s.starts_with("cna16:") {
        return Err(invalid(format!(
            "address {s:?}: RTP is not carried over 16-bit CNAs"
        )));
    }
    Err(invalid(format!(
        "address {s:?}: not an IPv4 or IPv6 address or cna24:0xNNNNNN"
    )))
}

/// An address as [`parse_addr`] reads it.
pub fn addr_text(a: &Addr) -> String {
    match *a {
        Addr::Cna16(c) => format!("cna16:{c:#06x}"),
        Addr::Cna24(c) => format!("cna24:{c:#08x}"),
        Addr::Ipv4(a) => Ipv4Addr::from(a).to_string(),
        Addr::Ipv6(a) => Ipv6Addr::from(a).to_string(),
    }
}

/// The packet class (LPH.CFG) that carries RTP between addresses like `a`.
fn class_of(a: &Addr) -> PacketClass {
    match a {
        Addr::Cna16(_) => PacketClass::Cna16,
        Addr::Cna24(_) => PacketClass::Cna24,
        Addr::Ipv4(_) => PacketClass::Ipv4,
        Addr::Ipv6(_) => PacketClass::Ipv6,
    }
}

/// The PSN of a forged packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PsnChoice {
    /// This PSN.
    At(u32),
    /// The observed packet's PSN plus this (modulo 2^24).
    Ahead(u32),
}

/// What to forge, checked: every field in range, no contradiction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgeSpec {
    /// The destination TPN (the channel at the receiving host).
    pub dst_tpn: u32,
    /// Source address (default: the observed packet's).
    pub src: Option<Addr>,
    /// Destination address (default: the observed packet's).
    pub dst: Option<Addr>,
    /// Source TPN (default: the observed packet's).
    pub src_tpn: Option<u32>,
    /// PSN (default: the observed packet's).
    pub psn: Option<PsnChoice>,
    /// Resend the observed packet itself, unchanged.
    pub replay: bool,
    /// Copies queued.
    pub count: u32,
    /// Payload bytes (default: the observed packet's own, or
    /// [`DEFAULT_PAYLOAD`] for a packet built from its fields).
    pub payload_len: Option<u32>,
    /// NPI of an IP-format packet (default: the observed packet's, or the
    /// default partition for a packet built from its fields).
    pub npi: Option<Npi>,
}

/// The raw fields of a forge command, as the control socket and the
/// command line give them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForgeArgs<'a> {
    /// Destination TPN.
    pub dst_tpn: u32,
    /// Source address text.
    pub src: Option<&'a str>,
    /// Destination address text.
    pub dst: Option<&'a str>,
    /// Source TPN.
    pub src_tpn: Option<u32>,
    /// Absolute PSN.
    pub psn: Option<u32>,
    /// PSN relative to the observed packet's.
    pub psn_ahead: Option<u32>,
    /// Replay the observed packet.
    pub replay: bool,
    /// Copies (default 1).
    pub count: Option<u32>,
    /// Payload bytes.
    pub payload_len: Option<u32>,
    /// NPI, 25 bits (IP format only).
    pub npi: Option<u32>,
}

impl ForgeSpec {
    /// Checks `a`.
    pub fn new(a: &ForgeArgs<'_>) -> Result<Self, ForgeError> {
        let tpn = |name: &str, v: u32| {
            if v > MAX_24 {
                Err(invalid(format!("{name} {v}: TPNs and PSNs are 24 bits")))
            } else {
                Ok(v)
            }
        };
        let dst_tpn = tpn("dst_tpn", a.dst_tpn)?;
        let src_tpn = a.src_tpn.map(|v| tpn("src_tpn", v)).transpose()?;
        let psn = match (a.psn, a.psn_ahead) {
            (Some(_), Some(_)) => return Err(invalid("psn and psn_ahead exclude each other")),
            (Some(p), None) => Some(PsnChoice::At(tpn("psn", p)?)),
            (None, Some(d)) => Some(PsnChoice::Ahead(tpn("psn_ahead", d)?)),
            (None, None) => None,
        };
        let src = a.src.map(parse_addr).transpose()?;
        let dst = a.dst.map(parse_addr).transpose()?;
        if let (Some(s), Some(d)) = (&src, &dst) {
            if class_of(s) != class_of(d) {
                return Err(invalid("src and dst are of different address formats"));
            }
        }
        let count = a.count.unwrap_or(1);
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(invalid(format!("count {count}: 1 to {MAX_COUNT}")));
        }
        if let Some(n) = a.payload_len {
            if n > MAX_PAYLOAD {
                return Err(invalid(format!("payload_len {n}: at most {MAX_PAYLOAD}")));
            }
        }
        let npi = a
            .npi
            .map(|v| {
                Npi::try_from_raw(v)
                    .ok_or_else(|| invalid(format!("npi {v:#x}: an NPI is 25 bits")))
            })
            .transpose()?;
        if npi.is_some() && matches!(src.or(dst), Some(Addr::Cna24(_))) {
            return Err(invalid("npi: 24-bit CNA packets carry no NPI"));
        }
        let changes = src.is_some()
            || dst.is_some()
            || src_tpn.is_some()
            || psn.is_some()
            || a.payload_len.is_some()
            || npi.is_some();
        if a.replay && changes {
            return Err(invalid(
                "replay resends the observed packet unchanged: no other field",
            ));
        }
        Ok(Self {
            dst_tpn,
            src,
            dst,
            src_tpn,
            psn,
            replay: a.replay,
            count,
            payload_len: a.payload_len,
            npi,
        })
    }

    /// Whether the spec needs nothing from the channel's traffic.
    pub fn complete(&self) -> bool {
        !self.replay
            && self.src.is_some()
            && self.dst.is_some()
            && self.src_tpn.is_some()
            && matches!(self.psn, Some(PsnChoice::At(_)))
    }

    /// The packet class the spec's addresses need, if it names one.
    fn class(&self) -> Option<PacketClass> {
        self.src.as_ref().or(self.dst.as_ref()).map(class_of)
    }

    /// The spec as JSON (addresses as text).
    pub fn to_json(&self) -> Value {
        json!({
            "dst_tpn": self.dst_tpn,
            "src": self.src.as_ref().map(addr_text),
            "dst": self.dst.as_ref().map(addr_text),
            "src_tpn": self.src_tpn,
            "psn": self.psn,
            "replay": self.replay,
            "count": self.count,
            "payload_len": self.payload_len,
            "npi": self.npi.map(Npi::raw),
        })
    }

    /// The packet of a [`complete`](Self::complete) spec, built from its
    /// fields alone: a single-packet message (TPMSN 0, last), the spec's NPI
    /// or the default one, default CCI and service level, a pattern payload.
    pub fn build(&self) -> Result<Packet, ForgeError> {
        let (Some(src), Some(dst), Some(src_tpn), Some(PsnChoice::At(psn))) =
            (self.src, self.dst, self.src_tpn, self.psn)
        else {
            return Err(invalid(
                "a packet built from its fields needs src, dst, src_tpn and psn",
            ));
        };
        let net = match (src, dst) {
            (Addr::Ipv4(s), Addr::Ipv4(d)) => NetHeader::Ip(IpNth {
                cci: Cci::DEFAULT,
                npi: self.npi.unwrap_or(Npi::DEFAULT),
                ip: IpHdr::V4 {
                    dscp: 0,
                    ecn: 0,
                    ident: 0,
                    ttl: 64,
                    src: s,
                    dst: d,
                },
                sport: FORGED_SPORT,
            }),
            (Addr::Ipv6(s), Addr::Ipv6(d)) => NetHeader::Ip(IpNth {
                cci: Cci::DEFAULT,
                npi: self.npi.unwrap_or(Npi::DEFAULT),
                ip: IpHdr::V6 {
                    traffic_class: 0,
                    flow_label: 0,
                    hop_limit: 64,
                    src: s,
                    dst: d,
                },
                sport: FORGED_SPORT,
            }),
            (Addr::Cna24(s), Addr::Cna24(d)) => NetHeader::Cna24(Nth24 {
                scna: s,
                dcna: d,
                cci: Cci::DEFAULT,
                lbf: 0,
                sl: 0,
                nlp: NLP24_RTPH,
            }),
            _ => return Err(invalid("src and dst: IPv4, IPv6 or 24-bit CNA, both alike")),
        };
        let h = Rtph::data(src_tpn, self.dst_tpn, Psn::new(psn), 0, true);
        let body = pattern(self.payload_len.unwrap_or(DEFAULT_PAYLOAD));
        assemble(0, 0, &net, h, &body)
    }

    /// The packet forged from `seen`, an RTP data packet of the channel:
    /// `seen` itself for a replay, otherwise its headers with the spec's
    /// fields put in, sealed again.
    pub fn build_from(&self, seen: &Packet) -> Result<Packet, ForgeError> {
        if self.replay {
            return Ok(seen.clone());
        }
        let (mut net, hlen, mut h) =
            rtp_data(seen).ok_or_else(|| invalid("not an RTP data packet"))?;
        set_addrs(&mut net, self.src, self.dst)?;
        if let Some(n) = self.npi {
            match &mut net {
                NetHeader::Ip(ip) => ip.npi = n,
                _ => return Err(invalid("npi: the channel's packets carry no NPI")),
            }
        }
        if let Some(t) = self.src_tpn {
            h.src_tpn = t;
        }
        h.dst_tpn = self.dst_tpn;
        match self.psn {
            Some(PsnChoice::At(p)) => h.psn = Psn::new(p),
            Some(PsnChoice::Ahead(d)) => h.psn = Psn::new(h.psn.value().wrapping_add(d)),
            None => {}
        }
        let body = match self.payload_len {
            Some(n) => pattern(n),
            None => {
                // The observed packet's own bytes after the RTPH (any
                // extension header and the payload, without padding).
                let end = seen
                    .payload
                    .len()
                    .saturating_sub(ICRC_LEN)
                    .saturating_sub(usize::from(h.padding));
                seen.payload
                    .get(hlen + RTPH_LEN..end)
                    .ok_or_else(|| invalid("observed packet shorter than its headers"))?
                    .to_vec()
            }
        };
        assemble(seen.vl, seen.rt, &net, h, &body)
    }
}

/// A payload of `n` bytes that no genuine message of the selftests has
/// (every byte 0xf0 ^ its offset).
fn pattern(n: u32) -> Vec<u8> {
    (0..n).map(|i| 0xf0 ^ (i as u8)).collect()
}

/// Replaces the addresses of `net` (the same format: checked).
fn set_addrs(net: &mut NetHeader, src: Option<Addr>, dst: Option<Addr>) -> Result<(), ForgeError> {
    let mismatch = || invalid("the address format differs from the channel's");
    for (a, is_src) in [(src, true), (dst, false)] {
        let Some(a) = a else { continue };
        match (net as &mut NetHeader, a) {
            (
                NetHeader::Ip(IpNth {
                    ip: IpHdr::V4 { src, dst, .. },
                    ..
                }),
                Addr::Ipv4(v),
            ) => *(if is_src { src } else { dst }) = v,
            (
                NetHeader::Ip(IpNth {
                    ip: IpHdr::V6 { src, dst, .. },
                    ..
                }),
                Addr::Ipv6(v),
            ) => *(if is_src { src } else { dst }) = v,
            (NetHeader::Cna24(nth), Addr::Cna24(v)) => {
                if is_src {
                    nth.scna = v;
                } else {
                    nth.dcna = v;
                }
            }
            _ => return Err(mismatch()),
        }
    }
    Ok(())
}

/// Writes `net`, `h` (its padding set for `body`), `body` and the padding,
/// and seals the ICRC.
fn assemble(
    vl: u8,
    rt: u8,
    net: &NetHeader,
    mut h: Rtph,
    body: &[u8],
) -> Result<Packet, ForgeError> {
    let bad = |e: ub_proto::net::Error| invalid(format!("cannot build the packet: {e:?}"));
    h.padding = padding_for(RTPH_LEN + body.len());
    let upper = RTPH_LEN + body.len() + usize::from(h.padding);
    let hlen = net.len();
    let mut p = vec![0u8; hlen + upper + ICRC_LEN];
    net.write(&mut p, upper).map_err(bad)?;
    h.write(&mut p[hlen..]).map_err(bad)?;
    p[hlen + RTPH_LEN..hlen + RTPH_LEN + body.len()].copy_from_slice(body);
    let class = net.class();
    icrc::seal(crc32_le_portable, class, &mut p).map_err(bad)?;
    Ok(Packet {
        vl,
        cfg: class.cfg(),
        rt,
        error_flag: false,
        payload: p,
    })
}

/// The network header, its length and the RTPH of an RTP data packet
/// (not a keep-alive); `None` for anything else.
pub fn rtp_data(p: &Packet) -> Option<(NetHeader, usize, Rtph)> {
    let class = PacketClass::from_cfg(p.cfg).ok()?;
    let (net, hlen) = NetHeader::parse(class, &p.payload).ok()?;
    match net {
        NetHeader::Ip(_) => {}
        NetHeader::Cna24(nth) if nth.nlp == NLP24_RTPH => {}
        _ => return None,
    }
    let h = Rtph::parse(p.payload.get(hlen..)?).ok()?;
    (h.opcode == TpOpcode::Data && !h.fake).then_some((net, hlen, h))
}

/// An armed spec.
#[derive(Debug)]
struct Job {
    spec: ForgeSpec,
    /// The host or host port, as the command named it.
    port: String,
    /// The switch ports (switch, port) facing it.
    at: Vec<(usize, usize)>,
    /// Fabric time (ns) after which it is dropped unfired.
    deadline: u64,
}

/// What the forger did since the fabric started.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct ForgeCounters {
    /// Packets queued at switch ports.
    pub injected: u64,
    /// Armed specs that fired.
    pub fired: u64,
    /// Armed specs that saw no packet of their channel in time.
    pub expired: u64,
}

/// The armed specs of a fabric and its counters.
#[derive(Debug, Default)]
pub struct Forger {
    jobs: Vec<Job>,
    /// Counters.
    pub counters: ForgeCounters,
}

impl Forger {
    /// Whether any spec waits for traffic (only then does the fabric look
    /// at the packets it forwards).
    pub fn armed(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Arms `spec` for the switch ports `at` (switch, port) facing `port`
    /// (a host port, or every port of a host) until `now + within_ms`.
    pub fn arm(
        &mut self,
        spec: ForgeSpec,
        port: &str,
        at: Vec<(usize, usize)>,
        now: u64,
        within_ms: u64,
    ) -> Result<(), ForgeError> {
        if within_ms == 0 || within_ms > MAX_WITHIN_MS {
            return Err(invalid(format!(
                "within_ms {within_ms}: 1 to {MAX_WITHIN_MS}"
            )));
        }
        if at.is_empty() {
            return Err(invalid(format!("{port} faces no switch")));
        }
        if self.jobs.len() >= MAX_ARMED {
            return Err(invalid(format!("{MAX_ARMED} forgeries armed already")));
        }
        self.jobs.push(Job {
            spec,
            port: port.to_string(),
            at,
            deadline: now.saturating_add(within_ms.saturating_mul(1_000_000)),
        });
        Ok(())
    }

    /// Drops the specs whose time is up.
    pub fn expire(&mut self, now: u64) {
        let before = self.jobs.len();
        self.jobs.retain(|j| now <= j.deadline);
        self.counters.expired += (before - self.jobs.len()) as u64;
    }

    /// Whether `p`, arriving at switch `s`, may fire a spec (so that the
    /// fabric keeps a copy of it while it forwards it).
    pub fn wants(&self, s: usize, p: &Packet) -> bool {
        self.armed() && self.matching(s, None, p).next().is_some()
    }

    /// The specs `p` fires at switch `s`, queued at port `out` (any port
    /// if `None`).
    fn matching<'a>(
        &'a self,
        s: usize,
        out: Option<usize>,
        p: &Packet,
    ) -> impl Iterator<Item = usize> + 'a {
        let at = move |j: &Job| {
            j.at.iter()
                .any(|&(js, jp)| js == s && out.is_none_or(|o| jp == o))
        };
        let tpn = if self.jobs.iter().any(at) {
            rtp_data(p).map(|(_, _, h)| h.dst_tpn)
        } else {
            None
        };
        let class = PacketClass::from_cfg(p.cfg).ok();
        self.jobs.iter().enumerate().filter_map(move |(i, j)| {
            let class_ok = j.spec.class().is_none_or(|c| Some(c) == class);
            (at(j) && class_ok && tpn == Some(j.spec.dst_tpn)).then_some(i)
        })
    }

    /// Switch `s` queued `p` at the tail of port `out`'s egress: the
    /// packets of every spec it fires, in the order they were armed, to be
    /// queued right behind it. A fired spec is disarmed.
    pub fn observe(&mut self, s: usize, out: usize, p: &Packet) -> Vec<Packet> {
        let fire: Vec<usize> = self.matching(s, Some(out), p).collect();
        let mut pkts = Vec::new();
        let mut fired = Vec::new();
        for i in fire {
            let Some(j) = self.jobs.get(i) else { continue };
            // The class filter makes the build succeed; a spec that could
            // not be built stays armed (and expires).
            if let Ok(f) = j.spec.build_from(p) {
                pkts.extend(std::iter::repeat_n(f, j.spec.count as usize));
                fired.push(i);
            }
        }
        for &i in fired.iter().rev() {
            self.jobs.remove(i);
        }
        self.counters.fired += fired.len() as u64;
        self.counters.injected += pkts.len() as u64;
        pkts
    }

    /// The armed specs and the counters, as JSON.
    pub fn to_json(&self) -> Value {
        let armed: Vec<Value> = self
            .jobs
            .iter()
            .map(|j| {
                let mut v = j.spec.to_json();
                if let Value::Object(m) = &mut v {
                    m.insert("port".into(), json!(j.port));
                    m.insert("deadline_ns".into(), json!(j.deadline));
                }
                v
            })
            .collect();
        json!({"armed": armed, "counters": self.counters})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ub_host::{Collector, VecStorage};
    use ub_proto::host::{Endpoint, EndpointConfig, LocalAddrs, Random};
    use ub_proto::net::npi::NpiMode;
    use ub_proto::net::nth::UB_UDP_PORT;

    struct Fixed;
    impl Random for Fixed {
        fn random_u32(&mut self) -> u32 {
            7
        }
    }

    fn args(dst_tpn: u32) -> ForgeArgs<'static> {
        ForgeArgs {
            dst_tpn,
            ..ForgeArgs::default()
        }
    }

    fn complete(src: &'static str, dst: &'static str) -> ForgeSpec {
        ForgeSpec::new(&ForgeArgs {
            src: Some(src),
            dst: Some(dst),
            src_tpn: Some(0x123456),
            psn: Some(0xfffffe),
            payload_len: Some(61),
            count: Some(2),
            ..args(0x00abcd)
        })
        .expect("valid")
    }

    /// The parts of a forged packet, checked as a receiver would: the
    /// header parses for its class, the ICRC verifies, and the payload is
    /// whole.
    fn parts(p: &Packet) -> (NetHeader, Rtph, Vec<u8>) {
        let class = PacketClass::from_cfg(p.cfg).expect("cfg");
        icrc::verify(crc32_le_portable, class, &p.payload).expect("ICRC");
        let (net, hlen, h) = rtp_data(p).expect("an RTP data packet");
        let tp = &p.payload[hlen..p.payload.len() - ICRC_LEN];
        assert_eq!(tp.len() % 4, 0, "padded to 4 bytes");
        let body = tp[RTPH_LEN..tp.len() - usize::from(h.padding)].to_vec();
        (net, h, body)
    }

    /// A forged packet of another partition, or of a low-privilege member:
    /// the NPI is the spec's, in a packet built from fields and in one
    /// built from the channel's own; a 24-bit CNA packet has none to set.
    #[test]
    fn the_npi_of_a_forged_packet_is_the_specs() {
        let with_npi = |src: &'static str, npi: u32| {
            ForgeSpec::new(&ForgeArgs {
                src: Some(src),
                dst: Some("10.0.1.100"),
                src_tpn: Some(5),
                psn: Some(0),
                npi: Some(npi),
                ..args(77)
            })
        };
        let low = Npi::new(1, true).raw();
        let p = with_npi("10.0.9.100", low)
            .expect("valid")
            .build()
            .expect("built");
        let (NetHeader::Ip(ip), _, _) = parts(&p) else {
            panic!("not IP")
        };
        assert_eq!(ip.npi, Npi::new(1, true));
        let seen = complete("10.0.9.100", "10.0.1.100").build().expect("built");
        let again = ForgeSpec::new(&ForgeArgs {
            npi: Some(6),
            ..args(0x00abcd)
        })
        .expect("valid")
        .build_from(&seen)
        .expect("built");
        let (NetHeader::Ip(ip), _, _) = parts(&again) else {
            panic!("not IP")
        };
        assert_eq!(ip.npi, Npi::new(6, false));
        assert!(with_npi("10.0.9.100", 1 << 25).is_err(), "26 bits");
        assert!(ForgeSpec::new(&ForgeArgs {
            src: Some("cna24:0x000100"),
            npi: Some(5),
            ..args(77)
        })
        .is_err());
    }

    #[test]
    fn a_spec_with_every_field_builds_a_sealed_rtp_data_packet() {
        let p = complete("10.0.9.100", "10.0.1.100").build().expect("built");
        assert_eq!(p.cfg, PacketClass::Ipv4.cfg());
        let (net, h, body) = parts(&p);
        let NetHeader::Ip(IpNth {
            ip: IpHdr::V4 { src, dst, .. },
            npi,
            ..
        }) = net
        else {
            panic!("not IPv4: {net:?}");
        };
        assert_eq!(
            (src, dst, npi),
            ([10, 0, 9, 100], [10, 0, 1, 100], Npi::DEFAULT)
        );
        // UDP destination port 4792 (NetHeader::parse checks it too).
        let udp = 6 + 20;
        assert_eq!(p.payload[udp + 2..udp + 4], UB_UDP_PORT.to_be_bytes());
        assert_eq!(
            (
                h.opcode,
                h.src_tpn,
                h.dst_tpn,
                h.psn.value(),
                h.tpmsn,
                h.last
            ),
            (TpOpcode::Data, 0x123456, 0x00abcd, 0xfffffe, 0, true)
        );
        assert_eq!(body, pattern(61));
        for (s, d, class) in [
            ("fd00::9:1", "fd00::1:1", PacketClass::Ipv6),
            ("cna24:0x000901", "cna24:0x000100", PacketClass::Cna24),
        ] {
            let p = complete(s, d).build().expect("built");
            assert_eq!(p.cfg, class.cfg());
            let (_, h, body) = parts(&p);
            assert_eq!((h.dst_tpn, body.len()), (0x00abcd, 61));
        }
    }

    #[test]
    fn a_forgery_from_an_observed_packet_changes_only_what_it_names() {
        let seen = complete("10.0.2.100", "10.0.1.100").build().expect("built");
        let (seen_net, seen_h, seen_body) = parts(&seen);
        let spec = ForgeSpec::new(&ForgeArgs {
            src: Some("10.0.9.100"),
            psn_ahead: Some(3),
            ..args(0x00abcd)
        })
        .expect("valid");
        assert!(!spec.complete());
        let f = spec.build_from(&seen).expect("forged");
        let (net, h, body) = parts(&f);
        let mut want_net = seen_net;
        set_addrs(&mut want_net, Some(Addr::Ipv4([10, 0, 9, 100])), None).expect("same format");
        assert_eq!(net, want_net);
        assert_eq!(h.psn.value(), 1, "0xfffffe + 3 wraps at 2^24");
        assert_eq!(
            (h.src_tpn, h.tpmsn, h.last),
            (seen_h.src_tpn, seen_h.tpmsn, seen_h.last)
        );
        assert_eq!(body, seen_body, "the observed payload");
        let replay = ForgeSpec::new(&ForgeArgs {
            replay: true,
            ..args(0x00abcd)
        })
        .expect("valid");
        assert_eq!(replay.build_from(&seen).expect("replayed"), seen);
        // Another address format than the channel's is not forged.
        let v6 = ForgeSpec::new(&ForgeArgs {
            src: Some("fd00::9:1"),
            ..args(0x00abcd)
        })
        .expect("valid");
        assert!(v6.build_from(&seen).is_err());
        let mut f = Forger::default();
        f.arm(v6, "vm0", vec![(0, 0)], 0, 10).expect("armed");
        assert!(!f.wants(0, &seen), "an IPv6 forgery waits for IPv6 packets");
    }

    /// The endpoint's receive path takes a forged packet up to the
    /// transport: with no channel behind its TPN it counts
    /// `unknown_channel`, and nothing else (no ICRC, NPI or format drop).
    #[test]
    fn the_endpoint_parses_a_forged_packet_up_to_its_tpn() {
        let cfg = EndpointConfig {
            local: LocalAddrs {
                cna16: None,
                cna24: Some(0x000100),
                ipv4: Some([10, 0, 1, 100]),
                ipv6: Some(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, 1).octets()),
                eid: 0,
            },
            npi_mode: NpiMode::Strict(Npi::DEFAULT),
            npi: Npi::DEFAULT,
            ports: 2,
            max_packet: 4096 + 128,
            max_channels: 2,
            max_routes: 1,
            max_groups: 1,
            datagram_queue: 1,
            cm: ub_proto::transport::cm::CmTiming {
                retry_ns: 1_000_000,
                max_tries: 2,
            },
            accept: None,
            hash_seed: 1,
            icrc: crc32_le_portable,
        };
        let mut ep = Endpoint::new(cfg, VecStorage, Fixed).expect("endpoint");
        let mut sink = Collector::default();
        for (s, d) in [
            ("10.0.9.100", "10.0.1.100"),
            ("fd00::9:1", "fd00::1:1"),
            ("cna24:0x000901", "cna24:0x000100"),
        ] {
            let p = complete(s, d).build().expect("built");
            ep.handle_packet(0, 0, p.cfg, &p.payload, &mut sink);
        }
        let n = ep.net_counters();
        assert_eq!((n.rx_packets, n.unknown_channel), (3, 3), "{n:?}");
        assert_eq!(
            (
                n.icrc_drops,
                n.malformed,
                n.npi_drops,
                n.not_for_us,
                n.wrong_peer
            ),
            (0, 0, 0, 0, 0),
            "{n:?}"
        );
        assert!(sink.messages.is_empty());
    }

    #[test]
    fn bad_specs_are_refused() {
        for (a, what) in [
            (args(1 << 24), "24 bits"),
            (
                ForgeArgs {
                    src_tpn: Some(1 << 24),
                    ..args(1)
                },
                "24 bits",
            ),
            (
                ForgeArgs {
                    psn: Some(1),
                    psn_ahead: Some(1),
                    ..args(1)
                },
                "exclude",
            ),
            (
                ForgeArgs {
                    replay: true,
                    payload_len: Some(1),
                    ..args(1)
                },
                "unchanged",
            ),
            (
                ForgeArgs {
                    count: Some(0),
                    ..args(1)
                },
                "count",
            ),
            (
                ForgeArgs {
                    payload_len: Some(MAX_PAYLOAD + 1),
                    ..args(1)
                },
                "payload_len",
            ),
            (
                ForgeArgs {
                    src: Some("10.0.9.1"),
                    dst: Some("fd00::1"),
                    ..args(1)
                },
                "formats",
            ),
            (
                ForgeArgs {
                    src: Some("cna16:0x0100"),
                    ..args(1)
                },
                "16-bit",
            ),
            (
                ForgeArgs {
                    dst: Some("cna24:0x1000000"),
                    ..args(1)
                },
                "24-bit CNA",
            ),
        ] {
            let e = ForgeSpec::new(&a).expect_err(what).to_string();
            assert!(e.contains(what), "{a:?}: {e}");
        }
        let mut f = Forger::default();
        let spec = ForgeSpec::new(&args(1)).expect("valid");
        assert!(
            f.arm(spec.clone(), "vm0", vec![], 0, 10).is_err(),
            "no switch"
        );
        assert!(f.arm(spec.clone(), "vm0", vec![(0, 0)], 0, 0).is_err());
        assert!(f
            .arm(spec, "vm0", vec![(0, 0)], 0, MAX_WITHIN_MS + 1)
            .is_err());
        assert!(!f.armed());
    }
}
