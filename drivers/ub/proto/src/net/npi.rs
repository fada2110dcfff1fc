// SPDX-License-Identifier: GPL-2.0
//! Network partitions (UB spec §5.3.3.1).
//!
//! An NPI is 25 bits: bit 24 is the permission bit (0 = high privilege,
//! 1 = low privilege), bits 23:0 the partition ID. ID 0 is invalid (a
//! controller must not send IP-format packets until configured), ID 1 is
//! the default partition. Two ends may talk only if their IDs are equal and
//! at least one of them is high privilege.

/// A network partition identifier (25 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Npi(u32);

/// Why a packet fails the partition check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpiError {
    /// One of the NPIs has partition ID 0.
    Invalid,
    /// The partition IDs differ.
    OtherPartition,
    /// Same partition, but both ends are low privilege.
    BothLow,
    /// Strict mode: the packet's NPI is not the entity's NPI.
    NotOwnNpi,
}

impl Npi {
    /// Permission bit.
    pub const LOW_PRIVILEGE: u32 = 1 << 24;
    /// The default partition, high privilege.
    pub const DEFAULT: Npi = Npi(1);

    /// An NPI from its 25-bit wire value (higher bits ignored).
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw & 0x1ff_ffff)
    }

    /// An NPI from a value given by a user, refused (`None`) if it has
    /// bits set above the 25 an NPI has.
    pub const fn try_from_raw(raw: u32) -> Option<Self> {
        if raw & !0x1ff_ffff == 0 {
            Some(Self(raw))
        } else {
            None
        }
    }

    /// An NPI from a partition ID (24 bits) and a privilege.
    pub const fn new(id: u32, low_privilege: bool) -> Self {
        Self(
            (id & 0xff_ffff)
                | if low_privilege {
                    Self::LOW_PRIVILEGE
                } else {
                    0
                },
        )
    }

    /// The 25-bit wire value.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The partition ID (24 bits).
    pub const fn id(self) -> u32 {
        self.0 & 0xff_ffff
    }

    /// Whether the permission bit says low privilege.
    pub const fn is_low(self) -> bool {
        self.0 & Self::LOW_PRIVILEGE != 0
    }

    /// Whether the partition ID is not 0.
    pub const fn is_valid(self) -> bool {
        self.id() != 0
    }

    /// The symmetric partition rule between two ends.
    pub const fn may_communicate(self, peer: Npi) -> Result<(), NpiError> {
        if !self.is_valid() || !peer.is_valid() {
            Err(NpiError::Invalid)
        } else if self.id() != peer.id() {
            Err(NpiError::OtherPartition)
        } else if self.is_low() && peer.is_low() {
            Err(NpiError::BothLow)
        } else {
            Ok(())
        }
    }
}

/// Where a controller enforces partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpiMode {
    /// Mode-S: one NPI per Entity; the controller inserts it into every
    /// packet it sends, accepts only packets carrying exactly that NPI, and
    /// applies the partition rule against the sender's privilege.
    Strict(Npi),
    /// Mode-L: every netdev has its own NPI and checks received packets
    /// itself; the controller passes packets up after the validity check
    /// only (it MAY filter, which this implementation leaves to the netdev).
    Loose,
}

impl NpiMode {
    /// The NPI to put into a packet sent by a netdev whose own NPI is
    /// `netdev`. Strict mode overrides it with the Entity's NPI.
    pub const fn tx_npi(self, netdev: Npi) -> Result<Npi, NpiError> {
        let npi = match self {
            Self::Strict(own) => own,
            Self::Loose => netdev,
        };
        if npi.is_valid() {
            Ok(npi)
        } else {
            Err(NpiError::Invalid)
        }
    }

    /// Receive check of a packet carrying `pkt` for a netdev whose NPI is
    /// `netdev` (ignored in strict mode). In strict mode the controller
    /// checks; in loose mode the same rule is applied on the netdev's
    /// behalf, so both modes admit exactly the packets the partition rule
    /// allows, and strict mode additionally requires the sender to use the
    /// Entity's partition ID.
    pub const fn rx_check(self, pkt: Npi, netdev: Npi) -> Result<(), NpiError> {
        match self {
            Self::Strict(own) => {
                if !pkt.is_valid() || !own.is_valid() {
                    Err(NpiError::Invalid)
                } else if pkt.id() != own.id() {
                    Err(NpiError::NotOwnNpi)
                } else {
                    own.may_communicate(pkt)
                }
            }
            Self::Loose => netdev.may_communicate(pkt),
        }
    }
}
