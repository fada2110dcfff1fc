// SPDX-License-Identifier: GPL-2.0
//! An in-process test double of the `ub.ko` driver side: it programs a
//! controller through its BAR0 registers, keeps TX/RX descriptor rings in
//! (fake) guest memory, and runs the `ub-proto` data link engine on each
//! port in software, as the real driver does. Traffic: 16-bit CNA packets
//! carrying a flow id and a sequence number, sealed with an ICRC.

#![allow(dead_code, reason = "each test binary uses part of the helpers")]

use std::collections::VecDeque;

use ub_fabric::device::{Controller, RecordingIrqs};
use ub_fabric::fabric::Fabric;
use ub_fabric::mem::FakeMemory;
use ub_fabric::topology::{addr, Topology};
use ub_proto::controller as reg;
use ub_proto::crc::crc32_le_portable;
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
    buf: Vec<u8>,
}

impl PortDriver {
    fn reg(&self, r: u32) -> u32 {
        reg::port_reg(self.port, r).expect("port")
    }
}

/// The driver double of one controller.
pub struct Driver {
    pub host: usize,
    pub ports: Vec<PortDriver>,
}

impl Driver {
    /// Probes host `host`: checks the IDs, enables the device, sets up
    /// rings on every port, unmasks interrupts and enables the ports.
    pub fn probe(f: &mut Fabric, host: usize, now: u64) -> Self {
        let ctrl = &mut f.hosts[host].ctrl;
        assert_eq!(ctrl.read32(reg::REG_IDENT), reg::IDENT_VALUE);
        assert_eq!(ctrl.read32(reg::REG_VERSION), reg::VERSION_VALUE);
        let nports = ctrl.read32(reg::REG_CAP_PORTS);
        ctrl.write32(reg::REG_CTRL, reg::CTRL_ENABLE, now);
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
                buf: vec![0; BUF],
            };
            let w = |ctrl: &mut Controller, r: u32, v: u32| {
                ctrl.write32(reg::port_reg(p, r).expect("reg"), v, now)
            };
            w(ctrl, reg::P_TX_BASE_LO, d.tx_base as u32);
            w(ctrl, reg::P_TX_BASE_HI, (d.tx_base >> 32) as u32);
            w(ctrl, reg::P_TX_SIZE, RING);
            w(ctrl, reg::P_TX_CTRL, reg::RING_ENABLE);
            w(ctrl, reg::P_RX_BASE_LO, d.rx_base as u32);
            w(ctrl, reg::P_RX_BASE_HI, (d.rx_base >> 32) as u32);
            w(ctrl, reg::P_RX_SIZE, RING);
            w(ctrl, reg::P_RX_CTRL, reg::RING_ENABLE);
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
            w(ctrl, reg::P_RX_TAIL, RING - 1);
            w(ctrl, reg::P_INT_MASK, 0);
            w(ctrl, reg::P_PHY_CTRL, reg::PHYC_ENABLE);
            ports.push(d);
        }
        Self { host, ports }
    }

    /// One pass of the driver: link state, interrupts, RX, timers, TX.
    pub fn poll(&mut self, f: &mut Fabric, now: u64) {
        let ctrl = &mut f.hosts[self.host].ctrl;
        for d in &mut self.ports {
            let phy = ctrl.read32(d.reg(reg::P_PHY_STATUS));
            let up = phy & reg::PHY_LINK_UP != 0;
            if up && d.link.state() == DllState::Disabled {
                d.link.link_up(now);
            } else if !up && d.link.state() != DllState::Disabled {
                d.link.link_down(now, &mut d.sink);
                for q in &mut d.queues.q {
                    q.clear();
                }
            }
            let cause = ctrl.read32(d.reg(reg::P_INT_CAUSE));
            ctrl.write32(d.reg(reg::P_INT_CAUSE), cause, now);
            if cause & reg::INT_RETRAIN_DONE != 0 {
                d.link.phy_retrained(now);
            }
            // RX completions.
            let head = ctrl.read32(d.reg(reg::P_RX_HEAD));
            let mut posted = 0;
            while d.rx_next != head {
                let da = reg::desc_addr(d.rx_base, d.rx_next).expect("addr");
                let mut raw = [0u8; reg::DESC_BYTES];
                ctrl.memory_mut().read(da, &mut raw).expect("desc");
                let desc = reg::Desc::decode(&raw);
                if desc.status & reg::DESC_LOST != 0 {
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
                ctrl.write32(d.reg(reg::P_RX_TAIL), d.rx_tail, now);
            }
            if d.link.poll_timeout().is_some_and(|t| t <= now) {
                d.link.handle_timeout(now);
            }
            while let Some(ev) = d.link.poll_event() {
                if ev == Event::RetrainRequest {
                    d.retrain_requests += 1;
                    ctrl.write32(
                        d.reg(reg::P_PHY_CTRL),
                        reg::PHYC_ENABLE | reg::PHYC_RETRAIN,
                        now,
                    );
                }
            }
            // TX completions.
            let tx_head = ctrl.read32(d.reg(reg::P_TX_HEAD));
            while d.tx_clean != tx_head {
                let da = reg::desc_addr(d.tx_base, d.tx_clean).expect("addr");
                let mut raw = [0u8; reg::DESC_BYTES];
                ctrl.memory_mut().read(da, &mut raw).expect("desc");
                if reg::Desc::decode(&raw).status & reg::DESC_ERR != 0 {
                    d.tx_desc_errors += 1;
                }
                d.tx_clean = reg::ring_next(d.tx_clean, RING);
            }
            // TX: fill free descriptors with engine output.
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
                ctrl.write32(d.reg(reg::P_TX_TAIL), d.tx_tail, now);
            }
        }
    }

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
        ctrl.write32(d.reg(reg::P_TX_TAIL), d.tx_tail, now);
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
        self.ports
            .iter()
            .map(|p| p.queues.q.iter().map(VecDeque::len).sum::<usize>())
            .sum()
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
