//! `mcpgw-same-answers CLIENT GOT.json WANT.json`: whether two runs of an SDK client's script
//! got the same answers but for ids and times, by the rules the endpoint's tests use
//! (`mcpgw_testkit::clients::differences`). The binding tests of Go, Node and Python run it, so
//! that one rule set judges every client.
//!
//! Exit 0: the same. Exit 1: they differ; stdout names each step that differs, with both
//! answers. Exit 2: bad arguments or a file that is not a JSON object, said on stderr.

use std::process::ExitCode;

use serde_json::Value;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [client, got, want] = args.as_slice() else {
        eprintln!("usage: mcpgw-same-answers CLIENT GOT.json WANT.json");
        return ExitCode::from(2);
    };
    let read = |path: &str| -> Result<Value, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON: {e}"))
    };
    let differ = match (read(got), read(want)) {
        (Ok(got), Ok(want)) => mcpgw_testkit::clients::differences(&got, &want),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    match differ {
        Ok(differ) if differ.is_empty() => ExitCode::SUCCESS,
        Ok(differ) => {
            println!(
                "the {client} client's answers differ from a direct connection's:\n{}",
                differ.join("\n")
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("mcpgw-same-answers: {e}");
            ExitCode::from(2)
        }
    }
}
