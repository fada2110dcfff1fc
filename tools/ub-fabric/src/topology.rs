// SPDX-License-Identifier: GPL-2.0
//! Topology files (TOML): hosts (emulated controllers), switches, links
//! and the seed. Two built-in topologies: `default` (two hosts with two
//! ports each, two switches as two planes, joined by an inter-switch link)
//! and `back-to-back` (two hosts, port to port).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::phy::PhyParams;
use crate::switch::SwitchParams;

/// A topology error.
#[derive(Debug, Error)]
pub enum TopologyError {
    /// TOML syntax or schema.
    #[error("topology: {0}")]
    Parse(#[from] toml::de::Error),
    /// A link end names an unknown node or port.
    #[error("topology: link end {0:?} does not name a host or switch port")]
    BadEnd(String),
    /// A port is used twice.
    #[error("topology: port {0:?} is connected twice")]
    PortReused(String),
    /// Duplicate name.
    #[error("topology: name {0:?} is used twice")]
    DuplicateName(String),
    /// Bad value.
    #[error("topology: {0}")]
    Invalid(String),
}

/// An emulated controller (one QEMU guest).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Name (used in link ends, counters and the default socket name).
    pub name: String,
    /// Controller ports.
    #[serde(default = "two")]
    pub ports: u32,
    /// vfio-user socket path (default: `<socket-dir>/<name>.sock`).
    #[serde(default)]
    pub socket: Option<PathBuf>,
}

fn two() -> u32 {
    2
}

/// A switch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Name.
    pub name: String,
    /// Ports.
    pub ports: u32,
    /// Settings.
    #[serde(default)]
    pub params: SwitchParams,
}

/// A link between two ports, written `"node.port"`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// PHY parameters (default: the topology's `phy`).
    #[serde(default)]
    pub phy: Option<PhyParams>,
}

/// A whole topology.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Seed of every random process (BER, FEC failures, switch faults).
    #[serde(default = "one")]
    pub seed: u64,
    /// Default PHY parameters of links.
    #[serde(default)]
    pub phy: PhyParams,
    /// Hosts.
    #[serde(default, rename = "host")]
    pub hosts: Vec<HostSpec>,
    /// Switches.
    #[serde(default, rename = "switch")]
    pub switches: Vec<SwitchSpec>,
    /// Links.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkSpec>,
}

fn one() -> u64 {
    1
}

/// The built-in default topology, as TOML.
pub const DEFAULT_TOML: &str = r#"# Two hosts, each with two controller ports; two switches as two planes
# (plane 0 joins the hosts' port 0, plane 1 their port 1), and one
# inter-switch link so that "all paths" routing has a longer path too.
seed = 1

[phy]
rate_fps = 625e6      # 100 Gb/s of 160-bit flits
delay_ns = 1000
ber = 0.0
fec_fail = 0.0
retrain_ns = 20000

[[host]]
name = "vm0"
ports = 2

[[host]]
name = "vm1"
ports = 2

[[switch]]
name = "sw0"
ports = 3

[[switch]]
name = "sw1"
ports = 3

[[link]]
a = "vm0.0"
b = "sw0.0"

[[link]]
a = "vm1.0"
b = "sw0.1"

[[link]]
a = "vm0.1"
b = "sw1.0"

[[link]]
a = "vm1.1"
b = "sw1.1"

[[link]]
a = "sw0.2"
b = "sw1.2"
"#;

/// The built-in back-to-back topology (CTP over a direct link).
pub const BACK_TO_BACK_TOML: &str = r#"# Two hosts joined port to port, no switch.
seed = 1

[[host]]
name = "vm0"
ports = 1

[[host]]
name = "vm1"
ports = 1

[[link]]
a = "vm0.0"
b = "vm1.0"
"#;

/// A node port a link end names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Host `h`, port `p`.
    Host(usize, usize),
    /// Switch `s`, port `p`.
    Switch(usize, usize),
}

impl Topology {
    /// Parses and checks a topology.
    pub fn parse(text: &str) -> Result<Self, TopologyError> {
        let t: Topology = toml::from_str(text)?;
        t.check()?;
        Ok(t)
    }

    /// A built-in topology by name (`default`, `back-to-back`).
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "default" => Self::parse(DEFAULT_TOML).ok(),
            "back-to-back" => Self::parse(BACK_TO_BACK_TOML).ok(),
            _ => None,
        }
    }

    /// Resolves `"node.port"`.
    pub fn end(&self, s: &str) -> Result<End, TopologyError> {
        let bad = || TopologyError::BadEnd(s.to_string());
        let (node, port) = s.rsplit_once('.').ok_or_else(bad)?;
        let port: usize = port.parse().map_err(|_| bad())?;
        if let Some(h) = self.hosts.iter().position(|h| h.name == node) {
            if port < self.hosts[h].ports as usize {
                return Ok(End::Host(h, port));
            }
        }
        if let Some(w) = self.switches.iter().position(|w| w.name == node) {
            if port < self.switches[w].ports as usize {
                return Ok(End::Switch(w, port));
            }
        }
        Err(bad())
    }

    /// The name of an end.
    pub fn end_name(&self, e: End) -> String {
        match e {
            End::Host(h, p) => format!("{}.{p}", self.hosts[h].name),
            End::Switch(s, p) => format!("{}.{p}", self.switches[s].name),
        }
    }

    fn check(&self) -> Result<(), TopologyError> {
        let mut names = std::collections::HashSet::new();
        for n in self
            .hosts
            .iter()
            .map(|h| &h.name)
            .chain(self.switches.iter().map(|s| &s.name))
        {
            if !names.insert(n.clone()) {
                return Err(TopologyError::DuplicateName(n.clone()));
            }
        }
        for h in &self.hosts {
            if h.ports == 0 || h.ports > ub_proto::controller::MAX_PORTS {
                return Err(TopologyError::Invalid(format!(
                    "host {} has {} ports (1..=8)",
                    h.name, h.ports
                )));
            }
        }
        for s in &self.switches {
            if s.ports == 0 || s.ports > 64 {
                return Err(TopologyError::Invalid(format!(
                    "switch {} has {} ports (1..=64)",
                    s.name, s.ports
                )));
            }
        }
        let mut used = std::collections::HashSet::new();
        for l in &self.links {
            for e in [&l.a, &l.b] {
                let end = self.end(e)?;
                if !used.insert(end) {
                    return Err(TopologyError::PortReused(e.clone()));
                }
            }
            let p = l.phy.unwrap_or(self.phy);
            if p.rate_fps.is_nan() || p.rate_fps <= 0.0 || !(0.0..=1.0).contains(&p.ber) {
                return Err(TopologyError::Invalid(format!(
                    "link {}–{}: rate must be > 0, ber in 0..=1",
                    l.a, l.b
                )));
            }
        }
        Ok(())
    }
}

/// Addresses of host `h` (0-based), port `p`, as the fabric routes them.
pub mod addr {
    /// 16-bit primary CNA of host `h`.
    pub fn cna16_primary(h: usize) -> u16 {
        ((h as u16 + 1) & 0xff) << 8
    }
    /// 16-bit port CNA.
    pub fn cna16_port(h: usize, p: usize) -> u16 {
        cna16_primary(h) | (p as u16 + 1)
    }
    /// 24-bit primary CNA.
    pub fn cna24_primary(h: usize) -> u32 {
        ((h as u32 + 1) & 0xffff) << 8
    }
    /// 24-bit port CNA.
    pub fn cna24_port(h: usize, p: usize) -> u32 {
        cna24_primary(h) | (p as u32 + 1)
    }
    /// IPv4 prefix of host `h` (10.0.h+1.0/24).
    pub fn ipv4_primary(h: usize) -> [u8; 4] {
        [10, 0, (h + 1) as u8, 0]
    }
    /// IPv4 address of a port (10.0.h+1.p+1).
    pub fn ipv4_port(h: usize, p: usize) -> [u8; 4] {
        [10, 0, (h + 1) as u8, (p + 1) as u8]
    }
    /// IPv6 address of a port (fd00::h+1:p+1); the host prefix is /120.
    pub fn ipv6_port(h: usize, p: usize) -> [u8; 16] {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[13] = (h + 1) as u8;
        a[15] = (p + 1) as u8;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        let d = Topology::builtin("default").expect("default");
        assert_eq!((d.hosts.len(), d.switches.len(), d.links.len()), (2, 2, 5));
        let b = Topology::builtin("back-to-back").expect("b2b");
        assert_eq!((b.hosts.len(), b.switches.len(), b.links.len()), (2, 0, 1));
        assert!(Topology::builtin("nope").is_none());
    }

    #[test]
    fn bad_topologies_are_refused() {
        let base = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n";
        for (extra, what) in [
            ("[[link]]\na = \"a.0\"\nb = \"c.0\"\n", "unknown node"),
            ("[[link]]\na = \"a.5\"\nb = \"b.0\"\n", "port out of range"),
            (
                "[[link]]\na = \"a.0\"\nb = \"b.0\"\n[[link]]\na = \"a.0\"\nb = \"b.1\"\n",
                "port reused",
            ),
            (
                "[[link]]\na = \"a.0\"\nb = \"b.0\"\nphy = { ber = 2.0 }\n",
                "ber",
            ),
            ("bogus = 1\n", "unknown key"),
            ("[[host]]\nname = \"a\"\n", "duplicate"),
        ] {
            assert!(
                Topology::parse(&format!("{base}{extra}")).is_err(),
                "{what}"
            );
        }
    }
}
