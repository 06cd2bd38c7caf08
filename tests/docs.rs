//! The repository's Markdown is what it says: every ```yaml and ```json snippet parses with
//! the parsers pap itself uses (serde-saphyr, serde_json; a json block may be NDJSON), and
//! every fence closes where its author meant it to, as a CommonMark parser (pulldown-cmark)
//! reads it. A snippet that is a fragment on purpose (elided with `…`, a template) opts out
//! with `fragment` after its language: ```` ```yaml fragment ````.
//!
//! The manual is an mdBook (docs/book.toml, docs/src/SUMMARY.md): every relative link of the
//! README and the book resolves, every `#anchor` names a heading as mdBook makes its id, every
//! page is in the summary, and the README stays a front door of at most 150 lines.

use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// Every Markdown file of the repository, outside build output and installed packages.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        // The book's build output (`mdbook build docs`).
        if path.ends_with("docs/book") {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => markdown_files(&path, out),
            Ok(t) if t.is_file() && name.ends_with(".md") => out.push(path),
            _ => {}
        }
    }
}

/// `file` as messages name it: relative to the repository.
fn shown(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// One fenced block: its info string, text, and the line its fence opens on.
struct Block {
    info: String,
    text: String,
    line: usize,
    /// It runs to the end of the file: its closing fence was never recognised.
    unclosed: bool,
}

fn blocks(source: &str) -> Vec<Block> {
    let line_of = |offset: usize| source[..offset].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut open: Option<Block> = None;
    for (event, range) in Parser::new(source).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let closing = source[..range.end].trim_end();
                let fence = source[range.start..].trim_start();
                let marker = if fence.starts_with('~') { "~~~" } else { "```" };
                open = Some(Block {
                    info: info.to_string(),
                    text: String::new(),
                    line: line_of(range.start),
                    unclosed: !closing
                        .lines()
                        .last()
                        .is_some_and(|l| l.trim_start().starts_with(marker))
                        || closing.lines().count() < 2,
                });
            }
            Event::Text(text) => {
                if let Some(b) = open.as_mut() {
                    b.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => found.extend(open.take()),
            _ => {}
        }
    }
    found
}

fn parses_as_yaml(text: &str) -> Result<(), String> {
    // A block may hold several documents (`---`): each must parse.
    for doc in text.split("\n---\n") {
        if doc.trim().is_empty() || doc.lines().all(|l| l.trim_start().starts_with('#')) {
            continue;
        }
        serde_saphyr::from_str::<serde_json::Value>(doc).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn parses_as_json(text: &str) -> Result<(), String> {
    if serde_json::from_str::<serde_json::Value>(text).is_ok() {
        return Ok(());
    }
    // NDJSON: one document per line.
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        serde_json::from_str::<serde_json::Value>(line)
            .map_err(|e| format!("line {}: {e}", n + 1))?;
    }
    Ok(())
}

#[test]
fn every_yaml_and_json_snippet_parses_and_every_fence_closes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    files.sort();
    assert!(files.iter().any(|f| f.ends_with("README.md")), "{files:?}");
    let (mut parsed, mut skipped) = (0, 0);
    let mut wrong = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let name = shown(root, file);
        for b in blocks(&source) {
            let at = format!("{name}:{}", b.line);
            if b.unclosed {
                wrong.push(format!(
                    "{at}: the fence never closes (it runs to the end of the file)"
                ));
                continue;
            }
            // A line inside a block that looks like a fence is one that did not close it
            // (a closing fence with text after it): what follows flips code and prose.
            if let Some(inner) = b
                .text
                .lines()
                .find(|l| l.trim_start().starts_with("```") || l.trim_start().starts_with("~~~"))
            {
                wrong.push(format!(
                    "{at}: a fence inside the block does not close it: {inner:?}"
                ));
                continue;
            }
            let mut words = b.info.split_whitespace();
            let lang = words.next().unwrap_or_default();
            if words.any(|w| w == "fragment") {
                skipped += 1;
                continue;
            }
            let result = match lang {
                "yaml" | "yml" => parses_as_yaml(&b.text),
                "json" => parses_as_json(&b.text),
                _ => continue,
            };
            match result {
                Ok(()) => parsed += 1,
                Err(e) => wrong.push(format!("{at}: this {lang} does not parse: {e}")),
            }
        }
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "docs: {parsed} YAML and JSON snippets parsed, {skipped} fragments skipped, in {} Markdown files",
        files.len()
    );
    assert!(parsed > 0, "no snippet was parsed");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// The book (docs/src, built by mdBook) and the README link to each other's pages and headings.
// mdBook does not check a link or an anchor, so this does: a renamed heading or a moved page
// fails here, at the file and line of each link that broke.

/// The book's sources.
fn book_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src")
}

/// The Markdown extensions mdBook 0.5 parses with (mdbook-markdown's `new_cmark_parser`, with
/// its defaults: smart punctuation, definition lists and admonitions on), so a heading's text
/// here is the text mdBook makes its id from.
fn mdbook_options() -> pulldown_cmark::Options {
    use pulldown_cmark::Options;
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_SMART_PUNCTUATION
        | Options::ENABLE_DEFINITION_LIST
        | Options::ENABLE_GFM
}

/// mdBook's id for a heading's text (`id_from_content` in mdbook-html 0.5, the rule of
/// `normalize_id` in 0.4): trimmed and lowercased; alphanumerics, `-` and `_` kept; each
/// whitespace character becomes `-`; everything else dropped. The text is what the heading
/// shows: a code span's content without its backticks.
fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids of a page's headings (and definition-list terms, which mdBook numbers with them),
/// made unique as mdBook makes them: a repeated id gets `-1`, `-2`, … (`unique_id`). A heading
/// with an explicit `{#id}` keeps it, and mdBook does not count it among the others.
fn page_ids(source: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut used = std::collections::HashSet::new();
    let mut text: Option<String> = None;
    for event in Parser::new_ext(source, mdbook_options()) {
        match event {
            Event::Start(Tag::Heading { id: Some(id), .. }) => {
                ids.push(id.to_string());
            }
            Event::Start(Tag::Heading { id: None, .. } | Tag::DefinitionListTitle) => {
                text = Some(String::new());
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(s) = text.as_mut() {
                    s.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_) | TagEnd::DefinitionListTitle) => {
                if let Some(s) = text.take() {
                    let id = heading_id(&s);
                    let mut unique = id.clone();
                    let mut n = 0;
                    while !used.insert(unique.clone()) {
                        n += 1;
                        unique = format!("{id}-{n}");
                    }
                    ids.push(unique);
                }
            }
            _ => {}
        }
    }
    ids
}

/// Every link and image of a page: (line, destination).
fn links(source: &str) -> Vec<(usize, String)> {
    let line_of = |offset: usize| source[..offset].matches('\n').count() + 1;
    Parser::new_ext(source, mdbook_options())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some((line_of(range.start), dest_url.to_string()))
            }
            _ => None,
        })
        .collect()
}

/// Lexically resolves `..` and `.` in a path (the target need not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with one link of `file` (None when it resolves). A link with a scheme
/// (`https:`, `mailto:`) is not checked: it leaves the repository.
fn broken_link(
    file: &Path,
    dest: &str,
    ids: &mut dyn FnMut(&Path) -> Vec<String>,
) -> Option<String> {
    if dest.is_empty() {
        return Some("an empty link".into());
    }
    let scheme = dest.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    if scheme || dest.starts_with("//") {
        return None;
    }
    let (path, anchor) = match dest.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (dest, None),
    };
    let target = if path.is_empty() {
        file.to_path_buf()
    } else if path.starts_with('/') {
        return Some("an absolute path: write it relative to this file".into());
    } else {
        normalize(&file.parent().unwrap().join(path))
    };
    if !target.exists() {
        return Some(format!("{} does not exist", target.display()));
    }
    let book = book_src();
    if file.starts_with(&book) && !target.starts_with(&book) {
        return Some(format!(
            "{} is outside docs/src, which is all mdBook publishes: name the file in code instead",
            target.display()
        ));
    }
    if let Some(anchor) = anchor {
        if target.extension().is_none_or(|e| e != "md") {
            return Some(format!(
                "an anchor into {}, which is not a Markdown page",
                target.display()
            ));
        }
        if !ids(&target).iter().any(|id| id == anchor) {
            return Some(format!(
                "no heading of {} has the id `{anchor}` (mdBook's ids: lowercase, spaces as `-`, punctuation dropped)",
                target.display()
            ));
        }
    }
    None
}

/// The pages of the book: every Markdown file under docs/src.
fn book_pages() -> Vec<PathBuf> {
    let mut pages = Vec::new();
    markdown_files(&book_src(), &mut pages);
    pages.sort();
    pages
}

#[test]
fn every_internal_link_and_anchor_of_the_readme_and_the_book_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    files.extend(book_pages());
    let mut cache: std::collections::HashMap<PathBuf, Vec<String>> = Default::default();
    let mut ids = |p: &Path| {
        cache
            .entry(p.to_path_buf())
            .or_insert_with(|| page_ids(&std::fs::read_to_string(p).unwrap_or_default()))
            .clone()
    };
    let (mut checked, mut wrong) = (0, Vec::new());
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let name = shown(root, file);
        for (line, dest) in links(&source) {
            checked += 1;
            if let Some(why) = broken_link(file, &dest, &mut ids) {
                let why = why.replace(&format!("{}/", root.display()), "");
                wrong.push(format!("{name}:{line}: the link `{dest}`: {why}"));
            }
        }
    }
    assert!(checked > 100, "only {checked} links found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary_and_every_entry_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = book_src();
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let mut wrong = Vec::new();
    let mut listed = std::collections::BTreeSet::new();
    for (line, dest) in links(&summary) {
        let page = normalize(&src.join(&dest));
        if !page.is_file() {
            wrong.push(format!(
                "docs/src/SUMMARY.md:{line}: `{dest}` does not exist"
            ));
        }
        if !listed.insert(page) {
            wrong.push(format!(
                "docs/src/SUMMARY.md:{line}: `{dest}` is listed twice"
            ));
        }
    }
    for page in book_pages() {
        if page.file_name().is_some_and(|n| n == "SUMMARY.md") {
            continue;
        }
        if !listed.contains(&page) {
            let name = page
                .strip_prefix(root)
                .unwrap_or(&page)
                .display()
                .to_string();
            wrong.push(format!(
                "{name}:1: the page is not in docs/src/SUMMARY.md, so mdBook never builds it"
            ));
        }
    }
    assert!(listed.len() > 10, "{listed:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_readme_is_a_front_door_of_at_most_150_lines() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md:{lines}: the README has {lines} lines, more than 150: the manual goes in docs/src (the book)"
    );
}

#[test]
fn heading_ids_follow_mdbook() {
    // The rule itself, on mdBook's own test cases and this book's tricky headings.
    assert_eq!(
        heading_id("--passes: add more rustdoc passes"),
        "--passes-add-more-rustdoc-passes"
    );
    assert_eq!(heading_id("Über"), "über");
    assert_eq!(heading_id("中文標題 CJK title"), "中文標題-cjk-title");
    assert_eq!(
        heading_id("  Trigger (PAP 0.2 section 4) "),
        "trigger-pap-02-section-4"
    );
    // As a page parses: code spans lose their backticks, colons, dots, slashes and
    // parentheses go, each space is a `-`, and a repeated heading is numbered.
    let page = "# `pap dispatch`\n\
                ## Trigger (PAP 0.2 section 4)\n\
                ## Webhooks: `/v1/ingest/NAME` and `adapters:`\n\
                ## Project config: `pap.yaml` (extension)\n\
                ## HTTP API (`pap serve --listen`)\n\
                ## Examples\n\
                ### Examples\n\
                ## Examples\n\
                ## Rock -- paper\n\
                ## Kept {#my-own}\n\
                ```sh\n# not a heading\n```\n";
    assert_eq!(
        page_ids(page),
        [
            "pap-dispatch",
            "trigger-pap-02-section-4",
            "webhooks-v1ingestname-and-adapters",
            "project-config-papyaml-extension",
            "http-api-pap-serve---listen",
            "examples",
            "examples-1",
            "examples-2",
            // Smart punctuation (on in mdBook 0.5) makes `--` an en dash, which is dropped.
            "rock--paper",
            "my-own",
        ]
    );
}

/// The first cells of the table that follows `marker` in `page`, each cell's backticked names.
fn first_column_after(page: &str, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(book_src().join(page)).unwrap();
    let from = text
        .find(marker)
        .unwrap_or_else(|| panic!("{page}: no `{marker}`"));
    text[from..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|row| row.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The reference's operator table lists the engine's operators, one row each, in order: the
/// list is `manifest::operators::ALL`.
#[test]
fn the_operator_table_is_the_engines_list() {
    let documented = first_column_after("reference/triggers.md", "One row per filter operator");
    let operators: Vec<String> = pap::manifest::operators::names()
        .map(str::to_owned)
        .collect();
    assert_eq!(documented, operators);
}

/// The webhook page's table of built-in adapters lists the engine's presets, one route each,
/// in order: the list is `adapter::presets::ALL`.
#[test]
fn the_built_in_adapter_table_is_the_engines_list() {
    let documented = first_column_after("how-to/webhooks.md", "built in and answer");
    let routes: Vec<String> = pap::adapter::presets::names()
        .map(|name| format!("/v1/ingest/{name}"))
        .collect();
    assert_eq!(documented, routes);
}
