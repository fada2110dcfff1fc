// SPDX-License-Identifier: GPL-2.0
//! Links come back after a host's ports are cycled, with a slow guest.
//!
//! The QEMU guests run the link engine in a work item with latencies of
//! 0.1–2 ms (TCG) and with the guest driver's timeouts, while the
//! fabric's switch ports step every 20 µs with the engine's defaults.
//! These tests play that: the driver double polls every 0.5–2 ms (seeded)
//! with the guest's `LinkConfig`, the fabric steps every 20 µs, and a
//! host's ports go through PHY disable → enable (a module unload and
//! load, or a bare PHY cycle) with gaps of 0, 10 µs, 1 ms and 50 ms.
//! After each enable every link must be back in DLL_Normal within
//! [`UP_BOUND_NS`] on both ends, and carry packets at the end.

mod common;

use common::{fabric, Driver, SplitMix};
use ub_fabric::fabric::{Command, Fabric};
use ub_fabric::topology::Topology;
use ub_proto::controller as reg;
use ub_proto::link::engine::{Link, LinkConfig};
use ub_proto::link::retry::RetrySlot;
use ub_proto::link::DllState;

/// The fabric's step (the daemon's `--tick-us` 20).
const STEP_NS: u64 = 20_000;
/// Shortest and longest gap between two polls of a guest's driver.
const POLL_MIN_NS: u64 = 500_000;
const POLL_MAX_NS: u64 = 2_000_000;
/// Every link is back in DLL_Normal this long after the enable.
const UP_BOUND_NS: u64 = 100_000_000;
/// Gaps between the PHY disable and the enable.
const GAPS_NS: [u64; 4] = [0, 10_000, 1_000_000, 50_000_000];

/// The guest driver's link configuration: the engine's defaults but for
/// its timeouts, sized for a work item that runs 0.1–2 ms late.
fn guest_link_config() -> LinkConfig {
    LinkConfig {
        wait_timeout_ns: 2_000_000,
        credit_return_delay_ns: 200_000,
        credit_timeout_ns: 500_000_000,
        ..LinkConfig::default()
    }
}

/// One guest: its driver while loaded, when it polls next, and the
/// PHY_LINK_DOWNS it last read per port.
struct Guest {
    drv: Option<Driver>,
    next_poll: u64,
    link_downs: Vec<u32>,
}

/// The default topology with slow guests on both hosts.
struct Sim {
    f: Fabric,
    guests: Vec<Guest>,
    now: u64,
    rng: SplitMix,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let topo = Topology::builtin("default").expect("default");
        let f = fabric(&topo);
        let n = f.hosts.len();
        let mut sim = Self {
            f,
            guests: (0..n)
                .map(|_| Guest {
                    drv: None,
                    next_poll: 0,
                    link_downs: Vec::new(),
                })
                .collect(),
            now: 0,
            rng: SplitMix(seed),
        };
        for h in 0..n {
            sim.load(h);
        }
        sim
    }

    fn poll_gap(&mut self) -> u64 {
        POLL_MIN_NS + self.rng.next_u64() % (POLL_MAX_NS - POLL_MIN_NS + 1)
    }

    /// Module load: the probe resets the controller (as `ub.ko`'s probe
    /// does), sets up the rings and enables the PHY; the engines run the
    /// guest's configuration. The first poll comes one poll gap later.
    fn load(&mut self, h: usize) {
        let now = self.now;
        let ctrl = &mut self.f.hosts[h].ctrl;
        ctrl.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.reset().mask(), now);
        let mut d = Driver::probe(&mut self.f, h, now);
        for p in &mut d.ports {
            p.link = Link::new(guest_link_config(), vec![RetrySlot::EMPTY; 1024]).expect("engine");
        }
        self.guests[h].link_downs = d.ports.iter().map(|_| 0).collect();
        self.guests[h].drv = Some(d);
        self.guests[h].next_poll = now + self.poll_gap();
        self.notice_link_downs(h);
    }

    /// Module unload: PHY_CTRL = 0 on every port; the engines are gone.
    fn unload(&mut self, h: usize) {
        self.phy_all(h, false);
        self.guests[h].drv = None;
    }

    /// Writes PHY_CTRL.ENABLE = `on` on every port of host `h`.
    fn phy_all(&mut self, h: usize, on: bool) {
        let now = self.now;
        let ctrl = &mut self.f.hosts[h].ctrl;
        let ports = ctrl.read32(reg::CAP_PORTS::OFFSET);
        let v = if on {
            reg::PHY_CTRL::ZERO.enable().mask()
        } else {
            0
        };
        for p in 0..ports {
            ctrl.write32(
                reg::port_reg(p, reg::PHY_CTRL::OFFSET).expect("reg"),
                v,
                now,
            );
        }
    }

    /// What a driver that polls late must do besides sampling
    /// PHY_STATUS.LINK_UP: a link that went down and came back between two
    /// looks (PHY_LINK_DOWNS moved; INT_CAUSE.LINK says the same) is a
    /// link down for the engine, followed by a link up.
    fn notice_link_downs(&mut self, h: usize) {
        let now = self.now;
        let g = &mut self.guests[h];
        let Some(d) = g.drv.as_mut() else { return };
        let ctrl = &mut self.f.hosts[h].ctrl;
        for (p, seen) in d.ports.iter_mut().zip(g.link_downs.iter_mut()) {
            let r = reg::port_reg(p.port, reg::PHY_LINK_DOWNS::OFFSET).expect("reg");
            let downs = ctrl.read32(r);
            if downs != *seen {
                *seen = downs;
                if p.link.state() != DllState::Disabled {
                    p.link.link_down(now, &mut p.sink);
                    for q in &mut p.queues.q {
                        q.clear();
                    }
                }
            }
        }
    }

    /// One fabric step; each loaded guest polls when its time has come.
    fn step(&mut self) {
        for h in 0..self.guests.len() {
            if self.guests[h].drv.is_some() && self.now >= self.guests[h].next_poll {
                self.notice_link_downs(h);
                let now = self.now;
                if let Some(d) = self.guests[h].drv.as_mut() {
                    d.poll(&mut self.f, now);
                }
                self.guests[h].next_poll = now + self.poll_gap();
            }
        }
        self.f.step(self.now);
        self.now += STEP_NS;
    }

    fn run_for(&mut self, ns: u64) {
        let end = self.now + ns;
        while self.now < end {
            self.step();
        }
    }

    /// Steps until every link is up or `ns` passed; returns whether they
    /// came up.
    fn run_until_up(&mut self, ns: u64) -> bool {
        let end = self.now + ns;
        while self.now < end {
            self.step();
            if self.all_up() {
                return true;
            }
        }
        false
    }

    /// Every guest port and every switch port in DLL_Normal.
    fn all_up(&self) -> bool {
        self.guests
            .iter()
            .all(|g| g.drv.as_ref().is_some_and(Driver::all_up))
            && self
                .f
                .switches
                .iter()
                .all(|s| s.ports.iter().all(|p| p.link.is_up()))
    }

    /// What each end of each link is doing, for the failure message.
    fn report(&self) -> String {
        let mut s = String::new();
        for (h, g) in self.guests.iter().enumerate() {
            for p in g.drv.iter().flat_map(|d| &d.ports) {
                let c = p.link.counters();
                s += &format!(
                    "\n  host {h} port {}: {} {:?} poll_timeout {:?} tx_blocks {} \
                     rx_flits {} rx_blocks {} retry_req_sets {} retrains {}",
                    p.port,
                    p.link.state().name(),
                    p.link.retry_req_state(),
                    p.link.poll_timeout(),
                    c.tx_blocks,
                    c.rx_flits,
                    c.rx_blocks,
                    c.retry_req_sets,
                    c.retrains,
                );
            }
        }
        for sw in &self.f.switches {
            for (i, p) in sw.ports.iter().enumerate() {
                s += &format!("\n  {}.{i}: {:?}", sw.name, p.link.counters());
            }
        }
        s
    }

    /// vm0 sends `n` packets per port to vm1's port CNAs; all arrive.
    fn traffic(&mut self, n: u32, flow: u16) {
        let before = self.guests[1].drv.as_ref().expect("vm1").received();
        let d0 = self.guests[0].drv.as_mut().expect("vm0");
        d0.send(0, 1, Some(0), flow, n, 200, 0);
        d0.send(1, 1, Some(1), flow + 1, n, 200, 0);
        let want = before + 2 * n as usize;
        let end = self.now + 200_000_000;
        while self.now < end && self.guests[1].drv.as_ref().expect("vm1").received() < want {
            self.step();
        }
        assert_eq!(
            self.guests[1].drv.as_ref().expect("vm1").received(),
            want,
            "packets lost after the cycles:{}",
            self.report()
        );
    }
}

/// PHY_LINK_DOWNS of every port of host `h`.
fn link_downs(sim: &mut Sim, h: usize) -> Vec<u32> {
    let ctrl = &mut sim.f.hosts[h].ctrl;
    let ports = ctrl.read32(reg::CAP_PORTS::OFFSET);
    (0..ports)
        .map(|p| ctrl.read32(reg::port_reg(p, reg::PHY_LINK_DOWNS::OFFSET).expect("reg")))
        .collect()
}

fn assert_up_after(sim: &mut Sim, what: &str) {
    let t0 = sim.now;
    let up = sim.run_until_up(UP_BOUND_NS);
    assert!(
        up,
        "{what}: links not back in DLL_Normal {} ms after the enable:{}",
        (sim.now - t0) / 1_000_000,
        sim.report()
    );
}

/// A slow guest's links come up at all.
#[test]
fn slow_guests_bring_their_links_up() {
    for seed in 1..=4 {
        let mut sim = Sim::new(seed);
        assert_up_after(&mut sim, &format!("seed {seed}: first load"));
        for p in sim
            .guests
            .iter()
            .flat_map(|g| g.drv.iter().flat_map(|d| &d.ports))
        {
            assert_eq!(p.link.state(), DllState::Normal);
        }
    }
}

/// Module unload (PHY_CTRL = 0 on every port, engines dropped) and load
/// (controller reset, new engines, PHY enabled) of each host in turn,
/// with every gap, several times.
#[test]
fn links_come_back_after_every_module_reload() {
    let mut sim = Sim::new(7);
    assert_up_after(&mut sim, "first load");
    for round in 0..3 {
        for gap in GAPS_NS {
            for h in 0..sim.guests.len() {
                sim.unload(h);
                sim.run_for(gap);
                sim.load(h);
                assert_up_after(
                    &mut sim,
                    &format!("round {round}, host {h}, reload after {gap} ns"),
                );
            }
        }
    }
    sim.traffic(50, 10);
}

/// The PHY alone cycles (disable → enable) under a driver that keeps its
/// engines and polls throughout: the driver calls `link_down` when it
/// sees LinkUp drop and `link_up` when it sees it back.
#[test]
fn links_come_back_after_every_phy_cycle() {
    let mut sim = Sim::new(11);
    assert_up_after(&mut sim, "first load");
    for round in 0..3 {
        for gap in GAPS_NS {
            for h in 0..sim.guests.len() {
                let before = link_downs(&mut sim, h);
                sim.phy_all(h, false);
                sim.run_for(gap);
                sim.phy_all(h, true);
                let what = format!("round {round}, host {h}, PHY enabled after {gap} ns");
                assert_up_after(&mut sim, &what);
                // However short, the disable took every link down once,
                // on both ends.
                let after = link_downs(&mut sim, h);
                let once: Vec<u32> = before.iter().map(|n| n + 1).collect();
                assert_eq!(after, once, "{what}: link downs");
            }
        }
    }
    sim.traffic(50, 20);
}

/// Sets the BER of the link at `end`.
fn set_ber(sim: &mut Sim, end: &str, ber: f64) {
    sim.f
        .apply(
            &Command::Link {
                link: end.into(),
                ber: Some(ber),
                fec_fail: None,
                delay_ns: None,
                rate_fps: None,
                up: None,
                flap: false,
                npi_ingress: None,
                npi_egress: None,
            },
            sim.now,
        )
        .expect("link command");
}

/// A link so bad that every retry fails: an end goes through RETRAIN to
/// ERROR and asks for a link reset (`Event::LinkResetRequest`), which its
/// driver carries out (PHY down and up, engine reset); once the link is good again every
/// link is back in DLL_Normal and carries packets.
#[test]
fn a_link_that_gives_up_is_reset_and_comes_back() {
    let mut sim = Sim::new(13);
    assert_up_after(&mut sim, "first load");
    set_ber(&mut sim, "vm0.0", 0.5);
    sim.guests[0]
        .drv
        .as_mut()
        .expect("vm0")
        .send(0, 1, Some(0), 30, 20, 200, 0);
    sim.run_for(400_000_000);
    // The guest (WAIT 2 ms) gives up before the switch port (5 ms); its
    // link reset restarts the switch port too.
    let host_resets = sim.guests[0].drv.as_ref().expect("vm0").ports[0].link_resets;
    assert!(host_resets > 0, "no link reset:{}", sim.report());
    assert!(!sim.f.switches[0].ports[0].link.is_up());
    set_ber(&mut sim, "vm0.0", 0.0);
    assert_up_after(&mut sim, "BER back to 0");
    sim.traffic(20, 40);
}
