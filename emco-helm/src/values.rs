//! Helm's values handling: merging values files, `--set` parsing, coalescing chart values with
//! user values (subchart scoping, `global`, null deleting a key), and the processing of
//! dependencies (conditions, tags, aliases, import-values).

use std::collections::BTreeMap;

use emco_core::Error;

use crate::chart::Chart;
use crate::compat::HelmCompat;
use crate::value::{Map, Value};

/// Deep-merges `src` into `dst` like Helm's `mergeMaps` for values files: maps merge
/// recursively, anything else replaces.
pub fn merge_maps(dst: &Map, src: &Map) {
    for (k, v) in src.snapshot() {
        if let (Value::Map(sv), Some(Value::Map(dv))) = (&v, dst.get(&k)) {
            if !sv.ptr_eq(&dv) {
                merge_maps(&dv, sv);
            }
            continue;
        }
        dst.insert(k, v);
    }
}

/// Applies one `--set` (or, with `as_string`, `--set-string`) expression to `base`, with
/// Helm's syntax (`a.b=c,d[0]=e,f={x,y}`, `\` escapes) and typing (`true`, `null`, integers
/// without a leading zero become int64; everything else stays a string).
///
/// # Errors
/// `InvalidArgument` for malformed expressions.
pub fn apply_set(base: &Map, expr: &str, as_string: bool) -> Result<(), Error> {
    let chars: Vec<char> = expr.chars().collect();
    let mut p = SetParser {
        chars: &chars,
        i: 0,
        as_string,
        expr,
    };
    while p.i < chars.len() {
        p.key_into_map(base, 0)?;
    }
    Ok(())
}

struct SetParser<'a> {
    chars: &'a [char],
    i: usize,
    as_string: bool,
    expr: &'a str,
}

/// Largest list index `--set` may create (Helm's `MaxIndex`).
const MAX_INDEX: usize = 65536;
const MAX_SET_DEPTH: usize = 64;

impl SetParser<'_> {
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::invalid(format!(
            "failed parsing --set data {:?}: {}",
            self.expr,
            msg.into()
        ))
    }

    /// Reads until one of `stops`, honouring `\` escapes; returns the text and the stop (if any).
    fn read_until(&mut self, stops: &[char]) -> (String, Option<char>) {
        let mut out = String::new();
        while let Some(&c) = self.chars.get(self.i) {
            self.i += 1;
            if c == '\\' {
                if let Some(&n) = self.chars.get(self.i) {
                    out.push(n);
                    self.i += 1;
                }
                continue;
            }
            if stops.contains(&c) {
                return (out, Some(c));
            }
            out.push(c);
        }
        (out, None)
    }

    fn typed(&self, s: String) -> Value {
        if self.as_string {
            return Value::String(s);
        }
        if s.eq_ignore_ascii_case("true") {
            return Value::Bool(true);
        }
        if s.eq_ignore_ascii_case("false") {
            return Value::Bool(false);
        }
        if s.eq_ignore_ascii_case("null") {
            return Value::Nil;
        }
        if s == "0" {
            return Value::Int64(0);
        }
        if let Some(i) = Some(&s)
            .filter(|s| !s.starts_with('0'))
            .and_then(|s| s.parse::<i64>().ok())
        {
            return Value::Int64(i);
        }
        Value::String(s)
    }

    fn value(&mut self) -> Result<Value, Error> {
        if self.chars.get(self.i) == Some(&'{') {
            self.i += 1;
            let mut items = Vec::new();
            loop {
                let (v, stop) = self.read_until(&[',', '}']);
                match stop {
                    Some(',') => items.push(self.typed(v)),
                    Some(_) => {
                        if !(v.is_empty() && items.is_empty()) {
                            items.push(self.typed(v));
                        }
                        break;
                    }
                    None => return Err(self.err("list must terminate with '}'")),
                }
            }
            match self.chars.get(self.i) {
                None => {}
                Some(',') => self.i += 1,
                Some(c) => return Err(self.err(format!("unexpected character {c:?} after list"))),
            }
            return Ok(Value::list(items));
        }
        let (v, _) = self.read_until(&[',']);
        Ok(self.typed(v))
    }

    /// Parses `key...` and sets it into `m`.
    fn key_into_map(&mut self, m: &Map, depth: usize) -> Result<(), Error> {
        if depth > MAX_SET_DEPTH {
            return Err(self.err("key nested too deeply"));
        }
        let (key, stop) = self.read_until(&['=', '.', '[', ',']);
        match stop {
            Some('=') => {
                let v = self.value()?;
                m.insert(key, v);
                Ok(())
            }
            Some('.') => {
                let child = match m.get(&key) {
                    Some(Value::Map(c)) => c,
                    _ => {
                        let c = Map::default();
                        m.insert(key, Value::Map(c.clone()));
                        c
                    }
                };
                self.key_into_map(&child, depth + 1)
            }
            Some('[') => {
                let existing = match m.get(&key) {
                    Some(Value::List(l)) => l.to_vec(),
                    _ => Vec::new(),
                };
                let list = self.index_into_list(existing, depth + 1)?;
                m.insert(key, Value::list(list));
                Ok(())
            }
            _ if key.is_empty() => Ok(()),
            _ => Err(self.err(format!("key {key:?} has no value"))),
        }
    }

    /// Parses `N]...` after a `[` and sets the element of `list`.
    fn index_into_list(&mut self, mut list: Vec<Value>, depth: usize) -> Result<Vec<Value>, Error> {
        if depth > MAX_SET_DEPTH {
            return Err(self.err("key nested too deeply"));
        }
        let (idx, stop) = self.read_until(&[']']);
        if stop.is_none() {
            return Err(self.err("list index must terminate with ']'"));
        }
        let idx: usize = idx
            .parse()
            .map_err(|_| self.err(format!("{idx:?} is not a list index")))?;
        if idx > MAX_INDEX {
            return Err(self.err(format!(
                "index of {idx} is greater than maximum supported index of {MAX_INDEX}"
            )));
        }
        if list.len() <= idx {
            list.resize(idx + 1, Value::Nil);
        }
        match self.chars.get(self.i) {
            Some('=') => {
                self.i += 1;
                list[idx] = self.value()?;
            }
            Some('.') => {
                self.i += 1;
                let child = match &list[idx] {
                    Value::Map(c) => c.clone(),
                    _ => Map::default(),
                };
                self.key_into_map(&child, depth + 1)?;
                list[idx] = Value::Map(child);
            }
            Some('[') => {
                self.i += 1;
                let inner = match &list[idx] {
                    Value::List(l) => l.to_vec(),
                    _ => Vec::new(),
                };
                list[idx] = Value::list(self.index_into_list(inner, depth + 1)?);
            }
            _ => return Err(self.err("list index must be followed by '=', '.' or '['")),
        }
        Ok(list)
    }
}

fn as_map(v: &Value) -> Option<Map> {
    match v {
        Value::Map(m) => Some(m.clone()),
        _ => None,
    }
}

/// Helm's `CoalesceValues`: user values `vals` over the chart's defaults, recursively into
/// subcharts with globals copied down, with the null rules of the `helm` line:
///
/// - Helm 4.2: nulls in chart defaults are not copied (a chart's own `values.yaml` nulls and
///   a parent's nulls for a subchart's keys vanish, helm#32530 and helm#32132); a null
///   that remains (the user's, or a parent's for a subchart the user also set values for)
///   deletes the key a chart defines.
/// - Helm 3: a null deletes the key only where the user put it (`-f`/`--set`, or the values
///   the caller passes as `vals`); nulls from chart values stay in `.Values` as null, which
///   is what Helm 3's `issue-9027` golden prints.
///
/// # Errors
/// `InvalidArgument` when a subchart's values are not a table.
pub fn coalesce_values(chart: &Chart, vals: &Map, helm: HelmCompat) -> Result<Map, Error> {
    let dest = match vals_copy(vals) {
        Value::Map(m) => m,
        _ => Map::default(),
    };
    let mode = Mode {
        merge: false,
        drop_default_nulls: helm.drops_default_nulls(),
    };
    coalesce(chart, &dest, Some(vals), mode)?;
    Ok(dest)
}

fn vals_copy(vals: &Map) -> Value {
    Value::Map(vals.clone()).deep_copy()
}

/// How a coalescing pass treats nulls.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// Helm's `merge`: every null is kept (the pass that prepares a parent's values).
    merge: bool,
    /// Helm 4.2: nulls of chart defaults are not copied, and any null deletes.
    drop_default_nulls: bool,
}

impl Mode {
    const MERGE: Self = Self {
        merge: true,
        drop_default_nulls: false,
    };

    fn merging(self, merge: bool) -> Self {
        Self {
            merge: self.merge || merge,
            ..self
        }
    }

    /// Whether a null at `key` of the coalesced values deletes the key.
    fn deletes(self, user: Option<&Map>, key: &str) -> bool {
        !self.merge && (self.drop_default_nulls || user_nulled(user, key))
    }

    /// A chart default as it is copied where the values lack it; `None` drops it.
    fn default_copy(self, val: Value) -> Option<Value> {
        if self.merge || !self.drop_default_nulls {
            Some(val)
        } else {
            without_nulls(val)
        }
    }
}

/// Helm's `cleanNilValues`: the value with every null in its tables dropped.
fn without_nulls(val: Value) -> Option<Value> {
    match val {
        Value::Nil => None,
        Value::Map(m) => {
            let out = Map::default();
            for (k, v) in m.snapshot() {
                if let Some(v) = without_nulls(v) {
                    out.insert(k, v);
                }
            }
            Some(Value::Map(out))
        }
        other => Some(other),
    }
}

/// The table under `key` of an optional user-values scope.
fn user_child(user: Option<&Map>, key: &str) -> Option<Map> {
    user.and_then(|u| u.get(key)).and_then(|v| as_map(&v))
}

/// Whether the user set `key` to null in this scope (then a null deletes the key).
fn user_nulled(user: Option<&Map>, key: &str) -> bool {
    matches!(user.and_then(|u| u.get(key)), Some(Value::Nil))
}

/// `user` is the part of the user-supplied values that applies to `chart` (`None` when
/// nothing does); it decides which nulls delete keys under Helm 3's rule.
fn coalesce(chart: &Chart, dest: &Map, user: Option<&Map>, mode: Mode) -> Result<(), Error> {
    coalesce_chart_values(chart, dest, user, mode);
    for sub in &chart.dependencies {
        let name = sub.name();
        let dv = match dest.get(name) {
            None => {
                let m = Map::default();
                dest.insert(name, Value::Map(m.clone()));
                m
            }
            Some(Value::Map(m)) => m,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "type mismatch on {name}: {}",
                    other.to_go_string()
                )));
            }
        };
        coalesce_globals(&dv, dest);
        // The user's globals reach the subchart through `coalesce_globals`, so they count
        // as user values there too.
        let sub_user = user_child(user, name);
        let sub_user = match (sub_user, user_child(user, GLOBAL)) {
            (Some(su), Some(ug)) => {
                let su = Map::from_btree(su.snapshot());
                su.insert(GLOBAL, Value::Map(ug));
                Some(su)
            }
            (None, Some(ug)) => {
                let su = Map::default();
                su.insert(GLOBAL, Value::Map(ug));
                Some(su)
            }
            (su, None) => su,
        };
        coalesce(sub, &dv, sub_user.as_ref(), mode)?;
    }
    Ok(())
}

const GLOBAL: &str = "global";

fn coalesce_chart_values(chart: &Chart, v: &Map, user: Option<&Map>, mode: Mode) {
    let Value::Map(defaults) = chart.values.deep_copy() else {
        return;
    };
    for (key, val) in defaults.snapshot() {
        match v.get(&key) {
            Some(Value::Nil) if mode.deletes(user, &key) => {
                v.remove(&key);
            }
            Some(Value::Map(dest)) => {
                if let Value::Map(src) = &val {
                    // Helm's `childChartMergeTrue`: a subchart's table keeps its nulls here;
                    // the subchart's own pass decides.
                    let sub = chart.dependencies.iter().any(|d| d.name() == key);
                    coalesce_tables(
                        &dest,
                        src,
                        user_child(user, &key).as_ref(),
                        mode.merging(sub),
                    );
                }
            }
            Some(_) => {}
            None => {
                if let Some(val) = mode.default_copy(val) {
                    v.insert(key, val);
                }
            }
        }
    }
}

/// Helm's `coalesceTablesFullKey`: `dst` wins; `src` fills what is missing. Which nulls in
/// `dst` delete a key is `mode`'s rule (`user` is the matching user table).
fn coalesce_tables(dst: &Map, src: &Map, user: Option<&Map>, mode: Mode) {
    if dst.ptr_eq(src) {
        return;
    }
    for (key, val) in src.snapshot() {
        match dst.get(&key) {
            Some(Value::Nil) if mode.deletes(user, &key) => {
                dst.remove(&key);
            }
            None => {
                if let Some(val) = mode.default_copy(val) {
                    dst.insert(key, val);
                }
            }
            Some(Value::Map(dv)) => {
                if let Value::Map(sv) = &val {
                    coalesce_tables(&dv, sv, user_child(user, &key).as_ref(), mode);
                }
            }
            Some(_) => {}
        }
    }
}

/// Helm's `coalesceGlobals`: the parent's `global` table is merged over the subchart's.
fn coalesce_globals(dest: &Map, src: &Map) {
    let dg = match dest.get(GLOBAL) {
        None => Map::default(),
        Some(Value::Map(m)) => m,
        Some(_) => return,
    };
    let sg = match src.get(GLOBAL) {
        None => Map::default(),
        Some(Value::Map(m)) => m,
        Some(_) => return,
    };
    for (key, val) in sg.snapshot() {
        if let Value::Map(vm) = &val {
            let vv = Map::from_btree(vm.snapshot());
            match dg.get(&key) {
                None => dg.insert(key, Value::Map(vv)),
                Some(Value::Map(dm)) => {
                    coalesce_tables(&vv, &dm, None, Mode::MERGE);
                    dg.insert(key, Value::Map(vv));
                }
                Some(_) => {}
            }
        } else if !matches!(dg.get(&key), Some(Value::Map(_))) {
            dg.insert(key, val);
        }
    }
    dest.insert(GLOBAL, Value::Map(dg));
}

/// Helm's `PathValue`: the non-table value at a dotted path.
fn path_value(vals: &Map, path: &str) -> Option<Value> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop()?;
    let mut cur = vals.clone();
    for p in parts {
        cur = as_map(&cur.get(p)?)?;
    }
    match cur.get(last)? {
        Value::Map(_) => None,
        v => Some(v),
    }
}

/// Helm's `ProcessDependenciesWithMerge`: applies aliases, drops subcharts disabled by
/// conditions or tags, and imports values from subcharts.
///
/// # Errors
/// As [`coalesce_values`].
pub fn process_dependencies(chart: &mut Chart, vals: &Map, helm: HelmCompat) -> Result<(), Error> {
    process_enabled(chart, vals, helm, "", 0)?;
    process_imports(chart, 0)
}

fn process_enabled(
    c: &mut Chart,
    v: &Map,
    helm: HelmCompat,
    path: &str,
    depth: usize,
) -> Result<(), Error> {
    if c.metadata.dependencies.is_empty() || depth > 32 {
        return Ok(());
    }
    let mut kept: Vec<Chart> = c
        .dependencies
        .iter()
        .filter(|existing| {
            !c.metadata
                .dependencies
                .iter()
                .any(|req| existing.name() == req.name && existing.satisfies(&req.version))
        })
        .cloned()
        .collect();
    let originals = std::mem::take(&mut c.dependencies);
    for req in &mut c.metadata.dependencies {
        if let Some(found) = originals
            .iter()
            .find(|ch| ch.name() == req.name && ch.satisfies(&req.version))
        {
            kept.push(if req.alias.is_empty() {
                found.clone()
            } else {
                found.aliased(&req.alias)
            });
        }
        if !req.alias.is_empty() {
            req.name = req.alias.clone();
        }
    }
    c.dependencies = kept;
    let cvals = coalesce_values(c, v, helm)?;
    let mut enabled: BTreeMap<String, bool> = c
        .metadata
        .dependencies
        .iter()
        .map(|d| (d.name.clone(), true))
        .collect();
    // Tags first; conditions, when they resolve to a boolean, override them.
    if let Some(Value::Map(tags)) = cvals.get("tags") {
        for req in &c.metadata.dependencies {
            let (mut has_true, mut has_false) = (false, false);
            for t in &req.tags {
                match tags.get(t) {
                    Some(Value::Bool(true)) => has_true = true,
                    Some(Value::Bool(false)) => has_false = true,
                    _ => {}
                }
            }
            enabled.insert(req.name.clone(), has_true || !has_false);
        }
    }
    for req in &c.metadata.dependencies {
        for cond in req.condition.trim().split(',').filter(|s| !s.is_empty()) {
            if let Some(Value::Bool(b)) = path_value(&cvals, &format!("{path}{}", cond.trim())) {
                enabled.insert(req.name.clone(), b);
                break;
            }
        }
    }
    let disabled = |name: &str| enabled.get(name) == Some(&false);
    c.dependencies.retain(|d| !disabled(d.name()));
    c.metadata.dependencies.retain(|d| !disabled(&d.name));
    for sub in &mut c.dependencies {
        let sub_path = format!("{path}{}.", sub.name());
        process_enabled(sub, &cvals, helm, &sub_path, depth + 1)?;
    }
    Ok(())
}

fn process_imports(c: &mut Chart, depth: usize) -> Result<(), Error> {
    if depth > 32 {
        return Ok(());
    }
    for sub in &mut c.dependencies {
        process_imports(sub, depth + 1)?;
    }
    if c.metadata.dependencies.is_empty() {
        return Ok(());
    }
    let cvals = Map::default();
    coalesce(c, &cvals, None, Mode::MERGE)?;
    let imported = Map::default();
    for req in &c.metadata.dependencies {
        for iv in &req.import_values {
            let (child, parent) = match iv {
                Value::Map(m) => match (m.get("child"), m.get("parent")) {
                    (Some(Value::String(ch)), Some(Value::String(p))) => (ch, p),
                    _ => continue,
                },
                Value::String(s) => (format!("exports.{s}"), ".".to_owned()),
                _ => continue,
            };
            let mut table = as_map(&Value::Map(cvals.clone()));
            for part in format!("{}.{child}", req.name).split('.') {
                table = table.and_then(|t| t.get(part)).and_then(|v| as_map(&v));
            }
            let Some(table) = table else { continue };
            let mut value = Value::Map(Map::from_btree(table.snapshot()));
            if parent != "." {
                for part in parent.rsplit('.') {
                    let mut m = BTreeMap::new();
                    m.insert(part.to_owned(), value);
                    value = Value::map(m);
                }
            }
            if let Value::Map(src) = value.deep_copy() {
                coalesce_tables(&imported, &src, None, Mode::MERGE);
            }
        }
    }
    let merged = match Value::Map(cvals).deep_copy() {
        Value::Map(m) => m,
        _ => Map::default(),
    };
    coalesce_tables(&merged, &imported, None, Mode::MERGE);
    c.values = Value::Map(merged);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Map {
        match crate::yaml::parse_values_document(s).unwrap() {
            Value::Map(m) => m,
            _ => Map::default(),
        }
    }

    fn set(exprs: &[&str]) -> Result<String, Error> {
        let m = Map::default();
        for e in exprs {
            apply_set(&m, e, false)?;
        }
        Ok(Value::Map(m).to_go_string())
    }

    #[test]
    fn set_syntax_and_types() {
        assert_eq!(
            set(&["a=1,b=true,c=null,d=01,e=1.5,f=0,g=abc"]).unwrap(),
            "map[a:1 b:true c:<nil> d:01 e:1.5 f:0 g:abc]"
        );
        assert_eq!(
            set(&["a.b.c=x", "a.b.d=y"]).unwrap(),
            "map[a:map[b:map[c:x d:y]]]"
        );
        assert_eq!(set(&["l[1]=x", "l[0].k=v"]).unwrap(), "map[l:[map[k:v] x]]");
        assert_eq!(set(&["l={a,b,1}", "e={}"]).unwrap(), "map[e:[] l:[a b 1]]");
        assert_eq!(set(&["a\\.b=c\\,d"]).unwrap(), "map[a.b:c,d]");
        assert_eq!(set(&["m[0][1]=z"]).unwrap(), "map[m:[[<nil> z]]]");
        assert!(
            set(&["a"])
                .unwrap_err()
                .to_string()
                .contains("key \"a\" has no value")
        );
        assert!(set(&["l[x]=1"]).is_err());
        assert!(set(&["l[99999999]=1"]).is_err());
        let m = Map::default();
        apply_set(&m, "a=1", true).unwrap();
        assert!(matches!(m.get("a"), Some(Value::String(_))));
        let m = Map::default();
        apply_set(&m, "n=5", false).unwrap();
        assert!(matches!(m.get("n"), Some(Value::Int64(5))));
    }

    #[test]
    fn merge_maps_like_values_files() {
        let a = yaml("x: {a: 1, b: 2}\nz: 1\n");
        merge_maps(&a, &yaml("x: {b: 3, c: 4}\nz: [1]\n"));
        assert_eq!(
            Value::Map(a).to_go_string(),
            "map[x:map[a:1 b:3 c:4] z:[1]]"
        );
    }
}
