//! Helm's `.Files`: the chart's non-template files, with `Get`, `Glob`, `Lines`, `AsConfig`
//! and `AsSecrets`.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;

use crate::value::{Bytes, Object, Value};

/// A set of chart files by path, as a template object.
#[derive(Debug, Clone, Default)]
pub struct Files(Arc<BTreeMap<String, Arc<Vec<u8>>>>);

impl Files {
    /// Files from `(path, content)` pairs.
    #[must_use]
    pub fn new(files: BTreeMap<String, Arc<Vec<u8>>>) -> Self {
        Self(Arc::new(files))
    }

    fn text(&self, path: &str) -> String {
        self.0
            .get(path)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// The `[]byte` at `path`; Go's zero value (an empty slice) when there is none.
    fn bytes(&self, path: &str) -> Value {
        Value::Object(Arc::new(Bytes(
            self.0.get(path).cloned().unwrap_or_default(),
        )))
    }

    fn glob(&self, pattern: &str) -> Files {
        let tokens = compile_glob(pattern).unwrap_or_else(|| vec![Glob::Any { cross: true }]);
        Files::new(
            self.0
                .iter()
                .filter(|(name, _)| glob_match(&tokens, &name.chars().collect::<Vec<_>>()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// Helm's `toYaml` of a map from base names to strings, as `AsConfig`/`AsSecrets` build it.
    fn as_yaml(&self, encode: impl Fn(&[u8]) -> String) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let m: BTreeMap<String, Value> = self
            .0
            .iter()
            .map(|(k, v)| {
                (
                    k.rsplit('/').next().unwrap_or(k).to_owned(),
                    Value::String(encode(v)),
                )
            })
            .collect();
        crate::yaml::to_yaml(&Value::map(m))
            .map(|y| y.trim_end_matches('\n').to_owned())
            .unwrap_or_default()
    }
}

fn one_string(args: &[Value], method: &str) -> Result<String, String> {
    match args {
        [Value::String(s)] => Ok(s.clone()),
        [other] => Err(format!(
            "wrong type for value; expected string; got {}",
            other.type_name()
        )),
        _ => Err(format!(
            "wrong number of args for {method}: want 1 got {}",
            args.len()
        )),
    }
}

impl Object for Files {
    fn kind(&self) -> &'static str {
        "map"
    }

    fn type_name(&self) -> &str {
        "engine.files"
    }

    fn member(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        let result = match name {
            "Get" => one_string(args, name).map(|p| Value::String(self.text(&p))),
            "GetBytes" => one_string(args, name).map(|p| self.bytes(&p)),
            "Glob" => one_string(args, name).map(|p| Value::Object(Arc::new(self.glob(&p)))),
            "Lines" => one_string(args, name).map(|p| {
                let Some(bytes) = self.0.get(&p) else {
                    return Value::list(Vec::new());
                };
                let text = String::from_utf8_lossy(bytes);
                let text = text.strip_suffix('\n').unwrap_or(&text);
                Value::list(text.split('\n').map(Value::str).collect())
            }),
            "AsConfig" => Ok(Value::String(
                self.as_yaml(|b| String::from_utf8_lossy(b).into_owned()),
            )),
            "AsSecrets" => {
                Ok(Value::String(self.as_yaml(|b| {
                    base64::engine::general_purpose::STANDARD.encode(b)
                })))
            }
            // `Files` is a Go `map[string][]byte`: any other name is a key (`.Files.author`);
            // a missing key is the empty value.
            other => Ok(self.bytes(other)),
        };
        Some(result)
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Get" | "GetBytes" | "Glob" | "Lines" | "AsConfig" | "AsSecrets"
        )
    }

    fn display(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}:[{}]",
                    v.iter().map(u8::to_string).collect::<Vec<_>>().join(" ")
                )
            })
            .collect();
        format!("map[{}]", parts.join(" "))
    }

    fn len(&self) -> Option<usize> {
        Some(self.0.len())
    }

    fn entries(&self) -> Option<Vec<(String, Value)>> {
        Some(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), Value::Object(Arc::new(Bytes(v.clone())))))
                .collect(),
        )
    }
}

/// A token of a gobwas/glob pattern with `/` as separator.
#[derive(Debug, Clone)]
enum Glob {
    Lit(char),
    /// `?`: one character other than `/`.
    One,
    /// `*` (not crossing `/`) or `**` (crossing).
    Any {
        cross: bool,
    },
    /// `[...]` or `[!...]`.
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
    /// `{a,b}`.
    Alt(Vec<Vec<Glob>>),
}

fn compile_glob(pattern: &str) -> Option<Vec<Glob>> {
    let chars: Vec<char> = pattern.chars().collect();
    let (tokens, rest) = parse_glob(&chars, false)?;
    if rest != chars.len() {
        return None;
    }
    Some(tokens)
}

/// Parses until the end, or inside `{}` until `,` or `}`; returns the tokens and the position.
fn parse_glob(chars: &[char], in_alt: bool) -> Option<(Vec<Glob>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ',' | '}' if in_alt => return Some((out, i)),
            '\\' => {
                out.push(Glob::Lit(*chars.get(i + 1)?));
                i += 2;
                continue;
            }
            '?' => out.push(Glob::One),
            '*' => {
                if chars.get(i + 1) == Some(&'*') {
                    out.push(Glob::Any { cross: true });
                    i += 1;
                } else {
                    out.push(Glob::Any { cross: false });
                }
            }
            '[' => {
                let mut j = i + 1;
                let negated = chars.get(j) == Some(&'!');
                if negated {
                    j += 1;
                }
                let mut items = Vec::new();
                while *chars.get(j)? != ']' {
                    let lo = chars[j];
                    if chars.get(j + 1) == Some(&'-') && chars.get(j + 2).is_some_and(|c| *c != ']')
                    {
                        items.push((lo, chars[j + 2]));
                        j += 3;
                    } else {
                        items.push((lo, lo));
                        j += 1;
                    }
                }
                out.push(Glob::Class { negated, items });
                i = j;
            }
            '{' => {
                let mut alts = Vec::new();
                let mut j = i + 1;
                loop {
                    let (alt, used) = parse_glob(&chars[j..], true)?;
                    alts.push(alt);
                    j += used;
                    match chars.get(j)? {
                        ',' => j += 1,
                        _ => break,
                    }
                }
                out.push(Glob::Alt(alts));
                i = j;
            }
            c => out.push(Glob::Lit(c)),
        }
        i += 1;
    }
    if in_alt {
        return None;
    }
    Some((out, i))
}

fn glob_match(tokens: &[Glob], name: &[char]) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return name.is_empty();
    };
    match first {
        Glob::Lit(c) => name.first() == Some(c) && glob_match(rest, &name[1..]),
        Glob::One => name.first().is_some_and(|c| *c != '/') && glob_match(rest, &name[1..]),
        Glob::Class { negated, items } => {
            name.first().is_some_and(|c| {
                let inside = items.iter().any(|(lo, hi)| lo <= c && c <= hi);
                inside != *negated && *c != '/'
            }) && glob_match(rest, &name[1..])
        }
        Glob::Any { cross } => {
            for n in 0..=name.len() {
                if glob_match(rest, &name[n..]) {
                    return true;
                }
                if n < name.len() && !cross && name[n] == '/' {
                    return false;
                }
            }
            false
        }
        Glob::Alt(alts) => alts.iter().any(|alt| {
            let mut joined = alt.clone();
            joined.extend_from_slice(rest);
            glob_match(&joined, name)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Files {
        let mut m = BTreeMap::new();
        for (k, v) in [
            ("a.txt", "A\nB\n"),
            ("conf/x.yaml", "x: 1"),
            ("conf/sub/y.yaml", "y"),
            ("conf/z.json", "{}"),
        ] {
            m.insert(k.to_owned(), Arc::new(v.as_bytes().to_vec()));
        }
        Files::new(m)
    }

    fn names(f: &Files) -> Vec<String> {
        f.0.keys().cloned().collect()
    }

    #[test]
    fn glob_follows_gobwas_with_slash_separator() {
        let f = files();
        assert_eq!(names(&f.glob("conf/*")), ["conf/x.yaml", "conf/z.json"]);
        assert_eq!(
            names(&f.glob("conf/**")),
            ["conf/sub/y.yaml", "conf/x.yaml", "conf/z.json"]
        );
        assert_eq!(
            names(&f.glob("conf/*.{yaml,json}")),
            ["conf/x.yaml", "conf/z.json"]
        );
        assert_eq!(names(&f.glob("?.txt")), ["a.txt"]);
        assert_eq!(names(&f.glob("conf/[x-y].yaml")), ["conf/x.yaml"]);
        assert_eq!(names(&f.glob("*.txt")), ["a.txt"]);
        assert!(names(&f.glob("nothing*")).is_empty());
    }

    #[test]
    fn methods() {
        let f = files();
        let get = |m: &str, a: &[Value]| f.member(m, a).unwrap().unwrap().to_go_string();
        assert_eq!(get("Get", &[Value::str("a.txt")]), "A\nB\n");
        assert_eq!(get("Get", &[Value::str("missing")]), "");
        assert_eq!(get("Lines", &[Value::str("a.txt")]), "[A B]");
        let g = f.glob("conf/*");
        assert_eq!(
            g.member("AsConfig", &[]).unwrap().unwrap().to_go_string(),
            "x.yaml: 'x: 1'\nz.json: '{}'"
        );
        assert_eq!(
            g.member("AsSecrets", &[]).unwrap().unwrap().to_go_string(),
            "x.yaml: eDogMQ==\nz.json: e30="
        );
        assert!(f.member("Get", &[]).unwrap().is_err());
        // `GetBytes` and the map's own values are `[]byte`: `%v` prints the byte numbers.
        assert_eq!(get("GetBytes", &[Value::str("a.txt")]), "[65 10 66 10]");
        assert_eq!(get("GetBytes", &[Value::str("missing")]), "[]");
        let b = f
            .member("GetBytes", &[Value::str("a.txt")])
            .unwrap()
            .unwrap();
        assert_eq!(b.type_name(), "[]uint8");
        assert_eq!(crate::funcs::strval(&b), "A\nB\n");
        // A Go map: any other name is a key lookup.
        assert_eq!(get("a.txt", &[]), "[65 10 66 10]");
        assert_eq!(get("Nope", &[]), "[]");
        assert!(!Value::Object(Arc::new(f.glob("none/*"))).is_true());
        assert!(Value::Object(Arc::new(f.glob("*.txt"))).is_true());
    }
}
