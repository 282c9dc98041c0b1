//! A small, safe Markdown renderer for question bodies, the same on the server and in the browser (so hydration
//! matches and the live modal shows what the question page shows).
//!
//! Every piece of the source's text is HTML-escaped before it is placed between the few tags the renderer writes
//! itself, so a `<script>` in a body is shown as text; links keep only `http`, `https`, `mailto` and same-site
//! targets. (An HTML string rather than views keeps the browser bundle small.) It covers what agents write in
//! questions: paragraphs, headings, lists, quotes, fenced code, `code`, **strong**, *emphasis* and links.

/// A block of a Markdown document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Heading(u8, String),
    Paragraph(String),
    Code(String),
    Quote(String),
    List { ordered: bool, items: Vec<String> },
}

/// A piece of inline text.
#[derive(Debug, Clone, PartialEq)]
pub enum Inline {
    Text(String),
    Code(String),
    Strong(Vec<Inline>),
    Emphasis(Vec<Inline>),
    Link { text: Vec<Inline>, href: String },
}

fn list_item(line: &str) -> Option<(bool, &str)> {
    let trimmed = line.trim_start();
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = trimmed.strip_prefix(bullet) {
            return Some((false, rest));
        }
    }
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        let rest = &trimmed[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some((true, rest));
        }
    }
    None
}

/// Splits a document into blocks.
pub fn parse_blocks(source: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = source.lines().peekable();
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, blocks: &mut Vec<Block>| {
        if !paragraph.is_empty() {
            blocks.push(Block::Paragraph(paragraph.join("\n")));
            paragraph.clear();
        }
    };
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut paragraph, &mut blocks);
            let fence = &trimmed[..3];
            let mut code = Vec::new();
            for inner in lines.by_ref() {
                if inner.trim_start().starts_with(fence) {
                    break;
                }
                code.push(inner);
            }
            blocks.push(Block::Code(code.join("\n")));
        } else if trimmed.is_empty() {
            flush(&mut paragraph, &mut blocks);
        } else if let Some(level) = heading_level(trimmed) {
            flush(&mut paragraph, &mut blocks);
            blocks.push(Block::Heading(level, trimmed[level as usize..].trim().trim_end_matches('#').trim().into()));
        } else if let Some(rest) = trimmed.strip_prefix('>') {
            flush(&mut paragraph, &mut blocks);
            let mut quote = vec![rest.trim_start()];
            while let Some(next) = lines.peek().and_then(|l| l.trim_start().strip_prefix('>')) {
                quote.push(next.trim_start());
                lines.next();
            }
            blocks.push(Block::Quote(quote.join("\n")));
        } else if let Some((ordered, first)) = list_item(line) {
            flush(&mut paragraph, &mut blocks);
            let mut items = vec![first.to_owned()];
            while let Some(next) = lines.peek() {
                if let Some((_, item)) = list_item(next) {
                    items.push(item.to_owned());
                } else if next.starts_with("  ") && !next.trim().is_empty() {
                    if let Some(last) = items.last_mut() {
                        last.push(' ');
                        last.push_str(next.trim());
                    }
                } else {
                    break;
                }
                lines.next();
            }
            blocks.push(Block::List { ordered, items });
        } else {
            paragraph.push(line);
        }
    }
    flush(&mut paragraph, &mut blocks);
    blocks
}

fn heading_level(line: &str) -> Option<u8> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    ((1..=6).contains(&hashes) && line[hashes..].starts_with(' ')).then_some(hashes as u8)
}

/// Whether a link target is safe to follow: web and mail links, and same-site paths (not `//host`).
///
/// Read as a browser reads it: tabs and line breaks dropped, `\` taken as `/`, so that `/\host` and `/<tab>/host`
/// count as the other host they lead to.
pub fn safe_href(href: &str) -> bool {
    let lower: String = href
        .trim()
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .map(|c| if c == '\\' { '/' } else { c.to_ascii_lowercase() })
        .collect();
    lower.starts_with("https://")
        || lower.starts_with("http://")
        || lower.starts_with("mailto:")
        || (lower.starts_with('/') && !lower.starts_with("//"))
        || lower.starts_with('#')
}

/// Parses inline markup.
pub fn parse_inline(text: &str) -> Vec<Inline> {
    let mut out = Vec::new();
    let mut plain = String::new();
    let mut rest = text;
    let push_plain = |plain: &mut String, out: &mut Vec<Inline>| {
        if !plain.is_empty() {
            out.push(Inline::Text(std::mem::take(plain)));
        }
    };
    while let Some(c) = rest.chars().next() {
        let after = &rest[c.len_utf8()..];
        let parsed: Option<(Inline, &str)> = match c {
            '`' => after.find('`').map(|end| (Inline::Code(after[..end].into()), &after[end + 1..])),
            '*' | '_' if after.starts_with(c) => {
                let marker = if c == '*' { "**" } else { "__" };
                let inner = &after[1..];
                inner
                    .find(marker)
                    .filter(|end| *end > 0)
                    .map(|end| (Inline::Strong(parse_inline(&inner[..end])), &inner[end + 2..]))
            }
            '*' | '_' => after
                .find(c)
                .filter(|end| *end > 0 && !after.starts_with(' '))
                .map(|end| (Inline::Emphasis(parse_inline(&after[..end])), &after[end + 1..])),
            '[' => after.find("](").and_then(|mid| {
                let target = &after[mid + 2..];
                target.find(')').map(|end| {
                    let href = target[..end].trim().to_owned();
                    let label = parse_inline(&after[..mid]);
                    let inline = if safe_href(&href) {
                        Inline::Link { text: label, href }
                    } else {
                        Inline::Text(format!("{} ({href})", &after[..mid]))
                    };
                    (inline, &target[end + 1..])
                })
            }),
            _ => None,
        };
        match parsed {
            Some((inline, remaining)) => {
                push_plain(&mut plain, &mut out);
                out.push(inline);
                rest = remaining;
            }
            None => {
                plain.push(c);
                rest = after;
            }
        }
    }
    push_plain(&mut plain, &mut out);
    out
}

/// Escapes text for HTML content and attribute values.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn inline_html(out: &mut String, inlines: &[Inline]) {
    for inline in inlines {
        match inline {
            Inline::Text(text) => escape_into(out, text),
            Inline::Code(code) => {
                out.push_str("<code>");
                escape_into(out, code);
                out.push_str("</code>");
            }
            Inline::Strong(inner) => {
                out.push_str("<strong>");
                inline_html(out, inner);
                out.push_str("</strong>");
            }
            Inline::Emphasis(inner) => {
                out.push_str("<em>");
                inline_html(out, inner);
                out.push_str("</em>");
            }
            Inline::Link { text, href } => {
                out.push_str("<a rel=\"noopener noreferrer nofollow\" href=\"");
                escape_into(out, href);
                out.push_str("\">");
                inline_html(out, text);
                out.push_str("</a>");
            }
        }
    }
}

/// Renders a Markdown document to HTML. Every piece of the source's text is escaped, so the result holds only the
/// tags this function writes itself, and links only targets [`safe_href`] accepts.
pub fn to_html(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + source.len() / 4);
    let wrap = |out: &mut String, tag: &str, text: &str| {
        out.push_str(&format!("<{tag}>"));
        inline_html(out, &parse_inline(text));
        out.push_str(&format!("</{tag}>"));
    };
    for block in parse_blocks(source) {
        match block {
            Block::Heading(1 | 2, text) => wrap(&mut out, "h3", &text),
            Block::Heading(_, text) => wrap(&mut out, "h4", &text),
            Block::Paragraph(text) => wrap(&mut out, "p", &text),
            Block::Quote(text) => wrap(&mut out, "blockquote", &text),
            Block::Code(code) => {
                // A code block wider than its column scrolls, and a box that scrolls must be reachable by keyboard.
                out.push_str("<pre tabindex=\"0\"><code>");
                escape_into(&mut out, &code);
                out.push_str("</code></pre>");
            }
            Block::List { ordered, items } => {
                let tag = if ordered { "ol" } else { "ul" };
                out.push_str(&format!("<{tag}>"));
                for item in items {
                    wrap(&mut out, "li", &item);
                }
                out.push_str(&format!("</{tag}>"));
            }
        }
    }
    out
}

/// A Markdown body.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_split_into_headings_lists_code_and_paragraphs() {
        let doc = "# Plan\n\nFirst line\nsecond line\n\n- one\n- two\n\n```\nrm -rf /tmp/x\n```\n> careful";
        assert_eq!(
            parse_blocks(doc),
            vec![
                Block::Heading(1, "Plan".into()),
                Block::Paragraph("First line\nsecond line".into()),
                Block::List { ordered: false, items: vec!["one".into(), "two".into()] },
                Block::Code("rm -rf /tmp/x".into()),
                Block::Quote("careful".into()),
            ]
        );
    }

    #[test]
    fn inline_markup_is_parsed_and_html_stays_text() {
        assert_eq!(
            parse_inline("run `ls` **now** <script>x</script>"),
            vec![
                Inline::Text("run ".into()),
                Inline::Code("ls".into()),
                Inline::Text(" ".into()),
                Inline::Strong(vec![Inline::Text("now".into())]),
                Inline::Text(" <script>x</script>".into()),
            ]
        );
    }

    #[test]
    fn the_html_escapes_every_piece_of_text() {
        let html = to_html("# T <b>\n\n**x** <img src=x onerror=alert(1)> [a\"](https://e.example/?q=\"x\")");
        assert_eq!(
            html,
            "<h3>T &lt;b&gt;</h3><p><strong>x</strong> &lt;img src=x onerror=alert(1)&gt; \
             <a rel=\"noopener noreferrer nofollow\" href=\"https://e.example/?q=&quot;x&quot;\">a&quot;</a></p>"
        );
        assert_eq!(to_html("```\n<script>\n```"), "<pre tabindex=\"0\"><code>&lt;script&gt;</code></pre>");
    }

    #[test]
    fn javascript_links_are_not_links() {
        assert_eq!(parse_inline("[x](javascript:alert(1))")[0], Inline::Text("x (javascript:alert(1)".into()));
        assert!(matches!(parse_inline("[docs](https://example.com)")[0], Inline::Link { .. }));
        assert!(!safe_href("//evil.example"));
    }

    #[test]
    fn backslashes_and_tabs_cannot_turn_a_path_into_another_host() {
        for foreign in
            ["/\\evil.example", "\\\\evil.example", "/\t/evil.example", "/\n/evil.example", "\\/evil.example"]
        {
            assert!(!safe_href(foreign), "{foreign:?} was taken for a path of this site");
        }
        assert!(safe_href("/questions/1"));
        assert!(safe_href("HTTPS://example.com"));
    }
}
