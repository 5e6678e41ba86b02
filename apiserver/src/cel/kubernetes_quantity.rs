//! Kubernetes' quantity library for CEL (`library.Quantity` in k8s.io/apiserver), which
//! kube-apiserver adds to the environment of every CRD validation rule:
//!
//! ```text
//!   quantity('1.5Gi')  ──► a Quantity value (an exact decimal, parsed as apimachinery parses one)
//!   isQuantity(s)      ──► whether quantity(s) would parse
//!   q.isGreaterThan(r), q.isLessThan(r), q.compareTo(r), q == r    exact comparisons
//!   q.add(r), q.add(1), q.sub(r), q.sub(1)                          exact sums: a new Quantity
//!   sign(q), q.asInteger(), q.isInteger(), q.asApproximateFloat()
//! ```
//!
//! # Why a copy of apimachinery's representation
//!
//! A rule can tell how a quantity is *held*, not only what it is worth: `isInteger()` is
//! apimachinery's `AsInt64`, which answers false for `1000m` and `1.0` (kept as 1000·10⁻³ and
//! 10·10⁻¹) and for any value that took the arbitrary-precision path (`1.5Gi`), and
//! `asApproximateFloat()` multiplies the held digits by a power of ten, which rounds twice. So this
//! module keeps apimachinery's two forms ([`Amount`]): an `int64` times a power of ten when the
//! text is short enough, else a big integer at nano precision (a value below 1n is rounded *up*
//! to it, away from zero). The big integers are `num-bigint`'s.
//!
//! # Bounds
//!
//! Go's `inf.Dec` keeps a scale of any size; aligning two numbers whose scales are far apart (a
//! sum of `1e999999` and `1n`) allocates a power of ten that size. Here such a sum or parse is an
//! error ([`QuantityError::TooLarge`]) past [`MAX_DIGITS`] digits, where kube-apiserver would
//! compute it (slowly). Comparisons need no such bound: they look at magnitudes first.

use std::any::Any;
use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, INT_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

/// The CEL type of a quantity (cel-go's `kubernetes.Quantity`).
static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

/// The most decimal digits an aligned or rounded big amount may have here (see the module docs).
pub const MAX_DIGITS: u64 = 4096;

/// The names this library declares (for the type checker's list of known functions).
pub const FUNCTIONS: [&str; 11] = [
    "quantity",
    "isQuantity",
    "sign",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "asApproximateFloat",
    "asInteger",
    "isInteger",
    "add",
    "sub",
];

/// Why a quantity could not be made, in apimachinery's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Past this server's bound on big amounts (not an error on kube-apiserver).
    #[error("quantity too large for this server (more than {MAX_DIGITS} digits)")]
    TooLarge,
}

/// How apimachinery holds a quantity's value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Amount {
    /// `value · 10^exponent` (apimachinery's `int64Amount`; its `scale` is this exponent).
    Small { value: i64, exponent: i32 },
    /// `unscaled · 10^-scale` (apimachinery's `inf.Dec`; after parsing, `scale` is 9, or 0 when
    /// capped, unless the value is zero).
    Big { unscaled: BigInt, scale: i64 },
}

/// A quantity, as a rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    amount: Amount,
}

/// The decimal base and exponent of a suffix, and whether it is a binary one (`Ki`…`Ei`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suffix {
    Decimal(i32),
    Binary(u32),
    Exponent(i32),
}

fn suffix(text: &str) -> Option<Suffix> {
    let decimal = match text {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some(Suffix::Decimal(e));
    }
    let binary = match text {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some(Suffix::Binary(e));
    }
    let rest = text.strip_prefix(['e', 'E']).filter(|r| !r.is_empty())?;
    // Go parses a 64-bit number, then keeps its low 32 bits.
    let parsed: i64 = go_parse_int(rest)?;
    Some(Suffix::Exponent(parsed as i32))
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign, then decimal digits.
fn go_parse_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The parts of a quantity's text: sign, number (sign, digits and fraction as written), the
/// integer digits without leading zeros, the fraction digits, the suffix.
struct Parts<'a> {
    positive: bool,
    number: &'a str,
    whole: &'a str,
    fraction: &'a str,
    suffix: &'a str,
}

/// apimachinery's `parseQuantityString`: the scanner, with its leniencies (`1.`, `.5`, `+1`).
fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = text.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut positive = true;
    match bytes.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            number: "0",
            whole: "0",
            fraction: "",
            suffix: "",
        });
    }
    let digits_from = |from: usize| {
        (from..end)
            .find(|&i| !bytes[i].is_ascii_digit())
            .unwrap_or(end)
    };
    let whole_end = digits_from(pos);
    let whole = if whole_end == pos {
        "0"
    } else {
        &text[pos..whole_end]
    };
    pos = whole_end;
    let mut fraction = "";
    if pos < end && bytes[pos] == b'.' {
        let fraction_end = digits_from(pos + 1);
        fraction = &text[pos + 1..fraction_end];
        pos = fraction_end;
    }
    let number = &text[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && matches!(bytes[pos], b'-' | b'+') {
        pos += 1;
    }
    if digits_from(pos) != end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        positive,
        number,
        whole,
        fraction,
        suffix: &text[suffix_start..],
    })
}

/// How many decimal digits `n` has (1 for zero).
fn digit_count(n: &BigInt) -> u64 {
    // A first guess from the bit length, corrected: log10(2) ≈ 0.30103.
    let bits = n.bits();
    let guess = ((bits as f64) * std::f64::consts::LOG10_2) as u64;
    let mut count = guess.max(1);
    let magnitude = n.abs();
    while magnitude >= pow10(count) {
        count += 1;
    }
    while count > 1 && magnitude < pow10(count - 1) {
        count -= 1;
    }
    count
}

fn pow10(n: u64) -> BigInt {
    BigInt::from(10u8).pow(u32::try_from(n).unwrap_or(u32::MAX))
}

/// `10^n` for `n` within [`MAX_DIGITS`], else the bound's error.
fn bounded_pow10(n: u64) -> Result<BigInt, QuantityError> {
    if n > MAX_DIGITS {
        return Err(QuantityError::TooLarge);
    }
    Ok(pow10(n))
}

/// The nano scale apimachinery rounds big amounts to.
const NANO_SCALE: i64 = 9;

impl Quantity {
    /// apimachinery's `ParseQuantity`.
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if text == "0" {
            return Ok(Quantity::small(0, 0));
        }
        let parts = split(text)?;
        let suffix = suffix(parts.suffix).ok_or(QuantityError::Suffix)?;
        let digits = (parts.whole.len() + parts.fraction.len()) as i64;
        let fraction_len = parts.fraction.len() as i64;
        // The fast path: an int64 times a power of ten (or of two, for whole binary amounts).
        let (precision, exponent, mantissa) = match suffix {
            Suffix::Decimal(e) | Suffix::Exponent(e) => (18 - digits, i64::from(e), 1i64),
            Suffix::Binary(e) if parts.fraction.is_empty() => {
                let precision = 15 - parts.whole.len() as i64 - (e as f32 * 3.0 / 10.0) as i64 - 1;
                (precision, 0, 1i64 << e)
            }
            Suffix::Binary(_) => (-1, 0, 1),
        };
        if precision >= 0 {
            let exponent = exponent - fraction_len;
            if exponent >= -NANO_SCALE {
                let shifted = format!("{}{}", parts.whole, parts.fraction);
                let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
                if let Some(result) = value.checked_mul(mantissa) {
                    let result = if parts.positive { result } else { -result };
                    let exponent = i32::try_from(exponent).map_err(|_| QuantityError::TooLarge)?;
                    return Ok(Quantity::small(result, exponent));
                }
            }
        }
        // The big path: the number as written, exactly, then rounded up to nano precision.
        let all_digits = format!("{}{}", parts.whole, parts.fraction);
        let mut unscaled: BigInt = all_digits.parse().map_err(|_| QuantityError::Numeric)?;
        if parts.number.is_empty() {
            return Err(QuantityError::Numeric);
        }
        let mut scale = fraction_len;
        match suffix {
            Suffix::Decimal(e) | Suffix::Exponent(e) => scale -= i64::from(e),
            Suffix::Binary(e) => unscaled <<= e,
        }
        if !unscaled.is_zero() {
            (unscaled, scale) = round_up_to_nano(unscaled, scale)?;
        }
        if matches!(suffix, Suffix::Binary(_)) {
            let max = BigInt::from(i64::MAX);
            if compare_decimals(&unscaled, scale, &max, 0) == Ordering::Greater {
                unscaled = max;
                scale = 0;
            }
        }
        if !parts.positive {
            unscaled = -unscaled;
        }
        Ok(Quantity {
            amount: Amount::Big { unscaled, scale },
        })
    }

    fn small(value: i64, exponent: i32) -> Quantity {
        Quantity {
            amount: Amount::Small { value, exponent },
        }
    }

    /// The value as an `inf.Dec` would hold it.
    fn as_decimal(&self) -> (BigInt, i64) {
        match &self.amount {
            Amount::Small { value, exponent } => (BigInt::from(*value), -i64::from(*exponent)),
            Amount::Big { unscaled, scale } => (unscaled.clone(), *scale),
        }
    }

    /// apimachinery's `Sign`.
    pub fn sign(&self) -> i64 {
        match &self.amount {
            Amount::Small { value, .. } => value.signum(),
            Amount::Big { unscaled, .. } => {
                if unscaled.is_zero() {
                    0
                } else if unscaled.is_negative() {
                    -1
                } else {
                    1
                }
            }
        }
    }

    /// apimachinery's `Cmp`: exact.
    pub fn compare(&self, other: &Quantity) -> Ordering {
        let (a, a_scale) = self.as_decimal();
        let (b, b_scale) = other.as_decimal();
        compare_decimals(&a, a_scale, &b, b_scale)
    }

    /// apimachinery's `AsInt64`: only a small amount at a non-negative exponent that fits.
    pub fn as_integer(&self) -> Option<i64> {
        match self.amount {
            Amount::Small { value, exponent } if exponent >= 0 => scale_up(value, exponent),
            _ => None,
        }
    }

    /// apimachinery's `AsApproximateFloat64`: the held digits times a power of ten.
    pub fn as_approximate_float(&self) -> f64 {
        let (base, exponent) = match &self.amount {
            Amount::Small { value, exponent } => (*value as f64, i64::from(*exponent)),
            Amount::Big { unscaled, scale } => (
                unscaled.to_f64().unwrap_or(f64::NAN),
                scale.saturating_neg(),
            ),
        };
        if exponent == 0 {
            return base;
        }
        base * go_pow10(exponent)
    }

    /// apimachinery's `Add`: small while the sum fits, else big.
    pub fn add(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        if let (
            Amount::Small {
                value: a,
                exponent: ae,
            },
            Amount::Small {
                value: b,
                exponent: be,
            },
        ) = (&self.amount, &other.amount)
        {
            if let Some((value, exponent)) = add_small((*a, *ae), (*b, *be)) {
                return Ok(Quantity::small(value, exponent));
            }
        }
        add_decimals(self.as_decimal(), other.as_decimal())
    }

    /// apimachinery's `Sub`: the small form adds the negated int64 (which, as in Go, wraps for
    /// the most negative one), the big form subtracts exactly.
    pub fn sub(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        if let (
            Amount::Small {
                value: a,
                exponent: ae,
            },
            Amount::Small {
                value: b,
                exponent: be,
            },
        ) = (&self.amount, &other.amount)
        {
            if let Some((value, exponent)) = add_small((*a, *ae), (b.wrapping_neg(), *be)) {
                return Ok(Quantity::small(value, exponent));
            }
        }
        let (b, b_scale) = other.as_decimal();
        add_decimals(self.as_decimal(), (-b, b_scale))
    }
}

/// The exact sum of two decimals, at the larger scale (inf's `Add`).
fn add_decimals(a: (BigInt, i64), b: (BigInt, i64)) -> Result<Quantity, QuantityError> {
    let scale = a.1.max(b.1);
    let align = |(n, s): (BigInt, i64)| -> Result<BigInt, QuantityError> {
        Ok(n * bounded_pow10(scale.abs_diff(s))?)
    };
    let unscaled = align(a)? + align(b)?;
    Ok(Quantity {
        amount: Amount::Big { unscaled, scale },
    })
}

/// Rounds `unscaled · 10^-scale` to scale 9, away from zero (inf's `RoundUp`).
fn round_up_to_nano(unscaled: BigInt, scale: i64) -> Result<(BigInt, i64), QuantityError> {
    match scale.cmp(&NANO_SCALE) {
        Ordering::Equal => Ok((unscaled, scale)),
        Ordering::Less => {
            let shift = NANO_SCALE.abs_diff(scale);
            Ok((unscaled * bounded_pow10(shift)?, NANO_SCALE))
        }
        Ordering::Greater => {
            let shift = scale.abs_diff(NANO_SCALE);
            let away = if unscaled.is_negative() { -1 } else { 1 };
            if shift > digit_count(&unscaled) {
                // Below one nano in magnitude, and not zero: one nano.
                return Ok((BigInt::from(away), NANO_SCALE));
            }
            let divisor = pow10(shift);
            let quotient = &unscaled / &divisor;
            let exact = (&quotient * &divisor) == unscaled;
            let rounded = if exact { quotient } else { quotient + away };
            Ok((rounded, NANO_SCALE))
        }
    }
}

/// Compares `a · 10^-a_scale` with `b · 10^-b_scale` exactly, aligning only numbers of close
/// magnitudes.
fn compare_decimals(a: &BigInt, a_scale: i64, b: &BigInt, b_scale: i64) -> Ordering {
    let sign = |n: &BigInt| {
        if n.is_zero() {
            0
        } else if n.is_negative() {
            -1
        } else {
            1
        }
    };
    let (sa, sb) = (sign(a), sign(b));
    if sa != sb || sa == 0 {
        return sa.cmp(&sb);
    }
    // Both non-zero, same sign: compare magnitudes, flipped for negatives.
    let magnitude_a = digit_count(a) as i128 - i128::from(a_scale);
    let magnitude_b = digit_count(b) as i128 - i128::from(b_scale);
    let by_magnitude = if magnitude_a > magnitude_b + 1 {
        Some(Ordering::Greater)
    } else if magnitude_b > magnitude_a + 1 {
        Some(Ordering::Less)
    } else {
        None
    };
    let absolute = by_magnitude.unwrap_or_else(|| {
        // Close magnitudes: the scales differ by at most the digit counts, plus 2.
        let scale = a_scale.max(b_scale);
        let a = a.abs() * pow10(scale.abs_diff(a_scale));
        let b = b.abs() * pow10(scale.abs_diff(b_scale));
        a.cmp(&b)
    });
    if sa < 0 { absolute.reverse() } else { absolute }
}

/// `value · 10^exponent` if it fits an i64 (apimachinery's `positiveScaleInt64`).
fn scale_up(value: i64, exponent: i32) -> Option<i64> {
    if value == 0 {
        return Some(0);
    }
    let mut result = value;
    for _ in 0..exponent {
        result = result.checked_mul(10)?;
    }
    Some(result)
}

/// apimachinery's `int64Amount.Add`: `None` when the sum leaves the int64 form.
fn add_small(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    let ((av, ae), (bv, be)) = (a, b);
    if bv == 0 {
        return Some(a);
    }
    if av == 0 {
        return Some(b);
    }
    match ae.cmp(&be) {
        Ordering::Equal => Some((av.checked_add(bv)?, ae)),
        Ordering::Greater => Some((scale_up(av, ae - be)?.checked_add(bv)?, be)),
        Ordering::Less => Some((av.checked_add(scale_up(bv, be - ae)?)?, ae)),
    }
}

/// Go's `math.Pow10`: products of exact powers from two tables, ±Inf or 0 out of range.
fn go_pow10(n: i64) -> f64 {
    let small = |i: i64| -> f64 { format!("1e{i}").parse().unwrap_or(f64::NAN) };
    if (0..=308).contains(&n) {
        return small(n / 32 * 32) * small(n % 32);
    }
    if (-323..0).contains(&n) {
        let m = -n;
        return small(-(m / 32 * 32)) / small(m % 32);
    }
    if n > 0 { f64::INFINITY } else { 0.0 }
}

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Quantity>()
            .is_some_and(|o| self.compare(o) == Ordering::Equal)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Quantity {}

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || QUANTITY_TYPE.to_owned();
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        to_quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    env.add_overload("sign", "quantity_sign", vec![q()], sign)?;
    let members: [(&str, &str, Vec<Type>, cel::common::functions::Function); 9] = [
        (
            "isGreaterThan",
            "quantity_is_greater_than",
            vec![q()],
            greater,
        ),
        ("isLessThan", "quantity_is_less_than", vec![q()], less),
        ("compareTo", "quantity_compare_to", vec![q()], compare_to),
        ("asApproximateFloat", "quantity_get_float", vec![], as_float),
        ("asInteger", "quantity_get_int", vec![], as_integer),
        ("isInteger", "quantity_is_integer", vec![], is_integer),
        ("add", "quantity_add", vec![q()], add),
        ("add", "quantity_add_int", vec![INT_TYPE], add),
        ("sub", "quantity_sub", vec![q()], sub),
    ];
    for (name, id, args, function) in members {
        env.add_member_overload(name, id, q(), args, function)?;
    }
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], sub)?;
    Ok(())
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

fn failed(function: &str, error: QuantityError) -> ExecutionError {
    ExecutionError::function_error(function, error.to_string())
}

fn one<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [arg]: [CowVal<'b, 'v>; 1] = args.try_into().map_err(|_| no_overload(function))?;
    Ok(arg)
}

fn string_arg(function: &str, value: &dyn Val) -> Result<String, ExecutionError> {
    value
        .downcast_ref::<CelString>()
        .map(|s| s.inner().to_string())
        .ok_or_else(|| no_overload(function))
}

fn quantity_arg(function: &str, value: &dyn Val) -> Result<Quantity, ExecutionError> {
    value
        .downcast_ref::<Quantity>()
        .cloned()
        .ok_or_else(|| no_overload(function))
}

/// The receiver and the other quantity (or int, as a quantity) of a binary method.
fn pair<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<(Quantity, Quantity), ExecutionError> {
    let [a, b]: [CowVal<'b, 'v>; 2] = args.try_into().map_err(|_| no_overload(function))?;
    let a = quantity_arg(function, a.as_ref())?;
    let b = match b.as_ref().downcast_ref::<CelInt>() {
        Some(i) => Quantity::small(*i.inner(), 0),
        None => quantity_arg(function, b.as_ref())?,
    };
    Ok((a, b))
}

fn to_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg("quantity", one("quantity", args)?.as_ref())?;
    let q = Quantity::parse(&text).map_err(|e| failed("quantity", e))?;
    Ok(CowVal::owned(q))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg("isQuantity", one("isQuantity", args)?.as_ref())?;
    Ok(CowVal::owned(CelBool::from(Quantity::parse(&text).is_ok())))
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_arg("sign", one("sign", args)?.as_ref())?;
    Ok(CowVal::owned(CelInt::from(q.sign())))
}

fn greater<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair("isGreaterThan", args)?;
    Ok(CowVal::owned(CelBool::from(
        a.compare(&b) == Ordering::Greater,
    )))
}

fn less<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair("isLessThan", args)?;
    Ok(CowVal::owned(CelBool::from(
        a.compare(&b) == Ordering::Less,
    )))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair("compareTo", args)?;
    let order: i64 = match a.compare(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    };
    Ok(CowVal::owned(CelInt::from(order)))
}

fn as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_arg(
        "asApproximateFloat",
        one("asApproximateFloat", args)?.as_ref(),
    )?;
    Ok(CowVal::owned(CelDouble::from(q.as_approximate_float())))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_arg("asInteger", one("asInteger", args)?.as_ref())?;
    let value = q.as_integer().ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })?;
    Ok(CowVal::owned(CelInt::from(value)))
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_arg("isInteger", one("isInteger", args)?.as_ref())?;
    Ok(CowVal::owned(CelBool::from(q.as_integer().is_some())))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair("add", args)?;
    let sum = a.add(&b).map_err(|e| failed("add", e))?;
    Ok(CowVal::owned(sum))
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair("sub", args)?;
    let difference = a.sub(&b).map_err(|e| failed("sub", e))?;
    Ok(CowVal::owned(difference))
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::{Quantity, QuantityError};

    fn q(text: &str) -> Quantity {
        match Quantity::parse(text) {
            Ok(q) => q,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    #[test]
    fn parsing_accepts_and_refuses_as_apimachinery_does() {
        for good in [
            "1Gi", "+1.e3", ".5", "1E-3", "0", "-0.1n", "1e999", "10Ei", "0.000",
        ] {
            assert!(Quantity::parse(good).is_ok(), "{good}");
        }
        assert_eq!(Quantity::parse(""), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1.2.3"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1 "), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1GB"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1Ki2"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1.5e"), Err(QuantityError::Suffix));
    }

    #[test]
    fn the_held_form_decides_is_integer() {
        for (text, integer) in [
            ("1k", Some(1000)),
            ("1Gi", Some(1 << 30)),
            ("1000m", None),
            ("1.0", None),
            ("1.5Gi", None),
            ("10Ei", None),
            ("123456789012345678901", None),
        ] {
            assert_eq!(q(text).as_integer(), integer, "{text}");
        }
        assert_eq!(
            q("10Ei").compare(&q("9223372036854775807")),
            Ordering::Equal
        );
        let sum = q("9223372036854775807").add(&q("1"));
        assert_eq!(sum.map(|s| s.as_integer()), Ok(None));
    }

    #[test]
    fn comparisons_are_exact_and_rounding_goes_away_from_zero() {
        assert_eq!(q("1.5Gi").compare(&q("1536Mi")), Ordering::Equal);
        assert_eq!(q("1M").compare(&q("1Mi")), Ordering::Less);
        assert_eq!(q("0.1n").compare(&q("1n")), Ordering::Equal);
        assert_eq!(q("-0.1n").compare(&q("-1n")), Ordering::Equal);
        assert_eq!(q("1e999").compare(&q("1e998")), Ordering::Greater);
        assert_eq!(q("-1e999").compare(&q("1n")), Ordering::Less);
        // Held at nano scale: the float is the digits times 1e-9, rounded twice.
        assert_ne!(
            q("12345678901234567890").as_approximate_float(),
            12345678901234567890.0
        );
        assert_eq!(q("1.5").as_approximate_float(), 1.5);
    }
}
