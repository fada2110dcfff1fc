// SPDX-License-Identifier: GPL-2.0
//! Attributes: the tree ubctl builds requests from, its encoding through
//! neli, and the checked, spec-driven decoding of the kernel's attributes.
//!
//! Decoding is driven by the tables in [`crate::spec`]: every attribute the
//! set defines is checked against its wire type (a `u32` must be exactly 4
//! bytes, an `ipv4` exactly 4, a nest must parse), attributes the set does
//! not define are skipped (a newer kernel may add some), and anything else is
//! a [`DecodeError`] naming the attribute, never a panic.

use std::fmt;
use std::io::Cursor;
use std::net::{Ipv4Addr, Ipv6Addr};

use neli::genl::{AttrTypeBuilder, Nlattr, NlattrBuilder};
use neli::types::{Buffer, GenlBuffer};
use neli::{FromBytesWithInput, ToBytes};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use thiserror::Error;

use crate::spec::{Set, Ty};

/// Bits of `nla_type` that are flags, not the type (`NLA_F_NESTED`,
/// `NLA_F_NET_BYTEORDER`).
const NLA_TYPE_MASK: u16 = 0x3fff;
/// Size of `struct nlattr`.
pub const NLA_HDRLEN: usize = 4;

/// Round `len` up to netlink's 4-byte alignment.
pub fn nla_align(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// The value of an attribute to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A `u8`.
    U8(u8),
    /// A `u16` (nlctrl's family id).
    U16(u16),
    /// A `u32`.
    U32(u32),
    /// A `u64`.
    U64(u64),
    /// Raw bytes (binaries; also how malformed requests are built).
    Bytes(Vec<u8>),
    /// A string, sent NUL-terminated.
    Str(String),
    /// Nested attributes (sent with `NLA_F_NESTED`, which strict
    /// validation requires).
    Nest(Vec<Attr>),
}

/// One attribute to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Attribute type number.
    pub id: u16,
    /// Its value.
    pub value: Value,
}

impl Attr {
    /// A `u8` attribute.
    pub fn u8(id: u16, v: u8) -> Self {
        Attr {
            id,
            value: Value::U8(v),
        }
    }
    /// A `u32` attribute.
    pub fn u32(id: u16, v: u32) -> Self {
        Attr {
            id,
            value: Value::U32(v),
        }
    }
    /// A `u64` attribute.
    pub fn u64(id: u16, v: u64) -> Self {
        Attr {
            id,
            value: Value::U64(v),
        }
    }
    /// A binary attribute.
    pub fn bytes(id: u16, v: &[u8]) -> Self {
        Attr {
            id,
            value: Value::Bytes(v.to_vec()),
        }
    }
    /// A nest.
    pub fn nest(id: u16, v: Vec<Attr>) -> Self {
        Attr {
            id,
            value: Value::Nest(v),
        }
    }

    /// Payload length before padding.
    fn payload_len(&self) -> usize {
        match &self.value {
            Value::U8(_) => 1,
            Value::U16(_) => 2,
            Value::U32(_) => 4,
            Value::U64(_) => 8,
            Value::Bytes(b) => b.len(),
            Value::Str(s) => s.len().saturating_add(1),
            Value::Nest(n) => n.iter().map(Attr::encoded_len).sum(),
        }
    }

    /// Bytes the attribute takes on the wire, padding included.
    pub fn encoded_len(&self) -> usize {
        nla_align(NLA_HDRLEN.saturating_add(self.payload_len()))
    }

    /// The neli attribute for this value.
    pub fn to_nlattr(&self) -> Result<Nlattr<u16, Buffer>, EncodeError> {
        let nested = matches!(self.value, Value::Nest(_));
        let ty = AttrTypeBuilder::default()
            .nla_type(self.id)
            .nla_nested(nested)
            .build()
            .map_err(|e| EncodeError(e.to_string()))?;
        let payload: Vec<u8> = match &self.value {
            Value::U8(v) => vec![*v],
            Value::U16(v) => v.to_ne_bytes().to_vec(),
            Value::U32(v) => v.to_ne_bytes().to_vec(),
            Value::U64(v) => v.to_ne_bytes().to_vec(),
            Value::Bytes(b) => b.clone(),
            Value::Str(s) => {
                let mut b = s.as_bytes().to_vec();
                b.push(0);
                b
            }
            Value::Nest(_) => Vec::new(),
        };
        if self.encoded_len() > usize::from(u16::MAX) {
            return Err(EncodeError(format!(
                "attribute {} is too long for netlink",
                self.id
            )));
        }
        let mut a = NlattrBuilder::default()
            .nla_type(ty)
            .nla_payload(Buffer::from(payload))
            .build()
            .map_err(|e| EncodeError(e.to_string()))?;
        if let Value::Nest(children) = &self.value {
            for c in children {
                a = a
                    .nest(&c.to_nlattr()?)
                    .map_err(|e| EncodeError(e.to_string()))?;
            }
        }
        Ok(a)
    }
}

/// Encode a list of attributes as neli's attribute buffer.
pub fn to_genl_buffer(attrs: &[Attr]) -> Result<GenlBuffer<u16, Buffer>, EncodeError> {
    attrs.iter().map(Attr::to_nlattr).collect()
}

/// Encode a list of attributes to bytes (used to check encodings).
pub fn encode(attrs: &[Attr]) -> Result<Vec<u8>, EncodeError> {
    let mut cur = Cursor::new(Vec::new());
    to_genl_buffer(attrs)?
        .to_bytes(&mut cur)
        .map_err(|e| EncodeError(e.to_string()))?;
    Ok(cur.into_inner())
}

/// A request could not be encoded.
#[derive(Debug, Error)]
#[error("cannot encode request: {0}")]
pub struct EncodeError(pub String);

/// Name the attribute that starts at byte `offset` of `attrs` (offsets
/// counted from the first attribute), as `set.attr[.nested]`; used to turn
/// an extended ACK's offset into a name. `None` if no attribute starts
/// there.
pub fn name_at_offset(attrs: &[Attr], set: Option<&Set>, offset: usize) -> Option<String> {
    let mut pos = 0usize;
    for a in attrs {
        let len = a.encoded_len();
        let def = set.and_then(|s| s.get(a.id));
        let name = match (set, def) {
            (Some(s), Some(d)) => format!("{}.{}", s.name, d.name),
            (Some(s), None) => format!("{}.<unknown type {}>", s.name, a.id),
            (None, _) => format!("<type {}>", a.id),
        };
        if offset == pos {
            return Some(name);
        }
        if let Value::Nest(children) = &a.value {
            let start = pos.saturating_add(NLA_HDRLEN);
            if offset >= start && offset < pos.saturating_add(len) {
                let inner = match def.map(|d| d.ty) {
                    Some(Ty::Nest(s)) | Some(Ty::MultiNest(s)) => Some(s),
                    _ => None,
                };
                let sub = name_at_offset(children, inner, offset - start)?;
                let leaf = sub.rsplit_once('.').map_or(sub.as_str(), |(_, l)| l);
                return Some(format!("{name}.{leaf}"));
            }
        }
        pos = pos.saturating_add(len);
    }
    None
}

/// One attribute as received: its type (flags masked off) and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawAttr {
    /// Attribute type number.
    pub id: u16,
    /// Payload bytes.
    pub payload: Vec<u8>,
}

/// Parse a buffer of attributes with neli. A truncated or overlong
/// attribute is an error.
pub fn parse_attrs(bytes: &[u8]) -> Result<Vec<RawAttr>, DecodeError> {
    let buf =
        GenlBuffer::<u16, Buffer>::from_bytes_with_input(&mut Cursor::new(bytes), bytes.len())
            .map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(from_genl_buffer(&buf))
}

/// Convert neli's parsed attributes.
pub fn from_genl_buffer(buf: &GenlBuffer<u16, Buffer>) -> Vec<RawAttr> {
    buf.iter()
        .map(|a| RawAttr {
            id: u16::from(a.nla_type()) & NLA_TYPE_MASK,
            payload: a.nla_payload().as_ref().to_vec(),
        })
        .collect()
}

/// A reply from the kernel did not have the shape the spec gives it.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The attribute stream or a message could not be parsed.
    #[error("malformed netlink data: {0}")]
    Malformed(String),
    /// An attribute's payload does not fit its type.
    #[error("attribute {attr}: expected {expected}, got {got} bytes")]
    BadLength {
        /// `set.attr`
        attr: String,
        /// What the spec says.
        expected: &'static str,
        /// Bytes received.
        got: usize,
    },
    /// A nest did not parse.
    #[error("attribute {attr}: {inner}")]
    InNest {
        /// `set.attr`
        attr: String,
        /// What went wrong inside.
        inner: Box<DecodeError>,
    },
    /// A required attribute is missing from a reply.
    #[error("reply without attribute {0}")]
    Missing(String),
}

/// A decoded value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// An unsigned integer (`u8`, `u32`, `u64`).
    U(u64),
    /// An enum value: its name if the spec has one, else the number.
    Enum(Option<&'static str>, u32),
    /// A string.
    Str(String),
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address.
    V6(Ipv6Addr),
    /// A binary without a display hint.
    Bytes(Vec<u8>),
    /// A nest.
    Obj(Obj),
    /// A repeated (multi-attr) nest.
    List(Vec<Obj>),
}

/// A decoded attribute set: `(spec name, value)` in the order received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Obj(pub Vec<(&'static str, Val)>);

impl Obj {
    /// The value named `name`.
    pub fn get(&self, name: &str) -> Option<&Val> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The integer named `name`.
    pub fn uint(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(Val::U(v)) => Some(*v),
            Some(Val::Enum(_, v)) => Some(u64::from(*v)),
            _ => None,
        }
    }

    /// The integer named `name`, or an error naming it in `set`.
    pub fn need_uint(&self, set: &Set, name: &str) -> Result<u64, DecodeError> {
        self.uint(name)
            .ok_or_else(|| DecodeError::Missing(format!("{}.{}", set.name, name)))
    }

    /// The string named `name`.
    pub fn str(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Val::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// A copy without the entries whose names are in `drop`.
    pub fn without(&self, drop: &[&str]) -> Obj {
        Obj(self
            .0
            .iter()
            .filter(|(n, _)| !drop.contains(n))
            .cloned()
            .collect())
    }

    /// A copy with only the entries whose names are in `keep`.
    pub fn only(&self, keep: &[&str]) -> Obj {
        Obj(self
            .0
            .iter()
            .filter(|(n, _)| keep.contains(n))
            .cloned()
            .collect())
    }
}

fn exact<const N: usize>(
    set: &Set,
    name: &str,
    p: &[u8],
    what: &'static str,
) -> Result<[u8; N], DecodeError> {
    <[u8; N]>::try_from(p).map_err(|_| DecodeError::BadLength {
        attr: format!("{}.{}", set.name, name),
        expected: what,
        got: p.len(),
    })
}

/// Decode `attrs` as members of `set`.
pub fn decode_set(set: &'static Set, attrs: &[RawAttr]) -> Result<Obj, DecodeError> {
    let mut out: Vec<(&'static str, Val)> = Vec::new();
    for a in attrs {
        let Some(def) = set.get(a.id) else {
            continue; // unknown to this ubctl: skipped, as netlink intends
        };
        let p = a.payload.as_slice();
        let v = match def.ty {
            Ty::Pad => continue, // alignment filler
            Ty::U8 => Val::U(u64::from(exact::<1>(set, def.name, p, "1 (u8)")?[0])),
            Ty::U32 => Val::U(u64::from(u32::from_ne_bytes(exact::<4>(
                set, def.name, p, "4 (u32)",
            )?))),
            Ty::U64 => Val::U(u64::from_ne_bytes(exact::<8>(set, def.name, p, "8 (u64)")?)),
            Ty::Enum(e) => {
                let v = u32::from_ne_bytes(exact::<4>(set, def.name, p, "4 (u32)")?);
                Val::Enum(e.name_of(v), v)
            }
            Ty::Ipv4 => Val::V4(Ipv4Addr::from(exact::<4>(set, def.name, p, "4 (ipv4)")?)),
            Ty::Ipv6 => Val::V6(Ipv6Addr::from(exact::<16>(set, def.name, p, "16 (ipv6)")?)),
            Ty::Binary => Val::Bytes(p.to_vec()),
            Ty::String => {
                let s = p.strip_suffix(&[0]).unwrap_or(p);
                Val::Str(String::from_utf8_lossy(s).into_owned())
            }
            Ty::Nest(inner) | Ty::MultiNest(inner) => {
                let wrap = |e: DecodeError| DecodeError::InNest {
                    attr: format!("{}.{}", set.name, def.name),
                    inner: Box::new(e),
                };
                let obj = decode_set(inner, &parse_attrs(p).map_err(wrap)?).map_err(wrap)?;
                if matches!(def.ty, Ty::MultiNest(_)) {
                    if let Some((_, Val::List(l))) = out.iter_mut().find(|(n, _)| *n == def.name) {
                        l.push(obj);
                        continue;
                    }
                    Val::List(vec![obj])
                } else {
                    Val::Obj(obj)
                }
            }
        };
        out.push((def.name, v));
    }
    Ok(Obj(out))
}

impl Serialize for Obj {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for Val {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Val::U(v) => s.serialize_u64(*v),
            Val::Enum(Some(n), _) => s.serialize_str(n),
            Val::Enum(None, v) => s.serialize_u32(*v),
            Val::Str(v) => s.serialize_str(v),
            Val::V4(a) => s.collect_str(a),
            Val::V6(a) => s.collect_str(a),
            Val::Bytes(b) => s.serialize_str(&hex(b)),
            Val::Obj(o) => o.serialize(s),
            Val::List(l) => {
                let mut q = s.serialize_seq(Some(l.len()))?;
                for o in l {
                    q.serialize_element(o)?;
                }
                q.end()
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Render a decoded `addr` nest as ubctl's address syntax
/// (`cna16:0x0100`, `10.0.0.1`).
pub fn addr_text(o: &Obj) -> String {
    let ty = match o.get("type") {
        Some(Val::Enum(Some(n), _)) => (*n).to_string(),
        Some(Val::Enum(None, v)) => format!("type{v}"),
        _ => String::from("?"),
    };
    match (ty.as_str(), o.get("cna"), o.get("ipv4"), o.get("ipv6")) {
        ("cna16", Some(Val::U(c)), _, _) => format!("cna16:{c:#06x}"),
        ("cna24", Some(Val::U(c)), _, _) => format!("cna24:{c:#08x}"),
        (_, _, Some(Val::V4(a)), _) => a.to_string(),
        (_, _, _, Some(Val::V6(a))) => a.to_string(),
        _ => format!("{ty}:?"),
    }
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::U(v) => write!(f, "{v}"),
            Val::Enum(Some(n), _) => f.write_str(n),
            Val::Enum(None, v) => write!(f, "unknown({v})"),
            Val::Str(v) => f.write_str(v),
            Val::V4(a) => write!(f, "{a}"),
            Val::V6(a) => write!(f, "{a}"),
            Val::Bytes(b) => f.write_str(&hex(b)),
            Val::Obj(o) if o.get("type").is_some() => f.write_str(&addr_text(o)),
            Val::Obj(o) => {
                let mut first = true;
                for (k, v) in &o.0 {
                    if !first {
                        f.write_str(" ")?;
                    }
                    first = false;
                    write!(f, "{k} {v}")?;
                }
                Ok(())
            }
            Val::List(l) => {
                let parts: Vec<String> =
                    l.iter().map(|o| Val::Obj(o.clone()).to_string()).collect();
                f.write_str(&parts.join(", "))
            }
        }
    }
}
