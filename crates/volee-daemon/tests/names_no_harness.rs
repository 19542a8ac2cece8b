//! The daemon is generic: per-harness facts live in the profile files (`volee-harness/profiles/`),
//! never in code — neither the daemon's nor `volee-harness`'s own, which reads them and carries
//! out what they name by kind. This reads every source file of both (outside `#[cfg(test)]`
//! items) and fails on a string literal — in code, a match arm, a constant or a macro's
//! arguments — that is the name of a built-in profile other than `volee` and `generic`.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Names a daemon may spell: volee's own agent and the generic profile.
const ALLOWED: &[&str] = &["volee", "generic"];

struct Finder<'a> {
    names: &'a [String],
    file: &'a Path,
    found: Vec<String>,
}

impl Finder<'_> {
    fn check(&mut self, lit: &syn::LitStr) {
        let value = lit.value();
        if self.names.contains(&value) {
            self.found.push(format!(
                "{}: string literal {value:?} names a harness",
                self.file.display()
            ));
        }
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => &[],
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_lit_str(&mut self, lit: &'ast syn::LitStr) {
        self.check(lit);
    }

    // Macro arguments are tokens, not expressions: look at their string literals too.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
    }
}

impl Finder<'_> {
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut tts = tokens.into_iter().peekable();
        while let Some(tt) = tts.next() {
            match tt {
                proc_macro2::TokenTree::Literal(l) => {
                    // An object key in `json!({ "cursor": … })` names a field, not a harness.
                    let is_key = matches!(tts.peek(),
                        Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == ':');
                    if let Ok(lit) = syn::parse_str::<syn::LitStr>(&l.to_string()) {
                        if !is_key {
                            self.check(&lit);
                        }
                    }
                }
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                _ => {}
            }
        }
    }
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_daemon_names_no_harness() {
    let names: Vec<String> = volee_harness::profiles()
        .iter()
        .map(|p| p.name.to_string())
        .filter(|n| !ALLOWED.contains(&n.as_str()))
        .collect();
    assert!(names.len() >= 10, "the built-in profiles: {names:?}");
    let mut files = Vec::new();
    for dir in ["src", "../volee-harness/src"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let before = files.len();
        sources(&src, &mut files);
        assert!(
            files.len() > before + 5,
            "no sources under {}",
            src.display()
        );
    }
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let mut finder = Finder {
            names: &names,
            file,
            found: Vec::new(),
        };
        finder.visit_file(&ast);
        found.extend(finder.found);
    }
    assert!(
        found.is_empty(),
        "per-harness facts belong in the profile files, not in code:\n{}",
        found.join("\n")
    );
}

/// The check itself finds a name where one hides: a match arm, a constant, a macro argument —
/// and not in test code.
#[test]
fn the_check_finds_names_and_skips_tests() {
    let names = vec!["codex".to_string(), "opencode".to_string()];
    let text = r#"
        const H: &str = "codex";
        fn f(h: &str) -> bool { match h { "opencode" => true, _ => false } }
        fn g(h: &str) { tracing::info!("{}", matches!(h, "codex")); }
        fn ok() { let _ = "codex app-server"; let _ = json!({ "cursor": 1 }); }
        #[cfg(test)]
        mod tests { fn t() { let _ = "codex"; } }
    "#;
    let ast = syn::parse_file(text).unwrap_or_else(|e| panic!("{e}"));
    let mut finder = Finder {
        names: &names,
        file: Path::new("x.rs"),
        found: Vec::new(),
    };
    finder.visit_file(&ast);
    assert_eq!(finder.found.len(), 3, "{:?}", finder.found);
}
