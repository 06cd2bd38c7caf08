//! The repository's Markdown is what it says: every ```yaml and ```json snippet parses with
//! the parsers pap itself uses (serde-saphyr, serde_json; a json block may be NDJSON), and
//! every fence closes where its author meant it to, as a CommonMark parser (pulldown-cmark)
//! reads it. A snippet that is a fragment on purpose (elided with `…`, a template) opts out
//! with `fragment` after its language: ```` ```yaml fragment ````.

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
        match entry.file_type() {
            Ok(t) if t.is_dir() => markdown_files(&path, out),
            Ok(t) if t.is_file() && name.ends_with(".md") => out.push(path),
            _ => {}
        }
    }
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
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
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
