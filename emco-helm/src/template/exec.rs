//! Execution of parsed templates with Go's semantics.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use super::ast::{Arg, Command, Control, Node, Number, Pipe};
use super::parse::line_col;
use super::{Param, TemplateLimits, Templates, Tree, parse_trees};
use crate::error::TemplateError;
use crate::value::Value;

type EResult<T> = Result<T, TemplateError>;

/// A value with whether it came out of an `interface{}` slot (a map entry or list element).
/// Go treats a nil from such a slot differently from a nil result of a pipeline: a field of the
/// first is a "nil pointer" error, a field of the second is silently empty.
#[derive(Clone, Debug)]
struct Slot {
    value: Value,
    typed: bool,
}

impl Slot {
    fn plain(value: Value) -> Self {
        Self {
            value,
            typed: false,
        }
    }

    fn go_type(&self) -> String {
        if self.typed {
            "interface {}".to_owned()
        } else {
            self.value.type_name()
        }
    }
}

struct Var {
    name: String,
    slot: Slot,
}

/// Per-template-call state: its variables and its output.
struct Frame {
    vars: Vec<Var>,
    out: String,
}

enum Flow {
    Normal,
    Break,
    Continue,
}

/// The state of one execution, shared by nested `template`, `include` and `tpl` calls.
pub(crate) struct Exec<'a> {
    set: &'a Templates,
    /// Templates defined by `tpl` strings being executed, innermost last.
    overlays: Vec<HashMap<String, Arc<Tree>>>,
    limits: &'a TemplateLimits,
    depth: usize,
    steps: u64,
    written: usize,
    /// How deeply each name is nested in `include` calls right now (Helm's `includedNames`).
    included: HashMap<String, usize>,
}

/// Helm's `recursionMaxNums`: a name may be nested in `include` this many times.
const INCLUDE_MAX_NESTING: usize = 1000;

impl<'a> Exec<'a> {
    pub(crate) fn new(set: &'a Templates, limits: &'a TemplateLimits) -> Self {
        Self {
            set,
            overlays: Vec::new(),
            limits,
            depth: 0,
            steps: 0,
            written: 0,
            included: HashMap::new(),
        }
    }

    fn lookup(&self, name: &str) -> Option<Arc<Tree>> {
        for o in self.overlays.iter().rev() {
            if let Some(t) = o.get(name) {
                return Some(t.clone());
            }
        }
        self.set.get(name)
    }

    /// Runs template `name` with `data` (Go's `ExecuteTemplate`).
    pub(crate) fn execute_named(&mut self, name: &str, data: Value) -> EResult<String> {
        let Some(tree) = self.lookup(name) else {
            return Err(TemplateError::invalid(format!(
                "template: no template {name:?} associated with template \"gotpl\""
            )));
        };
        self.run_tree(&tree, Slot::plain(data))
    }

    /// Helm's `include`: runs template `name`, refusing a name nested in `include` more than
    /// Helm allows. The engine's own depth limit, when lower, stops the loop first with the
    /// same message, so recursive charts fail the way Helm reports them.
    #[inline(never)]
    pub(crate) fn include(&mut self, name: &str, data: Value) -> EResult<String> {
        let nested = self.included.get(name).copied().unwrap_or(0);
        if nested > INCLUDE_MAX_NESTING || self.depth >= self.limits.max_depth {
            return Err(TemplateError::invalid(format!(
                "rendering template has a nested reference name: {name}: unable to execute template"
            )));
        }
        // Charts include the same few helpers thousands of times: allocate each name once.
        match self.included.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.included.insert(name.to_owned(), 1);
            }
        }
        let result = self.execute_named(name, data);
        if let Some(n) = self.included.get_mut(name) {
            *n = nested;
        }
        result
    }

    /// Parses `text` as a template named `name` whose definitions are visible only while it runs
    /// (Helm's `tpl`), and runs it with `data`.
    pub(crate) fn execute_text(&mut self, name: &str, text: &str, data: Value) -> EResult<String> {
        let trees = parse_trees(name, text, self.set.funcs)?;
        let mut overlay = HashMap::new();
        let mut main = None;
        for (i, t) in trees.into_iter().enumerate() {
            let t = Arc::new(t);
            if i == 0 {
                main = Some(t.clone());
            }
            overlay.insert(t.name.clone(), t);
        }
        let Some(main) = main else {
            return Ok(String::new());
        };
        self.overlays.push(overlay);
        let result = self.run_tree(&main, Slot::plain(data));
        self.overlays.pop();
        result
    }

    fn run_tree(&mut self, tree: &Arc<Tree>, dot: Slot) -> EResult<String> {
        if self.depth >= self.limits.max_depth {
            return Err(TemplateError::invalid(format!(
                "template: {}: exceeded maximum template depth ({})",
                tree.name, self.limits.max_depth
            )));
        }
        self.depth += 1;
        let mut frame = Frame {
            vars: vec![Var {
                name: "$".to_owned(),
                slot: dot.clone(),
            }],
            out: String::new(),
        };
        let result = self.walk_list(tree, &mut frame, &dot, &tree.root);
        self.depth -= 1;
        result.map(|_| frame.out)
    }

    fn fail(&self, tree: &Tree, pos: usize, at: &dyn Display, msg: impl Display) -> TemplateError {
        let (line, col) = line_col(&tree.src, pos);
        TemplateError::invalid(format!(
            "template: {}:{line}:{col}: executing {:?} at <{at}>: {msg}",
            tree.parse_name, tree.name
        ))
    }

    fn step(&mut self, tree: &Tree, pos: usize, at: &dyn Display) -> EResult<()> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return Err(self.fail(
                tree,
                pos,
                at,
                format!("exceeded the limit of {} steps", self.limits.max_steps),
            ));
        }
        Ok(())
    }

    fn write(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        pos: usize,
        at: &dyn Display,
        text: &str,
    ) -> EResult<()> {
        self.written += text.len();
        if self.written > self.limits.max_output {
            return Err(self.fail(
                tree,
                pos,
                at,
                format!("output exceeds {} bytes", self.limits.max_output),
            ));
        }
        frame.out.push_str(text);
        Ok(())
    }

    fn walk_list(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        nodes: &[Node],
    ) -> EResult<Flow> {
        for node in nodes {
            match self.walk(tree, frame, dot, node)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, tree: &Tree, frame: &mut Frame, dot: &Slot, node: &Node) -> EResult<Flow> {
        match node {
            Node::Text(t) => {
                self.write(tree, frame, 0, &"text", t)?;
            }
            Node::Action(pipe) => {
                self.step(tree, pipe.pos, pipe)?;
                let v = self.eval_pipeline(tree, frame, dot, pipe)?;
                if pipe.decl.is_empty() {
                    let text = match &v {
                        Value::Nil => "<no value>".to_owned(),
                        other => other.to_go_string(),
                    };
                    self.write(tree, frame, pipe.pos, pipe, &text)?;
                }
            }
            Node::If(c) | Node::With(c) => {
                self.step(tree, c.pos, &c.pipe)?;
                let mark = frame.vars.len();
                let val = self.eval_pipeline(tree, frame, dot, &c.pipe)?;
                let flow = if val.is_true() {
                    if matches!(node, Node::With(_)) {
                        self.walk_list(tree, frame, &Slot::plain(val), &c.list)?
                    } else {
                        self.walk_list(tree, frame, dot, &c.list)?
                    }
                } else if let Some(else_list) = &c.else_list {
                    self.walk_list(tree, frame, dot, else_list)?
                } else {
                    Flow::Normal
                };
                frame.vars.truncate(mark);
                return Ok(flow);
            }
            Node::Range(c) => {
                self.step(tree, c.pos, &c.pipe)?;
                let mark = frame.vars.len();
                let result = self.walk_range(tree, frame, dot, c);
                frame.vars.truncate(mark);
                result?;
            }
            Node::Template { pos, name, pipe } => {
                self.step(tree, *pos, &format_args!("template {name:?}"))?;
                let Some(target) = self.lookup(name) else {
                    return Err(self.fail(
                        tree,
                        *pos,
                        &format_args!("{{{{template {name:?}}}}}"),
                        format!("template {name:?} not defined"),
                    ));
                };
                let data = match pipe {
                    Some(p) => self.eval_pipeline(tree, frame, dot, p)?,
                    None => Value::Nil,
                };
                let out = self.run_tree(&target, Slot::plain(data))?;
                frame.out.push_str(&out);
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_range(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        c: &Control,
    ) -> EResult<()> {
        let val = self.eval_pipeline(tree, frame, dot, &c.pipe)?;
        let mark = frame.vars.len();
        let items: Vec<(Value, Slot)> = match &val {
            Value::List(l) => l
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        Value::Int(i as i64),
                        Slot {
                            value: v.clone(),
                            typed: true,
                        },
                    )
                })
                .collect(),
            Value::Map(m) => m
                .snapshot()
                .into_iter()
                .map(|(k, v)| {
                    (
                        Value::String(k),
                        Slot {
                            value: v,
                            typed: true,
                        },
                    )
                })
                .collect(),
            Value::Int(n) | Value::Int64(n) => {
                if c.pipe.decl.len() > 1 {
                    return Err(self.fail(
                        tree,
                        c.pos,
                        &c.pipe,
                        format!("can't use {n} to iterate over more than one variable"),
                    ));
                }
                let n = *n;
                if n > 0 && n as u64 > self.limits.max_steps {
                    return Err(self.fail(
                        tree,
                        c.pos,
                        &c.pipe,
                        format!("exceeded the limit of {} steps", self.limits.max_steps),
                    ));
                }
                let mk = |i: i64| {
                    if matches!(val, Value::Int(_)) {
                        Value::Int(i)
                    } else {
                        Value::Int64(i)
                    }
                };
                (0..n.max(0)).map(|i| (mk(i), Slot::plain(mk(i)))).collect()
            }
            Value::Nil => Vec::new(),
            Value::Object(o) if o.entries().is_some() => o
                .entries()
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| {
                    (
                        Value::String(k),
                        Slot {
                            value: v,
                            typed: false,
                        },
                    )
                })
                .collect(),
            other => {
                return Err(self.fail(
                    tree,
                    c.pos,
                    &c.pipe,
                    format!("range can't iterate over {}", other.to_go_string()),
                ));
            }
        };
        if items.is_empty() {
            if let Some(else_list) = &c.else_list {
                self.walk_list(tree, frame, dot, else_list)?;
            }
            return Ok(());
        }
        for (index, elem) in items {
            self.step(tree, c.pos, &c.pipe)?;
            let decl = &c.pipe.decl;
            if c.pipe.is_assign {
                if decl.len() > 1 {
                    self.set_var(tree, frame, c.pos, &decl[0], Slot::plain(index.clone()))?;
                    self.set_var(tree, frame, c.pos, &decl[1], elem.clone())?;
                } else if let Some(d) = decl.first() {
                    self.set_var(tree, frame, c.pos, d, elem.clone())?;
                }
            } else {
                // The declared variables were pushed by the pipeline; the element is the last.
                let n = frame.vars.len();
                if !decl.is_empty() && n >= 1 {
                    frame.vars[n - 1].slot = elem.clone();
                }
                if decl.len() > 1 && n >= 2 {
                    frame.vars[n - 2].slot = Slot::plain(index);
                }
            }
            let flow = self.walk_list(tree, frame, &elem, &c.list);
            frame.vars.truncate(mark);
            match flow? {
                Flow::Break => break,
                Flow::Normal | Flow::Continue => {}
            }
        }
        Ok(())
    }

    fn set_var(
        &self,
        tree: &Tree,
        frame: &mut Frame,
        pos: usize,
        name: &str,
        slot: Slot,
    ) -> EResult<()> {
        match frame.vars.iter_mut().rev().find(|v| v.name == name) {
            Some(v) => {
                v.slot = slot;
                Ok(())
            }
            None => Err(self.fail(tree, pos, &name, format!("undefined variable: {name}"))),
        }
    }

    fn var(&self, tree: &Tree, frame: &Frame, pos: usize, name: &str) -> EResult<Slot> {
        match frame.vars.iter().rev().find(|v| v.name == name) {
            Some(v) => Ok(v.slot.clone()),
            None => Err(self.fail(tree, pos, &name, format!("undefined variable: {name}"))),
        }
    }

    fn eval_pipeline(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        pipe: &Pipe,
    ) -> EResult<Value> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_command(tree, frame, dot, cmd, value)?);
        }
        let value = value.unwrap_or_default();
        for name in &pipe.decl {
            if pipe.is_assign {
                self.set_var(tree, frame, pipe.pos, name, Slot::plain(value.clone()))?;
            } else {
                frame.vars.push(Var {
                    name: name.clone(),
                    slot: Slot::plain(value.clone()),
                });
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, tree: &Tree, cmd: &Command, final_: &Option<Value>) -> EResult<()> {
        if cmd.args.len() > 1 || final_.is_some() {
            let first = &cmd.args[0];
            return Err(self.fail(
                tree,
                first.pos(),
                first,
                format!("can't give argument to non-function {first}"),
            ));
        }
        Ok(())
    }

    fn eval_command(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        cmd: &Command,
        final_: Option<Value>,
    ) -> EResult<Value> {
        let first = &cmd.args[0];
        let rest = &cmd.args[1..];
        match first {
            Arg::Field { pos, idents } => {
                let s = self.eval_field_chain(
                    tree,
                    frame,
                    dot,
                    dot.clone(),
                    first,
                    *pos,
                    idents,
                    rest,
                    final_,
                )?;
                Ok(s.value)
            }
            Arg::Chain { pos, node, idents } => {
                if idents.is_empty() {
                    return Err(self.fail(
                        tree,
                        *pos,
                        first,
                        "internal error: no fields in evalChainNode",
                    ));
                }
                let recv = self.eval_arg_raw(tree, frame, dot, node)?;
                Ok(self
                    .eval_field_chain(tree, frame, dot, recv, first, *pos, idents, rest, final_)?
                    .value)
            }
            Arg::Variable { pos, name, idents } => {
                let v = self.var(tree, frame, *pos, name)?;
                if idents.is_empty() {
                    self.not_a_function(tree, cmd, &final_)?;
                    return Ok(v.value);
                }
                Ok(self
                    .eval_field_chain(tree, frame, dot, v, first, *pos, idents, rest, final_)?
                    .value)
            }
            Arg::Ident { pos, name } => {
                self.eval_function(tree, frame, dot, cmd, *pos, name, rest, final_)
            }
            Arg::Pipe(p) => {
                self.not_a_function(tree, cmd, &final_)?;
                self.eval_pipeline(tree, frame, dot, p)
            }
            Arg::Nil(pos) => Err(self.fail(tree, *pos, first, "nil is not a command")),
            Arg::Dot(_) => {
                self.not_a_function(tree, cmd, &final_)?;
                Ok(dot.value.clone())
            }
            Arg::Bool(_, b) => {
                self.not_a_function(tree, cmd, &final_)?;
                Ok(Value::Bool(*b))
            }
            Arg::Str { value, .. } => {
                self.not_a_function(tree, cmd, &final_)?;
                Ok(Value::String(value.clone()))
            }
            Arg::Number(_, n) => {
                self.not_a_function(tree, cmd, &final_)?;
                self.ideal_constant(tree, first, n)
            }
        }
    }

    fn ideal_constant(&self, tree: &Tree, at: &Arg, n: &Number) -> EResult<Value> {
        let is_hex = n
            .text
            .trim_start_matches(['+', '-'])
            .to_ascii_lowercase()
            .starts_with("0x");
        if let Some(f) = n
            .float
            .filter(|_| !n.is_char && !is_hex && n.text.contains(['.', 'e', 'E']))
        {
            return Ok(Value::Float(f));
        }
        match n.int {
            Some(i) => Ok(Value::Int(i)),
            None => Err(self.fail(tree, at.pos(), at, format!("{} overflows int", n.text))),
        }
    }

    /// Evaluates an argument as its own value (no parameter type), Go's `evalArg` with nil type.
    fn eval_arg_raw(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        arg: &Arg,
    ) -> EResult<Slot> {
        match arg {
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Ok(Slot::plain(Value::Nil)),
            Arg::Field { pos, idents } => {
                self.eval_field_chain(tree, frame, dot, dot.clone(), arg, *pos, idents, &[], None)
            }
            Arg::Variable { pos, name, idents } => {
                let v = self.var(tree, frame, *pos, name)?;
                if idents.is_empty() {
                    return Ok(v);
                }
                self.eval_field_chain(tree, frame, dot, v, arg, *pos, idents, &[], None)
            }
            Arg::Pipe(p) => Ok(Slot::plain(self.eval_pipeline(tree, frame, dot, p)?)),
            Arg::Ident { pos, name } => {
                let cmd = Command {
                    pos: *pos,
                    args: vec![arg.clone()],
                };
                Ok(Slot::plain(self.eval_function(
                    tree,
                    frame,
                    dot,
                    &cmd,
                    *pos,
                    name,
                    &[],
                    None,
                )?))
            }
            Arg::Chain { pos, node, idents } => {
                let recv = self.eval_arg_raw(tree, frame, dot, node)?;
                self.eval_field_chain(tree, frame, dot, recv, arg, *pos, idents, &[], None)
            }
            Arg::Bool(_, b) => Ok(Slot::plain(Value::Bool(*b))),
            Arg::Str { value, .. } => Ok(Slot::plain(Value::String(value.clone()))),
            Arg::Number(_, n) => Ok(Slot::plain(self.ideal_constant(tree, arg, n)?)),
        }
    }

    /// Evaluates an argument for a parameter of kind `param`, with Go's conversions and errors.
    fn eval_arg(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        arg: &Arg,
        param: Param,
    ) -> EResult<Value> {
        let found = |what: &str| {
            self.fail(
                tree,
                arg.pos(),
                arg,
                format!("expected {what}; found {arg}"),
            )
        };
        match (arg, param) {
            (Arg::Nil(_), Param::Any | Param::Map | Param::List) => Ok(Value::Nil),
            (Arg::Nil(_), p) => Err(self.fail(
                tree,
                arg.pos(),
                arg,
                format!("cannot assign nil to {}", p.go_type()),
            )),
            (Arg::Bool(_, b), Param::Any | Param::Bool) => Ok(Value::Bool(*b)),
            (Arg::Bool(..), Param::Str) | (Arg::Number(..), Param::Str) => Err(found("string")),
            (Arg::Str { value, .. }, Param::Any | Param::Str) => Ok(Value::String(value.clone())),
            (Arg::Str { .. } | Arg::Bool(..), Param::Int) => Err(found("integer")),
            (Arg::Str { .. } | Arg::Bool(..), Param::Float) => Err(found("float")),
            (Arg::Str { .. } | Arg::Number(..), Param::Bool) => Err(found("bool")),
            (
                Arg::Str { .. } | Arg::Bool(..) | Arg::Number(..),
                p @ (Param::Map | Param::List | Param::Cert),
            ) => Err(self.fail(
                tree,
                arg.pos(),
                arg,
                format!("can't handle {arg} for arg of type {}", p.go_type()),
            )),
            (Arg::Number(_, n), Param::Any) => self.ideal_constant(tree, arg, n),
            (Arg::Number(_, n), Param::Int) => match n.int {
                Some(i) if n.float.is_none_or(|f| f.fract() == 0.0) => Ok(Value::Int(i)),
                _ => Err(found("integer")),
            },
            (Arg::Number(_, n), Param::Float) => match n.float {
                Some(f) => Ok(Value::Float(f)),
                None => Err(found("float")),
            },
            _ => {
                let slot = self.eval_arg_raw(tree, frame, dot, arg)?;
                self.validate(tree, arg.pos(), arg, slot, param)
            }
        }
    }

    /// Go's `validateType` for an evaluated value.
    fn validate(
        &self,
        tree: &Tree,
        pos: usize,
        at: &dyn Display,
        slot: Slot,
        param: Param,
    ) -> EResult<Value> {
        let ok = matches!(
            (&slot.value, param),
            (_, Param::Any)
                | (Value::Nil | Value::Map(_), Param::Map)
                | (Value::Nil | Value::List(_), Param::List)
                | (Value::String(_), Param::Str)
                | (Value::Int(_), Param::Int)
                | (Value::Float(_), Param::Float)
                | (Value::Bool(_), Param::Bool)
        ) || matches!(
            (&slot.value, param),
            (Value::Object(o), Param::Cert) if o.type_name() == Param::Cert.go_type()
        );
        if ok {
            return Ok(slot.value);
        }
        if slot.value.is_nil() && !slot.typed {
            return Err(self.fail(
                tree,
                pos,
                at,
                format!("invalid value; expected {}", param.go_type()),
            ));
        }
        // Go unwraps a non-nil interface before reporting, so only a nil shows `interface {}`.
        let got = if slot.value.is_nil() {
            slot.go_type()
        } else {
            slot.value.type_name()
        };
        Err(self.fail(
            tree,
            pos,
            at,
            format!(
                "wrong type for value; expected {}; got {got}",
                param.go_type()
            ),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field_chain(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        mut receiver: Slot,
        at: &Arg,
        pos: usize,
        idents: &[String],
        args: &[Arg],
        final_: Option<Value>,
    ) -> EResult<Slot> {
        let n = idents.len();
        for ident in &idents[..n.saturating_sub(1)] {
            receiver = self.eval_field(tree, frame, dot, at, pos, ident, receiver, &[], None)?;
        }
        match idents.last() {
            Some(last) => self.eval_field(tree, frame, dot, at, pos, last, receiver, args, final_),
            None => Ok(receiver),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        at: &Arg,
        pos: usize,
        name: &str,
        receiver: Slot,
        args: &[Arg],
        final_: Option<Value>,
    ) -> EResult<Slot> {
        let has_args = !args.is_empty() || final_.is_some();
        match &receiver.value {
            Value::Nil if !receiver.typed => Ok(Slot::plain(Value::Nil)),
            Value::Nil => Err(self.fail(
                tree,
                pos,
                at,
                format!("nil pointer evaluating interface {{}}.{name}"),
            )),
            Value::Object(obj) => {
                let obj = obj.clone();
                if obj.is_method(name) {
                    let mut argv = Vec::with_capacity(args.len() + 1);
                    for a in args {
                        argv.push(self.eval_arg(tree, frame, dot, a, Param::Any)?);
                    }
                    if let Some(f) = final_ {
                        argv.push(f);
                    }
                    return match obj.member(name, &argv) {
                        Some(Ok(v)) => Ok(Slot {
                            value: v,
                            typed: true,
                        }),
                        Some(Err(e)) => {
                            Err(self.fail(tree, pos, at, format!("error calling {name}: {e}")))
                        }
                        None => Err(self.fail(
                            tree,
                            pos,
                            at,
                            format!("can't evaluate field {name} in type {}", obj.type_name()),
                        )),
                    };
                }
                if has_args {
                    return Err(self.fail(
                        tree,
                        pos,
                        at,
                        format!("{name} has arguments but cannot be invoked as function"),
                    ));
                }
                match obj.member(name, &[]) {
                    Some(Ok(v)) => Ok(Slot {
                        value: v,
                        typed: true,
                    }),
                    Some(Err(e)) => Err(self.fail(tree, pos, at, e)),
                    None => Err(self.fail(
                        tree,
                        pos,
                        at,
                        format!("can't evaluate field {name} in type {}", obj.type_name()),
                    )),
                }
            }
            Value::Map(m) => {
                if has_args {
                    return Err(self.fail(
                        tree,
                        pos,
                        at,
                        format!("{name} is not a method but has arguments"),
                    ));
                }
                Ok(Slot {
                    value: m.get(name).unwrap_or_default(),
                    typed: true,
                })
            }
            _ => Err(self.fail(
                tree,
                pos,
                at,
                format!("can't evaluate field {name} in type {}", receiver.go_type()),
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_function(
        &mut self,
        tree: &Tree,
        frame: &mut Frame,
        dot: &Slot,
        cmd: &Command,
        pos: usize,
        name: &str,
        args: &[Arg],
        final_: Option<Value>,
    ) -> EResult<Value> {
        let Some(func) = self.set.funcs.get(name) else {
            let at = Arg::Ident {
                pos,
                name: name.to_owned(),
            };
            return Err(self.fail(
                tree,
                pos,
                &at,
                format!("{name:?} is not a defined function"),
            ));
        };
        let num_in = args.len() + usize::from(final_.is_some());
        let fixed = func.params.len();
        if func.variadic.is_some() {
            if num_in < fixed {
                return Err(self.fail(
                    tree,
                    cmd.pos,
                    cmd,
                    format!(
                        "wrong number of args for {name}: want at least {fixed} got {}",
                        args.len()
                    ),
                ));
            }
        } else if num_in != fixed {
            return Err(self.fail(
                tree,
                cmd.pos,
                cmd,
                format!("wrong number of args for {name}: want {fixed} got {num_in}"),
            ));
        }
        let param_at = |i: usize| {
            if i < fixed {
                func.params[i]
            } else {
                func.variadic.unwrap_or(Param::Any)
            }
        };
        if func.short_circuit {
            // `and` and `or` stop at the first argument that decides the result (Go >= 1.18).
            let want = name == "or";
            let mut v = Value::Nil;
            for a in args {
                v = self.eval_arg(tree, frame, dot, a, Param::Any)?;
                if v.is_true() == want {
                    return Ok(v);
                }
            }
            if let Some(f) = final_ {
                v = f;
            }
            return Ok(v);
        }
        let mut argv = Vec::with_capacity(num_in);
        for (i, a) in args.iter().enumerate() {
            argv.push(self.eval_arg(tree, frame, dot, a, param_at(i))?);
        }
        if let Some(f) = final_ {
            let v = self.validate(tree, cmd.pos, cmd, Slot::plain(f), param_at(args.len()))?;
            argv.push(v);
        }
        if name == "call" {
            insert_callee_name(args, &mut argv);
        }
        let result = (func.imp)(self, argv);
        result.map_err(|e| self.fail(tree, cmd.pos, cmd, format!("error calling {name}: {e}")))
    }
}

/// Go's `evalCall` passes `call` the callee's expression text (or the piped value's
/// `reflect.Value.String()`) ahead of the arguments. Kept out of `eval_function`, whose stack
/// frame every nested template call pays for.
#[inline(never)]
fn insert_callee_name(args: &[Arg], argv: &mut Vec<Value>) {
    let callee = match (args.first(), argv.first()) {
        (Some(a), _) => a.to_string(),
        (None, Some(Value::String(s))) => s.clone(),
        (None, Some(v)) => format!("<{} Value>", v.type_name()),
        (None, None) => "<invalid Value>".to_owned(),
    };
    argv.insert(0, Value::String(callee));
}
