//! A Go `text/template` engine: parse files into a set of named templates and execute them.
//!
//! The semantics follow Go 1.22+ as Helm v3 runs it with `missingkey=zero`: a missing map key
//! yields nil, printed as `<no value>` (Helm removes that text from its output, see
//! [`Templates::execute`]).

mod ast;
mod exec;
mod funcmap;
mod lex;
mod parse;

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::TemplateError;
use crate::value::Value;
pub(crate) use exec::Exec;
pub(crate) use funcmap::{CERT_TYPE, FResult, Func, FuncMap, Param, func};

/// One parsed template: a file's body or a `define`d template.
#[derive(Debug)]
pub(crate) struct Tree {
    /// The name templates call it by.
    pub name: String,
    /// The file it was parsed from (error messages name it).
    pub parse_name: String,
    /// The source of that file, to turn positions into lines.
    pub src: Arc<str>,
    pub root: Vec<ast::Node>,
}

/// Limits that keep a hostile template from hanging or exhausting memory.
#[derive(Debug, Clone)]
pub struct TemplateLimits {
    /// Deepest nesting of `template`, `include` and `tpl` calls.
    pub max_depth: usize,
    /// Most bytes one execution may produce.
    pub max_output: usize,
    /// Most nodes and loop iterations one execution may run.
    pub max_steps: u64,
}

impl Default for TemplateLimits {
    fn default() -> Self {
        Self {
            max_depth: 200,
            max_output: 64 << 20,
            max_steps: 50_000_000,
        }
    }
}

/// A set of named templates, like a Go `*template.Template` and its associated templates.
#[derive(Clone)]
pub struct Templates {
    trees: HashMap<String, Arc<Tree>>,
    /// What its templates can call.
    funcs: &'static FuncMap,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("trees", &self.trees.keys().collect::<Vec<_>>())
            .field("funcs", &self.funcs.len())
            .finish()
    }
}

impl Templates {
    /// An empty set whose templates can call `funcs` (`Templates::new` gives Helm's).
    pub(crate) fn with_funcs(funcs: &'static FuncMap) -> Self {
        Self {
            trees: HashMap::new(),
            funcs,
        }
    }

    /// Parses `src` as template `name` and adds it and every template it defines.
    ///
    /// As in Go, a definition replaces an earlier one of the same name unless its body is empty.
    ///
    /// # Errors
    /// A parse error naming `name` and the line.
    pub fn add(&mut self, name: &str, src: &str) -> Result<(), TemplateError> {
        let trees = parse_trees(name, src, self.funcs)?;
        for tree in trees {
            self.insert(tree);
        }
        Ok(())
    }

    fn insert(&mut self, tree: Tree) {
        if is_empty_tree(&tree.root) && self.trees.contains_key(&tree.name) {
            return;
        }
        self.trees.insert(tree.name.clone(), Arc::new(tree));
    }

    /// Whether template `name` exists.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    /// The names of all templates, sorted.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.trees.keys().cloned().collect();
        names.sort();
        names
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<Tree>> {
        self.trees.get(name).cloned()
    }

    /// Executes template `name` with `data` as dot and `$`. The output is Go's: missing values
    /// print as `<no value>`.
    ///
    /// # Errors
    /// The first execution error, worded like Go's (`template: FILE:LINE:COL: executing ...`).
    ///
    /// The executor recurses once per nested `template`/`include`/`tpl` call, so it runs on a
    /// thread whose stack fits [`TemplateLimits::max_depth`] whatever the caller's stack is.
    pub fn execute(
        &self,
        name: &str,
        data: &Value,
        limits: &TemplateLimits,
    ) -> Result<String, TemplateError> {
        with_exec_stack(limits, || self.execute_here(name, data, limits))?
    }

    /// [`Templates::execute`] on the current thread: callers run it inside [`with_exec_stack`].
    pub(crate) fn execute_here(
        &self,
        name: &str,
        data: &Value,
        limits: &TemplateLimits,
    ) -> Result<String, TemplateError> {
        let mut exec = Exec::new(self, limits);
        exec.execute_named(name, data.clone())
    }
}

/// Stack for one level of template nesting; unoptimised builds use about 10 KiB.
const STACK_PER_LEVEL: usize = 64 << 10;
/// Stack for everything below the first template.
const STACK_BASE: usize = 2 << 20;

/// Runs `f` on a scoped thread with a stack sized for `limits.max_depth` nested templates
/// (only the pages actually touched are committed).
///
/// # Errors
/// When the thread cannot be started, or `f` panicked.
pub(crate) fn with_exec_stack<T: Send>(
    limits: &TemplateLimits,
    f: impl FnOnce() -> T + Send,
) -> Result<T, TemplateError> {
    let size = STACK_BASE.saturating_add(limits.max_depth.saturating_mul(STACK_PER_LEVEL));
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("emco-helm-exec".to_owned())
            .stack_size(size)
            .spawn_scoped(s, f)
            .map_err(|e| TemplateError::invalid(format!("cannot start template executor: {e}")))?
            .join()
            .map_err(|_| TemplateError::invalid("template execution panicked"))
    })
}

/// Parses `src` into its main tree (named `name`) and the trees it defines.
pub(crate) fn parse_trees(
    name: &str,
    src: &str,
    funcs: &FuncMap,
) -> Result<Vec<Tree>, TemplateError> {
    let parsed = parse::parse(name, src, &|f| funcs.contains_key(f))?;
    let src: Arc<str> = Arc::from(src);
    let mut trees = Vec::with_capacity(parsed.defines.len() + 1);
    trees.push(Tree {
        name: name.to_owned(),
        parse_name: name.to_owned(),
        src: src.clone(),
        root: parsed.root,
    });
    for (def_name, root) in parsed.defines {
        trees.push(Tree {
            name: def_name,
            parse_name: name.to_owned(),
            src: src.clone(),
            root,
        });
    }
    Ok(trees)
}

/// Go's `parse.IsEmptyTree`: only white space text (and nothing executable).
fn is_empty_tree(nodes: &[ast::Node]) -> bool {
    nodes
        .iter()
        .all(|n| matches!(n, ast::Node::Text(t) if t.trim().is_empty()))
}

#[cfg(test)]
mod tests;
