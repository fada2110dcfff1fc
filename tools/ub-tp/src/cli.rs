// SPDX-License-Identifier: GPL-2.0
//! The command-line options `ub-tp` and `ubperf` share: the channel's
//! device and attributes, and the text form of its counters.

use std::path::PathBuf;

use clap::Args;

use crate::channel::{BindOptions, Info, Retransmit, DEFAULT_PATH};

/// How to open and bind a channel.
#[derive(Args, Clone, Debug)]
pub struct ChannelArgs {
    /// The UB device index (ubctl dev show).
    #[arg(long)]
    pub dev: u32,
    /// The channel's key (its name at both ends; required for RTP, none
    /// for CTP).
    #[arg(long, required_unless_present = "ctp", default_value_t = 0)]
    pub key: u32,
    /// The TP Channel device node.
    #[arg(long, default_value = DEFAULT_PATH)]
    pub device: PathBuf,
    /// How long binding waits for the channel to reach RTS, in ms (0: 5000).
    #[arg(long, default_value_t = 0)]
    pub timeout_ms: u32,
    /// The RTP retransmission mode: gbn (Go-Back-N) or sr (selective).
    #[arg(long, default_value = "gbn")]
    pub retransmit: Retransmit,
    /// Retransmit on TPNAK / TPSACK, not only on RTO.
    #[arg(long)]
    pub fast_retransmit: bool,
    /// Spray packets over the paths instead of one path per channel.
    #[arg(long)]
    pub per_packet: bool,
    /// Payload bytes per packet, 256..=4096 (0: 4096).
    #[arg(long, default_value_t = 0)]
    pub mtu: u32,
    /// Bind a TP Channel Group of this many channels (2..=8; keys KEY to
    /// KEY + N - 1) instead of one channel.
    #[arg(long, default_value_t = 0)]
    pub members: u32,
    /// After binding, make the file O_NONBLOCK and wait in poll() whenever
    /// a read or write would block (a call that says EAGAIN after poll()
    /// reported it ready fails the run).
    #[arg(long)]
    pub poll: bool,
    /// A CTP end towards the peer's CNA instead of an RTP channel: one
    /// datagram per message, repaired by the link layer only (no key, no
    /// RTP attribute; messages up to the datagram size).
    #[arg(long)]
    pub ctp: bool,
}

impl ChannelArgs {
    /// The bind options (without peer, key or direction: the caller's
    /// connect or listen sets them).
    pub fn bind_options(&self) -> BindOptions {
        BindOptions {
            path: self.device.clone(),
            key: self.key,
            timeout_ms: self.timeout_ms,
            retransmit: self.retransmit,
            fast_retransmit: self.fast_retransmit,
            per_packet: self.per_packet,
            mtu: self.mtu,
            members: self.members,
            ctp: self.ctp,
            ..BindOptions::default()
        }
    }
}

/// The counters as `name value` lines.
pub fn info_text(i: &Info) -> String {
    let mut s = format!(
        "state {:?} error {} tpn {} peer_tpn {} rx_queued {} members {}\n",
        i.state, i.error, i.tpn, i.peer_tpn, i.rx_queued, i.members
    );
    for (k, v) in [
        ("tx_messages", i.tx_messages),
        ("tx_acked", i.tx_acked),
        ("rx_messages", i.rx_messages),
        ("tx_packets", i.tx_packets),
        ("rx_packets", i.rx_packets),
        ("rtx_fast", i.rtx_fast),
        ("rtx_rto", i.rtx_rto),
        ("rtx_mark_psn", i.rtx_mark_psn),
        ("rtx_go_back_n", i.rtx_go_back_n),
        ("rto_expiries", i.rto_expiries),
        ("rx_duplicates", i.rx_duplicates),
        ("rx_invalid_psn", i.rx_invalid_psn),
        ("rx_dropped", i.rx_dropped),
    ] {
        s += &format!("  {k} {v}\n");
    }
    s
}
