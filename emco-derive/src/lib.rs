//! `#[derive(Object)]`: one declaration of an EMCO object type.
//!
//! The derive writes what every body type of the REST API needs (`Named`, `Validate`) and, for
//! an intent type of a controller, its place in the API (`IntentType`: parent, URL segment,
//! path parameter, EMCO's wording). Use it through `emco_core::Object` or the facade's
//! `emco::Object`; the documentation and examples are there.
//!
//! Options of `#[object(...)]`, all optional:
//!
//! | option | effect |
//! |---|---|
//! | `metadata` | `validate` checks `metadata` first (EMCO's name and length rules) |
//! | `check = EXPR` | then calls `EXPR(&self)`, a function or closure answering `Result<()>` |
//! | `schema = EXPR` | the JSON schema EMCO's handler checks (`&EXPR` is a `&'static Schema`) |
//! | `schema_on_put = false` | the PUT handler checks no schema |
//! | `checks_before_schema` | `validate` runs before the schema |
//! | `empty_body = "text"` | the answer to an empty body |
//! | `undecodable = EXPR` | `EXPR(error: &str) -> String`: the answer to a body that does not decode |
//! | `schema_message = EXPR` | `EXPR(text: String) -> String`: the answer to a body the schema refuses |
//! | `name = field` | the name is `self.field` (default `self.metadata.name`); its JSON path is the field's camelCase name unless `name_field = "path"` says otherwise |
//! | `crate = path` | where the facade is (default `::emco`) |
//!
//! `#[intent(parent = TYPE, segment = "url-segment", param = "pathParam")]` makes the type an
//! intent type, with `wording = EXPR` (the answers' wording), `hook = EXPR` (a `Hook` run
//! around the collection's writes) and `files = EXPR` (`EXPR(&self) -> Vec<String>`, the blobs
//! a multipart GET answers) optional.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::quote;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Expr, Fields, Ident, LitBool, LitStr, Path, Type};

/// Declares an EMCO object type; see the crate documentation for the options.
#[proc_macro_derive(Object, attributes(object, intent))]
pub fn derive_object(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    let package = std::env::var("CARGO_PKG_NAME").ok();
    expand(&input, package.as_deref())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The workspace's own crates below the facade: they name emco-core and the SDK directly.
const WORKSPACE: &[&str] = &[
    "emco-store",
    "emco-appcontext",
    "emco-rest",
    "emco-rsync",
    "emco-controller-sdk",
    "emco-orchestrator",
    "emco-controllers",
    "emco-workflows",
    "emco-server",
    "emcoctl",
    "emco-py",
    "emco-e2e",
    "emco-testkit",
];

/// Where the traits the derive implements are: emco-core's and the SDK's hidden `__derive`
/// modules, reached through the facade or directly.
struct Roots {
    core: Tokens,
    sdk: Option<Tokens>,
}

impl Roots {
    fn new(package: Option<&str>, facade: Option<&Path>) -> Self {
        if let Some(path) = facade {
            return Self {
                core: quote!(#path),
                sdk: Some(quote!(#path::controller)),
            };
        }
        match package {
            Some("emco-core") => Self {
                core: quote!(::emco_core),
                sdk: None,
            },
            Some(p) if WORKSPACE.contains(&p) => Self {
                core: quote!(::emco_core),
                sdk: Some(quote!(::emco_controller_sdk)),
            },
            _ => Self {
                core: quote!(::emco),
                sdk: Some(quote!(::emco::controller)),
            },
        }
    }
}

#[derive(Default)]
struct ObjectOptions {
    facade: Option<Path>,
    name: Option<Ident>,
    name_field: Option<LitStr>,
    metadata: bool,
    check: Option<Expr>,
    schema: Option<Expr>,
    schema_on_put: Option<LitBool>,
    checks_before_schema: bool,
    empty_body: Option<LitStr>,
    undecodable: Option<Expr>,
    schema_message: Option<Expr>,
}

struct IntentOptions {
    parent: Type,
    segment: LitStr,
    param: LitStr,
    wording: Option<Expr>,
    hook: Option<Expr>,
    files: Option<Expr>,
}

/// Sets `slot` once; a second time is an error at `meta`.
fn once<T>(
    slot: &mut Option<T>,
    value: T,
    meta: &syn::meta::ParseNestedMeta<'_>,
) -> syn::Result<()> {
    if slot.is_some() {
        return Err(meta.error("given twice"));
    }
    *slot = Some(value);
    Ok(())
}

/// The option's name (`schema` of `schema = X`); empty for a path of several segments.
fn option(meta: &syn::meta::ParseNestedMeta<'_>) -> String {
    meta.path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_default()
}

fn flag(slot: &mut bool, meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if *slot {
        return Err(meta.error("given twice"));
    }
    *slot = true;
    Ok(())
}

fn object_options(input: &DeriveInput) -> syn::Result<ObjectOptions> {
    let mut o = ObjectOptions::default();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| match option(&meta).as_str() {
            "crate" => once(&mut o.facade, meta.value()?.parse()?, &meta),
            "name" => once(&mut o.name, meta.value()?.parse()?, &meta),
            "name_field" => once(&mut o.name_field, meta.value()?.parse()?, &meta),
            "metadata" => flag(&mut o.metadata, &meta),
            "check" => once(&mut o.check, meta.value()?.parse()?, &meta),
            "schema" => once(&mut o.schema, meta.value()?.parse()?, &meta),
            "schema_on_put" => once(&mut o.schema_on_put, meta.value()?.parse()?, &meta),
            "checks_before_schema" => flag(&mut o.checks_before_schema, &meta),
            "empty_body" => once(&mut o.empty_body, meta.value()?.parse()?, &meta),
            "undecodable" => once(&mut o.undecodable, meta.value()?.parse()?, &meta),
            "schema_message" => once(&mut o.schema_message, meta.value()?.parse()?, &meta),
            _ => Err(meta.error(
                "unknown object option; expected metadata, check, schema, schema_on_put, \
                     checks_before_schema, empty_body, undecodable, schema_message, name, \
                     name_field or crate",
            )),
        })?;
    }
    Ok(o)
}

fn intent_options(input: &DeriveInput) -> syn::Result<Option<IntentOptions>> {
    let Some(attr) = input.attrs.iter().find(|a| a.path().is_ident("intent")) else {
        return Ok(None);
    };
    let (mut parent, mut segment, mut param) = (None, None, None);
    let (mut wording, mut hook, mut files) = (None, None, None);
    attr.parse_nested_meta(|meta| match option(&meta).as_str() {
        "parent" => once(&mut parent, meta.value()?.parse::<Type>()?, &meta),
        "segment" => once(&mut segment, meta.value()?.parse::<LitStr>()?, &meta),
        "param" => once(&mut param, meta.value()?.parse::<LitStr>()?, &meta),
        "wording" => once(&mut wording, meta.value()?.parse::<Expr>()?, &meta),
        "hook" => once(&mut hook, meta.value()?.parse::<Expr>()?, &meta),
        "files" => once(&mut files, meta.value()?.parse::<Expr>()?, &meta),
        _ => Err(meta.error(
            "unknown intent option; expected parent, segment, param, wording, hook or files",
        )),
    })?;
    let missing = |what: &str| {
        syn::Error::new(
            attr.span(),
            format!("an intent names its {what}: #[intent({what} = ...)]"),
        )
    };
    Ok(Some(IntentOptions {
        parent: parent.ok_or_else(|| missing("parent"))?,
        segment: segment.ok_or_else(|| missing("segment"))?,
        param: param.ok_or_else(|| missing("param"))?,
        wording,
        hook,
        files,
    }))
}

/// `cluster_label` -> `clusterLabel`, serde's `rename_all = "camelCase"`.
fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.trim_start_matches("r#").chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn has_field(input: &DeriveInput, name: &str) -> bool {
    match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f
                .named
                .iter()
                .any(|f| f.ident.as_ref().is_some_and(|i| i == name)),
            _ => false,
        },
        _ => false,
    }
}

fn expand(input: &DeriveInput, package: Option<&str>) -> syn::Result<Tokens> {
    if !matches!(&input.data, Data::Struct(s) if matches!(s.fields, Fields::Named(_))) {
        return Err(syn::Error::new(
            input.ident.span(),
            "#[derive(Object)] is for structs with named fields",
        ));
    }
    let o = object_options(input)?;
    let intent = intent_options(input)?;
    let roots = Roots::new(package, o.facade.as_ref());
    let core = &roots.core;
    let ty = &input.ident;
    let (generics, ty_generics, where_clause) = input.generics.split_for_impl();

    let named = match &o.name {
        Some(field) => {
            let path = o
                .name_field
                .as_ref()
                .map_or_else(|| camel_case(&field.to_string()), LitStr::value);
            quote! {
                fn name(&self) -> &str { &self.#field }
                fn name_field(&self) -> &'static str { #path }
            }
        }
        None if has_field(input, "metadata") => {
            let path = o.name_field.as_ref().map(|p| {
                quote! { fn name_field(&self) -> &'static str { #p } }
            });
            quote! {
                fn name(&self) -> &str { &self.metadata.name }
                #path
            }
        }
        None => {
            return Err(syn::Error::new(
                ty.span(),
                "a type without a `metadata` field says which field holds its name: \
                 #[object(name = field)]",
            ));
        }
    };

    let metadata = o.metadata.then(|| {
        quote! {
            #core::__derive::Validate::validate(&self.metadata)
                .map_err(|e| e.within("metadata"))?;
        }
    });
    let check = o.check.as_ref().map(|c| quote! { (#c)(self)?; });
    let schema = o.schema.as_ref().map(|s| {
        quote! {
            fn schema() -> ::core::option::Option<&'static #core::__derive::Schema> {
                ::core::option::Option::Some(&#s)
            }
        }
    });
    let schema_on_put = o
        .schema_on_put
        .as_ref()
        .map(|b| quote! { fn schema_on_put() -> bool { #b } });
    let before = o
        .checks_before_schema
        .then(|| quote! { fn checks_before_schema() -> bool { true } });
    let empty = o
        .empty_body
        .as_ref()
        .map(|t| quote! { fn empty_body_message() -> &'static str { #t } });
    let undecodable = o.undecodable.as_ref().map(|f| {
        quote! {
            fn undecodable_message(error: &str) -> ::std::string::String { (#f)(error) }
        }
    });
    let schema_message = o.schema_message.as_ref().map(|f| {
        quote! {
            fn schema_message(text: ::std::string::String) -> ::std::string::String { (#f)(text) }
        }
    });

    let intent = match intent {
        None => None,
        Some(i) => {
            let Some(sdk) = &roots.sdk else {
                return Err(syn::Error::new(
                    ty.span(),
                    "intent types are declared above emco-core, where the controller SDK is",
                ));
            };
            let IntentOptions {
                parent,
                segment,
                param,
                wording,
                hook,
                files,
            } = i;
            let wording = wording.map(|w| {
                quote! { fn wording() -> #sdk::__derive::Wording { #w } }
            });
            let hook = hook.map(|h| {
                quote! {
                    fn collection(
                        store: ::std::sync::Arc<dyn #sdk::__derive::ResourceStore>,
                    ) -> #sdk::__derive::Collection<Self> {
                        #sdk::__derive::Collection::new(store, Self::PARAM)
                            .with_wording(<Self as #sdk::__derive::IntentType>::wording())
                            .with_hook(#h)
                    }
                }
            });
            let files = files.map(|f| {
                quote! {
                    fn file_names(&self) -> ::std::vec::Vec<::std::string::String> { (#f)(self) }
                }
            });
            Some(quote! {
                impl #generics #sdk::__derive::IntentType for #ty #ty_generics #where_clause {
                    type Parent = #parent;
                    const SEGMENT: &'static str = #segment;
                    const PARAM: &'static str = #param;
                    #wording
                    #hook
                    #files
                }
            })
        }
    };

    Ok(quote! {
        impl #generics #core::__derive::Named for #ty #ty_generics #where_clause {
            #named
        }

        impl #generics #core::__derive::Validate for #ty #ty_generics #where_clause {
            fn validate(&self) -> #core::__derive::Result<()> {
                #metadata
                #check
                ::core::result::Result::Ok(())
            }
            #schema
            #schema_on_put
            #before
            #empty
            #undecodable
            #schema_message
        }

        #intent
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(item: Tokens, package: &str) -> syn::Result<String> {
        let input: DeriveInput = syn::parse2(item)?;
        expand(&input, Some(package)).map(|t| t.to_string())
    }

    fn error(item: Tokens) -> String {
        match expanded(item, "user") {
            Ok(t) => panic!("expanded to {t}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn paths_follow_the_package() {
        let item = quote! {
            #[intent(parent = Dig, segment = "s", param = "p")]
            struct I { metadata: Metadata }
        };
        let user = expanded(item.clone(), "my-controller").unwrap();
        assert!(user.contains(":: emco :: __derive :: Named"), "{user}");
        assert!(user.contains(":: emco :: controller :: __derive :: IntentType"));
        let inside = expanded(item.clone(), "emco-controllers").unwrap();
        assert!(
            inside.contains(":: emco_core :: __derive :: Named"),
            "{inside}"
        );
        assert!(inside.contains(":: emco_controller_sdk :: __derive :: IntentType"));
        let renamed = quote! {
            #[object(crate = my_emco)]
            struct O { metadata: Metadata }
        };
        let out = expanded(renamed, "emco-controllers").unwrap();
        assert!(out.contains("my_emco :: __derive :: Named"), "{out}");
        let err = expanded(item, "emco-core").unwrap_err().to_string();
        assert!(err.contains("above emco-core"), "{err}");
    }

    #[test]
    fn the_name_field_defaults_to_camel_case() {
        let out = expanded(
            quote! {
                #[object(name = cluster_label)]
                struct L { cluster_label: String }
            },
            "user",
        )
        .unwrap();
        assert!(out.contains("& self . cluster_label"), "{out}");
        assert!(out.contains("\"clusterLabel\""), "{out}");
        assert_eq!(camel_case("r#type_name"), "typeName");
    }

    #[test]
    fn bad_declarations_say_what_is_wrong() {
        assert!(error(quote! { struct N { name: String } }).contains("#[object(name = field)]"));
        assert!(error(quote! { enum E { A } }).contains("structs with named fields"));
        assert!(error(quote! { struct T(String); }).contains("structs with named fields"));
        let unknown = error(quote! {
            #[object(metadata, schemas = X)]
            struct U { metadata: Metadata }
        });
        assert!(unknown.contains("unknown object option"), "{unknown}");
        let twice = error(quote! {
            #[object(metadata, metadata)]
            struct U { metadata: Metadata }
        });
        assert!(twice.contains("given twice"), "{twice}");
        let missing = error(quote! {
            #[intent(parent = Dig, param = "p")]
            struct U { metadata: Metadata }
        });
        assert!(missing.contains("#[intent(segment = ...)]"), "{missing}");
        let bad = error(quote! {
            #[intent(parent = Dig, segment = "s", param = "p", route = "x")]
            struct U { metadata: Metadata }
        });
        assert!(bad.contains("unknown intent option"), "{bad}");
    }
}
