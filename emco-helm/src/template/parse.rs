//! The parser of Go's `text/template`, producing [`ast`](super::ast) trees.

use super::ast::{Arg, Command, Control, Node, Number, Pipe};
use super::lex::{Tok, Token, lex};
use crate::error::TemplateError;

/// The main body of a parsed file and the templates it defines (`define` and `block`).
#[derive(Debug)]
pub(crate) struct Parsed {
    pub root: Vec<Node>,
    pub defines: Vec<(String, Vec<Node>)>,
}

/// Deepest nesting of controls and parentheses a template may have (protects the stack).
const MAX_NESTING: usize = 256;

/// The 1-based line and 0-based byte column of `pos` in `src`, as Go reports them.
pub(crate) fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(src.len());
    let before = &src.as_bytes()[..pos];
    let line = 1 + before.iter().filter(|b| **b == b'\n').count();
    let col = match before.iter().rposition(|b| *b == b'\n') {
        Some(nl) => pos - nl - 1,
        None => pos,
    };
    (line, col)
}

/// Parses `src`, the text of template `name`; `has_func` tells which function names exist.
pub(crate) fn parse(
    name: &str,
    src: &str,
    has_func: &dyn Fn(&str) -> bool,
) -> Result<Parsed, TemplateError> {
    let toks = lex(src).map_err(|e| {
        TemplateError::invalid(format!(
            "template: {name}:{}: {}",
            line_col(src, e.pos).0,
            e.message
        ))
    })?;
    let mut p = Parser {
        name,
        src,
        toks,
        i: 0,
        vars: vec!["$".to_owned()],
        range_depth: 0,
        nesting: 0,
        defines: Vec::new(),
        has_func,
    };
    let root = p.top()?;
    Ok(Parsed {
        root,
        defines: p.defines,
    })
}

enum Item {
    Node(Node),
    End,
    Else,
}

struct Parser<'a> {
    name: &'a str,
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    vars: Vec<String>,
    range_depth: usize,
    nesting: usize,
    defines: Vec<(String, Vec<Node>)>,
    has_func: &'a dyn Fn(&str) -> bool,
}

type PResult<T> = Result<T, TemplateError>;

impl Parser<'_> {
    fn err<T>(&self, pos: usize, message: impl Into<String>) -> PResult<T> {
        let (line, _) = line_col(self.src, pos);
        Err(TemplateError::invalid(format!(
            "template: {}:{line}: {}",
            self.name,
            message.into()
        )))
    }

    fn peek(&self) -> &Token {
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn unexpected<T>(&self, tok: &Token, context: &str) -> PResult<T> {
        if let Tok::Eof = tok.tok {
            return self.err(tok.pos, format!("unexpected EOF in {context}"));
        }
        self.err(tok.pos, format!("unexpected {} in {context}", tok.tok))
    }

    fn expect_right(&mut self, context: &str) -> PResult<usize> {
        let t = self.next();
        match t.tok {
            Tok::RightDelim => Ok(t.pos),
            _ => self.unexpected(&t, context),
        }
    }

    fn nest(&mut self, pos: usize) -> PResult<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return self.err(pos, format!("template nesting deeper than {MAX_NESTING}"));
        }
        Ok(())
    }

    fn top(&mut self) -> PResult<Vec<Node>> {
        let mut root = Vec::new();
        loop {
            let t = self.peek().clone();
            match t.tok {
                Tok::Eof => return Ok(root),
                Tok::LeftDelim
                    if matches!(
                        self.toks.get(self.i + 1).map(|t| &t.tok),
                        Some(Tok::Keyword("define"))
                    ) =>
                {
                    self.i += 2;
                    self.definition()?;
                }
                _ => match self.text_or_action()? {
                    Item::Node(n) => root.push(n),
                    Item::End => return self.err(t.pos, "unexpected {{end}}"),
                    Item::Else => return self.err(t.pos, "unexpected {{else}}"),
                },
            }
        }
    }

    fn definition(&mut self) -> PResult<()> {
        let t = self.next();
        let Tok::Str { value: name, .. } = t.tok.clone() else {
            return self.unexpected(&t, "define clause");
        };
        self.expect_right("define clause")?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".to_owned()]);
        let (list, end) = self.item_list()?;
        self.vars = saved;
        if !matches!(end, Item::End) {
            return self.err(t.pos, "unexpected {{else}} in define clause");
        }
        self.defines.push((name, list));
        Ok(())
    }

    /// Nodes up to the `{{end}}` or `{{else}}` that closes them.
    fn item_list(&mut self) -> PResult<(Vec<Node>, Item)> {
        let mut list = Vec::new();
        loop {
            if let Tok::Eof = self.peek().tok {
                let pos = self.peek().pos;
                return self.err(pos, "unexpected EOF");
            }
            match self.text_or_action()? {
                Item::Node(n) => list.push(n),
                other => return Ok((list, other)),
            }
        }
    }

    fn text_or_action(&mut self) -> PResult<Item> {
        let t = self.next();
        match t.tok {
            Tok::Text(s) => Ok(Item::Node(Node::Text(s))),
            Tok::LeftDelim => self.action(),
            _ => self.unexpected(&t, "input"),
        }
    }

    fn action(&mut self) -> PResult<Item> {
        let t = self.peek().clone();
        if let Tok::Keyword(k) = t.tok {
            match k {
                "block" => {
                    self.next();
                    return self.block(t.pos).map(Item::Node);
                }
                "break" | "continue" => {
                    self.next();
                    if self.range_depth == 0 {
                        return self.err(t.pos, format!("{{{{{k}}}}} outside {{{{range}}}}"));
                    }
                    let n = self.next();
                    if !matches!(n.tok, Tok::RightDelim) {
                        return self.unexpected(&n, &format!("{{{{{k}}}}}"));
                    }
                    return Ok(Item::Node(if k == "break" {
                        Node::Break
                    } else {
                        Node::Continue
                    }));
                }
                "else" => {
                    self.next();
                    // `else if` and `else with` leave the keyword for the enclosing control.
                    if !matches!(self.peek().tok, Tok::Keyword("if" | "with")) {
                        self.expect_right("else")?;
                    }
                    return Ok(Item::Else);
                }
                "end" => {
                    self.next();
                    self.expect_right("end")?;
                    return Ok(Item::End);
                }
                "if" | "range" | "with" => {
                    self.next();
                    return self.control(k, t.pos).map(Item::Node);
                }
                "template" => {
                    self.next();
                    return self.template(t.pos).map(Item::Node);
                }
                _ => {}
            }
        }
        let pipe = self.pipeline("command", false)?;
        Ok(Item::Node(Node::Action(pipe)))
    }

    fn control(&mut self, context: &'static str, pos: usize) -> PResult<Node> {
        self.nest(pos)?;
        let mark = self.vars.len();
        let pipe = self.pipeline(context, false)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let (list, next) = self.item_list()?;
        if context == "range" {
            self.range_depth -= 1;
        }
        let mut else_list = None;
        if let Item::Else = next {
            let chained = match self.peek().tok {
                Tok::Keyword("if") if context == "if" => Some("if"),
                Tok::Keyword("with") if context == "with" => Some("with"),
                _ => None,
            };
            if let Some(kw) = chained {
                let t = self.next();
                else_list = Some(vec![self.control(kw, t.pos)?]);
            } else {
                let (l, end) = self.item_list()?;
                if !matches!(end, Item::End) {
                    return self.err(pos, "expected end; found {{else}}");
                }
                else_list = Some(l);
            }
        }
        self.vars.truncate(mark);
        self.nesting -= 1;
        let c = Control {
            pos,
            pipe,
            list,
            else_list,
        };
        Ok(match context {
            "if" => Node::If(c),
            "range" => Node::Range(c),
            _ => Node::With(c),
        })
    }

    fn template_name(&mut self, context: &str) -> PResult<String> {
        let t = self.next();
        match t.tok {
            Tok::Str { value, .. } => Ok(value),
            _ => self.unexpected(&t, context),
        }
    }

    fn template(&mut self, pos: usize) -> PResult<Node> {
        let name = self.template_name("template clause")?;
        let pipe = if let Tok::RightDelim = self.peek().tok {
            self.next();
            None
        } else {
            Some(self.pipeline("template clause", false)?)
        };
        Ok(Node::Template { pos, name, pipe })
    }

    fn block(&mut self, pos: usize) -> PResult<Node> {
        self.nest(pos)?;
        let name = self.template_name("block clause")?;
        let pipe = self.pipeline("block clause", false)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec!["$".to_owned()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, end) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        if !matches!(end, Item::End) {
            return self.err(pos, "unexpected {{else}} in block clause");
        }
        self.defines.push((name.clone(), list));
        self.nesting -= 1;
        Ok(Node::Template {
            pos,
            name,
            pipe: Some(pipe),
        })
    }

    /// A pipeline up to `}}` (or `)` when `paren`).
    fn pipeline(&mut self, context: &str, paren: bool) -> PResult<Pipe> {
        let pos = self.peek().pos;
        let mut pipe = Pipe {
            pos,
            decl: Vec::new(),
            is_assign: false,
            cmds: Vec::new(),
        };
        // Declarations: `$x :=`, `$x =`, `$i, $e :=` (range only).
        while let Tok::Variable(name) = &self.peek().tok {
            let name = name.clone();
            match self.toks.get(self.i + 1).map(|t| &t.tok) {
                Some(Tok::Declare | Tok::Assign) => {
                    pipe.is_assign = matches!(self.toks[self.i + 1].tok, Tok::Assign);
                    self.i += 2;
                    pipe.decl.push(name.clone());
                    self.vars.push(name);
                    break;
                }
                Some(Tok::Comma) => {
                    let comma_pos = self.toks[self.i + 1].pos;
                    self.i += 2;
                    pipe.decl.push(name.clone());
                    self.vars.push(name);
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek().tok {
                            Tok::Variable(_) | Tok::RightDelim | Tok::RParen => continue,
                            _ => return self.err(comma_pos, "range can only initialize variables"),
                        }
                    }
                    return self.err(comma_pos, format!("too many declarations in {context}"));
                }
                _ => break,
            }
        }
        loop {
            let t = self.peek().clone();
            match t.tok {
                Tok::RightDelim if !paren => {
                    self.next();
                    break;
                }
                Tok::RParen if paren => {
                    self.next();
                    break;
                }
                Tok::Bool(_)
                | Tok::Char { .. }
                | Tok::Dot
                | Tok::Field(_)
                | Tok::Ident(_)
                | Tok::Number(_)
                | Tok::Nil
                | Tok::Str { .. }
                | Tok::Variable(_)
                | Tok::LParen => {
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => return self.unexpected(&t, context),
            }
        }
        if pipe.cmds.is_empty() {
            return self.err(pos, format!("missing value for {context}"));
        }
        for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
            if matches!(
                c.args.first(),
                Some(Arg::Bool(..) | Arg::Dot(_) | Arg::Nil(_) | Arg::Number(..) | Arg::Str { .. })
            ) {
                return self.err(
                    c.pos,
                    format!("non executable command in pipeline stage {}", i + 1),
                );
            }
        }
        Ok(pipe)
    }

    fn command(&mut self) -> PResult<Command> {
        let pos = self.peek().pos;
        let mut args = Vec::new();
        loop {
            let found = self.operand()?;
            let t = self.peek().clone();
            match t.tok {
                Tok::RightDelim | Tok::RParen => {}
                Tok::Pipe => {
                    self.next();
                    if matches!(self.peek().tok, Tok::RightDelim | Tok::RParen) {
                        let n = self.peek().clone();
                        return self.unexpected(&n, "operand");
                    }
                }
                // Another operand follows only after white space, and only if this was one.
                _ if t.space_before && found.is_some() => {}
                _ => return self.unexpected(&t, "operand"),
            }
            let more =
                found.is_some() && !matches!(t.tok, Tok::RightDelim | Tok::RParen | Tok::Pipe);
            args.extend(found);
            if !more {
                break;
            }
        }
        if args.is_empty() {
            return self.err(pos, "empty command");
        }
        Ok(Command { pos, args })
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        let mut fields = Vec::new();
        let chain_pos = self.peek().pos;
        while let (Tok::Field(f), false) = (&self.peek().tok, self.peek().space_before) {
            fields.push(f.clone());
            self.next();
        }
        if fields.is_empty() {
            return Ok(Some(node));
        }
        Ok(Some(match node {
            // Like Go, a chained field or variable takes the position of the first added field.
            Arg::Field { mut idents, .. } => {
                idents.extend(fields);
                Arg::Field {
                    pos: chain_pos,
                    idents,
                }
            }
            Arg::Variable {
                name, mut idents, ..
            } => {
                idents.extend(fields);
                Arg::Variable {
                    pos: chain_pos,
                    name,
                    idents,
                }
            }
            Arg::Bool(..) | Arg::Str { .. } | Arg::Number(..) | Arg::Nil(_) | Arg::Dot(_) => {
                return self.err(
                    chain_pos,
                    format!("unexpected . after term {:?}", node.to_string()),
                );
            }
            other => Arg::Chain {
                pos: chain_pos,
                node: Box::new(other),
                idents: fields,
            },
        }))
    }

    fn term(&mut self) -> PResult<Option<Arg>> {
        let t = self.peek().clone();
        let pos = t.pos;
        let arg = match t.tok {
            Tok::Ident(name) => {
                if !(self.has_func)(&name) {
                    return self.err(pos, format!("function {name:?} not defined"));
                }
                Arg::Ident { pos, name }
            }
            Tok::Dot => Arg::Dot(pos),
            Tok::Nil => Arg::Nil(pos),
            Tok::Variable(name) => {
                if !self.vars.contains(&name) {
                    return self.err(pos, format!("undefined variable {name:?}"));
                }
                Arg::Variable {
                    pos,
                    name,
                    idents: Vec::new(),
                }
            }
            Tok::Field(f) => Arg::Field {
                pos,
                idents: vec![f],
            },
            Tok::Bool(b) => Arg::Bool(pos, b),
            Tok::Number(text) => Arg::Number(pos, self.number(pos, text)?),
            Tok::Char { value, raw } => Arg::Number(
                pos,
                Number {
                    text: raw,
                    int: Some(value),
                    float: Some(value as f64),
                    is_char: true,
                },
            ),
            Tok::Str { value, raw } => Arg::Str { pos, value, raw },
            Tok::LParen => {
                self.next();
                self.nest(pos)?;
                let pipe = self.pipeline("parenthesized pipeline", true)?;
                self.nesting -= 1;
                return Ok(Some(Arg::Pipe(Box::new(pipe))));
            }
            _ => return Ok(None),
        };
        self.next();
        Ok(Some(arg))
    }

    fn number(&self, pos: usize, text: String) -> PResult<Number> {
        if text.ends_with('i') {
            return self.err(pos, format!("complex numbers are not supported: {text:?}"));
        }
        let int = parse_go_int(&text);
        let is_hex = text
            .trim_start_matches(['+', '-'])
            .to_ascii_lowercase()
            .starts_with("0x");
        let float = if is_hex {
            int.map(|i| i as f64)
        } else {
            text.replace('_', "").parse::<f64>().ok()
        };
        let mut n = Number {
            text,
            int,
            float,
            is_char: false,
        };
        if let Some(f) = n.float.filter(|_| n.int.is_none()) {
            if !n.text.contains(['.', 'e', 'E']) {
                return self.err(pos, format!("integer overflow: {:?}", n.text));
            }
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                n.int = Some(f as i64);
            }
        }
        if n.int.is_none() && n.float.is_none() {
            return self.err(pos, format!("illegal number syntax: {:?}", n.text));
        }
        Ok(n)
    }
}

/// Go's `strconv.ParseInt(text, 0, 64)`: sign, 0x/0o/0b/leading-0 octal prefixes, underscores.
fn parse_go_int(text: &str) -> Option<i64> {
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    let digits = digits.replace('_', "");
    if digits.is_empty() || digits.contains(['.', 'e', '+', '-']) && radix == 10 {
        return None;
    }
    let v = u64::from_str_radix(&digits, radix).ok()?;
    if neg {
        if v <= i64::MAX as u64 + 1 {
            Some((v as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(v).ok()
    }
}
