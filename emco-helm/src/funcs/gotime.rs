//! Go's `time.Time` as Sprig's date functions use it: formatting and parsing with Go's
//! reference-time layouts (`2006-01-02T15:04:05Z07:00`), and fixed zones.
//!
//! The local zone is UTC (Helm's usual container setting). A parsed time keeps the offset and
//! zone abbreviation it was written with, as Go's `time.Parse` does: `+02:00` gives a zone with
//! no name, `MST` a zone of that name at offset zero, `UTC` or `Z` the UTC zone. Named zones
//! (`America/New_York`) are read from the system's zoneinfo files like Go's
//! `time.LoadLocation`; a name that does not load is UTC, as Sprig makes it.

use emco_core::poison::lock;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A `time.Time`: an instant and the fixed zone it is shown in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Time {
    /// Seconds since the Unix epoch.
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
    /// Seconds east of UTC.
    pub offset: i32,
    /// The zone abbreviation (`UTC`, `MST`), empty for an unnamed fixed zone (`+0200`).
    pub zone: Arc<str>,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Layout elements, longest first as Go's `nextStdChunk` tells them apart.
const TOKENS: [&str; 33] = [
    "January",
    "Jan",
    "Monday",
    "Mon",
    "MST",
    "2006",
    "Z07:00:00",
    "Z070000",
    "Z07:00",
    "Z0700",
    "Z07",
    "-07:00:00",
    "-070000",
    "-07:00",
    "-0700",
    "-07",
    "002",
    "__2",
    "_2",
    "01",
    "02",
    "03",
    "04",
    "05",
    "06",
    "15",
    "PM",
    "pm",
    "1",
    "2",
    "3",
    "4",
    "5",
];

/// A chunk of a layout: literal text or one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk<'a> {
    Literal(&'a str),
    Token(&'a str),
    /// `.000` (`zeros`) or `.999` fractional seconds of `digits` digits; `sep` is `.` or `,`.
    Frac {
        text: &'a str,
        zeros: bool,
        digits: usize,
    },
}

/// Splits `layout` into literal text and elements as Go's `nextStdChunk` does.
fn chunks(layout: &str) -> Vec<Chunk<'_>> {
    let mut out = Vec::new();
    let mut lit_start = 0;
    let mut i = 0;
    let b = layout.as_bytes();
    while i < b.len() {
        let rest = &layout[i..];
        let found = if let Some(frac) = fraction_token(rest) {
            Some(Chunk::Frac {
                text: frac,
                zeros: frac.as_bytes()[1] == b'0',
                digits: frac.len() - 1,
            })
        } else {
            TOKENS
                .iter()
                .find(|t| rest.starts_with(**t) && token_allowed(layout, i, t))
                .map(|t| Chunk::Token(t))
        };
        match found {
            Some(chunk) => {
                if lit_start < i {
                    out.push(Chunk::Literal(&layout[lit_start..i]));
                }
                let len = match chunk {
                    Chunk::Token(t) => t.len(),
                    Chunk::Frac { text, .. } => text.len(),
                    Chunk::Literal(l) => l.len(),
                };
                out.push(chunk);
                i += len;
                lit_start = i;
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    if lit_start < b.len() {
        out.push(Chunk::Literal(&layout[lit_start..]));
    }
    out
}

/// Go's context rules: `Jan`/`Mon` are not elements when a lower-case letter follows
/// (`January` and `Monday` already matched) and `_2006` is not `_2`.
fn token_allowed(layout: &str, at: usize, token: &str) -> bool {
    if token == "Jan" || token == "Mon" {
        let next = layout.as_bytes().get(at + 3);
        return !next.is_some_and(u8::is_ascii_lowercase);
    }
    // `_2006` is a literal `_` then the year.
    !(token == "_2" && layout[at + 1..].starts_with("2006"))
}

/// `.000` / `,999` style fractional-second tokens (a run of one digit after `.` or `,`, not
/// followed by another digit).
fn fraction_token(rest: &str) -> Option<&str> {
    let b = rest.as_bytes();
    if b.len() < 2 || !(b[0] == b'.' || b[0] == b',') || !(b[1] == b'0' || b[1] == b'9') {
        return None;
    }
    let digit = b[1];
    let mut n = 1;
    while n < b.len() && b[n] == digit {
        n += 1;
    }
    if b.get(n).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some(&rest[..n])
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl Time {
    /// A time in UTC.
    pub(crate) fn utc(secs: i64, nanos: u32) -> Time {
        Time {
            secs,
            nanos,
            offset: 0,
            zone: Arc::from("UTC"),
        }
    }

    /// `time.Now()` (in the local zone, UTC).
    pub(crate) fn now() -> Time {
        let now = SystemTime::now();
        Time::utc(
            emco_core::time::unix_seconds(now),
            now.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()),
        )
    }

    /// Go's zero `time.Time`: January 1, year 1, 00:00:00 UTC.
    pub(crate) fn zero() -> Time {
        Time::utc(emco_core::time::days_from_civil(1, 1, 1) * 86_400, 0)
    }

    /// `t.In(time.UTC)`: the same instant shown in UTC.
    pub(crate) fn in_utc(&self) -> Time {
        Time::utc(self.secs, self.nanos)
    }

    /// Nanoseconds since the Unix epoch.
    pub(crate) fn unix_nanos(&self) -> i128 {
        i128::from(self.secs) * 1_000_000_000 + i128::from(self.nanos)
    }

    /// `t.Add(d)` (the zone is kept).
    pub(crate) fn add(&self, ns: i64) -> Time {
        let total = self.unix_nanos() + i128::from(ns);
        Time {
            secs: i64::try_from(total.div_euclid(1_000_000_000)).unwrap_or(i64::MAX),
            nanos: u32::try_from(total.rem_euclid(1_000_000_000)).unwrap_or(0),
            offset: self.offset,
            zone: self.zone.clone(),
        }
    }

    /// `time.Since(t)`, saturating like Go's `Time.Sub`.
    pub(crate) fn since(&self) -> i64 {
        let d = Time::now().unix_nanos() - self.unix_nanos();
        i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
    }

    /// Year, month (1-12), day, hour, minute, second, day of week (0 = Sunday), day of year,
    /// all in the time's own zone.
    pub(crate) fn civil(&self) -> (i64, u32, u32, u32, u32, u32, u32, u32) {
        let local = self.secs.saturating_add(i64::from(self.offset));
        let days = local.div_euclid(86_400);
        let rem = u32::try_from(local.rem_euclid(86_400)).unwrap_or(0);
        let (year, month, day) = emco_core::time::civil_from_days(days);
        let weekday = u32::try_from((days + 4).rem_euclid(7)).unwrap_or(0);
        const CUM: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
        let yday = CUM[(month - 1) as usize] + day + u32::from(is_leap(year) && month > 2);
        (
            year,
            month,
            day,
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            weekday,
            yday,
        )
    }

    /// The zone offset as Go writes it for `-0700`-style elements.
    fn write_offset(&self, out: &mut String, token: &str) {
        let iso = token.starts_with('Z');
        if iso && self.offset == 0 {
            out.push('Z');
            return;
        }
        let abs = self.offset.unsigned_abs();
        out.push(if self.offset < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", abs / 3600));
        let t = token.trim_start_matches(['Z', '-']);
        let colon = t.contains(':');
        if t.len() > 2 {
            if colon {
                out.push(':');
            }
            out.push_str(&format!("{:02}", abs / 60 % 60));
        }
        if t == "070000" || t == "07:00:00" {
            if colon {
                out.push(':');
            }
            out.push_str(&format!("{:02}", abs % 60));
        }
    }

    /// Go's `Time.Format(layout)`.
    pub(crate) fn format(&self, layout: &str) -> String {
        let (year, month, day, hour, min, sec, wday, yday) = self.civil();
        let mut out = String::new();
        for chunk in chunks(layout) {
            let token = match chunk {
                Chunk::Literal(l) => {
                    out.push_str(l);
                    continue;
                }
                Chunk::Frac {
                    text,
                    zeros,
                    digits,
                } => {
                    let all = format!("{:09}", self.nanos);
                    let shown = &all[..digits.min(9)];
                    let sep = &text[..1];
                    if zeros {
                        out.push_str(sep);
                        out.push_str(shown);
                    } else {
                        let kept = shown.trim_end_matches('0');
                        if !kept.is_empty() {
                            out.push_str(sep);
                            out.push_str(kept);
                        }
                    }
                    continue;
                }
                Chunk::Token(t) => t,
            };
            let h12 = if hour % 12 == 0 { 12 } else { hour % 12 };
            let pm = hour >= 12;
            let text = match token {
                "January" => MONTHS[(month - 1) as usize].to_owned(),
                "Jan" => MONTHS[(month - 1) as usize][..3].to_owned(),
                "Monday" => DAYS[wday as usize].to_owned(),
                "Mon" => DAYS[wday as usize][..3].to_owned(),
                "MST" => {
                    if self.zone.is_empty() {
                        // Go prints an unnamed zone as its -0700 offset.
                        let mut s = String::new();
                        self.write_offset(&mut s, "-0700");
                        s
                    } else {
                        self.zone.to_string()
                    }
                }
                "2006" => format!("{year:04}"),
                z if z.starts_with('Z') || z.starts_with("-07") => {
                    self.write_offset(&mut out, z);
                    continue;
                }
                "002" => format!("{yday:03}"),
                "__2" => format!("{yday:>3}"),
                "_2" => format!("{day:>2}"),
                "01" => format!("{month:02}"),
                "02" => format!("{day:02}"),
                "03" => format!("{h12:02}"),
                "04" => format!("{min:02}"),
                "05" => format!("{sec:02}"),
                "06" => format!("{:02}", year.rem_euclid(100)),
                "15" => format!("{hour:02}"),
                "PM" => (if pm { "PM" } else { "AM" }).to_owned(),
                "pm" => (if pm { "pm" } else { "am" }).to_owned(),
                "1" => month.to_string(),
                "2" => day.to_string(),
                "3" => h12.to_string(),
                "4" => min.to_string(),
                _ => sec.to_string(),
            };
            out.push_str(&text);
        }
        out
    }

    /// Go's `Time.String()`.
    pub(crate) fn string(&self) -> String {
        self.format("2006-01-02 15:04:05.999999999 -0700 MST")
    }
}

/// Go's `strconv.Quote` for the short ASCII texts of parse errors.
fn quote(s: &str) -> String {
    crate::gofmt::quote(s)
}

/// A parse failure: `cannot parse VALUE as ELEM` or a range message.
struct ParseError {
    value_elem: String,
    layout_elem: String,
    message: String,
}

fn bad(layout_elem: &str, value_elem: &str) -> ParseError {
    ParseError {
        value_elem: value_elem.to_owned(),
        layout_elem: layout_elem.to_owned(),
        message: String::new(),
    }
}

fn range(message: String) -> ParseError {
    ParseError {
        value_elem: String::new(),
        layout_elem: String::new(),
        message,
    }
}

fn is_digit(s: &str, i: usize) -> bool {
    s.as_bytes().get(i).is_some_and(u8::is_ascii_digit)
}

/// Go's `getnum`: one or two digits (exactly two when `fixed`).
fn getnum(s: &str, fixed: bool) -> Option<(u32, &str)> {
    if !is_digit(s, 0) {
        return None;
    }
    let d0 = u32::from(s.as_bytes()[0] - b'0');
    if !is_digit(s, 1) {
        return (!fixed).then(|| (d0, &s[1..]));
    }
    Some((d0 * 10 + u32::from(s.as_bytes()[1] - b'0'), &s[2..]))
}

/// Go's `getnum3`: up to three digits (exactly three when `fixed`).
fn getnum3(s: &str, fixed: bool) -> Option<(u32, &str)> {
    let mut n = 0;
    let mut i = 0;
    while i < 3 && is_digit(s, i) {
        n = n * 10 + u32::from(s.as_bytes()[i] - b'0');
        i += 1;
    }
    if i == 0 || (fixed && i != 3) {
        return None;
    }
    Some((n, &s[i..]))
}

/// Go's `lookup`: a case-insensitive prefix match against a name table.
fn lookup<'a>(names: &[&str], value: &'a str) -> Option<(usize, &'a str)> {
    names.iter().enumerate().find_map(|(i, name)| {
        let n = name.len();
        (value.len() >= n && value.as_bytes()[..n].eq_ignore_ascii_case(name.as_bytes()))
            .then(|| (i, &value[n..]))
    })
}

/// Go's `skip`: matches literal layout text, any run of spaces matching any run of spaces.
fn skip<'a>(mut value: &'a str, mut prefix: &str) -> Option<&'a str> {
    while !prefix.is_empty() {
        if prefix.starts_with(' ') {
            if !value.is_empty() && !value.starts_with(' ') {
                return None;
            }
            prefix = prefix.trim_start_matches(' ');
            value = value.trim_start_matches(' ');
            continue;
        }
        let c = prefix.as_bytes()[0];
        if value.as_bytes().first() != Some(&c) {
            return None;
        }
        prefix = &prefix[1..];
        value = &value[1..];
    }
    Some(value)
}

/// Go's `parseNanoseconds` for `value[..n]` (a separator and digits).
fn parse_nanos(value: &str, n: usize) -> Result<u32, ()> {
    let n = n.min(10);
    let digits = value.get(1..n).ok_or(())?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    let mut ns: u32 = digits.parse().unwrap_or(0);
    for _ in 0..(10 - n) {
        ns *= 10;
    }
    Ok(ns)
}

/// Go's `parseSignedOffset`: the length of a `+hh`-style offset, 0 when there is none.
fn signed_offset_len(value: &str) -> usize {
    let b = value.as_bytes();
    if b.is_empty() || !(b[0] == b'+' || b[0] == b'-') {
        return 0;
    }
    let digits = b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return 0;
    }
    match value[1..1 + digits].parse::<u64>() {
        Ok(x) if x <= 23 => 1 + digits,
        _ => 0,
    }
}

/// Go's `parseTimeZone`: the length of a zone abbreviation at the start of `value`.
fn zone_len(value: &str) -> Option<usize> {
    let b = value.as_bytes();
    if b.len() < 3 {
        return None;
    }
    if b.len() >= 4 && (&value[..4] == "ChST" || &value[..4] == "MeST") {
        return Some(4);
    }
    if &value[..3] == "GMT" {
        return Some(3 + signed_offset_len(&value[3..]));
    }
    if b[0] == b'+' || b[0] == b'-' {
        let n = signed_offset_len(value);
        return (n > 0).then_some(n);
    }
    let upper = b
        .iter()
        .take(6)
        .take_while(|c| c.is_ascii_uppercase())
        .count();
    match upper {
        3 => Some(3),
        4 if b[3] == b'T' || &value[..4] == "WITA" => Some(4),
        5 if b[4] == b'T' => Some(5),
        _ => None,
    }
}

/// Go's `time.ParseInLocation(layout, value, time.Local)` with the local zone UTC.
pub(crate) fn parse(layout: &str, value: &str) -> Result<Time, String> {
    parse_inner(layout, value).map_err(|e| {
        if e.message.is_empty() {
            format!(
                "parsing time {} as {}: cannot parse {} as {}",
                quote(value),
                quote(layout),
                quote(&e.value_elem),
                quote(&e.layout_elem)
            )
        } else {
            format!("parsing time {}{}", quote(value), e.message)
        }
    })
}

#[allow(clippy::too_many_lines)] // One state machine, as Go's `parse`.
fn parse_inner(layout: &str, full: &str) -> Result<Time, ParseError> {
    let mut value = full;
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0u32, 0u32, 0u32, 0u32);
    let (mut pm_set, mut am_set) = (false, false);
    let mut utc = false;
    let mut zone_offset: Option<i32> = None;
    let mut zone_name = String::new();
    let parts = chunks(layout);
    for (idx, chunk) in parts.iter().enumerate() {
        let (elem, hold) = match *chunk {
            Chunk::Literal(lit) => {
                value = skip(value, lit).ok_or_else(|| bad(lit, value))?;
                continue;
            }
            Chunk::Token(t) => (t, value),
            Chunk::Frac { text, .. } => (text, value),
        };
        let fail = || bad(elem, hold);
        let out_of_range = |what: &str| range(format!(": {what} out of range"));
        match *chunk {
            Chunk::Frac {
                zeros: true,
                digits,
                ..
            } => {
                let n = 1 + digits;
                if value.len() < n {
                    return Err(fail());
                }
                let sep = value.as_bytes()[0];
                if sep != b'.' && sep != b',' {
                    return Err(fail());
                }
                nsec = parse_nanos(value, n).map_err(|()| fail())?;
                value = &value[n..];
            }
            Chunk::Frac { .. } => {
                let b = value.as_bytes();
                if b.len() < 2 || !(b[0] == b'.' || b[0] == b',') || !b[1].is_ascii_digit() {
                    continue;
                }
                let n = 1 + b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                nsec = parse_nanos(value, n).map_err(|()| fail())?;
                value = &value[n..];
            }
            Chunk::Token(t) => match t {
                "06" => {
                    let y: i64 = value
                        .get(..2)
                        .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))
                        .and_then(|p| p.parse().ok())
                        .ok_or_else(fail)?;
                    year = if y >= 69 { y + 1900 } else { y + 2000 };
                    value = &value[2..];
                }
                "2006" => {
                    if value.len() < 4 || !is_digit(value, 0) {
                        return Err(fail());
                    }
                    year = value[..4].parse().map_err(|_| fail())?;
                    value = &value[4..];
                }
                "Jan" | "January" => {
                    let names: Vec<&str> = if t == "Jan" {
                        MONTHS.iter().map(|m| &m[..3]).collect()
                    } else {
                        MONTHS.to_vec()
                    };
                    let (m, rest) = lookup(&names, value).ok_or_else(fail)?;
                    month = m as i64 + 1;
                    value = rest;
                }
                "1" | "01" => {
                    let (m, rest) = getnum(value, t == "01").ok_or_else(fail)?;
                    if !(1..=12).contains(&m) {
                        return Err(out_of_range("month"));
                    }
                    month = i64::from(m);
                    value = rest;
                }
                "Mon" | "Monday" => {
                    let names: Vec<&str> = if t == "Mon" {
                        DAYS.iter().map(|d| &d[..3]).collect()
                    } else {
                        DAYS.to_vec()
                    };
                    value = lookup(&names, value).ok_or_else(fail)?.1;
                }
                "2" | "_2" | "02" => {
                    if t == "_2" && value.starts_with(' ') {
                        value = &value[1..];
                    }
                    let (d, rest) = getnum(value, t == "02").ok_or_else(fail)?;
                    day = i64::from(d);
                    value = rest;
                }
                "__2" | "002" => {
                    if t == "__2" {
                        for _ in 0..2 {
                            if value.starts_with(' ') {
                                value = &value[1..];
                            }
                        }
                    }
                    let (d, rest) = getnum3(value, t == "002").ok_or_else(fail)?;
                    yday = i64::from(d);
                    value = rest;
                }
                "15" => {
                    let (h, rest) = getnum(value, false).ok_or_else(fail)?;
                    if h >= 24 {
                        return Err(out_of_range("hour"));
                    }
                    hour = h;
                    value = rest;
                }
                "3" | "03" => {
                    let (h, rest) = getnum(value, t == "03").ok_or_else(fail)?;
                    if h > 12 {
                        return Err(out_of_range("hour"));
                    }
                    hour = h;
                    value = rest;
                }
                "4" | "04" => {
                    let (m, rest) = getnum(value, t == "04").ok_or_else(fail)?;
                    if m >= 60 {
                        return Err(out_of_range("minute"));
                    }
                    min = m;
                    value = rest;
                }
                "5" | "05" => {
                    let (s, rest) = getnum(value, t == "05").ok_or_else(fail)?;
                    if s >= 60 {
                        return Err(out_of_range("second"));
                    }
                    sec = s;
                    value = rest;
                    // A fractional second the layout does not mention is read anyway, unless
                    // the next element is the fraction.
                    let b = value.as_bytes();
                    let next_is_frac = matches!(parts.get(idx + 1), Some(Chunk::Frac { .. }));
                    if b.len() >= 2
                        && (b[0] == b'.' || b[0] == b',')
                        && b[1].is_ascii_digit()
                        && !next_is_frac
                    {
                        let n = 1 + b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                        nsec = parse_nanos(value, n).map_err(|()| fail())?;
                        value = &value[n..];
                    }
                }
                "PM" | "pm" => {
                    let p = value.get(..2).ok_or_else(fail)?;
                    let (am, pmv) = if t == "PM" {
                        ("AM", "PM")
                    } else {
                        ("am", "pm")
                    };
                    if p == pmv {
                        pm_set = true;
                    } else if p == am {
                        am_set = true;
                    } else {
                        return Err(fail());
                    }
                    value = &value[2..];
                }
                "MST" => {
                    if value.starts_with("UTC") {
                        utc = true;
                        value = &value[3..];
                    } else {
                        let n = zone_len(value).ok_or_else(fail)?;
                        zone_name = value[..n].to_owned();
                        value = &value[n..];
                    }
                }
                z => {
                    // Numeric zone offsets; the ISO forms also take `Z`.
                    if z.starts_with('Z') && value.starts_with('Z') {
                        value = &value[1..];
                        utc = true;
                        continue;
                    }
                    let form = z.trim_start_matches(['Z', '-']);
                    let b = value.as_bytes();
                    let (need, h, m, s): (usize, (usize, usize), Option<usize>, Option<usize>) =
                        match form {
                            "07:00" => (6, (1, 3), Some(4), None),
                            "07" => (3, (1, 3), None, None),
                            "07:00:00" => (9, (1, 3), Some(4), Some(7)),
                            "070000" => (7, (1, 3), Some(3), Some(5)),
                            _ => (5, (1, 3), Some(3), None),
                        };
                    if b.len() < need {
                        return Err(fail());
                    }
                    if form == "07:00" && b[3] != b':' {
                        return Err(fail());
                    }
                    if form == "07:00:00" && (b[3] != b':' || b[6] != b':') {
                        return Err(fail());
                    }
                    let num = |at: usize| getnum(&value[at..at + 2], true).map(|(n, _)| n);
                    let hr = num(h.0).ok_or_else(fail)?;
                    let mm = match m {
                        Some(at) => num(at).ok_or_else(fail)?,
                        None => 0,
                    };
                    let ss = match s {
                        Some(at) => num(at).ok_or_else(fail)?,
                        None => 0,
                    };
                    if hr > 24 {
                        return Err(out_of_range("time zone offset hour"));
                    }
                    if mm > 60 {
                        return Err(out_of_range("time zone offset minute"));
                    }
                    if ss > 60 {
                        return Err(out_of_range("time zone offset second"));
                    }
                    let mut off = i32::try_from((hr * 60 + mm) * 60 + ss).unwrap_or(0);
                    match b[0] {
                        b'+' => {}
                        b'-' => off = -off,
                        _ => return Err(fail()),
                    }
                    zone_offset = Some(off);
                    value = &value[need..];
                }
            },
            Chunk::Literal(_) => {}
        }
    }
    if !value.is_empty() {
        return Err(range(format!(": extra text: {}", quote(value))));
    }
    if pm_set && hour < 12 {
        hour += 12;
    } else if am_set && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        let (mut m, mut d) = (0i64, 0i64);
        if is_leap(year) {
            if yday == 31 + 29 {
                m = 2;
                d = 29;
            } else if yday > 31 + 29 {
                yday -= 1;
            }
        }
        if !(1..=365).contains(&yday) {
            return Err(range(": day-of-year out of range".to_owned()));
        }
        if m == 0 {
            const BEFORE: [i64; 13] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365];
            m = (yday - 1) / 31 + 1;
            if BEFORE[m as usize] < yday {
                m += 1;
            }
            d = yday - BEFORE[(m - 1) as usize];
        }
        if month >= 0 && month != m {
            return Err(range(": day-of-year does not match month".to_owned()));
        }
        month = m;
        if day >= 0 && day != d {
            return Err(range(": day-of-year does not match day".to_owned()));
        }
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    let month = u32::try_from(month).unwrap_or(1);
    if day < 1 || day > i64::from(days_in(month, year)) {
        return Err(range(": day out of range".to_owned()));
    }
    let days = emco_core::time::days_from_civil(year, month, u32::try_from(day).unwrap_or(1));
    let wall = days * 86_400 + i64::from(hour) * 3600 + i64::from(min) * 60 + i64::from(sec);
    let utc_time = |secs| Time::utc(secs, nsec);
    if utc {
        return Ok(utc_time(wall));
    }
    if let Some(off) = zone_offset {
        let secs = wall - i64::from(off);
        // The local zone (UTC) is used when it has the same offset and name.
        if off == 0 && (zone_name.is_empty() || zone_name == "UTC") {
            return Ok(utc_time(secs));
        }
        return Ok(Time {
            secs,
            nanos: nsec,
            offset: off,
            zone: Arc::from(zone_name.as_str()),
        });
    }
    if !zone_name.is_empty() {
        // An abbreviation the local zone does not know: a zone of that name at offset 0,
        // or at the hour offset of `GMT+h`.
        let off = zone_name
            .strip_prefix("GMT")
            .and_then(|h| h.parse::<i32>().ok())
            .map_or(0, |h| h * 3600);
        return Ok(Time {
            secs: wall,
            nanos: nsec,
            offset: off,
            zone: Arc::from(zone_name.as_str()),
        });
    }
    Ok(utc_time(wall))
}

/// A time zone read from the system's zoneinfo files (TZif), as Go's `time.LoadLocation` reads
/// them: transitions, their zone types, and the POSIX TZ rule for times after the last one.
#[derive(Debug)]
pub(crate) struct Location {
    /// (transition time, index into `zones`), sorted.
    transitions: Vec<(i64, usize)>,
    /// (offset east of UTC, daylight saving, abbreviation).
    zones: Vec<(i32, bool, String)>,
    /// The footer rule (`EST5EDT,M3.2.0,M11.1.0`), empty when absent.
    extend: String,
}

/// Where Go looks for zoneinfo files on Unix.
const ZONEINFO_DIRS: [&str; 4] = [
    "/usr/share/zoneinfo/",
    "/usr/share/lib/zoneinfo/",
    "/usr/lib/locale/TZ/",
    "/etc/zoneinfo/",
];

/// Largest zoneinfo file read (real ones are a few KiB).
const MAX_TZIF: u64 = 256 << 10;

/// Go's `time.LoadLocation`: `None` for UTC (`""`, `UTC`, and `Local`, which is UTC here) and
/// for names that do not load, which Sprig then treats as UTC.
pub(crate) fn load_location(name: &str) -> Option<std::sync::Arc<Location>> {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Arc<Location>>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    if name.is_empty() || name == "UTC" || name == "Local" {
        return None;
    }
    // Go refuses names that could leave the zoneinfo directory.
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return None;
    }
    let mut cache = lock(&CACHE);
    if let Some(found) = cache.get(name) {
        return found.clone();
    }
    let loaded = read_zoneinfo(name).map(Arc::new);
    if cache.len() < 1024 {
        cache.insert(name.to_owned(), loaded.clone());
    }
    loaded
}

fn read_zoneinfo(name: &str) -> Option<Location> {
    use std::io::Read as _;
    let mut dirs: Vec<String> = Vec::new();
    if let Ok(z) = std::env::var("ZONEINFO") {
        dirs.push(format!("{}/", z.trim_end_matches('/')));
    }
    dirs.extend(ZONEINFO_DIRS.iter().map(|d| (*d).to_owned()));
    for dir in dirs {
        let Ok(file) = std::fs::File::open(format!("{dir}{name}")) else {
            continue;
        };
        let mut data = Vec::new();
        if file.take(MAX_TZIF).read_to_end(&mut data).is_err() {
            continue;
        }
        if let Some(loc) = parse_tzif(&data) {
            return Some(loc);
        }
    }
    None
}

/// Reads a TZif file (version 1, or the 64-bit data of versions 2 and later, and the footer).
fn parse_tzif(data: &[u8]) -> Option<Location> {
    struct Cursor<'a>(&'a [u8]);
    impl<'a> Cursor<'a> {
        fn take(&mut self, n: usize) -> Option<&'a [u8]> {
            if self.0.len() < n {
                return None;
            }
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            Some(a)
        }
        fn u32(&mut self) -> Option<u32> {
            self.take(4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
        }
    }
    let header = |c: &mut Cursor<'_>| -> Option<(u8, [usize; 6])> {
        let magic = c.take(5)?;
        if &magic[..4] != b"TZif" {
            return None;
        }
        let version = magic[4];
        c.take(15)?;
        let mut n = [0usize; 6];
        for slot in &mut n {
            *slot = usize::try_from(c.u32()?).ok()?;
        }
        Some((version, n))
    };
    let mut c = Cursor(data);
    let (version, n) = header(&mut c)?;
    // n = [isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt]
    let v1_len = n[3] * 5 + n[4] * 6 + n[5] + n[2] * 8 + n[1] + n[0];
    let (n, time_size) = if version >= b'2' {
        c.take(v1_len)?;
        let (_, n2) = header(&mut c)?;
        (n2, 8)
    } else {
        (n, 4)
    };
    let [isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt] = n;
    if typecnt == 0 || timecnt > 100_000 || typecnt > 256 {
        return None;
    }
    let times = c.take(timecnt * time_size)?;
    let indices = c.take(timecnt)?;
    let types = c.take(typecnt * 6)?;
    let chars = c.take(charcnt)?;
    c.take(leapcnt * (time_size + 4) + isstdcnt + isutcnt)?;
    let mut zones = Vec::with_capacity(typecnt);
    for t in types.chunks(6) {
        let offset = i32::from_be_bytes([t[0], t[1], t[2], t[3]]);
        let start = usize::from(t[5]);
        let end = chars
            .get(start..)?
            .iter()
            .position(|b| *b == 0)
            .map_or(chars.len(), |p| start + p);
        let abbrev = String::from_utf8_lossy(chars.get(start..end)?).into_owned();
        zones.push((offset, t[4] != 0, abbrev));
    }
    let mut transitions = Vec::with_capacity(timecnt);
    for (i, idx) in indices.iter().enumerate() {
        let raw = &times[i * time_size..(i + 1) * time_size];
        let when = if time_size == 8 {
            i64::from_be_bytes(raw.try_into().ok()?)
        } else {
            i64::from(i32::from_be_bytes(raw.try_into().ok()?))
        };
        let idx = usize::from(*idx);
        if idx >= zones.len() {
            return None;
        }
        transitions.push((when, idx));
    }
    let extend = if version >= b'2' {
        let rest = String::from_utf8_lossy(c.0);
        rest.trim_matches('\n')
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    } else {
        String::new()
    };
    Some(Location {
        transitions,
        zones,
        extend,
    })
}

impl Location {
    /// The abbreviation and offset in effect at `secs` (Go's `Location.lookup`).
    fn lookup(&self, secs: i64) -> (String, i32) {
        let zone = |i: usize| {
            let (off, _, name) = &self.zones[i];
            (name.clone(), *off)
        };
        if self.transitions.is_empty() || secs < self.transitions[0].0 {
            return zone(self.first_zone());
        }
        let i = self.transitions.partition_point(|(t, _)| *t <= secs) - 1;
        if i + 1 == self.transitions.len()
            && !self.extend.is_empty()
            && let Some(found) = posix_tz_lookup(&self.extend, secs)
        {
            return found;
        }
        zone(self.transitions[i].1)
    }

    /// Go's `lookupFirstZone`: the zone before the first transition.
    fn first_zone(&self) -> usize {
        let used = |z: usize| self.transitions.iter().any(|(_, i)| *i == z);
        if !used(0) {
            return 0;
        }
        if let Some((_, first)) = self.transitions.first()
            && self.zones[*first].1
        {
            for z in (0..*first).rev() {
                if !self.zones[z].1 {
                    return z;
                }
            }
        }
        self.zones.iter().position(|(_, dst, _)| !dst).unwrap_or(0)
    }
}

impl Time {
    /// `t.In(loc)`: the same instant shown in `loc` (`None` is UTC).
    pub(crate) fn in_location(&self, loc: Option<&Location>) -> Time {
        match loc {
            None => self.in_utc(),
            Some(loc) => {
                let (name, offset) = loc.lookup(self.secs);
                Time {
                    secs: self.secs,
                    nanos: self.nanos,
                    offset,
                    zone: Arc::from(name.as_str()),
                }
            }
        }
    }
}

/// A POSIX TZ string's zone at `secs` (Go's `tzset`): `STDoff[DST[off][,start[/t],end[/t]]]`.
fn posix_tz_lookup(tz: &str, secs: i64) -> Option<(String, i32)> {
    let (std_name, rest) = tz_name(tz)?;
    let (std_off, rest) = tz_offset(rest)?;
    let std_off = -std_off;
    if rest.is_empty() {
        return Some((std_name, std_off));
    }
    let (dst_name, rest) = tz_name(rest)?;
    let (dst_off, rest) = if rest.is_empty() || rest.starts_with(',') || rest.starts_with(';') {
        (std_off + 3600, rest)
    } else {
        let (o, r) = tz_offset(rest)?;
        (-o, r)
    };
    // US rules when none are given, as Go does.
    let rules = if rest.is_empty() {
        ",M3.2.0,M11.1.0"
    } else {
        rest
    };
    let rules = rules.strip_prefix([',', ';'])?;
    let (start, end) = rules.split_once(',')?;
    let (start_rule, start_time) = tz_rule(start)?;
    let (end_rule, end_time) = tz_rule(end)?;
    let year = emco_core::time::civil_from_days((secs + i64::from(std_off)).div_euclid(86_400)).0;
    let year_start = emco_core::time::days_from_civil(year, 1, 1) * 86_400;
    // Transition instants in UTC: the start is given in standard time, the end in DST.
    let start_at =
        year_start + rule_day(start_rule, year) * 86_400 + start_time - i64::from(std_off);
    let end_at = year_start + rule_day(end_rule, year) * 86_400 + end_time - i64::from(dst_off);
    let in_dst = if start_at < end_at {
        secs >= start_at && secs < end_at
    } else {
        // Southern hemisphere: DST spans the new year.
        !(secs >= end_at && secs < start_at)
    };
    Some(if in_dst {
        (dst_name, dst_off)
    } else {
        (std_name, std_off)
    })
}

/// A zone name: letters, or anything inside `<...>`.
fn tz_name(s: &str) -> Option<(String, &str)> {
    if let Some(rest) = s.strip_prefix('<') {
        let end = rest.find('>')?;
        return Some((rest[..end].to_owned(), &rest[end + 1..]));
    }
    let n = s.bytes().take_while(u8::is_ascii_alphabetic).count();
    (n >= 3).then(|| (s[..n].to_owned(), &s[n..]))
}

/// `[+-]hh[:mm[:ss]]` in seconds (POSIX sign: positive is west of UTC).
fn tz_offset(s: &str) -> Option<(i32, &str)> {
    let (sign, s) = match s.as_bytes().first() {
        Some(b'-') => (-1, &s[1..]),
        Some(b'+') => (1, &s[1..]),
        _ => (1, s),
    };
    let (secs, rest) = tz_clock(s)?;
    Some((sign * secs, rest))
}

/// `hh[:mm[:ss]]` in seconds.
fn tz_clock(s: &str) -> Option<(i32, &str)> {
    let mut total = 0i32;
    let mut rest = s;
    for (i, scale) in [3600, 60, 1].into_iter().enumerate() {
        if i > 0 {
            match rest.strip_prefix(':') {
                Some(r) => rest = r,
                None => break,
            }
        }
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        total += rest[..n].parse::<i32>().ok()? * scale;
        rest = &rest[n..];
    }
    Some((total, rest))
}

/// A DST rule date: `Jn` (1-365, no leap day), `n` (0-365), or `Mm.w.d`.
#[derive(Debug, Clone, Copy)]
enum TzRule {
    Julian(i64),
    Day(i64),
    MonthWeekDay(u32, u32, u32),
}

/// A rule and its time of day in seconds (default 02:00).
fn tz_rule(s: &str) -> Option<(TzRule, i64)> {
    let (date, time) = match s.split_once('/') {
        Some((d, t)) => {
            let (secs, rest) = tz_offset(t)?;
            if !rest.is_empty() {
                return None;
            }
            (d, i64::from(secs))
        }
        None => (s, 7200),
    };
    let rule = if let Some(j) = date.strip_prefix('J') {
        TzRule::Julian(j.parse().ok()?)
    } else if let Some(m) = date.strip_prefix('M') {
        let mut parts = m.split('.').map(str::parse::<u32>);
        let (Some(Ok(mon)), Some(Ok(week)), Some(Ok(day)), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if !(1..=12).contains(&mon) || !(1..=5).contains(&week) || day > 6 {
            return None;
        }
        TzRule::MonthWeekDay(mon, week, day)
    } else {
        TzRule::Day(date.parse().ok()?)
    };
    Some((rule, time))
}

/// The day of the year (0-based) a rule names in `year`.
fn rule_day(rule: TzRule, year: i64) -> i64 {
    match rule {
        TzRule::Julian(n) => {
            let leap_shift = i64::from(is_leap(year) && n >= 60);
            n - 1 + leap_shift
        }
        TzRule::Day(n) => n,
        TzRule::MonthWeekDay(mon, week, day) => {
            let year_start = emco_core::time::days_from_civil(year, 1, 1);
            let month_start = emco_core::time::days_from_civil(year, mon, 1);
            // 1970-01-01 was a Thursday (weekday 4).
            let first_wday = (month_start + 4).rem_euclid(7);
            let mut d = (i64::from(day) - first_wday).rem_euclid(7);
            for _ in 1..week {
                if d + 7 >= i64::from(days_in(mon, year)) {
                    break;
                }
                d += 7;
            }
            month_start - year_start + d
        }
    }
}

#[cfg(test)]
mod zone_tests {
    use super::*;

    #[test]
    fn posix_rules_pick_standard_and_daylight_time() {
        let ny = "EST5EDT,M3.2.0,M11.1.0";
        // 2024-01-15 12:00 UTC and 2024-07-01 12:00 UTC.
        assert_eq!(
            posix_tz_lookup(ny, 1_705_320_000),
            Some(("EST".to_owned(), -18_000))
        );
        assert_eq!(
            posix_tz_lookup(ny, 1_719_835_200),
            Some(("EDT".to_owned(), -14_400))
        );
        // DST starts 2024-03-10 07:00 UTC (02:00 EST).
        assert_eq!(
            posix_tz_lookup(ny, 1_710_053_999).map(|z| z.1),
            Some(-18_000)
        );
        assert_eq!(
            posix_tz_lookup(ny, 1_710_054_000).map(|z| z.1),
            Some(-14_400)
        );
        let berlin = "CET-1CEST,M3.5.0,M10.5.0/3";
        assert_eq!(
            posix_tz_lookup(berlin, 1_719_835_200),
            Some(("CEST".to_owned(), 7200))
        );
        let sydney = "AEST-10AEDT,M10.1.0,M4.1.0/3";
        assert_eq!(
            posix_tz_lookup(sydney, 1_705_320_000),
            Some(("AEDT".to_owned(), 39_600))
        );
        assert_eq!(
            posix_tz_lookup(sydney, 1_719_835_200),
            Some(("AEST".to_owned(), 36_000))
        );
        assert_eq!(
            posix_tz_lookup("<+0530>-5:30", 0),
            Some(("+0530".to_owned(), 19_800))
        );
        assert_eq!(posix_tz_lookup("bad", 0), None);
    }

    #[test]
    fn system_zoneinfo_when_present() {
        let Some(ny) = load_location("America/New_York") else {
            eprintln!("SKIPPED: no zoneinfo for America/New_York on this machine");
            return;
        };
        let summer = Time::utc(1_719_835_200, 0).in_location(Some(&ny));
        assert_eq!(summer.string(), "2024-07-01 08:00:00 -0400 EDT");
        let winter = Time::utc(1_705_320_000, 0).in_location(Some(&ny));
        assert_eq!(winter.string(), "2024-01-15 07:00:00 -0500 EST");
        // Past the file's transitions the footer rule decides.
        let far = Time::utc(4_102_444_800 + 180 * 86_400, 0).in_location(Some(&ny));
        assert_eq!(far.format("MST -0700"), "EDT -0400");
        let mut set = crate::template::Templates::new();
        set.add(
            "t",
            r#"{{ dateInZone "2006-01-02 15:04 MST" 1719835200 "America/New_York" }} {{ htmlDateInZone 1719792000 "Asia/Tokyo" }} {{ dateInZone "15:04 MST" 0 "No/Such_Zone" }}"#,
        )
        .expect("parse");
        let out = set
            .execute(
                "t",
                &crate::value::Value::Nil,
                &crate::template::TemplateLimits::default(),
            )
            .expect("execute");
        assert_eq!(out, "2024-07-01 08:00 EDT 2024-07-01 00:00 UTC");
        assert!(load_location("../etc/passwd").is_none());
        assert!(load_location("No/Such_Zone").is_none());
        assert!(load_location("UTC").is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_go_layouts() {
        // 2009-11-10 23:04:05.012 UTC, a Tuesday.
        let t = Time::utc(1_257_894_245, 12_000_000);
        let cases = [
            ("2006-01-02T15:04:05Z07:00", "2009-11-10T23:04:05Z"),
            (
                "Mon Jan _2 15:04:05 MST 2006",
                "Tue Nov 10 23:04:05 UTC 2009",
            ),
            (
                "Monday, January 2, 2006 3:04PM",
                "Tuesday, November 10, 2009 11:04PM",
            ),
            ("06/1/2 03pm -0700", "09/11/10 11pm +0000"),
            ("15:04:05.000", "23:04:05.012"),
            ("15:04:05.999999", "23:04:05.012"),
            ("2006-002", "2009-314"),
            ("20060102", "20091110"),
        ];
        for (layout, want) in cases {
            assert_eq!(t.format(layout), want, "{layout}");
        }
        assert_eq!(t.string(), "2009-11-10 23:04:05.012 +0000 UTC");
        assert_eq!(Time::utc(0, 0).format("2006-01-02 Mon"), "1970-01-01 Thu");
        assert_eq!(
            Time::utc(951_782_400, 0).format("2006-01-02 002"),
            "2000-02-29 060"
        );
        assert_eq!(Time::utc(-86_400, 0).format("2006-01-02"), "1969-12-31");
        assert_eq!(Time::zero().string(), "0001-01-01 00:00:00 +0000 UTC");
    }

    #[test]
    fn parses_go_layouts_and_keeps_zones() {
        let cases = [
            ("2006-01-02", "2024-03-05", "2024-03-05 00:00:00 +0000 UTC"),
            (
                "2006-01-02T15:04:05Z07:00",
                "2024-03-05T10:11:12+02:00",
                "2024-03-05 10:11:12 +0200 +0200",
            ),
            (
                "2006-01-02T15:04:05Z07:00",
                "2024-03-05T10:11:12Z",
                "2024-03-05 10:11:12 +0000 UTC",
            ),
            (
                "2006-01-02 15:04:05.000 -0700",
                "2024-03-05 10:11:12.345 -0130",
                "2024-03-05 10:11:12.345 -0130 -0130",
            ),
            (
                "Mon Jan _2 15:04:05 MST 2006",
                "Tue Mar  5 10:11:12 PST 2024",
                "2024-03-05 10:11:12 +0000 PST",
            ),
            (
                "2006-01-02 15:04:05",
                "2024-03-05 10:11:12.5",
                "2024-03-05 10:11:12.5 +0000 UTC",
            ),
            (
                "02 Jan 06 15:04 MST",
                "05 mar 99 03:04 UTC",
                "1999-03-05 03:04:00 +0000 UTC",
            ),
            ("3:04PM", "12:30AM", "0000-01-01 00:30:00 +0000 UTC"),
            ("2006-002", "2024-060", "2024-02-29 00:00:00 +0000 UTC"),
            (
                "2006-01-02 MST",
                "2024-01-02 GMT+3",
                // Go keeps the instant read as UTC and only labels it with the zone.
                "2024-01-02 03:00:00 +0300 GMT+3",
            ),
        ];
        for (layout, value, want) in cases {
            let t = parse(layout, value).unwrap_or_else(|e| panic!("{layout} {value}: {e}"));
            assert_eq!(t.string(), want, "{layout} {value}");
        }
        let t = parse("2006-01-02T15:04:05Z07:00", "2024-03-05T10:11:12+02:00").expect("parse");
        assert_eq!(t.secs, 1_709_626_272);
    }

    #[test]
    fn parse_errors_are_gos() {
        let cases = [
            (
                "2006-01-02",
                "2024-13-01",
                r#"parsing time "2024-13-01": month out of range"#,
            ),
            (
                "2006-01-02",
                "2024-02-30",
                r#"parsing time "2024-02-30": day out of range"#,
            ),
            (
                "2006-01-02",
                "24-01-01",
                r#"parsing time "24-01-01" as "2006-01-02": cannot parse "24-01-01" as "2006""#,
            ),
            (
                "2006-01-02",
                "2024/01/01",
                r#"parsing time "2024/01/01" as "2006-01-02": cannot parse "/01/01" as "-""#,
            ),
            (
                "2006-01-02",
                "2024-01-01x",
                r#"parsing time "2024-01-01x": extra text: "x""#,
            ),
            (
                "15:04",
                "25:00",
                r#"parsing time "25:00": hour out of range"#,
            ),
        ];
        for (layout, value, want) in cases {
            assert_eq!(parse(layout, value).err().as_deref(), Some(want), "{value}");
        }
    }
}
