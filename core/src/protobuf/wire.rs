//! The protobuf wire format at its lowest level, both directions: a cursor that reads keys (field
//! number + wire type) and the raw value behind each without copying ([`Reader`]), and the few
//! writes an encoder needs ([`put_key`], [`put_varint`], [`begin_len`]/[`end_len`], ...).
//!
//! What a value *means* (a string, a nested message, a timestamp) is decided one level up, by a
//! schema ([`super::Schema`]) and whoever walks it: the client's serde `Deserializer`, the embedded
//! server's decoder into JSON values, and the encoder ([`super::encode`]). This module is the one
//! home of the bytes-level rules they share; every read is bounds-checked and returns a
//! [`WireError`] on bad input, and nothing here allocates but the output `Vec` of the writes.

/// The wire types the messages of Kubernetes use: varints (ints, bools, enums as ints),
/// eight-byte fixed values (`double`), and length-delimited values (strings, bytes, messages,
/// packed scalars). Groups (3, 4) and 32-bit fixed values (5) never occur in them; reading one is
/// an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint,
    Fixed64,
    Len,
}

impl WireType {
    /// The number protobuf gives the wire type (the low three bits of a key).
    pub const fn number(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::Len => 2,
        }
    }
}

/// Why bytes are not a well-formed protobuf message (of the wire types Kubernetes uses).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated protobuf input in {message} at byte {at}")]
    Truncated { message: &'static str, at: usize },
    /// A varint longer than ten bytes, or with bits past the 64th.
    #[error("malformed varint in {message} at byte {at}")]
    Varint { message: &'static str, at: usize },
    /// Field number 0, or beyond 2^29 - 1.
    #[error("invalid field number {number} in {message}")]
    FieldNumber { message: &'static str, number: u64 },
    /// Wire type 3, 4, 5, 6 or 7.
    #[error("{message} field {field} has wire type {wire}, which Kubernetes' messages never use")]
    WireType {
        message: &'static str,
        field: u32,
        wire: u8,
    },
    /// A wire type the field's type cannot have (a string sent as a varint).
    #[error("{message} field {field} has the wrong wire type for its type")]
    WrongType { message: &'static str, field: u32 },
}

/// One value as it is on the wire, before a schema says what it is. `Absent` stands for a value
/// the wire left out where a value is still due (a map entry without its value): the type's zero.
#[derive(Debug, Clone, Copy)]
pub enum Raw<'de> {
    Varint(u64),
    Fixed64(u64),
    Len(&'de [u8]),
    Absent,
}

/// A cursor over one message. Invariant: `at <= bytes.len()`.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'de> {
    bytes: &'de [u8],
    at: usize,
    /// The message's name, for errors.
    message: &'static str,
}

impl<'de> Reader<'de> {
    /// Reads `bytes` as the message named `message` (the name is for errors).
    pub fn new(bytes: &'de [u8], message: &'static str) -> Reader<'de> {
        Reader {
            bytes,
            at: 0,
            message,
        }
    }

    /// Where the cursor is, in bytes from the message's start.
    pub fn position(&self) -> usize {
        self.at
    }

    pub fn message(&self) -> &'static str {
        self.message
    }

    pub fn at_end(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// A reader of the same message from byte `at` on (a position a reader of it returned).
    pub fn from(self, at: usize) -> Reader<'de> {
        Reader {
            at: at.min(self.bytes.len()),
            ..self
        }
    }

    /// The next field's number and wire type, or `None` at the end of the message.
    pub fn key(&mut self) -> Result<Option<(u32, WireType)>, WireError> {
        if self.at_end() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > u64::from(MAX_FIELD) {
            return Err(WireError::FieldNumber {
                message: self.message,
                number,
            });
        }
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            other => {
                return Err(WireError::WireType {
                    message: self.message,
                    field: number as u32,
                    wire: other as u8,
                });
            }
        };
        Ok(Some((number as u32, wire)))
    }

    /// The value after a key of wire type `wire`.
    pub fn value(&mut self, wire: WireType) -> Result<Raw<'de>, WireError> {
        Ok(match wire {
            WireType::Varint => Raw::Varint(self.varint()?),
            WireType::Fixed64 => Raw::Fixed64(self.fixed64()?),
            WireType::Len => Raw::Len(self.len_delimited()?),
        })
    }

    /// A varint: at most ten bytes, no bits past the 64th.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        // Most varints (keys, lengths of small values, small numbers) are one byte.
        if let Some(&byte) = self.bytes.get(self.at) {
            if byte < 0x80 {
                self.at += 1;
                return Ok(u64::from(byte));
            }
        }
        let start = self.at;
        let mut value = 0u64;
        for i in 0..10 {
            // `let else`, not `ok_or`: the error is built only when needed (this is the
            // innermost loop of every decoder).
            let Some(&byte) = self.bytes.get(self.at) else {
                return Err(self.truncated(self.at));
            };
            self.at += 1;
            let bits = u64::from(byte & 0x7f);
            if i == 9 && bits > 1 {
                break;
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::Varint {
            message: self.message,
            at: start,
        })
    }

    /// Eight little-endian bytes.
    pub fn fixed64(&mut self) -> Result<u64, WireError> {
        let bytes: Option<[u8; 8]> = self
            .at
            .checked_add(8)
            .and_then(|end| self.bytes.get(self.at..end))
            .and_then(|slice| slice.try_into().ok());
        let Some(bytes) = bytes else {
            return Err(self.truncated(self.at));
        };
        self.at += 8;
        Ok(u64::from_le_bytes(bytes))
    }

    fn truncated(&self, at: usize) -> WireError {
        WireError::Truncated {
            message: self.message,
            at,
        }
    }

    /// A length varint and that many bytes.
    pub fn len_delimited(&mut self) -> Result<&'de [u8], WireError> {
        let length = self.varint()?;
        let start = self.at;
        let end = usize::try_from(length)
            .ok()
            .and_then(|length| start.checked_add(length))
            .filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.truncated(start));
        };
        self.at = end;
        Ok(&self.bytes[start..end])
    }

    /// The value of field `field`, which its type says is a varint: an error if `wire` is not.
    pub fn varint_field(&mut self, field: u32, wire: WireType) -> Result<u64, WireError> {
        self.expect(field, wire, WireType::Varint)?;
        self.varint()
    }

    /// The value of field `field`, which its type says is eight fixed bytes (a `double`).
    pub fn fixed64_field(&mut self, field: u32, wire: WireType) -> Result<u64, WireError> {
        self.expect(field, wire, WireType::Fixed64)?;
        self.fixed64()
    }

    /// The bytes of field `field`, which its type says is length-delimited.
    pub fn len_field(&mut self, field: u32, wire: WireType) -> Result<&'de [u8], WireError> {
        self.expect(field, wire, WireType::Len)?;
        self.len_delimited()
    }

    /// Reads past a value of wire type `wire`.
    pub fn skip(&mut self, wire: WireType) -> Result<(), WireError> {
        self.value(wire).map(drop)
    }

    fn expect(&self, field: u32, found: WireType, expected: WireType) -> Result<(), WireError> {
        if found == expected {
            Ok(())
        } else {
            Err(WireError::WrongType {
                message: self.message,
                field,
            })
        }
    }
}

/// The highest field number protobuf allows.
pub const MAX_FIELD: u32 = (1 << 29) - 1;

/// Reads a whole varint from the start of `bytes`: `Ok(None)` when `bytes` ends inside it (more
/// may arrive), else the value and how many bytes it took. For the streaming decoders, which see
/// a body a chunk at a time.
pub fn varint_prefix(
    bytes: &[u8],
    message: &'static str,
) -> Result<Option<(u64, usize)>, WireError> {
    let mut reader = Reader::new(bytes, message);
    match reader.varint() {
        Ok(value) => Ok(Some((value, reader.position()))),
        Err(WireError::Truncated { .. }) if bytes.len() < 10 => Ok(None),
        Err(error) => Err(error),
    }
}

// ---- writing ----

/// Appends `value` as a varint (least significant seven bits first, high bit = more follow).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends the key of field `number` with wire type `wire`.
#[inline]
pub fn put_key(out: &mut Vec<u8>, number: u32, wire: WireType) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire.number()));
}

/// Appends field `number` as length-delimited `bytes`.
#[inline]
pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, WireType::Len);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends field `number` as a varint.
#[inline]
pub fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_key(out, number, WireType::Varint);
    put_varint(out, value);
}

/// Appends field `number` as eight little-endian bytes.
#[inline]
pub fn put_fixed64_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_key(out, number, WireType::Fixed64);
    out.extend_from_slice(&value.to_le_bytes());
}

/// Where a length-delimited value whose length is not known yet starts: the caller wrote its key,
/// this reserves one byte for the length and answers the position of the value's first byte.
/// [`end_len`] writes the length once the value is complete.
///
/// Why one byte: most nested messages of an object (a label, a port, a condition) are shorter
/// than 128 bytes, whose length is one varint byte, so the reserved byte is simply overwritten;
/// a longer value moves its bytes up by the one to four bytes more its length takes, once.
#[inline]
pub fn begin_len(out: &mut Vec<u8>) -> usize {
    out.push(0);
    out.len()
}

/// Writes the length of the value that started at `start` (what [`begin_len`] answered) and ends
/// at the end of `out`.
pub fn end_len(out: &mut Vec<u8>, start: usize) {
    let length = out.len().saturating_sub(start);
    let Some(slot) = start.checked_sub(1) else {
        return;
    };
    if length < 0x80 {
        out[slot] = length as u8;
        return;
    }
    let mut varint = [0u8; 10];
    let mut used = 0;
    let mut rest = length as u64;
    while rest >= 0x80 {
        varint[used] = (rest as u8) | 0x80;
        rest >>= 7;
        used += 1;
    }
    varint[used] = rest as u8;
    used += 1;
    out[slot] = varint[0];
    out.splice(start..start, varint[1..used].iter().copied());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_wire_reads_keys_varints_and_lengths_and_refuses_bad_ones() {
        // field 1 varint 150; field 2 bytes "hi"; field 3 fixed64 1.0
        let mut bytes = vec![0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x19];
        bytes.extend_from_slice(&1.0f64.to_le_bytes());
        let mut reader = Reader::new(&bytes, "t");
        assert_eq!(reader.key().unwrap(), Some((1, WireType::Varint)));
        assert!(matches!(
            reader.value(WireType::Varint).unwrap(),
            Raw::Varint(150)
        ));
        assert_eq!(reader.key().unwrap(), Some((2, WireType::Len)));
        assert!(matches!(
            reader.value(WireType::Len).unwrap(),
            Raw::Len(b"hi")
        ));
        assert_eq!(reader.key().unwrap(), Some((3, WireType::Fixed64)));
        assert!(
            matches!(reader.value(WireType::Fixed64).unwrap(), Raw::Fixed64(b) if f64::from_bits(b) == 1.0)
        );
        assert_eq!(reader.key().unwrap(), None);

        for bad in [
            &[0x08][..],         // varint missing
            &[0x12, 0x05, b'a'], // length past the end
            &[0x0d, 0, 0, 0, 0], // wire type 5
            &[0x00, 0x01],       // field number 0
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ], // > 64 bits
            &[0x19, 1, 2, 3],    // fixed64 cut short
        ] {
            let mut reader = Reader::new(bad, "t");
            let outcome = reader.key().and_then(|key| match key {
                Some((_, wire)) => reader.value(wire).map(drop),
                None => Ok(()),
            });
            assert!(outcome.is_err(), "{bad:?}");
        }
        assert_eq!(varint_prefix(&[0x96], "t").unwrap(), None);
        assert_eq!(
            varint_prefix(&[0x96, 0x01, 7], "t").unwrap(),
            Some((150, 2))
        );
        let mut reader = Reader::new(&[0x08, 0x01], "t");
        assert_eq!(reader.key().unwrap(), Some((1, WireType::Varint)));
        assert!(matches!(
            reader.len_field(1, WireType::Varint),
            Err(WireError::WrongType { field: 1, .. })
        ));
    }

    #[test]
    fn protobuf_wire_writes_what_it_reads_lengths_of_every_size() {
        for value in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut reader = Reader::new(&out, "t");
            assert_eq!(reader.varint().unwrap(), value);
            assert!(reader.at_end());
        }
        for length in [0usize, 1, 127, 128, 200, 16_383, 16_384, 70_000] {
            let mut out = vec![0xaa];
            put_key(&mut out, 7, WireType::Len);
            let start = begin_len(&mut out);
            out.extend(std::iter::repeat_n(b'x', length));
            end_len(&mut out, start);
            put_varint_field(&mut out, 2, 5);
            let mut reader = Reader::new(&out[1..], "t");
            assert_eq!(reader.key().unwrap(), Some((7, WireType::Len)));
            assert_eq!(reader.len_delimited().unwrap().len(), length);
            assert_eq!(reader.key().unwrap(), Some((2, WireType::Varint)));
            assert_eq!(reader.varint().unwrap(), 5);
            assert!(reader.at_end());
        }
    }
}
