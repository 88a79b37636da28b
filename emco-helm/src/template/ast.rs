//! The parse tree of a template, with byte positions for error messages.

use std::fmt;

/// A node of a template body.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Text(String),
    Action(Pipe),
    If(Control),
    Range(Control),
    With(Control),
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

/// The shared shape of `if`, `range` and `with`.
#[derive(Debug, Clone)]
pub(crate) struct Control {
    pub pos: usize,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

/// A pipeline, optionally declaring (`:=`) or assigning (`=`) variables.
#[derive(Debug, Clone)]
pub(crate) struct Pipe {
    pub pos: usize,
    pub decl: Vec<String>,
    pub is_assign: bool,
    pub cmds: Vec<Command>,
}

/// One stage of a pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub pos: usize,
    pub args: Vec<Arg>,
}

/// A number constant with the forms it can take, as Go's `parse.NumberNode`.
#[derive(Debug, Clone)]
pub(crate) struct Number {
    pub text: String,
    pub int: Option<i64>,
    pub float: Option<f64>,
    pub is_char: bool,
}

/// An operand.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Field {
        pos: usize,
        idents: Vec<String>,
    },
    Variable {
        pos: usize,
        name: String,
        idents: Vec<String>,
    },
    Dot(usize),
    Nil(usize),
    Bool(usize, bool),
    Number(usize, Number),
    Str {
        pos: usize,
        value: String,
        raw: String,
    },
    Ident {
        pos: usize,
        name: String,
    },
    Pipe(Box<Pipe>),
    Chain {
        pos: usize,
        node: Box<Arg>,
        idents: Vec<String>,
    },
}

impl Arg {
    pub fn pos(&self) -> usize {
        match self {
            Arg::Field { pos, .. }
            | Arg::Variable { pos, .. }
            | Arg::Dot(pos)
            | Arg::Nil(pos)
            | Arg::Bool(pos, _)
            | Arg::Number(pos, _)
            | Arg::Str { pos, .. }
            | Arg::Ident { pos, .. }
            | Arg::Chain { pos, .. } => *pos,
            Arg::Pipe(p) => p.pos,
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Field { idents, .. } => {
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Variable { name, idents, .. } => {
                f.write_str(name)?;
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Dot(_) => f.write_str("."),
            Arg::Nil(_) => f.write_str("nil"),
            Arg::Bool(_, b) => write!(f, "{b}"),
            Arg::Number(_, n) => f.write_str(&n.text),
            Arg::Str { raw, .. } => f.write_str(raw),
            Arg::Ident { name, .. } => f.write_str(name),
            Arg::Pipe(p) => write!(f, "({p})"),
            Arg::Chain { node, idents, .. } => {
                match node.as_ref() {
                    Arg::Pipe(p) => write!(f, "({p})")?,
                    other => write!(f, "{other}")?,
                }
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            f.write_str(&self.decl.join(", "))?;
            f.write_str(if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}
