//! Reading `#[resource(...)]`: the attributes become one [`Options`], or a compile error that
//! points at the attribute at fault.
//!
//! Every key is checked here, at compile time, against what kube-apiserver would refuse later
//! (a kind that is not an identifier, an upper-case plural, a printer column of an unknown type),
//! so a mistake shows up under the attribute in the editor, not as a 422 when the CRD is applied.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::{Attribute, Ident, LitInt, LitStr, Path, Type};

/// Everything `#[resource(...)]` said, with defaults filled in.
pub struct Options {
    pub group: String,
    pub version: String,
    pub kind: Ident,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub status: Option<Type>,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub printer_columns: Vec<PrinterColumn>,
    pub scale: Option<Scale>,
    pub derives: Vec<Path>,
    /// The path the generated code reaches ferrokube through (`::ferrokube` unless `crate = ...`).
    pub krate: Path,
}

pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub json_path: String,
    pub description: Option<String>,
    pub priority: Option<i32>,
    pub format: Option<String>,
}

pub struct Scale {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// The keys as they were written, before defaults and checks.
#[derive(Default)]
struct Raw {
    group: Option<LitStr>,
    version: Option<LitStr>,
    kind: Option<LitStr>,
    plural: Option<LitStr>,
    singular: Option<LitStr>,
    namespaced: bool,
    status: Option<LitStr>,
    short_names: Vec<LitStr>,
    categories: Vec<LitStr>,
    printer_columns: Vec<PrinterColumn>,
    /// `no_age_column`: the printer columns given stay exactly as given (no AGE added).
    no_age_column: bool,
    scale: Option<Scale>,
    derives: Vec<LitStr>,
    krate: Option<LitStr>,
}

/// The column types kube-apiserver accepts in `additionalPrinterColumns`.
const COLUMN_TYPES: &[&str] = &["string", "integer", "number", "boolean", "date"];

/// Reads every `#[resource(...)]` of the item (there may be several; their keys add up).
pub fn parse(attributes: &[Attribute], span: Span) -> syn::Result<Options> {
    let mut raw = Raw::default();
    let mut seen = false;
    for attribute in attributes.iter().filter(|a| a.path().is_ident("resource")) {
        seen = true;
        attribute.parse_nested_meta(|meta| raw.key(&meta))?;
    }
    if !seen {
        return Err(syn::Error::new(
            span,
            "#[derive(CustomResource)] needs #[resource(group = \"...\", version = \"...\", kind = \"...\")]",
        ));
    }
    raw.finish(span)
}

impl Raw {
    fn key(&mut self, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
        let path = &meta.path;
        let once = |slot: &mut Option<LitStr>, meta: &ParseNestedMeta<'_>| -> syn::Result<()> {
            if slot.is_some() {
                return Err(meta.error("given twice"));
            }
            *slot = Some(meta.value()?.parse()?);
            Ok(())
        };
        if path.is_ident("group") {
            once(&mut self.group, meta)
        } else if path.is_ident("version") {
            once(&mut self.version, meta)
        } else if path.is_ident("kind") {
            once(&mut self.kind, meta)
        } else if path.is_ident("plural") {
            once(&mut self.plural, meta)
        } else if path.is_ident("singular") {
            once(&mut self.singular, meta)
        } else if path.is_ident("status") {
            once(&mut self.status, meta)
        } else if path.is_ident("crate") {
            once(&mut self.krate, meta)
        } else if path.is_ident("namespaced") {
            self.namespaced = true;
            Ok(())
        } else if path.is_ident("no_age_column") {
            self.no_age_column = true;
            Ok(())
        } else if path.is_ident("shortname") {
            self.short_names.push(meta.value()?.parse()?);
            Ok(())
        } else if path.is_ident("category") {
            self.categories.push(meta.value()?.parse()?);
            Ok(())
        } else if path.is_ident("derive") {
            self.derives.push(meta.value()?.parse()?);
            Ok(())
        } else if path.is_ident("printcolumn") {
            self.printer_columns.push(printer_column(meta)?);
            Ok(())
        } else if path.is_ident("scale") {
            if self.scale.is_some() {
                return Err(meta.error("given twice"));
            }
            self.scale = Some(scale(meta)?);
            Ok(())
        } else {
            Err(meta.error(
                "unknown key; expected one of group, version, kind, plural, singular, namespaced, \
                 status, shortname, category, printcolumn(...), no_age_column, scale(...), derive, \
                 crate",
            ))
        }
    }

    fn finish(self, span: Span) -> syn::Result<Options> {
        let required = |slot: Option<LitStr>, key: &str| {
            slot.ok_or_else(|| {
                syn::Error::new(span, format!("#[resource(...)] needs `{key} = \"...\"`"))
            })
        };
        let group = required(self.group, "group")?;
        let version = required(self.version, "version")?;
        let kind_lit = required(self.kind, "kind")?;
        let kind: Ident = kind_lit.parse().map_err(|_| {
            syn::Error::new(
                kind_lit.span(),
                "the kind names the generated struct: it must be an identifier, e.g. \"Widget\"",
            )
        })?;
        for (lit, what) in [(&group, "group"), (&version, "version")] {
            if lit.value().is_empty() || lit.value().contains(char::is_whitespace) {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("the {what} must be a non-empty word"),
                ));
            }
        }
        let lower = kind.to_string().to_lowercase();
        let name = |slot: Option<LitStr>, default: String| -> syn::Result<String> {
            let Some(lit) = slot else { return Ok(default) };
            let value = lit.value();
            let valid = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if valid {
                Ok(value)
            } else {
                Err(syn::Error::new(
                    lit.span(),
                    "must be lower case letters, digits and '-' (a DNS label)",
                ))
            }
        };
        let plural = name(self.plural, format!("{lower}s"))?;
        let singular = name(self.singular, lower)?;
        let status = self.status.map(|lit| lit.parse::<Type>()).transpose()?;
        let derives = self
            .derives
            .iter()
            .map(LitStr::parse::<Path>)
            .collect::<syn::Result<Vec<_>>>()?;
        let krate = match self.krate {
            Some(lit) => lit.parse::<Path>()?,
            None => syn::parse_quote!(::ferrokube),
        };
        Ok(Options {
            group: group.value(),
            version: version.value(),
            kind,
            plural,
            singular,
            namespaced: self.namespaced,
            status,
            short_names: self.short_names.iter().map(LitStr::value).collect(),
            categories: self.categories.iter().map(LitStr::value).collect(),
            printer_columns: with_age(self.printer_columns, self.no_age_column),
            scale: self.scale,
            derives,
            krate,
        })
    }
}

/// Where a column shows an object's age.
const CREATION_TIMESTAMP: &str = ".metadata.creationTimestamp";

/// The printer columns as the CRD lists them. Columns given replace kubectl's defaults (NAME and
/// AGE) but for NAME, which kubectl always shows; so that AGE is not lost by giving columns, an AGE
/// column (`type = "date"` over `.metadata.creationTimestamp`) goes last, unless `no_age_column` says not
/// to or a column given shows the creation time already.
fn with_age(mut columns: Vec<PrinterColumn>, no_age_column: bool) -> Vec<PrinterColumn> {
    let shows_age = columns.iter().any(|c| c.json_path == CREATION_TIMESTAMP);
    if !columns.is_empty() && !no_age_column && !shows_age {
        columns.push(PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            json_path: CREATION_TIMESTAMP.into(),
            description: None,
            priority: None,
            format: None,
        });
    }
    columns
}

/// `printcolumn(name = "...", type = "...", json_path = "...", description = "...", priority = N,
/// format = "...")`; `jsonPath` is accepted for `json_path`, as the CRD spells it.
fn printer_column(meta: &ParseNestedMeta<'_>) -> syn::Result<PrinterColumn> {
    let (mut name, mut type_, mut json_path) = (None, None, None);
    let (mut description, mut priority, mut format) = (None, None, None);
    meta.parse_nested_meta(|inner| {
        let p = &inner.path;
        if p.is_ident("name") {
            name = Some(inner.value()?.parse::<LitStr>()?);
        } else if p.is_ident("type") {
            let lit: LitStr = inner.value()?.parse()?;
            if !COLUMN_TYPES.contains(&lit.value().as_str()) {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("a column's type is one of {}", COLUMN_TYPES.join(", ")),
                ));
            }
            type_ = Some(lit.value());
        } else if p.is_ident("json_path") || p.is_ident("jsonPath") {
            let lit: LitStr = inner.value()?.parse()?;
            if !lit.value().starts_with('.') {
                return Err(syn::Error::new(
                    lit.span(),
                    "a JSON path starts with '.', e.g. \".spec.replicas\"",
                ));
            }
            json_path = Some(lit.value());
        } else if p.is_ident("description") {
            description = Some(inner.value()?.parse::<LitStr>()?.value());
        } else if p.is_ident("priority") {
            priority = Some(inner.value()?.parse::<LitInt>()?.base10_parse::<i32>()?);
        } else if p.is_ident("format") {
            format = Some(inner.value()?.parse::<LitStr>()?.value());
        } else {
            return Err(inner.error(
                "unknown key; expected name, type, json_path, description, priority, format",
            ));
        }
        Ok(())
    })?;
    let missing = |key: &str| meta.error(format!("printcolumn(...) needs `{key} = \"...\"`"));
    Ok(PrinterColumn {
        name: name.ok_or_else(|| missing("name"))?.value(),
        type_: type_.ok_or_else(|| missing("type"))?,
        json_path: json_path.ok_or_else(|| missing("json_path"))?,
        description,
        priority,
        format,
    })
}

/// `scale(spec_replicas_path = "...", status_replicas_path = "...", label_selector_path = "...")`;
/// the CRD's camelCase spellings are accepted too.
fn scale(meta: &ParseNestedMeta<'_>) -> syn::Result<Scale> {
    let (mut spec, mut status, mut selector) = (None, None, None);
    meta.parse_nested_meta(|inner| {
        let p = &inner.path;
        let slot = if p.is_ident("spec_replicas_path") || p.is_ident("specReplicasPath") {
            &mut spec
        } else if p.is_ident("status_replicas_path") || p.is_ident("statusReplicasPath") {
            &mut status
        } else if p.is_ident("label_selector_path") || p.is_ident("labelSelectorPath") {
            &mut selector
        } else {
            return Err(inner.error(
                "unknown key; expected spec_replicas_path, status_replicas_path, label_selector_path",
            ));
        };
        *slot = Some(inner.value()?.parse::<LitStr>()?.value());
        Ok(())
    })?;
    let missing = |key: &str| meta.error(format!("scale(...) needs `{key} = \"...\"`"));
    Ok(Scale {
        spec_replicas_path: spec.ok_or_else(|| missing("spec_replicas_path"))?,
        status_replicas_path: status.ok_or_else(|| missing("status_replicas_path"))?,
        label_selector_path: selector,
    })
}
