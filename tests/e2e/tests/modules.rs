//! The module graph of every crate of the workspace, read from the sources: no two files of one
//! crate use each other, directly or around a circle (a module using its own parent or child is
//! how Rust modules share, and does not count). A circle means neither file can be understood,
//! tested or moved without the other; the check keeps new ones from creeping in.
#![allow(clippy::unwrap_used)] // The workspace's own sources: a read that fails is the failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// A module by its path below the crate root (`[]` is the root).
type Module = Vec<String>;

/// The crates of the workspace: the `members` of its manifest.
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("the workspace lists its members");
    list.lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.split_once('"'))
        .map(|(member, _)| member.to_owned())
        .collect()
}

/// Every module file of the library (or, without one, the binary) of the crate at `src`.
fn module_files(src: &Path) -> BTreeMap<Module, PathBuf> {
    let has_lib = src.join("lib.rs").exists();
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // `src/bin` holds other crates.
                if path != src.join("bin") {
                    dirs.push(path);
                }
                continue;
            }
            let Ok(rel) = path.strip_prefix(src) else {
                continue;
            };
            let Some(rel) = rel.to_str().and_then(|r| r.strip_suffix(".rs")) else {
                continue;
            };
            let mut module: Module = rel.split('/').map(str::to_owned).collect();
            match module.as_slice() {
                [only] if only == "lib" || (only == "main" && !has_lib) => module.clear(),
                // A binary beside a library is another crate, using the library by its name.
                [only] if only == "main" => continue,
                [.., last] if last == "mod" => {
                    module.pop();
                }
                _ => {}
            }
            out.insert(module, path);
        }
    }
    out
}

fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!((tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':')
}

fn is_ident(token: Option<&TokenTree>, name: &str) -> bool {
    matches!(token, Some(TokenTree::Ident(i)) if i == name)
}

/// The paths a `use` tree names (`a::{b, c::*}` names `a::b` and `a::c`).
fn use_tree(tokens: &[TokenTree], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Ident(id) if id == "as" => break,
            TokenTree::Ident(id) => path.push(id.to_string()),
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                for part in inner.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                {
                    use_tree(part, &path, out);
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(path);
}

/// The `crate::`, `super::` and `self::` paths `tokens` use, outside `#[cfg(test)]` modules.
fn paths(tokens: &[TokenTree], out: &mut Vec<Vec<String>>) {
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(attr)) = tokens.get(i + 1)
                    && attr.stream().to_string().replace(' ', "") == "cfg(test)"
                    && is_ident(tokens.get(i + 2), "mod")
                {
                    // `#[cfg(test)] mod tests { .. }`: its `super` is this file.
                    i += 5;
                    continue;
                }
            }
            TokenTree::Ident(id) if id == "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'))
                    .map_or(tokens.len(), |n| i + n);
                use_tree(&tokens[i + 1..end], &[], out);
                i = end;
            }
            TokenTree::Ident(id)
                if (id == "crate" || id == "super" || id == "self")
                    && is_path_sep(tokens, i + 1) =>
            {
                let mut path = vec![id.to_string()];
                while is_path_sep(tokens, i + 1) {
                    let Some(TokenTree::Ident(next)) = tokens.get(i + 3) else {
                        break;
                    };
                    path.push(next.to_string());
                    i += 3;
                }
                out.push(path);
            }
            TokenTree::Group(g) => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                paths(&inner, out);
            }
            _ => {}
        }
        i += 1;
    }
}

/// The module of `known` that `path`, used in `from`, names (the longest that matches).
fn resolve(from: &[String], path: &[String], known: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut full: Module = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super" | "self") => from.to_vec(),
        _ => return None,
    };
    let mut rest = path;
    if rest.first().is_some_and(|s| s == "crate") {
        rest = &rest[1..];
    }
    while let Some(step) = rest.first().filter(|s| *s == "super" || *s == "self") {
        if step == "super" {
            full.pop();
        }
        rest = &rest[1..];
    }
    full.extend(rest.iter().cloned());
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|m| known.contains_key(m))
}

/// Per module, the other modules of its crate it uses.
fn arrows(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = module_files(src);
    let mut out = BTreeMap::new();
    for (module, file) in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            !text.contains("#[path"),
            "{}: a module at a path of its own hides where it sits in the tree",
            file.display()
        );
        let stream: TokenStream = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e:?}", file.display()));
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        let mut used = Vec::new();
        paths(&tokens, &mut used);
        let targets: BTreeSet<Module> = used
            .iter()
            .filter_map(|p| resolve(module, p, &files))
            .filter(|t| t != module)
            .collect();
        out.insert(module.clone(), targets);
    }
    out
}

/// Whether one of `a` and `b` holds the other.
fn nested(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The circles (strongly connected sets of more than one module) of `graph`.
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Module) -> usize {
            let n = self.index.len();
            self.index.insert(v, n);
            self.stack.push(v);
            let mut low = n;
            for w in self.graph.get(v).into_iter().flatten() {
                low = low.min(match self.index.get(w) {
                    None => self.visit(w),
                    Some(&i) if self.stack.contains(&w) => i,
                    Some(_) => continue,
                });
            }
            if low == n {
                let at = self.stack.iter().position(|m| *m == v).unwrap_or(0);
                let set: Vec<Module> = self.stack.drain(at..).cloned().collect();
                if set.len() > 1 {
                    self.found.push(set);
                }
            }
            low
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "(root)".to_owned()
    } else {
        m.join("::")
    }
}

#[test]
fn no_two_files_of_a_crate_use_each_other() {
    let root = emco_e2e::workspace();
    let mut found = Vec::new();
    for member in members(&root) {
        let src = root.join(&member).join("src");
        if !src.is_dir() {
            continue;
        }
        let all = arrows(&src);
        let lateral: BTreeMap<Module, BTreeSet<Module>> = all
            .iter()
            .map(|(m, to)| {
                let to = to.iter().filter(|t| !nested(m, t)).cloned().collect();
                (m.clone(), to)
            })
            .collect();
        let count =
            |g: &BTreeMap<Module, BTreeSet<Module>>| g.values().map(BTreeSet::len).sum::<usize>();
        let up = all
            .iter()
            .map(|(m, to)| to.iter().filter(|t| m.starts_with(t)).count())
            .sum::<usize>();
        println!(
            "{member}: {} files, {} arrows ({} from a module to one that holds it), {} circles",
            all.len(),
            count(&all),
            up,
            circles(&lateral).len()
        );
        for circle in circles(&lateral) {
            let names: Vec<String> = circle.iter().map(|m| name(m)).collect();
            found.push(format!("{member}: {}", names.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "files that use each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_sees_use_trees_inline_paths_and_skips_test_modules() {
    let text = "use crate::a::{b, c::{d as e, *}}; use super::f;
        fn g() { crate::h::i(); self::j::k(); }
        #[cfg(test)] mod tests { use crate::z; }";
    let tokens: Vec<TokenTree> = text.parse::<TokenStream>().unwrap().into_iter().collect();
    let mut got = Vec::new();
    paths(&tokens, &mut got);
    let got: Vec<String> = got.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        got,
        [
            "crate::a::b",
            "crate::a::c::d",
            "crate::a::c",
            "super::f",
            "crate::h::i",
            "self::j::k"
        ]
    );
    let known: BTreeMap<Module, PathBuf> = [
        vec![],
        vec!["a".to_owned()],
        vec!["x".to_owned(), "y".to_owned()],
    ]
    .into_iter()
    .map(|m| (m, PathBuf::new()))
    .collect();
    let from = ["x".to_owned(), "y".to_owned()];
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        resolve(&from, &path("crate::a::b"), &known),
        Some(vec!["a".to_owned()])
    );
    assert_eq!(
        resolve(&from, &path("super::super::a"), &known),
        Some(vec!["a".to_owned()])
    );
    assert_eq!(
        resolve(&from, &path("self::q"), &known),
        Some(from.to_vec())
    );
    assert_eq!(resolve(&from, &path("std::io"), &known), None);
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        (path("a"), BTreeSet::from([path("b")])),
        (path("b"), BTreeSet::from([path("a")])),
        (path("c"), BTreeSet::from([path("a")])),
    ]
    .into_iter()
    .collect();
    assert_eq!(circles(&graph), vec![vec![path("a"), path("b")]]);
}
