//! The template functions: Go's builtins, Sprig's library and Helm's additions.
//!
//! Each function declares Go's parameter types so that the engine converts and rejects
//! arguments exactly as Go's reflection-based calls do (`wrong type for value; expected int;
//! got float64` for a values-file number passed to `trunc`).

mod builtin;
mod case;
mod conv;
mod godur;
mod gotime;
mod helm;
mod sprig_cipher;
mod sprig_crypto;
mod sprig_dates;
mod sprig_dicts;
mod sprig_floats;
mod sprig_lists;
mod sprig_misc;
mod sprig_more;
mod sprig_strings;
mod sprig_text;
mod totoml;

use std::sync::LazyLock;

use crate::template::Templates;
use crate::value::Value;

pub(crate) use conv::{strval, to_float64, to_int64};

pub(crate) use crate::template::{FResult, Func, FuncMap, Param, func};

type Registry = FuncMap;

static FUNCS: LazyLock<Registry> = LazyLock::new(|| {
    let mut m = Registry::new();
    // Go looks a name up in the template's FuncMap before its builtins, so Sprig's `slice`
    // replaces the builtin one: register the builtins first and let the libraries override.
    builtin::register(&mut m);
    sprig_strings::register(&mut m);
    sprig_lists::register(&mut m);
    sprig_dicts::register(&mut m);
    sprig_dates::register(&mut m);
    sprig_misc::register(&mut m);
    sprig_text::register(&mut m);
    sprig_floats::register(&mut m);
    sprig_crypto::register(&mut m);
    sprig_cipher::register(&mut m);
    sprig_more::register(&mut m);
    totoml::register(&mut m);
    helm::register(&mut m);
    for (must, base) in MUST_ALIASES {
        if let Some(f) = m.get(base).copied() {
            m.insert(must, f);
        }
    }
    m
});

/// Sprig's `mustX` functions whose `X` only differs by panicking where `mustX` returns the
/// error; Go's template engine reports both the same way, so they share one implementation.
const MUST_ALIASES: &[(&str, &str)] = &[
    ("mustAppend", "append"),
    ("mustPush", "push"),
    ("mustPrepend", "prepend"),
    ("mustFirst", "first"),
    ("mustRest", "rest"),
    ("mustLast", "last"),
    ("mustInitial", "initial"),
    ("mustReverse", "reverse"),
    ("mustUniq", "uniq"),
    ("mustWithout", "without"),
    ("mustHas", "has"),
    ("mustSlice", "slice"),
    ("mustCompact", "compact"),
    ("mustChunk", "chunk"),
    ("mustMerge", "merge"),
    ("mustMergeOverwrite", "mergeOverwrite"),
    ("mustDeepCopy", "deepCopy"),
    ("mustRegexFind", "regexFind"),
    ("mustRegexFindAll", "regexFindAll"),
    ("mustRegexReplaceAll", "regexReplaceAll"),
    ("mustRegexReplaceAllLiteral", "regexReplaceAllLiteral"),
    ("mustRegexSplit", "regexSplit"),
];

impl Templates {
    /// An empty set whose templates call Go's builtins and Sprig's and Helm's functions, as
    /// Helm's engine does.
    #[must_use]
    pub fn new() -> Self {
        Self::with_funcs(&FUNCS)
    }
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

/// The names of all functions, sorted.
#[must_use]
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = FUNCS.keys().copied().collect();
    v.sort_unstable();
    v
}

/// The string inside a value the engine already checked to be a `string` parameter.
pub(crate) fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// The integer inside a value the engine already checked to be an `int`/`int64` parameter.
pub(crate) fn i(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
