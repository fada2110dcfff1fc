// SPDX-License-Identifier: GPL-2.0
//! Host endpoint: every configuration the specification forbids or bounds
//! is refused with the typed error that names the rule, and nothing is
//! allocated.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

mod host_common;

use host_common::*;
use ub_proto::host::{
    Addr, ChannelConfig, ConfigError, EndpointError, LoadBalance, OpenError, RtoConfig,
};
use ub_proto::transport::RetransmitMode;

fn refused(cfg: ChannelConfig, remote: Addr) -> OpenError {
    let store = Store::default();
    let mut e = endpoint(0, None, store.clone());
    let base = store.live.get();
    let r = e.connect(0, remote, 1, cfg).unwrap_err();
    assert_eq!(
        store.live.get(),
        base,
        "nothing allocated for a refused channel"
    );
    assert_eq!(e.channels(), 0);
    r
}

fn with(f: impl FnOnce(&mut ChannelConfig)) -> ChannelConfig {
    let mut c = ChannelConfig::default_rtp();
    f(&mut c);
    c
}

fn cfg_err(e: ConfigError) -> OpenError {
    OpenError::Config(e)
}

#[test]
fn ooo_window_outside_the_five_sizes() {
    for w in [0, 64, 100, 127, 129, 384, 4096] {
        let c = with(|c| {
            c.ooo_window = w;
            c.rx_slots = 64;
        });
        assert_eq!(
            refused(c, addr(1, false)),
            cfg_err(ConfigError::OooWindow(w))
        );
    }
    for w in [128, 256, 512, 1024, 2048] {
        let c = with(|c| c.ooo_window = w);
        let mut e = endpoint(0, None, Store::default());
        let c = ChannelConfig { rx_slots: 128, ..c };
        assert!(e.connect(0, addr(1, false), 1, c).is_ok(), "W = {w}");
    }
}

#[test]
fn send_window_above_8m_minus_1() {
    for w in [0, 1 << 23, u32::MAX] {
        let c = with(|c| c.send_window = w);
        assert_eq!(
            refused(c, addr(1, false)),
            cfg_err(ConfigError::SendWindow(w))
        );
    }
}

#[test]
fn rto_base_outside_4_to_2097152_us() {
    for base_us in [0, 3, 2_097_153] {
        let c = with(|c| c.rto = RtoConfig::Dynamic { base_us, n: 1 });
        assert_eq!(
            refused(c, addr(1, false)),
            cfg_err(ConfigError::RtoBase(base_us))
        );
    }
}

#[test]
fn static_rto_not_one_of_the_four_levels() {
    for timeout_us in [0, 500, 1000, 16_001, 4_000_001] {
        let c = with(|c| c.rto = RtoConfig::Static { timeout_us });
        assert_eq!(
            refused(c, addr(1, false)),
            cfg_err(ConfigError::StaticRtoLevel(timeout_us))
        );
    }
}

#[test]
fn fast_retransmit_with_per_packet_load_balancing() {
    for mode in [RetransmitMode::GoBackN, RetransmitMode::Selective] {
        let c = with(|c| {
            c.mode = mode;
            c.fast_retransmit = true;
            c.lb = LoadBalance::PerPacket { range_log2: 2 };
        });
        assert_eq!(
            refused(c, addr(1, false)),
            cfg_err(ConfigError::FastRetransmitWithPerPacketLb)
        );
    }
}

#[test]
fn psn_outside_24_bits() {
    for psn in [1 << 24, u32::MAX] {
        let c = with(|c| c.initial_psn = Some(psn));
        assert_eq!(refused(c, addr(1, false)), cfg_err(ConfigError::Psn(psn)));
    }
}

#[test]
fn mtu_the_ports_cannot_carry() {
    // 9000-byte packets: IPv4 format header 34, RTPH 16, padding 3, ICRC 4.
    let max = 9000 - 34 - 16 - 3 - 4;
    let c = with(|c| c.mtu = max + 1);
    assert_eq!(
        refused(c, addr(1, false)),
        cfg_err(ConfigError::Mtu { mtu: max + 1, max })
    );
    // The 24-bit CNA header is shorter: the same MTU fits there.
    let mut e = endpoint(0, None, Store::default());
    let c = with(|c| c.mtu = max + 1);
    assert!(e.connect(0, addr(1, true), 1, c).is_ok());
    let c = with(|c| c.mtu = 0);
    assert!(matches!(
        refused(c, addr(1, false)),
        OpenError::Config(ConfigError::Mtu { mtu: 0, .. })
    ));
}

#[test]
fn rtp_over_the_16_bit_cna_format() {
    assert_eq!(
        refused(ChannelConfig::default_rtp(), Addr::Cna16(0x20)),
        cfg_err(ConfigError::RtpFormat)
    );
}

#[test]
fn receive_slots_and_counts() {
    let c = with(|c| c.rx_slots = 100);
    assert_eq!(
        refused(c, addr(1, false)),
        cfg_err(ConfigError::RxSlots(100))
    );
    let c = with(|c| c.rx_slots = 512);
    assert_eq!(
        refused(c, addr(1, false)),
        cfg_err(ConfigError::RxSlots(512))
    );
    let c = with(|c| c.send_queue = 0);
    assert_eq!(refused(c, addr(1, false)), cfg_err(ConfigError::Zero));
}

#[test]
fn endpoint_rules() {
    let mut c = ep_config(0, None);
    c.ports = 0;
    assert!(matches!(
        Ep::new(c, Store::default(), Rng(1)),
        Err(EndpointError::Config(ConfigError::Ports(0)))
    ));
    let mut c = ep_config(0, None);
    c.max_channels = 1 << 24;
    assert!(matches!(
        Ep::new(c, Store::default(), Rng(1)),
        Err(EndpointError::Config(ConfigError::Channels(_)))
    ));
    let mut c = ep_config(0, None);
    c.npi_mode = ub_proto::net::npi::NpiMode::Strict(ub_proto::net::npi::Npi::new(0, false));
    assert!(matches!(
        Ep::new(c, Store::default(), Rng(1)),
        Err(EndpointError::Config(ConfigError::Npi))
    ));
    // The accept configuration is checked up front too.
    let bad = with(|c| c.ooo_window = 100);
    assert!(matches!(
        Ep::new(ep_config(0, Some(bad)), Store::default(), Rng(1)),
        Err(EndpointError::Config(ConfigError::OooWindow(100)))
    ));
}
