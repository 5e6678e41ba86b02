//! Resource quantities (`500m`, `252Mi`, `2`, `1e3`): parsed to an exact count of thousandths, so
//! usage adds up without rounding, and written back in a form Kubernetes parses to the same value.

use std::fmt;

/// A quantity in thousandths of a unit (`500m` is 500, `1` is 1000, `1Ki` is 1,024,000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Quantity {
    milli: i128,
}

/// A string that is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
)]
pub struct BadQuantity(pub String);

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { milli: 0 };

    /// `n` whole units (an object count).
    pub fn count(n: i64) -> Quantity {
        Quantity {
            milli: i128::from(n).saturating_mul(1000),
        }
    }

    /// Parses a Kubernetes quantity. Precision below a thousandth is rounded up, as Kubernetes
    /// rounds a `n` or `u` quantity up to `1m` when it is read in milli-units.
    pub fn parse(text: &str) -> Result<Quantity, BadQuantity> {
        let bad = || BadQuantity(text.to_string());
        let s = text.trim();
        let (sign, s) = match s.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, s.strip_prefix('+').unwrap_or(s)),
        };
        let number_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(number_end);
        if number.is_empty() || number == "." {
            return Err(bad());
        }
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if fraction.contains('.') {
            return Err(bad());
        }
        // The digits as an integer, and the power of ten that scales it back.
        let digits = format!("{whole}{fraction}");
        let mantissa: i128 = digits.parse().map_err(|_| bad())?;
        let mut exponent10: i32 = -i32::try_from(fraction.len()).map_err(|_| bad())?;
        let mut factor: i128 = 1;
        match suffix {
            "" => {}
            "n" => exponent10 -= 9,
            "u" => exponent10 -= 6,
            "m" => exponent10 -= 3,
            "k" => exponent10 += 3,
            "M" => exponent10 += 6,
            "G" => exponent10 += 9,
            "T" => exponent10 += 12,
            "P" => exponent10 += 15,
            "E" => exponent10 += 18,
            "Ki" => factor = 1 << 10,
            "Mi" => factor = 1 << 20,
            "Gi" => factor = 1 << 30,
            "Ti" => factor = 1 << 40,
            "Pi" => factor = 1 << 50,
            "Ei" => factor = 1 << 60,
            other => {
                let exponent = other
                    .strip_prefix('e')
                    .or_else(|| other.strip_prefix('E'))
                    .ok_or_else(bad)?;
                let exponent: i32 = exponent.parse().map_err(|_| bad())?;
                exponent10 = exponent10.checked_add(exponent).ok_or_else(bad)?;
            }
        }
        // milli = mantissa * factor * 10^(exponent10 + 3), rounded up. Every step is checked: a
        // quantity too large (or too precise) for 128 bits is refused, never wrapped.
        let scale = exponent10.checked_add(3).ok_or_else(bad)?;
        let value = mantissa.checked_mul(factor).ok_or_else(bad)?;
        let milli = if scale >= 0 {
            let power = 10i128.checked_pow(scale.unsigned_abs()).ok_or_else(bad)?;
            value.checked_mul(power).ok_or_else(bad)?
        } else {
            let power = 10i128.checked_pow(scale.unsigned_abs()).ok_or_else(bad)?;
            // Rounded up: value / power, plus one when something is left over.
            value / power + i128::from(value % power != 0)
        };
        Ok(Quantity {
            milli: if sign < 0 { -milli } else { milli },
        })
    }

    /// The JSON value of a quantity (a string or a number), parsed.
    pub fn from_json(value: &serde_json::Value) -> Option<Quantity> {
        match value {
            serde_json::Value::String(s) => Quantity::parse(s).ok(),
            serde_json::Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
            _ => None,
        }
    }

    /// True when above zero.
    pub fn is_positive(self) -> bool {
        self.milli > 0
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, other: Quantity) -> Quantity {
        // Saturating: a sum past 128 bits (no real cluster gets near) stays the largest quantity.
        Quantity {
            milli: self.milli.saturating_add(other.milli),
        }
    }
}

impl std::ops::AddAssign for Quantity {
    fn add_assign(&mut self, other: Quantity) {
        self.milli = self.milli.saturating_add(other.milli);
    }
}

impl fmt::Display for Quantity {
    /// Whole numbers plainly, or with the largest binary suffix that divides them when they are
    /// at least 1Ki (`264241152` is written `252Mi`); fractions in milli-units (`500m`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli % 1000 != 0 {
            return write!(f, "{}m", self.milli);
        }
        let units = self.milli / 1000;
        for (shift, suffix) in [
            (60, "Ei"),
            (50, "Pi"),
            (40, "Ti"),
            (30, "Gi"),
            (20, "Mi"),
            (10, "Ki"),
        ] {
            let size = 1i128 << shift;
            if units.unsigned_abs() >= size.unsigned_abs() && units % size == 0 {
                return write!(f, "{}{suffix}", units / size);
            }
        }
        write!(f, "{units}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn suffixes_scale_exactly() {
        assert_eq!(q("500m"), Quantity { milli: 500 });
        assert_eq!(q("1"), Quantity::count(1));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1k"), Quantity::count(1000));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("252Mi"), Quantity::count(252 * 1024 * 1024));
        assert_eq!(q("30Gi") + q("20Gi"), q("50Gi"));
        assert_eq!(q("1n"), Quantity { milli: 1 });
        assert!(Quantity::parse("1Qi").is_err());
        assert!(Quantity::parse("").is_err());
    }

    #[test]
    fn written_forms_parse_back() {
        for s in ["500m", "1", "252Mi", "0", "3", "1536Mi", "1000"] {
            assert_eq!(q(&q(s).to_string()), q(s), "{s}");
        }
        assert_eq!(q("264241152").to_string(), "252Mi");
        assert_eq!(q("0.5").to_string(), "500m");
    }

    #[test]
    fn quantities_too_large_are_refused_not_wrapped() {
        for text in [
            "0.1e-2147483648",
            "1e2147483647",
            "99999999999999999999999999999999999999999",
            "1e40",
        ] {
            assert!(Quantity::parse(text).is_err(), "{text}");
        }
        // i128::MAX nano-units is fine: it is divided, rounding up, not multiplied.
        assert!(Quantity::parse("170141183460469231731687303715884105727n").is_ok());
        let huge = q("100000000000000000000000000000000000");
        assert_eq!(huge + huge, Quantity { milli: i128::MAX });
        let mut sum = huge;
        sum += huge;
        assert_eq!(sum, Quantity { milli: i128::MAX });
    }
}
