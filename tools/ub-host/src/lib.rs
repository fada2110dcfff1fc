// SPDX-License-Identifier: GPL-2.0
//! Host-side pieces for user-space programs that run a
//! [`ub_proto::host::Endpoint`]: the simulator (`ub-sim`) and the fabric
//! tests (`ub-fabric`'s driver double). `ub.ko` provides the same two roles
//! with kernel types (`KVec` storage, deliveries into channel queues).
//!
//! - [`VecStorage`]: the endpoint's tables and per-channel buffers as
//!   `Vec`s, reserved fallibly as the kernel's `KVec` would be.
//! - [`Collector`]: a [`DeliverySink`] that reassembles the pieces of each
//!   channel's messages and records every broken delivery contract (a piece
//!   at the wrong offset, a total length that does not match).
//!
//! The carry-less-multiply ICRC backend lives in `ub-host-crc`, which has
//! no dependency on `ub-proto` so that `ub-proto`'s own tests can use it.

use std::collections::{BTreeMap, HashMap};

use ub_proto::host::{Addr, AllocError, DatagramKind, Delivery, DeliverySink, Storage};

/// Where an endpoint's tables and channel buffers come from: `Vec`,
/// reserved fallibly (`try_reserve_exact`), so an allocation failure is the
/// endpoint's typed [`AllocError`], as with the kernel's `KVec`.
#[derive(Debug, Default, Clone, Copy)]
pub struct VecStorage;

impl Storage for VecStorage {
    type Buf<T> = Vec<T>;
    fn alloc<T>(&mut self, n: usize, fill: impl FnMut() -> T) -> Result<Vec<T>, AllocError> {
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| AllocError)?;
        v.extend(std::iter::repeat_with(fill).take(n));
        Ok(v)
    }
}

/// What an endpoint delivered, reassembled per channel.
#[derive(Debug, Default)]
pub struct Collector {
    partial: HashMap<u32, Vec<u8>>,
    /// Per channel (local TPN): complete messages in delivery order, as
    /// (TPMSN, bytes). A caller that checks as it goes takes this map
    /// (`std::mem::take`) after each input.
    pub messages: BTreeMap<u32, Vec<(u32, Vec<u8>)>>,
    /// Datagrams received (CTP, UTP), in order.
    pub datagrams: Vec<(DatagramKind, Addr, Vec<u8>)>,
    /// Broken delivery contracts, one line each.
    pub errors: Vec<String>,
}

impl Collector {
    /// Complete messages delivered on channel `tpn` so far.
    pub fn on_channel(&self, tpn: u32) -> &[(u32, Vec<u8>)] {
        self.messages.get(&tpn).map_or(&[], Vec::as_slice)
    }
}

impl DeliverySink for Collector {
    fn deliver(&mut self, d: &Delivery<'_>) {
        match *d {
            Delivery::Message {
                tpn,
                tpmsn,
                offset,
                bytes,
                complete,
            } => {
                let cur = self.partial.entry(tpn).or_default();
                if offset as usize != cur.len() {
                    self.errors
                        .push(format!("tpn {tpn}: offset {offset} != {}", cur.len()));
                }
                cur.extend_from_slice(bytes);
                if let Some(len) = complete {
                    let m = std::mem::take(cur);
                    if m.len() != len as usize {
                        self.errors
                            .push(format!("tpn {tpn}: length {len} != {}", m.len()));
                    }
                    self.messages.entry(tpn).or_default().push((tpmsn, m));
                }
            }
            Delivery::Datagram { kind, from, bytes } => {
                self.datagrams.push((kind, from, bytes.to_vec()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_reassemble_and_contract_breaks_are_recorded() {
        let mut c = Collector::default();
        let piece = |offset, bytes, complete| Delivery::Message {
            tpn: 7,
            tpmsn: 1,
            offset,
            bytes,
            complete,
        };
        c.deliver(&piece(0, b"hel", None));
        c.deliver(&piece(3, b"lo", Some(5)));
        assert_eq!(c.on_channel(7), &[(1, b"hello".to_vec())]);
        assert!(c.errors.is_empty());
        // A gap and a wrong total length are both reported.
        c.deliver(&piece(2, b"xy", Some(3)));
        assert_eq!(c.errors.len(), 2, "{:?}", c.errors);
        assert!(c.on_channel(8).is_empty());
    }

    #[test]
    fn vec_storage_fills_and_refuses_impossible_sizes() {
        let mut s = VecStorage;
        assert_eq!(s.alloc(3, || 9u8), Ok(vec![9, 9, 9]));
        assert_eq!(s.alloc::<u64>(usize::MAX, || 0), Err(AllocError));
    }
}
