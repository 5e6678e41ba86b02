//! The protobuf wire format at its lowest level: a cursor over one message's bytes that reads
//! keys (field number + wire type) and the raw value behind each, never copying. What a value
//! *means* (a string, a nested message, a timestamp) is decided one level up, by the schema
//! (`de.rs`); here every read is only bounds-checked and returns an [`Error`] on bad input.

use super::Error;

/// The wire types the messages of Kubernetes use: varints (ints, bools, enums as ints),
/// eight-byte fixed values (`double`), and length-delimited values (strings, bytes, messages,
/// packed scalars). Groups (3, 4) and 32-bit fixed values (5) never occur in them; reading one is
/// an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireType {
    Varint,
    Fixed64,
    Len,
}

/// One value as it is on the wire, before the schema says what it is. `Absent` stands for a
/// value the wire left out where a value is still due (a map entry without its value): the
/// type's zero.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Raw<'de> {
    Varint(u64),
    Fixed64(u64),
    Len(&'de [u8]),
    Absent,
}

/// A cursor over one message. Invariant: `at <= bytes.len()`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'de> {
    bytes: &'de [u8],
    at: usize,
    /// The message's name, for errors.
    message: &'static str,
}

impl<'de> Reader<'de> {
    pub(crate) fn new(bytes: &'de [u8], message: &'static str) -> Reader<'de> {
        Reader {
            bytes,
            at: 0,
            message,
        }
    }

    /// Where the cursor is, in bytes from the message's start.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    pub(crate) fn message(&self) -> &'static str {
        self.message
    }

    pub(crate) fn at_end(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// A reader of the same message from byte `at` on (a position a reader of it returned).
    pub(crate) fn from(self, at: usize) -> Reader<'de> {
        Reader {
            at: at.min(self.bytes.len()),
            ..self
        }
    }

    /// The next field's number and wire type, or `None` at the end of the message.
    pub(crate) fn key(&mut self) -> Result<Option<(u32, WireType)>, Error> {
        if self.at_end() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(Error::FieldNumber {
                message: self.message,
                number,
            });
        }
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            other => {
                return Err(Error::WireType {
                    message: self.message,
                    field: number as u32,
                    wire: other as u8,
                });
            }
        };
        Ok(Some((number as u32, wire)))
    }

    /// The value after a key of wire type `wire`.
    pub(crate) fn value(&mut self, wire: WireType) -> Result<Raw<'de>, Error> {
        Ok(match wire {
            WireType::Varint => Raw::Varint(self.varint()?),
            WireType::Fixed64 => Raw::Fixed64(self.fixed64()?),
            WireType::Len => Raw::Len(self.len_delimited()?),
        })
    }

    /// A varint: at most ten bytes, no bits past the 64th.
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
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
            // `let else`, not `ok_or`: the error is built only when needed (it has a
            // destructor, and this is the innermost loop).
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
        Err(Error::Varint {
            message: self.message,
            at: start,
        })
    }

    /// Eight little-endian bytes.
    pub(crate) fn fixed64(&mut self) -> Result<u64, Error> {
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

    fn truncated(&self, at: usize) -> Error {
        Error::Truncated {
            message: self.message,
            at,
        }
    }

    /// A length varint and that many bytes.
    pub(crate) fn len_delimited(&mut self) -> Result<&'de [u8], Error> {
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
}

/// Reads a whole varint from the start of `bytes`: `Ok(None)` when `bytes` ends inside it (more
/// may arrive), else the value and how many bytes it took. For the streaming decoders, which see
/// a body a chunk at a time.
pub(crate) fn varint_prefix(
    bytes: &[u8],
    message: &'static str,
) -> Result<Option<(u64, usize)>, Error> {
    let mut reader = Reader::new(bytes, message);
    match reader.varint() {
        Ok(value) => Ok(Some((value, reader.position()))),
        Err(Error::Truncated { .. }) if bytes.len() < 10 => Ok(None),
        Err(error) => Err(error),
    }
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
    }
}
