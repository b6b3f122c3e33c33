//! The table's digest: SHA-256 over a canonical encoding that is derived, not written by hand.
//!
//! Every type in the route table derives `serde::Serialize`; [`Canonical`] is a serde serializer
//! that turns any such value into bytes no other value of the same type turns into, and feeds them
//! to SHA-256. A field added to a type is in the digest without anyone listing it; a field left
//! out must say so with `#[serde(skip)]` and a comment saying why (a compiled regex is a function
//! of its pattern; a backend's slot is a number this process chose). `route/tests/every_field.rs`
//! changes every field of every route type and checks that the digest follows.
//!
//! The encoding, for one type (two types' encodings are never compared):
//! * integers: fixed width, big-endian; `bool` one byte; `char` as `u32`.
//! * strings and byte strings: their length (LEB128), then the bytes.
//! * `Option`: `0`, or `1` then the value. Enum variants: their index (LEB128), then the content.
//! * sequences: their length, then the elements. Structs and tuples: the fields in order (their
//!   number and order are the type's).
//! * maps: their length, then the entries sorted by the encoding of their keys, so a `HashMap`
//!   hashes the same whatever its iteration order.
//!
//! Refused, as they cannot be canonical: floats (`0.0 == -0.0`, `NaN != NaN`), sequences of
//! unknown length, and fields skipped by value (`skip_serializing_if`: a field that is sometimes
//! absent would make two values' bytes line up). A refusal is a bug in a type's derive, found by
//! the tests, so [`digest_of`] panics on it rather than make every table constructor fallible.

use std::fmt;

use serde::ser::{self, Serialize};
use sha2::{Digest as _, Sha256};

/// SHA-256 over a compiled table (or a part of it: a host group, a backend, a policy).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The first 12 hex digits.
    pub fn short(&self) -> String {
        self.0[..6].iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// As a part of another value's encoding: the 32 bytes.
    pub fn serialize_bytes<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short())
    }
}

/// The digest of `value`'s canonical encoding.
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> Digest {
    let mut h = Sha256::new();
    write(value, &mut h);
    Digest(h.finalize().into())
}

/// Feeds `value`'s canonical encoding to `h`.
pub fn write<T: Serialize + ?Sized>(value: &T, h: &mut Sha256) {
    if let Err(e) = value.serialize(&mut Canonical { out: h }) {
        panic!("a route type has no canonical encoding: {e}");
    }
}

/// `value`'s canonical encoding as bytes (map keys are sorted by these; tests read them).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    value.serialize(&mut Canonical { out: &mut out })?;
    Ok(out)
}

/// For `#[serde(serialize_with)]`: a byte buffer (`Bytes`, `[u8; N]`) as one byte string rather
/// than element by element.
pub fn as_bytes<B: AsRef<[u8]>, S: ser::Serializer>(bytes: &B, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes.as_ref())
}

/// Why a value has no canonical encoding.
#[derive(Debug)]
pub enum EncodeError {
    /// Floats compare in ways their bits do not (`0.0 == -0.0`, `NaN != NaN`).
    Float,
    /// A sequence that does not say its length up front.
    UnknownLength,
    /// A field skipped for its value (`skip_serializing_if`).
    SkippedField(&'static str),
    /// A `Serialize` implementation refused.
    Custom(String),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::Float => f.write_str("a float has no canonical encoding"),
            EncodeError::UnknownLength => f.write_str("a sequence of unknown length has no canonical encoding"),
            EncodeError::SkippedField(name) => {
                write!(f, "field `{name}` is skipped for its value; skip it always or never")
            }
            EncodeError::Custom(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for EncodeError {}

impl ser::Error for EncodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        EncodeError::Custom(msg.to_string())
    }
}

/// Where encoded bytes go: a hasher, or a buffer (for map entries, which are sorted first).
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Sha256 {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// The serializer that writes the canonical encoding to a [`Sink`].
pub struct Canonical<'s, S: Sink + ?Sized> {
    out: &'s mut S,
}

impl<S: Sink + ?Sized> Canonical<'_, S> {
    /// A length or a variant index: LEB128, so that small numbers (almost all) take one byte.
    #[inline]
    fn varint(&mut self, mut n: u64) {
        let mut buf = [0u8; 10];
        let mut len = 0;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                buf[len] = low;
                len += 1;
                break;
            }
            buf[len] = low | 0x80;
            len += 1;
        }
        self.out.put(&buf[..len]);
    }
}

/// Map entries, encoded apart and written sorted by key when the map ends.
pub struct SortedMap<'c, 's, S: Sink + ?Sized> {
    canonical: &'c mut Canonical<'s, S>,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl<'c, 's, S: Sink + ?Sized> ser::Serializer for &'c mut Canonical<'s, S> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = SortedMap<'c, 's, S>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn is_human_readable(&self) -> bool {
        // Addresses encode as their octets, not as text.
        false
    }

    fn serialize_bool(self, v: bool) -> Result<(), EncodeError> {
        self.out.put(&[v as u8]);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), EncodeError> {
        self.out.put(&[v]);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), EncodeError> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<(), EncodeError> {
        Err(EncodeError::Float)
    }
    fn serialize_f64(self, _: f64) -> Result<(), EncodeError> {
        Err(EncodeError::Float)
    }
    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.serialize_u32(v as u32)
    }
    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        self.serialize_bytes(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), EncodeError> {
        self.varint(v.len() as u64);
        self.out.put(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), EncodeError> {
        self.out.put(&[0]);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), EncodeError> {
        self.out.put(&[1]);
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, index: u32, _: &'static str) -> Result<(), EncodeError> {
        self.varint(index.into());
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<(), EncodeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        self.varint(index.into());
        value.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self, EncodeError> {
        let len = len.ok_or(EncodeError::UnknownLength)?;
        self.varint(len as u64);
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, EncodeError> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, EncodeError> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, EncodeError> {
        self.varint(index.into());
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<SortedMap<'c, 's, S>, EncodeError> {
        Ok(SortedMap { canonical: self, entries: Vec::with_capacity(len.unwrap_or(0)) })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, EncodeError> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, EncodeError> {
        self.varint(index.into());
        Ok(self)
    }
}

impl<S: Sink + ?Sized> ser::SerializeSeq for &mut Canonical<'_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> ser::SerializeTuple for &mut Canonical<'_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> ser::SerializeTupleStruct for &mut Canonical<'_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> ser::SerializeTupleVariant for &mut Canonical<'_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> ser::SerializeStruct for &mut Canonical<'_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), EncodeError> {
        Err(EncodeError::SkippedField(key))
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> ser::SerializeStructVariant for &mut Canonical<'_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), EncodeError> {
        Err(EncodeError::SkippedField(key))
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> ser::SerializeMap for SortedMap<'_, '_, S> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        self.entries.push((encode(key)?, Vec::new()));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        let entry = self.entries.last_mut().ok_or_else(|| ser::Error::custom("a map value without its key"))?;
        value.serialize(&mut Canonical { out: &mut entry.1 })
    }
    fn end(mut self) -> Result<(), EncodeError> {
        // Keys are distinct in a map, and an encoding is never a prefix of another of the same
        // type: sorting by the bytes is a total order that ignores how the map was walked.
        self.entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.canonical.varint(self.entries.len() as u64);
        for (key, value) in &self.entries {
            self.canonical.out.put(key);
            self.canonical.out.put(value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
