//! Tidy checks over the workspace's sources: every module opens with a `//!` line saying its
//! one job.

use crate::common::root;
use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder lists") {
        let path = entry.expect("a source folder entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn every_module_opens_with_a_doc_line() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).expect("the crates list") {
        let src = krate.expect("a crate").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 100, "the sources were found: {} files", files.len());
    let undocumented: Vec<String> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).expect("a source reads").starts_with("//!"))
        .map(|path| path.strip_prefix(root()).unwrap_or(path).display().to_string())
        .collect();
    assert!(undocumented.is_empty(), "modules without a `//!` first line: {undocumented:?}");
}
