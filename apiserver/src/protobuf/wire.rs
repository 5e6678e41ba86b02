//! The protobuf wire format, as far as core's schema table needs it: keys, varints, 64-bit fixed
//! fields (`double`) and length-delimited fields. Every read is bounds-checked and returns a
//! [`DecodeError`] on bad input.

use super::DecodeError;

/// The wire types this decoder reads. 32-bit fixed fields (5) and groups (3, 4) do not occur in
/// the messages of the table, so a field with one of them is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint,
    /// Eight little-endian bytes: `double` (JSONSchemaProps' `maximum`, `minimum`, `multipleOf`).
    Fixed64,
    LengthDelimited,
    Other(u8),
}

impl WireType {
    fn number(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::LengthDelimited => 2,
            WireType::Other(n) => n,
        }
    }
}

/// A cursor over one message's bytes.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `bytes` as the message named `message` (the name is for errors).
    pub fn new(bytes: &'a [u8], message: &'static str) -> Reader<'a> {
        Reader {
            bytes,
            at: 0,
            message,
        }
    }

    /// The next field's number and wire type, or `None` at the end of the message.
    pub fn key(&mut self) -> Result<Option<(u32, WireType)>, DecodeError> {
        if self.at >= self.bytes.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > (1 << 29) - 1 {
            return Err(DecodeError::FieldNumber {
                message: self.message,
                field,
            });
        }
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::LengthDelimited,
            n => WireType::Other(n as u8),
        };
        Ok(Some((field as u32, wire)))
    }

    /// A varint at the cursor: at most 10 bytes, no bits beyond 64.
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.at;
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = *self.bytes.get(self.at).ok_or(DecodeError::Truncated {
                message: self.message,
                at: self.at,
            })?;
            self.at += 1;
            let bits = u64::from(byte & 0x7f);
            // The tenth byte may carry only the 64th bit.
            if i == 9 && bits > 1 {
                return Err(DecodeError::Varint {
                    message: self.message,
                    at: start,
                });
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::Varint {
            message: self.message,
            at: start,
        })
    }

    /// The value of a varint field, checking its wire type.
    pub fn varint_field(&mut self, field: u32, wire: WireType) -> Result<u64, DecodeError> {
        self.expect(field, wire, WireType::Varint)?;
        self.varint()
    }

    /// The value of a 64-bit fixed field (a `double`), checking its wire type.
    pub fn fixed64_field(&mut self, field: u32, wire: WireType) -> Result<u64, DecodeError> {
        self.expect(field, wire, WireType::Fixed64)?;
        let bytes: [u8; 8] = self
            .at
            .checked_add(8)
            .and_then(|end| self.bytes.get(self.at..end))
            .and_then(|slice| slice.try_into().ok())
            .ok_or(DecodeError::Truncated {
                message: self.message,
                at: self.at,
            })?;
        self.at += 8;
        Ok(u64::from_le_bytes(bytes))
    }

    /// The bytes of a length-delimited field, checking its wire type and length.
    pub fn length_delimited(
        &mut self,
        field: u32,
        wire: WireType,
    ) -> Result<&'a [u8], DecodeError> {
        self.expect(field, wire, WireType::LengthDelimited)?;
        let length = self.varint()?;
        let end = usize::try_from(length)
            .ok()
            .and_then(|length| self.at.checked_add(length))
            .filter(|&end| end <= self.bytes.len())
            .ok_or(DecodeError::Truncated {
                message: self.message,
                at: self.at,
            })?;
        let value = &self.bytes[self.at..end];
        self.at = end;
        Ok(value)
    }

    /// Reads past a field's value whatever its type (of the wire types this reader knows).
    pub fn skip(&mut self, field: u32, wire: WireType) -> Result<(), DecodeError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.fixed64_field(field, wire).map(drop),
            WireType::LengthDelimited => self.length_delimited(field, wire).map(drop),
            WireType::Other(_) => self.expect(field, wire, WireType::LengthDelimited),
        }
    }

    fn expect(&self, field: u32, found: WireType, expected: WireType) -> Result<(), DecodeError> {
        if found == expected {
            Ok(())
        } else {
            Err(DecodeError::WireType {
                message: self.message,
                field,
                found: found.number(),
                expected: expected.number(),
            })
        }
    }
}
