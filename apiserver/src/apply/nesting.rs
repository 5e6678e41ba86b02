//! A linear pre-scan of server-side apply bodies: nesting deeper than the YAML library reads is
//! refused before the library scans the body.
//!
//! # Why
//!
//! Apply bodies are YAML (JSON is YAML), read by serde_yaml_ng, whose scanner is libyaml's
//! (translated to Rust as unsafe-libyaml). libyaml keeps a stack of possible *simple keys*, one per
//! open flow collection (`[` or `{`), and walks it (from the lowest key still possible) for every
//! token it produces; with a key pending at every level, as in `{"a": {"a": …`, a body costs tokens
//! × open flow collections to scan: quadratic in the nesting. serde_yaml_ng refuses anything nested
//! deeper than 128 levels ([`MAX_NESTING`]), but only as it turns the events into a value, after
//! libyaml has scanned the whole body. 100,000 nested `{"a":` (600 KB, under the 3 MiB body limit)
//! took 196 s of a request thread to scan in a release build before that refusal (10,000: 0.7 s,
//! and 5 s in a debug build).
//!
//! [`check`] runs first: one pass over the body, linear in its length, that counts open flow
//! collections and refuses the body at the first one past [`MAX_NESTING`], with the 400 the library
//! would have answered after its scan. It refuses the body above in microseconds, and reads a valid
//! 3 MB body in about 25 ms (release), a twentieth of the library's parse of it.
//!
//! # Where a token starts
//!
//! Counting every `[` and `{` would refuse valid bodies: in YAML a bracket is also text inside a
//! quoted scalar, a comment, a block scalar (`|`, `>`) or a plain scalar (`a: x[1`, or the
//! continuation line of a multi-line plain scalar). So the scan follows libyaml's own rules for
//! where a token starts and how far each kind of token reaches (the functions of
//! `unsafe-libyaml/src/scanner.rs`, named in the comments below), including the block indentation
//! that decides where a plain scalar's continuation lines and a block scalar's content end. It
//! keeps only what those rules read: the flow level, the stack of block indentations, whether a
//! simple key may start here, and the possible simple key of the block context (whose column
//! becomes a mapping's indentation when a `:` follows it). Where libyaml would stop with a syntax
//! error, the scan goes on as best it can: libyaml reads at most its lookahead for a simple key (the
//! rest of the line, at most 1,024 bytes) past its first error, and the body is refused with a 400
//! either way.
//!
//! So, for every body libyaml reads without an error up to a point, the scan's flow level there is
//! libyaml's: the scan refuses no body the library would accept (the deepest flow level a valid body
//! reaches is at most its nesting, at most 128), and lets through no body the library would scan
//! past 128 open flow collections. The tests compare both on generated documents.
//!
//! # Block nesting
//!
//! Block collections (nesting by indentation, or by `- - -` on one line) need no bound of their
//! own: libyaml keeps one simple key for the whole block context, so its cost per token does not
//! grow with block depth; 100,000 nested `- ` (200 KB) are scanned and refused by serde_yaml_ng in
//! tens of milliseconds, as is a mapping nested by indentation (whose indentation alone makes it quadratic
//! in *bytes*: 3 MiB hold about 2,500 levels of it). The scan still tracks indentation, to know where
//! tokens start.
//!
//! # kube-apiserver
//!
//! kube-apiserver reads apply bodies with sigs.k8s.io/yaml, whose scanner is go-yaml's port of
//! libyaml. Since the fix of CVE-2019-11254 (this very problem, in Kubernetes), that scanner refuses
//! flow nesting past 10,000 levels, and indentation past 10,000 levels, as it scans (`exceeded max
//! depth of 10000`), and the apply handler answers 400 `error decoding YAML: …`. The limit here is
//! lower because the library's is: serde_yaml_ng (like serde_json) reads at most 128 levels.

/// The deepest nesting of an apply body: serde_yaml_ng's recursion limit (each sequence or
/// mapping is a level; 128 levels are read, the 129th is refused as `recursion limit exceeded`).
/// [`check`] refuses the 129th open flow collection (`[` or `{`) before the library sees the body.
pub const MAX_NESTING: usize = 128;

/// How far libyaml looks for the `:` after a possible simple key on its line, in bytes
/// (`yaml_parser_stale_simple_keys`).
const SIMPLE_KEY_REACH: usize = 1024;

/// A body with more open flow collections than [`MAX_NESTING`]: where the first one past the limit
/// opens (1-based, columns in characters, as the library reports positions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "recursion limit exceeded: more than {max} nested flow collections ([ or {{) at line {line} column {column}",
    max = MAX_NESTING
)]
pub struct TooDeep {
    /// The line of the `[` or `{` that went past the limit, from 1.
    pub line: usize,
    /// Its column, in characters, from 1.
    pub column: usize,
}

/// Scans `text` once, in linear time, and refuses it when it opens more than [`MAX_NESTING`] flow
/// collections at once (see the [module docs](self)). A body this lets through may still be
/// invalid YAML, or nested too deeply by indentation: the library says so, in linear time.
pub fn check(text: &str) -> Result<(), TooDeep> {
    Scanner::new(text.as_bytes()).run()
}

/// A possible simple key of the block context: where it starts.
#[derive(Debug, Clone, Copy)]
struct Key {
    pos: usize,
    line: usize,
    column: usize,
}

/// libyaml's scanner, reduced to what decides where tokens start (see the module docs).
struct Scanner<'a> {
    text: &'a [u8],
    /// Byte offset (libyaml's `mark.index`, which counts bytes).
    pos: usize,
    /// From 0.
    line: usize,
    /// Characters since the line's start, from 0 (libyaml's `mark.column`).
    column: usize,
    /// Open flow collections (`flow_level`).
    flow: usize,
    /// The column of the innermost block collection, -1 outside any (`indent`).
    indent: isize,
    /// The enclosing block collections' columns (`indents`).
    indents: Vec<isize>,
    /// Whether a simple key may start here (`simple_key_allowed`).
    key_allowed: bool,
    /// The possible simple key of the block context (flow level 0); those of flow levels do not
    /// change any indentation, so they are not kept.
    key: Option<Key>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a [u8]) -> Scanner<'a> {
        Scanner {
            text,
            pos: 0,
            line: 0,
            column: 0,
            flow: 0,
            indent: -1,
            indents: Vec::new(),
            key_allowed: true,
            key: None,
        }
    }

    /// `yaml_parser_fetch_next_token`, in a loop to the end of the text.
    fn run(mut self) -> Result<(), TooDeep> {
        loop {
            self.skip_to_next_token();
            self.unroll(self.column as isize);
            if self.is_end(0) {
                return Ok(());
            }
            let c = self.at(0);
            if self.column == 0 && c == b'%' {
                self.directive();
                continue;
            }
            if self.column == 0
                && (self.starts_with(b"---") || self.starts_with(b"..."))
                && self.is_blank_or_end(3)
            {
                // A document marker.
                self.unroll(-1);
                self.remove_key();
                self.key_allowed = false;
                for _ in 0..3 {
                    self.skip();
                }
                continue;
            }
            match c {
                b'[' | b'{' => {
                    self.save_key();
                    self.flow += 1;
                    if self.flow > MAX_NESTING {
                        return Err(TooDeep {
                            line: self.line + 1,
                            column: self.column + 1,
                        });
                    }
                    self.key_allowed = true;
                    self.skip();
                }
                b']' | b'}' => {
                    // The key removed is the closing collection's own, kept only at flow level 0.
                    self.remove_key();
                    self.flow = self.flow.saturating_sub(1);
                    self.key_allowed = false;
                    self.skip();
                }
                b',' => {
                    self.remove_key();
                    self.key_allowed = true;
                    self.skip();
                }
                b'-' if self.is_blank_or_end(1) => {
                    // A block sequence entry.
                    self.roll(self.column as isize);
                    self.remove_key();
                    self.key_allowed = true;
                    self.skip();
                }
                b'?' if self.flow > 0 || self.is_blank_or_end(1) => {
                    // A complex key.
                    self.roll(self.column as isize);
                    self.remove_key();
                    self.key_allowed = self.flow == 0;
                    self.skip();
                }
                b':' if self.flow > 0 || self.is_blank_or_end(1) => self.value(),
                b'*' | b'&' => {
                    // An alias or an anchor.
                    self.save_key();
                    self.key_allowed = false;
                    self.skip();
                    while is_alpha(self.at(0)) {
                        self.skip();
                    }
                }
                b'!' => self.tag(),
                b'|' | b'>' if self.flow == 0 => self.block_scalar(),
                b'\'' | b'"' => self.quoted(),
                _ if self.starts_plain() => self.plain(),
                // "found character that cannot start any token": libyaml stops here.
                _ => self.skip(),
            }
        }
    }

    /// `yaml_parser_scan_to_next_token`: spaces, comments and line breaks.
    fn skip_to_next_token(&mut self) {
        loop {
            if self.column == 0 && self.starts_with(b"\xEF\xBB\xBF") {
                self.skip();
            }
            while self.at(0) == b' '
                || ((self.flow > 0 || !self.key_allowed) && self.at(0) == b'\t')
            {
                self.skip();
            }
            if self.at(0) == b'#' {
                while !self.is_break_or_end(0) {
                    self.skip();
                }
            }
            if !self.is_break(0) {
                return;
            }
            self.skip_line();
            if self.flow == 0 {
                self.key_allowed = true;
            }
        }
    }

    /// `yaml_parser_fetch_directive`: `%YAML` or `%TAG`, to the end of its line.
    fn directive(&mut self) {
        self.unroll(-1);
        self.remove_key();
        self.key_allowed = false;
        while !self.is_break_or_end(0) {
            self.skip();
        }
        if self.is_break(0) {
            self.skip_line();
        }
    }

    /// `yaml_parser_fetch_value`: a `:` that ends a key. In the block context, the mapping's
    /// indentation is the key's column when the key is on this line (and not too far back).
    fn value(&mut self) {
        if self.flow == 0 {
            match self.key.take() {
                Some(key) if key.line == self.line && key.pos + SIMPLE_KEY_REACH >= self.pos => {
                    self.roll(key.column as isize);
                    self.key_allowed = false;
                }
                _ => {
                    self.roll(self.column as isize);
                    self.key_allowed = true;
                }
            }
        } else {
            self.key_allowed = false;
        }
        self.skip();
    }

    /// `yaml_parser_fetch_tag`: `!suffix`, `!handle!suffix` or `!<verbatim>`.
    fn tag(&mut self) {
        self.save_key();
        self.key_allowed = false;
        self.skip();
        if self.at(0) == b'<' {
            self.skip();
            while is_uri(self.at(0), true) {
                self.skip();
            }
            if self.at(0) == b'>' {
                self.skip();
            }
        } else {
            // The handle's characters are URI characters too.
            while is_uri(self.at(0), false) {
                self.skip();
            }
        }
    }

    /// `yaml_parser_scan_block_scalar`: `|` or `>`, a header, then every line indented at least as
    /// much as the first non-empty one (or the header's explicit indentation).
    fn block_scalar(&mut self) {
        self.remove_key();
        self.key_allowed = true;
        self.skip();
        let mut increment: isize = 0;
        if matches!(self.at(0), b'+' | b'-') {
            self.skip();
            if self.at(0).is_ascii_digit() {
                increment = isize::from(self.at(0) - b'0');
                self.skip();
            }
        } else if self.at(0).is_ascii_digit() {
            increment = isize::from(self.at(0) - b'0');
            self.skip();
            if matches!(self.at(0), b'+' | b'-') {
                self.skip();
            }
        }
        // Spaces, a comment, the line break. (Anything else there is an error for libyaml.)
        while !self.is_break_or_end(0) {
            self.skip();
        }
        if self.is_break(0) {
            self.skip_line();
        }
        let mut indent = match increment {
            0 => 0,
            _ if self.indent >= 0 => self.indent + increment,
            _ => increment,
        };
        self.block_scalar_breaks(&mut indent);
        while self.column as isize == indent && !self.is_end(0) {
            while !self.is_break_or_end(0) {
                self.skip();
            }
            if self.is_break(0) {
                self.skip_line();
            }
            self.block_scalar_breaks(&mut indent);
        }
    }

    /// `yaml_parser_scan_block_scalar_breaks`: the indentation and empty lines before a block
    /// scalar's next line; the first time (`indent` 0), the indentation of its content.
    fn block_scalar_breaks(&mut self, indent: &mut isize) {
        let mut max_indent: isize = 0;
        loop {
            while (*indent == 0 || (self.column as isize) < *indent) && self.at(0) == b' ' {
                self.skip();
            }
            max_indent = max_indent.max(self.column as isize);
            if !self.is_break(0) {
                break;
            }
            self.skip_line();
        }
        if *indent == 0 {
            *indent = max_indent.max(self.indent + 1).max(1);
        }
    }

    /// `yaml_parser_scan_flow_scalar`: `'…'` (`''` is a quote) or `"…"` (`\` escapes), over lines.
    fn quoted(&mut self) {
        self.save_key();
        self.key_allowed = false;
        let quote = self.at(0);
        self.skip();
        loop {
            match self.at(0) {
                // Unterminated: libyaml's error.
                0 => return,
                b'\'' if quote == b'\'' && self.at(1) == b'\'' => {
                    self.skip();
                    self.skip();
                }
                c if c == quote => {
                    self.skip();
                    return;
                }
                b'\\' if quote == b'"' => {
                    self.skip();
                    if self.is_break(0) {
                        self.skip_line();
                    } else if !self.is_end(0) {
                        self.skip();
                    }
                }
                _ if self.is_break(0) => self.skip_line(),
                _ => self.skip(),
            }
        }
    }

    /// Whether a plain scalar starts here (the last test of `yaml_parser_fetch_next_token`).
    fn starts_plain(&self) -> bool {
        let c = self.at(0);
        !(self.is_blank_or_end(0) || b"-?:,[]{}#&*!|>'\"%@`".contains(&c))
            || (c == b'-' && !self.is_blank(1))
            || (self.flow == 0 && matches!(c, b'?' | b':') && !self.is_blank_or_end(1))
    }

    /// `yaml_parser_scan_plain_scalar`: to `: `, ` #`, a flow indicator (in a flow collection), or
    /// a line indented no more than the enclosing block collection (in the block context).
    fn plain(&mut self) {
        self.save_key();
        self.key_allowed = false;
        let indent = self.indent + 1;
        let mut leading_blanks = false;
        loop {
            if self.column == 0
                && (self.starts_with(b"---") || self.starts_with(b"..."))
                && self.is_blank_or_end(3)
            {
                break;
            }
            if self.at(0) == b'#' {
                break;
            }
            while !self.is_blank_or_end(0) {
                let c = self.at(0);
                // In a flow collection, `:` before a flow indicator is an error for libyaml.
                if c == b':'
                    && (self.is_blank_or_end(1)
                        || (self.flow > 0 && b",?[]{}".contains(&self.at(1))))
                {
                    break;
                }
                if self.flow > 0 && b",[]{}".contains(&c) {
                    break;
                }
                leading_blanks = false;
                self.skip();
            }
            if !(self.is_blank(0) || self.is_break(0)) {
                break;
            }
            while self.is_blank(0) || self.is_break(0) {
                if self.is_blank(0) {
                    self.skip();
                } else {
                    self.skip_line();
                    leading_blanks = true;
                }
            }
            if self.flow == 0 && (self.column as isize) < indent {
                break;
            }
        }
        if leading_blanks {
            self.key_allowed = true;
        }
    }

    /// `yaml_parser_save_simple_key`, for the block context.
    fn save_key(&mut self) {
        if self.flow == 0 && self.key_allowed {
            self.key = Some(Key {
                pos: self.pos,
                line: self.line,
                column: self.column,
            });
        }
    }

    /// `yaml_parser_remove_simple_key`, for the block context.
    fn remove_key(&mut self) {
        if self.flow == 0 {
            self.key = None;
        }
    }

    /// `yaml_parser_roll_indent`: a block collection starts at `column`.
    fn roll(&mut self, column: isize) {
        if self.flow == 0 && self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
        }
    }

    /// `yaml_parser_unroll_indent`: the block collections right of `column` end.
    fn unroll(&mut self, column: isize) {
        if self.flow == 0 {
            while self.indent > column {
                self.indent = self.indents.pop().unwrap_or(-1);
            }
        }
    }

    /// The byte `offset` bytes ahead; 0 past the end (libyaml's buffer ends with a NUL; a NUL in
    /// the text is an error for libyaml's reader, which reads no further).
    fn at(&self, offset: usize) -> u8 {
        self.text.get(self.pos + offset).copied().unwrap_or(0)
    }

    fn starts_with(&self, prefix: &[u8]) -> bool {
        self.text
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(prefix))
    }

    fn is_end(&self, offset: usize) -> bool {
        self.at(offset) == 0
    }

    fn is_blank(&self, offset: usize) -> bool {
        matches!(self.at(offset), b' ' | b'\t')
    }

    /// `IS_BREAK`: CR, LF, and Unicode's NEL, LS and PS.
    fn is_break(&self, offset: usize) -> bool {
        match self.at(offset) {
            b'\r' | b'\n' => true,
            0xC2 => self.at(offset + 1) == 0x85,
            0xE2 => self.at(offset + 1) == 0x80 && matches!(self.at(offset + 2), 0xA8 | 0xA9),
            _ => false,
        }
    }

    fn is_break_or_end(&self, offset: usize) -> bool {
        self.is_break(offset) || self.is_end(offset)
    }

    fn is_blank_or_end(&self, offset: usize) -> bool {
        self.is_blank(offset) || self.is_break_or_end(offset)
    }

    /// `SKIP`: one character.
    fn skip(&mut self) {
        let width = match self.at(0) {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        self.pos = (self.pos + width).min(self.text.len());
        self.column += 1;
    }

    /// `SKIP_LINE`: one line break (CR LF is one).
    fn skip_line(&mut self) {
        let width = match self.at(0) {
            b'\r' if self.at(1) == b'\n' => 2,
            b'\r' | b'\n' => 1,
            0xC2 => 2,
            _ => 3,
        };
        self.pos = (self.pos + width).min(self.text.len());
        self.line += 1;
        self.column = 0;
    }
}

/// `IS_ALPHA`: the characters of anchors, aliases and tag handles.
fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// The characters of a tag (`yaml_parser_scan_tag_uri`); `,`, `[` and `]` only in `!<…>`.
fn is_uri(c: u8, verbatim: bool) -> bool {
    is_alpha(c) || b";/?:@&=+$.%!~*'()".contains(&c) || (verbatim && b",[]".contains(&c))
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::Value;

    use super::*;

    fn library(text: &str) -> Result<Value, serde_yaml_ng::Error> {
        serde_yaml_ng::from_str(text)
    }

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn max_nesting_is_the_librarys_limit() {
        assert!(library(&nested(MAX_NESTING)).is_ok());
        let refused = library(&nested(MAX_NESTING + 1)).expect_err("too deep");
        assert!(
            refused.to_string().starts_with("recursion limit exceeded"),
            "{refused}"
        );
        assert_eq!(check(&nested(MAX_NESTING)), Ok(()));
        assert_eq!(
            check(&nested(MAX_NESTING + 1)),
            Err(TooDeep {
                line: 1,
                column: MAX_NESTING + 1
            })
        );
        // Where the library would have said it (for a body nested by flow collections only).
        let json = format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200));
        let ours = check(&json).expect_err("too deep");
        let theirs = library(&json).expect_err("too deep");
        assert_eq!(
            theirs.to_string(),
            format!("recursion limit exceeded at line 1 column {}", ours.column)
        );
        assert_eq!(
            ours.to_string(),
            "recursion limit exceeded: more than 128 nested flow collections ([ or {) at line 1 column 641"
        );
    }

    /// Bodies in which a deep run of brackets is text (the library reads them), and bodies in which
    /// it opens collections (the library refuses them): the scan must agree with it on each.
    #[test]
    fn brackets_count_only_where_libyaml_starts_a_token() {
        let deep = nested(200);
        let text = [
            "a: \"DEEP\"",
            "a: 'DEEP'",
            "a: 'it''s DEEP'",
            "a: \"say \\\"DEEP\\\" \\\\ DEEP\"",
            "a: \"multi\n  line DEEP\"\nb: 1",
            "# DEEP\na: 1",
            "a: 1 # DEEP",
            "a: 1\n  # DEEP",
            "a: |\n  DEEP\n  more\nb: 1",
            "a: |\n\n  DEEP\nb: 1",
            "a: >-\n  x\n  DEEP\nb: 1",
            "a: |2\n   DEEP\nb: 1",
            "a: |+ # comment\n    DEEP\n\nb: 1",
            "- a: |\n    DEEP\n  b: 1",
            "- - |\n    DEEP",
            "a:\n- |\n  DEEP\n- 1",
            "? |\n  DEEP\n: v",
            "? a\n: |\n DEEP",
            "&x a: |\n  DEEP",
            "a: xDEEP",
            "a: x#DEEP",
            "a: x:DEEP",
            "a: éDEEP",
            "a: !!str xDEEP",
            "a: &n xDEEP",
            "a: hello\n  DEEP\nb: 1",
            "a: it's\n  DEEP",
            "a: x\r\n  DEEP\r\nb: 1",
            "a: x\u{2028}  DEEP",
            "- x\n  DEEP",
            "key:\n  nested: x\n   DEEP",
            "[a, \"DEEP\", 'DEEP', b]",
            "{a: x, b: 'DEEP'}",
            "{\"a\": \"x\\\\ DEEP\"}",
            "[ 'x\\', 'DEEP' ]",
            "%YAML 1.2\n---\na: \"DEEP\"",
            "\u{feff}a: 'DEEP'",
        ];
        for template in text {
            let body = template.replace("DEEP", &deep);
            assert!(library(&body).is_ok(), "{template}: {:?}", library(&body));
            assert_eq!(check(&body), Ok(()), "{template}");
        }
        let structure = [
            "DEEP",
            "a: DEEP",
            "- DEEP",
            "a:\n  - DEEP",
            "a: !!seq DEEP",
            "a: &x DEEP",
            "a:\tDEEP",
            "? DEEP",
            "a: \"x\"\nb: DEEP",
            "a: 'it''s'\nb: DEEP",
            "a: \"multi\n  line\"\nb: DEEP",
            "a: |\n  text\nb: DEEP",
            "a: |+2\n   x\nb: DEEP",
            "- a: |\n    x\n  b: DEEP",
            "- a: |\n  DEEP: v",
            "a: hello\nb: DEEP",
            "a: x\n  y\nb: DEEP",
            "a:\n  b: hello\n  c: DEEP",
            "a: hello # comment\nb: DEEP",
            "a: b\n#c\nd: DEEP",
            "a: 1\r\nb: DEEP",
            "---\nDEEP",
            "a: 1\n---\nDEEP",
            "[a, DEEP]",
            "{\"a\": \"x\\\"\", \"b\": DEEP}",
            "[ 'x\\', DEEP ]",
            "\u{feff}a: DEEP",
        ];
        for template in structure {
            let body = template.replace("DEEP", &deep);
            assert!(library(&body).is_err(), "{template}");
            assert!(check(&body).is_err(), "{template}");
        }
    }

    /// Random documents of YAML's troublesome pieces, some with a run of 150 `[` or `{a: `: the
    /// scan refuses only what the library refuses, and refuses whatever the library found nested
    /// too deep inside such a run (a run is text or structure as a whole: it has no quote, line
    /// break or blank to end a scalar or comment in its middle).
    #[test]
    fn the_scan_agrees_with_the_library_on_generated_documents() {
        const PIECES: &[&str] = &[
            "[",
            "]",
            "{",
            "}",
            ",",
            ":",
            ": ",
            " : ",
            "- ",
            "-",
            "? ",
            "?",
            "\n",
            "\n",
            "\n",
            "\n  ",
            "\n    ",
            "\n\t",
            " ",
            "  ",
            "\t",
            "a",
            "key",
            "x y",
            "é",
            "'",
            "\"",
            "''",
            "\\",
            "\\\"",
            "#",
            " #",
            " # c",
            "|",
            "|-",
            ">+",
            "|2",
            "|0",
            "&a ",
            "*a ",
            "&a",
            "!t ",
            "!",
            "!<t[,]> ",
            "!!str ",
            "---",
            "---\n",
            "\n---\n",
            "\n...\n",
            "%YAML 1.2\n",
            "\r\n",
            "\r",
            "\u{85}",
            "\u{2028}",
            "\u{feff}",
            "%",
            "@",
            "0",
            "\"a\\\nb\"",
            "'it''s'",
        ];
        let runs = ["[".repeat(150), "{a: ".repeat(150)];
        let mut rng = StdRng::seed_from_u64(0x5eed_a991);
        let (mut refused, mut deep_runs) = (0, 0);
        for _ in 0..4000 {
            let mut body = String::new();
            let mut run_spans = Vec::new();
            for _ in 0..rng.random_range(1..60) {
                if rng.random_range(0..25) == 0 {
                    let run = &runs[rng.random_range(0..runs.len())];
                    run_spans.push(body.len()..body.len() + run.len());
                    body.push_str(run);
                } else {
                    body.push_str(PIECES[rng.random_range(0..PIECES.len())]);
                }
            }
            let ours = check(&body);
            let theirs = library(&body);
            if ours.is_err() {
                refused += 1;
                assert!(theirs.is_err(), "refused, but the library reads {body:?}");
            }
            if let Err(error) = &theirs {
                let in_run = error
                    .location()
                    .is_some_and(|at| run_spans.iter().any(|span| span.contains(&at.index())));
                if error.to_string().starts_with("recursion limit exceeded") && in_run {
                    deep_runs += 1;
                    assert!(ours.is_err(), "let through {body:?}: {error}");
                }
            }
        }
        // The generator reaches both cases often.
        assert!(refused > 200 && deep_runs > 100, "{refused} {deep_runs}");
    }

    /// Valid YAML of random shape (block and flow collections, every kind of scalar, comments,
    /// anchors, tags, multi-line scalars), with runs of brackets as text here and there, and now
    /// and then one as a nested value.
    struct Generator {
        rng: StdRng,
        /// Whether a run of brackets was put where it opens collections.
        deep: bool,
    }

    /// Text for quoted and block scalars: YAML's indicators, and sometimes a run of brackets.
    const TEXT: &[&str] = &[
        "x", "word", " ", "[", "]", "{", "}", "#", " #", ": ", ":", "'", "\"", "\\", ",", "é",
        "- ", "? ", "|", ">", "&a", "*a", "!t", "%", "@", "`", "---", "\u{2028}",
    ];
    /// Pieces of plain scalars after their first letter (block context: no `: `, ` #`).
    const PLAIN: &[&str] = &[
        "x", "y", "[", "]", "{", "}", "#", ":x", ",", "é", "'", "\"", "-",
    ];
    const PLAIN_IN_FLOW: &[&str] = &["x", "y", "#", "'", "\"", "é", "-", "!", "&"];

    impl Generator {
        fn chance(&mut self, one_in: u32) -> bool {
            self.rng.random_range(0..one_in) == 0
        }

        fn pick(&mut self, pieces: &[&'static str]) -> &'static str {
            pieces[self.rng.random_range(0..pieces.len())]
        }

        fn run_of_brackets(&mut self) -> String {
            let opening = if self.chance(2) { "[" } else { "{" };
            opening.repeat(self.rng.random_range(130..200))
        }

        fn text(&mut self) -> String {
            let mut text = String::new();
            for _ in 0..self.rng.random_range(0..8) {
                if self.chance(12) {
                    text.push_str(&self.run_of_brackets());
                } else {
                    text.push_str(self.pick(TEXT));
                }
            }
            text
        }

        /// A scalar for a block collection indented `indent` (after its `key:` or `- `), or for a
        /// flow collection (`flow`).
        fn scalar(&mut self, indent: usize, flow: bool) -> String {
            let fold = format!("\n{}", " ".repeat(indent + 1));
            match self.rng.random_range(0..if flow { 3 } else { 4 }) {
                0 => {
                    let mut text = self.text().replace('\'', "''");
                    if self.chance(4) {
                        text.push_str(&fold);
                        text.push_str(&self.text().replace('\'', "''"));
                    }
                    format!("'{text}'")
                }
                1 => {
                    let mut text = self.text().replace('\\', "\\\\").replace('"', "\\\"");
                    if self.chance(4) {
                        text.push_str(if self.chance(2) { "\\\n" } else { "\\n" });
                        text.push_str(&fold);
                    }
                    format!("\"{text}\"")
                }
                2 => {
                    let pieces = if flow { PLAIN_IN_FLOW } else { PLAIN };
                    let mut text = String::from("p");
                    for _ in 0..self.rng.random_range(0..6) {
                        if !flow && self.chance(10) {
                            text.push_str(&self.run_of_brackets());
                        } else if self.chance(5) {
                            text.push(' ');
                            text.push('w');
                        } else if self.chance(8) {
                            // A continuation line.
                            text.push_str(&fold);
                            text.push('w');
                        } else {
                            text.push_str(self.pick(pieces));
                        }
                    }
                    text
                }
                _ => {
                    let header = self.pick(&["|", ">", "|-", ">+", "|2", "| # c"]);
                    let explicit = header.starts_with("|2");
                    let mut lines = String::new();
                    for _ in 0..self.rng.random_range(1..4) {
                        let text = self.text().replace(['\n', '\u{2028}'], " ");
                        let more = if explicit {
                            " ".repeat(self.rng.random_range(0..2))
                        } else {
                            String::new()
                        };
                        if self.chance(5) {
                            lines.push('\n');
                        }
                        lines.push_str(&format!("\n{}{more}x{text}", " ".repeat(indent + 2)));
                    }
                    format!("{header}{lines}")
                }
            }
        }

        fn flow(&mut self, depth: usize, indent: usize) -> String {
            if self.chance(12) {
                self.deep = true;
                return nested(self.rng.random_range(130..180));
            }
            let mapping = self.chance(2);
            let mut items = Vec::new();
            for _ in 0..self.rng.random_range(0..4) {
                let value = if depth < 4 && self.chance(3) {
                    self.flow(depth + 1, indent)
                } else {
                    self.scalar(indent, true)
                };
                items.push(if mapping {
                    format!("{}: {value}", self.scalar(indent, true))
                } else {
                    value
                });
            }
            let separator = if self.chance(3) {
                format!(",\n{}", " ".repeat(indent + 1))
            } else {
                ", ".to_string()
            };
            let (open, close) = if mapping { ("{", "}") } else { ("[", "]") };
            format!("{open}{}{close}", items.join(&separator))
        }

        /// What follows `key:` or `- ` on its line: a value, or a block collection below.
        fn value(&mut self, depth: usize, indent: usize) -> String {
            let kind = self.rng.random_range(0..5);
            if kind == 0 && depth < 5 {
                return format!("\n{}", self.block(depth + 1, indent + 2));
            }
            let (node, scalar) = match kind {
                1 => (self.flow(0, indent), false),
                _ => (self.scalar(indent, false), true),
            };
            let property = match self.rng.random_range(0..6) {
                0 => "&a ",
                1 if scalar => "!!str ",
                _ => "",
            };
            let mut value = format!(" {property}{node}");
            if !value.contains('\n') && self.chance(5) {
                value.push_str(" # ");
                value.push_str(&self.text().replace(['\n', '\u{2028}'], " "));
            }
            value
        }

        fn block(&mut self, depth: usize, indent: usize) -> String {
            let margin = " ".repeat(indent);
            let mapping = depth == 0 || self.chance(2);
            let mut lines = Vec::new();
            for i in 0..self.rng.random_range(1..5) {
                if self.chance(6) {
                    lines.push(format!(
                        "{margin}# {}",
                        self.text().replace(['\n', '\u{2028}'], " ")
                    ));
                }
                let entry = if mapping {
                    let key = match self.rng.random_range(0..3) {
                        0 => format!("'k{i}'"),
                        1 => format!("\"k{i}\""),
                        _ => format!("k{i}"),
                    };
                    if self.chance(6) {
                        // An explicit key: its `:` starts the next line.
                        format!("{margin}? {key}\n{margin}:{}", self.value(depth, indent))
                    } else {
                        format!("{margin}{key}:{}", self.value(depth, indent))
                    }
                } else {
                    format!("{margin}-{}", self.value(depth, indent))
                };
                lines.push(entry);
            }
            lines.join("\n")
        }
    }

    /// Valid documents of every shape: the scan lets through all those the library reads, with
    /// their runs of brackets in scalars and comments, and refuses those with a run nested as a
    /// value, as the library does.
    #[test]
    fn the_scan_agrees_with_the_library_on_generated_valid_documents() {
        let mut generator = Generator {
            rng: StdRng::seed_from_u64(0x9a11_d0c5),
            deep: false,
        };
        let (mut read, mut refused) = (0, 0);
        for _ in 0..3000 {
            generator.deep = false;
            let body = generator.block(0, 0);
            let ours = check(&body);
            match library(&body) {
                Ok(_) => {
                    read += 1;
                    assert!(!generator.deep, "{body}");
                    assert_eq!(ours, Ok(()), "{body}");
                }
                Err(error) if generator.deep => {
                    refused += 1;
                    assert!(ours.is_err(), "{error}: {body}");
                }
                // The generator's own mistakes (rare): nothing to compare.
                Err(_) => {}
            }
        }
        assert!(read > 1500 && refused > 300, "{read} {refused}");
    }

    #[test]
    fn the_scan_is_linear() {
        // A million opening brackets, and as many in a block scalar: read in one pass each.
        let flat = format!("a: |\n  {}\nb: 1", "[".repeat(1_000_000));
        assert_eq!(check(&flat), Ok(()));
        let deep = "{\"a\":".repeat(1_000_000);
        assert_eq!(
            check(&deep),
            Err(TooDeep {
                line: 1,
                column: 5 * MAX_NESTING + 1
            })
        );
        // Deep block nesting is the library's to refuse (linearly): not counted here.
        let block = format!("{}x", "- ".repeat(100_000));
        assert_eq!(check(&block), Ok(()));
    }
}
