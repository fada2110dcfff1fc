// SPDX-License-Identifier: GPL-2.0
//! The whole emulated fabric: controllers, links (PHY model) and switches,
//! advanced by [`Fabric::step`] with an injected clock. Pure and
//! deterministic from the topology's seed; the daemon drives it with the
//! monotonic clock, tests with a virtual one.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use ub_proto::link::engine::MIN_TX_BUFFER;
use ub_proto::net::npi::Npi;
use ub_proto::net::route::RouteEntry;

use crate::device::{Controller, ControllerConfig, HostileCase, Interrupts};
use crate::forge::{ForgeArgs, ForgeSpec, Forger, DEFAULT_WITHIN_MS};
use crate::mem::GuestMemory;
use crate::phy::{Arrival, PhyParams, Wire};
use crate::switch::{Packet, Switch, SwitchFaults, SwitchParams};
use crate::topology::{addr, End, Topology};

/// A routing destination: host ports that reach it, and its prefixes
/// (address, width, prefix length).
type Dest = (Vec<usize>, Vec<(u128, u8, u8)>);

/// How far ahead of `now` a transmitter keeps its wire busy (ns).
pub const TX_HORIZON_NS: u64 = 2_000;

/// How long a link reset holds the link down (ns): 5 ms, more than a slow
/// guest driver's latency (0.1–2 ms under TCG), so that a driver that
/// samples PHY_STATUS.LINK_UP sees the link down (INT_CAUSE.LINK and
/// PHY_LINK_DOWNS record it in any case).
pub const LINK_RESET_NS: u64 = 5_000_000;

/// A host slot: one emulated controller.
#[derive(Debug)]
pub struct Host {
    /// Name.
    pub name: String,
    /// The device model.
    pub ctrl: Controller,
}

/// A link of the fabric.
#[derive(Debug)]
pub struct FabricLink {
    /// End A.
    pub a: End,
    /// End B.
    pub b: End,
    /// Wires: `[A→B, B→A]`.
    pub wires: [Wire; 2],
    /// Administratively up (link flap / port down faults clear it).
    pub admin_up: bool,
    /// PHY LinkUp.
    pub up: bool,
    /// A retrain ends at this time.
    pub training_until: Option<u64>,
    /// A link reset (a switch port's engine gave up) holds the link down
    /// until this time.
    pub reset_until: Option<u64>,
}

/// A run-time change (control socket).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Command {
    /// Counters of everything, as JSON.
    Counters,
    /// Change a link's PHY parameters (unset fields unchanged).
    Link {
        /// Either end of the link, `"node.port"`.
        link: String,
        /// Bit error rate.
        #[serde(default)]
        ber: Option<f64>,
        /// FEC failures per flit.
        #[serde(default)]
        fec_fail: Option<f64>,
        /// Propagation delay (ns).
        #[serde(default)]
        delay_ns: Option<u64>,
        /// Line rate (flits/s).
        #[serde(default)]
        rate_fps: Option<f64>,
        /// Administrative state (false = port down / cable pulled).
        #[serde(default)]
        up: Option<bool>,
        /// Take the link down and up again.
        #[serde(default)]
        flap: bool,
        /// The NPI (25 bits) the switch end of the link writes into every
        /// IP-format packet it receives from the link; 0 stops rewriting.
        #[serde(default)]
        npi_ingress: Option<u32>,
        /// The NPI the switch end writes into every IP-format packet it
        /// sends on the link; 0 stops rewriting.
        #[serde(default)]
        npi_egress: Option<u32>,
    },
    /// Change a switch's faults (unset fields unchanged).
    Switch {
        /// Switch name.
        switch: String,
        /// Drop probability.
        #[serde(default)]
        drop: Option<f64>,
        /// Corruption probability.
        #[serde(default)]
        corrupt: Option<f64>,
        /// Reordering probability.
        #[serde(default)]
        reorder: Option<f64>,
        /// Duplication probability.
        #[serde(default)]
        duplicate: Option<f64>,
    },
    /// Make a host port's controller misbehave (`Documentation/ub/fabric.rst`,
    /// "Hostile mode").
    Hostile {
        /// The host port, `"node.port"`.
        port: String,
        /// What the device does wrong.
        case: HostileCase,
        /// How many times (default 1; 0 disarms the case).
        #[serde(default)]
        count: Option<u64>,
    },
    /// Queue forged RTP data packets towards a host port
    /// (`Documentation/ub/fabric.rst`, "Forged packets"; `crate::forge`).
    /// Fields left out are taken from the channel's next data packet.
    Forge {
        /// The host port, `"node.port"`, or a host, `"node"` (whichever of
        /// its ports the channel's next packet takes).
        port: String,
        /// Destination TPN.
        dst_tpn: u32,
        /// Source address (IPv4, IPv6 or `cna24:0x...`).
        #[serde(default)]
        src: Option<String>,
        /// Destination address.
        #[serde(default)]
        dst: Option<String>,
        /// Source TPN.
        #[serde(default)]
        src_tpn: Option<u32>,
        /// PSN.
        #[serde(default)]
        psn: Option<u32>,
        /// PSN: the observed packet's plus this.
        #[serde(default)]
        psn_ahead: Option<u32>,
        /// Resend the observed packet unchanged.
        #[serde(default)]
        replay: bool,
        /// Copies (default 1).
        #[serde(default)]
        count: Option<u32>,
        /// Payload bytes.
        #[serde(default)]
        payload_len: Option<u32>,
        /// NPI (25 bits) of the forged packets (IP format only; default:
        /// the observed packet's, or the default partition).
        #[serde(default)]
        npi: Option<u32>,
        /// How long to wait for the channel's traffic, in ms (default
        /// 5000).
        #[serde(default)]
        within_ms: Option<u64>,
    },
}

/// The fabric.
pub struct Fabric {
    topo: Topology,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Switches.
    pub switches: Vec<Switch>,
    /// Links.
    pub links: Vec<FabricLink>,
    /// Link index and direction (0 = the end is A) of every end.
    ends: std::collections::HashMap<End, (usize, usize)>,
    buf: Vec<u8>,
    arrivals: Vec<Arrival>,
    packets: Vec<Packet>,
    pending_flaps: VecDeque<(u64, usize)>,
    forger: Forger,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("hosts", &self.hosts.len())
            .field("switches", &self.switches.len())
            .field("links", &self.links.len())
            .finish()
    }
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Unknown link end or switch.
    #[error("unknown {0}")]
    Unknown(String),
    /// Bad value.
    #[error("invalid value: {0}")]
    Invalid(String),
}

impl Fabric {
    /// Builds the fabric; `devices(h)` gives host `h`'s guest memory and
    /// interrupt sink.
    pub fn new(
        topo: &Topology,
        mut devices: impl FnMut(usize) -> (Box<dyn GuestMemory>, Box<dyn Interrupts>),
    ) -> Self {
        let hosts = topo
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let (mem, irq) = devices(i);
                Host {
                    name: h.name.clone(),
                    ctrl: Controller::new(
                        ControllerConfig {
                            ports: h.ports,
                            ..ControllerConfig::default()
                        },
                        mem,
                        irq,
                    ),
                }
            })
            .collect();
        let mut switches: Vec<Switch> = topo
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Switch::new(
                    &s.name,
                    s.ports as usize,
                    s.params,
                    topo.seed,
                    1000 + i as u64,
                )
            })
            .collect();
        let mut ends = std::collections::HashMap::new();
        let links = topo
            .links
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let a = topo.end(&l.a).ok()?;
                let b = topo.end(&l.b).ok()?;
                let phy = l.phy.unwrap_or(topo.phy);
                ends.insert(a, (i, 0));
                ends.insert(b, (i, 1));
                for (x, y) in [(a, b), (b, a)] {
                    if let (End::Switch(s, p), End::Host(..)) = (x, y) {
                        if let Some(sw) = switches.get_mut(s) {
                            sw.face_host(p);
                        }
                    }
                }
                Some(FabricLink {
                    a,
                    b,
                    wires: [
                        Wire::new(phy, topo.seed, 2 * i as u64),
                        Wire::new(phy, topo.seed, 2 * i as u64 + 1),
                    ],
                    admin_up: true,
                    up: false,
                    training_until: None,
                    reset_until: None,
                })
            })
            .collect();
        let mut f = Self {
            topo: topo.clone(),
            hosts,
            switches,
            links,
            ends,
            buf: vec![0; MIN_TX_BUFFER],
            arrivals: Vec::new(),
            packets: Vec::new(),
            pending_flaps: VecDeque::new(),
            forger: Forger::default(),
        };
        f.compute_routes();
        f
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    fn peer(&self, e: End) -> Option<End> {
        let &(l, dir) = self.ends.get(&e)?;
        let link = self.links.get(l)?;
        Some(if dir == 0 { link.b } else { link.a })
    }

    /// Computes every switch's routing table from the links that are up
    /// (again whenever a link goes up or down): for each
    /// destination (a host's primary addresses: any of its ports; a port's
    /// addresses: that port only), the shortest-path ports, and as "all
    /// paths" also the ports toward switches no farther from the
    /// destination (forwarding never sends a packet back where it came
    /// from).
    /// The end facing `e` over a link whose PHY is up (LinkUp); `None`
    /// if there is none or it is down.
    fn live_peer(&self, e: End) -> Option<End> {
        let &(l, _) = self.ends.get(&e)?;
        if !self.links.get(l)?.up {
            return None;
        }
        self.peer(e)
    }

    fn compute_routes(&mut self) {
        let ns = self.switches.len();
        // Switch adjacency.
        let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); ns];
        for (s, adj_s) in adj.iter_mut().enumerate() {
            for p in 0..self.switches[s].ports.len() {
                if let Some(End::Switch(t, _)) = self.live_peer(End::Switch(s, p)) {
                    adj_s.push((p, t));
                }
            }
        }
        let mut tables: Vec<Vec<RouteEntry>> = vec![Vec::new(); ns];
        for (h, host) in self.topo.hosts.iter().enumerate() {
            let np = host.ports as usize;
            let all_ports: Vec<usize> = (0..np).collect();
            let mut dests: Vec<Dest> = Vec::new();
            let v4 = |a: [u8; 4]| u128::from(u32::from_be_bytes(a));
            let v6p = addr::ipv6_port(h, 0);
            let mut v6prefix = v6p;
            v6prefix[15] = 0;
            dests.push((
                all_ports.clone(),
                vec![
                    (u128::from(addr::cna16_primary(h)), 16, 8),
                    (u128::from(addr::cna24_primary(h)), 24, 16),
                    (v4(addr::ipv4_primary(h)), 32, 24),
                    (u128::from_be_bytes(v6prefix), 128, 120),
                ],
            ));
            for p in 0..np {
                dests.push((
                    vec![p],
                    vec![
                        (u128::from(addr::cna16_port(h, p)), 16, 16),
                        (u128::from(addr::cna24_port(h, p)), 24, 24),
                        (v4(addr::ipv4_port(h, p)), 32, 32),
                        (u128::from_be_bytes(addr::ipv6_port(h, p)), 128, 128),
                    ],
                ));
            }
            for (ports, prefixes) in dests {
                // Attachment points: (switch, port) facing the host ports.
                let mut dist = vec![u32::MAX; ns];
                let mut attach: Vec<Vec<usize>> = vec![Vec::new(); ns];
                let mut queue = VecDeque::new();
                for &hp in &ports {
                    if let Some(End::Switch(s, sp)) = self.live_peer(End::Host(h, hp)) {
                        attach[s].push(sp);
                        dist[s] = 1;
                        queue.push_back(s);
                    }
                }
                while let Some(s) = queue.pop_front() {
                    for &(_, t) in &adj[s] {
                        if dist[t] == u32::MAX {
                            dist[t] = dist[s] + 1;
                            queue.push_back(t);
                        }
                    }
                }
                for s in 0..ns {
                    if dist[s] == u32::MAX {
                        continue;
                    }
                    let mut shortest = 0u64;
                    let mut all = 0u64;
                    for &sp in &attach[s] {
                        shortest |= 1 << sp;
                        all |= 1 << sp;
                    }
                    for &(p, t) in &adj[s] {
                        if dist[t] == u32::MAX {
                            continue;
                        }
                        if dist[t] + 1 == dist[s] && attach[s].is_empty() {
                            shortest |= 1 << p;
                        }
                        if dist[t] <= dist[s] {
                            all |= 1 << p;
                        }
                    }
                    for &(prefix, width, len) in &prefixes {
                        tables[s].push(RouteEntry {
                            prefix,
                            prefix_len: len,
                            width,
                            ports: all,
                            shortest,
                        });
                    }
                }
            }
        }
        for (s, t) in tables.into_iter().enumerate() {
            self.switches[s].routes = t;
        }
    }

    fn end_enabled(&self, e: End) -> bool {
        match e {
            End::Host(h, p) => self.hosts.get(h).is_some_and(|x| x.ctrl.port_enabled(p)),
            End::Switch(..) => true,
        }
    }

    fn set_end_link(&mut self, e: End, up: bool, now: u64, rate: f64) {
        match e {
            End::Host(h, p) => {
                if let Some(x) = self.hosts.get_mut(h) {
                    x.ctrl.set_line_rate(p, rate);
                    x.ctrl.set_link(p, up);
                    if !up {
                        x.ctrl.flush_rx(p);
                    }
                }
            }
            End::Switch(s, p) => {
                if let Some(sw) = self.switches.get_mut(s) {
                    if let Some(port) = sw.ports.get_mut(p) {
                        port.phy_up = up;
                        if up {
                            port.link.link_up(now);
                        } else {
                            port.link.link_down(now);
                        }
                    }
                    if !up {
                        sw.flush_port(p);
                    }
                }
            }
        }
    }

    /// Takes a switch port's link reset request (hosts reset a link by
    /// cycling PHY_CTRL.ENABLE).
    fn take_reset(&mut self, e: End) -> bool {
        match e {
            End::Host(..) => false,
            End::Switch(s, p) => self
                .switches
                .get_mut(s)
                .and_then(|w| w.ports.get_mut(p))
                .is_some_and(|port| port.link.take_reset_request()),
        }
    }

    /// Whether link `l` should be up: administratively up, not held down
    /// by a link reset, both ends enabled.
    fn want_up(&self, l: &FabricLink) -> bool {
        l.admin_up && l.reset_until.is_none() && self.end_enabled(l.a) && self.end_enabled(l.b)
    }

    fn take_retrain(&mut self, e: End) -> bool {
        match e {
            End::Host(h, p) => self
                .hosts
                .get_mut(h)
                .is_some_and(|x| x.ctrl.take_retrain_request(p)),
            End::Switch(s, p) => self
                .switches
                .get_mut(s)
                .and_then(|w| w.ports.get_mut(p))
                .is_some_and(|port| port.link.take_retrain_request()),
        }
    }

    fn retrain_done(&mut self, e: End, now: u64) {
        match e {
            End::Host(h, p) => {
                if let Some(x) = self.hosts.get_mut(h) {
                    x.ctrl.retrain_done(p);
                }
            }
            End::Switch(s, p) => {
                if let Some(port) = self.switches.get_mut(s).and_then(|w| w.ports.get_mut(p)) {
                    port.link.retrained(now);
                }
            }
        }
    }

    /// Advances the fabric to `now` (nanoseconds, non-decreasing).
    pub fn step(&mut self, now: u64) {
        // Scheduled flaps come back up.
        while let Some(&(t, l)) = self.pending_flaps.front() {
            if t > now {
                break;
            }
            self.pending_flaps.pop_front();
            if let Some(link) = self.links.get_mut(l) {
                link.admin_up = true;
            }
        }
        // PHY state: LinkUp, retrains.
        let mut topology_changed = false;
        for l in 0..self.links.len() {
            let (a, b) = (self.links[l].a, self.links[l].b);
            // Both ends' requests are taken (each port resets itself).
            let (reset_a, reset_b) = (self.take_reset(a), self.take_reset(b));
            if reset_a || reset_b {
                self.links[l].reset_until = Some(now + LINK_RESET_NS);
            } else if self.links[l].reset_until.is_some_and(|t| now >= t) {
                self.links[l].reset_until = None;
            }
            let want = self.want_up(&self.links[l]);
            if want != self.links[l].up {
                topology_changed = true;
                self.links[l].up = want;
                self.links[l].training_until = None;
                for w in &mut self.links[l].wires {
                    w.flush(now);
                }
                let rate = self.links[l].wires[0].params.rate_fps;
                self.set_end_link(a, want, now, rate);
                self.set_end_link(b, want, now, rate);
            }
            if !self.links[l].up {
                // Requests on a down link are dropped.
                self.take_retrain(a);
                self.take_retrain(b);
                continue;
            }
            let ra = self.take_retrain(a);
            let rb = self.take_retrain(b);
            if (ra || rb) && self.links[l].training_until.is_none() {
                let link = &mut self.links[l];
                let dur = link.wires[0].params.retrain_ns;
                link.training_until = Some(now + dur);
                for w in &mut link.wires {
                    w.flush(now);
                }
            }
            if let Some(t) = self.links[l].training_until {
                if now >= t {
                    self.links[l].training_until = None;
                    self.retrain_done(a, now);
                    self.retrain_done(b, now);
                }
            }
        }
        // The fabric manager's view: routes only over links that are up,
        // so that no switch sends a packet toward a switch whose only
        // way to the destination is a pulled cable.
        if topology_changed {
            self.compute_routes();
        }
        // Deliveries.
        for l in 0..self.links.len() {
            for dir in 0..2 {
                let to = if dir == 0 {
                    self.links[l].b
                } else {
                    self.links[l].a
                };
                let mut arr = std::mem::take(&mut self.arrivals);
                arr.clear();
                self.links[l].wires[dir].receive(now, &mut arr);
                for a in arr.drain(..) {
                    self.arrive(to, a, now);
                }
                self.arrivals = arr;
            }
        }
        self.forger.expire(now);
        // Switch timers and held packets.
        for sw in &mut self.switches {
            for port in &mut sw.ports {
                if port.link.poll_timeout().is_some_and(|d| d <= now) {
                    port.link.handle_timeout(now);
                }
            }
            sw.release_held(now);
        }
        // Transmissions.
        for l in 0..self.links.len() {
            if !self.links[l].up || self.links[l].training_until.is_some() {
                continue;
            }
            for dir in 0..2 {
                let from = if dir == 0 {
                    self.links[l].a
                } else {
                    self.links[l].b
                };
                self.transmit(l, dir, from, now);
            }
        }
        // Controllers: RX buffers and interrupts.
        for h in &mut self.hosts {
            h.ctrl.service_rx();
            h.ctrl.update_irqs(now);
        }
    }

    fn arrive(&mut self, to: End, a: Arrival, now: u64) {
        match to {
            End::Host(h, p) => {
                let Some(x) = self.hosts.get_mut(h) else {
                    return;
                };
                match a {
                    Arrival::Data(d) => x.ctrl.push_rx(p, 0, &d),
                    Arrival::Lost(n) => {
                        x.ctrl.phy_errors(p, 0, 1);
                        x.ctrl.push_rx(p, n, &[]);
                    }
                }
            }
            End::Switch(s, p) => {
                let Some(sw) = self.switches.get_mut(s) else {
                    return;
                };
                let mut pkts = std::mem::take(&mut self.packets);
                if let Some(port) = sw.ports.get_mut(p) {
                    match a {
                        Arrival::Data(d) => port.link.handle_receive(now, &d, &mut pkts),
                        Arrival::Lost(n) => port.link.receive_error(now, n),
                    }
                }
                for pkt in pkts.drain(..) {
                    // A copy only while a forgery waits for this packet.
                    let seen = self.forger.wants(s, &pkt).then(|| pkt.clone());
                    let out = sw.forward(now, p, pkt);
                    if let (Some(seen), Some(out)) = (seen, out) {
                        let forged = self.forger.observe(s, out, &seen);
                        // The genuine packet was just queued there, so
                        // the port is up.
                        let _ = sw.inject(out, forged);
                    }
                }
                self.packets = pkts;
            }
        }
    }

    fn transmit(&mut self, l: usize, dir: usize, from: End, now: u64) {
        let horizon = now + TX_HORIZON_NS;
        let mut rounds = 0;
        while self.links[l].wires[dir].busy_until() <= horizon && rounds < 64 {
            rounds += 1;
            let n = match from {
                End::Host(h, p) => {
                    let mut out = std::mem::take(&mut self.buf);
                    out.clear();
                    if let Some(x) = self.hosts.get_mut(h) {
                        x.ctrl.pull_tx(p, 4096, &mut out);
                    }
                    let n = out.len();
                    if n > 0 {
                        self.links[l].wires[dir].send(now, &out);
                    }
                    out.resize(MIN_TX_BUFFER, 0);
                    self.buf = out;
                    n
                }
                End::Switch(s, p) => {
                    let Some(port) = self.switches.get_mut(s).and_then(|w| w.ports.get_mut(p))
                    else {
                        return;
                    };
                    self.buf.resize(MIN_TX_BUFFER, 0);
                    let n = port
                        .link
                        .poll_transmit(now, &mut self.buf, &mut port.egress);
                    if n > 0 {
                        self.links[l].wires[dir].send(now, &self.buf[..n]);
                    }
                    n
                }
            };
            if n == 0 {
                break;
            }
        }
        // PHY error monitor of the receiving end.
        let to = if dir == 0 {
            self.links[l].b
        } else {
            self.links[l].a
        };
        if let End::Host(h, p) = to {
            let bits = std::mem::take(&mut self.links[l].wires[dir].unreported_flips);
            if bits > 0 {
                if let Some(x) = self.hosts.get_mut(h) {
                    x.ctrl.phy_errors(p, bits, 0);
                }
            }
        }
    }

    /// The earliest time something is due (arrival, timer, retrain,
    /// moderated interrupt), for event-driven stepping.
    pub fn next_event(&self) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut upd = |x: Option<u64>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        for l in &self.links {
            upd(l.wires[0].next_arrival());
            upd(l.wires[1].next_arrival());
            upd(l.training_until);
            upd(l.reset_until);
        }
        for s in &self.switches {
            for p in &s.ports {
                upd(p.link.poll_timeout());
            }
        }
        for h in &self.hosts {
            upd(h.ctrl.next_irq_deadline());
        }
        t
    }

    /// Whether a step right now could change anything (something in
    /// flight, queued, due or requested); the daemon sleeps longer
    /// otherwise.
    pub fn busy(&self) -> bool {
        self.next_event().is_some()
            || self.hosts.iter().any(|h| h.ctrl.busy())
            || self
                .switches
                .iter()
                .any(|s| s.ports.iter().any(|p| !p.egress.is_empty()))
            || !self.pending_flaps.is_empty()
            || self.links.iter().any(|l| l.up != self.want_up(l))
    }

    /// Counters of every host port, switch and link, as JSON.
    pub fn counters(&self) -> Value {
        let hosts: Vec<Value> = self
            .hosts
            .iter()
            .map(|h| {
                let ports: Vec<Value> = (0..h.ctrl.ports())
                    .map(|p| {
                        let mut v = json!(h.ctrl.port_counters(p));
                        if let Value::Object(m) = &mut v {
                            m.insert("hostile".into(), json!(h.ctrl.hostile(p)));
                        }
                        v
                    })
                    .collect();
                json!({"name": h.name, "device": h.ctrl.counters(), "ports": ports})
            })
            .collect();
        let switches: Vec<Value> = self
            .switches
            .iter()
            .map(|s| {
                let ports: Vec<Value> = s
                    .ports
                    .iter()
                    .map(|p| json!({"link": p.link.counters(), "queued": p.egress.len()}))
                    .collect();
                json!({"name": s.name, "counters": s.counters, "ports": ports})
            })
            .collect();
        let links: Vec<Value> = self
            .links
            .iter()
            .map(|l| {
                json!({
                    "a": self.topo.end_name(l.a),
                    "b": self.topo.end_name(l.b),
                    "up": l.up,
                    "a_to_b": l.wires[0].counters,
                    "b_to_a": l.wires[1].counters,
                })
            })
            .collect();
        json!({"hosts": hosts, "switches": switches, "links": links, "forge": self.forger.to_json()})
    }

    /// Sets what the switch end of link `l` writes into the NPI of the
    /// IP-format packets it receives and sends (`Some(0)` stops, `None`
    /// leaves it). Checked before anything changes.
    fn set_link_npi(
        &mut self,
        l: usize,
        ingress: Option<u32>,
        egress: Option<u32>,
    ) -> Result<(), CommandError> {
        let npi = |v: u32, name: &str| -> Result<Option<Npi>, CommandError> {
            match Npi::try_from_raw(v) {
                _ if v == 0 => Ok(None),
                Some(n) => Ok(Some(n)),
                None => Err(CommandError::Invalid(format!(
                    "{name} {v:#x}: an NPI is 25 bits"
                ))),
            }
        };
        let ingress = ingress.map(|v| npi(v, "npi_ingress")).transpose()?;
        let egress = egress.map(|v| npi(v, "npi_egress")).transpose()?;
        let lk = self
            .links
            .get(l)
            .ok_or_else(|| CommandError::Unknown(format!("link {l}")))?;
        let Some((s, p)) = [lk.a, lk.b].into_iter().find_map(|e| match e {
            End::Switch(s, p) => Some((s, p)),
            End::Host(..) => None,
        }) else {
            return Err(CommandError::Invalid(
                "npi: the link has no switch end (only a switch rewrites NPIs)".into(),
            ));
        };
        let sw = self
            .switches
            .get_mut(s)
            .ok_or_else(|| CommandError::Unknown(format!("switch {s}")))?;
        let (cur_in, cur_out) = sw
            .ports
            .get(p)
            .map(|x| (x.npi_ingress, x.npi_egress))
            .unwrap_or_default();
        sw.set_port_npi(p, ingress.unwrap_or(cur_in), egress.unwrap_or(cur_out));
        Ok(())
    }

    /// Applies a control command; returns its JSON answer.
    pub fn apply(&mut self, cmd: &Command, now: u64) -> Result<Value, CommandError> {
        match cmd {
            Command::Counters => Ok(self.counters()),
            Command::Link {
                link,
                ber,
                fec_fail,
                delay_ns,
                rate_fps,
                up,
                flap,
                npi_ingress,
                npi_egress,
            } => {
                let e = self
                    .topo
                    .end(link)
                    .map_err(|_| CommandError::Unknown(format!("link end {link}")))?;
                let &(l, _) = self
                    .ends
                    .get(&e)
                    .ok_or_else(|| CommandError::Unknown(format!("link at {link}")))?;
                // Everything is checked before anything changes: a refused
                // command leaves the link as it was.
                let mut p: PhyParams = self.links[l].wires[0].params;
                if let Some(b) = ber {
                    if !(0.0..=1.0).contains(b) {
                        return Err(CommandError::Invalid("ber".into()));
                    }
                    p.ber = *b;
                }
                if let Some(f) = fec_fail {
                    if !(0.0..=1.0).contains(f) {
                        return Err(CommandError::Invalid("fec_fail".into()));
                    }
                    p.fec_fail = *f;
                }
                if let Some(d) = delay_ns {
                    p.delay_ns = *d;
                }
                if let Some(r) = rate_fps {
                    if r.is_nan() || *r <= 0.0 {
                        return Err(CommandError::Invalid("rate_fps".into()));
                    }
                    p.rate_fps = *r;
                }
                // The last check (and the NPIs' own change, made only
                // once they are all valid).
                if npi_ingress.is_some() || npi_egress.is_some() {
                    self.set_link_npi(l, *npi_ingress, *npi_egress)?;
                }
                let lk = &mut self.links[l];
                for w in &mut lk.wires {
                    w.set_params(p);
                }
                let (ea, eb) = (lk.a, lk.b);
                for e in [ea, eb] {
                    if let End::Host(h, port) = e {
                        if let Some(x) = self.hosts.get_mut(h) {
                            x.ctrl.set_line_rate(port, p.rate_fps);
                        }
                    }
                }
                let lk = &mut self.links[l];
                if let Some(u) = up {
                    lk.admin_up = *u;
                }
                if *flap {
                    lk.admin_up = false;
                    self.pending_flaps.push_back((now + 100_000, l));
                }
                Ok(json!({"ok": true, "phy": p}))
            }
            Command::Switch {
                switch,
                drop,
                corrupt,
                reorder,
                duplicate,
            } => {
                let sw = self
                    .switches
                    .iter_mut()
                    .find(|s| &s.name == switch)
                    .ok_or_else(|| CommandError::Unknown(format!("switch {switch}")))?;
                let mut params: SwitchParams = sw.params;
                let f: &mut SwitchFaults = &mut params.faults;
                for (dst, src) in [
                    (&mut f.drop, drop),
                    (&mut f.corrupt, corrupt),
                    (&mut f.reorder, reorder),
                    (&mut f.duplicate, duplicate),
                ] {
                    if let Some(v) = src {
                        if !(0.0..=1.0).contains(v) {
                            return Err(CommandError::Invalid("probability".into()));
                        }
                        *dst = *v;
                    }
                }
                sw.set_params(params);
                Ok(json!({"ok": true, "faults": params.faults}))
            }
            Command::Hostile { port, case, count } => {
                let e = self.topo.end(port).ok();
                let Some(End::Host(h, p)) = e else {
                    return Err(CommandError::Unknown(format!(
                        "host port {port} (the hostile mode is a controller's)"
                    )));
                };
                let count = count.unwrap_or(1);
                let seed = self.topo.seed;
                let ctrl = &mut self.hosts[h].ctrl;
                ctrl.set_hostile(p, *case, count, seed)
                    .map_err(|e| CommandError::Invalid(e.to_string()))?;
                Ok(json!({
                    "ok": true,
                    "port": port,
                    "case": case,
                    "armed": count,
                    "hostile": ctrl.hostile(p),
                }))
            }
            Command::Forge {
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
                // A host port, or a host: whichever of its ports the
                // channel's traffic takes.
                let ports: Vec<End> = match self.topo.end(port) {
                    Ok(e @ End::Host(..)) => vec![e],
                    _ => match self.topo.hosts.iter().position(|h| &h.name == port) {
                        Some(h) => (0..self.topo.hosts[h].ports as usize)
                            .map(|p| End::Host(h, p))
                            .collect(),
                        None => {
                            return Err(CommandError::Unknown(format!(
                                "host or host port {port} (forged packets go to a host)"
                            )))
                        }
                    },
                };
                let at: Vec<(usize, usize)> = ports
                    .iter()
                    .filter_map(|&e| match self.peer(e) {
                        Some(End::Switch(s, sp)) => Some((s, sp)),
                        _ => None,
                    })
                    .collect();
                let Some(&(s, sp)) = at.first() else {
                    return Err(CommandError::Invalid(format!(
                        "{port} faces no switch (forged packets are queued at the switch port facing it)"
                    )));
                };
                let spec = ForgeSpec::new(&ForgeArgs {
                    dst_tpn: *dst_tpn,
                    src: src.as_deref(),
                    dst: dst.as_deref(),
                    src_tpn: *src_tpn,
                    psn: *psn,
                    psn_ahead: *psn_ahead,
                    replay: *replay,
                    count: *count,
                    payload_len: *payload_len,
                    npi: *npi,
                })
                .map_err(|e| CommandError::Invalid(e.to_string()))?;
                if spec.complete() {
                    if ports.len() != 1 {
                        return Err(CommandError::Invalid(format!(
                            "{port}: a packet built from its fields goes to one host port (node.port)"
                        )));
                    }
                    if within_ms.is_some() {
                        return Err(CommandError::Invalid(
                            "within_ms: a packet built from its fields is sent at once".into(),
                        ));
                    }
                    let via = self.topo.end_name(End::Switch(s, sp));
                    let pkt = spec
                        .build()
                        .map_err(|e| CommandError::Invalid(e.to_string()))?;
                    let pkts = vec![pkt; spec.count as usize];
                    let n = self.switches[s]
                        .inject(sp, pkts)
                        .map_err(|e| CommandError::Invalid(format!("{via}: {e}")))?;
                    self.forger.counters.injected += n as u64;
                    return Ok(json!({"ok": true, "port": port, "via": via, "injected": n}));
                }
                let via: Vec<String> = at
                    .iter()
                    .map(|&(s, sp)| self.topo.end_name(End::Switch(s, sp)))
                    .collect();
                self.forger
                    .arm(
                        spec.clone(),
                        port,
                        at,
                        now,
                        within_ms.unwrap_or(DEFAULT_WITHIN_MS),
                    )
                    .map_err(|e| CommandError::Invalid(e.to_string()))?;
                Ok(json!({"ok": true, "port": port, "via": via, "armed": spec.to_json()}))
            }
        }
    }
}
