//! The shape of the source tree, read from `src/` itself: the files import one another without a circle, and the
//! modules in the layers docs/development.md's Architecture section draws.
//!
//! A circle means no file in it can be understood, tested or moved without all the others, and it is how a lower
//! layer (the drill file, the domain) quietly comes to depend on an upper one (the notifier, the report). The graph is
//! the crate's own paths (`use crate::…`, `super::…`, `self::…`, and such paths written inline), with re-exports
//! followed to the file that defines the item, and test code left out (a test may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module's path from the crate root (`["safety", "undo"]`); the root is empty.
type ModPath = Vec<String>;

struct Module {
    file: PathBuf,
    syntax: syn::File,
    /// The names of the items the file defines itself.
    defines: BTreeSet<String>,
    /// `pub use` re-exports: name -> the absolute path it stands for.
    reexports: BTreeMap<String, ModPath>,
    /// `pub use x::*`: the absolute paths of the modules whose items it re-exports.
    globs: Vec<ModPath>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Mod(i) => &i.ident,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Every leaf of a `use` tree as (path, the name it is bound to; `None` for a glob).
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            // `use a::{self}` binds `a` itself.
            if name != "self" {
                path.push(name.clone());
            }
            let bound = if name == "self" { prefix.last().cloned() } else { Some(name) };
            out.push((path, bound));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

struct Tree {
    modules: BTreeMap<ModPath, Module>,
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut modules = BTreeMap::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path == src.join("main.rs") {
                    continue;
                }
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: ModPath = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                    parts.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let file = path.strip_prefix(src.parent().unwrap_or(src)).unwrap_or(&path).to_path_buf();
                modules.insert(
                    parts,
                    Module { file, syntax, defines: BTreeSet::new(), reexports: BTreeMap::new(), globs: vec![] },
                );
            }
        }
        // A file declared `#[cfg(test)] mod x;` is test code as a whole, and so are the files below it.
        let test_only: Vec<ModPath> = modules
            .iter()
            .flat_map(|(at, m)| {
                m.syntax.items.iter().filter_map(move |item| match item {
                    syn::Item::Mod(child) if child.content.is_none() && is_test_only(&child.attrs) => {
                        Some([at.as_slice(), &[child.ident.to_string()]].concat())
                    }
                    _ => None,
                })
            })
            .collect();
        modules.retain(|at, _| !test_only.iter().any(|t| at.starts_with(t)));
        let mut tree = Tree { modules };
        let paths: Vec<ModPath> = tree.modules.keys().cloned().collect();
        for at in &paths {
            let mut defines = BTreeSet::new();
            let mut reexports = BTreeMap::new();
            let mut globs = vec![];
            for item in &tree.modules[at].syntax.items {
                if is_test_only(item_attrs(item)) {
                    continue;
                }
                if let Some(name) = item_name(item) {
                    defines.insert(name);
                }
                if let syn::Item::Use(u) = item
                    && !matches!(u.vis, syn::Visibility::Inherited)
                {
                    let mut leaves = vec![];
                    flatten(&u.tree, &mut vec![], &mut leaves);
                    for (path, bound) in leaves {
                        let Some(absolute) = tree.absolute(at, &path) else { continue };
                        match bound {
                            Some(name) => {
                                reexports.insert(name, absolute);
                            }
                            None => globs.push(absolute),
                        }
                    }
                }
            }
            let module = tree.modules.get_mut(at).unwrap();
            (module.defines, module.reexports, module.globs) = (defines, reexports, globs);
        }
        tree
    }

    /// A path as written in module `at`, made absolute; `None` for another crate's.
    fn absolute(&self, at: &ModPath, path: &[String]) -> Option<ModPath> {
        let (mut base, mut rest): (ModPath, &[String]) = match path.first()?.as_str() {
            "crate" => (vec![], &path[1..]),
            "self" => (at.clone(), &path[1..]),
            "super" => (at[..at.len().saturating_sub(1)].to_vec(), &path[1..]),
            // A child module named without `self::` (2018 paths).
            first if self.modules.contains_key(&[at.as_slice(), &[first.to_string()]].concat()) => (at.clone(), path),
            _ => return None,
        };
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what an absolute path names, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<ModPath> {
        let n = (0..=path.len()).rev().find(|&n| self.modules.contains_key(&path[..n]))?;
        let module_path = path[..n].to_vec();
        let Some(name) = path.get(n) else { return Some(module_path) };
        let module = &self.modules[&module_path];
        if depth > 8 || module.defines.contains(name) {
            return Some(module_path);
        }
        if let Some(target) = module.reexports.get(name) {
            let mut target = target.clone();
            target.extend(path[n + 1..].iter().cloned());
            return self.resolve(&target, depth + 1).or(Some(module_path));
        }
        for glob in &module.globs {
            let mut target = glob.clone();
            target.extend(path[n..].iter().cloned());
            let found = self.resolve(&target, depth + 1);
            // The glob's module has the name when it defines or re-exports it, or it is a module below it.
            let has = |m: &Module| m.defines.contains(name) || m.reexports.contains_key(name);
            if found.as_ref().is_some_and(|f| f != glob) || self.modules.get(glob).is_some_and(has) {
                return found;
            }
        }
        Some(module_path)
    }

    /// Each file's imports of the crate's other files, with the first path that made each one.
    fn edges(&self) -> BTreeMap<ModPath, BTreeMap<ModPath, String>> {
        let mut edges = BTreeMap::new();
        for (at, module) in &self.modules {
            let mut paths = Paths::default();
            for item in &module.syntax.items {
                if !is_test_only(item_attrs(item)) {
                    paths.visit_item(item);
                }
            }
            let mut out: BTreeMap<ModPath, String> = BTreeMap::new();
            for written in paths.0 {
                let Some(absolute) = self.absolute(at, &written) else { continue };
                let Some(file) = self.resolve(&absolute, 0) else { continue };
                if file != *at {
                    out.entry(file).or_insert_with(|| written.join("::"));
                }
            }
            edges.insert(at.clone(), out);
        }
        edges
    }

    fn name(&self, at: &ModPath) -> String {
        self.modules[at].file.display().to_string()
    }
}

/// The crate paths written in a file: in `use` items and inline.
#[derive(Default)]
struct Paths(Vec<Vec<String>>);

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A re-export is a door, not a dependency: paths through it are followed to the file behind it.
        if !matches!(u.vis, syn::Visibility::Inherited) {
            return;
        }
        let mut leaves = vec![];
        flatten(&u.tree, &mut vec![], &mut leaves);
        self.0.extend(leaves.into_iter().map(|(path, _)| path));
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 && matches!(segments[0].as_str(), "crate" | "super" | "self") {
            self.0.push(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside a macro's arguments (`format!("{}", crate::x::y())`) are tokens, not syntax: look for them.
        let tokens = mac.tokens.clone();
        let mut current: Vec<String> = vec![];
        let mut colons = 0;
        for token in tokens {
            match &token {
                proc_macro2::TokenTree::Ident(i) if current.is_empty() || colons == 2 => {
                    let word = i.to_string();
                    if current.is_empty() && !matches!(word.as_str(), "crate" | "super" | "self") {
                        continue;
                    }
                    current.push(word);
                    colons = 0;
                }
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' && !current.is_empty() => colons += 1,
                proc_macro2::TokenTree::Group(g) => {
                    self.visit_macro(&syn::Macro { tokens: g.stream(), ..mac.clone() });
                    self.flush(&mut current);
                    colons = 0;
                }
                _ => {
                    self.flush(&mut current);
                    colons = 0;
                }
            }
        }
        self.flush(&mut current);
    }
}

impl Paths {
    fn flush(&mut self, current: &mut Vec<String>) {
        if current.len() > 1 {
            self.0.push(std::mem::take(current));
        }
        current.clear();
    }
}

/// The import circles: each strongly connected set of two or more files, as one circle through it.
fn circles(edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>) -> Vec<Vec<ModPath>> {
    // Tarjan's algorithm, iterative enough for a few hundred files.
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeMap<ModPath, String>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        sets: Vec<Vec<ModPath>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w) {
                connect(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = vec![];
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.push(w.clone());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                s.sets.push(set);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on_stack: BTreeSet::new(),
        sets: vec![],
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            connect(&mut s, v);
        }
    }
    // One concrete circle per set: the shortest way from its first file back to itself.
    s.sets
        .into_iter()
        .map(|set| {
            let members: BTreeSet<&ModPath> = set.iter().collect();
            let start = set.iter().min().unwrap().clone();
            let mut previous: BTreeMap<ModPath, ModPath> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start.clone()]);
            'search: while let Some(v) = queue.pop_front() {
                for w in edges[&v].keys().filter(|w| members.contains(w)) {
                    if *w == start {
                        previous.insert(start.clone(), v.clone());
                        break 'search;
                    }
                    if !previous.contains_key(w) {
                        previous.insert(w.clone(), v.clone());
                        queue.push_back(w.clone());
                    }
                }
            }
            let mut circle = vec![start.clone()];
            let mut at = previous[&start].clone();
            while at != start {
                circle.push(at.clone());
                at = previous[&at].clone();
            }
            circle.push(start);
            circle.reverse();
            circle
        })
        .collect()
}

fn source_tree() -> Tree {
    Tree::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let tree = source_tree();
    let edges = tree.edges();
    // A reader that found nothing would pass vacuously.
    let count: usize = edges.values().map(BTreeMap::len).sum();
    assert!(count > 100, "only {count} imports found in src/: the reader is broken");
    let circles = circles(&edges);
    let described: Vec<String> = circles
        .iter()
        .map(|circle| {
            let steps: Vec<String> = circle
                .windows(2)
                .map(|w| format!("  {} -> {} (`{}`)", tree.name(&w[0]), tree.name(&w[1]), edges[&w[0]][&w[1]]))
                .collect();
            format!("import circle through {} files:\n{}", circle.len() - 1, steps.join("\n"))
        })
        .collect();
    assert!(described.is_empty(), "{}", described.join("\n\n"));
}

#[test]
fn the_reader_finds_a_circle_and_follows_reexports() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let dir = dir.path().join("src");
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n#[cfg(test)]\nmod t;\n");
    write("t.rs", "use crate::a::f;\n");
    write("a/mod.rs", "mod inner;\npub use inner::Thing;\npub fn f() -> crate::b::B { todo!() }\n");
    write("a/inner.rs", "pub struct Thing;\n#[cfg(test)]\nmod tests { use crate::c::C; }\n");
    write("b.rs", "pub struct B;\nfn g() { let _ = format!(\"{}\", crate::c::name()); }\n");
    write("c.rs", "use crate::a::Thing;\npub struct C(Thing);\npub fn name() -> &'static str { \"c\" }\n");
    let tree = Tree::read(&dir);
    let edges = tree.edges();
    let names = |at: &[&str]| at.iter().map(|s| s.to_string()).collect::<ModPath>();
    // `crate::a::Thing` is defined in a/inner.rs: the edge goes there, not to a/mod.rs, so no circle.
    assert!(edges[&names(&["c"])].contains_key(&names(&["a", "inner"])));
    assert!(edges[&names(&["b"])].contains_key(&names(&["c"])), "a path inside a macro counts");
    assert!(edges[&names(&["a", "inner"])].is_empty(), "test code is left out");
    assert!(!edges.contains_key(&names(&["t"])), "a test-only file is left out");
    assert!(circles(&edges).is_empty());
    write("a/inner.rs", "pub struct Thing(crate::a::f);\n");
    let tree = Tree::read(&dir);
    let found = circles(&tree.edges());
    assert_eq!(found, [vec![names(&["a"]), names(&["b"]), names(&["c"]), names(&["a", "inner"]), names(&["a"])]]);
    assert_eq!(tree.name(&names(&["a", "inner"])), "src/a/inner.rs");
}

/// The layers docs/development.md's Architecture section draws, lowest first: each line's module names.
fn drawn_layers() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/development.md")).unwrap();
    let section = &readme[readme.find("## Architecture").expect("docs/development.md has an Architecture section")..];
    let block = section.split("```text\n").nth(1).expect("the Architecture section draws its layers in a text block");
    let block = &block[..block.find("```").unwrap()];
    let mut layers: Vec<Vec<String>> = block
        .lines()
        .map(|line| line.split("  ").next().unwrap().split(", ").map(|m| m.trim().to_string()).collect())
        .collect();
    layers.reverse();
    layers
}

#[test]
fn the_readme_draws_the_layers_as_they_are() {
    let tree = source_tree();
    let layers = drawn_layers();
    let layer_of: BTreeMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(i, names)| names.iter().map(move |n| (n.as_str(), i))).collect();
    let modules: BTreeSet<&str> = tree.modules.keys().filter_map(|m| m.first()).map(String::as_str).collect();
    let drawn: BTreeSet<&str> = layer_of.keys().copied().collect();
    assert_eq!(drawn, modules, "docs/development.md's layers name each top-level module of src/ once");
    let mut wrong = vec![];
    for (from, imports) in tree.edges() {
        let Some(top) = from.first() else { continue };
        for (to, written) in imports {
            let Some(target) = to.first() else { continue };
            if target != top && layer_of[target.as_str()] >= layer_of[top.as_str()] {
                wrong.push(format!("{} imports `{written}`, drawn on its line or above", tree.name(&from)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/development.md's Architecture section draws the layers otherwise:\n{}",
        wrong.join("\n")
    );
}

/// The longest a function may be without a comment above it saying why (a line starting `// Long:`).
const LONGEST_FUNCTION: usize = 80;

/// Every function with a body in src/ (free, in an impl, in a trait, in test code too), with its file, first line
/// and length in lines.
fn functions(tree: &Tree) -> Vec<(String, String, usize, usize)> {
    struct Lengths<'t> {
        file: String,
        out: &'t mut Vec<(String, String, usize, usize)>,
    }
    impl Lengths<'_> {
        /// From the `fn` line (doc comments and attributes are not the body's length) to the closing brace.
        fn add(&mut self, name: &syn::Ident, from: proc_macro2::Span, to: proc_macro2::Span) {
            let (start, end) = (from.start().line, to.end().line);
            self.out.push((self.file.clone(), name.to_string(), start, end + 1 - start));
        }
    }
    impl<'ast> Visit<'ast> for Lengths<'_> {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            use syn::spanned::Spanned;
            self.add(&f.sig.ident, f.sig.span(), f.block.span());
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            use syn::spanned::Spanned;
            self.add(&f.sig.ident, f.sig.span(), f.block.span());
            syn::visit::visit_impl_item_fn(self, f);
        }
        fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
            use syn::spanned::Spanned;
            if let Some(body) = &f.default {
                self.add(&f.sig.ident, f.sig.span(), body.span());
            }
            syn::visit::visit_trait_item_fn(self, f);
        }
    }
    let mut out = vec![];
    for module in tree.modules.values() {
        Lengths { file: module.file.display().to_string(), out: &mut out }.visit_file(&module.syntax);
    }
    out
}

/// Whether the lines above line `at` (1-based) of `text`, up to the item's doc comment and attributes, hold a
/// `// Long:` comment.
fn says_why_long(text: &str, at: usize) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines[..at.saturating_sub(1)]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.starts_with("// Long:"))
}

#[test]
fn no_function_is_long_without_saying_why() {
    let tree = source_tree();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = vec![];
    for (file, name, line, length) in functions(&tree) {
        if length > LONGEST_FUNCTION {
            let text = std::fs::read_to_string(root.join(&file)).unwrap();
            if !says_why_long(&text, line) {
                long.push(format!("{file}:{line} {name}: {length} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "{} functions over {LONGEST_FUNCTION} lines without a `// Long:` comment above them saying why:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// The longest a source file may be, in lines of code: blank lines, comment lines and test code left out.
const LONGEST_FILE: usize = 700;

/// A file's lines of code: neither blank nor a comment, outside its `#[cfg(test)]` items.
fn code_lines(module: &Module, text: &str) -> usize {
    use syn::spanned::Spanned;
    let tests: Vec<(usize, usize)> = module
        .syntax
        .items
        .iter()
        .filter(|item| is_test_only(item_attrs(item)))
        .map(|item| (item.span().start().line, item.span().end().line))
        .collect();
    text.lines()
        .enumerate()
        .filter(|(i, _)| !tests.iter().any(|(from, to)| (*from..=*to).contains(&(i + 1))))
        .map(|(_, line)| line.trim())
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .count()
}

#[test]
fn no_file_is_over_700_code_lines() {
    let tree = source_tree();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long: Vec<String> = tree
        .modules
        .values()
        .filter_map(|module| {
            let text = std::fs::read_to_string(root.join(&module.file)).unwrap();
            let n = code_lines(module, &text);
            (n > LONGEST_FILE).then(|| format!("{}: {n} lines of code", module.file.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over {LONGEST_FILE} lines of code (split them by what they own):\n{}",
        long.join("\n")
    );
}

/// Whether a type is `Result<_, String>`.
fn is_string_result(ty: &syn::TypePath) -> bool {
    let Some(last) = ty.path.segments.last() else { return false };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else { return false };
    let types: Vec<&syn::Type> = args
        .args
        .iter()
        .filter_map(|a| match a {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    last.ident == "Result" && types.len() == 2 && matches!(types[1], syn::Type::Path(p) if p.path.is_ident("String"))
}

/// Every `Result<_, String>` in a file's code (test code left out), with the function it is in.
#[derive(Default)]
struct StringResults {
    function: Vec<String>,
    /// The trait of the impl the visitor is in.
    trait_of_impl: Option<String>,
    found: Vec<(usize, Option<String>, Option<String>)>,
}

impl<'ast> Visit<'ast> for StringResults {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let previous = self.trait_of_impl.take();
        self.trait_of_impl =
            i.trait_.as_ref().and_then(|(_, path, _)| path.segments.last()).map(|s| s.ident.to_string());
        syn::visit::visit_item_impl(self, i);
        self.trait_of_impl = previous;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.function.push(f.sig.ident.to_string());
        syn::visit::visit_item_fn(self, f);
        self.function.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        self.function.push(f.sig.ident.to_string());
        syn::visit::visit_impl_item_fn(self, f);
        self.function.pop();
    }

    fn visit_type_path(&mut self, ty: &'ast syn::TypePath) {
        use syn::spanned::Spanned;
        if is_string_result(ty) {
            self.found.push((ty.span().start().line, self.function.last().cloned(), self.trait_of_impl.clone()));
        }
        syn::visit::visit_type_path(self, ty);
    }
}

/// The functions src/cli/args.rs names as clap's value parsers (`value_parser = NAME`), by their last segment.
fn value_parsers(args: &str) -> BTreeSet<String> {
    args.split("value_parser = ")
        .skip(1)
        .filter_map(|rest| rest.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).next())
        .filter_map(|path| path.rsplit("::").next())
        .map(str::to_string)
        .collect()
}

#[test]
fn no_result_of_a_string_outside_clap_value_parsers() {
    let tree = source_tree();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let parsers = value_parsers(&std::fs::read_to_string(root.join("src/cli/args.rs")).unwrap());
    assert!(parsers.contains("parse_flag"), "the value parsers of src/cli/args.rs are not found: {parsers:?}");
    let mut found = vec![];
    for module in tree.modules.values() {
        if module.file == Path::new("src/cli/args.rs") {
            continue;
        }
        let mut visitor = StringResults::default();
        visitor.visit_file(&module.syntax);
        for (line, function, trait_of_impl) in visitor.found {
            // clap parses a flag's value with a named function or the type's `FromStr`.
            let parser = function.as_ref().is_some_and(|f| parsers.contains(f))
                || (trait_of_impl.as_deref() == Some("FromStr") && function.as_deref() == Some("from_str"));
            if !parser {
                let within = function.map(|f| format!(" in `{f}`")).unwrap_or_default();
                found.push(format!("{}:{line}{within}", module.file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "`Result<_, String>` outside clap's value parsers (give the error a small thiserror enum):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_incident_room_does_not_import_the_run() {
    let tree = source_tree();
    let wrong: Vec<String> = tree
        .edges()
        .into_iter()
        .filter(|(from, _)| from.first().is_some_and(|m| m == "incident"))
        .flat_map(|(from, imports)| {
            let name = tree.name(&from);
            imports
                .into_iter()
                .filter(|(to, _)| to.first().is_some_and(|m| m == "run"))
                .map(move |(_, written)| format!("{name} imports `{written}`"))
        })
        .collect();
    assert!(wrong.is_empty(), "incident/ shares the run record (record/), never run/:\n{}", wrong.join("\n"));
}

/// The first sentence of a file's `//!` comment.
fn owns(text: &str) -> String {
    let doc: Vec<&str> =
        text.lines().take_while(|l| l.starts_with("//!")).map(|l| l.trim_start_matches("//!").trim()).collect();
    let doc = doc.join(" ");
    let end = doc.find(". ").map_or(doc.len(), |i| i + 1);
    doc[..end].trim_end_matches('.').replace('|', "\\|")
}

/// The file index docs/development.md holds between its markers: every module file of src/ and every module of the
/// end-to-end tests, each with the first sentence of its `//!` comment.
fn file_index(tree: &Tree) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = tree.modules.values().map(|m| m.file.clone()).collect();
    files.extend(
        std::fs::read_dir(root.join("tests/e2e"))
            .unwrap()
            .map(|e| e.unwrap().path().strip_prefix(root).unwrap().to_path_buf())
            .filter(|p| p.extension().is_some_and(|e| e == "rs")),
    );
    files.sort();
    let mut out = String::from("| file | what it owns |\n|---|---|\n");
    for file in files {
        let text = std::fs::read_to_string(root.join(&file)).unwrap();
        out.push_str(&format!("| `{}` | {} |\n", file.display(), owns(&text)));
    }
    out
}

const INDEX_START: &str = "<!-- file index: written by tests/architecture.rs (HYBRID_DRILL_BLESS=1 to rewrite) -->\n";
const INDEX_END: &str = "<!-- end of the file index -->";

#[test]
fn docs_development_names_every_module_file() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/development.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find(INDEX_START).expect("docs/development.md holds the file index's start marker");
    let end = text.find(INDEX_END).expect("docs/development.md holds the file index's end marker");
    let index = file_index(&source_tree());
    if text[start + INDEX_START.len()..end] == index {
        return;
    }
    if std::env::var_os("HYBRID_DRILL_BLESS").is_some() {
        let written = format!("{}{INDEX_START}{index}{}", &text[..start], &text[end..]);
        std::fs::write(&path, written).unwrap();
        return;
    }
    let missing: Vec<&str> = index.lines().skip(2).filter(|line| !text[start..end].contains(*line)).take(20).collect();
    panic!(
        "docs/development.md's file index is not the source tree's (a file added, moved or its `//!` line changed); \
         rewrite it with `HYBRID_DRILL_BLESS=1 cargo test --test architecture`. Not in it as they are:\n{}",
        missing.join("\n")
    );
}
