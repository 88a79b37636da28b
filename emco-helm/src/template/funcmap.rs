//! What a template can call: functions with Go's parameter types, given to a template set
//! from outside as Go's `Template.Funcs` does (the library of them is `crate::funcs`).

use std::collections::HashMap;

use super::Exec;
use crate::value::Value;

/// The Go type of Sprig's certificate struct, as `typeOf` and argument errors print it.
pub(crate) const CERT_TYPE: &str = "sprig.certificate";

/// The Go type of a parameter, for argument conversion and checking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param {
    /// `interface{}` or `reflect.Value`: anything.
    Any,
    /// `string`.
    Str,
    /// `int`.
    Int,
    /// `float64`.
    Float,
    /// `bool`.
    Bool,
    /// `map[string]interface{}`.
    Map,
    /// `[]interface{}`.
    List,
    /// Sprig's `certificate` struct.
    Cert,
}

impl Param {
    /// The Go spelling of the type, as error messages print it.
    pub(crate) fn go_type(self) -> &'static str {
        match self {
            Param::Any => "interface {}",
            Param::Str => "string",
            Param::Int => "int",
            Param::Float => "float64",
            Param::Bool => "bool",
            Param::Map => "map[string]interface {}",
            Param::List => "[]interface {}",
            Param::Cert => CERT_TYPE,
        }
    }
}

/// The result of a function: a value, or the error message Go would wrap as `error calling NAME`.
pub(crate) type FResult = Result<Value, String>;

/// A function implementation.
pub(crate) type Imp = fn(&mut Exec<'_>, Vec<Value>) -> FResult;

/// A registered function.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Func {
    pub params: &'static [Param],
    pub variadic: Option<Param>,
    pub imp: Imp,
    /// `and`/`or`: arguments are evaluated lazily.
    pub short_circuit: bool,
}

/// Shorthand for the registration tables.
pub(crate) const fn func(params: &'static [Param], variadic: Option<Param>, imp: Imp) -> Func {
    Func {
        params,
        variadic,
        imp,
        short_circuit: false,
    }
}

/// Functions by name.
pub(crate) type FuncMap = HashMap<&'static str, Func>;
