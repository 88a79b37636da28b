//! Sprig's float math (`addf`, `subf`, `mulf`, `divf`, `add1f`, `maxf`, `minf`).
//!
//! Sprig converts each operand with `decimal.NewFromFloat` (the shortest decimal that reads back
//! as the float), computes in decimal and converts the result back, so `addf 0.1 0.2` is `0.3`
//! rather than binary floating point's `0.30000000000000004`. Division rounds to 16 decimal
//! places like `shopspring/decimal`'s default `DivisionPrecision`.

use super::{FResult, Param, Registry, func, to_float64};
use crate::value::Value;

const A: &[Param] = &[Param::Any];

/// Digits kept after the point by a decimal division.
const DIV_PLACES: i32 = 16;

/// `mantissa * 10^exp`.
#[derive(Debug, Clone, Copy)]
struct Dec {
    m: i128,
    e: i32,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl Dec {
    /// The shortest decimal that reads back as `f` (`None` for NaN and infinities).
    fn from_f64(f: f64) -> Option<Dec> {
        if !f.is_finite() {
            return None;
        }
        // `{:e}` prints the shortest round-tripping digits, e.g. "-1.25e-3".
        let text = format!("{f:e}");
        let (digits, exp) = text.split_once('e')?;
        let exp: i32 = exp.parse().ok()?;
        let frac = digits.split_once('.').map_or(0, |(_, f)| f.len());
        let m: i128 = digits.replace('.', "").parse().ok()?;
        Some(Dec {
            m,
            e: exp - i32::try_from(frac).ok()?,
        })
    }

    fn to_f64(self) -> f64 {
        format!("{}e{}", self.m, self.e).parse().unwrap_or(f64::NAN)
    }

    /// `self * 10^(self.e - e)`, re-expressed at the smaller exponent `e`.
    fn rescale(self, e: i32) -> Option<i128> {
        let shift = u32::try_from(self.e - e).ok()?;
        self.m.checked_mul(10i128.checked_pow(shift)?)
    }

    /// The exact result, or `None` when it does not fit the fixed-width mantissa.
    fn apply(self, op: Op, o: Dec) -> Option<Result<Dec, String>> {
        let e = self.e.min(o.e);
        Some(Ok(match op {
            Op::Add => Dec {
                m: self.rescale(e)?.checked_add(o.rescale(e)?)?,
                e,
            },
            Op::Sub => Dec {
                m: self.rescale(e)?.checked_sub(o.rescale(e)?)?,
                e,
            },
            Op::Mul => Dec {
                m: self.m.checked_mul(o.m)?,
                e: self.e.checked_add(o.e)?,
            },
            Op::Div => {
                if o.m == 0 {
                    return Some(Err("decimal division by zero".to_owned()));
                }
                // quotient = m1/m2 * 10^(e1-e2), wanted as q * 10^-DIV_PLACES.
                let shift = self.e - o.e + DIV_PLACES;
                let (mut n, mut d) = (self.m, o.m);
                let p = 10i128.checked_pow(shift.unsigned_abs())?;
                if shift >= 0 {
                    n = n.checked_mul(p)?;
                } else {
                    d = d.checked_mul(p)?;
                }
                let (q, r) = (n / d, n % d);
                // Round half away from zero.
                let q = if r.checked_mul(2)?.abs() >= d.abs() {
                    q + if (n < 0) == (d < 0) { 1 } else { -1 }
                } else {
                    q
                };
                Dec {
                    m: q,
                    e: -DIV_PLACES,
                }
            }
        }))
    }
}

/// `decimal.NewFromFloat`, which panics (a template error in Go) on NaN and infinities.
fn dec(f: f64) -> Result<Option<Dec>, String> {
    if f.is_finite() {
        Ok(Dec::from_f64(f))
    } else {
        Err(format!("Cannot create a Decimal from {}", go_float(f)))
    }
}

/// `%v` of a non-finite float.
fn go_float(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}

/// Folds `rest` into `first` in decimal like Sprig's `execDecimalOp`, continuing in `f64` from
/// a step whose mantissa would overflow 128 bits.
fn fold(first: &Value, rest: &[Value], op: Op) -> FResult {
    let mut f = to_float64(first);
    let mut acc = dec(f)?;
    for v in rest {
        let b = to_float64(v);
        let x = acc.or_else(|| Dec::from_f64(f));
        let exact = match (x, dec(b)?) {
            (Some(x), Some(y)) => x.apply(op, y).transpose()?,
            _ => None,
        };
        (acc, f) = match exact {
            Some(r) => (Some(r), r.to_f64()),
            None => (
                None,
                match op {
                    Op::Add => f + b,
                    Op::Sub => f - b,
                    Op::Mul => f * b,
                    Op::Div if b == 0.0 => return Err("decimal division by zero".to_owned()),
                    Op::Div => f / b,
                },
            ),
        };
    }
    Ok(Value::Float(f))
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "addf",
        func(&[], Some(Param::Any), |_, a| {
            fold(&Value::Float(0.0), &a, Op::Add)
        }),
    );
    m.insert(
        "add1f",
        func(A, None, |_, a| fold(&a[0], &[Value::Float(1.0)], Op::Add)),
    );
    m.insert(
        "subf",
        func(A, Some(Param::Any), |_, a| fold(&a[0], &a[1..], Op::Sub)),
    );
    m.insert(
        "mulf",
        func(A, Some(Param::Any), |_, a| fold(&a[0], &a[1..], Op::Mul)),
    );
    m.insert(
        "divf",
        func(A, Some(Param::Any), |_, a| fold(&a[0], &a[1..], Op::Div)),
    );
    m.insert(
        "maxf",
        func(A, Some(Param::Any), |_, a| {
            Ok(Value::Float(
                a.iter().map(to_float64).fold(to_float64(&a[0]), go_max),
            ))
        }),
    );
    m.insert(
        "minf",
        func(A, Some(Param::Any), |_, a| {
            Ok(Value::Float(
                a.iter().map(to_float64).fold(to_float64(&a[0]), go_min),
            ))
        }),
    );
}

/// Go's `math.Max`: NaN wins.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Go's `math.Min`: NaN wins.
fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}
