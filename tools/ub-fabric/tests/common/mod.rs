// SPDX-License-Identifier: GPL-2.0
//! An in-process test double of the `ub.ko` driver side: it programs a
//! controller through its BAR0 registers, keeps TX/RX descriptor rings in
//! (fake) guest memory, and runs the `ub-proto` data link engine on each
//! port in software, as the real driver does.
//!
//! Two kinds of traffic:
//! - the host stack ([`Driver::attach_endpoint`]): one `ub_proto::host`
//!   endpoint per host over its ports' link engines, driven in the
//!   endpoint's documented call order. What the endpoint transmits goes to
//!   the per-VL TX queue of the port it chose; whole packets the link
//!   delivers go to `Endpoint::handle_packet`. The driver marks a port up
//!   in the endpoint while its DLL is in DLL_Normal and down otherwise
//!   (PHY link down, link re-initialisation), so routing leaves a dead
//!   port out; a retrain keeps the DLL in Normal and the port up.
//! - raw packets for the link and switch tests ([`Driver::send`],
//!   [`Driver::raw_tx`]): 16-bit CNA packets carrying a flow id and a
//!   sequence number, sealed with an ICRC.

#![allow(dead_code, reason = "each test binary uses part of the helpers")]

use std::collections::{BTreeMap, VecDeque};

use ub_fabric::device::{Controller, RecordingIrqs};
use ub_fabric::fabric::Fabric;
use ub_fabric::mem::FakeMemory;
use ub_fabric::topology::{addr, Topology};
use ub_host::{Collector, VecStorage};
use ub_proto::controller::{self as reg, RegisterBase, Ring};
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{
    Endpoint, EndpointConfig, Event as HostEvent, MessageSource, MsgRef, Random, SendError,
};
use ub_proto::link::engine::{Delivery, Event, Link, LinkConfig, RxSink, TxPacket, TxSource};
use ub_proto::link::retry::RetrySlot;
use ub_proto::link::DllState;
use ub_proto::net::cci::Cci;
use ub_proto::net::icrc;
use ub_proto::net::nth::{NetHeader, Nth16, ICRC_LEN, NTH16_LEN};
use ub_proto::net::PacketClass;

/// Guest memory base and size of every fake guest.
pub const MEM_BASE: u64 = 0x1000_0000;
/// Fake guest memory size.
pub const MEM_SIZE: usize = 8 << 20;
/// Ring entries.
pub const RING: u32 = 64;
/// Buffer size per descriptor.
pub const BUF: usize = reg::MAX_XFER_BYTES as usize;
/// Packets a port's TX queues hold before the driver stops taking
/// packets from the endpoint (the driver's stopped queue).
pub const TX_QUEUE_LIMIT: usize = 32;

/// A fabric whose hosts have fake memory and recording interrupts.
pub fn fabric(topo: &Topology) -> Fabric {
    Fabric::new(topo, |_| {
        (
            Box::new(FakeMemory::new(MEM_BASE, MEM_SIZE)),
            Box::new(RecordingIrqs::default()),
        )
    })
}

/// A packet queued by the double.
#[derive(Debug, Clone)]
pub struct Pkt {
    pub cfg: u8,
    pub rt: u8,
    pub payload: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct Queues {
    pub q: [VecDeque<Pkt>; 16],
}

impl TxSource for Queues {
    fn ready(&self) -> u16 {
        let mut m = 0;
        for (i, q) in self.q.iter().enumerate() {
            if !q.is_empty() {
                m |= 1 << i;
            }
        }
        m
    }
    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        self.q.get(usize::from(vl))?.front().map(|p| TxPacket {
            cfg: p.cfg,
            rt: p.rt,
            error_flag: false,
            payload: &p.payload,
        })
    }
    fn pop(&mut self, vl: u8) {
        self.q[usize::from(vl)].pop_front();
    }
}

/// Received packets (reassembled, checked).
#[derive(Debug, Default)]
pub struct Sink {
    cur: Vec<u8>,
    cur_cfg: u8,
    /// (flow, seq) of good packets, in arrival order.
    pub got: Vec<(u16, u32)>,
    /// Packets failing the ICRC.
    pub icrc_errors: u64,
    /// Packets marked congested.
    pub congested: u64,
    /// Poisoned packets.
    pub poisoned: u64,
    /// Hand whole packets up (to the endpoint) instead of parsing them.
    pub pass_up: bool,
    /// Packets waiting for the endpoint: (LPH.CFG, network packet).
    pub up: Vec<(u8, Vec<u8>)>,
}

impl RxSink for Sink {
    fn deliver(&mut self, d: &Delivery<'_>) {
        if d.first {
            self.cur.clear();
            self.cur_cfg = d.cfg;
        }
        self.cur.extend_from_slice(d.data);
        if !d.last {
            return;
        }
        if d.error_flag {
            self.poisoned += 1;
            return;
        }
        if self.pass_up {
            // The endpoint checks the ICRC and parses; the link only frames.
            self.up.push((self.cur_cfg, std::mem::take(&mut self.cur)));
            return;
        }
        let class = PacketClass::from_cfg(self.cur_cfg).unwrap_or(PacketClass::Cna16);
        if icrc::verify(crc32_le_portable, class, &self.cur).is_err() {
            self.icrc_errors += 1;
            return;
        }
        if let Ok((h, n)) = NetHeader::parse(class, &self.cur) {
            if h.cci().congested() {
                self.congested += 1;
            }
            if let Some(b) = self.cur.get(n..n + 6) {
                let flow = u16::from_be_bytes([b[0], b[1]]);
                let seq = u32::from_be_bytes([b[2], b[3], b[4], b[5]]);
                self.got.push((flow, seq));
            }
        }
    }
}

/// Builds a sealed 16-bit CNA packet (bytes after the LPH).
pub fn cna16_packet(src: u16, dst: u16, lbf: u8, flow: u16, seq: u32, body: usize) -> Vec<u8> {
    let hdr = NetHeader::Cna16 {
        nth: Nth16 {
            scna: src,
            dcna: dst,
            cci: Cci::DEFAULT,
            lbf,
            sl: 0,
            mgmt: false,
            nlp: 0,
        },
        coherent: false,
    };
    let upper = 6 + body;
    let mut p = vec![0u8; NTH16_LEN + upper + ICRC_LEN];
    let n = hdr.write(&mut p, upper).expect("header");
    p[n..n + 2].copy_from_slice(&flow.to_be_bytes());
    p[n + 2..n + 6].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in p[n + 6..n + upper].iter_mut().enumerate() {
        *b = (seq as usize + i) as u8;
    }
    icrc::seal(crc32_le_portable, PacketClass::Cna16, &mut p).expect("seal");
    p
}

/// SplitMix64: the endpoints' seeded random source (initial PSNs).
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Random for SplitMix {
    fn random_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
}

/// The host endpoint as the double runs it.
pub type HostEndpoint = Endpoint<VecStorage, SplitMix>;

/// Byte `off` of message `token`: messages are a pattern, so the sender
/// stores nothing and the receiver can check every byte.
pub fn pattern(token: u64, off: u32) -> u8 {
    (token
        .wrapping_mul(131)
        .wrapping_add(u64::from(off).wrapping_mul(7))
        ^ (u64::from(off) >> 8)) as u8
}

/// The message store of the double: message bytes are [`pattern`].
#[derive(Debug, Default)]
pub struct PatternSource;

impl MessageSource for PatternSource {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        let token = match msg {
            MsgRef::Channel { token, .. } | MsgRef::Datagram { token } => token,
        };
        for (i, b) in out.iter_mut().enumerate() {
            *b = pattern(token, offset + i as u32);
        }
    }
}

/// One host's stack: the endpoint, what it delivered, its events and the
/// messages the test wants sent.
pub struct Stack {
    /// The endpoint.
    pub ep: HostEndpoint,
    /// What it delivered.
    pub app: Collector,
    /// Every event it raised, with the time.
    pub events: Vec<(u64, HostEvent)>,
    /// Per channel: messages (token, length) still to post, in order;
    /// posted as the send queue takes them (back-pressure).
    pub outbox: BTreeMap<u32, VecDeque<(u64, u32)>>,
    /// Packets the endpoint wrote, per port.
    pub tx_per_port: Vec<u64>,
    /// Packets handed to the endpoint, per port.
    pub rx_per_port: Vec<u64>,
    buf: Vec<u8>,
}

impl Stack {
    /// Queues messages for channel `tpn`.
    pub fn post(&mut self, tpn: u32, msgs: &[(u64, u32)]) {
        self.outbox.entry(tpn).or_default().extend(msgs);
    }

    /// Events matching `f`.
    pub fn count_events(&self, f: impl Fn(&HostEvent) -> bool) -> usize {
        self.events.iter().filter(|(_, e)| f(e)).count()
    }

    /// Messages not yet posted.
    pub fn unposted(&self) -> usize {
        self.outbox.values().map(VecDeque::len).sum()
    }

    /// Posts what the send queues take. Channels not yet in RTS keep their
    /// messages (`NotReady`); any other refusal is a test failure.
    fn post_outbox(&mut self) {
        for (&tpn, q) in &mut self.outbox {
            while let Some(&(token, len)) = q.front() {
                match self.ep.send(tpn, token, len) {
                    Ok(()) => {
                        q.pop_front();
                    }
                    Err(SendError::WouldBlock | SendError::NotReady) => break,
                    Err(e) => panic!("send on tpn {tpn}: {e:?}"),
                }
            }
        }
    }

    /// Steps 1 and 2 of the endpoint's call order: drain the events, then
    /// hand every packet it can send to its port's TX queue (VL = SL).
    /// Like a driver whose TX queue is full, it stops pulling while any
    /// port holds [`TX_QUEUE_LIMIT`] packets: the endpoint keeps the rest
    /// in its send queues, and no RTO runs for a packet that has not left.
    fn flush(&mut self, ports: &mut [PortDriver], now: u64) {
        while let Some(ev) = self.ep.poll_event() {
            self.events.push((now, ev));
        }
        while ports.iter().all(|d| d.queued() < TX_QUEUE_LIMIT) {
            let t = self
                .ep
                .poll_transmit(now, &mut self.buf, &mut PatternSource)
                .expect("poll_transmit");
            let Some(t) = t else { break };
            let port = usize::from(t.port);
            let d = ports.get_mut(port).expect("endpoint chose a port it has");
            self.tx_per_port[port] += 1;
            d.queues.q[usize::from(t.sl & 0xf)].push_back(Pkt {
                cfg: t.meta.class.cfg(),
                rt: t.meta.rt.bits(),
                payload: self.buf[..t.len].to_vec(),
            });
        }
    }
}

/// The driver side of one port.
pub struct PortDriver {
    pub port: u32,
    pub link: Link<Vec<RetrySlot>>,
    pub queues: Queues,
    pub sink: Sink,
    tx_base: u64,
    tx_bufs: u64,
    rx_base: u64,
    rx_bufs: u64,
    tx_tail: u32,
    tx_clean: u32,
    rx_next: u32,
    rx_tail: u32,
    pub tx_desc_errors: u64,
    pub retrain_requests: u64,
    /// Link resets done for `Event::LinkResetRequest`.
    pub link_resets: u64,
    /// Whether the endpoint was told this port is up.
    ep_up: bool,
    buf: Vec<u8>,
}

impl PortDriver {
    fn reg(&self, r: u32) -> u32 {
        reg::port_reg(self.port, r).expect("port")
    }

    /// Packets waiting in this port's TX queues.
    pub fn queued(&self) -> usize {
        self.queues.q.iter().map(VecDeque::len).sum()
    }
}

/// The driver double of one controller.
pub struct Driver {
    pub host: usize,
    pub ports: Vec<PortDriver>,
    /// The host stack, once [`Driver::attach_endpoint`] ran.
    pub stack: Option<Stack>,
}

impl Driver {
    /// Probes host `host`: checks the IDs, enables the device, sets up
    /// rings on every port, unmasks interrupts and enables the ports.
    pub fn probe(f: &mut Fabric, host: usize, now: u64) -> Self {
        let ctrl = &mut f.hosts[host].ctrl;
        assert_eq!(ctrl.read32(reg::IDENT::OFFSET), reg::IDENT_VALUE);
        assert_eq!(ctrl.read32(reg::VERSION::OFFSET), reg::VERSION_VALUE);
        let nports = ctrl.read32(reg::CAP_PORTS::OFFSET);
        ctrl.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), now);
        let mut ports = Vec::new();
        for p in 0..nports {
            let region = MEM_BASE + u64::from(p) * 0x20_0000;
            let d = PortDriver {
                port: p,
                link: Link::new(LinkConfig::default(), vec![RetrySlot::EMPTY; 1024])
                    .expect("engine"),
                queues: Queues::default(),
                sink: Sink::default(),
                tx_base: region,
                rx_base: region + 0x1000,
                tx_bufs: region + 0x2000,
                rx_bufs: region + 0x2000 + u64::from(RING) * BUF as u64,
                tx_tail: 0,
                tx_clean: 0,
                rx_next: 0,
                rx_tail: RING - 1,
                tx_desc_errors: 0,
                retrain_requests: 0,
                link_resets: 0,
                ep_up: false,
                buf: vec![0; BUF],
            };
            let w = |ctrl: &mut Controller, r: u32, v: u32| {
                ctrl.write32(reg::port_reg(p, r).expect("reg"), v, now)
            };
            for (block, base) in [
                (<reg::TxRing as RegisterBase<Ring>>::BASE, d.tx_base),
                (<reg::RxRing as RegisterBase<Ring>>::BASE, d.rx_base),
            ] {
                let (lo, hi) = reg::split_u64(base);
                w(ctrl, block + reg::RING_BASE_LO::OFFSET, lo);
                w(ctrl, block + reg::RING_BASE_HI::OFFSET, hi);
                w(ctrl, block + reg::RING_SIZE::OFFSET, RING);
                let enable = reg::RING_CTRL::ZERO.enable().mask();
                w(ctrl, block + reg::RING_CTRL::OFFSET, enable);
            }
            // Post every RX buffer but one (a full ring is head == tail + 1).
            for i in 0..RING - 1 {
                let desc = reg::Desc {
                    addr: d.rx_bufs + u64::from(i) * BUF as u64,
                    len: BUF as u16,
                    ..Default::default()
                };
                ctrl.memory_mut()
                    .write(reg::desc_addr(d.rx_base, i).expect("addr"), &desc.encode())
                    .expect("post");
            }
            w(ctrl, reg::RING_TAIL::of::<reg::RxRing>(), RING - 1);
            w(ctrl, reg::INT_MASK::OFFSET, 0);
            w(
                ctrl,
                reg::PHY_CTRL::OFFSET,
                reg::PHY_CTRL::ZERO.enable().mask(),
            );
            ports.push(d);
        }
        Self {
            host,
            ports,
            stack: None,
        }
    }

    /// Runs a host endpoint over this controller's ports from now on: what
    /// the links deliver goes to it, what it sends goes to the links.
    /// Every port starts down in the endpoint until its DLL is up.
    pub fn attach_endpoint(&mut self, cfg: EndpointConfig, seed: u64) {
        assert_eq!(usize::from(cfg.ports), self.ports.len(), "one port each");
        let mut ep = HostEndpoint::new(cfg, VecStorage, SplitMix(seed)).expect("endpoint");
        for d in &mut self.ports {
            d.sink.pass_up = true;
            ep.set_port_up(d.port as u8, d.link.state() == DllState::Normal);
            d.ep_up = d.link.state() == DllState::Normal;
        }
        let n = self.ports.len();
        self.stack = Some(Stack {
            ep,
            app: Collector::default(),
            events: Vec::new(),
            outbox: BTreeMap::new(),
            tx_per_port: vec![0; n],
            rx_per_port: vec![0; n],
            buf: vec![0; cfg.max_packet as usize],
        });
    }

    /// The stack (panics if none is attached: a test bug).
    pub fn stack(&self) -> &Stack {
        self.stack.as_ref().expect("no endpoint attached")
    }

    /// The stack, mutably.
    pub fn stack_mut(&mut self) -> &mut Stack {
        self.stack.as_mut().expect("no endpoint attached")
    }

    /// One pass of the driver: per port link state, interrupts, RX and
    /// link timers; then the endpoint (received packets, API calls,
    /// timers, each followed by its call order); then per port TX.
    pub fn poll(&mut self, f: &mut Fabric, now: u64) {
        let ctrl = &mut f.hosts[self.host].ctrl;
        for d in &mut self.ports {
            d.poll_rx(ctrl, now);
        }
        if let Some(st) = self.stack.as_mut() {
            for d in &mut self.ports {
                let up = d.link.state() == DllState::Normal;
                if up != d.ep_up {
                    d.ep_up = up;
                    st.ep.set_port_up(d.port as u8, up);
                }
            }
            for i in 0..self.ports.len() {
                let pkts = std::mem::take(&mut self.ports[i].sink.up);
                for (cfg, bytes) in pkts {
                    st.rx_per_port[i] += 1;
                    st.ep.handle_packet(now, i as u8, cfg, &bytes, &mut st.app);
                    st.flush(&mut self.ports, now);
                }
            }
            st.post_outbox();
            st.flush(&mut self.ports, now);
            if st.ep.poll_timeout().is_some_and(|t| t <= now) {
                st.ep.handle_timeout(now);
                st.flush(&mut self.ports, now);
            }
        }
        for d in &mut self.ports {
            d.poll_tx(ctrl, now);
        }
    }
}

impl PortDriver {
    /// Link state, interrupts, RX completions, link timers and events.
    fn poll_rx(&mut self, ctrl: &mut Controller, now: u64) {
        let d = self;
        let phy = ctrl.read32(d.reg(reg::PHY_STATUS::OFFSET));
        let up = phy & reg::PHY_STATUS::ZERO.link_up().mask() != 0;
        if up && d.link.state() == DllState::Disabled {
            d.link.link_up(now);
        } else if !up && d.link.state() != DllState::Disabled {
            d.link.link_down(now, &mut d.sink);
            for q in &mut d.queues.q {
                q.clear();
            }
        }
        let cause = ctrl.read32(d.reg(reg::INT_CAUSE::OFFSET));
        ctrl.write32(d.reg(reg::INT_CAUSE::OFFSET), cause, now);
        if cause & reg::INT_CAUSE::ZERO.retrain_done().mask() != 0 {
            d.link.phy_retrained(now);
        }
        // RX completions.
        let head = ctrl.read32(d.reg(reg::RING_HEAD::of::<reg::RxRing>()));
        let mut posted = 0;
        while d.rx_next != head {
            let da = reg::desc_addr(d.rx_base, d.rx_next).expect("addr");
            let mut raw = [0u8; reg::DESC_BYTES];
            ctrl.memory_mut().read(da, &mut raw).expect("desc");
            let desc = reg::Desc::decode(&raw);
            if desc.state().lost().is_set() {
                d.link.receive_error(now, u32::from(desc.lost));
            }
            let n = usize::from(desc.done_len);
            let mut data = vec![0u8; n];
            ctrl.memory_mut().read(desc.addr, &mut data).expect("buf");
            d.link.handle_receive(now, &data, &mut d.sink);
            // Re-post the buffer at the tail.
            let fresh = reg::Desc {
                addr: desc.addr,
                len: BUF as u16,
                ..Default::default()
            };
            let ta = reg::desc_addr(d.rx_base, d.rx_tail).expect("addr");
            ctrl.memory_mut().write(ta, &fresh.encode()).expect("post");
            d.rx_tail = reg::ring_next(d.rx_tail, RING);
            d.rx_next = reg::ring_next(d.rx_next, RING);
            posted += 1;
        }
        if posted > 0 {
            ctrl.write32(d.reg(reg::RING_TAIL::of::<reg::RxRing>()), d.rx_tail, now);
        }
        if d.link.poll_timeout().is_some_and(|t| t <= now) {
            d.link.handle_timeout(now);
        }
        while let Some(ev) = d.link.poll_event() {
            if ev == Event::RetrainRequest {
                d.retrain_requests += 1;
                ctrl.write32(
                    d.reg(reg::PHY_CTRL::OFFSET),
                    reg::PHY_CTRL::ZERO.enable().mask() | reg::PHY_CTRL::ZERO.retrain().mask(),
                    now,
                );
            }
            if ev == Event::LinkResetRequest {
                // Documentation/ub/link.rst, "Link reset request": PHY
                // down (the controller keeps LinkUp 0 until the fabric
                // took the link down on both ends), engine reset, PHY up;
                // link_up follows when LinkUp is seen again.
                d.link_resets += 1;
                ctrl.write32(d.reg(reg::PHY_CTRL::OFFSET), 0, now);
                d.link.link_down(now, &mut d.sink);
                d.link.reset();
                for q in &mut d.queues.q {
                    q.clear();
                }
                ctrl.write32(
                    d.reg(reg::PHY_CTRL::OFFSET),
                    reg::PHY_CTRL::ZERO.enable().mask(),
                    now,
                );
            }
        }
    }

    /// TX completions, then free descriptors filled with link output.
    fn poll_tx(&mut self, ctrl: &mut Controller, now: u64) {
        let d = self;
        let tx_head = ctrl.read32(d.reg(reg::RING_HEAD::of::<reg::TxRing>()));
        while d.tx_clean != tx_head {
            let da = reg::desc_addr(d.tx_base, d.tx_clean).expect("addr");
            let mut raw = [0u8; reg::DESC_BYTES];
            ctrl.memory_mut().read(da, &mut raw).expect("desc");
            if reg::Desc::decode(&raw).state().err().is_set() {
                d.tx_desc_errors += 1;
            }
            d.tx_clean = reg::ring_next(d.tx_clean, RING);
        }
        let mut rung = false;
        while reg::ring_next(d.tx_tail, RING) != d.tx_clean {
            let n = d.link.poll_transmit(now, &mut d.buf, &mut d.queues);
            if n == 0 {
                break;
            }
            let ba = d.tx_bufs + u64::from(d.tx_tail) * BUF as u64;
            ctrl.memory_mut().write(ba, &d.buf[..n]).expect("buf");
            let desc = reg::Desc {
                addr: ba,
                len: n as u16,
                ..Default::default()
            };
            let da = reg::desc_addr(d.tx_base, d.tx_tail).expect("addr");
            ctrl.memory_mut().write(da, &desc.encode()).expect("desc");
            d.tx_tail = reg::ring_next(d.tx_tail, RING);
            rung = true;
        }
        if rung {
            ctrl.write32(d.reg(reg::RING_TAIL::of::<reg::TxRing>()), d.tx_tail, now);
        }
    }
}

impl Driver {
    /// Queues `count` packets from port `port` to host `dst_host` (its
    /// port CNA `dst_port`, or its primary CNA if `None`).
    #[expect(
        clippy::too_many_arguments,
        reason = "test helper mirroring a traffic spec"
    )]
    pub fn send(
        &mut self,
        port: usize,
        dst_host: usize,
        dst_port: Option<usize>,
        flow: u16,
        count: u32,
        body: usize,
        rt: u8,
    ) {
        let src = addr::cna16_port(self.host, port);
        let dst = match dst_port {
            Some(p) => addr::cna16_port(dst_host, p),
            None => addr::cna16_primary(dst_host),
        };
        for seq in 0..count {
            let payload = cna16_packet(src, dst, flow as u8, flow, seq, body);
            self.ports[port].queues.q[0].push_back(Pkt {
                cfg: 6,
                rt,
                payload,
            });
        }
    }

    /// Puts one raw descriptor on `port`'s TX ring: `data` is written to
    /// the port's next TX buffer, and the descriptor says `addr` (default:
    /// that buffer) and `len` (default: `data.len()`). For feeding the
    /// device garbage.
    pub fn raw_tx(
        &mut self,
        f: &mut Fabric,
        port: usize,
        data: &[u8],
        addr: Option<u64>,
        len: Option<u16>,
        now: u64,
    ) {
        let ctrl = &mut f.hosts[self.host].ctrl;
        let d = &mut self.ports[port];
        let ba = d.tx_bufs + u64::from(d.tx_tail) * BUF as u64;
        ctrl.memory_mut()
            .write(ba, &data[..data.len().min(BUF)])
            .expect("buf");
        let desc = reg::Desc {
            addr: addr.unwrap_or(ba),
            len: len.unwrap_or(data.len() as u16),
            ..Default::default()
        };
        let da = reg::desc_addr(d.tx_base, d.tx_tail).expect("addr");
        ctrl.memory_mut().write(da, &desc.encode()).expect("desc");
        d.tx_tail = reg::ring_next(d.tx_tail, RING);
        ctrl.write32(d.reg(reg::RING_TAIL::of::<reg::TxRing>()), d.tx_tail, now);
    }

    /// Whether every port's DLL is up.
    pub fn all_up(&self) -> bool {
        self.ports
            .iter()
            .all(|p| p.link.state() == DllState::Normal)
    }

    /// Good packets received on all ports.
    pub fn received(&self) -> usize {
        self.ports.iter().map(|p| p.sink.got.len()).sum()
    }

    /// Packets still queued for sending.
    pub fn queued(&self) -> usize {
        self.ports.iter().map(PortDriver::queued).sum()
    }
}

/// Steps the fabric and the drivers every `dt` ns until `done` or
/// `limit` ns; returns the time reached.
pub fn run_until(
    f: &mut Fabric,
    drivers: &mut [Driver],
    start: u64,
    dt: u64,
    limit: u64,
    mut done: impl FnMut(&Fabric, &[Driver]) -> bool,
) -> u64 {
    let mut now = start;
    while now < limit {
        for d in drivers.iter_mut() {
            d.poll(f, now);
        }
        f.step(now);
        if done(f, drivers) {
            return now;
        }
        now += dt;
    }
    now
}

/// Probes every host and waits until every DLL is up.
pub fn bring_up(f: &mut Fabric) -> (Vec<Driver>, u64) {
    let n = f.hosts.len();
    let mut drivers: Vec<Driver> = (0..n).map(|h| Driver::probe(f, h, 0)).collect();
    let t = run_until(f, &mut drivers, 0, 1_000, 2_000_000, |_, ds| {
        ds.iter().all(Driver::all_up)
    });
    assert!(
        drivers.iter().all(Driver::all_up),
        "links did not come up by {t} ns"
    );
    (drivers, t)
}
