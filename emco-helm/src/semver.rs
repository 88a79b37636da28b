//! Semantic versions and constraints with the rules of Masterminds/semver v3, which Sprig's
//! `semver` and `semverCompare` use (`>=1.19.0-0`, `~1.2`, `^2`, `1.2 - 1.4`, `||`).

use std::cmp::Ordering;
use std::fmt;

use crate::value::{Object, Value};

/// A parsed semantic version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    metadata: String,
    original: String,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

fn valid_ident_list(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

impl Version {
    /// Parses a version leniently like `semver.NewVersion`: a leading `v`, missing minor or patch.
    ///
    /// # Errors
    /// `Invalid Semantic Version` as Masterminds words it.
    pub fn parse(s: &str) -> Result<Self, String> {
        const INVALID: &str = "Invalid Semantic Version";
        let body = s.strip_prefix('v').unwrap_or(s);
        let (body, metadata) = match body.split_once('+') {
            Some((b, m)) => (b, m),
            None => (body, ""),
        };
        let (core, pre) = match body.split_once('-') {
            Some((c, p)) => (c, p),
            None => (body, ""),
        };
        if (!pre.is_empty() || body.contains('-')) && !valid_ident_list(pre) {
            return Err(INVALID.to_owned());
        }
        if (!metadata.is_empty() || s.contains('+')) && !valid_ident_list(metadata) {
            return Err(INVALID.to_owned());
        }
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty()
            || parts.len() > 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(INVALID.to_owned());
        }
        let num = |i: usize| -> Result<u64, String> {
            parts
                .get(i)
                .map_or(Ok(0), |p| p.parse::<u64>().map_err(|_| INVALID.to_owned()))
        };
        Ok(Self {
            major: num(0)?,
            minor: num(1)?,
            patch: num(2)?,
            pre: pre.to_owned(),
            metadata: metadata.to_owned(),
            original: s.to_owned(),
        })
    }

    fn cmp_pre(a: &str, b: &str) -> Ordering {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
        for (x, y) in pa.iter().zip(pb.iter()) {
            let o = match (x.parse::<u64>(), y.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => Ordering::Less,
                (Err(_), Ok(_)) => Ordering::Greater,
                (Err(_), Err(_)) => x.cmp(y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        pa.len().cmp(&pb.len())
    }

    /// Precedence order (metadata ignored).
    #[must_use]
    pub fn compare(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| Self::cmp_pre(&self.pre, &other.pre))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    Tilde,
    Caret,
}

#[derive(Debug, Clone)]
struct Constraint {
    op: Op,
    con: Version,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

impl Constraint {
    fn parse(op: &str, ver: &str) -> Result<Self, String> {
        let op = match op {
            "" | "=" => Op::Eq,
            "!=" => Op::Ne,
            ">" => Op::Gt,
            "<" => Op::Lt,
            ">=" | "=>" => Op::Ge,
            "<=" | "=<" => Op::Le,
            "~" | "~>" => Op::Tilde,
            "^" => Op::Caret,
            other => return Err(format!("improper constraint: {other}{ver}")),
        };
        let body = ver.strip_prefix('v').unwrap_or(ver);
        let (core, suffix) = match body.find(['-', '+']) {
            Some(i) => (&body[..i], &body[i..]),
            None => (body, ""),
        };
        let parts: Vec<&str> = core.split('.').collect();
        let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
        let text = if parts.first().is_none_or(|p| is_x(p)) {
            dirty = true;
            format!("0.0.0{suffix}")
        } else if parts.get(1).is_none_or(|p| is_x(p)) {
            dirty = true;
            minor_dirty = true;
            format!("{}.0.0{suffix}", parts[0])
        } else if parts.get(2).is_none_or(|p| is_x(p)) {
            dirty = true;
            patch_dirty = true;
            format!("{}.{}.0{suffix}", parts[0], parts[1])
        } else {
            body.to_owned()
        };
        let con = Version::parse(&text).map_err(|_| format!("improper constraint: {ver}"))?;
        Ok(Self {
            op,
            con,
            dirty,
            minor_dirty,
            patch_dirty,
        })
    }

    fn check(&self, v: &Version) -> bool {
        let c = &self.con;
        if self.op != Op::Ne && !v.pre.is_empty() && c.pre.is_empty() {
            // A prerelease only satisfies constraints that name a prerelease themselves.
            return false;
        }
        match self.op {
            Op::Eq => {
                if self.dirty {
                    self.tilde(v)
                } else {
                    v.compare(c) == Ordering::Equal
                }
            }
            Op::Ne => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    }
                    if self.minor_dirty {
                        return false;
                    }
                    if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    }
                    if self.patch_dirty {
                        return (!v.pre.is_empty() || !c.pre.is_empty())
                            && Version::cmp_pre(&v.pre, &c.pre) != Ordering::Equal;
                    }
                }
                v.compare(c) != Ordering::Equal
            }
            Op::Gt => {
                if !self.dirty {
                    return v.compare(c) == Ordering::Greater;
                }
                if v.major != c.major {
                    return v.major > c.major;
                }
                if self.minor_dirty {
                    return false;
                }
                if self.patch_dirty {
                    return v.minor > c.minor;
                }
                v.compare(c) == Ordering::Greater
            }
            Op::Lt => v.compare(c) == Ordering::Less,
            Op::Ge => v.compare(c) != Ordering::Less,
            Op::Le => {
                if !self.dirty {
                    return v.compare(c) != Ordering::Greater;
                }
                if v.major > c.major {
                    return false;
                }
                !(v.major == c.major && v.minor > c.minor && !self.minor_dirty)
            }
            Op::Tilde => self.tilde(v),
            Op::Caret => {
                if v.compare(c) == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                v.patch == c.patch
            }
        }
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.compare(c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        v.minor == c.minor || self.minor_dirty
    }
}

/// A constraint expression: alternatives (`||`) of conjunctions (`,` or space).
#[derive(Debug, Clone)]
pub struct Constraints(Vec<Vec<Constraint>>);

impl Constraints {
    /// Parses a constraint expression.
    ///
    /// # Errors
    /// `improper constraint: ...` for text that is not a constraint.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut alternatives = Vec::new();
        for alt in text.split("||") {
            let words: Vec<&str> = alt
                .split([' ', ',', '\t'])
                .filter(|w| !w.is_empty())
                .collect();
            let mut group = Vec::new();
            let mut i = 0;
            while i < words.len() {
                // A hyphen range `A - B` means `>= A, <= B`.
                if words.get(i + 1) == Some(&"-") && i + 2 < words.len() {
                    group.push(Constraint::parse(">=", words[i])?);
                    group.push(Constraint::parse("<=", words[i + 2])?);
                    i += 3;
                    continue;
                }
                let w = words[i];
                let split = w
                    .find(|c: char| !matches!(c, '=' | '!' | '<' | '>' | '~' | '^'))
                    .unwrap_or(w.len());
                let (op, ver) = w.split_at(split);
                if ver.is_empty() {
                    // The operator stands apart from its version (`>= 1.2`).
                    let Some(next) = words.get(i + 1) else {
                        return Err(format!("improper constraint: {text}"));
                    };
                    group.push(Constraint::parse(op, next)?);
                    i += 2;
                    continue;
                }
                group.push(Constraint::parse(op, ver)?);
                i += 1;
            }
            if group.is_empty() {
                return Err(format!("improper constraint: {text}"));
            }
            alternatives.push(group);
        }
        Ok(Self(alternatives))
    }

    /// Whether `v` satisfies the constraints.
    #[must_use]
    pub fn check(&self, v: &Version) -> bool {
        self.0.iter().any(|group| group.iter().all(|c| c.check(v)))
    }
}

/// A version as a template object (`(semver "1.2.3").Major`).
#[derive(Debug)]
pub(crate) struct VersionObject(pub Version);

impl Object for VersionObject {
    fn type_name(&self) -> &str {
        "*semver.Version"
    }

    fn member(&self, name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        let v = &self.0;
        Some(Ok(match name {
            "Major" => Value::Int64(v.major as i64),
            "Minor" => Value::Int64(v.minor as i64),
            "Patch" => Value::Int64(v.patch as i64),
            "Prerelease" => Value::String(v.pre.clone()),
            "Metadata" => Value::String(v.metadata.clone()),
            "Original" => Value::String(v.original.clone()),
            "String" => Value::String(v.to_string()),
            _ => return None,
        }))
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Major" | "Minor" | "Patch" | "Prerelease" | "Metadata" | "Original" | "String"
        )
    }

    fn display(&self) -> String {
        self.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(c: &str, v: &str) -> bool {
        Constraints::parse(c)
            .unwrap()
            .check(&Version::parse(v).unwrap())
    }

    #[test]
    fn constraints_follow_masterminds() {
        let cases = [
            (">=1.18.0", "v1.20.0", true),
            (">=1.18.0", "1.20.0-gke.100", false),
            (">=1.18.0-0", "1.20.0-gke.100", true),
            ("<1.19", "1.18.9", true),
            ("<1.19", "1.19.0", false),
            ("~1.2", "1.2.9", true),
            ("~1.2", "1.3.0", false),
            ("^1.2", "1.9.0", true),
            ("^1.2", "2.0.0", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("1.2 - 1.4.5", "1.4.5", true),
            ("1.2 - 1.4.5", "1.4.6", false),
            (">1.0 <2.0 || =3.0.0", "3.0.0", true),
            (">= 1.2, < 1.5", "1.4.0", true),
            ("1.2.x", "1.2.7", true),
            ("*", "4.5.6", true),
            ("!=1.2.3", "1.2.4", true),
            (">1.14-0", "1.14.3", false),
            (">=1.14-0", "v1.20.0", true),
            (">=1.10.0-0 <1.16.0-0", "1.20.0", false),
        ];
        for (c, v, want) in cases {
            assert_eq!(check(c, v), want, "{c} {v}");
        }
    }

    #[test]
    fn versions_parse_leniently() {
        assert_eq!(Version::parse("v1.2").unwrap().to_string(), "1.2.0");
        assert_eq!(
            Version::parse("1.2.3-rc.1+b5").unwrap().to_string(),
            "1.2.3-rc.1+b5"
        );
        assert!(Version::parse("1.2.3.4").is_err());
        assert!(Version::parse("abc").is_err());
        assert!(Constraints::parse(">=abc").is_err());
    }
}
