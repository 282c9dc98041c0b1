//! A small, safe Markdown renderer for question bodies, the same on the server and in the browser (so hydration
//! matches and the live modal shows what the question page shows).
//!
//! It builds views, never HTML strings: text always lands in text nodes, so a `<script>` in a body is shown as
//! text, and links keep only `http`, `https`, `mailto` and same-site targets. It covers what agents write in
//! questions: paragraphs, headings, lists, quotes, fenced code, `code`, **strong**, *emphasis* and links.

use leptos::prelude::*;

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
pub fn safe_href(href: &str) -> bool {
    let lower = href.trim().to_ascii_lowercase();
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

fn inline_views(inlines: Vec<Inline>) -> AnyView {
    inlines
        .into_iter()
        .map(|inline| match inline {
            Inline::Text(text) => text.into_any(),
            Inline::Code(code) => view! { <code>{code}</code> }.into_any(),
            Inline::Strong(inner) => view! { <strong>{inline_views(inner)}</strong> }.into_any(),
            Inline::Emphasis(inner) => view! { <em>{inline_views(inner)}</em> }.into_any(),
            Inline::Link { text, href } => {
                view! { <a href=href rel="noopener noreferrer nofollow">{inline_views(text)}</a> }.into_any()
            }
        })
        .collect_view()
        .into_any()
}

/// A Markdown body as views.
#[component]
pub fn Markdown(#[prop(into)] source: String, #[prop(optional, into)] testid: String) -> impl IntoView {
    let blocks = parse_blocks(&source)
        .into_iter()
        .map(|block| match block {
            Block::Heading(1 | 2, text) => view! { <h3>{inline_views(parse_inline(&text))}</h3> }.into_any(),
            Block::Heading(_, text) => view! { <h4>{inline_views(parse_inline(&text))}</h4> }.into_any(),
            Block::Paragraph(text) => view! { <p>{inline_views(parse_inline(&text))}</p> }.into_any(),
            Block::Code(code) => view! { <pre><code>{code}</code></pre> }.into_any(),
            Block::Quote(text) => view! { <blockquote>{inline_views(parse_inline(&text))}</blockquote> }.into_any(),
            Block::List { ordered, items } => {
                let items =
                    items.into_iter().map(|item| view! { <li>{inline_views(parse_inline(&item))}</li> }).collect_view();
                if ordered { view! { <ol>{items}</ol> }.into_any() } else { view! { <ul>{items}</ul> }.into_any() }
            }
        })
        .collect_view();
    view! { <div class="markdown" data-testid=testid>{blocks}</div> }
}

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
    fn javascript_links_are_not_links() {
        assert_eq!(parse_inline("[x](javascript:alert(1))")[0], Inline::Text("x (javascript:alert(1)".into()));
        assert!(matches!(parse_inline("[docs](https://example.com)")[0], Inline::Link { .. }));
        assert!(!safe_href("//evil.example"));
    }
}
