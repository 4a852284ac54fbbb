//! Replays the checked-in corpus of every fuzz target (`fuzz/corpus/<target>/`): what `make
//! fuzz` found interesting, and the seeds, stay tested by `make test` without libFuzzer.

use std::path::PathBuf;

#[test]
fn every_corpus_input_holds() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, target) in mcpgw_fuzz::TARGETS {
        let dir = root.join(name);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{name}: no corpus");
        for input in &inputs {
            let data = std::fs::read(input).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name}: {} fails", input.display());
        }
        eprintln!("{name}: {} inputs replayed", inputs.len());
    }
}
